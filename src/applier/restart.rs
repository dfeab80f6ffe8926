//! Restart positions on the replica: the catalog schema `shardrep_<service>`
//! holds one row per channel, updated in the same transaction as the data
//! it records (shared/DESIGN.md §4, §5).
//!
//! Table `restart_position`:
//! `channel` (primary key), `seqno` (-1 before the first transaction),
//! `epoch`, `event_id` (binlog `file:pos` after the transaction), `gtid`
//! (the source's GTID position after it), `shard_id`, `extract_time` (master
//! commit time, UTC), `commit_time` (replica commit time, UTC),
//! `applied_latency_ms`.
//!
//! Binary logging: the row is written in the same transaction as the data,
//! and `sql_log_bin` cannot change inside a transaction, so with
//! `replica.sql_log_bin = true` (the default, so that the replica's own
//! replicas receive the data) the catalog rows are binlogged too. The shard
//! filter never treats the catalog schema as a user shard, so a downstream
//! shardrep drops them; native downstream replicas apply them to their own
//! copy of the table, which nothing reads. Inside a transaction with data
//! they do not count for its shard, and no channel applies them
//! ([`crate::shard::is_catalog_table`]). Writes of the restart row alone
//! (SYNC/STOP markers, the DDL mark) carry no data and are written with
//! `sql_log_bin = 0`: in a multi-master pair, binlogged markers would
//! bounce between the two services for ever.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value as Param};

use crate::applier::sql::quote_ident;
use crate::position::{BinlogPosition, ChannelId, Epoch, GtidPos, PositionError, Seqno};

/// Name of the restart table inside the catalog schema.
pub const RESTART_TABLE: &str = "restart_position";

/// One channel's restart row, typed: parsed once from its SQL row by
/// [`read`], written back as text by [`update_params`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartRow {
    /// The channel.
    pub channel: ChannelId,
    /// Last committed seqno; `None` before the first (stored as -1).
    pub seqno: Option<Seqno>,
    /// Epoch of that seqno's extraction run.
    pub epoch: Epoch,
    /// Binlog position after that transaction (`file:pos`); before the
    /// first, where a takeover started ([`record_start`]) or `None`
    /// (stored empty).
    pub event_id: Option<BinlogPosition>,
    /// Source GTID position after that transaction; empty when unknown.
    pub gtid: GtidPos,
    /// Shard of that transaction.
    pub shard_id: String,
}

impl RestartRow {
    /// The row of `channel` before anything was recorded.
    pub fn empty(channel: ChannelId) -> RestartRow {
        RestartRow {
            channel,
            seqno: None,
            epoch: Epoch(0),
            event_id: None,
            gtid: GtidPos::new(),
            shard_id: String::new(),
        }
    }

    /// The stored text of `event_id` (empty for `None`).
    pub fn event_id_text(&self) -> String {
        self.event_id
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    }
}

/// The `CREATE` statements of the catalog schema and restart table.
pub fn create_statements(catalog: &str) -> [String; 2] {
    let schema = quote_ident(catalog);
    [
        format!("CREATE DATABASE IF NOT EXISTS {schema}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {schema}.{} (\
             channel SMALLINT UNSIGNED NOT NULL PRIMARY KEY, \
             seqno BIGINT NOT NULL, \
             epoch BIGINT UNSIGNED NOT NULL, \
             event_id VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL, \
             gtid TEXT CHARACTER SET ascii NOT NULL, \
             shard_id VARCHAR(192) CHARACTER SET utf8mb4 NOT NULL, \
             extract_time DATETIME(6) NULL, \
             commit_time DATETIME(6) NULL, \
             applied_latency_ms BIGINT NOT NULL DEFAULT 0, \
             ddl_seqno BIGINT NOT NULL DEFAULT -1\
             ) ENGINE=InnoDB",
            quote_ident(RESTART_TABLE)
        ),
    ]
}

