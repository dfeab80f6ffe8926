//! The extract loop: from the source into the transaction queue, each
//! transaction appended with the extractor's progress after it (the
//! binlog and GTID positions where a restarted extraction resumes). One
//! loop, [`extract_to_queue`], serves the service's extractor thread
//! (`ExtractorThread`) and `shardrep extract --to-queue`.
//!
//! The progress after a transaction: its seqno; the epoch (the first
//! seqno of this extraction); its end position, which is the assembler's
//! resume position; and the assembler's GTID position, started from the
//! stored progress, the takeover point or the GTID start, and updated
//! with each transaction's GTID.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{ExtractFailure, RunError};
use crate::config::{Config, SourceEndpoint, StartPosition};
use crate::extractor::live::{gtid_start_after_purge, LiveOptions};
use crate::extractor::reader::{resolve_start, ExtractStart, Extractor};
use crate::extractor::ExtractError;
use crate::position::{Epoch, GtidPos};
use crate::queue::codec::ExtractorProgress;
use crate::queue::{QueueError, TransactionQueue};

/// How often the service's extractor looks at its stop flag while it
/// waits for the source or for room in the queue.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Where an extraction starts when the queue holds no progress yet.
#[derive(Clone, Debug)]
pub enum FirstStart {
    /// The configured `source.start`, resolved against the source when the
    /// extraction begins ([`resolve_start`]).
    Configured(StartPosition),
    /// A resolved start (`shardrep extract --from`); the GTID position is
    /// the start's own for a GTID start, else unknown.
    At(ExtractStart),
    /// A takeover point: the binlog position native replication executed
    /// up to, and the replica's `gtid_slave_pos` there (every domain's
    /// position, quiet domains included).
    TakeOver(ExtractStart, GtidPos),
}

/// Where one extraction into a queue starts: after the queue's stored
/// progress, or at a first start.
#[derive(Clone, Debug)]
pub struct ExtractPlan {
    start: ExtractStart,
    /// The GTID position at `start` when the start itself does not give
    /// it (a FILE:POS start).
    gtid: Option<GtidPos>,
    /// A resumed extraction from a live master: the stored GTID position,
    /// asked for when the first read is refused with 1236.
    gtid_fallback: Option<(LiveOptions, GtidPos)>,
    /// A GTID start in GTID strict mode ([`Extractor::open_with`]).
    gtid_strict: bool,
    /// Keep each transaction's row events for the `binlog` apply method
    /// ([`Extractor::keep_row_events`]).
    row_events: bool,
    /// Cut transactions into fragments past this many bytes
    /// ([`crate::extractor::assemble::Assembler::set_fragment_bytes`]).
    fragment_bytes: Option<usize>,
    /// A large transaction whose first fragments end the queue is
    /// continued (a resume after the stored progress); `false` after a
    /// master switch, which discarded them.
    continue_tail: bool,
}

impl ExtractPlan {
    /// Resumes after the stored `progress` (of the queue's last
    /// transaction): at its binlog position, with its GTID position. A
    /// restart position at the very end of a binlog the master has since
    /// purged (a clean stop, then FLUSH and PURGE BINARY LOGS) is refused
    /// with 1236 although nothing after it is gone: on a live source whose
    /// stored GTID position is known, the first read then asks for the
    /// same point by GTID ([`gtid_start_after_purge`]).
    pub fn resume(endpoint: &SourceEndpoint, progress: &ExtractorProgress) -> ExtractPlan {
        let gtid_fallback = match endpoint {
            SourceEndpoint::Live(live) if !progress.gtid_position.is_empty() => Some((
                LiveOptions::from_config(live),
                progress.gtid_position.clone(),
            )),
            _ => None,
        };
        ExtractPlan {
            start: ExtractStart::File(progress.position.clone()),
            gtid: Some(progress.gtid_position.clone()),
            gtid_fallback,
            gtid_strict: false,
            row_events: false,
            fragment_bytes: None,
            continue_tail: true,
        }
    }

