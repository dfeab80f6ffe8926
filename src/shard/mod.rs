//! Shards: shard.map, the shard filter and channel assignment
//! (shared/DESIGN.md §2, §4, §5; issue 5).
//!
//! A **shard** is the schema a transaction touches, or
//! [`UNKNOWN_SHARD`](crate::event::UNKNOWN_SHARD) when it touches none, two
//! or more, or cannot be attributed. Parallel apply is safe because every
//! transaction of one shard is applied, in the master's commit order, by one
//! channel. This module holds the rules that decide, per transaction:
//!
//! - [`statement`]: which shard a statement (Query event) belongs to; the
//!   extractor's [`shard_of`](crate::extractor::assemble::shard_of) uses it
//!   for statements and the table schema for row changes;
//! - [`map`]: the shard map (`shard.map`): which service masters each shard
//!   (or `#LOCAL`), and which shards are critical; parsed, written back out
//!   and edited live;
//! - [`filter`]: whether a transaction is applied at all ([`ShardFilter`]:
//!   home-master enforcement, `#LOCAL`, unknown shards, the catalog schema);
//! - [`channel`]: on which channel it is applied, and whether it is critical
//!   ([`ChannelAssignment`], `conf/shard.list`, a fixed FNV-1a hash).
//! - [`foreign_keys`]: which shards foreign keys on the replica join, so
//!   that they share one channel ([`ForeignKeyGroups`]).
//! - [`live`]: the map a service and its running router hand each other
//!   (the DBA's edits, the auto-created shards).
//! - [`writeset`]: the dependency keys of a transaction, from its row
//!   images and the replica's key metadata ([`Writesets`]), for
//!   parallelism inside a shard.
//!
//! The loaders of `shard.map` and `conf/shard.list` reject a file with every
//! bad line listed ([`LineProblem`]), never the first one only.

use std::fmt;

use crate::catalog;

pub mod channel;
pub mod filter;
pub mod foreign_keys;
pub mod live;
pub mod map;
pub mod statement;
pub mod store;
pub mod temp_tables;
pub mod writeset;

pub use channel::{fnv1a64, hash_channel, AssignedBy, ChannelAssignment, ShardListError};
pub use filter::{Decision, Reason, Rejected, Rule, ShardFilter};
pub use foreign_keys::{ForeignKey, ForeignKeyGroups, ShardGroup};
pub use map::{Master, ShardEditError, ShardEntry, ShardMap, ShardMapError};
pub use statement::{is_transaction_control, statement_shard};
pub use writeset::{Fallback, Key, TableKeys, Writeset, WritesetError, Writesets};

/// Whether `schema`.`table` is a shardrep restart table: the table
/// [`catalog::RESTART_TABLE`] in a schema named `shardrep_<anything>`
/// ([`catalog::PREFIX`]). Another service's applier writes its
/// restart rows in the same transaction as the data it applies, so with
/// `replica.sql_log_bin = true` they reach the binlog that transaction is
/// read from: they never make a transaction's shard (the extractor's
/// [`shard_of`](crate::extractor::assemble::shard_of) skips them) and no
/// channel applies them (they belong to the other service's replica).
/// Only the restart table counts, so a user schema that happens to start
/// with `shardrep_` is a shard like any other.
pub fn is_catalog_table(schema: &str, table: &str) -> bool {
    schema.starts_with(catalog::PREFIX) && table == catalog::RESTART_TABLE
}

/// One problem on one line of a `shard.map` or `shard.list` text.
///
/// Displays as `line N: message`; `N` counts from 1 and counts every line
/// of the text, comments and blank lines included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    /// 1-based line number in the text.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl LineProblem {
    /// A problem on `line` (1-based).
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        LineProblem {
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Displays problems one per line, each as `\n  line N: message`.
pub(crate) struct ProblemLines<'a>(pub(crate) &'a [LineProblem]);

impl fmt::Display for ProblemLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}
