//! Model test of the row scheduler's placement (issue 16): random
//! transactions over a small key space are placed on channels that commit
//! their input in order at random moments. Checked at every step:
//! - no two conflicting transactions are ever in flight (sent, not
//!   committed) on different channels at once;
//! - per key, transactions commit in seqno order.
//!
//! Conflicts are decided here by brute force over the keys, independently
//! of the scheduler's own bookkeeping.

use std::collections::VecDeque;

use proptest::prelude::*;
use shardrep::position::{ChannelId, Seqno};
use shardrep::scheduler::placement::Placer;
use shardrep::shard::writeset::Key;

/// Whether two keys conflict (the writeset's rule).
fn keys_conflict(a: &Key, b: &Key) -> bool {
    match (a, b) {
        (Key::Row(x), Key::Row(y)) => x == y,
        (
            Key::Table {
                id: x,
                exclusive: ex,
            },
            Key::Table {
                id: y,
                exclusive: ey,
            },
        )
        | (
            Key::Shard {
                id: x,
                exclusive: ex,
            },
            Key::Shard {
                id: y,
                exclusive: ey,
            },
        ) => x == y && (*ex || *ey),
        _ => false,
    }
}

fn conflict(a: &[Key], b: &[Key]) -> bool {
    a.iter().any(|x| b.iter().any(|y| keys_conflict(x, y)))
}

/// A random key: mostly rows of a small space, some table keys.
fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        8 => (0u64..12).prop_map(Key::Row),
        1 => (0u64..2, any::<bool>()).prop_map(|(id, exclusive)| Key::Table { id, exclusive }),
        1 => (0u64..2, prop::bool::weighted(0.2)).prop_map(|(id, exclusive)| Key::Shard { id, exclusive }),
    ]
}

/// A step of the model: place the next transaction (its keys, and its
/// shard's own channel, if any, modulo the channels), or let a channel
/// commit its oldest transaction.
#[derive(Clone, Debug)]
enum Step {
    Place(Vec<Key>, Option<u16>),
    Commit(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (prop::collection::vec(key(), 1..4), prop::option::of(0u16..4))
            .prop_map(|(keys, home)| Step::Place(keys, home)),
        1 => (0usize..4).prop_map(Step::Commit),
    ]
}

struct Model {
    channels: Vec<VecDeque<(Seqno, Vec<Key>)>>,
    committed: Vec<Option<Seqno>>,
    /// Every committed transaction, in commit order.
    log: Vec<(Seqno, Vec<Key>)>,
}

impl Model {
    fn commit(&mut self, c: usize) {
        if let Some((s, keys)) = self.channels[c].pop_front() {
            self.committed[c] = Some(s);
            self.log.push((s, keys));
        }
    }

    fn committed_fn(&self) -> impl Fn(ChannelId) -> Option<Seqno> + '_ {
        |c: ChannelId| self.committed[c.index()]
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn conflicting_transactions_never_overlap_and_commit_in_seqno_order(
        channels in 1usize..5,
        fill in 0usize..4,
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let mut placer = Placer::filling(channels, fill);
        let mut model = Model {
            channels: vec![VecDeque::new(); channels],
            committed: vec![None; channels],
            log: Vec::new(),
        };
        let mut next = 0u64;
        let mut waits = 0;
        for step in steps {
            match step {
                Step::Commit(c) => model.commit(c % channels),
                Step::Place(keys, home) => {
                    let home = home.map(|h| ChannelId::recorded(h % channels as u16));
                    let seqno = Seqno(next);
                    next += 1;
                    // Wait as the scheduler does: commits happen until a
                    // channel is allowed (the oldest in-flight work first,
                    // round the channels).
                    let mut turn = 0;
                    let channel = loop {
                        let placed = placer.place(&keys, home, &model.committed_fn());
                        if let Some(c) = placed {
                            break c;
                        }
                        waits += 1;
                        model.commit(turn % channels);
                        turn += 1;
                        prop_assert!(turn < 10_000, "placement never became possible");
                    };
                    // No conflicting live work on another channel.
                    for (c, queue) in model.channels.iter().enumerate() {
                        if c == channel.index() {
                            continue;
                        }
                        for (s, other) in queue {
                            prop_assert!(
                                !conflict(&keys, other),
                                "seqno {} placed on channel {} while conflicting seqno {} is in \
                                 flight on channel {}", seqno, channel, s, c
                            );
                        }
                    }
                    placer.sent(&keys, seqno, channel, &model.committed_fn());
                    model.channels[channel.index()].push_back((seqno, keys));
                }
            }
        }
        for c in 0..channels {
            while !model.channels[c].is_empty() {
                model.commit(c);
            }
        }
        // Per key, commit order is seqno order.
        for (i, (a, ka)) in model.log.iter().enumerate() {
            for (b, kb) in &model.log[i + 1..] {
                if conflict(ka, kb) {
                    prop_assert!(a < b, "seqno {} committed before conflicting seqno {}", a, b);
                }
            }
        }
        let _ = waits;
    }
}
