//! The batched path: a block of row changes only, sent as few
//! multi-statement queries of literal SQL (one round trip per
//! [`BATCH_BYTES`] of SQL instead of one per row change).

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::Params;

use super::restart_row::missing_row_message;
use super::{Attempt, Channel};
use crate::applier::error::{divergence_message, elide, ApplyError};
use crate::applier::restart::{self, RestartRow};
use crate::applier::sql::{PlannedStatement, SqlBuilder};
use crate::applier::table::ReplicaTable;
use crate::event::{Change, ColumnInfo, RowKind, RowsChange, Transaction};
use crate::mysql::interpolate;
use crate::position::Epoch;

/// Most bytes of SQL text in one multi-statement query of a batched block.
pub const BATCH_BYTES: usize = 1 << 20;

/// Whether a transaction holds only row changes (and annotations): such
/// transactions are applied in batched blocks.
pub(super) fn rows_only(txn: &Transaction) -> bool {
    txn.changes
        .iter()
        .all(|c| matches!(c, Change::Rows(_) | Change::Annotation(_)))
}

/// What one statement of a batch must affect, to check the replies.
struct Check {
    /// The statement's transaction: its index in the block.
    txn: usize,
    /// The planned row statement and its table (`None`: a session setting
    /// or the restart row).
    statement: Option<(PlannedStatement, Arc<ReplicaTable>)>,
    /// The restart-row update: exactly 1 row.
    restart: bool,
    /// A merged update (`INSERT … ON DUPLICATE KEY UPDATE` of several
    /// UPDATE rows): a short count sends the block to the
    /// statement-at-a-time path, which tells what is wrong.
    merged: bool,
}

impl Check {
    /// A statement whose count is not checked (a session setting).
    fn none(txn: usize) -> Check {
        Check {
            txn,
            statement: None,
            restart: false,
            merged: false,
        }
    }
}

/// Consecutive UPDATE rows changes of one table (and fused DELETE + INSERT
/// pairs, as their INSERT), not yet planned (they go out merged); `set` is
/// the union of the columns they set, in table order.
struct Run<'t> {
    txn: usize,
    table: Arc<ReplicaTable>,
    columns: Arc<[ColumnInfo]>,
    set: Vec<u16>,
    changes: Vec<&'t RowsChange>,
}

/// The SQL of a batched block as it is built: full queries waiting to be
/// sent, and the query being filled, each with the checks of its
/// statements in order.
///
/// In compound mode (`[apply] compound_blocks`) each query is one MariaDB
/// compound statement, `BEGIN NOT ATOMIC … END`, in which every checked
/// statement is followed by its check
/// (`IF ROW_COUNT() < n THEN SIGNAL SQLSTATE '45000' … END IF`), and the
/// last one ends with `COMMIT`: the replica answers each query once, and
/// a failed check stops it before the COMMIT.
struct Batch {
    full: Vec<(String, Vec<Check>)>,
    text: String,
    checks: Vec<Check>,
    /// One statement's SQL, reused.
    sql: String,
    /// Compound statements (see above).
    compound: bool,
}

/// The SQLSTATE and message of a failed check in a compound statement.
pub(super) const COMPOUND_CHECK_FAILED: &str =
    "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'shardrep: a statement of the block affected \
     fewer rows than its row changes'";

impl Batch {
    /// A batch that starts with `START TRANSACTION`.
    fn new(compound: bool) -> Batch {
        let mut batch = Batch {
            full: Vec::new(),
            text: String::new(),
            checks: Vec::new(),
            sql: String::new(),
            compound,
        };
        batch.push(Some("START TRANSACTION"), Check::none(0));
        batch
    }

    /// Appends `sql` (or, with `None`, the statement in `self.sql`),
    /// starting a new query when the current one would pass
    /// [`BATCH_BYTES`].
    fn push(&mut self, sql: Option<&str>, check: Check) {
        let sql = sql.unwrap_or(&self.sql);
        if self.text.len() + sql.len() > BATCH_BYTES && !self.checks.is_empty() {
            if self.compound {
                self.text.push_str("END");
            }
            self.full.push((
                std::mem::take(&mut self.text),
                std::mem::take(&mut self.checks),
            ));
        }
        if !self.compound {
            if !self.text.is_empty() {
                self.text.push_str(";\n");
            }
            self.text.push_str(sql);
            self.checks.push(check);
            return;
        }
        if self.text.is_empty() {
            self.text.push_str("BEGIN NOT ATOMIC\n");
        }
        self.text.push_str(sql);
        self.text.push_str(";\n");
        // The same rules as Channel::check_affected and the merged
        // updates' check in send_full.
        let least = match &check.statement {
            _ if check.restart => Some(("<>", 1)),
            Some((statement, _)) if check.merged || statement.kind != RowKind::Insert => {
                Some(("<", statement.expected_rows))
            }
            _ => None,
        };
        if let Some((op, n)) = least {
            use std::fmt::Write as _;
            let _ = writeln!(
                self.text,
                "IF ROW_COUNT() {op} {n} THEN {COMPOUND_CHECK_FAILED}; END IF;"
            );
        }
        self.checks.push(check);
    }

