//! The control socket end to end: the real [`ControlServer`] on a temporary
//! socket with an in-memory fake of the replicator ([`Fake`]), driven by the
//! real `shardrepctl` binary. Every subcommand is checked for its exact
//! output, exit code and the request the handler received; the socket's
//! mode, refusal of a second server, replacement of a stale socket, the
//! client's message without a service, `wait` and malformed lines too.
//!
//! The fake stands in for the replicator because what is tested here is
//! the protocol; tests against the real replicator live with it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use shardrep::control::{
    ChannelStatus, ControlError, ControlHandler, ControlServer, ErrorKind, LogEntry,
    OfflineRequest, OnlineRequest, ServerError, ShardRow, ShardStatus, Status,
};
use shardrep::replicator::state::{Event, PendingError, State, StateMachine};
use shardrep::shard::map::{ShardEntry, ShardMap};

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// A directory under /tmp removed on drop (short, for socket paths).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shardrep-ctl-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the fake holds: a real state machine and a shard map, with fixed
/// numbers so that outputs are exact.
struct Inner {
    machine: StateMachine,
    applied: Option<u64>,
    /// `online` was accepted: the next `status` completes it.
    synchronizing: bool,
    /// `offline` was accepted: `status` completes it after this instant.
    offline_done_at: Option<Instant>,
    offline_at_seqno: Option<u64>,
    until_seqno: Option<u64>,
    shards: ShardMap,
    /// `handback` refused after an unclean offline.
    handback_needs_clean: bool,
}

/// An in-memory replicator: records every call it receives.
struct Fake {
    inner: Mutex<Inner>,
    calls: Mutex<Vec<String>>,
}

impl Fake {
    fn new(state: State) -> Arc<Fake> {
        let mut machine = StateMachine::new();
        match state {
            State::OfflineNormal => {}
            State::Online => {
                machine.apply(Event::Online).unwrap();
                machine.apply(Event::Synchronized).unwrap();
            }
            State::OfflineError => {
                machine.apply(Event::Online).unwrap();
                let mut e = PendingError::new("channel 3: duplicate key applying seqno 42");
                e.code = Some(1062);
                e.seqno = Some(42);
                e.event_id = Some("mariadb-bin.000003:2048".into());
                e.shard = Some("acme".into());
                e.channel = Some(3);
                machine
                    .apply(Event::Fail(e.with_exception_message(
                        "Duplicate entry '7' for key 'PRIMARY' in INSERT INTO acme.t ...",
                    )))
                    .unwrap();
            }
            other => panic!("fake cannot start in {other}"),
        }
        let shards = ShardMap::parse(
            "shard_id master critical\nacme sjc false\n\"#UNKNOWN\" sjc true\nzeta #LOCAL true\n",
            "test",
        )
        .unwrap();
        Arc::new(Fake {
            inner: Mutex::new(Inner {
                machine,
                applied: Some(41),
                synchronizing: false,
                offline_done_at: None,
                offline_at_seqno: None,
                until_seqno: None,
                shards,
                handback_needs_clean: true,
            }),
            calls: Mutex::new(Vec::new()),
        })
    }

    fn record(&self, call: impl Into<String>) {
        self.calls.lock().unwrap().push(call.into());
    }

    /// The calls received so far (`status` polls excluded), and forget
    /// them.
    fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn set_applied(&self, n: u64) {
        self.inner.lock().unwrap().applied = Some(n);
    }
}

fn status_of(i: &Inner) -> Status {
    let mut s = Status::new("sjc", "applier", i.machine.state());
    s.applied_last_seqno = i.applied;
    s.applied_last_event_id = Some("mariadb-bin.000003:1234".into());
    s.applied_latency = Some(0.25);
    s.relative_latency = Some(1.5);
    s.channels = 8;
    s.serialization_count = 3;
    s.dropped_count = 2;
    s.minimum_stored_seq_no = Some(0);
    s.maximum_stored_seq_no = Some(57);
    s.pending_error = i.machine.pending_error().cloned();
    s.until_seqno = i.until_seqno;
    s.offline_at_seqno = i.offline_at_seqno;
    s.last_offline_clean = i
        .machine
        .state()
        .is_offline()
        .then(|| i.machine.last_offline_clean());
    s.uptime_seconds = 12.5;
    s.time_in_state_seconds = 3.25;
    s
}

fn invalid(m: impl Into<String>) -> ControlError {
    ControlError::new(ErrorKind::Invalid, m)
}

impl ControlHandler for Fake {
    fn status(&self) -> Result<Status, ControlError> {
        let mut i = self.inner.lock().unwrap();
        if i.synchronizing {
            i.synchronizing = false;
            i.machine.apply(Event::Synchronized)?;
        }
        if i.offline_done_at.is_some_and(|t| Instant::now() >= t) {
            i.offline_done_at = None;
            let clean = !i.machine.offline_immediate();
            i.machine.apply(Event::OfflineDone { clean })?;
        }
        Ok(status_of(&i))
    }

