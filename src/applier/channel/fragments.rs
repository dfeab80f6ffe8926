//! A large transaction stored as fragments ([`crate::event::Fragment`]):
//! applied as a stream inside one replica transaction. The scheduler sends
//! the fragments, consecutive seqnos, to one channel with nothing else in
//! between; the channel opens the transaction at the first, applies each
//! fragment as it arrives and lets its memory go (the scheduler's
//! in-flight budget is released per fragment, not at the commit), and
//! commits with the restart row, which records every seqno of the
//! fragments, after the last. So what the channel holds of the
//! transaction is one fragment, whatever its size; the restart rows never
//! record a position inside it, and a crash or a stop before its commit
//! leaves the replica without any of it (applied again whole).
//!
//! Errors: a transient one (a lock wait, a deadlock, a lost connection)
//! rolls the transaction back and runs it again from its first fragment,
//! reading the fragments already applied again from the queue
//! ([`FragmentSource`]); a lost COMMIT reply is answered by the restart
//! row, as for any block (module `outcome`). Definite errors stop the
//! channel naming the fragment's seqno.
//!
//! A STOP while the transaction is open rolls it back: the scheduler sends
//! every channel the position before the transaction then.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use mysql_async::prelude::Queryable;

use super::outcome::{records, seqno_span};
use super::Channel;
use crate::applier::error::ApplyError;
use crate::applier::retry::{classify, outcome_unknown, Backoff, ErrorClass};
use crate::applier::work::{Marker, Work};
use crate::event::Transaction;
use crate::position::{Epoch, Seqno};

/// Reads a stored transaction (a fragment) again by seqno: a retried large
/// transaction applies its first fragments again from the queue, since
/// the channel keeps only the one in hand. `Ok(None)`: not stored (purged
/// or never written).
#[derive(Clone)]
pub struct FragmentSource(
    pub Arc<dyn Fn(Seqno) -> Result<Option<Transaction>, String> + Send + Sync>,
);

impl std::fmt::Debug for FragmentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FragmentSource")
    }
}

/// How a large transaction's apply ended.
pub(super) enum ChainEnd {
    /// Committed with the last fragment; its marker.
    Committed(Arc<Marker>),
    /// A STOP came before the last fragment: the transaction was rolled
    /// back; the STOP's marker.
    Stopped(Arc<Marker>),
    /// The input closed before the last fragment (the scheduler ended):
    /// rolled back.
    Closed,
}

/// The fragment in hand and what came before it.
struct Stream {
    /// The first fragment's seqno.
    first: Seqno,
    /// The newest fragment received.
    current: Arc<Transaction>,
    /// Its epoch.
    epoch: Epoch,
    /// Its marker (the restart row's position once it is the last).
    marker: Arc<Marker>,
    /// Its share of the in-flight budget, until applied.
    bytes: u64,
    /// The COMMIT was sent in this attempt.
    committing: bool,
}

