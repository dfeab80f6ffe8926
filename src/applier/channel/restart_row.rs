//! Writing a channel's restart row: the row to write ([`Channel::next_row`],
//! with the record of exactly which seqnos are committed), after a block
//! (inside its transaction), SYNC/STOP markers and the DDL mark (in
//! transactions of their own, not binlogged).
//!
//! Every row written records `low_water`, the running low-water mark read
//! just before (every seqno up to it is done), and `committed_above`, the
//! seqnos this channel committed above it, those of the block being
//! written included (shared/research/writeset.md §5, "Choice 2"): so a
//! restart applies exactly the seqnos no row records, whatever channel
//! committed what ([`crate::applier::restart::recover`]).

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Value as Param};

use super::{Attempt, Channel};
use crate::applier::error::{elide, ApplyError};
use crate::applier::restart::{self, LowWater, RestartRow};
use crate::applier::retry::{classify, outcome_unknown, Backoff, ErrorClass};
use crate::applier::work::Marker;
use crate::event::Transaction;
use crate::position::{Epoch, Seqno, SeqnoRanges};

/// The error text of a restart-row UPDATE that matched no row: the row is
/// missing, or already past `row` (it never moves backwards).
pub(super) fn missing_row_message(row: &RestartRow) -> String {
    format!(
        "the restart row of channel {} is missing or ahead of seqno {}: \
         it never moves backwards",
        row.channel,
        row.seqno.map_or(-1, |s| s.get() as i64)
    )
}

impl Channel {
    /// The restart row that records `marker` with `seqnos` (the block's;
    /// none for a marker) committed: `low_water` the running mark now,
    /// `committed_above` what this channel committed above it, `seqnos`
    /// included. Its position is `marker`'s, unless the row is already
    /// beyond it (a gap of an earlier run applied here after a restart):
    /// then the row keeps its seqno and position (it never moves
    /// backwards) and only its committed record changes.
    pub(super) fn next_row(
        &self,
        marker: &Marker,
        seqnos: impl Iterator<Item = Seqno>,
    ) -> RestartRow {
        let low_water = LowWater::of(self.progress.low_water());
        let mut above = self.committed_set.clone();
        for s in seqnos {
            above.insert(s);
        }
        if let Some(l) = low_water.seqno() {
            above.prune_below(l.next());
        }
        let mut row = if self.committed.is_some_and(|c| c > marker.seqno) {
            self.row.clone()
        } else {
            marker.row(self.settings.channel)
        };
        row.low_water = low_water;
        row.committed_above = above;
        row
    }

    /// `row` is committed: it is the channel's row now, its low-water
    /// mark durable.
    pub(super) fn row_written(&mut self, row: RestartRow) {
        if let Some(l) = row.low_water.seqno() {
            self.progress.set_durable_low_water(l);
        }
        self.row_kept(row);
    }

    /// `row` records what the channel committed, but is not written yet
    /// (module `in_order`): the channel's row in memory, its low-water
    /// mark not durable.
    pub(super) fn row_kept(&mut self, mut row: RestartRow) {
        self.committed = self.committed.max(row.seqno);
        self.committed_set = std::mem::take(&mut row.committed_above);
        self.row = row;
    }

