//! Positions and identifiers: [`Seqno`], [`Epoch`], [`ChannelId`],
//! [`BinlogPosition`], MariaDB [`Gtid`] / [`GtidPos`].
//!
//! This is the bottom layer of the crate: it depends on nothing else in
//! shardrep. Every text format here parses strictly and prints canonically,
//! so `x.to_string().parse() == Ok(x)` for every value, and
//! `parse(text).to_string() == text` for every canonical `text`. Every parse
//! failure is a [`PositionError`] whose message quotes the offending text and
//! says what was expected.
//!
//! Formats and where they come from:
//! - binlog position (event id): `FILE:OFFSET`, e.g. `mariadb-bin.000012:4567`,
//!   as shown by `SHOW SLAVE STATUS` (`Relay_Master_Log_File` /
//!   `Exec_Master_Log_Pos`) and `SHOW MASTER STATUS`. The file name is the
//!   server's `log_bin` base name plus a numeric extension (`.000001`).
//! - MariaDB GTID: `domain_id-server_id-sequence_number`, e.g. `0-1-100`
//!   (MariaDB Knowledge Base, "Global Transaction ID"); a GTID position
//!   (`gtid_slave_pos`, `gtid_binlog_pos`, `gtid_current_pos`) is a comma
//!   separated list with at most one GTID per replication domain.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The error of every parse or constructor in this module.
///
/// Each message names the offending input (quoted with Rust string escapes,
/// so control characters and spaces are visible) and what was expected, e.g.
/// `invalid binlog position "foo": expected FILE:OFFSET`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PositionError {
    /// A [`Seqno`] text is not a decimal `u64`.
    #[error("invalid seqno {text:?}: expected a decimal integer 0..={max}", max = u64::MAX)]
    InvalidSeqno {
        /// The text that failed to parse.
        text: String,
    },

    /// An [`Epoch`] text is not a decimal `u64`.
    #[error("invalid epoch {text:?}: expected a decimal integer 0..={max}", max = u64::MAX)]
    InvalidEpoch {
        /// The text that failed to parse.
        text: String,
    },

    /// A channel text is not a decimal number below the channel count.
    #[error(
        "invalid channel {text:?}: expected a channel number below the channel count {channel_count}"
    )]
    InvalidChannel {
        /// The text that failed to parse.
        text: String,
        /// The number of configured channels.
        channel_count: u16,
    },

    /// A channel number is not below the channel count.
    #[error(
        "invalid channel {channel}: expected a channel number below the channel count {channel_count}"
    )]
    ChannelOutOfRange {
        /// The rejected channel number.
        channel: u16,
        /// The number of configured channels.
        channel_count: u16,
    },

    /// A `FILE:OFFSET` text is malformed.
    #[error("invalid binlog position {text:?}: {reason}")]
    InvalidBinlogPosition {
        /// The whole text that failed to parse.
        text: String,
        /// What is wrong and what was expected.
        reason: String,
    },

    /// A binlog file name has no numeric extension (or is otherwise invalid).
    #[error("invalid binlog file name {file:?}: {reason}")]
    InvalidBinlogFileName {
        /// The rejected file name.
        file: String,
        /// What is wrong and what was expected.
        reason: String,
    },

    /// The binlog file index is `u64::MAX`, so there is no next file name.
    #[error("cannot rotate binlog file {file:?}: file index {index} is the largest possible")]
    BinlogIndexOverflow {
        /// The file that cannot be rotated.
        file: String,
        /// Its numeric index.
        index: u64,
    },

    /// A MariaDB `domain-server-seq` text is malformed.
    #[error("invalid GTID {text:?}: {reason}")]
    InvalidGtid {
        /// The text that failed to parse.
        text: String,
        /// What is wrong and what was expected.
        reason: String,
    },

    /// A MariaDB GTID position (comma separated GTIDs) is malformed.
    #[error("invalid GTID position {text:?}: {reason}")]
    InvalidGtidPos {
        /// The whole text that failed to parse.
        text: String,
        /// What is wrong and what was expected.
        reason: String,
    },

    /// A MariaDB GTID position names the same domain twice.
    #[error(
        "invalid GTID position {text:?}: domain {domain_id} appears more than once, expected at most one GTID per domain"
    )]
    DuplicateGtidDomain {
        /// The whole text that failed to parse.
        text: String,
        /// The repeated domain id.
        domain_id: u32,
    },
}

// ---------------------------------------------------------------------------
// Number parsing helpers
// ---------------------------------------------------------------------------

/// Parses a non-empty run of ASCII digits (no sign, no spaces) no greater than
/// `max`. Leading zeros are accepted.
fn parse_decimal(text: &str, max: u64) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut value: u64 = 0;
    for b in text.bytes() {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    (value <= max).then_some(value)
}

/// The reason text for a numeric field that failed [`parse_decimal`].
fn number_reason(field: &str, part: &str, max: u64) -> String {
    format!("expected {field} as a decimal integer 0..={max}, found {part:?}")
}

