//! The service's source master after a master failover (issue 20):
//! `shardrepctl source set` switches the service to another master of the
//! same replication topology (a promoted replica), and the catalog's
//! source table ([`crate::catalog::SOURCE_TABLE`]) keeps that master, so
//! every later start reads from it: the configuration's `[source]` is the
//! default only.
//!
//! The row also says where extraction resumes on the new master: the
//! queue's next seqno at the switch (`first_seqno`) and the GTID position
//! after the last transaction kept in the queue (`resume_gtid`). While the
//! queue's next seqno is still `first_seqno` (nothing was read from the
//! new master yet) an extraction starts there by GTID
//! ([`crate::extractor::reader::ExtractStart::Gtid`]); once a transaction
//! of the new master is stored, the queue's own progress (a binlog
//! position of the new master) says where. Transactions with seqnos below
//! `first_seqno` were read from the previous master (`previous`): their
//! `event_id`s in the queue and in the restart rows are positions in its
//! binlog.
//!
//! The errant-transaction check ([`missing_on`]) compares the GTID
//! position the replica applied with the new master's
//! `@@gtid_binlog_state` ([`BinlogState`]: the last GTID it binlogged for
//! every domain and server id, MariaDB KB "gtid_binlog_state"): a
//! transaction `D-S-N` is on the new master when its binlog holds a
//! transaction of server S in domain D with a sequence number of N or
//! more. Comparing per domain only (`@@gtid_binlog_pos`) would take a
//! promoted replica's own new writes, which reuse the sequence numbers of
//! the old master's lost tail in the same domain, for that tail.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::applier::skipped::SkippedSeqno;
use crate::catalog::{self, SOURCE_PENDING_TABLE, SOURCE_TABLE, TABLE_EXISTS};
use crate::config::{Config, SourceEndpoint};
use crate::position::{Gtid, GtidPos, PositionError, Seqno};

/// The source master stored by a switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSource {
    /// The master's host name or address.
    pub host: String,
    /// Its TCP port.
    pub port: u16,
    /// The user shardrep reads its binlog as (the configuration's
    /// password is used).
    pub user: String,
    /// The server id shardrep announces to it.
    pub server_id: u32,
    /// `host:port` of the source before the switch.
    pub previous: String,
    /// Where extraction resumes on this master, while nothing of it is
    /// stored yet; `None` when the queue held nothing at the switch (or
    /// a handback or reset removed the queue since).
    pub resume: Option<SwitchResume>,
    /// Seqnos of the queue recorded as skipped at the switch (never
    /// applied: the new master lacks them), as ranges; empty when none.
    pub discarded: String,
    /// When the switch was stored (UTC, `YYYY-MM-DD HH:MM:SS.ffffff`);
    /// empty before it is.
    pub switched_at: String,
}

/// Where extraction resumes on a source switched to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchResume {
    /// The queue's next seqno at the switch: the first transaction read
    /// from the new master gets it.
    pub first_seqno: Seqno,
    /// The GTID position after the last transaction kept in the queue
    /// (every domain), where the new master's binlog is read from.
    pub gtid: GtidPos,
}

impl StoredSource {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `config` with this master as its live source (host, port, user,
    /// server id; the password and every other key as configured). A
    /// configuration whose source is a binlog directory is returned as
    /// it is (a switch needs a live source).
    pub fn apply(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if let SourceEndpoint::Live(live) = &mut config.source.endpoint {
            live.host.clone_from(&self.host);
            live.port = self.port;
            live.user.clone_from(&self.user);
            live.server_id = self.server_id;
        }
        config
    }
}

/// Errors of the source table.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The server refused a statement.
    #[error(
        "source table {catalog}.{SOURCE_TABLE}: {}",
        crate::mysql::ErrorText(cause)
    )]
    Sql {
        /// Catalog schema.
        catalog: String,
        /// The server's error.
        cause: mysql_async::Error,
    },
    /// A stored value is not what shardrep writes (edited by hand).
    #[error("source table {catalog}.{SOURCE_TABLE}: {column} {value:?} {reason}")]
    Value {
        /// Catalog schema.
        catalog: String,
        /// The column.
        column: &'static str,
        /// Its text.
        value: String,
        /// Why it is refused.
        reason: String,
    },
}

