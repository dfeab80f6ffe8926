//! `[apply] parallelism = "row"` in the scheduler: the writesets of the
//! transactions ([`crate::shard::writeset`]), kept current after DDL, the
//! wait for dependencies on several channels, and the counters status
//! shows.
//!
//! Rules (module doc of [`super`], issue 16):
//! - a transaction whose writeset holds
//!   [`Key::Global`](crate::shard::writeset::Key::Global) (a table with
//!   triggers) runs alone behind a barrier, as a critical shard's;
//! - a DDL transaction runs on its shard's own channel (the router's),
//!   after every conflicting transaction on other channels has committed:
//!   so a restart finds a DDL that may have run on the channel whose
//!   restart row marked it (`ddl_seqno`), whatever the assignment of the
//!   rest;
//! - every other transaction is placed by [`Placer`] (its dependencies'
//!   channel, else its shard's own channel unless that one is a block
//!   ahead of the least loaded, else the least loaded), waiting while its
//!   conflicting work is live on two or more channels;
//! - after a DDL (any transaction with a statement that commits
//!   implicitly) the scheduler waits for it to commit and reads its
//!   schema's key metadata again before it computes the next writeset.

use std::sync::atomic::{AtomicU64, Ordering};

use super::placement::Placer;
use crate::applier::progress::Progress;
use crate::event::{Change, Transaction};
use crate::position::{ChannelId, Seqno};
use crate::shard::statement::leading_verb;
use crate::shard::writeset::{Fallback, Writesets};

/// Reads the key metadata again: of one schema (`Some`), or of all
/// (`None`, after a DDL of no single shard). Errors are messages naming
/// what could not be read.
pub type WritesetReader = Box<dyn FnMut(&mut Writesets, Option<&str>) -> Result<(), String> + Send>;

/// The key metadata of the replica's tables and how to read it again.
pub struct RowKeys {
    /// The metadata the writesets are computed from.
    pub writesets: Writesets,
    /// Reads it again after DDL.
    pub reader: WritesetReader,
}

impl RowKeys {
    /// Reads `shard`'s metadata again (`None`: every schema).
    ///
    /// # Errors
    /// The reader's message.
    pub fn reload(&mut self, shard: Option<&str>) -> Result<(), String> {
        (self.reader)(&mut self.writesets, shard)
    }
}

/// What row parallelism counts (status).
#[derive(Debug, Default)]
pub struct RowCounters {
    /// Transactions that waited because their dependencies were live on
    /// two or more channels (or, for DDL, on another channel than its own).
    pub dependency_waits: AtomicU64,
    /// Transactions whose writeset fell back to a coarser key, per reason
    /// ([`Fallback::ALL`] order); a transaction counts once per reason.
    pub fallbacks: [AtomicU64; Fallback::ALL.len()],
    /// Transactions sent to channels and not yet committed, as of the last
    /// placement or the last poll that found no transaction.
    pub in_flight: AtomicU64,
    /// Keys of in-flight transactions the scheduler holds.
    pub keys_held: AtomicU64,
}

impl RowCounters {
    /// Counts `fallbacks` (each reason once).
    pub fn count_fallbacks(&self, fallbacks: &[Fallback]) {
        for f in fallbacks {
            if let Some(i) = Fallback::ALL.iter().position(|x| x == f) {
                self.fallbacks[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Logs the counters (at a clean stop).
    pub fn log_summary(&self) {
        let fallbacks: Vec<String> = self
            .fallback_counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| format!("{f}={n}"))
            .collect();
        tracing::info!(
            dependency_waits = self.dependency_waits.load(Ordering::Relaxed),
            fallbacks = %fallbacks.join(","),
            "row parallelism: transactions that waited for dependencies on two or more \
             channels, and writesets that fell back to coarser keys"
        );
    }

    /// `(reason, count)` for every reason, in [`Fallback::ALL`] order.
    pub fn fallback_counts(&self) -> Vec<(Fallback, u64)> {
        Fallback::ALL
            .iter()
            .zip(&self.fallbacks)
            .map(|(f, n)| (*f, n.load(Ordering::Relaxed)))
            .collect()
    }
}

/// Whether `txn` holds a statement that commits implicitly (DDL): the
/// applier runs it alone and marks it started
/// ([`crate::shard::statement::Verb::commits_implicitly`]).
pub fn is_ddl(txn: &Transaction) -> bool {
    txn.changes.iter().any(|c| match c {
        Change::Statement(s) => leading_verb(&s.sql).commits_implicitly(),
        _ => false,
    })
}

/// The channel for a transaction with `keys` of a shard whose own channel
/// is `home`: its dependencies' channel (or, independent, `home` or the
/// least loaded: [`Placer`]), or `target` when given (a DDL's own
/// channel), waiting for commits as the module doc says. Returns `None`
/// when a channel failed during the wait (the error is in `progress`).
pub fn place(
    placer: &mut Placer,
    keys: &[crate::shard::writeset::Key],
    home: ChannelId,
    target: Option<ChannelId>,
    progress: &Progress,
    counters: &RowCounters,
) -> Option<ChannelId> {
    let committed = |c: ChannelId| progress.committed(c.index());
    let mut waited = false;
    loop {
        let placed = placer.place(keys, Some(home), &committed);
        let chosen = match target {
            None => placed,
            Some(t) => {
                let others = placer
                    .conflicts()
                    .live_channels(&committed)
                    .filter(|c| *c != t)
                    .count();
                (others == 0).then_some(t)
            }
        };
        if let Some(channel) = chosen {
            return Some(channel);
        }
        if !waited {
            waited = true;
            counters.dependency_waits.fetch_add(1, Ordering::Relaxed);
        }
        let conflicts = placer.conflicts().clone();
        let done = progress.wait_until(|p| {
            let committed = |c: ChannelId| p.committed(c.index());
            let mut live = conflicts.live_channels(&committed);
            match target {
                None => live.nth(1).is_none(),
                Some(t) => live.all(|c| c == t),
            }
        });
        if !done {
            return None;
        }
    }
}

/// Records, after a placement (and while idle), the in-flight figures
/// status shows.
pub fn note_in_flight(
    placer: &mut Placer,
    progress: &Progress,
    counters: &RowCounters,
    channels: usize,
) {
    let in_flight: usize = (0..channels)
        .map(|c| placer.load(ChannelId::recorded(c as u16), progress.committed(c)))
        .sum();
    counters
        .in_flight
        .store(in_flight as u64, Ordering::Relaxed);
    counters
        .keys_held
        .store(placer.keys_held() as u64, Ordering::Relaxed);
}

/// A DDL sent in row mode: the scheduler waits for it to commit on
/// `channel`, then reads `shard`'s key metadata again (`None`: all).
#[derive(Clone, Debug)]
pub struct ReloadAfter {
    /// The DDL's seqno.
    pub seqno: Seqno,
    /// Its channel.
    pub channel: ChannelId,
    /// Its shard; `None` for [`crate::event::UNKNOWN_SHARD`].
    pub shard: Option<String>,
}

impl ReloadAfter {
    /// After DDL transaction `txn`, sent to `channel`.
    pub fn of(txn: &Transaction, channel: ChannelId) -> ReloadAfter {
        ReloadAfter {
            seqno: txn.seqno,
            channel,
            shard: (txn.shard != crate::event::UNKNOWN_SHARD).then(|| txn.shard.clone()),
        }
    }
}
