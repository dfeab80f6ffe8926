//! Throughput and space of the on-disk transaction queue
//! ([`TransactionQueue`]) with sysbench-sized transactions, built in code:
//! an `oltp_write_only`-like transaction on `sbtest(id INT, k INT,
//! c CHAR(120), pad CHAR(60))` with 5 row changes (a delete and an insert
//! with full images, three updates with minimal images), about 700 bytes
//! once encoded.
//!
//! Criterion benchmarks (`Throughput::Elements` = transactions):
//! - `queue/append`: appends to one queue with the default flush policy
//!   (4 MiB / 100 ms group flushes in the background);
//! - `queue/read`: sequential reading of a prefilled queue by one reader.
//!
//! Then summary lines (targets from issue 4):
//! - append: transactions/s and MB/s (10^6 bytes of encoded records) for
//!   300,000 transactions, timed until the last one is durable (target
//!   >= 50,000 tx/s);
//! - read: transactions/s reading them back after reopening the queue
//!   (target >= 200,000 tx/s);
//! - space: bytes on disk per encoded byte, for the full queue and in a
//!   steady state of appending and purging (16 MiB segments, the last
//!   150,000 transactions kept; target <= 2x after purge settles).
//!
//! Run: `cargo bench --bench queue` (about 1-2 minutes; the queues live
//! under `target/tmp/queue-bench-<pid>/` and are deleted at the end; about
//! 1.5 GB of disk at the peak).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use shardrep::event::{
    column_type, Change, ColumnInfo, RowImage, RowKind, RowPair, RowsChange, TableInfo,
    Transaction, Value,
};
use shardrep::position::{BinlogPosition, Epoch, Gtid, Seqno};
use shardrep::queue::codec::record_bytes;
use shardrep::queue::{ExtractorProgress, QueueOptions, TransactionQueue};

const APPEND_COUNT: u64 = 300_000;
const CHURN_COUNT: u64 = 1_000_000;
const CHURN_KEEP: u64 = 300_000;
const POOL: usize = 1024;

