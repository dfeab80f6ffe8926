//! The scheduler's hot path, with sysbench-like `oltp_write_only`
//! transactions (`bench/common/sysbench.rs`: 4 row changes, full images)
//! spread over 16 shards `sb01`..`sb16` of service `svc`, plus a critical
//! shard `billing` (shard map `critical = true`).
//!
//! Criterion benchmarks, all with `Throughput::Elements` = transactions:
//! - `schedule/route_hash`: [`ShardRouter::route`] (shard filter, then
//!   channel by the FNV-1a hash over 8 channels) for one transaction;
//! - `schedule/route_shard_list`: the same with an explicit `shard.list`
//!   pinning every shard to a channel;
//! - `schedule/filter_only`, `schedule/assign_hash_only`: the two parts of
//!   `route_hash` ([`ShardFilter::decide_transaction`];
//!   [`ChannelAssignment::channel_of`] and `is_critical`);
//! - `schedule/marker`: [`Marker::of`], built for every transaction;
//! - `schedule/dispatch_8ch/*`: [`scheduler::run`] dispatching a stream of
//!   transactions over 8 bounded crossbeam channels (capacity and memory
//!   budget as the replicator sets them from the `[apply]` defaults), each
//!   drained by a consumer thread that stands in for an apply channel: it
//!   takes blocks of up to `block_commit_txns` transactions as the real
//!   channel does, then releases their memory and reports them committed
//!   ([`Progress::set_committed`]) without touching a database. The time
//!   runs until every consumer has committed the last transaction. Variants:
//!   `no_critical`, and `critical_1in1000` / `critical_1in100` where every
//!   1000th / 100th transaction is of the critical shard (a barrier before
//!   and after it: all channels drain, it runs alone).
//!
//! The dispatch figures are the scheduler's ceiling with free applies: the
//! cost of routing, markers, the memory budget, channel hand-off and
//! barriers. They depend on free cores (9 threads run): read them with the
//! load average the bench prints first.
//!
//! Run: `cargo bench --bench schedule` (about 45 s).

#[path = "common/sysbench.rs"]
mod sysbench;

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use crossbeam_channel::{Receiver, Sender};
use shardrep::applier::progress::Progress;
use shardrep::applier::work::{Marker, Work};
use shardrep::config::ApplyConfig;
use shardrep::event::Transaction;
use shardrep::position::{Epoch, GtidPos, Seqno};
use shardrep::scheduler::{self, Router, SchedulerCounters, SchedulerSettings, ShardRouter};
use shardrep::shard::{ChannelAssignment, ShardFilter, ShardMap};

use sysbench::{oltp_write_txn, Rng};

const CHANNELS: u16 = 8;
const SHARDS: usize = 16;
const CRITICAL_SHARD: &str = "billing";
/// Distinct transactions built once; the stream reuses them.
const POOL: usize = 1024;
/// Most transactions built (untimed) ahead of one timed scheduler run.
const CHUNK: u64 = 20_000;

fn shard_name(i: usize) -> String {
    format!("sb{:02}", i + 1)
}

fn shard_map() -> ShardMap {
    let mut text = String::from("shard_id master critical\n");
    for i in 0..SHARDS {
        writeln!(text, "{} svc false", shard_name(i)).unwrap();
    }
    writeln!(text, "{CRITICAL_SHARD} svc true").unwrap();
    ShardMap::parse(&text, "bench").expect("shard map")
}

/// Every shard pinned to a channel, as a DBA balancing by hand would.
fn shard_list() -> ChannelAssignment {
    let mut text = String::from("# bench\n");
    for i in 0..SHARDS {
        writeln!(text, "{}={}", shard_name(i), i % CHANNELS as usize).unwrap();
    }
    writeln!(text, "(critical)={CRITICAL_SHARD}").unwrap();
    ChannelAssignment::parse(&text, CHANNELS, "bench").expect("shard list")
}

