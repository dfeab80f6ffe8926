//! The statement-at-a-time path: each row change as prepared statements
//! with bound parameters, each logged statement with its session context.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::Params;

use super::{Attempt, Channel};
use crate::applier::error::{divergence_message, elide, ApplyError};
use crate::applier::session::{self, session_setup};
use crate::applier::sql::{PlannedStatement, TableShape};
use crate::applier::table::ReplicaTable;
use crate::config::ApplyMethod;
use crate::event::{Change, ColumnInfo, RowKind, RowsChange, Statement, TableInfo, Transaction};
use crate::mysql::error_codes::{ER_BAD_DB_ERROR, ER_NO_SUCH_TABLE};
use crate::mysql::quote_ident;
use crate::position::Epoch;
use crate::shard::statement::{leading_verb, names_its_database};
use crate::shard::temp_tables::{qualified_temporary_drop, temp_op, TempOp, TempTables};

impl Channel {
    /// The replica table of `info` (cached), for transaction `txn`.
    pub(super) async fn replica_table(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        info: &TableInfo,
    ) -> Result<Arc<ReplicaTable>, (ApplyError, Option<mysql_async::Error>)> {
        match self.tables.lookup(&mut self.conn, info).await {
            Ok(table) => Ok(table),
            Err(e) => Err((
                self.error_at(Some((txn, epoch)), "SELECT … FROM information_schema", &e),
                Some(e),
            )),
        }
    }

    /// Plans the statements of one rows change into `planned` (cleared
    /// first): the part both paths share. The error is the SQL builder's
    /// message ([`Channel::unplanned`] names the transaction).
    pub(super) fn plan(
        &mut self,
        rows: &RowsChange,
        columns: &[ColumnInfo],
        table: &ReplicaTable,
        planned: &mut Vec<PlannedStatement>,
    ) -> Result<(), String> {
        planned.clear();
        let what = if table.triggers {
            "has triggers on the replica: [apply] method = \"sql\" re-writes its row changes \
             as SQL statements, which would fire them, where native replication's row applier \
             does not (slave_run_triggers_for_rbr = NO: the master's binlog already holds, as \
             rows, what its own triggers changed)"
        } else if table.system_versioned {
            "is system-versioned on the replica: [apply] method = \"sql\" re-writes its row \
             changes as SQL statements, which cannot set the history's period columns to the \
             master's, where native replication's row applier does"
        } else {
            return self.builder.plan(rows, columns, &table.shape, planned);
        };
        Err(format!(
            "{NOT_UNDER_SQL_METHOD_PREFIX}{}.{} {what}. Nothing of this transaction was \
             committed; native replication would apply it. Way out: set [apply] method = \
             \"binlog\" (the server's own row applier; it needs BINLOG REPLAY: `shardrep \
             check-config --grants` prints the GRANT) and start shardrep again",
            crate::mysql::quote_ident(&table.shape.schema),
            crate::mysql::quote_ident(&table.shape.table)
        ))
    }

    /// The error of a rows change of `txn` that could not be planned or
    /// written as SQL (`message`).
    pub(super) fn unplanned(
        &self,
        txn: &Transaction,
        message: String,
    ) -> (ApplyError, Option<mysql_async::Error>) {
        (self.plain_error(txn, String::new(), 0, message), None)
    }

