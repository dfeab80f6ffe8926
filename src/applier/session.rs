//! The session of a channel's connection: its own settings, the origin of
//! the transactions it applies ([`Origin`], `replica.preserve_origin`) and
//! the session context a logged statement ran with ([`session_setup`]).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value as Param};

use crate::event::{SessionContext, Transaction, UserVarValue};
use crate::mysql::quote_ident;

/// Where a transaction was written: its `server_id` and, when it has a
/// GTID, its domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    server_id: u32,
    domain_id: Option<u32>,
}

impl Origin {
    /// The origin of `txn`.
    pub fn of(txn: &Transaction) -> Origin {
        Origin {
            server_id: txn.server_id,
            domain_id: txn.gtid.map(|g| g.domain_id),
        }
    }

    /// The statement that sets a session to this origin.
    pub fn set_statement(&self) -> String {
        let domain = self
            .domain_id
            .map_or_else(|| "DEFAULT".to_string(), |d| d.to_string());
        format!(
            "SET SESSION server_id = {}, gtid_domain_id = {domain}",
            self.server_id
        )
    }
}

/// The statements that set a statement's session context before it runs:
/// `(sql, params)` pairs.
pub fn session_setup(context: &SessionContext) -> Vec<(String, Vec<Param>)> {
    let mut out: Vec<(String, Vec<Param>)> = Vec::new();
    let mut set = vec![format!("TIMESTAMP = {}", context.timestamp)];
    if let Some(micros) = context.timestamp_micros {
        set[0] = format!("TIMESTAMP = {}.{micros:06}", context.timestamp);
    }
    if let Some(mode) = context.sql_mode {
        set.push(format!("sql_mode = {mode}"));
    }
    if let Some(flags) = context.flags2 {
        set.push(format!(
            "foreign_key_checks = {}, unique_checks = {}",
            u8::from(flags & 0x0400_0000 == 0),
            u8::from(flags & 0x0800_0000 == 0)
        ));
    }
    if let (Some(client), Some(conn), Some(server)) = (
        context.charset_client,
        context.collation_connection,
        context.collation_server,
    ) {
        set.push(format!(
            "character_set_client = {client}, collation_connection = {conn}, collation_server = {server}"
        ));
    }
    if let Some((increment, offset)) = context.auto_increment {
        set.push(format!(
            "auto_increment_increment = {increment}, auto_increment_offset = {offset}"
        ));
    }
    if let Some(id) = context.insert_id {
        set.push(format!("insert_id = {id}"));
    }
    if let Some(id) = context.last_insert_id {
        set.push(format!("last_insert_id = {id}"));
    }
    if let Some((s1, s2)) = context.rand_seeds {
        set.push(format!("rand_seed1 = {s1}, rand_seed2 = {s2}"));
    }
    out.push((format!("SET {}", set.join(", ")), Vec::new()));
    if let Some(tz) = &context.time_zone {
        out.push((
            "SET time_zone = ?".to_string(),
            vec![Param::Bytes(tz.as_bytes().to_vec())],
        ));
    }
    for var in &context.user_vars {
        let name = quote_ident(&var.name);
        let (sql, params) = match &var.value {
            None => (format!("SET @{name} = NULL"), Vec::new()),
            Some(UserVarValue::String { bytes, .. }) => (
                format!("SET @{name} = ?"),
                vec![Param::Bytes(bytes.clone())],
            ),
            Some(UserVarValue::Real(v)) => (format!("SET @{name} = ?"), vec![Param::Double(*v)]),
            Some(UserVarValue::Int { value, unsigned }) => (
                format!("SET @{name} = ?"),
                vec![if *unsigned {
                    Param::UInt(*value as u64)
                } else {
                    Param::Int(*value)
                }],
            ),
            Some(UserVarValue::Decimal(d)) => (
                format!("SET @{name} = CAST(? AS DECIMAL(65,30))"),
                vec![Param::Bytes(d.as_bytes().to_vec())],
            ),
        };
        out.push((sql, params));
    }
    out
}

/// The statement that sets up a channel's session on connecting: `SET
/// NAMES binary` (bytes pass unchanged), UTC, `NO_AUTO_VALUE_ON_ZERO` (as
/// the server's own row applier), binary logging as configured
/// (`replica.sql_log_bin`), autocommit.
pub fn setup_statement(sql_log_bin: bool, method: crate::config::ApplyMethod) -> String {
    let log_bin = if sql_log_bin { 1 } else { 0 };
    let mut setup = format!(
        "SET NAMES binary, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO', \
         sql_log_bin = {log_bin}, autocommit = 1"
    );
    if method == crate::config::ApplyMethod::Binlog {
        // A replica that binlogs with annotations would log the whole
        // BINLOG statement's text (the base64 of a block's events) before
        // every rows event it applies: 34 GB of replica binlog for 437 MB
        // of master binlog in the catch-up benchmark. Same privilege as
        // sql_log_bin (BINLOG ADMIN or SUPER).
        setup.push_str(", binlog_annotate_row_events = 0");
    }
    setup
}