fn router(assignment: ChannelAssignment) -> ShardRouter {
    ShardRouter {
        filter: ShardFilter::new("svc", shard_map()),
        assignment,
        live_map: None,
        foreign_keys: None,
        row_keys: None,
    }
}

/// `POOL` transactions of random shards.
fn pool() -> Vec<Transaction> {
    let mut rng = Rng(0x5eed);
    (0..POOL as u64)
        .map(|s| {
            let shard = shard_name((rng.next() % SHARDS as u64) as usize);
            oltp_write_txn(&mut rng, s, &shard)
        })
        .collect()
}

/// Stands in for an apply channel: takes blocks as the real one does
/// (`Work::Apply` items not `alone`, up to `block` of them), then releases
/// their memory and reports them committed; SYNC and STOP markers
/// are recorded at once. Ends when the scheduler's side closes.
fn consumer(index: usize, input: Receiver<Work>, progress: Arc<Progress>, block: usize) {
    let mut pending: Option<Work> = None;
    loop {
        let first = match pending.take() {
            Some(w) => w,
            None => match input.recv() {
                Ok(w) => w,
                Err(_) => return,
            },
        };
        match first {
            Work::Sync(marker) | Work::Stop(marker) => progress.set_committed(index, marker.seqno),
            Work::Apply {
                txn, alone, bytes, ..
            } => {
                let mut last = txn.seqno;
                let mut block_bytes = bytes;
                let mut held = vec![txn];
                if !alone {
                    while held.len() < block {
                        match input.try_recv() {
                            Ok(Work::Apply {
                                txn,
                                alone: false,
                                bytes,
                                ..
                            }) => {
                                last = txn.seqno;
                                block_bytes += bytes;
                                held.push(txn);
                            }
                            Ok(other) => {
                                pending = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                }
                // "Committed": reported to the low-water mark, and the
                // block's transactions freed here, on the channel's thread,
                // as in the real channel.
                progress.committed_block(held.iter().map(|t| t.seqno));
                drop(held);
                progress.release_memory(block_bytes);
                progress.set_committed(index, last);
            }
        }
    }
}

/// 8 channels with their consumer threads, kept across scheduler runs.
struct Channels {
    senders: Vec<Sender<Work>>,
    progress: Arc<Progress>,
    consumers: Vec<JoinHandle<()>>,
    apply: ApplyConfig,
    next_seqno: u64,
    serializations: u64,
}

impl Channels {
    fn start() -> Channels {
        let apply = ApplyConfig::default();
        let progress = Arc::new(
            Progress::new(&vec![None; CHANNELS as usize])
                .with_memory_budget(apply.max_in_flight_bytes),
        );
        // Queue capacity as the replicator sizes it.
        let capacity = (apply.block_commit_txns as usize).clamp(16, 1024) * 2;
        let block = apply.block_commit_txns.max(1) as usize;
        let mut senders = Vec::new();
        let mut consumers = Vec::new();
        for index in 0..CHANNELS as usize {
            let (tx, rx) = crossbeam_channel::bounded::<Work>(capacity);
            let progress = progress.clone();
            senders.push(tx);
            consumers.push(
                std::thread::Builder::new()
                    .name(format!("bench-consumer-{index:02}"))
                    .spawn(move || consumer(index, rx, progress, block))
                    .expect("spawn"),
            );
        }
        Channels {
            senders,
            progress,
            consumers,
            apply,
            next_seqno: 0,
            serializations: 0,
        }
    }

    /// Dispatches `count` transactions from `pool` (every
    /// `critical_every`th of the critical shard) through one scheduler run;
    /// the time from the run's start until every channel has committed the
    /// last one. Building the transactions is not timed.
    fn dispatch(
        &mut self,
        router: &mut ShardRouter,
        pool: &[Transaction],
        count: u64,
        critical_every: Option<u64>,
    ) -> Duration {
        let first = self.next_seqno;
        let last = Seqno(first + count - 1);
        let txns: Vec<Transaction> = (first..first + count)
            .map(|s| {
                let mut t = pool[(s % POOL as u64) as usize].clone();
                t.seqno = Seqno(s);
                if critical_every.is_some_and(|n| s % n == n - 1) {
                    t.shard = CRITICAL_SHARD.into();
                }
                t
            })
            .collect();
        let mut stream = txns.into_iter();
        let counters = SchedulerCounters::default();
        let stop = AtomicBool::new(false);
        let settings = SchedulerSettings {
            sync_interval_seqnos: self.apply.sync_interval_seqnos,
            poll: Duration::from_millis(100),
            ..SchedulerSettings::until(last)
        };
        let start = Instant::now();
        scheduler::run(
            |_| {
                Ok(stream.next().map(|txn| scheduler::Queued {
                    txn,
                    epoch: Epoch(0),
                    gtid_position: GtidPos::new(),
                }))
            },
            router,
            &self.senders,
            &self.progress,
            &counters,
            &stop,
            &settings,
        )
        .expect("scheduler run");
        let drained = self.progress.wait_until(|p| {
            (0..CHANNELS as usize).all(|c| p.committed(c).is_some_and(|s| s >= last))
        });
        let elapsed = start.elapsed();
        assert!(drained, "a consumer failed");
        assert_eq!(counters.dispatched.load(Ordering::Relaxed), count);
        self.serializations += counters.serializations.load(Ordering::Relaxed);
        self.next_seqno += count;
        elapsed
    }

    fn close(self) {
        drop(self.senders);
        for c in self.consumers {
            c.join().expect("consumer");
        }
    }
}

fn main() {
    eprintln!("schedule bench: {}", load_note());
    let pool = pool();
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        // Fewer bootstrap resamples than criterion's 100,000: the analysis
        // otherwise takes seconds per benchmark on a busy machine.
        .nresamples(10_000)
        .configure_from_args();

    let mut group = criterion.benchmark_group("schedule");
    group.throughput(Throughput::Elements(1));
    for (name, assignment) in [
        (
            "route_hash",
            ChannelAssignment::hashed(CHANNELS).expect("channels"),
        ),
        ("route_shard_list", shard_list()),
    ] {
        let mut router = router(assignment);
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                let route = router.route(&pool[i % POOL]);
                i += 1;
                black_box(route)
            })
        });
    }
    // The parts of route_hash, and the marker the scheduler builds for
    // every transaction.
    let mut filter = ShardFilter::new("svc", shard_map());
    let mut i = 0;
    group.bench_function("filter_only", |b| {
        b.iter(|| {
            let decision = filter.decide_transaction(&pool[i % POOL]);
            i += 1;
            black_box(decision)
        })
    });
    let hashed = ChannelAssignment::hashed(CHANNELS).expect("channels");
    let map = shard_map();
    group.bench_function("assign_hash_only", |b| {
        b.iter(|| {
            let shard = &pool[i % POOL].shard;
            i += 1;
            black_box((hashed.channel_of(shard), hashed.is_critical(shard, &map)))
        })
    });
    group.bench_function("marker", |b| {
        b.iter(|| {
            let marker = Marker::of(&pool[i % POOL], Epoch(0));
            i += 1;
            black_box(marker)
        })
    });
    group.finish();

    let mut group = criterion.benchmark_group("schedule/dispatch_8ch");
    group.throughput(Throughput::Elements(1));
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(2));
    let mut barriers = Vec::new();
    for (name, critical_every) in [
        ("no_critical", None),
        ("critical_1in1000", Some(1000)),
        ("critical_1in100", Some(100)),
    ] {
        let mut channels = Channels::start();
        let mut router = router(ChannelAssignment::hashed(CHANNELS).expect("channels"));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(CHUNK);
                    total += channels.dispatch(&mut router, &pool, n, critical_every);
                    left -= n;
                }
                total
            })
        });
        barriers.push((name, channels.next_seqno, channels.serializations));
        channels.close();
    }
    group.finish();
    criterion.final_summary();
    for (name, txns, serializations) in barriers {
        println!("dispatch_8ch/{name}: {txns} transactions dispatched, {serializations} barriers");
    }
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