    /// Applies `txn` statement by statement, inside the block's open
    /// transaction.
    pub(super) async fn apply_txn(&mut self, txn: &Transaction, epoch: Epoch) -> Attempt {
        let mut planned = Vec::new();
        let row_events = match self.settings.method {
            ApplyMethod::Binlog => txn.row_events.clone(),
            ApplyMethod::Sql => None,
        };
        let mut rows_index = 0;
        for change in &txn.changes {
            match change {
                Change::Annotation(_) => {}
                Change::Statement(statement) => {
                    // Row events before it first, in the master's order.
                    self.flush_binlog(Some((txn, epoch))).await?;
                    if statement.sql.eq_ignore_ascii_case(b"ROLLBACK") {
                        // The master rolled back the transactional part.
                        self.exec_text("ROLLBACK", Some((txn, epoch))).await?;
                        self.exec_text("START TRANSACTION", Some((txn, epoch)))
                            .await?;
                        continue;
                    }
                    self.apply_statement(txn, epoch, statement).await?;
                }
                Change::Rows(rows) => {
                    let index = rows_index;
                    rows_index += 1;
                    let info = txn.table_of(rows);
                    if let Some(events) = &row_events {
                        // The replica's own row applier (module `binlog`);
                        // the table is looked at for its engine only.
                        let catalog = crate::shard::is_catalog_table(&info.schema, &info.table);
                        if !catalog {
                            let table = self.replica_table(txn, epoch, info).await?;
                            if let Some(engine) = &table.non_transactional {
                                self.non_transactional_change(&info.schema, &info.table, engine);
                            }
                        }
                        self.buffer_row_events(txn, epoch, events, index, catalog)
                            .await?;
                        continue;
                    }
                    if crate::shard::is_catalog_table(&info.schema, &info.table) {
                        // Another service's restart row, binlogged with
                        // the data it applied to its replica.
                        continue;
                    }
                    let table = self.replica_table(txn, epoch, info).await?;
                    if let Some(engine) = &table.non_transactional {
                        self.non_transactional_change(&info.schema, &info.table, engine);
                    }
                    let fk_off = rows.foreign_key_checks_off();
                    if fk_off {
                        self.exec_text("SET foreign_key_checks = 0", Some((txn, epoch)))
                            .await?;
                    }
                    let columns = table.complete_columns(&info.columns);
                    self.plan(rows, &columns, &table, &mut planned)
                        .map_err(|m| self.unplanned(txn, m))?;
                    for statement in planned.drain(..) {
                        self.exec_planned(txn, epoch, &statement, &table.shape)
                            .await?;
                    }
                    if fk_off {
                        self.exec_text("SET foreign_key_checks = 1", Some((txn, epoch)))
                            .await?;
                    }
                }
            }
        }
        if self.binlog_per_txn {
            self.flush_binlog(Some((txn, epoch))).await?;
        }
        Ok(())
    }

    async fn exec_planned(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        statement: &PlannedStatement,
        shape: &TableShape,
    ) -> Attempt {
        let result = self
            .conn
            .exec_iter(
                &*statement.sql,
                Params::Positional(statement.params.clone()),
            )
            .await;
        let affected = match result {
            Ok(r) => {
                let n = r.affected_rows();
                drop(r);
                n
            }
            Err(e) => {
                return Err((
                    self.error_at(Some((txn, epoch)), &statement.sql, &e),
                    Some(e),
                ))
            }
        };
        if affected < statement.expected_rows && statement.kind != RowKind::Insert {
            return Err((
                self.plain_error(
                    txn,
                    elide(&statement.sql),
                    crate::mysql::error_codes::ER_KEY_NOT_FOUND,
                    divergence_message(statement, shape, affected),
                ),
                None,
            ));
        }
        Ok(())
    }

