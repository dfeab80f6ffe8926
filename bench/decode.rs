//! Decode throughput of the extractor on a real binlog: the binlog files of
//! a sysbench `oltp_read_write` run (8 schemas) that `bench/gen-binlog.sh`
//! writes into `target/bench-data/sysbench-binlog/` (or `$BENCH_DATA_DIR`).
//!
//! Three benchmarks, each over the whole file set per iteration, with
//! `Throughput::Bytes` = the total size of the binlog files:
//! - `decode/files_raw`: [`FileSource`] alone (read, frame, check each event);
//! - `decode/files_decode`: the same plus [`Decoder::decode_expanded`];
//! - `decode/files_transactions`: the full path to [`Transaction`]s through
//!   [`TransactionReader`] (file source, decoder, assembler): the figure that
//!   matters (target: at least 200 MB/s of binlog per core).
//!
//! Everything runs on one thread (a current-thread tokio runtime), so the
//! figures are per core. After criterion, one summary line per benchmark
//! gives MB/s (10^6 bytes) and transactions/s from the best of three extra
//! timed passes, per CPU-second of the thread (so a busy machine does not
//! skew them; the wall time is shown too). Criterion's own `thrpt` is wall
//! clock, in MiB/s.
//!
//! Run: `bench/gen-binlog.sh && cargo bench --bench decode`. Without the
//! data the bench says how to generate it and measures nothing.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use shardrep::extractor::assemble::Assembler;
use shardrep::extractor::decode::Decoder;
use shardrep::extractor::files::{FileOptions, FileSource};
use shardrep::extractor::reader::TransactionReader;
use shardrep::extractor::EventSource;
use shardrep::position::{BinlogPosition, GtidPos, Seqno};

/// The binlog to read: its directory and first file.
struct Data {
    dir: PathBuf,
    first: String,
    bytes: u64,
    files: usize,
}

fn data_dir() -> PathBuf {
    match std::env::var_os("BENCH_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/sysbench-binlog"),
    }
}

/// The generated data set, or why it is not usable.
fn load_data() -> Result<Data, String> {
    let dir = data_dir();
    if !dir.join("COMPLETE").is_file() {
        return Err(format!("no generated binlog in {}", dir.display()));
    }
    let index = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "index"))
        .ok_or_else(|| format!("no index file in {}", dir.display()))?;
    let text = std::fs::read_to_string(&index).map_err(|e| format!("{}: {e}", index.display()))?;
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter_map(|l| Path::new(l).file_name()?.to_str().map(str::to_owned))
        .collect();
    let first = names
        .first()
        .cloned()
        .ok_or_else(|| format!("{} lists no file", index.display()))?;
    let mut bytes = 0;
    for name in &names {
        let path = dir.join(name);
        bytes += std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
    }
    Ok(Data {
        dir,
        first,
        bytes,
        files: names.len(),
    })
}

fn source(data: &Data) -> FileSource {
    let start = BinlogPosition::new(data.first.clone(), 4).expect("binlog file name");
    FileSource::new(&data.dir, start, FileOptions::default()).expect("file source")
}

/// What one pass over the binlog saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    events: u64,
    bytes: u64,
    transactions: u64,
}

/// (a) Raw events from the file source.
async fn raw_pass(data: &Data) -> Counts {
    let mut src = source(data);
    let mut c = Counts::default();
    while let Some(raw) = src.next_event().await.expect("read event") {
        c.events += 1;
        c.bytes += raw.bytes.len() as u64;
        black_box(&raw);
    }
    c
}

/// (b) Raw events decoded (no assembly).
async fn decode_pass(data: &Data) -> Counts {
    let mut src = source(data);
    let mut decoder = Decoder::new();
    let mut c = Counts::default();
    while let Some(raw) = src.next_event().await.expect("read event") {
        c.bytes += raw.bytes.len() as u64;
        let events = decoder.decode_expanded(&raw).expect("decode event");
        c.events += events.len() as u64;
        black_box(events);
    }
    c
}

