//! `replica.binlog_gtids = "master"` ([`crate::config::BinlogGtids::Master`]):
//! each master transaction is committed on the replica as a transaction of
//! its own, binlogged under the master's GTID, the commits in seqno order.
//!
//! - **The master's GTID**: with its `START TRANSACTION` (one query) the
//!   session is set to the transaction's GTID and binary logging turned on
//!   (`SET SESSION sql_log_bin = 1, server_id = S, gtid_domain_id = D`,
//!   then `SET SESSION gtid_seq_no = N`, as `mariadb-binlog` replays do;
//!   needs BINLOG REPLAY or SUPER). A transaction that changes a
//!   non-transactional table waits for its turn before it runs: the server
//!   binlogs such a change when its statement ends, not at the COMMIT. The server refuses a sequence number at or below the
//!   domain's last one under `gtid_strict_mode` (1950) when it is set.
//! - **Commit order**: transactions execute in parallel on the channels; a
//!   COMMIT waits until every seqno before its transaction is done (the
//!   low-water mark, [`crate::applier::progress::Progress::low_water`]), so
//!   the replica's binlog holds each domain's GTIDs in the master's order
//!   (what MariaDB's in-order parallel replication and MySQL's
//!   `replica_preserve_commit_order` do). A transaction that has executed
//!   and waits longer than [`TURN_LOCK_GRACE`] for its turn rolls back (an
//!   earlier one may wait for one of its row locks, a conflict the
//!   writesets do not see, such as a gap lock) and runs again when its turn
//!   has come.
//! - **Restart rows**: the restart row cannot be in the transaction (it
//!   would be binlogged, and the replica's own replicas have no catalog
//!   table: they would stop with 1146), so it is written after the COMMIT
//!   without binary logging: after at most `ROW_EVERY_COMMITS` commits or
//!   `ROW_EVERY`, when the channel's input runs dry, and before SYNC and
//!   STOP markers (a row is a transaction, an fsync at flush=1). In
//!   between, the replica's binlog is the record: a seqno whose GTID is in
//!   the replica's `gtid_binlog_state` is committed ([`binlog_has`]), both
//!   after a lost COMMIT reply and at the next start (the replicator's
//!   reconciliation). A transaction rolled back after a non-transactional
//!   change ran is marked (`rolled_back_seqno`): MariaDB binlogs that
//!   change, with its GTID, under a ROLLBACK.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::{Attempt, Channel};
use crate::applier::error::ApplyError;
use crate::applier::progress::TurnWait;
use crate::applier::restart::RestartRow;
use crate::applier::retry::{classify, outcome_unknown, ErrorClass};
use crate::event::Transaction;
use crate::mysql::error_codes::ER_LOCK_DEADLOCK;
use crate::position::{Epoch, Gtid, Seqno};

/// How long a transaction that has executed may hold its locks while it
/// waits for the transactions before it to commit, before it rolls back
/// (module doc).
pub const TURN_LOCK_GRACE: Duration = Duration::from_secs(1);

/// Attempts at writing a restart row after its COMMIT (each after a
/// reconnect when the connection was lost).
const ROW_ATTEMPTS: u32 = 10;

/// A channel writes its restart row after at most this many commits...
const ROW_EVERY_COMMITS: u32 = 64;
/// ... or this long after the last write, and whenever its input runs
/// dry: in between the replica's binlog records the commits (each row is
/// a transaction of its own, an fsync at `innodb_flush_log_at_trx_commit
/// = 1`).
const ROW_EVERY: Duration = Duration::from_millis(100);

/// The restart-row writes a channel has put off ([`Channel::row_after_commit_when_due`]).
#[derive(Debug)]
pub struct RowWrites {
    /// A commit whose row is not written yet.
    pub pending: bool,
    /// Its master commit time (seconds), for the row's latency.
    extract_time: u32,
    /// Commits since the last write.
    since: u32,
    /// When the last row was written.
    written_at: Instant,
}

impl Default for RowWrites {
    fn default() -> RowWrites {
        RowWrites {
            pending: false,
            extract_time: 0,
            since: 0,
            written_at: Instant::now(),
        }
    }
}