    fn channel_status(&self) -> Result<Vec<ChannelStatus>, ControlError> {
        self.record("channel_status");
        Ok((0..2)
            .map(|c| ChannelStatus {
                channel: c,
                applied_last_seqno: Some(40 + u64::from(c)),
                applied_last_event_id: Some(format!("mariadb-bin.000003:{}", 1000 + c)),
                applied_latency: Some(0.5),
                applied_count: 10 * u64::from(c),
                shard_id: if c == 0 { Some("acme".into()) } else { None },
            })
            .collect())
    }

    fn shard_status(&self) -> Result<Vec<ShardStatus>, ControlError> {
        self.record("shard_status");
        Ok(vec![ShardStatus {
            shard_id: "acme".into(),
            channel: 5,
            critical: false,
            applied_last_seqno: Some(41),
            applied_last_event_id: Some("mariadb-bin.000003:1234".into()),
            applied_latency: Some(0.125),
            event_count: 17,
            foreign_key_group: Vec::new(),
            serialized_reason: None,
        }])
    }

    fn queue_status(&self) -> Result<Value, ControlError> {
        self.record("queue_status");
        Ok(
            json!({"minimumStoredSeqNo": 0, "maximumStoredSeqNo": 57, "count": 58, "sizeBytes": 4096}),
        )
    }

    fn online(&self, r: OnlineRequest) -> Result<Value, ControlError> {
        self.record(format!(
            "online skip={} until={:?}",
            r.skip_seqnos.map_or("-".into(), |s| s.to_string()),
            r.until_seqno
        ));
        let mut i = self.inner.lock().unwrap();
        let state = i.machine.apply(Event::Online)?;
        i.synchronizing = true;
        i.until_seqno = r.until_seqno;
        Ok(json!({ "state": state }))
    }

    fn offline(&self, r: OfflineRequest) -> Result<Value, ControlError> {
        self.record(format!(
            "offline immediate={} at={:?}",
            r.immediate, r.at_seqno
        ));
        let mut i = self.inner.lock().unwrap();
        if let Some(n) = r.at_seqno {
            if i.machine.state() != State::Online {
                return Err(ControlError::illegal_state(format!(
                    "cannot offline at a seqno in state {}",
                    i.machine.state()
                )));
            }
            i.offline_at_seqno = Some(n);
            return Ok(json!({ "state": "ONLINE", "offlineAtSeqno": n }));
        }
        let event = if r.immediate {
            Event::OfflineImmediate
        } else {
            Event::Offline
        };
        let state = i.machine.apply(event)?;
        if state == State::GoingOffline {
            i.offline_done_at = Some(Instant::now() + Duration::from_millis(150));
        }
        Ok(json!({ "state": state }))
    }

    fn shard_list(&self) -> Result<Vec<ShardRow>, ControlError> {
        self.record("shard_list");
        Ok(self
            .inner
            .lock()
            .unwrap()
            .shards
            .iter()
            .map(ShardRow::from)
            .collect())
    }

    fn shard_insert(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        self.record(format!(
            "shard_insert {}",
            serde_json::to_string(&rows).unwrap()
        ));
        let mut i = self.inner.lock().unwrap();
        let mut map = i.shards.clone();
        for row in &rows {
            map.insert(ShardEntry::try_from(row)?)
                .map_err(|e| invalid(e.to_string()))?;
        }
        i.shards = map;
        Ok(rows.len())
    }

    fn shard_update(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        self.record(format!(
            "shard_update {}",
            serde_json::to_string(&rows).unwrap()
        ));
        let mut i = self.inner.lock().unwrap();
        let mut map = i.shards.clone();
        for row in &rows {
            map.update(ShardEntry::try_from(row)?)
                .map_err(|e| ControlError::new(ErrorKind::NotFound, e.to_string()))?;
        }
        i.shards = map;
        Ok(rows.len())
    }

    fn shard_delete(&self, ids: Vec<String>) -> Result<usize, ControlError> {
        self.record(format!("shard_delete {ids:?}"));
        let mut i = self.inner.lock().unwrap();
        let mut map = i.shards.clone();
        for id in &ids {
            map.delete(id)
                .map_err(|e| ControlError::new(ErrorKind::NotFound, e.to_string()))?;
        }
        i.shards = map;
        Ok(ids.len())
    }

    fn shard_delete_all(&self) -> Result<usize, ControlError> {
        self.record("shard_delete_all");
        Ok(self.inner.lock().unwrap().shards.delete_all())
    }

    fn log_list(&self, low: Option<u64>, high: Option<u64>) -> Result<Vec<LogEntry>, ControlError> {
        self.record(format!("log_list low={low:?} high={high:?}"));
        let (low, high) = (low.unwrap_or(0), high.unwrap_or(3).min(3));
        Ok((low..=high)
            .map(|n| LogEntry {
                seqno: n,
                text: format!("SEQ# = {n}\n- SHARD = acme"),
                transaction: json!({ "seqno": n, "shard": "acme" }),
            })
            .collect())
    }

    fn log_info(&self) -> Result<Value, ControlError> {
        self.record("log_info");
        Ok(
            json!({"minimumStoredSeqNo": 0, "maximumStoredSeqNo": 3, "count": 4, "segments": [{"start": 0}]}),
        )
    }

