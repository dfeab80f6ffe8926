//! [`ChannelId`]: an apply channel's number below the channel count.

use super::*;

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

    /// Channel 0, which every configuration has (at least one channel).
    pub const FIRST: ChannelId = ChannelId(0);

    /// Channel `n` as it was recorded (a restart row's `channel` column),
    /// not checked against a channel count: the count may have changed
    /// since (as with deserializing).
    pub const fn recorded(n: u16) -> Self {
        ChannelId(n)
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
