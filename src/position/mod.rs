//! Positions and identifiers: [`Seqno`], [`Epoch`], [`ChannelId`],
//! [`BinlogPosition`], MariaDB [`Gtid`] / [`GtidPos`], and sets of seqnos
//! as ranges ([`SeqnoRanges`]).
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
//! - seqno ranges: `12,14-16,20`, the committed seqnos a restart row records
//!   above its low-water mark (shared/research/writeset.md §5).

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

    /// A [`SeqnoRanges`] text (`12,14-16`) is malformed.
    #[error("invalid seqno ranges {text:?}: {reason}")]
    InvalidSeqnoRanges {
        /// The whole text that failed to parse.
        text: String,
        /// The offending item and what was expected.
        reason: String,
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
                // Parsed from the deserializer's text in place (no String
                // in between: every queue record holds positions).
                struct Text;
                impl serde::de::Visitor<'_> for Text {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("the text of a ", stringify!($ty)))
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$ty, E> {
                        text.parse().map_err(E::custom)
                    }
                }
                deserializer.deserialize_string(Text)
            }
        }
    };
}

mod binlog;
mod channel;
mod gtid;
mod ranges;
mod seqno;
#[cfg(test)]
mod tests;

pub use binlog::*;
pub use channel::*;
pub use gtid::*;
pub use ranges::*;
pub use seqno::*;
