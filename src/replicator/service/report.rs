//! What the [`Service`](super::Service) reports: its status and the
//! outcome of a handback or reset, as typed values. The control layer
//! turns them into the protocol's results (trepctl's field names, JSON).

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::applier::work::ShardApplied;
use crate::config::{Parallelism, Role};
use crate::position::{ChannelId, Seqno};
use crate::replica::HandbackPoint;
use crate::replicator::state::{PendingError, State};
use crate::scheduler::row::RowCounters;
use crate::shard::writeset::Fallback;

/// The service as `status` shows it. Cheap to take: counters and the last
/// restart rows, no database round trip.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSnapshot {
    /// `service.name` of the configuration.
    pub service_name: String,
    /// `service.role` of the configuration.
    pub role: Role,
    /// The current state.
    pub state: State,
    /// The highest seqno every channel has committed (the minimum of the
    /// restart rows, or of the running channels' progress).
    pub applied_last_seqno: Option<Seqno>,
    /// The binlog position (`file:pos`) after that transaction.
    pub applied_last_event_id: Option<String>,
    /// Seconds from the master's commit to the replica's commit of that
    /// transaction (while a run applies).
    pub applied_latency: Option<f64>,
    /// Seconds from the master's commit of the newest applied transaction
    /// to now (while a run applies).
    pub relative_latency: Option<f64>,
    /// The number of apply channels.
    pub channels: u16,
    /// Barriers taken since the service started.
    pub serialization_count: u64,
    /// Transactions that waited at the commit window
    /// (`[apply] commit_window_seqnos`) since the service started.
    pub window_wait_count: u64,
    /// Transactions dropped by the shard filter since the service started.
    pub dropped_count: u64,
    /// Seqnos recorded as skipped at the DBA's request.
    pub skipped_count: u64,
    /// Those seqnos as sorted ranges of consecutive seqnos.
    pub skipped_seqnos: Vec<RangeInclusive<u64>>,
    /// Temporary tables of master sessions open on the replica.
    pub open_temp_tables: u64,
    /// `[apply] parallelism` of the configuration.
    pub parallelism: Parallelism,
    /// `[apply] method` of the configuration.
    pub apply_method: crate::config::ApplyMethod,
    /// `[replica] binlog_gtids` as the last run resolved it (`"auto"`
    /// until one has read the replica's settings).
    pub binlog_gtids: crate::config::BinlogGtids,
    /// `[replica] binlog_gtids` as configured (`"auto"` stays `"auto"`).
    pub binlog_gtids_configured: crate::config::BinlogGtids,
    /// Row parallelism since the service started: transactions that
    /// waited for their dependencies, and per reason those whose writeset
    /// fell back to a coarser key; of the running run, what is in flight.
    pub row: RowStatus,
    /// The lowest seqno in the queue.
    pub minimum_stored_seqno: Option<Seqno>,
    /// The highest seqno in the queue (the last extracted).
    pub maximum_stored_seqno: Option<Seqno>,
    /// The error of `OFFLINE:ERROR`.
    pub pending_error: Option<PendingError>,
    /// The pending `online --until-seqno`.
    pub until_seqno: Option<u64>,
    /// The pending `offline --at-seqno`.
    pub offline_at_seqno: Option<u64>,
    /// Whether the last offline ended with every restart row at the same
    /// seqno; `None` unless the service is offline.
    pub last_offline_clean: Option<bool>,
    /// Time since the service started.
    pub uptime: Duration,
    /// Time since the last state change.
    pub time_in_state: Duration,
    /// What the channels applied since the service started.
    pub applied: ApplyTotals,
    /// Where the master is and how far behind the service is
    /// ([`super::lag`]); `None` without a live source or before the first
    /// look at the master.
    pub lag: Option<super::lag::Lag>,
    /// The source master in use (host and port): the one a switch
    /// (`source set`) stored, else the configuration's; `None` for a
    /// binlog-directory source.
    pub source: Option<(String, u16)>,
    /// When the source was switched to (UTC); `None`: the
    /// configuration's source.
    pub source_switched_at: Option<String>,
    /// A switch of the source that a stop of shardrep interrupted and the
    /// restart could not finish: its target and the error; `online` is
    /// refused while it is there.
    pub source_switch_unfinished: Option<String>,
    /// The switch of the source under way: `to HOST:PORT`.
    pub source_switch_under_way: Option<String>,
    /// The first seqno read from the switched-to source: the event ids of
    /// lower seqnos are binlog positions of the previous master; `None`
    /// when no switch happened with transactions queued.
    pub source_first_seqno: Option<Seqno>,
}

/// What row parallelism (`[apply] parallelism = "row"`) did, for status;
/// all zero under `"shard"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowStatus {
    /// Transactions held back because the work they depend on was in
    /// flight on two or more channels (a DDL: on another channel than its
    /// own), since the service started.
    pub dependency_waits: u64,
    /// Per reason, in [`Fallback::ALL`] order, the transactions whose
    /// writeset fell back to a coarser key, since the service started (a
    /// transaction counts once per reason).
    pub fallbacks: [u64; Fallback::ALL.len()],
    /// Transactions sent to channels and not yet seen committed, as of the
    /// running run's last placement or idle poll (0 without a run).
    pub in_flight: u64,
    /// Writeset keys the row scheduler holds, as of the same moment (of
    /// in-flight transactions, and of committed ones until pruned).
    pub keys_held: u64,
}

