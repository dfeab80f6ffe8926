//! Online consistency check (issue 18): is the replica's copy of a table
//! identical to the master's, compared chunk by chunk with digests the
//! servers compute ([`sql`]), with nothing written on either server.
//!
//! This module holds the comparison of one table between two read views
//! ([`compare::check_table`]) and what it compares ([`table::TablePlan`]).
//! Taking the two read views at the same point of the stream (the master's
//! consistent snapshot and binlog position, the replica's channels held
//! there) is the service's part.

pub mod compare;
pub mod name;
pub mod sql;
pub mod table;

pub use compare::{check_table, CheckOptions, Difference, DifferenceKind, TableReport};
pub use table::{CheckKey, TablePlan};

/// A check that could not run, with what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The named table does not exist on the master (or is a view).
    #[error("{}: no such table on the master", name::display(schema, table))]
    NoSuchTable {
        /// Schema name.
        schema: String,
        /// Table name.
        table: String,
    },
    /// The caller stopped it.
    #[error("cancelled")]
    Cancelled,
    /// The replica lacks the table or a compared column (server error
    /// 1146 or 1054): a difference, reported as such.
    #[error("{}: {message}", name::display(schema, table))]
    ReplicaTable {
        /// Schema name.
        schema: String,
        /// Table name.
        table: String,
        /// The replica's error.
        message: String,
    },
    /// A statement failed.
    #[error("could not {what}: {message}")]
    Sql {
        /// The step, naming the table and the server.
        what: String,
        /// The server's or the driver's error.
        message: String,
    },
}

impl CheckError {
    /// A failed statement at step `what` on `side` (`"master"` or
    /// `"replica"`): [`CheckError::ReplicaTable`] when the replica lacks
    /// the table or a column of it.
    pub fn from_side(
        side: &str,
        plan: &TablePlan,
        what: String,
        error: mysql_async::Error,
    ) -> CheckError {
        match &error {
            mysql_async::Error::Server(e) if side == "replica" && matches!(e.code, 1146 | 1054) => {
                CheckError::ReplicaTable {
                    schema: plan.schema.clone(),
                    table: plan.table.clone(),
                    message: format!(
                        "the table differs on the replica: ERROR {} {}",
                        e.code, e.message
                    ),
                }
            }
            _ => CheckError::sql(what, error),
        }
    }

    /// A failed statement at step `what`.
    pub fn sql(what: String, error: mysql_async::Error) -> CheckError {
        CheckError::Sql {
            what,
            message: crate::mysql::error_text(&error),
        }
    }
}
