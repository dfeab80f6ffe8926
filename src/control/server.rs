//! The control socket's server: binds the Unix socket named by
//! `[control] socket` (mode 0600), reads JSON-line [`Request`]s and answers
//! each with the [`ControlHandler`]'s result.
//!
//! Threads: `shardrep-control` accepts connections; each connection is
//! served on its own `shardrep-ctl-conn` thread (so a long `wait` does not
//! hold up `status`), at most [`MAX_CONNECTIONS`] at once.
//!
//! Idle connections (no request in progress) are closed after
//! [`IDLE_TIMEOUT`] without a complete request line. When every slot is
//! taken, a new connection closes the one idle the longest and takes its
//! slot, so idle clients can never lock the socket: only
//! [`MAX_CONNECTIONS`] requests in progress at once (e.g. `wait`s) get a
//! later one [`ErrorKind::Busy`].
//!
//! `wait` is implemented here, not by the handler: the connection's thread
//! polls [`ControlHandler::status`] every [`WAIT_POLL`] until the condition
//! holds, the time-out passes, the service is `OFFLINE:ERROR` (unless that
//! is the state waited for) or the server shuts down. The handler therefore
//! needs no waiting logic of its own; `status` must be cheap (read
//! counters, no database round trip).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind as IoErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::protocol::{
    ChannelStatus, ControlError, ErrorKind, LogEntry, OfflineRequest, OnlineRequest, Request,
    Response, ServiceInfo, ShardRow, ShardStatus, SourceSetRequest, Status, StatusName, WaitFor,
    WaitResult, MAX_REQUEST_LINE_BYTES,
};
use crate::replicator::state::{OfflineEnd, State};

/// Most connections served at once; more get an [`ErrorKind::Busy`]
/// response and are closed.
pub const MAX_CONNECTIONS: usize = 32;

/// How long a connection may stay idle (connected, no request in
/// progress) before the server closes it: counted from its connect or its
/// last response, so a request line sent slowly counts as idle too.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a connection refused as busy may take to send its request
/// line before the answer.
const BUSY_READ: Duration = Duration::from_millis(200);

/// How often `wait` polls the handler's status.
pub const WAIT_POLL: Duration = Duration::from_millis(50);

/// How often an idle connection's thread checks for shutdown.
const IDLE_CHECK: Duration = Duration::from_millis(250);

/// Longest Unix socket path, in bytes (`sun_path` less its NUL).
const SOCKET_PATH_MAX_BYTES: usize = 107;

/// What the service does for each request.
/// [`ServiceHandler`](super::ServiceHandler) implements it for the
/// replicator's service; the server calls it from connection threads,
/// concurrently.
///
/// Every method returns its result or a [`ControlError`] whose kind tells
/// the client what happened ([`ErrorKind::IllegalState`] for a request
/// the state does not allow, [`ErrorKind::Invalid`]/[`ErrorKind::NotFound`]
/// for refused data, [`ErrorKind::Failed`] for an operation that failed).
/// A panic in a method is caught and answered as [`ErrorKind::Internal`].
/// Methods that the service does not offer may keep the default, which
/// answers [`ErrorKind::Unsupported`].
pub trait ControlHandler: Send + Sync {
    /// `status`: the current [`Status`]. Called every [`WAIT_POLL`] by each
    /// `wait` in progress: must not block on I/O.
    fn status(&self) -> Result<Status, ControlError>;

    /// `status --name channels`: one entry per channel, channel order.
    fn channel_status(&self) -> Result<Vec<ChannelStatus>, ControlError> {
        Err(ControlError::unsupported("status --name channels"))
    }

    /// `status --name shards`: one entry per shard seen, shard id order.
    fn shard_status(&self) -> Result<Vec<ShardStatus>, ControlError> {
        Err(ControlError::unsupported("status --name shards"))
    }

    /// `status --name queue`: the queue's summary, a JSON object with the
    /// keys of `shardrep log info --json` (`minimumStoredSeqNo`,
    /// `maximumStoredSeqNo`, `count`, `durableSeqNo`, `sizeBytes`, ...).
    fn queue_status(&self) -> Result<Value, ControlError> {
        Err(ControlError::unsupported("status --name queue"))
    }

