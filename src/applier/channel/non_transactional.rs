//! Transactions that change a non-transactional table (shared/DESIGN.md
//! §4): MyISAM, Aria, MEMORY, CSV and any engine whose
//! `information_schema.ENGINES.TRANSACTIONS` is `NO`, read from the
//! replica ([`crate::applier::table::ReplicaTable::non_transactional`]).
//!
//! A rollback does not undo such a change, so:
//! - such a transaction is applied in a block of its own (the channel
//!   never groups it with others: a retry of the block would repeat it);
//! - it goes statement by statement (never the batched path, whose
//!   failure is followed by a statement-at-a-time run of the same block);
//! - once a statement on such a table was sent, nothing runs the
//!   transaction again on its own: an error after it (a lock wait on its
//!   InnoDB part, a lost connection whose restart row says "not
//!   committed", a duplicate key) stops the service naming the seqno, the
//!   table and its engine, as native replication stops instead of
//!   retrying such a group. A failure before any such statement ran is
//!   retried as usual.
//! - statements (statement or mixed format) name no table the channel
//!   looks up: the replica's own word decides for them, the warning 1196
//!   (`ER_WARNING_NOT_COMPLETE_ROLLBACK`, "Some non-transactional changed
//!   tables couldn't be rolled back") that the block's ROLLBACK answers
//!   ([`Channel::rollback_checked`]).

use mysql_async::prelude::Queryable;

use super::Channel;
use crate::applier::error::ApplyError;
use crate::event::{Change, Transaction};

/// The start of the message of an error after a non-transactional change
/// ran: the message says what to do (the way out adds nothing).
pub const NOT_RUN_AGAIN_PREFIX: &str = "not run again: seqno ";

/// How the error of a master transaction that a client session could only
/// binlog as two GTID groups begins (under `binlog_gtids = "master"` with
/// `gtid_strict_mode`); its message names the way out.
pub const SPLIT_GROUP_PREFIX: &str = "one master transaction, two binlog groups: seqno ";

/// `ER_WARNING_NOT_COMPLETE_ROLLBACK`: a ROLLBACK left changes of
/// non-transactional tables in place.
const ER_WARNING_NOT_COMPLETE_ROLLBACK: u16 = 1196;

/// A non-transactional table a statement was sent to in the attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Ran {
    /// `schema.table`.
    pub(super) table: String,
    /// Its engine.
    pub(super) engine: String,
}

impl Channel {
    /// Whether `txn` changes a table of the replica that is not
    /// transactional (module doc); a table the channel cannot look up now
    /// counts as one (alone is always safe).
    pub(super) async fn touches_non_transactional(&mut self, txn: &Transaction) -> bool {
        self.refresh_tables();
        for change in &txn.changes {
            let Change::Rows(rows) = change else {
                continue;
            };
            let info = txn.table_of(rows);
            if crate::shard::is_catalog_table(&info.schema, &info.table) {
                continue;
            }
            match self.tables.lookup(&mut self.conn, info).await {
                Ok(table) if table.non_transactional.is_none() => {}
                _ => return true,
            }
        }
        false
    }

    /// The first non-transactional table `txn` changes, when it also
    /// changes a transactional one (both looked up; `None` otherwise or
    /// when a table cannot be looked up now).
    pub(super) async fn mixed_engines(&mut self, txn: &Transaction) -> Option<String> {
        self.refresh_tables();
        let (mut non_transactional, mut transactional) = (None, false);
        for change in &txn.changes {
            let Change::Rows(rows) = change else {
                continue;
            };
            let info = txn.table_of(rows);
            if crate::shard::is_catalog_table(&info.schema, &info.table) {
                continue;
            }
            let table = self.tables.lookup(&mut self.conn, info).await.ok()?;
            match &table.non_transactional {
                Some(engine) if non_transactional.is_none() => {
                    non_transactional = Some(format!(
                        "{}.{} (engine {engine})",
                        crate::mysql::quote_ident(&info.schema),
                        crate::mysql::quote_ident(&info.table)
                    ));
                }
                Some(_) => {}
                None => transactional = true,
            }
        }
        non_transactional.filter(|_| transactional)
    }

    /// Rolls the open transaction back; returns what the replica said was
    /// not rolled back (warning 1196), if it did.
    pub(super) async fn rollback_checked(&mut self) -> Option<Ran> {
        self.conn.query_drop("ROLLBACK").await.ok()?;
        if self.conn.get_warnings() == 0 {
            return None;
        }
        let warnings: Vec<(String, u16, String)> = self.conn.query("SHOW WARNINGS").await.ok()?;
        warnings
            .iter()
            .any(|(_, code, _)| *code == ER_WARNING_NOT_COMPLETE_ROLLBACK)
            .then(|| Ran {
                table: "a table that is not transactional (the replica's ROLLBACK warned: 1196 \
                        Some non-transactional changed tables couldn't be rolled back)"
                    .to_string(),
                engine: String::new(),
            })
    }

    /// Notes that a statement is about to change `schema.table` of
    /// `engine`, which is not transactional (module doc).
    pub(super) fn non_transactional_change(&mut self, schema: &str, table: &str, engine: &str) {
        if self.non_transactional_ran.is_none() {
            self.non_transactional_ran = Some(Ran {
                table: format!(
                    "{}.{}",
                    crate::mysql::quote_ident(schema),
                    crate::mysql::quote_ident(table)
                ),
                engine: engine.to_string(),
            });
        }
    }

    /// The definite error of transaction `error.seqno` after its change to
    /// the non-transactional table `ran` ran: `error`, with what happened
    /// and what to do.
    pub(super) async fn not_run_again(&mut self, error: ApplyError, ran: &Ran) -> ApplyError {
        let seqno = error.seqno_number();
        // Under the master's GTIDs the rolled-back transaction's GTID is in
        // the replica's binlog (MariaDB writes the non-transactional change
        // with a ROLLBACK): marked, so that a restart does not take the
        // GTID for a commit (`replicator::gtid_reconcile`).
        let binlogged = if self.in_order() {
            self.mark_rolled_back(seqno).await
        } else {
            String::new()
        };
        let cause = if error.code == 0 {
            error.message.clone()
        } else {
            format!("error {}: {}", error.code, error.message)
        };
        let changed = if ran.engine.is_empty() {
            ran.table.clone()
        } else {
            format!(
                "{} (engine {}, not transactional: a rollback does not undo it)",
                ran.table, ran.engine
            )
        };
        ApplyError {
            message: format!(
                "{NOT_RUN_AGAIN_PREFIX}{seqno} ran a change of {changed} before or as it failed \
                 ({cause}), so shardrep does not run it again on its own (a part of it may stay \
                 applied). Compare the tables it changes with the master's \
                 (`shardrepctl log list --seqno {seqno}` shows its changes): undo on the replica \
                 what seqno {seqno} changed there, and correct what made it fail (the error \
                 above: e.g. a replica row in the way of its change), then `shardrepctl online` \
                 applies the transaction whole; or, if the replica already holds all of it, \
                 `shardrepctl online --skip-seqno {seqno}`{binlogged}"
            ),
            ..error
        }
    }
}
