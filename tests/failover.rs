//! Issue 20: following a master failover with `shardrepctl source set`.
//!
//! Topology: a master, replica 1 replicating natively (the one promoted),
//! replica 2 applied by shardrep (taken over from native replication). A
//! writer loop runs transactions (an insert and an update of an earlier
//! row each) against whichever server is the master. Checked, each on a
//! fresh sandbox:
//!
//! - the master shut down cleanly, replica 1 promoted (`STOP SLAVE; RESET
//!   SLAVE ALL`) and written to, the running service switched to it: the
//!   load goes on, replica 2 ends with exactly the rows of the new master,
//!   no error; then `offline --handback --start-slave` points native
//!   replication at the new master (`Last_SQL_Errno`/`Last_IO_Errno` 0) and
//!   new writes reach replica 2 natively;
//! - the master killed (`kill -9`), and shardrep killed (`kill -9`) as
//!   soon as the switch is under way (its mark committed, the service
//!   going offline for it): the restart finishes the switch, reads from
//!   the new master and ends equal;
//! - replica 1's IO thread stopped while the master writes 3 more
//!   transactions that shardrep applies, then the master killed and
//!   replica 1 promoted and written to: `source set` is refused naming
//!   exactly those 3 GTIDs, and nothing is applied from the new master;
//! - 3 transactions queued by shardrep but not applied (stored by
//!   `shardrep extract --to-queue` while the service is stopped) that
//!   replica 1 never received:
//!   the offline switch discards exactly those seqnos (recorded as
//!   skipped); shardrep is then killed (`kill -9`) and restarted: it
//!   resumes after the last applied one, and replica 2 ends equal to the
//!   new master without them;
//! - a switch interrupted by a `kill -9` that the restart cannot finish
//!   (the new master refuses the login): `status` names it, `online` is
//!   refused, and `source set` again finishes it once the login works;
//! - the old master alive and written to throughout: the service moved to
//!   replica 1, which still replicates from it, ends equal to the master.
//!
//! The tests break the topology (a dead master, a promoted replica), so
//! they run on a sandbox of their own, created afresh for each test and
//! removed after it: `FAILOVER_SANDBOX_DIR` (default: the sandbox
//! directory of `conf/sandbox.env` or the environment, plus `-failover`)
//! and `FAILOVER_MASTER_PORT` (default: `SANDBOX_MASTER_PORT` + 40;
//! replicas on the next two ports). `FAILOVER_KEEP=1` keeps it after a
//! test. The tests run one at a time.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::service::{
    ctl, ctl_ok, ctl_spawn, status, wait_for_socket, ServiceSpec, ShardrepProcess,
};
use common::{quote_ident, Sandbox, Server};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use serde_json::Value;

/// The replica promoted to master.
const NEW_MASTER: Server = Server::Replica(1);
/// The replica shardrep applies to.
const TARGET: Server = Server::Replica(2);

/// One test at a time on the failover sandbox.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `conf/sandbox.env`'s value of `key`, the environment winning.
fn setting(key: &str) -> String {
    if let Ok(v) = std::env::var(key) {
        return v;
    }
    let text = std::fs::read_to_string(root().join("conf/sandbox.env")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("conf/sandbox.env lacks {key}"))
        .to_string()
}

/// The failover sandbox's directory and master port.
fn failover_place() -> (PathBuf, u16) {
    let dir = std::env::var("FAILOVER_SANDBOX_DIR")
        .unwrap_or_else(|_| format!("{}-failover", setting("SHARDREP_SANDBOX_DIR")));
    let port = std::env::var("FAILOVER_MASTER_PORT")
        .ok()
        .map(|p| p.parse().expect("FAILOVER_MASTER_PORT"))
        .unwrap_or_else(|| {
            setting("SANDBOX_MASTER_PORT")
                .parse::<u16>()
                .expect("SANDBOX_MASTER_PORT")
                + 40
        });
    (PathBuf::from(dir), port)
}

