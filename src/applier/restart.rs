//! Restart positions on the replica: the catalog schema `shardrep_<service>`
//! holds one row per channel, updated in the same transaction as the data
//! it records (shared/DESIGN.md §4, §5).
//!
//! Table `restart_position`: its columns, DDL and statement texts are in
//! [`crate::catalog`] ([`catalog::restart_create`]); this module runs them
//! and turns the rows into [`RestartRow`]s.
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

use crate::catalog::{self, RESTART_TABLE};
use crate::mysql::error_codes::ER_BAD_FIELD_ERROR;
use crate::position::{
    BinlogPosition, ChannelId, Epoch, GtidPos, PositionError, Seqno, SeqnoRanges,
};

mod recovery;

pub use recovery::{all_done_at, recover, Recovery};

/// A restart row's `low_water`: a seqno L such that, when the row was
/// written, every seqno up to L was committed (by some channel) or needed
/// no apply (shared/research/writeset.md §5; column doc in
/// [`catalog::restart_create`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LowWater {
    /// Not recorded (stored NULL): a row written by a shardrep older than
    /// the column, or built without one. Such a row records only its
    /// channel's last seqno.
    Unrecorded,
    /// Nothing known committed yet (stored -1).
    BeforeFirst,
    /// Every seqno up to this one.
    At(Seqno),
}

impl LowWater {
    /// The low-water mark of `seqno` (`None`: [`LowWater::BeforeFirst`]).
    pub fn of(seqno: Option<Seqno>) -> LowWater {
        seqno.map_or(LowWater::BeforeFirst, LowWater::At)
    }

