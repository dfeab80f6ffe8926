//! Idle control connections cannot lock the control socket: a connection
//! with no request in progress is closed after the idle timeout, and when
//! all `MAX_CONNECTIONS` slots are taken by idle connections a new request
//! (shardrepctl's) is served, the connection idle the longest closed for
//! it. Only as many requests in progress (`wait`s) make a later one busy.

#[path = "queue_support/mod.rs"]
mod queue_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use shardrep::control::protocol::WaitFor;
use shardrep::control::protocol::{ControlError, OfflineRequest, OnlineRequest, Request, Status};
use shardrep::control::server::MAX_CONNECTIONS;
use shardrep::control::{ControlHandler, ControlServer};
use shardrep::replicator::state::State;

use queue_support::TempDir;

struct Offline;

impl ControlHandler for Offline {
    fn status(&self) -> Result<Status, ControlError> {
        Ok(Status::new("idle", "applier", State::OfflineNormal))
    }
    fn online(&self, _: OnlineRequest) -> Result<Value, ControlError> {
        Ok(Value::Null)
    }
    fn offline(&self, _: OfflineRequest) -> Result<Value, ControlError> {
        Ok(Value::Null)
    }
}

fn start(dir: &TempDir) -> (ControlServer, std::path::PathBuf) {
    std::fs::create_dir_all(dir.path()).unwrap();
    let socket = dir.path().join("c.sock");
    let server = ControlServer::start(&socket, Arc::new(Offline)).unwrap();
    (server, socket)
}

/// `shardrepctl --socket S status`: (exit code, stdout, stderr).
fn ctl_status(socket: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardrepctl"))
        .arg("--socket")
        .arg(socket)
        .arg("status")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether the server closed `conn` (a read sees end of input) within
/// `within`.
fn closed_by_server(conn: &mut UnixStream, within: Duration) -> bool {
    conn.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 64];
    matches!(conn.read(&mut buf), Ok(0))
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let dir = TempDir::new("ctl-idle");
    let (server, socket) = start(&dir);
    server.set_idle_timeout(Duration::from_millis(600));
    // Silent since connecting.
    let mut silent = UnixStream::connect(&socket).unwrap();
    // Half a request line, never finished.
    let mut partial = UnixStream::connect(&socket).unwrap();
    partial.write_all(b"{\"request\":").unwrap();
    // One answered request, then silence.
    let mut answered = UnixStream::connect(&socket).unwrap();
    answered.write_all(b"{\"request\":\"status\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(answered.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("OFFLINE:NORMAL"), "{line}");
    wait_until("3 connections", Duration::from_secs(2), || {
        server.connections() == 3
    });
    let started = Instant::now();
    for conn in [&mut silent, &mut partial, &mut answered] {
        assert!(closed_by_server(conn, Duration::from_secs(5)));
    }
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    wait_until("no connection left", Duration::from_secs(2), || {
        server.connections() == 0
    });
    assert_eq!(ctl_status(&socket).0, 0);
    server.shutdown();
}

#[test]
fn a_new_request_is_served_with_every_slot_taken_by_idle_connections() {
    let dir = TempDir::new("ctl-full");
    let (server, socket) = start(&dir);
    let mut idle: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let c = UnixStream::connect(&socket).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            c
        })
        .collect();
    wait_until("all slots taken", Duration::from_secs(5), || {
        server.connections() == MAX_CONNECTIONS
    });
    let (code, out, err) = ctl_status(&socket);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("OFFLINE:NORMAL"), "{out}");
    // The connection idle the longest was closed for it, the others are
    // still open.
    assert!(closed_by_server(&mut idle[0], Duration::from_secs(2)));
    for conn in idle.iter_mut().skip(1) {
        assert!(!closed_by_server(conn, Duration::from_millis(20)));
    }
    wait_until("31 connections", Duration::from_secs(2), || {
        server.connections() == MAX_CONNECTIONS - 1
    });
    // A new idle connection takes the free slot; the next request closes
    // the next oldest (idle[1]), not the newest.
    let _newest = UnixStream::connect(&socket).unwrap();
    wait_until("all slots taken again", Duration::from_secs(2), || {
        server.connections() == MAX_CONNECTIONS
    });
    assert_eq!(ctl_status(&socket).0, 0);
    assert!(closed_by_server(&mut idle[1], Duration::from_secs(2)));
    assert!(!closed_by_server(&mut idle[2], Duration::from_millis(20)));
    server.shutdown();
}

#[test]
fn only_requests_in_progress_make_a_new_one_busy() {
    let dir = TempDir::new("ctl-busy");
    let (server, socket) = start(&dir);
    let wait = serde_json::to_string(&Request::Wait {
        until: WaitFor::State(State::Online),
        timeout_secs: 30,
    })
    .unwrap();
    let _waits: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let mut c = UnixStream::connect(&socket).unwrap();
            c.write_all(format!("{wait}\n").as_bytes()).unwrap();
            c
        })
        .collect();
    wait_until("all slots waiting", Duration::from_secs(5), || {
        server.connections() == MAX_CONNECTIONS
    });
    std::thread::sleep(Duration::from_millis(200));
    let (code, out, err) = ctl_status(&socket);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("too many control requests in progress"),
        "{err}"
    );
    server.shutdown();
}
