//! [`Progress`]: what the channels share with the scheduler and status:
//! each channel's last committed seqno and position, the first definite
//! error, counts per channel and shard, and the in-flight memory budget.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::applier::error::ApplyError;
use crate::applier::work::{AppliedMarker, Marker, ShardApplied};
use crate::event::Transaction;
use crate::position::{Epoch, Seqno};

/// Progress shared by the channels and the scheduler: each channel's last
/// committed seqno (`CommittedSeqno`), the first definite error, and a condition
/// variable signalled on every change.
#[derive(Debug)]
pub struct Progress {
    committed: Vec<CommittedSeqno>,
    /// Bumped by every channel after it applies DDL: channels forget their
    /// cached table shapes when it changes (a DDL on one channel may alter
    /// a table another channel also writes, e.g. in critical transactions).
    ddl_epoch: AtomicU64,
    /// Transient errors retried, over all channels.
    retries: AtomicU64,
    /// Each channel's last committed position (block or marker) and its
    /// applied latency (replica commit time minus master commit time, s).
    markers: Mutex<Vec<Option<AppliedMarker>>>,
    /// Transactions each channel committed in this run.
    applied: Vec<AtomicU64>,
    /// Per shard: its last committed transaction and count in this run.
    shards: Mutex<HashMap<String, ShardApplied>>,
    /// Bytes of transactions handed to channels and not yet committed,
    /// and the most allowed.
    in_flight: Mutex<u64>,
    in_flight_max: u64,
    in_flight_changed: Condvar,
    error: Mutex<Option<ApplyError>>,
    lock: Mutex<()>,
    changed: Condvar,
}

/// A channel's last committed seqno, or none, in one atomic word: the
/// seqno plus one, 0 for none (so that "none" is below every seqno and a
/// raise is one `fetch_max`). Seqno `u64::MAX` cannot be held (2^64
/// transactions).
#[derive(Debug)]
struct CommittedSeqno(AtomicU64);

impl CommittedSeqno {
    fn new(seqno: Option<Seqno>) -> CommittedSeqno {
        CommittedSeqno(AtomicU64::new(Self::encode(seqno)))
    }

    fn encode(seqno: Option<Seqno>) -> u64 {
        seqno.map_or(0, |s| s.get().saturating_add(1))
    }

    fn load(&self) -> Option<Seqno> {
        self.0.load(Ordering::Acquire).checked_sub(1).map(Seqno)
    }

    /// Raises the seqno to `seqno` (a lower one leaves it as it is).
    fn raise(&self, seqno: Seqno) {
        self.0
            .fetch_max(Self::encode(Some(seqno)), Ordering::AcqRel);
    }
}

