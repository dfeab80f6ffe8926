//! Purging the queue of what a restart will not read again, from the feed
//! every [`PURGE_EVERY`] dispatched transactions: a restart reads the queue
//! from above the highest low-water mark written in a restart row (or,
//! with rows of an older shardrep, above the lowest row), so nothing above
//! either is purged.

use crate::applier::progress::Progress;
use crate::queue::TransactionQueue;

/// Transactions handed to the scheduler between two purges.
pub(super) const PURGE_EVERY: u32 = 1000;

/// Counts the transactions handed to the scheduler and purges the queue
/// every [`PURGE_EVERY`] of them.
#[derive(Debug, Default)]
pub(super) struct Purger {
    since: u32,
}

impl Purger {
    /// One more transaction handed to the scheduler: every
    /// [`PURGE_EVERY`]th purges `queue` up to the lower of the highest
    /// low-water mark written in a restart row
    /// ([`Progress::durable_low_water`]) and the lowest channel's row
    /// ([`Progress::minimum`]; `purge_applied` keeps `retention_seqnos`
    /// below it). A failed purge is logged; the run goes on.
    pub fn dispatched(&mut self, queue: &TransactionQueue, progress: &Progress) {
        self.since += 1;
        if self.since < PURGE_EVERY {
            return;
        }
        self.since = 0;
        if let Some(min) = progress.minimum().min(progress.durable_low_water()) {
            if let Err(e) = queue.purge_applied(min) {
                tracing::warn!(error = %e, "queue purge failed");
            }
        }
    }
}