    fn handback(&self, start_slave: bool) -> Result<Value, ControlError> {
        self.record(format!("handback start_slave={start_slave}"));
        let i = self.inner.lock().unwrap();
        if i.machine.state() != State::OfflineNormal {
            return Err(ControlError::illegal_state(format!(
                "handback needs OFFLINE:NORMAL, the service is {}",
                i.machine.state()
            )));
        }
        if i.handback_needs_clean && !i.machine.last_offline_clean() {
            return Err(ControlError::illegal_state(
                "handback refused: the last offline was not clean (restart rows differ); go online and offline cleanly first",
            ));
        }
        Ok(json!({
            "masterLogFile": "mariadb-bin.000003",
            "masterLogPos": 1234,
            "slaveStarted": start_slave,
        }))
    }
}

/// A server with a fake in `state` on a fresh socket.
struct Service {
    fake: Arc<Fake>,
    server: Option<ControlServer>,
    socket: PathBuf,
    _dir: TempDir,
}

impl Service {
    fn start(state: State) -> Service {
        let dir = TempDir::new();
        let socket = dir.path().join("run").join("ctl.sock");
        let fake = Fake::new(state);
        let server = ControlServer::start(&socket, fake.clone()).expect("start the server");
        Service {
            fake,
            server: Some(server),
            socket,
            _dir: dir,
        }
    }

    /// Runs `shardrepctl --socket <socket> args...` with `stdin`.
    fn ctl(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut full = vec!["--socket", self.socket.to_str().unwrap()];
        full.extend_from_slice(args);
        ctl(&full, stdin)
    }

