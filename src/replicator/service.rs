//! The replicator as a service a DBA drives with `shardrepctl`: the state
//! machine ([`super::state`]), one pipeline run ([`super::run`]) at a time
//! on a worker thread while ONLINE. Each DBA request is a method that
//! answers with typed values ([`report`]) or a [`ServiceError`]; the
//! control layer (`crate::control`) serves them on the control socket.
//!
//! - `online` starts a run (GOING-ONLINE:SYNCHRONIZING, then ONLINE once
//!   the channels apply). A service with no queue and no restart position
//!   and `source.start = "takeover"` takes over the replica's native
//!   replication first ([`crate::replica::takeover`]).
//! - `offline` asks the run for a clean stop (STOP marker: every channel
//!   ends at one seqno); `--immediate` stops without it; `--at-seqno N`
//!   stops cleanly once N is handled.
//! - A definite error ends the run: OFFLINE:ERROR with the pending error,
//!   which ends with the way out; `online` retries, optionally skipping
//!   named seqnos (recorded in the catalog first,
//!   [`crate::applier::skipped`], so they are never applied later).
//! - `handback` (OFFLINE:NORMAL or OFFLINE:ERROR, every restart row at one
//!   seqno, or every row empty with the takeover position recorded) points
//!   the replica's native replication at the position after that seqno
//!   ([`crate::replica::handback`]), then clears the service's queue,
//!   restart rows and recorded skips, so the next `online` takes over
//!   again.
//! - `reset --confirm NAME` (offline) clears the same without touching
//!   native replication: the way out when the source cannot continue.
//! - `source set` ([`switch`]) switches the service to another master of
//!   the topology (a master failover), after checking that the new
//!   master has every transaction the replica applied.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::check::{CheckRequest, CheckState, CheckStatus};
use super::state::{Event, OfflineEnd, PendingError, SkipSeqnos, State, StateMachine};
use super::{Observer, RunError, RunOptions};
use crate::applier::progress::Progress;
use crate::applier::restart::{self, LowWater, RestartRow};
use crate::applier::skipped::{self, SkippedSeqno};
use crate::catalog;
use crate::config::{Config, Role};
use crate::event::Transaction;
use crate::mysql::QueryNoLog;
use crate::position::{BinlogPosition, ChannelId, GtidPos, Seqno};
use crate::queue::{QueueInfo, QueueOptions, TransactionQueue};
use crate::scheduler::hold::Hold;
use crate::shard::channel::ChannelAssignment;
use crate::shard::live::LiveMap;
use crate::shard::map::{ShardEntry, ShardMap};
use crate::shard::store;

mod error;
pub mod lag;
pub mod report;
pub mod switch;
mod way_out;

pub use error::ServiceError;
pub use report::{
    ApplyTotals, ChannelSnapshot, HandedBack, ResetDone, RowStatus, RunFailure, ShardSnapshot,
    StatusSnapshot,
};

/// Most transactions one `log list` answers with.
pub const LOG_LIST_MAX: u64 = 1000;

/// How often a running service with `[shard_filter] auto_create` stores
/// the shards its filter created (a `kill -9` loses at most this much:
/// such a shard is created again by its next transaction).
pub const AUTO_CREATED_STORE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The service: configuration, state and the current run.
pub struct Service {
    config: Config,
    started: Instant,
    inner: Mutex<Inner>,
    /// The shard map exchanged with the running router
    /// ([`crate::shard::live`]).
    live_map: crate::shard::live::SharedLiveMap,
    /// Held while the stored map is read, edited and written back, so two
    /// edits at once cannot lose one another's changes.
    map_edit: Mutex<()>,
    /// Set when the worker thread of a run ends (for foreground waits).
    run_ended: Arc<(Mutex<u64>, std::sync::Condvar)>,
    stop_when_idle: bool,
    /// This service (runs hold a strong reference while they go on).
    me: std::sync::Weak<Service>,
    /// The last consistency check, while it runs and after.
    check: Mutex<Option<CheckSlot>>,
    /// The master's end and the distance to it ([`lag`]), kept current
    /// by a thread of its own with a live source.
    lag: Mutex<Option<lag::Lag>>,
    /// The source master stored by a switch (`source set`), which
    /// replaces the configuration's; `None`: the configuration's.
    source: Mutex<Option<super::source::StoredSource>>,
    /// `host:port` of the `source set` under way, if one is.
    switching: Mutex<Option<String>>,
    /// `host:port` of the interrupted switch a restart is finishing
    /// ([`Service::finish_interrupted_switch`]), if it is.
    finishing_switch: Mutex<Option<String>>,
    /// A refused `source set` left a running service offline: the next
    /// one that succeeds takes it online again (an `offline` clears it).
    online_after_switch: AtomicBool,
    /// A switch that a stop of shardrep interrupted and the restart could
    /// not finish ([`Service::finish_interrupted_switch`]): what it was
    /// and why; `online` is refused until a `source set` succeeds.
    unfinished_switch: Mutex<Option<String>>,
}

struct Inner {
    machine: StateMachine,
    run: Option<ActiveRun>,
    /// Restart rows as last read or left by a run.
    last_rows: Vec<RestartRow>,
    /// The last run's low-water mark at its end, with the binlog position
    /// after it: status's `appliedLastEventId` when no restart row sits at
    /// that seqno (rows written every few commits under "master").
    last_low_water: Option<(Seqno, String)>,
    /// Counters of the runs that ended (dropped, barriers, skipped,
    /// window waits):
    /// status adds the current run's to them ("since the service
    /// started").
    totals: (u64, u64, u64, u64),
    /// Row parallelism's waits and fallbacks of the runs that ended
    /// (status adds the current run's, as for `totals`).
    row_totals: RowStatus,
    /// What the runs that ended applied (status adds the current run's).
    apply_totals: ApplyTotals,
    /// Stored seqno range of the queue when last seen.
    last_stored: (Option<Seqno>, Option<Seqno>),
    until_seqno: Option<u64>,
    offline_at_seqno: Option<u64>,
    /// How the replica's native replication ran before the takeover.
    takeover_used_gtid: Option<bool>,
    /// The last run's outcome, for `--until-idle` exits.
    last_error: Option<RunFailure>,
    /// Why the last run of this process did not end cleanly (refuses a
    /// handback until a clean offline): an immediate offline, or channels
    /// at different seqnos. After an error, the restart rows decide.
    unclean: Option<String>,
    /// Whether the restart rows record every commit: false after a run
    /// under the master's GTIDs that ended on an error (its rows are
    /// written every few commits; the replica's binlog records the rest,
    /// read at the next start). A run that stops cleanly writes them.
    rows_record_commits: bool,
    /// The seqnos recorded as skipped at the DBA's request (the catalog's
    /// `skipped_seqno` table as last read, plus what `online` asked for).
    skipped: Vec<SkippedSeqno>,
    /// `[replica] binlog_gtids` as the last run resolved it (`"auto"`
    /// until one has read the replica's settings).
    binlog_gtids: crate::config::BinlogGtids,
    /// The last handback, until the next run or reset: the restart rows
    /// it cleared no longer say where the service stopped.
    handed_back: Option<HandedBack>,
}

/// A consistency check's status and its cancel flag.
type CheckSlot = (Arc<Mutex<CheckStatus>>, Arc<AtomicBool>);

struct ActiveRun {
    stop: Arc<AtomicBool>,
    immediate: Arc<AtomicBool>,
    stop_at: Arc<AtomicU64>,
    observer: Arc<Observer>,
    /// A consistency check's hold on the run's scheduler.
    hold: Arc<Hold>,
}

fn failed(message: impl Into<String>) -> ServiceError {
    ServiceError::failed(message)
}

fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, ServiceError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start an async runtime: {e}")))?;
    Ok(runtime.block_on(future))
}

