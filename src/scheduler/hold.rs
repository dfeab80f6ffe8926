//! Holding the scheduler at a binlog position of the source, for the
//! consistency check (issue 18): the check takes the master's read view at
//! a position `P`, and the replica's while every transaction up to `P` is
//! committed there and none after it has been sent. Then both views show
//! the same state of every table, whatever load runs on the master.
//!
//! The master's position can only be read after its snapshot is taken,
//! and by then a caught-up service may already have applied past it. So a
//! check first **pauses** the scheduler ([`Hold::pause`]: no transaction
//! is sent after the one in hand; the answer is the position after the
//! last one handled, which the master's snapshot cannot be before), takes
//! the master's snapshot at `P`, then lets the scheduler run **up to** `P`
//! ([`Hold::hold_at`]: every transaction ending at or before `P` is sent
//! and committed), takes the replica's snapshot, and **releases** it
//! ([`Hold::release`]).
//!
//! A pause or a hold that its check does not release within
//! [`HOLD_MAX`] (a check killed between two steps) is released by the
//! scheduler itself, with a warning: a check never leaves the service
//! stopped. A hold at `P` that the scheduler has not reached yet does not
//! stop anything (the service applies towards `P` as usual).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::extractor::IdleMark;
use crate::position::{BinlogPosition, Seqno};

/// Longest a pause or a reached hold lasts without a release: then the
/// scheduler goes on by itself.
pub const HOLD_MAX: Duration = Duration::from_secs(30);

/// How often a paused or holding scheduler looks at its stop flag and
/// the channels' errors.
const HOLD_POLL: Duration = Duration::from_millis(20);

/// What the check asked for, and how far the scheduler got.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Nothing asked.
    Free,
    /// Stop sending transactions (requested at `since`); `reached`: the
    /// scheduler has stopped.
    Pause { since: Instant, reached: bool },
    /// Send every transaction ending at or before `at`, then stop with
    /// all of them committed; `reached` since when it has.
    Until {
        at: BinlogPosition,
        reached: Option<Instant>,
    },
    /// The scheduler released a pause or hold left too long (the check's
    /// next step fails).
    Expired,
    /// The run ended ([`Hold::close`]): every step fails at once.
    Closed,
}

/// A hold on one run's scheduler, shared between it and a check.
#[derive(Debug)]
pub struct Hold {
    /// Whether a check asked for anything: the scheduler's per-transaction
    /// test is this one load while no check runs.
    asked: AtomicBool,
    state: Mutex<(State, Handled)>,
    changed: Condvar,
    /// Where the source last stood idle ([`IdleMark`], set by the run's
    /// extractor): a quiet service whose source sent everything up to the
    /// held position, and that handled every transaction numbered before
    /// the mark, has reached the hold even when its last transaction ends
    /// before it (a binlog rotation, a run that handled nothing yet).
    idle_mark: Arc<IdleMark>,
}

/// The last transaction the scheduler handled (sent or dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Handled {
    /// Its seqno (`None`: none in this run).
    seqno: Option<Seqno>,
    /// The binlog position after it, or where the run resumed.
    position: Option<BinlogPosition>,
    /// The first seqno the run reads (every one below it was handled
    /// before the run).
    resume_seqno: Seqno,
}

/// Why a step of a hold failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldError {
    /// The scheduler did not get there in time.
    #[error("the scheduler did not {what} within {} ms", timeout.as_millis())]
    Timeout {
        /// The step: "pause" or "reach the binlog position FILE:POS".
        what: String,
        /// How long the check waited.
        timeout: Duration,
    },
    /// The scheduler released the hold itself (see [`HOLD_MAX`]).
    #[error("the hold was released by the scheduler after {} s", HOLD_MAX.as_secs())]
    Expired,
    /// A step out of order (e.g. `hold_at` without a pause).
    #[error("no pause to hold from")]
    NotPaused,
    /// The run the hold belongs to ended (the service went OFFLINE or
    /// failed).
    #[error("the service stopped applying (it went OFFLINE or failed)")]
    Closed,
}

impl Hold {
    /// A hold for a run that resumes after `position` (the restart
    /// position: where the scheduler stands before it handles anything).
    pub fn new(position: Option<BinlogPosition>) -> Hold {
        Hold {
            asked: AtomicBool::new(false),
            state: Mutex::new((
                State::Free,
                Handled {
                    seqno: None,
                    position,
                    resume_seqno: Seqno(0),
                },
            )),
            changed: Condvar::new(),
            idle_mark: Arc::new(IdleMark::default()),
        }
    }

