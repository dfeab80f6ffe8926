//! The control protocol: JSON lines over the control socket.
//!
//! The client writes one [`Request`] as one JSON object on one line; the
//! server answers each line with one [`Response`] on one line, in order. A
//! connection may carry any number of requests; `shardrepctl` sends one.
//! Blank lines are ignored; a line that is not a request gets an
//! [`ErrorKind::BadRequest`] response and the connection stays usable.
//!
//! ```text
//! > {"request":"status"}
//! < {"ok":{"appliedLastSeqno":41,"state":"ONLINE",...}}
//! > {"request":"online","skipSeqnos":"42,50-52"}
//! < {"ok":{"state":"GOING-ONLINE:SYNCHRONIZING"}}
//! > {"request":"wait","until":{"applied":100},"timeoutSecs":5}
//! < {"error":{"kind":"timeout","message":"timed out after 5 s waiting for ..."}}
//! ```
//!
//! Request names and fields are camelCase; result fields keep trepctl's
//! names where trepctl has them (`appliedLastSeqno`, `pendingError`, ...).
//! Seqnos are JSON numbers, durations are seconds (float where fractional).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::Transaction;
use crate::replicator::state::{PendingError, SkipSeqnos, State};
use crate::shard::map::{Master, ShardEntry};

/// Longest request line the server reads, in bytes (16 MiB: room for a
/// shard map of a few hundred thousand rows). A longer line gets an
/// [`ErrorKind::BadRequest`] response and the connection is closed.
pub const MAX_REQUEST_LINE_BYTES: usize = 16 << 20;

/// Longest `wait` the server accepts, in seconds (7 days).
pub const MAX_WAIT_SECS: u64 = 7 * 86_400;

/// `wait`'s time-out when the request gives none, in seconds.
pub const DEFAULT_WAIT_SECS: u64 = 300;

