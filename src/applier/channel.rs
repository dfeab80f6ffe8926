//! One apply channel: an OS thread (`shardrep-apply-NN`) with its own
//! replica connection, applying the transactions the scheduler sends it in
//! blocks, each block committed together with the channel's restart row.
//!
//! Connection: mysql_async over TCP (`prefer_socket` off, so the configured
//! address is the one used, even on loopback), `CLIENT_FOUND_ROWS` (an
//! UPDATE reports matched rows, so a missing row is detected), on a
//! current-thread tokio runtime owned by the thread. Session: `SET NAMES
//! binary` (bytes pass unchanged), `time_zone = '+00:00'`, `sql_mode =
//! 'NO_AUTO_VALUE_ON_ZERO'` (as the server's own row applier),
//! `sql_log_bin` as configured.
//!
//! Origin (`replica.preserve_origin`): before each block the session's
//! `server_id` and `gtid_domain_id` are set to those of the block's source
//! transactions (`SET SESSION server_id = S, gtid_domain_id = D`, as
//! `mariadb-binlog` output does; the domain cannot change inside a
//! transaction, so this is done between blocks), so the replica binlogs
//! what is applied with its true origin and a service reading the
//! replica's binlog can tell it from local writes. A block then holds
//! transactions of one origin only: block commit closes the block where
//! the origin changes (the next transaction opens the next block).
//! Transactions without a GTID keep the replica's own domain.
//!
//! Rows of another service's restart table
//! ([`crate::shard::is_catalog_table`]) that arrive inside a source
//! transaction are not applied: they belong to that service's replica.
//!
//! A block is `START TRANSACTION`, the statements of up to
//! `block_commit_txns` transactions (fewer when the input runs empty), the
//! restart-row UPDATE, `COMMIT`. A transaction that must run alone
//! (critical shard, DDL) is committed in a block of its own; DDL commits
//! implicitly, so its restart row is written right after it.
//!
//! Errors: transient ones ([`super::retry`]) roll the block back and retry
//! it with capped backoff; anything else stops the channel with an
//! [`ApplyError`] naming seqno, event id, channel, shard, SQL and the
//! server's code and message.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use crate::applier::error::{at_block, connect_error, elide, ApplyError};
use crate::applier::progress::Progress;
use crate::applier::restart::{self, RestartRow};
use crate::applier::retry::{classify, outcome_unknown, Backoff, ErrorClass};
use crate::applier::session::{self, Origin};
use crate::applier::sql::SqlBuilder;
use crate::applier::table::TableCache;
use crate::applier::work::{Marker, Work};
use crate::event::{Change, Transaction};
use crate::position::{ChannelId, Epoch, Seqno, SeqnoRanges};
use crate::shard::statement::leading_verb;
use crate::shard::temp_tables::TempTables;

mod batch;
mod binlog;
mod fragments;
mod in_order;
mod non_transactional;
mod outcome;
mod plain;
mod restart_row;
mod xa;

use crate::applier::session::SessionId;
use batch::rows_only;
pub use batch::BATCH_BYTES;
pub use binlog::{
    ER_UNKNOWN_ERROR as BINLOG_UNKNOWN_ERROR, UNKNOWN_ERROR_NOTE as BINLOG_UNKNOWN_ERROR_NOTE,
};
pub use fragments::FragmentSource;
pub use in_order::{binlog_has, binlog_state};
pub use non_transactional::{NOT_RUN_AGAIN_PREFIX, SPLIT_GROUP_PREFIX};
use outcome::{records, seqno_span};
pub use plain::{
    LOST_TEMPORARY_TABLE_PREFIX, MAYBE_LOST_TEMPORARY_TABLE_PREFIX, NOT_UNDER_SQL_METHOD_PREFIX,
};

/// One attempt at a statement or block: the error carries the driver's
/// error when there is one (for [`classify`]).
type Attempt = Result<(), (ApplyError, Option<mysql_async::Error>)>;

/// Settings of one channel.
#[derive(Clone, Debug)]
pub struct ChannelSettings {
    /// The channel.
    pub channel: ChannelId,
    /// Replica connection options (see [`crate::mysql::connection_opts`]).
    pub opts: Opts,
    /// Catalog schema of the restart table.
    pub catalog: String,
    /// Binlog the applied changes on the replica.
    pub sql_log_bin: bool,
    /// Binlog them with the source transaction's server id and GTID
    /// domain (module doc).
    pub preserve_origin: bool,
    /// `replica.binlog_gtids = "master"` (module [`in_order`]): one
    /// transaction per replica transaction, under its master's GTID, the
    /// commits in seqno order, the restart row written after them (every
    /// few commits, without binary logging).
    pub in_order: bool,
    /// Transactions per block (1: block commit off).
    pub block_commit_txns: usize,
    /// How long a block that is not full waits for more input once the
    /// input runs dry, counted from its first transaction (zero: it
    /// commits at once); `[apply] block_commit_interval_ms`.
    pub block_commit_interval: Duration,
    /// Retries of a transient error before it becomes definite (0: never).
    pub retry_max_attempts: u32,
    /// Longest wait between retries.
    pub retry_max_backoff: Duration,
    /// Send batched blocks as compound statements checked on the replica
    /// (`[apply] compound_blocks`, see [`crate::config::ApplyConfig`]).
    pub compound_blocks: bool,
    /// How row changes reach the replica (`[apply] method`).
    pub method: crate::config::ApplyMethod,
    /// Reads a large transaction's fragments again from the queue, for
    /// its retries (module `fragments`); `None`: such a retry stops the
    /// channel instead.
    pub fragments: Option<FragmentSource>,
}