    /// The seqno every seqno up to which is done; `None` for
    /// [`LowWater::BeforeFirst`] and [`LowWater::Unrecorded`].
    pub fn seqno(self) -> Option<Seqno> {
        match self {
            LowWater::At(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the row recorded no low-water mark (NULL).
    pub fn is_unrecorded(self) -> bool {
        self == LowWater::Unrecorded
    }

    /// The stored value: NULL, -1 or the seqno.
    pub fn stored(self) -> Option<i64> {
        match self {
            LowWater::Unrecorded => None,
            LowWater::BeforeFirst => Some(-1),
            LowWater::At(s) => Some(s.get() as i64),
        }
    }
}

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
    /// Every seqno up to this one was done when the row was written.
    pub low_water: LowWater,
    /// The seqnos this channel committed above `low_water` (seqnos at or
    /// below it may be listed too; they mean nothing more).
    pub committed_above: SeqnoRanges,
}

impl RestartRow {
    /// The row of `channel` before anything was recorded (its low-water
    /// mark [`LowWater::Unrecorded`]).
    pub fn empty(channel: ChannelId) -> RestartRow {
        RestartRow {
            channel,
            seqno: None,
            epoch: Epoch(0),
            event_id: None,
            gtid: GtidPos::new(),
            shard_id: String::new(),
            low_water: LowWater::Unrecorded,
            committed_above: SeqnoRanges::new(),
        }
    }

    /// The stored text of `event_id` (empty for `None`).
    pub fn event_id_text(&self) -> String {
        self.event_id
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    }
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
        .exec_first(catalog::restart_select_ddl(catalog), (channel.get(),))
        .await
        .map_err(|source| RestartError::Sql {
            catalog: catalog.to_string(),
            cause: source,
        })?;
    Ok(match row {
        Some((seqno, ddl)) if ddl > seqno => Some(Seqno(ddl as u64)),
        _ => None,
    })
}

/// Parameters of [`catalog::restart_update`] for `row`, committed at
/// master time `extract_time` (Unix seconds).
pub fn update_params(row: &RestartRow, extract_time: u32) -> Params {
    let seqno = stored_seqno(row.seqno);
    Params::Positional(vec![
        Param::Int(seqno),
        Param::UInt(row.epoch.get()),
        Param::Bytes(row.event_id_text().into_bytes()),
        Param::Bytes(row.gtid.to_string().into_bytes()),
        Param::Bytes(row.shard_id.as_bytes().to_vec()),
        row.low_water.stored().map_or(Param::NULL, Param::Int),
        Param::Bytes(row.committed_above.to_string().into_bytes()),
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
    #[error(
        "restart table {catalog}.{RESTART_TABLE}: {}",
        crate::mysql::ErrorText(cause)
    )]
    Sql {
        /// Catalog schema.
        catalog: String,
        /// The error.
        cause: mysql_async::Error,
    },
    /// The stored channel count differs from the configured one and the
    /// rows are not all at one seqno with every seqno up to it recorded
    /// done ([`all_done_at`]).
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
         {expected}: {cause}"
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
        cause: Box<PositionError>,
    },
    /// A stored seqno (or low-water mark) below -1: neither "nothing
    /// applied" (-1) nor a seqno. Taken as "nothing applied", it would
    /// replay the queue from its start.
    #[error(
        "restart row of channel {channel} ({catalog}.{RESTART_TABLE}): {column} {seqno} is \
         neither -1 (nothing applied yet) nor a seqno (0 or more)"
    )]
    BadSeqno {
        /// Catalog schema.
        catalog: String,
        /// The row's channel.
        channel: u16,
        /// The column (`seqno`, `low_water`).
        column: &'static str,
        /// The stored value.
        seqno: i64,
    },
    /// A row's `committed_above` names a seqno above the row's own seqno:
    /// a channel records only seqnos it committed, and its row's seqno is
    /// the highest of them. Trusted, it would skip a seqno nobody applied.
    #[error(
        "restart row of channel {channel}: committed_above {text:?} names seqno {named}, above \
         the row's own seqno {seqno} (a channel records only the seqnos it committed, the \
         highest in its seqno column): restore the row"
    )]
    CommittedAboveSeqno {
        /// The row's channel.
        channel: u16,
        /// The stored `committed_above` (past 200 characters, elided with
        /// its length).
        text: String,
        /// Its highest seqno.
        named: u64,
        /// The row's seqno (-1: none).
        seqno: i64,
    },
    /// The rows record only each channel's last seqno (written by an older
    /// shardrep) and are at different seqnos: a restart is exact only
    /// with a fixed shard-to-channel assignment.
    #[error(
        "restart rows ({seqnos}) were written by an older shardrep (no low_water): they record \
         only each channel's last seqno, which is exact only when each shard always runs on the \
         same channel. Start with parallelism = \"shard\" and go offline cleanly once (every \
         row then records the committed set), then change it"
    )]
    LegacyRows {
        /// The stored seqnos, comma separated.
        seqnos: String,
    },
    /// The rows are as many as the configured channels, but their channel
    /// numbers are not 0 to N-1: a channel would find no row of its own.
    #[error(
        "restart table {catalog}.{RESTART_TABLE} holds rows of channels {stored}, not of channels \
         0 to {last}: restore the rows of the {configured} configured channels (or `shardrepctl \
         reset --confirm SERVICE` after a re-seed)"
    )]
    ChannelNumbers {
        /// Catalog schema.
        catalog: String,
        /// The stored channel numbers, comma separated.
        stored: String,
        /// The highest configured channel number.
        last: u16,
        /// Channels configured.
        configured: u16,
    },
}