/// One request: `{"request":"<name>", <fields>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "request",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Request {
    /// `status`: the service's [`Status`]; with `name`, the per-channel
    /// ([`ChannelStatus`] list), per-shard ([`ShardStatus`] list) or queue
    /// (object) view instead.
    Status {
        /// Which detail view, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<StatusName>,
    },
    /// `services`: the services of this process ([`ServiceInfo`] list).
    Services,
    /// `online`: go online (from `OFFLINE:ERROR`: retry).
    Online {
        /// Seqnos to skip instead of applying (`--skip-seqno`), each one
        /// logged by the service.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skip_seqnos: Option<SkipSeqnos>,
        /// Go offline cleanly once every channel has applied this seqno.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_seqno: Option<u64>,
    },
    /// `offline`: go offline. The response comes once the request is
    /// accepted (usually in `GOING-OFFLINE`), with `offlineNumber` when
    /// the service numbers its offlines; wait for this offline's end with
    /// [`Request::Wait`] until [`WaitFor::Offline`] of that number (else
    /// until `OFFLINE:NORMAL`).
    Offline {
        /// Stop each channel after its current block instead of draining
        /// to a common seqno (restart rows may differ: no handback).
        #[serde(default)]
        immediate: bool,
        /// Go offline cleanly once every channel has applied this seqno
        /// (deferred); not with `immediate`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_seqno: Option<u64>,
    },
    /// `wait`: answer once the condition holds ([`WaitResult`]), or an
    /// [`ErrorKind::Timeout`] error after `timeout_secs`, or an
    /// [`ErrorKind::Failed`] error as soon as the service is
    /// `OFFLINE:ERROR` (unless waiting for that state).
    Wait {
        /// The condition.
        until: WaitFor,
        /// Seconds to wait at most, 0 to [`MAX_WAIT_SECS`]
        /// (default [`DEFAULT_WAIT_SECS`]).
        #[serde(default = "default_wait_secs")]
        timeout_secs: u64,
    },
    /// `shard list`: the shard map ([`ShardRow`] list, shard id order).
    ShardList,
    /// `shard insert`: add shards, all or none (`{"inserted": n}`).
    ShardInsert {
        /// The new shards.
        rows: Vec<ShardRow>,
    },
    /// `shard update`: replace existing shards, all or none
    /// (`{"updated": n}`).
    ShardUpdate {
        /// The shards' new entries.
        rows: Vec<ShardRow>,
    },
    /// `shard delete`: remove shards, all or none (`{"deleted": n}`).
    ShardDelete {
        /// The shard ids.
        ids: Vec<String>,
    },
    /// `shard delete-all`: empty the shard map (`{"deleted": n}`).
    ShardDeleteAll,
    /// `log list`: stored transactions of an inclusive seqno range
    /// ([`LogEntry`] list). `--seqno N` is `low = high = N`.
    LogList {
        /// First seqno (default: the lowest stored).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        low: Option<u64>,
        /// Last seqno, inclusive (default: the highest stored).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        high: Option<u64>,
    },
    /// `log info`: the queue's summary (object, as `shardrep log info
    /// --json` prints it).
    LogInfo,
    /// `handback`: point the replica's native replication at the position
    /// after the last applied transaction (refused unless every channel's
    /// restart row is at one seqno and the last offline was not immediate;
    /// at the takeover position when nothing was applied).
    Handback {
        /// Run `START SLAVE` afterwards.
        #[serde(default)]
        start_slave: bool,
    },
    /// `check`: start a consistency check of the replica against the
    /// master (answers at once, `{"started": true}`); follow it with
    /// `status --name check`. With neither tables nor schemas, every table
    /// of the service's shards.
    Check {
        /// Tables as `schema.table`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tables: Vec<String>,
        /// Every table of these schemas.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        schemas: Vec<String>,
        /// Rows per chunk (default 1000).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chunk_rows: Option<u64>,
        /// Target milliseconds per chunk: the chunk size adapts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chunk_time_ms: Option<u64>,
        /// Pause after each chunk, milliseconds (default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pause_ms: Option<u64>,
    },
    /// `check --cancel`: stop the running check after its chunk in hand
    /// (`{"cancelled": true}`); its status ends `cancelled`.
    CheckCancel,
    /// `reset`: forget the service's replication state (queue, restart
    /// rows, recorded skips) so that a fresh takeover or a configured
    /// start position can follow; refused while a run is active and
    /// unless `confirm` is the service's name.
    Reset {
        /// The service's name, typed by the operator to confirm.
        confirm: String,
        /// `--drop-catalog`: also drop the catalog schema on the replica
        /// (every trace of the service there), refused while restart
        /// rows hold a takeover in force (hand back first).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        drop_catalog: bool,
    },
    /// `source set`: switch the service to another master of the same
    /// replication topology (a master failover) and resume there by
    /// GTID; refused, naming the GTIDs, when the replica applied
    /// transactions the new master lacks. A running service goes
    /// offline cleanly first and online again after; the answer comes
    /// once the switch is done (an object describing it).
    SourceSet {
        /// The new master's host name or address.
        host: String,
        /// Its TCP port, 1..=65535.
        port: u16,
        /// The user to read its binlog as (default: the current source's;
        /// the password is the configuration's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        /// The server id to announce to it (default: the current
        /// source's), nonzero.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_id: Option<u32>,
        /// Seconds a running service may take to go offline, at most
        /// [`MAX_WAIT_SECS`] (default [`DEFAULT_WAIT_SECS`]).
        #[serde(default = "default_wait_secs")]
        timeout_secs: u64,
    },
}

fn default_wait_secs() -> u64 {
    DEFAULT_WAIT_SECS
}

/// The arguments of `source set`, as
/// [`ControlHandler::source_set`](super::ControlHandler::source_set)
/// receives them (validated: a host, a nonzero port and server id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSetRequest {
    /// The new master's host name or address.
    pub host: String,
    /// Its TCP port.
    pub port: u16,
    /// The user to read its binlog as, when not the current source's.
    pub user: Option<String>,
    /// The server id to announce, when not the current source's.
    pub server_id: Option<u32>,
    /// Seconds a running service may take to go offline.
    pub timeout_secs: u64,
}

