//! Row dependencies between in-flight transactions (`[apply] parallelism
//! = "row"`, issue 16): which channels hold work a transaction must follow.
//!
//! Each dispatched transaction records its writeset keys
//! ([`crate::shard::writeset::Key`]) with its seqno and channel. A later
//! transaction conflicts with a recorded one when their keys conflict:
//! equal `Row` keys; `Table`/`Shard` keys of one id where either is
//! exclusive. A recorded transaction stops mattering once its channel has
//! committed it (channels commit their input in order, so channel `c` has
//! committed seqno `s` when its committed seqno is at least `s`).
//!
//! The scheduler ([`super::run`]) then places the transaction:
//! - no live conflict: any channel (the least loaded);
//! - live conflicts on exactly one channel: that channel, after them (a
//!   channel applies its input in order, so per key the master's order
//!   holds);
//! - on two or more channels: it waits until at most one of them still
//!   holds conflicting work.
//!
//! So no two conflicting transactions are ever in flight on different
//! channels, and per key the commit order is the seqno order
//! (`tests/scheduler_model.rs` checks both on random workloads).
//!
//! `Global` keys are not tracked here: the scheduler runs such a
//! transaction alone behind a barrier, as a critical shard's.
//!
//! Memory: one entry per distinct key of the recent past; entries whose
//! transaction has committed are pruned every [`PRUNE_EVERY`] records, so
//! the map holds about the keys of the in-flight window.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::position::{ChannelId, Seqno};
use crate::shard::writeset::Key;

/// Records between two prunes of committed entries.
pub const PRUNE_EVERY: usize = 4096;

/// A transaction that holds a key: its seqno and channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Holder {
    seqno: Seqno,
    channel: ChannelId,
}

impl Holder {
    /// Whether its channel has not committed it yet.
    fn live(self, committed: &impl Fn(ChannelId) -> Option<Seqno>) -> bool {
        committed(self.channel).is_none_or(|c| c < self.seqno)
    }
}

/// The holders of a table or shard key: the last exclusive one, and the
/// latest shared one per channel since.
#[derive(Clone, Debug, Default)]
struct Lock {
    exclusive: Option<Holder>,
    shared: Vec<Holder>,
}

/// Keys are already 64-bit hashes: hash them no further.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<IdentityHasher>>;

/// What a transaction must follow: per channel, the highest seqno of live
/// conflicting work on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conflicts {
    need: Vec<Option<Seqno>>,
}

impl Conflicts {
    /// No conflicts, for `channels` channels.
    pub fn new(channels: usize) -> Conflicts {
        Conflicts {
            need: vec![None; channels],
        }
    }

    fn clear(&mut self, channels: usize) {
        self.need.clear();
        self.need.resize(channels, None);
    }

    fn add(&mut self, holder: Holder) {
        let slot = &mut self.need[holder.channel.index()];
        if slot.is_none_or(|s| s < holder.seqno) {
            *slot = Some(holder.seqno);
        }
    }

    /// The channels holding conflicting work, with the highest seqno of
    /// it on each.
    pub fn channels(&self) -> impl Iterator<Item = (ChannelId, Seqno)> + '_ {
        self.need
            .iter()
            .enumerate()
            .filter_map(|(c, s)| s.map(|s| (ChannelId::recorded(c as u16), s)))
    }

    /// How many channels hold conflicting work.
    pub fn count(&self) -> usize {
        self.need.iter().filter(|s| s.is_some()).count()
    }

    /// The one channel holding conflicting work, when exactly one does.
    pub fn single(&self) -> Option<ChannelId> {
        let mut it = self.channels();
        match (it.next(), it.next()) {
            (Some((c, _)), None) => Some(c),
            _ => None,
        }
    }

    /// The channels that still hold conflicting work, given what each has
    /// committed now.
    pub fn live_channels<'a>(
        &'a self,
        committed: &'a impl Fn(ChannelId) -> Option<Seqno>,
    ) -> impl Iterator<Item = ChannelId> + 'a {
        self.channels()
            .filter(move |(c, s)| {
                Holder {
                    seqno: *s,
                    channel: *c,
                }
                .live(committed)
            })
            .map(|(c, _)| c)
    }

    /// How many channels still hold conflicting work, given what each
    /// has committed now.
    pub fn still_live(&self, committed: &impl Fn(ChannelId) -> Option<Seqno>) -> usize {
        self.channels()
            .filter(|(c, s)| {
                Holder {
                    seqno: *s,
                    channel: *c,
                }
                .live(committed)
            })
            .count()
    }
}

