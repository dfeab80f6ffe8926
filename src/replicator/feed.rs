//! The feed: the queue → scheduler hand-over of a run. The scheduler asks
//! for the next transaction with a time limit ([`Feed::next`]); the feed
//! waits for it on the queue's blocking read and, between waits, stops the
//! scheduler on a stop request, at `stop_at`, on native replication found
//! running, on the extractor's error, and (when the run stops when idle)
//! once everything extracted is handed over. It purges the queue every
//! [`super::purge::PURGE_EVERY`] transactions.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::extract::ExtractorThread;
use super::native::NativeCheck;
use super::purge::Purger;
use crate::applier::progress::Progress;
use crate::position::Seqno;
use crate::queue::{QueueError, QueueReader, TransactionQueue};
use crate::scheduler::Queued;

/// The longest the feed waits for the queue before it looks at the stop
/// requests, native replication and the extractor again: how promptly a
/// stop is noticed while the queue is empty.
pub(super) const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// What stops the scheduler besides the queue.
pub(super) struct FeedStops<'a> {
    /// The extractor: its error stops the run, and so does its idle end
    /// with `stop_when_idle`.
    pub extractor: &'a ExtractorThread,
    /// The run's stop request.
    pub stop: &'a AtomicBool,
    /// Stop once this seqno is handed over (`u64::MAX`: never); may change
    /// while the run goes on (`offline --at-seqno`).
    pub stop_at: Option<&'a AtomicU64>,
    /// Stop once the extractor is idle and everything is handed over.
    pub stop_when_idle: bool,
    /// The flag the scheduler stops on; the feed sets it.
    pub scheduler_stop: &'a AtomicBool,
}

/// The queue → scheduler feed of one run (`'n`: the native-replication
/// check's borrows, which outlive the feed).
pub(super) struct Feed<'a, 'n> {
    queue: &'a TransactionQueue,
    reader: QueueReader,
    progress: &'a Progress,
    stops: FeedStops<'a>,
    native: NativeCheck<'n>,
    purger: Purger,
    /// The seqno a queue read failed at (the error reaches the scheduler
    /// as text).
    read_failed_at: Option<u64>,
}

impl<'a, 'n> Feed<'a, 'n> {
    /// A feed reading `queue` from seqno `start`; `progress` is the
    /// channels' (for purges).
    ///
    /// # Errors
    /// [`crate::queue::QueueError::Purged`] when `start` is purged.
    pub fn new(
        queue: &'a TransactionQueue,
        start: Seqno,
        progress: &'a Progress,
        stops: FeedStops<'a>,
        native: NativeCheck<'n>,
    ) -> Result<Feed<'a, 'n>, QueueError> {
        Ok(Feed {
            reader: queue.reader_from(start)?,
            queue,
            progress,
            stops,
            native,
            purger: Purger::default(),
            read_failed_at: None,
        })
    }

    /// Ends the feed: the native-replication check (for its findings and
    /// its connection) and the seqno a queue read failed at.
    pub fn finish(self) -> (NativeCheck<'n>, Option<u64>) {
        (self.native, self.read_failed_at)
    }

    /// Whether a stop request, or `stop_at` below `seqno`, stops the run
    /// before `seqno` is handed over.
    fn stop_before(&self, seqno: Seqno) -> bool {
        self.stops.stop.load(Ordering::Acquire)
            || self.stops.stop_at.is_some_and(|at| {
                let at = at.load(Ordering::Acquire);
                at != u64::MAX && seqno.get() > at
            })
    }

    /// Stops the scheduler: nothing more is handed over.
    fn stop_scheduler(&self) -> Result<Option<Queued>, String> {
        self.stops.scheduler_stop.store(true, Ordering::Release);
        Ok(None)
    }

    /// The next transaction with its epoch and the source GTID position
    /// after it (the scheduler's `next`), waiting at most `timeout`;
    /// `Ok(None)` when nothing came or the scheduler is told to stop.
    /// A stop is noticed within [`STOP_CHECK_INTERVAL`].
    ///
    /// # Errors
    /// The queue's read error as text ([`Feed::finish`] gives its seqno).
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Queued>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stop_before(self.reader.next_seqno()) {
                return self.stop_scheduler();
            }
            if self.native.poll(self.progress) {
                // Stop the channels where dispatch is; the run then ends
                // with NativeReplication.
                return self.stop_scheduler();
            }
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .min(STOP_CHECK_INTERVAL);
            let read = match self.reader.next_timeout_with_progress(wait) {
                Ok(read) => read,
                Err(e) => {
                    self.read_failed_at = Some(e.seqno().unwrap_or(self.reader.next_seqno()).get());
                    return Err(e.to_string());
                }
            };
            if let Some((txn, p)) = read {
                // A stop asked for during the wait: the transaction stays
                // in the queue for the next run.
                if self.stop_before(txn.seqno) {
                    return self.stop_scheduler();
                }
                self.purger.dispatched(self.queue, self.progress);
                return Ok(Some(Queued {
                    txn,
                    epoch: p.epoch,
                    gtid_position: p.gtid_position,
                }));
            }
            if self.stops.extractor.failed() {
                // Everything extracted is dispatched: stop the channels
                // there; the run then ends with the extractor's error
                // (and the master's code) as RunError::Extract.
                return self.stop_scheduler();
            }
            if self.stops.stop_when_idle
                && self.stops.extractor.idle()
                && self.reader.next_seqno() >= self.queue.next_seqno()
            {
                return self.stop_scheduler();
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}
