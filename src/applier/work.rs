//! What the scheduler hands a channel ([`Work`]), the positions every
//! channel records ([`Marker`]) and what the channels report back
//! ([`AppliedMarker`], [`ShardApplied`]).

use std::sync::Arc;

use crate::applier::restart::{LowWater, RestartRow};
use crate::event::Transaction;
use crate::position::{BinlogPosition, ChannelId, Epoch, GtidPos, Seqno};

/// What the scheduler sends a channel.
#[derive(Clone, Debug)]
pub enum Work {
    /// Apply a transaction; `alone` commits it in a block of its own.
    Apply {
        /// The transaction.
        txn: Arc<Transaction>,
        /// Epoch of its extraction run.
        epoch: Epoch,
        /// Commit it alone (critical shard or barrier).
        alone: bool,
        /// Its share of the in-flight memory budget
        /// ([`Progress::acquire_memory`](crate::applier::progress::Progress::acquire_memory)), released once committed.
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
/// seqno the scheduler has handled, with its identity, as the restart row
/// holds it ([`Marker::row`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The seqno.
    pub seqno: Seqno,
    /// Its epoch.
    pub epoch: Epoch,
    /// Binlog position after it.
    pub event_id: BinlogPosition,
    /// The source's GTID position after it (empty when the master logs no
    /// GTIDs).
    pub gtid: GtidPos,
    /// Its shard.
    pub shard_id: String,
    /// Master commit time, Unix seconds.
    pub extract_time: u32,
}

impl Marker {
    /// The marker after `txn`, of the extraction run that started at
    /// `epoch`, with the source's GTID position after it
    /// (`gtid_position`, all domains, as the extractor recorded it; when
    /// empty, the transaction's own GTID, if any).
    pub fn new(txn: &Transaction, epoch: Epoch, gtid_position: GtidPos) -> Marker {
        let gtid = match txn.gtid {
            Some(own) if gtid_position.is_empty() => {
                let mut pos = GtidPos::new();
                pos.update(own);
                pos
            }
            _ => gtid_position,
        };
        Marker {
            seqno: txn.seqno,
            epoch,
            event_id: txn.end_position.clone(),
            gtid,
            shard_id: txn.shard.clone(),
            extract_time: txn.commit_timestamp,
        }
    }

    /// The marker after `txn` with its own GTID only
    /// ([`Marker::new`] without a GTID position).
    pub fn of(txn: &Transaction, epoch: Epoch) -> Marker {
        Marker::new(txn, epoch, GtidPos::new())
    }

    /// The restart row of channel `channel` at this position, without the
    /// committed record (`low_water` [`LowWater::Unrecorded`], nothing
    /// above it): the writer sets them.
    pub fn row(&self, channel: ChannelId) -> RestartRow {
        RestartRow {
            channel,
            seqno: Some(self.seqno),
            epoch: self.epoch,
            event_id: Some(self.event_id.clone()),
            gtid: self.gtid.clone(),
            shard_id: self.shard_id.clone(),
            low_water: LowWater::Unrecorded,
            committed_above: crate::position::SeqnoRanges::new(),
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
