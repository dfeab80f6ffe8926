//! One run of the pipeline, wired: [`run`] connects the parts (set-up,
//! takeover, extractor thread, channels, feed and scheduler) and tears
//! them down in order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::channels::Channels;
use super::error::Ended;
use super::extract::ExtractorThread;
use super::feed::{Feed, FeedStops};
use super::native::NativeCheck;
use super::{extract_only, first_start, setup, takeover, RunError};
use crate::applier::progress::Progress;
use crate::applier::restart::{Recovery, RestartRow};
use crate::config::Config;
use crate::queue::{QueueOptions, TransactionQueue};
use crate::scheduler::{self, SchedulerCounters, SchedulerSettings};
use crate::shard::foreign_keys::ForeignKeyGroups;

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
    /// The shard map exchanged with the running filter (shard edits one
    /// way, auto-created shards the other).
    pub live_map: Option<crate::shard::live::SharedLiveMap>,
    /// A consistency check's hold on the scheduler ([`crate::scheduler::hold`]).
    pub hold: Option<Arc<crate::scheduler::hold::Hold>>,
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
    /// Every recorded skip once the run has recorded its own (the DBA's
    /// `--skip-seqno`, less the seqnos the restart rows record committed).
    pub skipped: Mutex<Option<Vec<crate::applier::skipped::SkippedSeqno>>>,
    /// The `[replica] binlog_gtids` mode the run applies with (`"auto"`
    /// resolved from the replica's settings), once it has read them.
    pub binlog_gtids: Mutex<Option<crate::config::BinlogGtids>>,
    /// The furthest restart row's seqno, when the start found the
    /// replica's binlog without the GTIDs it records (reset or purged
    /// since: commits after the rows could not be found there, so a
    /// duplicate after it may be a transaction applied twice).
    pub binlog_lacks_rows_above: Mutex<Option<u64>>,
}

impl Observer {
    /// Shows the live parts of a run whose channels are connected and
    /// applying.
    fn applying(
        &self,
        progress: &Arc<Progress>,
        counters: &Arc<SchedulerCounters>,
        queue: &Arc<TransactionQueue>,
    ) {
        *self.progress.lock().expect("observer") = Some(progress.clone());
        *self.counters.lock().expect("observer") = Some(counters.clone());
        *self.queue.lock().expect("observer") = Some(queue.clone());
        self.applying.store(true, Ordering::Release);
    }
}