    async fn apply_statement(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        statement: &Statement,
    ) -> Attempt {
        let at = Some((txn, epoch));
        if self.replay_ddl == Some(txn.seqno)
            && leading_verb(&statement.sql).commits_implicitly()
            && !crate::applier::ddl_replay::replay_is_safe(&statement.sql)
        {
            // It may have run, and a second run could change the replica.
            let sql_text = String::from_utf8_lossy(&statement.sql);
            let e = self.plain_error(
                txn,
                elide(&sql_text),
                0,
                crate::applier::ddl_replay::unsafe_replay_message(
                    txn.seqno.get(),
                    &txn.end_position.to_string(),
                    &sql_text,
                    self.settings.sql_log_bin,
                ),
            );
            return Err((e, None));
        }
        let mut context = session_setup(&statement.context);
        let mut in_session = false;
        // Temporary tables of this statement's session lost with an
        // earlier connection: a 1146 is then explained (below).
        let lost = TempTables::session_of(txn, statement).and_then(|session| {
            self.temp_tables
                .lost_tables(session)
                .map(|tables| (session, tables.iter().cloned().collect::<Vec<_>>()))
        });
        // The tables a temporary DROP names that its session does not hold
        // here (before the DROP is noted below).
        let not_held: Option<Vec<String>> = match (
            TempTables::session_of(txn, statement),
            temp_op(&statement.sql, statement.default_schema.as_deref()),
        ) {
            (Some(session), Some(TempOp::Drop { tables, .. })) => Some(
                tables
                    .into_iter()
                    .filter(|t| !self.temp_tables.holds_table(session, t))
                    .collect(),
            ),
            _ => None,
        };
        if let Some(session) = TempTables::session_of(txn, statement) {
            // The master session's temporary-table namespace (the server
            // keys temporary tables by `pseudo_thread_id`); set only where
            // needed, as it takes SUPER or BINLOG REPLAY.
            if self.temp_tables.observe_statement(session, statement) {
                context[0].0 += &format!(", pseudo_thread_id = {}", session.thread_id);
                in_session = true;
            }
        }
        for (sql, params) in &context {
            let result = if params.is_empty() {
                self.conn.query_drop(sql.as_str()).await
            } else {
                self.conn
                    .exec_drop(sql.as_str(), Params::Positional(params.clone()))
                    .await
            };
            result.map_err(|e| (self.error_at(at, sql, &e), Some(e)))?;
        }
        let mut instead: Option<String> = None;
        if let Some(db) = &statement.default_schema {
            // CREATE/DROP DATABASE is logged with the database itself as
            // the default schema, which does not exist yet (or any more)
            // on the replica; the server's own applier sets the default
            // schema without checking. Such a statement names its database,
            // so it runs without the USE.
            if !names_its_database(&statement.sql) {
                match self
                    .exec_text(&format!("USE {}", quote_ident(db)), at)
                    .await
                {
                    Ok(()) => {}
                    Err((error, cause)) if error.code == ER_BAD_DB_ERROR => {
                        // A temporary table's schema need not exist: its
                        // DROP runs with the names qualified instead.
                        match qualified_temporary_drop(&statement.sql, db, false) {
                            Some(qualified) => instead = Some(qualified),
                            None => {
                                let mut error = error;
                                error.message = format!(
                                    "{} (the statement's default schema {} does not exist on \
                                     the replica: the server's own applier would run it there \
                                     anyway, a client cannot select a schema that does not \
                                     exist. Way out: create the schema on the replica with \
                                     sql_log_bin = 0, then 'shardrepctl online' retries)",
                                    error.message,
                                    quote_ident(db)
                                );
                                return Err((error, cause));
                            }
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if instead.is_none() {
            // (Without a default schema, only a DROP naming its tables
            // with their schema is read: `temp_op` needs the schema.)
            let db = statement.default_schema.as_deref().unwrap_or("");
            // A DROP TEMPORARY TABLE of a table this session does not hold
            // here (lost with an earlier connection, or created before this
            // run began) drops nothing: it runs with IF EXISTS, as the
            // server's own applier runs a DROP under its default
            // slave_ddl_exec_mode = IDEMPOTENT (the master logs a user's
            // DROP of a temporary table without IF EXISTS).
            if let Some(TempOp::Drop {
                tables: dropped, ..
            }) = temp_op(&statement.sql, statement.default_schema.as_deref())
            {
                if not_held.as_ref().is_some_and(|n| !n.is_empty()) {
                    instead = qualified_temporary_drop(&statement.sql, db, true);
                    tracing::warn!(
                        channel = self.settings.channel.get(),
                        seqno = txn.seqno.get(),
                        tables = %dropped.join(", "),
                        "DROP of temporary tables that this run does not hold (lost with an \
                         earlier connection or a restart of shardrep): run with IF EXISTS"
                    );
                }
            }
        }
        let sql_text = match &instead {
            Some(qualified) => qualified.clone(),
            None => String::from_utf8_lossy(&statement.sql).into_owned(),
        };
        let ddl = leading_verb(&statement.sql).commits_implicitly();
        let mut result = match &instead {
            Some(qualified) => self.conn.query_drop(qualified.as_str()).await,
            None => self.conn.query_drop(statement.sql.as_slice()).await,
        };
        if let Err(mysql_async::Error::Server(e)) = &result {
            if ddl
                && self.replay_ddl == Some(txn.seqno)
                && crate::applier::retry::is_ddl_already_applied_error(e.code, &e.message)
            {
                tracing::warn!(
                    channel = self.settings.channel.get(),
                    seqno = txn.seqno.get(),
                    code = e.code,
                    error = %e.message,
                    sql = %elide(&sql_text),
                    "replayed DDL had already run before the stop; continuing"
                );
                result = Ok(());
            }
        }
        // Back to the channel's own session before anything else.
        let restore = session::restore_statement(in_session);
        let session = TempTables::session_of(txn, statement);
        result.map_err(|e| {
            let mut error = self.error_at(at, &sql_text, &e);
            let by_hand = match txn.gtid {
                Some(gtid) if self.in_order() => format!(
                    "with its master GTID set first, so that the replica's binlog holds it \
                     for the replicas reading it: `{};` before it",
                    super::in_order::set_gtid_statement(&gtid).replace('\n', " ")
                ),
                _ => "with sql_log_bin = 0".to_string(),
            };
            match (error.code, &lost, session) {
                (ER_NO_SUCH_TABLE, Some((session, tables)), _) => {
                    error.message = lost_temporary_table_message(
                        &error.message,
                        txn.seqno.get(),
                        u32::from(self.settings.channel.get()),
                        *session,
                        tables,
                        &by_hand,
                    );
                }
                (ER_NO_SUCH_TABLE, None, Some(session)) => {
                    // A statement of a master session (its temporary
                    // tables live on the connection): the table may have
                    // been one created before this run began.
                    error.message = format!(
                        "{MAYBE_LOST_TEMPORARY_TABLE_PREFIX}seqno {seqno} failed ({message}), a \
                         statement of master session {session}. If the missing table was a \
                         temporary table of that session created before this run of shardrep \
                         began (a restart of shardrep or a lost connection drops the \
                         temporary tables of its connections, as a server restart does for \
                         native replication), it is lost. Way out: then `shardrepctl log list \
                         --seqno {seqno}` shows what the transaction does; make its change on \
                         the replica by hand ({by_hand}) from the master's tables, then \
                         `shardrepctl online --skip-seqno {seqno}`, and the same for each later \
                         transaction of the session that stops this way; `shardrepctl check` \
                         then compares the tables with the master's. If it is a table the \
                         replica should have, create it there (with sql_log_bin = 0), then \
                         `shardrepctl online` retries",
                        seqno = txn.seqno.get(),
                        message = error.message,
                    );
                }
                _ => {}
            }
            (error, Some(e))
        })?;
        self.exec_text(&restore, at).await?;
        if ddl {
            // DDL may change any table of its schema: forget cached shapes.
            self.forget_tables();
            // It committed implicitly: what follows (rows of CREATE …
            // SELECT, the restart row) is one new transaction.
            self.exec_text("START TRANSACTION", at).await?;
        }
        Ok(())
    }
}

/// How the message of a statement that failed for a lost temporary table
/// begins ([`lost_temporary_table_message`]); its way out is in it.
pub const LOST_TEMPORARY_TABLE_PREFIX: &str = "a temporary table is lost: ";

/// How the message of a statement of a master session that failed for a
/// missing table begins when no lost temporary table of the session is
/// known in this run (one created before the run began may be it); its
/// way out is in it.
pub const MAYBE_LOST_TEMPORARY_TABLE_PREFIX: &str =
    "a table is missing, perhaps a lost temporary table: ";

/// How the error of a row change that `[apply] method = "sql"` cannot
/// apply as native replication would (a table with triggers on the
/// replica, a system-versioned table) begins; its message names the way
/// out.
pub const NOT_UNDER_SQL_METHOD_PREFIX: &str = "not under method = \"sql\": ";

/// The message of statement of seqno `seqno` that failed with 1146
/// (`message`) while its master session `session` had lost `tables`
/// (temporary tables open on channel `channel`'s replica connection when
/// that connection was lost; the server drops a connection's temporary
/// tables with it, as it does for native replication at a server
/// restart). `by_hand`: how to make the change by hand (binary logging
/// off, or under the transaction's master GTID).
pub fn lost_temporary_table_message(
    message: &str,
    seqno: u64,
    channel: u32,
    session: crate::shard::temp_tables::MasterSession,
    tables: &[String],
    by_hand: &str,
) -> String {
    format!(
        "{LOST_TEMPORARY_TABLE_PREFIX}seqno {seqno} failed ({message}) in master session \
         {session}, whose temporary table(s) {} were open on channel {channel}'s connection to \
         the replica when that connection was lost: the server dropped them with it. This \
         transaction and every later one of that session that uses them cannot be applied \
         as logged. Way out: `shardrepctl log list --seqno {seqno}` shows what it does; \
         make its change on the replica by hand ({by_hand}) from the master's tables, then `shardrepctl online --skip-seqno {seqno}`, and the same for each later \
         transaction of the session that stops this way (the session's end drops the \
         tables); `shardrepctl check` then compares the tables with the master's. Or re-seed \
         the replica from the master and reset the service (`shardrepctl reset --confirm` \
         with its name)",
        tables.join(", ")
    )
}