    /// A first start (the queue holds no transaction yet).
    ///
    /// # Errors
    /// Resolving a [`FirstStart::Configured`] start ([`resolve_start`]).
    pub async fn first(
        endpoint: &SourceEndpoint,
        first: FirstStart,
    ) -> Result<ExtractPlan, ExtractError> {
        let (start, gtid) = match first {
            FirstStart::Configured(start) => (resolve_start(endpoint, &start).await?, None),
            FirstStart::At(start) => (start, None),
            FirstStart::TakeOver(start, gtid) => (start, Some(gtid)),
        };
        Ok(ExtractPlan {
            start,
            gtid,
            gtid_fallback: None,
            gtid_strict: false,
            row_events: false,
            fragment_bytes: None,
            continue_tail: true,
        })
    }

    /// For `queue`: [`ExtractPlan::resume`] after its stored progress,
    /// else [`ExtractPlan::first`] at `first`.
    ///
    /// # Errors
    /// As [`ExtractPlan::first`].
    pub async fn for_queue(
        endpoint: &SourceEndpoint,
        queue: &TransactionQueue,
        first: FirstStart,
    ) -> Result<ExtractPlan, ExtractError> {
        match queue.last_progress() {
            Some(progress) => Ok(ExtractPlan::resume(endpoint, &progress)),
            None => ExtractPlan::first(endpoint, first).await,
        }
    }

    /// After a master switch ([`super::source`]): at `gtid` on the new
    /// master, by GTID, with that GTID position, in GTID strict mode (a
    /// master whose binlog lacks `gtid` between later ones is refused
    /// with 1236 instead of read from an older point).
    pub fn after_switch(gtid: GtidPos) -> ExtractPlan {
        ExtractPlan {
            start: ExtractStart::Gtid(gtid.clone()),
            gtid: Some(gtid),
            gtid_fallback: None,
            gtid_strict: true,
            row_events: false,
            fragment_bytes: None,
            continue_tail: false,
        }
    }

    /// Keeps (or not) each transaction's row events as the master wrote
    /// them, for `[apply] method = "binlog"`
    /// ([`crate::event::Transaction::row_events`]).
    pub fn with_fragment_bytes(mut self, bytes: Option<u64>) -> ExtractPlan {
        self.fragment_bytes = bytes.map(|b| usize::try_from(b).unwrap_or(usize::MAX));
        self
    }

    /// Keeps each transaction's row events for the `binlog` apply method
    /// ([`Extractor::keep_row_events`]).
    pub fn with_row_events(mut self, on: bool) -> ExtractPlan {
        self.row_events = on;
        self
    }

    /// The binlog position or GTID position the extraction starts at.
    pub fn start(&self) -> &ExtractStart {
        &self.start
    }
}

/// How an extraction into the queue ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtractEnd {
    /// The source has nothing more (binlog files read to their end, or a
    /// live master's non-blocking dump done); only when not following.
    SourceEnd,
    /// The limit of transactions is stored.
    Limit,
    /// Stopped while waiting for the source.
    Stopped,
    /// Stopped while waiting for room in the full queue: the transaction
    /// read last is not stored (the next extraction reads it again).
    StoppedWhileFull,
}

/// What an extraction into the queue did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extracted {
    /// Transactions appended to the queue.
    pub stored: u64,
    /// Why it ended.
    pub end: ExtractEnd,
}

/// Why an extraction into the queue failed.
#[derive(Debug, thiserror::Error)]
pub enum ExtractToQueueError {
    /// The source or its decoding failed.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// The queue refused the append.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<ExtractToQueueError> for ExtractFailure {
    fn from(e: ExtractToQueueError) -> Self {
        match e {
            ExtractToQueueError::Extract(e) => ExtractFailure::from(e),
            ExtractToQueueError::Queue(e) => ExtractFailure {
                queue_full: e.is_storage_full(),
                ..ExtractFailure::from(e.to_string())
            },
        }
    }
}

