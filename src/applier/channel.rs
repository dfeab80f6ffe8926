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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Value as Param};

use crate::applier::columns::{self, ReplicaColumn};
use crate::applier::restart::{self, RestartRow};
use crate::applier::retry::{classify, Backoff, ErrorClass};
use crate::applier::sql::{PlannedStatement, SqlBuilder, TableShape};
use crate::catalog;
use crate::event::{
    Change, ColumnInfo, RowKind, SessionContext, Statement, TableInfo, Transaction, UserVarValue,
};
use crate::mysql::error_codes::ER_KEY_NOT_FOUND;
use crate::mysql::{interpolate, quote_ident};
use crate::position::{ChannelId, Seqno};
use crate::shard::temp_tables::TempTables;

mod xa;

/// What the scheduler sends a channel.
#[derive(Clone, Debug)]
pub enum Work {
    /// Apply a transaction; `alone` commits it in a block of its own.
    Apply {
        /// The transaction.
        txn: Arc<Transaction>,
        /// Epoch of its extraction run.
        epoch: u64,
        /// Commit it alone (critical shard or barrier).
        alone: bool,
        /// Its share of the in-flight memory budget
        /// ([`Progress::acquire_memory`]), released once committed.
        bytes: u64,
        /// The position after it, recorded in the restart row (with the
        /// source's whole GTID position, not only the transaction's GTID).
        marker: Arc<Marker>,
    },
    /// Periodic sync: when the channel has nothing newer, advance its
    /// restart row to this position.
    Sync(Arc<Marker>),
    /// Clean stop: advance the restart row to this position, then exit.
    Stop(Arc<Marker>),
}

/// A position every channel records (SYNC and STOP markers): the last
/// seqno the scheduler has handled, with its identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The seqno.
    pub seqno: Seqno,
    /// Its epoch.
    pub epoch: u64,
    /// Binlog position after it.
    pub event_id: String,
    /// Its GTID (text), or empty.
    pub gtid: String,
    /// Its shard.
    pub shard_id: String,
    /// Master commit time, Unix seconds.
    pub extract_time: u32,
}

impl Marker {
    /// The marker of a transaction.
    pub fn of(txn: &Transaction, epoch: u64) -> Marker {
        Marker {
            seqno: txn.seqno,
            epoch,
            event_id: txn.end_position.to_string(),
            gtid: txn.gtid.map(|g| g.to_string()).unwrap_or_default(),
            shard_id: txn.shard.clone(),
            extract_time: txn.commit_timestamp,
        }
    }

    fn row(&self, channel: u16) -> RestartRow {
        RestartRow {
            channel,
            seqno: Some(self.seqno),
            epoch: self.epoch,
            event_id: self.event_id.clone(),
            gtid: self.gtid.clone(),
            shard_id: self.shard_id.clone(),
        }
    }
}

/// A definite apply error: what failed and where. Displays as `channel C
/// failed at seqno S (event FILE:POS, shard X): error CODE: MESSAGE; SQL:
/// …`, without `error CODE: ` when no server sent a code (a lost
/// connection).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "channel {channel} failed at seqno {seqno} (event {event_id}, shard {shard}): \
     {}{message}; SQL: {sql}", ServerCode(*code)
)]
pub struct ApplyError {
    /// Channel number.
    pub channel: u16,
    /// Seqno of the failing transaction (or marker).
    pub seqno: u64,
    /// Its binlog position (`file:pos` after it).
    pub event_id: String,
    /// Its shard.
    pub shard: String,
    /// The SQL that failed, values elided past 200 characters.
    pub sql: String,
    /// Server error code (0 when the error came from elsewhere).
    pub code: u16,
    /// The message.
    pub message: String,
}

/// `error CODE: ` for a server's code, nothing for 0 (no server code).
pub struct ServerCode(pub u16);

impl std::fmt::Display for ServerCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            code => write!(f, "error {code}: "),
        }
    }
}

/// `error` placed at the block `todo` when it names no transaction (it
/// failed before one: `START TRANSACTION`, a session setting, a
/// reconnect): the block's first seqno, binlog position and shard, and its
/// seqno range in the message. `reconnect` is the last failed reconnect's
/// message, added when the error itself is only a closed connection.
fn at_block(
    mut error: ApplyError,
    todo: &[&(Arc<Transaction>, u64)],
    reconnect: Option<&str>,
) -> ApplyError {
    let (Some((first, _)), Some((last, _))) = (todo.first(), todo.last()) else {
        return error;
    };
    if error.event_id.is_empty() {
        error.seqno = first.seqno.get();
        error.event_id = first.end_position.to_string();
        error.shard = first.shard.clone();
        error.message = if first.seqno == last.seqno {
            format!("{} (block of seqno {})", error.message, first.seqno)
        } else {
            format!(
                "{} (block of seqnos {} to {}, last event {})",
                error.message, first.seqno, last.seqno, last.end_position
            )
        };
    }
    if let Some(reconnect) = reconnect.filter(|_| error.code == 0) {
        error.message = format!(
            "{}; the last reconnect to the replica failed: {reconnect}",
            error.message
        );
    }
    error
}

#[cfg(test)]
mod block_error_tests {
    use super::*;
    use crate::position::BinlogPosition;

    fn txn(seqno: u64, pos: u64, shard: &str) -> (Arc<Transaction>, u64) {
        let at = |p| BinlogPosition::new("mariadb-bin.000002", p).unwrap();
        let t = Transaction {
            seqno: Seqno(seqno),
            server_id: 1,
            gtid: None,
            commit_id: None,
            start_position: at(pos - 10),
            end_position: at(pos),
            commit_timestamp: 0,
            shard: shard.into(),
            tables: Vec::new(),
            changes: Vec::new(),
        };
        (Arc::new(t), 0)
    }

    fn lost() -> ApplyError {
        ApplyError {
            channel: 3,
            seqno: 0,
            event_id: String::new(),
            shard: String::new(),
            sql: "START TRANSACTION".into(),
            code: 0,
            message: "Connection to the server is closed".into(),
        }
    }

    #[test]
    fn an_error_before_any_transaction_names_the_block() {
        let (a, b) = (txn(40, 1200, "acme"), txn(42, 1500, "acme"));
        let e = at_block(lost(), &[&a, &b], Some("Connection refused (os error 111)"));
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 40 (event mariadb-bin.000002:1200, shard acme): \
             Connection to the server is closed (block of seqnos 40 to 42, last event \
             mariadb-bin.000002:1500); the last reconnect to the replica failed: Connection \
             refused (os error 111); SQL: START TRANSACTION"
        );
        let e = at_block(lost(), &[&a], None);
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 40 (event mariadb-bin.000002:1200, shard acme): \
             Connection to the server is closed (block of seqno 40); SQL: START TRANSACTION"
        );
    }

    #[test]
    fn a_server_error_keeps_its_transaction_and_code() {
        let a = txn(40, 1200, "acme");
        let mut e = lost();
        (e.seqno, e.event_id, e.shard) = (41, "mariadb-bin.000002:1300".into(), "beta".into());
        (e.code, e.message) = (1927, "Connection was killed".into());
        let e = at_block(e, &[&a], Some("refused"));
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 41 (event mariadb-bin.000002:1300, shard beta): \
             error 1927: Connection was killed; SQL: START TRANSACTION"
        );
    }
}

/// A channel's last committed position and its applied latency in
/// seconds (replica commit time minus master commit time).
pub type AppliedMarker = (Arc<Marker>, f64);

/// What the channels applied of one shard in this run (`status --name
/// shards`).
#[derive(Clone, Debug, PartialEq)]
pub struct ShardApplied {
    /// The seqno of its last committed transaction.
    pub seqno: Seqno,
    /// That transaction's binlog position (`file:pos`).
    pub event_id: String,
    /// Seconds from its master commit to its replica commit.
    pub latency: f64,
    /// Transactions of the shard committed in this run.
    pub count: u64,
}