impl Service {
    /// A service in OFFLINE:NORMAL. Reads the restart rows when the replica
    /// answers (for status); a replica that does not answer is reported
    /// when the service goes online.
    pub fn new(config: Config, stop_when_idle: bool) -> Arc<Service> {
        let (rows, skipped) = read_catalog(&config).unwrap_or_default();
        let stored_source = match block_on(super::source::read_for(&config)) {
            Ok(Ok(stored)) => stored,
            Ok(Err(e)) | Err(ServiceError::Failed(e)) => {
                tracing::debug!(error = %e, "cannot read the stored source now");
                None
            }
            Err(_) => None,
        };
        if let Some(stored) = &stored_source {
            tracing::info!(
                source = %stored.address(),
                previous = %stored.previous,
                switched_at = %stored.switched_at,
                "the source is the master stored by source set (it replaces [source]'s host, \
                 port, user and server_id)"
            );
        }
        let live_source = config.source.live().is_some();
        let binlog_gtids = config.replica.binlog_gtids;
        let service = Arc::new_cyclic(|me| Service {
            me: me.clone(),
            config,
            started: Instant::now(),
            inner: Mutex::new(Inner {
                machine: StateMachine::new(),
                run: None,
                last_rows: rows,
                last_low_water: None,
                totals: (0, 0, 0, 0),
                row_totals: RowStatus::default(),
                apply_totals: ApplyTotals::default(),
                last_stored: (None, None),
                until_seqno: None,
                offline_at_seqno: None,
                takeover_used_gtid: None,
                last_error: None,
                unclean: None,
                // Rows left by an earlier process: exact unless they may
                // be under the master's GTIDs.
                rows_record_commits: matches!(
                    binlog_gtids,
                    crate::config::BinlogGtids::Own | crate::config::BinlogGtids::Off
                ),
                skipped,
                binlog_gtids,
                handed_back: None,
            }),
            live_map: Arc::default(),
            map_edit: Mutex::new(()),
            run_ended: Arc::new((Mutex::new(0), std::sync::Condvar::new())),
            stop_when_idle,
            check: Mutex::new(None),
            switching: Mutex::new(None),
            finishing_switch: Mutex::new(None),
            online_after_switch: AtomicBool::new(false),
            unfinished_switch: Mutex::new(None),
            lag: Mutex::new(None),
            source: Mutex::new(stored_source),
        });
        if live_source {
            lag::spawn(
                Arc::downgrade(&service),
                |s: &Service| {
                    let config = s.effective_config();
                    let live = config.source.live().expect("a live source");
                    crate::mysql::connection_opts(
                        &live.host,
                        live.port,
                        None,
                        &live.user,
                        live.password.expose(),
                    )
                },
                |s: &Service| {
                    let status = s.status();
                    lag::Applied {
                        position: status.applied_last_event_id.and_then(|e| e.parse().ok()),
                        seqno: status.applied_last_seqno.map(Seqno::get),
                        stored: status.maximum_stored_seqno.map(Seqno::get),
                        // Only read (from the queue) when nothing queued
                        // is left to apply: the caught-up test.
                        stored_gtid: (status.maximum_stored_seqno == status.applied_last_seqno)
                            .then(|| s.running_queue_progress())
                            .flatten()
                            .map(|p| p.gtid_position),
                        idle: s.lock().run.as_ref().and_then(|r| r.hold.idle_mark().get()),
                        online: status.state == State::Online,
                    }
                },
                |s: &Service| &s.lag,
            );
        }
        service
    }

    /// Starts a consistency check ([`super::check`]) on a thread of its
    /// own and returns at once; [`Service::check_status`] follows it.
    ///
    /// # Errors
    /// [`ServiceError::IllegalState`] unless the service is ONLINE, or
    /// while another check runs; [`ServiceError::Unsupported`] without a
    /// live source (the master to compare with).
    pub fn start_check(&self, request: CheckRequest) -> Result<(), ServiceError> {
        let config = self.effective_config();
        let live = config.source.live().ok_or_else(|| {
            ServiceError::Unsupported(
                "a consistency check compares with the master: it needs a live source".into(),
            )
        })?;
        let inner = self.lock();
        let state = inner.machine.state();
        let hold = match &inner.run {
            Some(run) if state == State::Online => run.hold.clone(),
            _ => {
                return Err(ServiceError::illegal_state(format!(
                    "a consistency check needs the service ONLINE (it holds the channels at \
                     the master's snapshot for a moment); it is {state}"
                )))
            }
        };
        drop(inner);
        let shards: Vec<String> = if request.tables.is_empty() && request.schemas.is_empty() {
            self.shard_map()?
                .iter()
                .map(|e| e.shard_id.clone())
                .filter(|s| s != crate::event::UNKNOWN_SHARD)
                .collect()
        } else {
            Vec::new()
        };
        let mut slot = self.check.lock().expect("check slot");
        if slot
            .as_ref()
            .is_some_and(|(s, _)| s.lock().expect("check status").state == CheckState::Running)
        {
            return Err(ServiceError::illegal_state(
                "a consistency check is already running (status --name check)".to_string(),
            ));
        }
        let status = Arc::new(Mutex::new(CheckStatus::default()));
        let cancel = Arc::new(AtomicBool::new(false));
        *slot = Some((status.clone(), cancel.clone()));
        let master = crate::mysql::connection_opts(
            &live.host,
            live.port,
            None,
            &live.user,
            live.password.expose(),
        );
        let replica = super::replica_opts(&self.config);
        std::thread::Builder::new()
            .name("shardrep-check".into())
            .spawn(move || {
                super::check::run_check(master, replica, hold, shards, request, status, cancel)
            })
            .map_err(|e| failed(format!("cannot start the check's thread: {e}")))?;
        Ok(())
    }

    /// The last consistency check's status (`None`: none ran).
    pub fn check_status(&self) -> Option<CheckStatus> {
        self.check
            .lock()
            .expect("check slot")
            .as_ref()
            .map(|(s, _)| s.lock().expect("check status").clone())
    }