impl Request {
    /// The request's name as on the wire (`status`, `shardInsert`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Status { .. } => "status",
            Request::Services => "services",
            Request::Online { .. } => "online",
            Request::Offline { .. } => "offline",
            Request::Wait { .. } => "wait",
            Request::ShardList => "shardList",
            Request::ShardInsert { .. } => "shardInsert",
            Request::ShardUpdate { .. } => "shardUpdate",
            Request::ShardDelete { .. } => "shardDelete",
            Request::ShardDeleteAll => "shardDeleteAll",
            Request::LogList { .. } => "logList",
            Request::LogInfo => "logInfo",
            Request::Handback { .. } => "handback",
            Request::Reset { .. } => "reset",
            Request::Check { .. } => "check",
            Request::CheckCancel => "checkCancel",
            Request::SourceSet { .. } => "sourceSet",
        }
    }

    /// Checks what serde cannot: `offline` not both immediate and at a
    /// seqno, `wait` at most [`MAX_WAIT_SECS`], `logList` with
    /// `low <= high`.
    ///
    /// # Errors
    /// An [`ErrorKind::BadRequest`] error naming the fields.
    pub fn validate(&self) -> Result<(), ControlError> {
        match self {
            Request::Offline {
                immediate: true,
                at_seqno: Some(_),
            } => Err(ControlError::bad_request(
                "offline: immediate and atSeqno exclude each other",
            )),
            Request::Wait { timeout_secs, .. } if *timeout_secs > MAX_WAIT_SECS => {
                Err(ControlError::bad_request(format!(
                    "wait: timeoutSecs {timeout_secs} is above the limit of {MAX_WAIT_SECS} s"
                )))
            }
            Request::SourceSet {
                host,
                port,
                server_id,
                timeout_secs,
                ..
            } => {
                if host.trim().is_empty() {
                    Err(ControlError::bad_request("source set: --host is empty"))
                } else if *port == 0 {
                    Err(ControlError::bad_request(
                        "sourceSet: port must be 1..=65535",
                    ))
                } else if *server_id == Some(0) {
                    Err(ControlError::bad_request(
                        "sourceSet: serverId must be nonzero",
                    ))
                } else if *timeout_secs > MAX_WAIT_SECS {
                    Err(ControlError::bad_request(format!(
                        "sourceSet: timeoutSecs {timeout_secs} is above the limit of \
                         {MAX_WAIT_SECS} s"
                    )))
                } else {
                    Ok(())
                }
            }
            Request::LogList {
                low: Some(low),
                high: Some(high),
            } if low > high => Err(ControlError::bad_request(format!(
                "logList: low {low} is above high {high}"
            ))),
            Request::Check {
                chunk_rows: Some(_),
                chunk_time_ms: Some(_),
                ..
            } => Err(ControlError::bad_request(
                "check: chunkRows and chunkTimeMs exclude each other",
            )),
            Request::Check {
                chunk_rows: Some(0),
                ..
            } => Err(ControlError::bad_request(
                "check: chunkRows must be at least 1",
            )),
            Request::Check {
                chunk_time_ms: Some(0),
                ..
            } => Err(ControlError::bad_request(
                "check: chunkTimeMs must be at least 1",
            )),
            Request::Check {
                pause_ms: Some(p), ..
            } if *p > MAX_CHECK_PAUSE_MS => Err(ControlError::bad_request(format!(
                "check: pauseMs must be at most {MAX_CHECK_PAUSE_MS}"
            ))),
            Request::Check {
                tables, schemas, ..
            } => tables
                .iter()
                .try_for_each(|t| crate::check::name::parse_table(t).map(|_| ()))
                .and_then(|()| {
                    schemas
                        .iter()
                        .try_for_each(|s| crate::check::name::parse_schema(s).map(|_| ()))
                })
                .map_err(|e| ControlError::bad_request(format!("check: {e}"))),
            _ => Ok(()),
        }
    }
}

/// The arguments of `online`, as [`ControlHandler::online`](super::ControlHandler::online)
/// receives them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OnlineRequest {
    /// Seqnos to skip instead of applying; the service logs each skip.
    pub skip_seqnos: Option<SkipSeqnos>,
    /// Go offline cleanly once every channel has applied this seqno.
    pub until_seqno: Option<u64>,
}

/// The arguments of `offline`, as
/// [`ControlHandler::offline`](super::ControlHandler::offline) receives
/// them (never both `immediate` and `at_seqno`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OfflineRequest {
    /// Stop each channel after its current block.
    pub immediate: bool,
    /// Go offline cleanly once every channel has applied this seqno.
    pub at_seqno: Option<u64>,
}

/// Longest pause between two chunks of a check, milliseconds.
pub const MAX_CHECK_PAUSE_MS: u64 = 60_000;

/// The detail views of `status --name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusName {
    /// One [`ChannelStatus`] per channel.
    Channels,
    /// One [`ShardStatus`] per shard seen.
    Shards,
    /// The queue (object, as `log info`).
    Queue,
    /// The last consistency check (object; `null` when none ran).
    Check,
}

impl StatusName {
    /// `channels`, `shards` or `queue`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusName::Channels => "channels",
            StatusName::Shards => "shards",
            StatusName::Queue => "queue",
            StatusName::Check => "check",
        }
    }
}

impl fmt::Display for StatusName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StatusName {
    type Err = String;

