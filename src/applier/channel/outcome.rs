//! Unknown outcomes (shared/DESIGN.md §4): when the connection is lost
//! after a block was sent (a COMMIT whose reply never came, a compound
//! block that ends with its COMMIT, a server that went away), the block
//! may have committed or not. The restart row commits in the block's
//! transaction, so it tells: the block ran if and only if the row records
//! its seqnos.
//!
//! Before the row is read, the lost session must be over: a session the
//! server still runs (the network dropped, not the server) could commit
//! the block after the read. [`Channel::end_lost_session`] asks the
//! server for it (`information_schema.PROCESSLIST`, the same user), kills
//! it if it is there (`KILL CONNECTION`, which any user may do to its own
//! sessions) and waits until it is gone: then its transaction has either
//! committed or rolled back, for good. A server that restarted in between
//! (its start time differs) has no such session, and its connection ids
//! start again, so nothing is killed then.

use super::Channel;
use crate::applier::error::ApplyError;
use crate::applier::restart::{self, RestartRow};
use crate::applier::session::{self, SessionId};
use crate::position::Seqno;

/// Whether `row` records every seqno of `seqnos` as committed: at or
/// below its low-water mark, or in its committed set.
pub(super) fn records(row: &RestartRow, mut seqnos: impl Iterator<Item = Seqno>) -> bool {
    let low_water = row.low_water.seqno();
    seqnos.all(|s| low_water.is_some_and(|l| s <= l) || row.committed_above.contains(s))
}

/// `first..last` of a block's seqnos as the log and errors name them.
pub(super) fn seqno_span(first: Seqno, last: Seqno) -> String {
    if first == last {
        format!("seqno {first}")
    } else {
        format!("seqnos {first}..{last}")
    }
}

impl Channel {
    /// Ends session `lost` of this channel if the server still runs it
    /// (module doc), from the channel's current connection
    /// ([`session::end_session`]).
    ///
    /// # Errors
    /// Those of [`session::end_session`].
    pub(super) async fn end_lost_session(
        &mut self,
        lost: SessionId,
    ) -> Result<(), mysql_async::Error> {
        let label = format!("channel {}", self.settings.channel);
        session::end_session(&mut self.conn, self.session, lost, &label).await
    }

    /// This channel's restart row as the replica has it now.
    ///
    /// # Errors
    /// The read failed (the driver's error, for the retry rules), or the
    /// table holds no row of this channel.
    pub(super) async fn read_own_row(
        &mut self,
    ) -> Result<RestartRow, (ApplyError, Option<mysql_async::Error>)> {
        let channel = self.settings.channel;
        let rows = match restart::read(&mut self.conn, &self.settings.catalog).await {
            Ok(rows) => rows,
            Err(restart::RestartError::Sql { cause, .. }) => {
                let sql = crate::catalog::restart_select(&self.settings.catalog);
                return Err((self.error_at(None, &sql, &cause), Some(cause)));
            }
            Err(e) => return Err((ApplyError::on_channel(channel, 0, e.to_string()), None)),
        };
        rows.into_iter()
            .find(|r| r.channel == channel)
            .ok_or_else(|| {
                (
                    ApplyError::on_channel(
                        channel,
                        0,
                        format!(
                            "the restart row of channel {channel} is missing from {}.{}",
                            self.settings.catalog,
                            crate::catalog::RESTART_TABLE
                        ),
                    ),
                    None,
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::applier::restart::LowWater;
    use crate::position::ChannelId;

    fn row(low_water: LowWater, above: &str) -> RestartRow {
        RestartRow {
            low_water,
            committed_above: above.parse().unwrap(),
            ..RestartRow::empty(ChannelId::FIRST)
        }
    }

    #[test]
    fn a_block_is_recorded_when_every_seqno_is_low_water_or_listed() {
        let block = || [Seqno(7), Seqno(9), Seqno(10)].into_iter();
        assert!(records(&row(LowWater::At(Seqno(5)), "7,9-10"), block()));
        assert!(records(&row(LowWater::At(Seqno(8)), "9-10"), block()));
        assert!(records(&row(LowWater::At(Seqno(10)), ""), block()));
        // The row before the block: none of it, or only part.
        assert!(!records(&row(LowWater::At(Seqno(5)), "6"), block()));
        assert!(!records(&row(LowWater::At(Seqno(5)), "7,9"), block()));
        assert!(!records(&row(LowWater::BeforeFirst, ""), block()));
        assert!(!records(&row(LowWater::Unrecorded, "7"), block()));
    }

    #[test]
    fn spans_name_one_seqno_or_a_range() {
        assert_eq!(seqno_span(Seqno(3), Seqno(3)), "seqno 3");
        assert_eq!(seqno_span(Seqno(3), Seqno(9)), "seqnos 3..9");
    }
}
