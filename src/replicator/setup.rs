//! A run's set-up on the replica: the catalog read and prepared (restart
//! rows and what they say a restart applies, skipped seqnos, shard map),
//! the refusal of a lost queue, and the router (shard filter, channel assignment,
//! foreign keys); and the restart rows read at the end.

use tokio::runtime::Runtime;

use super::skips::{recorded_skip_ranges, requested_skips};
use super::{connect_replica, first_start, replica_opts, RunError, RunOptions};
use crate::applier::restart::{self, Recovery, RestartRow};
use crate::applier::skipped;
use crate::config::{Config, Parallelism};
use crate::queue::TransactionQueue;
use crate::scheduler::row::{RowKeys, WritesetReader};
use crate::scheduler::{ExpectedPosition, ShardRouter};
use crate::shard::channel::ChannelAssignment;
use crate::shard::filter::ShardFilter;
use crate::shard::foreign_keys::{read_foreign_keys, ForeignKeyReader, ForeignKeyRouting};
use crate::shard::map::ShardMap;
use crate::shard::store;
use crate::shard::writeset::Writesets;

/// What the replica's catalog holds at the start of a run.
pub(super) struct CatalogStart {
    /// Each channel's restart row.
    pub rows: Vec<RestartRow>,
    /// What the rows say a restart applies ([`restart::recover`]).
    pub recovery: Recovery,
    /// The service's shard map.
    pub map: ShardMap,
    /// Every seqno recorded as skipped (the DBA's `--skip-seqno`, this
    /// run's and earlier ones), as ranges.
    pub skip_seqnos: Vec<std::ops::RangeInclusive<u64>>,
    /// Whether this run created the catalog schema (a first start).
    pub created: bool,
    /// Every recorded skip, as the catalog holds it after this run
    /// recorded its own.
    pub recorded_skips: Vec<skipped::SkippedSeqno>,
    /// How the channels binlog (module `gtid_topology`).
    pub binlog: super::gtid_topology::RunBinlog,
}

