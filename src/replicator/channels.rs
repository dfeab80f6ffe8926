//! A run's apply channels: one `shardrep-apply-NN` thread per channel,
//! each fed by a bounded queue from the scheduler, sharing one
//! [`Progress`].

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::applier::channel::{self, ChannelSettings, ChannelStart};
use crate::applier::error::ApplyError;
use crate::applier::progress::Progress;
use crate::applier::restart::{Recovery, RestartRow};
use crate::applier::work::Work;
use crate::config::Config;
use crate::position::ChannelId;

use super::{replica_opts, RunError};

/// Reads fragments of a large transaction again from `queue`, for a
/// channel's retry of it.
fn fragment_source(queue: &Arc<crate::queue::TransactionQueue>) -> channel::FragmentSource {
    let queue = Arc::downgrade(queue);
    channel::FragmentSource(Arc::new(move |seqno| {
        let Some(queue) = queue.upgrade() else {
            return Err("the queue is closed".to_string());
        };
        queue.get(seqno).map_err(|e| e.to_string())
    }))
}

/// The started channels of a run.
pub(super) struct Channels {
    /// Their shared progress (committed seqnos, markers, memory budget).
    pub progress: Arc<Progress>,
    /// The scheduler's end of each channel's input.
    pub senders: Vec<crossbeam_channel::Sender<Work>>,
    handles: Vec<JoinHandle<Result<(), Box<ApplyError>>>>,
}

impl Channels {
    /// Starts `config.apply.channels` channels, each from its restart row
    /// in `rows` as `recovery` reads them (the low-water mark at its base),
    /// writing to the catalog `catalog`, binlogging as `binlog` says.
    ///
    /// # Errors
    /// [`RunError::Setup`] when a thread cannot be started.
    pub fn start(
        config: &Config,
        catalog: &str,
        rows: &[RestartRow],
        recovery: &Recovery,
        queue: &Arc<crate::queue::TransactionQueue>,
        binlog: super::gtid_topology::RunBinlog,
    ) -> Result<Channels, RunError> {
        let in_order = binlog.in_order;
        // Each channel's progress: everything sent to it is above the
        // recovered base, so (exact rows) a row beyond the base says
        // nothing of what this run sends it; legacy rows: its row, below
        // which it skips what it is sent.
        let start: Vec<_> = rows
            .iter()
            .map(|r| match recovery {
                Recovery::Exact { base, .. } => r.seqno.min(*base),
                Recovery::Legacy { .. } => r.seqno,
            })
            .collect();
        let progress = Arc::new(
            Progress::new(&start)
                .with_low_water(recovery.base())
                .with_memory_budget(config.apply.max_in_flight_bytes),
        );
        let capacity = (config.apply.block_commit_txns as usize).clamp(16, 1024) * 2;
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for id in ChannelId::all(config.apply.channels) {
            let (tx, rx) = crossbeam_channel::bounded::<Work>(capacity);
            let settings = ChannelSettings {
                channel: id,
                opts: replica_opts(config),
                catalog: catalog.to_string(),
                sql_log_bin: binlog.sql_log_bin,
                preserve_origin: config.replica.preserve_origin,
                in_order,
                // Under the master's GTIDs, one transaction per commit.
                block_commit_txns: if in_order {
                    1
                } else {
                    config.apply.block_commit_txns.max(1) as usize
                },
                block_commit_interval: Duration::from_millis(config.apply.block_commit_interval_ms),
                retry_max_attempts: config.apply.retry_max_attempts,
                retry_max_backoff: Duration::from_millis(config.apply.retry_max_backoff_ms),
                compound_blocks: config.apply.compound_blocks,
                method: config.apply.method,
                fragments: Some(fragment_source(queue)),
            };
            let start = ChannelStart {
                row: rows
                    .get(id.index())
                    .cloned()
                    .unwrap_or_else(|| RestartRow::empty(id)),
                legacy_skip_through: recovery.legacy_skip_through(id),
            };
            handles.push(
                channel::spawn(settings, start, rx, progress.clone())
                    .map_err(|e| RunError::setup(format!("cannot start channel {id}: {e}")))?,
            );
            senders.push(tx);
        }
        Ok(Channels {
            progress,
            senders,
            handles,
        })
    }

    /// Closes every channel's input (each finishes what it was sent and
    /// ends) and joins the threads: the index of the first that panicked.
    pub fn close_and_join(self) -> Option<usize> {
        drop(self.senders);
        let mut panicked = None;
        for (index, handle) in self.handles.into_iter().enumerate() {
            if handle.join().is_err() {
                panicked.get_or_insert(index);
            }
        }
        panicked
    }
}