/// Extracts from `endpoint` into `queue`, starting as `plan` says, until
/// the source ends (unless `follow`), `limit` transactions are stored, or
/// `stop` completes. Each transaction is appended with its
/// [`ExtractorProgress`] (see the module documentation); seqnos continue
/// the queue's. While the queue is full the append waits for room;
/// `stop` ends that wait too.
///
/// # Errors
/// [`ExtractToQueueError::Extract`] when the source fails (a live master
/// that is lost is reconnected to while following), and
/// [`ExtractToQueueError::Queue`] when the append fails. What was
/// appended before stays.
pub async fn extract_to_queue(
    endpoint: &SourceEndpoint,
    queue: &TransactionQueue,
    plan: ExtractPlan,
    follow: bool,
    limit: Option<u64>,
    stop: impl Future<Output = ()>,
    idle_mark: Option<Arc<crate::extractor::IdleMark>>,
) -> Result<Extracted, ExtractToQueueError> {
    let next_seqno = queue.next_seqno();
    let epoch = Epoch::starting_at(next_seqno);
    let ExtractPlan {
        start,
        gtid,
        mut gtid_fallback,
        gtid_strict,
        row_events,
        fragment_bytes,
        continue_tail,
    } = plan;
    let inside = if continue_tail {
        open_transaction_at_tail(queue, &start)?
    } else {
        None
    };
    let mut extractor = Extractor::open_with(endpoint, start, next_seqno, follow, gtid_strict)?;
    extractor.keep_row_events(row_events);
    extractor.assembler_mut().set_fragment_bytes(fragment_bytes);
    if let Some((through, next_index)) = inside.clone() {
        tracing::info!(
            next_seqno = next_seqno.get(),
            stored_through = %through,
            next_fragment = next_index,
            "the queue ends inside a large transaction: reading it again from its start, \
             storing its fragments from where the stored ones end"
        );
        extractor.assembler_mut().resume_inside(through, next_index);
    }
    if let Some(gtid) = gtid {
        extractor.set_gtid_position(gtid);
    }
    if let Some(mark) = &idle_mark {
        extractor.set_idle_mark(mark.clone());
    }
    tokio::pin!(stop);
    let mut stored = 0u64;
    loop {
        if limit.is_some_and(|l| stored >= l) {
            return Ok(Extracted {
                stored,
                end: ExtractEnd::Limit,
            });
        }
        let next = tokio::select! {
            biased;
            () = &mut stop => return Ok(Extracted { stored, end: ExtractEnd::Stopped }),
            next = extractor.next_transaction() => next,
        };
        let txn = match next {
            Err(ExtractError::Master {
                code: Some(1236),
                message,
                address,
                transient,
            }) if gtid_fallback.is_some() => {
                let (options, state) = gtid_fallback.take().expect("checked");
                let Some(gtid) = gtid_start_after_purge(&options, &state).await? else {
                    return Err(ExtractError::Master {
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
                    endpoint,
                    ExtractStart::Gtid(gtid.clone()),
                    next_seqno,
                    follow,
                )?;
                extractor.set_gtid_position(gtid);
                extractor.keep_row_events(row_events);
                extractor.assembler_mut().set_fragment_bytes(fragment_bytes);
                if let Some((through, next_index)) = inside.clone() {
                    extractor.assembler_mut().resume_inside(through, next_index);
                }
                if let Some(mark) = &idle_mark {
                    extractor.set_idle_mark(mark.clone());
                }
                continue;
            }
            Err(e) => return Err(e.into()),
            Ok(None) => {
                return Ok(Extracted {
                    stored,
                    end: ExtractEnd::SourceEnd,
                })
            }
            Ok(Some(txn)) => txn,
        };
        // Only the first read may fall back.
        gtid_fallback = None;
        // A fragment that does not end its transaction: a restart reads
        // the transaction again from its start (the position after the
        // last whole transaction), and skips what its stored fragments
        // hold (`open_transaction_at_tail`).
        let position = if txn.continues() {
            extractor.assembler().resume_position().clone()
        } else {
            txn.end_position.clone()
        };
        let progress = ExtractorProgress {
            seqno: txn.seqno,
            epoch,
            position,
            gtid_position: extractor.assembler().gtid_position().clone(),
        };
        // The append first: `stop` ends only a wait for room.
        tokio::select! {
            biased;
            appended = queue.append_async(&txn, &progress) => appended?,
            () = &mut stop => return Ok(Extracted { stored, end: ExtractEnd::StoppedWhileFull }),
        }
        stored += 1;
    }
}

/// When the queue's last record is a fragment that does not end its
/// transaction (a stop in the middle of a large one): where its stored
/// fragments end and the index of the next fragment, for
/// [`crate::extractor::assemble::Assembler::resume_inside`]. Only a resume
/// at that transaction's start (the position its record stores) can go on
/// with it.
///
/// # Errors
/// [`ExtractError::Sequence`] when the extraction starts elsewhere (a
/// GTID start, after a master switch): the fragments stored cannot be
/// matched with another binlog's events; a queue error reading the record.
fn open_transaction_at_tail(
    queue: &TransactionQueue,
    start: &ExtractStart,
) -> Result<Option<(crate::position::BinlogPosition, u32)>, ExtractToQueueError> {
    let Some(last) = queue.max_seqno() else {
        return Ok(None);
    };
    let Some(txn) = queue.get(last)? else {
        return Ok(None);
    };
    let Some(fragment) = txn.fragment.filter(|f| !f.last) else {
        return Ok(None);
    };
    let resume = queue.last_progress().map(|p| p.position);
    match start {
        ExtractStart::File(at) if Some(at) == resume.as_ref() => {
            Ok(Some((txn.end_position, fragment.index + 1)))
        }
        other => Err(ExtractError::Sequence {
            position: txn.end_position.clone(),
            message: format!(
                "the queue ends inside a large transaction (seqno {} is its fragment {}, \
                 more were to follow), and this extraction starts at {other:?}, not at that \
                 transaction's start {}: its stored fragments cannot be continued from there",
                txn.seqno.get(),
                fragment.index,
                resume.map_or_else(|| "(unknown)".to_string(), |p| p.to_string()),
            ),
        }
        .into()),
    }
}

/// Completes once `flag` is set: looked at on every poll, and every
/// `every` while nothing else wakes the task. Polled on a tokio runtime
/// with its timer enabled.
pub fn flag_raised(flag: &AtomicBool, every: Duration) -> impl Future<Output = ()> + '_ {
    let mut tick: Option<tokio::time::Interval> = None;
    std::future::poll_fn(move |cx| {
        if flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let tick = tick.get_or_insert_with(|| {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        // Drain elapsed ticks until the timer is armed for a wake-up.
        while tick.poll_tick(cx).is_ready() {}
        Poll::Pending
    })
}

/// A run's extractor thread (`shardrep-extract`): [`extract_to_queue`] on
/// a tokio runtime of its own, following the source unless the run stops
/// when idle.
pub(super) struct ExtractorThread {
    handle: JoinHandle<Result<(), ExtractFailure>>,
    stop: Arc<AtomicBool>,
    idle: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

impl ExtractorThread {
    /// Starts the thread: it resumes after `queue`'s stored progress, or
    /// starts at `first`; it follows the source unless `stop_when_idle`.
    /// With `switch` (a master switch, [`super::source`]) whose first
    /// seqno is the queue's next one, it starts at the switch's GTID
    /// position instead (nothing of the new master is stored yet).
    ///
    /// # Errors
    /// [`RunError::Setup`] when the thread cannot be started.
    pub fn spawn(
        config: &Config,
        queue: &Arc<TransactionQueue>,
        stop_when_idle: bool,
        first: FirstStart,
        switch: Option<super::source::SwitchResume>,
        idle_mark: Option<Arc<crate::extractor::IdleMark>>,
    ) -> Result<ExtractorThread, RunError> {
        let stop = Arc::new(AtomicBool::new(false));
        let idle = Arc::new(AtomicBool::new(false));
        // The extractor's error, seen by the feed at once (the run goes
        // OFFLINE:ERROR instead of waiting for transactions that never
        // come).
        let failed = Arc::new(AtomicBool::new(false));
        let handle = {
            let (config, queue) = (config.clone(), queue.clone());
            let (stop, idle, failed) = (stop.clone(), idle.clone(), failed.clone());
            std::thread::Builder::new()
                .name("shardrep-extract".into())
                .spawn(move || {
                    let result = extract_thread(
                        &config,
                        &queue,
                        &stop,
                        &idle,
                        !stop_when_idle,
                        (first, switch),
                        idle_mark,
                    );
                    if result.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    result
                })
                .map_err(|e| RunError::setup(format!("cannot start the extractor thread: {e}")))?
        };
        Ok(ExtractorThread {
            handle,
            stop,
            idle,
            failed,
        })
    }

    /// Whether the extractor stopped on an error.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Whether the source had nothing more (only when not following).
    pub fn idle(&self) -> bool {
        self.idle.load(Ordering::Acquire)
    }

    /// Whether the thread has ended (idle or failed).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the extractor (within [`STOP_POLL`]) and joins its thread.
    ///
    /// # Errors
    /// The extractor's error, with the master's code.
    pub fn stop(self) -> Result<(), ExtractFailure> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .join()
            .unwrap_or_else(|_| Err("the extractor thread panicked".into()))
    }
}

/// The body of the extractor thread; `start`: the first start and a
/// master switch's resume point (see [`ExtractorThread::spawn`]).
fn extract_thread(
    config: &Config,
    queue: &TransactionQueue,
    stop: &AtomicBool,
    idle: &AtomicBool,
    follow: bool,
    (first, switch): (FirstStart, Option<super::source::SwitchResume>),
    idle_mark: Option<Arc<crate::extractor::IdleMark>>,
) -> Result<(), ExtractFailure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ExtractFailure::from(e.to_string()))?;
    runtime.block_on(async {
        let endpoint = &config.source.endpoint;
        let next_seqno = queue.next_seqno();
        let plan = match switch {
            Some(switch) if switch.first_seqno == next_seqno => {
                tracing::info!(
                    gtid = %switch.gtid,
                    first_seqno = next_seqno.get(),
                    "extracting from the switched-to master by GTID"
                );
                ExtractPlan::after_switch(switch.gtid)
            }
            _ => ExtractPlan::for_queue(endpoint, queue, first).await?,
        }
        // Kept under either method, so that a queue written under "sql"
        // is applied by the replica's row applier after a switch to
        // "binlog" (a system-versioned table stops the "sql" method).
        .with_row_events(true)
        .with_fragment_bytes(Some(config.queue.fragment_bytes));
        tracing::info!(start = ?plan.start(), next_seqno = next_seqno.get(), "extractor starting");
        let extracted = extract_to_queue(
            endpoint,
            queue,
            plan,
            follow,
            None,
            flag_raised(stop, STOP_POLL),
            idle_mark,
        )
        .await?;
        if extracted.end == ExtractEnd::SourceEnd {
            idle.store(true, Ordering::Release);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn flag_raised_completes_within_its_interval_of_the_flag() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                flag.store(true, Ordering::Release);
            })
        };
        let started = Instant::now();
        runtime.block_on(async {
            let every = Duration::from_millis(20);
            // Nothing else wakes the task: only the interval notices.
            tokio::time::timeout(Duration::from_secs(10), flag_raised(&flag, every))
                .await
                .expect("the flag is noticed");
        });
        let waited = started.elapsed();
        setter.join().unwrap();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // Already set: ready on the first poll.
        let started = Instant::now();
        runtime.block_on(flag_raised(&flag, Duration::from_secs(3600)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
