//! [`Seqno`] (the extractor's dense transaction number) and [`Epoch`] (the
//! seqno at which an extraction run started).

use super::*;

/// Dense transaction number assigned by the extractor: the first source
/// transaction is seqno 0, each next one is one more, with no gaps.
///
/// Prints and parses as a plain decimal number (`42`); serializes as a number.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Seqno(pub u64);

impl Seqno {
    /// The first seqno, 0.
    pub const ZERO: Seqno = Seqno(0);

    /// Wraps a raw number.
    pub const fn new(n: u64) -> Self {
        Seqno(n)
    }

    /// The raw number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The following seqno, `self + 1`.
    ///
    /// # Panics
    /// If `self` is `u64::MAX` (2^64 transactions; unreachable in practice).
    /// Use [`Seqno::checked_next`] to handle it.
    pub fn next(self) -> Seqno {
        self.checked_next()
            .expect("seqno overflow: no seqno after u64::MAX")
    }

    /// The following seqno, or `None` if `self` is `u64::MAX`.
    pub const fn checked_next(self) -> Option<Seqno> {
        match self.0.checked_add(1) {
            Some(n) => Some(Seqno(n)),
            None => None,
        }
    }
}

impl fmt::Display for Seqno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Seqno {
    type Err = PositionError;

    /// Parses a decimal number (ASCII digits only; no sign, no spaces).
    ///
    /// # Errors
    /// [`PositionError::InvalidSeqno`] for anything else or a value beyond
    /// `u64::MAX`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_decimal(text, u64::MAX)
            .map(Seqno)
            .ok_or_else(|| PositionError::InvalidSeqno {
                text: text.to_owned(),
            })
    }
}

/// The seqno at which an extraction run started; a restarted extractor that
/// finds a different epoch for the same seqno knows the history diverged.
///
/// Prints and parses as a plain decimal number; serializes as a number.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl Epoch {
    /// Wraps a raw number.
    pub const fn new(n: u64) -> Self {
        Epoch(n)
    }

    /// The raw number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The epoch of a run that starts at `seqno`.
    pub const fn starting_at(seqno: Seqno) -> Self {
        Epoch(seqno.0)
    }

    /// The seqno at which this run started.
    pub const fn start_seqno(self) -> Seqno {
        Seqno(self.0)
    }
}

impl From<Seqno> for Epoch {
    fn from(seqno: Seqno) -> Self {
        Epoch::starting_at(seqno)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Epoch {
    type Err = PositionError;

    /// Parses a decimal number (ASCII digits only; no sign, no spaces).
    ///
    /// # Errors
    /// [`PositionError::InvalidEpoch`] for anything else or a value beyond
    /// `u64::MAX`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_decimal(text, u64::MAX)
            .map(Epoch)
            .ok_or_else(|| PositionError::InvalidEpoch {
                text: text.to_owned(),
            })
    }
}
