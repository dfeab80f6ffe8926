//! Human- and machine-readable rendering of transactions, for `shardrep
//! extract` and `log list` (in the spirit of Tungsten's `thl list`).
//!
//! Values are printed as MySQL prints them: DECIMAL with its exact digits,
//! temporal values with the column's fractional precision (fsp, from the
//! TABLE_MAP metadata of DATETIME2/TIMESTAMP2/TIME2), zero dates as zeros,
//! TIMESTAMP in UTC, strings as text when they are valid UTF-8 without
//! control characters and as `x'hex'` otherwise.

use std::fmt::Write as _;

use serde_json::{json, Map, Value as Json};

use crate::event::{column_type, Change, ColumnInfo, RowImage, RowKind, Transaction, Value};

/// Fractional-second precision (0..=6 digits) of a temporal column: the
/// TABLE_MAP metadata of DATETIME2, TIMESTAMP2 and TIME2; 0 for the old
/// types and anything else.
pub fn fsp_of(column: &ColumnInfo) -> u8 {
    match column.column_type {
        column_type::DATETIME2 | column_type::TIMESTAMP2 | column_type::TIME2 => {
            column.meta.min(6) as u8
        }
        _ => 0,
    }
}

fn push_fraction(out: &mut String, micros: u32, fsp: u8) {
    if fsp > 0 {
        let digits = micros / 10u32.pow(6 - u32::from(fsp));
        let _ = write!(out, ".{:0width$}", digits, width = fsp as usize);
    }
}

/// Civil date (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`, proleptic Gregorian).
pub fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The value as MySQL would print it, without SQL quoting (`NULL` for
/// NULL). `fsp` is the column's fractional precision (see [`fsp_of`]).
pub fn value_text(value: &Value, fsp: u8) -> String {
    let mut out = String::new();
    match value {
        Value::Null => out.push_str("NULL"),
        Value::Int(v) => out.push_str(&v.to_string()),
        Value::UInt(v) => out.push_str(&v.to_string()),
        Value::Float(v) => out.push_str(&v.to_string()),
        Value::Double(v) => out.push_str(&v.to_string()),
        Value::Decimal(s) => out.push_str(s),
        Value::Json(s) => out.push_str(s),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') => {
                out.push_str(s)
            }
            _ => {
                out.push_str("x'");
                for byte in b {
                    let _ = write!(out, "{byte:02x}");
                }
                out.push('\'');
            }
        },
        Value::Date { year, month, day } => {
            let _ = write!(out, "{year:04}-{month:02}-{day:02}");
        }
        Value::DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micros,
        } => {
            let _ = write!(
                out,
                "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}"
            );
            push_fraction(&mut out, *micros, fsp);
        }
        Value::Timestamp { seconds, micros } => {
            if *seconds == 0 && *micros == 0 {
                out.push_str("0000-00-00 00:00:00");
            } else {
                let secs = i64::from(*seconds);
                let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
                let rem = secs.rem_euclid(86_400);
                let _ = write!(
                    out,
                    "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}",
                    rem / 3600,
                    rem % 3600 / 60,
                    rem % 60
                );
            }
            push_fraction(&mut out, *micros, fsp);
        }
        Value::Time {
            negative,
            hours,
            minutes,
            seconds,
            micros,
        } => {
            let sign = if *negative { "-" } else { "" };
            let _ = write!(out, "{sign}{hours:02}:{minutes:02}:{seconds:02}");
            push_fraction(&mut out, *micros, fsp);
        }
        Value::Year(y) => {
            let _ = write!(out, "{y:04}");
        }
        Value::Bit(v) => {
            let _ = write!(out, "b'{v:b}'");
        }
        Value::Enum(v) => out.push_str(&v.to_string()),
        Value::Set(v) => out.push_str(&v.to_string()),
    }
    out
}