/// The UPDATE that marks a DDL transaction as started on a channel, run
/// (autocommit) just before the DDL. DDL commits implicitly, so the data
/// and the restart row cannot commit together; after a crash between the
/// DDL and its restart row, `ddl_seqno` greater than `seqno` says the DDL
/// of that seqno may already have run, and the channel replays it
/// tolerating "already exists / does not exist" errors (see
/// `super::retry::is_ddl_already_applied`). Parameters: `ddl_seqno`,
/// `channel`.
pub fn mark_ddl_statement(catalog: &str) -> String {
    format!(
        "UPDATE {}.{} SET ddl_seqno = ? WHERE channel = ?",
        quote_ident(catalog),
        quote_ident(RESTART_TABLE)
    )
}

/// The `ddl_seqno` of channel `channel` when it is ahead of the channel's
/// committed seqno: a DDL transaction that started but whose restart row
/// was never committed (it may or may not have run).
///
/// # Errors
/// [`RestartError::Sql`].
pub async fn pending_ddl(
    conn: &mut Conn,
    catalog: &str,
    channel: ChannelId,
) -> Result<Option<Seqno>, RestartError> {
    let row: Option<(i64, i64)> = conn
        .exec_first(
            format!(
                "SELECT seqno, ddl_seqno FROM {}.{} WHERE channel = ?",
                quote_ident(catalog),
                quote_ident(RESTART_TABLE)
            ),
            (channel.get(),),
        )
        .await
        .map_err(|source| RestartError::Sql {
            catalog: catalog.to_string(),
            source,
        })?;
    Ok(match row {
        Some((seqno, ddl)) if ddl > seqno => Some(Seqno(ddl as u64)),
        _ => None,
    })
}

/// The UPDATE that records a channel's progress, run just before COMMIT
/// in the transaction that carries the data. Parameters, in order:
/// `seqno`, `epoch`, `event_id`, `gtid`, `shard_id`, `extract_time` (Unix
/// seconds), then `channel`. The `seqno <= ?` guard keeps the row from
/// moving backwards: such an update matches no row, which the channel
/// treats as an error.
pub fn update_statement(catalog: &str) -> String {
    format!(
        "UPDATE {}.{} SET seqno = ?, epoch = ?, event_id = ?, gtid = ?, shard_id = ?, \
         extract_time = FROM_UNIXTIME(?), commit_time = UTC_TIMESTAMP(6), \
         applied_latency_ms = GREATEST(0, TIMESTAMPDIFF(MICROSECOND, FROM_UNIXTIME(?), UTC_TIMESTAMP(6)) DIV 1000) \
         WHERE channel = ? AND seqno <= ?",
        quote_ident(catalog),
        quote_ident(RESTART_TABLE)
    )
}

/// Parameters of [`update_statement`] for `row`, committed at master time
/// `extract_time` (Unix seconds).
pub fn update_params(row: &RestartRow, extract_time: u32) -> Params {
    let seqno = stored_seqno(row.seqno);
    Params::Positional(vec![
        Param::Int(seqno),
        Param::UInt(row.epoch.get()),
        Param::Bytes(row.event_id_text().into_bytes()),
        Param::Bytes(row.gtid.to_string().into_bytes()),
        Param::Bytes(row.shard_id.as_bytes().to_vec()),
        Param::UInt(u64::from(extract_time)),
        Param::UInt(u64::from(extract_time)),
        Param::UInt(u64::from(row.channel.get())),
        Param::Int(seqno),
    ])
}

/// The stored form of a restart row's seqno: -1 for `None`.
fn stored_seqno(seqno: Option<Seqno>) -> i64 {
    seqno.map_or(-1, |s| s.get() as i64)
}

