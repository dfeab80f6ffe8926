//! Classification of apply errors: which are transient (roll back the
//! block and retry from the channel's committed restart row, with capped
//! backoff) and which are definite (the service goes OFFLINE:ERROR).
//!
//! The codes are named in [`crate::mysql::error_codes`] (with their
//! sources).

use crate::mysql::error_codes::{
    CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST,
    ER_BAD_FIELD_ERROR, ER_BAD_TABLE_ERROR, ER_CANNOT_USER, ER_CANT_CREATE_TABLE,
    ER_CANT_DROP_FIELD_OR_KEY, ER_CONNECTION_KILLED, ER_DB_CREATE_EXISTS, ER_DB_DROP_EXISTS,
    ER_DUP_CONSTRAINT_NAME, ER_DUP_FIELDNAME, ER_DUP_KEYNAME, ER_EVENT_ALREADY_EXISTS,
    ER_EVENT_DOES_NOT_EXIST, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, ER_NO_SUCH_TABLE,
    ER_SERVER_SHUTDOWN, ER_SP_ALREADY_EXISTS, ER_SP_DOES_NOT_EXIST, ER_TABLE_EXISTS_ERROR,
    ER_TRG_ALREADY_EXISTS, ER_TRG_DOES_NOT_EXIST,
};

/// What to do about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Roll back the block and retry it after a backoff.
    Transient,
    /// Stop the service with OFFLINE:ERROR; never skip on our own.
    Definite,
}

/// Classifies a server (or client-library) error code.
pub fn classify_code(code: u16) -> ErrorClass {
    match code {
        ER_LOCK_DEADLOCK | ER_LOCK_WAIT_TIMEOUT | CR_SERVER_GONE_ERROR | CR_SERVER_LOST
        | ER_CONNECTION_KILLED | ER_SERVER_SHUTDOWN => ErrorClass::Transient,
        _ => ErrorClass::Definite,
    }
}

/// Classifies a mysql_async error: server errors by code; I/O errors and a
/// closed connection are transient (lost connection); driver and URL
/// errors are definite.
pub fn classify(error: &mysql_async::Error) -> ErrorClass {
    match error {
        mysql_async::Error::Server(e) => classify_code(e.code),
        mysql_async::Error::Io(_) => ErrorClass::Transient,
        mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed) => {
            ErrorClass::Transient
        }
        _ => ErrorClass::Definite,
    }
}

/// Whether the outcome of what was sent before `error` is unknown: the
/// connection was lost, killed or shut down (an I/O error, a closed
/// connection or any other driver error, 2006, 2013, 1927, 1053), so a
/// COMMIT sent on it, or a compound block that ends with one, may have
/// taken effect or not. The channel then reads its restart row before it
/// does anything else (shared/DESIGN.md §4, "Unknown outcome"). A lock
/// wait timeout (1205) or deadlock (1213) is a reply: nothing committed.
pub fn outcome_unknown(error: &mysql_async::Error) -> bool {
    match error {
        mysql_async::Error::Server(e) => matches!(
            e.code,
            CR_SERVER_GONE_ERROR | CR_SERVER_LOST | ER_CONNECTION_KILLED | ER_SERVER_SHUTDOWN
        ),
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => true,
        _ => false,
    }
}

/// Whether a reported error (its server code, 0 for none, and message) is
/// transient by kind: a code [`classify_code`] retries, a client connect
/// error (2002, 2003), or no server code and a message of a lost or refused
/// connection (what [`classify`] retries as I/O or a closed connection).
/// Used for the way out of an error that outlasted the retries: nothing is
/// lost, the service resumes at the restart rows.
pub fn is_transient_report(code: u16, message: &str) -> bool {
    match code {
        0 => {
            let m = message.to_ascii_lowercase();
            [
                "input/output error",
                "connection to the server is closed",
                "connection refused",
                "connection reset",
                "broken pipe",
                "timed out",
                "lost connection",
                "server has gone away",
            ]
            .iter()
            .any(|s| m.contains(s))
        }
        CR_CONNECTION_ERROR | CR_CONN_HOST_ERROR => true,
        code => classify_code(code) == ErrorClass::Transient,
    }
}