/// Where a channel starts: its restart row as read at the start of the
/// run, and, when the rows record only each channel's last seqno
/// ([`restart::Recovery::Legacy`]), the seqno through which it skips what
/// it is sent (committed by it before).
#[derive(Clone, Debug)]
pub struct ChannelStart {
    /// The channel's restart row.
    pub row: RestartRow,
    /// Legacy rows only: skip the transactions sent at or below this seqno.
    pub legacy_skip_through: Option<Seqno>,
}

/// Records an error for a channel thread that panics, so that waits on
/// the other channels' progress (barriers, a STOP's wait for the low-water
/// mark) end instead of waiting for it for ever.
struct PanicGuard<'a> {
    channel: ChannelId,
    progress: &'a Progress,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.progress.set_error(ApplyError::on_channel(
                self.channel,
                0,
                "the channel's thread panicked (see the log)".into(),
            ));
        }
    }
}

/// Starts channel `settings.channel` on its own thread, from `start`; it
/// ends after a STOP marker (Ok) or a definite error (recorded in
/// `progress` too, once the channel runs; boxed: it is large, and rare).
///
/// # Errors
/// The thread could not be spawned.
pub fn spawn(
    settings: ChannelSettings,
    start: ChannelStart,
    input: Receiver<Work>,
    progress: Arc<Progress>,
) -> std::io::Result<std::thread::JoinHandle<Result<(), Box<ApplyError>>>> {
    std::thread::Builder::new()
        .name(format!("shardrep-apply-{:02}", settings.channel.get()))
        .spawn(move || {
            let _guard = PanicGuard {
                channel: settings.channel,
                progress: &progress,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| {
                    Box::new(ApplyError::on_channel(
                        settings.channel,
                        0,
                        format!("cannot start the channel's runtime: {e}"),
                    ))
                })?;
            let channel = settings.channel.index();
            let result = runtime.block_on(run(settings, start, input, progress.clone()));
            if let Err(e) = &result {
                // The service logs the run's error once (OFFLINE:ERROR).
                tracing::debug!(channel, error = %e, "channel stopped on an error");
                progress.set_error(e.clone());
            }
            result.map_err(Box::new)
        })
}

struct Channel {
    settings: ChannelSettings,
    conn: Conn,
    /// The session `conn` is ([`outcome`]).
    session: SessionId,
    builder: SqlBuilder,
    /// The replica's tables as this channel last saw them.
    tables: TableCache,
    /// The seqno of this channel's restart row: the highest it committed
    /// (transaction or marker). A transaction below it (a gap of an
    /// earlier run, sent here after a restart) leaves the row's seqno and
    /// position as they are ([`Channel::next_row`]).
    committed: Option<Seqno>,
    /// The restart row last written (or read at start): its position is
    /// kept when a block below it commits.
    row: RestartRow,
    /// The seqnos this channel committed above the last low-water mark it
    /// wrote (pruned at each write): its rows' `committed_above`.
    committed_set: SeqnoRanges,
    /// Legacy rows only ([`ChannelStart`]): skip what is sent at or below.
    legacy_skip_through: Option<Seqno>,
    /// Shared progress (DDL epoch, retry count).
    progress: Arc<Progress>,
    /// The DDL epoch the cached shapes belong to.
    seen_ddl_epoch: u64,
    /// A DDL transaction that may already have run (marked before a crash
    /// or a retried attempt): its "already exists" errors mean done.
    replay_ddl: Option<Seqno>,
    /// The origin the session is set to (`preserve_origin`); `None`: the
    /// server's defaults.
    session_origin: Option<Origin>,
    /// Temporary tables of master sessions on this connection (statement
    /// and mixed formats): statements of a session holding one run with
    /// its `pseudo_thread_id` ([`crate::shard::temp_tables`]).
    temp_tables: TempTables,
    /// A non-transactional table a statement of the current attempt was
    /// sent to ([`non_transactional`]).
    non_transactional_ran: Option<non_transactional::Ran>,
    /// Row events waiting for their BINLOG statement (`binlog` method).
    binlog: binlog::BinlogBuffer,
    /// The FORMAT_DESCRIPTION this session was given (`binlog` method).
    binlog_format: Option<Vec<u8>>,
    /// The replica's `max_allowed_packet`, bytes, read at connect.
    max_packet: usize,
    /// One BINLOG statement per transaction (set to name the transaction
    /// of a failed statement that held several).
    binlog_per_txn: bool,
    /// Under the master's GTIDs (module [`in_order`]): restart rows not
    /// written yet (the replica's binlog records those commits).
    rows: in_order::RowWrites,
}