    /// The mark the run's extractor keeps current ([`IdleMark`]).
    pub fn idle_mark(&self) -> Arc<IdleMark> {
        self.idle_mark.clone()
    }

    /// Sets the position the run resumes after (when nothing is handled
    /// yet: every channel's restart row at one position) and the first
    /// seqno it reads, before the scheduler starts.
    pub fn resume_after(&self, position: Option<BinlogPosition>, resume_seqno: Seqno) {
        let mut guard = self.state.lock().expect("hold");
        guard.1 = Handled {
            seqno: None,
            position,
            resume_seqno,
        };
    }

    /// Asks the scheduler to stop sending transactions, and waits until it
    /// has (it finishes the one in hand first). Returns the position after
    /// the last transaction handled, and its seqno.
    ///
    /// # Errors
    /// [`HoldError::Timeout`] after `timeout` (the pause is withdrawn);
    /// [`HoldError::Closed`] at once when the run has ended.
    pub fn pause(
        &self,
        timeout: Duration,
    ) -> Result<(Option<BinlogPosition>, Option<Seqno>), HoldError> {
        let mut guard = self.state.lock().expect("hold");
        if guard.0 == State::Closed {
            return Err(HoldError::Closed);
        }
        guard.0 = State::Pause {
            since: Instant::now(),
            reached: false,
        };
        self.asked.store(true, Ordering::Release);
        self.changed.notify_all();
        self.wait_for(
            guard,
            timeout,
            "pause".into(),
            |s| matches!(s, State::Pause { reached: false, .. }),
            |s, handled| {
                matches!(s, State::Pause { reached: true, .. })
                    .then(|| (handled.position.clone(), handled.seqno))
            },
        )
    }

    /// After [`Hold::pause`]: lets the scheduler send every transaction
    /// ending at or before `at`, and waits until they are all committed
    /// and the scheduler holds there. Returns the seqno of the last
    /// transaction handled.
    ///
    /// # Errors
    /// [`HoldError::NotPaused`] without a pause; [`HoldError::Expired`]
    /// when the pause was released meanwhile; [`HoldError::Closed`] when
    /// the run ended; [`HoldError::Timeout`] after `timeout` (the hold is
    /// withdrawn: the scheduler goes on).
    pub fn hold_at(
        &self,
        at: BinlogPosition,
        timeout: Duration,
    ) -> Result<Option<Seqno>, HoldError> {
        let mut guard = self.state.lock().expect("hold");
        match guard.0 {
            State::Pause { reached: true, .. } => {}
            State::Expired => return Err(HoldError::Expired),
            State::Closed => return Err(HoldError::Closed),
            _ => return Err(HoldError::NotPaused),
        }
        guard.0 = State::Until {
            at: at.clone(),
            reached: None,
        };
        self.changed.notify_all();
        self.wait_for(
            guard,
            timeout,
            format!("reach the binlog position {at}"),
            |s| matches!(s, State::Until { reached: None, .. }),
            |s, handled| {
                matches!(
                    s,
                    State::Until {
                        reached: Some(_),
                        ..
                    }
                )
                .then_some(handled.seqno)
            },
        )
    }

    /// The wait of a step: while `pending`, up to `timeout`; then `done`'s
    /// answer, or why not (a step left pending is withdrawn).
    fn wait_for<T>(
        &self,
        guard: std::sync::MutexGuard<'_, (State, Handled)>,
        timeout: Duration,
        what: String,
        pending: impl Fn(&State) -> bool,
        done: impl Fn(&State, &Handled) -> Option<T>,
    ) -> Result<T, HoldError> {
        let (mut guard, result) = self
            .changed
            .wait_timeout_while(guard, timeout, |(s, _)| pending(s))
            .expect("hold");
        if let Some(answer) = done(&guard.0, &guard.1) {
            return Ok(answer);
        }
        match &guard.0 {
            State::Expired => Err(HoldError::Expired),
            State::Closed => Err(HoldError::Closed),
            _ if result.timed_out() => {
                guard.0 = State::Free;
                self.asked.store(false, Ordering::Release);
                self.changed.notify_all();
                Err(HoldError::Timeout { what, timeout })
            }
            _ => Err(HoldError::NotPaused),
        }
    }