    /// `channels`, `shards`, `queue` or `check`.
    ///
    /// # Errors
    /// A message listing the names.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "channels" => Ok(StatusName::Channels),
            "shards" => Ok(StatusName::Shards),
            "queue" => Ok(StatusName::Queue),
            "check" => Ok(StatusName::Check),
            _ => Err(format!(
                "unknown status name {text:?}: expected channels, shards, queue or check"
            )),
        }
    }
}

/// What `wait` waits for: `{"state":"ONLINE"}`, `{"applied":N}` or
/// `{"offline":N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum WaitFor {
    /// The service is in this state.
    State(State),
    /// `appliedLastSeqno` is at least this seqno.
    Applied(u64),
    /// The offline of this number (an `offline` response's
    /// `offlineNumber`) has completed: met when it ended in
    /// `OFFLINE:NORMAL`, even when another request has changed the state
    /// since (the result's `stateNow`); a failure when it ended in
    /// `OFFLINE:ERROR`. Decided by
    /// [`ControlHandler::offline_end`](super::ControlHandler::offline_end),
    /// not by the status.
    Offline(u64),
}

impl WaitFor {
    /// Whether `status` satisfies the condition (never for
    /// [`WaitFor::Offline`], which the status does not tell).
    pub fn is_met(&self, status: &Status) -> bool {
        match *self {
            WaitFor::State(s) => status.state == s,
            WaitFor::Applied(n) => status.applied_last_seqno.is_some_and(|a| a >= n),
            WaitFor::Offline(_) => false,
        }
    }
}

impl fmt::Display for WaitFor {
    /// `state ONLINE`, `appliedLastSeqno >= N` or `offline N to complete
    /// (state OFFLINE:NORMAL)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitFor::State(s) => write!(f, "state {s}"),
            WaitFor::Applied(n) => write!(f, "appliedLastSeqno >= {n}"),
            WaitFor::Offline(n) => write!(
                f,
                "offline {n} to complete (state {})",
                State::OfflineNormal
            ),
        }
    }
}

/// A response: `{"ok": <value>}` or `{"error": {"kind": .., "message": ..}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Response {
    /// The request succeeded; the value's shape is the request's (see
    /// [`Request`]).
    Ok(Value),
    /// The request failed; nothing was changed unless the message says so.
    Error(ControlError),
}

impl From<Result<Value, ControlError>> for Response {
    fn from(result: Result<Value, ControlError>) -> Self {
        match result {
            Ok(v) => Response::Ok(v),
            Err(e) => Response::Error(e),
        }
    }
}

impl Response {
    /// The result as a `Result`.
    ///
    /// # Errors
    /// The [`ControlError`] of an error response.
    pub fn into_result(self) -> Result<Value, ControlError> {
        match self {
            Response::Ok(v) => Ok(v),
            Response::Error(e) => Err(e),
        }
    }
}

/// Why a request failed: a kind for programs and a one-line message for
/// people. Messages never contain passwords.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
#[serde(deny_unknown_fields)]
pub struct ControlError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What failed, one line.
    pub message: String,
}

/// The kinds of [`ControlError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// The line is not a valid request (malformed JSON, unknown request or
    /// field, bad value).
    BadRequest,
    /// Not allowed in the current state (an
    /// [`IllegalTransition`](crate::replicator::state::IllegalTransition),
    /// a handback after an unclean offline, ...).
    IllegalState,
    /// A named thing does not exist (shard, seqno).
    NotFound,
    /// The request's data was refused (bad shard rows, duplicates).
    Invalid,
    /// `wait` timed out.
    Timeout,
    /// The operation was tried and failed (database error, I/O), or
    /// `wait` met `OFFLINE:ERROR`.
    Failed,
    /// The service does not implement this request.
    Unsupported,
    /// The service is stopping.
    ShuttingDown,
    /// Too many connections at once.
    Busy,
    /// The handler failed unexpectedly (a bug; see the service's log).
    Internal,
    /// A kind this client does not know (from a newer server).
    #[serde(other)]
    Other,
}

impl ControlError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ControlError {
            kind,
            message: message.into(),
        }
    }

    /// [`ErrorKind::BadRequest`].
    pub fn bad_request(message: impl Into<String>) -> Self {
        ControlError::new(ErrorKind::BadRequest, message)
    }

    /// [`ErrorKind::IllegalState`].
    pub fn illegal_state(message: impl Into<String>) -> Self {
        ControlError::new(ErrorKind::IllegalState, message)
    }

    /// [`ErrorKind::Failed`].
    pub fn failed(message: impl Into<String>) -> Self {
        ControlError::new(ErrorKind::Failed, message)
    }

    /// [`ErrorKind::Unsupported`], naming the request.
    pub fn unsupported(request: &str) -> Self {
        ControlError::new(
            ErrorKind::Unsupported,
            format!("{request} is not supported by this service"),
        )
    }
}

