//! sysbench-like data for the micro-benchmarks, built in code: the table
//! `sbtest(id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))` and
//! `oltp_write_only` transactions as a `binlog_row_image=FULL` master logs
//! them (what the sandbox and the catch-up benchmark use): one index
//! update (`k`), one non-index update (`c`), one delete and one insert of
//! the same id, 4 row changes in 4 rows events, every image complete.
//!
//! Included by `bench/schedule.rs` and `bench/sql.rs` with
//! `#[path = "common/sysbench.rs"] mod sysbench;`; each uses part of it.
#![allow(dead_code)]

use shardrep::event::{
    column_type, Change, ColumnInfo, RowImage, RowKind, RowPair, RowsChange, TableInfo,
    Transaction, Value,
};
use shardrep::position::{BinlogPosition, Gtid, Seqno};

/// Row changes in one [`oltp_write_txn`].
pub const ROWS_PER_TXN: usize = 4;

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    /// The next pseudo-random number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// sysbench's `c`/`pad` text: groups of 11 digits joined by '-'.
    pub fn digits(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                if i % 12 == 11 {
                    b'-'
                } else {
                    b'0' + (self.next() % 10) as u8
                }
            })
            .collect()
    }
}

/// `schema.sbtest1` as the binlog describes it (`binlog_row_metadata=FULL`:
/// names, signedness and charset present); `primary_key` as given.
pub fn sbtest_table(schema: &str, primary_key: Option<Vec<u16>>) -> TableInfo {
    let col = |name: &str, column_type: u8, meta: u16| ColumnInfo {
        column_type,
        meta,
        nullable: false,
        name: Some(name.to_owned()),
        unsigned: (column_type == column_type::LONG).then_some(false),
        charset: (column_type == column_type::STRING).then_some(8),
    };
    TableInfo {
        table_id: 70,
        schema: schema.into(),
        table: "sbtest1".into(),
        columns: vec![
            col("id", column_type::LONG, 0),
            col("k", column_type::LONG, 0),
            col("c", column_type::STRING, 0xfe78),
            col("pad", column_type::STRING, 0xfe3c),
        ],
        primary_key,
    }
}

/// A full row image: `id`, a random `k`, 119 digits of `c`, 59 of `pad`.
pub fn full_row(rng: &mut Rng, id: i64) -> RowImage {
    RowImage {
        columns: vec![0, 1, 2, 3],
        values: vec![
            Value::Int(id),
            Value::Int((rng.next() % 100_000) as i64),
            Value::Bytes(rng.digits(119)),
            Value::Bytes(rng.digits(59)),
        ],
    }
}

/// One rows event of `kind` with one row.
pub fn rows_change(kind: RowKind, before: Option<RowImage>, after: Option<RowImage>) -> Change {
    Change::Rows(RowsChange {
        table: 0,
        kind,
        flags: 1,
        rows: vec![RowPair { before, after }],
    })
}

/// One `oltp_write_only` transaction of shard (schema) `shard`, numbered
/// `seqno`, with [`ROWS_PER_TXN`] row changes and full images.
pub fn oltp_write_txn(rng: &mut Rng, seqno: u64, shard: &str) -> Transaction {
    let row = |rng: &mut Rng| {
        let id = (rng.next() % 1_000_000) as i64 + 1;
        full_row(rng, id)
    };
    let with = |image: &RowImage, column: usize, value: Value| {
        let mut after = image.clone();
        after.values[column] = value;
        after
    };
    let index = row(rng);
    let index_after = with(&index, 1, Value::Int((rng.next() % 100_000) as i64));
    let non_index = row(rng);
    let non_index_after = with(&non_index, 2, Value::Bytes(rng.digits(119)));
    let deleted = row(rng);
    let inserted = with(&deleted, 2, Value::Bytes(rng.digits(119)));
    let offset = 4 + seqno * 1400;
    Transaction {
        seqno: Seqno(seqno),
        server_id: 1,
        gtid: Some(Gtid::new(0, 1, seqno + 1)),
        commit_id: Some(seqno / 4),
        start_position: BinlogPosition::new("mariadb-bin.000001", offset).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000001", offset + 1400).unwrap(),
        commit_timestamp: 1_700_000_000 + (seqno / 1000) as u32,
        shard: shard.into(),
        tables: vec![sbtest_table(shard, Some(vec![0]))],
        changes: vec![
            rows_change(RowKind::Update, Some(index), Some(index_after)),
            rows_change(RowKind::Update, Some(non_index), Some(non_index_after)),
            rows_change(RowKind::Delete, Some(deleted), None),
            rows_change(RowKind::Insert, None, Some(inserted)),
        ],
        row_events: None,
        fragment: None,
    }
}
