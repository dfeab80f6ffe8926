//! Channel assignment (`conf/shard.list`) and critical shards
//! (shared/DESIGN.md §2, §5).
//!
//! # Which channel
//!
//! [`ChannelAssignment::channel_of`] gives, for a shard:
//! 1. the channel of its explicit `shard=channel` line, else
//! 2. the `(*)=channel` default, when the list has one, else
//! 3. the fixed hash: `fnv1a64(shard.as_bytes()) % channels`.
//!
//! The hash is **FNV-1a, 64-bit** ([`fnv1a64`]) over the UTF-8 bytes of the
//! shard name, exactly as published by Fowler, Noll and Vo: start from the
//! offset basis `0xcbf29ce484222325`, and for each byte XOR it into the
//! state then multiply by the prime `0x100000001b3` (`2^40 + 2^8 + 0xb3`),
//! wrapping modulo 2^64. The result is taken modulo the channel count. It
//! does not depend on the process, platform, Rust version or build (never
//! std's `DefaultHasher`/`RandomState`), so a shard keeps its channel
//! across restarts as long as the channel count is unchanged; golden tests
//! pin it.
//!
//! # Critical shards
//!
//! A shard is critical ([`ChannelAssignment::is_critical`]) when it is
//! `#UNKNOWN`, is named in a `(critical)=` line, or has `critical = true`
//! in the shard map. A critical transaction runs alone, after every channel
//! has drained (DESIGN §4).
//!
//! # `shard.list` format
//!
//! ```text
//! # comment
//! acme=0
//! pinnacle = 1
//! (*)=3
//! (critical)=billing, ledger
//! ```
//! - Lines whose first character other than spaces and tabs is `#` are
//!   comments; blank lines are ignored.
//! - `shard=channel` pins a shard to a channel; `(*)=channel` is the
//!   default for unlisted shards (absent: the hash); `(critical)=a,b,...`
//!   adds critical shards (may be repeated). Spaces and tabs around names,
//!   numbers and `=` are ignored. A shard name cannot contain `=` and
//!   cannot start with `#` (such a line is a comment), so `#UNKNOWN` cannot
//!   be pinned (it is critical anyway).
//! - A channel is a decimal number below the channel count (`[apply]
//!   channels`). A shard may be pinned once and `(*)` given once.
//!
//! Loading checks every line and rejects the whole list with every bad line
//! listed ([`ShardListError::Invalid`]).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::map::{check_shard_id, ShardMap};
use super::{LineProblem, ProblemLines};
use crate::config::ApplyConfig;
use crate::event::UNKNOWN_SHARD;
use crate::position::ChannelId;

/// FNV-1a 64-bit offset basis.
pub const FNV1A64_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64-bit prime, `2^40 + 2^8 + 0xb3`.
pub const FNV1A64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit hash of `bytes` (see the module doc).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV1A64_OFFSET_BASIS, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(FNV1A64_PRIME)
    })
}

/// The hashed channel of `shard` among `channels` channels:
/// `fnv1a64(shard's UTF-8 bytes) % channels`.
///
/// # Panics
/// When `channels` is 0.
pub fn hash_channel(shard: &str, channels: u16) -> u16 {
    assert!(channels > 0, "channel count must be at least 1");
    (fnv1a64(shard.as_bytes()) % u64::from(channels)) as u16
}

/// Why a `shard.list` could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ShardListError {
    /// The file could not be read.
    #[error("{}: cannot read shard list: {cause}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The channel count is 0.
    #[error("channel count must be at least 1")]
    NoChannels,
    /// The list has bad lines. Displays as `ORIGIN: invalid shard list:`
    /// followed by one `\n  line N: message` per problem, in line order.
    #[error("{origin}: invalid shard list:{}", ProblemLines(problems))]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// Every problem found, in line order.
        problems: Vec<LineProblem>,
    },
}

/// How [`ChannelAssignment::assignment_of`] chose a shard's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignedBy {
    /// A `shard=channel` line.
    Explicit,
    /// The `(*)=channel` default.
    Default,
    /// The FNV-1a hash.
    Hash,
}

