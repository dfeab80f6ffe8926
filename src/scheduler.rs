//! The scheduler: the one reader that feeds the channels. It takes
//! transactions in seqno order, routes each (shard filter and channel
//! assignment, behind [`Router`]), and sends it over the channel's bounded
//! queue (back-pressure: memory is bounded by the queues' capacity, not by
//! the backlog).
//!
//! Rules (shared/DESIGN.md §4):
//! - **Barrier**: before a critical transaction, wait until every channel
//!   has committed everything sent to it; run the critical transaction
//!   alone; wait again before parallel work resumes. Consecutive critical
//!   transactions routed to one channel share one barrier; each critical
//!   transaction runs on its own routed channel (so a restart in the middle
//!   of a run of them routes each where its restart row recorded it). Each
//!   barrier counts once in `serializationCount`.
//! - **SYNC** every `sync_interval_seqnos` seqnos, and whenever the source
//!   goes idle (no transaction within one poll): every channel advances
//!   its restart row when it has nothing newer, so a restart never replays
//!   a long tail, dropped transactions are not re-read forever, and the
//!   applied seqno reaches the last handled one.
//! - **Routing changes** ([`Router::changes_routing`]: DDL that may add
//!   or drop a foreign key between shards, [`crate::shard::foreign_keys`]):
//!   barrier, then every channel's restart row is brought to the seqno
//!   before the transaction (SYNC, waited for); the transaction runs alone
//!   on its shard's own channel (not its foreign-key group's); before the
//!   next transaction is routed it must have committed, and the router
//!   reads the foreign keys again ([`Router::refresh`]). So a restart after
//!   a crash never replays a transaction from before the change (the
//!   replica's foreign keys, read at start, are those every replayed
//!   transaction was routed with), and the changing transaction itself is
//!   routed the same way before and after the change.
//! - **STOP**: on a stop request (or at `stop_after`), a STOP marker with
//!   the last handled seqno goes to every channel: all rows end equal.
//! - **Exactly once**: a seqno the restart rows record committed
//!   (`SchedulerSettings::committed`, [`crate::applier::restart::recover`])
//!   is never sent again. Every seqno is reported to the low-water mark
//!   ([`Progress::dispatched`] before it is sent, [`Progress::handled`]
//!   when it needs no apply), in seqno order.
//! - **Temporary tables** (statement and mixed binlog formats): every
//!   transaction of a master session that holds temporary tables, or
//!   creates or drops one, runs on channel [`TEMP_TABLE_CHANNEL`] behind a
//!   barrier, where the channel sets the session's `pseudo_thread_id`
//!   ([`crate::shard::temp_tables`]): one connection keeps every master
//!   session's temporary tables apart, and the barrier keeps them in order
//!   with the transactions that read what they write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::applier::error::ApplyError;
use crate::applier::progress::Progress;
use crate::applier::work::{Marker, Work};
use crate::event::Transaction;
use crate::position::{BinlogPosition, ChannelId, Epoch, GtidPos, Seqno, SeqnoRanges};
use crate::shard::filter::Rule;
use crate::shard::writeset::{Key, Writeset};

pub mod dependencies;
pub mod hold;
pub mod placement;
pub mod row;

/// Where a transaction goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Apply on `channel`; `critical` runs it alone behind a barrier.
    Apply {
        /// The channel.
        channel: ChannelId,
        /// Critical shard (or `#UNKNOWN`).
        critical: bool,
    },
    /// Do not apply (shard filter); the reason is logged and counted.
    Drop {
        /// Why.
        reason: String,
        /// Log it as a warning (policy `warn`).
        warn: bool,
    },
    /// Stop the service: a rejected transaction (policy `error`).
    Error {
        /// The message, naming seqno, shard and rule.
        message: String,
        /// The filter's rule that rejected it.
        rule: Rule,
    },
}

/// Decides the route of each transaction.
pub trait Router: Send {
    /// The route of `txn`.
    fn route(&mut self, txn: &Transaction) -> Route;

    /// Whether `txn`, once applied, may change how later transactions are
    /// routed (see the module doc; a DDL that may add or drop a foreign key
    /// between shards). Asked for transactions routed to a channel.
    /// Default: never.
    fn changes_routing(&self, _txn: &Transaction) -> bool {
        false
    }

    /// Reads again what routing depends on, once a transaction for which
    /// [`Router::changes_routing`] held has committed.
    ///
    /// # Errors
    /// A message naming what could not be read.
    fn refresh(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Under `parallelism = "row"`: fills `out` with `txn`'s writeset and
    /// returns true; under `"shard"` (the default) returns false and the
    /// route's channel is the one used.
    fn row_keys(&mut self, _txn: &Transaction, _out: &mut Writeset) -> bool {
        false
    }

    /// Whether [`Router::row_keys`] computes writesets (`parallelism =
    /// "row"`).
    fn row_keys_enabled(&self) -> bool {
        false
    }

    /// Under `parallelism = "row"`: reads the key metadata of `shard`
    /// again (`None`: of every schema), once a DDL of it has committed.
    ///
    /// # Errors
    /// A message naming what could not be read.
    fn refresh_row_keys(&mut self, _shard: Option<&str>) -> Result<(), String> {
        Ok(())
    }
}

/// Counters the scheduler keeps (read by status).
#[derive(Debug, Default)]
pub struct SchedulerCounters {
    /// Transactions sent to channels.
    pub dispatched: AtomicU64,
    /// Transactions dropped by the shard filter.
    pub dropped: AtomicU64,
    /// Barriers taken (trepctl's `serializationCount`).
    pub serializations: AtomicU64,
    /// Transactions skipped because the DBA named them (`--skip-seqno`).
    pub skipped: AtomicU64,
    /// Last seqno handled (dispatched or dropped), plus one; 0: none.
    pub handled_next: AtomicU64,
    /// Temporary tables of master sessions open on the replica as of the
    /// last dispatched transaction (native replication's
    /// `Slave_open_temp_tables`).
    pub open_temp_tables: AtomicU64,
    /// The master sessions holding them, one line each
    /// (`server S thread T: db.a, db.b`).
    pub temp_table_sessions: std::sync::Mutex<Vec<String>>,
    /// What row parallelism counts (zero under `parallelism = "shard"`).
    pub row: row::RowCounters,
    /// Transactions that waited at the commit window
    /// ([`SchedulerSettings::commit_window`]).
    pub window_waits: AtomicU64,
}

/// The channel that applies every transaction of master sessions with
/// temporary tables (see the module doc).
pub const TEMP_TABLE_CHANNEL: ChannelId = ChannelId::FIRST;

/// Why the scheduler stopped.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// A channel failed (boxed: the error is large, and rare).
    #[error("{0}")]
    Apply(Box<ApplyError>),
    /// The shard filter rejected a transaction.
    #[error("{message}")]
    Rejected {
        /// Seqno of the transaction.
        seqno: Seqno,
        /// Its shard.
        shard: String,
        /// Its event id (binlog position after it).
        event_id: BinlogPosition,
        /// The filter's message.
        message: String,
        /// The filter's rule that rejected it (what would admit it).
        rule: Rule,
    },
    /// Reading the queue failed.
    #[error("reading the transaction queue: {0}")]
    Queue(String),
    /// The router could not read again what routing depends on (the
    /// replica's foreign keys) after a DDL; nothing after it is routed.
    #[error("after seqno {seqno}: {message}")]
    Routing {
        /// The DDL's seqno (committed).
        seqno: Seqno,
        /// What failed.
        message: String,
    },
    /// A restart row recorded a seqno beyond the queue at start, and the
    /// transaction the queue now holds as that seqno ends elsewhere: the
    /// row was edited, or the queue is an older copy or another service's.
    #[error(
        "restart row of channel {channel} records seqno {seqno} ending at binlog position \
         {row_event_id}, but the queue's seqno {seqno} ends at {queue_event_id}: the row was \
         edited, or the queue is an older copy or another service's. Restore the row or the \
         queue directory, or re-seed the replica and `shardrepctl reset --confirm SERVICE`"
    )]
    RowMismatch {
        /// The row's channel.
        channel: ChannelId,
        /// The seqno.
        seqno: Seqno,
        /// The row's binlog position.
        row_event_id: BinlogPosition,
        /// The queued transaction's.
        queue_event_id: BinlogPosition,
    },
    /// A channel's input closed unexpectedly (its thread ended).
    #[error("channel {0} stopped unexpectedly")]
    ChannelGone(ChannelId),
}