/// Creates the catalog and reads every restart row; on first start, or
/// after a clean offline with a different channel count, (re)creates one
/// row per channel at the common seqno.
///
/// # Errors
/// [`RestartError::ChannelCountChange`] when the count differs and the
/// rows are not at one seqno; [`RestartError::ChannelNumbers`] when the
/// rows are of other channels than 0 to N-1; the errors of [`read`];
/// [`RestartError::Sql`] otherwise.
pub async fn prepare(
    conn: &mut Conn,
    catalog: &str,
    channels: u16,
) -> Result<Vec<RestartRow>, RestartError> {
    let sql_err = |source| RestartError::Sql {
        catalog: catalog.to_string(),
        cause: source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(sql_err)?;
    for statement in catalog::restart_create(catalog) {
        conn.query_drop(statement).await.map_err(sql_err)?;
    }
    // Tables created before the DDL mark, or the committed set, existed.
    conn.query_drop(catalog::restart_add_ddl_seqno(catalog))
        .await
        .map_err(sql_err)?;
    conn.query_drop(catalog::restart_add_committed_set(catalog))
        .await
        .map_err(sql_err)?;
    conn.query_drop(catalog::restart_add_session(catalog))
        .await
        .map_err(sql_err)?;
    conn.query_drop(catalog::restart_add_rolled_back(catalog))
        .await
        .map_err(sql_err)?;
    end_previous_sessions(conn, catalog).await?;
    let mut rows = read(conn, catalog).await?;
    if rows.len() != usize::from(channels) {
        // New rows at one seqno S are exact only when every seqno up to S
        // is done.
        if all_done_at(&rows).is_none() {
            return Err(RestartError::ChannelCountChange {
                catalog: catalog.to_string(),
                stored: rows.len(),
                configured: channels,
                seqnos: rows
                    .iter()
                    .map(|r| match r.low_water.stored() {
                        // At one seqno, but not every seqno below recorded
                        // done: the low-water marks say how far.
                        Some(l) if l < stored_seqno(r.seqno) => {
                            format!("{} (low_water {l})", stored_seqno(r.seqno))
                        }
                        _ => stored_seqno(r.seqno).to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
        let template = rows
            .first()
            .cloned()
            .unwrap_or_else(|| RestartRow::empty(ChannelId::FIRST));
        conn.query_drop("START TRANSACTION")
            .await
            .map_err(sql_err)?;
        conn.query_drop(catalog::restart_delete(catalog))
            .await
            .map_err(sql_err)?;
        for channel in ChannelId::all(channels) {
            conn.exec_drop(
                catalog::restart_insert(catalog),
                (
                    channel.get(),
                    stored_seqno(template.seqno),
                    template.epoch.get(),
                    template.event_id_text(),
                    template.gtid.to_string(),
                    template.shard_id.clone(),
                    LowWater::of(template.seqno).stored(),
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
    // `read` orders the rows by channel.
    if rows.iter().enumerate().any(|(i, r)| r.channel.index() != i) {
        return Err(RestartError::ChannelNumbers {
            catalog: catalog.to_string(),
            stored: rows
                .iter()
                .map(|r| r.channel.get().to_string())
                .collect::<Vec<_>>()
                .join(","),
            last: channels.saturating_sub(1),
            configured: channels,
        });
    }
    Ok(rows)
}

/// Ends the replica sessions the channels of an earlier run recorded
/// ([`catalog::restart_add_session`]) if the replica still runs them: a
/// `kill -9` of shardrep leaves a session that may still commit a block
/// (one waiting for a lock, then COMMIT) after this run read the rows.
///
/// # Errors
/// [`RestartError::Sql`].
async fn end_previous_sessions(conn: &mut Conn, catalog: &str) -> Result<(), RestartError> {
    let sql_err = |source| RestartError::Sql {
        catalog: catalog.to_string(),
        cause: source,
    };
    let sessions: Vec<(u16, i64, Option<i64>)> = conn
        .query(catalog::restart_select_sessions(catalog))
        .await
        .map_err(sql_err)?;
    if sessions.is_empty() {
        return Ok(());
    }
    let current = crate::applier::session::SessionId::of(conn).await;
    for (channel, id, started) in sessions {
        let Ok(id) = u32::try_from(id) else { continue };
        let old = crate::applier::session::SessionId {
            id,
            server_started: started,
        };
        crate::applier::session::end_session(conn, current, old, &format!("channel {channel}"))
            .await
            .map_err(sql_err)?;
    }
    Ok(())
}

/// Every restart row, by channel, parsed: this is where the stored text
/// of a restart row becomes typed, and nowhere else. A table without the
/// `low_water` and `committed_above` columns (an older shardrep's, not
/// upgraded yet by [`prepare`]) reads as rows with
/// [`LowWater::Unrecorded`] and nothing committed above.
///
/// # Errors
/// [`RestartError::Sql`]; [`RestartError::Malformed`] for an `event_id`
/// that is neither empty nor a binlog position, a `gtid` that is not a
/// MariaDB GTID position (empty is the empty position), or a
/// `committed_above` that is not seqno ranges, naming the channel and the
/// text; [`RestartError::BadSeqno`] for a seqno or low-water mark below
/// -1.
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<Vec<RestartRow>, RestartError> {
    type Stored = (u16, i64, u64, String, String, String, Option<i64>, String);
    let sql_err = |source| RestartError::Sql {
        catalog: catalog.to_string(),
        cause: source,
    };
    let rows: Vec<Stored> = match conn.query(catalog::restart_select(catalog)).await {
        Ok(rows) => rows,
        Err(mysql_async::Error::Server(e)) if e.code == ER_BAD_FIELD_ERROR => {
            let legacy: Vec<(u16, i64, u64, String, String, String)> = conn
                .query(catalog::restart_select_legacy(catalog))
                .await
                .map_err(sql_err)?;
            legacy
                .into_iter()
                .map(|(c, s, e, id, g, sh)| (c, s, e, id, g, sh, None, String::new()))
                .collect()
        }
        Err(e) => return Err(sql_err(e)),
    };
    rows.into_iter()
        .map(
            |(channel, seqno, epoch, event_id, gtid, shard_id, low_water, committed_above)| {
                let malformed = |column, text: String, expected, source| RestartError::Malformed {
                    catalog: catalog.to_string(),
                    channel,
                    column,
                    text,
                    expected,
                    cause: Box::new(source),
                };
                let bad_seqno = |column, seqno| RestartError::BadSeqno {
                    catalog: catalog.to_string(),
                    channel,
                    column,
                    seqno,
                };
                let event_id = if event_id.is_empty() {
                    None
                } else {
                    match event_id.parse::<BinlogPosition>() {
                        Ok(position) => Some(position),
                        Err(e) => {
                            return Err(malformed("event_id", event_id, "a binlog position", e))
                        }
                    }
                };
                let gtid = match gtid.parse::<GtidPos>() {
                    Ok(pos) => pos,
                    Err(e) => {
                        return Err(malformed("gtid", gtid, "a MariaDB GTID position", e));
                    }
                };
                if seqno < -1 {
                    return Err(bad_seqno("seqno", seqno));
                }
                let low_water = match low_water {
                    None => LowWater::Unrecorded,
                    Some(-1) => LowWater::BeforeFirst,
                    Some(n) if n < -1 => return Err(bad_seqno("low_water", n)),
                    Some(n) => LowWater::At(Seqno(n as u64)),
                };
                let committed_above = match committed_above.parse::<SeqnoRanges>() {
                    Ok(set) => set,
                    Err(e) => {
                        return Err(malformed(
                            "committed_above",
                            committed_above,
                            "seqno ranges (e.g. 12,14-16)",
                            e,
                        ))
                    }
                };
                Ok(RestartRow {
                    channel: ChannelId::recorded(channel),
                    seqno: u64::try_from(seqno).ok().map(Seqno),
                    epoch: Epoch(epoch),
                    event_id,
                    gtid,
                    shard_id,
                    low_water,
                    committed_above,
                })
            },
        )
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
        cause: source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(sql_err)?;
    conn.exec_drop(
        catalog::restart_record_start(catalog),
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
    fn update_params_in_order() {
        let row = RestartRow {
            channel: ChannelId::recorded(3),
            seqno: Some(Seqno(42)),
            epoch: Epoch(7),
            event_id: Some("mariadb-bin.000002:1234".parse().unwrap()),
            gtid: "0-1-99".parse().unwrap(),
            shard_id: "sb01".into(),
            low_water: LowWater::At(Seqno(39)),
            committed_above: "41-42".parse().unwrap(),
        };
        let Params::Positional(p) = update_params(&row, 1_700_000_000) else {
            panic!("positional")
        };
        assert_eq!(p[0], Param::Int(42));
        assert_eq!(p[1], Param::UInt(7));
        assert_eq!(p[2], Param::Bytes(b"mariadb-bin.000002:1234".to_vec()));
        assert_eq!(p[3], Param::Bytes(b"0-1-99".to_vec()));
        assert_eq!(p[5], Param::Int(39));
        assert_eq!(p[6], Param::Bytes(b"41-42".to_vec()));
        assert_eq!(p[9], Param::UInt(3));
        assert_eq!(p[10], Param::Int(42));
        assert_eq!(p.len(), 11);
        // Not recorded: NULL; nothing yet: -1.
        let unrecorded = RestartRow::empty(ChannelId::recorded(0));
        let Params::Positional(p) = update_params(&unrecorded, 0) else {
            panic!("positional")
        };
        assert_eq!((&p[5], &p[6]), (&Param::NULL, &Param::Bytes(Vec::new())));
        assert_eq!(LowWater::BeforeFirst.stored(), Some(-1));
        assert_eq!(LowWater::of(Some(Seqno(5))), LowWater::At(Seqno(5)));
    }
}
