//! Unit tests of [`super`] (`extractor/decode.rs`).

use super::*;
use crate::event::{RowPair, Value};
use crate::extractor::mariadb::{
    FL_ALLOW_PARALLEL, FL_COMPLETED_XA, FL_DDL, FL_GROUP_COMMIT_ID, FL_PREPARED_XA, FL_STANDALONE,
    FL_TRANSACTIONAL,
};
use crate::position::Gtid;

// -- fixtures ------------------------------------------------------------

use crate::extractor::fixtures::{fixture_event, fixture_events};

fn file_name(n: u32) -> String {
    format!("mariadb-bin.{n:06}")
}

/// Decodes files 1..=`files` of a fixture with one decoder.
fn walk_results(dir: &str, files: u32) -> Vec<(RawEvent, Result<BinlogEvent, ExtractError>)> {
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    for n in 1..=files {
        for raw in fixture_events(dir, &file_name(n)) {
            let result = decoder.decode(&raw);
            out.push((raw, result));
        }
    }
    out
}

/// As [`walk_results`], every event must decode; also checks that each
/// event's `log_pos` is its end.
fn walk(dir: &str, files: u32) -> Vec<BinlogEvent> {
    walk_results(dir, files)
        .into_iter()
        .map(|(raw, result)| {
            let event = result.unwrap_or_else(|e| panic!("{dir}: {e}"));
            assert_eq!(
                u64::from(event.header.log_pos),
                raw.position.offset() + raw.bytes.len() as u64,
                "{dir} {}: log_pos",
                raw.position
            );
            assert_eq!(event.position, raw.position);
            event
        })
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn value(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Bytes(b) if b.len() > 20 => {
            let first = b[0];
            if b.iter().all(|&x| x == first) {
                format!("'{}'x{}", char::from(first), b.len())
            } else {
                format!("'{}'", text(b))
            }
        }
        Value::Bytes(b) => format!("'{}'", text(b)),
        Value::Null => "NULL".to_owned(),
        other => format!("{other:?}"),
    }
}

fn image(img: &Option<crate::event::RowImage>) -> String {
    match img {
        None => "-".to_owned(),
        Some(img) => {
            let values: Vec<String> = img.values.iter().map(value).collect();
            format!("({})", values.join(","))
        }
    }
}