fn sql(catalog: &str) -> impl Fn(mysql_async::Error) -> SourceError + '_ {
    move |cause| SourceError::Sql {
        catalog: catalog.to_string(),
        cause,
    }
}

type SourceRow = (
    String,
    u16,
    String,
    u32,
    String,
    Option<u64>,
    String,
    String,
    String,
);

/// The stored source; `None` when no switch was stored (the table does
/// not exist or is empty).
///
/// # Errors
/// [`SourceError::Sql`]; [`SourceError::Value`] for a `resume_gtid` that
/// is not a GTID position.
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<Option<StoredSource>, SourceError> {
    let exists: Option<u64> = conn
        .exec_first(TABLE_EXISTS, (catalog, SOURCE_TABLE))
        .await
        .map_err(sql(catalog))?;
    if exists != Some(1) {
        return Ok(None);
    }
    let row: Option<SourceRow> = conn
        .query_first(catalog::source_select(catalog))
        .await
        .map_err(sql(catalog))?;
    let Some((host, port, user, server_id, previous, first, gtid, discarded, switched_at)) = row
    else {
        return Ok(None);
    };
    let resume = match first {
        None => None,
        Some(first) => Some(SwitchResume {
            first_seqno: Seqno(first),
            gtid: gtid.parse().map_err(|e| SourceError::Value {
                catalog: catalog.to_string(),
                column: "resume_gtid",
                value: gtid.clone(),
                reason: format!("is not a MariaDB GTID position: {e}"),
            })?,
        }),
    };
    Ok(Some(StoredSource {
        host,
        port,
        user,
        server_id,
        previous,
        resume,
        discarded,
        switched_at,
    }))
}

/// Stores `source` and records `discard` as skipped seqnos, and removes
/// the mark of the switch under way ([`mark_pending`]), in one
/// transaction (without binary logging: the decision is this replica's
/// own), so that a crash leaves either the switch whole or nothing of it.
///
/// # Errors
/// [`SourceError::Sql`]; nothing is stored then.
pub async fn write(
    conn: &mut Conn,
    catalog: &str,
    source: &StoredSource,
    discard: &[SkippedSeqno],
) -> Result<(), SourceError> {
    let err = sql(catalog);
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(&err)?;
    let result = async {
        // DDL commits by itself: before the transaction.
        conn.query_drop(catalog::source_create(catalog)).await?;
        conn.query_drop(catalog::skipped_create(catalog)).await?;
        conn.query_drop(catalog::source_pending_create(catalog))
            .await?;
        conn.query_drop("START TRANSACTION").await?;
        conn.query_drop(catalog::source_pending_delete(catalog))
            .await?;
        conn.exec_drop(
            catalog::source_replace(catalog),
            (
                source.host.as_str(),
                source.port,
                source.user.as_str(),
                source.server_id,
                source.previous.as_str(),
                source.resume.as_ref().map(|r| r.first_seqno.get()),
                source
                    .resume
                    .as_ref()
                    .map(|r| r.gtid.to_string())
                    .unwrap_or_default(),
                source.discarded.as_str(),
            ),
        )
        .await?;
        for s in discard {
            conn.exec_drop(
                catalog::skipped_insert(catalog),
                (s.seqno.get(), s.event_id.as_str(), s.shard_id.as_str()),
            )
            .await?;
        }
        conn.query_drop("COMMIT").await
    }
    .await;
    if result.is_err() {
        let _ = conn.query_drop("ROLLBACK").await;
    }
    let reset = conn.query_drop("SET SESSION sql_log_bin = DEFAULT").await;
    result.map_err(&err)?;
    reset.map_err(&err)
}