async fn run(
    settings: ChannelSettings,
    start: ChannelStart,
    input: Receiver<Work>,
    progress: Arc<Progress>,
) -> Result<(), ApplyError> {
    let mut channel = Channel::connect(settings, start, progress.clone()).await?;
    let result = work(&mut channel, &input, &progress).await;
    // Say goodbye (COM_QUIT), so that the replica does not log an aborted
    // connection; an open transaction (after an error) is rolled back by
    // the server either way.
    let _ = tokio::time::timeout(Duration::from_secs(5), channel.conn.disconnect()).await;
    result
}

/// The channel's loop: applies blocks and markers until STOP, the end of
/// the input or an error. After each item it reports to
/// [`Progress::set_committed`] the seqno through which everything sent to
/// it is committed (the scheduler sends in seqno order): not its row's
/// seqno, which a gap of an earlier run applied here after a restart
/// leaves above what is still queued.
async fn work(
    channel: &mut Channel,
    input: &Receiver<Work>,
    progress: &Arc<Progress>,
) -> Result<(), ApplyError> {
    let index = channel.settings.channel.index();
    let mut pending: Option<Work> = None;
    loop {
        let first = match pending.take() {
            Some(w) => w,
            None => match input.try_recv() {
                Ok(w) => w,
                Err(_) => {
                    // Idle (or closed): the restart row of what committed
                    // last is written now (module `in_order`).
                    channel.write_pending_row().await?;
                    match input.recv() {
                        Ok(w) => w,
                        Err(_) => return Ok(()), // scheduler gone: stop quietly
                    }
                }
            },
        };
        match first {
            Work::Stop(marker) => {
                channel.write_pending_row().await?;
                if channel.record_stop(&marker).await? {
                    progress.set_marker(index, marker.clone());
                }
                // Everything sent to this channel is committed (the
                // channel's progress, not its row's seqno: see `work`).
                progress.set_committed(index, marker.seqno);
                return Ok(());
            }
            Work::Sync(marker) => {
                channel.write_pending_row().await?;
                let through = marker.seqno;
                if channel.record_marker(&marker).await? {
                    progress.set_marker(index, marker);
                }
                progress.set_committed(index, through);
            }
            Work::Apply {
                txn,
                epoch,
                bytes,
                marker,
                ..
            } if txn.continues() => {
                match channel
                    .apply_fragments(txn, epoch, bytes, marker, input)
                    .await?
                {
                    fragments::ChainEnd::Committed(marker) => {
                        let through = marker.seqno;
                        progress.set_marker(index, marker);
                        progress.set_committed(index, through);
                    }
                    fragments::ChainEnd::Stopped(marker) => pending = Some(Work::Stop(marker)),
                    fragments::ChainEnd::Closed => return Ok(()),
                }
            }
            Work::Apply {
                txn,
                epoch,
                alone,
                bytes,
                marker,
            } => {
                let mut block = vec![(txn, epoch)];
                let mut block_bytes = bytes;
                let mut last_marker = marker;
                // A SYNC that arrives while the block fills is recorded
                // after it (everything it covers on this channel came
                // before it), so an idle source does not cut blocks short.
                let mut deferred_sync: Option<Arc<Marker>> = None;
                let origin = Origin::of(&block[0].0);
                let preserve_origin = channel.settings.preserve_origin;
                let same_origin = |txn: &Transaction| !preserve_origin || Origin::of(txn) == origin;
                if !alone
                    && !is_ddl(&block[0].0)
                    && !channel.touches_non_transactional(&block[0].0).await
                {
                    let deadline =
                        std::time::Instant::now() + channel.settings.block_commit_interval;
                    while block.len() < channel.settings.block_commit_txns.max(1) {
                        let next = match input.try_recv() {
                            Err(TryRecvError::Empty) => {
                                let left =
                                    deadline.saturating_duration_since(std::time::Instant::now());
                                if left.is_zero() {
                                    break;
                                }
                                input.recv_timeout(left).map_err(|_| TryRecvError::Empty)
                            }
                            other => other,
                        };
                        match next {
                            Ok(Work::Apply {
                                txn,
                                epoch,
                                alone,
                                bytes,
                                marker,
                            }) if !alone && !is_ddl(&txn) && same_origin(&txn) => {
                                // A transaction that changes a table a
                                // rollback does not undo opens a block of
                                // its own.
                                if channel.touches_non_transactional(&txn).await {
                                    pending = Some(Work::Apply {
                                        txn,
                                        epoch,
                                        alone,
                                        bytes,
                                        marker,
                                    });
                                    break;
                                }
                                block.push((txn, epoch));
                                block_bytes += bytes;
                                last_marker = marker;
                            }
                            Ok(Work::Sync(marker)) => deferred_sync = Some(marker),
                            Ok(other) => {
                                pending = Some(other);
                                break;
                            }
                            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
                        }
                    }
                }
                let before = channel.committed;
                let mut through = last_marker.seqno;
                channel.apply_block(&block, &last_marker).await?;
                drop(block);
                progress.release_memory(block_bytes);
                if channel.committed != before {
                    progress.set_marker(index, last_marker);
                }
                if let Some(marker) = deferred_sync {
                    through = through.max(marker.seqno);
                    if channel.record_marker(&marker).await? {
                        progress.set_marker(index, marker);
                    }
                }
                progress.set_committed(index, through);
            }
        }
    }
}

