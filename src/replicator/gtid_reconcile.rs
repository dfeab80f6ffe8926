//! Under `replica.binlog_gtids = "master"` a channel writes its restart row
//! after its COMMITs, in a transaction of its own, every few commits
//! (module `applier::channel::in_order`): a crash in between leaves
//! committed transactions that no restart row records. The replica's binlog
//! records it: its GTID (the master's) is in `@@gtid_binlog_state`. Before
//! a run, [`reconcile`] reads the queue above what the rows record and
//! returns every seqno whose GTID the replica's binlog holds, which the run
//! then does not apply again.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::applier::channel::{binlog_has, binlog_state};
use crate::applier::restart::{self, Recovery, RestartRow};
use crate::position::{Seqno, SeqnoRanges};
use crate::queue::TransactionQueue;

use super::RunError;

/// How many transactions past the last one the binlog records the walk
/// goes on reading (a commit window is far smaller).
const WALK_PAST_LAST_FOUND: u64 = 100_000;

/// The GTIDs that the furthest restart row of `rows` records applied and
/// the replica's binlog state `state` lacks (under the master's GTIDs: the
/// binlog was reset or purged since, `RESET MASTER`, or did not record the
/// master's GTIDs then). Commits after the rows and before such a reset
/// cannot be found: a kill -9 before it may make a run apply some again.
fn binlog_behind(state: &str, rows: &[RestartRow]) -> Vec<String> {
    let Some(furthest) = rows
        .iter()
        .filter(|r| r.seqno.is_some())
        .max_by_key(|r| r.seqno)
    else {
        return Vec::new();
    };
    furthest
        .gtid
        .iter()
        .filter(|g| !binlog_has(state, g).unwrap_or(true))
        .map(ToString::to_string)
        .collect()
}

/// The GTIDs of the replica's binlog state `state` that a server other
/// than the master wrote in a domain of the furthest restart row's GTID
/// position, with a sequence number above the master's there: under
/// `gtid_strict_mode` the master's next GTIDs in that domain cannot be
/// binlogged after them (MariaDB KB, "gtid_strict_mode"). Each with the
/// master's GTID of the rows.
fn binlog_ahead(state: &str, rows: &[RestartRow]) -> Vec<(String, String)> {
    let Some(furthest) = rows
        .iter()
        .filter(|r| r.seqno.is_some())
        .max_by_key(|r| r.seqno)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for part in state.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Ok(g) = part.parse::<crate::position::Gtid>() else {
            continue;
        };
        if let Some(m) = furthest
            .gtid
            .iter()
            .find(|m| m.domain_id == g.domain_id && m.server_id != g.server_id)
        {
            if g.seq_no > m.seq_no {
                out.push((g.to_string(), m.to_string()));
            }
        }
    }
    out
}

/// What a start learnt from the replica's binlog ([`reconcile`]).
#[derive(Debug, Default)]
pub(super) struct Reconciled {
    /// The seqnos above what the rows record committed whose GTIDs the
    /// binlog holds: committed.
    pub committed: SeqnoRanges,
    /// The furthest restart row's seqno, when the binlog lacks the GTIDs
    /// it records (reset or purged since).
    pub lacks_rows_above: Option<u64>,
}

