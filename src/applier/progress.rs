//! [`Progress`]: what the channels share with the scheduler and status:
//! each channel's last committed seqno and position, the low-water mark
//! over all channels ([`LowWaterBooks`]) and the highest one written in a
//! restart row, the first definite error, counts per channel and shard,
//! and the in-flight memory budget.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::applier::error::ApplyError;
use crate::applier::low_water::LowWaterBooks;
use crate::applier::work::{AppliedMarker, Marker, ShardApplied};
use crate::event::Transaction;
use crate::position::{Epoch, Seqno};

/// Progress shared by the channels and the scheduler: each channel's last
/// committed seqno (`CommittedSeqno`), the first definite error, and a condition
/// variable signalled on every change.
#[derive(Debug)]
pub struct Progress {
    committed: Vec<CommittedSeqno>,
    /// The low-water mark's books (scheduler: handled and dispatched
    /// seqnos; channels: committed ones).
    books: Mutex<LowWaterBooks>,
    /// The highest low-water mark committed in a restart row (plus one, 0:
    /// none): a restart reads the queue from above it, so the queue may be
    /// purged up to it.
    durable_low_water: CommittedSeqno,
    /// Bumped by every channel after it applies DDL: channels forget their
    /// cached table shapes when it changes (a DDL on one channel may alter
    /// a table another channel also writes, e.g. in critical transactions).
    ddl_epoch: AtomicU64,
    /// Transient errors retried, over all channels.
    retries: AtomicU64,
    /// Those retries per server error code (0: a connection or driver
    /// error without one).
    retries_by_code: Mutex<std::collections::BTreeMap<u16, u64>>,
    /// Blocks whose outcome was unknown (the connection lost after they
    /// were sent) and whose restart row, read again, showed them
    /// committed.
    unknown_committed: AtomicU64,
    /// Those whose restart row showed them not committed (applied again).
    unknown_not_committed: AtomicU64,
    /// Row changes (row image pairs) of the transactions committed in
    /// this run.
    rows_applied: AtomicU64,
    /// Blocks (replica transactions) the channels committed in this run.
    blocks_committed: AtomicU64,
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
    /// Channels waiting for the low-water mark to reach a seqno
    /// ([`Progress::wait_low_water`]), each woken alone when it does.
    turn_waiters: Mutex<Vec<(Seqno, std::thread::Thread)>>,
}

