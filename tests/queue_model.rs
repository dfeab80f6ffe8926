//! Model test of the transaction queue: random sequences of appends,
//! reads from any seqno, long-lived readers, purges, flushes and reopens,
//! run against the queue and against an in-memory model (a vector of the
//! appended transactions and a purge floor); every observation must agree.
//!
//! Segments are tiny (8 KiB) so that rollover and segment deletion happen
//! often, and transaction sizes straddle the 6 KiB block and chunk bound.

mod queue_support;

use proptest::prelude::*;
use shardrep::event::Transaction;
use shardrep::position::Seqno;
use shardrep::queue::{QueueError, QueueOptions, QueueReader, TransactionQueue};

use queue_support::{progress, txn, TempDir};

#[derive(Clone, Debug)]
enum Op {
    /// Append `count` transactions of `size` payload bytes each.
    Append {
        count: u8,
        size: usize,
    },
    /// Read everything from a seqno chosen by `at` (0..=1 scaled over
    /// [floor - 2, next + 2]).
    ReadFrom {
        at: f64,
    },
    /// Open a long-lived reader.
    NewReader {
        at: f64,
    },
    /// Advance long-lived reader `which` by up to `steps`.
    Step {
        which: usize,
        steps: u8,
    },
    /// Purge below a seqno chosen by `at` over [0, next + 2].
    Purge {
        at: f64,
    },
    Flush,
    Reopen,
}

fn size_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..300,
        2 => 5_500usize..7_000,
        1 => 12_000usize..40_000,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..25, size_strategy()).prop_map(|(count, size)| Op::Append { count, size }),
        3 => (0.0f64..=1.0).prop_map(|at| Op::ReadFrom { at }),
        2 => (0.0f64..=1.0).prop_map(|at| Op::NewReader { at }),
        3 => (0usize..4, 1u8..40).prop_map(|(which, steps)| Op::Step { which, steps }),
        2 => (0.0f64..=1.0).prop_map(|at| Op::Purge { at }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// What the queue should hold.
struct Model {
    txns: Vec<Transaction>,
    floor: u64,
}

impl Model {
    fn next(&self) -> u64 {
        self.txns.len() as u64
    }

    fn pick(&self, at: f64, low: i64, high: i64) -> u64 {
        let v = low as f64 + at * (high - low) as f64;
        v.round().max(0.0) as u64
    }
}

fn options(dir: &TempDir) -> QueueOptions {
    let mut o = QueueOptions::new(dir.path());
    o.config.segment_size_bytes = 8 << 10;
    o.config.flush_bytes = 16 << 10;
    o.config.flush_interval_ms = 5;
    o
}

fn check_bounds(q: &TransactionQueue, m: &Model) -> Result<(), TestCaseError> {
    let next = m.next();
    prop_assert_eq!(q.next_seqno(), Seqno(next));
    let (min, max) = if m.floor < next {
        (Some(Seqno(m.floor)), Some(Seqno(next - 1)))
    } else {
        (None, None)
    };
    prop_assert_eq!(q.min_seqno(), min);
    prop_assert_eq!(q.max_seqno(), max);
    let last = m.txns.last().map(progress);
    prop_assert_eq!(q.last_progress(), last);
    Ok(())
}

/// Reads with `reader` until it returns nothing, checking each
/// transaction against the model.
fn drain(reader: &mut QueueReader, m: &Model, limit: usize) -> Result<u64, TestCaseError> {
    let mut n = 0u64;
    while (n as usize) < limit {
        let at = reader.next_seqno().0;
        match reader.try_next() {
            Ok(Some(t)) => {
                prop_assert!(at >= m.floor, "read purged seqno {}", at);
                prop_assert_eq!(&t, &m.txns[at as usize]);
                n += 1;
            }
            Ok(None) => {
                prop_assert!(at >= m.next(), "reader stopped early at {}", at);
                break;
            }
            Err(QueueError::Purged {
                seqno, first_kept, ..
            }) => {
                prop_assert!(at < m.floor, "seqno {} reported purged", at);
                prop_assert_eq!(seqno, Seqno(at));
                prop_assert_eq!(first_kept, Seqno(m.floor));
                return Ok(u64::MAX);
            }
            Err(e) => return Err(TestCaseError::fail(format!("read seqno {at}: {e}"))),
        }
    }
    Ok(n)
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = TempDir::new("model");
    let mut q = Some(TransactionQueue::open(options(&dir)).unwrap());
    let mut m = Model {
        txns: Vec::new(),
        floor: 0,
    };
    let mut readers: Vec<QueueReader> = Vec::new();
    for op in ops {
        let queue = q.as_ref().unwrap();
        match op {
            Op::Append { count, size } => {
                for _ in 0..count {
                    let t = txn(m.next(), size);
                    queue.append(&t, &progress(&t)).unwrap();
                    m.txns.push(t);
                }
            }
            Op::ReadFrom { at } => {
                let from = m.pick(at, m.floor as i64 - 2, m.next() as i64 + 2);
                match queue.reader_from(Seqno(from)) {
                    Ok(mut r) => {
                        prop_assert!(from >= m.floor);
                        let n = drain(&mut r, &m, usize::MAX)?;
                        prop_assert_eq!(n, m.next().saturating_sub(from));
                    }
                    Err(QueueError::Purged { .. }) => prop_assert!(from < m.floor),
                    Err(e) => return Err(TestCaseError::fail(e.to_string())),
                }
            }
            Op::NewReader { at } => {
                let from = m.pick(at, m.floor as i64, m.next() as i64 + 1);
                if readers.len() < 4 {
                    readers.push(queue.reader_from(Seqno(from)).unwrap());
                }
            }
            Op::Step { which, steps } => {
                if let Some(r) = readers.get_mut(which) {
                    if drain(r, &m, steps as usize)? == u64::MAX {
                        readers.remove(which);
                    }
                }
            }
            Op::Purge { at } => {
                let below = m.pick(at, 0, m.next() as i64 + 2);
                let kept = queue.purge_below(Seqno(below)).unwrap();
                m.floor = m.floor.max(below.min(m.next()));
                prop_assert_eq!(kept, Seqno(m.floor));
            }
            Op::Flush => {
                let durable = queue.flush().unwrap();
                prop_assert_eq!(durable, m.next().checked_sub(1).map(Seqno));
            }
            Op::Reopen => {
                // Readers hold the old queue's segments open.
                readers.clear();
                q.take().unwrap().close().unwrap();
                q = Some(TransactionQueue::open(options(&dir)).unwrap());
                let reopened = q.as_ref().unwrap();
                prop_assert_eq!(reopened.durable_seqno(), m.next().checked_sub(1).map(Seqno));
            }
        }
        check_bounds(q.as_ref().unwrap(), &m)?;
    }
    // Everything kept reads back once more after a final reopen.
    readers.clear();
    q.take().unwrap().close().unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    check_bounds(&q, &m)?;
    let mut r = q.reader_from(Seqno(m.floor)).unwrap();
    prop_assert_eq!(drain(&mut r, &m, usize::MAX)?, m.next() - m.floor);
    // Purged segments are deleted, except at most the one the floor is in
    // and the last.
    let segments = q.info().unwrap().segments;
    if segments.len() > 2 {
        prop_assert!(
            segments[1].start > Seqno(m.floor),
            "segment {:?} entirely below floor {} was kept",
            segments[0],
            m.floor
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn queue_matches_the_model(ops in prop::collection::vec(op_strategy(), 1..40)) {
        run(ops)?;
    }
}
