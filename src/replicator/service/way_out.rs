//! What the DBA can do about the error of an `OFFLINE:ERROR`: a sentence
//! naming the commands (`shardrepctl online`, `online --skip-seqno N`, the
//! `shard insert` line that admits a shard, `handback`, `reset`) or the
//! configuration keys to fix. The service appends it to `pendingError`
//! (`. Way out: …`), logs it with the error (`next`), and `shardrep run
//! --until-idle` prints it as its `hint:`.
//!
//! Every [`RunError`] is decided here, variant by variant (no catch-all):
//! a new error has to say what to do. `None` means that the error's own
//! message already ends with what to do (a lost queue, native replication
//! running, a restart row to restore, ...).

use super::{handback_at_base, handback_position};
use crate::applier::restart::{RestartError, RestartRow};
use crate::config::Config;
use crate::mysql::error_codes::{
    CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, ER_ACCESS_DENIED_ERROR,
    ER_ACCESS_DENIED_NO_PASSWORD_ERROR, ER_DBACCESS_DENIED_ERROR, ER_DUP_ENTRY,
    ER_GTID_STRICT_OUT_OF_ORDER, ER_KEY_NOT_FOUND, ER_SLAVE_CONVERSION_FAILED,
    ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR,
};
use crate::queue::QueueError;
use crate::replicator::RunError;
use crate::scheduler::SchedulerError;
use crate::shard::filter::Rule;