/// A switch under way ([`mark_pending`]): the master switched to, as
/// `source set` got it, and when the switch started (UTC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSwitch {
    /// The new master's host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The user to read its binlog as.
    pub user: String,
    /// The server id to announce to it.
    pub server_id: u32,
    /// When the switch started (UTC).
    pub started_at: String,
}

impl PendingSwitch {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Marks a switch to `to` (its host, port, user and server id) under
/// way, committed when this returns (before the service is taken offline
/// for it): until [`write`] or [`clear_pending`] removes the mark, a run
/// applies nothing beyond what the channels committed ([`read_pending`]),
/// so a crash in the middle of the switch never resumes applying the old
/// master's queue, which the new master may lack.
///
/// # Errors
/// [`SourceError::Sql`].
pub async fn mark_pending(
    conn: &mut Conn,
    catalog: &str,
    to: &StoredSource,
) -> Result<(), SourceError> {
    let err = sql(catalog);
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(&err)?;
    let result = async {
        conn.query_drop(catalog::source_pending_create(catalog))
            .await?;
        conn.exec_drop(
            catalog::source_pending_replace(catalog),
            (to.host.as_str(), to.port, to.user.as_str(), to.server_id),
        )
        .await
    }
    .await;
    let reset = conn.query_drop("SET SESSION sql_log_bin = DEFAULT").await;
    result.map_err(&err)?;
    reset.map_err(&err)
}

/// Removes the mark of a switch under way (the switch was refused or
/// failed before anything changed).
///
/// # Errors
/// [`SourceError::Sql`].
pub async fn clear_pending(conn: &mut Conn, catalog: &str) -> Result<(), SourceError> {
    unlogged_if_table(
        conn,
        catalog,
        SOURCE_PENDING_TABLE,
        &catalog::source_pending_delete(catalog),
    )
    .await
}

/// Runs `statement` with `sql_log_bin = 0` when the catalog table `table`
/// exists (nothing to do otherwise).
///
/// # Errors
/// [`SourceError::Sql`].
async fn unlogged_if_table(
    conn: &mut Conn,
    catalog: &str,
    table: &str,
    statement: &str,
) -> Result<(), SourceError> {
    let exists: Option<u64> = conn
        .exec_first(TABLE_EXISTS, (catalog, table))
        .await
        .map_err(sql(catalog))?;
    if exists != Some(1) {
        return Ok(());
    }
    conn.query_drop(format!(
        "SET SESSION sql_log_bin = 0; {statement}; SET SESSION sql_log_bin = DEFAULT"
    ))
    .await
    .map_err(sql(catalog))
}

/// The switch under way, if any.
///
/// # Errors
/// [`SourceError::Sql`].
pub async fn read_pending(
    conn: &mut Conn,
    catalog: &str,
) -> Result<Option<PendingSwitch>, SourceError> {
    let exists: Option<u64> = conn
        .exec_first(TABLE_EXISTS, (catalog, SOURCE_PENDING_TABLE))
        .await
        .map_err(sql(catalog))?;
    if exists != Some(1) {
        return Ok(None);
    }
    let row: Option<(String, u16, String, u32, String)> = conn
        .query_first(catalog::source_pending_select(catalog))
        .await
        .map_err(sql(catalog))?;
    Ok(
        row.map(|(host, port, user, server_id, started_at)| PendingSwitch {
            host,
            port,
            user,
            server_id,
            started_at,
        }),
    )
}

/// Forgets where extraction resumes (the queue is gone: a handback or a
/// reset); the stored source stays the service's source.
///
/// # Errors
/// [`SourceError::Sql`].
pub async fn clear_resume(conn: &mut Conn, catalog: &str) -> Result<(), SourceError> {
    unlogged_if_table(
        conn,
        catalog,
        SOURCE_TABLE,
        &catalog::source_clear_resume(catalog),
    )
    .await
}

/// The stored source of `config`'s service, read from its replica;
/// `None` when none is stored, or for an extractor-role service (no
/// replica).
///
/// # Errors
/// The replica cannot be connected to, or as [`read`].
pub async fn read_for(config: &Config) -> Result<Option<StoredSource>, String> {
    Ok(read_both(config).await?.0)
}

/// The stored source and the switch under way of `config`'s service
/// ([`read`], [`read_pending`]); both `None` for an extractor-role
/// service.
///
/// # Errors
/// The replica cannot be connected to, or as [`read`].
pub async fn read_both(
    config: &Config,
) -> Result<(Option<StoredSource>, Option<PendingSwitch>), String> {
    if config.service.role == crate::config::Role::Extractor {
        return Ok((None, None));
    }
    let mut conn = Conn::new(super::replica_opts(config)).await.map_err(|e| {
        format!(
            "cannot connect to the replica {}:{}: {}",
            config.replica.host,
            config.replica.port,
            crate::mysql::ErrorText(&e)
        )
    })?;
    let catalog = config.catalog_schema();
    let stored = match read(&mut conn, &catalog).await {
        Ok(stored) => read_pending(&mut conn, &catalog)
            .await
            .map(|pending| (stored, pending))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let _ = conn.disconnect().await;
    stored
}

/// A master's `@@gtid_binlog_state`: the last GTID it binlogged for
/// each domain and server id (comma-separated `D-S-N`, one per pair).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BinlogState {
    last: BTreeMap<(u32, u32), u64>,
}

impl BinlogState {
    /// Whether the master's binlog holds `gtid`: a transaction of its
    /// server in its domain with its sequence number or a higher one.
    pub fn holds(&self, gtid: &Gtid) -> bool {
        self.last
            .get(&(gtid.domain_id, gtid.server_id))
            .is_some_and(|&n| n >= gtid.seq_no)
    }

