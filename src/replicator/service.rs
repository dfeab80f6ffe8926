//! The replicator as a service a DBA drives with `shardrepctl`: the state
//! machine ([`super::state`]), one pipeline run ([`super::run`]) at a time
//! on a worker thread while ONLINE, and the control socket's handler
//! ([`crate::control::ControlHandler`]).
//!
//! - `online` starts a run (GOING-ONLINE:SYNCHRONIZING, then ONLINE once
//!   the channels apply). A service with no queue and no restart position
//!   and `source.start = "takeover"` takes over the replica's native
//!   replication first ([`crate::replica::takeover`]).
//! - `offline` asks the run for a clean stop (STOP marker: every channel
//!   ends at one seqno); `--immediate` stops without it; `--at-seqno N`
//!   stops cleanly once N is handled.
//! - A definite error ends the run: OFFLINE:ERROR with the pending error;
//!   `online` retries, optionally skipping named seqnos.
//! - `handback` (OFFLINE:NORMAL, every restart row at one seqno) points the
//!   replica's native replication at the position after that seqno
//!   ([`crate::replica::handback`]), then clears the service's queue and
//!   restart rows, so the next `online` takes over again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::{json, Value};

use super::state::{Event, PendingError, SkipSeqnos, State, StateMachine};
use super::{Observer, RunError, RunOptions};
use crate::applier::restart::{self, RestartRow};
use crate::config::{Config, Role};
use crate::control::protocol::{
    ChannelStatus, ControlError, ErrorKind, LogEntry, OfflineRequest, OnlineRequest, ShardRow,
    ShardStatus, Status,
};
use crate::control::server::ControlHandler;
use crate::position::{BinlogPosition, GtidPos, Seqno};
use crate::queue::{QueueOptions, TransactionQueue};
use crate::shard::channel::ChannelAssignment;
use crate::shard::map::{ShardEntry, ShardMap};
use crate::shard::store;

/// Most transactions one `log list` answers with.
pub const LOG_LIST_MAX: u64 = 1000;

/// The service: configuration, state and the current run.
pub struct Service {
    config: Config,
    started: Instant,
    inner: Mutex<Inner>,
    map_updates: Arc<Mutex<Option<ShardMap>>>,
    /// Set when the worker thread of a run ends (for foreground waits).
    run_ended: Arc<(Mutex<u64>, std::sync::Condvar)>,
    stop_when_idle: bool,
    /// This service (runs hold a strong reference while they go on).
    me: std::sync::Weak<Service>,
}

struct Inner {
    machine: StateMachine,
    run: Option<ActiveRun>,
    /// Restart rows as last read or left by a run.
    last_rows: Vec<RestartRow>,
    /// Counters of the runs that ended (dropped, barriers, skipped):
    /// status adds the current run's to them ("since the service
    /// started").
    totals: (u64, u64, u64),
    /// Stored seqno range of the queue when last seen.
    last_stored: (Option<u64>, Option<u64>),
    until_seqno: Option<u64>,
    offline_at_seqno: Option<u64>,
    /// How the replica's native replication ran before the takeover.
    takeover_used_gtid: Option<bool>,
    /// The last run's outcome, for `--until-idle` exits.
    last_error: Option<String>,
    /// Why the last run of this process did not end cleanly (refuses a
    /// handback until a clean offline).
    unclean: Option<String>,
}

struct ActiveRun {
    stop: Arc<AtomicBool>,
    immediate: Arc<AtomicBool>,
    stop_at: Arc<AtomicU64>,
    observer: Arc<Observer>,
}

fn failed(message: impl Into<String>) -> ControlError {
    ControlError::new(ErrorKind::Failed, message)
}

fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, ControlError> {
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
        let catalog = config.catalog_schema();
        let extractor_only = config.service.role == Role::Extractor;
        let rows = block_on(async {
            if extractor_only {
                return None;
            }
            let mut conn = mysql_async::Conn::new(super::replica_opts(&config))
                .await
                .ok()?;
            let rows = restart::read(&mut conn, &catalog).await.ok();
            let _ = conn.disconnect().await;
            rows
        })
        .ok()
        .flatten()
        .unwrap_or_default();
        Arc::new_cyclic(|me| Service {
            me: me.clone(),
            config,
            started: Instant::now(),
            inner: Mutex::new(Inner {
                machine: StateMachine::new(),
                run: None,
                last_rows: rows,
                totals: (0, 0, 0),
                last_stored: (None, None),
                until_seqno: None,
                offline_at_seqno: None,
                takeover_used_gtid: None,
                last_error: None,
                unclean: None,
            }),
            map_updates: Arc::new(Mutex::new(None)),
            run_ended: Arc::new((Mutex::new(0), std::sync::Condvar::new())),
            stop_when_idle,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("service lock")
    }

    /// The current state.
    pub fn state(&self) -> State {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        inner.machine.state()
    }

    /// The last run's error message, if it ended on one.
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
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
    ) -> Result<State, ControlError> {
        let mut inner = self.lock();
        if inner.run.is_some() {
            return Err(ControlError::illegal_state(format!(
                "the service is {}: a run is still active",
                inner.machine.state()
            )));
        }
        if let Some(until) = until_seqno {
            if let Some(beyond) = inner
                .last_rows
                .iter()
                .filter_map(|r| r.seqno.map(Seqno::get))
                .filter(|&s| s > until)
                .max()
            {
                return Err(ControlError::illegal_state(format!(
                    "online --until-seqno {until}: seqno {beyond} is already applied; \
                     name a seqno of at least {beyond}"
                )));
            }
        }
        let state = inner.machine.apply(Event::Online)?;
        let run = ActiveRun {
            stop: Arc::new(AtomicBool::new(false)),
            immediate: Arc::new(AtomicBool::new(false)),
            stop_at: Arc::new(AtomicU64::new(until_seqno.unwrap_or(u64::MAX))),
            observer: Arc::new(Observer::default()),
        };
        let options = RunOptions {
            stop_when_idle: self.stop_when_idle,
            skip_seqnos: skip
                .map(|s| s.ranges().iter().map(|&(a, b)| a..=b).collect())
                .unwrap_or_default(),
            stop_at: Some(run.stop_at.clone()),
            immediate: Some(run.immediate.clone()),
            observer: Some(run.observer.clone()),
            map_updates: Some(self.map_updates.clone()),
        };
        if let Some(skip) = &options.skip_seqnos.first() {
            tracing::warn!(first = skip.start(), ranges = ?options.skip_seqnos, "online: these seqnos will be skipped at the DBA's request");
        }
        inner.until_seqno = until_seqno;
        inner.offline_at_seqno = None;
        inner.last_error = None;
        let stop = run.stop.clone();
        inner.run = Some(run);
        drop(inner);
        let service = self
            .me
            .upgrade()
            .ok_or_else(|| failed("the service is shutting down"))?;
        // ONLINE as soon as the channels apply (so timeInStateSeconds
        // counts from then, not from the next control request).
        let watcher = service.clone();
        let observer = options.observer.clone();
        std::thread::Builder::new()
            .name("shardrep-run".into())
            .spawn(move || {
                let result = super::run(&service.config, stop, &options);
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

    fn run_finished(&self, result: Result<super::RunReport, RunError>, options: &RunOptions) {
        let mut inner = self.lock();
        let observer = options.observer.clone().unwrap_or_default();
        if let Some(point) = observer.takeover.lock().expect("observer").take() {
            inner.takeover_used_gtid = Some(point.using_gtid != crate::replica::UsingGtid::No);
        }
        if let Some(queue) = observer.queue.lock().expect("observer").as_ref() {
            inner.last_stored = (
                queue.min_seqno().map(Seqno::get),
                queue.max_seqno().map(Seqno::get),
            );
        }
        // Counted whether the run ended cleanly or on an error.
        if let Some(counters) = observer.counters.lock().expect("observer").as_ref() {
            inner.totals.0 += counters.dropped.load(Ordering::Relaxed);
            inner.totals.1 += counters.serializations.load(Ordering::Relaxed);
            inner.totals.2 += counters.skipped.load(Ordering::Relaxed);
        }
        let immediate = options
            .immediate
            .as_ref()
            .is_some_and(|i| i.load(Ordering::Acquire));
        match result {
            Ok(report) => {
                let clean = !immediate
                    && report
                        .restart_rows
                        .iter()
                        .all(|r| r.seqno == report.restart_rows[0].seqno);
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
                if matches!(
                    inner.machine.state(),
                    State::Online | State::GoingOnlineSynchronizing
                ) {
                    let _ = inner.machine.apply(Event::Offline);
                }
                let _ = inner.machine.apply(Event::OfflineDone { clean });
                tracing::info!(clean, "offline");
            }
            Err(error) => {
                let pending = pending_error(&error);
                tracing::error!(error = %error, "OFFLINE:ERROR");
                inner.last_error = Some(error.to_string());
                // A run that failed before applying (setup) leaves the
                // restart rows as they were; any other may have stopped
                // channels at different seqnos.
                if !matches!(
                    error,
                    RunError::Setup { .. } | RunError::NativeReplication(_)
                ) {
                    inner.unclean = Some(format!("the last run stopped on an error: {error}"));
                }
                let _ = inner.machine.apply(Event::Fail(pending));
                // The rows as the failed run left them.
                let catalog = self.config.catalog_schema();
                let extractor_only = self.config.service.role == Role::Extractor;
                if let Ok(Some(rows)) = block_on(async {
                    if extractor_only {
                        return None;
                    }
                    let mut conn = mysql_async::Conn::new(super::replica_opts(&self.config))
                        .await
                        .ok()?;
                    let rows = restart::read(&mut conn, &catalog).await.ok();
                    let _ = conn.disconnect().await;
                    rows
                }) {
                    inner.last_rows = rows;
                }
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
    ) -> Result<State, ControlError> {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        if let Some(at) = at_seqno {
            let Some(run) = &inner.run else {
                return Err(ControlError::illegal_state(format!(
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
                return Err(ControlError::illegal_state(format!(
                    "offline --at-seqno {at}: seqno {handled} is already handled; \
                     name a seqno of at least {handled}, or use offline"
                )));
            }
            run.stop_at.store(at, Ordering::Release);
            inner.offline_at_seqno = Some(at);
            return Ok(inner.machine.state());
        }
        let event = if immediate {
            Event::OfflineImmediate
        } else {
            Event::Offline
        };
        let state = inner.machine.apply(event)?;
        if let Some(run) = &inner.run {
            if immediate {
                run.immediate.store(true, Ordering::Release);
            }
            run.stop.store(true, Ordering::Release);
        }
        Ok(state)
    }

    fn replica_conn_error(&self, e: mysql_async::Error) -> ControlError {
        failed(format!(
            "cannot connect to the replica {}:{}: {e}",
            self.config.replica.host, self.config.replica.port
        ))
    }

    /// Refuses `what` for a service with `role = "extractor"`, which never
    /// touches the replica (the shard map and restart rows live there).
    fn needs_replica(&self, what: &str) -> Result<(), ControlError> {
        if self.config.service.role == Role::Extractor {
            return Err(ControlError::new(
                ErrorKind::Unsupported,
                format!(
                    "{what}: service {} has role = \"extractor\" and never connects to the \
                     replica",
                    self.config.service.name
                ),
            ));
        }
        Ok(())
    }

    /// Applies `edit` to the stored shard map and the running filter.
    fn edit_map(
        &self,
        edit: impl FnOnce(&mut ShardMap) -> Result<usize, ControlError>,
    ) -> Result<usize, ControlError> {
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
            let mut map = store::load_or_init(&mut conn, &catalog, initial.as_ref())
                .await
                .map_err(|e| failed(e.to_string()))?;
            let n = edit(&mut map)?;
            store::save(&mut conn, &catalog, &map)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let _ = conn.disconnect().await;
            *self.map_updates.lock().expect("map updates") = Some(map);
            Ok(n)
        })?
    }

    /// Applies `edit` to the stored map for each of `rows` (all rows
    /// checked first); an edit's error is reported with `kind`.
    fn edit_entries(
        &self,
        rows: &[ShardRow],
        kind: ErrorKind,
        edit: impl Fn(&mut ShardMap, ShardEntry) -> Result<(), String>,
    ) -> Result<usize, ControlError> {
        let entries = rows
            .iter()
            .map(ShardEntry::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        self.edit_map(|map| {
            for e in entries.iter().cloned() {
                edit(map, e).map_err(|m| ControlError::new(kind, m))?;
            }
            Ok(entries.len())
        })
    }

    fn read_map(&self) -> Result<ShardMap, ControlError> {
        self.edit_map(|_| Ok(0))?;
        Ok(self
            .map_updates
            .lock()
            .expect("map updates")
            .clone()
            .unwrap_or_default())
    }

    /// Runs `f` on the queue: the running pipeline's, or the queue opened
    /// for this call when offline.
    fn with_queue<T>(
        &self,
        f: impl FnOnce(&TransactionQueue) -> Result<T, ControlError>,
    ) -> Result<T, ControlError> {
        let open = self
            .lock()
            .run
            .as_ref()
            .and_then(|r| r.observer.queue.lock().expect("observer").as_ref().cloned());
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
            let mut p = PendingError::new(format!(
                "channel {} failed at seqno {} (event {}, shard {}): {}{}",
                e.channel,
                e.seqno,
                e.event_id,
                e.shard,
                crate::applier::channel::ServerCode(e.code),
                e.message
            ))
            .with_exception_message(&e.sql);
            p.code = (e.code != 0).then_some(u32::from(e.code));
            p.seqno = Some(e.seqno);
            p.event_id = Some(e.event_id.clone());
            p.shard = Some(e.shard.clone());
            p.channel = Some(e.channel);
            p
        }
        RunError::Apply(SchedulerError::Rejected {
            seqno,
            shard,
            event_id,
            message,
        }) => {
            let mut p = PendingError::new(message.clone());
            p.seqno = Some(seqno.get());
            p.shard = Some(shard.clone());
            p.event_id = Some(event_id.clone());
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

fn applied_summary(rows: &[RestartRow]) -> (Option<u64>, Option<String>) {
    let lowest = rows
        .iter()
        .filter(|r| r.seqno.is_some())
        .min_by_key(|r| r.seqno);
    if rows.iter().any(|r| r.seqno.is_none()) || lowest.is_none() {
        return (None, None);
    }
    let lowest = lowest.expect("checked");
    (lowest.seqno.map(Seqno::get), Some(lowest.event_id.clone()))
}

impl ControlHandler for Service {
    fn status(&self) -> Result<Status, ControlError> {
        let mut inner = self.lock();
        Self::refresh(&mut inner);
        let mut status = Status::new(
            self.config.service.name.clone(),
            format!("{:?}", self.config.service.role).to_lowercase(),
            inner.machine.state(),
        );
        status.channels = self.config.apply.channels;
        status.uptime_seconds = self.started.elapsed().as_secs_f64();
        status.time_in_state_seconds = inner.machine.time_in_state().as_secs_f64();
        status.pending_error = inner.machine.pending_error().cloned();
        status.until_seqno = inner.until_seqno;
        status.offline_at_seqno = inner.offline_at_seqno;
        status.last_offline_clean = inner.machine.last_offline_clean();
        let (seqno, event_id) = applied_summary(&inner.last_rows);
        status.applied_last_seqno = seqno;
        status.applied_last_event_id = event_id;
        let (dropped, barriers, skipped) = inner.totals;
        status.dropped_count = dropped;
        status.serialization_count = barriers;
        status.skipped_count = skipped;
        status.minimum_stored_seq_no = inner.last_stored.0;
        status.maximum_stored_seq_no = inner.last_stored.1;
        if let Some(run) = &inner.run {
            let o = &run.observer;
            if let Some(counters) = o.counters.lock().expect("observer").as_ref() {
                status.dropped_count += counters.dropped.load(Ordering::Relaxed);
                status.serialization_count += counters.serializations.load(Ordering::Relaxed);
                status.skipped_count += counters.skipped.load(Ordering::Relaxed);
            }
            if let Some(queue) = o.queue.lock().expect("observer").as_ref() {
                status.minimum_stored_seq_no = queue.min_seqno().map(Seqno::get);
                status.maximum_stored_seq_no = queue.max_seqno().map(Seqno::get);
            }
            if let Some(progress) = o.progress.lock().expect("observer").as_ref() {
                let channels = usize::from(self.config.apply.channels);
                let markers: Vec<_> = (0..channels).map(|c| progress.marker(c)).collect();
                let applied = progress.minimum();
                status.applied_last_seqno = applied.map(Seqno::get);
                // The event id of exactly that seqno: a channel's marker of
                // this run, else the restart row a channel started the run
                // at (a channel whose row was already there records no
                // marker, e.g. after an error on another channel).
                let marker = markers
                    .iter()
                    .flatten()
                    .find(|(m, _)| Some(m.seqno) == applied);
                match marker {
                    Some((m, latency)) => {
                        status.applied_last_event_id = Some(m.event_id.clone());
                        status.applied_latency = Some(*latency);
                    }
                    None => {
                        status.applied_last_event_id = inner
                            .last_rows
                            .iter()
                            .find(|r| applied.is_some() && r.seqno == applied)
                            .map(|r| r.event_id.clone());
                    }
                }
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
        Ok(status)
    }

    fn channel_status(&self) -> Result<Vec<ChannelStatus>, ControlError> {
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
            let row = inner.last_rows.iter().find(|r| r.channel == c);
            let live = progress.as_ref().and_then(|p| p.marker(usize::from(c)));
            out.push(match live {
                Some((m, latency)) => ChannelStatus {
                    channel: c,
                    applied_last_seqno: Some(m.seqno.get()),
                    applied_last_event_id: Some(m.event_id.clone()),
                    applied_latency: Some(latency),
                    applied_count: applied_count(c),
                    shard_id: Some(m.shard_id.clone()),
                },
                None => ChannelStatus {
                    channel: c,
                    applied_last_seqno: row.and_then(|r| r.seqno).map(Seqno::get),
                    applied_last_event_id: row.map(|r| r.event_id.clone()),
                    applied_latency: None,
                    applied_count: applied_count(c),
                    shard_id: row.map(|r| r.shard_id.clone()),
                },
            });
        }
        Ok(out)
    }

    fn shard_status(&self) -> Result<Vec<ShardStatus>, ControlError> {
        let map = self.read_map()?;
        let assignment = ChannelAssignment::from_config(&self.config.apply)
            .map_err(|e| failed(e.to_string()))?;
        let progress = self.lock().run.as_ref().and_then(|r| {
            r.observer
                .progress
                .lock()
                .expect("observer")
                .as_ref()
                .cloned()
        });
        Ok(map
            .iter()
            .map(|e| {
                let applied = progress.as_ref().and_then(|p| p.shard_applied(&e.shard_id));
                ShardStatus {
                    shard_id: e.shard_id.clone(),
                    channel: assignment.channel_of(&e.shard_id).get(),
                    critical: assignment.is_critical(&e.shard_id, &map),
                    applied_last_seqno: applied.as_ref().map(|a| a.seqno.get()),
                    applied_last_event_id: applied.as_ref().map(|a| a.event_id.clone()),
                    applied_latency: applied.as_ref().map(|a| a.latency),
                    event_count: applied.map_or(0, |a| a.count),
                }
            })
            .collect())
    }

    fn queue_status(&self) -> Result<Value, ControlError> {
        self.log_info()
    }

    fn online(&self, request: OnlineRequest) -> Result<Value, ControlError> {
        let state = self.go_online(request.skip_seqnos, request.until_seqno)?;
        Ok(json!({ "state": state }))
    }

    fn offline(&self, request: OfflineRequest) -> Result<Value, ControlError> {
        let state = self.go_offline(request.immediate, request.at_seqno)?;
        Ok(json!({ "state": state, "offlineAtSeqno": request.at_seqno }))
    }

    fn shard_list(&self) -> Result<Vec<ShardRow>, ControlError> {
        Ok(self.read_map()?.iter().map(ShardRow::from).collect())
    }

    fn shard_insert(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        self.edit_entries(&rows, ErrorKind::Invalid, |map, e| {
            map.insert(e).map_err(|e| e.to_string())
        })
    }

    fn shard_update(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        self.edit_entries(&rows, ErrorKind::NotFound, |map, e| {
            map.update(e).map(drop).map_err(|e| e.to_string())
        })
    }

    fn shard_delete(&self, ids: Vec<String>) -> Result<usize, ControlError> {
        self.edit_map(|map| {
            for id in &ids {
                map.delete(id)
                    .map_err(|e| ControlError::new(ErrorKind::NotFound, e.to_string()))?;
            }
            Ok(ids.len())
        })
    }

    fn shard_delete_all(&self) -> Result<usize, ControlError> {
        self.edit_map(|map| Ok(map.delete_all()))
    }

    fn log_list(&self, low: Option<u64>, high: Option<u64>) -> Result<Vec<LogEntry>, ControlError> {
        self.with_queue(|queue| {
            let (Some(min), Some(max)) = (queue.min_seqno(), queue.max_seqno()) else {
                return Ok(Vec::new());
            };
            let low = low.unwrap_or(min.get()).max(min.get());
            let high = high.unwrap_or(max.get()).min(max.get());
            if high >= low && high - low >= LOG_LIST_MAX {
                return Err(ControlError::new(
                    ErrorKind::Invalid,
                    format!(
                        "log list of seqnos {low}..={high} is more than {LOG_LIST_MAX} transactions: \
                         name a smaller range with --low/--high"
                    ),
                ));
            }
            let mut out = Vec::new();
            for seqno in low..=high {
                if let Some(txn) = queue
                    .get(Seqno(seqno))
                    .map_err(|e| failed(e.to_string()))?
                {
                    out.push(LogEntry::of(&txn));
                }
            }
            Ok(out)
        })
    }

    fn log_info(&self) -> Result<Value, ControlError> {
        self.with_queue(|queue| {
            let info = queue.info().map_err(|e| failed(e.to_string()))?;
            Ok(json!({
                "dir": info.dir.display().to_string(),
                "minSeqno": info.min_seqno.map(Seqno::get),
                "maxSeqno": info.max_seqno.map(Seqno::get),
                "count": info.count,
                "durableSeqno": info.durable_seqno.map(Seqno::get),
                "sizeBytes": info.size_bytes,
                "segments": info.segments.len(),
                "extractorPosition": info.progress.as_ref().map(|p| p.position.to_string()),
                "extractorGtidPosition": info.progress.as_ref().map(|p| p.gtid_position.to_string()),
            }))
        })
    }

    fn handback(&self, start_slave: bool) -> Result<Value, ControlError> {
        self.needs_replica("handback")?;
        let mut inner = self.lock();
        if inner.machine.state() != State::OfflineNormal || inner.run.is_some() {
            return Err(ControlError::illegal_state(format!(
                "handback needs OFFLINE:NORMAL after a clean offline; the service is {}",
                inner.machine.state()
            )));
        }
        if let Some(reason) = &inner.unclean {
            return Err(ControlError::illegal_state(format!(
                "{reason}: go online, then offline without --immediate, then hand back"
            )));
        }
        let catalog = self.config.catalog_schema();
        let config = self.config.clone();
        let used_gtid = inner.takeover_used_gtid;
        let result = block_on(async move {
            let mut conn = crate::replica::connect(
                &config.replica.host,
                config.replica.port,
                config.replica.socket.as_deref(),
                &config.replica.user,
                &config.replica.password,
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
            let rows = restart::read(&mut conn, &catalog)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let first = rows.first().cloned().ok_or_else(|| {
                ControlError::illegal_state(
                    "nothing to hand back: the service has no restart position",
                )
            })?;
            if first.seqno.is_none() || rows.iter().any(|r| r.seqno != first.seqno) {
                let seqnos: Vec<String> = rows
                    .iter()
                    .map(|r| r.seqno.map_or("-".into(), |s| s.to_string()))
                    .collect();
                return Err(ControlError::illegal_state(format!(
                    "the channels' restart rows are at different seqnos ({}): the last stop \
                     was not clean; go online, then offline (without --immediate), then hand back",
                    seqnos.join(",")
                )));
            }
            let position: BinlogPosition = first
                .event_id
                .parse()
                .map_err(|e| failed(format!("restart row event_id {:?}: {e}", first.event_id)))?;
            let gtid: Option<GtidPos> = if first.gtid.is_empty() {
                None
            } else {
                first.gtid.parse().ok()
            };
            let use_gtid = match used_gtid {
                Some(g) => g,
                None => crate::replica::slave_status(&mut conn)
                    .await
                    .map_err(|e| failed(e.to_string()))?
                    .is_some_and(|s| s.using_gtid != crate::replica::UsingGtid::No),
            } && gtid.is_some();
            let point = crate::replica::HandbackPoint::new(&position, gtid.as_ref());
            let report = crate::replica::handback(&mut conn, &point, use_gtid, start_slave)
                .await
                .map_err(|e| failed(format!("handback: {e}")))?;
            // Native replication owns the replica again: forget the
            // restart rows so the next online takes over afresh.
            conn.query_drop_no_log(&format!(
                "DELETE FROM {}.{}",
                crate::applier::sql::quote_ident(&catalog),
                crate::applier::sql::quote_ident(restart::RESTART_TABLE)
            ))
            .await
            .map_err(|e| failed(format!("clearing the restart rows: {e}")))?;
            let _ = conn.disconnect().await;
            Ok::<_, ControlError>(json!({
                "seqno": first.seqno.map(Seqno::get),
                "masterLogFile": point.file,
                "masterLogPos": point.pos,
                "gtidSlavePos": point.gtid_pos,
                "useGtid": use_gtid,
                "slaveStarted": start_slave,
                "statements": report.statements,
            }))
        })??;
        // The queue belongs to the handed-back run: remove it.
        let dir = &self.config.queue.dir;
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| failed(format!("removing the queue {}: {e}", dir.display())))?;
        }
        inner.last_rows.clear();
        inner.last_stored = (None, None);
        tracing::info!(point = %result, "handed back to native replication");
        Ok(result)
    }
}

trait QueryNoLog {
    async fn query_drop_no_log(&mut self, sql: &str) -> Result<(), mysql_async::Error>;
}

impl QueryNoLog for mysql_async::Conn {
    async fn query_drop_no_log(&mut self, sql: &str) -> Result<(), mysql_async::Error> {
        use mysql_async::prelude::Queryable;
        self.query_drop("SET SESSION sql_log_bin = 0").await?;
        self.query_drop(sql).await?;
        self.query_drop("SET SESSION sql_log_bin = DEFAULT").await
    }
}