/// The keys of the in-flight transactions (module doc).
#[derive(Default)]
pub struct Dependencies {
    rows: KeyMap<Holder>,
    tables: KeyMap<Lock>,
    shards: KeyMap<Lock>,
    since_prune: usize,
}

impl Dependencies {
    /// Nothing recorded.
    pub fn new() -> Dependencies {
        Dependencies::default()
    }

    /// Fills `out` with the live work `keys` conflict with, on `channels`
    /// channels; `committed(c)` is channel `c`'s committed seqno.
    pub fn conflicts(
        &self,
        keys: &[Key],
        channels: usize,
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
        out: &mut Conflicts,
    ) {
        out.clear(channels);
        let mut add = |h: Holder| {
            if h.live(committed) {
                out.add(h);
            }
        };
        for key in keys {
            match *key {
                Key::Row(h) => {
                    if let Some(holder) = self.rows.get(&h) {
                        add(*holder);
                    }
                }
                Key::Table { id, exclusive } => {
                    if let Some(lock) = self.tables.get(&id) {
                        lock_conflicts(lock, exclusive, &mut add);
                    }
                }
                Key::Shard { id, exclusive } => {
                    if let Some(lock) = self.shards.get(&id) {
                        lock_conflicts(lock, exclusive, &mut add);
                    }
                }
                Key::Global => {}
            }
        }
    }

    /// Records that transaction `seqno`, holding `keys`, was sent to
    /// `channel`; prunes committed entries every [`PRUNE_EVERY`] records.
    pub fn record(
        &mut self,
        keys: &[Key],
        seqno: Seqno,
        channel: ChannelId,
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
    ) {
        let holder = Holder { seqno, channel };
        for key in keys {
            match *key {
                Key::Row(h) => {
                    self.rows.insert(h, holder);
                }
                Key::Table { id, exclusive } => {
                    lock_record(self.tables.entry(id).or_default(), exclusive, holder);
                }
                Key::Shard { id, exclusive } => {
                    lock_record(self.shards.entry(id).or_default(), exclusive, holder);
                }
                Key::Global => {}
            }
        }
        self.since_prune += 1;
        if self.since_prune >= PRUNE_EVERY {
            self.prune(committed);
        }
    }

    /// Forgets every entry whose transaction has committed.
    pub fn prune(&mut self, committed: &impl Fn(ChannelId) -> Option<Seqno>) {
        self.since_prune = 0;
        self.rows.retain(|_, h| h.live(committed));
        let prune_lock = |lock: &mut Lock| {
            if lock.exclusive.is_some_and(|h| !h.live(committed)) {
                lock.exclusive = None;
            }
            lock.shared.retain(|h| h.live(committed));
            lock.exclusive.is_some() || !lock.shared.is_empty()
        };
        self.tables.retain(|_, l| prune_lock(l));
        self.shards.retain(|_, l| prune_lock(l));
    }

    /// Forgets everything (after a barrier: nothing is in flight).
    pub fn clear(&mut self) {
        self.rows.clear();
        self.tables.clear();
        self.shards.clear();
        self.since_prune = 0;
    }