    /// The highest sequence number of `domain`, whatever the server.
    fn domain_last(&self, domain: u32) -> Option<u64> {
        self.last
            .iter()
            .filter(|((d, _), _)| *d == domain)
            .map(|(_, &n)| n)
            .max()
    }

    /// Whether the state is empty (a master that binlogged nothing).
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// The state with what `slave_pos` (the server's `@@gtid_slave_pos`)
    /// says it applied as a replica: each of its GTIDs `D-S-N` as held up
    /// to N for server S in domain D. A server seeded from a dump (its
    /// `gtid_slave_pos` set by `mariadb-dump --gtid`) holds that history
    /// in its tables, not in its binlog.
    pub fn with_replicated(&self, slave_pos: &GtidPos) -> BinlogState {
        let mut out = self.clone();
        for g in slave_pos.iter() {
            let n = out.last.entry((g.domain_id, g.server_id)).or_insert(0);
            *n = (*n).max(g.seq_no);
        }
        out
    }
}

impl fmt::Display for BinlogState {
    /// `D-S-N,...` in domain and server order; empty when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, ((d, s), n)) in self.last.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", Gtid::new(*d, *s, *n))?;
        }
        Ok(())
    }
}

impl FromStr for BinlogState {
    type Err = PositionError;

    /// Parses `@@gtid_binlog_state`: comma-separated GTIDs, whitespace
    /// around items ignored, an empty text the empty state; a pair given
    /// twice keeps its highest sequence number.
    ///
    /// # Errors
    /// [`PositionError`] for an item that is not a GTID.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut state = BinlogState::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            // One item as a position: the crate's GTID parser and errors.
            let pos: GtidPos = item.parse()?;
            for g in pos.iter() {
                let n = state.last.entry((g.domain_id, g.server_id)).or_insert(0);
                *n = (*n).max(g.seq_no);
            }
        }
        Ok(state)
    }
}