/// Progress shared by the channels and the scheduler: each channel's last
/// committed seqno (-1: none), the first definite error, and a condition
/// variable signalled on every change.
#[derive(Debug)]
pub struct Progress {
    committed: Vec<AtomicI64>,
    /// Bumped by every channel after it applies DDL: channels forget their
    /// cached table shapes when it changes (a DDL on one channel may alter
    /// a table another channel also writes, e.g. in critical transactions).
    ddl_epoch: AtomicU64,
    /// Transient errors retried, over all channels.
    retries: AtomicU64,
    /// Each channel's last committed position (block or marker) and its
    /// applied latency (replica commit time minus master commit time, s).
    markers: Mutex<Vec<Option<AppliedMarker>>>,
    /// Transactions each channel committed in this run.
    applied: Vec<AtomicU64>,
    /// Per shard: its last committed transaction and count in this run.
    shards: Mutex<HashMap<String, ShardApplied>>,
    /// Bytes of transactions handed to channels and not yet committed,
    /// and the most allowed.
    in_flight: Mutex<u64>,
    in_flight_max: u64,
    in_flight_changed: Condvar,
    error: Mutex<Option<ApplyError>>,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Progress {
    /// Progress for `channels` channels, each starting at its restart
    /// row's seqno.
    pub fn new(start: &[Option<Seqno>]) -> Progress {
        Progress {
            committed: start
                .iter()
                .map(|s| AtomicI64::new(s.map_or(-1, |s| s.get() as i64)))
                .collect(),
            ddl_epoch: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            markers: Mutex::new(vec![None; start.len()]),
            applied: start.iter().map(|_| AtomicU64::new(0)).collect(),
            shards: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(0),
            in_flight_max: u64::MAX,
            in_flight_changed: Condvar::new(),
            error: Mutex::new(None),
            lock: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Channel `channel`'s last committed seqno (`None`: nothing yet).
    pub fn committed(&self, channel: usize) -> Option<Seqno> {
        u64::try_from(self.committed[channel].load(Ordering::Acquire))
            .ok()
            .map(Seqno)
    }

    /// The lowest committed seqno over all channels (`None` when a channel
    /// has committed nothing).
    pub fn minimum(&self) -> Option<Seqno> {
        (0..self.committed.len())
            .map(|c| self.committed(c))
            .min()
            .flatten()
    }

    /// The same progress with a memory budget: at most `bytes` of
    /// transactions in flight between the scheduler and the channels.
    pub fn with_memory_budget(mut self, bytes: u64) -> Progress {
        self.in_flight_max = bytes.max(1);
        self
    }

    /// Takes `bytes` of the memory budget, waiting while it is exhausted;
    /// a transaction larger than the whole budget is admitted when nothing
    /// else is in flight. Returns false (without taking) when a channel
    /// failed meanwhile.
    pub fn acquire_memory(&self, bytes: u64) -> bool {
        let mut used = self.in_flight.lock().expect("in-flight lock");
        loop {
            if *used == 0 || used.saturating_add(bytes) <= self.in_flight_max {
                *used += bytes;
                return true;
            }
            if self.error().is_some() {
                return false;
            }
            used = self
                .in_flight_changed
                .wait_timeout(used, Duration::from_millis(100))
                .expect("in-flight lock")
                .0;
        }
    }

    /// Gives `bytes` of the memory budget back.
    pub fn release_memory(&self, bytes: u64) {
        let mut used = self.in_flight.lock().expect("in-flight lock");
        *used = used.saturating_sub(bytes);
        drop(used);
        self.in_flight_changed.notify_all();
    }

    /// Bytes of transactions in flight now.
    pub fn memory_in_flight(&self) -> u64 {
        *self.in_flight.lock().expect("in-flight lock")
    }

    /// Channel `channel`'s last committed position in this run with its
    /// applied latency in seconds (`None` before its first commit).
    pub fn marker(&self, channel: usize) -> Option<AppliedMarker> {
        self.markers.lock().expect("markers lock")[channel].clone()
    }

    fn set_marker(&self, channel: usize, marker: Arc<Marker>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let latency = (now - f64::from(marker.extract_time)).max(0.0);
        self.markers.lock().expect("markers lock")[channel] = Some((marker, latency));
    }

    /// Transactions channel `channel` committed in this run.
    pub fn applied_count(&self, channel: usize) -> u64 {
        self.applied[channel].load(Ordering::Relaxed)
    }

    /// What was committed of shard `shard` in this run (`None`: nothing).
    pub fn shard_applied(&self, shard: &str) -> Option<ShardApplied> {
        self.shards.lock().expect("shards lock").get(shard).cloned()
    }

    /// Counts the transactions of `block` above `before` (those the
    /// channel just committed; lower ones were committed in an earlier run
    /// and skipped) for channel `channel` and their shards.
    fn record_applied(
        &self,
        channel: usize,
        block: &[(Arc<Transaction>, u64)],
        before: Option<Seqno>,
    ) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let fresh = |t: &Transaction| before.is_none_or(|b| t.seqno > b);
        let mut count = 0;
        // Per shard of the block: how many, and its last transaction.
        let mut per_shard: Vec<(&str, u64, &Transaction)> = Vec::new();
        for (txn, _) in block.iter().filter(|(t, _)| fresh(t)) {
            count += 1;
            match per_shard.iter_mut().find(|(s, _, _)| *s == txn.shard) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = txn;
                }
                None => per_shard.push((&txn.shard, 1, txn)),
            }
        }
        self.applied[channel].fetch_add(count, Ordering::Relaxed);
        let mut shards = self.shards.lock().expect("shards lock");
        for (shard, n, last) in per_shard {
            let latency = (now - f64::from(last.commit_timestamp)).max(0.0);
            let event_id = last.end_position.to_string();
            match shards.get_mut(shard) {
                Some(entry) => {
                    if last.seqno > entry.seqno {
                        entry.seqno = last.seqno;
                        entry.event_id = event_id;
                        entry.latency = latency;
                    }
                    entry.count += n;
                }
                None => {
                    shards.insert(
                        shard.to_string(),
                        ShardApplied {
                            seqno: last.seqno,
                            event_id,
                            latency,
                            count: n,
                        },
                    );
                }
            }
        }
    }

    /// Transient errors retried so far (blocks rolled back and run again).
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// The first definite error, if any.
    pub fn error(&self) -> Option<ApplyError> {
        self.error.lock().expect("progress lock").clone()
    }

    /// Records that channel `channel` has committed everything sent to it
    /// up to seqno `seqno` (a lower seqno than the one recorded is
    /// ignored) and wakes [`Progress::wait_until`] waiters, such as the
    /// scheduler at a barrier. Channels call it after each commit; it is
    /// public so benchmarks and tests can stand in for channels.
    pub fn set_committed(&self, channel: usize, seqno: Seqno) {
        self.committed[channel].fetch_max(seqno.get() as i64, Ordering::AcqRel);
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    fn set_error(&self, error: ApplyError) {
        let mut slot = self.error.lock().expect("progress lock");
        if slot.is_none() {
            *slot = Some(error);
        }
        drop(slot);
        let _guard = self.lock.lock().expect("progress lock");
        self.changed.notify_all();
    }

    /// Blocks until `done()` holds or an error is recorded; returns false
    /// on error. Wakes at least every 100 ms to re-check.
    pub fn wait_until(&self, done: impl Fn(&Progress) -> bool) -> bool {
        let mut guard = self.lock.lock().expect("progress lock");
        loop {
            if self.error().is_some() {
                return false;
            }
            if done(self) {
                return true;
            }
            guard = self
                .changed
                .wait_timeout(guard, Duration::from_millis(100))
                .expect("progress lock")
                .0;
        }
    }
}

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
}