/// How [`Progress::wait_low_water`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnWait {
    /// The low-water mark reached the seqno.
    Reached,
    /// The deadline passed first.
    TimedOut,
    /// An error was recorded.
    Failed,
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
    /// row's seqno, with the low-water mark at the lowest of them
    /// ([`Progress::with_low_water`] sets it).
    pub fn new(start: &[Option<Seqno>]) -> Progress {
        let lowest = start.iter().copied().min().flatten();
        Progress {
            committed: start.iter().map(|s| CommittedSeqno::new(*s)).collect(),
            books: Mutex::new(LowWaterBooks::new(lowest)),
            durable_low_water: CommittedSeqno::new(lowest),
            ddl_epoch: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retries_by_code: Mutex::new(std::collections::BTreeMap::new()),
            unknown_committed: AtomicU64::new(0),
            unknown_not_committed: AtomicU64::new(0),
            rows_applied: AtomicU64::new(0),
            blocks_committed: AtomicU64::new(0),
            markers: Mutex::new(vec![None; start.len()]),
            applied: start.iter().map(|_| AtomicU64::new(0)).collect(),
            shards: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(0),
            in_flight_max: u64::MAX,
            in_flight_changed: Condvar::new(),
            error: Mutex::new(None),
            lock: Mutex::new(()),
            changed: Condvar::new(),
            turn_waiters: Mutex::new(Vec::new()),
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

    /// The same progress with the low-water mark at `base`, the recovered
    /// one ([`crate::applier::restart::Recovery::base`]): every seqno up to
    /// it is done and recorded in the restart rows, and the scheduler
    /// handles the seqnos after it.
    pub fn with_low_water(self, base: Option<Seqno>) -> Progress {
        *self.books.lock().expect("low-water lock") = LowWaterBooks::new(base);
        Progress {
            durable_low_water: CommittedSeqno::new(base),
            ..self
        }
    }

    /// The scheduler sends `marker`'s seqno to a channel: it stays in
    /// flight, holding the low-water mark below it, until committed.
    pub fn dispatched(&self, marker: &Arc<Marker>) {
        self.books
            .lock()
            .expect("low-water lock")
            .dispatched(marker);
    }

    /// The scheduler handled `marker`'s seqno without sending it to a
    /// channel (dropped by the shard filter, skipped by the DBA, or
    /// recorded committed by an earlier run).
    pub fn handled(&self, marker: &Arc<Marker>) {
        self.books.lock().expect("low-water lock").handled(marker);
    }

    /// A channel committed `seqnos` (durably: after COMMIT), or
    /// found them committed by an earlier run; wakes
    /// [`Progress::wait_until`] waiters. One lock for the whole block.
    pub fn committed_block(&self, seqnos: impl IntoIterator<Item = Seqno>) {
        let low_water = {
            let mut books = self.books.lock().expect("low-water lock");
            for s in seqnos {
                books.committed(s);
            }
            books.low_water()
        };
        if let Some(l) = low_water {
            for (waits_for, thread) in self.turn_waiters.lock().expect("turn lock").iter() {
                if *waits_for <= l {
                    thread.unpark();
                }
            }
        }
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    /// The low-water mark: every seqno up to it is committed by some
    /// channel or needs no apply (`None`: none known). The scheduler may
    /// bound dispatch to it plus a window.
    pub fn low_water(&self) -> Option<Seqno> {
        self.books.lock().expect("low-water lock").low_water()
    }

    /// The low-water mark with its marker, when this run handled that
    /// seqno (status: `appliedLastSeqno` and its event id).
    pub fn low_water_marker(&self) -> (Option<Seqno>, Option<Arc<Marker>>) {
        let books = self.books.lock().expect("low-water lock");
        (books.low_water(), books.low_water_marker())
    }

    /// Dispatched seqnos the low-water mark waits for (the in-flight
    /// window).
    pub fn in_flight_seqnos(&self) -> usize {
        self.books.lock().expect("low-water lock").in_flight()
    }

    /// The highest low-water mark committed in a restart row (the
    /// recovered base at first): a restart reads the queue from above it.
    pub fn durable_low_water(&self) -> Option<Seqno> {
        self.durable_low_water.load()
    }

    /// A channel committed a restart row with low-water mark `seqno`.
    pub(super) fn set_durable_low_water(&self, seqno: Seqno) {
        self.durable_low_water.raise(seqno);
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

    /// Counts the transactions of `applied` (those channel `channel` just
    /// committed) for the channel and their shards.
    pub(super) fn record_applied(&self, channel: usize, applied: &[&(Arc<Transaction>, Epoch)]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut count = 0;
        let mut rows = 0;
        // Per shard of the block: how many, and its last transaction.
        let mut per_shard: Vec<(&str, u64, &Transaction)> = Vec::new();
        for (txn, _) in applied.iter().copied() {
            count += 1;
            rows += txn.row_count() as u64;
            match per_shard.iter_mut().find(|(s, _, _)| *s == txn.shard) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = txn;
                }
                None => per_shard.push((&txn.shard, 1, txn)),
            }
        }
        self.applied[channel].fetch_add(count, Ordering::Relaxed);
        self.rows_applied.fetch_add(rows, Ordering::Relaxed);
        self.blocks_committed.fetch_add(1, Ordering::Relaxed);
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

    /// Counts one transient error retried, of server error `code` (0:
    /// none, a connection or driver error).
    pub(super) fn count_retry(&self, code: u16) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        *self
            .retries_by_code
            .lock()
            .expect("retries lock")
            .entry(code)
            .or_default() += 1;
    }

    /// Counts one block whose outcome was unknown, by what its restart
    /// row said: `committed`, or not (then applied again).
    pub(super) fn count_unknown_outcome(&self, committed: bool) {
        let counter = if committed {
            &self.unknown_committed
        } else {
            &self.unknown_not_committed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Blocks of unknown outcome found committed, and found not committed
    /// (applied again), in this run.
    pub fn unknown_outcomes(&self) -> (u64, u64) {
        (
            self.unknown_committed.load(Ordering::Relaxed),
            self.unknown_not_committed.load(Ordering::Relaxed),
        )
    }

    /// The retries so far per server error code (0: none).
    pub fn retries_by_code(&self) -> std::collections::BTreeMap<u16, u64> {
        self.retries_by_code.lock().expect("retries lock").clone()
    }

    /// Row changes of the transactions committed in this run.
    pub fn rows_applied(&self) -> u64 {
        self.rows_applied.load(Ordering::Relaxed)
    }

    /// Blocks (replica transactions, each one or more source
    /// transactions) committed in this run.
    pub fn blocks_committed(&self) -> u64 {
        self.blocks_committed.load(Ordering::Relaxed)
    }

    /// Transactions committed in this run, over all channels.
    pub fn applied_total(&self) -> u64 {
        self.applied.iter().map(|a| a.load(Ordering::Relaxed)).sum()
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
        for (_, thread) in self.turn_waiters.lock().expect("turn lock").iter() {
            thread.unpark();
        }
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    /// Blocks the calling thread until the low-water mark reaches `seqno`,
    /// an error is recorded or `deadline` passes. The thread is woken
    /// alone by the commit that moves the mark there (not with every
    /// waiter of [`Progress::wait_until`]), and re-checks every 10 ms.
    pub fn wait_low_water(&self, seqno: Seqno, deadline: Option<std::time::Instant>) -> TurnWait {
        let reached = || self.low_water().is_some_and(|l| l >= seqno);
        let mut registered = false;
        let outcome = loop {
            if self.error.lock().expect("progress lock").is_some() {
                break TurnWait::Failed;
            }
            if reached() {
                break TurnWait::Reached;
            }
            let now = std::time::Instant::now();
            let mut nap = Duration::from_millis(10);
            if let Some(d) = deadline {
                if now >= d {
                    break TurnWait::TimedOut;
                }
                nap = nap.min(d - now);
            }
            if !registered {
                self.turn_waiters
                    .lock()
                    .expect("turn lock")
                    .push((seqno, std::thread::current()));
                registered = true;
                // A commit between the check above and the registration
                // woke nobody: check again before parking.
                continue;
            }
            std::thread::park_timeout(nap);
        };
        if registered {
            let me = std::thread::current().id();
            self.turn_waiters
                .lock()
                .expect("turn lock")
                .retain(|(_, t)| t.id() != me);
        }
        outcome
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