/// What the DBA can do about `error`, the error of a run of the service
/// configured by `config` whose restart rows are `rows` (as the failed
/// run left them); `None` when the error's message says it.
/// `binlog_lacks_rows_above`: the furthest restart row's seqno when the
/// run's start found the replica's binlog without the GTIDs the rows
/// record (`gtid_reconcile`: a duplicate in that run may be a transaction
/// applied twice; every later start finds it again until a run commits
/// past the rows).
pub(super) fn way_out(
    error: &RunError,
    rows: &[RestartRow],
    config: &Config,
    binlog_lacks_rows_above: Option<u64>,
) -> Option<String> {
    let name = &config.service.name;
    let file = config.origin.display();
    let reset = format!(
        "`shardrepctl reset --confirm {name}` removes the queue, the restart rows and the \
         recorded skips, so that the service can start again with a fresh takeover or at \
         source.start"
    );
    let online = "`shardrepctl online`";
    let restart_needed = format!("it reads {file} only at start");
    match error {
        RunError::Setup { code, server, .. } => Some(match (code, server) {
            (Some(code), Some(server)) if is_access_denied(*code) => format!(
                "{} refused shardrep's user or a privilege: fix `user` and the password \
                 (`password`, `password_file` or `password_env`) of [{}] in {file}, or the \
                 user's grants there, then start shardrep again ({restart_needed})",
                server.name(),
                server.section()
            ),
            (None | Some(CR_CONNECTION_ERROR | CR_CONN_HOST_ERROR), Some(server)) => format!(
                "start {}, then {online} retries; or fix its address ([{}] in {file}), then \
                 start shardrep again ({restart_needed})",
                server.name(),
                server.section()
            ),
            (_, _) => format!(
                "fix what the message names, then {online} retries (a change to {file} takes \
                 a restart of shardrep: {restart_needed})"
            ),
        }),
        RunError::Extract {
            code: Some(1236), ..
        } => Some(format!(
            "the master no longer has the binlog this service needs. Re-seed the replica \
             from the master, then {reset}"
        )),
        RunError::Extract {
            code: Some(code), ..
        } if is_access_denied(*code) => Some(format!(
            "the master refused shardrep's user or a privilege (REPLICATION SLAVE, BINLOG \
             MONITOR): fix `user` and the password of [source] in {file}, or the user's \
             grants on the master, then start shardrep again ({restart_needed})"
        )),
        RunError::QueueFull { .. } => Some(format!(
            "the queue's file system is full: free space on the file system of [queue] dir \
             ({}) or move the queue to a larger one, then {online} (nothing stored is lost: \
             the extractor resumes after the last stored transaction, and the applied part \
             of the queue is purged as the channels apply)",
            config.queue.dir.display()
        )),
        RunError::Extract { .. } => Some(match handback_position(rows, name, None, false) {
            Ok((seqno, position, _)) => format!(
                "the source cannot continue here. `shardrepctl handback` hands the replica \
                 back to native replication at the applied position ({}binlog position \
                 {position}); or {reset}",
                seqno.map_or(String::new(), |s| format!("seqno {s}, "))
            ),
            Err(_) => format!("the source cannot continue here. {reset}"),
        }),
        RunError::Apply(SchedulerError::Apply(e))
            if e.message
                .starts_with(crate::applier::ddl_replay::UNSAFE_REPLAY_PREFIX)
                || e.message
                    .starts_with(crate::applier::channel::NOT_RUN_AGAIN_PREFIX)
                || e.message
                    .starts_with(crate::applier::channel::LOST_TEMPORARY_TABLE_PREFIX)
                || e.message
                    .contains(crate::applier::channel::NOT_UNDER_SQL_METHOD_PREFIX)
                || e.message
                    .starts_with(crate::applier::channel::MAYBE_LOST_TEMPORARY_TABLE_PREFIX)
                || e.message
                    .starts_with(crate::applier::channel::SPLIT_GROUP_PREFIX) =>
        {
            None
        }
        RunError::Apply(SchedulerError::Apply(e))
            if crate::applier::retry::is_transient_report(e.code, &e.message) =>
        {
            Some(format!(
                "the replica did not answer within the retries; when it answers again, \
                 {online} (nothing is lost: the service resumes at the restart rows)"
            ))
        }
        RunError::Apply(SchedulerError::Apply(e)) if is_access_denied(e.code) => Some(format!(
            "the replica refused shardrep's user or a privilege: fix `user` and the password \
             of [replica] in {file}, or the user's grants on the replica, then start shardrep \
             again ({restart_needed})"
        )),
        RunError::Apply(SchedulerError::Apply(e)) if e.seqno.is_none() => Some(format!(
            "fix the replica (the error above names no transaction), then {online} retries"
        )),
        RunError::Apply(SchedulerError::Apply(e))
            if matches!(e.code, ER_DUP_ENTRY | ER_KEY_NOT_FOUND)
                && binlog_lacks_rows_above.is_some() =>
        {
            Some(format!(
                "this may be a transaction applied twice: at this run's start the replica's \
                 binlog lacked the GTIDs the restart rows record (RESET MASTER or a purge on \
                 the replica since; the start warned), and under binlog_gtids = \"master\" the \
                 binlog is the record of the commits after the rows (at most 64 per channel), \
                 so those could not be found. Compare the row the error names with the \
                 master's (`shardrepctl log list --seqno {seqno}` shows the transaction): if \
                 the replica already holds this transaction's changes, `shardrepctl online \
                 --skip-seqno {seqno}` (recorded, never applied later), and the same for the \
                 next such errors; else correct the replica, then {online} retries; or \
                 {reset}",
                seqno = e.seqno_number()
            ))
        }
        RunError::Apply(SchedulerError::Apply(e))
            if matches!(e.code, ER_DUP_ENTRY | ER_KEY_NOT_FOUND) =>
        {
            Some(format!(
                "this is not a transaction applied twice: the channel's restart row, read again \
                 after any lost connection, records seqno {seqno} as never committed here, so \
                 the replica's row differs from the master's (a write on the replica, or a copy \
                 that was not consistent). Compare the row the error names with the master's \
                 and correct the replica, then {online} retries; `shardrepctl online \
                 --skip-seqno {seqno}` if the replica already holds this transaction's changes \
                 (recorded, never applied later){}; or {reset}",
                handback_before(e.seqno_number(), rows, config),
                seqno = e.seqno_number()
            ))
        }
        RunError::Apply(SchedulerError::Apply(e))
            if e.code == ER_SLAVE_CONVERSION_FAILED
                || (e.code == crate::applier::channel::BINLOG_UNKNOWN_ERROR
                    && e.message
                        .contains(crate::applier::channel::BINLOG_UNKNOWN_ERROR_NOTE)) =>
        {
            Some(format!(
                "the replica's column has another type than the master's, and the replica's \
                 row applier converts only what `slave_type_conversions` allows (as for native \
                 replication). Either make the column's type the master's, or allow the \
                 conversion on the replica (`SET GLOBAL slave_type_conversions = \
                 'ALL_NON_LOSSY'`, or 'ALL_LOSSY' if values may be cut), then {online} retries; \
                 or {reset}"
            ))
        }
        RunError::Apply(SchedulerError::Apply(e)) if e.code == ER_GTID_STRICT_OUT_OF_ORDER => {
            Some(format!(
                "the replica's binlog already holds a later GTID in this transaction's domain \
                 (the message names it: a write made on the replica in that domain, or another \
                 source's), and gtid_strict_mode = ON refuses to binlog the master's GTID after \
                 it; native replication would stop here too. Find that GTID's transactions in \
                 the replica's binlog (mariadb-binlog). If they are errant, the usual cure of a \
                 GTID topology applies: rebuild the replica, or remove them from the binlog \
                 state (a RESET MASTER and SET GLOBAL gtid_binlog_state, with replicas of this \
                 replica re-pointed). If they must stay, let the master's GTID follow them: \
                 `SET GLOBAL gtid_strict_mode = 0` on the replica, then {online} (set it back \
                 once the master's sequence numbers in the domain pass that GTID's); or {reset}"
            ))
        }
        RunError::Apply(SchedulerError::Apply(e)) => Some(format!(
            "fix the replica, then {online} retries; `shardrepctl online --skip-seqno {}` if \
             that transaction must never be applied (recorded, never applied later){}; or \
             {reset}",
            e.seqno_number(),
            handback_before(e.seqno_number(), rows, config)
        )),
        RunError::Apply(SchedulerError::Rejected {
            seqno, shard, rule, ..
        }) => Some(match rule {
            Rule::UnknownShard => format!(
                "admit the shard with `{}`, then {online}; or `shardrepctl online \
                 --skip-seqno {seqno}` if this transaction must never be applied",
                shard_rows_command("insert", shard, name)
            ),
            _ => format!(
                "if the shard map is wrong about shard {shard} (its master, `shardrepctl shard \
                 list`), correct its row with `{}`, then {online}; or `shardrepctl online \
                 --skip-seqno {seqno}` if this transaction must never be applied here",
                shard_rows_command("update", shard, name)
            ),
        }),
        RunError::Apply(SchedulerError::Queue(_)) | RunError::QueueRead { .. } => Some(format!(
            "the queue cannot give this transaction back: restore the queue directory {} \
             from a copy taken while the service was stopped, then {online}; or re-seed the \
             replica from the master, then {reset}",
            config.queue.dir.display()
        )),
        RunError::Apply(SchedulerError::Routing { seqno, .. }) => Some(format!(
            "fix the replica (its foreign keys could not be read after seqno {seqno}), then \
             {online}: routing resumes with the keys read again"
        )),
        RunError::Apply(SchedulerError::RowMismatch { .. }) => None,
        RunError::Apply(SchedulerError::ChannelGone(_)) => Some(format!(
            "a channel's thread ended unexpectedly (a fault of shardrep: report it with the \
             log); {online} resumes at the restart rows"
        )),
        RunError::Queue(e) => queue_way_out(e, config, &reset),
        RunError::Restart(e) => match e {
            RestartError::Sql { .. } => Some(format!(
                "fix the replica (the error above), then {online} retries"
            )),
            RestartError::Malformed { .. } | RestartError::BadSeqno { .. } => Some(format!(
                "restore the row (its value as the channel wrote it), then {online}; or \
                 re-seed the replica from the master, then {reset}"
            )),
            RestartError::ChannelCountChange { .. }
            | RestartError::CommittedAboveSeqno { .. }
            | RestartError::LegacyRows { .. }
            | RestartError::ChannelNumbers { .. } => None,
        },
        RunError::NativeReplication(_) => None,
    }
}