/// Errors of the restart table.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    /// The replica refused a statement.
    #[error("restart table {catalog}.{RESTART_TABLE}: {source}")]
    Sql {
        /// Catalog schema.
        catalog: String,
        /// The error.
        #[source]
        source: mysql_async::Error,
    },
    /// The stored channel count differs from the configured one and the
    /// rows are not all at one seqno.
    #[error(
        "restart table {catalog}.{RESTART_TABLE} holds {stored} channels at different seqnos \
         ({seqnos}); the channel count can change to {configured} only after a clean offline: \
         restart with {stored} channels and go offline cleanly first"
    )]
    ChannelCountChange {
        /// Catalog schema.
        catalog: String,
        /// Channels in the table.
        stored: usize,
        /// Channels configured.
        configured: u16,
        /// The stored seqnos, comma separated.
        seqnos: String,
    },
    /// A stored value is not what the column holds.
    #[error(
        "restart row of channel {channel} ({catalog}.{RESTART_TABLE}): {column} {text:?} is not \
         {expected}: {source}"
    )]
    Malformed {
        /// Catalog schema.
        catalog: String,
        /// The row's channel.
        channel: u16,
        /// The column (`event_id`, `gtid`).
        column: &'static str,
        /// The stored text.
        text: String,
        /// What the column holds (`a binlog position`, ...).
        expected: &'static str,
        /// Why it is not.
        #[source]
        source: Box<PositionError>,
    },
}