impl Progress {
    /// Progress for `channels` channels, each starting at its restart
    /// row's seqno.
    pub fn new(start: &[Option<Seqno>]) -> Progress {
        Progress {
            committed: start.iter().map(|s| CommittedSeqno::new(*s)).collect(),
            ddl_epoch: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            markers: Mutex::new(vec![None; start.len()]),
            applied: start.iter().map(|_| AtomicU64::new(0)).collect(),
            shards: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(0),
            in_flight_max: u64::MAX,
            in_flight_changed: Condvar::new(),
            error: Mutex::new(None),
            lock: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Channel `channel`'s last committed seqno (`None`: nothing yet).
    pub fn committed(&self, channel: usize) -> Option<Seqno> {
        self.committed[channel].load()
    }

    /// The lowest committed seqno over all channels (`None` when a channel
    /// has committed nothing).
    pub fn minimum(&self) -> Option<Seqno> {
        (0..self.committed.len())
            .map(|c| self.committed(c))
            .min()
            .flatten()
    }

    /// The same progress with a memory budget: at most `bytes` of
    /// transactions in flight between the scheduler and the channels.
    pub fn with_memory_budget(mut self, bytes: u64) -> Progress {
        self.in_flight_max = bytes.max(1);
        self
    }

    /// Takes `bytes` of the memory budget, waiting while it is exhausted;
    /// a transaction larger than the whole budget is admitted when nothing
    /// else is in flight. Returns false (without taking) when a channel
    /// failed meanwhile.
    pub fn acquire_memory(&self, bytes: u64) -> bool {
        let mut used = self.in_flight.lock().expect("in-flight lock");
        loop {
            if *used == 0 || used.saturating_add(bytes) <= self.in_flight_max {
                *used += bytes;
                return true;
            }
            if self.error().is_some() {
                return false;
            }
            used = self
                .in_flight_changed
                .wait_timeout(used, Duration::from_millis(100))
                .expect("in-flight lock")
                .0;
        }
    }

    /// Gives `bytes` of the memory budget back.
    pub fn release_memory(&self, bytes: u64) {
        let mut used = self.in_flight.lock().expect("in-flight lock");
        *used = used.saturating_sub(bytes);
        drop(used);
        self.in_flight_changed.notify_all();
    }

    /// Bytes of transactions in flight now.
    pub fn memory_in_flight(&self) -> u64 {
        *self.in_flight.lock().expect("in-flight lock")
    }

    /// Channel `channel`'s last committed position in this run with its
    /// applied latency in seconds (`None` before its first commit).
    pub fn marker(&self, channel: usize) -> Option<AppliedMarker> {
        self.markers.lock().expect("markers lock")[channel].clone()
    }

    pub(super) fn set_marker(&self, channel: usize, marker: Arc<Marker>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let latency = (now - f64::from(marker.extract_time)).max(0.0);
        self.markers.lock().expect("markers lock")[channel] = Some((marker, latency));
    }

    /// Transactions channel `channel` committed in this run.
    pub fn applied_count(&self, channel: usize) -> u64 {
        self.applied[channel].load(Ordering::Relaxed)
    }

    /// What was committed of shard `shard` in this run (`None`: nothing).
    pub fn shard_applied(&self, shard: &str) -> Option<ShardApplied> {
        self.shards.lock().expect("shards lock").get(shard).cloned()
    }

    /// Counts the transactions of `block` above `before` (those the
    /// channel just committed; lower ones were committed in an earlier run
    /// and skipped) for channel `channel` and their shards.
    pub(super) fn record_applied(
        &self,
        channel: usize,
        block: &[(Arc<Transaction>, Epoch)],
        before: Option<Seqno>,
    ) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let fresh = |t: &Transaction| before.is_none_or(|b| t.seqno > b);
        let mut count = 0;
        // Per shard of the block: how many, and its last transaction.
        let mut per_shard: Vec<(&str, u64, &Transaction)> = Vec::new();
        for (txn, _) in block.iter().filter(|(t, _)| fresh(t)) {
            count += 1;
            match per_shard.iter_mut().find(|(s, _, _)| *s == txn.shard) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = txn;
                }
                None => per_shard.push((&txn.shard, 1, txn)),
            }
        }
        self.applied[channel].fetch_add(count, Ordering::Relaxed);
        let mut shards = self.shards.lock().expect("shards lock");
        for (shard, n, last) in per_shard {
            let latency = (now - f64::from(last.commit_timestamp)).max(0.0);
            let event_id = last.end_position.to_string();
            match shards.get_mut(shard) {
                Some(entry) => {
                    if last.seqno > entry.seqno {
                        entry.seqno = last.seqno;
                        entry.event_id = event_id;
                        entry.latency = latency;
                    }
                    entry.count += n;
                }
                None => {
                    shards.insert(
                        shard.to_string(),
                        ShardApplied {
                            seqno: last.seqno,
                            event_id,
                            latency,
                            count: n,
                        },
                    );
                }
            }
        }
    }

    /// Transient errors retried so far (blocks rolled back and run again).
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Counts one transient error retried.
    pub(super) fn count_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// How many DDL transactions the channels applied in this run: a
    /// channel whose cached table shapes are of an older count forgets
    /// them.
    pub(super) fn ddl_epoch(&self) -> u64 {
        self.ddl_epoch.load(Ordering::Acquire)
    }

    /// Counts one DDL transaction applied; returns the new count.
    pub(super) fn bump_ddl_epoch(&self) -> u64 {
        self.ddl_epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The first definite error, if any.
    pub fn error(&self) -> Option<ApplyError> {
        self.error.lock().expect("progress lock").clone()
    }

    /// Records that channel `channel` has committed everything sent to it
    /// up to seqno `seqno` (a lower seqno than the one recorded is
    /// ignored) and wakes [`Progress::wait_until`] waiters, such as the
    /// scheduler at a barrier. Channels call it after each commit; it is
    /// public so benchmarks and tests can stand in for channels.
    pub fn set_committed(&self, channel: usize, seqno: Seqno) {
        self.committed[channel].raise(seqno);
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    pub(super) fn set_error(&self, error: ApplyError) {
        let mut slot = self.error.lock().expect("progress lock");
        if slot.is_none() {
            *slot = Some(error);
        }
        drop(slot);
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    /// Blocks until `done()` holds or an error is recorded; returns false
    /// on error. Wakes at least every 100 ms to re-check.
    pub fn wait_until(&self, done: impl Fn(&Progress) -> bool) -> bool {
        let mut guard = self.lock.lock().expect("progress lock");
        loop {
            if self.error().is_some() {
                return false;
            }
            if done(self) {
                return true;
            }
            guard = self
                .changed
                .wait_timeout(guard, Duration::from_millis(100))
                .expect("progress lock")
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Progress;
    use crate::position::Seqno;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn committed_seqnos_start_at_the_restart_rows_and_only_rise() {
        let progress = Progress::new(&[None, Some(Seqno(0)), Some(Seqno(7))]);
        assert_eq!(progress.committed(0), None);
        assert_eq!(progress.committed(1), Some(Seqno(0)));
        assert_eq!(progress.committed(2), Some(Seqno(7)));
        assert_eq!(progress.minimum(), None);
        progress.set_committed(0, Seqno(0));
        assert_eq!(progress.committed(0), Some(Seqno(0)));
        assert_eq!(progress.minimum(), Some(Seqno(0)));
        progress.set_committed(2, Seqno(5));
        assert_eq!(progress.committed(2), Some(Seqno(7)), "never backwards");
        progress.set_committed(0, Seqno(9));
        progress.set_committed(1, Seqno(8));
        assert_eq!(progress.minimum(), Some(Seqno(7)));
    }

    #[test]
    fn memory_budget_waits_for_releases_and_admits_one_oversized() {
        let progress = Arc::new(Progress::new(&[None]).with_memory_budget(100));
        assert!(progress.acquire_memory(60));
        let waiter = {
            let progress = progress.clone();
            std::thread::spawn(move || progress.acquire_memory(60))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "120 bytes exceed the budget of 100");
        progress.release_memory(60);
        assert!(waiter.join().unwrap());
        assert_eq!(progress.memory_in_flight(), 60);
        progress.release_memory(60);
        // Larger than the whole budget: admitted alone.
        assert!(progress.acquire_memory(1_000));
        assert_eq!(progress.memory_in_flight(), 1_000);
    }
}