/// Implements `Serialize`/`Deserialize` as the type's canonical text
/// (`Display` / `FromStr`).
macro_rules! serde_as_text {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Seqno, Epoch
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// ChannelId
// ---------------------------------------------------------------------------

/// One apply lane, `0..channel_count`.
///
/// Built only through [`ChannelId::new`] / [`ChannelId::parse`] /
/// [`ChannelId::all`], which check the number against the channel count.
/// Prints as the plain number (`3`). Serializes as a number; note that
/// deserializing cannot check the channel count, so re-validate with
/// [`ChannelId::new`] when the count may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelId(u16);

impl ChannelId {
    /// Channel `n` of `channel_count` channels.
    ///
    /// # Errors
    /// [`PositionError::ChannelOutOfRange`] when `n >= channel_count`.
    pub fn new(n: u16, channel_count: u16) -> Result<Self, PositionError> {
        if n < channel_count {
            Ok(ChannelId(n))
        } else {
            Err(PositionError::ChannelOutOfRange {
                channel: n,
                channel_count,
            })
        }
    }

    /// Parses a decimal channel number and checks it against `channel_count`.
    ///
    /// # Errors
    /// [`PositionError::InvalidChannel`] when the text is not a decimal
    /// `u16`; [`PositionError::ChannelOutOfRange`] when it is
    /// `>= channel_count`.
    pub fn parse(text: &str, channel_count: u16) -> Result<Self, PositionError> {
        let n = parse_decimal(text, u64::from(u16::MAX)).ok_or_else(|| {
            PositionError::InvalidChannel {
                text: text.to_owned(),
                channel_count,
            }
        })?;
        // parse_decimal capped the value at u16::MAX.
        ChannelId::new(n as u16, channel_count)
    }

    /// All channels `0..channel_count`, in order.
    pub fn all(channel_count: u16) -> impl Iterator<Item = ChannelId> {
        (0..channel_count).map(ChannelId)
    }

    /// The channel number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The channel number as an index into per-channel vectors.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

// ---------------------------------------------------------------------------
// BinlogPosition
// ---------------------------------------------------------------------------

/// A position in the master's binlog, `FILE:OFFSET` (e.g.
/// `mariadb-bin.000012:4567`): the byte offset in the file *after* a
/// transaction, where reading resumes.
///
/// The file name is split at its last `.` into a **base name** (the server's
/// `log_bin` base name, e.g. `mariadb-bin`, never empty) and a numeric
/// **index** (`000012` → 12). The index may have any number of digits, zero
/// padded or not, up to `u64::MAX`; the original spelling (padding) is kept
/// and printed back unchanged. `offset` is in bytes.
///
/// # Ordering
/// `Ord` compares the base name first (byte order), then the numeric index,
/// then the offset, so within one binlog family rotation orders correctly
/// even when the index outgrows its padding (`bin.999999` < `bin.1000000`).
/// Positions of different families (different base names) get a total but
/// arbitrary order — they are not meaningfully comparable; check
/// [`BinlogPosition::same_log_family`] first. Two spellings of the same index
/// (`bin.1` and `bin.000001`) are ordered by the file text as a last resort so
/// that `Ord` agrees with `Eq`.
///
/// Serializes as the `FILE:OFFSET` text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BinlogPosition {
    file: String,
    offset: u64,
    /// Byte length of the base name (`file[..base_len]`); the index digits
    /// start at `base_len + 1`.
    base_len: usize,
    /// Numeric value of the file's extension.
    index: u64,
}

/// Splits and validates a binlog file name; returns `(base_len, index)` or
/// the reason it is invalid.
fn split_binlog_file(file: &str) -> Result<(usize, u64), String> {
    if file.is_empty() {
        return Err("expected a file name BASENAME.NNNNNN, found an empty file name".to_owned());
    }
    if file.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "expected a file name without whitespace or control characters, found {file:?}"
        ));
    }
    let Some((base, suffix)) = file.rsplit_once('.') else {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a numeric extension, found {file:?}"
        ));
    };
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a numeric extension, found {file:?}"
        ));
    }
    if base.is_empty() {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a non-empty base name, found {file:?}"
        ));
    }
    let index = parse_decimal(suffix, u64::MAX)
        .ok_or_else(|| number_reason("the file index", suffix, u64::MAX))?;
    Ok((base.len(), index))
}

impl BinlogPosition {
    /// A position at byte `offset` of binlog file `file`.
    ///
    /// # Errors
    /// [`PositionError::InvalidBinlogFileName`] when `file` is empty,
    /// contains whitespace or control characters, has an empty base name, or
    /// has no numeric extension after its last `.` (or one beyond
    /// `u64::MAX`).
    pub fn new(file: impl Into<String>, offset: u64) -> Result<Self, PositionError> {
        let file = file.into();
        match split_binlog_file(&file) {
            Ok((base_len, index)) => Ok(BinlogPosition {
                file,
                offset,
                base_len,
                index,
            }),
            Err(reason) => Err(PositionError::InvalidBinlogFileName { file, reason }),
        }
    }

    /// The file name, as given (e.g. `mariadb-bin.000012`).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The byte offset in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The base name, the file name before its last `.` (e.g. `mariadb-bin`).
    pub fn base_name(&self) -> &str {
        &self.file[..self.base_len]
    }

    /// The numeric extension of the file name (`mariadb-bin.000012` → 12).
    pub fn file_index(&self) -> u64 {
        self.index
    }

    /// The same file at another byte offset.
    pub fn with_offset(&self, offset: u64) -> BinlogPosition {
        BinlogPosition {
            offset,
            ..self.clone()
        }
    }

    /// Whether both positions are in files of the same binlog family (same
    /// base name), so that their order is meaningful.
    pub fn same_log_family(&self, other: &BinlogPosition) -> bool {
        self.base_name() == other.base_name()
    }

    /// The name of the file the server rotates to after this one: index + 1
    /// with the same zero-padding width, growing the width when the number
    /// needs more digits (`bin.000009` → `bin.000010`, `bin.999999` →
    /// `bin.1000000`, `bin.9` → `bin.10`).
    ///
    /// # Errors
    /// [`PositionError::BinlogIndexOverflow`] when the index is `u64::MAX`.
    pub fn next_file_name(&self) -> Result<String, PositionError> {
        let next = self
            .index
            .checked_add(1)
            .ok_or_else(|| PositionError::BinlogIndexOverflow {
                file: self.file.clone(),
                index: self.index,
            })?;
        let width = self.file.len() - self.base_len - 1;
        Ok(format!("{}.{next:0width$}", self.base_name()))
    }
}