    /// After [`Hold::hold_at`] and the replica's snapshot: whether the
    /// scheduler still holds (it did throughout, so the snapshot shows
    /// exactly the transactions up to the position).
    ///
    /// # Errors
    /// [`HoldError::Expired`] when it went on meanwhile (released by
    /// itself or by the caller): the snapshot must be taken again;
    /// [`HoldError::Closed`] when the run ended (a stop, an error).
    pub fn confirm(&self) -> Result<(), HoldError> {
        match self.state.lock().expect("hold").0 {
            State::Until {
                reached: Some(_), ..
            } => Ok(()),
            State::Closed => Err(HoldError::Closed),
            _ => Err(HoldError::Expired),
        }
    }

    /// Lets the scheduler go on (whatever step the hold is at).
    pub fn release(&self) {
        let mut guard = self.state.lock().expect("hold");
        if guard.0 != State::Closed {
            guard.0 = State::Free;
        }
        self.asked.store(false, Ordering::Release);
        self.changed.notify_all();
    }

    /// Whether the run ended ([`Hold::close`]).
    pub fn is_closed(&self) -> bool {
        self.state.lock().expect("hold").0 == State::Closed
    }

    /// The run ended: a step waited on fails now, and every later one at
    /// once ([`HoldError::Closed`]).
    pub fn close(&self) {
        let mut guard = self.state.lock().expect("hold");
        guard.0 = State::Closed;
        self.asked.store(false, Ordering::Release);
        self.changed.notify_all();
    }

    /// Scheduler side, before sending the transaction in hand (ending at
    /// `next`; `None`: idle, nothing in hand), the last one handled
    /// (`last`: its seqno and end; `None`: none in this run): whether it
    /// must stop here. A hold at a position is reached when `next` ends
    /// after it or, when idle, the last transaction handled (or the run's
    /// resume position) ends at or after it, or the source stood idle at
    /// or after it with every transaction it had sent handled
    /// ([`Hold::idle_mark`]). One atomic load while no check asks.
    pub(crate) fn must_stop(
        &self,
        next: Option<&BinlogPosition>,
        last: Option<(Seqno, &BinlogPosition)>,
    ) -> bool {
        if !self.asked.load(Ordering::Acquire) {
            return false;
        }
        let guard = self.state.lock().expect("hold");
        match &guard.0 {
            State::Free | State::Expired | State::Closed => false,
            State::Pause { .. } => true,
            State::Until { at, .. } => match next {
                Some(end) => end > at,
                None => {
                    let handled_next = last.map_or(guard.1.resume_seqno, |(s, _)| s.next());
                    last.map(|(_, p)| p)
                        .or(guard.1.position.as_ref())
                        .is_some_and(|p| p >= at)
                        || self.idle_mark.get().is_some_and(|(sent, next_seqno)| {
                            &sent >= at && handled_next >= next_seqno
                        })
                }
            },
        }
    }

