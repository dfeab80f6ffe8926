//! The DECODE cases of `shared/cases/` (SQL copied to `tests/cases/`, kept
//! equal by `scripts/sync-cases.py --check`) run on the sandbox master;
//! the binlog range they wrote is extracted twice, from the master's binlog
//! files and from the live stream, and:
//! - both readings give the same transactions, value for value;
//! - replaying the decoded row changes gives exactly the rows the master
//!   holds (compared as MySQL prints them, with ENUM/SET/BIT as numbers
//!   and floats bit for bit), and the case's expected rows where the
//!   decoded images alone cannot be replayed (MINIMAL images, statements);
//! - the FULL-image cases run twice, with the master's
//!   `binlog_row_metadata` at FULL and at NO_LOG (MariaDB's default; no
//!   names, signedness or charsets in the binlog): the NO_LOG reading,
//!   completed from the master's column definitions as the applier
//!   completes it from the replica's (`applier::columns`), binds exactly
//!   the parameters the FULL reading binds, row for row.
//!
//! Each case's schema names are replaced by names of the test's own. Cases
//! that change global settings (checksum, compression) make the tests of
//! this file take one lock and run one at a time.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use shardrep::config::{FilesSourceConfig, LiveSourceConfig, Secret, SourceEndpoint};
use shardrep::event::{column_type, Change, RowKind, Transaction, Value};
use shardrep::extractor::live::{master_status, LiveOptions};
use shardrep::extractor::reader::{ExtractStart, Extractor};
use shardrep::inspect::{fsp_of, value_text};
use shardrep::position::{BinlogPosition, GtidPos, Seqno};

use common::row_metadata::RowMetadata;
use common::service::{case_sql, replace_word, server_id};
use common::{
    quote_ident, sandbox, unique_schema, wait_binlog_checkpoint_settled, Sandbox, Server,
};

static MASTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn live_endpoint(sb: &Sandbox) -> SourceEndpoint {
    SourceEndpoint::Live(LiveSourceConfig {
        host: sb.host.clone(),
        port: sb.port(Server::Master),
        user: sb.user.clone(),
        password: Secret::new(sb.password.clone()),
        server_id: server_id(),
        heartbeat_period_ms: 500,
        connect_timeout_ms: 10_000,
        reconnect_max_backoff_ms: 1_000,
    })
}

fn files_endpoint(sb: &Sandbox) -> SourceEndpoint {
    SourceEndpoint::Files(FilesSourceConfig {
        binlog_dir: sb.dir.join("master").join("binlog"),
        binlog_index: None,
    })
}

fn live_options(sb: &Sandbox) -> LiveOptions {
    match live_endpoint(sb) {
        SourceEndpoint::Live(l) => LiveOptions::from_config(&l),
        SourceEndpoint::Files(_) => unreachable!(),
    }
}

/// A point in the master's binlog: the end of the binlog when it was read,
/// and the mark transaction written just before it (see [`position`]).
#[derive(Clone)]
struct End {
    position: BinlogPosition,
    mark: shardrep::position::Gtid,
}

/// Reads transactions from `endpoint` starting at `start` until the mark
/// transaction of `end` (or one ending at or after its position); keeps
/// those whose shard or tables touch `schemas`.
async fn extract_range(
    endpoint: &SourceEndpoint,
    start: ExtractStart,
    end: &End,
    schemas: &[String],
) -> Vec<Transaction> {
    let mut extractor = Extractor::open(endpoint, start, Seqno(0), true).expect("open source");
    let mut out = Vec::new();
    let read = async {
        loop {
            let txn = extractor
                .next_transaction()
                .await
                .expect("extract")
                .expect("a following source does not end");
            // The mark is a transaction, so it is always read: the end does
            // not depend on which events (checkpoints, rotations) follow it.
            let done = txn.gtid == Some(end.mark) || txn.end_position >= end.position;
            let ours = schemas.contains(&txn.shard)
                || txn.tables.iter().any(|t| schemas.contains(&t.schema))
                || txn.changes.iter().any(|c| match c {
                    Change::Statement(s) => {
                        let sql = String::from_utf8_lossy(&s.sql);
                        schemas.iter().any(|n| sql.contains(n.as_str()))
                            || s.default_schema
                                .as_ref()
                                .is_some_and(|d| schemas.contains(d))
                    }
                    _ => false,
                });
            if ours {
                out.push(txn);
            }
            if done {
                break;
            }
        }
    };
    // A guard against a hang, not a timing: the mark is in the binlog.
    tokio::time::timeout(Duration::from_secs(600), read)
        .await
        .expect("extraction reached the mark transaction");
    out
}