/// A column's display name: its name from the binlog metadata, else `@N`
/// (1-based position, as `thl list` prints it).
pub fn column_label(columns: &[ColumnInfo], index: u16) -> String {
    columns
        .get(index as usize)
        .and_then(|c| c.name.clone())
        .unwrap_or_else(|| format!("@{}", index + 1))
}

fn value_json(value: &Value, fsp: u8) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Int(v) => json!(v),
        Value::UInt(v) => json!(v),
        _ => Json::String(value_text(value, fsp)),
    }
}

fn image_json(image: &RowImage, columns: &[ColumnInfo]) -> Json {
    let mut map = Map::new();
    for (&index, value) in image.columns.iter().zip(&image.values) {
        let fsp = columns.get(index as usize).map_or(0, fsp_of);
        map.insert(column_label(columns, index), value_json(value, fsp));
    }
    Json::Object(map)
}

fn kind_name(kind: RowKind) -> &'static str {
    match kind {
        RowKind::Insert => "insert",
        RowKind::Update => "update",
        RowKind::Delete => "delete",
    }
}

/// One transaction as a JSON object: `seqno`, `gtid`, `server_id`,
/// `commit_id`, `start`, `end` (binlog positions as `file:pos`),
/// `commit_timestamp` (Unix seconds), `shard`, `fragment` (`null`, or
/// `{"index": N, "last": bool}` for a fragment of a large transaction,
/// [`crate::event::Fragment`]), and `changes`, each with a
/// `type` (`insert|update|delete|statement|annotation`) and its rows
/// (`before`/`after` objects keyed by column name) or SQL text.
pub fn transaction_json(txn: &Transaction) -> Json {
    let changes: Vec<Json> = txn
        .changes
        .iter()
        .map(|change| match change {
            Change::Rows(rows) => {
                let table = txn.table_of(rows);
                let images: Vec<Json> = rows
                    .rows
                    .iter()
                    .map(|pair| {
                        let mut row = Map::new();
                        if let Some(b) = &pair.before {
                            row.insert("before".into(), image_json(b, &table.columns));
                        }
                        if let Some(a) = &pair.after {
                            row.insert("after".into(), image_json(a, &table.columns));
                        }
                        Json::Object(row)
                    })
                    .collect();
                json!({
                    "type": kind_name(rows.kind),
                    "schema": table.schema,
                    "table": table.table,
                    "flags": rows.flags,
                    "rows": images,
                })
            }
            Change::Statement(s) => json!({
                "type": "statement",
                "default_schema": s.default_schema,
                "sql": String::from_utf8_lossy(&s.sql),
                "error_code": s.error_code,
                "thread_id": s.thread_id,
                "timestamp": s.context.timestamp,
                "sql_mode": s.context.sql_mode,
                "time_zone": s.context.time_zone,
            }),
            Change::Annotation(sql) => json!({
                "type": "annotation",
                "sql": String::from_utf8_lossy(sql),
            }),
        })
        .collect();
    json!({
        "seqno": txn.seqno.get(),
        "gtid": txn.gtid.map(|g| g.to_string()),
        "server_id": txn.server_id,
        "commit_id": txn.commit_id,
        "start": txn.start_position.to_string(),
        "end": txn.end_position.to_string(),
        "commit_timestamp": txn.commit_timestamp,
        "shard": txn.shard,
        "fragment": txn.fragment.map(|f| json!({"index": f.index, "last": f.last})),
        "changes": changes,
    })
}