    /// Entries held (rows, tables, shards), for tests and status.
    pub fn len(&self) -> usize {
        self.rows.len() + self.tables.len() + self.shards.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A shared key conflicts with the last exclusive holder; an exclusive
/// one with it and every shared holder since.
fn lock_conflicts(lock: &Lock, exclusive: bool, add: &mut impl FnMut(Holder)) {
    if let Some(h) = lock.exclusive {
        add(h);
    }
    if exclusive {
        for h in &lock.shared {
            add(*h);
        }
    }
}

/// Records a holder: an exclusive one replaces every holder (it was
/// placed after all of them); a shared one replaces its channel's earlier
/// shared holder (a channel commits in order).
fn lock_record(lock: &mut Lock, exclusive: bool, holder: Holder) {
    if exclusive {
        lock.exclusive = Some(holder);
        lock.shared.clear();
    } else if let Some(h) = lock.shared.iter_mut().find(|h| h.channel == holder.channel) {
        *h = holder;
    } else {
        lock.shared.push(holder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(n: u16) -> ChannelId {
        ChannelId::recorded(n)
    }

    #[test]
    fn a_row_key_conflicts_with_its_live_holder_only() {
        let mut deps = Dependencies::new();
        let none = |_: ChannelId| None;
        deps.record(&[Key::Row(7)], Seqno(1), ch(2), &none);
        let mut out = Conflicts::new(4);
        deps.conflicts(&[Key::Row(7), Key::Row(8)], 4, &none, &mut out);
        assert_eq!(out.single(), Some(ch(2)));
        assert_eq!(out.channels().collect::<Vec<_>>(), [(ch(2), Seqno(1))]);
        // Committed on channel 2: no conflict left.
        let done = |c: ChannelId| (c == ch(2)).then_some(Seqno(1));
        deps.conflicts(&[Key::Row(7)], 4, &done, &mut out);
        assert_eq!(out.count(), 0);
        deps.prune(&done);
        assert!(deps.is_empty());
    }

    #[test]
    fn shared_keys_do_not_conflict_an_exclusive_one_waits_for_all() {
        let mut deps = Dependencies::new();
        let none = |_: ChannelId| None;
        let shared = Key::Table {
            id: 1,
            exclusive: false,
        };
        let exclusive = Key::Table {
            id: 1,
            exclusive: true,
        };
        deps.record(&[shared], Seqno(1), ch(0), &none);
        deps.record(&[shared], Seqno(2), ch(1), &none);
        let mut out = Conflicts::new(3);
        deps.conflicts(&[shared], 3, &none, &mut out);
        assert_eq!(out.count(), 0);
        deps.conflicts(&[exclusive], 3, &none, &mut out);
        assert_eq!(
            out.channels().collect::<Vec<_>>(),
            [(ch(0), Seqno(1)), (ch(1), Seqno(2))]
        );
        // Placed after both (they committed on channel 0; channel 1 is
        // the one left): later shared keys follow the exclusive holder.
        deps.record(&[exclusive], Seqno(3), ch(1), &none);
        deps.conflicts(&[shared], 3, &none, &mut out);
        assert_eq!(out.channels().collect::<Vec<_>>(), [(ch(1), Seqno(3))]);
        assert_eq!(
            out.still_live(&|c: ChannelId| (c == ch(1)).then_some(Seqno(3))),
            0
        );
    }

    #[test]
    fn the_highest_conflicting_seqno_per_channel_is_kept() {
        let mut deps = Dependencies::new();
        let none = |_: ChannelId| None;
        deps.record(&[Key::Row(1)], Seqno(4), ch(1), &none);
        deps.record(&[Key::Row(2)], Seqno(9), ch(1), &none);
        deps.record(&[Key::Row(3)], Seqno(5), ch(0), &none);
        let mut out = Conflicts::new(2);
        deps.conflicts(&[Key::Row(1), Key::Row(2), Key::Row(3)], 2, &none, &mut out);
        assert_eq!(
            out.channels().collect::<Vec<_>>(),
            [(ch(0), Seqno(5)), (ch(1), Seqno(9))]
        );
        // Channel 1 committed up to 4 only: seqno 9 still holds it.
        let partly = |c: ChannelId| (c == ch(1)).then_some(Seqno(4));
        assert_eq!(out.still_live(&partly), 2);
    }
}