/// Starts channel `settings.channel` on its own thread; it ends after a
/// STOP marker (Ok) or a definite error (recorded in `progress` too).
///
/// # Errors
/// The thread could not be spawned.
pub fn spawn(
    settings: ChannelSettings,
    input: Receiver<Work>,
    progress: Arc<Progress>,
) -> std::io::Result<std::thread::JoinHandle<Result<(), ApplyError>>> {
    std::thread::Builder::new()
        .name(format!("shardrep-apply-{:02}", settings.channel.get()))
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ApplyError {
                    channel: settings.channel.get(),
                    seqno: 0,
                    event_id: String::new(),
                    shard: String::new(),
                    sql: String::new(),
                    code: 0,
                    message: format!("cannot start the channel's runtime: {e}"),
                })?;
            let channel = settings.channel.index();
            let result = runtime.block_on(run(settings, input, progress.clone()));
            if let Err(e) = &result {
                tracing::error!(channel, error = %e, "channel stopped on an error");
                progress.set_error(e.clone());
            }
            result
        })
}

struct Channel {
    settings: ChannelSettings,
    conn: Conn,
    builder: SqlBuilder,
    shapes: HashMap<(String, String), Arc<ReplicaTable>>,
    /// Last committed seqno of this channel (restart row).
    committed: Option<Seqno>,
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
}

/// Where a transaction was written: its `server_id` and, when it has a
/// GTID, its domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Origin {
    server_id: u32,
    domain_id: Option<u32>,
}

impl Origin {
    fn of(txn: &Transaction) -> Origin {
        Origin {
            server_id: txn.server_id,
            domain_id: txn.gtid.map(|g| g.domain_id),
        }
    }

    /// The statement that sets a session to this origin.
    fn set_statement(&self) -> String {
        let domain = self
            .domain_id
            .map_or_else(|| "DEFAULT".to_string(), |d| d.to_string());
        format!(
            "SET SESSION server_id = {}, gtid_domain_id = {domain}",
            self.server_id
        )
    }
}

/// What the replica says about a table: names, key and the column facts
/// a `NO_LOG` binlog lacks (signedness, fixed-length binary strings).
#[derive(Debug)]
struct ReplicaTable {
    shape: TableShape,
    /// The replica's columns in table order; empty when the binlog's
    /// metadata was complete and the replica was not asked.
    columns: Vec<ReplicaColumn>,
    /// Consecutive UPDATEs (and DELETE + INSERT pairs of the same keys) may
    /// go out merged ([`SqlBuilder::plan_merged_updates`]): the replica's
    /// table has a primary key and no other unique key, no triggers, no
    /// foreign keys either way (none of its own, none referencing it) and
    /// no generated columns.
    merge_updates: bool,
}

async fn run(
    settings: ChannelSettings,
    input: Receiver<Work>,
    progress: Arc<Progress>,
) -> Result<(), ApplyError> {
    let mut channel = Channel::connect(settings, progress.clone()).await?;
    let result = work(&mut channel, &input, &progress).await;
    // Say goodbye (COM_QUIT), so that the replica does not log an aborted
    // connection; an open transaction (after an error) is rolled back by
    // the server either way.
    let _ = tokio::time::timeout(Duration::from_secs(5), channel.conn.disconnect()).await;
    result
}

/// The channel's loop: applies blocks and markers until STOP, the end of
/// the input or an error.
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
            None => match input.recv() {
                Ok(w) => w,
                Err(_) => return Ok(()), // scheduler gone: stop quietly
            },
        };
        match first {
            Work::Stop(marker) => {
                if channel.record_marker(&marker).await? {
                    progress.set_marker(index, marker.clone());
                }
                progress.set_committed(index, channel.committed.unwrap_or(marker.seqno));
                return Ok(());
            }
            Work::Sync(marker) => {
                if channel.record_marker(&marker).await? {
                    progress.set_marker(index, marker);
                }
                if let Some(s) = channel.committed {
                    progress.set_committed(index, s);
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
                let same_origin = |txn: &Transaction| {
                    !channel.settings.preserve_origin || Origin::of(txn) == origin
                };
                if !alone && !is_ddl(&block[0].0) {
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
                channel.apply_block(&block, &last_marker).await?;
                progress.record_applied(index, &block, before);
                drop(block);
                progress.release_memory(block_bytes);
                if channel.committed != before {
                    progress.set_marker(index, last_marker);
                }
                if let Some(marker) = deferred_sync {
                    if channel.record_marker(&marker).await? {
                        progress.set_marker(index, marker);
                    }
                }
                if let Some(s) = channel.committed {
                    progress.set_committed(index, s);
                }
            }
        }
    }
}

/// Whether the transaction holds a statement that commits implicitly
/// (anything but INSERT/UPDATE/DELETE/REPLACE/ROLLBACK statements).
fn is_ddl(txn: &Transaction) -> bool {
    txn.changes.iter().any(|c| match c {
        Change::Statement(s) => !is_dml(&s.sql),
        _ => false,
    })
}

fn is_dml(sql: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&sql[..sql.len().min(64)]);
    let word = text
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    matches!(
        word.as_str(),
        "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "ROLLBACK" | "SAVEPOINT" | "XA"
    )
}

/// Whether `sql` is `CREATE [OR REPLACE] DATABASE|SCHEMA …` or `DROP
/// DATABASE|SCHEMA …` (the statement names its database; comments before
/// the first word are not expected in binlogged DDL and make this false).
fn names_its_database(sql: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&sql[..sql.len().min(64)]).to_ascii_uppercase();
    let words: Vec<&str> = text.split_ascii_whitespace().take(4).collect();
    match words.as_slice() {
        ["CREATE", "OR", "REPLACE", kind, ..] | ["CREATE", kind, ..] | ["DROP", kind, ..] => {
            matches!(*kind, "DATABASE" | "SCHEMA")
        }
        _ => false,
    }
}

fn elide(sql: &str) -> String {
    if sql.chars().count() > 200 {
        let cut: String = sql.chars().take(200).collect();
        format!("{cut}… ({} bytes)", sql.len())
    } else {
        sql.to_string()
    }
}

impl Channel {
    async fn connect(
        settings: ChannelSettings,
        progress: Arc<Progress>,
    ) -> Result<Channel, ApplyError> {
        let mut conn = Conn::new(settings.opts.clone())
            .await
            .map_err(|e| connect_error(&settings, &e))?;
        let replay_ddl = restart::pending_ddl(&mut conn, &settings.catalog, settings.channel.get())
            .await
            .map_err(|e| ApplyError {
                channel: settings.channel.get(),
                seqno: 0,
                event_id: String::new(),
                shard: String::new(),
                sql: String::new(),
                code: 0,
                message: e.to_string(),
            })?;
        if let Some(seqno) = replay_ddl {
            tracing::warn!(
                channel = settings.channel.get(),
                seqno = seqno.get(),
                "a DDL transaction started before the last stop and its restart row was not \
                 committed; replaying it if a second run is harmless (see ddl_replay), treating \
                 'already exists/does not exist' as done"
            );
        }
        let committed = progress.committed(settings.channel.index());
        let seen_ddl_epoch = progress.ddl_epoch.load(Ordering::Acquire);
        let mut channel = Channel {
            settings,
            conn,
            builder: SqlBuilder::new(),
            shapes: HashMap::new(),
            committed,
            progress,
            seen_ddl_epoch,
            replay_ddl,
            session_origin: None,
            temp_tables: TempTables::default(),
        };
        channel.setup_session().await?;
        Ok(channel)
    }

    async fn setup_session(&mut self) -> Result<(), ApplyError> {
        let log_bin = if self.settings.sql_log_bin { 1 } else { 0 };
        let setup = format!(
            "SET NAMES binary, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO', \
             sql_log_bin = {log_bin}, autocommit = 1"
        );
        self.session_origin = None;
        self.conn
            .query_drop(setup.as_str())
            .await
            .map_err(|e| self.error_at(None, &setup, &e))
    }

