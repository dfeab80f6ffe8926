//! The check, at every start and before anything on the replica changes,
//! that `[replica] binlog_gtids` suits the replica's place in its GTID
//! topology: its binlog (`log_bin`, `log_slave_updates`), `gtid_strict_mode`
//! and the replicas reading it (`SHOW SLAVE HOSTS`).
//!
//! - `"own"` binlogs shardrep's blocks under the replica's own GTIDs in the
//!   replica's domain, usually the master's: the replica's binlog is then
//!   ahead of or beside the master's sequence, which `gtid_strict_mode`
//!   refuses at handback (1950), and its replicas receive GTIDs the master
//!   never issued plus shardrep's restart rows (1146 there: they have no
//!   catalog table). Refused with strict mode; a warning with replicas
//!   attached (they may filter the catalog schema).
//! - `"master"` needs the right to set the session's `server_id` and
//!   `gtid_seq_no` (BINLOG REPLAY, or SUPER before MariaDB 10.5.2).
//! - `"off"` with replicas attached: they receive nothing of what shardrep
//!   applies, as under native replication with `log_slave_updates = OFF`;
//!   a warning ([`replicas_warning`]).

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::RunError;
use crate::config::{BinlogGtids, Config};
use crate::mysql::error_codes::ER_SPECIFIC_ACCESS_DENIED_ERROR;

/// How a run's channels binlog, from `[replica] binlog_gtids` and the
/// replica's settings ([`check_binlog_gtids`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunBinlog {
    /// The mode applied (`"auto"` resolved).
    pub mode: BinlogGtids,
    /// Each transaction committed on its own under its master GTID, in
    /// seqno order: `"master"` on a replica that writes a binlog.
    pub in_order: bool,
    /// The channels' sessions binlog at all.
    pub sql_log_bin: bool,
    /// The replica writes a binlog (`@@log_bin`): commits of an earlier
    /// run under the master's GTIDs may be recorded there only, whatever
    /// this run's mode (a start reads it: `gtid_reconcile`).
    pub log_bin: bool,
    /// `@@gtid_strict_mode`: a GTID out of order in its domain is refused
    /// (error 1950).
    pub strict: bool,
}

/// What the replica says of its place in the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// `@@log_bin`.
    pub log_bin: bool,
    /// `@@log_slave_updates`.
    pub log_slave_updates: bool,
    /// `@@gtid_strict_mode`.
    pub strict: bool,
    /// The server ids `SHOW SLAVE HOSTS` lists (`None`: not readable).
    pub replicas: Option<Vec<u32>>,
}

/// Why `mode` does not suit `topology` (the text of the refusal), if it
/// does not.
pub fn refusal(mode: BinlogGtids, topology: &Topology) -> Option<String> {
    if mode != BinlogGtids::Own || !topology.log_bin {
        return None;
    }
    if topology.strict {
        return Some(
            "[replica] binlog_gtids = \"own\" writes shardrep's blocks to the replica's binlog \
             under the replica's own GTIDs, but the replica runs gtid_strict_mode = ON: native \
             replication would stop at handback (error 1950, an out-of-order sequence number). \
             Set binlog_gtids = \"master\" (each master transaction binlogged under its master \
             GTID) or \"off\""
                .to_string(),
        );
    }
    None
}

/// What `mode` does to the replicas reading the replica, when it harms
/// them (a warning: they may filter the catalog schema).
pub fn replicas_warning(mode: BinlogGtids, topology: &Topology) -> Option<String> {
    let ids = topology.replicas.as_ref().filter(|ids| !ids.is_empty())?;
    let ids = ids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match mode {
        BinlogGtids::Own if topology.log_bin => Some(format!(
            "[replica] binlog_gtids = \"own\": the replicas reading this replica (SHOW SLAVE \
             HOSTS: server ids {ids}) receive shardrep's blocks under GTIDs the master never \
             issued, with shardrep's restart rows (they stop on those, error 1146, unless they \
             filter the catalog schema); binlog_gtids = \"master\" gives them the master's \
             transactions only"
        )),
        BinlogGtids::Off => Some(format!(
            "[replica] binlog_gtids = \"off\": the replicas reading this replica (SHOW SLAVE \
             HOSTS: server ids {ids}) receive nothing of what shardrep applies (as with \
             log_slave_updates = OFF)"
        )),
        _ => None,
    }
}

/// Reads the replica's topology.
///
/// # Errors
/// The driver's, for the variables; `SHOW SLAVE HOSTS` refused leaves
/// [`Topology::replicas`] `None`.
pub async fn read(conn: &mut Conn) -> Result<Topology, mysql_async::Error> {
    let (log_bin, log_slave_updates, strict): (u8, u8, u8) = conn
        .query_first("SELECT @@log_bin, @@log_slave_updates, @@gtid_strict_mode")
        .await?
        .unwrap_or((0, 0, 0));
    let replicas = match conn.query::<mysql_async::Row, _>("SHOW SLAVE HOSTS").await {
        Ok(rows) => Some(
            rows.into_iter()
                .filter_map(|r| r.get::<u32, _>(0))
                .collect(),
        ),
        Err(mysql_async::Error::Server(_)) => None,
        Err(e) => return Err(e),
    };
    Ok(Topology {
        log_bin: log_bin != 0,
        log_slave_updates: log_slave_updates != 0,
        strict: strict != 0,
        replicas,
    })
}