/// Master position now: writes a mark transaction (in `t_extract_mark`,
/// which no case reads), waits until the binlog checkpoint has settled
/// (see [`wait_binlog_checkpoint_settled`]) and reads the position. The
/// mark lets a reader stop at a transaction it will certainly see.
async fn position(sb: &Sandbox) -> (End, GtidPos) {
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(
            "CREATE DATABASE IF NOT EXISTS t_extract_mark; \
             CREATE TABLE IF NOT EXISTS t_extract_mark.m (id INT AUTO_INCREMENT PRIMARY KEY); \
             INSERT INTO t_extract_mark.m VALUES ()",
        )
        .await
        .expect("the mark transaction");
    let mark: String = master
        .query_first("SELECT @@last_gtid")
        .await
        .expect("@@last_gtid")
        .expect("a row");
    let mark = mark.parse().expect("the mark's GTID");
    wait_binlog_checkpoint_settled(&mut master).await;
    let (position, gtid) = master_status(&live_options(sb))
        .await
        .expect("master status");
    (End { position, mark }, gtid)
}

/// Runs `sql` on the master and extracts what it wrote from files and from
/// the live stream; asserts both readings are equal and returns them.
async fn run_case(sb: &Sandbox, sql: &str, schemas: &[String]) -> Vec<Transaction> {
    let (start, _) = position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(sql)
        .await
        .expect("case SQL on the master");
    drop(master);
    let (end, _) = position(sb).await;
    let from_files = extract_range(
        &files_endpoint(sb),
        ExtractStart::File(start.position.clone()),
        &end,
        schemas,
    )
    .await;
    let from_live = extract_range(
        &live_endpoint(sb),
        ExtractStart::File(start.position),
        &end,
        schemas,
    )
    .await;
    assert!(
        !from_files.is_empty(),
        "no transaction of {schemas:?} was extracted"
    );
    assert_eq!(
        from_files.len(),
        from_live.len(),
        "files and live give different transaction counts"
    );
    for (f, l) in from_files.iter().zip(&from_live) {
        assert_eq!(
            f, l,
            "files and live decode transaction {} differently",
            f.seqno
        );
    }
    from_files
}

type Cell = Option<Vec<u8>>;

/// A decoded value as the master prints it in a `SELECT` with `SET NAMES
/// binary`, `time_zone = '+00:00'`, ENUM/SET/BIT selected as `col+0`, and
/// floats in `{:e}` form.
fn cell(value: &Value, column: &shardrep::event::ColumnInfo) -> Cell {
    Some(match value {
        Value::Null => return None,
        Value::Bytes(b) => b.clone(),
        Value::Float(f) => format!("{f:e}").into_bytes(),
        Value::Double(d) => format!("{d:e}").into_bytes(),
        Value::Enum(v) => v.to_string().into_bytes(),
        Value::Set(v) | Value::Bit(v) => v.to_string().into_bytes(),
        other => value_text(other, fsp_of(column)).into_bytes(),
    })
}

/// Replays the row changes of `txns` into in-memory tables keyed by
/// (schema, table); rows are matched by their full before image.
fn replay(txns: &[Transaction]) -> HashMap<(String, String), Vec<Vec<Cell>>> {
    let mut tables: HashMap<(String, String), Vec<Vec<Cell>>> = HashMap::new();
    for txn in txns {
        for change in &txn.changes {
            let Change::Rows(rows) = change else { continue };
            let info = txn.table_of(rows);
            let rows_of = tables
                .entry((info.schema.clone(), info.table.clone()))
                .or_default();
            for pair in &rows.rows {
                let image_cells = |image: &shardrep::event::RowImage| -> Vec<(usize, Cell)> {
                    image
                        .columns
                        .iter()
                        .zip(&image.values)
                        .map(|(&i, v)| (i as usize, cell(v, &info.columns[i as usize])))
                        .collect()
                };
                let find = |rows_of: &Vec<Vec<Cell>>, before: &[(usize, Cell)]| {
                    rows_of
                        .iter()
                        .position(|row| before.iter().all(|(i, c)| &row[*i] == c))
                        .unwrap_or_else(|| {
                            panic!(
                                "seqno {}: no row of {}.{} matches the before image {before:?}",
                                txn.seqno, info.schema, info.table
                            )
                        })
                };
                match rows.kind {
                    RowKind::Insert => {
                        let mut row = vec![None; info.columns.len()];
                        for (i, c) in image_cells(pair.after.as_ref().expect("after image")) {
                            row[i] = c;
                        }
                        rows_of.push(row);
                    }
                    RowKind::Update => {
                        let at = find(rows_of, &image_cells(pair.before.as_ref().expect("before")));
                        for (i, c) in image_cells(pair.after.as_ref().expect("after image")) {
                            rows_of[at][i] = c;
                        }
                    }
                    RowKind::Delete => {
                        let at = find(rows_of, &image_cells(pair.before.as_ref().expect("before")));
                        rows_of.remove(at);
                    }
                }
            }
        }
    }
    for rows in tables.values_mut() {
        rows.sort();
    }
    tables
}