impl From<crate::replicator::state::IllegalTransition> for ControlError {
    fn from(e: crate::replicator::state::IllegalTransition) -> Self {
        ControlError::illegal_state(e.to_string())
    }
}

/// The service's status (`status`), with trepctl's field names.
/// [`super::status`] fills it from the service's snapshot; the server
/// serializes it as one JSON object with every key present (`null` when
/// unknown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `serviceName`: `service.name` of the configuration.
    pub service_name: String,
    /// `role`: `applier` or `extractor`.
    pub role: String,
    /// `state`.
    pub state: State,
    /// `appliedLastSeqno`: the low-water mark, the highest seqno such that
    /// every seqno up to it is committed (by any channel) or needs no
    /// apply, once every channel's restart row has reached it too (offline:
    /// the restart rows' recovered mark, `applier::restart::recover`);
    /// `null` before the first.
    pub applied_last_seqno: Option<u64>,
    /// `appliedLastEventId`: the binlog position (`file:pos`) after that
    /// transaction.
    pub applied_last_event_id: Option<String>,
    /// `appliedLatency`: seconds from the master's commit to the replica's
    /// commit of the last applied transaction.
    pub applied_latency: Option<f64>,
    /// `relativeLatency`: seconds from the master's commit of the last
    /// applied transaction to now (grows while nothing is applied).
    pub relative_latency: Option<f64>,
    /// `channels`: the number of apply channels.
    pub channels: u16,
    /// `serializationCount`: barriers taken (critical transactions run
    /// alone) since the service started.
    pub serialization_count: u64,
    /// `droppedCount`: transactions dropped by the shard filter since the
    /// service started.
    pub dropped_count: u64,
    /// `skippedCount`: seqnos the DBA chose not to apply (`online
    /// --skip-seqno`), as recorded in the replica's catalog since the
    /// takeover (or the last `reset`); not counted in `droppedCount`.
    pub skipped_count: u64,
    /// `skippedSeqnos`: those seqnos, as `N[,M-K...]`; `null` when none.
    pub skipped_seqnos: Option<String>,
    /// `openTempTables`: temporary tables of master sessions open on the
    /// replica (statement and mixed binlog formats; native replication's
    /// `Slave_open_temp_tables`).
    pub open_temp_tables: u64,
    /// `parallelism`: `[apply] parallelism` of the configuration, `shard`
    /// or `row`.
    pub parallelism: String,
    /// `applyMethod`: `[apply] method` of the configuration, `binlog` or
    /// `sql`.
    pub apply_method: String,
    /// `binlogGtids`: how the running (or last) run binlogs what it
    /// applies, `[replica] binlog_gtids` resolved against the replica:
    /// `master` (the replica binlogs each master transaction under the
    /// master's GTID, in the master's order), `own` or `off`; `auto` until
    /// a run has read the replica's settings.
    pub binlog_gtids: String,
    /// `binlogGtidsConfigured`: `[replica] binlog_gtids` as configured:
    /// `auto` (as native replication: `master` with `log_slave_updates`,
    /// else `off`), `master`, `own` or `off`.
    pub binlog_gtids_configured: String,
    /// `dependencyWaitCount`: transactions the row scheduler held back
    /// because the work they depend on was in flight on two or more
    /// channels (a DDL: on another channel than its own), since the
    /// service started; 0 under `parallelism = "shard"`.
    pub dependency_wait_count: u64,
    /// `windowWaitCount`: transactions the scheduler held back at the
    /// commit window (`[apply] commit_window_seqnos`: the channels were
    /// that many seqnos apart, one waiting on a long transaction), since
    /// the service started.
    pub window_wait_count: u64,
    /// `fallbackCounts`: transactions whose writeset fell back to a
    /// coarser key than their rows', per reason, since the service
    /// started, as `reason=N[,reason=N...]` (reasons of
    /// [`crate::shard::writeset::Fallback::as_str`] with a non-zero
    /// count, in its declaration order; a transaction counts once per
    /// reason); `null` when none.
    pub fallback_counts: Option<String>,
    /// `inFlightCount`: transactions the row scheduler has sent to the
    /// channels and not yet seen committed, as of its last placement (or,
    /// while the source is idle, its last poll) in the running run; 0
    /// otherwise.
    pub in_flight_count: u64,
    /// `inFlightKeys`: the writeset keys (rows, tables, shards) the row
    /// scheduler holds, as of the same moment: those of the in-flight
    /// transactions, and of committed ones until the next prune (every
    /// [`crate::scheduler::dependencies::PRUNE_EVERY`] placements).
    pub in_flight_keys: u64,
    /// `minimumStoredSeqNo`: the lowest seqno in the queue.
    pub minimum_stored_seq_no: Option<u64>,
    /// `maximumStoredSeqNo`: the highest seqno in the queue (the last
    /// extracted).
    pub maximum_stored_seq_no: Option<u64>,
    /// `pendingError`, `pendingErrorCode`, `pendingErrorSeqno`,
    /// `pendingErrorEventId`, `pendingErrorShard`, `pendingErrorChannel`,
    /// `pendingExceptionMessage`: the error of `OFFLINE:ERROR`; every key
    /// `null` when there is none.
    #[serde(flatten, with = "pending_fields")]
    pub pending_error: Option<PendingError>,
    /// `untilSeqno`: the pending `online --until-seqno`.
    pub until_seqno: Option<u64>,
    /// `offlineAtSeqno`: the pending `offline --at-seqno`.
    pub offline_at_seqno: Option<u64>,
    /// `lastOfflineClean`: whether the last offline ended with every
    /// restart row at the same seqno (the condition of a handback), only
    /// while the service is offline (`OFFLINE:NORMAL`, `OFFLINE:ERROR`);
    /// `null` while a run goes on, and `false` before the first offline
    /// of the process.
    pub last_offline_clean: Option<bool>,
    /// `uptimeSeconds`: seconds since the service started.
    pub uptime_seconds: f64,
    /// `timeInStateSeconds`: seconds since the last state change.
    pub time_in_state_seconds: f64,
    /// `transactionsAppliedCount`: transactions the channels committed
    /// since the service started.
    pub transactions_applied_count: u64,
    /// `rowChangesAppliedCount`: their row changes (row image pairs).
    pub row_changes_applied_count: u64,
    /// `blocksCommittedCount`: replica transactions committed (block
    /// commit groups several source transactions in one).
    pub blocks_committed_count: u64,
    /// `retryCount`: transient errors retried since the service started.
    pub retry_count: u64,
    /// `retryCounts`: those per server error code, as `code=N[,code=N...]`
    /// (code 0: a connection error without one), code order; `null`
    /// when none.
    pub retry_counts: Option<String>,
    /// `unknownOutcomeCommittedCount`: blocks whose COMMIT's reply was
    /// lost (the connection lost, killed or the server gone after they
    /// were sent) and whose restart row, read again, showed them
    /// committed: counted once, not applied again.
    pub unknown_outcome_committed_count: u64,
    /// `unknownOutcomeReappliedCount`: such blocks whose restart row
    /// showed them not committed: applied again.
    pub unknown_outcome_reapplied_count: u64,
    /// `errorCounts`: runs ended by an error (`OFFLINE:ERROR`) since the
    /// service started, per error code as for `retryCounts`.
    pub error_counts: Option<String>,
    /// `masterBinlogEnd`: the master's last binlog file and size
    /// (`file:pos`), looked at every 2 s; `null` without a live source
    /// or before the first look (the source user needs `BINLOG MONITOR`
    /// or `REPLICATION CLIENT`).
    pub master_binlog_end: Option<String>,
    /// `masterGtidPos`: the master's `@@gtid_binlog_pos` at that look.
    pub master_gtid_pos: Option<String>,
    /// `bytesBehind`: binlog bytes from `appliedLastEventId` to
    /// `masterBinlogEnd`.
    pub bytes_behind: Option<u64>,
    /// `transactionsBehind`: transactions in the queue not applied yet
    /// (`maximumStoredSeqNo - appliedLastSeqno`; those not extracted yet
    /// count in `bytesBehind` only).
    pub transactions_behind: Option<u64>,
    /// `applyRateBytesPerSecond`: applied binlog bytes per second over
    /// the last 30 s.
    pub apply_rate_bytes_per_second: Option<f64>,
    /// `applyRateTransactionsPerSecond`: applied seqnos per second over
    /// the same window.
    pub apply_rate_transactions_per_second: Option<f64>,
    /// `catchUpEtaSeconds`: `bytesBehind` over the rate it closes at (the
    /// apply rate less the master's writes, exponentially weighted with a
    /// 5 s time constant, so that it follows the recent speed); 0 when
    /// nothing is behind, `null` while it does not close.
    pub catch_up_eta_seconds: Option<f64>,
    /// `sourceHost`: the host of the source master in use: the one
    /// `source set` stored (a master failover), else `[source] host`;
    /// `null` for a binlog-directory source.
    pub source_host: Option<String>,
    /// `sourcePort`: its port.
    pub source_port: Option<u16>,
    /// `sourceSwitchedAt`: when `source set` switched to it (UTC,
    /// `YYYY-MM-DD HH:MM:SS.ffffff`); `null`: the configuration's source.
    pub source_switched_at: Option<String>,
    /// `sourceSwitchUnfinished`: a `source set` that a stop of shardrep
    /// interrupted and the restart could not finish (its target and the
    /// error): `online` is refused until a `source set` succeeds; `null`
    /// when none.
    pub source_switch_unfinished: Option<String>,
    /// `sourceSwitchUnderWay`: the `source set` under way, `to HOST:PORT`
    /// (a DBA's, or the restart finishing one a stop interrupted): the
    /// source fields name the old master until it is done; `null` when
    /// none.
    pub source_switch_under_way: Option<String>,
    /// `sourceFirstSeqno`: the first seqno read from the switched-to
    /// source; the event ids (`appliedLastEventId`, restart rows, the
    /// queue) of lower seqnos are binlog positions of the previous
    /// master. `null` when no switch happened with transactions queued.
    pub source_first_seqno: Option<u64>,
}

