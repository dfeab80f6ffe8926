//! What the scheduler hands a channel ([`Work`]), the positions every
//! channel records ([`Marker`]) and what the channels report back
//! ([`AppliedMarker`], [`ShardApplied`]).

use std::sync::Arc;

use crate::applier::restart::RestartRow;
use crate::event::Transaction;
use crate::position::Seqno;

/// What the scheduler sends a channel.
#[derive(Clone, Debug)]
pub enum Work {
    /// Apply a transaction; `alone` commits it in a block of its own.
    Apply {
        /// The transaction.
        txn: Arc<Transaction>,
        /// Epoch of its extraction run.
        epoch: u64,
        /// Commit it alone (critical shard or barrier).
        alone: bool,
        /// Its share of the in-flight memory budget
        /// ([`Progress::acquire_memory`]), released once committed.
        bytes: u64,
        /// The position after it, recorded in the restart row (with the
        /// source's whole GTID position, not only the transaction's GTID).
        marker: Arc<Marker>,
    },
    /// Periodic sync: when the channel has nothing newer, advance its
    /// restart row to this position.
    Sync(Arc<Marker>),
    /// Clean stop: advance the restart row to this position, then exit.
    Stop(Arc<Marker>),
}

/// A position every channel records (SYNC and STOP markers): the last
/// seqno the scheduler has handled, with its identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The seqno.
    pub seqno: Seqno,
    /// Its epoch.
    pub epoch: u64,
    /// Binlog position after it.
    pub event_id: String,
    /// Its GTID (text), or empty.
    pub gtid: String,
    /// Its shard.
    pub shard_id: String,
    /// Master commit time, Unix seconds.
    pub extract_time: u32,
}

impl Marker {
    /// The marker of a transaction.
    pub fn of(txn: &Transaction, epoch: u64) -> Marker {
        Marker {
            seqno: txn.seqno,
            epoch,
            event_id: txn.end_position.to_string(),
            gtid: txn.gtid.map(|g| g.to_string()).unwrap_or_default(),
            shard_id: txn.shard.clone(),
            extract_time: txn.commit_timestamp,
        }
    }

    /// The restart row of channel `channel` at this position.
    pub fn row(&self, channel: u16) -> RestartRow {
        RestartRow {
            channel,
            seqno: Some(self.seqno),
            epoch: self.epoch,
            event_id: self.event_id.clone(),
            gtid: self.gtid.clone(),
            shard_id: self.shard_id.clone(),
        }
    }
}

/// A channel's last committed position and its applied latency in
/// seconds (replica commit time minus master commit time).
pub type AppliedMarker = (Arc<Marker>, f64);

/// What the channels applied of one shard in this run (`status --name
/// shards`).
#[derive(Clone, Debug, PartialEq)]
pub struct ShardApplied {
    /// The seqno of its last committed transaction.
    pub seqno: Seqno,
    /// That transaction's binlog position (`file:pos`).
    pub event_id: String,
    /// Seconds from its master commit to its replica commit.
    pub latency: f64,
    /// Transactions of the shard committed in this run.
    pub count: u64,
}
