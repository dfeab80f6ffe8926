//! [`SeqnoRanges`]: a set of seqnos as sorted, disjoint ranges, the text of
//! a restart row's `committed_above` column (the seqnos a channel committed
//! above the row's low-water mark; shared/research/writeset.md §5, "Choice
//! 2", after MySQL's `Checkpoint_group_bitmap` and MariaDB's
//! `gtid_slave_pos` ranges).

use super::*;

/// A set of seqnos held as sorted, disjoint, non-adjacent inclusive ranges
/// (`3-5` and `7` stay apart; `3-5` and `6` merge into `3-6`).
///
/// Text: the ranges in ascending order, comma separated, each `A-B` (A < B)
/// or a single `A`: `12,14-16,20`; the empty set is the empty text. The
/// parse is strict (no spaces, no empty items, ascending, at least one
/// seqno between two ranges), so `parse(text).to_string() == text` for
/// every text that parses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SeqnoRanges {
    /// `(first, last)`, inclusive, ascending, with `last + 1 < next first`.
    ranges: Vec<(u64, u64)>,
}

impl SeqnoRanges {
    /// The empty set.
    pub const fn new() -> SeqnoRanges {
        SeqnoRanges { ranges: Vec::new() }
    }

    /// Whether it holds no seqno.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many ranges it holds (the text's item count).
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// How many seqnos it holds.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| b - a + 1).sum()
    }

    /// The lowest seqno, if any.
    pub fn first(&self) -> Option<Seqno> {
        self.ranges.first().map(|&(a, _)| Seqno(a))
    }

    /// The highest seqno, if any.
    pub fn last(&self) -> Option<Seqno> {
        self.ranges.last().map(|&(_, b)| Seqno(b))
    }

    /// Whether `seqno` is in the set (a binary search over the ranges).
    pub fn contains(&self, seqno: Seqno) -> bool {
        let s = seqno.get();
        // The first range whose end is at or above `s`.
        let i = self.ranges.partition_point(|&(_, b)| b < s);
        self.ranges.get(i).is_some_and(|&(a, _)| a <= s)
    }

    /// Adds `seqno`. Cheapest (no search) when it is above every seqno
    /// held, the usual case: seqnos are committed roughly in order.
    pub fn insert(&mut self, seqno: Seqno) {
        self.insert_range(seqno, seqno);
    }

    /// Adds every seqno from `first` to `last` inclusive (nothing when
    /// `first > last`).
    pub fn insert_range(&mut self, first: Seqno, last: Seqno) {
        let (a, b) = (first.get(), last.get());
        if a > b {
            return;
        }
        if let Some(end) = self.ranges.last_mut() {
            if a > end.1.saturating_add(1) {
                self.ranges.push((a, b));
                return;
            }
            if a >= end.0 {
                end.1 = end.1.max(b);
                return;
            }
        } else {
            self.ranges.push((a, b));
            return;
        }
        // General case: the ranges that touch or overlap [a, b] merge.
        let lo = self
            .ranges
            .partition_point(|&(_, e)| e.saturating_add(1) < a);
        let hi = self
            .ranges
            .partition_point(|&(s, _)| s <= b.saturating_add(1));
        if lo == hi {
            self.ranges.insert(lo, (a, b));
        } else {
            let merged = (a.min(self.ranges[lo].0), b.max(self.ranges[hi - 1].1));
            self.ranges.splice(lo..hi, std::iter::once(merged));
        }
    }

    /// Adds every seqno of `other`.
    pub fn extend(&mut self, other: &SeqnoRanges) {
        for &(a, b) in &other.ranges {
            self.insert_range(Seqno(a), Seqno(b));
        }
    }

    /// Removes every seqno below `seqno` (`seqno` itself stays).
    pub fn prune_below(&mut self, seqno: Seqno) {
        let s = seqno.get();
        let whole = self.ranges.partition_point(|&(_, b)| b < s);
        self.ranges.drain(..whole);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(s);
        }
    }

    /// The ranges, ascending: `(first, last)`, inclusive.
    pub fn ranges(&self) -> impl Iterator<Item = (Seqno, Seqno)> + '_ {
        self.ranges.iter().map(|&(a, b)| (Seqno(a), Seqno(b)))
    }

    /// Every seqno, ascending.
    pub fn iter(&self) -> impl Iterator<Item = Seqno> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| (a..=b).map(Seqno))
    }
}