    /// Closes the query being filled (with the COMMIT in compound mode):
    /// everything is ready to send.
    fn finish(&mut self) {
        if self.compound {
            self.text.push_str("COMMIT;\nEND");
        }
        self.full.push((
            std::mem::take(&mut self.text),
            std::mem::take(&mut self.checks),
        ));
    }
}

impl Channel {
    /// A block of row changes only, sent as few multi-statement queries:
    /// `START TRANSACTION; <statements>; <restart row `row`>; COMMIT`. Values go
    /// in as literals built by [`crate::mysql::literal`] (the
    /// channel's session is `SET NAMES binary` with backslash escapes).
    /// Each statement's affected-row count is checked as with prepared
    /// statements; the server stops at the first error, which is reported
    /// for the statement that caused it.
    pub(super) async fn try_block_batched(
        &mut self,
        todo: &[&(Arc<Transaction>, Epoch)],
        row: &RestartRow,
    ) -> Attempt {
        let mut run: Option<Run> = None;
        let mut batch = Batch::new(self.settings.compound_blocks);
        let mut planned = Vec::new();
        for (index, (txn, epoch)) in todo.iter().enumerate() {
            let mut next = 0;
            while next < txn.changes.len() {
                // Full queries are sent before the next rows change is
                // planned (and at the end), so a large transaction is not
                // held whole as SQL text and planned parameters (a run of
                // merged updates is still planned whole when it is
                // flushed).
                self.send_full(&mut batch, todo, row).await?;
                let Change::Rows(rows) = &txn.changes[next] else {
                    next += 1;
                    continue;
                };
                next += 1;
                let info = txn.table_of(rows);
                let table = self.replica_table(txn, *epoch, info).await?;
                let fk_off = rows.foreign_key_checks_off();
                if table.merge_updates && !fk_off && rows.kind != RowKind::Insert {
                    let columns = table.complete_columns(&info.columns);
                    // An UPDATE, or a DELETE followed by the INSERT of the
                    // same keys (fused: the INSERT's rows replace them).
                    let merge = if rows.kind == RowKind::Update {
                        SqlBuilder::merge_set(rows, &columns, &table.shape)
                            .map(|set| (set, rows, next))
                    } else {
                        // The next rows event (annotations between are
                        // only for display).
                        let following = txn.changes[next..]
                            .iter()
                            .position(|c| !matches!(c, Change::Annotation(_)))
                            .map(|p| next + p);
                        match following.map(|i| (i, &txn.changes[i])) {
                            Some((i, Change::Rows(insert)))
                                if !insert.foreign_key_checks_off()
                                    && txn.table_of(insert).schema == info.schema
                                    && txn.table_of(insert).table == info.table
                                    && txn.table_of(insert).columns == info.columns =>
                            {
                                SqlBuilder::fuse_set(rows, insert, &columns, &table.shape)
                                    .map(|set| (set, insert, i + 1))
                            }
                            _ => None,
                        }
                    };
                    if let Some((set, change, after)) = merge {
                        next = after; // past a fused INSERT
                        if let Some(r) = run.as_mut().filter(|r| {
                            Arc::ptr_eq(&r.table, &table)
                                && (Arc::ptr_eq(&r.columns, &columns) || r.columns == columns)
                        }) {
                            r.changes.push(change);
                            r.txn = index;
                            for c in set {
                                if let Err(at) = r.set.binary_search(&c) {
                                    r.set.insert(at, c);
                                }
                            }
                            continue;
                        }
                        self.flush_run(run.take(), &mut batch, &mut planned)
                            .map_err(|(i, m)| self.unplanned(&todo[i].0, m))?;
                        run = Some(Run {
                            txn: index,
                            table,
                            columns,
                            set,
                            changes: vec![change],
                        });
                        continue;
                    }
                }
                self.flush_run(run.take(), &mut batch, &mut planned)
                    .map_err(|(i, m)| self.unplanned(&todo[i].0, m))?;
                if fk_off {
                    batch.push(Some("SET foreign_key_checks = 0"), Check::none(index));
                }
                let columns = table.complete_columns(&info.columns);
                self.plan(rows, &columns, &table, &mut planned)
                    .and_then(|()| {
                        Self::push_planned(&mut batch, &mut planned, index, &table, false)
                    })
                    .map_err(|m| self.unplanned(txn, m))?;
                if fk_off {
                    batch.push(Some("SET foreign_key_checks = 1"), Check::none(index));
                }
            }
        }
        self.flush_run(run.take(), &mut batch, &mut planned)
            .map_err(|(i, m)| self.unplanned(&todo[i].0, m))?;
        let last_index = todo.len() - 1;
        let (last, epoch) = todo[last_index];
        let params = match restart::update_params(row, last.commit_timestamp) {
            Params::Positional(p) => p,
            _ => Vec::new(),
        };
        batch.sql.clear();
        interpolate(
            &crate::catalog::restart_update(&self.settings.catalog),
            &params,
            &mut batch.sql,
        )
        .map_err(|m| self.unplanned(last, m))?;
        batch.push(
            None,
            Check {
                txn: last_index,
                statement: None,
                restart: true,
                merged: false,
            },
        );
        batch.finish();
        self.send_full(&mut batch, todo, row).await?;
        if batch.compound {
            // Checked and committed on the replica.
            return Ok(());
        }
        // Every count checked: only now commit (a divergence must never
        // commit with the restart row).
        self.exec_text("COMMIT", Some((last, *epoch))).await?;
        Ok(())
    }

