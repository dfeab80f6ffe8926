//! Seqnos skipped at the DBA's request (`--skip-seqno`): checked against
//! the queue, recorded in the catalog before anything is dispatched, and
//! handed to the scheduler as ranges.

use super::RunError;
use crate::applier::skipped::{self, SkippedSeqno};
use crate::position::Seqno;
use crate::queue::TransactionQueue;

/// The seqnos of `ranges` (the DBA's `--skip-seqno`) with their event id
/// and shard when the queue holds them.
///
/// # Errors
/// [`RunError::Setup`] when the ranges name more than
/// [`skipped::MAX_SKIPS_PER_REQUEST`] seqnos or a seqno above the highest
/// stored one; queue read errors.
pub(super) fn requested_skips(
    queue: &TransactionQueue,
    ranges: &[std::ops::RangeInclusive<u64>],
) -> Result<Vec<SkippedSeqno>, RunError> {
    let count = ranges.iter().fold(0u64, |n, r| {
        n.saturating_add(r.end().saturating_sub(*r.start()).saturating_add(1))
    });
    if count > skipped::MAX_SKIPS_PER_REQUEST {
        return Err(RunError::setup(format!(
            "--skip-seqno names {count} seqnos; at most {} may be skipped at once",
            skipped::MAX_SKIPS_PER_REQUEST
        )));
    }
    // A seqno not extracted yet would silently skip a future transaction.
    let next = queue.next_seqno().get();
    if let Some(beyond) = ranges.iter().map(|r| *r.end()).filter(|&s| s >= next).max() {
        return Err(RunError::setup(future_skip_message(
            beyond,
            next.checked_sub(1),
        )));
    }
    let mut out = Vec::new();
    for seqno in ranges.iter().flat_map(|r| r.clone()) {
        let txn = queue.get(Seqno(seqno))?;
        out.push(SkippedSeqno {
            seqno: Seqno(seqno),
            event_id: txn
                .as_ref()
                .map(|t| t.end_position.to_string())
                .unwrap_or_default(),
            shard_id: txn.map(|t| t.shard).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The refusal of `--skip-seqno` naming `seqno`, above the highest stored
/// seqno `highest` (`None`: the queue never stored one).
pub(crate) fn future_skip_message(seqno: u64, highest: Option<u64>) -> String {
    format!(
        "seqno {seqno} is not in the queue yet (highest stored: {}); a skip names a \
         transaction shown by the pending error or `shardrepctl log list`",
        highest.map_or_else(|| "none".to_string(), |h| h.to_string())
    )
}

/// Sorted seqnos as inclusive ranges of consecutive seqnos.
pub(crate) fn skip_ranges(skips: &[SkippedSeqno]) -> Vec<std::ops::RangeInclusive<u64>> {
    let mut seqnos: Vec<u64> = skips.iter().map(|s| s.seqno.get()).collect();
    seqnos.sort_unstable();
    seqnos.dedup();
    let mut out: Vec<std::ops::RangeInclusive<u64>> = Vec::new();
    for n in seqnos {
        match out.last_mut() {
            Some(r) if *r.end() + 1 == n => *r = *r.start()..=n,
            _ => out.push(n..=n),
        }
    }
    out
}

/// The recorded skips as the scheduler's ranges, logged once when there
/// are any.
pub(super) fn recorded_skip_ranges(
    recorded: &[SkippedSeqno],
) -> Vec<std::ops::RangeInclusive<u64>> {
    let ranges = skip_ranges(recorded);
    if !ranges.is_empty() {
        tracing::info!(
            seqnos = %recorded
                .iter()
                .map(|s| s.seqno.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "seqnos recorded as skipped (by --skip-seqno, or discarded by a source switch as \
             the new master lacks them): never applied"
        );
    }
    ranges
}
