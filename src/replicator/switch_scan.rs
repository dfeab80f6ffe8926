//! The new master's binlog, read before a master switch is stored
//! (`shardrepctl source set`): the switch resumes there by GTID, so the
//! new master must continue the stream this replica applied, with
//! nothing of its own logged before the resume point.
//!
//! The `gtid_binlog_state` comparison of the switch
//! ([`super::source::missing_on`]) cannot see two faults, both found in a
//! trial of the switch:
//! - **a server of another topology** whose GTIDs overlap (same domain
//!   and server id, higher sequence numbers): its state "holds" what the
//!   replica applied, and a plain GTID dump would read it from an older
//!   point. Read here in GTID strict mode (`@slave_gtid_strict_mode = 1`),
//!   the master refuses a start GTID missing between later ones of the
//!   same domain and server with error 1236, as it does for a native
//!   replica in strict mode (MariaDB KB, "GTID", `gtid_strict_mode`;
//!   `sql_repl.cc`, `ER_GTID_START_FROM_BINLOG_HOLE`);
//! - **the new master's own writes logged before the old master's tail**
//!   was applied to it (the replay the refusal of a missing tail
//!   suggests, done after the new master took writes): a GTID resume
//!   after that tail skips them for good (one GTID per domain cannot say
//!   "after the tail, but with the writes before it"). Where this
//!   replica is beyond the point at which the new master stopped
//!   replicating (its `gtid_slave_pos`) in a domain, that stretch of the
//!   new master's binlog is read: every transaction of the domain in it
//!   must be one of the old master's stream this replica applied.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::config::SourceEndpoint;
use crate::extractor::reader::{ExtractStart, Extractor};
use crate::extractor::ExtractError;
use crate::position::{Gtid, GtidPos, Seqno};

/// At most this many foreign transactions are named in a refusal.
const NAMED_AT_MOST: usize = 10;

/// Why the new master cannot be resumed from by GTID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanRefusal {
    /// The master refused the dump at `resume` (strict mode: a hole, or
    /// a GTID its binlog does not have).
    #[error(
        "its binlog does not continue from this replica's position {resume}: the master \
         answered {code}: {message}. It is not a master of this replication topology (a \
         server whose GTIDs only overlap), or its binlog was reset or purged past that point"
    )]
    NotContinued {
        /// The GTID position the switch resumes after.
        resume: GtidPos,
        /// The master's error code (1236).
        code: u16,
        /// The master's message.
        message: String,
    },
    /// Transactions of the new master's binlog, logged before the resume
    /// point, that this replica never applied.
    #[error(
        "its binlog holds {count} transaction(s) logged before {resume}, the last this replica \
         applied of the old master, that this replica never applied: {named}. A resume after \
         {resume} would skip them (they were written on the new master before the old \
         master's tail was applied to it)"
    )]
    Skipped {
        /// The GTID position the switch resumes after.
        resume: GtidPos,
        /// How many were seen.
        count: usize,
        /// The first of them ([`NAMED_AT_MOST`]), comma-separated.
        named: String,
    },
    /// The binlog ended before a resume GTID that the master's
    /// `gtid_binlog_state` names.
    #[error(
        "its binlog, read from {from} (where it stopped replicating: its gtid_slave_pos), ends \
         without {lacking}, which this replica applied: its gtid_binlog_state names later \
         transactions of that server, but its binlog does not hold these (reset, purged or \
         rewritten)"
    )]
    Ended {
        /// Where the read started.
        from: GtidPos,
        /// The transactions not found, as ranges (`0-1-385..0-1-387`).
        lacking: String,
    },
    /// The read failed or did not get far enough within the limit.
    #[error("reading its binlog: {0}")]
    Read(String),
}

impl ScanRefusal {
    /// Whether only a re-seed of the replica from the new master gets
    /// past it (the new master's binlog can no longer continue this
    /// replica's stream).
    pub fn needs_reseed(&self) -> bool {
        matches!(
            self,
            ScanRefusal::Skipped { .. } | ScanRefusal::Ended { .. }
        )
    }
}

/// Where the scan starts: `resume`, except in the domains where this
/// replica is beyond the new master's `slave_pos` on the same server's
/// stream; there at `slave_pos`, with the resume GTID to reach.
fn scan_start(resume: &GtidPos, slave_pos: &GtidPos) -> (GtidPos, BTreeMap<u32, Gtid>) {
    let mut start = resume.clone();
    let mut to_reach = BTreeMap::new();
    for r in resume.iter() {
        if let Some(s) = slave_pos.get(r.domain_id) {
            if s.server_id == r.server_id && s.seq_no < r.seq_no {
                start.update(*s);
                to_reach.insert(r.domain_id, *r);
            }
        }
    }
    (start, to_reach)
}

/// What one transaction of the scan says, in a domain still to reach.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The resume GTID itself.
    Reached,
    /// One of the old master's stream before it (this replica has it).
    Applied,
    /// Anything else: this replica never applied it.
    Foreign,
}

fn classify(gtid: &Gtid, to_reach: &Gtid) -> Seen {
    if gtid == to_reach {
        Seen::Reached
    } else if gtid.server_id == to_reach.server_id && gtid.seq_no < to_reach.seq_no {
        Seen::Applied
    } else {
        Seen::Foreign
    }
}