/// The seqnos above what `rows` record committed whose GTIDs the
/// replica's binlog holds (module doc): committed, to be handled as such
/// by this run ([`Recovery::with_committed`]). Nothing is written: until
/// the channels' rows pass them, every start finds them again.
///
/// # Errors
/// [`RunError::Setup`] when the replica or the queue cannot be read; the
/// rows' own errors ([`restart::recover`]).
pub(super) async fn reconcile(
    conn: &mut Conn,
    catalog: &str,
    rows: &[RestartRow],
    queue: &TransactionQueue,
    binlog: &super::gtid_topology::RunBinlog,
) -> Result<Reconciled, RunError> {
    let in_order = binlog.in_order;
    let recovery = restart::recover(rows)?;
    let Recovery::Exact { base, committed } = &recovery else {
        return Ok(Reconciled::default());
    };
    let state = binlog_state(conn).await.map_err(|e| {
        RunError::setup(format!(
            "cannot read the replica's @@gtid_binlog_state: {}",
            crate::mysql::ErrorText(&e)
        ))
    })?;
    let missing = if in_order {
        binlog_behind(&state, rows)
    } else {
        Vec::new()
    };
    let ahead = if in_order && binlog.strict {
        binlog_ahead(&state, rows)
    } else {
        Vec::new()
    };
    if !ahead.is_empty() {
        let list = ahead
            .iter()
            .map(|(errant, applied)| format!("{errant} (the master's applied: {applied})"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(RunError::setup(format!(
            "the replica's binlog holds GTIDs of another server ahead of the master's position \
             that shardrep applied, in the same domain: {list} (written under binlog_gtids = \
             \"own\", or by a write on the replica). Under gtid_strict_mode = ON the replica \
             refuses to binlog the master's next transactions in that domain after them (error \
             1950), as native replication would. Nothing was applied. Either let them through: \
             SET GLOBAL gtid_strict_mode = 0 on the replica, then start shardrep (set it back \
             once the master's sequence numbers in the domain pass those); or, if they are \
             errant, remove them from the replica's binlog state the way a GTID topology does \
             (RESET MASTER and SET GLOBAL gtid_binlog_state, replicas of this replica \
             re-pointed), then start shardrep"
        )));
    }
    if !missing.is_empty() {
        tracing::warn!(
            missing = %missing.join(","),
            binlog_state = %state,
            "the replica's binlog does not hold GTIDs the restart rows record applied (RESET \
             MASTER or PURGE BINARY LOGS on the replica since, or its binlog did not record the \
             master's GTIDs): under binlog_gtids = \"master\" the binlog records the commits \
             after the last restart rows, so if shardrep was killed before the reset, \
             transactions may be applied twice (a 1062 or 1032 then); after a clean offline \
             nothing is lost. Compare with `shardrepctl check` once caught up"
        );
    }
    let lacks_rows_above = (!missing.is_empty())
        .then(|| rows.iter().filter_map(|r| r.seqno).max().map(|s| s.get()))
        .flatten();
    let done = |committed: SeqnoRanges| Reconciled {
        committed,
        lacks_rows_above,
    };
    if state.is_empty() {
        return Ok(done(SeqnoRanges::new()));
    }
    // Rolled back after their GTIDs were binlogged (a non-transactional
    // change ran): not committed, whatever the binlog says.
    let rolled_back: Vec<Option<i64>> = conn
        .query(crate::catalog::restart_select_rolled_back(catalog))
        .await
        .map_err(|e| {
            RunError::setup(format!(
                "cannot read the restart rows' rolled-back seqnos: {}",
                crate::mysql::ErrorText(&e)
            ))
        })?;
    let rolled_back: Vec<u64> = rolled_back
        .into_iter()
        .flatten()
        .filter_map(|s| u64::try_from(s).ok())
        .collect();
    let start = recovery.start_seqno();
    let mut reader = match queue.reader_from(start) {
        Ok(r) => r,
        // Purged: the run's own checks say so.
        Err(_) => return Ok(done(SeqnoRanges::new())),
    };
    let mut found = SeqnoRanges::new();
    let mut last_found: Option<Seqno> = None;
    let mut seqno = start;
    loop {
        if last_found.map_or(seqno.get() - start.get(), |l| seqno.get() - l.get())
            > WALK_PAST_LAST_FOUND
        {
            break;
        }
        let txn = match reader.try_next() {
            Ok(Some(t)) => t,
            // A record that cannot be read: the run reads it again and
            // stops there, naming it.
            Ok(None) | Err(_) => break,
        };
        seqno = txn.seqno;
        let done = base.is_some_and(|b| txn.seqno <= b) || committed.contains(txn.seqno);
        // A fragment that does not end its transaction commits with its
        // last one.
        if !done && !txn.continues() && !rolled_back.contains(&txn.seqno.get()) {
            if let Some(gtid) = txn.gtid {
                if binlog_has(&state, &gtid).map_err(RunError::setup)? {
                    found.insert(txn.seqno);
                    last_found = Some(txn.seqno);
                }
            }
        }
        seqno = seqno.next();
    }
    if !found.is_empty() {
        tracing::info!(
            seqnos = %found,
            "committed on the replica after the restart rows were last written (the replica's \
             binlog holds their master GTIDs): not applied again"
        );
    }
    Ok(done(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::ChannelId;

    /// Two channels' rows at seqnos 40 and 41, GTIDs 0-1-140/141 and 5-1-7.
    fn two_rows() -> [RestartRow; 2] {
        let row = |channel: u16, seqno: u64, gtid: &str| RestartRow {
            seqno: Some(Seqno(seqno)),
            gtid: gtid.parse().unwrap(),
            ..RestartRow::empty(ChannelId::recorded(channel))
        };
        [row(0, 40, "0-1-140,5-1-7"), row(1, 41, "0-1-141,5-1-7")]
    }

    #[test]
    fn a_binlog_reset_after_the_rows_is_seen() {
        let rows = two_rows();
        assert!(binlog_behind("0-1-150,5-1-9,0-3-2", &rows).is_empty());
        assert_eq!(binlog_behind("0-1-20", &rows), ["0-1-141", "5-1-7"]);
        assert_eq!(binlog_behind("", &rows), ["0-1-141", "5-1-7"]);
    }

    #[test]
    fn another_servers_gtid_ahead_in_a_domain_is_seen() {
        let rows = two_rows();
        // The master's own GTIDs beyond the rows, another server's behind,
        // a domain the rows do not know: nothing.
        assert!(binlog_ahead("0-1-150,0-3-100,5-1-9,7-3-900", &rows).is_empty());
        assert_eq!(
            binlog_ahead("0-1-141,0-3-2372,5-1-7,5-4-8", &rows),
            [
                ("0-3-2372".to_string(), "0-1-141".to_string()),
                ("5-4-8".to_string(), "5-1-7".to_string())
            ]
        );
        assert!(binlog_ahead("0-3-2372", &[]).is_empty());
    }
}