/// The channel assignment of one service: channel count, explicit
/// `shard=channel` entries, the `(*)` default, the `(critical)` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelAssignment {
    channels: u16,
    explicit: BTreeMap<String, u16>,
    default: Option<u16>,
    critical: BTreeSet<String>,
}

impl ChannelAssignment {
    /// No list: every shard by the hash, no critical shard but `#UNKNOWN`
    /// (and the map's).
    ///
    /// # Errors
    /// [`ShardListError::NoChannels`] when `channels` is 0.
    pub fn hashed(channels: u16) -> Result<Self, ShardListError> {
        if channels == 0 {
            return Err(ShardListError::NoChannels);
        }
        Ok(ChannelAssignment {
            channels,
            explicit: BTreeMap::new(),
            default: None,
            critical: BTreeSet::new(),
        })
    }

    /// The assignment `[apply]` configures: its `shard_list` file when set,
    /// else [`ChannelAssignment::hashed`], for `channels` channels.
    ///
    /// # Errors
    /// As [`ChannelAssignment::load`].
    pub fn from_config(apply: &ApplyConfig) -> Result<Self, ShardListError> {
        match &apply.shard_list {
            Some(path) => ChannelAssignment::load(path, apply.channels),
            None => ChannelAssignment::hashed(apply.channels),
        }
    }