impl Status {
    /// A status in `state` with every counter zero, every optional field
    /// `null` and `parallelism` the default `shard`: a starting point for
    /// [`super::status`] (and tests).
    pub fn new(service_name: impl Into<String>, role: impl Into<String>, state: State) -> Self {
        Status {
            service_name: service_name.into(),
            role: role.into(),
            state,
            applied_last_seqno: None,
            applied_last_event_id: None,
            applied_latency: None,
            relative_latency: None,
            channels: 0,
            serialization_count: 0,
            dropped_count: 0,
            skipped_count: 0,
            skipped_seqnos: None,
            open_temp_tables: 0,
            parallelism: "shard".to_string(),
            apply_method: "binlog".to_string(),
            binlog_gtids: "master".to_string(),
            binlog_gtids_configured: "auto".to_string(),
            dependency_wait_count: 0,
            window_wait_count: 0,
            fallback_counts: None,
            in_flight_count: 0,
            in_flight_keys: 0,
            minimum_stored_seq_no: None,
            maximum_stored_seq_no: None,
            pending_error: None,
            until_seqno: None,
            offline_at_seqno: None,
            last_offline_clean: None,
            uptime_seconds: 0.0,
            time_in_state_seconds: 0.0,
            transactions_applied_count: 0,
            row_changes_applied_count: 0,
            blocks_committed_count: 0,
            retry_count: 0,
            retry_counts: None,
            unknown_outcome_committed_count: 0,
            unknown_outcome_reapplied_count: 0,
            error_counts: None,
            master_binlog_end: None,
            master_gtid_pos: None,
            bytes_behind: None,
            transactions_behind: None,
            apply_rate_bytes_per_second: None,
            apply_rate_transactions_per_second: None,
            catch_up_eta_seconds: None,
            source_host: None,
            source_port: None,
            source_switched_at: None,
            source_switch_unfinished: None,
            source_switch_under_way: None,
            source_first_seqno: None,
        }
    }
}

