//! Records written by this version must stay readable by later versions
//! (issue 4): `tests/fixtures/queue/` holds
//! - `records-v1.bin`: the format-1 records of [`fixture`] concatenated
//!   (the codec alone, independent of sled);
//! - `queue-v1/`: a queue directory written in format 1 (two segments,
//!   a purge floor) holding the same transactions;
//! - `records-v2.bin`: the format-2 records of [`fixture_v2`] (this
//!   version's format: statements carry their master session).
//!
//! The tests read both back and compare them with [`fixture`], value for
//! value; the records must also re-encode to the same bytes.
//!
//! Regenerate (only when the format changes on purpose, with a new format
//! byte and the old decoder kept):
//! `cargo test --test queue_fixture -- --ignored regenerate_queue_fixture`

mod queue_support;

use std::path::{Path, PathBuf};

use shardrep::event::{
    column_type, Change, ColumnInfo, RowImage, RowKind, RowPair, RowsChange, SessionContext,
    Statement, TableInfo, Transaction, UserVar, UserVarValue, Value,
};
use shardrep::position::{BinlogPosition, Epoch, Gtid, Seqno};
use shardrep::queue::codec::{decode_record, encode_record, RecordCursor};
use shardrep::queue::{ExtractorProgress, QueueError, QueueOptions, TransactionQueue};

use queue_support::TempDir;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queue")
}

fn pos(file: u32, offset: u64) -> BinlogPosition {
    BinlogPosition::new(format!("mariadb-bin.{file:06}"), offset).unwrap()
}

fn table() -> TableInfo {
    let col = |t: u8, meta: u16, name: Option<&str>, unsigned: Option<bool>, charset| ColumnInfo {
        column_type: t,
        meta,
        nullable: name != Some("id"),
        name: name.map(str::to_owned),
        unsigned,
        charset,
    };
    TableInfo {
        table_id: 118,
        schema: "shop_eu".into(),
        table: "orders".into(),
        columns: vec![
            col(column_type::LONGLONG, 0, Some("id"), Some(true), None),
            col(
                column_type::NEWDECIMAL,
                0x0a02,
                Some("amount"),
                Some(false),
                None,
            ),
            col(column_type::VARCHAR, 400, Some("note"), None, Some(45)),
            col(column_type::DATETIME2, 6, None, None, None),
        ],
        primary_key: Some(vec![0]),
    }
}

/// Every value kind once.
fn all_values() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(-9_223_372_036_854_775_808),
        Value::UInt(18_446_744_073_709_551_615),
        Value::Float(-1.5e-7),
        Value::Double(std::f64::consts::PI),
        Value::Decimal("-12345678.90".into()),
        Value::Bytes(vec![0, 1, 2, 0xff, b'x']),
        Value::Date {
            year: 0,
            month: 2,
            day: 0,
        },
        Value::DateTime {
            year: 2026,
            month: 11,
            day: 30,
            hour: 23,
            minute: 59,
            second: 58,
            micros: 999_999,
        },
        Value::Timestamp {
            seconds: 1_764_547_200,
            micros: 12,
        },
        Value::Time {
            negative: true,
            hours: 838,
            minutes: 59,
            seconds: 59,
            micros: 0,
        },
        Value::Year(2155),
        Value::Bit(0b1010_0101),
        Value::Enum(3),
        Value::Set(0b101),
        Value::Json("{\"a\": [1, 2.5, null, \"é\"]}".into()),
    ]
}

