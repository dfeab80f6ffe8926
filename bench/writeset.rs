//! The writeset of one transaction ([`Writesets::writeset`]), with
//! sysbench-like data (`bench/common/sysbench.rs`): the table
//! `sbtest1(id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))` (`k` has
//! a non-unique index: no key of its own) in 16 schemas `sb01`..`sb16`,
//! full row images.
//!
//! Criterion benchmarks, all with `Throughput::Elements` = transactions
//! (criterion's time is ns per transaction):
//! - `writeset/oltp_read_write`: what sysbench's `oltp_read_write` (and
//!   `oltp_write_only`) writes with its defaults: one index update, one
//!   non-index update, one delete and one insert of the same id: 4 row
//!   changes in 4 rows events;
//! - `writeset/oltp_6_changes`: the same with two index and two non-index
//!   updates (`--index_updates=2 --non_index_updates=2`): 6 row changes;
//! - `writeset/ci_unique_key_6_changes`: 6 row changes (updates) of a table
//!   `users(id INT PRIMARY KEY, email VARCHAR(64) utf8mb4_general_ci
//!   UNIQUE, code CHAR(8) utf8mb4_bin UNIQUE, note VARCHAR(100))` with
//!   28-character emails: the case fold and three keys per image.
//!
//! One [`Writeset`] is reused across iterations, as the scheduler would:
//! after the first transaction nothing is allocated.
//!
//! Run: `cargo bench --bench writeset` (about 15 s).

#[path = "common/sysbench.rs"]
mod sysbench;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use shardrep::event::{Change, RowImage, RowKind, Transaction, Value};
use shardrep::shard::writeset::{ColumnDef, TableKeys, UniqueKey, Writeset, Writesets};

use sysbench::{oltp_write_txn, rows_change, Rng};

const SHARDS: usize = 16;
/// Distinct transactions built once; the benchmark cycles through them.
const POOL: usize = 1024;

fn shard_name(i: usize) -> String {
    format!("sb{:02}", i + 1)
}

/// `schema.sbtest1` as the replica's information_schema describes it.
fn sbtest_keys(schema: &str) -> TableKeys {
    TableKeys::new(
        schema,
        "sbtest1",
        vec![
            ColumnDef::new("id", "int"),
            ColumnDef::new("k", "int"),
            ColumnDef::new("c", "char").collation("utf8mb4_general_ci"),
            ColumnDef::new("pad", "char").collation("utf8mb4_general_ci"),
        ],
    )
    .with_key(UniqueKey::new("PRIMARY", &[0]))
}

fn users_keys(schema: &str) -> TableKeys {
    TableKeys::new(
        schema,
        "users",
        vec![
            ColumnDef::new("id", "int"),
            ColumnDef::new("email", "varchar")
                .collation("utf8mb4_general_ci")
                .nullable(),
            ColumnDef::new("code", "char").collation("utf8mb4_bin"),
            ColumnDef::new("note", "varchar")
                .collation("utf8mb4_general_ci")
                .nullable(),
        ],
    )
    .with_key(UniqueKey::new("PRIMARY", &[0]))
    .with_key(UniqueKey::new("uk_email", &[1]))
    .with_key(UniqueKey::new("uk_code", &[2]))
}

fn writesets() -> Writesets {
    let mut tables = Vec::new();
    for i in 0..SHARDS {
        tables.push(sbtest_keys(&shard_name(i)));
        tables.push(users_keys(&shard_name(i)));
    }
    Writesets::from_tables(tables)
}

/// `oltp_write_txn` with two more updates (one index, one non-index) of
/// another transaction: 6 row changes.
fn six_changes(rng: &mut Rng, seqno: u64, shard: &str) -> Transaction {
    let mut txn = oltp_write_txn(rng, seqno, shard);
    let more = oltp_write_txn(rng, seqno, shard);
    txn.changes.extend(more.changes.into_iter().take(2));
    txn
}

fn user_row(rng: &mut Rng, id: i64) -> RowImage {
    let email = format!("User.{:010}@Example.COM", rng.next() % 10_000_000_000);
    RowImage {
        columns: vec![0, 1, 2, 3],
        values: vec![
            Value::Int(id),
            Value::Bytes(email.into_bytes()),
            Value::Bytes(format!("C{:07}", rng.next() % 10_000_000).into_bytes()),
            Value::Bytes(rng.digits(100)),
        ],
    }
}

/// 6 updates of `users` rows, each changing the note.
fn users_txn(rng: &mut Rng, seqno: u64, shard: &str) -> Transaction {
    let mut txn = oltp_write_txn(rng, seqno, shard);
    txn.tables[0].table = "users".into();
    txn.changes = (0..6)
        .map(|_| {
            let id = (rng.next() % 1_000_000) as i64 + 1;
            let before = user_row(rng, id);
            let mut after = before.clone();
            after.values[3] = Value::Bytes(rng.digits(100));
            rows_change(RowKind::Update, Some(before), Some(after))
        })
        .collect::<Vec<Change>>();
    txn
}

/// Builds transaction `seqno` of a shard.
type Make = fn(&mut Rng, u64, &str) -> Transaction;

fn pool(make: Make) -> Vec<Transaction> {
    let mut rng = Rng(0x5eed);
    (0..POOL as u64)
        .map(|s| {
            let shard = shard_name((rng.next() % SHARDS as u64) as usize);
            make(&mut rng, s, &shard)
        })
        .collect()
}

fn main() {
    let w = writesets();
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .nresamples(10_000)
        .configure_from_args();
    let mut group = criterion.benchmark_group("writeset");
    group.throughput(Throughput::Elements(1));
    let cases: [(&str, Make); 3] = [
        ("oltp_read_write", oltp_write_txn),
        ("oltp_6_changes", six_changes),
        ("ci_unique_key_6_changes", users_txn),
    ];
    for (name, make) in cases {
        let txns = pool(make);
        let mut out = Writeset::default();
        // Sanity: the keys the case is about (not timed).
        w.writeset(&txns[0], &mut out);
        assert!(out.fallbacks.is_empty(), "{name}: {:?}", out.fallbacks);
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                w.writeset(&txns[i % POOL], &mut out);
                i += 1;
                black_box(out.keys.len())
            })
        });
    }
    group.finish();
    criterion.final_summary();
}