/// The way back to native replication before failed seqno `failed`, when
/// the restart rows `rows` record nothing committed at or above it (always
/// so under `binlog_gtids = "master"`, whose commits are in seqno order):
/// `; or, …`; else empty.
fn handback_before(failed: u64, rows: &[RestartRow], config: &Config) -> String {
    if failed == 0 {
        return String::new();
    }
    // Under the master's GTIDs (or "auto", which may be them) the rows may
    // lag the replica's binlog: only a run up to the seqno makes them even.
    let rows_exact = matches!(
        config.replica.binlog_gtids,
        crate::config::BinlogGtids::Own | crate::config::BinlogGtids::Off
    );
    if rows_exact && handback_at_base(rows).is_some_and(|(base, _)| base.get() < failed) {
        return "; or `shardrepctl handback`, then START SLAVE, hands the replica back to \
                native replication before it (nothing after the restart rows' position is committed): native \
                replication then meets this error itself"
            .to_string();
    }
    let Ok(recovery) = crate::applier::restart::recover(rows) else {
        return String::new();
    };
    let Ok((base, committed)) = recovery.require_exact() else {
        return String::new();
    };
    let highest = committed.last().or(base).map(|s| s.get());
    if highest.is_some_and(|h| h >= failed) {
        return String::new();
    }
    format!(
        "; or, to hand the replica back to native replication before it, `shardrepctl online \
         --until-seqno {}` (the seqnos before it, then a clean stop), then `shardrepctl \
         handback` and START SLAVE: native replication then meets this error itself",
        failed - 1
    )
}