    /// Stops the running check after its chunk in hand (a wait for a hold
    /// is released); its status ends `cancelled`.
    ///
    /// # Errors
    /// [`ServiceError::IllegalState`] when no check runs.
    pub fn cancel_check(&self) -> Result<(), ServiceError> {
        let slot = self.check.lock().expect("check slot");
        let running = slot
            .as_ref()
            .filter(|(s, _)| s.lock().expect("check status").state == CheckState::Running);
        let Some((_, cancel)) = running else {
            return Err(ServiceError::illegal_state(
                "no consistency check is running".to_string(),
            ));
        };
        cancel.store(true, Ordering::Release);
        if let Some(run) = &self.lock().run {
            run.hold.release();
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("service lock")
    }

    /// The configuration with the stored source (a switch) in place of
    /// `[source]`'s master, as runs use it.
    pub fn effective_config(&self) -> Config {
        match &*self.source.lock().expect("source") {
            Some(stored) => stored.apply(&self.config),
            None => self.config.clone(),
        }
    }

    /// Reads the stored source again from the catalog (the replica may
    /// not have answered when the service started); keeps what it had
    /// when the replica cannot be read.
    fn refresh_source(&self) {
        if let Ok(Ok(stored)) = block_on(super::source::read_for(&self.config)) {
            *self.source.lock().expect("source") = stored;
        }
    }

    /// The source stored by a switch, if any.
    pub fn stored_source(&self) -> Option<super::source::StoredSource> {
        self.source.lock().expect("source").clone()
    }

    /// The current state.
    pub fn state(&self) -> State {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        inner.machine.state()
    }

    /// The last run's error and what to do about it, if it ended on one.
    pub fn last_error(&self) -> Option<RunFailure> {
        self.lock().last_error.clone()
    }

    /// The last handback of this process, unless a run or a reset came
    /// after it: where the service handed the replica back (its restart
    /// rows are gone, so status no longer shows that seqno).
    pub fn last_handback(&self) -> Option<HandedBack> {
        self.lock().handed_back.clone()
    }

    /// Blocks until no run is active.
    pub fn wait_until_stopped(&self) {
        let (lock, changed) = &*self.run_ended;
        let mut guard = lock.lock().expect("run-ended lock");
        while self.lock().run.is_some() {
            guard = changed
                .wait_timeout(guard, std::time::Duration::from_millis(200))
                .expect("run-ended lock")
                .0;
        }
    }

    /// GOING-ONLINE becomes ONLINE once the run's channels apply.
    fn refresh(inner: &mut Inner) {
        if inner.machine.state() == State::GoingOnlineSynchronizing
            && inner
                .run
                .as_ref()
                .is_some_and(|r| r.observer.applying.load(Ordering::Acquire))
        {
            let _ = inner.machine.apply(Event::Synchronized);
        }
    }

    /// Starts a run (the `online` request).
    ///
    /// # Errors
    /// An illegal transition (already online, going offline).
    pub fn go_online(
        &self,
        skip: Option<SkipSeqnos>,
        until_seqno: Option<u64>,
    ) -> Result<State, ServiceError> {
        if let Some(unfinished) = self.unfinished_switch.lock().expect("switch").as_ref() {
            return Err(ServiceError::illegal_state(format!(
                "the switch of the source {unfinished}; a run would apply nothing beyond the \
                 channels' seqno. Run that shardrepctl source set again (it goes online when it \
                 succeeds), or source set to the current source to give the switch up"
            )));
        }
        let mut inner = self.lock();
        if inner.run.is_some() {
            return Err(ServiceError::illegal_state(format!(
                "the service is {}: a run is still active",
                inner.machine.state()
            )));
        }
        if let Some(until) = until_seqno {
            // What is committed above it: the recovered set when the rows
            // record it (a row beyond it may hold a stop mark, no commit),
            // else the rows' own seqnos.
            let committed = match restart::recover(&inner.last_rows) {
                Ok(restart::Recovery::Exact { base, committed }) => base
                    .into_iter()
                    .chain(committed.iter())
                    .map(Seqno::get)
                    .max(),
                _ => inner
                    .last_rows
                    .iter()
                    .filter_map(|r| r.seqno.map(Seqno::get))
                    .max(),
            };
            if let Some(beyond) = committed.filter(|&s| s > until) {
                return Err(ServiceError::illegal_state(format!(
                    "online --until-seqno {until}: seqno {beyond} is already applied; \
                     name a seqno of at least {beyond}"
                )));
            }
        }
        if let Some(skip) = &skip {
            // A seqno every channel has passed was applied (or dropped):
            // recording it as skipped would misreport the history.
            if let (Some(applied), Some(&(low, _))) =
                (applied_summary(&inner.last_rows).0, skip.ranges().first())
            {
                if low <= applied.get() {
                    return Err(ServiceError::Invalid(format!(
                        "online --skip-seqno {skip}: seqno {low} is already handled (every \
                             channel's restart row is at seqno {applied} or later); name seqnos \
                             above {applied}"
                    )));
                }
            }
            // A seqno not extracted yet (highest stored as of the last
            // run; the run checks again against the open queue).
            if let (Some(highest), Some(&(_, high))) = (inner.last_stored.1, skip.ranges().last()) {
                if high > highest.get() {
                    return Err(ServiceError::Invalid(format!(
                        "online --skip-seqno {skip}: {}",
                        super::future_skip_message(high, Some(highest.get()))
                    )));
                }
            }
            if skip.count() > skipped::MAX_SKIPS_PER_REQUEST {
                return Err(ServiceError::Invalid(format!(
                    "online --skip-seqno {skip}: names {} seqnos; at most {} may be skipped \
                         at once",
                    skip.count(),
                    skipped::MAX_SKIPS_PER_REQUEST
                )));
            }
        }
        let state = inner.machine.apply(Event::Online)?;
        // The run records the skips in the catalog before it dispatches
        // anything (less those the restart rows record committed), logs
        // them and shows them to status (`Observer::skipped`).
        let run = ActiveRun {
            stop: Arc::new(AtomicBool::new(false)),
            immediate: Arc::new(AtomicBool::new(false)),
            stop_at: Arc::new(AtomicU64::new(until_seqno.unwrap_or(u64::MAX))),
            observer: Arc::new(Observer::default()),
            hold: Arc::new(Hold::new(None)),
        };
        let options = RunOptions {
            stop_when_idle: self.stop_when_idle,
            skip_seqnos: skip
                .map(|s| s.ranges().iter().map(|&(a, b)| a..=b).collect())
                .unwrap_or_default(),
            stop_at: Some(run.stop_at.clone()),
            immediate: Some(run.immediate.clone()),
            observer: Some(run.observer.clone()),
            live_map: Some(self.live_map.clone()),
            hold: Some(run.hold.clone()),
        };
        inner.until_seqno = until_seqno;
        inner.offline_at_seqno = None;
        inner.last_error = None;
        inner.handed_back = None;
        let stop = run.stop.clone();
        inner.run = Some(run);
        drop(inner);
        let service = self
            .me
            .upgrade()
            .ok_or_else(|| failed("the service is shutting down"))?;
        // Shards the filter auto-creates are stored within a second,
        // while the run lasts (and once more as it ends: run_finished).
        if self.config.shard_filter.auto_create {
            let (storer, hold) = (service.clone(), options.hold.clone());
            let _ = std::thread::Builder::new()
                .name("shardrep-shard-store".into())
                .spawn(move || {
                    while !hold.as_ref().is_some_and(|h| h.is_closed()) {
                        std::thread::sleep(AUTO_CREATED_STORE_INTERVAL);
                        storer.store_auto_created();
                    }
                });
        }
        // ONLINE as soon as the channels apply (so timeInStateSeconds
        // counts from then, not from the next control request).
        let watcher = service.clone();
        let observer = options.observer.clone();
        std::thread::Builder::new()
            .name("shardrep-run".into())
            .spawn(move || {
                // The source the run reads from is the catalog's.
                service.refresh_source();
                let result = super::run(&service.config, stop, &options);
                if let Some(hold) = &options.hold {
                    hold.close();
                }
                service.run_finished(result, &options);
            })
            .map_err(|e| failed(format!("cannot start the run thread: {e}")))?;
        if let Some(observer) = observer {
            let _ = std::thread::Builder::new()
                .name("shardrep-online".into())
                .spawn(move || loop {
                    let mut inner = watcher.lock();
                    if inner.machine.state() != State::GoingOnlineSynchronizing {
                        return;
                    }
                    if observer.applying.load(Ordering::Acquire) {
                        Self::refresh(&mut inner);
                        return;
                    }
                    drop(inner);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                });
        }
        Ok(state)
    }

    /// Stores the shards the running filter auto-created and has not
    /// handed over yet (none: nothing is done); a failure is logged and
    /// they are kept for the next try.
    fn store_auto_created(&self) {
        let pending = !self.live_map.lock().expect("live map").created.is_empty();
        if pending {
            if let Err(e) = self.stored_map(|_| Ok(0), false) {
                tracing::warn!(error = %e, "cannot store auto-created shards yet; retrying");
            }
        }
    }

    fn run_finished(&self, result: Result<super::RunReport, RunError>, options: &RunOptions) {
        self.store_auto_created();
        self.refresh_source();
        let mut inner = self.lock();
        let observer = options.observer.clone().unwrap_or_default();
        if let Some(point) = observer.takeover.lock().expect("observer").take() {
            inner.takeover_used_gtid = Some(point.using_gtid != crate::replica::UsingGtid::No);
        }
        if let Some(queue) = observer.queue.lock().expect("observer").as_ref() {
            inner.last_stored = (queue.min_seqno(), queue.max_seqno());
        }
        // The skips as the run recorded them (the catalog, read again
        // below when the replica answers, has the last word).
        if let Some(skipped) = observer.skipped.lock().expect("observer").take() {
            inner.skipped = skipped;
        }
        // Counted whether the run ended cleanly or on an error.
        if let Some(counters) = observer.counters.lock().expect("observer").as_ref() {
            inner.totals.0 += counters.dropped.load(Ordering::Relaxed);
            inner.totals.1 += counters.serializations.load(Ordering::Relaxed);
            inner.totals.2 += counters.skipped.load(Ordering::Relaxed);
            inner.totals.3 += counters.window_waits.load(Ordering::Relaxed);
            inner.row_totals.add(&counters.row);
        }
        // What this run applied, for the line logged as it ends.
        let mut run_applied = ApplyTotals::default();
        if let Some(mode) = *observer.binlog_gtids.lock().expect("observer") {
            inner.binlog_gtids = mode;
        }
        if let Some(progress) = observer.progress.lock().expect("observer").as_ref() {
            inner.apply_totals.add(progress);
            run_applied.add(progress);
            if let (Some(seqno), Some(marker)) = progress.low_water_marker() {
                inner.last_low_water = Some((seqno, marker.event_id.to_string()));
            }
        }
        let immediate = options
            .immediate
            .as_ref()
            .is_some_and(|i| i.load(Ordering::Acquire));
        match result {
            Ok(report) => {
                // Rows apart are a clean end too when they record that
                // nothing above their common base is committed (a channel
                // beyond it holds a stop mark: `online --until-seqno`).
                let clean = !immediate
                    && (report
                        .restart_rows
                        .iter()
                        .all(|r| r.seqno == report.restart_rows[0].seqno)
                        || handback_at_base(&report.restart_rows).is_some());
                inner.rows_record_commits = true;
                inner.last_rows = report.restart_rows;
                inner.unclean = if clean {
                    None
                } else if immediate {
                    Some(
                        "the last offline was immediate (channels may stop at different seqnos)"
                            .into(),
                    )
                } else {
                    Some("the last run ended with the channels at different seqnos".into())
                };
                if let Some((_, skips)) = read_catalog(&self.config) {
                    inner.skipped = skips;
                }
                if matches!(
                    inner.machine.state(),
                    State::Online | State::GoingOnlineSynchronizing
                ) {
                    let _ = inner.machine.apply(Event::Offline);
                }
                let _ = inner.machine.apply(Event::OfflineDone { clean });
                Self::resolve_error_if_done(&mut inner, "run ended");
                tracing::info!(
                    clean,
                    transactions = run_applied.transactions,
                    row_changes = run_applied.row_changes,
                    blocks = run_applied.blocks,
                    retries = run_applied.retry_count(),
                    "offline: this run applied"
                );
            }
            Err(error) => {
                // The rows as the failed run left them: what the replica
                // holds, and at least what the channels reported
                // committing (a restart row never moves backwards), so
                // status never goes back to the rows of an earlier time
                // when the replica cannot be read now.
                let mut rows = match read_catalog(&self.config) {
                    Some((rows, skips)) => {
                        inner.skipped = skips;
                        rows
                    }
                    // A run that failed at its setup applied nothing:
                    // the rows are those read before (the replica that
                    // cannot be read now is what the error says).
                    None if matches!(error, RunError::Setup { .. }) => inner.last_rows.clone(),
                    None => {
                        tracing::warn!(
                            "cannot read the restart rows after the error: status shows what \
                             the channels reported committing"
                        );
                        inner.last_rows.clone()
                    }
                };
                if let Some(progress) = observer.progress.lock().expect("observer").as_ref() {
                    advance_rows(&mut rows, progress, self.config.apply.channels);
                }
                inner.last_rows = rows;
                inner.rows_record_commits = matches!(
                    *observer.binlog_gtids.lock().expect("observer"),
                    Some(crate::config::BinlogGtids::Own | crate::config::BinlogGtids::Off)
                );
                // Whether a handback may follow is decided by these rows
                // (every channel at one seqno), not by how the run ended:
                // a source that cannot continue must not trap the service.
                // A run that failed before applying (setup) leaves things
                // as they were.
                if !matches!(
                    error,
                    RunError::Setup { .. } | RunError::NativeReplication(_)
                ) {
                    inner.unclean = None;
                }
                let lacks = *observer.binlog_lacks_rows_above.lock().expect("observer");
                let next = way_out::way_out(&error, &inner.last_rows, &self.config, lacks);
                // One event: the error and what to do about it.
                match &next {
                    Some(next) => tracing::error!(error = %error, next, "OFFLINE:ERROR"),
                    None => tracing::error!(error = %error, "OFFLINE:ERROR"),
                }
                let mut pending = pending_error(&error);
                *inner
                    .apply_totals
                    .errors
                    .entry(pending.code.unwrap_or(0))
                    .or_default() += 1;
                if let Some(next) = &next {
                    pending.message.push_str(". Way out: ");
                    pending.message.push_str(next);
                }
                inner.last_error = Some(RunFailure {
                    message: error.to_string(),
                    way_out: next,
                });
                let _ = inner.machine.apply(Event::Fail(pending));
            }
        }
        inner.run = None;
        // `online --until-seqno` and `offline --at-seqno` belonged to the
        // run that ended: nothing is pending any more.
        inner.until_seqno = None;
        inner.offline_at_seqno = None;
        drop(inner);
        let (lock, changed) = &*self.run_ended;
        *lock.lock().expect("run-ended lock") += 1;
        changed.notify_all();
    }

    /// Asks the current run to stop (the `offline` request).
    ///
    /// # Errors
    /// An illegal transition.
    pub fn go_offline(
        &self,
        immediate: bool,
        at_seqno: Option<u64>,
    ) -> Result<State, ServiceError> {
        self.go_offline_numbered(immediate, at_seqno)
            .map(|(state, _)| state)
    }

    /// [`Service::go_offline`], with the number this offline has among
    /// the offlines of the service ([`StateMachine::offlines`]): the one
    /// completed by the request itself (from `OFFLINE:ERROR`), or the
    /// next, completed when the run ends. [`Service::offline_end`] says
    /// when and how it ended, whatever requests came after it.
    ///
    /// # Errors
    /// As [`Service::go_offline`].
    pub fn go_offline_numbered(
        &self,
        immediate: bool,
        at_seqno: Option<u64>,
    ) -> Result<(State, u64), ServiceError> {
        self.online_after_switch.store(false, Ordering::Release);
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        let next = inner.machine.offlines() + 1;
        if let Some(at) = at_seqno {
            let Some(run) = &inner.run else {
                return Err(ServiceError::illegal_state(format!(
                    "offline --at-seqno needs a running service; it is {}",
                    inner.machine.state()
                )));
            };
            // The scheduler stops once it is past `at`: a seqno it has
            // already gone beyond cannot be stopped at.
            let handled = run
                .observer
                .counters
                .lock()
                .expect("observer")
                .as_ref()
                .and_then(|c| c.handled_next.load(Ordering::Acquire).checked_sub(1));
            if let Some(handled) = handled.filter(|&h| h > at) {
                return Err(ServiceError::illegal_state(format!(
                    "offline --at-seqno {at}: seqno {handled} is already handled; \
                     name a seqno of at least {handled}, or use offline"
                )));
            }
            run.stop_at.store(at, Ordering::Release);
            inner.offline_at_seqno = Some(at);
            return Ok((inner.machine.state(), next));
        }
        if !immediate {
            Self::refuse_with_temp_tables(&inner)?;
        }
        let event = if immediate {
            Event::OfflineImmediate
        } else {
            Event::Offline
        };
        let previous = inner.machine.state();
        let state = inner.machine.apply(event)?;
        if previous == State::OfflineError {
            // Acknowledged: the error stays in status while the restart
            // rows say the failure is not behind the channels.
            Self::resolve_error_if_done(&mut inner, "offline");
        }
        if let Some(run) = &inner.run {
            if immediate {
                run.immediate.store(true, Ordering::Release);
            }
            run.stop.store(true, Ordering::Release);
        }
        Ok((state, next))
    }

    /// What became of offline number `n` ([`Service::go_offline_numbered`]).
    pub fn offline_end(&self, n: u64) -> OfflineEnd {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        inner.machine.offline_end(n)
    }

    /// Forgets the last error when the restart rows show it behind the
    /// channels ([`error_resolved`]); otherwise keeps it in status (in
    /// `OFFLINE:NORMAL` too) and logs why, `after` naming what brought the
    /// service offline.
    fn resolve_error_if_done(inner: &mut Inner, after: &str) {
        let Some(error) = inner.machine.unresolved_error() else {
            return;
        };
        if error_resolved(&inner.last_rows, error) {
            inner.machine.resolve_error();
            return;
        }
        let seqnos: Vec<String> = inner
            .last_rows
            .iter()
            .map(|r| r.seqno.map_or("-".into(), |s| s.to_string()))
            .collect();
        tracing::warn!(
            after,
            restart_rows = %seqnos.join(","),
            error = %error,
            "the last error stays in status (pendingError): the channels' restart rows are at \
             different seqnos, short of the failed one; a successful online that passes it, or \
             reset, clears it"
        );
    }

    /// A clean offline while master sessions hold temporary tables on the
    /// replica would lose them (they live on the channel's connection):
    /// their sessions' later statements would fail with 1146. Refuses,
    /// naming the sessions, as native replication warns before stopping
    /// with `Slave_open_temp_tables` > 0.
    fn refuse_with_temp_tables(inner: &Inner) -> Result<(), ServiceError> {
        let Some(run) = &inner.run else {
            return Ok(());
        };
        let observer = run.observer.counters.lock().expect("observer");
        let Some(counters) = observer.as_ref() else {
            return Ok(());
        };
        let sessions = counters
            .temp_table_sessions
            .lock()
            .expect("temp table sessions")
            .clone();
        if sessions.is_empty() {
            return Ok(());
        }
        Err(ServiceError::illegal_state(format!(
            "offline refused: {} temporary table(s) of master sessions are open on the replica \
             ({}); a clean offline would lose them, and the sessions' later statements would \
             fail. Try again once the master sessions have dropped them or ended (status: \
             openTempTables = 0), or use offline --immediate to lose them",
            counters.open_temp_tables.load(Ordering::Acquire),
            sessions.join("; ")
        )))
    }

    fn replica_conn_error(&self, e: mysql_async::Error) -> ServiceError {
        failed(format!(
            "cannot connect to the replica {}:{}: {}",
            self.config.replica.host,
            self.config.replica.port,
            crate::mysql::ErrorText(&e)
        ))
    }

    /// Refuses `what` for a service with `role = "extractor"`, which never
    /// touches the replica (the shard map and restart rows live there).
    fn needs_replica(&self, what: &str) -> Result<(), ServiceError> {
        if self.config.service.role == Role::Extractor {
            return Err(ServiceError::Unsupported(format!(
                "{what}: service {} has role = \"extractor\" and never connects to the \
                     replica",
                self.config.service.name
            )));
        }
        Ok(())
    }

    /// Applies `edit` to the stored shard map and the running filter;
    /// returns `edit`'s count.
    fn edit_map(
        &self,
        edit: impl FnOnce(&mut ShardMap) -> Result<usize, ServiceError>,
    ) -> Result<usize, ServiceError> {
        self.stored_map(edit, true).map(|(n, _)| n)
    }

    /// Loads the stored shard map (created from `shard_filter.map_file`
    /// when the catalog has none), adds the shards the running filter
    /// auto-created since the last call, applies `edit`, stores it and,
    /// with `to_filter`, hands it to the running filter; returns `edit`'s
    /// count and the map as stored.
    fn stored_map(
        &self,
        edit: impl FnOnce(&mut ShardMap) -> Result<usize, ServiceError>,
        to_filter: bool,
    ) -> Result<(usize, ShardMap), ServiceError> {
        self.needs_replica("the shard map")?;
        let catalog = self.config.catalog_schema();
        let initial = match &self.config.shard_filter.map_file {
            Some(path) => Some(ShardMap::load(path).map_err(|e| failed(e.to_string()))?),
            None => None,
        };
        let _editing = self.map_edit.lock().expect("map edit");
        let created = std::mem::take(&mut self.live_map.lock().expect("live map").created);
        let result = block_on(async {
            let mut conn = mysql_async::Conn::new(super::replica_opts(&self.config))
                .await
                .map_err(|e| self.replica_conn_error(e))?;
            let mut map = store::load_or_init(&mut conn, &catalog, initial.as_ref())
                .await
                .map_err(|e| failed(e.to_string()))?;
            let added = LiveMap::merge_created(&created, &mut map);
            let n = edit(&mut map)?;
            store::save(&mut conn, &catalog, &map)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let _ = conn.disconnect().await;
            if added > 0 {
                tracing::info!(
                    shards = added,
                    "auto-created shards stored in the shard map"
                );
            }
            // The running router takes (empties) this slot before its next
            // transaction: the map returned is this call's own copy.
            if to_filter {
                self.live_map.lock().expect("live map").update = Some(map.clone());
            }
            Ok((n, map))
        })
        .and_then(|r| r);
        if result.is_err() {
            // Not stored: kept for the next call, before any newer ones.
            let mut live = self.live_map.lock().expect("live map");
            let newer = std::mem::replace(&mut live.created, created);
            live.created.extend(newer);
        }
        result
    }

    /// Applies `edit` to the stored map for each of `entries`; an edit's
    /// error is reported as `refused` makes it.
    fn edit_entries(
        &self,
        entries: Vec<ShardEntry>,
        refused: fn(String) -> ServiceError,
        edit: impl Fn(&mut ShardMap, ShardEntry) -> Result<(), String>,
    ) -> Result<usize, ServiceError> {
        self.edit_map(|map| {
            let n = entries.len();
            for e in entries {
                edit(map, e).map_err(refused)?;
            }
            Ok(n)
        })
    }

    /// The stored shard map (`shard list`), created from
    /// `shard_filter.map_file` when the catalog has none yet.
    ///
    /// # Errors
    /// [`ServiceError::Unsupported`] for an extractor-role service;
    /// [`ServiceError::Failed`] when the replica or the map file cannot be
    /// read.
    pub fn shard_map(&self) -> Result<ShardMap, ServiceError> {
        if !self.live_map.lock().expect("live map").created.is_empty() {
            // Auto-created shards to store first.
            return self.stored_map(|_| Ok(0), false).map(|(_, map)| map);
        }
        // Read only: nothing is created on a replica the service has not
        // taken over.
        self.needs_replica("the shard map")?;
        let catalog = self.config.catalog_schema();
        let initial = match &self.config.shard_filter.map_file {
            Some(path) => Some(ShardMap::load(path).map_err(|e| failed(e.to_string()))?),
            None => None,
        };
        block_on(async {
            let mut conn = mysql_async::Conn::new(super::replica_opts(&self.config))
                .await
                .map_err(|e| self.replica_conn_error(e))?;
            let map = store::read_or_initial(&mut conn, &catalog, initial.as_ref())
                .await
                .map_err(|e| failed(e.to_string()));
            let _ = conn.disconnect().await;
            map
        })
        .and_then(|r| r)
    }

    /// Runs `f` on the queue: the running pipeline's, or the queue opened
    /// for this call when offline.
    /// The queue the running run holds open (`None` without a run).
    fn running_queue(&self) -> Option<Arc<TransactionQueue>> {
        self.lock()
            .run
            .as_ref()
            .and_then(|r| r.observer.queue.lock().expect("observer").as_ref().cloned())
    }

    /// The queue's description while a run holds it open (`None`
    /// otherwise: opening the queue here would take its lock from a run
    /// that starts meanwhile).
    pub fn running_queue_info(&self) -> Option<QueueInfo> {
        self.running_queue()?.info().ok()
    }

    /// The extractor's progress after the last stored transaction, while
    /// a run holds the queue open.
    pub fn running_queue_progress(&self) -> Option<crate::queue::ExtractorProgress> {
        self.running_queue()?.last_progress()
    }

    fn with_queue<T>(
        &self,
        f: impl FnOnce(&TransactionQueue) -> Result<T, ServiceError>,
    ) -> Result<T, ServiceError> {
        let open = self.running_queue();
        match open {
            Some(queue) => f(&queue),
            None => {
                let queue = TransactionQueue::open(QueueOptions::from_config(&self.config.queue))
                    .map_err(|e| failed(e.to_string()))?;
                f(&queue)
            }
        }
    }
}

fn pending_error(error: &RunError) -> PendingError {
    use crate::scheduler::SchedulerError;
    match error {
        RunError::Apply(SchedulerError::Apply(e)) => {
            let mut p = PendingError::new(if e.seqno.is_none() {
                format!(
                    "channel {} failed outside any transaction: {}{}",
                    e.channel,
                    crate::applier::error::ServerCode(e.code),
                    e.message
                )
            } else {
                format!(
                    "channel {} failed at seqno {} (event {}, shard {}): {}{}",
                    e.channel,
                    e.seqno_number(),
                    e.event_text(),
                    e.shard,
                    crate::applier::error::ServerCode(e.code),
                    e.message
                )
            })
            .with_exception_message(&e.sql);
            p.code = (e.code != 0).then_some(u32::from(e.code));
            p.seqno = Some(e.seqno_number());
            p.event_id = Some(e.event_text());
            p.shard = Some(e.shard.clone());
            p.channel = Some(e.channel.get());
            p
        }
        RunError::Apply(SchedulerError::Rejected {
            seqno,
            shard,
            event_id,
            message,
            ..
        }) => {
            let mut p = PendingError::new(message.clone());
            p.seqno = Some(seqno.get());
            p.shard = Some(shard.clone());
            p.event_id = Some(event_id.to_string());
            p
        }
        RunError::QueueRead { seqno, .. } => {
            let mut p = PendingError::new(error.to_string());
            p.seqno = Some(*seqno);
            p
        }
        RunError::Setup {
            code: Some(code), ..
        }
        | RunError::Extract {
            code: Some(code), ..
        } => {
            let mut p = PendingError::new(error.to_string());
            p.code = Some(u32::from(*code));
            p
        }
        other => PendingError::new(other.to_string()),
    }
}

/// The seqno up to which the restart rows say everything is applied (or
/// needs no apply): their recovered low-water mark
/// ([`restart::recover`]; with rows of an older shardrep, the lowest row),
/// and the binlog position of a row at that seqno, when one is; `None`
/// while nothing is, or when the rows do not say.
fn applied_summary(rows: &[RestartRow]) -> (Option<Seqno>, Option<String>) {
    let Some(seqno) = restart::recover(rows).ok().and_then(|r| r.base()) else {
        return (None, None);
    };
    let event_id = rows
        .iter()
        .find(|r| r.seqno == Some(seqno))
        .map(RestartRow::event_id_text);
    (Some(seqno), event_id)
}

/// Whether the restart rows show `error` behind the channels: every row
/// at one seqno with every seqno up to it done (what a handback needs;
/// no rows: nothing was applied), or every seqno up to the failed one
/// done (passed after a retry, although an immediate offline left the
/// rows apart).
fn error_resolved(rows: &[RestartRow], error: &PendingError) -> bool {
    restart::all_done_at(rows).is_some()
        || error
            .seqno
            .is_some_and(|failed| applied_summary(rows).0.is_some_and(|a| a.get() >= failed))
}

/// The DBA's requests besides `online` and `offline`: status views, the
/// shard map, the queue, handback and reset (served on the control socket
/// by `crate::control::ServiceHandler`).
impl Service {
    /// The service as `status` shows it: no database round trip (a `wait`
    /// polls it).
    pub fn status(&self) -> StatusSnapshot {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        let (seqno, event_id) = applied_summary(&inner.last_rows);
        let event_id = event_id.or_else(|| {
            inner
                .last_low_water
                .as_ref()
                .filter(|(s, _)| Some(*s) == seqno)
                .map(|(_, e)| e.clone())
        });
        let (dropped, barriers, _, window_waits) = inner.totals;
        let skipped = inner
            .run
            .as_ref()
            .and_then(|r| r.observer.skipped.lock().expect("observer").clone())
            .unwrap_or_else(|| inner.skipped.clone());
        // "auto" as the running (or last) run resolved it.
        if let Some(mode) = inner
            .run
            .as_ref()
            .and_then(|r| *r.observer.binlog_gtids.lock().expect("observer"))
        {
            inner.binlog_gtids = mode;
        }
        let mut status = StatusSnapshot {
            service_name: self.config.service.name.clone(),
            role: self.config.service.role,
            state: inner.machine.state(),
            applied_last_seqno: seqno,
            applied_last_event_id: event_id,
            applied_latency: None,
            relative_latency: None,
            channels: self.config.apply.channels,
            serialization_count: barriers,
            window_wait_count: window_waits,
            dropped_count: dropped,
            // The DBA's skips as recorded in the catalog (each counted
            // once, however often a restarted run passes it again): the
            // running run's once it has recorded its own.
            skipped_count: skipped.len() as u64,
            skipped_seqnos: super::skip_ranges(&skipped),
            open_temp_tables: 0,
            parallelism: self.config.apply.parallelism,
            apply_method: self.config.apply.method,
            binlog_gtids: inner.binlog_gtids,
            binlog_gtids_configured: self.config.replica.binlog_gtids,
            row: inner.row_totals.clone(),
            minimum_stored_seqno: inner.last_stored.0,
            maximum_stored_seqno: inner.last_stored.1,
            pending_error: inner.machine.pending_error().cloned(),
            until_seqno: inner.until_seqno,
            offline_at_seqno: inner.offline_at_seqno,
            last_offline_clean: inner
                .machine
                .state()
                .is_offline()
                .then(|| inner.machine.last_offline_clean()),
            uptime: self.started.elapsed(),
            time_in_state: inner.machine.time_in_state(),
            applied: inner.apply_totals.clone(),
            lag: self.lag.lock().expect("lag").clone(),
            source: None,
            source_switched_at: None,
            source_first_seqno: None,
            source_switch_unfinished: self.unfinished_switch.lock().expect("switch").clone(),
            source_switch_under_way: self
                .switching
                .lock()
                .expect("switching")
                .clone()
                .or_else(|| self.finishing_switch.lock().expect("finishing").clone())
                .map(|address| format!("to {address}")),
        };
        let stored = self.stored_source();
        if let Some(live) = self.config.source.live() {
            status.source = Some(match &stored {
                Some(s) => (s.host.clone(), s.port),
                None => (live.host.clone(), live.port),
            });
        }
        if let Some(stored) = stored {
            status.source_switched_at = Some(stored.switched_at.clone());
            status.source_first_seqno = stored.resume.map(|r| r.first_seqno);
        }
        if let Some(run) = &inner.run {
            let o = &run.observer;
            if let Some(counters) = o.counters.lock().expect("observer").as_ref() {
                status.dropped_count += counters.dropped.load(Ordering::Relaxed);
                status.serialization_count += counters.serializations.load(Ordering::Relaxed);
                status.window_wait_count += counters.window_waits.load(Ordering::Relaxed);
                status.open_temp_tables = counters.open_temp_tables.load(Ordering::Acquire);
                status.row.add(&counters.row);
                status.row.in_flight = counters.row.in_flight.load(Ordering::Relaxed);
                status.row.keys_held = counters.row.keys_held.load(Ordering::Relaxed);
            }
            if let Some(queue) = o.queue.lock().expect("observer").as_ref() {
                status.minimum_stored_seqno = queue.min_seqno();
                status.maximum_stored_seqno = queue.max_seqno();
            }
            if let Some(progress) = o.progress.lock().expect("observer").as_ref() {
                status.applied.add(progress);
                let channels = usize::from(self.config.apply.channels);
                let markers: Vec<_> = (0..channels).map(|c| progress.marker(c)).collect();
                // The low-water mark (every seqno up to it committed by
                // some channel, or needing no apply), once every channel's
                // row has reached it too (a SYNC marker moves idle
                // channels), so that `wait --applied N` also means every
                // restart row is at N or beyond, as before the mark.
                let (low_water, low_water_marker) = progress.low_water_marker();
                let applied = low_water.min(progress.minimum());
                status.applied_last_seqno = applied;
                let low_water_marker = low_water_marker.filter(|m| Some(m.seqno) == applied);
                // The event id of exactly that seqno: its marker when this
                // run handled it, else a channel's marker of this run, else
                // the restart row a channel started the run at (a channel
                // whose row was already there records no marker, e.g.
                // after an error on another channel).
                let marker = markers
                    .iter()
                    .flatten()
                    .find(|(m, _)| Some(m.seqno) == applied);
                if let Some((_, latency)) = marker {
                    status.applied_latency = Some(*latency);
                }
                status.applied_last_event_id = low_water_marker
                    .map(|m| m.event_id.to_string())
                    .or_else(|| marker.map(|(m, _)| m.event_id.to_string()))
                    .or_else(|| {
                        inner
                            .last_rows
                            .iter()
                            .find(|r| applied.is_some() && r.seqno == applied)
                            .map(RestartRow::event_id_text)
                    });
                let newest = markers
                    .iter()
                    .flatten()
                    .max_by_key(|(m, _)| m.seqno)
                    .map(|(m, _)| m.extract_time);
                if let Some(t) = newest {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64());
                    status.relative_latency = Some((now - f64::from(t)).max(0.0));
                }
            }
        }
        status
    }