/// The transactions of the fixture: seqno 0 (purged in the queue
/// fixture) to 9; seqno 5 is 20 KB (stored in chunks).
fn fixture() -> Vec<(Transaction, ExtractorProgress)> {
    let mut out = Vec::new();
    let mut gtid_pos = "1-9-77".parse().unwrap();
    for s in 0u64..10 {
        let gtid = Gtid::new(0, 1, 500 + s);
        let changes = match s {
            2 => vec![Change::Statement(Statement {
                sql: b"CREATE TABLE shop_eu.t2 (id INT PRIMARY KEY)".to_vec(),
                default_schema: Some("shop_eu".into()),
                context: SessionContext {
                    timestamp: 1_764_547_200,
                    timestamp_micros: Some(123),
                    sql_mode: Some(0x1234_5678),
                    flags2: Some(0x0c08_0000),
                    charset_client: Some(33),
                    collation_connection: Some(33),
                    collation_server: Some(8),
                    collation_database: Some(45),
                    time_zone: Some("+02:00".into()),
                    lc_time_names: Some(7),
                    auto_increment: Some((2, 1)),
                    insert_id: Some(41),
                    last_insert_id: Some(40),
                    rand_seeds: Some((1, 2)),
                    user_vars: vec![
                        UserVar {
                            name: "s".into(),
                            value: Some(UserVarValue::String {
                                bytes: b"abc".to_vec(),
                                collation: 33,
                            }),
                        },
                        UserVar {
                            name: "r".into(),
                            value: Some(UserVarValue::Real(0.25)),
                        },
                        UserVar {
                            name: "i".into(),
                            value: Some(UserVarValue::Int {
                                value: -1,
                                unsigned: true,
                            }),
                        },
                        UserVar {
                            name: "d".into(),
                            value: Some(UserVarValue::Decimal("1.50".into())),
                        },
                        UserVar {
                            name: "n".into(),
                            value: None,
                        },
                    ],
                },
                error_code: 0,
                thread_id: None,
            })],
            5 => vec![Change::Rows(RowsChange {
                table: 0,
                kind: RowKind::Insert,
                flags: 0x0003,
                rows: vec![RowPair {
                    before: None,
                    after: Some(RowImage {
                        columns: vec![0, 2],
                        values: vec![
                            Value::UInt(5),
                            Value::Bytes((0..20_000u32).map(|i| (i * 7 % 251) as u8).collect()),
                        ],
                    }),
                }],
            })],
            _ => {
                let values = all_values();
                let columns: Vec<u16> = (0..values.len() as u16).collect();
                vec![
                    Change::Annotation(format!("UPDATE orders SET ... /* {s} */").into_bytes()),
                    Change::Rows(RowsChange {
                        table: 0,
                        kind: if s % 2 == 0 {
                            RowKind::Update
                        } else {
                            RowKind::Delete
                        },
                        flags: 0x0001,
                        rows: vec![RowPair {
                            before: Some(RowImage {
                                columns: columns.clone(),
                                values: values.clone(),
                            }),
                            after: (s % 2 == 0).then(|| RowImage {
                                columns: vec![0, 1],
                                values: vec![Value::UInt(s), Value::Decimal("0.01".into())],
                            }),
                        }],
                    }),
                ]
            }
        };
        let txn = Transaction {
            seqno: Seqno(s),
            server_id: 1 + (s as u32 % 2),
            gtid: (s != 7).then_some(gtid),
            commit_id: (s % 3 == 0).then_some(900 + s),
            start_position: pos(12, 4 + s * 1000),
            end_position: pos(12, 1004 + s * 1000),
            commit_timestamp: 1_764_547_200 + s as u32,
            shard: if s == 2 {
                "#UNKNOWN".into()
            } else {
                "shop_eu".into()
            },
            tables: if s == 2 { vec![] } else { vec![table()] },
            changes,
            row_events: None,
            fragment: None,
        };
        if let Some(g) = txn.gtid {
            shardrep::position::GtidPos::update(&mut gtid_pos, g);
        }
        let mut progress = ExtractorProgress {
            seqno: Seqno(s),
            epoch: Epoch(if s < 4 { 0 } else { 4 }),
            position: txn.end_position.clone(),
            gtid_position: gtid_pos.clone(),
        };
        if s == 9 {
            // A resume position that is not the transaction's own end (a
            // ROTATE after it).
            progress.position = pos(13, 4);
        }
        out.push((txn, progress));
    }
    out
}

/// The fixture as format 2 writes it: its statement carries the master
/// session (`thread_id`), which format 1 did not store.
fn fixture_v2() -> Vec<(Transaction, ExtractorProgress)> {
    let mut out = fixture();
    for (t, _) in &mut out {
        for c in &mut t.changes {
            if let Change::Statement(s) = c {
                s.thread_id = Some(4242);
            }
        }
    }
    out
}

/// [`fixture_v2`] with row events kept for every transaction with rows
/// (format 3): made-up event bytes, as the codec stores them unread.
fn fixture_v3() -> Vec<(Transaction, ExtractorProgress)> {
    let mut out = fixture_v2();
    for (t, _) in &mut out {
        let rows = t
            .changes
            .iter()
            .filter(|c| matches!(c, Change::Rows(_)))
            .count();
        if rows > 0 {
            t.row_events = Some(std::sync::Arc::new(shardrep::event::RowEvents {
                format: vec![0xfd; 40],
                rows: (0..rows)
                    .map(|i| shardrep::event::RowEventBytes(vec![i as u8; 30 + i]))
                    .collect(),
            }));
        }
    }
    out
}

/// The records of [`fixture_v3`], as this version writes them.
fn records() -> Vec<u8> {
    let mut out = Vec::new();
    for (t, p) in fixture_v3() {
        encode_record(&t, &p, &mut out).unwrap();
    }
    out
}

fn queue_options(dir: &Path) -> QueueOptions {
    let mut o = QueueOptions::new(dir);
    o.config.segment_size_bytes = 16 << 10;
    o
}

#[test]
#[ignore = "writes tests/fixtures/queue/; run on purpose only"]
fn regenerate_queue_fixture() {
    let dir = fixture_dir();
    std::fs::create_dir_all(&dir).unwrap();
    // Format 1 (records-v1.bin, queue-v1/) was written by the versions
    // before format 2 and is kept as it is, and so is format 2
    // (records-v2.bin).
    std::fs::write(dir.join("records-v3.bin"), records()).unwrap();
}

