//! Seqnos the DBA chose not to apply (`online --skip-seqno`), recorded in
//! the catalog schema `shardrep_<service>` on the replica (shared/DESIGN.md
//! §4: "a skip requested by the DBA is recorded the same way, so it is
//! never applied later").
//!
//! Table `skipped_seqno` ([`catalog::skipped_create`]): `seqno` (primary
//! key), `event_id` (binlog `file:pos` after the transaction, empty when it
//! was not queued when the skip was recorded), `shard_id` (likewise),
//! `skipped_at` (UTC).
//!
//! A row is committed before the run that skips the seqno dispatches
//! anything, and every later run reads the table and skips every seqno in
//! it, so a skip holds across errors, restarts and `kill -9`, whatever the
//! channels' restart rows say. The rows stay until the queue's seqnos stop
//! meaning anything: `handback` and `reset` remove them with the queue and
//! the restart rows. The table is independent of how channels record what
//! they committed (one seqno per channel now, a committed set later): a
//! seqno in it counts as decided.
//!
//! Written with `sql_log_bin = 0`: the decision is this replica's own.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::catalog::{self, SKIPPED_TABLE, TABLE_EXISTS};
use crate::position::Seqno;

/// Most seqnos one request may record (a skip is a decision about single
/// transactions, not a way to drop a range of the history).
pub const MAX_SKIPS_PER_REQUEST: u64 = 10_000;

/// One recorded skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedSeqno {
    /// The seqno never applied.
    pub seqno: Seqno,
    /// Its binlog position (`file:pos` after it), empty when unknown.
    pub event_id: String,
    /// Its shard, empty when unknown.
    pub shard_id: String,
}

/// Errors of the skipped-seqno table.
#[derive(Debug, thiserror::Error)]
#[error(
    "skipped-seqno table {catalog}.{SKIPPED_TABLE}: {}",
    crate::mysql::ErrorText(cause)
)]
pub struct SkippedError {
    /// Catalog schema.
    pub catalog: String,
    /// The server's error.
    pub cause: mysql_async::Error,
}

async fn without_binlog<T>(
    conn: &mut Conn,
    catalog: &str,
    work: impl AsyncFnOnce(&mut Conn) -> Result<T, mysql_async::Error>,
) -> Result<T, SkippedError> {
    let err = |source| SkippedError {
        catalog: catalog.to_string(),
        cause: source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(err)?;
    let result = work(conn).await.map_err(err);
    let reset = conn
        .query_drop("SET SESSION sql_log_bin = DEFAULT")
        .await
        .map_err(err);
    let value = result?;
    reset?;
    Ok(value)
}

/// Records `skips` (creating the table if needed), committed when this
/// returns; a seqno already recorded keeps its first row.
///
/// # Errors
/// [`SkippedError`].
pub async fn record(
    conn: &mut Conn,
    catalog: &str,
    skips: &[SkippedSeqno],
) -> Result<(), SkippedError> {
    without_binlog(conn, catalog, async |conn: &mut Conn| {
        conn.query_drop(catalog::skipped_create(catalog)).await?;
        conn.query_drop("START TRANSACTION").await?;
        for s in skips {
            conn.exec_drop(
                catalog::skipped_insert(catalog),
                (s.seqno.get(), s.event_id.as_str(), s.shard_id.as_str()),
            )
            .await?;
        }
        conn.query_drop("COMMIT").await
    })
    .await
}

async fn table_exists(conn: &mut Conn, catalog: &str) -> Result<bool, SkippedError> {
    let exists: Option<u64> = conn
        .exec_first(TABLE_EXISTS, (catalog, SKIPPED_TABLE))
        .await
        .map_err(|source| SkippedError {
            catalog: catalog.to_string(),
            cause: source,
        })?;
    Ok(exists == Some(1))
}

/// Every recorded skip, by seqno; none when the table does not exist.
///
/// # Errors
/// [`SkippedError`].
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<Vec<SkippedSeqno>, SkippedError> {
    if !table_exists(conn, catalog).await? {
        return Ok(Vec::new());
    }
    let rows: Vec<(u64, String, String)> = conn
        .query(catalog::skipped_select(catalog))
        .await
        .map_err(|source| SkippedError {
            catalog: catalog.to_string(),
            cause: source,
        })?;
    Ok(rows
        .into_iter()
        .map(|(seqno, event_id, shard_id)| SkippedSeqno {
            seqno: Seqno(seqno),
            event_id,
            shard_id,
        })
        .collect())
}

/// Removes every recorded skip (with the queue whose seqnos they name);
/// returns how many there were.
///
/// # Errors
/// [`SkippedError`].
pub async fn clear(conn: &mut Conn, catalog: &str) -> Result<u64, SkippedError> {
    if !table_exists(conn, catalog).await? {
        return Ok(0);
    }
    without_binlog(conn, catalog, async |conn: &mut Conn| {
        conn.query_drop(catalog::skipped_delete(catalog)).await?;
        Ok(conn.affected_rows())
    })
    .await
}