impl Channel {
    /// Applies the large transaction whose first fragment is `first`,
    /// taking its next fragments from `input` (module doc).
    ///
    /// # Errors
    /// A definite error, or a transient one past the retry limit, naming
    /// the fragment that failed and the transaction's seqnos.
    pub(super) async fn apply_fragments(
        &mut self,
        first: Arc<Transaction>,
        epoch: Epoch,
        bytes: u64,
        marker: Arc<Marker>,
        input: &Receiver<Work>,
    ) -> Result<ChainEnd, ApplyError> {
        let started = std::time::Instant::now();
        let mut stream = Stream {
            first: first.seqno,
            current: first,
            epoch,
            marker,
            bytes,
            committing: false,
        };
        tracing::info!(
            channel = self.settings.channel.get(),
            seqno = stream.first.get(),
            "a large transaction, stored as fragments: applying it as a stream in one replica \
             transaction"
        );
        self.refresh_tables();
        let mut backoff = Backoff::new(Duration::from_millis(50), self.settings.retry_max_backoff);
        let mut replay = false;
        loop {
            stream.committing = false;
            let attempt = self.stream_attempt(&mut stream, input, replay).await;
            let (error, cause) = match attempt {
                Ok(ChainEnd::Committed(marker)) => {
                    self.fragments_committed(&stream, started);
                    return Ok(ChainEnd::Committed(marker));
                }
                Ok(end) => {
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    self.release(&mut stream);
                    return Ok(end);
                }
                Err(e) => e,
            };
            let lost = cause.as_ref().is_some_and(outcome_unknown);
            let transient = cause
                .as_ref()
                .is_some_and(|c| classify(c) == ErrorClass::Transient);
            if lost {
                if let Err(e) = self.reconnect().await {
                    self.release(&mut stream);
                    return Err(self.fragments_error(
                        &stream,
                        error,
                        &format!(
                            "the connection was lost and the reconnect failed ({})",
                            crate::mysql::error_text(&e)
                        ),
                    ));
                }
                if stream.committing {
                    // The COMMIT's reply was lost: the restart row tells.
                    let span = seqno_span(stream.first, stream.current.seqno);
                    match self.read_own_row().await {
                        Ok(stored) => {
                            let committed = records(&stored, self.fragment_seqnos(&stream));
                            if !committed && self.in_order() && self.non_transactional_ran.is_none()
                            {
                                let last = stream.current.clone();
                                let in_binlog = self.binlog_records(std::iter::once(&*last)).await;
                                if let Err((read_error, _)) = in_binlog {
                                    // Applying it again might apply it
                                    // twice: stop, naming it.
                                    self.release(&mut stream);
                                    return Err(self.fragments_error(
                                        &stream,
                                        read_error,
                                        "the COMMIT's reply was lost and the replica's binlog \
                                         state could not be read",
                                    ));
                                }
                                if let Ok(true) = in_binlog {
                                    let row = self
                                        .next_row(&stream.marker, self.fragment_seqnos(&stream));
                                    if let Err((e, _)) = self
                                        .row_after_commit(
                                            &row,
                                            last.commit_timestamp,
                                            Some((&last, stream.epoch)),
                                        )
                                        .await
                                    {
                                        self.release(&mut stream);
                                        return Err(e);
                                    }
                                    self.progress.count_unknown_outcome(true);
                                    self.row_written(row);
                                    self.fragments_committed(&stream, started);
                                    return Ok(ChainEnd::Committed(stream.marker.clone()));
                                }
                            }
                            tracing::info!(
                                channel = self.settings.channel.get(),
                                "outcome of {span} unknown after {}: {} (the restart row read \
                                 again says so)",
                                error.message,
                                if committed {
                                    "committed"
                                } else {
                                    "not committed, applying again"
                                }
                            );
                            self.progress.count_unknown_outcome(committed);
                            if committed {
                                self.row_written(stored);
                                self.fragments_committed(&stream, started);
                                return Ok(ChainEnd::Committed(stream.marker.clone()));
                            }
                        }
                        Err((read_error, _)) => {
                            self.release(&mut stream);
                            return Err(self.fragments_error(
                                &stream,
                                read_error,
                                "the COMMIT's reply was lost and the restart row could not be \
                                 read",
                            ));
                        }
                    }
                }
            } else if let Some(ran) = self.non_transactional_ran.take() {
                let _ = self.conn.query_drop("ROLLBACK").await;
                self.release(&mut stream);
                return Err(self.not_run_again(error, &ran).await);
            } else {
                let _ = self.conn.query_drop("ROLLBACK").await;
            }
            if !(lost || transient) || backoff.attempts() >= self.settings.retry_max_attempts {
                self.release(&mut stream);
                return Err(self.fragments_error(&stream, error, "rolled back"));
            }
            let delay = backoff.next_delay();
            tracing::warn!(
                channel = self.settings.channel.get(),
                first_seqno = stream.first.get(),
                seqno = error.seqno_number(),
                code = error.code,
                attempt = backoff.attempts(),
                delay_ms = delay.as_millis() as u64,
                error = %error.message,
                "transient error in a large transaction: rolled back; applying it again from \
                 its first fragment (read again from the queue)"
            );
            self.progress.count_retry(error.code);
            tokio::time::sleep(delay).await;
            replay = true;
        }
    }