/// Creates the catalog and reads every restart row; on first start, or
/// after a clean offline with a different channel count, (re)creates one
/// row per channel at the common seqno.
///
/// # Errors
/// [`RestartError::ChannelCountChange`] when the count differs and the
/// rows are not at one seqno; [`RestartError::Sql`] otherwise.
pub async fn prepare(
    conn: &mut Conn,
    catalog: &str,
    channels: u16,
) -> Result<Vec<RestartRow>, RestartError> {
    let sql_err = |source| RestartError::Sql {
        catalog: catalog.to_string(),
        source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(sql_err)?;
    for statement in create_statements(catalog) {
        conn.query_drop(statement).await.map_err(sql_err)?;
    }
    // Tables created before the DDL mark existed.
    conn.query_drop(format!(
        "ALTER TABLE {}.{} ADD COLUMN IF NOT EXISTS ddl_seqno BIGINT NOT NULL DEFAULT -1",
        quote_ident(catalog),
        quote_ident(RESTART_TABLE)
    ))
    .await
    .map_err(sql_err)?;
    let mut rows = read(conn, catalog).await?;
    if rows.len() != usize::from(channels) {
        let distinct: std::collections::BTreeSet<Option<Seqno>> =
            rows.iter().map(|r| r.seqno).collect();
        if distinct.len() > 1 {
            return Err(RestartError::ChannelCountChange {
                catalog: catalog.to_string(),
                stored: rows.len(),
                configured: channels,
                seqnos: rows
                    .iter()
                    .map(|r| stored_seqno(r.seqno).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
        let template = rows
            .first()
            .cloned()
            .unwrap_or_else(|| RestartRow::empty(ChannelId::FIRST));
        let table = format!("{}.{}", quote_ident(catalog), quote_ident(RESTART_TABLE));
        conn.query_drop("START TRANSACTION")
            .await
            .map_err(sql_err)?;
        conn.query_drop(format!("DELETE FROM {table}"))
            .await
            .map_err(sql_err)?;
        for channel in ChannelId::all(channels) {
            conn.exec_drop(
                format!(
                    "INSERT INTO {table} (channel, seqno, epoch, event_id, gtid, shard_id) \
                     VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (
                    channel.get(),
                    stored_seqno(template.seqno),
                    template.epoch.get(),
                    template.event_id_text(),
                    template.gtid.to_string(),
                    template.shard_id.clone(),
                ),
            )
            .await
            .map_err(sql_err)?;
        }
        conn.query_drop("COMMIT").await.map_err(sql_err)?;
        rows = read(conn, catalog).await?;
    }
    conn.query_drop("SET SESSION sql_log_bin = DEFAULT")
        .await
        .map_err(sql_err)?;
    Ok(rows)
}

/// Every restart row, by channel, parsed: this is where the stored text
/// of a restart row becomes typed, and nowhere else.
///
/// # Errors
/// [`RestartError::Sql`]; [`RestartError::Malformed`] for an `event_id`
/// that is neither empty nor a binlog position, or a `gtid` that is not a
/// MariaDB GTID position (empty is the empty position), naming the channel
/// and the text.
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<Vec<RestartRow>, RestartError> {
    let rows: Vec<(u16, i64, u64, String, String, String)> = conn
        .query(format!(
            "SELECT channel, seqno, epoch, event_id, gtid, shard_id FROM {}.{} ORDER BY channel",
            quote_ident(catalog),
            quote_ident(RESTART_TABLE)
        ))
        .await
        .map_err(|source| RestartError::Sql {
            catalog: catalog.to_string(),
            source,
        })?;
    rows.into_iter()
        .map(|(channel, seqno, epoch, event_id, gtid, shard_id)| {
            let malformed = |column, text: String, expected, source| RestartError::Malformed {
                catalog: catalog.to_string(),
                channel,
                column,
                text,
                expected,
                source: Box::new(source),
            };
            let event_id = if event_id.is_empty() {
                None
            } else {
                match event_id.parse::<BinlogPosition>() {
                    Ok(position) => Some(position),
                    Err(e) => return Err(malformed("event_id", event_id, "a binlog position", e)),
                }
            };
            let gtid = match gtid.parse::<GtidPos>() {
                Ok(pos) => pos,
                Err(e) => {
                    return Err(malformed("gtid", gtid, "a MariaDB GTID position", e));
                }
            };
            Ok(RestartRow {
                channel: ChannelId::recorded(channel),
                seqno: u64::try_from(seqno).ok().map(Seqno),
                epoch: Epoch(epoch),
                event_id,
                gtid,
                shard_id,
            })
        })
        .collect()
}

/// Records where a takeover started on the rows of channels that have
/// committed nothing yet (`seqno` -1): `event_id` is the takeover's binlog
/// position and `gtid` the replica's `gtid_slave_pos` there. Rows at -1
/// with an event id then say "nothing applied since this position", which
/// a handback uses when nothing was applied. Written with
/// `sql_log_bin = 0`.
///
/// # Errors
/// [`RestartError::Sql`].
pub async fn record_start(
    conn: &mut Conn,
    catalog: &str,
    event_id: &BinlogPosition,
    gtid: &GtidPos,
) -> Result<(), RestartError> {
    let sql_err = |source| RestartError::Sql {
        catalog: catalog.to_string(),
        source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(sql_err)?;
    conn.exec_drop(
        format!(
            "UPDATE {}.{} SET event_id = ?, gtid = ? WHERE seqno = -1",
            quote_ident(catalog),
            quote_ident(RESTART_TABLE)
        ),
        (event_id.to_string(), gtid.to_string()),
    )
    .await
    .map_err(sql_err)?;
    conn.query_drop("SET SESSION sql_log_bin = DEFAULT")
        .await
        .map_err(sql_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_the_catalog() {
        let [db, table] = create_statements("shardrep_a`b");
        assert_eq!(db, "CREATE DATABASE IF NOT EXISTS `shardrep_a``b`");
        assert!(
            table.starts_with("CREATE TABLE IF NOT EXISTS `shardrep_a``b`.`restart_position` (")
        );
        assert!(update_statement("x").ends_with("WHERE channel = ? AND seqno <= ?"));
    }

    #[test]
    fn update_params_in_order() {
        let row = RestartRow {
            channel: ChannelId::recorded(3),
            seqno: Some(Seqno(42)),
            epoch: Epoch(7),
            event_id: Some("mariadb-bin.000002:1234".parse().unwrap()),
            gtid: "0-1-99".parse().unwrap(),
            shard_id: "sb01".into(),
        };
        let Params::Positional(p) = update_params(&row, 1_700_000_000) else {
            panic!("positional")
        };
        assert_eq!(p[0], Param::Int(42));
        assert_eq!(p[1], Param::UInt(7));
        assert_eq!(p[2], Param::Bytes(b"mariadb-bin.000002:1234".to_vec()));
        assert_eq!(p[3], Param::Bytes(b"0-1-99".to_vec()));
        assert_eq!(p[7], Param::UInt(3));
        assert_eq!(p[8], Param::Int(42));
        assert_eq!(p.len(), 9);
    }
}