/// Serializes `Option<PendingError>` as its seven keys, `null` when
/// absent, so that `status` always has the same keys.
mod pending_fields {
    use super::PendingError;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Fields {
        pending_error: Option<String>,
        pending_error_code: Option<u32>,
        pending_error_seqno: Option<u64>,
        pending_error_event_id: Option<String>,
        pending_error_shard: Option<String>,
        pending_error_channel: Option<u16>,
        pending_exception_message: Option<String>,
    }

    pub fn serialize<S: Serializer>(v: &Option<PendingError>, s: S) -> Result<S::Ok, S::Error> {
        let fields = match v {
            None => Fields::default(),
            Some(e) => Fields {
                pending_error: Some(e.message.clone()),
                pending_error_code: e.code,
                pending_error_seqno: e.seqno,
                pending_error_event_id: e.event_id.clone(),
                pending_error_shard: e.shard.clone(),
                pending_error_channel: e.channel,
                pending_exception_message: e.exception_message.clone(),
            },
        };
        fields.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PendingError>, D::Error> {
        let f = Fields::deserialize(d)?;
        Ok(f.pending_error.map(|message| PendingError {
            message,
            code: f.pending_error_code,
            seqno: f.pending_error_seqno,
            event_id: f.pending_error_event_id,
            shard: f.pending_error_shard,
            channel: f.pending_error_channel,
            exception_message: f.pending_exception_message,
        }))
    }
}

/// One service of the process (`services`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceInfo {
    /// `serviceName`.
    pub service_name: String,
    /// `role`.
    pub role: String,
    /// `state`.
    pub state: State,
}

