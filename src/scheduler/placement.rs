//! Where a transaction goes under `[apply] parallelism = "row"`: the
//! channel its row dependencies allow ([`super::dependencies`]), else the
//! least loaded one.
//!
//! [`Placer::place`] answers for one transaction: `Some(channel)` when at
//! most one channel holds live work it conflicts with (that channel; none:
//! the channel with the fewest transactions in flight, ties taken in turn
//! so that idle channels share the work), `None` when two or more do (the
//! scheduler waits for commits, then asks again). [`Placer::sent`] records
//! the transaction once sent.

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
}

impl Placer {
    /// A placer for `channels` channels (at least 1).
    pub fn new(channels: usize) -> Placer {
        let channels = channels.max(1);
        Placer {
            deps: Dependencies::new(),
            in_flight: vec![VecDeque::new(); channels],
            conflicts: Conflicts::new(channels),
            next_turn: 0,
        }
    }

    /// The channel for a transaction holding `keys`, or `None` while its
    /// conflicting work is live on two or more channels; `committed(c)` is
    /// channel `c`'s committed seqno now.
    pub fn place(
        &mut self,
        keys: &[Key],
        committed: &impl Fn(ChannelId) -> Option<Seqno>,
    ) -> Option<ChannelId> {
        let channels = self.in_flight.len();
        self.deps
            .conflicts(keys, channels, committed, &mut self.conflicts);
        match self.conflicts.count() {
            0 => Some(self.least_loaded(committed)),
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

    fn least_loaded(&mut self, committed: &impl Fn(ChannelId) -> Option<Seqno>) -> ChannelId {
        let channels = self.in_flight.len();
        let mut best = (usize::MAX, ChannelId::FIRST);
        for i in 0..channels {
            let c = ChannelId::recorded(((self.next_turn + i) % channels) as u16);
            let load = self.load(c, committed(c));
            if load < best.0 {
                best = (load, c);
                if load == 0 {
                    break;
                }
            }
        }
        self.next_turn = (best.1.index() + 1) % channels;
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_work_spreads_dependent_work_follows() {
        let mut placer = Placer::new(3);
        let none = |_: ChannelId| None;
        let a = placer.place(&[Key::Row(1)], &none).unwrap();
        placer.sent(&[Key::Row(1)], Seqno(0), a, &none);
        let b = placer.place(&[Key::Row(2)], &none).unwrap();
        placer.sent(&[Key::Row(2)], Seqno(1), b, &none);
        assert_ne!(a, b, "an idle channel is taken first");
        // Row 1 again: after seqno 0, on its channel.
        assert_eq!(placer.place(&[Key::Row(1)], &none), Some(a));
        // Rows 1 and 2: live on two channels, so it waits.
        assert_eq!(placer.place(&[Key::Row(1), Key::Row(2)], &none), None);
        // Once seqno 1 committed, it follows seqno 0.
        let done = |c: ChannelId| (c == b).then_some(Seqno(1));
        assert_eq!(placer.place(&[Key::Row(1), Key::Row(2)], &done), Some(a));
    }
}