    /// One attempt: START TRANSACTION, the fragments before the one in
    /// hand again from the queue when `replay`, the one in hand, then each
    /// next one from `input`, the restart row and COMMIT.
    async fn stream_attempt(
        &mut self,
        stream: &mut Stream,
        input: &Receiver<Work>,
        replay: bool,
    ) -> Result<ChainEnd, (ApplyError, Option<mysql_async::Error>)> {
        self.reset_binlog(false);
        self.non_transactional_ran = None;
        let current = stream.current.clone();
        self.set_origin(&current, stream.epoch).await?;
        self.exec_text("START TRANSACTION", Some((&current, stream.epoch)))
            .await?;
        if replay {
            let mut seqno = stream.first;
            while seqno < current.seqno {
                let fragment = self.stored_fragment(seqno).map_err(|message| {
                    let mut error = self.plain_error(&current, String::new(), 0, message);
                    error.seqno = Some(seqno);
                    (error, None)
                })?;
                self.apply_txn(&fragment, stream.epoch).await?;
                seqno = seqno.next();
            }
        }
        loop {
            let fragment = stream.current.clone();
            let applied = self.apply_txn(&fragment, stream.epoch).await;
            self.release(stream);
            applied?;
            if !fragment.continues() {
                break;
            }
            let expected = fragment.seqno.next();
            loop {
                match input.recv() {
                    Ok(Work::Apply {
                        txn,
                        epoch,
                        bytes,
                        marker,
                        ..
                    }) if txn.seqno == expected && txn.is_continuation() => {
                        stream.current = txn;
                        stream.epoch = epoch;
                        stream.bytes = bytes;
                        stream.marker = marker;
                        break;
                    }
                    // Positions before the transaction: its commit records
                    // a newer one.
                    Ok(Work::Sync(_)) => {}
                    Ok(Work::Stop(marker)) => return Ok(ChainEnd::Stopped(marker)),
                    Ok(Work::Apply { txn, bytes, .. }) => {
                        self.progress.release_memory(bytes);
                        return Err((
                            self.plain_error(
                                &txn,
                                String::new(),
                                0,
                                format!(
                                    "seqno {} came while the large transaction of seqnos {}.. \
                                     waited for its fragment {expected} (the scheduler's \
                                     order is broken: a bug)",
                                    txn.seqno, stream.first
                                ),
                            ),
                            None,
                        ));
                    }
                    Err(_) => return Ok(ChainEnd::Closed),
                }
            }
        }
        let last = stream.current.clone();
        let row = self.next_row(&stream.marker, self.fragment_seqnos(stream));
        if self.in_order() {
            // The first fragment ran after a barrier: its turn has come.
            // The restart row follows the COMMIT (module `in_order`).
            self.flush_binlog(Some((&last, stream.epoch))).await?;
            stream.committing = true;
            self.exec_text("COMMIT", Some((&last, stream.epoch)))
                .await?;
            self.row_after_commit(&row, last.commit_timestamp, Some((&last, stream.epoch)))
                .await?;
            self.row_written(row);
            return Ok(ChainEnd::Committed(stream.marker.clone()));
        }
        self.update_row(&row, last.commit_timestamp, Some((&last, stream.epoch)))
            .await?;
        stream.committing = true;
        self.exec_text("COMMIT", Some((&last, stream.epoch)))
            .await?;
        self.row_written(row);
        Ok(ChainEnd::Committed(stream.marker.clone()))
    }

    /// Fragment `seqno` of the transaction in hand, read again from the
    /// queue; the error says why it cannot be.
    fn stored_fragment(&self, seqno: Seqno) -> Result<Transaction, String> {
        let Some(source) = &self.settings.fragments else {
            return Err(
                "this channel cannot read the queue to apply a large transaction again".into(),
            );
        };
        match (source.0)(seqno) {
            Ok(Some(txn)) if txn.fragment.is_some() => Ok(txn),
            Ok(Some(_)) => Err(format!(
                "seqno {seqno} in the queue is not a fragment of the large transaction"
            )),
            Ok(None) => Err(format!("fragment seqno {seqno} is no longer in the queue")),
            Err(message) => Err(format!(
                "reading fragment seqno {seqno} from the queue: {message}"
            )),
        }
    }

    /// The seqnos of the transaction's fragments so far.
    fn fragment_seqnos(&self, stream: &Stream) -> impl Iterator<Item = Seqno> {
        (stream.first.get()..=stream.current.seqno.get()).map(Seqno)
    }

    /// Gives the fragment in hand's share of the in-flight budget back
    /// (once).
    fn release(&self, stream: &mut Stream) {
        self.progress
            .release_memory(std::mem::take(&mut stream.bytes));
    }

    /// Bookkeeping after the commit.
    fn fragments_committed(&self, stream: &Stream, started: std::time::Instant) {
        self.progress.committed_block(self.fragment_seqnos(stream));
        let last = [(stream.current.clone(), stream.epoch)];
        let refs: Vec<&(Arc<Transaction>, Epoch)> = last.iter().collect();
        self.progress
            .record_applied(self.settings.channel.index(), &refs);
        tracing::info!(
            channel = self.settings.channel.get(),
            seqnos = %seqno_span(stream.first, stream.current.seqno),
            fragments = stream.current.seqno.get() - stream.first.get() + 1,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "large transaction committed"
        );
    }

    /// `error` with the transaction's seqnos and what was done.
    fn fragments_error(&self, stream: &Stream, mut error: ApplyError, what: &str) -> ApplyError {
        error.message = format!(
            "{} (in the large transaction of {}, stored as fragments; {what}: 'shardrepctl \
             online' applies it again whole from the queue)",
            error.message,
            seqno_span(stream.first, stream.current.seqno)
        );
        error
    }
}