/// The statement that sets a session to binlog its next transaction under
/// `gtid`. It also turns binary logging on: the restart row written after
/// each COMMIT leaves it off ([`Channel::row_after_commit`]).
///
/// Two statements: MariaDB checks `gtid_seq_no` against the session's
/// domain and server id as they were before the statement, so one SET of
/// all three fails under `gtid_strict_mode` when the domain changes (1950
/// naming the old domain; checked on 10.11); `mariadb-binlog` also sets
/// them apart.
pub fn set_gtid_statement(gtid: &Gtid) -> String {
    format!(
        "SET SESSION sql_log_bin = 1, server_id = {}, gtid_domain_id = {};\nSET SESSION \
         gtid_seq_no = {}",
        gtid.server_id, gtid.domain_id, gtid.seq_no
    )
}

/// What a transaction without a GTID runs before it (binary logging on;
/// the server numbers it).
pub const LOG_ON: &str = "SET SESSION sql_log_bin = 1";

/// Whether `state` (the replica's `@@gtid_binlog_state`: the last GTID
/// per domain and server id, comma-separated) holds `gtid` or a later
/// one of the same domain and server id.
///
/// # Errors
/// A part of `state` that is not `domain-server-seqno`.
pub fn binlog_has(state: &str, gtid: &Gtid) -> Result<bool, String> {
    for part in state.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let g: Gtid = part
            .parse()
            .map_err(|e| format!("@@gtid_binlog_state part {part:?}: {e}"))?;
        if g.domain_id == gtid.domain_id && g.server_id == gtid.server_id && g.seq_no >= gtid.seq_no
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The replica's `@@gtid_binlog_state`.
///
/// # Errors
/// The driver's.
pub async fn binlog_state(conn: &mut mysql_async::Conn) -> Result<String, mysql_async::Error> {
    let state: Option<String> = conn
        .query_first("SELECT @@GLOBAL.gtid_binlog_state")
        .await?;
    Ok(state.unwrap_or_default())
}

impl Channel {
    /// Whether this channel commits in order under the master's GTIDs.
    pub(super) fn in_order(&self) -> bool {
        self.settings.in_order
    }

    /// Sets the session to binlog the next transaction under `txn`'s GTID
    /// (a transaction without one keeps the session's own).
    pub(super) async fn set_gtid(&mut self, txn: &Transaction, epoch: Epoch) -> Attempt {
        self.session_origin = None;
        let sql = txn
            .gtid
            .as_ref()
            .map_or_else(|| LOG_ON.to_string(), set_gtid_statement);
        self.exec_text(&sql, Some((txn, epoch))).await
    }

    /// After a COMMIT: writes `row` when it is due (every
    /// `ROW_EVERY_COMMITS` commits or `ROW_EVERY`), else leaves it
    /// pending (`self.rows.pending`, written when the input runs dry).
    pub(super) async fn row_after_commit_when_due(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, Epoch)>,
    ) -> Attempt {
        self.rows.since += 1;
        if self.rows.since < ROW_EVERY_COMMITS && self.rows.written_at.elapsed() < ROW_EVERY {
            self.rows.pending = true;
            self.rows.extract_time = extract_time;
            return Ok(());
        }
        self.row_after_commit(row, extract_time, at).await?;
        self.rows.pending = false;
        Ok(())
    }

    /// Writes the restart row of the last commit when it is pending
    /// ([`Channel::row_after_commit_when_due`]).
    ///
    /// # Errors
    /// The row cannot be written (after retries).
    pub(super) async fn write_pending_row(&mut self) -> Result<(), ApplyError> {
        if !self.rows.pending {
            return Ok(());
        }
        let mut row = self.row.clone();
        row.committed_above = self.committed_set.clone();
        let extract_time = self.rows.extract_time;
        self.row_after_commit(&row, extract_time, None)
            .await
            .map_err(|(e, _)| e)?;
        self.rows.pending = false;
        if let Some(l) = row.low_water.seqno() {
            self.progress.set_durable_low_water(l);
        }
        Ok(())
    }

    /// Waits until every seqno before `txn`'s is done. With `holding`
    /// (the transaction has executed and holds its locks), after
    /// [`TURN_LOCK_GRACE`] it rolls back, waits, and returns a deadlock
    /// error (1213, transient: the block runs again).
    pub(super) async fn wait_turn(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        holding: bool,
    ) -> Attempt {
        let Some(before) = txn.seqno.get().checked_sub(1).map(Seqno) else {
            return Ok(());
        };
        let progress = self.progress.clone();
        let deadline = holding.then(|| Instant::now() + TURN_LOCK_GRACE);
        match progress.wait_low_water(before, deadline) {
            TurnWait::Reached => return Ok(()),
            TurnWait::Failed => return Err((self.predecessor_failed(txn, before), None)),
            TurnWait::TimedOut => {}
        }
        self.exec_text("ROLLBACK", Some((txn, epoch))).await?;
        if progress.wait_low_water(before, None) != TurnWait::Reached {
            return Err((self.predecessor_failed(txn, before), None));
        }
        let message = format!(
            "seqno {} waited {} ms for seqno {before} to commit while holding its row locks: \
             rolled back so that an earlier transaction waiting for one of them can commit, \
             applied again now",
            txn.seqno,
            TURN_LOCK_GRACE.as_millis()
        );
        let cause = mysql_async::Error::Server(mysql_async::ServerError {
            code: ER_LOCK_DEADLOCK,
            message: message.clone(),
            state: "40001".to_string(),
        });
        Err((
            self.plain_error(txn, "COMMIT".to_string(), ER_LOCK_DEADLOCK, message),
            Some(cause),
        ))
    }

    fn predecessor_failed(&self, txn: &Transaction, before: Seqno) -> ApplyError {
        self.plain_error(
            txn,
            String::new(),
            0,
            format!(
                "not committed: it commits after seqno {before} (binlog_gtids = \"master\"), and \
                 the service stopped on an error before that one committed"
            ),
        )
    }

    /// Writes `row` after its transaction's COMMIT, without binary logging
    /// (module doc), reconnecting and trying again after transient errors;
    /// the data is committed either way, so an error here never makes the
    /// block run again (its cause is dropped). Binary logging stays off
    /// (one round trip less): the next transaction's [`set_gtid_statement`]
    /// turns it on, and every write of the catalog alone ends with it on.
    pub(super) async fn row_after_commit(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, Epoch)>,
    ) -> Attempt {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let written = async {
                self.catalog_only_logging(false).await?;
                self.update_row(row, extract_time, at).await
            }
            .await;
            match written {
                Ok(()) => {
                    self.rows.since = 0;
                    self.rows.written_at = Instant::now();
                    return Ok(());
                }
                Err((error, Some(cause)))
                    if attempt < ROW_ATTEMPTS && classify(&cause) == ErrorClass::Transient =>
                {
                    tracing::warn!(
                        channel = self.settings.channel.get(),
                        seqno = error.seqno_number(),
                        error = %error.message,
                        "the restart row after a committed transaction was not written; trying \
                         again (the replica's binlog records the transaction meanwhile)"
                    );
                    tokio::time::sleep(Duration::from_millis(50 << attempt.min(5))).await;
                    if outcome_unknown(&cause) {
                        let _ = self.reconnect().await;
                    }
                }
                Err((error, _)) => return Err((error, None)),
            }
        }
    }

    /// A master transaction whose row events change a non-transactional
    /// table and a transactional one in one group (a trigger, a
    /// multi-table statement, autocommit on the master): a client session
    /// can only binlog it as two groups, the non-transactional part at its
    /// statement's end under the master's GTID and the rest under the next
    /// sequence number, which the master's next transaction has too
    /// (checked on MariaDB 10.11: inside START TRANSACTION and in
    /// autocommit alike; native replication's applier keeps the group
    /// whole). Under `gtid_strict_mode` that next transaction would be
    /// refused (1950): refused here, before anything runs, with the way
    /// out; without it the split is logged.
    ///
    /// # Errors
    /// The definite error of the refusal.
    pub(super) async fn refuse_split_group(&mut self, txn: &Transaction) -> Attempt {
        if self.settings.method != crate::config::ApplyMethod::Binlog
            || !super::batch::rows_only(txn)
            || txn.gtid.is_none()
        {
            return Ok(());
        }
        let Some(table) = self.mixed_engines(txn).await else {
            return Ok(());
        };
        let gtid = txn.gtid.expect("checked");
        let strict: Option<u8> = self
            .conn
            .query_first("SELECT @@GLOBAL.gtid_strict_mode")
            .await
            .unwrap_or(None);
        if strict != Some(1) {
            tracing::warn!(
                channel = self.settings.channel.get(),
                seqno = txn.seqno.get(),
                gtid = %gtid,
                table = %table,
                "a master transaction that changes a non-transactional table and a \
                 transactional one in one group is binlogged on the replica as two groups (the \
                 second under the next sequence number, which the master's next transaction \
                 also takes): replicas of this replica apply both"
            );
            return Ok(());
        }
        let seqno = txn.seqno.get();
        Err(self.unplanned(
            txn,
            format!(
                "{}{seqno} (GTID {gtid}) changes {table} and a transactional table in one \
                 group. shardrep's session can only binlog it as two groups: the \
                 non-transactional part under {gtid}, the rest under the next sequence number, \
                 which the master's next transaction has too, and gtid_strict_mode = ON would \
                 then refuse that one (error 1950); native replication's applier keeps such a \
                 group whole. Nothing of it was applied. Way out: `SET GLOBAL gtid_strict_mode \
                 = 0` on the replica, then `shardrepctl online` (the replica's binlog then holds \
                 the next sequence number twice; replicas of this replica apply both), and set \
                 it back once the service has passed seqno {seqno}; or hand back to native \
                 replication before it: `shardrepctl online --until-seqno {}`, then \
                 `shardrepctl handback` and START SLAVE",
                super::SPLIT_GROUP_PREFIX,
                seqno.saturating_sub(1)
            ),
        ))
    }

    /// Marks seqno `seqno` in this channel's restart row as rolled back
    /// although its GTID is in the replica's binlog (a non-transactional
    /// change ran: MariaDB binlogs it with a ROLLBACK), not binlogged;
    /// returns what the error adds for the DBA.
    pub(super) async fn mark_rolled_back(&mut self, seqno: u64) -> String {
        let sql = crate::catalog::restart_mark_rolled_back(&self.settings.catalog);
        let marked = async {
            self.conn.query_drop("SET SESSION sql_log_bin = 0").await?;
            let done = self
                .conn
                .exec_drop(
                    sql.as_str(),
                    (seqno, u64::from(self.settings.channel.get())),
                )
                .await;
            self.conn
                .query_drop("SET SESSION sql_log_bin = 1")
                .await
                .and(done)
        }
        .await;
        let mark = match marked {
            Ok(()) => String::new(),
            Err(e) => format!(
                " (the mark of this in the restart row could not be written: {}; a restart \
                 may take the transaction for committed)",
                crate::mysql::error_text(&e)
            ),
        };
        format!(
            ". Under binlog_gtids = \"master\", when that change took effect, the replica's \
             binlog holds this transaction's master GTID (MariaDB binlogs the \
             non-transactional change of a rolled-back transaction as a group of its own; \
             SHOW BINLOG EVENTS tells), so replicas of this replica received that change; applying \
             the transaction again then binlogs its GTID a second time, which \
             gtid_strict_mode = ON refuses (error 1950): there, apply its other changes by \
             hand with sql_log_bin = 0 and skip it{mark}"
        )
    }

    /// Whether every transaction of `txns` is in the replica's binlog (its
    /// GTID in `@@gtid_binlog_state`): committed, after a lost reply.
    pub(super) async fn binlog_records(
        &mut self,
        txns: impl Iterator<Item = &Transaction>,
    ) -> Result<bool, (ApplyError, Option<mysql_async::Error>)> {
        let state = match binlog_state(&mut self.conn).await {
            Ok(s) => s,
            Err(e) => {
                return Err((
                    self.error_at(None, "SELECT @@GLOBAL.gtid_binlog_state", &e),
                    Some(e),
                ))
            }
        };
        let mut any = false;
        for txn in txns {
            let Some(gtid) = txn.gtid else {
                return Ok(false);
            };
            any = true;
            match binlog_has(&state, &gtid) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(message) => {
                    return Err((self.plain_error(txn, String::new(), 0, message), None))
                }
            }
        }
        Ok(any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtid(d: u32, s: u32, n: u64) -> Gtid {
        Gtid {
            domain_id: d,
            server_id: s,
            seq_no: n,
        }
    }

    #[test]
    fn the_binlog_state_holds_a_gtid_of_its_domain_and_server_at_or_after_it() {
        let state = "0-1-100,0-3-5000,2-1-7";
        assert!(binlog_has(state, &gtid(0, 1, 100)).unwrap());
        assert!(binlog_has(state, &gtid(0, 1, 99)).unwrap());
        assert!(!binlog_has(state, &gtid(0, 1, 101)).unwrap());
        // The replica's own GTIDs of the domain say nothing of the master's.
        assert!(!binlog_has(state, &gtid(0, 2, 101)).unwrap());
        assert!(!binlog_has(state, &gtid(1, 1, 1)).unwrap());
        assert!(!binlog_has("", &gtid(0, 1, 1)).unwrap());
        assert!(binlog_has("0-1-x", &gtid(0, 1, 1)).is_err());
    }

    #[test]
    fn the_session_is_set_to_the_masters_gtid() {
        assert_eq!(
            set_gtid_statement(&gtid(2, 11, 4711)),
            "SET SESSION sql_log_bin = 1, server_id = 11, gtid_domain_id = 2;\nSET SESSION \
             gtid_seq_no = 4711"
        );
    }
}