    /// `services`: the services of this process. Default: the one service
    /// described by [`ControlHandler::status`].
    fn services(&self) -> Result<Vec<ServiceInfo>, ControlError> {
        let s = self.status()?;
        Ok(vec![ServiceInfo {
            service_name: s.service_name,
            role: s.role,
            state: s.state,
        }])
    }

    /// `online`: start going online (from `OFFLINE:NORMAL` or, as a retry,
    /// `OFFLINE:ERROR`) and answer at once, e.g. `{"state":
    /// "GOING-ONLINE:SYNCHRONIZING"}`; clients wait for `ONLINE` with
    /// `wait`.
    fn online(&self, request: OnlineRequest) -> Result<Value, ControlError>;

    /// `offline`: start going offline (or record a deferred
    /// `at_seqno`) and answer at once, e.g. `{"state":"GOING-OFFLINE"}`,
    /// with `offlineNumber` when the handler numbers its offlines
    /// ([`ControlHandler::offline_end`]); clients wait for that offline's
    /// end with `wait` ([`WaitFor::Offline`]), or for `OFFLINE:NORMAL`
    /// without a number. The request is already validated (not both
    /// immediate and at a seqno).
    fn offline(&self, request: OfflineRequest) -> Result<Value, ControlError>;

    /// What became of the offline numbered `number` (an `offline`
    /// answer's `offlineNumber`): what `wait` for [`WaitFor::Offline`]
    /// asks every [`WAIT_POLL`]; must not block on I/O.
    fn offline_end(&self, number: u64) -> Result<OfflineEnd, ControlError> {
        let _ = number;
        Err(ControlError::unsupported("wait for an offline's number"))
    }

    /// `shard list`: every shard map row, shard id order.
    fn shard_list(&self) -> Result<Vec<ShardRow>, ControlError> {
        Err(ControlError::unsupported("shard list"))
    }

    /// `shard insert`: add the rows, all or none; returns how many.
    fn shard_insert(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        let _ = rows;
        Err(ControlError::unsupported("shard insert"))
    }

    /// `shard update`: replace the rows of existing shards, all or none;
    /// returns how many.
    fn shard_update(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        let _ = rows;
        Err(ControlError::unsupported("shard update"))
    }

    /// `shard delete`: remove the shards, all or none; returns how many.
    fn shard_delete(&self, ids: Vec<String>) -> Result<usize, ControlError> {
        let _ = ids;
        Err(ControlError::unsupported("shard delete"))
    }

    /// `shard delete-all`: empty the shard map; returns how many shards it
    /// had.
    fn shard_delete_all(&self) -> Result<usize, ControlError> {
        Err(ControlError::unsupported("shard delete-all"))
    }

    /// `log list`: the stored transactions from `low` to `high` inclusive
    /// (defaults: the lowest and highest stored; `low <= high` is already
    /// checked), seqno order. The handler may refuse a range it finds too
    /// large with [`ErrorKind::Invalid`].
    fn log_list(&self, low: Option<u64>, high: Option<u64>) -> Result<Vec<LogEntry>, ControlError> {
        let _ = (low, high);
        Err(ControlError::unsupported("log list"))
    }

    /// `log info`: the queue's summary (the object of
    /// [`ControlHandler::queue_status`] or more).
    fn log_info(&self) -> Result<Value, ControlError> {
        Err(ControlError::unsupported("log info"))
    }

    /// `handback`: point native replication at the position after the last
    /// applied transaction, optionally `START SLAVE`; answer with what was
    /// done (e.g. `{"masterLogFile":..,"masterLogPos":..,"slaveStarted":..}`).
    fn handback(&self, start_slave: bool) -> Result<Value, ControlError> {
        let _ = start_slave;
        Err(ControlError::unsupported("handback"))
    }

    /// `reset`: remove the service's queue, restart rows and recorded
    /// skips (native replication is not touched), refused unless
    /// `confirm` is the service's name and nothing runs; answer with what
    /// was removed.
    fn reset(&self, confirm: &str, drop_catalog: bool) -> Result<Value, ControlError> {
        let _ = (confirm, drop_catalog);
        Err(ControlError::unsupported("reset"))
    }

    /// `source set`: switch the service to another master (a master
    /// failover) and answer with what was done, once done.
    fn source_set(&self, request: SourceSetRequest) -> Result<Value, ControlError> {
        let _ = request;
        Err(ControlError::unsupported("source set"))
    }