    /// Scheduler side, once [`Hold::must_stop`] said so and everything
    /// sent is committed: records the last transaction handled (`last`:
    /// its seqno and end position; `None` keeps the resume position), marks
    /// the step reached and waits, [`HOLD_POLL`] at a time, until the check
    /// moves it on. Returns early when `keep_waiting` says no (a stop
    /// request, an error: the hold ends). Releases a pause or a hold left
    /// longer than [`HOLD_MAX`] (logged).
    pub(crate) fn stop_here(
        &self,
        last: Option<(Seqno, &BinlogPosition)>,
        mut keep_waiting: impl FnMut() -> bool,
    ) {
        let mut guard = self.state.lock().expect("hold");
        if let Some((seqno, position)) = last {
            guard.1.seqno = Some(seqno);
            guard.1.position = Some(position.clone());
        }
        let now = Instant::now();
        match &mut guard.0 {
            State::Pause { reached, .. } => *reached = true,
            State::Until { reached, .. } if reached.is_none() => *reached = Some(now),
            _ => {}
        }
        self.changed.notify_all();
        loop {
            let since = match &guard.0 {
                State::Pause { since, .. } => *since,
                State::Until {
                    reached: Some(since),
                    ..
                } => *since,
                // Moved on: a pause became a hold not reached yet, or
                // released.
                _ => return,
            };
            if since.elapsed() >= HOLD_MAX {
                tracing::warn!(
                    held_ms = since.elapsed().as_millis() as u64,
                    "a consistency check paused the scheduler and did not release it: going on"
                );
                guard.0 = State::Expired;
                self.asked.store(false, Ordering::Release);
                self.changed.notify_all();
                return;
            }
            if !keep_waiting() {
                // A stop or an error: the run ends, and the hold with it
                // (the check's `confirm` and next steps fail).
                guard.0 = State::Closed;
                self.asked.store(false, Ordering::Release);
                self.changed.notify_all();
                return;
            }
            guard = self.changed.wait_timeout(guard, HOLD_POLL).expect("hold").0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(offset: u64) -> BinlogPosition {
        BinlogPosition::new("mariadb-bin.000001", offset).unwrap()
    }

    #[test]
    fn a_hold_stops_before_the_first_transaction_past_its_position() {
        let hold = Hold::new(Some(pos(4)));
        assert!(!hold.must_stop(Some(&pos(100)), None), "free");
        std::thread::scope(|s| {
            let checker = s.spawn(|| {
                let (at, seqno) = hold.pause(Duration::from_secs(5)).unwrap();
                assert_eq!((at, seqno), (Some(pos(4)), None));
                hold.hold_at(pos(300), Duration::from_secs(5)).unwrap()
            });
            // The scheduler, idle at the start: pauses.
            while !hold.must_stop(None, None) {
                std::thread::yield_now();
            }
            hold.stop_here(None, || true);
            // Held up to 300: transactions ending at 100, 200, 300 go.
            for end in [100, 200, 300] {
                assert!(!hold.must_stop(Some(&pos(end)), None), "{end}");
            }
            assert!(hold.must_stop(Some(&pos(400)), Some((Seqno(3), &pos(300)))));
            assert!(
                !hold.must_stop(None, Some((Seqno(2), &pos(200)))),
                "idle at 200"
            );
            assert!(
                hold.must_stop(None, Some((Seqno(3), &pos(300)))),
                "idle at 300"
            );
            let waiting = s.spawn(|| {
                let last = pos(300);
                hold.stop_here(Some((Seqno(3), &last)), || true)
            });
            assert_eq!(checker.join().unwrap(), Some(Seqno(3)));
            hold.confirm().unwrap();
            hold.release();
            assert_eq!(hold.confirm(), Err(HoldError::Expired));
            waiting.join().unwrap();
            assert!(!hold.must_stop(Some(&pos(400)), Some((Seqno(3), &pos(300)))));
        });
    }

    #[test]
    fn steps_out_of_order_or_too_slow_fail_and_withdraw() {
        let hold = Hold::new(None);
        assert_eq!(
            hold.hold_at(pos(10), Duration::from_millis(10)),
            Err(HoldError::NotPaused)
        );
        let timeout = hold.pause(Duration::from_millis(20)).unwrap_err();
        assert_eq!(
            timeout.to_string(),
            "the scheduler did not pause within 20 ms"
        );
        assert!(!hold.must_stop(None, None), "the pause was withdrawn");
    }

    #[test]
    fn an_idle_source_past_the_position_reaches_the_hold() {
        // The run handled nothing yet (just taken over), or its last
        // transaction ends before the master's snapshot (a rotation).
        let hold = Hold::new(None);
        hold.resume_after(None, Seqno(5));
        let until = |at: BinlogPosition| {
            let mut guard = hold.state.lock().unwrap();
            guard.0 = State::Until { at, reached: None };
            hold.asked.store(true, Ordering::Release);
        };
        let rotated = BinlogPosition::new("mariadb-bin.000002", 389).unwrap();
        until(rotated.clone());
        assert!(
            !hold.must_stop(None, None),
            "no mark: not known to be there"
        );
        // The source idle in the new file, every seqno below 5 numbered.
        hold.idle_mark().set(rotated.clone(), Seqno(5));
        assert!(hold.must_stop(None, None), "nothing handled, nothing sent");
        // The mark numbered seqnos 5 and 6: handled up to 4 is not enough.
        hold.idle_mark().set(rotated.clone(), Seqno(7));
        assert!(!hold.must_stop(None, Some((Seqno(4), &pos(100)))));
        assert!(hold.must_stop(None, Some((Seqno(6), &pos(300)))));
        // A mark before the position says nothing.
        hold.idle_mark().set(pos(300), Seqno(7));
        assert!(!hold.must_stop(None, Some((Seqno(6), &pos(300)))));
    }

    #[test]
    fn a_closed_hold_fails_its_waits_at_once() {
        let hold = Hold::new(None);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| hold.pause(Duration::from_secs(60)));
            while !hold.asked.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let started = Instant::now();
            hold.close();
            assert_eq!(waiting.join().unwrap(), Err(HoldError::Closed));
            assert!(started.elapsed() < Duration::from_secs(10));
        });
        assert_eq!(hold.pause(Duration::from_secs(60)), Err(HoldError::Closed));
        hold.release();
        assert_eq!(hold.pause(Duration::from_secs(60)), Err(HoldError::Closed));
        assert!(!hold.must_stop(None, None));
    }
}
