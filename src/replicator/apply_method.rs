//! The check, at every start and before anything on the replica changes,
//! that the replica accepts what `[apply] method` sends.
//!
//! Under `"binlog"` the channels send `BINLOG '<base64>'` statements,
//! which MariaDB allows to a user with `BINLOG REPLAY` (10.5.2 and later)
//! or SUPER (MariaDB knowledge base, "BINLOG" and "GRANT"). The probe is
//! `BINLOG ''`: the server checks the privilege first (error 1227 without
//! it), then refuses the empty text as a syntax error (1149): so 1149
//! means allowed, 1227 means the grant is missing, anything else that the
//! server cannot run BINLOG statements.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::RunError;
use crate::config::{ApplyMethod, Config};
use crate::mysql::error_codes::ER_SPECIFIC_ACCESS_DENIED_ERROR;

/// The error code of `BINLOG ''` on a server that allows the statement:
/// `ER_SYNTAX_ERROR`.
const ALLOWED_PROBE_ERROR: u16 = 1149;

/// Refuses a start whose replica would refuse the apply method's
/// statements.
///
/// # Errors
/// [`RunError::Setup`] naming the grant to run (or the method to choose)
/// when `[replica] user` lacks `BINLOG REPLAY`/SUPER, or the server does
/// not run BINLOG statements; the server's error when the probe fails
/// otherwise.
pub(super) async fn check_apply_method(config: &Config, conn: &mut Conn) -> Result<(), RunError> {
    if config.apply.method != ApplyMethod::Binlog {
        return Ok(());
    }
    let error = match conn.query_drop("BINLOG ''").await {
        Err(mysql_async::Error::Server(e)) => e,
        Err(e) => {
            return Err(RunError::setup(format!(
                "cannot check that the replica runs BINLOG statements: {}",
                crate::mysql::ErrorText(&e)
            )))
        }
        Ok(()) => return Ok(()),
    };
    let user = &config.replica.user;
    match error.code {
        ALLOWED_PROBE_ERROR => Ok(()),
        ER_SPECIFIC_ACCESS_DENIED_ERROR => Err(RunError::setup(format!(
            "[apply] method = \"binlog\" needs the BINLOG REPLAY privilege (or SUPER) for \
             [replica] user {user:?} on the replica {}:{}: run GRANT BINLOG REPLAY ON *.* TO \
             '{user}'@'<its host>'; there (SHOW GRANTS names the host; `shardrep check-config \
             --grants` prints every grant shardrep needs). Without it, [apply] method = \
             \"sql\" re-writes row changes as SQL (tables with triggers on the replica and \
             system-versioned tables then stop the service), and only with [replica] \
             binlog_gtids = \"off\" or \"own\" on a replica that binlogs (\"master\" needs \
             BINLOG REPLAY too). Nothing was changed on the replica (the server said: error \
             {}: {})",
            config.replica.host, config.replica.port, error.code, error.message
        ))),
        code => Err(RunError::setup(format!(
            "[apply] method = \"binlog\": the replica {}:{} does not run BINLOG statements \
             (error {code}: {}); set [apply] method = \"sql\" for this server. Nothing was \
             changed on the replica",
            config.replica.host, config.replica.port, error.message
        ))),
    }
}