    /// `check`: start a consistency check ([`crate::replicator::check`])
    /// and answer at once (`{"started": true}`).
    fn check(
        &self,
        request: crate::replicator::check::CheckRequest,
    ) -> Result<Value, ControlError> {
        let _ = request;
        Err(ControlError::unsupported("check"))
    }

    /// `check --cancel`: stop the running check.
    fn check_cancel(&self) -> Result<Value, ControlError> {
        Err(ControlError::unsupported("check"))
    }

    /// `status --name check`: the last check's status object
    /// ([`crate::replicator::check::CheckStatus`]), `null` when none ran.
    fn check_status(&self) -> Result<Value, ControlError> {
        Ok(Value::Null)
    }
}

/// Longest a check waits for the service to apply up to a master
/// snapshot's position (it may be catching up), per table.
pub const CHECK_CATCH_UP_TIMEOUT: Duration = Duration::from_secs(3600);

/// Why the control server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket's directory could not be created.
    #[error("cannot create the control socket directory {}: {cause}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A live server answers on the path.
    #[error("another shardrep service is already listening on {}", path.display())]
    AlreadyRunning {
        /// The socket path.
        path: PathBuf,
    },
    /// Something that is not a socket is at the path; it is left alone.
    #[error("{} exists and is not a socket: remove it or choose another control.socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The socket path is longer than a Unix socket path may be.
    #[error("control socket path {} is {len} bytes, above the limit of {SOCKET_PATH_MAX_BYTES}", path.display())]
    PathTooLong {
        /// The path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// An existing socket file could not be checked or removed.
    #[error("cannot replace the stale control socket {}: {cause}", path.display())]
    Stale {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Binding, setting the mode or starting the thread failed.
    #[error("cannot listen on the control socket {}: {cause}", path.display())]
    Bind {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// A running control server. Dropping it (or [`ControlServer::shutdown`])
/// stops accepting, ends the connections (a `wait` in progress answers
/// [`ErrorKind::ShuttingDown`]) and removes the socket file if it is still
/// this server's.
pub struct ControlServer {
    path: PathBuf,
    identity: (u64, u64),
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    handler: Arc<dyn ControlHandler>,
    stop: AtomicBool,
    /// The open connections by id.
    connections: Mutex<HashMap<u64, Connection>>,
    next_id: AtomicU64,
    /// [`IDLE_TIMEOUT`], or a test's value, in milliseconds.
    idle_timeout_ms: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// One open connection, as the accept loop sees it.
struct Connection {
    /// A handle to close it (eviction).
    stream: UnixStream,
    /// Since when it has had no request in progress (`None`: serving one).
    idle_since: Option<Instant>,
}

impl Shared {
    fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms.load(Ordering::Relaxed))
    }

    /// Marks connection `id` busy (`false`) or idle from now (`true`).
    /// Returns false when it was closed by the server meanwhile.
    fn set_idle(&self, id: u64, idle: bool) -> bool {
        match lock(&self.connections).get_mut(&id) {
            Some(c) => {
                c.idle_since = idle.then(Instant::now);
                true
            }
            None => false,
        }
    }

    /// Whether connection `id` has been idle longer than the timeout (or
    /// was closed by the server).
    fn idle_expired(&self, id: u64) -> bool {
        match lock(&self.connections).get(&id) {
            Some(c) => c
                .idle_since
                .is_some_and(|t| t.elapsed() >= self.idle_timeout()),
            None => true,
        }
    }
}

impl std::fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlServer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ControlServer {
    /// Binds `path` and serves `handler` on it.
    ///
    /// Creates the parent directory (mode 0700) when missing. When the
    /// path exists: a socket nobody answers on (left by a killed service)
    /// is removed; a socket a server answers on is
    /// [`ServerError::AlreadyRunning`]; anything else is
    /// [`ServerError::NotASocket`]. The socket is created under a
    /// temporary name, set to mode 0600, then linked to `path` (an atomic
    /// no-clobber: a server that started meanwhile is never replaced), so
    /// no client can connect while the mode is still the umask's. When the
    /// temporary name would be too long for a socket path, the socket is
    /// bound at `path` directly and its mode set right after.
    ///
    /// # Errors
    /// [`ServerError`].
    pub fn start(
        path: impl AsRef<Path>,
        handler: Arc<dyn ControlHandler>,
    ) -> Result<ControlServer, ServerError> {
        let path = path.as_ref().to_path_buf();
        let len = path.as_os_str().len();
        if len > SOCKET_PATH_MAX_BYTES {
            return Err(ServerError::PathTooLong { path, len });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|source| ServerError::CreateDir {
                        dir: dir.to_path_buf(),
                        cause: source,
                    })?;
            }
        }
        remove_if_stale(&path)?;
        let listener = bind_private(&path)?;
        let meta = std::fs::metadata(&path).map_err(|source| ServerError::Bind {
            path: path.clone(),
            cause: source,
        })?;
        let identity = (meta.dev(), meta.ino());
        let shared = Arc::new(Shared {
            handler,
            stop: AtomicBool::new(false),
            connections: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            idle_timeout_ms: AtomicU64::new(IDLE_TIMEOUT.as_millis() as u64),
            threads: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("shardrep-control".into())
                .spawn(move || accept_loop(&listener, &shared))
                .map_err(|source| {
                    let _ = std::fs::remove_file(&path);
                    ServerError::Bind {
                        path: path.clone(),
                        cause: source,
                    }
                })?
        };
        tracing::info!(socket = %path.display(), "control socket listening");
        Ok(ControlServer {
            path,
            identity,
            shared,
            accept: Some(accept),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets how long a connection may stay idle before it is closed
    /// (default [`IDLE_TIMEOUT`]); applies to open connections too.
    pub fn set_idle_timeout(&self, timeout: Duration) {
        self.shared
            .idle_timeout_ms
            .store(timeout.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        lock(&self.shared.connections).len()
    }

    /// Stops the server and waits for its threads (see the type's doc).
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn still_ours(&self) -> bool {
        std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.identity && m.file_type().is_socket())
    }

    fn stop_now(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        if self.still_ours() {
            // Wake the accept loop; it sees the stop flag.
            let _ = UnixStream::connect(&self.path);
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(socket = %self.path.display(), error = %e, "cannot remove the control socket");
            }
            let _ = accept.join();
        } else {
            // Someone removed or replaced the file: the accept thread
            // cannot be woken through the path; leave it blocked (it holds
            // only the listener and the handler) rather than hang here.
            tracing::warn!(socket = %self.path.display(), "control socket file was removed or replaced; not waiting for its thread");
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes a socket file nobody answers on; refuses a live one or a
/// non-socket.
fn remove_if_stale(path: &Path) -> Result<(), ServerError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == IoErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ServerError::Stale {
                path: path.to_path_buf(),
                cause: source,
            })
        }
    };
    if !meta.file_type().is_socket() {
        return Err(ServerError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(ServerError::AlreadyRunning {
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == IoErrorKind::ConnectionRefused => {
            tracing::info!(socket = %path.display(), "removing a stale control socket (no server answers on it)");
            std::fs::remove_file(path).map_err(|source| ServerError::Stale {
                path: path.to_path_buf(),
                cause: source,
            })
        }
        Err(source) => Err(ServerError::Stale {
            path: path.to_path_buf(),
            cause: source,
        }),
    }
}

/// Binds a 0600 socket at `path` (see [`ControlServer::start`]).
fn bind_private(path: &Path) -> Result<UnixListener, ServerError> {
    let bind_err = |source| ServerError::Bind {
        path: path.to_path_buf(),
        cause: source,
    };
    let private = std::fs::Permissions::from_mode(0o600);
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    static ATTEMPT: AtomicUsize = AtomicUsize::new(0);
    let tmp = path.with_file_name(format!(
        ".{}.{}-{}.tmp",
        file_name.as_deref().unwrap_or("control"),
        std::process::id(),
        ATTEMPT.fetch_add(1, Ordering::Relaxed)
    ));
    if tmp.as_os_str().len() > SOCKET_PATH_MAX_BYTES {
        let listener = UnixListener::bind(path).map_err(bind_err)?;
        if let Err(e) = std::fs::set_permissions(path, private) {
            let _ = std::fs::remove_file(path);
            return Err(bind_err(e));
        }
        return Ok(listener);
    }
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(bind_err)?;
    let linked =
        std::fs::set_permissions(&tmp, private).and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(listener),
        Err(e) if e.kind() == IoErrorKind::AlreadyExists => Err(ServerError::AlreadyRunning {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(bind_err(e)),
    }
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "control socket: accept failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Some(id) = admit(shared, &stream) else {
            // Answer once the request line is in (at most BUSY_READ), so
            // the client reads the answer rather than a broken pipe.
            let _ = std::thread::Builder::new()
                .name("shardrep-ctl-busy".into())
                .spawn(move || {
                    let _ = stream.set_read_timeout(Some(BUSY_READ));
                    let mut request = Vec::new();
                    let _ = BufReader::new((&stream).take(MAX_REQUEST_LINE_BYTES as u64 + 1))
                        .read_until(b'\n', &mut request);
                    let busy = Response::Error(ControlError::new(
                        ErrorKind::Busy,
                        format!(
                            "too many control requests in progress (limit {MAX_CONNECTIONS}); \
                             try again"
                        ),
                    ));
                    let _ = write_response(&mut stream, &busy);
                });
            continue;
        };
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("shardrep-ctl-conn".into())
            .spawn(move || {
                serve_connection(stream, &conn_shared, id);
                lock(&conn_shared.connections).remove(&id);
            });
        match spawned {
            Ok(handle) => {
                let mut threads = lock(&shared.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
            }
            Err(e) => {
                lock(&shared.connections).remove(&id);
                tracing::warn!(error = %e, "control socket: cannot start a connection thread");
            }
        }
    }
}

/// Gives a new connection a slot: when all [`MAX_CONNECTIONS`] are taken,
/// the connection idle the longest is closed for it. `None` when every
/// connection is serving a request.
fn admit(shared: &Shared, stream: &UnixStream) -> Option<u64> {
    let handle = stream.try_clone().ok()?;
    let mut connections = lock(&shared.connections);
    if connections.len() >= MAX_CONNECTIONS {
        let oldest = connections
            .iter()
            .filter_map(|(&id, c)| c.idle_since.map(|t| (t, id)))
            .min()
            .map(|(_, id)| id);
        let evicted = oldest.and_then(|id| connections.remove(&id))?;
        let _ = evicted.stream.shutdown(std::net::Shutdown::Both);
        tracing::info!(
            limit = MAX_CONNECTIONS,
            "control socket: every connection taken; closed the one idle the longest"
        );
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    connections.insert(
        id,
        Connection {
            stream: handle,
            idle_since: Some(Instant::now()),
        },
    );
    Some(id)
}

fn write_response(stream: &mut UnixStream, response: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(response).unwrap_or_else(|e| {
        serde_json::to_vec(&Response::Error(ControlError::new(
            ErrorKind::Internal,
            format!("cannot encode the response: {e}"),
        )))
        .expect("an error response encodes")
    });
    line.push(b'\n');
    stream.write_all(&line)?;
    stream.flush()
}

/// Reads request lines until the client closes, answering each; closes
/// the connection once it has been idle longer than the idle timeout, or
/// when the accept loop closed it for a new one.
fn serve_connection(stream: UnixStream, shared: &Shared, id: u64) {
    let _ = stream.set_read_timeout(Some(IDLE_CHECK));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line: Vec<u8> = Vec::new();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        if shared.idle_expired(id) {
            let _ = writer.shutdown(std::net::Shutdown::Both);
            return;
        }
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e)
                if matches!(
                    e.kind(),
                    IoErrorKind::WouldBlock | IoErrorKind::TimedOut | IoErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        if available.is_empty() {
            // End of input: a last line without its newline still counts
            // (unless the server closed the connection).
            if shared.set_idle(id, false) {
                if let Some(response) = answer_line(&line, shared) {
                    let _ = write_response(&mut writer, &response);
                }
            }
            return;
        }
        let (chunk, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..chunk]);
        reader.consume(chunk + usize::from(complete));
        if line.len() > MAX_REQUEST_LINE_BYTES {
            let response = Response::Error(ControlError::bad_request(format!(
                "request line longer than {MAX_REQUEST_LINE_BYTES} bytes"
            )));
            let _ = write_response(&mut writer, &response);
            return;
        }
        if complete {
            if !shared.set_idle(id, false) {
                return;
            }
            let response = answer_line(&line, shared);
            line.clear();
            if let Some(response) = response {
                if write_response(&mut writer, &response).is_err() {
                    return;
                }
            }
            shared.set_idle(id, true);
        }
    }
}

/// The response to one line; `None` for a blank line.
fn answer_line(line: &[u8], shared: &Shared) -> Option<Response> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(_) => {
            return Some(Response::Error(ControlError::bad_request(
                "malformed request: not UTF-8",
            )))
        }
    };
    if text.is_empty() {
        return None;
    }
    let request: Request = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            return Some(Response::Error(ControlError::bad_request(format!(
                "malformed request: {e}"
            ))))
        }
    };
    let name = request.name();
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        dispatch(&*shared.handler, request, &shared.stop)
    }))
    .unwrap_or_else(|_| {
        Err(ControlError::new(
            ErrorKind::Internal,
            format!("the service failed handling {name} (panic); see its log"),
        ))
    });
    match &result {
        Ok(_) => tracing::debug!(
            request = name,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "control request done"
        ),
        Err(e) => {
            tracing::info!(request = name, kind = ?e.kind, error = %e.message, "control request failed")
        }
    }
    Some(result.into())
}