/// Whether the transaction holds a statement that commits implicitly
/// ([`crate::shard::statement::Verb::commits_implicitly`]): it runs alone,
/// marked started.
fn is_ddl(txn: &Transaction) -> bool {
    txn.changes.iter().any(|c| match c {
        Change::Statement(s) => leading_verb(&s.sql).commits_implicitly(),
        _ => false,
    })
}

/// A new session on the replica, set up as a channel's
/// ([`session::setup_statement`]).
async fn open_session(settings: &ChannelSettings) -> Result<(Conn, SessionId), mysql_async::Error> {
    let mut conn = Conn::new(settings.opts.clone()).await?;
    let session = SessionId::of(&mut conn).await;
    conn.query_drop(session::setup_statement(
        settings.sql_log_bin,
        settings.method,
    ))
    .await?;
    Ok((conn, session))
}

/// Records `session` as channel `settings.channel`'s in its restart row
/// (not binlogged), so that the next run ends it if a `kill -9` leaves it
/// running ([`crate::catalog::restart_add_session`]).
async fn record_session(
    conn: &mut Conn,
    settings: &ChannelSettings,
    session: SessionId,
) -> Result<(), mysql_async::Error> {
    conn.query_drop("SET SESSION sql_log_bin = 0").await?;
    conn.exec_drop(
        crate::catalog::restart_record_session(&settings.catalog),
        (session.id, session.server_started, settings.channel.get()),
    )
    .await?;
    conn.query_drop(format!(
        "SET SESSION sql_log_bin = {}",
        u8::from(settings.sql_log_bin)
    ))
    .await
}

/// What a channel reads when it starts: its session, a DDL transaction
/// marked started and not recorded ([`restart::pending_ddl`]), and whether
/// the server runs compound statements (MariaDB 10.1.1 and later).
///
/// # Errors
/// The driver's error (for the retry rules), with the error to report
/// when it is not retried.
async fn first_session(
    settings: &ChannelSettings,
) -> Result<(Conn, SessionId, Option<Seqno>, bool), (mysql_async::Error, ApplyError)> {
    let channel = settings.channel;
    let (mut conn, session) = open_session(settings).await.map_err(|e| {
        let report = connect_error(channel, &e);
        (e, report)
    })?;
    let replay_ddl = match restart::pending_ddl(&mut conn, &settings.catalog, channel).await {
        Ok(ddl) => ddl,
        Err(restart::RestartError::Sql { catalog, cause }) => {
            let code = match &cause {
                mysql_async::Error::Server(s) => s.code,
                _ => 0,
            };
            let text = restart::RestartError::Sql {
                catalog,
                cause: mysql_async::Error::Other(crate::mysql::error_text(&cause).into()),
            }
            .to_string();
            return Err((cause, ApplyError::on_channel(channel, code, text)));
        }
        Err(other) => {
            let text = other.to_string();
            return Err((
                mysql_async::Error::Other(text.clone().into()),
                ApplyError::on_channel(channel, 0, text),
            ));
        }
    };
    record_session(&mut conn, settings, session)
        .await
        .map_err(|e| {
            let report = connect_error(channel, &e);
            (e, report)
        })?;
    let version: Option<String> = conn.query_first("SELECT VERSION()").await.map_err(|e| {
        let report = connect_error(channel, &e);
        (e, report)
    })?;
    let version = version.unwrap_or_default();
    let compound = version.contains("MariaDB") && conn.server_version() >= (10, 1, 1);
    if settings.compound_blocks && !compound {
        tracing::warn!(
            channel = settings.channel.get(),
            version = %version,
            "[apply] compound_blocks needs MariaDB 10.1.1 or later: this channel sends \
             multi-statement blocks instead"
        );
    }
    Ok((conn, session, replay_ddl, compound))
}

