//! SQL building for row changes ([`SqlBuilder::plan`]) and the literal
//! path of batched blocks ([`interpolate`], [`literal`]), with sysbench-like
//! data (`bench/common/sysbench.rs`): `sbtest1(id INT PRIMARY KEY, k INT,
//! c CHAR(120), pad CHAR(60))`, `oltp_write_only` transactions of 4 row
//! changes with full images (index update, non-index update, delete,
//! insert).
//!
//! Criterion benchmarks (`Throughput::Elements` = row changes, except
//! `literal/*`: parameters):
//! - `sql/oltp_block/plan`: statements and parameter vectors for a block
//!   of `block_commit_txns` (default 100) transactions, 400 row changes,
//!   with the builder's text cache warm (the steady state);
//! - `sql/oltp_block/interpolate`: the block's planned statements turned
//!   into one multi-statement text (`;\n`-separated, as the batched block
//!   path sends it);
//! - `sql/oltp_block/plan_interpolate`: both, as the batched path runs
//!   them, statement by statement;
//! - `sql/nokey_block/plan` and `.../plan_interpolate`: the same block on
//!   a table without a primary key (UPDATE/DELETE match every column with
//!   `<=>` and `LIMIT 1`);
//! - `sql/insert_100_rows/plan` and `.../plan_interpolate`: one rows event
//!   of 100 inserted rows, grouped into multi-row INSERTs of 64+16+16+4;
//! - `sql/literal/int`, `sql/literal/char120`: [`literal`] of one INT and
//!   one 119-byte CHAR value.
//!
//! Not included: the channel's per-rows-event work around the builder
//! (table shape lookup, signedness fix-up of the column list, the batch
//! split at `BATCH_BYTES`) and anything on the connection.
//!
//! Run: `cargo bench --bench sql` (about 45 s).

#[path = "common/sysbench.rs"]
mod sysbench;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use mysql_async::Value as Param;
use shardrep::applier::sql::{PlannedStatement, SqlBuilder, TableShape};
use shardrep::config::ApplyConfig;
use shardrep::event::{Change, RowKind, RowPair, RowsChange, Transaction};
use shardrep::mysql::{interpolate, literal};

use sysbench::{full_row, oltp_write_txn, Rng, ROWS_PER_TXN};

const SHARD: &str = "sb01";

fn shape(primary_key: bool) -> TableShape {
    TableShape {
        schema: SHARD.into(),
        table: "sbtest1".into(),
        columns: vec!["id".into(), "k".into(), "c".into(), "pad".into()],
        primary_key: primary_key.then(|| vec![0]),
    }
}

/// Plans every rows event of `block` into `out`.
fn plan_block(
    builder: &mut SqlBuilder,
    block: &[Transaction],
    shape: &TableShape,
    out: &mut Vec<PlannedStatement>,
) {
    for txn in block {
        for change in &txn.changes {
            if let Change::Rows(rows) = change {
                builder
                    .plan(rows, &txn.table_of(rows).columns, shape, out)
                    .expect("plan");
            }
        }
    }
}

/// Appends `statement` to the multi-statement `text`, as the batched block
/// path does; `scratch` is reused.
fn push_statement(statement: &PlannedStatement, scratch: &mut String, text: &mut String) {
    scratch.clear();
    interpolate(&statement.sql, &statement.params, scratch).expect("interpolate");
    text.push_str(";\n");
    text.push_str(scratch);
}

/// The batched block path: each rows event planned, each statement
/// interpolated into `text` at once.
fn plan_interpolate_block(
    builder: &mut SqlBuilder,
    block: &[Transaction],
    shape: &TableShape,
    planned: &mut Vec<PlannedStatement>,
    scratch: &mut String,
    text: &mut String,
) {
    text.clear();
    text.push_str("START TRANSACTION");
    for txn in block {
        for change in &txn.changes {
            if let Change::Rows(rows) = change {
                planned.clear();
                builder
                    .plan(rows, &txn.table_of(rows).columns, shape, planned)
                    .expect("plan");
                for statement in planned.drain(..) {
                    push_statement(&statement, scratch, text);
                }
            }
        }
    }
}