fn to_json<T: serde::Serialize>(v: T) -> Result<Value, ControlError> {
    serde_json::to_value(v).map_err(|e| {
        ControlError::new(
            ErrorKind::Internal,
            format!("cannot encode the result: {e}"),
        )
    })
}

/// Runs one request against `handler`; `stop` ends a `wait` early.
///
/// # Errors
/// The request's validation error, the handler's error, or `wait`'s
/// time-out, failure or shutdown.
pub fn dispatch(
    handler: &dyn ControlHandler,
    request: Request,
    stop: &AtomicBool,
) -> Result<Value, ControlError> {
    request.validate()?;
    match request {
        Request::Status { name: None } => to_json(handler.status()?),
        Request::Status {
            name: Some(StatusName::Channels),
        } => to_json(handler.channel_status()?),
        Request::Status {
            name: Some(StatusName::Shards),
        } => to_json(handler.shard_status()?),
        Request::Status {
            name: Some(StatusName::Queue),
        } => handler.queue_status(),
        Request::Services => to_json(handler.services()?),
        Request::Online {
            skip_seqnos,
            until_seqno,
        } => handler.online(OnlineRequest {
            skip_seqnos,
            until_seqno,
        }),
        Request::Offline {
            immediate,
            at_seqno,
        } => handler.offline(OfflineRequest {
            immediate,
            at_seqno,
        }),
        Request::Wait {
            until,
            timeout_secs,
        } => to_json(wait(
            handler,
            until,
            Duration::from_secs(timeout_secs),
            stop,
        )?),
        Request::ShardList => to_json(handler.shard_list()?),
        Request::ShardInsert { rows } => Ok(json!({ "inserted": handler.shard_insert(rows)? })),
        Request::ShardUpdate { rows } => Ok(json!({ "updated": handler.shard_update(rows)? })),
        Request::ShardDelete { ids } => Ok(json!({ "deleted": handler.shard_delete(ids)? })),
        Request::ShardDeleteAll => Ok(json!({ "deleted": handler.shard_delete_all()? })),
        Request::LogList { low, high } => to_json(handler.log_list(low, high)?),
        Request::LogInfo => handler.log_info(),
        Request::Handback { start_slave } => handler.handback(start_slave),
        Request::Reset {
            confirm,
            drop_catalog,
        } => handler.reset(&confirm, drop_catalog),
        Request::SourceSet {
            host,
            port,
            user,
            server_id,
            timeout_secs,
        } => handler.source_set(SourceSetRequest {
            host,
            port,
            user,
            server_id,
            timeout_secs,
        }),
        Request::Status {
            name: Some(StatusName::Check),
        } => handler.check_status(),
        Request::CheckCancel => handler.check_cancel(),
        Request::Check {
            tables,
            schemas,
            chunk_rows,
            chunk_time_ms,
            pause_ms,
        } => {
            let defaults = crate::check::CheckOptions::default();
            handler.check(crate::replicator::check::CheckRequest {
                // Validated with the request.
                tables: tables
                    .iter()
                    .filter_map(|t| crate::check::name::parse_table(t).ok())
                    .collect(),
                schemas: schemas
                    .iter()
                    .filter_map(|s| crate::check::name::parse_schema(s).ok())
                    .collect(),
                options: crate::check::CheckOptions {
                    chunk_rows: chunk_rows.unwrap_or(defaults.chunk_rows),
                    chunk_time: chunk_time_ms.map(Duration::from_millis),
                    pause: Duration::from_millis(pause_ms.unwrap_or(0)),
                    ..defaults
                },
                catch_up_timeout: CHECK_CATCH_UP_TIMEOUT,
            })
        }
    }
}

