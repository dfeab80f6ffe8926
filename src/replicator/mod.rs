//! The replicator service, wired: extractor → queue → scheduler → N apply
//! channels, run in the foreground until a stop request, with a clean stop
//! (every channel's restart row at the same seqno).
//!
//! Threads: `shardrep-extract` (a tokio runtime reading the source and
//! appending to the queue), the caller's thread as the scheduler, and one
//! `shardrep-apply-NN` thread per channel.
//!
//! Shard map: stored in the catalog (`shard::store`), seeded from
//! `shard_filter.map_file` at first start.
//!
//! Start: each channel's restart row (catalog schema on the replica) says
//! what it committed; the scheduler reads the queue from the lowest of them
//! plus one and each channel skips what it already has. The extractor
//! resumes after the queue's last stored transaction, or, with an empty
//! queue, at the configured `source.start`.

mod extract_only;
mod first_start;
pub mod service;
pub mod state;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::applier::channel::{self, ChannelSettings};
use crate::applier::progress::Progress;
use crate::applier::restart::{self, RestartRow};
use crate::applier::skipped::{self, SkippedSeqno};
use crate::applier::work::Work;
use crate::config::{Config, StartPosition};
use crate::extractor::live::{gtid_start_after_purge, LiveOptions};
use crate::extractor::reader::{resolve_start, ExtractStart, Extractor};
use crate::position::{ChannelId, Epoch, Seqno};
use crate::queue::codec::ExtractorProgress;
use crate::queue::{QueueOptions, TransactionQueue};
use crate::scheduler::{self, SchedulerCounters, SchedulerSettings, ShardRouter};
use crate::shard::channel::ChannelAssignment;
use crate::shard::filter::ShardFilter;
use crate::shard::foreign_keys::{
    read_foreign_keys, ForeignKeyGroups, ForeignKeyReader, ForeignKeyRouting,
};
use crate::shard::map::ShardMap;
use crate::shard::store;