impl FromIterator<Seqno> for SeqnoRanges {
    fn from_iter<I: IntoIterator<Item = Seqno>>(iter: I) -> Self {
        let mut set = SeqnoRanges::new();
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl fmt::Display for SeqnoRanges {
    /// `12,14-16,20`; the empty set prints nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for SeqnoRanges {
    type Err = PositionError;

    /// Parses the text of [`SeqnoRanges`] (type doc), strictly.
    ///
    /// # Errors
    /// [`PositionError::InvalidSeqnoRanges`] naming the whole text and the
    /// offending item: an empty item, a seqno that is not a decimal `u64`,
    /// a range `A-B` with `A >= B`, or a range that does not start at
    /// least two above the previous one's end (unsorted, overlapping or
    /// adjacent ranges are not canonical).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut set = SeqnoRanges::new();
        if text.is_empty() {
            return Ok(set);
        }
        let invalid = |reason: String| PositionError::InvalidSeqnoRanges {
            text: text.to_owned(),
            reason,
        };
        for item in text.split(',') {
            let number = |part: &str| {
                parse_decimal(part, u64::MAX).ok_or_else(|| {
                    invalid(format!(
                        "item {item:?}: {}",
                        number_reason("a seqno", part, u64::MAX)
                    ))
                })
            };
            let (a, b) = match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a >= b {
                        return Err(invalid(format!(
                            "item {item:?}: expected a range FIRST-LAST with FIRST below LAST"
                        )));
                    }
                    (a, b)
                }
                None => {
                    let a = number(item)?;
                    (a, a)
                }
            };
            if let Some(&(_, end)) = set.ranges.last() {
                if a <= end.saturating_add(1) {
                    return Err(invalid(format!(
                        "item {item:?}: expected ascending ranges with a gap between them (e.g. \
                         3-5,7), but it does not start above {}",
                        end.saturating_add(1)
                    )));
                }
            }
            set.ranges.push((a, b));
        }
        Ok(set)
    }
}

