//! Purging the queue of what every channel has committed, from the feed
//! every [`PURGE_EVERY`] dispatched transactions.

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
    /// [`PURGE_EVERY`]th purges `queue` below the lowest seqno every
    /// channel has committed (`purge_applied` keeps `retention_seqnos`
    /// below it). A failed purge is logged; the run goes on.
    pub fn dispatched(&mut self, queue: &TransactionQueue, progress: &Progress) {
        self.since += 1;
        if self.since < PURGE_EVERY {
            return;
        }
        self.since = 0;
        if let Some(min) = progress.minimum() {
            if let Err(e) = queue.purge_applied(min) {
                tracing::warn!(error = %e, "queue purge failed");
            }
        }
    }
}