    /// Adds the statements in `planned` (drained) of the transaction at
    /// `index` in the block to the batch as literal SQL; the error is the
    /// message of a value that cannot be written as a literal.
    fn push_planned(
        batch: &mut Batch,
        planned: &mut Vec<PlannedStatement>,
        index: usize,
        table: &Arc<ReplicaTable>,
        merged: bool,
    ) -> Result<(), String> {
        for statement in planned.drain(..) {
            batch.sql.clear();
            interpolate(&statement.sql, &statement.params, &mut batch.sql)?;
            batch.push(
                None,
                Check {
                    txn: index,
                    statement: Some((statement, table.clone())),
                    restart: false,
                    merged,
                },
            );
        }
        Ok(())
    }

    /// Plans a pending run of UPDATEs (merged when more than one row) and
    /// adds its statements to the batch; the error names the run's
    /// transaction by its index in the block.
    fn flush_run(
        &mut self,
        run: Option<Run<'_>>,
        batch: &mut Batch,
        planned: &mut Vec<PlannedStatement>,
    ) -> Result<(), (usize, String)> {
        let Some(run) = run else {
            return Ok(());
        };
        let rows: usize = run.changes.iter().map(|c| c.rows.len()).sum();
        if rows == 1 && run.changes[0].kind == RowKind::Update {
            self.plan(run.changes[0], &run.columns, &run.table, planned)
                .map_err(|m| (run.txn, m))?;
        } else {
            planned.clear();
            self.builder.plan_merged_updates(
                &run.changes,
                &run.set,
                &run.columns,
                &run.table.shape,
                planned,
            );
        }
        Self::push_planned(batch, planned, run.txn, &run.table, rows > 1).map_err(|m| (run.txn, m))
    }

