//! Helpers shared by the `queue_*` integration tests: temporary
//! directories under cargo's target tmp dir and synthetic transactions.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use shardrep::event::{
    column_type, Change, ColumnInfo, RowImage, RowKind, RowPair, RowsChange, SessionContext,
    Statement, TableInfo, Transaction, Value,
};
use shardrep::position::{BinlogPosition, Epoch, Gtid, Seqno};
use shardrep::queue::ExtractorProgress;

/// A directory under `target/tmp`, removed when dropped (kept when the
/// test panics, for inspection).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "queue-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A transaction whose content depends on `seqno` and carries `payload`
/// bytes of blob data.
pub fn txn(seqno: u64, payload: usize) -> Transaction {
    let table = TableInfo {
        table_id: 42,
        schema: format!("db{}", seqno % 5),
        table: "t".into(),
        columns: vec![
            ColumnInfo {
                column_type: column_type::LONGLONG,
                meta: 0,
                nullable: false,
                name: Some("id".into()),
                unsigned: Some(true),
                charset: None,
            },
            ColumnInfo {
                column_type: column_type::BLOB,
                meta: 4,
                nullable: true,
                name: Some("v".into()),
                unsigned: None,
                charset: Some(63),
            },
        ],
        primary_key: Some(vec![0]),
    };
    let blob: Vec<u8> = (0..payload)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seqno) as u8)
        .collect();
    Transaction {
        seqno: Seqno(seqno),
        server_id: 7,
        gtid: Some(Gtid::new(0, 7, 5000 + seqno)),
        commit_id: seqno.is_multiple_of(3).then_some(seqno / 3),
        start_position: BinlogPosition::new("mariadb-bin.000003", 1000 + seqno * 64).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000003", 1064 + seqno * 64).unwrap(),
        commit_timestamp: 1_760_000_000 + seqno as u32,
        shard: format!("db{}", seqno % 5),
        tables: vec![table],
        changes: vec![
            Change::Annotation(format!("INSERT INTO t VALUES ({seqno}, ...)").into_bytes()),
            Change::Rows(RowsChange {
                table: 0,
                kind: RowKind::Insert,
                flags: 1,
                rows: vec![RowPair {
                    before: None,
                    after: Some(RowImage {
                        columns: vec![0, 1],
                        values: vec![Value::UInt(seqno), Value::Bytes(blob)],
                    }),
                }],
            }),
            Change::Statement(Statement {
                sql: b"DO 1".to_vec(),
                default_schema: None,
                context: SessionContext::default(),
                error_code: 0,
                thread_id: None,
            }),
        ],
        row_events: None,
        fragment: None,
    }
}

/// The progress right after `t` in a run that started at seqno 0.
pub fn progress(t: &Transaction) -> ExtractorProgress {
    ExtractorProgress::after(t, Epoch(0))
}

/// `log` says what a test is doing (visible with --nocapture).
pub fn note(text: &str) {
    eprintln!("[queue test] {text}");
}

/// A binlog file's bytes without its last event when that is a ROTATE
/// (type 4): the file source then moves on to the next file of the
/// directory, and a non-following extraction ends cleanly at the last one.
pub fn cut_closing_rotate(bytes: &[u8]) -> Vec<u8> {
    let mut pos = 4;
    while pos + 19 <= bytes.len() {
        let size = u32::from_le_bytes(bytes[pos + 9..pos + 13].try_into().unwrap()) as usize;
        if bytes[pos + 4] == 4 && pos + size == bytes.len() {
            return bytes[..pos].to_vec();
        }
        if size < 19 {
            break;
        }
        pos += size;
    }
    bytes.to_vec()
}
