//! Which DDL may be run a second time when a channel replays the DDL
//! transaction it marked before a crash (restart table `ddl_seqno` above
//! `seqno`: the DDL may or may not have committed).
//!
//! A statement is replayed only when a second run either fails with an
//! "already done" error that [`super::retry::is_ddl_already_applied_error`]
//! tolerates, or leaves the same end state (MariaDB 10.6+ DDL is atomic,
//! so it ran whole or not at all). The kind is read from sqlparser's AST
//! (MySQL dialect). Everything else (`RENAME TABLE`, which a second run can
//! swap back; unnamed `ADD INDEX|KEY|UNIQUE|CHECK|FOREIGN KEY`, which a
//! second run adds again under a new name; a column swap in one `ALTER`;
//! statements sqlparser does not parse) is never replayed: the channel
//! stops with [`unsafe_replay_message`].

use sqlparser::ast::{AlterTableOperation, ObjectType, Statement, TableConstraint};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// Whether running `sql` (one DDL statement, as logged) a second time is
/// harmless: it fails with a tolerated "exists / does not exist" error or
/// gives the same end state. `false` for anything not parsed.
pub fn replay_is_safe(sql: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(sql) else {
        return false;
    };
    let Ok(statements) = Parser::parse_sql(&MySqlDialect {}, text) else {
        return false;
    };
    match statements.as_slice() {
        [statement] => statement_is_safe(statement),
        _ => false,
    }
}

fn statement_is_safe(statement: &Statement) -> bool {
    match statement {
        // Named: a second run fails with 1050 (or is a no-op with IF NOT
        // EXISTS); OR REPLACE recreates the same empty table (the rows of
        // CREATE … SELECT follow in the transaction, uncommitted).
        Statement::CreateTable(create) => {
            create.query.is_none() || !create.if_not_exists || create.or_replace
        }
        // 1007, or a no-op with IF NOT EXISTS.
        Statement::CreateDatabase { .. } => true,
        // 1061 when named; an unnamed index would be added again.
        Statement::CreateIndex(create) => create.name.is_some(),
        // 1050, or the same view with OR REPLACE.
        Statement::CreateView(_) => true,
        // 1051/1008/1091 or a no-op with IF EXISTS.
        Statement::Drop { object_type, .. } => matches!(
            object_type,
            ObjectType::Table
                | ObjectType::View
                | ObjectType::Index
                | ObjectType::Schema
                | ObjectType::Database
        ),
        // The table is empty again: the same end state.
        Statement::Truncate(_) => true,
        Statement::AlterTable(alter) => alter_is_safe(&alter.operations),
        _ => false,
    }
}

fn alter_is_safe(operations: &[AlterTableOperation]) -> bool {
    // Renames whose new name is another rename's old name (a swap) give a
    // different result the second time.
    let mut old_names = Vec::new();
    let mut new_names = Vec::new();
    for operation in operations {
        match operation {
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                old_names.push(old_column_name.value.to_lowercase());
                new_names.push(new_column_name.value.to_lowercase());
            }
            AlterTableOperation::ChangeColumn {
                old_name, new_name, ..
            } if !old_name.value.eq_ignore_ascii_case(&new_name.value) => {
                old_names.push(old_name.value.to_lowercase());
                new_names.push(new_name.value.to_lowercase());
            }
            _ => {}
        }
    }
    if new_names.iter().any(|n| old_names.contains(n)) {
        return false;
    }
    !operations.is_empty() && operations.iter().all(operation_is_safe)
}

fn operation_is_safe(operation: &AlterTableOperation) -> bool {
    match operation {
        // 1060 / 1091 / 1054, or no-ops with IF [NOT] EXISTS.
        AlterTableOperation::AddColumn { .. }
        | AlterTableOperation::DropColumn { .. }
        | AlterTableOperation::RenameColumn { .. }
        | AlterTableOperation::ChangeColumn { .. }
        // The same definition again: the same end state.
        | AlterTableOperation::ModifyColumn { .. }
        // 1091 (can't drop) or no-op with IF EXISTS.
        | AlterTableOperation::DropConstraint { .. }
        | AlterTableOperation::DropIndex { .. }
        | AlterTableOperation::DropForeignKey { .. }
        | AlterTableOperation::DropPrimaryKey { .. }
        // 1146: the old name is gone.
        | AlterTableOperation::RenameTable { .. }
        | AlterTableOperation::Algorithm { .. }
        | AlterTableOperation::Lock { .. } => true,
        AlterTableOperation::AddConstraint { constraint, .. } => match constraint {
            // 1061 / 1826 / 1005 errno 121 when named; unnamed ones are
            // added again as c_2, CONSTRAINT_2, ..._ibfk_2.
            TableConstraint::Unique(c) => c.name.is_some() || c.index_name.is_some(),
            TableConstraint::Index(c) => c.name.is_some(),
            TableConstraint::FulltextOrSpatial(c) => c.opt_index_name.is_some(),
            TableConstraint::Check(c) => c.name.is_some(),
            TableConstraint::ForeignKey(c) => c.name.is_some(),
            // 1068 (multiple primary key) is not an "already done" error.
            _ => false,
        },
        _ => false,
    }
}