impl fmt::Display for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.offset)
    }
}

impl fmt::Debug for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BinlogPosition({:?})", self.to_string())
    }
}

impl FromStr for BinlogPosition {
    type Err = PositionError;

    /// Parses `FILE:OFFSET`, splitting at the last `:`. `OFFSET` is a decimal
    /// byte offset; `FILE` must be valid as for [`BinlogPosition::new`]. No
    /// surrounding whitespace is accepted.
    ///
    /// # Errors
    /// [`PositionError::InvalidBinlogPosition`], naming the whole text, when
    /// the colon is missing, the file is empty or has no numeric extension,
    /// or the offset is not a decimal `u64`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| PositionError::InvalidBinlogPosition {
            text: text.to_owned(),
            reason,
        };
        let (file, offset) = text
            .rsplit_once(':')
            .ok_or_else(|| fail("expected FILE:OFFSET".to_owned()))?;
        if file.is_empty() {
            return Err(fail(
                "expected FILE:OFFSET, found an empty file name".to_owned(),
            ));
        }
        let offset = parse_decimal(offset, u64::MAX)
            .ok_or_else(|| fail(number_reason("OFFSET", offset, u64::MAX)))?;
        let (base_len, index) = split_binlog_file(file).map_err(fail)?;
        Ok(BinlogPosition {
            file: file.to_owned(),
            offset,
            base_len,
            index,
        })
    }
}

impl PartialOrd for BinlogPosition {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BinlogPosition {
    fn cmp(&self, other: &Self) -> Ordering {
        self.base_name()
            .cmp(other.base_name())
            .then(self.index.cmp(&other.index))
            .then(self.offset.cmp(&other.offset))
            .then_with(|| self.file.cmp(&other.file))
    }
}

serde_as_text!(BinlogPosition);

// ---------------------------------------------------------------------------
// MariaDB GTID
// ---------------------------------------------------------------------------

/// A MariaDB global transaction id, `domain_id-server_id-sequence_number`
/// (e.g. `0-1-100`), as defined in the MariaDB Knowledge Base ("Global
/// Transaction ID").
///
/// Parsing is strict: exactly three `-`-separated decimal numbers, no signs,
/// no whitespace; leading zeros are accepted but printing is canonical
/// (`00-1-100` prints as `0-1-100`). Serializes as the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gtid {
    /// Replication domain (`gtid_domain_id`), an independent stream of
    /// transactions.
    pub domain_id: u32,
    /// `server_id` of the server that originally wrote the transaction.
    pub server_id: u32,
    /// Sequence number within the domain; increases with each transaction.
    pub seq_no: u64,
}

impl Gtid {
    /// A GTID from its three parts.
    pub const fn new(domain_id: u32, server_id: u32, seq_no: u64) -> Self {
        Gtid {
            domain_id,
            server_id,
            seq_no,
        }
    }
}

/// Parses a GTID, returning the reason text on failure.
fn parse_gtid(text: &str) -> Result<Gtid, String> {
    if text.is_empty() {
        return Err("expected DOMAIN-SERVER-SEQ, found an empty string".to_owned());
    }
    if text.chars().any(char::is_whitespace) {
        return Err("expected DOMAIN-SERVER-SEQ without whitespace".to_owned());
    }
    let parts: Vec<&str> = text.split('-').collect();
    let [domain, server, seq] = parts[..] else {
        let n = parts.len();
        let plural = if n == 1 { "" } else { "s" };
        return Err(format!(
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found {n} part{plural}"
        ));
    };
    let max32 = u64::from(u32::MAX);
    let domain_id =
        parse_decimal(domain, max32).ok_or_else(|| number_reason("domain_id", domain, max32))?;
    let server_id =
        parse_decimal(server, max32).ok_or_else(|| number_reason("server_id", server, max32))?;
    let seq_no =
        parse_decimal(seq, u64::MAX).ok_or_else(|| number_reason("seq_no", seq, u64::MAX))?;
    // Both were capped at u32::MAX by parse_decimal.
    Ok(Gtid::new(domain_id as u32, server_id as u32, seq_no))
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain_id, self.server_id, self.seq_no)
    }
}

impl FromStr for Gtid {
    type Err = PositionError;

    /// Parses `DOMAIN-SERVER-SEQ`.
    ///
    /// # Errors
    /// [`PositionError::InvalidGtid`] for an empty text, whitespace, a part
    /// count other than 3, a non-decimal part, or a part out of range
    /// (`domain_id`/`server_id` beyond `u32::MAX`, `seq_no` beyond
    /// `u64::MAX`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_gtid(text).map_err(|reason| PositionError::InvalidGtid {
            text: text.to_owned(),
            reason,
        })
    }
}

serde_as_text!(Gtid);

/// A MariaDB GTID position: at most one [`Gtid`] per replication domain, the
/// text of `gtid_slave_pos` / `gtid_binlog_pos` / `gtid_current_pos`
/// (e.g. `0-1-100,1-2-7`; the empty string is the empty position).
///
/// Kept ordered by domain id. Printing is canonical: sorted by domain, comma
/// separated, no spaces. Parsing accepts whitespace around items and around
/// the whole text. Serializes as the text.
///
/// `==` compares the exact GTIDs (server ids included); [`GtidPos::compare`]
/// compares progress (seq_no per domain) the way MariaDB does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidPos {
    by_domain: BTreeMap<u32, Gtid>,
}