fn main() {
    eprintln!("sql bench: {}", load_note());
    let block_txns = ApplyConfig::default().block_commit_txns as u64;
    let mut rng = Rng(0x5eed);
    let block: Vec<Transaction> = (0..block_txns)
        .map(|s| oltp_write_txn(&mut rng, s, SHARD))
        .collect();
    let block_rows = block_txns * ROWS_PER_TXN as u64;
    let insert_rows = 100u64;
    let insert_txn = {
        let mut t = oltp_write_txn(&mut rng, 0, SHARD);
        t.changes = vec![Change::Rows(RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 1,
            rows: (0..insert_rows as i64)
                .map(|id| RowPair {
                    before: None,
                    after: Some(full_row(&mut rng, id + 1)),
                })
                .collect(),
        })];
        t
    };

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        // Fewer bootstrap resamples than criterion's 100,000: the analysis
        // otherwise takes seconds per benchmark on a busy machine.
        .nresamples(10_000)
        .configure_from_args();
    let mut group = criterion.benchmark_group("sql");
    let mut planned = Vec::new();
    let mut scratch = String::new();
    let mut text = String::new();
    let mut sizes = Vec::new();

    for (name, txns, rows, key) in [
        ("oltp_block", &block[..], block_rows, true),
        ("nokey_block", &block[..], block_rows, false),
        (
            "insert_100_rows",
            std::slice::from_ref(&insert_txn),
            insert_rows,
            true,
        ),
    ] {
        group.throughput(Throughput::Elements(rows));
        let shape = shape(key);
        let mut builder = SqlBuilder::new();
        group.bench_function(BenchmarkId::new(name, "plan"), |b| {
            b.iter(|| {
                planned.clear();
                plan_block(&mut builder, txns, &shape, &mut planned);
                black_box(&planned);
            })
        });
        if name == "oltp_block" {
            // `planned` holds the block's statements.
            group.bench_function(BenchmarkId::new(name, "interpolate"), |b| {
                b.iter(|| {
                    text.clear();
                    text.push_str("START TRANSACTION");
                    for statement in &planned {
                        push_statement(statement, &mut scratch, &mut text);
                    }
                    black_box(&text);
                })
            });
        }
        group.bench_function(BenchmarkId::new(name, "plan_interpolate"), |b| {
            b.iter(|| {
                plan_interpolate_block(
                    &mut builder,
                    txns,
                    &shape,
                    &mut planned,
                    &mut scratch,
                    &mut text,
                );
                black_box(&text);
            })
        });
        planned.clear();
        plan_block(&mut builder, txns, &shape, &mut planned);
        plan_interpolate_block(
            &mut builder,
            txns,
            &shape,
            &mut planned,
            &mut scratch,
            &mut text,
        );
        sizes.push((
            name,
            rows,
            planned_count(&mut builder, txns, &shape),
            text.len(),
        ));
    }

    group.throughput(Throughput::Elements(1));
    let int = Param::Int(123_456);
    let char120 = Param::Bytes(Rng(7).digits(119));
    group.bench_function(BenchmarkId::new("literal", "int"), |b| {
        b.iter(|| black_box(literal(black_box(&int))))
    });
    group.bench_function(BenchmarkId::new("literal", "char120"), |b| {
        b.iter(|| black_box(literal(black_box(&char120))))
    });
    group.finish();
    criterion.final_summary();

    for (name, rows, statements, bytes) in sizes {
        println!(
            "{name}: {rows} row changes -> {statements} statements, {bytes} bytes of block SQL ({:.0} bytes per row change)",
            bytes as f64 / rows as f64
        );
    }
}

fn planned_count(builder: &mut SqlBuilder, txns: &[Transaction], shape: &TableShape) -> usize {
    let mut out = Vec::new();
    plan_block(builder, txns, shape, &mut out);
    out.len()
}

/// The machine's load, to read the wall-clock figures with.
fn load_note() -> String {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("load average {load} on {cpus} CPUs")
}