    /// Sends the batch's full queries and checks every statement's
    /// affected-row count; on an error, reconnects (the connection's state
    /// after an error inside a multi-statement reply is not trusted) and
    /// names the statement the server stopped at.
    async fn send_full(
        &mut self,
        batch: &mut Batch,
        todo: &[&(Arc<Transaction>, Epoch)],
        row: &RestartRow,
    ) -> Attempt {
        for (query, checks) in std::mem::take(&mut batch.full) {
            if batch.compound {
                // One reply; a failed check or statement stops the query
                // before its COMMIT, and the caller rolls back and runs
                // the block statement by statement, which names it.
                if let Err(e) = self.conn.query_drop(query.as_str()).await {
                    let (txn, epoch) = todo[checks.last().map_or(0, |c| c.txn)];
                    return Err((
                        self.error_at(Some((txn, *epoch)), &elide(&query), &e),
                        Some(e),
                    ));
                }
                continue;
            }
            let mut affected = Vec::with_capacity(checks.len());
            let outcome: Result<(), mysql_async::Error> = async {
                let mut result = self.conn.query_iter(query.as_str()).await?;
                loop {
                    affected.push(result.affected_rows());
                    if result.is_empty() {
                        break;
                    }
                    result.collect::<mysql_async::Row>().await?;
                }
                Ok(())
            }
            .await;
            let outcome = match outcome {
                Ok(()) => self.stopped_early(&mut affected, checks.len()).await,
                error => error,
            };
            // Short counts first (they come before any later error).
            for (check, &n) in checks.iter().zip(&affected) {
                if let (true, Some((statement, table))) = (check.merged, &check.statement) {
                    if n < statement.expected_rows {
                        let (t, _) = todo[check.txn];
                        let message = format!(
                            "a merged update of {} rows of {}.{} counted {n} affected rows, \
                             expected {}: re-running its rows as single UPDATEs",
                            statement.expected_rows / 2,
                            table.shape.schema,
                            table.shape.table,
                            statement.expected_rows
                        );
                        return Err((self.plain_error(t, elide(&statement.sql), 0, message), None));
                    }
                    continue;
                }
                if let Some(e) = self.check_affected(todo, check, n, row) {
                    return Err((e, None));
                }
            }
            if let Err(e) = outcome {
                // This also rolls the open transaction back.
                if let Err(reconnect) = self.reconnect().await {
                    tracing::warn!(
                        error = %crate::mysql::ErrorText(&reconnect),
                        "reconnect after a batch error failed"
                    );
                }
                // The server stopped at the statement after the last reply.
                let check = checks
                    .get(affected.len())
                    .or(checks.last())
                    .expect("non-empty batch");
                let (txn, epoch) = todo[check.txn];
                let failed_sql = check
                    .statement
                    .as_ref()
                    .map_or_else(|| elide(&query), |(s, _)| s.sql.to_string());
                return Err((self.error_at(Some((txn, *epoch)), &failed_sql, &e), Some(e)));
            }
        }
        Ok(())
    }

    /// The error at which the server stopped a multi-statement query whose
    /// reply read without one: MariaDB stops at the first failing
    /// statement, and mysql_async then ends the reply early, the failing
    /// statement reading as an empty result (0 affected rows, nothing
    /// after it) while its error waits for the connection's next command
    /// (which is then not run: a `ROLLBACK` would be lost, and the next
    /// `START TRANSACTION` would commit the statements before the error).
    ///
    /// So a reply that ends on 0 affected rows, or holds fewer replies than
    /// `statements`, is checked with a no-op statement: a server error it
    /// receives is the query's, and the failing statement's 0 is dropped
    /// from `affected` (the error is then the statement's after the last
    /// reply, as when the driver reports it in the reply). Costs a round
    /// trip only for such replies (a batch ends with the restart row's
    /// update, 1 row).
    async fn stopped_early(
        &mut self,
        affected: &mut Vec<u64>,
        statements: usize,
    ) -> Result<(), mysql_async::Error> {
        if affected.last().is_some_and(|&n| n > 0) && affected.len() >= statements {
            return Ok(());
        }
        match self.conn.query_drop("DO 0").await {
            Err(e @ mysql_async::Error::Server(_)) => {
                affected.pop();
                Err(e)
            }
            Err(e) => Err(e),
            Ok(()) if affected.len() < statements => Err(mysql_async::Error::Other(
                format!(
                    "the replica answered {} of the {statements} statements of a batched query",
                    affected.len()
                )
                .into(),
            )),
            Ok(()) => Ok(()),
        }
    }

    /// The divergence or restart-row error for one batched statement's
    /// affected-row count, if it is short.
    fn check_affected(
        &self,
        todo: &[&(Arc<Transaction>, Epoch)],
        check: &Check,
        affected: u64,
        row: &RestartRow,
    ) -> Option<ApplyError> {
        let (t, _) = todo[check.txn];
        if check.restart && affected != 1 {
            return Some(self.plain_error(
                t,
                crate::catalog::restart_update(&self.settings.catalog),
                0,
                missing_row_message(row),
            ));
        }
        let (statement, table) = check.statement.as_ref()?;
        if affected < statement.expected_rows && statement.kind != RowKind::Insert {
            return Some(self.plain_error(
                t,
                elide(&statement.sql),
                crate::mysql::error_codes::ER_KEY_NOT_FOUND,
                divergence_message(statement, &table.shape, affected),
            ));
        }
        None
    }
}