/// Scheduler settings.
#[derive(Clone, Debug)]
pub struct SchedulerSettings {
    /// SYNC marker every this many seqnos (0: never).
    pub sync_interval_seqnos: u64,
    /// Stop cleanly once this seqno has been handled.
    pub stop_after: Option<Seqno>,
    /// How long one wait for the next transaction lasts before the stop
    /// flag and errors are checked again.
    pub poll: Duration,
    /// Seqnos the DBA asked to skip (`--skip-seqno`): never applied, each
    /// logged as a warning and counted in `skipped`.
    pub skip_seqnos: Vec<std::ops::RangeInclusive<u64>>,
    /// When set at the time of a stop request: stop without STOP markers
    /// (`offline --immediate`; channels may end at different seqnos).
    pub immediate: Option<Arc<AtomicBool>>,
    /// Seqnos the restart rows record committed by an earlier run
    /// ([`crate::applier::restart::Recovery::committed`]): never sent to a
    /// channel again.
    pub committed: SeqnoRanges,
    /// Restart rows beyond the queue's last seqno at start (the queue lost
    /// its unflushed tail in a crash, after the channels had applied it):
    /// when the queue holds that seqno again (extracted anew), its binlog
    /// position must be the row's, else [`SchedulerError::RowMismatch`].
    /// Sorted by seqno.
    pub expected_positions: Vec<ExpectedPosition>,
    /// Under `parallelism = "row"`: independent transactions fill one
    /// channel until this many are in flight on it before the next is
    /// used ([`placement::Placer::filling`]; the block size makes full
    /// blocks); 0: always the least loaded channel.
    pub row_fill: usize,
    /// The commit window, in seqnos: a transaction is sent to a channel
    /// only once every seqno at least this far below it has committed (the
    /// low-water mark is at or above `seqno - window`); 0: no window. It
    /// bounds how far the channels run apart, and with it each restart
    /// row's record of seqnos committed above the mark (`committed_above`,
    /// at most this many seqnos: [`crate::applier::restart`]).
    pub commit_window: u64,
    /// A consistency check's hold on this run ([`hold::Hold`]): the
    /// scheduler pauses, or runs up to a binlog position and stops there
    /// with everything committed, when it asks.
    pub hold: Option<Arc<hold::Hold>>,
}

impl SchedulerSettings {
    /// Settings that stop cleanly after `last`: no SYNC markers, a 10 ms
    /// poll, nothing skipped or recorded committed, no expected positions,
    /// least-loaded row placement and no commit window (tests and benches
    /// set the fields they exercise).
    pub fn until(last: Seqno) -> SchedulerSettings {
        SchedulerSettings {
            sync_interval_seqnos: 0,
            stop_after: Some(last),
            poll: Duration::from_millis(10),
            skip_seqnos: Vec::new(),
            immediate: None,
            committed: SeqnoRanges::new(),
            expected_positions: Vec::new(),
            row_fill: 0,
            commit_window: 0,
            hold: None,
        }
    }
}

/// A restart row's seqno and binlog position, checked against the queue
/// when the scheduler reads that seqno ([`SchedulerSettings::expected_positions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedPosition {
    /// The row's channel.
    pub channel: ChannelId,
    /// The row's seqno.
    pub seqno: Seqno,
    /// The row's binlog position (after that transaction).
    pub event_id: BinlogPosition,
}

/// A transaction as the scheduler takes it from the queue: with the epoch
/// of its extraction run and the source's GTID position after it, which
/// the restart rows record ([`Marker::new`]).
#[derive(Clone, Debug)]
pub struct Queued {
    /// The transaction.
    pub txn: Transaction,
    /// Epoch of its extraction run.
    pub epoch: Epoch,
    /// The source's GTID position after it (all domains); empty when the
    /// master logs no GTIDs (the marker then holds the transaction's own
    /// GTID, if any).
    pub gtid_position: GtidPos,
}