    /// With `preserve_origin`, sets the session's server id and GTID
    /// domain to `txn`'s (outside any transaction), unless already set.
    async fn set_origin(
        &mut self,
        txn: &Transaction,
        epoch: u64,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
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

    async fn reconnect(&mut self) -> Result<(), mysql_async::Error> {
        let conn = Conn::new(self.settings.opts.clone()).await?;
        let old = std::mem::replace(&mut self.conn, conn);
        let _ = old.disconnect().await;
        if self.temp_tables.count() > 0 {
            tracing::warn!(
                channel = self.settings.channel.get(),
                sessions = %self.temp_tables.describe().join("; "),
                "reconnected: the temporary tables of these master sessions are lost"
            );
            self.temp_tables.clear();
        }
        self.setup_session()
            .await
            .map_err(|e| mysql_async::Error::Other(e.message.into()))
    }

    fn error_at(
        &self,
        at: Option<(&Transaction, u64)>,
        sql: &str,
        e: &mysql_async::Error,
    ) -> ApplyError {
        let (code, message) = match e {
            mysql_async::Error::Server(s) => (s.code, s.message.clone()),
            other => (0, other.to_string()),
        };
        ApplyError {
            channel: self.settings.channel.get(),
            seqno: at.map_or(0, |(t, _)| t.seqno.get()),
            event_id: at.map_or_else(String::new, |(t, _)| t.end_position.to_string()),
            shard: at.map_or_else(String::new, |(t, _)| t.shard.clone()),
            sql: elide(sql),
            code,
            message,
        }
    }

    /// Applies a block with retries of transient errors.
    async fn apply_block(
        &mut self,
        block: &[(Arc<Transaction>, u64)],
        marker: &Marker,
    ) -> Result<(), ApplyError> {
        let todo: Vec<&(Arc<Transaction>, u64)> = block
            .iter()
            .filter(|(t, _)| self.committed.is_none_or(|c| t.seqno > c))
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        let epoch = self.progress.ddl_epoch.load(Ordering::Acquire);
        if epoch != self.seen_ddl_epoch {
            self.seen_ddl_epoch = epoch;
            self.shapes.clear();
            self.builder = SqlBuilder::new();
        }
        let ddl = todo.len() == 1 && is_ddl(&todo[0].0);
        let mut backoff = Backoff::new(Duration::from_millis(50), self.settings.retry_max_backoff);
        let mut reconnect_error: Option<String> = None;
        loop {
            let attempt = self.try_block(&todo, ddl, marker).await;
            let attempt = attempt
                .map_err(|(e, cause)| (at_block(e, &todo, reconnect_error.as_deref()), cause));
            match attempt {
                Ok(()) => {
                    self.committed = todo.last().map(|(t, _)| t.seqno);
                    if ddl {
                        self.replay_ddl = None;
                        self.shapes.clear();
                        self.builder = SqlBuilder::new();
                        self.seen_ddl_epoch =
                            self.progress.ddl_epoch.fetch_add(1, Ordering::AcqRel) + 1;
                    }
                    return Ok(());
                }
                Err((error, Some(cause)))
                    if classify(&cause) == ErrorClass::Transient
                        && backoff.attempts() < self.settings.retry_max_attempts =>
                {
                    let delay = backoff.next_delay();
                    tracing::warn!(
                        channel = self.settings.channel.get(),
                        seqno = error.seqno,
                        last_seqno = todo.last().map_or(error.seqno, |(t, _)| t.seqno.get()),
                        event = %error.event_id,
                        shard = %error.shard,
                        code = error.code,
                        attempt = backoff.attempts(),
                        delay_ms = delay.as_millis() as u64,
                        error = %error.message,
                        "transient error; rolling back the block and retrying"
                    );
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    self.progress.retries.fetch_add(1, Ordering::Relaxed);
                    if ddl {
                        // The DDL itself may have run before the error.
                        self.replay_ddl = Some(todo[0].0.seqno);
                    }
                    tokio::time::sleep(delay).await;
                    if matches!(
                        cause,
                        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_)
                    ) {
                        match self.reconnect().await {
                            Ok(()) => reconnect_error = None,
                            Err(e) => {
                                tracing::warn!(
                                    channel = self.settings.channel.get(),
                                    error = %e,
                                    "reconnect failed; will retry"
                                );
                                reconnect_error = Some(e.to_string());
                            }
                        }
                    }
                }
                Err((error, _)) => {
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    return Err(error);
                }
            }
        }
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
        todo: &[&(Arc<Transaction>, u64)],
        ddl: bool,
        marker: &Marker,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
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
            return self.try_xa(txn, epoch, &role, marker).await;
        }
        {
            let (first, epoch) = todo[0];
            self.set_origin(first, *epoch).await?;
        }
        if ddl {
            let (txn, epoch) = todo[0];
            self.mark_started(txn, *epoch).await?;
        }
        if !ddl && todo.iter().all(|(t, _)| rows_only(t)) {
            match self.try_block_batched(todo, marker).await {
                Ok(()) => return Ok(()),
                Err((error, _)) => {
                    // Errors are reported by the statement-at-a-time path:
                    // run the block again that way (the batch's transaction
                    // was rolled back), and let it fail or succeed on its own.
                    tracing::debug!(
                        channel = self.settings.channel.get(),
                        error = %error,
                        "batched block failed; running it statement by statement"
                    );
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    // A reconnect after the batch error reset the session.
                    let (first, epoch) = todo[0];
                    self.set_origin(first, *epoch).await?;
                }
            }
        }
        self.exec_text("START TRANSACTION", None).await?;
        for (txn, epoch) in todo {
            self.apply_txn(txn, *epoch).await?;
        }
        let (last, epoch) = todo.last().expect("non-empty block");
        debug_assert_eq!(marker.seqno, last.seqno);
        let row = marker.row(self.settings.channel.get());
        self.update_row(&row, last.commit_timestamp, Some((last, *epoch)))
            .await?;
        self.exec_text("COMMIT", Some((last, *epoch))).await?;
        Ok(())
    }

    /// A block of row changes only, sent as few multi-statement queries
    /// (one round trip per [`BATCH_BYTES`] of SQL instead of one per row
    /// change): `START TRANSACTION; <statements>; <restart row>; COMMIT`.
    /// Values go in as literals built by [`crate::mysql::literal`]
    /// (the channel's session is `SET NAMES binary` with backslash
    /// escapes). Each statement's affected-row count is checked as with
    /// prepared statements; the server stops at the first error, which is
    /// reported for the statement that caused it.
    async fn try_block_batched(
        &mut self,
        todo: &[&(Arc<Transaction>, u64)],
        marker: &Marker,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        // What each statement of the batch must affect, to check replies.
        struct Check {
            txn: usize,
            statement: Option<(PlannedStatement, Arc<ReplicaTable>)>,
            /// The restart-row update: exactly 1 row.
            restart: bool,
            /// A merged update (`INSERT … ON DUPLICATE KEY UPDATE` of
            /// several UPDATE rows): a short count sends the block to the
            /// statement-at-a-time path, which tells what is wrong.
            merged: bool,
        }
        /// Consecutive UPDATE rows changes of one table (and fused DELETE +
        /// INSERT pairs, as their INSERT), not yet planned (they go out
        /// merged); `set` is the union of the columns they set, in table
        /// order.
        struct Run<'t> {
            txn: usize,
            table: Arc<ReplicaTable>,
            columns: Vec<crate::event::ColumnInfo>,
            set: Vec<u16>,
            changes: Vec<&'t crate::event::RowsChange>,
        }
        let mut run: Option<Run> = None;
        let mut queries: Vec<(String, Vec<Check>)> = Vec::new();
        let mut text = String::from("START TRANSACTION");
        let mut checks = vec![Check {
            txn: 0,
            statement: None,
            restart: false,
            merged: false,
        }];
        let mut planned = Vec::new();
        // Full queries are sent before the next rows change is planned
        // (and at the end), so a large transaction is not held whole as SQL
        // text and planned parameters (a run of merged updates is still
        // planned whole when it is flushed).
        let row = marker.row(self.settings.channel.get());
        macro_rules! send_queries {
            () => {
                for (query, checks) in std::mem::take(&mut queries) {
                    let checks = &checks;
                    let query = &query;
                    let mut affected = Vec::with_capacity(checks.len());
                    let outcome: Result<(), mysql_async::Error> = async {
                        let mut result = self.conn.query_iter(query.as_str()).await?;
                        loop {
                            affected.push(result.affected_rows());
                            if result.is_empty() {
                                break;
                            }
                            result.collect::<mysql_async::Row>().await?;
                        }
                        Ok(())
                    }
                    .await;
                    // Short counts first (they come before any later error).
                    for (check, &n) in checks.iter().zip(&affected) {
                        if let (true, Some((statement, table))) = (check.merged, &check.statement) {
                            if n < statement.expected_rows {
                                let (t, _) = todo[check.txn];
                                let message = format!(
                                    "a merged update of {} rows of {}.{} counted {n} affected rows, \
                                     expected {}: re-running its rows as single UPDATEs",
                                    statement.expected_rows / 2,
                                    table.shape.schema,
                                    table.shape.table,
                                    statement.expected_rows
                                );
                                return Err((self.plain_error(t, elide(&statement.sql), 0, message), None));
                            }
                            continue;
                        }
                        if let Some(e) =
                            self.check_affected(todo, check.txn, &check.statement, check.restart, n, &row)
                        {
                            return Err((e, None));
                        }
                    }
                    if let Err(e) = outcome {
                        // The connection's state after an error inside a
                        // multi-statement reply is not trusted: start afresh (this
                        // also rolls the open transaction back).
                        if let Err(reconnect) = self.reconnect().await {
                            tracing::warn!(error = %reconnect, "reconnect after a batch error failed");
                        }
                        // The server stopped at the statement after the last reply.
                        let check = checks
                            .get(affected.len())
                            .or(checks.last())
                            .expect("non-empty batch");
                        let (txn, epoch) = todo[check.txn];
                        let failed_sql = check
                            .statement
                            .as_ref()
                            .map_or_else(|| elide(query), |(s, _)| s.sql.to_string());
                        return Err((self.error_at(Some((txn, *epoch)), &failed_sql, &e), Some(e)));
                    }
                }
            };
        }
        let push = |text: &mut String,
                    checks: &mut Vec<Check>,
                    queries: &mut Vec<(String, Vec<Check>)>,
                    sql: &str,
                    check: Check| {
            if text.len() + sql.len() > BATCH_BYTES && !checks.is_empty() {
                queries.push((std::mem::take(text), std::mem::take(checks)));
            }
            if !text.is_empty() {
                text.push_str(";\n");
            }
            text.push_str(sql);
            checks.push(check);
        };
        let mut sql = String::new();
        // Plans a pending run of UPDATEs (merged when more than one row)
        // and adds its statements to the batch.
        macro_rules! flush_run {
            () => {
                if let Some(run) = run.take() {
                    planned.clear();
                    let rows: usize = run.changes.iter().map(|c| c.rows.len()).sum();
                    let (txn, _) = todo[run.txn];
                    if rows == 1 && run.changes[0].kind == RowKind::Update {
                        if let Err(message) = self.builder.plan(
                            run.changes[0],
                            &run.columns,
                            &run.table.shape,
                            &mut planned,
                        ) {
                            return Err((self.plain_error(txn, String::new(), 0, message), None));
                        }
                    } else {
                        self.builder.plan_merged_updates(
                            &run.changes,
                            &run.set,
                            &run.columns,
                            &run.table.shape,
                            &mut planned,
                        );
                    }
                    for statement in planned.drain(..) {
                        sql.clear();
                        interpolate(&statement.sql, &statement.params, &mut sql)
                            .map_err(|m| (self.plain_error(txn, String::new(), 0, m), None))?;
                        push(
                            &mut text,
                            &mut checks,
                            &mut queries,
                            &sql,
                            Check {
                                txn: run.txn,
                                statement: Some((statement, run.table.clone())),
                                restart: false,
                                merged: rows > 1,
                            },
                        );
                    }
                }
            };
        }
        for (index, (txn, epoch)) in todo.iter().enumerate() {
            let mut next = 0;
            while next < txn.changes.len() {
                send_queries!();
                let Change::Rows(rows) = &txn.changes[next] else {
                    next += 1;
                    continue;
                };
                next += 1;
                let info = txn.table_of(rows);
                let table = self.replica_table(info).await.map_err(|e| {
                    (
                        self.error_at(Some((txn, *epoch)), "SELECT … FROM information_schema", &e),
                        Some(e),
                    )
                })?;
                let fk_off = rows.foreign_key_checks_off();
                if table.merge_updates && !fk_off && rows.kind != RowKind::Insert {
                    let columns = complete_columns(&info.columns, &table.columns);
                    // An UPDATE, or a DELETE followed by the INSERT of the
                    // same keys (fused: the INSERT's rows replace them).
                    let merge = if rows.kind == RowKind::Update {
                        SqlBuilder::merge_set(rows, &columns, &table.shape)
                            .map(|set| (set, rows, next))
                    } else {
                        // The next rows event (annotations between are
                        // only for display).
                        let following = txn.changes[next..]
                            .iter()
                            .position(|c| !matches!(c, Change::Annotation(_)))
                            .map(|p| next + p);
                        match following.map(|i| (i, &txn.changes[i])) {
                            Some((i, Change::Rows(insert)))
                                if !insert.foreign_key_checks_off()
                                    && txn.table_of(insert).schema == info.schema
                                    && txn.table_of(insert).table == info.table
                                    && txn.table_of(insert).columns == info.columns =>
                            {
                                SqlBuilder::fuse_set(rows, insert, &columns, &table.shape)
                                    .map(|set| (set, insert, i + 1))
                            }
                            _ => None,
                        }
                    };
                    if let Some((set, change, after)) = merge {
                        next = after; // past a fused INSERT
                        if let Some(r) = run
                            .as_mut()
                            .filter(|r| Arc::ptr_eq(&r.table, &table) && r.columns == columns)
                        {
                            r.changes.push(change);
                            r.txn = index;
                            for c in set {
                                if let Err(at) = r.set.binary_search(&c) {
                                    r.set.insert(at, c);
                                }
                            }
                            continue;
                        }
                        flush_run!();
                        run = Some(Run {
                            txn: index,
                            table,
                            columns,
                            set,
                            changes: vec![change],
                        });
                        continue;
                    }
                }
                flush_run!();
                if fk_off {
                    push(
                        &mut text,
                        &mut checks,
                        &mut queries,
                        "SET foreign_key_checks = 0",
                        Check {
                            txn: index,
                            statement: None,
                            restart: false,
                            merged: false,
                        },
                    );
                }
                planned.clear();
                let columns = complete_columns(&info.columns, &table.columns);
                if let Err(message) = self
                    .builder
                    .plan(rows, &columns, &table.shape, &mut planned)
                {
                    return Err((self.plain_error(txn, String::new(), 0, message), None));
                }
                for statement in planned.drain(..) {
                    sql.clear();
                    interpolate(&statement.sql, &statement.params, &mut sql)
                        .map_err(|m| (self.plain_error(txn, String::new(), 0, m), None))?;
                    push(
                        &mut text,
                        &mut checks,
                        &mut queries,
                        &sql,
                        Check {
                            txn: index,
                            statement: Some((statement, table.clone())),
                            restart: false,
                            merged: false,
                        },
                    );
                }
                if fk_off {
                    push(
                        &mut text,
                        &mut checks,
                        &mut queries,
                        "SET foreign_key_checks = 1",
                        Check {
                            txn: index,
                            statement: None,
                            restart: false,
                            merged: false,
                        },
                    );
                }
            }
        }
        flush_run!();
        let last_index = todo.len() - 1;
        let (last, epoch) = todo[last_index];
        let params = match restart::update_params(&row, last.commit_timestamp) {
            Params::Positional(p) => p,
            _ => Vec::new(),
        };
        sql.clear();
        interpolate(
            &catalog::restart_update(&self.settings.catalog),
            &params,
            &mut sql,
        )
        .map_err(|m| (self.plain_error(last, String::new(), 0, m), None))?;
        push(
            &mut text,
            &mut checks,
            &mut queries,
            &sql,
            Check {
                txn: last_index,
                statement: None,
                restart: true,
                merged: false,
            },
        );
        queries.push((text, checks));

        send_queries!();
        // Every count checked: only now commit (a divergence must never
        // commit with the restart row).
        self.exec_text("COMMIT", Some((last, *epoch))).await?;
        Ok(())
    }

    /// The divergence or restart-row error for one batched statement's
    /// affected-row count, if it is short.
    fn check_affected(
        &self,
        todo: &[&(Arc<Transaction>, u64)],
        txn: usize,
        statement: &Option<(PlannedStatement, Arc<ReplicaTable>)>,
        restart: bool,
        affected: u64,
        row: &RestartRow,
    ) -> Option<ApplyError> {
        let (t, _) = todo[txn];
        if restart && affected != 1 {
            return Some(self.plain_error(
                t,
                catalog::restart_update(&self.settings.catalog),
                0,
                format!(
                    "the restart row of channel {} is missing or ahead of seqno {}: \
                     it never moves backwards",
                    row.channel,
                    row.seqno.map_or(-1, |s| s.get() as i64)
                ),
            ));
        }
        let (statement, table) = statement.as_ref()?;
        if affected < statement.expected_rows && statement.kind != RowKind::Insert {
            return Some(self.plain_error(
                t,
                elide(&statement.sql),
                ER_KEY_NOT_FOUND,
                divergence_message(statement, &table.shape, affected),
            ));
        }
        None
    }

    fn plain_error(
        &self,
        txn: &Transaction,
        sql: String,
        code: u16,
        message: String,
    ) -> ApplyError {
        ApplyError {
            channel: self.settings.channel.get(),
            seqno: txn.seqno.get(),
            event_id: txn.end_position.to_string(),
            shard: txn.shard.clone(),
            sql,
            code,
            message,
        }
    }

    async fn update_row(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, u64)>,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        let sql = catalog::restart_update(&self.settings.catalog);
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
                            channel: self.settings.channel.get(),
                            seqno: row.seqno.map_or(0, |s| s.get()),
                            event_id: row.event_id.clone(),
                            shard: row.shard_id.clone(),
                            sql: elide(&sql),
                            code: 0,
                            message: format!(
                                "the restart row of channel {} is missing or ahead of seqno {}: \
                                 it never moves backwards",
                                row.channel,
                                row.seqno.map_or(-1, |s| s.get() as i64)
                            ),
                        },
                        None,
                    ));
                }
                Ok(())
            }
            Err(e) => Err((self.error_at(at, &sql, &e), Some(e))),
        }
    }

    async fn exec_text(
        &mut self,
        sql: &str,
        at: Option<(&Transaction, u64)>,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| (self.error_at(at, sql, &e), Some(e)))
    }

    /// Turns binary logging of the session off (`on = false`) or back on,
    /// when the channel binlogs at all (`replica.sql_log_bin`).
    ///
    /// Writes of the catalog alone (SYNC/STOP markers, DDL marks) are not
    /// binlogged: they carry no data, and binlogging them would feed a
    /// loop in a multi-master pair (each service reads the other's marker
    /// writes, drops them, and, idle again, writes markers of its own).
    async fn catalog_only_logging(
        &mut self,
        on: bool,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
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
    async fn mark_started(
        &mut self,
        txn: &Transaction,
        epoch: u64,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        let sql = catalog::restart_mark_ddl(&self.settings.catalog);
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
    async fn write_row_alone(
        &mut self,
        row: &RestartRow,
        extract_time: u32,
        at: Option<(&Transaction, u64)>,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
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

    /// Records a SYNC/STOP marker when the channel has nothing newer;
    /// returns whether it did.
    async fn record_marker(&mut self, marker: &Marker) -> Result<bool, ApplyError> {
        if self.committed.is_some_and(|c| c >= marker.seqno) {
            return Ok(false);
        }
        let row = marker.row(self.settings.channel.get());
        let mut backoff = Backoff::new(Duration::from_millis(50), self.settings.retry_max_backoff);
        loop {
            let attempt = self.write_row_alone(&row, marker.extract_time, None).await;
            match attempt {
                Ok(()) => {
                    self.committed = Some(marker.seqno);
                    return Ok(true);
                }
                Err((_, Some(cause)))
                    if classify(&cause) == ErrorClass::Transient
                        && backoff.attempts() < self.settings.retry_max_attempts =>
                {
                    let _ = self.conn.query_drop("ROLLBACK").await;
                    tokio::time::sleep(backoff.next_delay()).await;
                    if matches!(
                        cause,
                        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_)
                    ) {
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

    async fn apply_txn(
        &mut self,
        txn: &Transaction,
        epoch: u64,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        let mut planned = Vec::new();
        for change in &txn.changes {
            match change {
                Change::Annotation(_) => {}
                Change::Statement(statement) => {
                    if statement.sql.eq_ignore_ascii_case(b"ROLLBACK") {
                        // The master rolled back the transactional part.
                        self.exec_text("ROLLBACK", Some((txn, epoch))).await?;
                        self.exec_text("START TRANSACTION", Some((txn, epoch)))
                            .await?;
                        continue;
                    }
                    self.apply_statement(txn, epoch, statement).await?;
                }
                Change::Rows(rows) => {
                    let info = txn.table_of(rows);
                    if crate::shard::is_catalog_table(&info.schema, &info.table) {
                        // Another service's restart row, binlogged with
                        // the data it applied to its replica.
                        continue;
                    }
                    let table = self.replica_table(info).await.map_err(|e| {
                        (
                            self.error_at(
                                Some((txn, epoch)),
                                "SELECT … FROM information_schema",
                                &e,
                            ),
                            Some(e),
                        )
                    })?;
                    let fk_off = rows.foreign_key_checks_off();
                    if fk_off {
                        self.exec_text("SET foreign_key_checks = 0", Some((txn, epoch)))
                            .await?;
                    }
                    planned.clear();
                    let columns = complete_columns(&info.columns, &table.columns);
                    if let Err(message) =
                        self.builder
                            .plan(rows, &columns, &table.shape, &mut planned)
                    {
                        return Err((
                            ApplyError {
                                channel: self.settings.channel.get(),
                                seqno: txn.seqno.get(),
                                event_id: txn.end_position.to_string(),
                                shard: txn.shard.clone(),
                                sql: String::new(),
                                code: 0,
                                message,
                            },
                            None,
                        ));
                    }
                    for statement in planned.drain(..) {
                        self.exec_planned(txn, epoch, &statement, &table.shape)
                            .await?;
                    }
                    if fk_off {
                        self.exec_text("SET foreign_key_checks = 1", Some((txn, epoch)))
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn exec_planned(
        &mut self,
        txn: &Transaction,
        epoch: u64,
        statement: &PlannedStatement,
        shape: &TableShape,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        let result = self
            .conn
            .exec_iter(
                &*statement.sql,
                Params::Positional(statement.params.clone()),
            )
            .await;
        let affected = match result {
            Ok(r) => {
                let n = r.affected_rows();
                drop(r);
                n
            }
            Err(e) => {
                return Err((
                    self.error_at(Some((txn, epoch)), &statement.sql, &e),
                    Some(e),
                ))
            }
        };
        if affected < statement.expected_rows && statement.kind != RowKind::Insert {
            return Err((
                ApplyError {
                    channel: self.settings.channel.get(),
                    seqno: txn.seqno.get(),
                    event_id: txn.end_position.to_string(),
                    shard: txn.shard.clone(),
                    sql: elide(&statement.sql),
                    code: ER_KEY_NOT_FOUND,
                    message: divergence_message(statement, shape, affected),
                },
                None,
            ));
        }
        Ok(())
    }

    async fn apply_statement(
        &mut self,
        txn: &Transaction,
        epoch: u64,
        statement: &Statement,
    ) -> Result<(), (ApplyError, Option<mysql_async::Error>)> {
        let at = Some((txn, epoch));
        if self.replay_ddl == Some(txn.seqno)
            && !is_dml(&statement.sql)
            && !crate::applier::ddl_replay::replay_is_safe(&statement.sql)
        {
            // It may have run, and a second run could change the replica.
            let sql_text = String::from_utf8_lossy(&statement.sql);
            let e = ApplyError {
                channel: self.settings.channel.get(),
                seqno: txn.seqno.get(),
                event_id: txn.end_position.to_string(),
                shard: txn.shard.clone(),
                sql: elide(&sql_text),
                code: 0,
                message: crate::applier::ddl_replay::unsafe_replay_message(
                    txn.seqno.get(),
                    &txn.end_position.to_string(),
                    &sql_text,
                    self.settings.sql_log_bin,
                ),
            };
            return Err((e, None));
        }
        let mut context = session_setup(&statement.context);
        let mut in_session = false;
        if let Some(session) = TempTables::session_of(txn, statement) {
            // The master session's temporary-table namespace (the server
            // keys temporary tables by `pseudo_thread_id`); set only where
            // needed, as it takes SUPER or BINLOG REPLAY.
            if self.temp_tables.observe_statement(session, statement) {
                context[0].0 += &format!(", pseudo_thread_id = {}", session.thread_id);
                in_session = true;
            }
        }
        for (sql, params) in &context {
            let result = if params.is_empty() {
                self.conn.query_drop(sql.as_str()).await
            } else {
                self.conn
                    .exec_drop(sql.as_str(), Params::Positional(params.clone()))
                    .await
            };
            result.map_err(|e| (self.error_at(at, sql, &e), Some(e)))?;
        }
        if let Some(db) = &statement.default_schema {
            // CREATE/DROP DATABASE is logged with the database itself as
            // the default schema, which does not exist yet (or any more)
            // on the replica; the server's own applier sets the default
            // schema without checking. Such a statement names its database,
            // so it runs without the USE.
            if !names_its_database(&statement.sql) {
                self.exec_text(&format!("USE {}", quote_ident(db)), at)
                    .await?;
            }
        }
        let sql_text = String::from_utf8_lossy(&statement.sql).into_owned();
        let ddl = !is_dml(&statement.sql);
        let mut result = self.conn.query_drop(statement.sql.as_slice()).await;
        if let Err(mysql_async::Error::Server(e)) = &result {
            if ddl
                && self.replay_ddl == Some(txn.seqno)
                && crate::applier::retry::is_ddl_already_applied_error(e.code, &e.message)
            {
                tracing::warn!(
                    channel = self.settings.channel.get(),
                    seqno = txn.seqno.get(),
                    code = e.code,
                    error = %e.message,
                    sql = %elide(&sql_text),
                    "replayed DDL had already run before the stop; continuing"
                );
                result = Ok(());
            }
        }
        // Back to the channel's own session before anything else.
        let mut restore =
            "SET NAMES binary, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO', \
                       foreign_key_checks = 1, unique_checks = 1, TIMESTAMP = DEFAULT, \
                       insert_id = 0, last_insert_id = 0"
                .to_string();
        if in_session {
            // Out of the master session's namespace: its temporary tables
            // shadow base tables of the same name, also for the row
            // changes and other sessions' statements that follow. No master
            // session has thread id 0.
            restore += ", pseudo_thread_id = 0";
        }
        result.map_err(|e| (self.error_at(at, &sql_text, &e), Some(e)))?;
        self.exec_text(&restore, at).await?;
        if ddl {
            // DDL may change any table of its schema: forget cached shapes.
            self.shapes.clear();
            self.builder = SqlBuilder::new();
            // It committed implicitly: what follows (rows of CREATE …
            // SELECT, the restart row) is one new transaction.
            self.exec_text("START TRANSACTION", at).await?;
        }
        Ok(())
    }

    /// Column names, key, signedness and binary strings of a table, from
    /// the binlog metadata when complete, else from the replica (cached
    /// until DDL).
    async fn replica_table(
        &mut self,
        info: &TableInfo,
    ) -> Result<Arc<ReplicaTable>, mysql_async::Error> {
        let key = (info.schema.clone(), info.table.clone());
        if let Some(t) = self.shapes.get(&key) {
            if t.shape.columns.len() == info.columns.len() {
                return Ok(t.clone());
            }
        }
        let names: Option<Vec<String>> = info.columns.iter().map(|c| c.name.clone()).collect();
        let metadata_complete = !columns::needs_replica_definition(&info.columns);
        let table = if let (Some(names), Some(pk), true) =
            (names, info.primary_key.clone(), metadata_complete)
        {
            ReplicaTable {
                shape: TableShape {
                    schema: info.schema.clone(),
                    table: info.table.clone(),
                    columns: names,
                    primary_key: (!pk.is_empty()).then_some(pk),
                },
                columns: Vec::new(),
                merge_updates: false,
            }
        } else {
            let rows: Vec<(String, String, String)> = self
                .conn
                .exec(
                    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                    (info.schema.as_str(), info.table.as_str()),
                )
                .await?;
            let key_columns: Vec<String> = self
                .conn
                .exec(
                    "SELECT COLUMN_NAME FROM information_schema.STATISTICS \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' \
                     ORDER BY SEQ_IN_INDEX",
                    (info.schema.as_str(), info.table.as_str()),
                )
                .await?;
            let replica_columns: Vec<ReplicaColumn> = rows
                .iter()
                .map(|(n, d, t)| ReplicaColumn::from_definition(n, d, t))
                .collect();
            let names: Vec<String> = replica_columns.iter().map(|c| c.name.clone()).collect();
            let primary_key: Vec<u16> = key_columns
                .iter()
                .filter_map(|k| names.iter().position(|n| n == k).map(|i| i as u16))
                .collect();
            ReplicaTable {
                columns: replica_columns,
                shape: TableShape {
                    schema: info.schema.clone(),
                    table: info.table.clone(),
                    columns: names,
                    primary_key: (!primary_key.is_empty()).then_some(primary_key),
                },
                merge_updates: false,
            }
        };
        let mut table = table;
        if table.shape.primary_key.is_some() {
            let obstacles: Option<i64> = self
                .conn
                .exec_first(
                    "SELECT (SELECT COUNT(*) FROM information_schema.STATISTICS \
                       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 \
                       AND INDEX_NAME <> 'PRIMARY') \
                     + (SELECT COUNT(*) FROM information_schema.TRIGGERS \
                       WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?) \
                     + (SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE \
                       WHERE (TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                              AND REFERENCED_TABLE_NAME IS NOT NULL) \
                          OR (REFERENCED_TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME = ?)) \
                     + (SELECT COUNT(*) FROM information_schema.COLUMNS \
                       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'ALWAYS')",
                    (
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                    ),
                )
                .await?;
            table.merge_updates = obstacles == Some(0);
        }
        let table = Arc::new(table);
        self.shapes.insert(key, table.clone());
        Ok(table)
    }
}

/// Most bytes of SQL text in one multi-statement query of a batched block.
pub const BATCH_BYTES: usize = 1 << 20;

/// Whether a transaction holds only row changes (and annotations): such
/// transactions are applied in batched blocks.
fn rows_only(txn: &Transaction) -> bool {
    txn.changes
        .iter()
        .all(|c| matches!(c, Change::Rows(_) | Change::Annotation(_)))
}

/// The message of an UPDATE/DELETE that matched fewer rows than the
/// master changed: the values it matched on, as shardrep bound them. It
/// does not claim that the replica diverged: the values are the binlog's
/// before image as shardrep decoded and completed it (padding, signedness
/// from the replica's definition), and a fault there looks the same.
fn divergence_message(statement: &PlannedStatement, shape: &TableShape, affected: u64) -> String {
    format!(
        "{} of {}.{} matched {affected} of {} rows: the replica has no row with {} \
         (the values shardrep bound from the binlog's before image). Either the replica \
         has diverged from the master, or these values differ from the master's row \
         (a decoding or binding fault of shardrep: report it with this seqno)",
        match statement.kind {
            RowKind::Update => "UPDATE",
            RowKind::Delete => "DELETE",
            RowKind::Insert => "INSERT",
        },
        quote_ident(&shape.schema),
        quote_ident(&shape.table),
        statement.expected_rows,
        describe_match(statement, shape)
    )
}

/// `key `id` = 2` (or `columns `a` = 1, `b` = NULL` for a table without a
/// primary key): the matched columns and their values as bound, bytes with
/// control characters (a BINARY value's zero bytes) in hex, each value cut
/// at 64 characters.
fn describe_match(statement: &PlannedStatement, shape: &TableShape) -> String {
    let values = &statement.params[statement.params.len() - statement.matched.len()..];
    let by_key = shape
        .primary_key
        .as_ref()
        .is_some_and(|k| *k == statement.matched);
    let pairs: Vec<String> = statement
        .matched
        .iter()
        .zip(values)
        .map(|(&c, v)| {
            let name = shape
                .columns
                .get(c as usize)
                .map_or_else(|| format!("@{}", c + 1), |n| quote_ident(n));
            let mut text = match v {
                // Binary bytes (zero bytes of a BINARY key, control
                // characters) in hex, exactly as bound.
                Param::Bytes(b) if b.iter().any(|&c| c < 0x20 || c == 0x7f) => {
                    let mut hex = String::with_capacity(2 + 2 * b.len());
                    hex.push_str("0x");
                    for c in b {
                        let _ = write!(hex, "{c:02X}");
                    }
                    hex
                }
                _ => v.as_sql(false),
            };
            if text.chars().count() > 64 {
                text = text.chars().take(64).collect::<String>() + "…";
            }
            format!("{name} = {text}")
        })
        .collect();
    format!(
        "{} {}",
        if by_key { "key" } else { "columns" },
        pairs.join(", ")
    )
}

fn connect_error(settings: &ChannelSettings, e: &mysql_async::Error) -> ApplyError {
    ApplyError {
        channel: settings.channel.get(),
        seqno: 0,
        event_id: String::new(),
        shard: String::new(),
        sql: String::new(),
        code: match e {
            mysql_async::Error::Server(s) => s.code,
            _ => 0,
        },
        message: format!("cannot connect to the replica: {e}"),
    }
}

/// Columns with what the binlog's metadata lacked (signedness, binary
/// CHAR/BINARY) filled in from the replica's definition
/// ([`columns::complete`]).
fn complete_columns(binlog: &[ColumnInfo], replica: &[ReplicaColumn]) -> Vec<ColumnInfo> {
    if replica.is_empty() {
        return binlog.to_vec();
    }
    columns::complete(binlog, replica)
}

/// The statements that set a statement's session context before it runs:
/// `(sql, params)` pairs.
fn session_setup(context: &SessionContext) -> Vec<(String, Vec<Param>)> {
    let mut out: Vec<(String, Vec<Param>)> = Vec::new();
    let mut set = vec![format!("TIMESTAMP = {}", context.timestamp)];
    if let Some(micros) = context.timestamp_micros {
        set[0] = format!("TIMESTAMP = {}.{micros:06}", context.timestamp);
    }
    if let Some(mode) = context.sql_mode {
        set.push(format!("sql_mode = {mode}"));
    }
    if let Some(flags) = context.flags2 {
        set.push(format!(
            "foreign_key_checks = {}, unique_checks = {}",
            u8::from(flags & 0x0400_0000 == 0),
            u8::from(flags & 0x0800_0000 == 0)
        ));
    }
    if let (Some(client), Some(conn), Some(server)) = (
        context.charset_client,
        context.collation_connection,
        context.collation_server,
    ) {
        set.push(format!(
            "character_set_client = {client}, collation_connection = {conn}, collation_server = {server}"
        ));
    }
    if let Some((increment, offset)) = context.auto_increment {
        set.push(format!(
            "auto_increment_increment = {increment}, auto_increment_offset = {offset}"
        ));
    }
    if let Some(id) = context.insert_id {
        set.push(format!("insert_id = {id}"));
    }
    if let Some(id) = context.last_insert_id {
        set.push(format!("last_insert_id = {id}"));
    }
    if let Some((s1, s2)) = context.rand_seeds {
        set.push(format!("rand_seed1 = {s1}, rand_seed2 = {s2}"));
    }
    out.push((format!("SET {}", set.join(", ")), Vec::new()));
    if let Some(tz) = &context.time_zone {
        out.push((
            "SET time_zone = ?".to_string(),
            vec![Param::Bytes(tz.as_bytes().to_vec())],
        ));
    }
    for var in &context.user_vars {
        let name = quote_ident(&var.name);
        let (sql, params) = match &var.value {
            None => (format!("SET @{name} = NULL"), Vec::new()),
            Some(UserVarValue::String { bytes, .. }) => (
                format!("SET @{name} = ?"),
                vec![Param::Bytes(bytes.clone())],
            ),
            Some(UserVarValue::Real(v)) => (format!("SET @{name} = ?"), vec![Param::Double(*v)]),
            Some(UserVarValue::Int { value, unsigned }) => (
                format!("SET @{name} = ?"),
                vec![if *unsigned {
                    Param::UInt(*value as u64)
                } else {
                    Param::Int(*value)
                }],
            ),
            Some(UserVarValue::Decimal(d)) => (
                format!("SET @{name} = CAST(? AS DECIMAL(65,30))"),
                vec![Param::Bytes(d.as_bytes().to_vec())],
            ),
        };
        out.push((sql, params));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Progress;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn memory_budget_waits_for_releases_and_admits_one_oversized() {
        let progress = Arc::new(Progress::new(&[None]).with_memory_budget(100));
        assert!(progress.acquire_memory(60));
        let waiter = {
            let progress = progress.clone();
            std::thread::spawn(move || progress.acquire_memory(60))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "120 bytes exceed the budget of 100");
        progress.release_memory(60);
        assert!(waiter.join().unwrap());
        assert_eq!(progress.memory_in_flight(), 60);
        progress.release_memory(60);
        // Larger than the whole budget: admitted alone.
        assert!(progress.acquire_memory(1_000));
        assert_eq!(progress.memory_in_flight(), 1_000);
    }

    #[test]
    fn database_ddl_is_recognised() {
        for sql in [
            "CREATE DATABASE a",
            "create schema if not exists a",
            "CREATE OR REPLACE DATABASE a",
            "DROP DATABASE a",
            "DROP SCHEMA IF EXISTS `a`",
        ] {
            assert!(super::names_its_database(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "CREATE TABLE a (x INT)",
            "ALTER DATABASE a CHARACTER SET utf8mb4",
            "DROP TABLE a",
        ] {
            assert!(!super::names_its_database(sql.as_bytes()), "{sql}");
        }
    }
}