/// Prepares the replica's catalog `catalog` for a run: checks the master
/// answers before a first start creates it, creates or checks the restart
/// table, records the skips `options` asks for (before anything is
/// dispatched), reads every recorded skip and loads the stored shard map
/// (seeded from `shard_filter.map_file` at first start).
///
/// # Errors
/// [`RunError::Setup`] (with the server's code when it sent one) when the
/// map file cannot be loaded, a skip is refused, or the replica fails;
/// [`RunError::Restart`] from the restart table, and from rows that do not
/// say what to apply ([`restart::recover`]), or rows of an older shardrep
/// at different seqnos under `parallelism = "row"`
/// ([`Recovery::require_exact`]).
pub(super) fn prepare_catalog(
    runtime: &Runtime,
    config: &Config,
    catalog: &str,
    queue: &TransactionQueue,
    options: &RunOptions,
) -> Result<CatalogStart, RunError> {
    let file_map = match &config.shard_filter.map_file {
        Some(path) => Some(ShardMap::load(path).map_err(|e| RunError::setup(e.to_string()))?),
        None => None,
    };
    let requested_skips = requested_skips(queue, &options.skip_seqnos)?;
    let (rows, map, recorded_skips, created, in_binlog, binlog) = runtime.block_on(async {
        let mut conn = mysql_async::Conn::new(replica_opts(config))
            .await
            .map_err(|e| {
                RunError::setup_client(
                    super::error::SetupServer::Replica,
                    format!(
                        "cannot connect to the replica {}:{}: {}",
                        config.replica.host,
                        config.replica.port,
                        crate::mysql::ErrorText(&e)
                    ),
                    &e,
                )
            })?;
        super::apply_method::check_apply_method(config, &mut conn).await?;
        let binlog = super::gtid_topology::check_binlog_gtids(config, &mut conn).await?;
        // Resolved: status shows it even if the start fails after this.
        if let Some(o) = &options.observer {
            *o.binlog_gtids.lock().expect("observer") = Some(binlog.mode);
        }
        let existed =
            first_start::master_answers_before_catalog(config, &mut conn, catalog).await?;
        let rows = restart::prepare(&mut conn, catalog, config.apply.channels).await?;
        // Also when this run does not apply under the master's GTIDs: the
        // last one may have (a mode changed after a kill, or "auto" that
        // resolves otherwise now), and its commits after the last restart
        // row are recorded in the replica's binlog only. Under any other
        // mode nothing there matches (the replica's own server id, or no
        // binlogged commit above the rows).
        let reconciled = if binlog.log_bin {
            super::gtid_reconcile::reconcile(&mut conn, catalog, &rows, queue, &binlog).await?
        } else {
            super::gtid_reconcile::Reconciled::default()
        };
        if let Some(o) = &options.observer {
            *o.binlog_lacks_rows_above.lock().expect("observer") = reconciled.lacks_rows_above;
        }
        let in_binlog = reconciled.committed;
        // A seqno the restart rows record committed is not skipped (it was
        // applied): neither recorded nor counted.
        let requested_skips = not_committed(
            requested_skips,
            &restart::recover(&rows)?.with_committed(&in_binlog),
        );
        // The DBA's skips are committed before anything is dispatched, and
        // every recorded one is skipped by this and every later run.
        if !requested_skips.is_empty() {
            skipped::record(&mut conn, catalog, &requested_skips)
                .await
                .map_err(|e| RunError::setup(e.to_string()))?;
        }
        let recorded = skipped::read(&mut conn, catalog)
            .await
            .map_err(|e| RunError::setup(e.to_string()))?;
        // The stored map is the service's; map_file seeds it at first start.
        let map = store::load_or_init(&mut conn, catalog, file_map.as_ref())
            .await
            .map_err(|e| RunError::setup(e.to_string()))?;
        let _ = conn.disconnect().await;
        Ok::<_, RunError>((rows, map, recorded, !existed, in_binlog, binlog))
    })?;
    let recovery = restart::recover(&rows)?.with_committed(&in_binlog);
    if config.apply.parallelism == Parallelism::Row {
        // A transaction may run on another channel than before the stop:
        // each channel's own row no longer tells what to skip.
        recovery.require_exact()?;
    }
    Ok(CatalogStart {
        rows,
        recovery,
        map,
        skip_seqnos: recorded_skip_ranges(&recorded_skips),
        created,
        recorded_skips,
        binlog,
    })
}

