//! Where a transaction goes under `[apply] parallelism = "row"`: the
//! channel its row dependencies allow ([`super::dependencies`]), else the
//! least loaded one.
//!
//! [`Placer::place`] answers for one transaction: `Some(channel)` when at
//! most one channel holds live work it conflicts with (that channel; none:
//! see below), `None` when two or more do (the scheduler waits for
//! commits, then asks again).
//!
//! Independent work stays on its shard's own channel (its *home*, the
//! channel `parallelism = "shard"` would use) while that channel holds
//! fewer than `fill` transactions more in flight than the least loaded
//! one: equal shards keep to their channels as under shard parallelism
//! (no two channels writing one schema's pages, measured slower), and a
//! hot shard's surplus spills to the other channels. Without a home, or
//! when the home is that far ahead, independent work fills one channel at
//! a time: the most loaded channel with fewer than `fill` transactions in
//! flight takes it (so blocks are full: one commit, one restart-row update
//! and one round of merged statements for up to `block_commit_txns`
//! transactions), and only when every channel has `fill` or more does the
//! least loaded one take it. With `fill` 0 or 1, the least loaded channel
//! always takes it. Ties are taken in turn so that the channels share the
//! work. [`Placer::sent`] records the transaction once sent.

use std::collections::VecDeque;

use super::dependencies::{Conflicts, Dependencies};
use crate::position::{ChannelId, Seqno};
use crate::shard::writeset::Key;

/// The row scheduler's state: the in-flight keys and, per channel, the
/// seqnos sent to it and not yet known committed.
pub struct Placer {
    deps: Dependencies,
    in_flight: Vec<VecDeque<Seqno>>,
    conflicts: Conflicts,
    next_turn: usize,
    fill: usize,
}

impl Placer {
    /// A placer for `channels` channels (at least 1) that spreads
    /// independent work to the least loaded channel.
    pub fn new(channels: usize) -> Placer {
        Placer::filling(channels, 0)
    }

    /// A placer that fills one channel with up to `fill` in-flight
    /// transactions before it takes the next (module doc).
    pub fn filling(channels: usize, fill: usize) -> Placer {
        let channels = channels.max(1);
        Placer {
            deps: Dependencies::new(),
            in_flight: vec![VecDeque::new(); channels],
            conflicts: Conflicts::new(channels),
            next_turn: 0,
            fill,
        }
    }

    /// The channel for a transaction holding `keys` whose shard's own
    /// channel is `home` (module doc), or `None` while its conflicting
    /// work is live on two or more channels; `committed(c)` is channel
    /// `c`'s committed seqno now.
    pub fn place(
        &mut self,
        keys: &[Key],
        home: Option<ChannelId>,
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
    ) -> Option<ChannelId> {
        let channels = self.in_flight.len();
        self.deps
            .conflicts(keys, channels, committed, &mut self.conflicts);
        match self.conflicts.count() {
            0 => Some(self.independent(home, committed)),
            1 => self.conflicts.single(),
            _ => None,
        }
    }

    /// The conflicts found by the last [`Placer::place`] (for the wait).
    pub fn conflicts(&self) -> &Conflicts {
        &self.conflicts
    }

    /// Records transaction `seqno` holding `keys` as sent to `channel`.
    pub fn sent(
        &mut self,
        keys: &[Key],
        seqno: Seqno,
        channel: ChannelId,
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
    ) {
        self.deps.record(keys, seqno, channel, committed);
        self.in_flight[channel.index()].push_back(seqno);
    }

    /// Records a transaction sent to `channel` outside row placement
    /// (critical, temporary tables): it counts in the channel's load.
    pub fn sent_elsewhere(&mut self, seqno: Seqno, channel: ChannelId) {
        self.in_flight[channel.index()].push_back(seqno);
    }

    /// Forgets every key (after a barrier, nothing is in flight).
    pub fn clear_keys(&mut self) {
        self.deps.clear();
    }

    /// Transactions sent to `channel` and not yet known committed.
    pub fn load(&mut self, channel: ChannelId, committed: Option<Seqno>) -> usize {
        let queue = &mut self.in_flight[channel.index()];
        while queue
            .front()
            .is_some_and(|s| committed.is_some_and(|c| c >= *s))
        {
            queue.pop_front();
        }
        queue.len()
    }