/// (c) The full path to transactions.
async fn transactions_pass(data: &Data) -> Counts {
    let start = BinlogPosition::new(data.first.clone(), 4).expect("binlog file name");
    let assembler = Assembler::new(Seqno::new(0), start, GtidPos::new());
    let mut reader = TransactionReader::new(source(data), assembler);
    let mut c = Counts::default();
    while let Some(txn) = reader.next_transaction().await.expect("transaction") {
        c.transactions += 1;
        c.events += txn.changes.len() as u64;
        black_box(txn);
    }
    c
}

type Pass =
    for<'a> fn(&'a Data) -> std::pin::Pin<Box<dyn std::future::Future<Output = Counts> + 'a>>;

fn passes() -> [(&'static str, &'static str, Pass); 3] {
    [
        ("files_raw", "file source, raw events", |d| {
            Box::pin(raw_pass(d))
        }),
        ("files_decode", "file source + decode", |d| {
            Box::pin(decode_pass(d))
        }),
        ("files_transactions", "full path to transactions", |d| {
            Box::pin(transactions_pass(d))
        }),
    ]
}

/// On-CPU time of the calling thread (Linux `schedstat`: user and system).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn main() {
    let data = match load_data() {
        Ok(d) => d,
        Err(why) => {
            eprintln!(
                "decode bench skipped: {why}.\n  Generate the sysbench binlog first (needs \
                 MariaDB and sysbench, about 30 s; uses a private sandbox on port 26306):\n    \
                 bench/gen-binlog.sh\n  then run: cargo bench --bench decode"
            );
            return;
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio runtime");

    // The transaction count, for the tx/s of every line.
    let reference = rt.block_on(transactions_pass(&data));
    eprintln!(
        "decode bench: {} ({} file(s), {} bytes, {} transactions)",
        data.dir.display(),
        data.files,
        data.bytes,
        reference.transactions,
    );

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("decode");
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Bytes(data.bytes));
        for (name, _, pass) in passes() {
            group.bench_function(name, |b| b.iter(|| rt.block_on(pass(&data))));
        }
        group.finish();
    }
    criterion.final_summary();

    // One line per benchmark: best of three timed passes on this thread.
    // The rate is per CPU-second of the thread (its on-CPU time from
    // /proc/thread-self/schedstat, user and system), which is the per-core
    // figure even on a busy machine; the wall time is printed beside it.
    println!(
        "\ndecode summary (one core, best of 3; {} bytes of binlog in {} file(s), {} \
         transactions; CPU {}):",
        data.bytes,
        data.files,
        reference.transactions,
        cpu_model()
    );
    for (name, what, pass) in passes() {
        let mut best: Option<(Duration, Duration)> = None;
        for _ in 0..3 {
            let cpu0 = thread_cpu();
            let t0 = Instant::now();
            let counts = rt.block_on(pass(&data));
            let wall = t0.elapsed();
            let cpu = thread_cpu()
                .zip(cpu0)
                .map_or(wall, |(b, a)| b.saturating_sub(a));
            if name == "files_transactions" {
                assert_eq!(counts.transactions, reference.transactions, "{name}");
            } else {
                // Every byte but each file's 4-byte magic is in an event.
                assert_eq!(counts.bytes, data.bytes - 4 * data.files as u64, "{name}");
            }
            if best.is_none_or(|(c, _)| cpu < c) {
                best = Some((cpu, wall));
            }
        }
        let (cpu, wall) = best.expect("three passes");
        let secs = cpu.as_secs_f64();
        println!(
            "  decode/{name:<19} {:>7.1} MB/s  {:>8.0} tx/s  per core  (cpu {:.3} s, wall {:.3} s; \
             {what})",
            data.bytes as f64 / secs / 1e6,
            reference.transactions as f64 / secs,
            secs,
            wall.as_secs_f64(),
        );
    }
}