/// The master's rows of `schema.table`, as [`cell`] prints decoded values.
async fn master_rows(sb: &Sandbox, schema: &str, table: &str) -> Vec<Vec<Cell>> {
    let mut conn = sb.connect(Server::Master).await;
    conn.query_drop("SET NAMES binary, time_zone = '+00:00'")
        .await
        .unwrap();
    let columns: Vec<(String, String)> = conn
        .exec(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        .await
        .unwrap();
    let exprs: Vec<String> = columns
        .iter()
        .map(|(name, ty)| match ty.as_str() {
            "enum" | "set" | "bit" => format!("{}+0", quote_ident(name)),
            // Their binary form, as the binlog carries them.
            "uuid" | "inet6" => format!("CAST({} AS BINARY(16))", quote_ident(name)),
            _ => quote_ident(name),
        })
        .collect();
    let sql = format!(
        "SELECT {} FROM {}.{}",
        exprs.join(", "),
        quote_ident(schema),
        quote_ident(table)
    );
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.unwrap();
    let mut out: Vec<Vec<Cell>> = rows
        .into_iter()
        .map(|row| {
            row.unwrap()
                .into_iter()
                .zip(&columns)
                .map(|(v, (_, ty))| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(match ty.as_str() {
                        "float" => {
                            let f: f32 = std::str::from_utf8(&b).unwrap().parse().unwrap();
                            format!("{f:e}").into_bytes()
                        }
                        "double" => {
                            let d: f64 = std::str::from_utf8(&b).unwrap().parse().unwrap();
                            format!("{d:e}").into_bytes()
                        }
                        _ => b,
                    }),
                    other => panic!("text protocol gave {other:?}"),
                })
                .collect()
        })
        .collect();
    out.sort();
    out
}