impl GtidPos {
    /// The empty position (no domain seen).
    pub fn new() -> Self {
        GtidPos::default()
    }

    /// Whether no domain has a GTID.
    pub fn is_empty(&self) -> bool {
        self.by_domain.is_empty()
    }

    /// Number of domains.
    pub fn len(&self) -> usize {
        self.by_domain.len()
    }

    /// The GTID of `domain_id`, if any.
    pub fn get(&self, domain_id: u32) -> Option<&Gtid> {
        self.by_domain.get(&domain_id)
    }

    /// Sets `gtid` as its domain's position, replacing (and returning) any
    /// previous GTID of that domain — even one with a larger seq_no.
    pub fn update(&mut self, gtid: Gtid) -> Option<Gtid> {
        self.by_domain.insert(gtid.domain_id, gtid)
    }

    /// Whether `gtid` is at or before this position: this position has a
    /// GTID for `gtid`'s domain with `seq_no >= gtid.seq_no`. As in MariaDB,
    /// only the seq_no counts within a domain, whatever the server_id.
    pub fn contains(&self, gtid: &Gtid) -> bool {
        self.get(gtid.domain_id)
            .is_some_and(|ours| gtid.seq_no <= ours.seq_no)
    }

    /// Compares progress domain by domain (by seq_no; a domain missing on one
    /// side counts as behind the other side).
    ///
    /// Returns `Some(Equal)` when every domain has the same seq_no on both
    /// sides (server ids may differ), `Some(Less)` when `self` is behind or
    /// equal in every domain and behind in at least one, `Some(Greater)`
    /// symmetrically, and `None` when the positions diverged (`self` ahead in
    /// one domain and behind in another).
    pub fn compare(&self, other: &GtidPos) -> Option<Ordering> {
        let mut behind = false;
        let mut ahead = false;
        let domains = self.by_domain.keys().chain(other.by_domain.keys());
        for domain in domains {
            let ours = self.get(*domain).map(|g| g.seq_no);
            let theirs = other.get(*domain).map(|g| g.seq_no);
            // None < Some(_): a missing domain is behind.
            match ours.cmp(&theirs) {
                Ordering::Less => behind = true,
                Ordering::Greater => ahead = true,
                Ordering::Equal => {}
            }
        }
        match (behind, ahead) {
            (false, false) => Some(Ordering::Equal),
            (true, false) => Some(Ordering::Less),
            (false, true) => Some(Ordering::Greater),
            (true, true) => None,
        }
    }

    /// The GTIDs in domain order.
    pub fn iter(&self) -> std::collections::btree_map::Values<'_, u32, Gtid> {
        self.by_domain.values()
    }
}

impl<'a> IntoIterator for &'a GtidPos {
    type Item = &'a Gtid;
    type IntoIter = std::collections::btree_map::Values<'a, u32, Gtid>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

impl FromStr for GtidPos {
    type Err = PositionError;

    /// Parses comma separated GTIDs; whitespace around items is ignored; an
    /// empty or all-whitespace text is the empty position.
    ///
    /// # Errors
    /// [`PositionError::InvalidGtidPos`] for an empty item (`0-1-1,,1-1-1`,
    /// trailing comma) or an invalid GTID (the reason quotes the item);
    /// [`PositionError::DuplicateGtidDomain`] when a domain appears twice.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut pos = GtidPos::new();
        if text.trim().is_empty() {
            return Ok(pos);
        }
        for (i, item) in text.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                return Err(PositionError::InvalidGtidPos {
                    text: text.to_owned(),
                    reason: format!(
                        "expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position {}",
                        i + 1
                    ),
                });
            }
            let gtid = parse_gtid(item).map_err(|reason| PositionError::InvalidGtidPos {
                text: text.to_owned(),
                reason: format!("item {item:?}: {reason}"),
            })?;
            if pos.update(gtid).is_some() {
                return Err(PositionError::DuplicateGtidDomain {
                    text: text.to_owned(),
                    domain_id: gtid.domain_id,
                });
            }
        }
        Ok(pos)
    }
}

