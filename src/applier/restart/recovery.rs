//! What a restart applies, from the restart rows alone ([`recover`]): the
//! record of exactly which seqnos are committed, whatever channel committed
//! them (shared/research/writeset.md §5, "Choice 2", step 4; after MySQL's
//! `slave_worker_info` checkpoint plus group bitmap).
//!
//! Each row holds a low-water mark (every seqno up to it was done when the
//! row was written) and the seqnos its channel committed above that mark.
//! Every mark was true when written, so the highest one is the tightest;
//! a seqno above it was committed exactly when some channel's row lists
//! it, since a channel lists every seqno it committed above its own row's
//! mark, which is at or below the highest.

use super::{RestartError, RestartRow};
use crate::position::{ChannelId, Seqno, SeqnoRanges};

/// The empty set, for [`Recovery::committed`] of legacy rows.
static NOTHING: SeqnoRanges = SeqnoRanges::new();

/// What a restart does, from the rows ([`recover`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// The rows record exactly which seqnos are committed: read the queue
    /// from `base + 1`, apply every seqno not in `committed`, skip every
    /// one in it. Valid with any channel assignment.
    Exact {
        /// Every seqno up to this one is done (`None`: none known).
        base: Option<Seqno>,
        /// The committed seqnos above `base`.
        committed: SeqnoRanges,
    },
    /// Rows of an older shardrep (no low-water mark) at different seqnos:
    /// they record only each channel's last seqno. Read the queue from
    /// `base + 1`; each channel skips the seqnos it is sent at or below its
    /// own row's seqno (`skip_through`, by channel). Valid only when each
    /// shard runs on the channel it ran on before (shard parallelism).
    Legacy {
        /// The lowest row's seqno (`None` when a row has none).
        base: Option<Seqno>,
        /// Each channel's row seqno, by channel.
        skip_through: Vec<Option<Seqno>>,
    },
}

impl Recovery {
    /// Every seqno up to this one is done.
    pub fn base(&self) -> Option<Seqno> {
        match self {
            Recovery::Exact { base, .. } | Recovery::Legacy { base, .. } => *base,
        }
    }

    /// The same recovery with `more` seqnos known committed (found in the
    /// replica's binlog under `binlog_gtids = "master"`); legacy rows are
    /// left as they are.
    pub fn with_committed(mut self, more: &SeqnoRanges) -> Recovery {
        if let Recovery::Exact { base, committed } = &mut self {
            for s in more.iter() {
                if base.is_none_or(|b| s > b) {
                    committed.insert(s);
                }
            }
        }
        self
    }

    /// The first seqno to read from the queue: `base + 1` (0 for none).
    pub fn start_seqno(&self) -> Seqno {
        self.base().map_or(Seqno::ZERO, Seqno::next)
    }

    /// The seqnos above [`Recovery::base`] recorded committed: never
    /// dispatched again (empty for [`Recovery::Legacy`]: there the
    /// channels skip).
    pub fn committed(&self) -> &SeqnoRanges {
        match self {
            Recovery::Exact { committed, .. } => committed,
            Recovery::Legacy { .. } => &NOTHING,
        }
    }

    /// For [`Recovery::Legacy`], the seqno channel `channel` skips through
    /// (what it is sent at or below it, it committed before); `None`
    /// otherwise.
    pub fn legacy_skip_through(&self, channel: ChannelId) -> Option<Seqno> {
        match self {
            Recovery::Legacy { skip_through, .. } => {
                skip_through.get(channel.index()).copied().flatten()
            }
            Recovery::Exact { .. } => None,
        }
    }

    /// The recovery when it is exact, for schedulers that may send a
    /// seqno to another channel than the one that ran it before (row
    /// parallelism).
    ///
    /// # Errors
    /// [`RestartError::LegacyRows`] for [`Recovery::Legacy`], naming the
    /// rows' seqnos and the way out.
    pub fn require_exact(&self) -> Result<(Option<Seqno>, &SeqnoRanges), RestartError> {
        match self {
            Recovery::Exact { base, committed } => Ok((*base, committed)),
            Recovery::Legacy { skip_through, .. } => Err(RestartError::LegacyRows {
                seqnos: skip_through
                    .iter()
                    .map(|s| s.map_or("-1".to_string(), |s| s.to_string()))
                    .collect::<Vec<_>>()
                    .join(","),
            }),
        }
    }
}