/// Per process: two bench runs at once must not delete each other's data.
fn bench_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("queue-bench-{}", std::process::id()))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = bench_root().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// sysbench's `c`/`pad` text: groups of 11 digits joined by '-'.
    fn digits(&mut self, len: usize) -> Vec<u8> {
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

fn sbtest_table() -> TableInfo {
    let col = |name: &str, column_type: u8, meta: u16, nullable: bool| ColumnInfo {
        column_type,
        meta,
        nullable,
        name: Some(name.to_owned()),
        unsigned: if column_type == column_type::LONG {
            Some(false)
        } else {
            None
        },
        charset: if column_type == column_type::STRING {
            Some(8)
        } else {
            None
        },
    };
    TableInfo {
        table_id: 70,
        schema: "sbtest1".into(),
        table: "sbtest3".into(),
        columns: vec![
            col("id", column_type::LONG, 0, false),
            col("k", column_type::LONG, 0, false),
            col("c", column_type::STRING, 0xfe78, false),
            col("pad", column_type::STRING, 0xfe3c, false),
        ],
        primary_key: Some(vec![0]),
    }
}

fn sbtest_row(rng: &mut Rng, id: i64) -> RowImage {
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

/// One sysbench-like transaction with 5 row changes: the insert and the
/// delete with full images, the three updates with minimal ones (primary
/// key before, changed columns after).
fn sysbench_txn(rng: &mut Rng, seqno: u64) -> Transaction {
    let id = (rng.next() % 1_000_000) as i64;
    let change = |kind, before: Option<RowImage>, after: Option<RowImage>| {
        Change::Rows(RowsChange {
            table: 0,
            kind,
            flags: 1,
            rows: vec![RowPair { before, after }],
        })
    };
    let key = |id: i64| RowImage {
        columns: vec![0],
        values: vec![Value::Int(id)],
    };
    let k = |rng: &mut Rng| RowImage {
        columns: vec![1],
        values: vec![Value::Int((rng.next() % 100_000) as i64)],
    };
    let c = RowImage {
        columns: vec![2],
        values: vec![Value::Bytes(rng.digits(119))],
    };
    let offset = 4 + seqno * 1100;
    Transaction {
        seqno: Seqno(seqno),
        server_id: 1,
        gtid: Some(Gtid::new(0, 1, seqno + 1)),
        commit_id: Some(seqno / 4),
        start_position: BinlogPosition::new("mariadb-bin.000001", offset).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000001", offset + 1100).unwrap(),
        commit_timestamp: 1_700_000_000 + (seqno / 1000) as u32,
        shard: "sbtest1".into(),
        tables: vec![sbtest_table()],
        changes: vec![
            change(RowKind::Update, Some(key(id)), Some(k(rng))),
            change(RowKind::Update, Some(key(id + 1)), Some(c)),
            change(RowKind::Delete, Some(sbtest_row(rng, id + 2)), None),
            change(RowKind::Insert, None, Some(sbtest_row(rng, id + 2))),
            change(RowKind::Update, Some(key(id + 3)), Some(k(rng))),
        ],
        row_events: None,
        fragment: None,
    }
}

/// A pool of distinct transactions; appends reuse them with the right
/// seqno (building a transaction is the extractor's cost, not the queue's).
struct Pool {
    txns: Vec<Transaction>,
    encoded: Vec<usize>,
}

impl Pool {
    fn new() -> Pool {
        let mut rng = Rng(0x5eed);
        let txns: Vec<Transaction> = (0..POOL as u64)
            .map(|s| sysbench_txn(&mut rng, s))
            .collect();
        let encoded = txns
            .iter()
            .map(|t| {
                record_bytes(t, &ExtractorProgress::after(t, Epoch(0)))
                    .unwrap()
                    .len()
            })
            .collect();
        Pool { txns, encoded }
    }

    fn mean_encoded(&self) -> f64 {
        self.encoded.iter().sum::<usize>() as f64 / self.encoded.len() as f64
    }

    /// Appends seqno `seqno` (pool entry `seqno % POOL`); returns its
    /// encoded size.
    fn append(&mut self, q: &TransactionQueue, seqno: u64) -> usize {
        let i = (seqno % POOL as u64) as usize;
        let t = &mut self.txns[i];
        t.seqno = Seqno(seqno);
        t.gtid = Some(Gtid::new(0, 1, seqno + 1));
        q.append(t, &ExtractorProgress::after(t, Epoch(0)))
            .expect("append");
        self.encoded[i]
    }
}

fn mb(bytes: f64) -> f64 {
    bytes / 1e6
}

/// CPU time of the calling thread (Linux schedstat).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        text.split_whitespace().next()?.parse().ok()?,
    ))
}

/// CPU time of the whole process, all threads (user + system, in clock
/// ticks of 10 ms).
fn process_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn rate(count: u64, d: Option<Duration>) -> String {
    match d {
        Some(d) if !d.is_zero() => format!("{:.0}", count as f64 / d.as_secs_f64()),
        _ => "?".into(),
    }
}