/// The skips of `requested` that `recovery` (the restart rows) does not
/// record committed; each one it does is logged, once, as not skipped.
pub(super) fn not_committed(
    requested: Vec<skipped::SkippedSeqno>,
    recovery: &Recovery,
) -> Vec<skipped::SkippedSeqno> {
    let committed = |s: &skipped::SkippedSeqno| {
        recovery.base().is_some_and(|b| s.seqno <= b) || recovery.committed().contains(s.seqno)
    };
    let (applied, skips): (Vec<_>, Vec<_>) = requested.into_iter().partition(committed);
    if !applied.is_empty() {
        tracing::info!(
            seqnos = %applied
                .iter()
                .map(|s| s.seqno.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "--skip-seqno: the restart rows record these seqnos committed on the replica: not \
             skipped (nothing recorded or counted)"
        );
    }
    skips
}

/// Refuses an empty queue with committed restart rows: the queue was lost
/// (or is another service's). Seqnos cannot be rebuilt safely, and any
/// other start would skip or repeat transactions. With a queue that holds
/// transactions, returns the restart rows beyond its last seqno
/// ([`rows_beyond_queue`]), for the scheduler to check.
///
/// # Errors
/// [`RunError::Setup`] naming the queue, the seqno, binlog position and
/// GTID applied, and the way out.
pub(super) fn refuse_lost_queue(
    config: &Config,
    catalog: &str,
    queue: &TransactionQueue,
    rows: &[RestartRow],
) -> Result<Vec<ExpectedPosition>, RunError> {
    if queue.last_progress().is_some() {
        return Ok(rows_beyond_queue(config, catalog, queue, rows));
    }
    let Some(applied) = rows.iter().filter_map(|r| r.seqno).min() else {
        return Ok(Vec::new());
    };
    let row = rows
        .iter()
        .find(|r| r.seqno == Some(applied))
        .expect("the minimum is a row's");
    let all_equal = rows.iter().all(|r| r.seqno == Some(applied));
    let different_seqnos_advice = format!(
        "The channels are at different seqnos: restore the queue directory, or \
         re-seed the replica and `shardrepctl reset --confirm {}` (see the README, \
         recovering a lost queue).",
        config.service.name
    );
    Err(RunError::setup(format!(
        "the queue {} is empty, but the replica's restart rows ({catalog}.{}) show \
         channels applied up to seqno {applied} (binlog position {}, GTID {}): the queue \
         was lost or belongs to another service, and seqnos cannot be rebuilt. {}",
        config.queue.dir.display(),
        crate::catalog::RESTART_TABLE,
        row.event_id_text(),
        if row.gtid.is_empty() {
            "-".to_string()
        } else {
            row.gtid.to_string()
        },
        if all_equal {
            "Every channel is at that seqno: `shardrepctl offline` (acknowledges this \
             error), `shardrepctl handback` (hands the replica back to native replication \
             there), then `shardrepctl online` takes it over afresh."
        } else {
            &different_seqnos_advice
        }
    )))
}

/// The restart rows beyond the queue's last seqno. The channels apply a
/// transaction once the queue has stored it, but the queue makes it
/// durable only at its next flush, so after a crash (`kill -9`, power
/// loss) the queue may have lost a tail the replica has applied; the
/// extractor then reads those transactions again, from the queue's last
/// position, and gives them the same seqnos. Each such row is logged and
/// returned, and the scheduler checks that the queue's transaction of the
/// row's seqno ends at the row's binlog position
/// ([`crate::scheduler::SchedulerError::RowMismatch`] if not: the row was
/// edited, or the queue is an older copy or another service's).
fn rows_beyond_queue(
    config: &Config,
    catalog: &str,
    queue: &TransactionQueue,
    rows: &[RestartRow],
) -> Vec<ExpectedPosition> {
    let next = queue.next_seqno();
    let mut beyond: Vec<ExpectedPosition> = rows
        .iter()
        .filter_map(|r| match (r.seqno, &r.event_id) {
            (Some(seqno), Some(event_id)) if seqno >= next => Some(ExpectedPosition {
                channel: r.channel,
                seqno,
                event_id: event_id.clone(),
            }),
            _ => None,
        })
        .collect();
    beyond.sort_by_key(|e| e.seqno);
    for e in &beyond {
        tracing::warn!(
            channel = e.channel.get(),
            seqno = e.seqno.get(),
            event_id = %e.event_id,
            queue = %config.queue.dir.display(),
            queue_last_seqno = next.get() as i64 - 1,
            catalog,
            "restart row beyond the queue's last seqno: the queue holds less than the replica \
             has applied (its tail was not written: a crash or a full file system; or it is an \
             older copy of the queue); the transactions are extracted again, and the row's \
             seqno is checked against its binlog position when the queue holds it again"
        );
    }
    beyond
}

/// The run's router: the shard filter over `map`, the channel assignment,
/// and the shards joined by foreign keys, read now (after a takeover the
/// replica is at the position this run starts from) and shown in
/// `options.observer`.
///
/// # Errors
/// [`RunError::Setup`] when the shard list or the foreign keys cannot be
/// read.
pub(super) fn router(
    config: &Config,
    map: ShardMap,
    options: &RunOptions,
) -> Result<ShardRouter, RunError> {
    let filter = ShardFilter::from_config(config, map);
    let assignment = ChannelAssignment::from_config(&config.apply)
        .map_err(|e| RunError::setup(e.to_string()))?;
    let foreign_keys =
        ForeignKeyRouting::start(foreign_key_reader(config), &assignment).map_err(|e| {
            RunError::setup(format!(
                "reading the replica's foreign keys \
                 (information_schema.REFERENTIAL_CONSTRAINTS): {e}"
            ))
        })?;
    if let Some(o) = &options.observer {
        *o.foreign_keys.lock().expect("observer") = Some(foreign_keys.shared());
    }
    let row_keys = match config.apply.parallelism {
        Parallelism::Shard => None,
        Parallelism::Row => {
            let mut reader = writeset_reader(config);
            let mut writesets = Writesets::default();
            reader(&mut writesets, None).map_err(|e| {
                RunError::setup(format!(
                    "parallelism = \"row\": reading the replica's key metadata \
                     (information_schema): {e}"
                ))
            })?;
            Some(RowKeys { writesets, reader })
        }
    };
    Ok(ShardRouter {
        filter,
        assignment,
        live_map: options.live_map.clone(),
        foreign_keys: Some(foreign_keys),
        row_keys,
    })
}

/// Reads the replica's key metadata for the writesets
/// ([`Writesets::load`]: every schema for `None`; one schema again with
/// [`Writesets::reload_schema`]), each time on a new connection of its
/// own (at start and after DDL).
fn writeset_reader(config: &Config) -> WritesetReader {
    let opts = replica_opts(config);
    Box::new(move |writesets: &mut Writesets, schema: Option<&str>| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start an async runtime: {e}"))?;
        runtime.block_on(async {
            let mut conn = mysql_async::Conn::new(opts.clone()).await.map_err(|e| {
                format!(
                    "cannot connect to the replica: {}",
                    crate::mysql::ErrorText(&e)
                )
            })?;
            let read = match schema {
                Some(schema) => writesets.reload_schema(&mut conn, schema).await,
                None => Writesets::load(&mut conn, None)
                    .await
                    .map(|w| *writesets = w),
            };
            let _ = conn.disconnect().await;
            read.map_err(|e| e.to_string())
        })
    })
}