/// Runs the service until `stop` is set (or, with
/// `options.stop_when_idle`, until the source has no more transactions and
/// everything is applied), then stops cleanly. With `[service] role =
/// "extractor"` it only fills the queue: the replica is never connected
/// to.
///
/// Start: open the queue; prepare the replica's catalog (restart rows,
/// skips, shard map); refuse a lost queue; take over native replication
/// when this is the service's first start with `source.start =
/// "takeover"`; refuse native replication running on the replica; build
/// the router; start the extractor thread, then the channels; then the
/// scheduler runs on this thread, fed from the queue by the feed.
///
/// Teardown, once the scheduler returns (on a stop, `stop_at`, idle, or an
/// error): the channels' inputs close and every channel thread is joined
/// (each finishes what it was sent: after a clean stop every restart row
/// is at the STOP marker's seqno); then the extractor is told to stop and
/// its thread joined; then the native-replication check disconnects.
/// When several parts failed, the first of these wins
/// (`Ended::first_error` in `error.rs`): a channel's apply error, a
/// channel thread's panic, native replication found running, a queue read
/// error, the scheduler's error, the extractor's error. Only a run that
/// ended cleanly flushes the queue and reads the final restart rows.
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
    let started = Instant::now();
    let catalog = config.catalog_schema();
    let queue = Arc::new(TransactionQueue::open(QueueOptions::from_config(
        &config.queue,
    ))?);
    warn_if_queue_space_short(config);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::setup(format!("cannot start the async runtime: {e}")))?;
    let start = setup::prepare_catalog(&runtime, config, &catalog, &queue, options)?;
    if let Some(o) = &options.observer {
        *o.skipped.lock().expect("observer") = Some(start.recorded_skips.clone());
        *o.binlog_gtids.lock().expect("observer") = Some(start.binlog.mode);
    }
    let expected_positions = setup::refuse_lost_queue(config, &catalog, &queue, &start.rows)?;
    // A source stored by a master switch (`shardrepctl source set`)
    // replaces the configuration's: the run reads from that master.
    let (stored_source, pending) = runtime
        .block_on(super::source::read_both(config))
        .map_err(|e| RunError::setup(format!("reading the stored source: {e}")))?;
    // A switch under way (shardrep stopped in the middle of `source
    // set`): apply nothing beyond what the channels committed (the gaps
    // below it only), so the rows end at one seqno for the switch to
    // finish; the old master's queue after it may be what the new master
    // lacks.
    let mut stop_at = options.stop_at.clone();
    if let Some(pending) = &pending {
        let Some(committed) = start.rows.iter().filter_map(|r| r.seqno).max() else {
            return Err(RunError::setup(format!(
                "a switch of the source to {} (source set, started {} UTC) did not finish and \
                 nothing is applied yet: run `shardrepctl source set --host {} --port {}` \
                 again, then `shardrepctl online`",
                pending.address(),
                pending.started_at,
                pending.host,
                pending.port
            )));
        };
        tracing::warn!(
            to = %pending.address(),
            started_at = %pending.started_at,
            stop_at = committed.get(),
            "a switch of the source did not finish: this run applies nothing beyond the \
             highest seqno the channels committed; source set finishes the switch"
        );
        match &stop_at {
            Some(at) => {
                at.fetch_min(committed.get(), Ordering::AcqRel);
            }
            None => stop_at = Some(Arc::new(AtomicU64::new(committed.get()))),
        }
    }
    let switched;
    let config = match &stored_source {
        Some(stored) => {
            switched = stored.apply(config);
            &switched
        }
        None => config,
    };
    // A first start that fails here (a refused takeover, native
    // replication running) has applied nothing: the catalog it created
    // goes again.
    let before_applying = |e: RunError| {
        if start.created {
            runtime.block_on(first_start::remove_new_catalog(config, &catalog, &e));
        }
        e
    };
    let first = takeover::first_start(
        &runtime,
        config,
        &catalog,
        &queue,
        &start.rows,
        stored_source.as_ref().is_some_and(|s| s.resume.is_some()),
        options.observer.as_deref(),
    )
    .map_err(before_applying)?;
    let mut native = NativeCheck::new(config, &runtime);
    native.at_start().map_err(before_applying)?;
    let start_seqno = start.recovery.start_seqno();
    match &start.recovery {
        Recovery::Exact { committed, .. } => tracing::info!(
            channels = config.apply.channels,
            start_seqno = start_seqno.get(),
            queue_next = queue.next_seqno().get(),
            committed_above = %committed,
            "starting: dispatch resumes after the restart rows' low-water mark, skipping the \
             seqnos they record committed"
        ),
        Recovery::Legacy { .. } => tracing::info!(
            channels = config.apply.channels,
            start_seqno = start_seqno.get(),
            queue_next = queue.next_seqno().get(),
            "starting: restart rows of an older shardrep; dispatch resumes after the lowest, \
             each channel skipping what it is sent at or below its own row"
        ),
    }
    let mut router = setup::router(config, start.map, options)?;
    let extractor = ExtractorThread::spawn(
        config,
        &queue,
        options.stop_when_idle,
        first,
        stored_source.and_then(|s| s.resume),
        options.hold.as_ref().map(|h| h.idle_mark()),
    )?;
    let channels = Channels::start(
        config,
        &catalog,
        &start.rows,
        &start.recovery,
        &queue,
        start.binlog,
    )?;

    // The scheduler, on this thread.
    let counters = Arc::new(SchedulerCounters::default());
    if let Some(o) = &options.observer {
        o.applying(&channels.progress, &counters, &queue);
    }
    let scheduler_stop = AtomicBool::new(false);
    native.restart_interval();
    let mut feed = Feed::new(
        &queue,
        start_seqno,
        &channels.progress,
        FeedStops {
            extractor: &extractor,
            stop: &stop,
            stop_at: stop_at.as_deref(),
            stop_when_idle: options.stop_when_idle,
            scheduler_stop: &scheduler_stop,
        },
        native,
    )?;
    if let Some(hold) = &options.hold {
        // Where the scheduler stands before it handles anything: the
        // restart rows' common position (with gaps between the channels,
        // the transactions re-read first tell).
        let first = start.rows.first().map(|r| (r.seqno, r.event_id.clone()));
        let common = first.filter(|(s, _)| start.rows.iter().all(|r| r.seqno == *s));
        hold.resume_after(common.and_then(|(_, p)| p), start_seqno);
    }
    let settings = SchedulerSettings {
        sync_interval_seqnos: config.apply.sync_interval_seqnos,
        stop_after: None,
        poll: Duration::from_millis(100),
        skip_seqnos: start.skip_seqnos,
        immediate: options.immediate.clone(),
        committed: start.recovery.committed().clone(),
        expected_positions,
        row_fill: config.apply.block_commit_txns as usize,
        commit_window: config.apply.commit_window_seqnos,
        hold: options.hold.clone(),
    };
    let outcome = scheduler::run(
        |timeout| feed.next(timeout),
        &mut router,
        &channels.senders,
        &channels.progress,
        &counters,
        &scheduler_stop,
        &settings,
    );

    // Teardown, in the order of the doc comment.
    let (mut native, read_failed_at) = feed.finish();
    let progress = channels.progress.clone();
    let panicked = channels.close_and_join();
    let extract = extractor.stop();
    // Where the channels ended.
    native.follow_slave_pos(&progress);
    native.close();
    Ended {
        scheduler: outcome.map(|_| ()),
        channel_error: progress.error(),
        panicked,
        native_running: native.running.take(),
        read_failed_at,
        extract,
    }
    .first_error(config)?;
    queue.flush()?;
    let restart_rows = setup::final_restart_rows(&runtime, config, &catalog)?;
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

/// Logs a warning when the queue's file system has less free space than
/// one segment ([`crate::queue::space`]).
pub(super) fn warn_if_queue_space_short(config: &Config) {
    let dir = &config.queue.dir;
    if let Ok(free) = crate::queue::space::free_bytes(dir) {
        if let Some(text) = crate::queue::space::warning(dir, free, config.queue.segment_size_bytes)
        {
            tracing::warn!("{text}");
        }
    }
}