    /// Each channel as `status --name channels` shows it, channel order.
    pub fn channel_status(&self) -> Vec<ChannelSnapshot> {
        let inner = self.lock();
        let progress = inner.run.as_ref().and_then(|r| {
            r.observer
                .progress
                .lock()
                .expect("observer")
                .as_ref()
                .cloned()
        });
        let applied_count = |c: u16| {
            progress
                .as_ref()
                .map_or(0, |p| p.applied_count(usize::from(c)))
        };
        let mut out = Vec::new();
        for c in 0..self.config.apply.channels {
            let row = inner.last_rows.iter().find(|r| r.channel.get() == c);
            let live = progress.as_ref().and_then(|p| p.marker(usize::from(c)));
            out.push(match live {
                Some((m, latency)) => ChannelSnapshot {
                    channel: c,
                    applied_last_seqno: Some(m.seqno),
                    applied_last_event_id: Some(m.event_id.to_string()),
                    applied_latency: Some(latency),
                    applied_count: applied_count(c),
                    shard_id: Some(m.shard_id.clone()),
                },
                None => ChannelSnapshot {
                    channel: c,
                    applied_last_seqno: row.and_then(|r| r.seqno),
                    applied_last_event_id: row.map(RestartRow::event_id_text),
                    applied_latency: None,
                    applied_count: applied_count(c),
                    shard_id: row.map(|r| r.shard_id.clone()),
                },
            });
        }
        out
    }