#[test]
fn records_v1_decode_to_the_fixture() {
    let stored = std::fs::read(fixture_dir().join("records-v1.bin")).unwrap();
    assert_eq!(stored[0], shardrep::queue::codec::FORMAT_V1);
    let expected = fixture();
    let mut cursor = RecordCursor::new(&stored, 0, Seqno(0));
    let mut n = 0;
    while !cursor.at_end() {
        let (seqno, raw) = cursor.next_raw().unwrap();
        let (t, p) = decode_record(&raw).unwrap();
        assert_eq!(t, expected[n].0, "transaction of seqno {seqno}");
        assert_eq!(p, expected[n].1, "progress of seqno {seqno}");
        n += 1;
    }
    assert_eq!(n, expected.len());
}

// A format-1 record stored in its own file (an external record) reads
// back the same way, whole and head only.
#[test]
fn records_v1_read_from_their_own_files() {
    let stored = std::fs::read(fixture_dir().join("records-v1.bin")).unwrap();
    let expected = fixture();
    let dir = TempDir::new("v1-file");
    std::fs::create_dir_all(dir.path()).unwrap();
    let mut offset = 0;
    for (t, p) in &expected {
        let raw = shardrep::queue::codec::check_record(&stored[offset..]).unwrap();
        let path = dir.path().join(format!("{}.rec", t.seqno.get()));
        std::fs::write(&path, &stored[offset..offset + raw.len]).unwrap();
        let (rt, rp) =
            shardrep::queue::codec::read_record_file(&path, raw.len as u64, false).unwrap();
        assert_eq!((&rt, &rp), (t, p));
        let (ht, hp) =
            shardrep::queue::codec::read_record_file(&path, raw.len as u64, true).unwrap();
        assert_eq!(
            (ht.seqno, ht.end_position.clone(), &hp),
            (t.seqno, t.end_position.clone(), p)
        );
        offset += raw.len;
    }
    assert_eq!(offset, stored.len());
}

#[test]
fn records_v2_decode_to_the_fixture() {
    let stored = std::fs::read(fixture_dir().join("records-v2.bin")).unwrap();
    assert_eq!(stored[0], shardrep::queue::codec::FORMAT_V2);
    let expected = fixture_v2();
    let mut cursor = RecordCursor::new(&stored, 0, Seqno(0));
    let mut n = 0;
    while !cursor.at_end() {
        let (seqno, raw) = cursor.next_raw().unwrap();
        let (t, p) = decode_record(&raw).unwrap();
        assert_eq!(t, expected[n].0, "transaction of seqno {seqno}");
        assert_eq!(t.row_events, None);
        assert_eq!(p, expected[n].1, "progress of seqno {seqno}");
        n += 1;
    }
    assert_eq!(n, expected.len());
}

#[test]
fn records_v3_decode_to_the_fixture_and_re_encode_identically() {
    let stored = std::fs::read(fixture_dir().join("records-v3.bin")).unwrap();
    assert_eq!(stored[0], shardrep::queue::codec::FORMAT_V3);
    let expected = fixture_v3();
    assert!(expected.iter().any(|(t, _)| t.row_events.is_some()));
    let mut cursor = RecordCursor::new(&stored, 0, Seqno(0));
    let mut n = 0;
    while !cursor.at_end() {
        let (seqno, raw) = cursor.next_raw().unwrap();
        let (t, p) = decode_record(&raw).unwrap();
        assert_eq!(t, expected[n].0, "transaction of seqno {seqno}");
        assert_eq!(p, expected[n].1, "progress of seqno {seqno}");
        n += 1;
    }
    assert_eq!(n, expected.len());
    assert!(
        stored == records(),
        "this version encodes the fixture differently from format 3 as committed"
    );
}

#[test]
fn queue_v1_directory_reads_back_exactly() {
    let copy = TempDir::new("fixture");
    copy_dir(&fixture_dir().join("queue-v1"), copy.path());
    let q = TransactionQueue::open(queue_options(copy.path())).unwrap();
    let expected = fixture();
    let last = expected.len() as u64 - 1;
    assert_eq!(q.min_seqno(), Some(Seqno(1)));
    assert_eq!(q.max_seqno(), Some(Seqno(last)));
    assert_eq!(q.last_progress().as_ref(), Some(&expected[last as usize].1));
    assert!(q.info().unwrap().segments.len() >= 2);
    assert!(matches!(
        q.reader_from(Seqno(0)),
        Err(QueueError::Purged { .. })
    ));
    let mut r = q.reader_from(Seqno(1)).unwrap();
    for (t, p) in &expected[1..] {
        let (rt, rp) = r.try_next_with_progress().unwrap().unwrap();
        assert_eq!(&rt, t);
        assert_eq!(&rp, p);
    }
    assert!(r.try_next().unwrap().is_none());
    // And it keeps working as a queue.
    let mut next = expected[last as usize].0.clone();
    next.seqno = Seqno(last + 1);
    let p = ExtractorProgress::after(&next, Epoch(10));
    q.append(&next, &p).unwrap();
    assert_eq!(q.get(Seqno(last + 1)).unwrap(), Some(next));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