/// Server errors a DDL statement gives when it already ran: a database,
/// table, column, key, routine, trigger, user or event that exists, or
/// does not exist (the codes below).
///
/// Used only when replaying the one DDL transaction a channel marked as
/// started before a crash (restart table `ddl_seqno`): MariaDB 10.6+ DDL
/// is atomic (crash-safe), so such a statement either ran whole or not at
/// all, and one of these errors means it ran. Never used elsewhere.
pub fn is_ddl_already_applied(code: u16) -> bool {
    matches!(
        code,
        ER_DB_CREATE_EXISTS
            | ER_DB_DROP_EXISTS
            | ER_TABLE_EXISTS_ERROR
            | ER_BAD_TABLE_ERROR
            | ER_BAD_FIELD_ERROR
            | ER_DUP_FIELDNAME
            | ER_DUP_KEYNAME
            | ER_CANT_DROP_FIELD_OR_KEY
            | ER_NO_SUCH_TABLE
            | ER_SP_ALREADY_EXISTS
            | ER_SP_DOES_NOT_EXIST
            | ER_TRG_ALREADY_EXISTS
            | ER_TRG_DOES_NOT_EXIST
            | ER_CANNOT_USER
            | ER_EVENT_ALREADY_EXISTS
            | ER_EVENT_DOES_NOT_EXIST
    )
}

/// [`is_ddl_already_applied`], or a foreign key that already exists:
/// 1826 (`ER_DUP_CONSTRAINT_NAME`), or 1005 (`ER_CANT_CREATE_TABLE`) whose
/// message names InnoDB's errno 121 (a duplicate constraint name, what
/// MariaDB 10.11 reports when `ALTER TABLE … ADD FOREIGN KEY` is run again).
/// Same use as [`is_ddl_already_applied`].
pub fn is_ddl_already_applied_error(code: u16, message: &str) -> bool {
    is_ddl_already_applied(code)
        || code == ER_DUP_CONSTRAINT_NAME
        || (code == ER_CANT_CREATE_TABLE && message.contains("errno: 121"))
}

pub use crate::backoff::Backoff;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_and_definite_codes() {
        for code in [1213, 1205, 2006, 2013, 1927, 1053] {
            assert_eq!(classify_code(code), ErrorClass::Transient, "{code}");
        }
        for code in [1062, 1032, 1146, 1054, 1064, 1452] {
            assert_eq!(classify_code(code), ErrorClass::Definite, "{code}");
        }
    }

    #[test]
    fn only_a_lost_connection_leaves_the_outcome_unknown() {
        let server = |code| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: String::new(),
                state: String::new(),
            })
        };
        for code in [2006, 2013, 1927, 1053] {
            assert!(outcome_unknown(&server(code)), "{code}");
        }
        for code in [1205, 1213, 1062, 1032] {
            assert!(!outcome_unknown(&server(code)), "{code}");
        }
        let closed = mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed);
        assert!(outcome_unknown(&closed));
        let io = mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(outcome_unknown(&io));
        assert!(!outcome_unknown(&mysql_async::Error::Other("x".into())));
    }

    #[test]
    fn ddl_replay_tolerates_only_exists_errors() {
        for code in [1007, 1008, 1050, 1051, 1060, 1061, 1091, 1146] {
            assert!(is_ddl_already_applied(code), "{code}");
        }
        for code in [1062, 1032, 1064, 1213, 1205, 1142, 1044] {
            assert!(!is_ddl_already_applied(code), "{code}");
        }
    }

    #[test]
    fn ddl_replay_tolerates_an_existing_foreign_key() {
        let dup =
            "Can't create table `d`.`child` (errno: 121 \"Duplicate key on write or update\")";
        assert!(is_ddl_already_applied_error(1005, dup));
        assert!(is_ddl_already_applied_error(
            1826,
            "Duplicate FOREIGN KEY constraint name"
        ));
        assert!(is_ddl_already_applied_error(1050, ""));
        let bad = "Can't create table `d`.`child` (errno: 150 \"Foreign key constraint is incorrectly formed\")";
        assert!(!is_ddl_already_applied_error(1005, bad));
        assert!(!is_ddl_already_applied_error(1062, dup));
    }

    #[test]
    fn transient_reports_are_lost_connections_locks_and_no_code_io() {
        for code in [1205, 1213, 2002, 2003, 2006, 2013, 1927, 1053] {
            assert!(is_transient_report(code, "x"), "{code}");
        }
        assert!(is_transient_report(
            0,
            "Input/output error: Connection refused (os error 111)"
        ));
        assert!(is_transient_report(0, "Connection to the server is closed"));
        assert!(!is_transient_report(
            1062,
            "Duplicate entry '1' for key 'PRIMARY'"
        ));
        assert!(!is_transient_report(
            0,
            "the restart row of channel 1 is missing"
        ));
    }
}