    /// Each shard of the map, and each shard a foreign key joins to one,
    /// as `status --name shards` shows it, shard id order.
    ///
    /// # Errors
    /// As [`Service::shard_map`]; [`ServiceError::Failed`] when the
    /// channel assignment of the configuration is refused.
    pub fn shard_status(&self) -> Result<Vec<ShardSnapshot>, ServiceError> {
        let map = self.shard_map()?;
        let assignment = ChannelAssignment::from_config(&self.config.apply)
            .map_err(|e| failed(e.to_string()))?;
        let (progress, groups) = {
            let inner = self.lock();
            let observer = inner.run.as_ref().map(|r| r.observer.clone());
            let progress = observer
                .as_ref()
                .and_then(|o| o.progress.lock().expect("observer").as_ref().cloned());
            // The live run's foreign-key groups (none when offline).
            let groups = observer
                .and_then(|o| o.foreign_keys.lock().expect("observer").clone())
                .map(|g| g.lock().expect("foreign-key groups lock").clone())
                .unwrap_or_default();
            (progress, groups)
        };
        // The map's shards, and those a foreign key joins that it lacks.
        let mut ids: std::collections::BTreeSet<String> =
            map.iter().map(|e| e.shard_id.clone()).collect();
        ids.extend(
            groups
                .groups()
                .iter()
                .flat_map(|g| g.shards.iter().cloned()),
        );
        Ok(ids
            .into_iter()
            .map(|shard_id| {
                let applied = progress.as_ref().and_then(|p| p.shard_applied(&shard_id));
                let group = groups.group_of(&shard_id);
                ShardSnapshot {
                    channel: group.map_or_else(|| assignment.channel_of(&shard_id), |g| g.channel),
                    critical: assignment.is_critical(&shard_id, &map),
                    applied,
                    foreign_key_group: group.map(|g| g.shards.clone()).unwrap_or_default(),
                    serialized_reason: group.map(|g| g.reason()),
                    shard_id,
                }
            })
            .collect())
    }