/// Runs `scripts/sandbox.sh args` on the failover sandbox; panics with
/// its output when it fails.
fn sandbox_script(args: &[&str]) {
    let (dir, port) = failover_place();
    let out = Command::new("bash")
        .arg(root().join("scripts/sandbox.sh"))
        .args(args)
        .env("SHARDREP_SANDBOX_DIR", &dir)
        .env("SANDBOX_MASTER_PORT", port.to_string())
        .env("SANDBOX_REPLICA_USE_GTID", "slave_pos")
        .env("SANDBOX_REPLICA_LOG_BIN", "ON")
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/sandbox.sh");
    assert!(
        out.status.success(),
        "scripts/sandbox.sh {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh failover sandbox (master + 2 native replicas), removed when
/// dropped (unless `FAILOVER_KEEP` is set).
struct Topology {
    sb: Sandbox,
}

impl Topology {
    fn fresh() -> Topology {
        sandbox_script(&["destroy"]);
        sandbox_script(&["up", "2"]);
        let (dir, port) = failover_place();
        Topology {
            sb: Sandbox {
                root: root(),
                host: setting("SANDBOX_HOST"),
                master_port: port,
                user: setting("SANDBOX_USER"),
                password: setting("SANDBOX_PASSWORD"),
                dir,
            },
        }
    }

    /// The master's mariadbd pid.
    fn master_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.sb.dir.join("master/mariadbd.pid"))
            .expect("the master's pid file");
        text.trim().parse().expect("a pid")
    }

    /// Stops the master: `SHUTDOWN` (clean) or `kill -9`; returns once
    /// the process is gone.
    async fn stop_master(&self, crash: bool) {
        let pid = self.master_pid();
        if crash {
            let killed = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
        } else {
            let mut master = self.sb.connect(Server::Master).await;
            master.query_drop("SHUTDOWN").await.expect("SHUTDOWN");
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < deadline, "the master did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Replica 1 becomes a master: `STOP SLAVE; RESET SLAVE ALL`.
    async fn promote_replica1(&self) {
        let mut r1 = self.sb.connect(NEW_MASTER).await;
        r1.query_drop("STOP SLAVE").await.unwrap();
        r1.query_drop("RESET SLAVE ALL").await.unwrap();
        r1.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if std::env::var_os("FAILOVER_KEEP").is_none() {
            let _ = std::panic::catch_unwind(|| sandbox_script(&["destroy"]));
        }
    }
}

/// The global system variable `name` of `server`.
async fn global<T: mysql_async::prelude::FromValue + Send + 'static>(
    sb: &Sandbox,
    server: Server,
    name: &str,
) -> T {
    sb.connect(server)
        .await
        .query_first(format!("SELECT @@GLOBAL.{name}"))
        .await
        .unwrap()
        .unwrap()
}

/// `@@server_id` of `server`.
async fn server_id(sb: &Sandbox, server: Server) -> u32 {
    global(sb, server, "server_id").await
}

async fn gtid_binlog_pos(sb: &Sandbox, server: Server) -> String {
    global(sb, server, "gtid_binlog_pos").await
}

/// Waits until `replica` has executed `source`'s binlog so far.
async fn wait_caught_up(sb: &Sandbox, source: Server, replica: Server) {
    let pos = gtid_binlog_pos(sb, source).await;
    let waited: Option<i64> = sb
        .connect(replica)
        .await
        .exec_first("SELECT MASTER_GTID_WAIT(?, 120)", (pos.clone(),))
        .await
        .unwrap();
    assert_eq!(
        waited,
        Some(0),
        "{} did not reach {pos} of {}",
        replica.name(),
        source.name()
    );
}

/// A digest of `schema.t` (row count and an order-independent checksum).
async fn digest(sb: &Sandbox, server: Server, schema: &str) -> (i64, String) {
    sb.connect(server)
        .await
        .query_first(format!(
            "SELECT COUNT(*), CONCAT(COALESCE(SUM(v), 0), '/', \
             COALESCE(BIT_XOR(CRC32(CONCAT_WS(':', id, v, note))), 0)) FROM {}.t",
            quote_ident(schema)
        ))
        .await
        .unwrap()
        .unwrap()
}

/// Waits (at most 3 minutes) until replica 2 holds the rows of `source`,
/// failing at once if the service goes OFFLINE:ERROR; then compares every
/// row.
async fn wait_equal(sb: &Sandbox, spec: &ServiceSpec, source: Server, schema: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let s = status(spec);
        assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
        let want = digest(sb, source, schema).await;
        if digest(sb, TARGET, schema).await == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica 2 did not reach {} ({want:?}): {s}",
            source.name()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows = common::assert_table_equal(sb, source, TARGET, schema, "t").await;
    assert!(!rows.is_empty());
}

/// The writer loop: one transaction after another on the server at
/// `port` (0: paused; `parked` is set once it holds no transaction).
struct Writer {
    port: Arc<AtomicU16>,
    parked: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<u64>,
}

impl Writer {
    fn start(sb: &Sandbox, schema: &str, server: Server) -> Writer {
        let port = Arc::new(AtomicU16::new(sb.port(server)));
        let parked = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (host, user, password) = (sb.host.clone(), sb.user.clone(), sb.password.clone());
        let table = format!("{}.t", quote_ident(schema));
        let handle = {
            let (port, parked, stop) = (port.clone(), parked.clone(), stop.clone());
            tokio::spawn(async move {
                let mut conn: Option<Conn> = None;
                let mut id = 0u64;
                let mut committed = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let p = port.load(Ordering::Acquire);
                    if p == 0 {
                        if let Some(c) = conn.take() {
                            let _ = c.disconnect().await;
                        }
                        parked.store(true, Ordering::Release);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    parked.store(false, Ordering::Release);
                    if conn.is_none() {
                        let opts = OptsBuilder::default()
                            .ip_or_hostname(host.clone())
                            .tcp_port(p)
                            .user(Some(user.clone()))
                            .pass(Some(password.clone()))
                            .prefer_socket(false);
                        match Conn::new(opts).await {
                            Ok(c) => conn = Some(c),
                            Err(_) => {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                        }
                    }
                    // A new id per attempt: one that failed may have
                    // committed on a master that then died.
                    id += 1;
                    let c = conn.as_mut().expect("connected");
                    let done = async {
                        c.query_drop("START TRANSACTION").await?;
                        c.exec_drop(
                            format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, ?)"),
                            (id, format!("written on port {p}")),
                        )
                        .await?;
                        c.exec_drop(
                            format!("UPDATE {table} SET v = v + 1 WHERE id = ?"),
                            (id * 7 % id.max(1) + id / 2,),
                        )
                        .await?;
                        c.query_drop("COMMIT").await
                    }
                    .await;
                    match done {
                        Ok(()) => committed += 1,
                        Err(_) => conn = None,
                    }
                    if port.load(Ordering::Acquire) != p {
                        if let Some(c) = conn.take() {
                            let _ = c.disconnect().await;
                        }
                    }
                }
                committed
            })
        };
        Writer {
            port,
            parked,
            stop,
            handle,
        }
    }

    /// Stops writing and waits until no transaction is open.
    async fn pause(&self) {
        self.port.store(0, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.parked.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the writer did not pause");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Writes on to `server`.
    fn resume(&self, sb: &Sandbox, server: Server) {
        self.port.store(sb.port(server), Ordering::Release);
    }

    /// Stops the loop; returns how many transactions it committed.
    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Release);
        self.handle.await.expect("writer task")
    }
}

/// Creates the test schema on the master and waits until both replicas
/// have it; then starts shardrep taking replica 2 over; returns the
/// service once ONLINE.
async fn start_service(topo: &Topology, label: &str) -> (String, ServiceSpec, ShardrepProcess) {
    start_service_with(topo, label, None).await
}

/// [`start_service`] with `[replica] binlog_gtids` set (`None`: the
/// default).
async fn start_service_with(
    topo: &Topology,
    label: &str,
    binlog_gtids: Option<&'static str>,
) -> (String, ServiceSpec, ShardrepProcess) {
    let sb = &topo.sb;
    let schema = common::unique_schema(label);
    sb.connect(Server::Master)
        .await
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, \
             note VARCHAR(64) NOT NULL) ENGINE=InnoDB",
            s = quote_ident(&schema)
        ))
        .await
        .unwrap();
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    wait_caught_up(sb, Server::Master, TARGET).await;
    // Replica 1's binlog coordinates differ from the master's, as they
    // do in real topologies: only GTIDs name a point on both.
    sb.connect(NEW_MASTER)
        .await
        .query_drop("FLUSH BINARY LOGS; FLUSH BINARY LOGS")
        .await
        .unwrap();
    let mut spec = ServiceSpec::new(label, std::slice::from_ref(&schema), "takeover");
    spec.sync_interval = 20;
    spec.binlog_gtids = binlog_gtids;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, &process, "ONLINE");
    (schema, spec, process)
}