    fn calls(&self) -> Vec<String> {
        self.fake.take_calls()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// What one `shardrepctl` run did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ctl(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardrepctl"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("SHARDREP_CONFIG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run shardrepctl");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[track_caller]
fn ok(run: &Run, stdout: &str) {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    assert_eq!(run.stdout, stdout, "{run:?}");
}

#[track_caller]
fn fails(run: &Run, code: i32, stderr: &str) {
    assert_eq!(run.code, code, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.stderr, stderr, "{run:?}");
}

// ---------------------------------------------------------------------------
// Subcommands
// ---------------------------------------------------------------------------

const ONLINE_STATUS: &str = "\
appliedLastEventId             : mariadb-bin.000003:1234
appliedLastSeqno               : 41
appliedLatency                 : 0.250
applyMethod                    : binlog
applyRateBytesPerSecond        : NONE
applyRateTransactionsPerSecond : NONE
binlogGtids                    : master
binlogGtidsConfigured          : auto
blocksCommittedCount           : 0
bytesBehind                    : NONE
catchUpEtaSeconds              : NONE
channels                       : 8
dependencyWaitCount            : 0
droppedCount                   : 2
errorCounts                    : NONE
fallbackCounts                 : NONE
inFlightCount                  : 0
inFlightKeys                   : 0
lastOfflineClean               : NONE
masterBinlogEnd                : NONE
masterGtidPos                  : NONE
maximumStoredSeqNo             : 57
minimumStoredSeqNo             : 0
offlineAtSeqno                 : NONE
openTempTables                 : 0
parallelism                    : shard
pendingError                   : NONE
pendingErrorChannel            : NONE
pendingErrorCode               : NONE
pendingErrorEventId            : NONE
pendingErrorSeqno              : NONE
pendingErrorShard              : NONE
pendingExceptionMessage        : NONE
relativeLatency                : 1.500
retryCount                     : 0
retryCounts                    : NONE
role                           : applier
rowChangesAppliedCount         : 0
serializationCount             : 3
serviceName                    : sjc
skippedCount                   : 0
skippedSeqnos                  : NONE
sourceFirstSeqno               : NONE
sourceHost                     : NONE
sourcePort                     : NONE
sourceSwitchUnderWay           : NONE
sourceSwitchUnfinished         : NONE
sourceSwitchedAt               : NONE
state                          : ONLINE
timeInStateSeconds             : 3.250
transactionsAppliedCount       : 0
transactionsBehind             : NONE
unknownOutcomeCommittedCount   : 0
unknownOutcomeReappliedCount   : 0
untilSeqno                     : NONE
uptimeSeconds                  : 12.500
windowWaitCount                : 0
";

#[test]
fn status_text_json_and_named_views() {
    let svc = Service::start(State::Online);
    ok(&svc.ctl(&["status"], None), ONLINE_STATUS);

    let run = svc.ctl(&["status", "--json"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.ends_with('\n') && run.stdout.lines().count() == 1);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["state"], "ONLINE");
    assert_eq!(v["appliedLastSeqno"], 41);
    assert_eq!(v["appliedLatency"], 0.25);
    assert_eq!(v["pendingError"], Value::Null);
    assert_eq!(v.as_object().unwrap().len(), 57);
    let back: Status = serde_json::from_value(v).unwrap();
    assert_eq!(
        back.applied_last_event_id.as_deref(),
        Some("mariadb-bin.000003:1234")
    );

    ok(
        &svc.ctl(&["status", "--name", "channels"], None),
        "\
appliedCount       : 0
appliedLastEventId : mariadb-bin.000003:1000
appliedLastSeqno   : 40
appliedLatency     : 0.500
channel            : 0
shardId            : acme

appliedCount       : 10
appliedLastEventId : mariadb-bin.000003:1001
appliedLastSeqno   : 41
appliedLatency     : 0.500
channel            : 1
shardId            : NONE
",
    );
    ok(
        &svc.ctl(&["status", "--name", "shards"], None),
        "\
appliedLastEventId : mariadb-bin.000003:1234
appliedLastSeqno   : 41
appliedLatency     : 0.125
channel            : 5
critical           : false
eventCount         : 17
shardId            : acme
",
    );
    ok(
        &svc.ctl(&["status", "--name", "queue"], None),
        "\
count              : 58
maximumStoredSeqNo : 57
minimumStoredSeqNo : 0
sizeBytes          : 4096
",
    );
    ok(
        &svc.ctl(&["--json", "status", "--name", "queue"], None),
        "{\"count\":58,\"maximumStoredSeqNo\":57,\"minimumStoredSeqNo\":0,\"sizeBytes\":4096}\n",
    );
    assert_eq!(
        svc.calls(),
        [
            "channel_status",
            "shard_status",
            "queue_status",
            "queue_status"
        ]
    );

    let run = svc.ctl(&["status", "--name", "disks"], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("invalid value 'disks'"), "{run:?}");
}

#[test]
fn status_shows_the_pending_error() {
    let svc = Service::start(State::OfflineError);
    let run = svc.ctl(&["status"], None);
    assert_eq!(run.code, 0, "{run:?}");
    for line in [
        "pendingError                   : channel 3: duplicate key applying seqno 42",
        "pendingErrorChannel            : 3",
        "pendingErrorCode               : 1062",
        "pendingErrorEventId            : mariadb-bin.000003:2048",
        "pendingErrorSeqno              : 42",
        "pendingErrorShard              : acme",
        "pendingExceptionMessage        : Duplicate entry '7' for key 'PRIMARY' in INSERT INTO acme.t ...",
        "state                          : OFFLINE:ERROR",
    ] {
        assert!(
            run.stdout.lines().any(|l| l == line),
            "{line}\n{}",
            run.stdout
        );
    }
}

#[test]
fn services_lists_the_one_service() {
    let svc = Service::start(State::Online);
    ok(
        &svc.ctl(&["services"], None),
        "role        : applier\nserviceName : sjc\nstate       : ONLINE\n",
    );
    ok(
        &svc.ctl(&["services", "--json"], None),
        "[{\"role\":\"applier\",\"serviceName\":\"sjc\",\"state\":\"ONLINE\"}]\n",
    );
}

#[test]
fn online_offline_and_handback() {
    let svc = Service::start(State::OfflineNormal);
    ok(
        &svc.ctl(
            &["online", "--skip-seqno", "5-7,3", "--until-seqno", "90"],
            None,
        ),
        "state : GOING-ONLINE:SYNCHRONIZING\n",
    );
    assert_eq!(svc.calls(), ["online skip=3,5-7 until=Some(90)"]);
    ok(
        &svc.ctl(&["wait", "--state", "ONLINE", "--timeout-secs", "5"], None),
        "appliedLastSeqno : 41\nstate            : ONLINE\n",
    );
    // Already online: the state machine's refusal, exit 1.
    fails(
        &svc.ctl(&["online"], None),
        1,
        "shardrepctl: cannot online in state ONLINE: already going online\n",
    );
    assert_eq!(svc.calls(), ["online skip=- until=None"]);
    // Handback while online: refused.
    fails(
        &svc.ctl(&["handback"], None),
        1,
        "shardrepctl: handback needs OFFLINE:NORMAL, the service is ONLINE\n",
    );
    assert_eq!(svc.calls(), ["handback start_slave=false"]);

    // Clean offline: waits for OFFLINE:NORMAL (the fake takes 150 ms).
    let started = Instant::now();
    ok(
        &svc.ctl(&["offline"], None),
        "appliedLastSeqno : 41\nstate            : OFFLINE:NORMAL\n",
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(svc.calls(), ["offline immediate=false at=None"]);
    fails(
        &svc.ctl(&["offline"], None),
        1,
        "shardrepctl: cannot offline in state OFFLINE:NORMAL: already offline\n",
    );
    // With --json the error is one JSON line: a program reads the kind.
    fails(
        &svc.ctl(&["--json", "offline"], None),
        1,
        "{\"error\":\"cannot offline in state OFFLINE:NORMAL: already offline\",\
         \"exitCode\":1,\"kind\":\"illegalState\"}\n",
    );
    svc.calls();

    ok(
        &svc.ctl(&["handback", "--start-slave"], None),
        "masterLogFile : mariadb-bin.000003\nmasterLogPos  : 1234\nslaveStarted  : true\n",
    );
    assert_eq!(svc.calls(), ["handback start_slave=true"]);

    // offline --immediate --handback: the handback is refused (unclean).
    svc.ctl(&["online"], None);
    svc.ctl(&["wait", "--state", "ONLINE"], None);
    svc.calls();
    let run = svc.ctl(&["offline", "--immediate", "--handback"], None);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stdout,
        "appliedLastSeqno : 41\nstate            : OFFLINE:NORMAL\n"
    );
    assert_eq!(
        run.stderr,
        "shardrepctl: handback refused: the last offline was not clean (restart rows differ); go online and offline cleanly first\n"
    );
    assert_eq!(
        svc.calls(),
        [
            "offline immediate=true at=None",
            "handback start_slave=false"
        ]
    );

    // offline --handback --start-slave after a clean offline.
    svc.ctl(&["online"], None);
    svc.ctl(&["wait", "--state", "ONLINE"], None);
    svc.calls();
    ok(
        &svc.ctl(&["offline", "--handback", "--start-slave"], None),
        "appliedLastSeqno : 41\nstate            : OFFLINE:NORMAL\n\
         masterLogFile : mariadb-bin.000003\nmasterLogPos  : 1234\nslaveStarted  : true\n",
    );
    assert_eq!(
        svc.calls(),
        [
            "offline immediate=false at=None",
            "handback start_slave=true"
        ]
    );

    // offline --at-seqno: deferred, returns at once with the service's answer.
    svc.ctl(&["online"], None);
    svc.ctl(&["wait", "--state", "ONLINE"], None);
    svc.calls();
    ok(
        &svc.ctl(&["offline", "--at-seqno", "50"], None),
        "offlineAtSeqno : 50\nstate          : ONLINE\n",
    );
    assert_eq!(svc.calls(), ["offline immediate=false at=Some(50)"]);

    // Usage errors never reach the service.
    let run = svc.ctl(&["offline", "--immediate", "--at-seqno", "3"], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("cannot be used with"), "{run:?}");
    let run = svc.ctl(&["offline", "--start-slave"], None);
    assert_eq!(run.code, 2, "{run:?}");
    let run = svc.ctl(&["online", "--skip-seqno", "9-2"], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("invalid value '9-2' for '--skip-seqno <LIST>': range \"9-2\" runs backwards: 9 is above 2"),
        "{run:?}"
    );
    let run = svc.ctl(&["online", "--skip-seqno", "1,,2"], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(svc.calls(), Vec::<String>::new());
}

#[test]
fn wait_for_applied_and_time_out() {
    let svc = Service::start(State::Online);
    // Reached already.
    ok(
        &svc.ctl(&["wait", "--applied", "41"], None),
        "appliedLastSeqno : 41\nstate            : ONLINE\n",
    );
    // Reached while waiting.
    let fake = svc.fake.clone();
    let bump = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        fake.set_applied(45);
        std::thread::sleep(Duration::from_millis(200));
        fake.set_applied(50);
    });
    let started = Instant::now();
    ok(
        &svc.ctl(&["wait", "--applied", "50", "--timeout-secs", "10"], None),
        "appliedLastSeqno : 50\nstate            : ONLINE\n",
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    bump.join().unwrap();
    // Timed out: exit 1 with what was reached.
    let started = Instant::now();
    fails(
        &svc.ctl(&["wait", "--applied", "1000", "--timeout-secs", "1"], None),
        1,
        "shardrepctl: timed out after 1 s waiting for appliedLastSeqno >= 1000 (state ONLINE, appliedLastSeqno 50)\n",
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
    fails(
        &svc.ctl(&["wait", "--state", "OFFLINE:NORMAL", "--timeout-secs", "0"], None),
        1,
        "shardrepctl: timed out after 0 s waiting for state OFFLINE:NORMAL (state ONLINE, appliedLastSeqno 50)\n",
    );
    let run = svc.ctl(&["wait"], None);
    assert_eq!(run.code, 2, "{run:?}");
    let run = svc.ctl(&["wait", "--state", "UP"], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("unknown state \"UP\""), "{run:?}");
}

#[test]
fn wait_fails_at_once_in_offline_error() {
    let svc = Service::start(State::OfflineError);
    let started = Instant::now();
    fails(
        &svc.ctl(&["wait", "--applied", "100", "--timeout-secs", "60"], None),
        1,
        "shardrepctl: the service is OFFLINE:ERROR while waiting for appliedLastSeqno >= 100 \
         (appliedLastSeqno 41): channel 3: duplicate key applying seqno 42; seqno 42; \
         event id mariadb-bin.000003:2048; shard acme; channel 3; code 1062\n",
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    ok(
        &svc.ctl(&["wait", "--state", "offline:error"], None),
        "appliedLastSeqno : 41\nstate            : OFFLINE:ERROR\n",
    );
    // online retries from OFFLINE:ERROR and clears the error.
    ok(
        &svc.ctl(&["online"], None),
        "state : GOING-ONLINE:SYNCHRONIZING\n",
    );
    let run = svc.ctl(&["status", "--json"], None);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["state"], "ONLINE");
    assert_eq!(v["pendingError"], Value::Null);
}

#[test]
fn shard_commands() {
    let svc = Service::start(State::Online);
    let list = "\
shard_id    master  critical
\"#UNKNOWN\"  sjc     true
acme        sjc     false
zeta        #LOCAL  true
";
    ok(&svc.ctl(&["shard", "list"], None), list);
    ok(
        &svc.ctl(&["shard", "list", "--json"], None),
        "[{\"critical\":true,\"master\":\"sjc\",\"shardId\":\"#UNKNOWN\"},\
         {\"critical\":false,\"master\":\"sjc\",\"shardId\":\"acme\"},\
         {\"critical\":true,\"master\":\"#LOCAL\",\"shardId\":\"zeta\"}]\n",
    );
    assert_eq!(svc.calls(), ["shard_list", "shard_list"]);

    // insert: shard.map rows on stdin, any separators, comments.
    ok(
        &svc.ctl(
            &["shard", "insert"],
            Some("# new shards\nshard_id,master,critical\nbeta, nyc, FALSE\ngamma\tsjc\ttrue\n"),
        ),
        "inserted : 2\n",
    );
    assert_eq!(
        svc.calls(),
        [
            r#"shard_insert [{"shardId":"beta","master":"nyc","critical":false},{"shardId":"gamma","master":"sjc","critical":true}]"#
        ]
    );
    // A bad line: every problem listed, nothing sent, exit 2.
    let run = svc.ctl(
        &["shard", "insert"],
        Some("shard_id master critical\nok1 sjc false\nbad sjc maybe\n\"#X\" sjc true\n"),
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("shardrepctl: stdin: invalid shard map:\n  line 3: "),
        "{run:?}"
    );
    assert!(run.stderr.contains("\n  line 4: "), "{run:?}");
    fails(
        &svc.ctl(&["shard", "insert"], Some("# nothing\nshard_id master critical\n")),
        2,
        "shardrepctl: stdin holds no shard rows (expected a `shard_id master critical` header and rows)\n",
    );
    // Already there: the service refuses, exit 1, nothing inserted.
    fails(
        &svc.ctl(
            &["shard", "insert"],
            Some("shard_id master critical\ndelta sjc false\nacme sjc false\n"),
        ),
        1,
        "shardrepctl: shard \"acme\" already exists\n",
    );
    svc.calls();

    ok(
        &svc.ctl(
            &["shard", "update"],
            Some("master critical shard_id\nnyc true acme\n"),
        ),
        "updated : 1\n",
    );
    assert_eq!(
        svc.calls(),
        [r#"shard_update [{"shardId":"acme","master":"nyc","critical":true}]"#]
    );
    fails(
        &svc.ctl(
            &["shard", "update"],
            Some("shard_id master critical\nnope sjc true\n"),
        ),
        1,
        "shardrepctl: no shard \"nope\" in the shard map\n",
    );
    svc.calls();

    ok(
        &svc.ctl(&["shard", "delete", "beta", "gamma"], None),
        "deleted : 2\n",
    );
    assert_eq!(svc.calls(), [r#"shard_delete ["beta", "gamma"]"#]);
    ok(
        &svc.ctl(&["shard", "delete"], Some("  acme \n\n#UNKNOWN\n")),
        "deleted : 2\n",
    );
    assert_eq!(svc.calls(), [r##"shard_delete ["acme", "#UNKNOWN"]"##]);
    fails(
        &svc.ctl(&["shard", "delete"], Some("\n")),
        2,
        "shardrepctl: no shard ids given (as arguments or one per line on stdin)\n",
    );
    fails(
        &svc.ctl(&["shard", "delete", "ghost"], None),
        1,
        "shardrepctl: no shard \"ghost\" in the shard map\n",
    );
    svc.calls();
    ok(
        &svc.ctl(&["shard", "list"], None),
        "shard_id  master  critical\nzeta      #LOCAL  true\n",
    );
    ok(&svc.ctl(&["shard", "delete-all"], None), "deleted : 1\n");
    ok(
        &svc.ctl(&["shard", "list"], None),
        "shard_id  master  critical\n",
    );
    assert_eq!(
        svc.calls(),
        ["shard_list", "shard_delete_all", "shard_list"]
    );
}

#[test]
fn log_commands() {
    let svc = Service::start(State::Online);
    ok(
        &svc.ctl(&["log", "list"], None),
        "SEQ# = 0\n- SHARD = acme\nSEQ# = 1\n- SHARD = acme\nSEQ# = 2\n- SHARD = acme\nSEQ# = 3\n- SHARD = acme\n",
    );
    ok(
        &svc.ctl(&["log", "list", "--seqno", "2"], None),
        "SEQ# = 2\n- SHARD = acme\n",
    );
    ok(
        &svc.ctl(
            &["log", "list", "--low", "1", "--high", "2", "--json"],
            None,
        ),
        "{\"seqno\":1,\"shard\":\"acme\"}\n{\"seqno\":2,\"shard\":\"acme\"}\n",
    );
    ok(
        &svc.ctl(&["log", "list", "--low", "3"], None),
        "SEQ# = 3\n- SHARD = acme\n",
    );
    assert_eq!(
        svc.calls(),
        [
            "log_list low=None high=None",
            "log_list low=Some(2) high=Some(2)",
            "log_list low=Some(1) high=Some(2)",
            "log_list low=Some(3) high=None",
        ]
    );
    fails(
        &svc.ctl(&["log", "list", "--low", "5", "--high", "2"], None),
        2,
        "shardrepctl: --low 5 is above --high 2\n",
    );
    let run = svc.ctl(&["log", "list", "--seqno", "1", "--low", "0"], None);
    assert_eq!(run.code, 2, "{run:?}");
    ok(
        &svc.ctl(&["log", "info"], None),
        "count              : 4\nmaximumStoredSeqNo : 3\nminimumStoredSeqNo : 0\nsegments           : [{\"start\":0}]\n",
    );
    assert_eq!(svc.calls(), ["log_info"]);
}

// ---------------------------------------------------------------------------
// The socket
// ---------------------------------------------------------------------------

#[test]
fn socket_is_private_and_removed_on_shutdown() {
    let mut svc = Service::start(State::Online);
    let mode = std::fs::metadata(&svc.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    // The missing parent directory was created, private.
    let dir_mode = std::fs::metadata(svc.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700, "mode {dir_mode:o}");
    // No temporary name left behind.
    let names: Vec<String> = std::fs::read_dir(svc.socket.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ctl.sock"]);
    svc.server.take().unwrap().shutdown();
    assert!(!svc.socket.exists());
    fails(
        &svc.ctl(&["status"], None),
        2,
        &format!(
            "shardrepctl: no shardrep service is listening on {}: is it running?\n",
            svc.socket.display()
        ),
    );
    let run = svc.ctl(&["--json", "status"], None);
    assert_eq!((run.code, run.stdout.as_str()), (2, ""), "{run:?}");
    let error: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(
        error,
        serde_json::json!({
            "error": format!(
                "no shardrep service is listening on {}: is it running?",
                svc.socket.display()
            ),
            "kind": "unreachable",
            "exitCode": 2,
        })
    );
    // A configuration that cannot be read is the caller's problem.
    let run = ctl(
        &["--config", "/nonexistent/shardrep.toml", "--json", "status"],
        None,
    );
    assert_eq!((run.code, run.stdout.as_str()), (2, ""), "{run:?}");
    let error: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(error["kind"], "usage", "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("/nonexistent/shardrep.toml: "),
        "{error}"
    );
}

#[test]
fn a_second_server_on_a_live_socket_is_refused() {
    let svc = Service::start(State::Online);
    let err = ControlServer::start(&svc.socket, Fake::new(State::OfflineNormal)).unwrap_err();
    assert!(matches!(err, ServerError::AlreadyRunning { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "another shardrep service is already listening on {}",
            svc.socket.display()
        )
    );
    // The first one still serves.
    ok(
        &svc.ctl(&["services"], None),
        "role        : applier\nserviceName : sjc\nstate       : ONLINE\n",
    );
}

#[test]
fn a_stale_socket_is_replaced_and_other_files_are_left_alone() {
    let dir = TempDir::new();
    let socket = dir.path().join("ctl.sock");
    // A socket file nobody listens on (as after kill -9).
    drop(UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    fails(
        &ctl(&["--socket", socket.to_str().unwrap(), "status"], None),
        2,
        &format!(
            "shardrepctl: no shardrep service is listening on {}: is it running?\n",
            socket.display()
        ),
    );
    // The log commands point at the offline tool for a stopped service.
    fails(
        &ctl(&["--socket", socket.to_str().unwrap(), "log", "info"], None),
        2,
        &format!(
            "shardrepctl: no shardrep service is listening on {}: is it running? (the queue \
             of a stopped service: shardrep log info|list --queue DIR)\n",
            socket.display()
        ),
    );
    let server = ControlServer::start(&socket, Fake::new(State::Online)).unwrap();
    let run = ctl(&["--socket", socket.to_str().unwrap(), "status"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
    server.shutdown();

    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "data").unwrap();
    let err = ControlServer::start(&file, Fake::new(State::Online)).unwrap_err();
    assert!(matches!(err, ServerError::NotASocket { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
}

#[test]
fn the_client_finds_the_socket_in_the_configuration() {
    let svc = Service::start(State::Online);
    let dir = TempDir::new();
    let config = dir.path().join("shardrep.toml");
    // Only [control] socket is read: an unset password variable and an
    // otherwise incomplete file do not matter.
    std::fs::write(
        &config,
        format!(
            "[replica]\npassword_env = \"SHARDREP_TEST_UNSET\"\n\n[control]\nsocket = \"{}\"\n",
            svc.socket.display()
        ),
    )
    .unwrap();
    ok(
        &ctl(&["--config", config.to_str().unwrap(), "services"], None),
        "role        : applier\nserviceName : sjc\nstate       : ONLINE\n",
    );
    std::fs::write(&config, "[service]\nname = \"sjc\"\n").unwrap();
    fails(
        &ctl(&["-c", config.to_str().unwrap(), "status"], None),
        2,
        &format!(
            "shardrepctl: {}: control.socket is missing\n",
            config.display()
        ),
    );
    if !std::path::Path::new("/etc/shardrep").exists() {
        fails(
            &ctl(&["status"], None),
            2,
            "shardrepctl: no service given: use --config FILE or --socket PATH, or set \
             SHARDREP_CONFIG (/etc/shardrep holds no single configuration)\n",
        );
    }
    // SHARDREP_CONFIG stands for --config.
    let out = Command::new(env!("CARGO_BIN_EXE_shardrepctl"))
        .arg("status")
        .env("SHARDREP_CONFIG", &config)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "shardrepctl: {}: control.socket is missing\n",
            config.display()
        )
    );
    let run = ctl(
        &["--config", "a.toml", "--socket", "/tmp/x.sock", "status"],
        None,
    );
    assert_eq!(run.code, 2, "{run:?}");
}

/// Sends raw lines on one connection and reads one response per expected
/// response.
fn exchange(socket: &Path, send: &str, responses: usize) -> Vec<Value> {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(send.as_bytes()).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reader = BufReader::new(stream);
    (0..responses)
        .map(|_| {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
        })
        .collect()
}

#[test]
fn malformed_lines_get_an_error_and_the_server_goes_on() {
    let svc = Service::start(State::Online);
    let answers = exchange(
        &svc.socket,
        "not json\n\n{\"request\":\"reboot\"}\n{\"request\":\"services\"}\r\n\
         {\"request\":\"offline\",\"immediate\":true,\"atSeqno\":3}\n\
         {\"request\":\"wait\",\"until\":{\"applied\":1},\"timeoutSecs\":999999999}\n\
         \u{0}\u{1}\n{\"request\":\"status\",\"name\":\"queue\"}",
        7,
    );
    assert_eq!(answers[0]["error"]["kind"], "badRequest");
    assert!(answers[0]["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("malformed request: expected ident"));
    assert_eq!(answers[1]["error"]["kind"], "badRequest");
    assert!(answers[1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown variant `reboot`"));
    assert_eq!(
        answers[2],
        json!({"ok": [{"role": "applier", "serviceName": "sjc", "state": "ONLINE"}]})
    );
    assert_eq!(
        answers[3],
        json!({"error": {"kind": "badRequest", "message": "offline: immediate and atSeqno exclude each other"}})
    );
    assert_eq!(
        answers[4],
        json!({"error": {"kind": "badRequest", "message": "wait: timeoutSecs 999999999 is above the limit of 604800 s"}})
    );
    assert_eq!(answers[5]["error"]["kind"], "badRequest");
    // The last line had no newline: answered at end of input.
    assert_eq!(answers[6]["ok"]["count"], 58);
    // Not UTF-8.
    let mut stream = UnixStream::connect(&svc.socket).unwrap();
    stream.write_all(b"\xff\xfe\n").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    assert_eq!(
        line,
        "{\"error\":{\"kind\":\"badRequest\",\"message\":\"malformed request: not UTF-8\"}}\n"
    );
    // And a new client still gets served.
    ok(
        &svc.ctl(&["services"], None),
        "role        : applier\nserviceName : sjc\nstate       : ONLINE\n",
    );
    assert_eq!(svc.calls(), ["queue_status"]);
}

/// A handler that implements only what is required.
struct Minimal;

impl ControlHandler for Minimal {
    fn status(&self) -> Result<Status, ControlError> {
        Ok(Status::new("nyc", "extractor", State::OfflineNormal))
    }
    fn online(&self, _: OnlineRequest) -> Result<Value, ControlError> {
        panic!("the fake's online panics");
    }
    fn offline(&self, _: OfflineRequest) -> Result<Value, ControlError> {
        Ok(Value::Null)
    }
}

#[test]
fn unsupported_requests_and_handler_panics() {
    let dir = TempDir::new();
    let socket = dir.path().join("m.sock");
    let server = ControlServer::start(&socket, Arc::new(Minimal)).unwrap();
    let s = socket.to_str().unwrap();
    fails(
        &ctl(&["--socket", s, "shard", "list"], None),
        1,
        "shardrepctl: shard list is not supported by this service\n",
    );
    fails(
        &ctl(&["--socket", s, "log", "info"], None),
        1,
        "shardrepctl: log info is not supported by this service\n",
    );
    fails(
        &ctl(&["--socket", s, "online"], None),
        1,
        "shardrepctl: the service failed handling online (panic); see its log\n",
    );
    // The server survives the panic.
    ok(
        &ctl(&["--socket", s, "services"], None),
        "role        : extractor\nserviceName : nyc\nstate       : OFFLINE:NORMAL\n",
    );
    server.shutdown();
}

#[test]
fn shutdown_ends_a_wait_in_progress() {
    let mut svc = Service::start(State::Online);
    let socket = svc.socket.clone();
    let waiter = std::thread::spawn(move || {
        exchange(
            &socket,
            "{\"request\":\"wait\",\"until\":{\"applied\":1000},\"timeoutSecs\":60}\n",
            1,
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    svc.server.take().unwrap().shutdown();
    assert!(started.elapsed() < Duration::from_secs(5));
    let answer = waiter.join().unwrap();
    assert_eq!(answer[0]["error"]["kind"], "shuttingDown");
    assert!(!svc.socket.exists());
}