impl RowStatus {
    /// Adds the cumulative counters of `counters` (waits and fallbacks);
    /// the in-flight figures are the running run's, not summed.
    pub fn add(&mut self, counters: &RowCounters) {
        self.dependency_waits += counters.dependency_waits.load(Ordering::Relaxed);
        for (total, n) in self.fallbacks.iter_mut().zip(&counters.fallbacks) {
            *total += n.load(Ordering::Relaxed);
        }
    }

    /// `(reason, count)` for every reason with a non-zero count, in
    /// [`Fallback::ALL`] order.
    pub fn fallback_counts(&self) -> impl Iterator<Item = (Fallback, u64)> + '_ {
        Fallback::ALL
            .iter()
            .zip(self.fallbacks)
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| (*f, n))
    }
}

/// What the channels applied since the service started: the runs that
/// ended plus the running one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyTotals {
    /// Transactions committed on the replica.
    pub transactions: u64,
    /// Their row changes (row image pairs).
    pub row_changes: u64,
    /// Blocks committed (replica transactions of one or more source
    /// transactions each).
    pub blocks: u64,
    /// Transient errors retried, per server error code (0: a connection
    /// or driver error without one).
    pub retries: std::collections::BTreeMap<u16, u64>,
    /// Blocks whose outcome was unknown after a lost connection and whose
    /// restart row showed them committed (counted once, not applied
    /// again).
    pub unknown_outcome_committed: u64,
    /// Those whose restart row showed them not committed (applied again).
    pub unknown_outcome_reapplied: u64,
    /// Runs ended by an error (`OFFLINE:ERROR`), per server error code (0:
    /// an error without one).
    pub errors: std::collections::BTreeMap<u32, u64>,
}

impl ApplyTotals {
    /// Adds what `progress` counted in its run.
    pub fn add(&mut self, progress: &crate::applier::progress::Progress) {
        self.transactions += progress.applied_total();
        self.row_changes += progress.rows_applied();
        self.blocks += progress.blocks_committed();
        for (code, n) in progress.retries_by_code() {
            *self.retries.entry(code).or_default() += n;
        }
        let (committed, reapplied) = progress.unknown_outcomes();
        self.unknown_outcome_committed += committed;
        self.unknown_outcome_reapplied += reapplied;
    }

    /// Every retry, whatever its code.
    pub fn retry_count(&self) -> u64 {
        self.retries.values().sum()
    }
}

/// One channel as `status --name channels` shows it: its marker of the
/// running run, else its restart row.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSnapshot {
    /// The channel, 0..N-1.
    pub channel: u16,
    /// The seqno it last committed.
    pub applied_last_seqno: Option<Seqno>,
    /// That transaction's binlog position (`file:pos`).
    pub applied_last_event_id: Option<String>,
    /// Seconds, master commit to replica commit, of that transaction
    /// (known while a run applies).
    pub applied_latency: Option<f64>,
    /// Transactions the channel committed in the running run.
    pub applied_count: u64,
    /// The shard of that transaction.
    pub shard_id: Option<String>,
}

/// One shard as `status --name shards` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardSnapshot {
    /// The shard id.
    pub shard_id: String,
    /// The channel its transactions are applied on (its foreign-key
    /// group's, when in one).
    pub channel: ChannelId,
    /// Whether its transactions run alone.
    pub critical: bool,
    /// What the running run committed of it.
    pub applied: Option<ShardApplied>,
    /// The shards (this one included) that foreign keys on the replica
    /// join to it; empty when none does.
    pub foreign_key_group: Vec<String>,
    /// Why that group is serialized; `None` when not in a group.
    pub serialized_reason: Option<String>,
}

/// Why the last run ended on an error (`shardrep run --until-idle`
/// prints it): the error's message and what to do about it
/// (`None` when the message says; the same text ends `pendingError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    /// The run's error.
    pub message: String,
    /// What the DBA can do next.
    pub way_out: Option<String>,
}

/// What a handback did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedBack {
    /// The seqno handed back after (`None`: nothing was applied since the
    /// takeover, handed back at its position).
    pub seqno: Option<Seqno>,
    /// Where native replication now starts.
    pub point: HandbackPoint,
    /// Whether native replication uses the GTID position.
    pub use_gtid: bool,
    /// Whether `START SLAVE` was run.
    pub slave_started: bool,
    /// The statements run on the replica, in order (no secrets).
    pub statements: Vec<String>,
}

/// What a reset removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetDone {
    /// The state afterwards (`OFFLINE:NORMAL`).
    pub state: State,
    /// The queue directory, when there was one to remove.
    pub queue_removed: Option<PathBuf>,
    /// Restart rows deleted from the catalog.
    pub restart_rows_deleted: u64,
    /// Recorded skips deleted from the catalog.
    pub skipped_deleted: u64,
    /// The catalog schema dropped (`--drop-catalog`).
    pub catalog_dropped: Option<String>,
}
