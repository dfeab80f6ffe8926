//! The takeover decision of a run: a service with no queue and no restart
//! position, configured with `source.start = "takeover"`, starts where the
//! replica's native replication stopped ([`crate::replica::takeover`]).

use tokio::runtime::Runtime;

use super::extract::FirstStart;
use super::{connect_replica, connect_replica_for_native, Observer, RunError};
use crate::applier::restart::{self, RestartRow};
use crate::config::{Config, SourceEndpoint, StartPosition};
use crate::extractor::reader::ExtractStart;
use crate::queue::TransactionQueue;

/// Where the extractor starts when `queue` holds nothing yet: the takeover
/// point when this run takes over native replication (every restart row
/// empty, no master switch stored and `source.start = "takeover"`), else
/// the configured `source.start`. After a switch (`switched`: the catalog
/// holds a resume point on the new master) the takeover is done: native
/// replication still names the old master, and the extractor starts at
/// the switch's GTID position instead. A takeover is logged, recorded on the restart rows (a
/// handback with nothing applied goes back there) and shown in `observer`.
///
/// # Errors
/// [`RunError::Setup`] when the takeover is refused or the replica
/// cannot record it.
pub(super) fn first_start(
    runtime: &Runtime,
    config: &Config,
    catalog: &str,
    queue: &TransactionQueue,
    rows: &[RestartRow],
    switched: bool,
    observer: Option<&Observer>,
) -> Result<FirstStart, RunError> {
    let configured = FirstStart::Configured(config.source.start.clone());
    if queue.last_progress().is_some()
        || rows.iter().any(|r| r.seqno.is_some())
        || switched
        || !matches!(config.source.start, StartPosition::Takeover)
    {
        return Ok(configured);
    }
    let point = runtime.block_on(take_over(config))?;
    tracing::info!(
        file = %point.file,
        pos = point.pos,
        gtid_slave_pos = %point.gtid_slave_pos,
        "took over from native replication"
    );
    let start = point
        .position()
        .map_err(|e| RunError::setup(e.to_string()))?;
    let gtid = point.gtid_slave_pos.clone();
    // Where the takeover started, on the rows that have nothing yet: a
    // handback with nothing applied goes back there.
    runtime.block_on(async {
        let mut conn = connect_replica(config).await?;
        restart::record_start(&mut conn, catalog, &start, &gtid).await?;
        let _ = conn.disconnect().await;
        Ok::<_, RunError>(())
    })?;
    if let Some(o) = observer {
        *o.takeover.lock().expect("observer") = Some(point);
    }
    Ok(FirstStart::TakeOver(ExtractStart::File(start), gtid))
}

/// Takes over from the replica's native replication: checks the master
/// and the replica, stops the replica's slave threads and returns the
/// executed position ([`crate::replica::takeover`]).
async fn take_over(config: &Config) -> Result<crate::replica::TakeoverPoint, RunError> {
    let SourceEndpoint::Live(live) = &config.source.endpoint else {
        return Err(RunError::setup(
            "source.start = \"takeover\" needs a live source (kind = \"live\"): \
             a binlog directory has no master to take over from; set source.start \
             to FILE:POS or gtid:...",
        ));
    };
    let setup = |e: crate::replica::ReplicaError| RunError::setup(format!("takeover: {e}"));
    let mut master =
        crate::replica::connect(&live.host, live.port, None, &live.user, &live.password)
            .await
            .map_err(setup)?;
    let facts = crate::replica::check_master(&mut master)
        .await
        .map_err(setup)?;
    tracing::info!(
        master = %facts.endpoint,
        server_id = facts.server_id,
        row_image = %facts.row_image,
        binlog_checksum = %facts.binlog_checksum,
        gtid_domain_id = facts.gtid_domain_id,
        oldest_binlog = facts.oldest_binlog(),
        "source master checked"
    );
    let mut replica = connect_replica_for_native(config).await.map_err(setup)?;
    let replica_facts = crate::replica::check_replica(&mut replica, &facts)
        .await
        .map_err(setup)?;
    tracing::info!(
        replica = %replica_facts.endpoint,
        server_id = replica_facts.server_id,
        read_only = replica_facts.read_only,
        master = %replica_facts.slave.master(),
        using_gtid = %replica_facts.slave.using_gtid,
        "replica checked"
    );
    let others = crate::replica::other_services(&mut replica, &config.catalog_schema())
        .await
        .map_err(setup)?;
    if !others.is_empty() {
        let _ = replica.disconnect().await;
        let _ = master.disconnect().await;
        return Err(RunError::setup(format!(
            "takeover refused: the replica {}:{} is already applied by another shardrep \
             service ({}), so native replication's position there is stale. Hand that \
             service back first (shardrepctl offline, then handback), or give this service \
             a start position (source.start = FILE:POS or gtid:...)",
            config.replica.host,
            config.replica.port,
            others.join(", ")
        )));
    }
    let point = crate::replica::takeover(&mut replica, &mut master, &facts)
        .await
        .map_err(setup)?;
    let _ = replica.disconnect().await;
    let _ = master.disconnect().await;
    Ok(point)
}