/// One transaction as text, `thl list` style: a header with seqno, GTID,
/// positions, time and shard, then one block per change.
pub fn transaction_text(txn: &Transaction) -> String {
    let mut out = String::new();
    let gtid = txn.gtid.map_or_else(|| "-".to_string(), |g| g.to_string());
    let _ = writeln!(out, "SEQ# = {}", txn.seqno);
    let _ = writeln!(out, "- GTID = {gtid}");
    let _ = writeln!(
        out,
        "- EVENTID = {} (starts at {})",
        txn.end_position, txn.start_position
    );
    let _ = writeln!(
        out,
        "- TIME = {} (server_id {}{})",
        value_text(
            &Value::Timestamp {
                seconds: txn.commit_timestamp,
                micros: 0
            },
            0
        ),
        txn.server_id,
        txn.commit_id
            .map_or_else(String::new, |c| format!(", commit_id {c}"))
    );
    let _ = writeln!(out, "- SHARD = {}", txn.shard);
    if let Some(f) = txn.fragment {
        let _ = writeln!(
            out,
            "- FRAGMENT = {} of a large transaction{}",
            f.index,
            if f.last {
                " (its last: it ends at this EVENTID)"
            } else {
                " (more follow at the next seqnos)"
            }
        );
    }
    for change in &txn.changes {
        match change {
            Change::Annotation(sql) => {
                let _ = writeln!(out, "- ANNOTATION = {}", String::from_utf8_lossy(sql));
            }
            Change::Statement(s) => {
                let _ = writeln!(
                    out,
                    "- SQL [schema = {}] = {}",
                    s.default_schema.as_deref().unwrap_or("-"),
                    String::from_utf8_lossy(&s.sql)
                );
            }
            Change::Rows(rows) => {
                let table = txn.table_of(rows);
                let _ = writeln!(
                    out,
                    "- ROWS {} {}.{} ({} rows)",
                    kind_name(rows.kind).to_uppercase(),
                    table.schema,
                    table.table,
                    rows.rows.len()
                );
                for (n, pair) in rows.rows.iter().enumerate() {
                    for (label, image) in [("KEY", &pair.before), ("COL", &pair.after)] {
                        let Some(image) = image else { continue };
                        let _ = write!(out, "  - ROW# = {n} {label}:");
                        for (&index, value) in image.columns.iter().zip(&image.values) {
                            let fsp = table.columns.get(index as usize).map_or(0, fsp_of);
                            let _ = write!(
                                out,
                                " {}={}",
                                column_label(&table.columns, index),
                                value_text(value, fsp)
                            );
                        }
                        out.push('\n');
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporal_values_print_like_mysql() {
        let t = Value::Time {
            negative: true,
            hours: 838,
            minutes: 59,
            seconds: 59,
            micros: 0,
        };
        assert_eq!(value_text(&t, 6), "-838:59:59.000000");
        assert_eq!(value_text(&t, 0), "-838:59:59");
        let t = Value::Time {
            negative: true,
            hours: 0,
            minutes: 0,
            seconds: 0,
            micros: 10_000,
        };
        assert_eq!(value_text(&t, 2), "-00:00:00.01");
        let d = Value::DateTime {
            year: 2023,
            month: 5,
            day: 0,
            hour: 10,
            minute: 0,
            second: 0,
            micros: 1,
        };
        assert_eq!(value_text(&d, 6), "2023-05-00 10:00:00.000001");
        let z = Value::Date {
            year: 0,
            month: 0,
            day: 0,
        };
        assert_eq!(value_text(&z, 0), "0000-00-00");
        assert_eq!(
            value_text(
                &Value::Timestamp {
                    seconds: 1,
                    micros: 0
                },
                0
            ),
            "1970-01-01 00:00:01"
        );
        assert_eq!(
            value_text(
                &Value::Timestamp {
                    seconds: 0,
                    micros: 0
                },
                0
            ),
            "0000-00-00 00:00:00"
        );
        assert_eq!(
            value_text(
                &Value::Timestamp {
                    seconds: 2_147_483_647,
                    micros: 999_999
                },
                6
            ),
            "2038-01-19 03:14:07.999999"
        );
        assert_eq!(value_text(&Value::Year(0), 0), "0000");
    }

    #[test]
    fn civil_dates_from_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn bytes_print_as_text_or_hex() {
        assert_eq!(value_text(&Value::Bytes(b"Zo\xc3\xab".to_vec()), 0), "Zoë");
        assert_eq!(value_text(&Value::Bytes(vec![0, 255]), 0), "x'00ff'");
        assert_eq!(value_text(&Value::Bit(5), 0), "b'101'");
    }
}