fn main() {
    let mut pool = Pool::new();
    eprintln!(
        "queue bench: sysbench-like transactions of {:.0} encoded bytes on average; data under {}",
        pool.mean_encoded(),
        bench_root().display()
    );

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("queue");
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Elements(1));
        let q =
            TransactionQueue::open(QueueOptions::new(fresh_dir("criterion-append"))).expect("open");
        let mut next = 0u64;
        group.bench_function("append", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    pool.append(&q, next);
                    next += 1;
                }
                start.elapsed()
            })
        });
        q.close().expect("close");

        let q =
            TransactionQueue::open(QueueOptions::new(fresh_dir("criterion-read"))).expect("open");
        let stored = 100_000u64;
        for s in 0..stored {
            pool.append(&q, s);
        }
        q.flush().expect("flush");
        let mut reader = q.reader_from(Seqno(0)).expect("reader");
        group.bench_function("read", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let txn = match reader.try_next().expect("read") {
                        Some(t) => t,
                        None => {
                            reader = q.reader_from(Seqno(0)).expect("reader");
                            reader.try_next().expect("read").expect("stored")
                        }
                    };
                    black_box(txn);
                }
                start.elapsed()
            })
        });
        drop(reader);
        q.close().expect("close");
        group.finish();
    }
    criterion.final_summary();

    // Append, timed until durable.
    let dir = fresh_dir("summary");
    let q = TransactionQueue::open(QueueOptions::new(&dir)).expect("open");
    let cpu0 = process_cpu();
    let start = Instant::now();
    let mut encoded = 0u64;
    for s in 0..APPEND_COUNT {
        encoded += pool.append(&q, s) as u64;
    }
    let appended = start.elapsed();
    q.flush().expect("flush");
    let durable = start.elapsed();
    let append_cpu = process_cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    q.close().expect("close");
    let disk_full = shardrep::queue::segment::dir_size(&dir).expect("size");

    // Sequential read after reopening.
    let q = TransactionQueue::open(QueueOptions::new(&dir)).expect("reopen");
    let cpu0 = thread_cpu();
    let start = Instant::now();
    let mut count = 0u64;
    for txn in q.reader_from(Seqno(0)).expect("reader") {
        black_box(txn.expect("read"));
        count += 1;
    }
    let read = start.elapsed();
    let read_cpu = thread_cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    assert_eq!(count, APPEND_COUNT);
    drop(q);

    // Steady state with the default options: append and purge, keeping the
    // last CHURN_KEEP transactions.
    let churn_dir = fresh_dir("churn");
    let q = TransactionQueue::open(QueueOptions::new(&churn_dir)).expect("open");
    let mut sizes = Vec::with_capacity(CHURN_COUNT as usize);
    for s in 0..CHURN_COUNT {
        sizes.push(pool.append(&q, s) as u64);
        if s % 1000 == 999 && s + 1 > CHURN_KEEP {
            q.purge_below(Seqno(s + 1 - CHURN_KEEP)).expect("purge");
        }
    }
    q.flush().expect("flush");
    let churn_disk = q.size_bytes().expect("size");
    let info = q.info().expect("info");
    q.close().expect("close");
    let held_from = info.segments[0].start.0 as usize;
    let held: u64 = sizes[held_from..].iter().sum();
    let live: u64 = sizes[(CHURN_COUNT - CHURN_KEEP) as usize..].iter().sum();

    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "\nqueue summary ({APPEND_COUNT} sysbench-like transactions, {:.0} encoded bytes each on average; {}):",
        encoded as f64 / APPEND_COUNT as f64,
        load_note()
    );
    println!(
        "  append, default flush policy, until durable: {:>7.0} tx/s {:>6.1} MB/s wall; {} tx per CPU-second (all threads)   [target >= 50000 tx/s]",
        APPEND_COUNT as f64 / secs(durable),
        mb(encoded as f64) / secs(durable),
        rate(APPEND_COUNT, append_cpu),
    );
    println!(
        "    (appends alone, before the final flush: {:.0} tx/s)",
        APPEND_COUNT as f64 / secs(appended)
    );
    println!(
        "  sequential read after reopen, one reader:   {:>7.0} tx/s {:>6.1} MB/s wall; {} tx per CPU-second   [target >= 200000 tx/s]",
        APPEND_COUNT as f64 / secs(read),
        mb(encoded as f64) / secs(read),
        rate(APPEND_COUNT, read_cpu),
    );
    println!(
        "  space, one segment, no purge: {:.1} MB on disk for {:.1} MB encoded = {:.2}x",
        mb(disk_full as f64),
        mb(encoded as f64),
        disk_full as f64 / encoded as f64
    );
    println!(
        "  space after purge settles (default options; {CHURN_COUNT} appended, last {CHURN_KEEP} kept; {} segment(s) left):",
        info.segments.len()
    );
    println!(
        "    {:.1} MB on disk for the {:.1} MB of records the remaining segments hold = {:.2}x   [target <= 2x]",
        mb(churn_disk as f64),
        mb(held as f64),
        churn_disk as f64 / held as f64
    );
    println!(
        "    {:.1} MB on disk for {:.1} MB not purged = {:.2}x (purge frees whole segments: up to one segment of purged records remains)",
        mb(churn_disk as f64),
        mb(live as f64),
        churn_disk as f64 / live as f64
    );
    let _ = std::fs::remove_dir_all(bench_root());
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