    /// Runs the restart-row UPDATE for `row` (inside the caller's
    /// transaction); exactly one row must match.
    pub(super) async fn update_row(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, Epoch)>,
    ) -> Attempt {
        // Row events still buffered (the `binlog` method) go first.
        self.flush_binlog(at).await?;
        let sql = crate::catalog::restart_update(&self.settings.catalog);
        let result = self
            .conn
            .exec_iter(sql.as_str(), restart::update_params(row, extract_time))
            .await;
        match result {
            Ok(r) => {
                let affected = r.affected_rows();
                drop(r);
                if affected != 1 {
                    return Err((
                        ApplyError {
                            channel: self.settings.channel,
                            seqno: row.seqno,
                            event_id: row.event_id.clone(),
                            shard: row.shard_id.clone(),
                            sql: elide(&sql),
                            code: 0,
                            message: missing_row_message(row),
                        },
                        None,
                    ));
                }
                Ok(())
            }
            Err(e) => Err((self.error_at(at, &sql, &e), Some(e))),
        }
    }

    /// Turns binary logging of the session off (`on = false`) or back on,
    /// when the channel binlogs at all (`replica.sql_log_bin`).
    ///
    /// Writes of the catalog alone (SYNC/STOP markers, DDL marks) are not
    /// binlogged: they carry no data, and binlogging them would feed a
    /// loop in a multi-master pair (each service reads the other's marker
    /// writes, drops them, and, idle again, writes markers of its own).
    pub(super) async fn catalog_only_logging(&mut self, on: bool) -> Attempt {
        if !self.settings.sql_log_bin {
            return Ok(());
        }
        let sql = if on {
            "SET SESSION sql_log_bin = 1"
        } else {
            "SET SESSION sql_log_bin = 0"
        };
        self.exec_text(sql, None).await
    }

    /// Marks seqno `txn` as started in the restart row's `ddl_seqno`
    /// (autocommit, not binlogged).
    pub(super) async fn mark_started(&mut self, txn: &Transaction, epoch: Epoch) -> Attempt {
        let sql = crate::catalog::restart_mark_ddl(&self.settings.catalog);
        let params = Params::Positional(vec![
            Param::Int(txn.seqno.get() as i64),
            Param::UInt(u64::from(self.settings.channel.get())),
        ]);
        self.catalog_only_logging(false).await?;
        let marked = self
            .conn
            .exec_drop(sql.as_str(), params)
            .await
            .map_err(|e| (self.error_at(Some((txn, epoch)), &sql, &e), Some(e)));
        self.catalog_only_logging(true).await?;
        marked
    }

    /// Writes `row` (with `extract_time`, seconds since the epoch) in a
    /// transaction of its own, not binlogged (it carries no data); rolls
    /// back on an error. `at` names the transaction for errors.
    pub(super) async fn write_row_alone(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, Epoch)>,
    ) -> Attempt {
        self.catalog_only_logging(false).await?;
        let written = async {
            self.exec_text("START TRANSACTION", at).await?;
            self.update_row(row, extract_time, at).await?;
            self.exec_text("COMMIT", at).await
        }
        .await;
        if written.is_err() {
            let _ = self.conn.query_drop("ROLLBACK").await;
        }
        self.catalog_only_logging(true).await?;
        written
    }

    /// Records a SYNC marker when the channel has nothing newer; returns
    /// whether it did.
    pub(super) async fn record_marker(&mut self, marker: &Marker) -> Result<bool, ApplyError> {
        if self.committed.is_some_and(|c| c >= marker.seqno) {
            return Ok(false);
        }
        self.write_marker_row(marker, false).await?;
        Ok(true)
    }

    /// Records the STOP marker of a clean stop: waits (outside any
    /// transaction) until every channel has committed everything up to
    /// it (the low-water mark is there), then writes `seqno = low_water =
    /// marker` and nothing above, so that every row of a clean stop is at
    /// one seqno with empty sets. Returns whether it wrote; it writes
    /// nothing when the row is that already, or beyond the marker (a row
    /// of an earlier run ahead of where this run stops: the rows then
    /// differ and the stop is not clean).
    ///
    /// # Errors
    /// Another channel's error ends the wait with that error; the write's.
    pub(super) async fn record_stop(&mut self, marker: &Marker) -> Result<bool, ApplyError> {
        let reached = self
            .progress
            .wait_until(|p| p.low_water().is_some_and(|l| l >= marker.seqno));
        if !reached {
            return Err(self
                .progress
                .error()
                .expect("wait_until ends early only on an error"));
        }
        if self.committed.is_some_and(|c| c > marker.seqno) {
            return Ok(false);
        }
        if self.committed == Some(marker.seqno)
            && self.row.low_water == LowWater::At(marker.seqno)
            && self.committed_set.is_empty()
        {
            return Ok(false);
        }
        self.write_marker_row(marker, true).await?;
        Ok(true)
    }

    /// Writes the row of `marker` in a transaction of its own, retrying
    /// transient errors; `stop`: the row of a clean stop (low-water mark
    /// at the marker, nothing above), else [`Channel::next_row`]. After a
    /// lost connection the row is read again first: the write took effect
    /// if and only if the row is the one sent (module `outcome`).
    async fn write_marker_row(&mut self, marker: &Marker, stop: bool) -> Result<(), ApplyError> {
        let mut backoff = Backoff::new(Duration::from_millis(50), self.settings.retry_max_backoff);
        // The row sent in the attempt whose outcome is unknown.
        let mut unknown: Option<RestartRow> = None;
        loop {
            let attempt = match &unknown {
                Some(sent) => match self.read_own_row().await {
                    Ok(stored) if stored == *sent => {
                        tracing::info!(
                            channel = self.settings.channel.get(),
                            seqno = marker.seqno.get(),
                            "outcome of the restart row's write for a marker unknown after a \
                             lost connection: committed (the restart row read again says so)"
                        );
                        unknown = None;
                        Ok(stored)
                    }
                    Ok(_) => {
                        unknown = None;
                        continue;
                    }
                    Err(e) => Err(e),
                },
                None => {
                    let row = if stop {
                        RestartRow {
                            low_water: LowWater::At(marker.seqno),
                            committed_above: SeqnoRanges::new(),
                            ..marker.row(self.settings.channel)
                        }
                    } else {
                        self.next_row(marker, std::iter::empty())
                    };
                    let written = self.write_row_alone(&row, marker.extract_time, None).await;
                    match written {
                        Err((error, Some(cause))) if outcome_unknown(&cause) => {
                            unknown = Some(row);
                            Err((error, Some(cause)))
                        }
                        other => other.map(|()| row),
                    }
                }
            };
            match attempt {
                Ok(row) => {
                    self.row_written(row);
                    return Ok(());
                }
                Err((error, Some(cause)))
                    if classify(&cause) == ErrorClass::Transient
                        && backoff.attempts() < self.settings.retry_max_attempts =>
                {
                    let lost = outcome_unknown(&cause);
                    if !lost {
                        let _ = self.conn.query_drop("ROLLBACK").await;
                    }
                    tracing::debug!(
                        channel = self.settings.channel.get(),
                        error = %error,
                        "transient error writing a marker's restart row; retrying"
                    );
                    tokio::time::sleep(backoff.next_delay()).await;
                    if lost {
                        let _ = self.reconnect().await;
                    }
                }
                Err((error, _)) => {
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    return Err(error);
                }
            }
        }
    }
}