/// What a restart applies, from every channel's row (pure):
/// - rows that all record a low-water mark: [`Recovery::Exact`] with the
///   highest mark as `base` and the union of their `committed_above` above
///   it;
/// - otherwise (a row of an older shardrep), rows all at one seqno S:
///   [`Recovery::Exact`] at S with nothing above (every channel handled
///   everything up to S: a clean stop); rows at different seqnos:
///   [`Recovery::Legacy`].
///
/// # Errors
/// [`RestartError::CommittedAboveSeqno`] when a row lists a committed
/// seqno above its own seqno (edited: trusted, the seqno would never be
/// applied).
pub fn recover(rows: &[RestartRow]) -> Result<Recovery, RestartError> {
    for row in rows {
        if let Some(named) = row.committed_above.last() {
            if row.seqno.is_none_or(|s| named > s) {
                return Err(RestartError::CommittedAboveSeqno {
                    channel: row.channel.get(),
                    text: crate::applier::error::elide(&row.committed_above.to_string()),
                    named: named.get(),
                    seqno: row.seqno.map_or(-1, |s| s.get() as i64),
                });
            }
        }
    }
    if rows.iter().any(|r| r.low_water.is_unrecorded()) {
        let first = rows.first().and_then(|r| r.seqno);
        if rows.iter().all(|r| r.seqno == first) {
            return Ok(Recovery::Exact {
                base: first,
                committed: SeqnoRanges::new(),
            });
        }
        let base = if rows.iter().any(|r| r.seqno.is_none()) {
            None
        } else {
            rows.iter().filter_map(|r| r.seqno).min()
        };
        return Ok(Recovery::Legacy {
            base,
            skip_through: rows.iter().map(|r| r.seqno).collect(),
        });
    }
    let base = rows.iter().filter_map(|r| r.low_water.seqno()).max();
    let mut committed = SeqnoRanges::new();
    for row in rows {
        committed.extend(&row.committed_above);
    }
    if let Some(b) = base {
        committed.prune_below(b.next());
    }
    Ok(Recovery::Exact { base, committed })
}

/// The seqno every row is at when the rows say every seqno up to it is
/// done (`Some(None)`: every row at -1, or no row): all rows at one seqno
/// S and either the highest low-water mark at S or above, or a row of an
/// older shardrep among them (whose rows at one seqno were written by a
/// clean stop). `None` otherwise: rows at different seqnos, or at one
/// seqno that a marker brought some channels to while a seqno below it
/// was still in flight on another (row parallelism after a restart).
/// Handback and a change of the channel count need it.
pub fn all_done_at(rows: &[RestartRow]) -> Option<Option<Seqno>> {
    let first = rows.first().and_then(|r| r.seqno);
    if !rows.iter().all(|r| r.seqno == first) {
        return None;
    }
    let Some(s) = first else {
        return Some(None);
    };
    let legacy = rows.iter().any(|r| r.low_water.is_unrecorded());
    let low_water = rows.iter().filter_map(|r| r.low_water.seqno()).max();
    (legacy || low_water.is_some_and(|l| l >= s)).then_some(Some(s))
}

#[cfg(test)]
mod tests {
    use super::super::LowWater;
    use super::*;

    fn row(channel: u16, seqno: i64, low_water: Option<i64>, above: &str) -> RestartRow {
        RestartRow {
            seqno: u64::try_from(seqno).ok().map(Seqno),
            low_water: match low_water {
                None => LowWater::Unrecorded,
                Some(-1) => LowWater::BeforeFirst,
                Some(n) => LowWater::At(Seqno(n as u64)),
            },
            committed_above: above.parse().unwrap(),
            ..RestartRow::empty(ChannelId::recorded(channel))
        }
    }

    fn exact(base: Option<u64>, committed: &str) -> Recovery {
        Recovery::Exact {
            base: base.map(Seqno),
            committed: committed.parse().unwrap(),
        }
    }