/// Transactions of one domain that a GTID position holds and a master
/// lacks: sequence numbers `first..=last` of `domain`, the last of them
/// written by `server_id`. MariaDB numbers a domain's transactions in one
/// sequence whatever server writes them; where the master's state has
/// other servers' transactions inside the range (`others_within`), some of
/// those sequence numbers may be theirs (transactions the replica applied
/// too, or the master's own writes), and the range is an upper bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingRange {
    /// The replication domain.
    pub domain: u32,
    /// Server id of the last transaction of the range.
    pub server_id: u32,
    /// First missing sequence number.
    pub first: u64,
    /// Last missing sequence number.
    pub last: u64,
    /// The master's last transaction of the domain before the range, as
    /// its state names it (`None`: it has none below the range).
    pub after: Option<Gtid>,
    /// The master's state has transactions of other servers of the domain
    /// with sequence numbers inside the range: the range is at most this.
    pub others_within: bool,
    /// The master holds no transaction of the domain at all.
    pub domain_absent: bool,
    /// The master holds transactions of the domain but none of server
    /// `server_id` (never with `domain_absent`): where the range starts is only where the master's
    /// last of the domain is, and the sequence numbers below the last may
    /// have been other servers' (the count is at most this; the new master
    /// may not be of this topology at all).
    pub server_absent: bool,
}

impl MissingRange {
    /// How many sequence numbers the range spans (the transactions
    /// missing, or at most that many when `others_within`).
    pub fn count(&self) -> u64 {
        self.last - self.first + 1
    }
}

impl fmt::Display for MissingRange {
    /// `D-S-F..D-S-L`, or `D-S-F` for one transaction; `domain D's seq_no
    /// F..L (the last D-S-L)` when the master holds none of server S's
    /// transactions (which servers wrote the ones below L is not known).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = Gtid::new(self.domain, self.server_id, self.first);
        if self.first == self.last {
            write!(f, "{first}")
        } else if self.server_absent {
            let last = Gtid::new(self.domain, self.server_id, self.last);
            write!(
                f,
                "domain {}'s seq_no {}..{} (the last {last})",
                self.domain, self.first, self.last
            )
        } else {
            let last = Gtid::new(self.domain, self.server_id, self.last);
            write!(f, "{first}..{last}")
        }
    }
}

/// The transactions `held` has (a GTID position: the last transaction of
/// each domain) that `master` (its `@@gtid_binlog_state`) lacks: for each
/// of `held`'s GTIDs `D-S-N` the master does not hold, the range from
/// after the master's last transaction of server S in domain D up to N;
/// when the master has no transaction of server S in domain D, from after
/// its last of domain D if that is below N, else from 1. Domains the
/// master has and `held` lacks are not errant (the master's own
/// transactions). Domain order.
pub fn missing_on(held: &GtidPos, master: &BinlogState) -> Vec<MissingRange> {
    held.iter()
        .filter(|g| !master.holds(g))
        .map(|g| {
            let d = g.domain_id;
            let after = match master.last.get(&(d, g.server_id)) {
                Some(&n) => Some(Gtid::new(d, g.server_id, n)),
                // The master's highest of the domain below N, any server.
                None => master
                    .last
                    .iter()
                    .filter(|((dd, _), &n)| *dd == d && n < g.seq_no)
                    .max_by_key(|(_, &n)| n)
                    .map(|(&(_, s), &n)| Gtid::new(d, s, n)),
            };
            let first = after.map_or(1, |a| a.seq_no + 1);
            MissingRange {
                domain: d,
                server_id: g.server_id,
                first,
                last: g.seq_no,
                after,
                others_within: master.last.iter().any(|(&(dd, s), &n)| {
                    dd == d && s != g.server_id && (first..=g.seq_no).contains(&n)
                }),
                domain_absent: master.domain_last(d).is_none(),
                server_absent: master.domain_last(d).is_some()
                    && !master.last.contains_key(&(d, g.server_id)),
            }
        })
        .collect()
}