    /// `shard insert`: adds the shards, all or none; returns how many.
    ///
    /// # Errors
    /// [`ServiceError::Invalid`] when the map refuses one (a duplicate);
    /// as [`Service::shard_map`].
    pub fn insert_shards(&self, entries: Vec<ShardEntry>) -> Result<usize, ServiceError> {
        self.edit_entries(entries, ServiceError::Invalid, |map, e| {
            map.insert(e).map_err(|e| e.to_string())
        })
    }

    /// `shard update`: replaces existing shards, all or none; returns
    /// how many.
    ///
    /// # Errors
    /// [`ServiceError::NotFound`] for a shard not in the map; as
    /// [`Service::shard_map`].
    pub fn update_shards(&self, entries: Vec<ShardEntry>) -> Result<usize, ServiceError> {
        self.edit_entries(entries, ServiceError::NotFound, |map, e| {
            map.update(e).map(drop).map_err(|e| e.to_string())
        })
    }

    /// `shard delete`: removes the shards, all or none; returns how many.
    ///
    /// # Errors
    /// [`ServiceError::NotFound`] for a shard not in the map; as
    /// [`Service::shard_map`].
    pub fn delete_shards(&self, ids: &[String]) -> Result<usize, ServiceError> {
        self.edit_map(|map| {
            for id in ids {
                map.delete(id)
                    .map_err(|e| ServiceError::NotFound(e.to_string()))?;
            }
            Ok(ids.len())
        })
    }

    /// `shard delete-all`: empties the shard map; returns how many shards
    /// it had.
    ///
    /// # Errors
    /// As [`Service::shard_map`].
    pub fn delete_all_shards(&self) -> Result<usize, ServiceError> {
        self.edit_map(|map| Ok(map.delete_all()))
    }

    /// `log list`: the stored transactions from `low` to `high` inclusive
    /// (defaults: the lowest and highest stored), seqno order.
    ///
    /// # Errors
    /// [`ServiceError::Invalid`] for a range of more than
    /// [`LOG_LIST_MAX`] seqnos; [`ServiceError::Failed`] when the queue
    /// cannot be read.
    pub fn log_list(
        &self,
        low: Option<u64>,
        high: Option<u64>,
    ) -> Result<Vec<Transaction>, ServiceError> {
        self.with_queue(|queue| {
            let (Some(min), Some(max)) = (queue.min_seqno(), queue.max_seqno()) else {
                return Ok(Vec::new());
            };
            let low = low.unwrap_or(min.get()).max(min.get());
            let high = high.unwrap_or(max.get()).min(max.get());
            if high >= low && high - low >= LOG_LIST_MAX {
                return Err(ServiceError::Invalid(format!(
                    "log list of seqnos {low}..={high} is more than {LOG_LIST_MAX} transactions: \
                         name a smaller range with --low/--high"
                )));
            }
            let mut out = Vec::new();
            for seqno in low..=high {
                if let Some(txn) = queue.get(Seqno(seqno)).map_err(|e| failed(e.to_string()))? {
                    out.push(txn);
                }
            }
            Ok(out)
        })
    }