fn wait_state(spec: &ServiceSpec, process: &ShardrepProcess, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(spec);
        if s["state"] == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not {state}: {s}\n{}",
            process.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replays on `conn` (the promoted replica) the old master's lost-tail
/// insert of row `id` into `table` as `mariadb-binlog` output does: under
/// the old master's server id (1) and sequence number `seq_no` of domain 0.
async fn replay_on(conn: &mut mysql_async::Conn, table: &str, seq_no: u64, id: u64, v: i64) {
    conn.query_drop(format!(
        "SET SESSION server_id = 1, gtid_seq_no = {seq_no}; \
         INSERT INTO {table} (id, v, note) VALUES ({id}, {v}, 'lost tail'); \
         SET SESSION server_id = @@GLOBAL.server_id"
    ))
    .await
    .unwrap();
}

/// `shardrepctl source set --host H --port P` to replica 1, then
/// `extra`: exit code, stdout, stderr.
fn source_set_with(spec: &ServiceSpec, sb: &Sandbox, extra: &[&str]) -> (i32, String, String) {
    let port = sb.port(NEW_MASTER).to_string();
    let mut args = vec!["source", "set", "--host", &sb.host, "--port", &port];
    args.extend_from_slice(extra);
    ctl(spec, &args)
}

/// `shardrepctl --json source set` to replica 1; the parsed answer.
fn source_set(spec: &ServiceSpec, sb: &Sandbox) -> Value {
    let port = sb.port(NEW_MASTER).to_string();
    let out = ctl_ok(
        spec,
        &[
            "--json", "source", "set", "--host", &sb.host, "--port", &port,
        ],
    );
    serde_json::from_str(&out).expect("source set JSON")
}

/// `shardrepctl --json source set` to replica 1 while `locker` holds a
/// lock that keeps the switch waiting: once status shows the switch under
/// way (then `under_way` checks that status), releases the lock; the
/// answer of the switch, which must succeed.
async fn switch_held_by_lock(
    sb: &Sandbox,
    spec: &ServiceSpec,
    mut locker: Conn,
    under_way: impl Fn(&Value),
) -> Value {
    let port = sb.port(NEW_MASTER).to_string();
    let switch = ctl_spawn(
        spec,
        &[
            "--json", "source", "set", "--host", &sb.host, "--port", &port,
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(spec);
        if !s["sourceSwitchUnderWay"].is_null() {
            under_way(&s);
            break;
        }
        assert!(Instant::now() < deadline, "no sourceSwitchUnderWay: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    locker.query_drop("UNLOCK TABLES").await.unwrap();
    drop(locker);
    let out = switch.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("source set JSON")
}

/// Runs `source set` to replica 1 and kills shardrep (`kill -9`) as soon
/// as the switch is under way: its mark committed in the catalog.
async fn kill_during_switch(sb: &Sandbox, spec: &ServiceSpec, process: ShardrepProcess) {
    let port = sb.port(NEW_MASTER).to_string();
    let mut switch = ctl_spawn(
        spec,
        &["source", "set", "--host", &sb.host, "--port", &port],
    );
    let mut replica = sb.connect(TARGET).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while catalog_rows(&mut replica, spec, "source_pending").await != 1 {
        assert!(
            Instant::now() < deadline,
            "the switch was not marked: {}",
            process.log_text()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    process.kill();
    let _ = switch.wait();
}

/// Rows of the catalog table `table` of `spec`'s service (0 when the
/// table does not exist).
async fn catalog_rows(replica: &mut Conn, spec: &ServiceSpec, table: &str) -> u64 {
    let exists: Option<u64> = replica
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (spec.catalog(), table),
        )
        .await
        .unwrap();
    if exists != Some(1) {
        return 0;
    }
    replica
        .query_first(format!(
            "SELECT COUNT(*) FROM {}.{}",
            quote_ident(&spec.catalog()),
            quote_ident(table)
        ))
        .await
        .unwrap()
        .unwrap()
}

/// Polls `check` with a deadline.
async fn eventually(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_after_a_clean_master_shutdown_then_handback_to_the_new_master() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    // Blocks commit together: the channels behind the transaction held by
    // the lock drain their inputs, so the scheduler has dispatched
    // everything queued when the switch takes the service offline, and
    // the switch applies it all before it. (Under the master's GTIDs the
    // commits wait in order behind the held one; the switch then keeps
    // the undispatched rest and applies it after: tests/gtid_topology.rs
    // and the other switches here run that way.)
    let (schema, spec, process) = start_service_with(&topo, "foclean", Some("own")).await;
    let writer = Writer::start(sb, &schema, Server::Master);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The failover tool: replica 1 has everything, the master goes. The
    // old master's last transaction waits on a lock of the replica's
    // table, so that the switch, which waits for it, stays under way.
    writer.pause().await;
    let mut locker = sb.connect(TARGET).await;
    locker
        .query_drop(format!("LOCK TABLES {}.t WRITE", quote_ident(&schema)))
        .await
        .unwrap();
    sb.connect(Server::Master)
        .await
        .query_drop(format!(
            "INSERT INTO {}.t (id, v, note) VALUES (900000001, 1, 'held by a lock')",
            quote_ident(&schema)
        ))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&spec)["inFlightCount"].as_u64() == Some(0) {
        assert!(Instant::now() < deadline, "{}", status(&spec));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    let old_gtid = gtid_binlog_pos(sb, Server::Master).await;
    topo.stop_master(false).await;
    topo.promote_replica1().await;
    writer.resume(sb, NEW_MASTER);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Under way: shown, the source still the old master.
    let done = switch_held_by_lock(sb, &spec, locker, |s| {
        assert_eq!(
            s["sourceSwitchUnderWay"],
            format!("to {}:{}", sb.host, sb.port(NEW_MASTER)).as_str(),
            "{s}"
        );
        assert_eq!(s["sourcePort"], sb.port(Server::Master), "{s}");
    })
    .await;
    assert_eq!(status(&spec)["sourceSwitchUnderWay"], Value::Null);
    assert_eq!(
        done["previous"],
        format!("{}:{}", sb.host, sb.port(Server::Master))
    );
    assert_eq!(
        done["source"],
        format!("{}:{}", sb.host, sb.port(NEW_MASTER))
    );
    assert_eq!(done["sourceServerId"], 2);
    // Everything shardrep read, replica 1 has: nothing discarded, and
    // the old master's last transaction was applied before the switch.
    assert_eq!(done["discardedSeqnos"], Value::Null, "{done}");
    assert_eq!(done["appliedGtid"], old_gtid.as_str(), "{done}");
    assert_eq!(done["resumeGtid"], old_gtid.as_str(), "{done}");
    let first_seqno = done["firstSeqno"].as_u64().expect("a first seqno");
    assert_eq!(done["appliedSeqno"].as_u64(), Some(first_seqno - 1));
    assert_eq!(done["unchanged"], false, "{done}");
    // The hook run twice: exit 0, nothing changed.
    let again = source_set(&spec, sb);
    assert_eq!(again["unchanged"], true, "{again}");
    assert_eq!(again["previous"], done["source"], "{again}");
    assert_eq!(again["source"], done["source"], "{again}");
    assert_eq!(again["firstSeqno"], Value::Null, "{again}");
    assert_eq!(again["resumeGtid"], Value::Null, "{again}");
    assert_eq!(again["appliedGtid"], Value::Null, "{again}");

    // The load goes on on the new master; replica 2 follows it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = writer.finish().await;
    assert!(written > 20, "the writer committed only {written}");
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert_eq!(s["sourceHost"], sb.host.as_str());
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER));
    assert_eq!(s["sourceFirstSeqno"], first_seqno);
    assert!(s["sourceSwitchedAt"].is_string(), "{s}");
    assert!(
        s["appliedLastSeqno"].as_u64().unwrap() >= first_seqno,
        "{s}"
    );
    // The lag thread looks at the new master.
    let new_gtid = gtid_binlog_pos(sb, NEW_MASTER).await;
    eventually("status shows the new master's GTID position", 15, || {
        status(&spec)["masterGtidPos"] == new_gtid.as_str()
    })
    .await;

    // Handback: native replication from the new master.
    ctl_ok(&spec, &["offline", "--handback", "--start-slave"]);
    let mut replica = sb.connect(TARGET).await;
    let slave = shardrep::replica::slave_status(&mut replica)
        .await
        .unwrap()
        .expect("replication configured");
    assert_eq!(slave.master_host, sb.host);
    assert_eq!(slave.master_port, sb.port(NEW_MASTER));
    assert_eq!(slave.using_gtid, shardrep::replica::UsingGtid::SlavePos);
    assert_eq!(
        (slave.last_sql_errno, slave.last_io_errno),
        (0, 0),
        "{slave:?}"
    );
    let mut new_master = sb.connect(NEW_MASTER).await;
    for id in 1_000_000..1_000_020u64 {
        new_master
            .exec_drop(
                format!(
                    "INSERT INTO {}.t (id, v, note) VALUES (?, 1, 'after handback')",
                    quote_ident(&schema)
                ),
                (id,),
            )
            .await
            .unwrap();
    }
    wait_caught_up(sb, NEW_MASTER, TARGET).await;
    let slave = shardrep::replica::slave_status(&mut replica)
        .await
        .unwrap()
        .unwrap();
    assert!(slave.sql_running && slave.io_running == "Yes", "{slave:?}");
    assert_eq!(
        (slave.last_sql_errno, slave.last_io_errno),
        (0, 0),
        "{slave:?}"
    );
    common::assert_table_equal(sb, NEW_MASTER, TARGET, &schema, "t").await;
    let log = process.log_text();
    assert!(
        log.contains("extracting from the switched-to master by GTID"),
        "{log}"
    );
    assert!(process.terminate());
    eprintln!("clean shutdown failover test: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_after_a_master_crash_survives_a_kill_of_shardrep_during_the_switch() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "focrash").await;
    let writer = Writer::start(sb, &schema, Server::Master);
    tokio::time::sleep(Duration::from_secs(2)).await;

    writer.pause().await;
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    topo.stop_master(true).await;
    topo.promote_replica1().await;
    writer.resume(sb, NEW_MASTER);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // source set, and kill -9 of shardrep as soon as the switch is under
    // way (its mark is committed, the service going offline for it).
    kill_during_switch(sb, &spec, process).await;
    let mut replica = sb.connect(TARGET).await;

    // The restart finishes the switch, then goes online. (When the kill
    // left the channels at different seqnos, a run on the old source
    // first brings them to one: ONLINE for a moment before the switch.)
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, &process, "ONLINE");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(status(&spec)["sourceSwitchedAt"].is_string() && status(&spec)["state"] == "ONLINE") {
        assert!(
            Instant::now() < deadline,
            "the switch did not finish: {}\n{}",
            status(&spec),
            process.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = status(&spec);
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER), "{s}");
    assert!(s["sourceSwitchedAt"].is_string(), "{s}");
    assert_eq!(catalog_rows(&mut replica, &spec, "source_pending").await, 0);
    assert_eq!(catalog_rows(&mut replica, &spec, "source").await, 1);
    assert!(
        process
            .log_text()
            .contains("the interrupted switch of the source is finished"),
        "{}",
        process.log_text()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = writer.finish().await;
    assert!(written > 20, "the writer committed only {written}");
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert_eq!(s["skippedCount"], 0, "{s}");
    // The killed process or the restarted one (the log has both) started
    // reading the new master at the switch's GTID position.
    let log = process.log_text();
    assert!(
        log.contains("extracting from the switched-to master by GTID"),
        "{log}"
    );
    // The dead master is no privilege problem of the lag thread's.
    assert!(!log.contains("BINLOG MONITOR"), "{log}");
    assert!(process.terminate());
    eprintln!("crash failover test: {:?}", started.elapsed());
}

/// A switch that a `kill -9` of shardrep interrupted and the restart
/// cannot finish (the new master refuses shardrep's login: its account is
/// locked there): the service stays offline, `status` names the switch
/// (`sourceSwitchUnfinished`), `online` is refused naming it; once the
/// login works, `source set` again finishes the switch and goes online.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_switch_the_restart_cannot_finish_is_shown_and_blocks_online() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "founfin").await;
    let table = format!("{}.t", quote_ident(&schema));
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "INSERT INTO {table} (id, v, note) VALUES (1, 1, 'old master')"
        ))
        .await
        .unwrap();
    drop(master);
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    wait_equal(sb, &spec, Server::Master, &schema).await;
    topo.stop_master(true).await;
    topo.promote_replica1().await;

    kill_during_switch(sb, &spec, process).await;
    let port = sb.port(NEW_MASTER).to_string();
    let mut replica = sb.connect(TARGET).await;

    // The new master refuses shardrep's login from now on (not logged:
    // nothing of it reaches a replica).
    let mut r1 = sb.connect(NEW_MASTER).await;
    let account = format!("'{}'@'{}'", sb.user, sb.host);
    r1.query_drop(format!(
        "SET SESSION sql_log_bin = 0; ALTER USER {account} ACCOUNT LOCK; \
         SET SESSION sql_log_bin = 1"
    ))
    .await
    .unwrap();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !status(&spec)["sourceSwitchUnfinished"].is_string() {
        assert!(
            Instant::now() < deadline,
            "no sourceSwitchUnfinished: {}\n{}",
            status(&spec),
            process.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    let unfinished = s["sourceSwitchUnfinished"].as_str().unwrap();
    assert!(
        unfinished.starts_with(&format!(
            "to {}:{port} (source set --host {} --port {port}, started ",
            sb.host, sb.host
        )),
        "{unfinished}"
    );
    assert!(
        unfinished.contains("did not finish at the restart: "),
        "{unfinished}"
    );
    assert!(unfinished.contains("locked"), "{unfinished}");
    assert_eq!(catalog_rows(&mut replica, &spec, "source_pending").await, 1);
    // online is refused, naming the switch; the service stays offline.
    let (code, out, err) = ctl(&spec, &["online"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("the switch of the source to ") && err.contains("did not finish"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status(&spec)["state"], "OFFLINE:NORMAL");

    // The login works again: source set finishes the switch and goes
    // online by itself.
    r1.query_drop(format!(
        "SET SESSION sql_log_bin = 0; ALTER USER {account} ACCOUNT UNLOCK; \
         SET SESSION sql_log_bin = 1"
    ))
    .await
    .unwrap();
    let done = source_set(&spec, sb);
    assert_eq!(done["unchanged"], false, "{done}");
    wait_state(&spec, &process, "ONLINE");
    let s = status(&spec);
    assert_eq!(s["sourceSwitchUnfinished"], Value::Null, "{s}");
    assert_eq!(s["sourceSwitchUnderWay"], Value::Null, "{s}");
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER), "{s}");
    assert_eq!(catalog_rows(&mut replica, &spec, "source_pending").await, 0);
    r1.query_drop(format!(
        "INSERT INTO {table} (id, v, note) VALUES (2, 2, 'new master')"
    ))
    .await
    .unwrap();
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let mut replica = sb.connect(TARGET).await;
    assert_eq!(
        common::table_rows(&mut replica, &schema, "t").await.len(),
        2
    );
    assert!(process.terminate());
    eprintln!("unfinished switch test: {:?}", started.elapsed());
}

/// A switch right after the takeover, before anything was applied: the
/// run after it must not take over native replication again (it still
/// names the old master), but start on the new master at the takeover's
/// GTID position; also across a restart before anything arrived.
/// A planned move while the old master lives and takes writes: the
/// service is switched to replica 1, which goes on replicating from the
/// master (`log_slave_updates`), so the master's later writes reach the
/// service through it. The service is held behind replica 1 (its table
/// locked on replica 2) while the switch starts, so it has applied
/// nothing replica 1 lacks; a queued transaction replica 1 did not have
/// yet would be discarded and read again from it (none in the runs here:
/// native replication keeps up). Replica 2 ends with exactly the master's
/// rows, no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_to_a_replica_while_the_old_master_lives_and_takes_writes() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "foalive").await;
    let writer = Writer::start(sb, &schema, Server::Master);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut locker = sb.connect(TARGET).await;
    locker
        .query_drop(format!("LOCK TABLES {}.t WRITE", quote_ident(&schema)))
        .await
        .unwrap();
    // Everything the service applied was on the master before the lock;
    // replica 1 has all that once it reaches the master's position now.
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&spec)["inFlightCount"].as_u64() == Some(0) {
        assert!(Instant::now() < deadline, "{}", status(&spec));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = switch_held_by_lock(sb, &spec, locker, |_| {}).await;
    assert_eq!(
        done["source"],
        format!("{}:{}", sb.host, sb.port(NEW_MASTER))
    );
    assert_eq!(done["unchanged"], false, "{done}");

    // The master goes on taking writes; they reach replica 2 through
    // replica 1.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = writer.finish().await;
    assert!(written > 20, "the writer committed only {written}");
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    wait_equal(sb, &spec, Server::Master, &schema).await;
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER), "{s}");
    // Written on the master after the switch, applied from replica 1.
    let first = done["firstSeqno"].as_u64().expect("a first seqno");
    assert!(s["appliedLastSeqno"].as_u64().unwrap() >= first, "{s}");
    assert!(process.terminate());
    eprintln!(
        "old master alive failover test: {:?}, discarded {}",
        started.elapsed(),
        done["discardedSeqnos"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_right_after_the_takeover_with_nothing_applied() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "foearly").await;
    let old_gtid = gtid_binlog_pos(sb, Server::Master).await;
    topo.stop_master(false).await;
    topo.promote_replica1().await;

    let done = source_set(&spec, sb);
    assert_eq!(done["appliedSeqno"], Value::Null, "{done}");
    assert_eq!(done["resumeGtid"], old_gtid.as_str(), "{done}");
    assert_eq!(done["discardedSeqnos"], Value::Null, "{done}");
    wait_state(&spec, &process, "ONLINE");
    assert_eq!(status(&spec)["sourcePort"], sb.port(NEW_MASTER));

    // A restart before the new master sent anything.
    assert!(process.terminate());
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, &process, "ONLINE");

    let mut new_master = sb.connect(NEW_MASTER).await;
    for id in 1..=20u64 {
        new_master
            .exec_drop(
                format!(
                    "INSERT INTO {}.t (id, v, note) VALUES (?, 0, 'new master')",
                    quote_ident(&schema)
                ),
                (id,),
            )
            .await
            .unwrap();
    }
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let mut replica = sb.connect(TARGET).await;
    assert_eq!(
        common::table_rows(&mut replica, &schema, "t").await.len(),
        20
    );
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER), "{s}");
    assert!(process.terminate());
    eprintln!("early failover test: {:?}", started.elapsed());
}