/// The new master's own writes in the domains of `missing` (from
/// [`missing_on`]): for each range, the last GTID of every other server
/// of its domain in `master` with a sequence number at or above the
/// range's first. MariaDB numbers a domain in one sequence, so these were
/// logged after the point where the replica's stream and the new master's
/// parted: replaying the missing range on it now would log the range
/// after them. Empty when it took no writes since. Domain, server order.
pub fn written_since(missing: &[MissingRange], master: &BinlogState) -> Vec<Gtid> {
    let mut out = Vec::new();
    for range in missing {
        for (&(d, s), &n) in &master.last {
            if d == range.domain && s != range.server_id && n >= range.first {
                out.push(Gtid::new(d, s, n));
            }
        }
    }
    out
}

/// `ranges` as `A, B and C`.
pub fn ranges_text(ranges: &[MissingRange]) -> String {
    let items: Vec<String> = ranges.iter().map(ToString::to_string).collect();
    match items.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> GtidPos {
        text.parse().unwrap()
    }

    fn state(text: &str) -> BinlogState {
        text.parse().unwrap()
    }

    #[test]
    fn writes_since_the_parting_are_the_other_servers_at_or_above_the_first_missing() {
        let missing = missing_on(&pos("0-1-624"), &state("0-1-621,0-2-1218,0-3-400,1-2-900"));
        assert_eq!(missing.len(), 1);
        assert_eq!((missing[0].first, missing[0].last), (622, 624));
        // 0-3-400 is older history; domain 1 is not the range's.
        assert_eq!(
            written_since(&missing, &state("0-1-621,0-2-1218,0-3-400,1-2-900")),
            [Gtid::new(0, 2, 1218)]
        );
        assert!(written_since(&missing, &state("0-1-621,0-3-400")).is_empty());
    }

    #[test]
    fn binlog_state_parses_and_prints_pairs() {
        let s = state(" 0-2-15, 0-1-10,1-1-3");
        assert_eq!(s.to_string(), "0-1-10,0-2-15,1-1-3");
        assert!(s.holds(&Gtid::new(0, 1, 10)));
        assert!(!s.holds(&Gtid::new(0, 1, 11)));
        assert!(!s.holds(&Gtid::new(0, 3, 1)));
        assert!(state("").is_empty());
        assert!("0-1".parse::<BinlogState>().is_err());
    }

    #[test]
    fn nothing_missing_when_the_master_holds_every_domain() {
        assert!(missing_on(&pos("0-1-10"), &state("0-1-10")).is_empty());
        // Promoted replica wrote on: the old master's last, then its own.
        assert!(missing_on(&pos("0-1-10"), &state("0-1-10,0-2-15")).is_empty());
        // A domain of the master's own.
        assert!(missing_on(&pos("0-1-10"), &state("0-1-10,7-2-3")).is_empty());
        assert!(missing_on(&pos(""), &state("0-1-1")).is_empty());
    }

    #[test]
    fn the_promoted_replicas_own_writes_do_not_hide_the_lost_tail() {
        // The replica applied 0-1-8..0-1-10 that the promoted replica
        // never received; it then wrote 0-2-8 and 0-2-9 itself.
        let missing = missing_on(&pos("0-1-10"), &state("0-1-7,0-2-9"));
        assert_eq!(ranges_text(&missing), "0-1-8..0-1-10");
        assert_eq!(missing[0].count(), 3);
    }

    #[test]
    fn missing_ranges_name_domain_server_and_seqnos() {
        let missing = missing_on(&pos("0-1-1210,1-5-7"), &state("0-1-1200,1-5-7"));
        assert_eq!(
            missing,
            vec![MissingRange {
                domain: 0,
                server_id: 1,
                first: 1201,
                last: 1210,
                after: Some(Gtid::new(0, 1, 1200)),
                others_within: false,
                domain_absent: false,
                server_absent: false,
            }]
        );
        assert_eq!(missing[0].to_string(), "0-1-1201..0-1-1210");
        assert_eq!(missing[0].count(), 10);
        let one = missing_on(&pos("0-1-8"), &state("0-1-7"));
        assert_eq!(one[0].to_string(), "0-1-8");
        // A domain the master never saw: from its first transaction.
        let absent = missing_on(&pos("0-1-8,3-9-4"), &state("0-1-8"));
        assert_eq!(ranges_text(&absent), "3-9-1..3-9-4");
        let two = missing_on(&pos("0-1-8,3-9-4"), &state("0-1-6"));
        assert_eq!(ranges_text(&two), "0-1-7..0-1-8 and 3-9-1..3-9-4");
        // No transaction of server 1 in a domain whose last is below.
        // Which servers wrote 6 and 7 is not known.
        let below = missing_on(&pos("0-1-8"), &state("0-2-5"));
        assert!(below[0].server_absent);
        assert_eq!(
            ranges_text(&below),
            "domain 0's seq_no 6..8 (the last 0-1-8)"
        );
    }

    #[test]
    fn other_servers_inside_a_missing_range_make_it_an_upper_bound() {
        // Server 3 wrote 24936..87787 in the shared stream, server 1
        // again from 87788: the state alone cannot tell which seqnos of
        // the range are server 1's.
        let missing = missing_on(&pos("0-1-93992"), &state("0-1-24935,0-3-87787"));
        assert_eq!(ranges_text(&missing), "0-1-24936..0-1-93992");
        assert!(missing[0].others_within);
        assert_eq!(missing[0].after, Some(Gtid::new(0, 1, 24935)));
        let plain = missing_on(&pos("0-1-10"), &state("0-1-7,0-3-5"));
        assert!(!plain[0].others_within);
    }

    #[test]
    fn what_the_master_applied_as_a_replica_counts_as_held() {
        // Seeded from a dump: nothing in its binlog, gtid_slave_pos set.
        let seeded = state("").with_replicated(&pos("0-1-93992"));
        let missing = missing_on(&pos("0-1-94022"), &seeded);
        assert_eq!(ranges_text(&missing), "0-1-93993..0-1-94022");
        assert_eq!(missing[0].count(), 30);
        assert!(!missing[0].domain_absent);
        assert!(missing_on(&pos("0-1-93992"), &seeded).is_empty());
        // The binlog's own state is kept: the higher of the two.
        let both = state("0-1-50").with_replicated(&pos("0-1-40"));
        assert_eq!(both.to_string(), "0-1-50");
    }

    #[test]
    fn a_domain_the_master_never_saw_is_absent() {
        let missing = missing_on(&pos("0-3-96829"), &state("1-5-3"));
        assert!(missing[0].domain_absent);
        assert_eq!(missing[0].after, None);
        assert_eq!(ranges_text(&missing), "0-3-1..0-3-96829");
    }

    #[test]
    fn a_stored_source_replaces_the_live_endpoint_only() {
        let config = Config::from_toml_str(
            r#"
[service]
name = "sjc"
[source]
kind = "live"
host = "old"
port = 3306
user = "u"
password = "secret"
server_id = 77
[replica]
host = "r"
user = "u"
password = "p"
[queue]
dir = "/tmp/q"
[control]
socket = "/tmp/q.sock"
"#,
            "test.toml",
        )
        .unwrap();
        let stored = StoredSource {
            host: "new".into(),
            port: 3307,
            user: "v".into(),
            server_id: 78,
            previous: "old:3306".into(),
            resume: None,
            discarded: String::new(),
            switched_at: String::new(),
        };
        let switched = stored.apply(&config);
        let live = switched.source.live().unwrap();
        assert_eq!(
            (
                live.host.as_str(),
                live.port,
                live.user.as_str(),
                live.server_id
            ),
            ("new", 3307, "v", 78)
        );
        assert_eq!(live.password.expose(), "secret");
        assert_eq!(stored.address(), "new:3307");
    }
}