/// Reads the new master (`endpoint`, a live source) as a switch would
/// resume there, after `resume` (empty: nothing to check), knowing its
/// `@@gtid_slave_pos` (`slave_pos`); one non-blocking dump in GTID strict
/// mode, at most `limit` long. It ends once every domain of `resume` sent
/// a transaction (the master found the start) or at the binlog's end.
///
/// # Errors
/// A [`ScanRefusal`]: the switch must not be stored.
pub async fn scan_new_master(
    endpoint: &SourceEndpoint,
    resume: &GtidPos,
    slave_pos: &GtidPos,
    limit: Duration,
) -> Result<(), ScanRefusal> {
    if resume.is_empty() {
        return Ok(());
    }
    let (start, mut to_reach) = scan_start(resume, slave_pos);
    let mut waiting: BTreeSet<u32> = resume
        .iter()
        .map(|g| g.domain_id)
        .filter(|d| !to_reach.contains_key(d))
        .collect();
    let mut extractor = Extractor::open_with(
        endpoint,
        ExtractStart::Gtid(start.clone()),
        Seqno::new(1),
        false,
        true,
    )
    .map_err(|e| ScanRefusal::Read(e.to_string()))?;
    let mut foreign: Vec<Gtid> = Vec::new();
    let mut count = 0usize;
    let deadline = tokio::time::Instant::now() + limit;
    while !(to_reach.is_empty() && waiting.is_empty()) {
        let next = tokio::time::timeout_at(deadline, extractor.next_transaction()).await;
        let txn = match next {
            Err(_) if to_reach.is_empty() => {
                // Only the wait for a first transaction per domain: the
                // master accepted the start and is still reading.
                tracing::info!(
                    limit_ms = limit.as_millis(),
                    "source set: the new master's binlog read up to the limit, no fault found"
                );
                return Ok(());
            }
            Err(_) => {
                return Err(ScanRefusal::Read(format!(
                    "did not reach {resume} from {start} within {} ms",
                    limit.as_millis()
                )))
            }
            Ok(Err(ExtractError::Master {
                code: Some(code),
                message,
                ..
            })) if code == 1236 => {
                return Err(ScanRefusal::NotContinued {
                    resume: resume.clone(),
                    code,
                    message,
                })
            }
            Ok(Err(e)) => return Err(ScanRefusal::Read(e.to_string())),
            Ok(Ok(None)) if to_reach.is_empty() => break,
            Ok(Ok(None)) => {
                let lacking = to_reach
                    .values()
                    .map(|goal| {
                        let after = start.get(goal.domain_id).map_or(0, |g| g.seq_no);
                        let first = Gtid::new(goal.domain_id, goal.server_id, after + 1);
                        if first == *goal {
                            first.to_string()
                        } else {
                            format!("{first}..{goal}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ScanRefusal::Ended {
                    from: start,
                    lacking,
                });
            }
            Ok(Ok(Some(txn))) => txn,
        };
        let Some(gtid) = txn.gtid else { continue };
        waiting.remove(&gtid.domain_id);
        if let Some(goal) = to_reach.get(&gtid.domain_id) {
            match classify(&gtid, goal) {
                Seen::Reached => {
                    to_reach.remove(&gtid.domain_id);
                }
                Seen::Applied => {}
                Seen::Foreign => {
                    count += 1;
                    if foreign.len() < NAMED_AT_MOST {
                        foreign.push(gtid);
                    }
                }
            }
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    let mut named = foreign
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if count > foreign.len() {
        named.push_str(&format!(" and {} more", count - foreign.len()));
    }
    Err(ScanRefusal::Skipped {
        resume: resume.clone(),
        count,
        named,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> GtidPos {
        text.parse().unwrap()
    }

    fn gtid(domain_id: u32, server_id: u32, seq_no: u64) -> Gtid {
        Gtid {
            domain_id,
            server_id,
            seq_no,
        }
    }

    #[test]
    fn scans_from_the_new_masters_slave_pos_only_where_the_replica_is_beyond_it() {
        // Domain 0: the new master stopped replicating at 0-2-5026, the
        // replica applied the tail to 0-2-5028. Domain 1: equal. Domain 2:
        // another server's stream. Domain 3: the new master is ahead.
        let resume = pos("0-2-5028,1-2-40,2-7-9,3-2-10");
        let slave = pos("0-2-5026,1-2-40,2-2-3,3-2-12");
        let (start, to_reach) = scan_start(&resume, &slave);
        assert_eq!(start, pos("0-2-5026,1-2-40,2-7-9,3-2-10"));
        assert_eq!(
            to_reach.into_iter().collect::<Vec<_>>(),
            [(0, gtid(0, 2, 5028))]
        );
        let (start, to_reach) = scan_start(&resume, &GtidPos::new());
        assert_eq!(start, resume);
        assert!(to_reach.is_empty());
    }

    #[test]
    fn before_the_resume_gtid_only_the_old_masters_earlier_ones_are_applied() {
        let goal = gtid(0, 2, 5028);
        assert_eq!(classify(&gtid(0, 2, 5028), &goal), Seen::Reached);
        assert_eq!(classify(&gtid(0, 2, 5027), &goal), Seen::Applied);
        // The new master's own write before the replayed tail.
        assert_eq!(classify(&gtid(0, 1, 5027), &goal), Seen::Foreign);
        assert_eq!(classify(&gtid(0, 2, 5029), &goal), Seen::Foreign);
    }
}