/// Refuses a start whose `[replica] binlog_gtids` would break the
/// replica's GTID topology ([`refusal`]) or that the replica user may not
/// run; logs the topology. Returns how the channels binlog: in order
/// under the master's GTIDs for `"master"` on a replica that writes a
/// binlog (without one, blocks commit together: nothing records a GTID);
/// `"auto"` is `"master"` with `log_slave_updates`, else `"off"`.
///
/// # Errors
/// [`RunError::Setup`] naming the setting to change or the grant to run.
pub(super) async fn check_binlog_gtids(
    config: &Config,
    conn: &mut Conn,
) -> Result<RunBinlog, RunError> {
    let topology = read(conn).await.map_err(|e| {
        RunError::setup(format!(
            "cannot read the replica's binlog settings (log_bin, log_slave_updates, \
             gtid_strict_mode): {}",
            crate::mysql::ErrorText(&e)
        ))
    })?;
    let mode = config
        .replica
        .binlog_gtids
        .resolve(topology.log_bin, topology.log_slave_updates);
    tracing::info!(
        binlog_gtids = %mode,
        configured = %config.replica.binlog_gtids,
        log_bin = topology.log_bin,
        log_slave_updates = topology.log_slave_updates,
        gtid_strict_mode = topology.strict,
        replicas = %topology.replicas.as_ref().map_or_else(
            || "unknown (SHOW SLAVE HOSTS refused)".to_string(),
            |ids| format!("{ids:?}")
        ),
        "the replica's GTID topology"
    );
    if let Some(why) = refusal(mode, &topology) {
        // Name the key the DBA wrote when the mode comes from it.
        let written = if config.replica.binlog_gtids_from_sql_log_bin {
            format!(
                "[replica] sql_log_bin = {} (written without binlog_gtids) means binlog_gtids \
                 = {:?}: remove sql_log_bin when you set binlog_gtids. ",
                config.replica.sql_log_bin,
                config.replica.binlog_gtids.as_str()
            )
        } else {
            String::new()
        };
        return Err(RunError::setup(format!(
            "{written}{why}. Nothing was changed on the replica {}:{}",
            config.replica.host, config.replica.port
        )));
    }
    if let Some(warning) = replicas_warning(mode, &topology) {
        tracing::warn!("{warning}");
    }
    if mode == BinlogGtids::Master && topology.log_bin {
        // The statement the channels run before each transaction; 0 sets
        // nothing.
        if let Err(mysql_async::Error::Server(e)) = conn
            .query_drop("SET SESSION server_id = @@GLOBAL.server_id, gtid_seq_no = 0")
            .await
        {
            let user = &config.replica.user;
            return Err(RunError::setup(
                if e.code == ER_SPECIFIC_ACCESS_DENIED_ERROR {
                    format!(
                        "[replica] binlog_gtids = \"master\" sets each transaction's master GTID \
                     on the session, which needs the BINLOG REPLAY privilege (or SUPER) \
                     for [replica] user {user:?}: run GRANT BINLOG REPLAY ON \
                     *.* TO '{user}'@'<its host>'; on the replica, or set binlog_gtids = \
                     {}. Nothing was changed on the replica (the server said: error {}: {})",
                        // "own" is refused under strict mode.
                        if topology.strict {
                            "\"off\" (\"own\" is refused under gtid_strict_mode = ON)"
                        } else {
                            "\"own\" or \"off\""
                        },
                        e.code,
                        e.message
                    )
                } else {
                    format!(
                        "[replica] binlog_gtids = \"master\": the replica refuses to set a \
                     session's GTID (error {}: {}); set binlog_gtids = \"own\" or \"off\". \
                     Nothing was changed on the replica",
                        e.code, e.message
                    )
                },
            ));
        }
    }
    Ok(RunBinlog {
        mode,
        in_order: mode == BinlogGtids::Master && topology.log_bin,
        sql_log_bin: mode.logs(),
        log_bin: topology.log_bin,
        strict: topology.strict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(strict: bool, replicas: Option<Vec<u32>>) -> Topology {
        Topology {
            log_bin: true,
            log_slave_updates: true,
            strict,
            replicas,
        }
    }

    #[test]
    fn own_gtids_are_refused_with_strict_mode_and_warned_of_with_replicas() {
        let why = refusal(BinlogGtids::Own, &topology(true, Some(vec![]))).unwrap();
        assert!(
            why.contains("gtid_strict_mode = ON") && why.contains("1950"),
            "{why}"
        );
        assert_eq!(
            refusal(BinlogGtids::Own, &topology(false, Some(vec![4, 5]))),
            None
        );
        let why = replicas_warning(BinlogGtids::Own, &topology(false, Some(vec![4, 5]))).unwrap();
        assert!(
            why.contains("server ids 4, 5") && why.contains("1146"),
            "{why}"
        );
        assert_eq!(
            replicas_warning(BinlogGtids::Master, &topology(false, Some(vec![4]))),
            None
        );
        assert!(replicas_warning(BinlogGtids::Off, &topology(false, Some(vec![4]))).is_some());
        assert_eq!(
            replicas_warning(BinlogGtids::Own, &topology(false, Some(vec![]))),
            None
        );
        assert_eq!(refusal(BinlogGtids::Own, &topology(false, None)), None);
        for mode in [BinlogGtids::Master, BinlogGtids::Off] {
            assert_eq!(refusal(mode, &topology(true, Some(vec![4]))), None);
        }
        let no_binlog = Topology {
            log_bin: false,
            ..topology(true, Some(vec![4]))
        };
        assert_eq!(refusal(BinlogGtids::Own, &no_binlog), None);
    }
}