/// Reads the replica's cross-schema foreign keys, each time on a new
/// connection of its own (at start and after DDL that may change them).
fn foreign_key_reader(config: &Config) -> ForeignKeyReader {
    let opts = replica_opts(config);
    Box::new(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start an async runtime: {e}"))?;
        runtime.block_on(async {
            let mut conn = mysql_async::Conn::new(opts.clone()).await.map_err(|e| {
                format!(
                    "cannot connect to the replica: {}",
                    crate::mysql::ErrorText(&e)
                )
            })?;
            let keys = read_foreign_keys(&mut conn)
                .await
                .map_err(|e| format!("reading the replica's foreign keys: {e}"));
            let _ = conn.disconnect().await;
            keys
        })
    })
}

/// The restart rows at the end of a run, on a new connection.
///
/// # Errors
/// [`RunError::Setup`] when the replica cannot be connected to;
/// [`RunError::Restart`] when the rows cannot be read.
pub(super) fn final_restart_rows(
    runtime: &Runtime,
    config: &Config,
    catalog: &str,
) -> Result<Vec<RestartRow>, RunError> {
    runtime.block_on(async {
        let mut conn = connect_replica(config).await?;
        let rows = restart::read(&mut conn, catalog).await?;
        let _ = conn.disconnect().await;
        Ok::<_, RunError>(rows)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::applier::skipped::SkippedSeqno;
    use crate::position::Seqno;

    fn skips(seqnos: &[u64]) -> Vec<SkippedSeqno> {
        seqnos
            .iter()
            .map(|&n| SkippedSeqno {
                seqno: Seqno(n),
                event_id: String::new(),
                shard_id: String::new(),
            })
            .collect()
    }

    #[test]
    fn a_skip_of_a_committed_seqno_is_dropped() {
        // Every seqno up to 4 done; 6 and 8-9 committed above it (5 and
        // 7 failed or not applied yet).
        let recovery = Recovery::Exact {
            base: Some(Seqno(4)),
            committed: "6,8-9".parse().unwrap(),
        };
        let kept: Vec<u64> = not_committed(skips(&[3, 5, 6, 7, 8, 10]), &recovery)
            .iter()
            .map(|s| s.seqno.get())
            .collect();
        assert_eq!(kept, [5, 7, 10]);
        let nothing = Recovery::Exact {
            base: None,
            committed: "".parse().unwrap(),
        };
        assert_eq!(not_committed(skips(&[0, 1]), &nothing).len(), 2);
    }
}