impl Channel {
    /// The channel's first session, retrying a lost or refused connection
    /// as a block's retries do (a channel whose session is killed while it
    /// starts goes on).
    async fn connect(
        mut settings: ChannelSettings,
        start: ChannelStart,
        progress: Arc<Progress>,
    ) -> Result<Channel, ApplyError> {
        let mut backoff = Backoff::new(Duration::from_millis(50), settings.retry_max_backoff);
        let (conn, session, replay_ddl, compound) = loop {
            match first_session(&settings).await {
                Ok(first) => break first,
                Err((e, _))
                    if classify(&e) == ErrorClass::Transient
                        && backoff.attempts() < settings.retry_max_attempts =>
                {
                    tracing::warn!(
                        channel = settings.channel.get(),
                        error = %crate::mysql::ErrorText(&e),
                        "cannot start the channel's session yet; retrying"
                    );
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err((_, report)) => return Err(report),
            }
        };
        settings.compound_blocks &= compound;
        if let Some(seqno) = replay_ddl {
            tracing::warn!(
                channel = settings.channel.get(),
                seqno = seqno.get(),
                "a DDL transaction started before the last stop and its restart row was not \
                 committed; replaying it if a second run is harmless (see ddl_replay), treating \
                 'already exists/does not exist' as done"
            );
        }
        let seen_ddl_epoch = progress.ddl_epoch();
        let ChannelStart {
            mut row,
            legacy_skip_through,
        } = start;
        let committed_set = std::mem::take(&mut row.committed_above);
        let mut conn = conn;
        let max_packet: Option<u64> = conn
            .query_first("SELECT @@max_allowed_packet")
            .await
            .map_err(|e| connect_error(settings.channel, &e))?;
        Ok(Channel {
            settings,
            conn,
            session,
            builder: SqlBuilder::new(),
            tables: TableCache::default(),
            committed: row.seqno,
            row,
            committed_set,
            legacy_skip_through,
            progress,
            seen_ddl_epoch,
            replay_ddl,
            session_origin: None,
            temp_tables: TempTables::default(),
            non_transactional_ran: None,
            binlog: binlog::BinlogBuffer::default(),
            binlog_format: None,
            max_packet: max_packet.unwrap_or(1 << 24) as usize,
            binlog_per_txn: false,
            rows: in_order::RowWrites::default(),
        })
    }

    async fn setup_session(&mut self) -> Result<(), ApplyError> {
        let setup = session::setup_statement(self.settings.sql_log_bin, self.settings.method);
        self.session_origin = None;
        self.reset_binlog(true);
        self.conn
            .query_drop(setup.as_str())
            .await
            .map_err(|e| self.error_at(None, &setup, &e))
    }

    /// With `preserve_origin`, sets the session's server id and GTID
    /// domain to `txn`'s (outside any transaction), unless already set.
    async fn set_origin(&mut self, txn: &Transaction, epoch: Epoch) -> Attempt {
        if self.settings.in_order {
            return self.set_gtid(txn, epoch).await;
        }
        if !self.settings.preserve_origin {
            return Ok(());
        }
        let origin = Origin::of(txn);
        if self.session_origin == Some(origin) {
            return Ok(());
        }
        self.session_origin = None;
        self.exec_text(&origin.set_statement(), Some((txn, epoch)))
            .await?;
        self.session_origin = Some(origin);
        Ok(())
    }

    /// A new session in place of the channel's (which is closed), set up
    /// as at connect; the old one, if the replica still runs it, is ended
    /// before this returns ([`Channel::end_lost_session`]), so that
    /// nothing sent on it can commit later.
    async fn reconnect(&mut self) -> Result<(), mysql_async::Error> {
        let (conn, session) = open_session(&self.settings).await?;
        self.session_origin = None;
        self.reset_binlog(true);
        let old = std::mem::replace(&mut self.conn, conn);
        let old_session = std::mem::replace(&mut self.session, session);
        let _ = tokio::time::timeout(Duration::from_secs(5), old.disconnect()).await;
        if self.temp_tables.count() > 0 {
            tracing::warn!(
                channel = self.settings.channel.get(),
                sessions = %self.temp_tables.describe().join("; "),
                "reconnected: the temporary tables of these master sessions are lost"
            );
            self.temp_tables.lose_open();
        }
        self.end_lost_session(old_session).await?;
        record_session(&mut self.conn, &self.settings, self.session).await
    }

    /// The error of statement `sql` failing with `e`; `at` names its
    /// transaction (`None`: the error names none).
    fn error_at(
        &self,
        at: Option<(&Transaction, Epoch)>,
        sql: &str,
        e: &mysql_async::Error,
    ) -> ApplyError {
        let (code, message) = match e {
            mysql_async::Error::Server(s) => (s.code, s.message.clone()),
            other => (0, crate::mysql::error_text(other)),
        };
        match at {
            Some((txn, _)) => ApplyError::at(self.settings.channel, txn, elide(sql), code, message),
            None => ApplyError {
                sql: elide(sql),
                ..ApplyError::on_channel(self.settings.channel, code, message)
            },
        }
    }

    /// Applies a block with retries of transient errors; its restart row
    /// records it ([`Channel::next_row`]). With legacy rows, what the
    /// channel committed before (at or below its row) is only recorded as
    /// committed.
    async fn apply_block(
        &mut self,
        block: &[(Arc<Transaction>, Epoch)],
        marker: &Marker,
    ) -> Result<(), ApplyError> {
        let todo: Vec<&(Arc<Transaction>, Epoch)> = match self.legacy_skip_through {
            None => block.iter().collect(),
            Some(through) => {
                let (done, todo): (Vec<_>, Vec<_>) =
                    block.iter().partition(|(t, _)| t.seqno <= through);
                for (t, _) in &done {
                    self.committed_set.insert(t.seqno);
                }
                self.progress
                    .committed_block(done.iter().map(|(t, _)| t.seqno));
                todo
            }
        };
        if todo.is_empty() {
            return Ok(());
        }
        self.refresh_tables();
        let ddl = todo.len() == 1 && is_ddl(&todo[0].0);
        let seqnos = || todo.iter().map(|(t, _)| t.seqno);
        let mut backoff = Backoff::new(Duration::from_millis(50), self.settings.retry_max_backoff);
        let mut reconnect_error: Option<String> = None;
        // The error after which the last attempt's outcome is unknown
        // (module `outcome`): the restart row is read before anything else.
        let mut unknown: Option<ApplyError> = None;
        loop {
            let mut attempt = None;
            if let Some(after) = &unknown {
                match self.read_own_row().await {
                    Ok(stored) => {
                        let mut committed = records(&stored, seqnos());
                        let mut row = stored;
                        let mut failed = None;
                        if !committed && self.in_order() && self.non_transactional_ran.is_none() {
                            // The COMMIT and the row after it are two
                            // transactions: the replica's binlog tells
                            // (not after a non-transactional change, which
                            // MariaDB binlogs even when it rolls back). A
                            // failed read or write is retried as the row's
                            // read is: the outcome stays unknown.
                            match self.binlog_records(todo.iter().map(|(t, _)| &**t)).await {
                                Ok(true) => {
                                    let (last, epoch) = todo.last().expect("non-empty block");
                                    row = self.next_row(marker, seqnos());
                                    let written = async {
                                        self.catalog_only_logging(false).await?;
                                        self.update_row(
                                            &row,
                                            last.commit_timestamp,
                                            Some((last, *epoch)),
                                        )
                                        .await
                                    }
                                    .await;
                                    match written {
                                        Ok(()) => committed = true,
                                        Err(e) => failed = Some(e),
                                    }
                                }
                                Ok(false) => {}
                                Err(e) => failed = Some(e),
                            }
                        }
                        if let Some(e) = failed {
                            attempt = Some(Err(e));
                        } else {
                            self.log_outcome(&todo, after, committed);
                            if committed {
                                attempt = Some(Ok(row));
                            } else if let Some(ran) = self.non_transactional_ran.take() {
                                return Err(self.not_run_again(after.clone(), &ran).await);
                            }
                            unknown = None;
                        }
                    }
                    Err(e) => attempt = Some(Err(e)),
                }
            }
            let attempt = match attempt {
                Some(attempt) => attempt,
                None => {
                    let row = self.next_row(marker, seqnos());
                    self.try_block(&todo, ddl, &row).await.map(|()| row)
                }
            };
            let attempt = attempt
                .map_err(|(e, cause)| (at_block(e, &todo, reconnect_error.as_deref()), cause));
            if let Err((error, cause)) = &attempt {
                // A change a rollback does not undo ran: never again on
                // our own (a lost connection asks the restart row first).
                if !cause.as_ref().is_some_and(outcome_unknown) {
                    if let Some(ran) = self.non_transactional_ran.take() {
                        let _ = self.conn.query_drop("ROLLBACK").await;
                        return Err(self.not_run_again(error.clone(), &ran).await);
                    }
                }
            }
            match attempt {
                Ok(row) => {
                    if self.in_order() && self.rows.pending {
                        // Committed; its row is written later (module
                        // `in_order`), so its low-water mark is not
                        // durable yet.
                        self.row_kept(row);
                    } else {
                        self.row_written(row);
                    }
                    self.progress.committed_block(seqnos());
                    self.progress
                        .record_applied(self.settings.channel.index(), &todo);
                    if ddl {
                        self.replay_ddl = None;
                        self.forget_tables();
                        self.seen_ddl_epoch = self.progress.bump_ddl_epoch();
                    }
                    return Ok(());
                }
                Err((error, Some(cause)))
                    if classify(&cause) == ErrorClass::Transient
                        && backoff.attempts() < self.settings.retry_max_attempts =>
                {
                    let delay = backoff.next_delay();
                    let lost = outcome_unknown(&cause);
                    tracing::warn!(
                        channel = self.settings.channel.get(),
                        seqno = error.seqno_number(),
                        last_seqno = todo
                            .last()
                            .map_or(error.seqno_number(), |(t, _)| t.seqno.get()),
                        block = %seqnos().collect::<SeqnoRanges>(),
                        event = %error.event_text(),
                        shard = %error.shard,
                        code = error.code,
                        attempt = backoff.attempts(),
                        delay_ms = delay.as_millis() as u64,
                        error = %error.message,
                        "{}",
                        if lost {
                            "transient error, the connection lost: reconnecting, then reading \
                             the restart row to learn whether the block committed"
                        } else {
                            "transient error; rolling back the block and retrying"
                        }
                    );
                    self.progress.count_retry(error.code);
                    if ddl {
                        // The DDL itself may have run before the error.
                        self.replay_ddl = Some(todo[0].0.seqno);
                    }
                    if lost {
                        // The first error is the one whose outcome is
                        // unknown; a failed read keeps it.
                        unknown.get_or_insert(error);
                    } else if let Some(ran) = self.rollback_checked().await {
                        return Err(self.not_run_again(error, &ran).await);
                    }
                    tokio::time::sleep(delay).await;
                    if lost {
                        match self.reconnect().await {
                            Ok(()) => reconnect_error = None,
                            Err(e) => {
                                tracing::warn!(
                                    channel = self.settings.channel.get(),
                                    error = %crate::mysql::ErrorText(&e),
                                    "reconnect failed; will retry"
                                );
                                reconnect_error = Some(crate::mysql::error_text(&e));
                            }
                        }
                    }
                }
                Err((error, _)) => {
                    if let Some(ran) = self.rollback_checked().await {
                        return Err(self.not_run_again(error, &ran).await);
                    }
                    return Err(error);
                }
            }
        }
    }

    /// Logs (INFO) and counts what the restart row said of a block whose
    /// outcome was unknown after `after`.
    fn log_outcome(
        &self,
        todo: &[&(Arc<Transaction>, Epoch)],
        after: &ApplyError,
        committed: bool,
    ) {
        let (Some((first, _)), Some((last, _))) = (todo.first(), todo.last()) else {
            return;
        };
        let span = seqno_span(first.seqno, last.seqno);
        let verdict = if committed {
            "committed"
        } else {
            "not committed, applying again"
        };
        tracing::info!(
            channel = self.settings.channel.get(),
            "outcome of {span} unknown after {}{}: {verdict} (the restart row read again says so)",
            if after.code == 0 {
                String::new()
            } else {
                format!("error {}: ", after.code)
            },
            after.message
        );
        self.progress.count_unknown_outcome(committed);
    }

    /// One attempt at a block; errors carry the driver error when there is
    /// one (for classification).
    ///
    /// A DDL block (one transaction) first marks its seqno in the restart
    /// row's `ddl_seqno` (autocommit): the DDL commits implicitly, so the
    /// mark is what tells a restart that it may already have run. Every
    /// statement that commits implicitly is followed by a new START
    /// TRANSACTION, so the rest of the transaction (e.g. the rows of
    /// CREATE TABLE … SELECT) commits with the restart row.
    async fn try_block(
        &mut self,
        todo: &[&(Arc<Transaction>, Epoch)],
        ddl: bool,
        row: &RestartRow,
    ) -> Attempt {
        if let Some((txn, epoch, role)) = todo
            .iter()
            .find_map(|(t, e)| crate::xa::xa_role(t).map(|r| (t, *e, r)))
        {
            // XA transactions are #UNKNOWN, hence critical: always alone.
            if todo.len() != 1 {
                return Err((
                    self.error_at(
                        Some((txn, epoch)),
                        "",
                        &mysql_async::Error::Other(
                            "an XA transaction in a block with others (it must run alone)".into(),
                        ),
                    ),
                    None,
                ));
            }
            return self.try_xa(txn, epoch, &role, row).await;
        }
        self.non_transactional_ran = None;
        if ddl {
            let (txn, epoch) = todo[0];
            if self.in_order() {
                // DDL commits as it runs: its turn comes first.
                self.wait_turn(txn, *epoch, false).await?;
            }
            self.mark_started(txn, *epoch).await?;
        } else if self.in_order()
            && (todo[0]
                .0
                .changes
                .iter()
                .any(|c| matches!(c, crate::event::Change::Statement(_)))
                || self.touches_non_transactional(&todo[0].0).await)
        {
            // A non-transactional change is binlogged as its statement
            // ends, not at the COMMIT: its turn comes first too (as for a
            // statement, whose tables are not looked at here).
            let (txn, epoch) = todo[0];
            self.wait_turn(txn, *epoch, false).await?;
            self.refuse_split_group(txn).await?;
        }
        if !self.in_order() {
            let (first, epoch) = todo[0];
            self.set_origin(first, *epoch).await?;
        }
        // The binlog method sends the master's events (module `binlog`),
        // never the batched SQL.
        let mut batched = !ddl
            && !self.settings.in_order
            && todo.iter().all(|(t, _)| rows_only(t))
            && (self.settings.method == crate::config::ApplyMethod::Sql
                || todo.iter().all(|(t, _)| t.row_events.is_none()));
        if batched && todo.len() == 1 {
            // Alone in its block when it changes a non-transactional
            // table: statement by statement, never run twice in one
            // attempt.
            batched = !self.touches_non_transactional(&todo[0].0).await;
        }
        if batched {
            match self.try_block_batched(todo, row).await {
                Ok(()) => return Ok(()),
                // The connection was lost: the block may have committed
                // (a compound block's COMMIT, or the COMMIT after the
                // batch); the caller reads the restart row first.
                Err((error, Some(cause))) if outcome_unknown(&cause) => {
                    return Err((error, Some(cause)))
                }
                Err((error, _)) => {
                    // Errors are reported by the statement-at-a-time path:
                    // run the block again that way (the batch's transaction
                    // was rolled back), and let it fail or succeed on its own.
                    tracing::debug!(
                        channel = self.settings.channel.get(),
                        error = %error,
                        "batched block failed; running it statement by statement"
                    );
                    let (first, epoch) = todo[0];
                    if self.conn.query_drop("ROLLBACK").await.is_err() {
                        // The batch's transaction may still be open (the
                        // ROLLBACK did not run), and the START TRANSACTION
                        // below would commit it: only a new session is sure
                        // to have rolled it back.
                        // The error names no transaction: it is placed
                        // at the block (`at_block`), as a failed START
                        // TRANSACTION's would be.
                        self.reconnect()
                            .await
                            .map_err(|e| (self.error_at(None, "ROLLBACK", &e), Some(e)))?;
                    }
                    // A reconnect after the batch error reset the session.
                    self.set_origin(first, *epoch).await?;
                }
            }
        }
        let attempt = self.try_statements(todo, row).await;
        match attempt {
            // A definite error of a BINLOG statement that held several
            // transactions' row events: run the block again with one
            // statement per transaction, which names the transaction
            // (nothing non-transactional ran: such a transaction is
            // alone in its block).
            Err((_, ref cause))
                if self.binlog.failed_shared
                    && self.non_transactional_ran.is_none()
                    && !cause.as_ref().is_some_and(|c| {
                        outcome_unknown(c) || classify(c) == ErrorClass::Transient
                    }) =>
            {
                if self.conn.query_drop("ROLLBACK").await.is_err() {
                    return attempt;
                }
                self.binlog_per_txn = true;
                let again = self.try_statements(todo, row).await;
                self.binlog_per_txn = false;
                again
            }
            attempt => attempt,
        }
    }

    /// A block statement by statement: START TRANSACTION, each
    /// transaction, the restart row, COMMIT.
    async fn try_statements(
        &mut self,
        todo: &[&(Arc<Transaction>, Epoch)],
        row: &RestartRow,
    ) -> Attempt {
        self.reset_binlog(false);
        match todo.first() {
            // The master's GTID, set with the START TRANSACTION (after a
            // DDL's mark, which is not binlogged: the GTID is the DDL's).
            Some((first, epoch)) if self.in_order() && first.gtid.is_some() => {
                let gtid = first.gtid.expect("checked");
                self.session_origin = None;
                let sql = format!(
                    "{};\nSTART TRANSACTION",
                    in_order::set_gtid_statement(&gtid)
                );
                self.exec_text(&sql, Some((first, *epoch))).await?;
            }
            // Binary logging back on after the last restart row.
            Some(_) if self.in_order() => {
                let sql = format!("{};\nSTART TRANSACTION", in_order::LOG_ON);
                self.exec_text(&sql, None).await?
            }
            _ => self.exec_text("START TRANSACTION", None).await?,
        }
        for (txn, epoch) in todo {
            self.apply_txn(txn, *epoch).await?;
        }
        let (last, epoch) = todo.last().expect("non-empty block");
        if self.in_order() {
            // (A BINLOG statement cannot share a query with the COMMIT:
            // the server's reply then reads as out of sync.)
            let (first, first_epoch) = todo[0];
            self.flush_binlog(Some((last, *epoch))).await?;
            self.wait_turn(first, *first_epoch, true).await?;
            self.exec_text("COMMIT", Some((last, *epoch))).await?;
            return self
                .row_after_commit_when_due(row, last.commit_timestamp, Some((last, *epoch)))
                .await;
        }
        self.update_row(row, last.commit_timestamp, Some((last, *epoch)))
            .await?;
        self.exec_text("COMMIT", Some((last, *epoch))).await?;
        Ok(())
    }

    /// Runs `sql` as text; `at` names the transaction for errors.
    async fn exec_text(&mut self, sql: &str, at: Option<(&Transaction, Epoch)>) -> Attempt {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| (self.error_at(at, sql, &e), Some(e)))
    }

    /// Forgets the cached tables when a channel applied DDL since they
    /// were read.
    fn refresh_tables(&mut self) {
        let epoch = self.progress.ddl_epoch();
        if epoch != self.seen_ddl_epoch {
            self.seen_ddl_epoch = epoch;
            self.forget_tables();
        }
    }

    /// Forgets the cached table shapes and prepared statements (after DDL,
    /// on this channel or another).
    fn forget_tables(&mut self) {
        self.tables.clear();
        self.builder = SqlBuilder::new();
    }

    /// An error of transaction `txn` with no driver error behind it.
    fn plain_error(
        &self,
        txn: &Transaction,
        sql: String,
        code: u16,
        message: String,
    ) -> ApplyError {
        ApplyError::at(self.settings.channel, txn, sql, code, message)
    }
}