/// What a run did.
#[derive(Debug)]
pub struct RunReport {
    /// The restart rows at the end.
    pub restart_rows: Vec<RestartRow>,
    /// Transactions sent to channels.
    pub dispatched: u64,
    /// Transactions dropped by the shard filter.
    pub dropped: u64,
    /// Barriers taken.
    pub serializations: u64,
    /// Transactions skipped at the DBA's request (`skip_seqnos`).
    pub skipped: u64,
    /// Blocks rolled back and retried after a transient error.
    pub retries: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Errors of a run: what failed, with the part's own message.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run could not start: configuration files (shard map, shard
    /// list) could not be loaded, the replica refused the connection, the
    /// restart table or shard store could not be prepared.
    #[error("{message}")]
    Setup {
        /// What failed, one line.
        message: String,
        /// The server's error code (e.g. 1045), when a server sent one.
        code: Option<u16>,
    },
    /// The queue failed.
    #[error("{0}")]
    Queue(#[from] crate::queue::QueueError),
    /// A queued transaction could not be read back (a damaged record or
    /// segment): nothing from it on was applied.
    #[error("cannot read seqno {seqno} from the queue: {message}")]
    QueueRead {
        /// The seqno that could not be read.
        seqno: u64,
        /// The queue's error.
        message: String,
    },
    /// The replica's restart table failed.
    #[error("{0}")]
    Restart(#[from] restart::RestartError),
    /// The extractor stopped on an error.
    #[error("extractor: {message}")]
    Extract {
        /// What failed, one line (binlog position or master address).
        message: String,
        /// The master's error code, when it sent one.
        code: Option<u16>,
    },
    /// The scheduler or a channel stopped on an error (OFFLINE:ERROR).
    #[error("{0}")]
    Apply(#[from] scheduler::SchedulerError),
    /// Native replication's SQL thread runs on the replica (see
    /// [`crate::config::ReplicaConfig::allow_native_replication`]).
    #[error("{0}")]
    NativeReplication(String),
}

impl RunError {
    /// A [`RunError::Setup`] without a server code.
    pub fn setup(message: impl Into<String>) -> RunError {
        RunError::Setup {
            message: message.into(),
            code: None,
        }
    }

    /// A [`RunError::Setup`] for a client error `e`, with its server code.
    fn setup_client(message: String, e: &mysql_async::Error) -> RunError {
        RunError::Setup {
            message,
            code: match e {
                mysql_async::Error::Server(s) => Some(s.code),
                _ => None,
            },
        }
    }
}

/// Why the extractor thread stopped: the message and, when the master sent
/// an error packet, its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractFailure {
    /// What failed, one line.
    pub message: String,
    /// The master's error code.
    pub code: Option<u16>,
}

impl From<String> for ExtractFailure {
    fn from(message: String) -> Self {
        ExtractFailure {
            message,
            code: None,
        }
    }
}

impl From<&str> for ExtractFailure {
    fn from(message: &str) -> Self {
        ExtractFailure::from(message.to_string())
    }
}

impl From<crate::extractor::ExtractError> for ExtractFailure {
    fn from(e: crate::extractor::ExtractError) -> Self {
        let code = match &e {
            crate::extractor::ExtractError::Master { code, .. } => *code,
            _ => None,
        };
        ExtractFailure {
            message: e.to_string(),
            code,
        }
    }
}

/// How often a running service checks that native replication has not been
/// started on its replica.
pub const NATIVE_REPLICATION_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// The error for native appliers found running on the replica (`running`,
/// from [`crate::replica::running_native_appliers`]).
fn native_replication_error(config: &Config, running: &[String], when: &str) -> RunError {
    RunError::NativeReplication(format!(
        "native replication is running on the replica {}:{} {when}: {}; it and this service \
         would both apply the master's transactions and the replica would diverge. Stop it \
         (STOP SLAVE, or STOP ALL SLAVES) and go online again, or set [replica] \
         allow_native_replication = true if it replicates other data",
        config.replica.host,
        config.replica.port,
        running.join(", ")
    ))
}

/// The native appliers running on the replica, over `conn` (opened when
/// `None`). `Ok(None)` when the replica cannot be asked now (the channels
/// report a lost replica themselves).
async fn native_appliers(
    config: &Config,
    conn: &mut Option<mysql_async::Conn>,
) -> Option<Vec<String>> {
    if conn.is_none() {
        *conn = mysql_async::Conn::new(replica_opts(config)).await.ok();
    }
    match crate::replica::running_native_appliers(conn.as_mut()?).await {
        Ok(running) => Some(running),
        Err(e) => {
            tracing::warn!(error = %e, "cannot check native replication on the replica");
            *conn = None;
            None
        }
    }
}

pub(crate) fn replica_opts(config: &Config) -> mysql_async::Opts {
    channel::replica_opts(
        &config.replica.host,
        config.replica.port,
        config.replica.socket.as_deref(),
        &config.replica.user,
        config.replica.password.expose(),
    )
}

/// How one run behaves besides its configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Stop by itself once the source has no more transactions and
    /// everything is applied.
    pub stop_when_idle: bool,
    /// Seqnos never applied (the DBA's `--skip-seqno`), each logged.
    pub skip_seqnos: Vec<std::ops::RangeInclusive<u64>>,
    /// Stop cleanly once this seqno has been handled (`u64::MAX`: never);
    /// may be changed while the run goes on (`offline --at-seqno`).
    pub stop_at: Option<Arc<AtomicU64>>,
    /// When set at the time of the stop: stop without the STOP marker, so
    /// channels may end at different seqnos (`offline --immediate`).
    pub immediate: Option<Arc<AtomicBool>>,
    /// Filled by the run with its live parts, for status.
    pub observer: Option<Arc<Observer>>,
    /// A new shard map for the running filter (shard edits).
    pub map_updates: Option<Arc<Mutex<Option<ShardMap>>>>,
}

/// The live parts of a running pipeline, for status: filled by [`run`]
/// once it has started its channels.
#[derive(Debug, Default)]
pub struct Observer {
    /// Channel progress (committed seqnos and markers).
    pub progress: Mutex<Option<Arc<Progress>>>,
    /// Scheduler counters.
    pub counters: Mutex<Option<Arc<SchedulerCounters>>>,
    /// The queue.
    pub queue: Mutex<Option<Arc<TransactionQueue>>>,
    /// Set once the channels are connected and applying.
    pub applying: AtomicBool,
    /// The takeover point, when this run took over native replication.
    pub takeover: Mutex<Option<crate::replica::TakeoverPoint>>,
    /// The shards joined by foreign keys (updated after DDL).
    pub foreign_keys: Mutex<Option<Arc<Mutex<ForeignKeyGroups>>>>,
}

/// Runs the service until `stop` is set (or, with
/// `options.stop_when_idle`, until the source has no more transactions and
/// everything is applied), then stops cleanly. With `[service] role =
/// "extractor"` it only fills the queue: the replica is never connected
/// to.
///
/// # Errors
/// [`RunError`]; on an apply error the restart rows hold the last committed
/// blocks and the queue keeps everything, so a later run resumes there.
pub fn run(
    config: &Config,
    stop: Arc<AtomicBool>,
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    if config.service.role == crate::config::Role::Extractor {
        return extract_only::run(config, stop, options);
    }
    let stop_when_idle = options.stop_when_idle;
    let started = Instant::now();
    let channels = config.apply.channels;
    let catalog = config.catalog_schema();
    let queue = Arc::new(TransactionQueue::open(QueueOptions::from_config(
        &config.queue,
    ))?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::setup(format!("cannot start the async runtime: {e}")))?;
    let file_map = match &config.shard_filter.map_file {
        Some(path) => Some(ShardMap::load(path).map_err(|e| RunError::setup(e.to_string()))?),
        None => None,
    };
    let requested_skips = requested_skips(&queue, &options.skip_seqnos)?;
    let (rows, map, recorded_skips) = runtime.block_on(async {
        let mut conn = mysql_async::Conn::new(replica_opts(config))
            .await
            .map_err(|e| {
                RunError::setup_client(
                    format!(
                        "cannot connect to the replica {}:{}: {e}",
                        config.replica.host, config.replica.port
                    ),
                    &e,
                )
            })?;
        first_start::master_answers_before_catalog(config, &mut conn, &catalog).await?;
        let rows = restart::prepare(&mut conn, &catalog, channels).await?;
        // The DBA's skips are committed before anything is dispatched, and
        // every recorded one is skipped by this and every later run.
        if !requested_skips.is_empty() {
            skipped::record(&mut conn, &catalog, &requested_skips)
                .await
                .map_err(|e| RunError::setup(e.to_string()))?;
        }
        let recorded = skipped::read(&mut conn, &catalog)
            .await
            .map_err(|e| RunError::setup(e.to_string()))?;
        // The stored map is the service's; map_file seeds it at first start.
        let map = store::load_or_init(&mut conn, &catalog, file_map.as_ref())
            .await
            .map_err(|e| RunError::setup(e.to_string()))?;
        let _ = conn.disconnect().await;
        Ok::<_, RunError>((rows, map, recorded))
    })?;
    let skip_seqnos = skip_ranges(&recorded_skips);
    if !skip_seqnos.is_empty() {
        tracing::info!(
            seqnos = %recorded_skips
                .iter()
                .map(|s| s.seqno.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "seqnos recorded as skipped at the DBA's request (--skip-seqno): never applied"
        );
    }
    // An empty queue with committed restart rows: the queue was lost (or
    // is another service's). Seqnos cannot be rebuilt safely, and any
    // other start would skip or repeat transactions: refuse.
    if queue.last_progress().is_none() {
        if let Some(applied) = rows.iter().filter_map(|r| r.seqno).min() {
            let row = rows
                .iter()
                .find(|r| r.seqno == Some(applied))
                .expect("the minimum is a row's");
            let all_equal = rows.iter().all(|r| r.seqno == Some(applied));
            let different_seqnos_advice = format!(
                "The channels are at different seqnos: restore the queue directory, or \
                 re-seed the replica and `shardrepctl reset --confirm {}` (see the README, \
                 recovering a lost queue).",
                config.service.name
            );
            return Err(RunError::setup(format!(
                "the queue {} is empty, but the replica's restart rows ({catalog}.{}) show \
                 channels applied up to seqno {applied} (binlog position {}, GTID {}): the queue \
                 was lost or belongs to another service, and seqnos cannot be rebuilt. {}",
                config.queue.dir.display(),
                restart::RESTART_TABLE,
                row.event_id_text(),
                if row.gtid.is_empty() {
                    "-".to_string()
                } else {
                    row.gtid.to_string()
                },
                if all_equal {
                    "Every channel is at that seqno: `shardrepctl offline` (acknowledges this \
                     error), `shardrepctl handback` (hands the replica back to native replication \
                     there), then `shardrepctl online` takes it over afresh."
                } else {
                    &different_seqnos_advice
                }
            )));
        }
    }
    // Takeover: a service with no queue and no restart position starts
    // where the replica's native replication stopped.
    let initial_start = if queue.last_progress().is_none()
        && rows.iter().all(|r| r.seqno.is_none())
        && matches!(config.source.start, StartPosition::Takeover)
    {
        let point = runtime.block_on(take_over(config))?;
        tracing::info!(
            file = %point.file,
            pos = point.pos,
            gtid_slave_pos = %point.gtid_slave_pos,
            "took over from native replication"
        );
        let start = point
            .position()
            .map_err(|e| RunError::setup(e.to_string()))?;
        let gtid = point.gtid_slave_pos.clone();
        // Where the takeover started, on the rows that have nothing yet:
        // a handback with nothing applied goes back there.
        runtime.block_on(async {
            let mut conn = mysql_async::Conn::new(replica_opts(config))
                .await
                .map_err(|e| {
                    RunError::setup_client(format!("cannot connect to the replica: {e}"), &e)
                })?;
            restart::record_start(&mut conn, &catalog, &start, &gtid).await?;
            let _ = conn.disconnect().await;
            Ok::<_, RunError>(())
        })?;
        if let Some(o) = &options.observer {
            *o.takeover.lock().expect("observer") = Some(point);
        }
        Some((ExtractStart::File(start), gtid))
    } else {
        None
    };
    let mut native_check_conn = None;
    if !config.replica.allow_native_replication {
        if let Some(running) = runtime.block_on(native_appliers(config, &mut native_check_conn)) {
            if !running.is_empty() {
                if let Some(conn) = native_check_conn.take() {
                    let _ = runtime.block_on(conn.disconnect());
                }
                return Err(native_replication_error(config, &running, "at start"));
            }
        }
    }
    let start_seqno = if rows.iter().any(|r| r.seqno.is_none()) {
        Seqno(0)
    } else {
        rows.iter()
            .filter_map(|r| r.seqno)
            .min()
            .map_or(Seqno(0), Seqno::next)
    };
    tracing::info!(
        channels,
        start_seqno = start_seqno.get(),
        queue_next = queue.next_seqno().get(),
        "starting: channels resume after their restart rows"
    );

    let filter = ShardFilter::from_config(config, map);
    let assignment = ChannelAssignment::from_config(&config.apply)
        .map_err(|e| RunError::setup(e.to_string()))?;
    // Shards joined by foreign keys, read after takeover (the replica is
    // at the position this run starts from).
    let foreign_keys =
        ForeignKeyRouting::start(foreign_key_reader(config), &assignment).map_err(|e| {
            RunError::setup(format!(
                "reading the replica's foreign keys \
                 (information_schema.REFERENTIAL_CONSTRAINTS): {e}"
            ))
        })?;
    if let Some(o) = &options.observer {
        *o.foreign_keys.lock().expect("observer") = Some(foreign_keys.shared());
    }
    let mut router = ShardRouter {
        filter,
        assignment,
        map_updates: options.map_updates.clone(),
        foreign_keys: Some(foreign_keys),
    };

    // Extractor thread.
    let extract_stop = Arc::new(AtomicBool::new(false));
    let extract_idle = Arc::new(AtomicBool::new(false));
    // The extractor's error, seen by the scheduler at once (the run goes
    // OFFLINE:ERROR instead of waiting for transactions that never come).
    let extract_failed = Arc::new(AtomicBool::new(false));
    let extractor = {
        let queue = queue.clone();
        let config = config.clone();
        let extract_stop = extract_stop.clone();
        let extract_idle = extract_idle.clone();
        let extract_failed = extract_failed.clone();
        std::thread::Builder::new()
            .name("shardrep-extract".into())
            .spawn(move || {
                let result = extract_loop(
                    &config,
                    &queue,
                    &extract_stop,
                    &extract_idle,
                    stop_when_idle,
                    initial_start,
                );
                if result.is_err() {
                    extract_failed.store(true, Ordering::Release);
                }
                result
            })
            .map_err(|e| RunError::setup(format!("cannot start the extractor thread: {e}")))?
    };

    // Channels.
    let progress = Arc::new(
        Progress::new(&rows.iter().map(|r| r.seqno).collect::<Vec<_>>())
            .with_memory_budget(config.apply.max_in_flight_bytes),
    );
    let capacity = (config.apply.block_commit_txns as usize).clamp(16, 1024) * 2;
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for id in ChannelId::all(channels) {
        let (tx, rx) = crossbeam_channel::bounded::<Work>(capacity);
        let settings = ChannelSettings {
            channel: id,
            opts: replica_opts(config),
            catalog: catalog.clone(),
            sql_log_bin: config.replica.sql_log_bin,
            preserve_origin: config.replica.preserve_origin,
            block_commit_txns: config.apply.block_commit_txns.max(1) as usize,
            block_commit_interval: Duration::from_millis(config.apply.block_commit_interval_ms),
            retry_max_attempts: config.apply.retry_max_attempts,
            retry_max_backoff: Duration::from_millis(config.apply.retry_max_backoff_ms),
        };
        handles.push(
            channel::spawn(settings, rx, progress.clone())
                .map_err(|e| RunError::setup(format!("cannot start channel {id}: {e}")))?,
        );
        senders.push(tx);
    }

    // Scheduler on this thread.
    let counters = Arc::new(SchedulerCounters::default());
    if let Some(o) = &options.observer {
        *o.progress.lock().expect("observer") = Some(progress.clone());
        *o.counters.lock().expect("observer") = Some(counters.clone());
        *o.queue.lock().expect("observer") = Some(queue.clone());
        o.applying.store(true, Ordering::Release);
    }
    let stop_at = options.stop_at.clone();
    let mut reader = queue.reader_from(start_seqno)?;
    let mut since_purge = 0u32;
    let scheduler_stop = AtomicBool::new(false);
    let mut native_checked = Instant::now();
    let mut native_running: Option<Vec<String>> = None;
    // The seqno a queue read failed at (the error reaches the scheduler
    // as text).
    let mut read_failed_at: Option<u64> = None;
    let next = |timeout: Duration| -> Result<Option<scheduler::Queued>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if stop.load(Ordering::Acquire)
                || stop_at.as_ref().is_some_and(|at| {
                    let at = at.load(Ordering::Acquire);
                    at != u64::MAX && reader.next_seqno().get() > at
                })
            {
                scheduler_stop.store(true, Ordering::Release);
                return Ok(None);
            }
            if !config.replica.allow_native_replication
                && native_checked.elapsed() >= NATIVE_REPLICATION_CHECK_INTERVAL
            {
                native_checked = Instant::now();
                if let Some(running) =
                    runtime.block_on(native_appliers(config, &mut native_check_conn))
                {
                    if !running.is_empty() {
                        // Stop the channels where dispatch is; the run
                        // then ends with NativeReplication.
                        native_running = Some(running);
                        scheduler_stop.store(true, Ordering::Release);
                        return Ok(None);
                    }
                }
            }
            if let Some((txn, p)) = reader.try_next_with_progress().map_err(|e| {
                read_failed_at = Some(e.seqno().unwrap_or(reader.next_seqno()).get());
                e.to_string()
            })? {
                since_purge += 1;
                if since_purge >= 1000 {
                    since_purge = 0;
                    if let Some(min) = progress.minimum() {
                        // purge_applied keeps `retention_seqnos` below `min`.
                        if let Err(e) = queue.purge_applied(min) {
                            tracing::warn!(error = %e, "queue purge failed");
                        }
                    }
                }
                return Ok(Some(scheduler::Queued {
                    txn,
                    epoch: p.epoch,
                    gtid_position: p.gtid_position,
                }));
            }
            if extract_failed.load(Ordering::Acquire) {
                // Everything extracted is dispatched: stop the channels
                // there; the run then ends with the extractor's error
                // (and the master's code) as RunError::Extract.
                scheduler_stop.store(true, Ordering::Release);
                return Ok(None);
            }
            if stop_when_idle
                && extract_idle.load(Ordering::Acquire)
                && reader.next_seqno() >= queue.next_seqno()
            {
                scheduler_stop.store(true, Ordering::Release);
                return Ok(None);
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let settings = SchedulerSettings {
        sync_interval_seqnos: config.apply.sync_interval_seqnos,
        stop_after: None,
        poll: Duration::from_millis(100),
        skip_seqnos,
        immediate: options.immediate.clone(),
    };
    let outcome = scheduler::run(
        next,
        &mut router,
        &senders,
        &progress,
        &counters,
        &scheduler_stop,
        &settings,
    );
    drop(senders);
    let mut panicked = None;
    for (index, handle) in handles.into_iter().enumerate() {
        if handle.join().is_err() {
            panicked.get_or_insert(index);
        }
    }
    extract_stop.store(true, Ordering::Release);
    let extract_result = extractor
        .join()
        .unwrap_or_else(|_| Err("the extractor thread panicked".into()));
    // A channel may fail after the scheduler's last look (e.g. on the last
    // block before a STOP marker): its error wins over a clean outcome and
    // over the "channel gone" it causes.
    if let Some(error) = progress.error() {
        return Err(RunError::Apply(scheduler::SchedulerError::Apply(Box::new(
            error,
        ))));
    }
    if let Some(index) = panicked {
        return Err(RunError::Apply(scheduler::SchedulerError::ChannelGone(
            crate::position::ChannelId::recorded(index as u16),
        )));
    }
    if let Some(conn) = native_check_conn.take() {
        let _ = runtime.block_on(conn.disconnect());
    }
    if let Some(running) = native_running {
        return Err(native_replication_error(
            config,
            &running,
            "(started while this service applied)",
        ));
    }
    if let (Err(scheduler::SchedulerError::Queue(message)), Some(seqno)) =
        (&outcome, read_failed_at)
    {
        return Err(RunError::QueueRead {
            seqno,
            message: message.clone(),
        });
    }
    outcome?;
    if let Err(ExtractFailure { message, code }) = extract_result {
        return Err(RunError::Extract { message, code });
    }
    queue.flush()?;
    let restart_rows = runtime.block_on(async {
        let mut conn = mysql_async::Conn::new(replica_opts(config))
            .await
            .map_err(|e| {
                RunError::setup_client(format!("cannot connect to the replica: {e}"), &e)
            })?;
        let rows = restart::read(&mut conn, &catalog).await?;
        let _ = conn.disconnect().await;
        Ok::<_, RunError>(rows)
    })?;
    Ok(RunReport {
        restart_rows,
        dispatched: counters.dispatched.load(Ordering::Relaxed),
        dropped: counters.dropped.load(Ordering::Relaxed),
        serializations: counters.serializations.load(Ordering::Relaxed),
        skipped: counters.skipped.load(Ordering::Relaxed),
        retries: progress.retries(),
        elapsed: started.elapsed(),
    })
}

/// The seqnos of `ranges` (the DBA's `--skip-seqno`) with their event id
/// and shard when the queue holds them.
///
/// # Errors
/// [`RunError::Setup`] when the ranges name more than
/// [`skipped::MAX_SKIPS_PER_REQUEST`] seqnos or a seqno above the highest
/// stored one; queue read errors.
fn requested_skips(
    queue: &TransactionQueue,
    ranges: &[std::ops::RangeInclusive<u64>],
) -> Result<Vec<SkippedSeqno>, RunError> {
    let count = ranges.iter().fold(0u64, |n, r| {
        n.saturating_add(r.end().saturating_sub(*r.start()).saturating_add(1))
    });
    if count > skipped::MAX_SKIPS_PER_REQUEST {
        return Err(RunError::setup(format!(
            "--skip-seqno names {count} seqnos; at most {} may be skipped at once",
            skipped::MAX_SKIPS_PER_REQUEST
        )));
    }
    // A seqno not extracted yet would silently skip a future transaction.
    let next = queue.next_seqno().get();
    if let Some(beyond) = ranges.iter().map(|r| *r.end()).filter(|&s| s >= next).max() {
        return Err(RunError::setup(future_skip_message(
            beyond,
            next.checked_sub(1),
        )));
    }
    let mut out = Vec::new();
    for seqno in ranges.iter().flat_map(|r| r.clone()) {
        let txn = queue.get(Seqno(seqno))?;
        out.push(SkippedSeqno {
            seqno: Seqno(seqno),
            event_id: txn
                .as_ref()
                .map(|t| t.end_position.to_string())
                .unwrap_or_default(),
            shard_id: txn.map(|t| t.shard).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The refusal of `--skip-seqno` naming `seqno`, above the highest stored
/// seqno `highest` (`None`: the queue never stored one).
pub(crate) fn future_skip_message(seqno: u64, highest: Option<u64>) -> String {
    format!(
        "seqno {seqno} is not in the queue yet (highest stored: {}); a skip names a \
         transaction shown by the pending error or `shardrepctl log list`",
        highest.map_or_else(|| "none".to_string(), |h| h.to_string())
    )
}

/// Sorted seqnos as inclusive ranges of consecutive seqnos.
pub(crate) fn skip_ranges(skips: &[SkippedSeqno]) -> Vec<std::ops::RangeInclusive<u64>> {
    let mut seqnos: Vec<u64> = skips.iter().map(|s| s.seqno.get()).collect();
    seqnos.sort_unstable();
    seqnos.dedup();
    let mut out: Vec<std::ops::RangeInclusive<u64>> = Vec::new();
    for n in seqnos {
        match out.last_mut() {
            Some(r) if *r.end() + 1 == n => *r = *r.start()..=n,
            _ => out.push(n..=n),
        }
    }
    out
}

/// Reads the replica's cross-schema foreign keys, each time on a new
/// connection of its own (at start and after DDL that may change them).
fn foreign_key_reader(config: &Config) -> ForeignKeyReader {
    let opts = replica_opts(config);
    Box::new(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start an async runtime: {e}"))?;
        runtime.block_on(async {
            let mut conn = mysql_async::Conn::new(opts.clone())
                .await
                .map_err(|e| format!("cannot connect to the replica: {e}"))?;
            let keys = read_foreign_keys(&mut conn)
                .await
                .map_err(|e| format!("reading the replica's foreign keys: {e}"));
            let _ = conn.disconnect().await;
            keys
        })
    })
}

/// Takes over from the replica's native replication: checks the master
/// and the replica, stops the replica's slave threads and returns the
/// executed position ([`crate::replica::takeover`]).
async fn take_over(config: &Config) -> Result<crate::replica::TakeoverPoint, RunError> {
    use crate::config::SourceEndpoint;
    let SourceEndpoint::Live(live) = &config.source.endpoint else {
        return Err(RunError::setup(
            "source.start = \"takeover\" needs a live source (kind = \"live\"): \
             a binlog directory has no master to take over from; set source.start \
             to FILE:POS or gtid:...",
        ));
    };
    let setup = |e: crate::replica::ReplicaError| RunError::setup(format!("takeover: {e}"));
    let mut master =
        crate::replica::connect(&live.host, live.port, None, &live.user, &live.password)
            .await
            .map_err(setup)?;
    let facts = crate::replica::check_master(&mut master)
        .await
        .map_err(setup)?;
    let mut replica = crate::replica::connect(
        &config.replica.host,
        config.replica.port,
        config.replica.socket.as_deref(),
        &config.replica.user,
        &config.replica.password,
    )
    .await
    .map_err(setup)?;
    crate::replica::check_replica(&mut replica, &facts)
        .await
        .map_err(setup)?;
    let others = crate::replica::other_services(&mut replica, &config.catalog_schema())
        .await
        .map_err(setup)?;
    if !others.is_empty() {
        let _ = replica.disconnect().await;
        let _ = master.disconnect().await;
        return Err(RunError::setup(format!(
            "takeover refused: the replica {}:{} is already applied by another shardrep \
             service ({}), so native replication's position there is stale. Hand that \
             service back first (shardrepctl offline, then handback), or give this service \
             a start position (source.start = FILE:POS or gtid:...)",
            config.replica.host,
            config.replica.port,
            others.join(", ")
        )));
    }
    let point = crate::replica::takeover(&mut replica, &mut master, &facts)
        .await
        .map_err(setup)?;
    let _ = replica.disconnect().await;
    let _ = master.disconnect().await;
    Ok(point)
}

/// The extractor thread: resume after the queue's last transaction (or at
/// the configured start), append every transaction with its progress.
/// Sets `idle` when the source has nothing more (non-following sources,
/// or a live master whose non-blocking dump ended).
fn extract_loop(
    config: &Config,
    queue: &TransactionQueue,
    stop: &AtomicBool,
    idle: &AtomicBool,
    stop_when_idle: bool,
    initial_start: Option<(ExtractStart, crate::position::GtidPos)>,
) -> Result<(), ExtractFailure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ExtractFailure::from(e.to_string()))?;
    runtime.block_on(async {
        let next_seqno = queue.next_seqno();
        let mut start_gtid = None;
        let start = match (queue.last_progress(), initial_start) {
            (Some(p), _) => ExtractStart::File(p.position.clone()),
            (None, Some((start, gtid))) => {
                start_gtid = Some(gtid);
                start
            }
            (None, None) => resolve_start(&config.source.endpoint, &config.source.start).await?,
        };
        let epoch = Epoch(next_seqno.get());
        // A restart position at the very end of a binlog the master has
        // since purged (a clean stop, then FLUSH and PURGE BINARY LOGS) is
        // refused with 1236 although nothing after it is gone: the same
        // point is then asked for by GTID (see gtid_start_after_purge).
        let mut gtid_fallback = match (&start, queue.last_progress(), &config.source.endpoint) {
            (ExtractStart::File(_), Some(p), crate::config::SourceEndpoint::Live(live))
                if !p.gtid_position.is_empty() =>
            {
                Some((LiveOptions::from_config(live), p.gtid_position.clone()))
            }
            _ => None,
        };
        tracing::info!(start = ?start, next_seqno = next_seqno.get(), "extractor starting");
        let mut extractor =
            Extractor::open(&config.source.endpoint, start, next_seqno, !stop_when_idle)?;
        if let Some(p) = queue.last_progress() {
            // Keep the GTID position across restarts.
            extractor.set_gtid_position(p.gtid_position.clone());
        } else if let Some(gtid) = start_gtid {
            // Takeover: every domain's position, quiet domains included.
            extractor.set_gtid_position(gtid);
        }
        loop {
            if stop.load(Ordering::Acquire) {
                return Ok(());
            }
            let next =
                tokio::time::timeout(Duration::from_millis(200), extractor.next_transaction())
                    .await;
            let txn = match next {
                Err(_) => continue, // nothing within the timeout: check the stop flag
                Ok(Err(crate::extractor::ExtractError::Master {
                    code: Some(1236),
                    message,
                    address,
                    transient,
                })) if gtid_fallback.is_some() => {
                    let (options, state) = gtid_fallback.take().expect("checked");
                    let Some(gtid) = gtid_start_after_purge(&options, &state).await? else {
                        return Err(crate::extractor::ExtractError::Master {
                            code: Some(1236),
                            message: format!(
                                "{message} (transactions after the restart position, GTID \
                                 {state}, are purged from the master: re-seed the replica)"
                            ),
                            address,
                            transient,
                        }
                        .into());
                    };
                    tracing::warn!(
                        %message, gtid = %gtid,
                        "the restart position's binlog is gone from the master, nothing after it: resuming at its GTID position"
                    );
                    extractor = Extractor::open(
                        &config.source.endpoint,
                        ExtractStart::Gtid(gtid.clone()),
                        next_seqno,
                        !stop_when_idle,
                    )?;
                    extractor.set_gtid_position(gtid);
                    continue;
                }
                Ok(Err(e)) => return Err(e.into()),
                Ok(Ok(None)) => {
                    idle.store(true, Ordering::Release);
                    return Ok(());
                }
                Ok(Ok(Some(txn))) => txn,
            };
            // Only the first read of a run may fall back.
            gtid_fallback = None;
            let progress = ExtractorProgress {
                seqno: txn.seqno,
                epoch,
                position: txn.end_position.clone(),
                gtid_position: extractor.assembler().gtid_position().clone(),
            };
            queue
                .append(&txn, &progress)
                .map_err(|e| ExtractFailure::from(e.to_string()))?;
        }
    })
}