    /// Keys held for in-flight transactions.
    pub fn keys_held(&self) -> usize {
        self.deps.len()
    }

    /// The channel for a transaction that conflicts with nothing in
    /// flight (module doc).
    fn independent(
        &mut self,
        home: Option<ChannelId>,
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
    ) -> ChannelId {
        let channels = self.in_flight.len();
        // The least loaded channel, and the most loaded one below `fill`.
        let mut least = (usize::MAX, ChannelId::FIRST);
        let mut filling: Option<(usize, ChannelId)> = None;
        for i in 0..channels {
            let c = ChannelId::recorded(((self.next_turn + i) % channels) as u16);
            let load = self.load(c, committed(c));
            if load < least.0 {
                least = (load, c);
            }
            if load < self.fill && filling.is_none_or(|(l, _)| load > l) {
                filling = Some((load, c));
            }
        }
        if let Some(home) = home.filter(|h| h.index() < channels) {
            let load = self.load(home, committed(home));
            if load < least.0 + self.fill.max(1) {
                return home;
            }
        }
        match filling {
            // Keep filling it: the turn stays.
            Some((load, c)) if load > 0 => c,
            _ => {
                self.next_turn = (least.1.index() + 1) % channels;
                least.1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_work_spreads_dependent_work_follows() {
        let mut placer = Placer::new(3);
        let none = |_: ChannelId| None;
        let a = placer.place(&[Key::Row(1)], None, &none).unwrap();
        placer.sent(&[Key::Row(1)], Seqno(0), a, &none);
        let b = placer.place(&[Key::Row(2)], None, &none).unwrap();
        placer.sent(&[Key::Row(2)], Seqno(1), b, &none);
        assert_ne!(a, b, "an idle channel is taken first");
        // Row 1 again: after seqno 0, on its channel.
        assert_eq!(placer.place(&[Key::Row(1)], None, &none), Some(a));
        // Rows 1 and 2: live on two channels, so it waits.
        assert_eq!(placer.place(&[Key::Row(1), Key::Row(2)], None, &none), None);
        // Once seqno 1 committed, it follows seqno 0.
        let done = |c: ChannelId| (c == b).then_some(Seqno(1));
        assert_eq!(
            placer.place(&[Key::Row(1), Key::Row(2)], None, &done),
            Some(a)
        );
    }

    #[test]
    fn independent_work_fills_one_channel_before_the_next() {
        let mut placer = Placer::filling(3, 2);
        let none = |_: ChannelId| None;
        let mut placed = Vec::new();
        for s in 0..7u64 {
            let c = placer.place(&[Key::Row(s)], None, &none).unwrap();
            placer.sent(&[Key::Row(s)], Seqno(s), c, &none);
            placed.push(c.get());
        }
        // Two each, then the least loaded (all at 2): in turn.
        assert_eq!(placed, [0, 0, 1, 1, 2, 2, 0]);
        // Channel 1 committed its two: it is empty, channel 0 holds three,
        // channel 2 two: the next fills channel 1 again.
        let done = |c: ChannelId| (c.get() == 1).then_some(Seqno(3));
        assert_eq!(
            placer.place(&[Key::Row(99)], None, &done),
            Some(ChannelId::recorded(1))
        );
    }

    #[test]
    fn independent_work_keeps_to_its_home_until_a_block_ahead() {
        let mut placer = Placer::filling(3, 2);
        let none = |_: ChannelId| None;
        let home = Some(ChannelId::recorded(2));
        let mut placed = Vec::new();
        for s in 0..6u64 {
            let c = placer.place(&[Key::Row(s)], home, &none).unwrap();
            placer.sent(&[Key::Row(s)], Seqno(s), c, &none);
            placed.push(c.get());
        }
        // Home until it holds 2 (the fill) more than the least loaded;
        // then channel 0 is filled, channel 1 takes one, and home is back
        // within 2 of the least loaded.
        assert_eq!(placed, [2, 2, 0, 0, 1, 2]);
        // A dependency wins over the home: row 2 follows seqno 2.
        assert_eq!(
            placer.place(&[Key::Row(2)], home, &none),
            Some(ChannelId::recorded(0))
        );
    }
}