    /// `log info`: the queue's summary (the running pipeline's queue, or
    /// the queue opened for this call when offline).
    ///
    /// # Errors
    /// [`ServiceError::Failed`] when the queue cannot be opened or read.
    pub fn queue_info(&self) -> Result<QueueInfo, ServiceError> {
        self.with_queue(|queue| queue.info().map_err(|e| failed(e.to_string())))
    }

    /// `handback`: points the replica's native replication at the
    /// position after the last applied transaction (every restart row at
    /// one seqno), optionally `START SLAVE`, then forgets the queue,
    /// restart rows and recorded skips.
    ///
    /// # Errors
    /// [`ServiceError::IllegalState`] when the state, an unclean stop, the
    /// restart rows or a started DDL refuse it;
    /// [`ServiceError::Unsupported`] for an extractor-role service;
    /// [`ServiceError::Failed`] when the replica or the file system fails.
    pub fn handback(&self, start_slave: bool) -> Result<HandedBack, ServiceError> {
        self.needs_replica("handback")?;
        let mut inner = self.lock();
        let state = inner.machine.state();
        if !state.is_offline() || inner.run.is_some() {
            return Err(ServiceError::illegal_state(format!(
                "handback needs OFFLINE:NORMAL after a clean offline, or OFFLINE:ERROR with \
                 every channel at one seqno; the service is {state}"
            )));
        }
        if let Some(reason) = &inner.unclean {
            return Err(ServiceError::illegal_state(format!(
                "{reason}: go online, then offline without --immediate, then hand back"
            )));
        }
        let catalog = self.config.catalog_schema();
        let config = self.config.clone();
        let used_gtid = inner.takeover_used_gtid;
        let name = self.config.service.name.clone();
        // The failed transaction a handback would leave to native
        // replication (its restart rows may be uneven).
        let failed_seqno = inner
            .machine
            .pending_error()
            .and_then(|p| p.seqno)
            .filter(|&s| s > 0);
        // Under the master's GTIDs the replica's binlog records commits the
        // rows may not yet (written every few commits): rows apart are not
        // a record of what is committed there.
        let rows_exact = inner.rows_record_commits;
        let result = block_on(async move {
            let mut conn = super::connect_replica_for_native(&config)
                .await
                .map_err(|e| failed(e.to_string()))?;
            // After a switch, native replication follows the new master
            // (the catalog's, whatever this process read at its start).
            let switched = super::source::read(&mut conn, &catalog)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let rows = restart_rows_at_rest(&mut conn, &catalog, "hand back").await?;
            let (seqno, position, gtid) =
                handback_position(&rows, &name, failed_seqno, rows_exact)?;
            let use_gtid = switched.is_some()
                || match used_gtid {
                    Some(g) => g,
                    None => crate::replica::slave_status(&mut conn)
                        .await
                        .map_err(|e| failed(e.to_string()))?
                        .is_some_and(|s| s.using_gtid != crate::replica::UsingGtid::No),
                } && gtid.is_some();
            let point = crate::replica::HandbackPoint::new(&position, gtid.as_ref());
            let master = switched.as_ref().map(|s| (s.host.as_str(), s.port));
            let report = crate::replica::handback(&mut conn, &point, use_gtid, start_slave, master)
                .await
                .map_err(|e| failed(format!("handback: {e}")))?;
            // Native replication owns the replica again: forget the
            // restart rows and the recorded skips (their seqnos belong to
            // the queue removed below) so the next online takes over
            // afresh.
            conn.query_drop_no_log(&catalog::restart_delete(&catalog))
                .await
                .map_err(|e| failed(format!("clearing the restart rows: {e}")))?;
            skipped::clear(&mut conn, &catalog)
                .await
                .map_err(|e| failed(format!("clearing the recorded skips: {e}")))?;
            super::source::clear_resume(&mut conn, &catalog)
                .await
                .map_err(|e| failed(format!("clearing the switch's resume position: {e}")))?;
            let _ = conn.disconnect().await;
            Ok::<_, ServiceError>(HandedBack {
                seqno,
                point,
                use_gtid,
                slave_started: start_slave,
                statements: report.statements,
            })
        })??;
        // The queue belongs to the handed-back run: remove it.
        let dir = &self.config.queue.dir;
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| failed(format!("removing the queue {}: {e}", dir.display())))?;
        }
        tracing::info!(
            seqno = %result.seqno.map_or_else(|| "-".to_string(), |s| s.to_string()),
            position = %format!("{}:{}", result.point.file, result.point.pos),
            gtid_pos = result.point.gtid_pos.as_deref().unwrap_or(""),
            use_gtid = result.use_gtid,
            started = start_slave,
            "handed back to native replication"
        );
        inner.last_rows.clear();
        inner.last_stored = (None, None);
        inner.skipped.clear();
        inner.handed_back = Some(result.clone());
        if state == State::OfflineError {
            // Handed back at a consistent position: the error is dealt with.
            let _ = inner.machine.apply(Event::Offline);
        }
        inner.machine.resolve_error();
        Ok(result)
    }

    /// `reset`: removes the service's queue, restart rows and recorded
    /// skips without touching native replication (the way out when the
    /// source cannot continue).
    ///
    /// # Errors
    /// [`ServiceError::Invalid`] unless `confirm` is the service's name;
    /// [`ServiceError::IllegalState`] unless it is offline with no run;
    /// [`ServiceError::Failed`] when the replica or the file system fails.
    pub fn reset(&self, confirm: &str, drop_catalog: bool) -> Result<ResetDone, ServiceError> {
        let mut inner = self.lock();
        let name = &self.config.service.name;
        let catalog = self.config.catalog_schema();
        let dir = self.config.queue.dir.clone();
        if confirm != name {
            return Err(ServiceError::Invalid(format!(
                "reset removes the queue {} and the restart rows and recorded skips in \
                     {catalog} on the replica {}:{}: confirm with --confirm {name}",
                dir.display(),
                self.config.replica.host,
                self.config.replica.port
            )));
        }
        let state = inner.machine.state();
        if !state.is_offline() || inner.run.is_some() {
            return Err(ServiceError::illegal_state(format!(
                "reset needs the service offline (OFFLINE:NORMAL or OFFLINE:ERROR); it is \
                 {state}: shardrepctl offline first"
            )));
        }
        // A reset starts over: a refused switch's promise to go online
        // again at the next source set does not outlive it.
        self.online_after_switch.store(false, Ordering::Release);
        let config = self.config.clone();
        let (rows, skips) = block_on(async {
            use mysql_async::prelude::Queryable;
            let mut conn = mysql_async::Conn::new(super::replica_opts(&config))
                .await
                .map_err(|e| self.replica_conn_error(e))?;
            let exists: Option<u64> = conn
                .exec_first(catalog::TABLE_EXISTS, (&catalog, catalog::RESTART_TABLE))
                .await
                .map_err(|e| failed(format!("reset: {e}")))?;
            let mut rows = 0;
            if exists == Some(1) {
                rows = conn
                    .query_first::<u64, _>(catalog::restart_count(&catalog))
                    .await
                    .map_err(|e| failed(format!("reset: {e}")))?
                    .unwrap_or(0);
                if drop_catalog && rows > 0 {
                    return Err(ServiceError::illegal_state(format!(
                        "reset --drop-catalog removes every trace of the service after a \
                         handback, but the replica holds {rows} restart row(s) of it in \
                         {catalog}: a takeover is in force (native replication is stopped and \
                         where it must resume is in them). `shardrepctl handback` first; or, \
                         after a re-seed, `shardrepctl reset --confirm {name}` to forget them, \
                         then --drop-catalog. Nothing was changed"
                    )));
                }
                conn.query_drop_no_log(&catalog::restart_delete(&catalog))
                    .await
                    .map_err(|e| failed(format!("reset: clearing the restart rows: {e}")))?;
            }
            if drop_catalog {
                let _ = conn.disconnect().await;
                return Ok((rows, 0));
            }
            let skips = skipped::clear(&mut conn, &catalog)
                .await
                .map_err(|e| failed(format!("reset: clearing the recorded skips: {e}")))?;
            super::source::clear_resume(&mut conn, &catalog)
                .await
                .map_err(|e| {
                    failed(format!("reset: clearing the switch's resume position: {e}"))
                })?;
            let _ = conn.disconnect().await;
            Ok::<_, ServiceError>((rows, skips))
        })??;
        let queue_removed = dir.exists();
        if queue_removed {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| failed(format!("reset: removing the queue {}: {e}", dir.display())))?;
        }
        let catalog_dropped = if drop_catalog {
            block_on(async {
                let mut conn = mysql_async::Conn::new(super::replica_opts(&config))
                    .await
                    .map_err(|e| self.replica_conn_error(e))?;
                conn.query_drop_no_log(&format!(
                    "DROP DATABASE IF EXISTS {}",
                    crate::mysql::quote_ident(&catalog)
                ))
                .await
                .map_err(|e| failed(format!("reset: dropping the catalog {catalog}: {e}")))?;
                let _ = conn.disconnect().await;
                Ok::<_, ServiceError>(())
            })??;
            tracing::warn!(catalog = %catalog, "reset: the catalog schema is dropped");
            Some(catalog.clone())
        } else {
            None
        };
        inner.last_rows.clear();
        inner.last_stored = (None, None);
        inner.skipped.clear();
        inner.unclean = None;
        inner.takeover_used_gtid = None;
        inner.handed_back = None;
        if state == State::OfflineError {
            let _ = inner.machine.apply(Event::Offline);
        }
        // The DBA starts over: an error kept since is no longer pending.
        inner.machine.resolve_error();
        tracing::warn!(
            queue = %dir.display(),
            restart_rows = rows,
            skipped = skips,
            "reset: the service's queue, restart rows and recorded skips are removed; the next \
             online takes over afresh or starts at source.start"
        );
        Ok(ResetDone {
            state: inner.machine.state(),
            queue_removed: queue_removed.then_some(dir),
            restart_rows_deleted: rows,
            skipped_deleted: skips,
            catalog_dropped,
        })
    }
}