/// The answer of a `wait` for offline `number` once it has completed
/// (`None` while it has not): its end state, and the applied seqno and
/// state of a status taken after the handler said so (a state that
/// differs from the end was changed by another request since).
///
/// # Errors
/// [`ErrorKind::Failed`] when it ended in `OFFLINE:ERROR` (with the
/// pending error while the service is still there), or when so many
/// offlines followed it that how it ended is forgotten; the handler's
/// error.
fn offline_ended(
    handler: &dyn ControlHandler,
    number: u64,
) -> Result<Option<WaitResult>, ControlError> {
    let end = handler.offline_end(number)?;
    if end == OfflineEnd::Pending {
        return Ok(None);
    }
    let status = handler.status()?;
    let applied = status
        .applied_last_seqno
        .map_or_else(|| "none".to_string(), |n| n.to_string());
    let ended = match end {
        OfflineEnd::Pending => return Ok(None),
        OfflineEnd::Ended(state) => state,
        OfflineEnd::Forgotten => {
            return Err(ControlError::failed(format!(
                "offline {number} completed, but more than {} offlines came after it: how it \
                 ended is not known (state {}, appliedLastSeqno {applied})",
                crate::replicator::state::OFFLINE_ENDS_KEPT,
                status.state
            )))
        }
    };
    if ended == State::OfflineError {
        let why = match (&status.pending_error, status.state) {
            (Some(e), State::OfflineError | State::OfflineNormal) => e.to_string(),
            _ => "the error is in the service's log".to_string(),
        };
        let now = if status.state == State::OfflineError {
            String::new()
        } else {
            format!(
                "; another request has since changed the state to {}",
                status.state
            )
        };
        return Err(ControlError::failed(format!(
            "offline {number} ended in OFFLINE:ERROR (appliedLastSeqno {applied}{now}): {why}"
        )));
    }
    Ok(Some(WaitResult {
        state: ended,
        applied_last_seqno: status.applied_last_seqno,
        state_now: (status.state != ended).then_some(status.state),
    }))
}