/// Login refused, or a privilege missing.
fn is_access_denied(code: u16) -> bool {
    matches!(
        code,
        ER_ACCESS_DENIED_ERROR
            | ER_ACCESS_DENIED_NO_PASSWORD_ERROR
            | ER_DBACCESS_DENIED_ERROR
            | ER_SPECIFIC_ACCESS_DENIED_ERROR
            | ER_TABLEACCESS_DENIED_ERROR
    )
}

/// The way out of a queue error.
fn queue_way_out(e: &QueueError, config: &Config, reset: &str) -> Option<String> {
    let dir = config.queue.dir.display();
    let file = config.origin.display();
    match e {
        // The message says: another process holds the lock.
        QueueError::Locked { .. } => None,
        QueueError::InvalidOptions { .. } => Some(format!(
            "fix [queue] in {file}, then start shardrep again (it reads its configuration at \
             start)"
        )),
        QueueError::Io { .. }
        | QueueError::SegmentIo { .. }
        | QueueError::Storage { .. }
        | QueueError::Layout { .. }
        | QueueError::Failed { .. } => Some(format!(
            "fix what the message names in the queue directory {dir} (free space, \
             permissions, the file system), then `shardrepctl online` retries"
        )),
        QueueError::Full { .. } => Some(format!(
            "the queue makes room as the channels apply; if they cannot, give it more room \
             (`max_size_bytes` of [queue] in {file}, then start shardrep again) and \
             `shardrepctl online`"
        )),
        QueueError::Corrupt { .. }
        | QueueError::SegmentCorrupt { .. }
        | QueueError::UnsupportedFormat { .. }
        | QueueError::OutOfOrder { .. }
        | QueueError::ProgressMismatch { .. }
        | QueueError::Purged { .. } => Some(format!(
            "the queue in {dir} cannot be read as it is: restore it from a copy taken while \
             the service was stopped, then `shardrepctl online`; or re-seed the replica from \
             the master, then {reset}"
        )),
        QueueError::Encode { .. } | QueueError::Closed { .. } | QueueError::ReadOnly { .. } => {
            Some(
                "a fault of shardrep (report it with the log); `shardrepctl online` retries"
                    .to_string(),
            )
        }
    }
}

/// The shell line that writes `shard` (mastered by `service`, not
/// critical) with `shardrepctl shard insert` or `update`: shard.map rows on
/// stdin, each argument in single quotes.
fn shard_rows_command(verb: &str, shard: &str, service: &str) -> String {
    format!(
        "printf '%s\\n' 'shard_id master critical' {} | shardrepctl shard {verb}",
        shell_quote(&format!("{shard} {service} false"))
    )
}

/// `text` as one shell word: in single quotes, each `'` written `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