    /// Reads and parses a `shard.list` file for `channels` channels.
    ///
    /// # Errors
    /// [`ShardListError::Read`], [`ShardListError::NoChannels`], or
    /// [`ShardListError::Invalid`] naming the file and every bad line.
    pub fn load(path: impl AsRef<Path>, channels: u16) -> Result<Self, ShardListError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ShardListError::Read {
            file: path.to_path_buf(),
            cause: source,
        })?;
        ChannelAssignment::parse(&text, channels, &path.display().to_string())
    }

    /// Parses a `shard.list` text (format in the module doc) for `channels`
    /// channels; `origin` names the text in errors.
    ///
    /// # Errors
    /// [`ShardListError::NoChannels`] when `channels` is 0;
    /// [`ShardListError::Invalid`] listing every bad line.
    pub fn parse(text: &str, channels: u16, origin: &str) -> Result<Self, ShardListError> {
        let mut list = ChannelAssignment::hashed(channels)?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut problems = Vec::new();
        let mut explicit_line: BTreeMap<String, usize> = BTreeMap::new();
        let mut default_line: Option<usize> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim_matches([' ', '\t']);
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let mut problem = |message: String| problems.push(LineProblem::new(line, message));
            let Some((key, value)) = trimmed.split_once('=') else {
                problem(format!(
                    "expected shard=channel, (*)=channel or (critical)=shard,... , found {trimmed:?}"
                ));
                continue;
            };
            let key = key.trim_matches([' ', '\t']);
            let value = value.trim_matches([' ', '\t']);
            match key {
                "(*)" => {
                    let channel = channel_number(value, channels);
                    if let Some(first) = default_line {
                        problem(format!("(*) given twice (first on line {first})"));
                    } else {
                        default_line = Some(line);
                    }
                    match channel {
                        Ok(c) => list.default = list.default.or(Some(c)),
                        Err(m) => problem(m),
                    }
                }
                "(critical)" => {
                    for name in value.split(',').map(|n| n.trim_matches([' ', '\t'])) {
                        if name.is_empty() {
                            problem("empty shard name in the (critical) list".into());
                        } else if let Err(m) = check_shard_id(name) {
                            problem(m);
                        } else {
                            list.critical.insert(name.to_string());
                        }
                    }
                }
                _ if key.starts_with('(') => {
                    problem(format!(
                        "unknown directive {key} (expected (*) or (critical))"
                    ));
                }
                "" => problem("missing shard name before '='".into()),
                _ => {
                    let channel = channel_number(value, channels);
                    if let Err(m) = check_shard_id(key) {
                        problem(m);
                        continue;
                    }
                    match explicit_line.entry(key.to_string()) {
                        Entry::Occupied(o) => problem(format!(
                            "shard {key:?} assigned twice (first on line {})",
                            o.get()
                        )),
                        Entry::Vacant(v) => {
                            v.insert(line);
                            match channel {
                                Ok(c) => {
                                    list.explicit.insert(key.to_string(), c);
                                }
                                Err(m) => problem(m),
                            }
                        }
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(list)
        } else {
            Err(ShardListError::Invalid {
                origin: origin.to_string(),
                problems,
            })
        }
    }

    /// The channel count.
    pub fn channel_count(&self) -> u16 {
        self.channels
    }

    /// The channel of `shard`: explicit entry, else `(*)`, else hash.
    pub fn channel_of(&self, shard: &str) -> ChannelId {
        self.assignment_of(shard).0
    }

    /// The channel of `shard` and which rule chose it.
    pub fn assignment_of(&self, shard: &str) -> (ChannelId, AssignedBy) {
        let (n, by) = if let Some(&c) = self.explicit.get(shard) {
            (c, AssignedBy::Explicit)
        } else if let Some(c) = self.default {
            (c, AssignedBy::Default)
        } else {
            (hash_channel(shard, self.channels), AssignedBy::Hash)
        };
        let id = ChannelId::new(n, self.channels).expect("channels checked at load");
        (id, by)
    }

    /// Whether `shard` is critical: `#UNKNOWN`, listed in `(critical)`, or
    /// `critical = true` in `map`.
    pub fn is_critical(&self, shard: &str, map: &ShardMap) -> bool {
        self.is_listed_critical(shard) || map.is_critical(shard)
    }

    /// Whether `shard` is `#UNKNOWN` or listed in `(critical)` (the map not
    /// consulted).
    pub fn is_listed_critical(&self, shard: &str) -> bool {
        shard == UNKNOWN_SHARD || self.critical.contains(shard)
    }

    /// The explicit `shard=channel` entries.
    pub fn explicit(&self) -> impl Iterator<Item = (&str, ChannelId)> {
        self.explicit.iter().map(|(s, &c)| {
            (
                s.as_str(),
                ChannelId::new(c, self.channels).expect("checked"),
            )
        })
    }

    /// The `(*)` default channel, if any.
    pub fn default_channel(&self) -> Option<ChannelId> {
        self.default
            .map(|c| ChannelId::new(c, self.channels).expect("checked"))
    }

    /// The shards of the `(critical)` lines.
    pub fn listed_critical(&self) -> impl Iterator<Item = &str> {
        self.critical.iter().map(String::as_str)
    }
}

/// Parses a channel number and checks it against the count.
fn channel_number(text: &str, channels: u16) -> Result<u16, String> {
    let n = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>().unwrap_or(u64::MAX)
    } else {
        return Err(format!("channel {text:?} is not a number"));
    };
    if n < u64::from(channels) {
        Ok(n as u16)
    } else {
        Err(format!(
            "channel {n} is out of range: {channels} channels are numbered 0 to {}",
            channels - 1
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::map::{Master, ShardEntry};
    use proptest::prelude::*;

    #[test]
    fn fnv1a64_reference_vectors() {
        // From the FNV reference test suite (Landon Curt Noll).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Golden table: shard → FNV-1a 64 → channel for 1, 2, 8 and 30
    /// channels (values cross-checked with an independent implementation). These
    /// values are part of the on-disk contract (a changed value moves a
    /// shard to another channel): never update them without a migration.
    #[test]
    fn golden_hash_channels() {
        let golden: &[(&str, u64, [u16; 4])] = &[
            ("", 0xcbf2_9ce4_8422_2325, [0, 1, 5, 17]),
            ("acme", 0x0724_d383_f4f6_de0f, [0, 1, 7, 17]),
            ("Acme", 0x84d1_d48b_0b85_7def, [0, 1, 7, 15]),
            ("pinnacle", 0x574d_d35d_7bfe_9b85, [0, 1, 5, 23]),
            ("superior", 0x6186_5c75_4c49_873e, [0, 0, 6, 6]),
            ("billing", 0x4005_5702_95af_d25c, [0, 0, 4, 4]),
            ("sb01", 0xf09f_ff18_b1d1_b853, [0, 1, 3, 11]),
            ("sb02", 0xf0a0_0018_b1d1_ba06, [0, 0, 6, 12]),
            ("sb03", 0xf0a0_0118_b1d1_bbb9, [0, 1, 1, 13]),
            ("sb04", 0xf0a0_0218_b1d1_bd6c, [0, 0, 4, 14]),
            ("sb05", 0xf0a0_0318_b1d1_bf1f, [0, 1, 7, 15]),
            ("sb06", 0xf0a0_0418_b1d1_c0d2, [0, 0, 2, 16]),
            ("sb07", 0xf0a0_0518_b1d1_c285, [0, 1, 5, 17]),
            ("sb08", 0xf0a0_0618_b1d1_c438, [0, 0, 0, 18]),
            ("ünïcødé", 0x7fe9_369f_83b5_96a0, [0, 0, 0, 10]),
            ("#UNKNOWN", 0xef74_b828_cf2e_2a30, [0, 0, 0, 22]),
        ];
        let counts = [1u16, 2, 8, 30];
        let mut mismatches = Vec::new();
        for (name, hash, expected) in golden {
            assert_eq!(fnv1a64(name.as_bytes()), *hash, "hash of {name:?}");
            let got = counts.map(|c| hash_channel(name, c));
            if got != *expected {
                mismatches.push(format!("{name:?}: {got:?}"));
            }
        }
        assert!(mismatches.is_empty(), "{mismatches:#?}");
    }

    #[test]
    fn repo_shard_list_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/shard.list");
        let list = ChannelAssignment::load(path, 8).unwrap();
        assert_eq!(list.channel_of("acme").get(), 0);
        assert_eq!(list.channel_of("pinnacle").get(), 1);
        assert_eq!(
            list.assignment_of("other"),
            (
                ChannelId::new(hash_channel("other", 8), 8).unwrap(),
                AssignedBy::Hash
            )
        );
        let map = ShardMap::new();
        assert!(list.is_critical("billing", &map));
        assert!(list.is_critical(UNKNOWN_SHARD, &map));
        assert!(!list.is_critical("acme", &map));
        // With one channel, acme=0 and pinnacle=1: channel 1 is out of range
        // (the file's first line with a channel above 0).
        let line = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .position(|l| !l.starts_with('#') && l.trim_end().ends_with("=1"))
            .unwrap()
            + 1;
        let e = ChannelAssignment::load(path, 1).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!(
                "invalid shard list:\n  line {line}: channel 1 is out of range: 1 channels are \
                 numbered 0 to 0"
            )),
            "{e}"
        );
    }

    #[test]
    fn explicit_then_default_then_hash() {
        let list = ChannelAssignment::parse("a=2\n(*)=5\n", 8, "t").unwrap();
        assert_eq!(
            list.assignment_of("a"),
            (ChannelId::new(2, 8).unwrap(), AssignedBy::Explicit)
        );
        assert_eq!(
            list.assignment_of("b"),
            (ChannelId::new(5, 8).unwrap(), AssignedBy::Default)
        );
        assert_eq!(list.default_channel(), Some(ChannelId::new(5, 8).unwrap()));
        let list = ChannelAssignment::parse("", 8, "t").unwrap();
        assert_eq!(list, ChannelAssignment::hashed(8).unwrap());
        assert_eq!(list.assignment_of("b").1, AssignedBy::Hash);
    }

    #[test]
    fn critical_from_list_map_and_unknown() {
        let list = ChannelAssignment::parse("(critical)=a, b\n(critical)= c\n", 4, "t").unwrap();
        let mut map = ShardMap::new();
        map.insert(ShardEntry::new("m", Master::Local, true).unwrap())
            .unwrap();
        map.insert(ShardEntry::new("n", Master::Local, false).unwrap())
            .unwrap();
        for shard in ["a", "b", "c", "m", UNKNOWN_SHARD] {
            assert!(list.is_critical(shard, &map), "{shard}");
        }
        for shard in ["n", "d", ""] {
            assert!(!list.is_critical(shard, &map), "{shard}");
        }
        assert_eq!(list.listed_critical().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(list.is_listed_critical(UNKNOWN_SHARD));
        assert!(!list.is_listed_critical("m"));
    }

    #[test]
    fn every_bad_line_is_listed() {
        let text = "# comment\n\
                    a=1\n\
                    a=2\n\
                    b=8\n\
                    c=x\n\
                    \n\
                    (*)=0\n\
                    (*)=9\n\
                    (critical)=d,,e\n\
                    (foo)=1\n\
                    =3\n\
                    no equals sign\n\
                    #x=1\n\
                    d = -1\n";
        let e = ChannelAssignment::parse(text, 8, "shard.list").unwrap_err();
        assert_eq!(
            e.to_string(),
            "shard.list: invalid shard list:\n  \
             line 3: shard \"a\" assigned twice (first on line 2)\n  \
             line 4: channel 8 is out of range: 8 channels are numbered 0 to 7\n  \
             line 5: channel \"x\" is not a number\n  \
             line 8: (*) given twice (first on line 7)\n  \
             line 8: channel 9 is out of range: 8 channels are numbered 0 to 7\n  \
             line 9: empty shard name in the (critical) list\n  \
             line 10: unknown directive (foo) (expected (*) or (critical))\n  \
             line 11: missing shard name before '='\n  \
             line 12: expected shard=channel, (*)=channel or (critical)=shard,... , found \"no equals sign\"\n  \
             line 14: channel \"-1\" is not a number"
        );
    }

    #[test]
    fn zero_channels_is_an_error() {
        assert!(matches!(
            ChannelAssignment::hashed(0),
            Err(ShardListError::NoChannels)
        ));
        assert!(matches!(
            ChannelAssignment::parse("a=0", 0, "t"),
            Err(ShardListError::NoChannels)
        ));
    }

    #[test]
    fn from_config_without_a_list_hashes() {
        let apply = ApplyConfig::default();
        let list = ChannelAssignment::from_config(&apply).unwrap();
        assert_eq!(list.channel_count(), apply.channels);
        assert_eq!(list.explicit().count(), 0);
    }

    fn shard_name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_][a-z0-9_]{0,20}",
            any::<String>().prop_map(|s| s.chars().take(64).collect()),
        ]
    }

    proptest! {
        #[test]
        fn assignment_is_deterministic_and_in_range(
            name in shard_name(),
            channels in 1u16..=256,
        ) {
            let a = ChannelAssignment::hashed(channels).unwrap();
            let b = ChannelAssignment::hashed(channels).unwrap();
            let c = a.channel_of(&name);
            prop_assert_eq!(c, b.channel_of(&name));
            prop_assert!(c.get() < channels);
            prop_assert_eq!(c.get(), hash_channel(&name, channels));
            prop_assert_eq!(u64::from(c.get()), fnv1a64(name.as_bytes()) % u64::from(channels));
        }

        #[test]
        fn explicit_entries_win_over_default_and_hash(
            pinned in "[a-z][a-z0-9_]{0,12}",
            other in "[a-z][a-z0-9_]{0,12}",
            channels in 1u16..=64,
            pin in 0u16..64,
            default in proptest::option::of(0u16..64),
        ) {
            let pin = pin % channels;
            let mut text = format!("{pinned}={pin}\n");
            if let Some(d) = default {
                text.push_str(&format!("(*)={}\n", d % channels));
            }
            let list = ChannelAssignment::parse(&text, channels, "t").unwrap();
            let again = ChannelAssignment::parse(&text, channels, "t").unwrap();
            prop_assert_eq!(list.assignment_of(&pinned), (ChannelId::new(pin, channels).unwrap(), AssignedBy::Explicit));
            if other != pinned {
                let expected = match default {
                    Some(d) => (d % channels, AssignedBy::Default),
                    None => (hash_channel(&other, channels), AssignedBy::Hash),
                };
                prop_assert_eq!(list.assignment_of(&other), (ChannelId::new(expected.0, channels).unwrap(), expected.1));
            }
            prop_assert_eq!(list.channel_of(&other), again.channel_of(&other));
            prop_assert!(list.channel_of(&other).get() < channels);
        }
    }
}