/// `wait`: polls `handler.status()` every [`WAIT_POLL`] (see the module
/// doc); for [`WaitFor::Offline`], `handler.offline_end()` too.
///
/// # Errors
/// [`ErrorKind::Timeout`] after `timeout`; [`ErrorKind::Failed`] when the
/// service is `OFFLINE:ERROR` and that is not the state waited for;
/// [`ErrorKind::ShuttingDown`] when `stop` is set; the handler's error.
pub fn wait(
    handler: &dyn ControlHandler,
    until: WaitFor,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<WaitResult, ControlError> {
    let started = Instant::now();
    loop {
        let status = handler.status()?;
        if until.is_met(&status) {
            return Ok(WaitResult {
                state: status.state,
                applied_last_seqno: status.applied_last_seqno,
                state_now: None,
            });
        }
        let applied = status
            .applied_last_seqno
            .map_or_else(|| "none".to_string(), |n| n.to_string());
        if let WaitFor::Offline(number) = until {
            if let Some(done) = offline_ended(handler, number)? {
                return Ok(done);
            }
        }
        if status.state == State::OfflineError && until != WaitFor::State(State::OfflineError) {
            let why = status.pending_error.as_ref().map_or_else(
                || "no pending error recorded".to_string(),
                |e| e.to_string(),
            );
            return Err(ControlError::failed(format!(
                "the service is OFFLINE:ERROR while waiting for {until} (appliedLastSeqno {applied}): {why}"
            )));
        }
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(ControlError::new(
                ErrorKind::Timeout,
                format!(
                    "timed out after {} s waiting for {until} (state {}, appliedLastSeqno {applied})",
                    timeout.as_secs_f64(),
                    status.state
                ),
            ));
        }
        if stop.load(Ordering::Acquire) {
            return Err(ControlError::new(
                ErrorKind::ShuttingDown,
                format!("the service is stopping; stopped waiting for {until}"),
            ));
        }
        std::thread::sleep(WAIT_POLL.min(timeout - elapsed));
    }
}