fn rows_text(rows: &[RowPair]) -> String {
    rows.iter()
        .map(|r| format!("{}>{}", image(&r.before), image(&r.after)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One line per event, without the values that change when the
/// fixtures are regenerated (header timestamps, xids, table ids).
fn summary(e: &BinlogEvent) -> String {
    let body = match &e.body {
        EventBody::FormatDescription(f) => format!(
            "FDE {} {:?} {} lengths",
            f.server_version,
            f.checksum,
            f.post_header_lengths.len()
        ),
        EventBody::Rotate {
            next_file,
            position,
            artificial,
        } => format!("ROTATE {next_file}:{position} artificial={artificial}"),
        EventBody::Begin => "BEGIN".to_owned(),
        EventBody::Commit => "COMMIT".to_owned(),
        EventBody::Rollback => "ROLLBACK".to_owned(),
        EventBody::Query(s) => format!(
            "QUERY db={} {}",
            s.default_schema.as_deref().unwrap_or("-"),
            text(&s.sql)
        ),
        EventBody::TableMap(t) => format!("TABLE_MAP {}.{}", t.schema, t.table),
        EventBody::Rows {
            kind, flags, rows, ..
        } => format!("ROWS {kind:?} flags={flags} {}", rows_text(rows)),
        EventBody::Xid(_) => "XID".to_owned(),
        EventBody::Intvar { kind, value } => format!("INTVAR {kind}={value}"),
        EventBody::Rand { seed1, seed2 } => format!("RAND {seed1},{seed2}"),
        EventBody::UserVar(v) => format!("USER_VAR {} {:?}", v.name, v.value),
        EventBody::Heartbeat => "HEARTBEAT".to_owned(),
        EventBody::Stop => "STOP".to_owned(),
        EventBody::MariadbGtid {
            gtid,
            commit_id,
            flags,
        } => format!(
            "GTID {gtid} flags={flags}{}",
            if commit_id.is_some() { " cid" } else { "" }
        ),
        EventBody::AnnotateRows(sql) => format!("ANNOTATE {}", text(sql)),
        EventBody::BinlogCheckpoint { file } => format!("CHECKPOINT {file}"),
        EventBody::GtidList(list) => format!(
            "GTID_LIST [{}]",
            list.iter()
                .map(Gtid::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        EventBody::MysqlGtid { uuid, gno } => format!("MYSQL_GTID {uuid}:{gno}"),
        EventBody::XaPrepare { one_phase, xid } => {
            format!("XA_PREPARE {xid} one_phase={one_phase}")
        }
        EventBody::Ignored => format!("IGNORED type {}", e.header.type_code),
    };
    format!("{} {body}", e.position.offset())
}

fn summaries(events: &[BinlogEvent]) -> Vec<String> {
    events.iter().map(summary).collect()
}

fn strip_offset(line: &str) -> &str {
    line.split_once(' ').map_or(line, |(_, rest)| rest)
}

fn at(events: &[BinlogEvent], file: &str, offset: u64) -> BinlogEvent {
    events
        .iter()
        .find(|e| e.position.file() == file && e.position.offset() == offset)
        .unwrap_or_else(|| panic!("no event at {file}:{offset}"))
        .clone()
}

fn statement(e: &BinlogEvent) -> Statement {
    match &e.body {
        EventBody::Query(s) => s.clone(),
        other => panic!("{}: expected a QUERY, found {other:?}", e.position),
    }
}

const SERVER: &str = "10.11.19-MariaDB-0+deb12u1-log";
/// `sql_mode` default of MariaDB 10.11 (STRICT_TRANS_TABLES,
/// ERROR_FOR_DIVISION_BY_ZERO, NO_AUTO_CREATE_USER,
/// NO_ENGINE_SUBSTITUTION).
const DEFAULT_SQL_MODE: u64 = 0x5420_0000;

// -- fixture tests -------------------------------------------------------

/// The row workload with CRC32 checksums: the whole MariaDB event set
/// (B17), standalone DDL GTIDs, a non-transactional COMMIT and a
/// ROLLBACK, every event at its exact position.
#[test]
fn crc32_fixture_decodes_every_event_exactly() {
    let events = walk("crc32", 1);
    let expected = [
        format!("4 FDE {SERVER} Crc32 171 lengths"),
        "256 GTID_LIST []".to_owned(),
        "285 CHECKPOINT mariadb-bin.000001".to_owned(),
        "330 GTID 0-1-1 flags=41".to_owned(),
        "372 QUERY db=fx CREATE DATABASE fx".to_owned(),
        "455 GTID 0-1-2 flags=41".to_owned(),
        "497 QUERY db=- CREATE TABLE fx.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"
            .to_owned(),
        "636 GTID 0-1-3 flags=41".to_owned(),
        "678 QUERY db=- CREATE TABLE fx.m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM"
            .to_owned(),
        "817 GTID 0-1-4 flags=12".to_owned(),
        "859 ANNOTATE INSERT INTO fx.t VALUES (1, 'one'), (2, 'two')".to_owned(),
        "928 TABLE_MAP fx.t".to_owned(),
        "989 ROWS Insert flags=1 ->(1,'one') ->(2,'two')".to_owned(),
        "1040 XID".to_owned(),
        "1071 GTID 0-1-5 flags=12".to_owned(),
        "1113 ANNOTATE UPDATE fx.t SET v = 'uno' WHERE id = 1".to_owned(),
        "1174 TABLE_MAP fx.t".to_owned(),
        "1235 ROWS Update flags=1 (1,'one')>(1,'uno')".to_owned(),
        "1287 XID".to_owned(),
        "1318 GTID 0-1-6 flags=12".to_owned(),
        "1360 ANNOTATE DELETE FROM fx.t WHERE id = 2".to_owned(),
        "1412 TABLE_MAP fx.t".to_owned(),
        "1473 ROWS Delete flags=1 (2,'two')>-".to_owned(),
        "1515 XID".to_owned(),
        "1546 GTID 0-1-7 flags=8".to_owned(),
        "1588 ANNOTATE INSERT INTO fx.m VALUES (1, 'myisam')".to_owned(),
        "1648 TABLE_MAP fx.m".to_owned(),
        "1709 ROWS Insert flags=1 ->(1,'myisam')".to_owned(),
        "1754 COMMIT".to_owned(),
        "1823 GTID 0-1-8 flags=8".to_owned(),
        "1865 QUERY db=- INSERT INTO fx.t VALUES (3, 'gone')".to_owned(),
        "1963 QUERY db=- INSERT INTO fx.m VALUES (2, 'kept')".to_owned(),
        "2061 ROLLBACK".to_owned(),
        "2132 ROTATE mariadb-bin.000002:4 artificial=false".to_owned(),
    ];
    assert_eq!(summaries(&events), expected);
    // Standalone DDL: FL_STANDALONE | FL_ALLOW_PARALLEL | FL_DDL.
    assert_eq!(41, FL_STANDALONE | FL_ALLOW_PARALLEL | FL_DDL);
    assert_eq!(12, FL_TRANSACTIONAL | FL_ALLOW_PARALLEL);
    // The session context of a DDL.
    let ddl = statement(&at(&events, "mariadb-bin.000001", 497));
    assert_eq!(ddl.error_code, 0);
    assert_eq!(ddl.context.sql_mode, Some(DEFAULT_SQL_MODE));
    assert_eq!(ddl.context.flags2, Some(0x0100_0000));
    assert_eq!(ddl.context.charset_client, Some(33));
    assert_eq!(ddl.context.collation_connection, Some(33));
    assert_eq!(ddl.context.collation_server, Some(45));
    assert_eq!(ddl.context.timestamp, ddl_header_timestamp(&events, 497));
    assert!(!ddl.context.foreign_key_checks_off());
}

fn ddl_header_timestamp(events: &[BinlogEvent], offset: u64) -> u32 {
    at(events, "mariadb-bin.000001", offset).header.timestamp
}

/// The same workload with binlog_checksum=NONE decodes to the same
/// events (4 bytes shorter each, the FORMAT_DESCRIPTION excepted).
#[test]
fn none_fixture_matches_the_crc32_one() {
    let crc = walk("crc32", 1);
    let none = walk("none", 1);
    let strip = |events: &[BinlogEvent]| -> Vec<String> {
        summaries(events)
            .iter()
            .map(|s| {
                strip_offset(s)
                    .replace("Crc32", "CHECKSUM")
                    .replace("None", "CHECKSUM")
            })
            .collect()
    };
    assert_eq!(strip(&crc), strip(&none));
    assert_eq!(none.len(), crc.len());
    let EventBody::FormatDescription(f) = &none[0].body else {
        panic!("first event: {:?}", none[0].body)
    };
    assert_eq!(f.checksum, ChecksumAlg::None);
    // The FORMAT_DESCRIPTION keeps its algorithm byte and 4 trailer
    // bytes in both; every other event is 4 bytes shorter.
    for (i, (c, n)) in crc.iter().zip(&none).enumerate() {
        let shrink = if i == 0 { 0 } else { 4 };
        assert_eq!(
            n.header.event_size + shrink,
            c.header.event_size,
            "{}",
            c.position
        );
    }
}

/// B16: the checksum algorithm changes at each rotation (CRC32, NONE,
/// NONE, CRC32) and the decoder follows each file's FORMAT_DESCRIPTION;
/// GTID_LIST is 39 bytes without checksums and 43 with; a clean shutdown
/// writes STOP; rows decode to the case's values.
#[test]
fn b16_checksum_switches_across_rotations() {
    let events = walk("b16", 5);
    let per_file: Vec<(String, ChecksumAlg)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::FormatDescription(f) => Some((e.position.file().to_owned(), f.checksum)),
            _ => None,
        })
        .collect();
    assert_eq!(
        per_file,
        [
            (file_name(1), ChecksumAlg::Crc32),
            (file_name(2), ChecksumAlg::None),
            (file_name(3), ChecksumAlg::None),
            (file_name(4), ChecksumAlg::Crc32),
            (file_name(5), ChecksumAlg::Crc32),
        ]
    );
    let gtid_lists: Vec<(String, u32, String)> = events
        .iter()
        .filter(|e| matches!(e.body, EventBody::GtidList(_)))
        .map(|e| {
            let s = summary(e);
            (
                e.position.file().to_owned(),
                e.header.event_size,
                strip_offset(&s).to_owned(),
            )
        })
        .collect();
    assert_eq!(
        gtid_lists,
        [
            (file_name(1), 29, "GTID_LIST []".to_owned()),
            (file_name(2), 39, "GTID_LIST [0-1-3]".to_owned()),
            (file_name(3), 39, "GTID_LIST [0-1-4]".to_owned()),
            (file_name(4), 43, "GTID_LIST [0-1-5]".to_owned()),
            (file_name(5), 43, "GTID_LIST [0-1-7]".to_owned()),
        ]
    );
    let data: Vec<String> = events
        .iter()
        .filter(|e| {
            matches!(
                e.body,
                EventBody::Rows { .. }
                    | EventBody::Rotate { .. }
                    | EventBody::Stop
                    | EventBody::MariadbGtid { .. }
            )
        })
        .map(|e| format!("{}:{}", e.position.file(), summary(e)))
        .collect();
    assert_eq!(
        data,
        [
            "mariadb-bin.000001:330 GTID 0-1-1 flags=41",
            "mariadb-bin.000001:463 GTID 0-1-2 flags=41",
            "mariadb-bin.000001:633 GTID 0-1-3 flags=12",
            "mariadb-bin.000001:801 ROWS Insert flags=1 ->(1,'crc32-file')",
            "mariadb-bin.000001:881 ROTATE mariadb-bin.000002:4 artificial=false",
            "mariadb-bin.000002:377 GTID 0-1-4 flags=12",
            "mariadb-bin.000002:539 ROWS Insert flags=1 ->(2,'no-checksum-file')",
            "mariadb-bin.000002:617 ROTATE mariadb-bin.000003:4 artificial=false",
            "mariadb-bin.000003:377 GTID 0-1-5 flags=12",
            "mariadb-bin.000003:534 ROWS Insert flags=1 ->(3,'after-flush')",
            "mariadb-bin.000003:607 ROTATE mariadb-bin.000004:4 artificial=false",
            "mariadb-bin.000004:389 GTID 0-1-6 flags=12",
            "mariadb-bin.000004:558 ROWS Insert flags=1 ->(4,'crc32-again')",
            "mariadb-bin.000004:639 GTID 0-1-7 flags=12",
            "mariadb-bin.000004:818 ROWS Update flags=1 \
             (2,'no-checksum-file')>(2,'no-checksum-file!') \
             (3,'after-flush')>(3,'after-flush!')",
            "mariadb-bin.000004:963 STOP",
            "mariadb-bin.000005:344 ROTATE mariadb-bin.000006:4 artificial=false",
        ]
    );
    // STOP is the last event of its file (23 bytes with CRC32).
    let stop = at(&events, "mariadb-bin.000004", 963);
    assert_eq!(stop.header.event_size, 23);
    assert_eq!(stop.header.log_pos, 986);
    // Each file's table map is gone after the next FORMAT_DESCRIPTION.
    let mut decoder = Decoder::new();
    let mut table_id = None;
    for raw in fixture_events("b16", &file_name(1)) {
        if let EventBody::TableMap(t) = decoder.decode(&raw).unwrap().body {
            table_id = Some(t.table_id);
        }
    }
    let table_id = table_id.unwrap();
    assert_eq!(decoder.table(table_id).unwrap().table, "k");
    decoder
        .decode(&fixture_events("b16", &file_name(2))[0])
        .unwrap();
    assert!(decoder.table(table_id).is_none());
    assert_eq!(decoder.format().checksum, ChecksumAlg::None);
}

/// B15: with log_bin_compress=ON the CREATE TABLE is a QUERY_COMPRESSED
/// and the rows events are *_ROWS_COMPRESSED_V1 (166-168); they decode
/// to exactly what the uncompressed run of the same statements gives.
#[test]
fn b15_compressed_events_equal_the_uncompressed_ones() {
    let events = walk("b15", 1);
    let file = "mariadb-bin.000001";
    let compressed_ddl = at(&events, file, 507);
    assert_eq!(
        compressed_ddl.header.type_code,
        event_type::MARIADB_QUERY_COMPRESSED
    );
    let plain_ddl = at(&events, file, 1940);
    assert_eq!(plain_ddl.header.type_code, event_type::QUERY);
    let (c, p) = (statement(&compressed_ddl), statement(&plain_ddl));
    assert_eq!(
        text(&c.sql),
        "CREATE TABLE cz (id INT PRIMARY KEY, b INT, pad VARCHAR(500))"
    );
    assert_eq!(c.sql, p.sql);
    assert_eq!(c.default_schema.as_deref(), Some("rt_comp"));
    assert_eq!(p.default_schema.as_deref(), Some("rt_plain"));
    assert_eq!(c.context.sql_mode, p.context.sql_mode);

    let pairs = [
        (
            859,
            event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1,
            2286,
            event_type::WRITE_ROWS_V1,
        ),
        (
            1136,
            event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V1,
            2952,
            event_type::UPDATE_ROWS_V1,
        ),
        (
            1402,
            event_type::MARIADB_DELETE_ROWS_COMPRESSED_V1,
            4004,
            event_type::DELETE_ROWS_V1,
        ),
        (
            1673,
            event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1,
            4268,
            event_type::WRITE_ROWS_V1,
        ),
    ];
    // The 400-byte pad compresses.
    assert!(
        at(&events, file, 859).header.event_size < at(&events, file, 2286).header.event_size / 4
    );
    let mut texts = Vec::new();
    for (c_off, c_type, p_off, p_type) in pairs {
        let c = at(&events, file, c_off);
        let p = at(&events, file, p_off);
        assert_eq!(c.header.type_code, c_type);
        assert_eq!(p.header.type_code, p_type);
        let (
            EventBody::Rows {
                kind: ck,
                flags: cf,
                rows: cr,
                ..
            },
            EventBody::Rows {
                kind: pk,
                flags: pf,
                rows: pr,
                ..
            },
        ) = (&c.body, &p.body)
        else {
            panic!("{c_off}/{p_off}: not rows events")
        };
        assert_eq!((ck, cf, cr), (pk, pf, pr), "{c_off} vs {p_off}");
        texts.push(summary(&c));
    }
    assert_eq!(
        texts,
        [
            "859 ROWS Insert flags=1 ->(1,100,'p'x400) ->(2,200,'short')",
            "1136 ROWS Update flags=1 (1,100,'p'x400)>(1,888888,'p'x400)",
            "1402 ROWS Delete flags=1 (2,200,'short')>-",
            "1673 ROWS Insert flags=1 ->(3,3,'q'x300)",
        ]
    );
    let schemas: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TableMap(t) => {
                Some(format!("{}:{}.{}", e.position.offset(), t.schema, t.table))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        schemas,
        [
            "787:rt_comp.cz",
            "1064:rt_comp.cz",
            "1330:rt_comp.cz",
            "1601:rt_comp.cz",
            "2213:rt_plain.cz",
            "2879:rt_plain.cz",
            "3931:rt_plain.cz",
            "4195:rt_plain.cz",
        ]
    );
}

/// A v2 compressed rows event (MariaDB types 169-171, which 10.11 does
/// not write) made from the captured v1 one decodes to the same rows.
#[test]
fn v2_compressed_rows_decode_like_v1() {
    let mut decoder = Decoder::new();
    let mut v1_rows = None;
    let mut v2_event = None;
    for raw in fixture_events("b15", "mariadb-bin.000001") {
        if raw.position.offset() == 1136 {
            // UPDATE_ROWS_COMPRESSED_V1 -> UPDATE_ROWS_COMPRESSED (v2):
            // insert an empty extra-data block (length 2) after the
            // table id and flags, fix size and CRC.
            let mut bytes = raw.bytes[..19 + 8].to_vec();
            bytes.extend_from_slice(&[2, 0]);
            bytes.extend_from_slice(&raw.bytes[19 + 8..raw.bytes.len() - 4]);
            bytes[4] = event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V2;
            let size = (bytes.len() + 4) as u32;
            bytes[9..13].copy_from_slice(&size.to_le_bytes());
            let crc = crc32fast::hash(&bytes);
            bytes.extend_from_slice(&crc.to_le_bytes());
            v2_event = Some(RawEvent {
                position: raw.position.clone(),
                bytes,
            });
        }
        let decoded = decoder.decode(&raw).unwrap();
        if raw.position.offset() == 1136 {
            v1_rows = Some(decoded.body);
            break;
        }
    }
    let v2 = decoder.decode(&v2_event.unwrap()).unwrap();
    assert_eq!(
        v2.header.type_code,
        event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V2
    );
    assert_eq!(Some(v2.body), v1_rows);
}

/// B18: statement events carry their session context; the default
/// schema is the `USE`d one, not the changed one; INTVAR, USER_VAR (every
/// value type) and RAND events come before their statement.
#[test]
fn b18_statements_with_session_context() {
    let events = walk("b18", 1);
    let file = "mariadb-bin.000001";
    let from = |offset: u64| {
        events
            .iter()
            .skip_while(|e| e.position.offset() != offset)
            .map(summary)
            .take_while(|s| !s.ends_with(" XID"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        from(1198),
        [
            "1198 GTID 0-1-6 flags=12",
            "1240 INTVAR 2=1",
            "1272 QUERY db=shard_q1 INSERT INTO a (v, ts) VALUES (10, NOW())",
        ]
    );
    assert_eq!(
        from(1426),
        [
            "1426 GTID 0-1-7 flags=12",
            "1468 INTVAR 1=1",
            "1500 INTVAR 2=2",
            "1532 QUERY db=shard_q1 INSERT INTO a (v, ts) VALUES (LAST_INSERT_ID() + 100, NOW())",
        ]
    );
    assert_eq!(
        from(1706),
        [
            "1706 GTID 0-1-8 flags=12",
            "1748 QUERY db=shard_q1 UPDATE shard_q2.b SET v = v + 5 WHERE id = 1",
        ]
    );
    assert_eq!(
        from(1894),
        [
            "1894 GTID 0-1-9 flags=12",
            "1936 USER_VAR x Some(Int { value: 7, unsigned: false })",
            "1983 QUERY db=shard_q1 INSERT INTO shard_q2.b VALUES (2, @x)",
        ]
    );
    let first = statement(&at(&events, file, 1272));
    assert_eq!(first.context.timestamp, 1_700_000_000);
    assert_eq!(first.context.timestamp_micros, Some(0));
    assert_eq!(first.context.time_zone.as_deref(), Some("+02:00"));
    assert_eq!(first.context.sql_mode, Some(DEFAULT_SQL_MODE));
    let update = statement(&at(&events, file, 1748));
    assert_eq!(update.context.timestamp, 1_700_000_000);
    assert_eq!(update.default_schema.as_deref(), Some("shard_q1"));

    // USER_VAR of every type before one statement.
    let vars: Vec<UserVar> = events
        .iter()
        .filter(|e| (2401..2654).contains(&e.position.offset()))
        .map(|e| match &e.body {
            EventBody::UserVar(v) => v.clone(),
            other => panic!("{}: {other:?}", e.position),
        })
        .collect();
    let var = |name: &str, value: Option<UserVarValue>| UserVar {
        name: name.to_owned(),
        value,
    };
    assert_eq!(
        vars,
        [
            var(
                "s",
                Some(UserVarValue::String {
                    bytes: b"abc".to_vec(),
                    collation: 33
                })
            ),
            var("r", Some(UserVarValue::Real(1.5))),
            var(
                "i",
                Some(UserVarValue::Int {
                    value: -5,
                    unsigned: false
                })
            ),
            var(
                "u",
                Some(UserVarValue::Int {
                    value: -1,
                    unsigned: true
                })
            ),
            var("d", Some(UserVarValue::Decimal("-12.345".to_owned()))),
            var("n", None),
        ]
    );
    let uv = statement(&at(&events, file, 2654));
    assert_eq!(
        text(&uv.sql),
        "INSERT INTO shard_q2.uv (s, r, i, u, d, n) VALUES (@s, @r, @i, @u, @d, @n)"
    );
    assert_eq!(uv.context.timestamp, 1_700_000_001);

    // sql_mode, lc_time_names, auto_increment_*.
    assert_eq!(summary(&at(&events, file, 2872)), "2872 INTVAR 2=7");
    let modes = statement(&at(&events, file, 2904));
    assert_eq!(text(&modes.sql), "INSERT INTO shard_q1.a (v) VALUES (7)");
    assert_eq!(modes.context.sql_mode, Some(0x4 | 0x8_0000)); // ANSI_QUOTES, NO_AUTO_VALUE_ON_ZERO
    assert_eq!(modes.context.lc_time_names, Some(4)); // de_DE
    assert_eq!(modes.context.auto_increment, Some((5, 2)));

    // SET NAMES latin1: the text is the client's bytes.
    let latin1 = statement(&at(&events, file, 3093));
    assert_eq!(
        latin1.sql,
        "INSERT INTO shard_q2.uv (s) VALUES ('café')".as_bytes()
    );
    assert_eq!(latin1.context.charset_client, Some(8));
    assert_eq!(latin1.context.collation_connection, Some(8));
    assert_eq!(latin1.context.collation_server, Some(45));

    // RAND seeds before the statement.
    assert!(matches!(
        at(&events, file, 3281).body,
        EventBody::Rand { .. }
    ));
    let rand = statement(&at(&events, file, 3320));
    assert_eq!(
        text(&rand.sql),
        "INSERT INTO shard_q2.uv (f) VALUES (RAND(1) + RAND())"
    );
    assert_eq!(rand.context.charset_client, Some(45));

    // foreign_key_checks = 0, unique_checks = 0.
    let checks = statement(&at(&events, file, 3517));
    assert_eq!(checks.context.flags2, Some(0x0D00_0000));
    assert!(checks.context.foreign_key_checks_off());
    assert!(checks.context.unique_checks_off());

    // A standalone DDL with its GTID.
    assert_eq!(
        summary(&at(&events, file, 3655)),
        "3655 GTID 0-1-16 flags=41"
    );
    let ddl = statement(&at(&events, file, 3697));
    assert_eq!(text(&ddl.sql), "ALTER TABLE shard_q2.b ADD COLUMN w INT");
    assert_eq!(ddl.default_schema.as_deref(), Some("shard_q1"));
}

/// Two transactions group-committed together carry the same commit id.
#[test]
fn group_commit_ids() {
    let events = walk("gcommit", 1);
    let gtids: Vec<(Gtid, Option<u64>, u8)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::MariadbGtid {
                gtid,
                commit_id,
                flags,
            } => Some((*gtid, *commit_id, *flags)),
            _ => None,
        })
        .collect();
    assert_eq!(gtids.len(), 4);
    assert_eq!((gtids[0].1, gtids[1].1), (None, None));
    let (a, b) = (gtids[2], gtids[3]);
    assert_eq!(
        (a.0.to_string(), b.0.to_string()),
        ("0-1-3".into(), "0-1-4".into())
    );
    assert!(a.1.is_some());
    assert_eq!(a.1, b.1);
    assert_eq!(
        a.2,
        FL_GROUP_COMMIT_ID | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL
    );
    assert_eq!(b.2, a.2);
    let rows: Vec<String> = events
        .iter()
        .filter(|e| matches!(e.body, EventBody::Rows { .. }))
        .map(summary)
        .collect();
    assert_eq!(
        rows,
        [
            "768 ROWS Insert flags=1 ->(1)",
            "984 ROWS Insert flags=1 ->(2)"
        ]
    );
}

/// An XA transaction: the GTID flags say prepared / completed; the
/// XA_PREPARE event gives the xid; XA COMMIT is a statement.
#[test]
fn xa_transaction() {
    let results = walk_results("xa", 1);
    let get = |offset: u64| {
        results
            .iter()
            .find(|(raw, _)| raw.position.offset() == offset)
            .unwrap()
    };
    let gtid = |offset: u64| match &get(offset).1.as_ref().unwrap().body {
        EventBody::MariadbGtid { gtid, flags, .. } => (gtid.to_string(), *flags),
        other => panic!("{offset}: {other:?}"),
    };
    assert_eq!(
        gtid(621),
        (
            "0-1-3".to_owned(),
            FL_PREPARED_XA | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL
        )
    );
    assert_eq!(
        gtid(985),
        (
            "0-1-4".to_owned(),
            FL_COMPLETED_XA | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL | FL_STANDALONE
        )
    );
    match &get(933).1.as_ref().unwrap().body {
        EventBody::XaPrepare { one_phase, xid } => {
            assert!(!one_phase);
            assert_eq!(xid.format_id, 7);
            assert_eq!(xid.gtrid, b"fx-gtrid");
            assert_eq!(xid.bqual, b"fx-bqual");
        }
        other => panic!("933: {other:?}"),
    }
    let commit = statement(get(1043).1.as_ref().unwrap());
    assert_eq!(
        text(&commit.sql),
        "XA COMMIT X'66782d6774726964',X'66782d627175616c',7"
    );
    // Every other event decodes.
    let failed: Vec<u64> = results
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(raw, _)| raw.position.offset())
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
}

// -- errors ----------------------------------------------------------------

/// A decoder that has read the FORMAT_DESCRIPTION of fixture `dir`.
fn primed(dir: &str) -> Decoder {
    let mut decoder = Decoder::new();
    decoder
        .decode(&fixture_events(dir, "mariadb-bin.000001")[0])
        .unwrap();
    decoder
}

#[test]
fn flipped_checksum_algorithm_or_version_byte_is_caught_at_the_format_description() {
    // One bit in the algorithm byte (CRC32 -> NONE) must not turn the
    // checks off: the FORMAT_DESCRIPTION's own CRC catches it.
    let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
    let alg = fde.bytes.len() - 5;
    fde.bytes[alg] ^= 0x01;
    let err = Decoder::new().decode(&fde).unwrap_err();
    assert!(matches!(err, ExtractError::Checksum { .. }), "{err}");
    assert!(err.to_string().contains("mariadb-bin.000001:4"), "{err}");
    // A version flipped to look pre-checksum ("00.11.19") is refused.
    let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
    fde.bytes[19 + 2] ^= 0x01;
    let err = Decoder::new().decode(&fde).unwrap_err();
    assert!(err.to_string().contains("mariadb-bin.000001:4"), "{err}");
    assert!(err.to_string().contains("not supported"), "{err}");
    // A NONE binlog's FORMAT_DESCRIPTION still carries a valid CRC.
    let fde = fixture_event("none", "mariadb-bin.000001", 4);
    Decoder::new().decode(&fde).unwrap();
}

#[test]
fn flipped_byte_gives_checksum_error_naming_the_position() {
    let mut raw = fixture_event("crc32", "mariadb-bin.000001", 497);
    raw.bytes[19 + 30] ^= 0x01;
    let mut decoder = primed("crc32");
    let err = decoder.decode(&raw).unwrap_err();
    match &err {
        ExtractError::Checksum {
            position,
            expected,
            actual,
        } => {
            assert_eq!(position.to_string(), "mariadb-bin.000001:497");
            assert_ne!(expected, actual);
            let stored = u32::from_le_bytes(raw.bytes[raw.bytes.len() - 4..].try_into().unwrap());
            assert_eq!(*expected, stored);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("mariadb-bin.000001:497"), "{err}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    // Without verification the (corrupt) event decodes.
    decoder.set_verify_checksums(false);
    assert!(matches!(
        decoder.decode(&raw).unwrap().body,
        EventBody::Query(_)
    ));
    // The FORMAT_DESCRIPTION's own CRC is verified too.
    let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
    fde.bytes[40] ^= 0x20;
    assert!(matches!(
        Decoder::new().decode(&fde),
        Err(ExtractError::Checksum { position, .. }) if position.offset() == 4
    ));
}

#[test]
fn unknown_type_code_gives_unknown_event() {
    // No checksum: just change the type.
    let mut raw = fixture_event("none", "mariadb-bin.000001", 992);
    raw.bytes[4] = 200;
    let err = primed("none").decode(&raw).unwrap_err();
    match &err {
        ExtractError::UnknownEvent {
            position,
            type_code,
        } => {
            assert_eq!(*type_code, 200);
            assert_eq!(position.to_string(), "mariadb-bin.000001:992");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "binlog mariadb-bin.000001:992: unknown event type 200"
    );
    // With a valid CRC.
    for type_code in [0u8, 43, 99, 159, 172, 255] {
        let mut raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
        raw.bytes[4] = type_code;
        let n = raw.bytes.len();
        let crc = crc32fast::hash(&raw.bytes[..n - 4]);
        raw.bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(
            matches!(
                primed("crc32").decode(&raw),
                Err(ExtractError::UnknownEvent { type_code: t, .. }) if t == type_code
            ),
            "type {type_code}"
        );
    }
}

#[test]
fn start_encryption_gives_encrypted() {
    let mut body = vec![1u8];
    body.extend_from_slice(&7u32.to_le_bytes());
    body.extend_from_slice(&[0xAB; 12]);
    let raw = synthetic(event_type::MARIADB_START_ENCRYPTION, &body, true, 300, 0);
    match primed("crc32").decode(&raw) {
        Err(ExtractError::Encrypted { position }) => {
            assert_eq!(position.to_string(), "mysql-bin.000007:1234")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn header_sanity() {
    let mut decoder = primed("crc32");
    let short = RawEvent {
        position: BinlogPosition::new("mariadb-bin.000001", 99).unwrap(),
        bytes: vec![0; 10],
    };
    let err = decoder.decode(&short).unwrap_err();
    assert!(
        err.to_string()
            .contains("at least the 19-byte event header"),
        "{err}"
    );
    let mut raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
    raw.bytes.push(0);
    let err = decoder.decode(&raw).unwrap_err();
    assert!(
        err.to_string()
            .contains("header says event_size 31 but the event has 32 bytes"),
        "{err}"
    );
}

/// A rows event whose TABLE_MAP was not seen names the table id.
#[test]
fn rows_event_without_table_map() {
    let mut decoder = Decoder::new();
    for raw in fixture_events("crc32", "mariadb-bin.000001") {
        if raw.position.offset() == 928 {
            continue; // skip the TABLE_MAP
        }
        if raw.position.offset() == 989 {
            let err = decoder.decode(&raw).unwrap_err();
            match err {
                ExtractError::Decode { event, message, .. } => {
                    assert_eq!(event, "WRITE_ROWS_V1");
                    assert!(message.starts_with("unknown table id "), "{message}");
                }
                other => panic!("{other:?}"),
            }
            return;
        }
        decoder.decode(&raw).unwrap();
    }
    panic!("no rows event");
}

/// `decode_owned` gives what `decode` gives, event by event.
#[test]
fn decode_owned_matches_decode() {
    for dir in ["crc32", "none", "b15", "b18", "gcommit", "xa"] {
        let (mut a, mut b) = (Decoder::new(), Decoder::new());
        for raw in fixture_events(dir, "mariadb-bin.000001") {
            let want = a.decode(&raw).map_err(|e| e.to_string());
            let got = b.decode_owned(raw).map_err(|e| e.to_string());
            assert_eq!(got, want, "{dir}");
        }
    }
}

/// A TABLE_MAP body for table id `id`: `s`.`name` with INT columns.
fn table_map_body(id: u64, name: &str, columns: usize) -> Vec<u8> {
    let mut b = id.to_le_bytes()[..6].to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&[1, b's', 0]);
    b.push(name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    b.push(columns as u8);
    b.extend(std::iter::repeat_n(
        crate::event::column_type::LONG,
        columns,
    ));
    b.push(0); // no type metadata
    b.extend(std::iter::repeat_n(0xffu8, columns.div_ceil(8)));
    b
}

/// The TABLE_MAP cache answers a repeated TABLE_MAP without parsing it
/// again, and a changed one for the same table id replaces it.
#[test]
fn table_map_cache_follows_changed_definitions() {
    let mut d = primed("none");
    let decode = |d: &mut Decoder, body: &[u8]| match d
        .decode(&synthetic(event_type::TABLE_MAP, body, false, 0, 0))
        .unwrap()
        .body
    {
        EventBody::TableMap(t) => std::sync::Arc::unwrap_or_clone(t),
        other => panic!("{other:?}"),
    };
    let first = decode(&mut d, &table_map_body(77, "t", 1));
    assert_eq!((first.table.as_str(), first.columns.len()), ("t", 1));
    assert_eq!(decode(&mut d, &table_map_body(77, "t", 1)), first);
    assert_eq!(d.table(77), Some(&first));
    let changed = decode(&mut d, &table_map_body(77, "t2", 2));
    assert_eq!((changed.table.as_str(), changed.columns.len()), ("t2", 2));
    assert_eq!(d.table(77), Some(&changed));
    let other = decode(&mut d, &table_map_body(78, "t", 1));
    assert_eq!(other.table_id, 78);
    assert_eq!(d.table(77), Some(&changed));
    // A FORMAT_DESCRIPTION empties the cache.
    d.decode(&fixture_events("none", "mariadb-bin.000001")[0])
        .unwrap();
    assert_eq!(d.table(77), None);
}

// -- synthetic events ------------------------------------------------------

/// An event of `type_code` with `body`, optionally with a CRC-32
/// trailer, at mysql-bin.000007:1234.
pub(crate) fn synthetic(
    type_code: u8,
    body: &[u8],
    crc: bool,
    log_pos: u32,
    flags: u16,
) -> RawEvent {
    RawEvent {
        position: BinlogPosition::new("mysql-bin.000007", 1234).unwrap(),
        bytes: event_bytes(type_code, body, crc, log_pos, flags),
    }
}

fn event_bytes(type_code: u8, body: &[u8], crc: bool, log_pos: u32, flags: u16) -> Vec<u8> {
    let size = (19 + body.len() + if crc { 4 } else { 0 }) as u32;
    let mut v = Vec::new();
    v.extend_from_slice(&1_700_000_000u32.to_le_bytes());
    v.push(type_code);
    v.extend_from_slice(&7u32.to_le_bytes());
    v.extend_from_slice(&size.to_le_bytes());
    v.extend_from_slice(&log_pos.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(body);
    if crc {
        let c = crc32fast::hash(&v);
        v.extend_from_slice(&c.to_le_bytes());
    }
    v
}

fn query_body(db: &str, error_code: u16, status: &[u8], sql: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&42u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(db.len() as u8);
    b.extend_from_slice(&error_code.to_le_bytes());
    b.extend_from_slice(&(status.len() as u16).to_le_bytes());
    b.extend_from_slice(status);
    b.extend_from_slice(db.as_bytes());
    b.push(0);
    b.extend_from_slice(sql);
    b
}

#[test]
fn begin_commit_rollback_are_exact_matches() {
    let mut d = primed("none");
    let decode = |d: &mut Decoder, sql: &[u8]| {
        d.decode(&synthetic(
            event_type::QUERY,
            &query_body("", 0, &[], sql),
            false,
            9,
            0,
        ))
        .unwrap()
        .body
    };
    assert_eq!(decode(&mut d, b"BEGIN"), EventBody::Begin);
    assert_eq!(decode(&mut d, b"COMMIT"), EventBody::Commit);
    assert_eq!(decode(&mut d, b"ROLLBACK"), EventBody::Rollback);
    for sql in [
        &b"begin"[..],
        b"BEGIN ",
        b"XA START 'x'",
        b"ROLLBACK TO SAVEPOINT s",
        b"COMMIT /* x */",
    ] {
        assert!(
            matches!(decode(&mut d, sql), EventBody::Query(_)),
            "{sql:?}"
        );
    }
    // BEGIN with a default schema and status variables is still BEGIN.
    let body = query_body("db1", 0, &[0, 0, 0, 0, 1], b"BEGIN");
    let e = d
        .decode(&synthetic(event_type::QUERY, &body, false, 9, 0))
        .unwrap();
    assert_eq!(e.body, EventBody::Begin);
}

/// Every MySQL and MariaDB status variable code, in one block.
#[test]
fn every_status_variable() {
    let mut s = Vec::new();
    s.push(0); // Q_FLAGS2
    s.extend_from_slice(&0x0C00_4000u32.to_le_bytes());
    s.push(1); // Q_SQL_MODE
    s.extend_from_slice(&0x1234_5678_9abcu64.to_le_bytes());
    s.extend_from_slice(&[2, 3, b's', b't', b'd', 0]); // Q_CATALOG
    s.push(3); // Q_AUTO_INCREMENT
    s.extend_from_slice(&[2, 0, 1, 0]);
    s.push(4); // Q_CHARSET
    s.extend_from_slice(&[33, 0, 8, 0, 45, 0]);
    s.extend_from_slice(&[5, 6]); // Q_TIME_ZONE
    s.extend_from_slice(b"+02:00");
    s.extend_from_slice(&[6, 3, b's', b't', b'd']); // Q_CATALOG_NZ
    s.extend_from_slice(&[7, 4, 0]); // Q_LC_TIME_NAMES
    s.extend_from_slice(&[8, 28, 0]); // Q_CHARSET_DATABASE
    s.push(9); // Q_TABLE_MAP_FOR_UPDATE
    s.extend_from_slice(&5u64.to_le_bytes());
    s.push(10); // Q_MASTER_DATA_WRITTEN
    s.extend_from_slice(&77u32.to_le_bytes());
    s.extend_from_slice(&[11, 4, b'r', b'o', b'o', b't', 9]); // Q_INVOKER
    s.extend_from_slice(b"localhost");
    s.extend_from_slice(&[12, 2, b'a', 0, b'b', b'b', 0]); // Q_UPDATED_DB_NAMES
    s.extend_from_slice(&[13, 0x40, 0xE2, 0x01]); // Q_MICROSECONDS 123456
    s.extend_from_slice(&[14, 15]); // Q_COMMIT_TS, Q_COMMIT_TS2
    s.extend_from_slice(&[16, 1]); // Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP
    s.push(17); // Q_DDL_LOGGED_WITH_XID
    s.extend_from_slice(&9u64.to_le_bytes());
    s.extend_from_slice(&[18, 255, 0]); // Q_DEFAULT_COLLATION_FOR_UTF8MB4
    s.extend_from_slice(&[19, 1]); // Q_SQL_REQUIRE_PRIMARY_KEY
    s.extend_from_slice(&[20, 0]); // Q_DEFAULT_TABLE_ENCRYPTION
    s.extend_from_slice(&[128, 0xF1, 0xFB, 0x09]); // Q_HRNOW 654321
    s.push(129); // Q_XID
    s.extend_from_slice(&11u64.to_le_bytes());
    s.extend_from_slice(&[130, 4]); // Q_GTID_FLAGS3 with COMMIT_ALTER
    s.extend_from_slice(&3u64.to_le_bytes());
    s.extend_from_slice(&[131, 2, 33, 0, 45, 0, 8, 0, 47, 0]); // Q_CHARACTER_SET_COLLATIONS
    s.extend_from_slice(&[12, 254, 130, 0]); // over-max updated dbs, then flags3 0
    let body = query_body("shop", 1062, &s, b"INSERT INTO t VALUES (1)");
    let e = primed("none")
        .decode(&synthetic(event_type::QUERY, &body, false, 9, 0))
        .unwrap();
    let st = statement(&e);
    assert_eq!(st.sql, b"INSERT INTO t VALUES (1)");
    assert_eq!(st.default_schema.as_deref(), Some("shop"));
    assert_eq!(st.error_code, 1062);
    let expected = SessionContext {
        timestamp: 1_700_000_000,
        timestamp_micros: Some(654_321),
        sql_mode: Some(0x1234_5678_9abc),
        flags2: Some(0x0C00_4000),
        charset_client: Some(33),
        collation_connection: Some(8),
        collation_server: Some(45),
        collation_database: Some(28),
        time_zone: Some("+02:00".to_owned()),
        lc_time_names: Some(4),
        auto_increment: Some((2, 1)),
        ..SessionContext::default()
    };
    assert_eq!(st.context, expected);
    assert!(st.context.foreign_key_checks_off() && st.context.unique_checks_off());
}

#[test]
fn unknown_or_truncated_status_variable_is_an_error() {
    let mut d = primed("none");
    let mut decode = |status: &[u8]| {
        let body = query_body("", 0, status, b"DO 1");
        match d.decode(&synthetic(event_type::QUERY, &body, false, 9, 0)) {
            Err(ExtractError::Decode { event, message, .. }) => {
                assert_eq!(event, "QUERY");
                message
            }
            other => panic!("{other:?}"),
        }
    };
    let m = decode(&[0, 1, 2, 3, 4, 99, 1, 2]);
    assert!(
        m.contains("unknown status variable code 99 at status offset 5"),
        "{m}"
    );
    let m = decode(&[1, 1, 2, 3]);
    assert!(
        m.contains("status variable 1 at status offset 0: truncated sql_mode"),
        "{m}"
    );
    let m = decode(&[5, 10, b'x']);
    assert!(m.contains("truncated time zone"), "{m}");
    // status_vars_len beyond the body.
    let mut body = query_body("", 0, &[], b"");
    body[11] = 200;
    let m = match d.decode(&synthetic(event_type::QUERY, &body, false, 9, 0)) {
        Err(ExtractError::Decode { message, .. }) => message,
        other => panic!("{other:?}"),
    };
    assert!(m.contains("truncated status variables"), "{m}");
}

#[test]
fn rotate_real_and_artificial() {
    let mut body = 4u64.to_le_bytes().to_vec();
    body.extend_from_slice(b"mariadb-bin.000009");
    let expected = |artificial| EventBody::Rotate {
        next_file: "mariadb-bin.000009".to_owned(),
        position: 4,
        artificial,
    };
    // The fake ROTATE a dump starts with, before any FORMAT_DESCRIPTION,
    // with or without a trailer: the name never includes the CRC.
    for crc in [false, true] {
        let e = Decoder::new()
            .decode(&synthetic(
                event_type::ROTATE,
                &body,
                crc,
                0,
                LOG_EVENT_ARTIFICIAL_F,
            ))
            .unwrap();
        assert_eq!(e.body, expected(true), "crc {crc}");
        // And after a CRC32 or NONE FORMAT_DESCRIPTION.
        for dir in ["crc32", "none"] {
            let e = primed(dir)
                .decode(&synthetic(event_type::ROTATE, &body, crc, 0, 0))
                .unwrap();
            assert_eq!(e.body, expected(true), "crc {crc} after {dir}");
        }
    }
    // A real ROTATE follows the file's checksum.
    let e = primed("crc32")
        .decode(&synthetic(event_type::ROTATE, &body, true, 500, 0))
        .unwrap();
    assert_eq!(e.body, expected(false));
    let e = primed("none")
        .decode(&synthetic(event_type::ROTATE, &body, false, 500, 0))
        .unwrap();
    assert_eq!(e.body, expected(false));
}

#[test]
fn small_events() {
    let mut d = primed("none");
    let mut one = |type_code: u8, body: &[u8]| {
        d.decode(&synthetic(type_code, body, false, 9, 0))
            .map(|e| e.body)
    };
    assert_eq!(one(event_type::STOP, &[]).unwrap(), EventBody::Stop);
    assert_eq!(
        one(event_type::HEARTBEAT, b"mariadb-bin.000001").unwrap(),
        EventBody::Heartbeat
    );
    assert_eq!(
        one(event_type::HEARTBEAT_V2, &[1, 2, 3]).unwrap(),
        EventBody::Heartbeat
    );
    for t in [
        event_type::IGNORABLE,
        event_type::PREVIOUS_GTIDS,
        event_type::TRANSACTION_CONTEXT,
        event_type::VIEW_CHANGE,
    ] {
        assert_eq!(one(t, &[0; 8]).unwrap(), EventBody::Ignored, "type {t}");
    }
    let mut intvar = vec![2];
    intvar.extend_from_slice(&77u64.to_le_bytes());
    assert_eq!(
        one(event_type::INTVAR, &intvar).unwrap(),
        EventBody::Intvar { kind: 2, value: 77 }
    );
    intvar[0] = 3;
    assert!(one(event_type::INTVAR, &intvar).is_err());
    let mut rand = 1u64.to_le_bytes().to_vec();
    rand.extend_from_slice(&2u64.to_le_bytes());
    assert_eq!(
        one(event_type::RAND, &rand).unwrap(),
        EventBody::Rand { seed1: 1, seed2: 2 }
    );
    assert!(one(event_type::RAND, &rand[..15]).is_err());
    assert_eq!(
        one(event_type::XID, &9u64.to_le_bytes()).unwrap(),
        EventBody::Xid(9)
    );
    assert!(one(event_type::XID, &[1, 2, 3]).is_err());
    // MySQL ROWS_QUERY: a length byte, then the text.
    assert_eq!(
        one(event_type::ROWS_QUERY, b"\x0bINSERT 1234").unwrap(),
        EventBody::AnnotateRows(b"INSERT 1234".to_vec())
    );
    // MySQL GTID: commit flag, uuid, gno, logical clock.
    let mut gtid = vec![1];
    gtid.extend_from_slice(&[
        0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95,
        0x62,
    ]);
    gtid.extend_from_slice(&23u64.to_le_bytes());
    gtid.push(2);
    gtid.extend_from_slice(&[0; 16]);
    for t in [event_type::GTID, event_type::ANONYMOUS_GTID] {
        assert_eq!(
            one(t, &gtid).unwrap(),
            EventBody::MysqlGtid {
                uuid: "3e11fa47-71ca-11e1-9e33-c80aa9429562".to_owned(),
                gno: 23
            }
        );
    }
    // INCIDENT and LOAD DATA events: clear errors.
    let mut incident = 1u16.to_le_bytes().to_vec();
    incident.push(11);
    incident.extend_from_slice(b"LOST_EVENTS");
    match one(event_type::INCIDENT, &incident) {
        Err(ExtractError::Decode { message, .. }) => {
            assert!(
                message.contains("INCIDENT 1 (\"LOST_EVENTS\")"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    match one(event_type::EXECUTE_LOAD_QUERY, &[0; 40]) {
        Err(ExtractError::Decode { message, .. }) => {
            assert!(message.contains("LOAD DATA"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn user_var_errors() {
    let mut d = primed("none");
    let mut one = |body: &[u8]| d.decode(&synthetic(event_type::USER_VAR, body, false, 9, 0));
    // INT without the flags byte (pre-5.1 writer): signed.
    let mut b = 1u32.to_le_bytes().to_vec();
    b.extend_from_slice(b"v");
    b.push(0);
    b.push(INT_RESULT);
    b.extend_from_slice(&63u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&(-3i64).to_le_bytes());
    assert_eq!(
        one(&b).unwrap().body,
        EventBody::UserVar(UserVar {
            name: "v".to_owned(),
            value: Some(UserVarValue::Int {
                value: -3,
                unsigned: false
            })
        })
    );
    // Value length beyond the event.
    let mut bad = b.clone();
    bad[11..15].copy_from_slice(&100u32.to_le_bytes());
    assert!(one(&bad).is_err());
    // ROW_RESULT is not a value type of USER_VAR.
    let mut bad = b.clone();
    bad[6] = 3;
    assert!(one(&bad).is_err());
}

#[test]
fn decimal_binary_format() {
    // MySQL's documentation example: DECIMAL(14,4).
    let pos = [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2];
    assert_eq!(decode_decimal(14, 4, &pos).unwrap(), "1234567890.1234");
    let neg = [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D];
    assert_eq!(decode_decimal(14, 4, &neg).unwrap(), "-1234567890.1234");
    // DECIMAL(5,2) 0.00 and -0.05; DECIMAL(3,0) 7.
    assert_eq!(decode_decimal(5, 2, &[0x80, 0x00, 0x00]).unwrap(), "0.00");
    assert_eq!(decode_decimal(5, 2, &[0x7F, 0xFF, 0xFA]).unwrap(), "-0.05");
    assert_eq!(decode_decimal(3, 0, &[0x80, 0x07]).unwrap(), "7");
    // DECIMAL(20,10): two full groups and partials.
    assert!(decode_decimal(14, 4, &pos[..6]).is_err());
    assert!(decode_decimal(0, 0, &[]).is_err());
    assert!(decode_decimal(3, 4, &[0x80]).is_err());
    assert!(decode_decimal(2, 0, &[0x80 | 0x7F]).is_err()); // 127 > 99
}

// -- TRANSACTION_PAYLOAD ---------------------------------------------------

fn lenenc(v: u64) -> Vec<u8> {
    match v {
        0..=250 => vec![v as u8],
        251..=0xffff => {
            let mut out = vec![0xfc];
            out.extend_from_slice(&(v as u16).to_le_bytes());
            out
        }
        _ => {
            let mut out = vec![0xfe];
            out.extend_from_slice(&v.to_le_bytes());
            out
        }
    }
}

fn payload_body(compression: u64, uncompressed: Option<u64>, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    let mut field = |t: u64, value: u64| {
        let value = lenenc(value);
        b.extend(lenenc(t));
        b.extend(lenenc(value.len() as u64));
        b.extend(value);
    };
    field(PAYLOAD_SIZE, payload.len() as u64);
    field(PAYLOAD_COMPRESSION_TYPE, compression);
    if let Some(u) = uncompressed {
        field(PAYLOAD_UNCOMPRESSED_SIZE, u);
    }
    b.push(PAYLOAD_END_MARK as u8);
    b.extend_from_slice(payload);
    b
}

/// A zstd frame holding `data` in one raw (stored) block.
fn zstd_raw_frame(data: &[u8]) -> Vec<u8> {
    assert!(data.len() < 256);
    let mut f = vec![0x28, 0xB5, 0x2F, 0xFD];
    f.push(0x20); // single segment, 1-byte content size, no checksum
    f.push(data.len() as u8);
    let block = 1u32 | ((data.len() as u32) << 3); // last block, raw
    f.extend_from_slice(&block.to_le_bytes()[..3]);
    f.extend_from_slice(data);
    f
}

fn inner_events() -> Vec<u8> {
    let mut inner = event_bytes(
        event_type::QUERY,
        &query_body("", 0, &[], b"BEGIN"),
        false,
        0,
        0,
    );
    let mut intvar = vec![1];
    intvar.extend_from_slice(&5u64.to_le_bytes());
    inner.extend(event_bytes(event_type::INTVAR, &intvar, false, 0, 0));
    inner.extend(event_bytes(
        event_type::XID,
        &8u64.to_le_bytes(),
        false,
        0,
        0,
    ));
    inner
}

#[test]
fn transaction_payload_expands_to_its_events() {
    let inner = inner_events();
    for (compression, payload) in [
        (PAYLOAD_NONE, inner.clone()),
        (PAYLOAD_ZSTD, zstd_raw_frame(&inner)),
    ] {
        for uncompressed in [Some(inner.len() as u64), None] {
            let body = payload_body(compression, uncompressed, &payload);
            let raw = synthetic(event_type::TRANSACTION_PAYLOAD, &body, true, 5000, 0);
            let mut d = primed("crc32");
            let events = d.decode_expanded(&raw).unwrap();
            let bodies: Vec<EventBody> = events.iter().map(|e| e.body.clone()).collect();
            assert_eq!(
                bodies,
                [
                    EventBody::Begin,
                    EventBody::Intvar { kind: 1, value: 5 },
                    EventBody::Xid(8)
                ],
                "compression {compression}"
            );
            assert!(events.iter().all(|e| e.position == raw.position));
            // decode() refuses it with a pointer to decode_expanded.
            match d.decode(&raw) {
                Err(ExtractError::Decode { message, .. }) => {
                    assert!(message.contains("decode_expanded"), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
    // Other events expand to themselves.
    let raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
    let events = primed("crc32").decode_expanded(&raw).unwrap();
    assert_eq!(events.len(), 1);
    assert!(matches!(events[0].body, EventBody::Xid(_)));
}

#[test]
fn transaction_payload_errors() {
    let inner = inner_events();
    let expand = |body: Vec<u8>| {
        let raw = synthetic(event_type::TRANSACTION_PAYLOAD, &body, false, 5000, 0);
        match primed("none").decode_expanded(&raw) {
            Err(ExtractError::Decode { message, .. }) => message,
            other => panic!("{other:?}"),
        }
    };
    let m = expand(payload_body(7, None, &inner));
    assert!(m.contains("compression type 7"), "{m}");
    let m = expand(payload_body(PAYLOAD_NONE, Some(3), &inner));
    assert!(m.contains("the event says 3"), "{m}");
    let m = expand(payload_body(PAYLOAD_ZSTD, None, &inner));
    assert!(m.contains("cannot decompress"), "{m}");
    let m = expand(payload_body(PAYLOAD_NONE, None, &inner[..inner.len() - 3]));
    assert!(m.contains("inner event #2"), "{m}");
    let mut nested = inner.clone();
    nested.extend(event_bytes(
        event_type::TRANSACTION_PAYLOAD,
        &[0],
        false,
        0,
        0,
    ));
    let m = expand(payload_body(PAYLOAD_NONE, None, &nested));
    assert!(m.contains("inner event #3 is a TRANSACTION_PAYLOAD"), "{m}");
}

// -- no panics ---------------------------------------------------------------

/// Every fixture event with the decoder state just before it.
fn fixture_states() -> &'static Vec<(Decoder, RawEvent)> {
    static STATES: std::sync::OnceLock<Vec<(Decoder, RawEvent)>> = std::sync::OnceLock::new();
    STATES.get_or_init(|| {
        let mut out = Vec::new();
        for (dir, files) in [
            ("crc32", 1),
            ("none", 1),
            ("b16", 5),
            ("b15", 1),
            ("b18", 1),
            ("gcommit", 1),
            ("xa", 1),
        ] {
            let mut d = Decoder::new();
            for n in 1..=files {
                for raw in fixture_events(dir, &file_name(n)) {
                    out.push((d.clone(), raw.clone()));
                    let _ = d.decode(&raw);
                }
            }
        }
        out
    })
}

fn decode_all_ways(decoder: &Decoder, raw: &RawEvent) {
    for verify in [true, false] {
        let mut d = decoder.clone();
        d.set_verify_checksums(verify);
        let _ = d.decode(raw);
        let _ = d.clone().decode_expanded(raw);
    }
}

proptest::proptest! {
    // PROPTEST_CASES overrides the default of 2000 cases.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
    ))]

    #[test]
    fn random_bytes_never_panic(
        mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        type_code in proptest::prelude::any::<u8>(),
        fix in proptest::prelude::any::<bool>(),
    ) {
        if fix && bytes.len() >= EVENT_HEADER_LEN {
            bytes[4] = type_code;
            let size = bytes.len() as u32;
            bytes[9..13].copy_from_slice(&size.to_le_bytes());
        }
        let raw = RawEvent {
            position: BinlogPosition::new("mariadb-bin.000001", 4).unwrap(),
            bytes,
        };
        decode_all_ways(&Decoder::new(), &raw);
        let states = fixture_states();
        decode_all_ways(&states[1].0, &raw);
    }

    #[test]
    fn mutated_fixture_events_never_panic(
        index in proptest::prelude::any::<proptest::sample::Index>(),
        edits in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
            0..6,
        ),
        cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
        grow in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
        type_code in proptest::option::of(proptest::prelude::any::<u8>()),
        fix_size in proptest::prelude::any::<bool>(),
    ) {
        let states = fixture_states();
        let (decoder, raw) = &states[index.index(states.len())];
        let mut raw = raw.clone();
        for (at, byte) in edits {
            let i = EVENT_HEADER_LEN.min(raw.bytes.len() - 1)
                + at.index(raw.bytes.len() - EVENT_HEADER_LEN.min(raw.bytes.len() - 1));
            raw.bytes[i] = byte;
        }
        if let Some(cut) = cut {
            raw.bytes.truncate(cut.index(raw.bytes.len() + 1));
        }
        raw.bytes.extend(grow);
        if raw.bytes.len() >= EVENT_HEADER_LEN {
            if let Some(t) = type_code {
                raw.bytes[4] = t;
            }
            if fix_size {
                let size = raw.bytes.len() as u32;
                raw.bytes[9..13].copy_from_slice(&size.to_le_bytes());
            }
        }
        decode_all_ways(decoder, &raw);
    }
}

/// Prints every fixture event (`cargo test dump_fixtures -- --ignored
/// --nocapture`), to update the expected values after regenerating the
/// fixtures with `scripts/fixtures-events.sh`.
#[test]
#[ignore]
fn dump_fixtures() {
    for (dir, files) in [
        ("crc32", 1),
        ("none", 1),
        ("b16", 5),
        ("b15", 1),
        ("b18", 1),
        ("gcommit", 1),
        ("xa", 1),
    ] {
        for (raw, result) in walk_results(dir, files) {
            match result {
                Ok(e) => println!("{dir} {}: {}", raw.position.file(), summary(&e)),
                Err(e) => println!("{dir} {}: ERROR {e}", raw.position.file()),
            }
        }
    }
}