serde_as_text!(GtidPos);

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bp(text: &str) -> BinlogPosition {
        text.parse().unwrap()
    }

    fn err<T: FromStr<Err = PositionError> + fmt::Debug>(text: &str) -> String {
        text.parse::<T>().unwrap_err().to_string()
    }

    // ---- Seqno / Epoch -------------------------------------------------

    #[test]
    fn seqno_basics() {
        assert_eq!(Seqno(0).next(), Seqno(1));
        assert_eq!(Seqno(41).next().get(), 42);
        assert_eq!(Seqno(u64::MAX).checked_next(), None);
        assert_eq!(Seqno(7).checked_next(), Some(Seqno(8)));
        assert!(Seqno(9) < Seqno(10));
        assert_eq!(Seqno::ZERO, Seqno::default());
        assert_eq!(Seqno(1234).to_string(), "1234");
        assert_eq!(format!("{:>6}", Seqno(12)), "    12");
        assert_eq!("0".parse::<Seqno>().unwrap(), Seqno(0));
        assert_eq!("007".parse::<Seqno>().unwrap(), Seqno(7));
        assert_eq!(
            "18446744073709551615".parse::<Seqno>().unwrap(),
            Seqno(u64::MAX)
        );
    }

    #[test]
    #[should_panic(expected = "seqno overflow")]
    fn seqno_next_overflow_panics() {
        let _ = Seqno(u64::MAX).next();
    }

    #[test]
    fn seqno_and_epoch_errors() {
        for bad in [
            "",
            "abc",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "18446744073709551616",
        ] {
            assert_eq!(
                err::<Seqno>(bad),
                format!(
                    "invalid seqno {bad:?}: expected a decimal integer 0..=18446744073709551615"
                )
            );
        }
        assert_eq!(
            err::<Seqno>("x1"),
            "invalid seqno \"x1\": expected a decimal integer 0..=18446744073709551615"
        );
        assert_eq!(
            err::<Epoch>("e"),
            "invalid epoch \"e\": expected a decimal integer 0..=18446744073709551615"
        );
    }

    #[test]
    fn epoch_basics() {
        let e = Epoch::starting_at(Seqno(500));
        assert_eq!(e, Epoch(500));
        assert_eq!(e.start_seqno(), Seqno(500));
        assert_eq!(Epoch::from(Seqno(3)), Epoch::new(3));
        assert_eq!(e.to_string(), "500");
        assert_eq!("500".parse::<Epoch>().unwrap(), e);
        assert!(Epoch(1) < Epoch(2));
    }

    #[test]
    fn seqno_epoch_serde_as_numbers() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Row {
            seqno: Seqno,
            epoch: Epoch,
            channel: ChannelId,
        }
        let row = Row {
            seqno: Seqno(42),
            epoch: Epoch(40),
            channel: ChannelId::new(3, 4).unwrap(),
        };
        let text = toml::to_string(&row).unwrap();
        assert_eq!(text, "seqno = 42\nepoch = 40\nchannel = 3\n");
        assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
    }

    // ---- ChannelId -----------------------------------------------------

    #[test]
    fn channel_id() {
        let c = ChannelId::new(3, 4).unwrap();
        assert_eq!(c.get(), 3);
        assert_eq!(c.index(), 3usize);
        assert_eq!(c.to_string(), "3");
        assert_eq!(
            ChannelId::new(4, 4).unwrap_err().to_string(),
            "invalid channel 4: expected a channel number below the channel count 4"
        );
        assert_eq!(
            ChannelId::new(0, 0).unwrap_err(),
            PositionError::ChannelOutOfRange {
                channel: 0,
                channel_count: 0
            }
        );
        assert_eq!(
            ChannelId::parse("2", 4).unwrap(),
            ChannelId::new(2, 4).unwrap()
        );
        assert_eq!(
            ChannelId::parse("9", 4).unwrap_err().to_string(),
            "invalid channel 9: expected a channel number below the channel count 4"
        );
        assert_eq!(
            ChannelId::parse("x", 4).unwrap_err().to_string(),
            "invalid channel \"x\": expected a channel number below the channel count 4"
        );
        assert_eq!(
            ChannelId::parse("65536", 4).unwrap_err().to_string(),
            "invalid channel \"65536\": expected a channel number below the channel count 4"
        );
        let all: Vec<u16> = ChannelId::all(3).map(ChannelId::get).collect();
        assert_eq!(all, vec![0, 1, 2]);
        assert_eq!(ChannelId::all(0).count(), 0);
    }

    // ---- BinlogPosition --------------------------------------------------

    #[test]
    fn binlog_parse_and_accessors() {
        let p = bp("mariadb-bin.000012:4567");
        assert_eq!(p.file(), "mariadb-bin.000012");
        assert_eq!(p.offset(), 4567);
        assert_eq!(p.base_name(), "mariadb-bin");
        assert_eq!(p.file_index(), 12);
        assert_eq!(p.to_string(), "mariadb-bin.000012:4567");
        assert_eq!(
            format!("{p:?}"),
            "BinlogPosition(\"mariadb-bin.000012:4567\")"
        );

        // Base names may contain dots and colons; the split is at the last one.
        let p = bp("host.example-bin.7:4");
        assert_eq!(p.base_name(), "host.example-bin");
        assert_eq!(p.file_index(), 7);
        let p = bp("a:b.000001:4");
        assert_eq!(p.file(), "a:b.000001");
        assert_eq!(p.offset(), 4);

        let p = bp("bin.18446744073709551615:18446744073709551615");
        assert_eq!(p.file_index(), u64::MAX);
        assert_eq!(p.offset(), u64::MAX);

        let q = BinlogPosition::new("mariadb-bin.000012", 4567).unwrap();
        assert_eq!(q, bp("mariadb-bin.000012:4567"));
        assert_eq!(q.with_offset(4).to_string(), "mariadb-bin.000012:4");
    }

    #[test]
    fn binlog_round_trip_keeps_padding() {
        for text in [
            "mariadb-bin.000012:4567",
            "mysql-bin.000001:4",
            "bin.1:0",
            "bin.0000000001:120",
            "bin.1000000:4",
            "log.with.dots.000003:99",
        ] {
            assert_eq!(bp(text).to_string(), text);
        }
        // Padding is part of the file name: different spellings are different
        // files for Eq, but sort next to each other.
        assert_ne!(bp("bin.1:4"), bp("bin.000001:4"));
        assert_eq!(bp("bin.1:4").file_index(), bp("bin.000001:4").file_index());
        assert!(bp("bin.000001:4") < bp("bin.1:4"));
        assert!(bp("bin.1:4") < bp("bin.000001:5"));
    }

    #[test]
    fn binlog_order() {
        assert!(bp("bin.000001:100") < bp("bin.000001:200"));
        assert!(bp("bin.000001:999999") < bp("bin.000002:4"));
        assert!(bp("bin.000009:500") < bp("bin.000010:4"));
        assert!(bp("bin.999999:500") < bp("bin.1000000:4"));
        assert!(bp("bin.9:4") < bp("bin.10:4"));
        assert_eq!(bp("bin.000003:4").cmp(&bp("bin.000003:4")), Ordering::Equal);
        let mut v = [
            bp("bin.1000000:4"),
            bp("bin.000010:4"),
            bp("bin.999999:7"),
            bp("bin.000009:4"),
            bp("bin.000009:3"),
        ];
        v.sort();
        let sorted: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            sorted,
            [
                "bin.000009:3",
                "bin.000009:4",
                "bin.000010:4",
                "bin.999999:7",
                "bin.1000000:4"
            ]
        );

        // Different families: total order by base name first, but flagged.
        let a = bp("alpha.000009:4");
        let b = bp("beta.000001:4");
        assert!(a < b);
        assert!(!a.same_log_family(&b));
        assert!(a.same_log_family(&bp("alpha.1:0")));
    }

    #[test]
    fn binlog_next_file_name() {
        assert_eq!(bp("bin.000009:4").next_file_name().unwrap(), "bin.000010");
        assert_eq!(bp("bin.000012:4").next_file_name().unwrap(), "bin.000013");
        assert_eq!(bp("bin.999999:4").next_file_name().unwrap(), "bin.1000000");
        assert_eq!(bp("bin.9:4").next_file_name().unwrap(), "bin.10");
        assert_eq!(bp("bin.1:4").next_file_name().unwrap(), "bin.2");
        assert_eq!(bp("a.b.099:4").next_file_name().unwrap(), "a.b.100");
        assert_eq!(
            bp("bin.18446744073709551615:4").next_file_name().unwrap_err().to_string(),
            "cannot rotate binlog file \"bin.18446744073709551615\": file index 18446744073709551615 is the largest possible"
        );
    }

    #[test]
    fn binlog_errors() {
        let cases = [
            ("foo", "expected FILE:OFFSET"),
            ("", "expected FILE:OFFSET"),
            (":4", "expected FILE:OFFSET, found an empty file name"),
            (
                "bin.000001:",
                "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"\"",
            ),
            (
                "bin.000001:x12",
                "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"x12\"",
            ),
            (
                "bin.000001:-1",
                "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"-1\"",
            ),
            (
                "bin.000001:18446744073709551616",
                "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
            ),
            (
                "bin:4",
                "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin\"",
            ),
            (
                "bin.:4",
                "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.\"",
            ),
            (
                "bin.log:4",
                "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.log\"",
            ),
            (
                "bin.00a1:4",
                "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.00a1\"",
            ),
            (
                ".000001:4",
                "expected a file name BASENAME.NNNNNN with a non-empty base name, found \".000001\"",
            ),
            (
                "bin.18446744073709551616:4",
                "expected the file index as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
            ),
            (
                " bin.000001:4",
                "expected a file name without whitespace or control characters, found \" bin.000001\"",
            ),
            (
                "bin.000001:4 ",
                "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"4 \"",
            ),
        ];
        for (text, reason) in cases {
            assert_eq!(
                err::<BinlogPosition>(text),
                format!("invalid binlog position {text:?}: {reason}"),
                "input {text:?}"
            );
        }
        assert_eq!(
            err::<BinlogPosition>("foo"),
            "invalid binlog position \"foo\": expected FILE:OFFSET"
        );
        assert_eq!(
            BinlogPosition::new("binlog", 4).unwrap_err().to_string(),
            "invalid binlog file name \"binlog\": expected a file name BASENAME.NNNNNN with a numeric extension, found \"binlog\""
        );
        assert_eq!(
            BinlogPosition::new("", 4).unwrap_err().to_string(),
            "invalid binlog file name \"\": expected a file name BASENAME.NNNNNN, found an empty file name"
        );
    }

    #[test]
    fn binlog_serde_as_text() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Row {
            event_id: BinlogPosition,
        }
        let row = Row {
            event_id: bp("mariadb-bin.000012:4567"),
        };
        let text = toml::to_string(&row).unwrap();
        assert_eq!(text, "event_id = \"mariadb-bin.000012:4567\"\n");
        assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
        let bad = toml::from_str::<Row>("event_id = \"foo\"\n").unwrap_err();
        assert!(
            bad.to_string()
                .contains("invalid binlog position \"foo\": expected FILE:OFFSET"),
            "{bad}"
        );
    }

    // ---- Gtid ----------------------------------------------------------

    #[test]
    fn gtid_parse_print() {
        let g: Gtid = "0-1-100".parse().unwrap();
        assert_eq!(g, Gtid::new(0, 1, 100));
        assert_eq!(g.to_string(), "0-1-100");
        let g: Gtid = "4294967295-4294967295-18446744073709551615"
            .parse()
            .unwrap();
        assert_eq!(g, Gtid::new(u32::MAX, u32::MAX, u64::MAX));
        assert_eq!(g.to_string(), "4294967295-4294967295-18446744073709551615");
        // Leading zeros accepted, printed canonically.
        assert_eq!("00-01-0100".parse::<Gtid>().unwrap().to_string(), "0-1-100");
    }

    #[test]
    fn gtid_errors() {
        let cases = [
            ("", "expected DOMAIN-SERVER-SEQ, found an empty string"),
            (
                "0-1",
                "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 2 parts",
            ),
            (
                "100",
                "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 1 part",
            ),
            (
                "0-1-2-3",
                "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 4 parts",
            ),
            (
                "-1-1-1",
                "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 4 parts",
            ),
            (
                "0--1",
                "expected server_id as a decimal integer 0..=4294967295, found \"\"",
            ),
            (
                "x-1-1",
                "expected domain_id as a decimal integer 0..=4294967295, found \"x\"",
            ),
            (
                "0-1-1a",
                "expected seq_no as a decimal integer 0..=18446744073709551615, found \"1a\"",
            ),
            (
                "4294967296-1-1",
                "expected domain_id as a decimal integer 0..=4294967295, found \"4294967296\"",
            ),
            (
                "0-4294967296-1",
                "expected server_id as a decimal integer 0..=4294967295, found \"4294967296\"",
            ),
            (
                "0-1-18446744073709551616",
                "expected seq_no as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
            ),
            ("0-1-100 ", "expected DOMAIN-SERVER-SEQ without whitespace"),
            (" 0-1-100", "expected DOMAIN-SERVER-SEQ without whitespace"),
            ("0 -1-100", "expected DOMAIN-SERVER-SEQ without whitespace"),
            (
                "0-+1-100",
                "expected server_id as a decimal integer 0..=4294967295, found \"+1\"",
            ),
        ];
        for (text, reason) in cases {
            assert_eq!(
                err::<Gtid>(text),
                format!("invalid GTID {text:?}: {reason}"),
                "input {text:?}"
            );
        }
        assert_eq!(
            err::<Gtid>("0-1"),
            "invalid GTID \"0-1\": expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 2 parts"
        );
    }

    // ---- GtidPos -------------------------------------------------------

    fn gp(text: &str) -> GtidPos {
        text.parse().unwrap()
    }

    #[test]
    fn gtid_pos_parse_print() {
        let p = gp("0-1-100,1-2-7");
        assert_eq!(p.len(), 2);
        assert_eq!(p.get(0), Some(&Gtid::new(0, 1, 100)));
        assert_eq!(p.get(1), Some(&Gtid::new(1, 2, 7)));
        assert_eq!(p.get(2), None);
        assert_eq!(p.to_string(), "0-1-100,1-2-7");

        // Canonical print: sorted by domain, no spaces.
        let p = gp(" 5-1-9 , 1-2-7,\n0-1-100 ");
        assert_eq!(p.to_string(), "0-1-100,1-2-7,5-1-9");
        let domains: Vec<u32> = p.iter().map(|g| g.domain_id).collect();
        assert_eq!(domains, vec![0, 1, 5]);
        let seqs: Vec<u64> = (&p).into_iter().map(|g| g.seq_no).collect();
        assert_eq!(seqs, vec![100, 7, 9]);

        for empty in ["", "   ", "\n"] {
            let p = gp(empty);
            assert!(p.is_empty());
            assert_eq!(p.len(), 0);
            assert_eq!(p.to_string(), "");
        }
        assert_eq!(GtidPos::new(), gp(""));
    }

    #[test]
    fn gtid_pos_errors() {
        assert_eq!(
            err::<GtidPos>("0-1-100,0-2-5"),
            "invalid GTID position \"0-1-100,0-2-5\": domain 0 appears more than once, expected at most one GTID per domain"
        );
        assert_eq!(
            "1-1-1,0-1-1,1-1-1".parse::<GtidPos>().unwrap_err(),
            PositionError::DuplicateGtidDomain {
                text: "1-1-1,0-1-1,1-1-1".to_owned(),
                domain_id: 1
            }
        );
        assert_eq!(
            err::<GtidPos>("0-1-1,,1-1-1"),
            "invalid GTID position \"0-1-1,,1-1-1\": expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position 2"
        );
        assert_eq!(
            err::<GtidPos>("0-1-1,"),
            "invalid GTID position \"0-1-1,\": expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position 2"
        );
        assert_eq!(
            err::<GtidPos>("0-1-1,0-x-1"),
            "invalid GTID position \"0-1-1,0-x-1\": item \"0-x-1\": expected server_id as a decimal integer 0..=4294967295, found \"x\""
        );
        assert_eq!(
            err::<GtidPos>("0-1-1;1-1-1"),
            "invalid GTID position \"0-1-1;1-1-1\": item \"0-1-1;1-1-1\": expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 5 parts"
        );
        assert_eq!(
            err::<GtidPos>("0-1-1 1-1-1"),
            "invalid GTID position \"0-1-1 1-1-1\": item \"0-1-1 1-1-1\": expected DOMAIN-SERVER-SEQ without whitespace"
        );
    }

    #[test]
    fn gtid_pos_update_contains() {
        let mut p = gp("0-1-100");
        assert!(p.contains(&Gtid::new(0, 1, 100)));
        assert!(p.contains(&Gtid::new(0, 1, 99)));
        // Same domain, other server: seq_no alone decides (MariaDB semantics).
        assert!(p.contains(&Gtid::new(0, 7, 50)));
        assert!(!p.contains(&Gtid::new(0, 1, 101)));
        assert!(!p.contains(&Gtid::new(1, 1, 1)));

        assert_eq!(p.update(Gtid::new(1, 2, 7)), None);
        assert_eq!(p.update(Gtid::new(0, 3, 150)), Some(Gtid::new(0, 1, 100)));
        assert_eq!(p.to_string(), "0-3-150,1-2-7");
        // update replaces even when going backwards.
        assert_eq!(p.update(Gtid::new(0, 3, 10)), Some(Gtid::new(0, 3, 150)));
        assert_eq!(p.to_string(), "0-3-10,1-2-7");
    }

    #[test]
    fn gtid_pos_compare() {
        let a = gp("0-1-100,1-2-7");
        assert_eq!(a.compare(&a), Some(Ordering::Equal));
        // Equal seq_nos, different server ids: equal progress, not ==.
        let a2 = gp("0-9-100,1-2-7");
        assert_eq!(a.compare(&a2), Some(Ordering::Equal));
        assert_ne!(a, a2);

        assert_eq!(a.compare(&gp("0-1-101,1-2-7")), Some(Ordering::Less));
        assert_eq!(a.compare(&gp("0-1-100,1-2-6")), Some(Ordering::Greater));
        assert_eq!(a.compare(&gp("0-1-101,1-2-8")), Some(Ordering::Less));
        // Missing domain counts as behind.
        assert_eq!(a.compare(&gp("0-1-100")), Some(Ordering::Greater));
        assert_eq!(a.compare(&gp("0-1-100,1-2-7,2-1-1")), Some(Ordering::Less));
        assert_eq!(GtidPos::new().compare(&a), Some(Ordering::Less));
        assert_eq!(
            GtidPos::new().compare(&GtidPos::new()),
            Some(Ordering::Equal)
        );
        // Diverged.
        assert_eq!(a.compare(&gp("0-1-101,1-2-6")), None);
        assert_eq!(a.compare(&gp("0-1-100,2-1-1")), None);
        assert_eq!(gp("0-1-100,2-1-1").compare(&a), None);
    }

    #[test]
    fn gtid_serde_as_text() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Row {
            gtid: Gtid,
            pos: GtidPos,
        }
        let row = Row {
            gtid: Gtid::new(0, 1, 100),
            pos: gp("1-2-7,0-1-100"),
        };
        let text = toml::to_string(&row).unwrap();
        assert_eq!(text, "gtid = \"0-1-100\"\npos = \"0-1-100,1-2-7\"\n");
        assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
    }

    // ---- Property tests --------------------------------------------------

    fn gtid_strategy() -> impl Strategy<Value = Gtid> {
        (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(d, s, n)| Gtid::new(d, s, n))
    }

    proptest! {
        #[test]
        fn prop_seqno_round_trip(n in any::<u64>()) {
            prop_assert_eq!(Seqno(n).to_string().parse::<Seqno>().unwrap(), Seqno(n));
            prop_assert_eq!(Epoch(n).to_string().parse::<Epoch>().unwrap(), Epoch(n));
        }

        #[test]
        fn prop_gtid_round_trip(g in gtid_strategy()) {
            let text = g.to_string();
            prop_assert_eq!(text.parse::<Gtid>().unwrap(), g);
            prop_assert_eq!(
                text,
                format!("{}-{}-{}", g.domain_id, g.server_id, g.seq_no)
            );
        }

        #[test]
        fn prop_gtid_pos_round_trip(gtids in prop::collection::vec(gtid_strategy(), 0..8)) {
            let mut pos = GtidPos::new();
            for g in &gtids {
                pos.update(*g);
            }
            let text = pos.to_string();
            let parsed: GtidPos = text.parse().unwrap();
            prop_assert_eq!(&parsed, &pos);
            prop_assert_eq!(parsed.to_string(), text.clone());
            // Whitespace around items is tolerated and dropped.
            let spaced = text.replace(',', " ,\n ");
            prop_assert_eq!(format!(" {spaced} ").parse::<GtidPos>().unwrap(), pos.clone());
            prop_assert_eq!(pos.compare(&pos), Some(Ordering::Equal));
        }

        #[test]
        fn prop_gtid_pos_compare_antisymmetric(
            a in prop::collection::btree_map(0u32..4, 0u64..4, 0..4),
            b in prop::collection::btree_map(0u32..4, 0u64..4, 0..4),
        ) {
            let build = |m: &BTreeMap<u32, u64>| {
                let mut p = GtidPos::new();
                for (&d, &n) in m {
                    p.update(Gtid::new(d, 1, n));
                }
                p
            };
            let (pa, pb) = (build(&a), build(&b));
            prop_assert_eq!(pa.compare(&pb), pb.compare(&pa).map(Ordering::reverse));
            if pa.compare(&pb) == Some(Ordering::Less) {
                for g in &pa {
                    prop_assert!(pb.contains(g));
                }
            }
        }

        #[test]
        fn prop_binlog_round_trip(
            base in "[A-Za-z0-9_][A-Za-z0-9_.:-]{0,15}",
            digits in "[0-9]{1,19}",
            offset in any::<u64>(),
        ) {
            let text = format!("{base}.{digits}:{offset}");
            let p: BinlogPosition = text.parse().unwrap();
            prop_assert_eq!(p.to_string(), text.clone());
            prop_assert_eq!(p.base_name(), base.as_str());
            prop_assert_eq!(p.file_index(), digits.parse::<u64>().unwrap());
            prop_assert_eq!(p.offset(), offset);
            prop_assert_eq!(p.to_string().parse::<BinlogPosition>().unwrap(), p.clone());
            let q = BinlogPosition::new(p.file(), offset).unwrap();
            prop_assert_eq!(q, p);
        }

        #[test]
        fn prop_binlog_order_and_rotation(
            i in 0u64..2_000_000, j in 0u64..2_000_000,
            wi in 1usize..8, wj in 1usize..8,
            oi in any::<u64>(), oj in any::<u64>(),
        ) {
            let a = bp(&format!("bin.{i:0wi$}:{oi}"));
            let b = bp(&format!("bin.{j:0wj$}:{oj}"));
            if (i, oi) != (j, oj) {
                prop_assert_eq!(a.cmp(&b), (i, oi).cmp(&(j, oj)));
            }
            let next = a.next_file_name().unwrap();
            let n = bp(&format!("{next}:4"));
            prop_assert_eq!(n.file_index(), i + 1);
            prop_assert!(next.len() >= a.file().len());
            prop_assert!(a.with_offset(u64::MAX) < n);
        }
    }
}
