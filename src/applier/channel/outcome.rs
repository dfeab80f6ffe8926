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

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::Channel;
use crate::applier::error::ApplyError;
use crate::applier::restart::{self, RestartRow};
use crate::position::Seqno;

/// How long a killed session may take to end before the channel gives up
/// (a definite error: its transaction could still commit).
const LOST_SESSION_END: Duration = Duration::from_secs(60);

/// The replica session a channel last used: its connection id and the
/// server's start time as that connection saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SessionId {
    /// `CONNECTION_ID()` (the handshake's connection id).
    pub(super) id: u32,
    /// The server's start, Unix seconds (`UNIX_TIMESTAMP()` minus status
    /// `Uptime`); `None` when it could not be read.
    pub(super) server_started: Option<i64>,
}

impl SessionId {
    /// The session of `conn`: one query, at connect.
    pub(super) async fn of(conn: &mut Conn) -> SessionId {
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
    fn same_server(&self, other: &SessionId) -> bool {
        matches!(
            (self.server_started, other.server_started),
            (Some(a), Some(b)) if (a - b).abs() <= 2
        )
    }
}

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
    /// (module doc), from the channel's current connection.
    ///
    /// # Errors
    /// The processlist cannot be read (a connection error: the caller
    /// retries), or the session is still there [`LOST_SESSION_END`] after
    /// it was killed.
    pub(super) async fn end_lost_session(
        &mut self,
        lost: SessionId,
    ) -> Result<(), mysql_async::Error> {
        if !self.session.same_server(&lost) || self.session.id == lost.id {
            return Ok(());
        }
        let deadline = Instant::now() + LOST_SESSION_END;
        let mut killed = false;
        loop {
            let there: Option<u32> = self
                .conn
                .exec_first(
                    "SELECT ID FROM information_schema.PROCESSLIST \
                     WHERE ID = ? AND USER = SUBSTRING_INDEX(USER(), '@', 1)",
                    (lost.id,),
                )
                .await?;
            if there.is_none() {
                if killed {
                    tracing::info!(
                        channel = self.settings.channel.get(),
                        session = lost.id,
                        "the lost session has ended on the replica"
                    );
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(mysql_async::Error::Other(
                    format!(
                        "session {} of channel {} is still on the replica {} s after KILL \
                         CONNECTION: its transaction could still commit, so the channel cannot \
                         tell whether its block ran",
                        lost.id,
                        self.settings.channel,
                        LOST_SESSION_END.as_secs()
                    )
                    .into(),
                ));
            }
            if !killed {
                tracing::info!(
                    channel = self.settings.channel.get(),
                    session = lost.id,
                    "the replica still runs the session whose connection was lost; killing it \
                     before reading the restart row"
                );
                // An id that just ended answers 1094 (unknown thread):
                // the next look finds it gone.
                let _ = self
                    .conn
                    .query_drop(format!("KILL CONNECTION {}", lost.id))
                    .await;
                killed = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
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