    #[test]
    fn the_highest_low_water_and_the_union_above_it() {
        let rows = [
            row(0, 16, Some(10), "13,15-16"),
            row(1, 14, Some(8), "9,12,14"),
            row(2, 7, Some(7), ""),
        ];
        let r = recover(&rows).unwrap();
        assert_eq!(r, exact(Some(10), "12-16"));
        assert_eq!(r.start_seqno(), Seqno(11));
        assert!(r.committed().contains(Seqno(14)));
        assert!(!r.committed().contains(Seqno(11)));
        assert_eq!(r.legacy_skip_through(ChannelId::recorded(0)), None);
        assert!(r.require_exact().is_ok());
        // Nothing yet anywhere.
        let r = recover(&[row(0, -1, Some(-1), ""), row(1, 3, Some(-1), "0,3")]).unwrap();
        assert_eq!(r, exact(None, "0,3"));
        assert_eq!(r.start_seqno(), Seqno(0));
        assert_eq!(recover(&[]).unwrap(), exact(None, ""));
    }

    #[test]
    fn legacy_rows_at_one_seqno_are_exact_there() {
        let rows = [row(0, 20, None, ""), row(1, 20, None, "")];
        assert_eq!(recover(&rows).unwrap(), exact(Some(20), ""));
        // Mixed (a channel upgraded its row since), still at one seqno.
        let rows = [row(0, 20, None, ""), row(1, 20, Some(18), "20")];
        assert_eq!(recover(&rows).unwrap(), exact(Some(20), ""));
        let rows = [row(0, -1, None, ""), row(1, -1, None, "")];
        assert_eq!(recover(&rows).unwrap(), exact(None, ""));
    }

    #[test]
    fn legacy_rows_at_different_seqnos_skip_per_channel() {
        let rows = [row(0, 20, None, ""), row(1, 25, Some(19), "21,25")];
        let r = recover(&rows).unwrap();
        assert_eq!(
            r,
            Recovery::Legacy {
                base: Some(Seqno(20)),
                skip_through: vec![Some(Seqno(20)), Some(Seqno(25))],
            }
        );
        assert_eq!(r.start_seqno(), Seqno(21));
        assert!(r.committed().is_empty());
        assert_eq!(
            r.legacy_skip_through(ChannelId::recorded(1)),
            Some(Seqno(25))
        );
        assert_eq!(
            r.require_exact().unwrap_err().to_string(),
            "restart rows (20,25) were written by an older shardrep (no low_water): they record \
             only each channel's last seqno, which is exact only when each shard always runs on \
             the same channel. Start with parallelism = \"shard\" and go offline cleanly once \
             (every row then records the committed set), then change it"
        );
        let r = recover(&[row(0, -1, None, ""), row(1, 4, None, "")]).unwrap();
        assert_eq!(r.base(), None);
        assert_eq!(r.start_seqno(), Seqno(0));
    }

    #[test]
    fn a_committed_seqno_above_the_row_is_refused() {
        let e = recover(&[row(0, 16, Some(10), "13,17"), row(1, 20, Some(10), "")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "restart row of channel 0: committed_above \"13,17\" names seqno 17, above the row's \
             own seqno 16 (a channel records only the seqnos it committed, the highest in its \
             seqno column): restore the row"
        );
        assert!(recover(&[row(0, -1, Some(-1), "0")]).is_err());
    }

    #[test]
    fn all_done_needs_one_seqno_and_the_low_water_there() {
        assert_eq!(
            all_done_at(&[row(0, 9, Some(9), ""), row(1, 9, Some(7), "")]),
            Some(Some(Seqno(9)))
        );
        // At one seqno by markers, but 8 or 9 may be in flight.
        assert_eq!(
            all_done_at(&[row(0, 9, Some(7), "9"), row(1, 9, Some(7), "")]),
            None
        );
        assert_eq!(
            all_done_at(&[row(0, 9, Some(9), ""), row(1, 8, Some(9), "")]),
            None
        );
        assert_eq!(
            all_done_at(&[row(0, 9, None, ""), row(1, 9, None, "")]),
            Some(Some(Seqno(9)))
        );
        assert_eq!(
            all_done_at(&[row(0, -1, Some(-1), ""), row(1, -1, None, "")]),
            Some(None)
        );
        assert_eq!(all_done_at(&[]), Some(None));
    }
}