/// Replays `txns` and asserts every table of `schemas` equals the master's.
async fn assert_replay_equals_master(sb: &Sandbox, txns: &[Transaction], schemas: &[String]) {
    let replayed = replay(txns);
    let mut conn = sb.connect(Server::Master).await;
    let mut checked = 0;
    for schema in schemas {
        let tables: Vec<String> = conn
            .exec(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1",
                (schema,),
            )
            .await
            .unwrap();
        for table in tables {
            let master = master_rows(sb, schema, &table).await;
            let ours = replayed
                .get(&(schema.clone(), table.clone()))
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                ours.len(),
                master.len(),
                "{schema}.{table}: row counts differ"
            );
            for (a, b) in ours.iter().zip(&master) {
                assert_eq!(
                    a, b,
                    "{schema}.{table}: decoded row differs from the master's"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no table of {schemas:?} on the master");
}

async fn drop_schemas(sb: &Sandbox, schemas: &[String]) {
    let mut master = sb.connect(Server::Master).await;
    for s in schemas {
        master
            .query_drop(format!("DROP DATABASE IF EXISTS {}", quote_ident(s)))
            .await
            .unwrap();
    }
}

/// Runs a FULL-image case end to end with the master at
/// `binlog_row_metadata=FULL`: SQL, both extractions, replay equal to the
/// master; then again at NO_LOG, whose parameters must equal FULL's (see
/// [`assert_binds_like`]). Returns the FULL transactions for further
/// checks.
async fn full_image_case(case: &str, schema_names: &[&str]) -> (Vec<Transaction>, Vec<String>) {
    under_full_and_no_log(case, schema_names, |renames| case_sql(case, renames)).await
}

/// [`full_image_case`] for any SQL: `sql` gets the `(name, unique name)`
/// pairs of `schema_names`.
async fn under_full_and_no_log(
    label: &str,
    schema_names: &[&str],
    sql: impl Fn(&[(&str, &str)]) -> String,
) -> (Vec<Transaction>, Vec<String>) {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut full: Option<(Vec<Transaction>, Vec<String>)> = None;
    for level in ["FULL", "NO_LOG"] {
        let _metadata = RowMetadata::set(sb, level).await;
        let unique: Vec<String> = schema_names
            .iter()
            .map(|s| unique_schema(&format!("{label}_{s}")))
            .collect();
        let renames: Vec<(&str, &str)> = schema_names
            .iter()
            .zip(&unique)
            .map(|(a, b)| (*a, b.as_str()))
            .collect();
        let txns = run_case(sb, &sql(&renames), &unique).await;
        match &full {
            None => assert_replay_equals_master(sb, &txns, &unique).await,
            Some((full_txns, _)) => assert_binds_like(sb, &txns, full_txns).await,
        }
        drop_schemas(sb, &unique).await;
        if full.is_none() {
            full = Some((txns, unique));
        }
    }
    full.expect("the FULL run")
}

/// The parameters the applier binds for every row image of `txns`, per
/// rows event: column indexes and values, with the columns completed from
/// the master's definitions when the binlog lacked metadata.
async fn bound_rows(
    sb: &Sandbox,
    txns: &[Transaction],
) -> Vec<Vec<(Vec<u16>, Vec<mysql_async::Value>)>> {
    use shardrep::applier::columns::{complete, needs_replica_definition, ReplicaColumn};
    let mut master = sb.connect(Server::Master).await;
    let mut out = Vec::new();
    for txn in txns {
        for change in &txn.changes {
            let Change::Rows(rows) = change else { continue };
            let info = txn.table_of(rows);
            let columns = if needs_replica_definition(&info.columns) {
                let definitions: Vec<(String, String, String)> = master
                    .exec(
                        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS \
                         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                        (info.schema.as_str(), info.table.as_str()),
                    )
                    .await
                    .unwrap();
                let replica: Vec<ReplicaColumn> = definitions
                    .iter()
                    .map(|(n, d, t)| ReplicaColumn::from_definition(n, d, t))
                    .collect();
                complete(&info.columns, &replica)
            } else {
                info.columns.clone()
            };
            let mut images = Vec::new();
            for pair in &rows.rows {
                for image in [&pair.before, &pair.after].into_iter().flatten() {
                    let params = image
                        .columns
                        .iter()
                        .zip(&image.values)
                        .map(|(&c, v)| shardrep::applier::sql::to_param(v, &columns[c as usize]))
                        .collect();
                    images.push((image.columns.clone(), params));
                }
            }
            out.push(images);
        }
    }
    out
}

/// Asserts that the row changes of `txns` (read from a NO_LOG binlog, its
/// tables still on the master) bind the same parameters as `full` (the
/// same case read from a FULL binlog), rows event for rows event.
async fn assert_binds_like(sb: &Sandbox, txns: &[Transaction], full: &[Transaction]) {
    assert!(
        txns.iter()
            .flat_map(|t| &t.tables)
            .all(|t| t.columns.iter().all(|c| c.name.is_none())),
        "the NO_LOG binlog carries no column names"
    );
    let nolog = bound_rows(sb, txns).await;
    let full = bound_rows(sb, full).await;
    assert_eq!(nolog.len(), full.len(), "rows events under NO_LOG and FULL");
    for (i, (a, b)) in nolog.iter().zip(&full).enumerate() {
        assert_eq!(a, b, "rows event {i}: NO_LOG binds differently from FULL");
    }
}

/// The values of column `name` in the after images of every insert.
fn inserted(txns: &[Transaction], name: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for txn in txns {
        for change in &txn.changes {
            let Change::Rows(rows) = change else { continue };
            if rows.kind != RowKind::Insert {
                continue;
            }
            let info = txn.table_of(rows);
            let index = info
                .columns
                .iter()
                .position(|c| c.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no column {name}")) as u16;
            for pair in &rows.rows {
                out.push(pair.after.as_ref().unwrap().get(index).unwrap().clone());
            }
        }
    }
    out
}

// B01: DECIMAL keeps every digit and the sign.
#[tokio::test]
async fn decimal_values_keep_every_digit_and_sign() {
    let (txns, _) = full_image_case("B01", &["rt_dec"]).await;
    let dec = |s: &str| Value::Decimal(s.to_string());
    assert_eq!(
        inserted(&txns, "a"),
        vec![
            dec("99999999999999999999999999999999999999"),
            dec("-99999999999999999999999999999999999999"),
            dec("0"),
            dec("-1")
        ]
    );
    assert_eq!(
        inserted(&txns, "c"),
        vec![
            dec("0.99999999999999999999999999999999999999"),
            dec("-0.99999999999999999999999999999999999999"),
            dec("0.00000000000000000000000000000000000000"),
            dec("-0.00000000000000000000000000000000000001")
        ]
    );
    assert_eq!(
        inserted(&txns, "g")[0],
        dec("12345678901234567890123456789012345.123456789012345678901234567890")
    );
}

// B02: negative and fractional TIME.
#[tokio::test]
async fn negative_and_fractional_time_values() {
    let (txns, _) = full_image_case("B02", &["rt_time"]).await;
    let texts: Vec<String> = inserted(&txns, "t2")
        .iter()
        .map(|v| value_text(v, 2))
        .collect();
    assert_eq!(
        texts,
        [
            "-00:00:00.01",
            "-12:34:56.78",
            "00:00:00.00",
            "-16:08:04.01"
        ]
    );
    let texts: Vec<String> = inserted(&txns, "t6")
        .iter()
        .map(|v| value_text(v, 6))
        .collect();
    assert_eq!(
        texts,
        [
            "-838:59:59.000000",
            "-00:00:00.000001",
            "16:08:04.010123",
            "-16:08:04.010123"
        ]
    );
}

// B04: zero and partial-zero dates.
#[tokio::test]
async fn zero_and_partial_zero_dates() {
    let (txns, _) = full_image_case("B04", &["rt_zero"]).await;
    let texts: Vec<String> = inserted(&txns, "dt6")
        .iter()
        .map(|v| value_text(v, 6))
        .collect();
    assert_eq!(
        texts,
        [
            "0000-00-00 00:00:00.000000",
            "2023-05-00 10:00:00.000001",
            "0000-00-00 00:00:00.000001"
        ]
    );
    assert_eq!(
        inserted(&txns, "ts")[0],
        Value::Timestamp {
            seconds: 0,
            micros: 0
        }
    );
}

// B05: YEAR 0000 and the signedness of the column after a YEAR.
#[tokio::test]
async fn year_zero_and_signed_column_after_year() {
    let (txns, _) = full_image_case("B05", &["rt_year"]).await;
    assert_eq!(
        inserted(&txns, "v"),
        vec![
            Value::Year(0),
            Value::Year(1901),
            Value::Year(2155),
            Value::Year(1999),
            Value::Null
        ]
    );
    assert_eq!(
        inserted(&txns, "n"),
        vec![
            Value::Int(8489734),
            Value::Int(-1),
            Value::Int(0),
            Value::Null,
            Value::Int(7)
        ]
    );
}

// B07: ENUM/SET index 0, many SET members, ENUM in the primary key.
#[tokio::test]
async fn enum_and_set_values_by_index() {
    let (txns, _) = full_image_case("B07", &["rt_enum"]).await;
    assert_eq!(
        inserted(&txns, "size"),
        vec![Value::Enum(3), Value::Enum(1), Value::Enum(0), Value::Null]
    );
    assert_eq!(
        inserted(&txns, "flags"),
        vec![Value::Set(261), Value::Set(0), Value::Set(2), Value::Null]
    );
}

// B08: JSON on MariaDB travels as text, byte-exact.
#[tokio::test]
async fn json_on_mariadb_is_byte_exact_text() {
    let (txns, _) = full_image_case("B08", &["rt_json"]).await;
    assert_eq!(inserted(&txns, "doc2")[0], Value::Bytes(b"[]".to_vec()));
}

// B09: unsigned integers.
#[tokio::test]
async fn unsigned_integers_keep_their_values() {
    let (txns, _) = full_image_case("B09", &["rt_uns"]).await;
    assert_eq!(
        inserted(&txns, "b"),
        vec![
            Value::UInt(18446744073709551615),
            Value::UInt(9323372036854775807),
            Value::UInt(9223372036854775808)
        ]
    );
    assert_eq!(
        inserted(&txns, "sb"),
        vec![Value::Int(i64::MIN), Value::Int(i64::MAX), Value::Int(-1)]
    );
    assert_eq!(
        inserted(&txns, "d"),
        vec![
            Value::Double(-0.1),
            Value::Double(f64::MAX),
            Value::Double(4.9e-324)
        ]
    );
}

// B11: row events larger than 16 MiB, and exactly 0xFFFFFF packets.
#[tokio::test]
async fn row_events_larger_than_16_mib() {
    let (txns, _) = full_image_case("B11", &["rt_big"]).await;
    let payloads = inserted(&txns, "payload");
    let lengths: Vec<usize> = payloads
        .iter()
        .map(|v| match v {
            Value::Bytes(b) => b.len(),
            other => panic!("payload is {other:?}"),
        })
        .collect();
    assert_eq!(lengths, [20_971_520, 16_777_175, 16_777_161, 16_777_165]);
}

// Fixed-length strings: BINARY(n), UUID and INET6 lose their trailing zero
// bytes in the binlog and are padded back (by the decoder with FULL
// metadata, from the column definitions with NO_LOG); CHAR(n), in utf8mb4
// too, keeps its text without trailing spaces and is never padded.
#[tokio::test]
async fn binary_strings_are_padded_and_char_is_not() {
    let (txns, _) = under_full_and_no_log("bin", &["rt_bin"], |renames| {
        format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.b (id BINARY(8) PRIMARY KEY, \
               c CHAR(4) CHARACTER SET utf8mb4, u UUID, ip INET6, o CHAR(3) CHARACTER SET binary); \
             INSERT INTO {s}.b VALUES (x'0100', 'é  ', '123e4567-e89b-12d3-a456-426614174000', '::', x'00'), \
               (x'', '', NULL, '1::', NULL); \
             UPDATE {s}.b SET c = 'ab' WHERE id = x'0100000000000000'; \
             DELETE FROM {s}.b WHERE id = x'0000000000000000';",
            s = quote_ident(renames[0].1)
        )
    })
    .await;
    let b = |v: &[u8]| Value::Bytes(v.to_vec());
    let mut id = vec![0u8; 8];
    id[0] = 1;
    assert_eq!(inserted(&txns, "id"), [b(&id), b(&[0; 8])]);
    assert_eq!(inserted(&txns, "c"), [b("é".as_bytes()), b(b"")]);
    let uuid = [
        0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40,
        0x00,
    ];
    assert_eq!(inserted(&txns, "u"), [b(&uuid), Value::Null]);
    let mut one = [0u8; 16];
    one[1] = 1;
    assert_eq!(inserted(&txns, "ip"), [b(&[0; 16]), b(&one)]);
    assert_eq!(inserted(&txns, "o"), [b(&[0; 3]), Value::Null]);
}

// B12: MINIMAL and NOBLOB row images: only the logged columns are present.
#[tokio::test]
async fn minimal_and_noblob_images_carry_only_their_columns() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let min = unique_schema("B12_rt_min");
    let noblob = unique_schema("B12_rt_noblob");
    let sql = case_sql("B12", &[("rt_min", &min), ("rt_noblob", &noblob)]);
    let schemas = vec![min.clone(), noblob.clone()];
    let txns = run_case(sb, &sql, &schemas).await;
    // The MINIMAL insert carries only id and c5; its update only the key
    // in the before image and the changed column in the after image.
    let mut images = Vec::new();
    for txn in &txns {
        for change in &txn.changes {
            let Change::Rows(rows) = change else { continue };
            let info = txn.table_of(rows);
            for pair in &rows.rows {
                images.push((
                    info.table.clone(),
                    rows.kind,
                    pair.before.as_ref().map(|i| i.columns.clone()),
                    pair.after.as_ref().map(|i| i.columns.clone()),
                ));
            }
        }
    }
    let full: Vec<u16> = (0..12).collect();
    let expected = vec![
        ("m".to_string(), RowKind::Insert, None, Some(full.clone())),
        ("m".to_string(), RowKind::Insert, None, Some(full.clone())),
        (
            "m".to_string(),
            RowKind::Update,
            Some(vec![0]),
            Some(vec![9]),
        ),
        (
            "m".to_string(),
            RowKind::Update,
            Some(vec![0]),
            Some(vec![2, 10]),
        ),
        ("m".to_string(), RowKind::Insert, None, Some(vec![0, 5])),
        (
            "m".to_string(),
            RowKind::Update,
            Some(vec![0]),
            Some(vec![0]),
        ),
        ("m".to_string(), RowKind::Delete, Some(vec![0]), None),
        (
            "nb".to_string(),
            RowKind::Insert,
            None,
            Some(vec![0, 1, 2, 3, 4]),
        ),
        (
            "nb".to_string(),
            RowKind::Insert,
            None,
            Some(vec![0, 1, 2, 3, 4]),
        ),
        // NOBLOB: the before image is the key plus non-blob columns; the
        // after image leaves out the unchanged blobs.
        (
            "nb".to_string(),
            RowKind::Update,
            Some(vec![0, 3]),
            Some(vec![0, 3]),
        ),
        (
            "nb".to_string(),
            RowKind::Update,
            Some(vec![0, 3]),
            Some(vec![0, 3]),
        ),
        (
            "nb".to_string(),
            RowKind::Update,
            Some(vec![0, 3]),
            Some(vec![0, 2, 3]),
        ),
        ("nb".to_string(), RowKind::Delete, Some(vec![0, 3]), None),
        ("nb".to_string(), RowKind::Insert, None, Some(vec![0, 3])),
    ];
    assert_eq!(images, expected);
    drop_schemas(sb, &schemas).await;
}

// B14: 251+ columns (packed column count and metadata length).
#[tokio::test]
async fn tables_with_more_than_250_columns() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let schema = unique_schema("B14_rt_wide");
    let mut sql = format!(
        "CREATE DATABASE {s}; USE {s};\nCREATE TABLE w (id INT PRIMARY KEY",
        s = quote_ident(&schema)
    );
    for i in 1..=259 {
        sql.push_str(&format!(", c{i} INT NULL"));
    }
    sql.push_str(");\nINSERT INTO w VALUES (1");
    for i in 1..=259 {
        sql.push_str(&format!(", {i}"));
    }
    sql.push_str(");\nUPDATE w SET c259 = -259, c1 = NULL WHERE id = 1;\n");
    let schemas = vec![schema];
    let txns = run_case(sb, &sql, &schemas).await;
    assert_replay_equals_master(sb, &txns, &schemas).await;
    let info = txns.iter().find_map(|t| t.tables.first()).unwrap();
    assert_eq!(info.columns.len(), 260);
    drop_schemas(sb, &schemas).await;
}

// B15: MariaDB compressed binlog events decode like plain ones.
#[tokio::test]
async fn compressed_events_decode_like_plain_ones() {
    let (txns, _) = full_image_case("B15", &["rt_comp"]).await;
    assert_eq!(
        inserted(&txns, "b"),
        vec![Value::Int(100), Value::Int(200), Value::Int(3)]
    );
}

// B16: checksums on and off across rotations.
#[tokio::test]
async fn checksums_switching_across_rotations() {
    let (txns, _) = full_image_case("B16", &["rt_crc"]).await;
    let files: std::collections::BTreeSet<String> = txns
        .iter()
        .map(|t| t.end_position.file().to_string())
        .collect();
    assert!(files.len() >= 4, "the case rotates three times: {files:?}");
}

// B17: restarting from the file position or from the GTID after any
// transaction gives exactly the transactions after it, once.
#[tokio::test]
async fn restart_from_file_position_or_gtid_gives_each_transaction_once() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let schema = unique_schema("B17");
    let sql = format!(
        "CREATE DATABASE {s}; CREATE TABLE {s}.k (id INT PRIMARY KEY, v INT); \
         INSERT INTO {s}.k VALUES (1, 1); INSERT INTO {s}.k VALUES (2, 2); \
         UPDATE {s}.k SET v = v + 10; DELETE FROM {s}.k WHERE id = 1;",
        s = quote_ident(&schema)
    );
    let schemas = vec![schema.clone()];
    let (_, gtid_before) = position(sb).await;
    let all = run_case(sb, &sql, &schemas).await;
    assert_eq!(all.len(), 6);
    let (end, _) = position(sb).await;
    let middle = &all[2];
    let mut gtid_after = gtid_before.clone();
    for t in &all[..=2] {
        gtid_after.update(t.gtid.expect("MariaDB GTID"));
    }
    let strip =
        |txns: Vec<Transaction>| -> Vec<(Option<shardrep::position::Gtid>, BinlogPosition)> {
            txns.into_iter().map(|t| (t.gtid, t.end_position)).collect()
        };
    let expected = strip(all[3..].to_vec());
    let by_file = extract_range(
        &live_endpoint(sb),
        ExtractStart::File(middle.end_position.clone()),
        &end,
        &schemas,
    )
    .await;
    assert_eq!(strip(by_file), expected);
    let by_files_source = extract_range(
        &files_endpoint(sb),
        ExtractStart::File(middle.end_position.clone()),
        &end,
        &schemas,
    )
    .await;
    assert_eq!(strip(by_files_source), expected);
    let by_gtid = extract_range(
        &live_endpoint(sb),
        ExtractStart::Gtid(gtid_after),
        &end,
        &schemas,
    )
    .await;
    assert_eq!(strip(by_gtid), expected);
    drop_schemas(sb, &schemas).await;
}