/// The statement that brings the session back to the channel's own after
/// a logged statement ran with its session context ([`session_setup`]);
/// `in_session`: it ran in a master session's temporary-table namespace,
/// which this leaves (`pseudo_thread_id = 0`: no master session has thread
/// id 0), since its temporary tables shadow base tables of the same name,
/// also for the row changes and other sessions' statements that follow.
pub fn restore_statement(in_session: bool) -> String {
    let mut restore =
        "SET NAMES binary, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO', \
                       foreign_key_checks = 1, unique_checks = 1, TIMESTAMP = DEFAULT, \
                       insert_id = 0, last_insert_id = 0"
            .to_string();
    if in_session {
        restore += ", pseudo_thread_id = 0";
    }
    restore
}

/// How long a killed session may take to end before the channel gives up
/// (a definite error: its transaction could still commit).
const LOST_SESSION_END: Duration = Duration::from_secs(60);

/// The replica session a channel last used: its connection id and the
/// server's start time as that connection saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionId {
    /// `CONNECTION_ID()` (the handshake's connection id).
    pub id: u32,
    /// The server's start, Unix seconds (`UNIX_TIMESTAMP()` minus status
    /// `Uptime`); `None` when it could not be read.
    pub server_started: Option<i64>,
}

impl SessionId {
    /// The session of `conn`: one query, at connect.
    pub async fn of(conn: &mut Conn) -> SessionId {
        let started: Option<i64> = conn
            .query_first(
                "SELECT CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS SIGNED) \
                 FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'",
            )
            .await
            .ok()
            .flatten();
        SessionId {
            id: conn.id(),
            server_started: started,
        }
    }

    /// Whether `other` is a session of the same run of the server (start
    /// times within 2 s: `Uptime` counts whole seconds).
    pub fn same_server(&self, other: &SessionId) -> bool {
        matches!(
            (self.server_started, other.server_started),
            (Some(a), Some(b)) if (a - b).abs() <= 2
        )
    }
}

/// Ends session `lost` if the server still runs it, from `conn` (whose
/// session is `current`): looks it up in `information_schema.PROCESSLIST`
/// under the same user, `KILL CONNECTION`s it (any user may end its own
/// sessions) and waits until the server has ended it, so that nothing
/// sent on it (a block that ends with its COMMIT) can commit later. A
/// server that restarted since (its start time differs) has no such
/// session and reuses ids: nothing is killed then. `who` names the
/// session's owner in the log (`channel 3`).
///
/// # Errors
/// A query on `conn` failed (the caller retries), or the session is still
/// there [`LOST_SESSION_END`] after it was killed.
pub async fn end_session(
    conn: &mut Conn,
    current: SessionId,
    lost: SessionId,
    who: &str,
) -> Result<(), mysql_async::Error> {
    if !current.same_server(&lost) || current.id == lost.id {
        return Ok(());
    }
    let deadline = Instant::now() + LOST_SESSION_END;
    let mut killed = false;
    loop {
        let there: Option<u32> = conn
            .exec_first(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE ID = ? AND USER = SUBSTRING_INDEX(USER(), '@', 1)",
                (lost.id,),
            )
            .await?;
        if there.is_none() {
            if killed {
                tracing::info!(
                    who,
                    session = lost.id,
                    "the old session has ended on the replica"
                );
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(mysql_async::Error::Other(
                format!(
                    "session {} of {who} is still on the replica {} s after KILL CONNECTION: its \
                     transaction could still commit, so it cannot be told whether its block ran",
                    lost.id,
                    LOST_SESSION_END.as_secs()
                )
                .into(),
            ));
        }
        if !killed {
            tracing::info!(
                who,
                session = lost.id,
                "the replica still runs an old session of this service; killing it before the \
                 restart row is read"
            );
            // An id that just ended answers 1094 (unknown thread): the
            // next look finds it gone.
            let _ = conn
                .query_drop(format!("KILL CONNECTION {}", lost.id))
                .await;
            killed = true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_of_one_server_run_have_start_times_within_two_seconds() {
        let at = |id, s| SessionId {
            id,
            server_started: s,
        };
        assert!(at(1, Some(100)).same_server(&at(2, Some(102))));
        assert!(!at(1, Some(100)).same_server(&at(2, Some(103))));
        assert!(!at(1, None).same_server(&at(2, Some(100))));
    }
}