serde_as_text!(SeqnoRanges);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(text: &str) -> SeqnoRanges {
        text.parse().unwrap()
    }

    #[test]
    fn parse_and_print_round_trip() {
        for text in [
            "",
            "0",
            "7",
            "1-2",
            "12,14-16,20",
            "0-18446744073709551615",
            "3,5,7-9",
        ] {
            assert_eq!(set(text).to_string(), text);
        }
        let s = set("12,14-16,20");
        assert_eq!(
            s.ranges().collect::<Vec<_>>(),
            [
                (Seqno(12), Seqno(12)),
                (Seqno(14), Seqno(16)),
                (Seqno(20), Seqno(20))
            ]
        );
        assert_eq!(
            s.iter().map(Seqno::get).collect::<Vec<_>>(),
            [12, 14, 15, 16, 20]
        );
        assert_eq!((s.len(), s.range_count()), (5, 3));
        assert_eq!((s.first(), s.last()), (Some(Seqno(12)), Some(Seqno(20))));
        assert!(SeqnoRanges::new().is_empty());
    }

    #[test]
    fn malformed_texts_name_the_text_and_the_item() {
        let cases = [
            (",", "item \"\": expected a seqno as a decimal integer 0..=18446744073709551615, found \"\""),
            ("1,", "item \"\": expected a seqno as a decimal integer 0..=18446744073709551615, found \"\""),
            ("1, 3", "item \" 3\": expected a seqno as a decimal integer 0..=18446744073709551615, found \" 3\""),
            ("x", "item \"x\": expected a seqno as a decimal integer 0..=18446744073709551615, found \"x\""),
            ("-1", "item \"-1\": expected a seqno as a decimal integer 0..=18446744073709551615, found \"\""),
            ("1-2-3", "item \"1-2-3\": expected a seqno as a decimal integer 0..=18446744073709551615, found \"2-3\""),
            ("5-3", "item \"5-3\": expected a range FIRST-LAST with FIRST below LAST"),
            ("5-5", "item \"5-5\": expected a range FIRST-LAST with FIRST below LAST"),
            ("3,1", "item \"1\": expected ascending ranges with a gap between them (e.g. 3-5,7), but it does not start above 4"),
            ("3-5,4", "item \"4\": expected ascending ranges with a gap between them (e.g. 3-5,7), but it does not start above 6"),
            ("3-5,6", "item \"6\": expected ascending ranges with a gap between them (e.g. 3-5,7), but it does not start above 6"),
            ("3,3", "item \"3\": expected ascending ranges with a gap between them (e.g. 3-5,7), but it does not start above 4"),
        ];
        for (text, reason) in cases {
            assert_eq!(
                text.parse::<SeqnoRanges>().unwrap_err().to_string(),
                format!("invalid seqno ranges {text:?}: {reason}"),
                "{text}"
            );
        }
    }

    #[test]
    fn insert_merges_neighbours() {
        let mut s = SeqnoRanges::new();
        for n in [5, 7, 6, 10, 1, 2, 9, 20, 3] {
            s.insert(Seqno(n));
        }
        assert_eq!(s.to_string(), "1-3,5-7,9-10,20");
        s.insert(Seqno(4));
        assert_eq!(s.to_string(), "1-7,9-10,20");
        s.insert(Seqno(6));
        assert_eq!(s.to_string(), "1-7,9-10,20", "already held");
        s.insert_range(Seqno(8), Seqno(19));
        assert_eq!(s.to_string(), "1-20");
        s.insert_range(Seqno(30), Seqno(25));
        assert_eq!(s.to_string(), "1-20", "an empty range adds nothing");
        let mut t = set("0,40-41");
        t.extend(&s);
        assert_eq!(t.to_string(), "0-20,40-41");
        s.insert(Seqno(u64::MAX));
        assert_eq!(s.to_string(), "1-20,18446744073709551615");
    }

    #[test]
    fn prune_below_keeps_the_seqno_and_above() {
        let mut s = set("3-5,7,9-12");
        s.prune_below(Seqno(3));
        assert_eq!(s.to_string(), "3-5,7,9-12");
        s.prune_below(Seqno(4));
        assert_eq!(s.to_string(), "4-5,7,9-12");
        s.prune_below(Seqno(8));
        assert_eq!(s.to_string(), "9-12");
        s.prune_below(Seqno(12));
        assert_eq!(s.to_string(), "12");
        s.prune_below(Seqno(13));
        assert!(s.is_empty());
    }

    #[test]
    fn contains_exactly_the_members() {
        let s = set("3-5,7,9-12");
        let members: Vec<u64> = (0..15).filter(|&n| s.contains(Seqno(n))).collect();
        assert_eq!(members, [3, 4, 5, 7, 9, 10, 11, 12]);
        assert!(!SeqnoRanges::new().contains(Seqno(0)));
    }

    proptest! {
        /// Any insertion order gives the set of the seqnos inserted, in
        /// canonical form, and its text parses back to it.
        #[test]
        fn inserts_match_a_model(seqnos in proptest::collection::vec(0u64..200, 0..80), cut in 0u64..220) {
            let mut s = SeqnoRanges::new();
            let mut model = std::collections::BTreeSet::new();
            for n in seqnos {
                s.insert(Seqno(n));
                model.insert(n);
            }
            prop_assert_eq!(s.iter().map(Seqno::get).collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            for n in 0..210 {
                prop_assert_eq!(s.contains(Seqno(n)), model.contains(&n));
            }
            let text = s.to_string();
            prop_assert_eq!(text.parse::<SeqnoRanges>().unwrap(), s.clone());
            s.prune_below(Seqno(cut));
            let kept: Vec<u64> = model.range(cut..).copied().collect();
            prop_assert_eq!(s.iter().map(Seqno::get).collect::<Vec<_>>(), kept);
        }
    }
}
