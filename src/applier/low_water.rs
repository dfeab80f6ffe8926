//! [`LowWaterBooks`]: the running low-water mark, the highest seqno L such
//! that every seqno up to L is committed (by any channel) or needs no
//! apply (shared/research/writeset.md §5, "Choice 2", step 2: it advances
//! only on acknowledged commits). The scheduler reports each seqno it
//! handles in seqno order, dispatched to a channel or not; channels report
//! the seqnos they committed. The mark is (lowest dispatched seqno not yet
//! committed, else the next seqno to handle) − 1.
//!
//! The books are a ring of the dispatched seqnos not known committed yet,
//! in dispatch (= seqno) order: a dispatch pushes at the back, a commit
//! marks its entry (binary search) and pops the done entries at the front.
//! No allocation once the ring has grown to the in-flight window. Each
//! entry keeps the marker of the seqno handled just before it, so the
//! mark's binlog position is known without a lookup.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::applier::work::Marker;
use crate::position::Seqno;

/// One dispatched seqno.
#[derive(Debug)]
struct InFlight {
    seqno: Seqno,
    /// Committed (it stays until every entry before it is done).
    done: bool,
    /// The marker of the seqno handled just before it, if known.
    before: Option<Arc<Marker>>,
}

/// The low-water books of one run (module doc). Not synchronized: the
/// owner ([`crate::applier::progress::Progress`]) holds it in a mutex.
#[derive(Debug)]
pub struct LowWaterBooks {
    /// The next seqno the scheduler will handle: every seqno below it was
    /// handled or dispatched.
    next: Seqno,
    /// The marker of `next - 1`, when this run handled it.
    last: Option<Arc<Marker>>,
    /// Dispatched seqnos from the lowest not committed, ascending.
    in_flight: VecDeque<InFlight>,
}

impl LowWaterBooks {
    /// Books at `base`: every seqno up to it done (`None`: nothing yet).
    pub fn new(base: Option<Seqno>) -> LowWaterBooks {
        LowWaterBooks {
            next: base.map_or(Seqno::ZERO, Seqno::next),
            last: None,
            in_flight: VecDeque::new(),
        }
    }

    /// `marker`'s seqno is sent to a channel (to be committed).
    pub fn dispatched(&mut self, marker: &Arc<Marker>) {
        let before = self.last.replace(marker.clone());
        self.in_flight.push_back(InFlight {
            seqno: marker.seqno,
            done: false,
            before,
        });
        self.next = self.next.max(marker.seqno.next());
    }

    /// `marker`'s seqno needs no apply (dropped, skipped, or recorded
    /// committed by an earlier run).
    pub fn handled(&mut self, marker: &Arc<Marker>) {
        self.last = Some(marker.clone());
        self.next = self.next.max(marker.seqno.next());
    }

    /// `seqno` is committed (durably). A seqno not dispatched in this run
    /// is ignored.
    pub fn committed(&mut self, seqno: Seqno) {
        let i = self.in_flight.partition_point(|e| e.seqno < seqno);
        match self.in_flight.get_mut(i) {
            Some(e) if e.seqno == seqno => e.done = true,
            _ => return,
        }
        while self.in_flight.front().is_some_and(|e| e.done) {
            self.in_flight.pop_front();
        }
    }

    /// The low-water mark: every seqno up to it is done (`None`: none
    /// known).
    pub fn low_water(&self) -> Option<Seqno> {
        let above = self.in_flight.front().map_or(self.next, |e| e.seqno);
        above.get().checked_sub(1).map(Seqno)
    }

    /// The low-water mark's marker, when this run handled that seqno.
    pub fn low_water_marker(&self) -> Option<Arc<Marker>> {
        match self.in_flight.front() {
            Some(e) => e.before.clone(),
            None => self.last.clone(),
        }
    }

    /// Dispatched seqnos not committed yet (and done ones held behind
    /// them): the in-flight window.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::{BinlogPosition, Epoch, GtidPos};

    fn marker(seqno: u64) -> Arc<Marker> {
        Arc::new(Marker {
            seqno: Seqno(seqno),
            epoch: Epoch(0),
            event_id: BinlogPosition::new("b.000001", 100 + seqno).unwrap(),
            gtid: GtidPos::new(),
            shard_id: "a".into(),
            extract_time: 0,
        })
    }

    #[test]
    fn out_of_order_commits_raise_the_mark_only_over_a_prefix() {
        let mut books = LowWaterBooks::new(Some(Seqno(9)));
        assert_eq!(books.low_water(), Some(Seqno(9)));
        assert_eq!(books.low_water_marker(), None, "not handled in this run");
        for s in [10, 11] {
            books.dispatched(&marker(s));
        }
        books.handled(&marker(12)); // dropped
        for s in [13, 14] {
            books.dispatched(&marker(s));
        }
        assert_eq!(books.low_water(), Some(Seqno(9)));
        books.committed(Seqno(13));
        books.committed(Seqno(11));
        assert_eq!(books.low_water(), Some(Seqno(9)), "10 is in flight");
        books.committed(Seqno(10));
        assert_eq!(books.low_water(), Some(Seqno(13)), "12 needed nothing");
        assert_eq!(books.low_water_marker().unwrap().seqno, Seqno(13));
        assert_eq!(books.in_flight(), 1);
        books.committed(Seqno(99)); // never dispatched
        books.committed(Seqno(14));
        assert_eq!(books.low_water(), Some(Seqno(14)));
        books.handled(&marker(15));
        assert_eq!(books.low_water(), Some(Seqno(15)));
        assert_eq!(books.low_water_marker().unwrap().seqno, Seqno(15));
        assert_eq!(books.in_flight(), 0);
    }

    #[test]
    fn from_nothing() {
        let mut books = LowWaterBooks::new(None);
        assert_eq!(books.low_water(), None);
        books.dispatched(&marker(0));
        assert_eq!(books.low_water(), None);
        assert_eq!(books.low_water_marker(), None);
        books.committed(Seqno(0));
        assert_eq!(books.low_water(), Some(Seqno(0)));
    }
}