/// One channel (`status --name channels`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelStatus {
    /// `channel`: 0..N-1.
    pub channel: u16,
    /// `appliedLastSeqno`: the seqno of the channel's restart row.
    pub applied_last_seqno: Option<u64>,
    /// `appliedLastEventId`: its binlog position (`file:pos`).
    pub applied_last_event_id: Option<String>,
    /// `appliedLatency`: seconds, master commit to replica commit, of the
    /// channel's last transaction.
    pub applied_latency: Option<f64>,
    /// `appliedCount`: transactions the channel committed since online.
    pub applied_count: u64,
    /// `shardId`: the shard of the channel's last transaction.
    pub shard_id: Option<String>,
}

/// One shard (`status --name shards`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    /// `shardId`.
    pub shard_id: String,
    /// `channel`: where its transactions are applied.
    pub channel: u16,
    /// `critical`: whether its transactions run alone.
    pub critical: bool,
    /// `appliedLastSeqno`: its last applied seqno.
    pub applied_last_seqno: Option<u64>,
    /// `appliedLastEventId`: that transaction's binlog position.
    pub applied_last_event_id: Option<String>,
    /// `appliedLatency`: seconds, of that transaction.
    pub applied_latency: Option<f64>,
    /// `eventCount`: transactions of this shard applied since online.
    pub event_count: u64,
    /// `foreignKeyGroup`: the shards (this one included) that foreign keys
    /// on the replica join to this one, serialized on one channel
    /// (`channel`); absent when none does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_key_group: Vec<String>,
    /// `serializedReason`: why the group is serialized: its foreign keys
    /// (`child_schema.table (constraint) -> parent_schema.table`) and
    /// whose assignment gives the channel; absent when not in a group.
    /// Both are known while the service is online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serialized_reason: Option<String>,
}

/// One row of the shard map on the wire (`shard list|insert|update`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShardRow {
    /// `shardId`: the schema name, or `#UNKNOWN`.
    pub shard_id: String,
    /// `master`: the service that masters the shard, or `#LOCAL`.
    pub master: String,
    /// `critical`: whether its transactions run alone.
    pub critical: bool,
}

impl From<&ShardEntry> for ShardRow {
    fn from(e: &ShardEntry) -> Self {
        ShardRow {
            shard_id: e.shard_id.clone(),
            master: e.master.as_str().to_string(),
            critical: e.critical,
        }
    }
}

impl TryFrom<&ShardRow> for ShardEntry {
    type Error = ControlError;

    /// Checks the shard id and master ([`ShardEntry::new`]).
    ///
    /// # Errors
    /// An [`ErrorKind::Invalid`] error naming the value.
    fn try_from(row: &ShardRow) -> Result<Self, Self::Error> {
        let invalid = |m: String| ControlError::new(ErrorKind::Invalid, m);
        let master = Master::parse(&row.master).map_err(invalid)?;
        ShardEntry::new(row.shard_id.clone(), master, row.critical).map_err(invalid)
    }
}

/// One stored transaction (`log list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// `seqno`.
    pub seqno: u64,
    /// `text`: the transaction as `shardrep log list` prints it.
    pub text: String,
    /// `transaction`: the transaction as `shardrep log list --json` prints
    /// it.
    pub transaction: Value,
}

impl LogEntry {
    /// The entry of a stored transaction.
    pub fn of(txn: &Transaction) -> Self {
        LogEntry {
            seqno: txn.seqno.get(),
            text: crate::inspect::transaction_text(txn),
            transaction: crate::inspect::transaction_json(txn),
        }
    }
}

/// The result of `wait`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    /// `state` when the condition was met; for [`WaitFor::Offline`], the
    /// state the offline ended in.
    pub state: State,
    /// `appliedLastSeqno` when the condition was met (when the answer
    /// was made).
    pub applied_last_seqno: Option<u64>,
    /// `stateNow`: for [`WaitFor::Offline`], the state when the answer
    /// was made, when another request changed it after the offline
    /// completed; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_now: Option<State>,
}

#[cfg(test)]
mod tests;