// B18: statement events carry their session context; a statement whose
// default schema is not the schema it changes is attributed to no single
// shard, while one that changes its default schema belongs to it.
#[tokio::test]
async fn statement_events_carry_session_context() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let q1 = unique_schema("B18_q1");
    let q2 = unique_schema("B18_q2");
    let sql = case_sql("B18", &[("shard_q1", &q1), ("shard_q2", &q2)]);
    let schemas = vec![q1.clone(), q2.clone()];
    let txns = run_case(sb, &sql, &schemas).await;
    let statements: Vec<(&Transaction, &shardrep::event::Statement)> = txns
        .iter()
        .flat_map(|t| {
            t.changes.iter().filter_map(move |c| match c {
                Change::Statement(s)
                    if s.sql.starts_with(b"INSERT") || s.sql.starts_with(b"UPDATE") =>
                {
                    Some((t, s))
                }
                _ => None,
            })
        })
        .collect();
    assert_eq!(statements.len(), 4, "four statement-format DML statements");
    for (i, (txn, s)) in statements.iter().enumerate() {
        assert_eq!(s.context.timestamp, 1_700_000_000);
        // MariaDB logs the session time zone only with statements that use
        // it (here the INSERTs calling NOW()).
        let uses_time_zone = String::from_utf8_lossy(&s.sql).contains("NOW()");
        assert_eq!(
            s.context.time_zone.as_deref(),
            uses_time_zone.then_some("+02:00")
        );
        assert_eq!(s.default_schema.as_deref(), Some(q1.as_str()));
        // `USE q1; INSERT INTO a ...` changes q1: shard q1.
        // `USE q1; UPDATE q2.b ...` / `INSERT INTO q2.b ...`: the default
        // schema is not the changed one: #UNKNOWN (serialized).
        let expected = if i < 2 {
            q1.as_str()
        } else {
            shardrep::event::UNKNOWN_SHARD
        };
        assert_eq!(
            txn.shard,
            expected,
            "statement {i}: {:?}",
            String::from_utf8_lossy(&s.sql)
        );
    }
    assert_eq!(statements[0].1.context.insert_id, Some(1));
    assert_eq!(statements[1].1.context.insert_id, Some(2));
    assert_eq!(statements[1].1.context.last_insert_id, Some(1));
    let var = &statements[3].1.context.user_vars;
    assert_eq!(var.len(), 1);
    assert_eq!(var[0].name, "x");
    drop_schemas(sb, &schemas).await;
}

#[test]
fn case_sql_copies_match_shared_cases() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cases");
    if !shared.is_dir() {
        eprintln!("{} not present: nothing to compare", shared.display());
        return;
    }
    let status = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/sync-cases.py"
        ))
        .arg("--check")
        .status()
        .expect("python3");
    assert!(
        status.success(),
        "tests/cases/ differs from shared/cases: run scripts/sync-cases.py"
    );
}

#[test]
fn words_are_replaced_whole() {
    assert_eq!(
        replace_word("USE rt_min; rt_minimal rt_min.m", "rt_min", "X"),
        "USE X; rt_minimal X.m"
    );
}

// Keep the column-type table in use for readers of this file: the B09
// FLOAT column is compared through f32.
#[test]
fn float_columns_compare_bit_for_bit() {
    let col = shardrep::event::ColumnInfo {
        column_type: column_type::FLOAT,
        meta: 4,
        nullable: true,
        name: None,
        unsigned: Some(true),
        charset: None,
    };
    assert_eq!(cell(&Value::Float(3.5), &col), Some(b"3.5e0".to_vec()));
}