/// The pending error of a marked DDL that is not replayed: names the
/// seqno, its binlog position and the statement, and what to do.
pub fn unsafe_replay_message(seqno: u64, position: &str, sql: &str, sql_log_bin: bool) -> String {
    let log_bin = u8::from(sql_log_bin);
    format!(
        "{UNSAFE_REPLAY_PREFIX} seqno {seqno} (binlog position {position}) started before the \
         last stop (or a lost connection) and its restart row was not committed, so it may or may not have run on the \
         replica; a second run of this statement would not fail and could change the replica, \
         so it was not run: {sql}. Way out: compare the replica with the statement. If it ran, \
         `shardrepctl online --skip-seqno {seqno}`; if it did not, run the statement on the \
         replica by hand with `SET SESSION sql_log_bin = {log_bin}` (as the service's \
         replica.sql_log_bin) in its default schema, then \
         `shardrepctl online --skip-seqno {seqno}`. A plain `shardrepctl online` stops here \
         again"
    )
}

/// The start of [`unsafe_replay_message`] (its way out is in the message).
pub const UNSAFE_REPLAY_PREFIX: &str = "unsafe DDL replay:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ddl_fails_or_converges_when_run_again() {
        for sql in [
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)",
            "CREATE OR REPLACE TABLE t (id INT)",
            "CREATE DATABASE d",
            "CREATE INDEX i ON t (c)",
            "DROP TABLE `t` /* generated by server */",
            "DROP DATABASE IF EXISTS d",
            "TRUNCATE TABLE t",
            "ALTER TABLE t ADD COLUMN c INT",
            "ALTER TABLE t ADD COLUMN c INT AFTER id, DROP COLUMN d",
            "ALTER TABLE t MODIFY c BIGINT NOT NULL",
            "ALTER TABLE t CHANGE a b INT",
            "ALTER TABLE t ADD INDEX ic (c)",
            "ALTER TABLE t ADD UNIQUE KEY uk (c)",
            "ALTER TABLE t ADD CONSTRAINT ck CHECK (c > 0)",
            "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES p (id)",
            "ALTER TABLE t DROP INDEX ic",
            "ALTER TABLE t RENAME TO u",
        ] {
            assert!(replay_is_safe(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn ddl_that_succeeds_again_differently_is_not_replayed() {
        for sql in [
            "RENAME TABLE a TO tmp, b TO a, tmp TO b",
            "RENAME TABLE a TO b",
            "ALTER TABLE t ADD INDEX (c)",
            "ALTER TABLE t ADD KEY (c)",
            "ALTER TABLE t ADD UNIQUE (c)",
            "ALTER TABLE t ADD CHECK (c > 0)",
            "ALTER TABLE t ADD FOREIGN KEY (c) REFERENCES p (id)",
            "ALTER TABLE t ADD PRIMARY KEY (id)",
            "ALTER TABLE t ADD COLUMN x INT, ADD INDEX (c)",
            "ALTER TABLE t CHANGE a b INT, CHANGE b a INT",
            "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a",
            "CREATE TABLE IF NOT EXISTS t SELECT 1 AS a",
            "GRANT SELECT ON d.* TO u",
            "not sql at all",
        ] {
            assert!(!replay_is_safe(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn the_message_names_seqno_position_statement_and_way_out() {
        let m = unsafe_replay_message(42, "mysql-bin.000003:1234", "RENAME TABLE a TO b", false);
        assert!(m.starts_with(UNSAFE_REPLAY_PREFIX));
        for part in [
            "seqno 42 ",
            "binlog position mysql-bin.000003:1234",
            ": RENAME TABLE a TO b.",
            "`shardrepctl online --skip-seqno 42`; if it did not",
            "sql_log_bin = 0",
        ] {
            assert!(m.contains(part), "{part} in {m}");
        }
    }
}