/// The restart rows and recorded skips on the replica; `None` when the
/// replica cannot be read now.
fn read_catalog(config: &Config) -> Option<(Vec<RestartRow>, Vec<SkippedSeqno>)> {
    // An extractor-role service never connects to the replica.
    if config.service.role == Role::Extractor {
        return None;
    }
    let catalog = config.catalog_schema();
    block_on(async {
        let mut conn = mysql_async::Conn::new(super::replica_opts(config))
            .await
            .ok()?;
        let rows = restart::read(&mut conn, &catalog).await.ok();
        let skips = skipped::read(&mut conn, &catalog).await.ok();
        let _ = conn.disconnect().await;
        Some((rows?, skips?))
    })
    .ok()
    .flatten()
}

/// Moves each channel's row in `rows` up to the last position the run's
/// channels reported committing, and its low-water mark up to the highest
/// the run wrote (never down: the replica's row is at least there).
fn advance_rows(rows: &mut Vec<RestartRow>, progress: &Progress, channels: u16) {
    let durable = progress.durable_low_water();
    for channel in 0..channels {
        let Some((m, _)) = progress.marker(usize::from(channel)) else {
            continue;
        };
        let row = m.row(ChannelId::recorded(channel));
        match rows.iter_mut().find(|r| r.channel == row.channel) {
            Some(r) if r.seqno < row.seqno => {
                r.seqno = row.seqno;
                r.epoch = row.epoch;
                r.event_id = row.event_id;
                r.gtid = row.gtid;
                r.shard_id = row.shard_id;
            }
            Some(_) => {}
            None => rows.push(RestartRow {
                low_water: LowWater::of(durable),
                ..row
            }),
        }
    }
    for r in rows.iter_mut() {
        if let Some(l) = durable.filter(|l| r.low_water.seqno() < Some(*l)) {
            if !r.low_water.is_unrecorded() {
                r.low_water = LowWater::At(l);
            }
        }
    }
    rows.sort_by_key(|r| r.channel);
}

/// Where a handback points native replication, from the restart rows:
/// every channel at one seqno (the position after it), or every channel
/// with nothing applied and the takeover position recorded
/// ([`restart::record_start`]): that position, seqno `None`.
///
/// # Errors
/// [`ServiceError::IllegalState`] when there are no rows, the rows differ,
/// or nothing was applied and no takeover position is recorded.
fn handback_position(
    rows: &[RestartRow],
    name: &str,
    failed: Option<u64>,
    rows_exact: bool,
) -> Result<(Option<Seqno>, BinlogPosition, Option<GtidPos>), ServiceError> {
    let first = rows.first().cloned().ok_or_else(|| {
        ServiceError::illegal_state("nothing to hand back: the service has no restart position")
    })?;
    let equal = rows
        .iter()
        .all(|r| r.seqno == first.seqno && r.event_id == first.event_id);
    if equal && restart::all_done_at(rows).is_none() {
        let low_water = rows.iter().filter_map(|r| r.low_water.seqno()).max();
        return Err(ServiceError::illegal_state(format!(
            "the channels' restart rows are at seqno {} but record every seqno done only up to \
             {} (low_water): a seqno below may not be applied. Go online, then offline without \
             --immediate, then hand back",
            first.seqno.map_or(-1, |s| s.get() as i64),
            low_water.map_or(-1, |s| s.get() as i64)
        )));
    }
    if !equal {
        // Rows apart after a failure or an immediate stop: exact at the
        // recovered base when nothing above it is committed (the rows
        // beyond it hold stop marks only, no commit): native replication
        // resumes after it and applies every later seqno once.
        if let Some((base, at)) = handback_at_base(rows).filter(|_| rows_exact) {
            let gtid = (!at.gtid.is_empty()).then(|| at.gtid.clone());
            if let Some(position) = at.event_id.clone() {
                return Ok((Some(base), position, gtid));
            }
        }
        let seqnos: Vec<String> = rows
            .iter()
            .map(|r| r.seqno.map_or("-".into(), |s| s.to_string()))
            .collect();
        // The highest seqno committed: recorded exactly by the rows, or
        // (rows of an older shardrep) the highest row.
        let highest = match restart::recover(rows) {
            Ok(restart::Recovery::Exact { base, committed }) => committed.last().or(base),
            _ => rows.iter().filter_map(|r| r.seqno).max(),
        };
        let way = match failed {
            // Nothing at or above the failed seqno is committed: applying
            // the seqnos below it leaves nothing committed above them.
            Some(f) if highest.is_none_or(|c| c.get() < f) => format!(
                "To hand the replica back before the failed seqno {f}: `shardrepctl online \
                 --until-seqno {}` applies the seqnos before it that are not committed and \
                 stops there, then `shardrepctl handback` and START SLAVE (native replication then applies \
                 seqno {f} and meets its error, in SHOW SLAVE STATUS). Or fix what failed and \
                 go online (or --skip-seqno {f}), then offline and hand back",
                f - 1
            ),
            Some(f) => format!(
                "Seqno {} above the failed seqno {f} is already committed (under row or shard \
                 parallelism the channels commit out of order), so native replication started \
                 before seqno {f} would apply it again: fix what failed and go online (or \
                 --skip-seqno {f}), then offline without --immediate, then hand back",
                highest.map_or(0, Seqno::get)
            ),
            None => "Go online (after fixing what failed, or with --skip-seqno), then offline \
                     without --immediate, then hand back"
                .to_string(),
        };
        return Err(ServiceError::illegal_state(format!(
            "the channels' restart rows are at different seqnos ({}): the last stop was not \
             clean. {way}; if the source cannot continue, `shardrepctl reset --confirm {name}` \
             forgets this service (re-seed the replica first)",
            seqnos.join(",")
        )));
    }
    let Some(position) = first.event_id else {
        return Err(ServiceError::illegal_state(format!(
            "nothing to hand back: no channel applied anything and no takeover position is \
             recorded (the service started at source.start), so native replication is still \
             where it was; `shardrepctl reset --confirm {name}` forgets this service"
        )));
    };
    let gtid = (!first.gtid.is_empty()).then_some(first.gtid);
    Ok((first.seqno, position, gtid))
}

/// Where rows that are apart can be handed back exactly: the recovered
/// base (every seqno up to it committed, [`restart::recover`]) when no
/// seqno above it is committed, with a row at that seqno (its position).
/// `None` otherwise (legacy rows, commits above the base, no row there).
pub(super) fn handback_at_base(rows: &[RestartRow]) -> Option<(Seqno, &RestartRow)> {
    let recovery = restart::recover(rows).ok()?;
    let (base, committed) = recovery.require_exact().ok()?;
    let base = base?;
    if !committed.is_empty() {
        return None;
    }
    rows.iter()
        .find(|r| r.seqno == Some(base) && r.event_id.is_some())
        .map(|r| (base, r))
}

/// The restart rows, once no channel has a DDL started and not recorded
/// (what a handback and a master switch need before they read them).
///
/// # Errors
/// [`ServiceError::Failed`] when the catalog cannot be read;
/// [`ServiceError::IllegalState`] naming the channel and seqno of a
/// started DDL, and that `then` (the command) comes after going online
/// and offline.
pub(super) async fn restart_rows_at_rest(
    conn: &mut mysql_async::Conn,
    catalog: &str,
    then: &str,
) -> Result<Vec<RestartRow>, ServiceError> {
    use mysql_async::prelude::Queryable;
    let exists: Option<u64> = conn
        .exec_first(
            crate::catalog::TABLE_EXISTS,
            (catalog, crate::catalog::RESTART_TABLE),
        )
        .await
        .map_err(|e| failed(format!("{then}: {e}")))?;
    if exists != Some(1) {
        return Err(ServiceError::illegal_state(format!(
            "nothing to {then}: the replica holds no restart rows of this service (table \
             {catalog}.{} does not exist): the service never took this replica over, or a \
             reset removed them. Nothing was changed",
            crate::catalog::RESTART_TABLE
        )));
    }
    let rows = restart::read(conn, catalog)
        .await
        .map_err(|e| failed(e.to_string()))?;
    for row in &rows {
        if let Some(ddl) = restart::pending_ddl(conn, catalog, row.channel)
            .await
            .map_err(|e| failed(e.to_string()))?
        {
            return Err(ServiceError::illegal_state(format!(
                "channel {} started the DDL of seqno {ddl} but did not record it: go online \
                 (the channel completes it), then offline, then {then}",
                row.channel
            )));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