/// The refusal's way out followed: the new master lacks one transaction
/// the service applied and took no writes since, so the refusal names
/// the exact `--start-position`; the tail replayed there (as mariadb-binlog
/// output does: the old master's server id and sequence number), the next
/// `source set` switches and takes the service, which the refusal left
/// offline, online again by itself. A `source set` to the replica the
/// service applies to is refused before anything stops, and so is a
/// server id to announce that is the new master's own; an empty or blank
/// `--host` is a usage error (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_switch_then_the_replayed_tail_switches_and_goes_online() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "foreplay").await;

    // The replica itself, by mistake: refused at once, still ONLINE.
    let target_port = sb.port(TARGET).to_string();
    let target_id = server_id(sb, TARGET).await;
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &target_port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "{}:{target_port} is the replica this service applies to (server_id {})",
            sb.host, target_id
        )),
        "{err}"
    );
    assert_eq!(status(&spec)["state"], "ONLINE");
    // A server id to announce that is the new master's own: refused
    // before anything stops.
    let new_master_port = sb.port(NEW_MASTER).to_string();
    let new_master_id = server_id(sb, NEW_MASTER).await;
    let (code, out, err) = source_set_with(&spec, sb, &["--server-id", &new_master_id.to_string()]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "({new_master_id}: --server-id, else the source's server_id) is the new master's \
             own server_id"
        )),
        "{err}"
    );
    // shardrep's user with another password on the new master: Access
    // denied, saying where the password comes from; nothing stops.
    let mut r1 = sb.connect(NEW_MASTER).await;
    let account = format!("'{}'@'{}'", sb.user, sb.host);
    let identified = |password: &str| {
        format!(
            "SET SESSION sql_log_bin = 0; ALTER USER {account} IDENTIFIED BY '{}'; \
             SET SESSION sql_log_bin = 1",
            password.replace('\\', "\\\\").replace('\'', "''")
        )
    };
    r1.query_drop(identified("another-secret")).await.unwrap();
    let (code, out, err) = source_set_with(&spec, sb, &[]);
    r1.query_drop(identified(&sb.password)).await.unwrap();
    drop(r1);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("server error 1045"), "{err}");
    assert!(
        err.contains(&format!(
            "shardrep logs in to the new master as {} with the service's password: [source] \
             password, password_file or password_env",
            sb.user
        )),
        "{err}"
    );
    assert!(
        !err.contains("another-secret") && !err.contains(&sb.password),
        "{err}"
    );
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["sourceSwitchUnderWay"], Value::Null, "{s}");
    // An empty host, or one with blanks: usage errors (exit 2).
    for host in ["", " ", &format!(" {}", sb.host)] {
        let (code, out, err) = ctl(
            &spec,
            &["source", "set", "--host", host, "--port", &new_master_port],
        );
        assert_eq!(code, 2, "{host:?}: {out}\n{err}");
        assert!(err.contains("source set: --host"), "{err}");
    }
    assert_eq!(status(&spec)["state"], "ONLINE");

    let table = format!("{}.t", quote_ident(&schema));
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "INSERT INTO {table} (id, v, note) VALUES (1, 0, 'both')"
        ))
        .await
        .unwrap();
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    let kept = gtid_binlog_pos(sb, Server::Master).await;
    let mut r1 = sb.connect(NEW_MASTER).await;
    r1.query_drop("STOP SLAVE IO_THREAD").await.unwrap();
    master
        .query_drop(format!(
            "INSERT INTO {table} (id, v, note) VALUES (2, 7, 'lost tail')"
        ))
        .await
        .unwrap();
    let tail = gtid_binlog_pos(sb, Server::Master).await;
    wait_equal(sb, &spec, Server::Master, &schema).await;
    drop(master);
    topo.stop_master(false).await;
    topo.promote_replica1().await;

    let port = sb.port(NEW_MASTER).to_string();
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "lacks: {tail} (the replica is at {tail}, the new master's gtid_binlog_state is \
             {kept})"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("mariadb-binlog --start-position={kept} FILE")),
        "{err}"
    );
    assert_eq!(status(&spec)["state"], "OFFLINE:NORMAL");

    // The replay, then the switch: online again without `online`.
    let seq: u64 = tail.rsplit('-').next().unwrap().parse().unwrap();
    replay_on(&mut r1, &table, seq, 2, 7).await;
    let done = source_set(&spec, sb);
    assert_eq!(done["resumeGtid"], tail.as_str(), "{done}");
    wait_state(&spec, &process, "ONLINE");
    assert_eq!(status(&spec)["sourcePort"], sb.port(NEW_MASTER));
    for id in 3..=12u64 {
        r1.exec_drop(
            format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'new master')"),
            (id,),
        )
        .await
        .unwrap();
    }
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let mut replica = sb.connect(TARGET).await;
    assert_eq!(
        common::table_rows(&mut replica, &schema, "t").await.len(),
        12
    );
    let s = status(&spec);
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert!(process.terminate());
    eprintln!("replay failover test: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_refused_when_the_new_master_lacks_applied_transactions() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "foerrant").await;

    // A port that accepts connections and never answers (not a MariaDB
    // server): refused within the source's connect timeout (default
    // 10 s), nothing switched, the service still ONLINE.
    let silent = std::net::TcpListener::bind((sb.host.as_str(), 0)).unwrap();
    let silent_port = silent.local_addr().unwrap().port().to_string();
    let asked = Instant::now();
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &silent_port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "the new master {}:{silent_port}: no MariaDB answer within 10000 ms",
            sb.host
        )),
        "{err}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
    drop(silent);
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["sourceSwitchedAt"], Value::Null, "{s}");

    let table = format!("{}.t", quote_ident(&schema));
    let mut master = sb.connect(Server::Master).await;
    for id in 1..=10u64 {
        master
            .exec_drop(
                format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'both')"),
                (id,),
            )
            .await
            .unwrap();
    }
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    let promoted_at = gtid_binlog_pos(sb, Server::Master).await;
    let mut r1 = sb.connect(NEW_MASTER).await;
    r1.query_drop("STOP SLAVE IO_THREAD").await.unwrap();
    // Three transactions replica 1 never receives, which shardrep applies.
    for id in 11..=13u64 {
        master
            .exec_drop(
                format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'lost tail')"),
                (id,),
            )
            .await
            .unwrap();
    }
    let tail_end = gtid_binlog_pos(sb, Server::Master).await;
    wait_equal(sb, &spec, Server::Master, &schema).await;
    drop(master);
    topo.stop_master(true).await;
    topo.promote_replica1().await;
    // The new master writes on (reusing the lost tail's seqnos).
    for id in 100..=101u64 {
        r1.exec_drop(
            format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'new master')"),
            (id,),
        )
        .await
        .unwrap();
    }
    let mut replica = sb.connect(TARGET).await;
    let rows_before = common::table_rows(&mut replica, &schema, "t").await;
    let restart_query = format!(
        "SELECT GROUP_CONCAT(DISTINCT gtid) FROM {}.restart_position",
        quote_ident(&spec.catalog())
    );

    let seq = |gtid: &str| -> u64 { gtid.rsplit('-').next().unwrap().parse().unwrap() };
    let (kept, last) = (seq(&promoted_at), seq(&tail_end));
    assert_eq!(last, kept + 3);
    let port = sb.port(NEW_MASTER).to_string();
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let expected = format!(
        "shardrepctl: source set refused: the replica applied up to 3 transaction(s) that the \
         new master {}:{port} lacks: 0-1-{}..0-1-{last} (at most: the new master's binlog has \
         transactions of other servers inside that range, which this replica may have applied \
         too) (the replica is at 0-1-{last}, the new master's gtid_binlog_state is \
         0-1-{kept},0-2-{}). Nothing is switched.",
        sb.host,
        kept + 1,
        kept + 2
    );
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    // It took writes: no replay advice, a re-seed.
    assert!(
        err.contains(&format!(
            "The new master has taken writes of its own since (0-2-{}): replayed there now",
            kept + 2
        )),
        "{err}"
    );
    assert!(!err.contains("--start-position"), "{err}");
    assert!(err.contains("reset --confirm"), "{err}");

    // Nothing changed and nothing is applied from the new master.
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(s["sourcePort"], sb.port(Server::Master), "{s}");
    assert_eq!(s["sourceSwitchedAt"], Value::Null, "{s}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        common::table_rows(&mut replica, &schema, "t").await,
        rows_before
    );
    // Every channel stopped after the old master's last transaction.
    let restart_after: Option<String> = replica.query_first(&restart_query).await.unwrap();
    assert_eq!(restart_after.as_deref(), Some(tail_end.as_str()));
    let stored: Option<u64> = replica
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'source'",
            (spec.catalog(),),
        )
        .await
        .unwrap();
    assert_eq!(stored, Some(0));

    // The advice followed too late: the lost tail replayed on the new
    // master after it took writes (0-2-{kept+1}, 0-2-{kept+2}). Its state
    // now holds all the replica applied, but a resume after the tail
    // would skip its own two writes logged before it: refused, naming
    // them.
    for (i, id) in (11..=13u64).enumerate() {
        replay_on(&mut r1, &table, kept + 1 + i as u64, id, 0).await;
    }
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let expected = format!(
        "shardrepctl: source set refused: the new master {}:{port}: its binlog holds 2 \
         transaction(s) logged before 0-1-{last}, the last this replica applied of the old \
         master, that this replica never applied: 0-2-{}, 0-2-{}. A resume after 0-1-{last} \
         would skip them",
        sb.host,
        kept + 1,
        kept + 2
    );
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    assert!(err.contains("Nothing is switched"), "{err}");

    // A server of another topology whose GTIDs only overlap (domain 0,
    // server id 1, a higher seqno): its gtid_binlog_state "holds" what
    // the replica applied, its binlog does not: refused by the master
    // itself (GTID strict mode, 1236).
    r1.query_drop(
        "RESET MASTER; SET GLOBAL gtid_slave_pos = ''; \
         SET SESSION server_id = 1, gtid_seq_no = 99999",
    )
    .await
    .unwrap();
    r1.query_drop(format!(
        "INSERT INTO {table} (id, v, note) VALUES (200, 0, 'stranger')"
    ))
    .await
    .unwrap();
    let (code, out, err) = ctl(
        &spec,
        &["source", "set", "--host", &sb.host, "--port", &port],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let expected = format!(
        "shardrepctl: source set refused: the new master {}:{port}: its binlog does not \
         continue from this replica's position 0-1-{last}: the master answered 1236: ",
        sb.host
    );
    eprintln!("stranger refused: {err}");
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    assert!(err.contains(&format!("0-1-{last}")), "{err}");

    // Still nothing switched, nothing applied from either.
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(s["sourcePort"], sb.port(Server::Master), "{s}");
    assert_eq!(s["sourceSwitchedAt"], Value::Null, "{s}");
    assert_eq!(
        common::table_rows(&mut replica, &schema, "t").await,
        rows_before
    );
    let restart_after: Option<String> = replica.query_first(&restart_query).await.unwrap();
    assert_eq!(restart_after.as_deref(), Some(tail_end.as_str()));
    assert!(process.terminate());
    eprintln!("errant failover test: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_transactions_the_new_master_lacks_are_discarded_never_applied() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let topo = Topology::fresh();
    let sb = &topo.sb;
    let (schema, spec, process) = start_service(&topo, "fodiscard").await;
    let table = format!("{}.t", quote_ident(&schema));
    let mut master = sb.connect(Server::Master).await;
    for id in 1..=10u64 {
        master
            .exec_drop(
                format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'both')"),
                (id,),
            )
            .await
            .unwrap();
    }
    wait_equal(sb, &spec, Server::Master, &schema).await;
    wait_caught_up(sb, Server::Master, NEW_MASTER).await;
    let promoted_at = gtid_binlog_pos(sb, Server::Master).await;
    let mut r1 = sb.connect(NEW_MASTER).await;
    r1.query_drop("STOP SLAVE IO_THREAD").await.unwrap();
    // A clean stop: every channel at the last applied seqno.
    assert!(process.terminate());
    let rows: Vec<i64> = spec.restart_seqnos(sb).await;
    assert!(
        !rows.is_empty() && rows.iter().all(|&r| r == rows[0] && r > 0),
        "{rows:?}"
    );
    let applied = rows[0] as u64;

    // Three transactions replica 1 never receives: queued (by `shardrep
    // extract --to-queue` while the service is stopped), never applied.
    for id in 11..=13u64 {
        master
            .exec_drop(
                format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'lost tail')"),
                (id,),
            )
            .await
            .unwrap();
    }
    drop(master);
    let extracted = Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .arg("extract")
        .arg("--config")
        .arg(spec.dir.join("shardrep.toml"))
        .arg("--to-queue")
        .arg(spec.dir.join("queue"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(extracted.status.success(), "{extracted:?}");

    topo.stop_master(true).await;
    topo.promote_replica1().await;
    for id in 100..=101u64 {
        r1.exec_drop(
            format!("INSERT INTO {table} (id, v, note) VALUES (?, 0, 'new master')"),
            (id,),
        )
        .await
        .unwrap();
    }

    // Offline switch: the queued tail is discarded, resumed after the
    // last applied transaction.
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(&spec, &mut process);
    let s = status(&spec);
    assert_eq!(
        (&s["state"], &s["appliedLastSeqno"]),
        (&Value::from("OFFLINE:NORMAL"), &Value::from(applied)),
        "{s}"
    );
    let done = source_set(&spec, sb);
    let discarded = format!("{}-{}", applied + 1, applied + 3);
    assert_eq!(done["discardedSeqnos"], discarded.as_str(), "{done}");
    assert_eq!(done["keptThroughSeqno"], Value::Null, "{done}");
    assert_eq!(done["appliedSeqno"], applied, "{done}");
    assert_eq!(done["resumeGtid"], promoted_at.as_str(), "{done}");
    assert_eq!(done["firstSeqno"], applied + 4, "{done}");
    assert_eq!(done["state"], "OFFLINE:NORMAL", "{done}");
    let s = status(&spec);
    assert_eq!(s["skippedSeqnos"], discarded.as_str(), "{s}");
    assert_eq!(s["skippedCount"], 3, "{s}");
    assert_eq!(s["sourcePort"], sb.port(NEW_MASTER), "{s}");

    // kill -9 with the switch stored and the service offline: the
    // restart reads from the new master (after the last applied).
    process.kill();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, &process, "ONLINE");
    wait_equal(sb, &spec, NEW_MASTER, &schema).await;
    let last = (applied + 5).to_string();
    ctl_ok(&spec, &["wait", "--applied", &last, "--timeout-secs", "60"]);
    let s = status(&spec);
    assert_eq!(s["appliedLastSeqno"], applied + 5, "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    let mut replica = sb.connect(TARGET).await;
    let lost: Option<u64> = replica
        .query_first(format!(
            "SELECT COUNT(*) FROM {table} WHERE id BETWEEN 11 AND 13"
        ))
        .await
        .unwrap();
    assert_eq!(lost, Some(0));
    assert!(process.terminate());
    eprintln!("discard failover test: {:?}", started.elapsed());
}