/// Runs the scheduler until a stop request (`stop`), `stop_after`, or an
/// error. `next` yields the next transaction in seqno order ([`Queued`]),
/// waiting at most the given time (`Ok(None)`: nothing yet). On a clean
/// stop, sends STOP to every channel and returns the marker it sent
/// (`None` when nothing was handled).
///
/// # Errors
/// [`SchedulerError`] with the first apply error, a rejected transaction
/// or a queue error; channels are left to stop on their own (their inputs
/// close when the senders drop).
pub fn run<R: Router, N>(
    mut next: N,
    router: &mut R,
    senders: &[Sender<Work>],
    progress: &Progress,
    counters: &SchedulerCounters,
    stop: &AtomicBool,
    settings: &SchedulerSettings,
) -> Result<Option<Arc<Marker>>, SchedulerError>
where
    N: FnMut(Duration) -> Result<Option<Queued>, String>,
{
    let channels = senders.len();
    let mut last_sent: Vec<Option<Seqno>> = vec![None; channels];
    let mut critical_channel: Option<ChannelId> = None;
    let mut last_marker: Option<Arc<Marker>> = None;
    let mut since_sync = 0u64;
    // A transaction that changes routing was sent: its seqno.
    let mut refresh_after: Option<Seqno> = None;
    let mut temp_tables = crate::shard::temp_tables::TempTables::default();
    // Row parallelism: the placement state, the writeset of the current
    // transaction, and a DDL after which the key metadata is read again.
    let mut placer = placement::Placer::filling(channels, settings.row_fill);
    let mut writeset = Writeset::default();
    let mut reload_after: Option<row::ReloadAfter> = None;
    // The next of `settings.expected_positions` to check.
    let mut next_expected = 0usize;
    // A large transaction whose fragments are being read (module doc of
    // `crate::event::Fragment`): the channel its first fragment went to,
    // or `None` when it was dropped. Its fragments follow it there, and
    // nothing else is sent until its last.
    let mut chain: Option<Option<ChannelId>> = None;
    let send = |channel: ChannelId, work: Work| -> Result<(), SchedulerError> {
        senders[channel.index()]
            .send(work)
            .map_err(|_| SchedulerError::ChannelGone(channel))
    };
    // Every channel, for SYNC and STOP markers.
    let all = || ChannelId::all(channels as u16);
    let barrier = |last_sent: &[Option<Seqno>]| -> Result<(), SchedulerError> {
        let done = progress.wait_until(|p| {
            last_sent
                .iter()
                .enumerate()
                .all(|(c, sent)| sent.is_none_or(|s| p.committed(c).is_some_and(|d| d >= s)))
        });
        if done {
            Ok(())
        } else {
            Err(SchedulerError::Apply(Box::new(
                progress.error().expect("wait_until failed on an error"),
            )))
        }
    };
    // The commit window: wait until the low-water mark is at or above
    // `seqno - commit_window`.
    let within_window = |seqno: Seqno| -> Result<(), SchedulerError> {
        let window = settings.commit_window;
        let Some(floor) = seqno.get().checked_sub(window).filter(|_| window > 0) else {
            return Ok(());
        };
        let reached = |p: &Progress| p.low_water().is_some_and(|l| l.get() >= floor);
        if reached(progress) {
            return Ok(());
        }
        counters.window_waits.fetch_add(1, Ordering::Relaxed);
        if progress.wait_until(reached) {
            Ok(())
        } else {
            Err(SchedulerError::Apply(Box::new(
                progress.error().expect("wait_until failed on an error"),
            )))
        }
    };
    // Memory bound: wait for the channels to commit when too many bytes
    // are in flight.
    let acquire = |bytes: u64| -> Result<(), SchedulerError> {
        if progress.acquire_memory(bytes) {
            Ok(())
        } else {
            Err(SchedulerError::Apply(Box::new(
                progress.error().expect("acquire_memory failed on an error"),
            )))
        }
    };
    // A check's hold: once everything sent is committed, wait where the
    // hold says (until it moves on, a stop request or an error).
    let keep_holding = || !stop.load(Ordering::Acquire) && progress.error().is_none();
    let hold_here = |hold: &hold::Hold,
                     last_sent: &[Option<Seqno>],
                     last: Option<&Marker>|
     -> Result<(), SchedulerError> {
        barrier(last_sent)?;
        hold.stop_here(last.map(|m| (m.seqno, &m.event_id)), keep_holding);
        Ok(())
    };
    loop {
        if let Some(e) = progress.error() {
            return Err(SchedulerError::Apply(Box::new(e)));
        }
        let reached_stop = settings
            .stop_after
            .is_some_and(|s| last_marker.as_ref().is_some_and(|m| m.seqno >= s));
        if stop.load(Ordering::Acquire) || reached_stop {
            let immediate = settings
                .immediate
                .as_ref()
                .is_some_and(|i| i.load(Ordering::Acquire));
            if immediate {
                return Ok(None);
            }
            if temp_tables.count() > 0 {
                // Native replication warns likewise: the replica's
                // connection, and with it these tables, ends with the run.
                tracing::warn!(
                    open_temp_tables = temp_tables.count(),
                    sessions = %temp_tables.describe().join("; "),
                    "stopping with temporary tables of master sessions open; \
                     their later statements will fail (1146) after the restart"
                );
            }
            if let Some(marker) = &last_marker {
                for c in all() {
                    send(c, Work::Stop(marker.clone()))?;
                }
            }
            if router.row_keys_enabled() {
                counters.row.log_summary();
            }
            return Ok(last_marker);
        }
        let next_txn = next(settings.poll).map_err(SchedulerError::Queue)?;
        // After a transaction that changes routing: once it has committed,
        // before the next one is routed (or now, when idle, so that status
        // shows the new routing).
        if let Some(ddl) = reload_after.take() {
            let committed = progress.wait_until(|p| {
                p.committed(ddl.channel.index())
                    .is_some_and(|c| c >= ddl.seqno)
            });
            if !committed {
                return Err(SchedulerError::Apply(Box::new(
                    progress.error().expect("wait_until failed on an error"),
                )));
            }
            router
                .refresh_row_keys(ddl.shard.as_deref())
                .map_err(|message| SchedulerError::Routing {
                    seqno: ddl.seqno,
                    message,
                })?;
        }
        if let Some(changed) = refresh_after.take() {
            barrier(&last_sent)?;
            router
                .refresh()
                .map_err(|message| SchedulerError::Routing {
                    seqno: changed,
                    message,
                })?;
        }
        let Some(Queued {
            txn,
            epoch,
            gtid_position,
        }) = next_txn
        else {
            // Idle: let every channel record the last handled position, so
            // the restart rows (and `wait --applied`) reach it now rather
            // than after `sync_interval_seqnos` more transactions.
            if since_sync > 0 {
                if let Some(marker) = &last_marker {
                    since_sync = 0;
                    for c in all() {
                        send(c, Work::Sync(marker.clone()))?;
                    }
                }
            }
            // Status: the in-flight window as the channels commit (it is
            // otherwise noted at each placement only).
            row::note_in_flight(&mut placer, progress, &counters.row, channels);
            let last = last_marker.as_deref();
            // Never inside a large transaction: its channel holds it open.
            if let Some(hold) = settings.hold.as_deref().filter(|h| {
                !matches!(chain, Some(Some(_)))
                    && h.must_stop(None, last.map(|m| (m.seqno, &m.event_id)))
            }) {
                hold_here(hold, &last_sent, last)?;
            }
            continue;
        };
        let continues = txn.continues();
        if !txn.is_continuation() {
            if let Some(Some(channel)) = chain {
                // Its channel holds the transaction open, waiting.
                return Err(SchedulerError::Routing {
                    seqno: txn.seqno,
                    message: format!(
                        "a large transaction sent to channel {channel} lacks its last \
                         fragment: seqno {} is not its next fragment (the queue does not \
                         match)",
                        txn.seqno.get()
                    ),
                });
            }
            // A dropped or discarded large transaction that ends without
            // its last fragment (a switch discarded the queue's tail).
            chain = None;
        }
        if txn.is_continuation() {
            // The next fragment of a large transaction: where its first
            // went, without routing, holds or windows (its channel holds
            // the transaction open until the last fragment).
            let seqno = txn.seqno;
            let marker = Arc::new(Marker::new(&txn, epoch, gtid_position));
            match chain {
                Some(Some(channel)) => {
                    let bytes = txn.approx_bytes() as u64;
                    acquire(bytes)?;
                    progress.dispatched(&marker);
                    send(
                        channel,
                        Work::Apply {
                            txn: Arc::new(txn),
                            epoch,
                            alone: true,
                            bytes,
                            marker: marker.clone(),
                        },
                    )?;
                    last_sent[channel.index()] = Some(seqno);
                }
                Some(None) => {
                    if !continues {
                        progress.handled(&marker);
                    }
                }
                None if settings.committed.contains(seqno) => {
                    if !continues {
                        progress.handled(&marker);
                    }
                }
                None => {
                    return Err(SchedulerError::Routing {
                        seqno,
                        message: format!(
                            "seqno {} is fragment {} of a large transaction whose first \
                             fragment this run did not read (the queue or the restart rows \
                             do not match)",
                            seqno.get(),
                            txn.fragment.map_or(0, |f| f.index)
                        ),
                    });
                }
            }
            counters
                .handled_next
                .store(seqno.get() + 1, Ordering::Release);
            if !continues {
                chain = None;
                last_marker = Some(marker.clone());
                since_sync += 1;
            }
            continue;
        }
        if let Some(hold) = &settings.hold {
            // The transaction in hand waits while the hold says so (a stop
            // request or an error ends the wait: the hold is dropped then).
            let last = last_marker.as_deref();
            while hold.must_stop(
                Some(&txn.end_position),
                last.map(|m| (m.seqno, &m.event_id)),
            ) && keep_holding()
            {
                hold_here(hold, &last_sent, last)?;
            }
        }
        let seqno = txn.seqno;
        while let Some(expected) = settings.expected_positions.get(next_expected) {
            if expected.seqno > seqno {
                break;
            }
            next_expected += 1;
            if expected.seqno == seqno && expected.event_id != txn.end_position {
                return Err(SchedulerError::RowMismatch {
                    channel: expected.channel,
                    seqno,
                    row_event_id: expected.event_id.clone(),
                    queue_event_id: txn.end_position.clone(),
                });
            }
        }
        let marker = Arc::new(Marker::new(&txn, epoch, gtid_position));
        let skipped = settings
            .skip_seqnos
            .iter()
            .any(|r| r.contains(&seqno.get()));
        let committed = settings.committed.contains(seqno);
        let route = if committed {
            tracing::debug!(
                seqno = seqno.get(),
                "transaction committed before the restart (restart rows); not applied again"
            );
            Route::Drop {
                reason: "committed before the restart".into(),
                warn: false,
            }
        } else if skipped {
            tracing::warn!(
                seqno = seqno.get(),
                event_id = %txn.end_position,
                shard = %txn.shard,
                "transaction skipped at the DBA's request (--skip-seqno); it is not applied"
            );
            counters.skipped.fetch_add(1, Ordering::Relaxed);
            Route::Drop {
                reason: "skipped by request".into(),
                warn: false,
            }
        } else {
            router.route(&txn)
        };
        match route {
            Route::Error { message, rule } => {
                return Err(SchedulerError::Rejected {
                    seqno,
                    shard: txn.shard.clone(),
                    event_id: txn.end_position.clone(),
                    message,
                    rule,
                });
            }
            // A DBA's skip is counted in `skipped` only, not as a drop
            // of the shard filter; a seqno committed before the restart
            // is not counted. A large transaction's first fragment drops
            // the whole transaction; the low-water mark passes it only
            // with its last fragment.
            Route::Drop { .. } if skipped || committed => {
                if continues {
                    chain = Some(None);
                } else {
                    progress.handled(&marker);
                }
            }
            Route::Drop { reason, warn } => {
                if continues {
                    chain = Some(None);
                } else {
                    progress.handled(&marker);
                }
                if warn {
                    tracing::warn!(seqno = seqno.get(), shard = %txn.shard, %reason, "transaction dropped");
                } else {
                    tracing::debug!(seqno = seqno.get(), shard = %txn.shard, %reason, "transaction dropped");
                }
                counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Route::Apply {
                mut channel,
                mut critical,
            } => {
                within_window(seqno)?;
                if continues {
                    // A large transaction runs alone on one channel.
                    critical = true;
                }
                let temp_before = temp_tables.count();
                let pinned = temp_tables.observe(&txn);
                if pinned {
                    channel = TEMP_TABLE_CHANNEL;
                    critical = true;
                }
                if pinned || temp_before != temp_tables.count() {
                    counters
                        .open_temp_tables
                        .store(temp_tables.count() as u64, Ordering::Release);
                    *counters
                        .temp_table_sessions
                        .lock()
                        .expect("temp table sessions") = temp_tables.describe();
                }
                let bytes = txn.approx_bytes() as u64;
                let reroutes = router.changes_routing(&txn);
                let rows = router.row_keys(&txn, &mut writeset);
                let ddl = rows && row::is_ddl(&txn);
                if rows {
                    counters.row.count_fallbacks(&writeset.fallbacks);
                    if writeset.keys.contains(&Key::Global) {
                        critical = true;
                    }
                }
                if reroutes {
                    barrier(&last_sent)?;
                    if let Some(before) = &last_marker {
                        since_sync = 0;
                        for c in all() {
                            send(c, Work::Sync(before.clone()))?;
                        }
                        let synced = progress.wait_until(|p| {
                            (0..channels).all(|c| p.committed(c).is_some_and(|d| d >= before.seqno))
                        });
                        if !synced {
                            return Err(SchedulerError::Apply(Box::new(
                                progress.error().expect("wait_until failed on an error"),
                            )));
                        }
                    }
                    if critical_channel.is_none() {
                        counters.serializations.fetch_add(1, Ordering::Relaxed);
                    }
                    critical_channel = Some(channel);
                    refresh_after = Some(seqno);
                }
                let txn = Arc::new(txn);
                if critical || reroutes {
                    let channel = match critical_channel {
                        // Consecutive critical transactions share a
                        // barrier only on one channel: each runs on its
                        // own routed channel, whatever came before it, so
                        // a restart that resumes in the middle of a run of
                        // them routes each to the channel whose restart
                        // row recorded it (never applied twice). A
                        // temporary-table transaction likewise runs on its
                        // channel: another channel's critical run ends
                        // first.
                        Some(c) if c == channel => c,
                        _ => {
                            barrier(&last_sent)?;
                            counters.serializations.fetch_add(1, Ordering::Relaxed);
                            critical_channel = Some(channel);
                            channel
                        }
                    };
                    if ddl {
                        reload_after = Some(row::ReloadAfter::of(&txn, channel));
                    }
                    if rows {
                        placer.sent_elsewhere(seqno, channel);
                    }
                    acquire(bytes)?;
                    progress.dispatched(&marker);
                    send(
                        channel,
                        Work::Apply {
                            txn,
                            epoch,
                            alone: true,
                            bytes,
                            marker: marker.clone(),
                        },
                    )?;
                    last_sent[channel.index()] = Some(seqno);
                    if continues {
                        chain = Some(Some(channel));
                    }
                } else {
                    if critical_channel.take().is_some() {
                        barrier(&last_sent)?;
                    }
                    if rows {
                        // A DDL keeps its shard's own channel (restart
                        // marks, module doc of `row`); the rest go where
                        // their dependencies allow.
                        let target = ddl.then_some(channel);
                        channel = row::place(
                            &mut placer,
                            &writeset.keys,
                            channel,
                            target,
                            progress,
                            &counters.row,
                        )
                        .ok_or_else(|| {
                            SchedulerError::Apply(Box::new(
                                progress.error().expect("placement failed on an error"),
                            ))
                        })?;
                        placer.sent(&writeset.keys, seqno, channel, &|c: ChannelId| {
                            progress.committed(c.index())
                        });
                        row::note_in_flight(&mut placer, progress, &counters.row, channels);
                        if ddl {
                            reload_after = Some(row::ReloadAfter::of(&txn, channel));
                        }
                    }
                    acquire(bytes)?;
                    progress.dispatched(&marker);
                    send(
                        channel,
                        Work::Apply {
                            txn,
                            epoch,
                            alone: false,
                            bytes,
                            marker: marker.clone(),
                        },
                    )?;
                    last_sent[channel.index()] = Some(seqno);
                }
                counters.dispatched.fetch_add(1, Ordering::Relaxed);
            }
        }
        counters
            .handled_next
            .store(seqno.get() + 1, Ordering::Release);
        if continues {
            // The restart rows never record a position inside a
            // transaction: markers wait for its last fragment.
            continue;
        }
        last_marker = Some(marker.clone());
        since_sync += 1;
        if settings.sync_interval_seqnos > 0 && since_sync >= settings.sync_interval_seqnos {
            since_sync = 0;
            for c in all() {
                send(c, Work::Sync(marker.clone()))?;
            }
        }
    }
}

/// The production [`Router`]: the shard filter decides whether a
/// transaction is applied, the channel assignment where, and whether it is
/// critical (the map's `critical` column, the shard list's `(critical)`,
/// and `#UNKNOWN` always). Shards joined by foreign keys are routed to
/// their group's channel ([`crate::shard::foreign_keys`]).
pub struct ShardRouter {
    /// The service's shard filter (holds the shard map).
    pub filter: crate::shard::filter::ShardFilter,
    /// Channel assignment.
    pub assignment: crate::shard::channel::ChannelAssignment,
    /// The map exchanged with the service: a new shard map taken before
    /// the next transaction is routed (the DBA's shard edits while
    /// online), and the shards the filter auto-created, handed back to be
    /// stored.
    pub live_map: Option<crate::shard::live::SharedLiveMap>,
    /// The shards joined by foreign keys on the replica, and how to read
    /// them again after DDL; `None`: every shard is independent.
    pub foreign_keys: Option<crate::shard::foreign_keys::ForeignKeyRouting>,
    /// Under `parallelism = "row"`: the replica's key metadata, for the
    /// writesets; `None` under `"shard"`.
    pub row_keys: Option<row::RowKeys>,
}

impl Router for ShardRouter {
    fn route(&mut self, txn: &Transaction) -> Route {
        use crate::shard::filter::Decision;
        if let Some(updates) = &self.live_map {
            if let Some(map) = updates.try_lock().ok().and_then(|mut m| m.update.take()) {
                *self.filter.map_mut() = map;
            }
        }
        let decision = self.filter.decide_transaction(txn);
        let created = self.filter.take_created();
        if let (false, Some(live)) = (created.is_empty(), &self.live_map) {
            live.lock().expect("live shard map").created.extend(created);
        }
        match decision {
            Decision::Accept(_) => {
                let critical = self.assignment.is_critical(&txn.shard, self.filter.map());
                let own = self.assignment.channel_of(&txn.shard);
                match &self.foreign_keys {
                    // A DDL that may change the groups runs alone on its
                    // shard's own channel: the same before and after the
                    // change (module doc).
                    Some(_) if self.changes_routing(txn) => Route::Apply {
                        channel: own,
                        critical: true,
                    },
                    Some(fk) => Route::Apply {
                        channel: fk.groups().channel_of(&txn.shard).unwrap_or(own),
                        critical,
                    },
                    None => Route::Apply {
                        channel: own,
                        critical,
                    },
                }
            }
            Decision::Drop(reason) => {
                // Under enforce_home, most drops are routine: a shard's
                // transactions reaching this source by replication from
                // their home. A transaction of a shard mastered elsewhere
                // whose origin is listed as this very service was written
                // on the wrong master (a conflicting write): say so in the
                // log at warning level, not only in the dropped count.
                let wrong_master = reason.rule == crate::shard::filter::Rule::NotHome
                    && self.filter.origin_of(txn.server_id) == Some(self.filter.service());
                if wrong_master {
                    Route::Drop {
                        reason: format!(
                            "{} origin={} (written on this service's master, not on the shard's \
                             home: not replicated)",
                            reason.message,
                            self.filter.service()
                        ),
                        warn: true,
                    }
                } else {
                    Route::Drop {
                        reason: reason.message,
                        warn: false,
                    }
                }
            }
            Decision::WarnDrop(reason) => Route::Drop {
                reason: reason.message,
                warn: true,
            },
            Decision::Error(reason) => Route::Error {
                message: reason.message,
                rule: reason.rule,
            },
        }
    }

    fn changes_routing(&self, txn: &Transaction) -> bool {
        self.foreign_keys
            .as_ref()
            .is_some_and(|fk| crate::shard::foreign_keys::may_change_foreign_keys(txn, fk.groups()))
    }

    fn refresh(&mut self) -> Result<(), String> {
        match &mut self.foreign_keys {
            Some(fk) => fk.refresh(&self.assignment),
            None => Ok(()),
        }
    }

    fn row_keys(&mut self, txn: &Transaction, out: &mut Writeset) -> bool {
        match &self.row_keys {
            Some(keys) => {
                keys.writesets.writeset(txn, out);
                true
            }
            None => false,
        }
    }

    fn row_keys_enabled(&self) -> bool {
        self.row_keys.is_some()
    }

    fn refresh_row_keys(&mut self, shard: Option<&str>) -> Result<(), String> {
        match &mut self.row_keys {
            Some(keys) => keys.reload(shard),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Change, SessionContext, Statement};
    use crate::position::BinlogPosition;
    use std::sync::Mutex;

    /// Shard `a` → channel 1, `b` → channel 2, `#UNKNOWN` → channel 3
    /// (critical).
    struct Fixed;

    impl Router for Fixed {
        fn route(&mut self, txn: &Transaction) -> Route {
            match txn.shard.as_str() {
                "a" => Route::Apply {
                    channel: ChannelId::recorded(1),
                    critical: false,
                },
                "b" => Route::Apply {
                    channel: ChannelId::recorded(2),
                    critical: false,
                },
                _ => Route::Apply {
                    channel: ChannelId::recorded(3),
                    critical: true,
                },
            }
        }
    }

    fn txn(seqno: u64, shard: &str, thread: u32, sql: &str) -> Transaction {
        Transaction {
            seqno: Seqno(seqno),
            server_id: 1,
            gtid: None,
            commit_id: None,
            start_position: BinlogPosition::new("b.000001", 4).unwrap(),
            end_position: BinlogPosition::new("b.000001", 100 + seqno).unwrap(),
            commit_timestamp: 0,
            shard: shard.into(),
            tables: Vec::new(),
            changes: vec![Change::Statement(Statement {
                sql: sql.as_bytes().to_vec(),
                default_schema: Some(shard.into()),
                context: SessionContext::default(),
                error_code: 0,
                thread_id: Some(thread),
            })],
            row_events: None,
            fragment: None,
        }
    }

    // Every transaction of a master session holding temporary tables (and
    // its CREATE and DROP) runs alone on TEMP_TABLE_CHANNEL, also right
    // after another channel's critical run (#UNKNOWN included); other
    // sessions, and the session once its tables are dropped, keep their
    // channels.
    #[test]
    fn temporary_table_sessions_run_alone_on_their_channel() {
        let txns = vec![
            txn(0, "a", 7, "INSERT INTO r VALUES (1)"),
            txn(1, "#UNKNOWN", 8, "INSERT INTO a.r SELECT * FROM b.t"),
            txn(2, "a", 7, "CREATE TEMPORARY TABLE tmp (id INT)"),
            txn(3, "b", 9, "INSERT INTO t VALUES (1)"),
            txn(
                4,
                "#UNKNOWN",
                7,
                "INSERT INTO a.r SELECT * FROM tmp JOIN b.t",
            ),
            txn(
                5,
                "a",
                7,
                "DROP TEMPORARY TABLE `tmp` /* generated by server */",
            ),
            txn(6, "a", 7, "INSERT INTO r VALUES (2)"),
        ];
        let open_after_create = std::cell::Cell::new(None);
        let (seen, counters) = schedule(txns, &mut Fixed, 4, |left, counters| {
            if open_after_create.get().is_none() && left == 3 {
                open_after_create.set(Some(counters.open_temp_tables.load(Ordering::Acquire)));
            }
        });
        assert_eq!(
            seen,
            vec![
                (0, 1, false),
                (1, 3, true),
                (2, 0, true),
                (3, 2, false),
                (4, 0, true),
                (5, 0, true),
                (6, 1, false),
            ]
        );
        // While seqnos 2..=4 were handled, one table was open; none after.
        assert_eq!(open_after_create.get(), Some(1));
        assert_eq!(counters.open_temp_tables.load(Ordering::Acquire), 0);
        assert!(counters.temp_table_sessions.lock().unwrap().is_empty());
        // Barriers: before 1 (critical), before 2 (temp, channel 0 after
        // channel 3's run), before 4 (after session 9's parallel 3).
        assert_eq!(counters.serializations.load(Ordering::Relaxed), 3);
    }

    /// Shards `c1`, `c2`: critical on channels 1 and 2; others: channel 0.
    struct TwoCritical;

    impl Router for TwoCritical {
        fn route(&mut self, txn: &Transaction) -> Route {
            match txn.shard.as_str() {
                "c1" => Route::Apply {
                    channel: ChannelId::recorded(1),
                    critical: true,
                },
                "c2" => Route::Apply {
                    channel: ChannelId::recorded(2),
                    critical: true,
                },
                _ => Route::Apply {
                    channel: ChannelId::recorded(0),
                    critical: false,
                },
            }
        }
    }

    /// Runs `txns` through the scheduler on `channels` recording channels,
    /// calling `observe(transactions left, counters)` before each read: each
    /// transaction's (seqno, channel, alone), sorted, and the counters.
    fn schedule<R: Router>(
        txns: Vec<Transaction>,
        router: &mut R,
        channels: usize,
        mut observe: impl FnMut(usize, &SchedulerCounters),
    ) -> (Vec<(u64, usize, bool)>, SchedulerCounters) {
        let last = txns.last().map(|t| t.seqno).expect("transactions");
        let progress = Arc::new(Progress::new(&vec![None; channels]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let counters = SchedulerCounters::default();
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for c in 0..channels {
            let (tx, rx) = crossbeam_channel::bounded::<Work>(16);
            senders.push(tx);
            let (progress, seen) = (progress.clone(), seen.clone());
            threads.push(std::thread::spawn(move || {
                for work in rx {
                    match work {
                        Work::Apply { txn, alone, .. } => {
                            seen.lock().unwrap().push((txn.seqno.get(), c, alone));
                            progress.set_committed(c, txn.seqno);
                        }
                        Work::Stop(_) => break,
                        Work::Sync(_) => {}
                    }
                }
            }));
        }
        let mut queue = txns.into_iter();
        let settings = SchedulerSettings::until(last);
        run(
            |_| {
                observe(queue.len(), &counters);
                Ok(queue.next().map(|txn| Queued {
                    txn,
                    epoch: Epoch(0),
                    gtid_position: GtidPos::new(),
                }))
            },
            router,
            &senders,
            &progress,
            &counters,
            &AtomicBool::new(false),
            &settings,
        )
        .unwrap();
        for t in threads {
            t.join().unwrap();
        }
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        (seen, counters)
    }

    /// Seqno `seqno` as fragment `index` of a large transaction of `shard`
    /// (`last`: it ends the transaction).
    fn fragment(seqno: u64, shard: &str, index: u32, last: bool) -> Transaction {
        let mut t = txn(seqno, shard, 1, "UPDATE t SET v = 1");
        t.fragment = Some(crate::event::Fragment { index, last });
        t
    }

    /// `Fixed`, with shard `x` dropped.
    struct DropX;

    impl Router for DropX {
        fn route(&mut self, txn: &Transaction) -> Route {
            if txn.shard == "x" {
                Route::Drop {
                    reason: "not in the map".into(),
                    warn: false,
                }
            } else {
                Fixed.route(txn)
            }
        }
    }

    // A large transaction's fragments all go, alone, to the channel its
    // first fragment is routed to, whatever their own shards say, and the
    // transactions after it wait for it; a dropped one drops every
    // fragment.
    #[test]
    fn the_fragments_of_a_large_transaction_follow_the_first() {
        let txns = vec![
            txn(0, "a", 1, "DELETE FROM t"),
            txn(1, "b", 1, "DELETE FROM t"),
            fragment(2, "a", 0, false),
            fragment(3, "#UNKNOWN", 1, false),
            fragment(4, "b", 2, true),
            txn(5, "b", 1, "DELETE FROM t"),
            fragment(6, "x", 0, false),
            fragment(7, "a", 1, true),
            txn(8, "a", 1, "DELETE FROM t"),
        ];
        let (seen, counters) = schedule(txns, &mut DropX, 4, |_, _| {});
        assert_eq!(
            seen,
            vec![
                (0, 1, false),
                (1, 2, false),
                (2, 1, true),
                (3, 1, true),
                (4, 1, true),
                (5, 2, false),
                (8, 1, false),
            ]
        );
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 1);
    }

    // A stop request in the middle of a large transaction sends every
    // channel the position before it: the restart rows never record a
    // position inside a transaction.
    #[test]
    fn a_stop_inside_a_large_transaction_stops_before_it() {
        let txns = vec![
            txn(0, "a", 1, "DELETE FROM t"),
            fragment(1, "b", 0, false),
            fragment(2, "b", 1, false),
            fragment(3, "b", 2, true),
        ];
        let progress = Arc::new(Progress::new(&[None, None, None]));
        let stops = Arc::new(Mutex::new(Vec::new()));
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for c in 0..3 {
            let (tx, rx) = crossbeam_channel::bounded::<Work>(16);
            senders.push(tx);
            let (progress, stops) = (progress.clone(), stops.clone());
            threads.push(std::thread::spawn(move || {
                for work in rx {
                    match work {
                        Work::Apply { txn, .. } if !txn.continues() => {
                            progress.committed_block([txn.seqno]);
                            progress.set_committed(c, txn.seqno);
                        }
                        Work::Stop(marker) => {
                            stops.lock().unwrap().push(marker.seqno.get());
                            break;
                        }
                        _ => {}
                    }
                }
            }));
        }
        let stop = AtomicBool::new(false);
        let mut queue = txns.into_iter();
        let marker = run(
            |_| {
                let next = queue.next();
                if next.as_ref().is_some_and(|t| t.seqno == Seqno(2)) {
                    stop.store(true, Ordering::Release);
                }
                Ok(next.map(|txn| Queued {
                    txn,
                    epoch: Epoch(0),
                    gtid_position: GtidPos::new(),
                }))
            },
            &mut Fixed,
            &senders,
            &progress,
            &SchedulerCounters::default(),
            &stop,
            &SchedulerSettings::until(Seqno(3)),
        )
        .unwrap();
        assert_eq!(marker.map(|m| m.seqno), Some(Seqno(0)));
        drop(senders);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*stops.lock().unwrap(), vec![0, 0, 0]);
        assert_eq!(progress.low_water(), Some(Seqno(0)));
    }

    // Consecutive critical transactions of shards routed to different
    // channels each run on their own channel (a barrier between them), so
    // a restart that resumes at the second one routes it to the channel
    // that recorded it, not to one whose restart row is below it.
    #[test]
    fn consecutive_critical_transactions_keep_their_own_channels() {
        let txns = |from: u64| -> Vec<Transaction> {
            [(0, "c1"), (1, "c2"), (2, "c2"), (3, "c1"), (4, "a")]
                .into_iter()
                .filter(|(n, _)| *n >= from)
                .map(|(n, shard)| txn(n, shard, 1, "DELETE FROM t"))
                .collect()
        };
        let whole = vec![
            (0, 1, true),
            (1, 2, true),
            (2, 2, true),
            (3, 1, true),
            (4, 0, false),
        ];
        // Barriers before 0, 1 and 3; 2 shares 1's.
        let (seen, counters) = schedule(txns(0), &mut TwoCritical, 3, |_, _| {});
        assert_eq!(seen, whole);
        assert_eq!(counters.serializations.load(Ordering::Relaxed), 3);
        // Resumed at seqno 1 and 3 (after a crash): the same channels.
        for from in [1, 3] {
            let (seen, _) = schedule(txns(from), &mut TwoCritical, 3, |_, _| {});
            assert_eq!(seen, whole[from as usize..].to_vec(), "resumed at {from}");
        }
    }

    // The commit window: with a window of 4 and channel 1 holding seqno 0
    // uncommitted, channel 2's seqnos 1..=3 are sent and seqno 4 waits
    // (a window wait) until seqno 0 commits; then everything runs.
    #[test]
    fn the_commit_window_holds_dispatch_until_the_low_water_mark_follows() {
        let mut txns = vec![txn(0, "a", 1, "DELETE FROM t")];
        txns.extend((1..=9).map(|n| txn(n, "b", 1, "DELETE FROM t")));
        let last = Seqno(9);
        let progress = Arc::new(Progress::new(&[None, None, None, None]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(AtomicBool::new(false));
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for c in 0..4 {
            let (tx, rx) = crossbeam_channel::unbounded::<Work>();
            senders.push(tx);
            let (progress, seen, release) = (progress.clone(), seen.clone(), release.clone());
            threads.push(std::thread::spawn(move || {
                for work in rx {
                    match work {
                        Work::Apply { txn, .. } => {
                            seen.lock().unwrap().push(txn.seqno.get());
                            while c == 1 && !release.load(Ordering::Acquire) {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            progress.set_committed(c, txn.seqno);
                            progress.committed_block([txn.seqno]);
                        }
                        Work::Stop(_) => break,
                        Work::Sync(_) => {}
                    }
                }
            }));
        }
        let counters = Arc::new(SchedulerCounters::default());
        let scheduler = {
            let (progress, counters) = (progress.clone(), counters.clone());
            std::thread::spawn(move || {
                let settings = SchedulerSettings {
                    commit_window: 4,
                    ..SchedulerSettings::until(last)
                };
                let mut queue = txns.into_iter();
                run(
                    |_| {
                        Ok(queue.next().map(|txn| Queued {
                            txn,
                            epoch: Epoch(0),
                            gtid_position: GtidPos::new(),
                        }))
                    },
                    &mut Fixed,
                    &senders,
                    &progress,
                    &counters,
                    &AtomicBool::new(false),
                    &settings,
                )
                .unwrap()
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while counters.window_waits.load(Ordering::Acquire) == 0 {
            assert!(std::time::Instant::now() < deadline, "no window wait");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        let mut before = seen.lock().unwrap().clone();
        before.sort_unstable();
        assert_eq!(before, vec![0, 1, 2, 3], "sent before seqno 0 committed");
        assert_eq!(progress.low_water(), None);
        release.store(true, Ordering::Release);
        let marker = scheduler.join().unwrap().expect("a STOP marker");
        assert_eq!(marker.seqno, last);
        for t in threads {
            t.join().unwrap();
        }
        let mut all = seen.lock().unwrap().clone();
        all.sort_unstable();
        assert_eq!(all, (0..=9).collect::<Vec<u64>>());
        // Later seqnos may wait again for channel 2's commits.
        assert!(counters.window_waits.load(Ordering::Relaxed) >= 1);
        assert_eq!(progress.low_water(), Some(last));
    }

    // A consistency check's hold: paused before the first transaction,
    // then run up to a position and held there with everything up to it
    // committed and nothing after it sent, then released to the end.
    #[test]
    fn a_hold_stops_the_run_at_a_binlog_position_with_everything_before_committed() {
        let channels = 2;
        let progress = Arc::new(Progress::new(&vec![None; channels]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for c in 0..channels {
            let (tx, rx) = crossbeam_channel::bounded::<Work>(16);
            senders.push(tx);
            let (progress, seen) = (progress.clone(), seen.clone());
            threads.push(std::thread::spawn(move || {
                for work in rx {
                    match work {
                        Work::Apply { txn, .. } => {
                            std::thread::sleep(Duration::from_millis(2));
                            seen.lock().unwrap().push(txn.seqno.get());
                            progress.set_committed(c, txn.seqno);
                        }
                        Work::Stop(_) => break,
                        Work::Sync(_) => {}
                    }
                }
            }));
        }
        let hold = Arc::new(hold::Hold::new(None));
        let checker = {
            let (hold, seen) = (hold.clone(), seen.clone());
            std::thread::spawn(move || {
                let paused = hold.pause(Duration::from_secs(10)).unwrap();
                let at_pause = seen.lock().unwrap().len();
                // Transactions end at 100 + seqno: up to seqno 5 inclusive.
                let last = hold
                    .hold_at(
                        BinlogPosition::new("b.000001", 105).unwrap(),
                        Duration::from_secs(10),
                    )
                    .unwrap();
                let mut held = seen.lock().unwrap().clone();
                held.sort_unstable();
                std::thread::sleep(Duration::from_millis(50));
                let still = seen.lock().unwrap().len();
                hold.confirm().unwrap();
                hold.release();
                (paused, at_pause, last, held, still)
            })
        };
        while !hold.must_stop(None, None) {
            std::thread::yield_now();
        }
        let mut settings = SchedulerSettings::until(Seqno(11));
        settings.hold = Some(hold.clone());
        let mut queue = (0..12).map(|s| txn(s, if s % 2 == 0 { "a" } else { "b" }, 1, "DO 1"));
        // Shards a and b (channels 1 and 2 of Fixed) on channels 0 and 1.
        struct Two(Fixed);
        impl Router for Two {
            fn route(&mut self, txn: &Transaction) -> Route {
                match self.0.route(txn) {
                    Route::Apply { channel, critical } => Route::Apply {
                        channel: ChannelId::recorded((channel.index() as u16 + 1) % 2),
                        critical,
                    },
                    other => other,
                }
            }
        }
        run(
            |_| {
                Ok(queue.next().map(|txn| Queued {
                    txn,
                    epoch: Epoch(0),
                    gtid_position: GtidPos::new(),
                }))
            },
            &mut Two(Fixed),
            &senders,
            &progress,
            &SchedulerCounters::default(),
            &AtomicBool::new(false),
            &settings,
        )
        .unwrap();
        for t in threads {
            t.join().unwrap();
        }
        let (paused, at_pause, last, held, still) = checker.join().unwrap();
        assert_eq!(paused, (None, None), "paused before the first transaction");
        assert_eq!(at_pause, 0);
        assert_eq!(last, Some(Seqno(5)));
        assert_eq!(
            held,
            vec![0, 1, 2, 3, 4, 5],
            "all up to the position committed, none after"
        );
        assert_eq!(still, 6, "nothing sent while held");
        let mut all = seen.lock().unwrap().clone();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..12).collect::<Vec<u64>>(),
            "released: the rest applied"
        );
    }
}
