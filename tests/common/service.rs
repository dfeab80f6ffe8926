//! Running shardrep services against the sandbox: a service applying the
//! master's binlog to replica 2 (native replication stopped there), in
//! process (`shardrep::replicator::run`) or as the real `shardrep` binary
//! (so it can be killed), plus the case SQL of `tests/cases/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use shardrep::config::{Config, LiveSourceConfig, Secret};
use shardrep::extractor::live::{master_status, LiveOptions};
use shardrep::replicator::{RunError, RunOptions, RunReport};

use super::{quote_ident, Sandbox, Server};

/// The replica shardrep applies to in these tests.
pub const TARGET: Server = Server::Replica(2);

/// A server id of this test process's own for binlog dumps.
pub fn server_id() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    30_000 + (std::process::id() % 10_000) * 64 + N.fetch_add(1, Ordering::Relaxed)
}

/// A fresh empty directory of this test's own under the temp dir.
pub fn tempdir(label: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shardrep-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One service under test: the master's binlog from `start` applied to
/// [`TARGET`], with a shard map listing `schemas` (mastered by the
/// service; those in `critical` critical) and dropping unknown shards
/// (unless [`ServiceSpec::unknown_shard_policy`] says otherwise).
#[derive(Clone, Debug)]
pub struct ServiceSpec {
    /// Service name (catalog `shardrep_<service>` on the replica).
    pub service: String,
    /// Its own directory: queue, shard map, config, logs.
    pub dir: PathBuf,
    /// Shards in the map.
    pub schemas: Vec<String>,
    /// Shards marked critical.
    pub critical: Vec<String>,
    /// `source.start` (`FILE:POS`).
    pub start: String,
    /// Apply channels.
    pub channels: u16,
    /// `block_commit_txns`.
    pub block: u32,
    /// `sync_interval_seqnos`.
    pub sync_interval: u64,
    /// `retry_max_attempts`.
    pub retry_max_attempts: u32,
    /// Apply through the target's Unix socket (`[replica] socket`)
    /// instead of loopback TCP.
    pub replica_socket: bool,
    /// The replica's TCP port, when not [`TARGET`]'s own (a proxy in
    /// front of it).
    pub replica_port: Option<u16>,
    /// `[service] stop_grace_ms` (default: the product's).
    pub stop_grace_ms: Option<u64>,
    /// `block_commit_interval_ms`.
    pub block_interval_ms: u64,
    /// `[apply] parallelism`: `"shard"` or `"row"` (default `"row"`, the
    /// product's default).
    pub parallelism: &'static str,
    /// The replica's password, when not the sandbox's (a wrong one).
    pub replica_password: Option<String>,
    /// The replica's user, when not the sandbox's (an account of the
    /// test's own).
    pub replica_user: Option<String>,
    /// The master's user and password, when not the sandbox's.
    pub source_account: Option<(String, String)>,
    /// `[apply] compound_blocks` (default true, the product's default).
    pub compound_blocks: bool,
    /// `[apply] method` (`None`: the product's default).
    pub method: Option<&'static str>,
    /// `[replica] binlog_gtids` (`None`: the product's default).
    pub binlog_gtids: Option<&'static str>,
    /// More sections appended to the configuration (e.g. `[metrics]`).
    pub extra_toml: String,
    /// `[queue] fragment_bytes` (`None`: the product's default).
    pub fragment_bytes: Option<u64>,
    /// `[shard_filter] unknown_shard_policy` (default `"drop"`).
    pub unknown_shard_policy: &'static str,
    /// `[shard_filter] auto_create` (default false).
    pub auto_create: bool,
    /// Environment variables set for the spawned `shardrep` (e.g.
    /// `SHARDREP_LOG_FORMAT`), besides `SHARDREP_LOG=info`.
    pub env: Vec<(String, String)>,
}

impl ServiceSpec {
    /// A spec with 4 channels, block commit 100, sync every 50 seqnos.
    pub fn new(label: &str, schemas: &[String], start: &str) -> ServiceSpec {
        static N: AtomicU32 = AtomicU32::new(0);
        ServiceSpec {
            service: format!(
                "{label}{}_{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            dir: tempdir(label),
            schemas: schemas.to_vec(),
            critical: Vec::new(),
            start: start.to_string(),
            channels: 4,
            block: 100,
            sync_interval: 50,
            retry_max_attempts: 10,
            replica_socket: false,
            replica_port: None,
            stop_grace_ms: None,
            block_interval_ms: 0,
            parallelism: "row",
            replica_password: None,
            replica_user: None,
            source_account: None,
            compound_blocks: true,
            method: None,
            binlog_gtids: None,
            extra_toml: String::new(),
            fragment_bytes: None,
            unknown_shard_policy: "drop",
            auto_create: false,
            env: Vec::new(),
        }
    }

    /// The catalog schema on the replica.
    pub fn catalog(&self) -> String {
        format!("shardrep_{}", self.service)
    }

    /// The configuration text (writes the shard map into `dir`).
    pub fn toml(&self, sb: &Sandbox) -> String {
        let mut map = String::from("shard_id master critical\n");
        for s in &self.schemas {
            map.push_str(&format!(
                "{s} {} {}\n",
                self.service,
                self.critical.contains(s)
            ));
        }
        let map_path = self.dir.join("shard.map");
        std::fs::write(&map_path, map).unwrap();
        format!(
            r#"
[service]
name = "{service}"
{stop_grace}
[source]
kind = "live"
host = "{host}"
port = {master_port}
user = "{user}"
password = "{password}"
server_id = {server_id}
start = "{start}"
[replica]
host = "{host}"
port = {replica_port}
{replica_socket}
user = "{replica_user}"
password = "{replica_password}"
{binlog_gtids}
[queue]
dir = "{queue}"
{fragment_bytes}
[apply]
channels = {channels}
block_commit_txns = {block}
block_commit_interval_ms = {interval}
parallelism = "{parallelism}"
compound_blocks = {compound}
{method}
sync_interval_seqnos = {sync}
retry_max_attempts = {retries}
retry_max_backoff_ms = 1000
[shard_filter]
map_file = "{map}"
unknown_shard_policy = "{unknown_shard_policy}"
auto_create = {auto_create}
[control]
socket = "{socket}"
{extra}
"#,
            extra = self.extra_toml,
            binlog_gtids = self
                .binlog_gtids
                .map_or_else(String::new, |m| format!("binlog_gtids = \"{m}\"")),
            stop_grace = self
                .stop_grace_ms
                .map_or_else(String::new, |ms| format!("stop_grace_ms = {ms}")),
            service = self.service,
            host = sb.host,
            master_port = sb.port(Server::Master),
            replica_port = self.replica_port.unwrap_or_else(|| sb.port(TARGET)),
            user = self
                .source_account
                .as_ref()
                .map_or(sb.user.as_str(), |a| a.0.as_str()),
            password = self
                .source_account
                .as_ref()
                .map_or(sb.password.as_str(), |a| a.1.as_str()),
            replica_password = self.replica_password.as_deref().unwrap_or(&sb.password),
            replica_user = self.replica_user.as_deref().unwrap_or(&sb.user),
            server_id = server_id(),
            start = self.start,
            queue = self.dir.join("queue").display(),
            fragment_bytes = self
                .fragment_bytes
                .map_or_else(String::new, |b| format!("fragment_bytes = {b}")),
            channels = self.channels,
            block = self.block,
            interval = self.block_interval_ms,
            parallelism = self.parallelism,
            compound = self.compound_blocks,
            method = self
                .method
                .map_or_else(String::new, |m| format!("method = \"{m}\"")),
            sync = self.sync_interval,
            retries = self.retry_max_attempts,
            map = map_path.display(),
            unknown_shard_policy = self.unknown_shard_policy,
            auto_create = self.auto_create,
            socket = self.dir.join("control.sock").display(),
            replica_socket = if self.replica_socket {
                format!(
                    "socket = \"{}\"",
                    sb.dir.join(TARGET.name()).join("mariadbd.sock").display()
                )
            } else {
                String::new()
            },
        )
    }

    /// The parsed configuration.
    pub fn config(&self, sb: &Sandbox) -> Config {
        Config::from_toml_str(&self.toml(sb), self.dir.join("shardrep.toml"))
            .expect("valid test config")
    }

    /// Writes `shardrep.toml` into `dir` and returns its path.
    pub fn write_config(&self, sb: &Sandbox) -> PathBuf {
        let path = self.dir.join("shardrep.toml");
        std::fs::write(&path, self.toml(sb)).unwrap();
        path
    }

    /// Runs the service in this process until the master has nothing more
    /// and everything is applied (on a thread of its own).
    pub fn run_until_idle(&self, sb: &Sandbox) -> Result<RunReport, RunError> {
        self.run_with(sb, Vec::new())
    }

    /// [`Self::run_until_idle`] skipping `skip` seqnos.
    pub fn run_with(
        &self,
        sb: &Sandbox,
        skip: Vec<std::ops::RangeInclusive<u64>>,
    ) -> Result<RunReport, RunError> {
        let config = self.config(sb);
        std::thread::spawn(move || {
            shardrep::replicator::run(
                &config,
                Arc::new(AtomicBool::new(false)),
                &RunOptions {
                    stop_when_idle: true,
                    skip_seqnos: skip,
                    ..Default::default()
                },
            )
        })
        .join()
        .expect("run thread")
    }

    /// Starts the real `shardrep run` binary on this service (following
    /// the master; `until_idle` adds `--until-idle`), its stderr appended
    /// to `dir/shardrep.log`.
    pub fn spawn(&self, sb: &Sandbox, until_idle: bool) -> ShardrepProcess {
        self.spawn_with(sb, if until_idle { &["--until-idle"] } else { &[] })
    }

    /// Starts the real `shardrep run --config <dir>/shardrep.toml` with
    /// `args` (e.g. `--offline`) and [`Self::env`], its stderr appended to
    /// `dir/shardrep.log` and its stdout to `dir/shardrep.out`.
    pub fn spawn_with(&self, sb: &Sandbox, args: &[&str]) -> ShardrepProcess {
        let config = self.write_config(sb);
        let log_path = self.dir.join("shardrep.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_shardrep"));
        command.arg("run").arg("--config").arg(&config).args(args);
        let out_path = self.dir.join("shardrep.out");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .unwrap();
        let child = command
            .env("SHARDREP_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(out)
            .stderr(log)
            .spawn()
            .expect("start shardrep");
        ShardrepProcess {
            child,
            log: log_path,
            out: out_path,
        }
    }

    /// Each channel's restart seqno on the replica (-1: none yet).
    pub async fn restart_seqnos(&self, sb: &Sandbox) -> Vec<i64> {
        let mut conn = sb.connect(TARGET).await;
        conn.query(format!(
            "SELECT seqno FROM {}.restart_position ORDER BY channel",
            quote_ident(&self.catalog())
        ))
        .await
        .unwrap_or_default()
    }

    /// Each channel's restart row as its committed record, by channel:
    /// `seqno, low_water, committed_above` (one consistent read).
    pub async fn restart_records(&self, sb: &Sandbox) -> Vec<(i64, Option<i64>, String)> {
        let mut conn = sb.connect(TARGET).await;
        conn.query(format!(
            "SELECT seqno, low_water, committed_above FROM {}.restart_position ORDER BY channel",
            quote_ident(&self.catalog())
        ))
        .await
        .unwrap_or_default()
    }

    /// Drops the catalog on the replica and removes `dir`.
    pub async fn remove(&self, sb: &Sandbox) {
        let mut replica = sb.connect(TARGET).await;
        replica
            .query_drop(format!(
                "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {}",
                quote_ident(&self.catalog())
            ))
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Drops a service's catalog on [`TARGET`] when the test panics while it
/// is held, so that one failed test does not refuse every later takeover
/// of replica 2 in the run ("already applied by another shardrep
/// service"). Synchronous (the sandbox's client over its socket), as a
/// `Drop` must be.
pub struct CatalogGuard {
    catalog: String,
    root: PathBuf,
}

impl Drop for CatalogGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new(self.root.join("scripts/sandbox.sh"))
                .args(["sql", &TARGET.name(), "-e"])
                .arg(format!(
                    "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {}",
                    quote_ident(&self.catalog)
                ))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl ServiceSpec {
    /// A [`CatalogGuard`] for this service's catalog.
    pub fn drop_catalog_on_panic(&self, sb: &Sandbox) -> CatalogGuard {
        CatalogGuard {
            catalog: self.catalog(),
            root: sb.root.clone(),
        }
    }
}

/// A running `shardrep` process.
pub struct ShardrepProcess {
    /// The child.
    pub child: Child,
    /// Its log file.
    pub log: PathBuf,
    /// Its stdout (the summary line of a run that ends).
    pub out: PathBuf,
}

/// A process still running when its handle goes (a failed test) is
/// killed, so it cannot act on the sandbox during later tests.
impl Drop for ShardrepProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl ShardrepProcess {
    /// SIGKILL, and reap it.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL shardrep");
        let _ = self.child.wait();
    }

    /// SIGTERM (clean stop) and wait; returns whether it exited 0.
    pub fn terminate(mut self) -> bool {
        self.signal_term();
        self.child.wait().expect("wait for shardrep").success()
    }

    /// Waits for it to exit by itself; returns whether it exited 0.
    pub fn wait(mut self) -> bool {
        self.child.wait().expect("wait for shardrep").success()
    }

    /// Sends SIGTERM without waiting.
    pub fn signal_term(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    }

    /// Waits for it to exit, at most `deadline`; returns whether it exited
    /// 0, or `None` if it still runs then.
    pub fn wait_exit(&mut self, deadline: std::time::Duration) -> Option<bool> {
        let end = std::time::Instant::now() + deadline;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status.success());
            }
            if std::time::Instant::now() >= end {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What it wrote to stdout so far.
    pub fn out_text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

/// `shardrepctl --config <spec's shardrep.toml> args…`, its stdout and
/// stderr piped.
fn ctl_command(spec: &ServiceSpec, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shardrepctl"));
    command
        .arg("--config")
        .arg(spec.dir.join("shardrep.toml"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `shardrepctl --config <spec's shardrep.toml> args…` started in the
/// background (stdin empty, stdout and stderr piped).
pub fn ctl_spawn(spec: &ServiceSpec, args: &[&str]) -> Child {
    ctl_command(spec, args)
        .stdin(Stdio::null())
        .spawn()
        .expect("run shardrepctl")
}

/// Runs `shardrepctl --config <spec's shardrep.toml> args…` with `stdin`
/// as its standard input; returns (exit code, stdout, stderr).
pub fn ctl_with_stdin(spec: &ServiceSpec, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = ctl_command(spec, args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("run shardrepctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write shardrepctl's stdin");
    let out = child.wait_with_output().expect("wait for shardrepctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `shardrepctl --config <spec's shardrep.toml> args…` (stdin empty);
/// returns (exit code, stdout, stderr).
pub fn ctl(spec: &ServiceSpec, args: &[&str]) -> (i32, String, String) {
    ctl_with_stdin(spec, args, "")
}

/// [`ctl`] that must exit 0; returns stdout.
pub fn ctl_ok(spec: &ServiceSpec, args: &[&str]) -> String {
    let (code, out, err) = ctl(spec, args);
    assert_eq!(code, 0, "shardrepctl {args:?} failed:\n{out}\n{err}");
    out
}

/// `shardrepctl status --json`, parsed.
pub fn status(spec: &ServiceSpec) -> serde_json::Value {
    serde_json::from_str(&ctl_ok(spec, &["status", "--json"])).expect("status JSON")
}

/// Waits until the service answers on its control socket (at most 60 s);
/// fails with the service's log if it exits first.
pub fn wait_for_socket(spec: &ServiceSpec, process: &mut ShardrepProcess) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while ctl(spec, &["services"]).0 != 0 {
        assert!(
            process.running(),
            "shardrep exited:\n{}",
            process.log_text()
        );
        assert!(std::time::Instant::now() < deadline, "no control socket");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits until the service has applied everything the master has written
/// (its applied event id is the master's position), failing at once on
/// OFFLINE:ERROR.
pub async fn wait_applied_to_master(sb: &Sandbox, spec: &ServiceSpec) -> serde_json::Value {
    let end = master_position(sb).await;
    super::wait_until(
        "shardrep applied to the master's end",
        std::time::Duration::from_secs(180),
        || {
            let end = end.clone();
            async move {
                let s = status(spec);
                assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
                (s["appliedLastEventId"] == end.as_str()).then_some(s)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e} ({end}): {}", status(spec)))
}

/// The master's binlog position now (`FILE:POS`).
pub async fn master_position(sb: &Sandbox) -> String {
    let options = LiveOptions::new(LiveSourceConfig::new(
        sb.host.clone(),
        sb.port(Server::Master),
        sb.user.clone(),
        Secret::new(sb.password.clone()),
        server_id(),
    ));
    master_status(&options)
        .await
        .expect("master status")
        .0
        .to_string()
}

/// The case's SQL from `tests/cases/`, with each schema in `renames`
/// replaced (as a whole word) by the matching unique name.
pub fn case_sql(case: &str, renames: &[(&str, &str)]) -> String {
    let path = format!("{}/tests/cases/{case}.sql", env!("CARGO_MANIFEST_DIR"));
    let mut sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for (from, to) in renames {
        sql = replace_word(&sql, from, to);
    }
    sql
}

/// `text` with every whole-word occurrence of `from` replaced by `to`.
pub fn replace_word(text: &str, from: &str, to: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let before_ok = !rest[..i].chars().next_back().is_some_and(is_word);
        let after_ok = !rest[i + from.len()..].chars().next().is_some_and(is_word);
        out.push_str(&rest[..i]);
        out.push_str(if before_ok && after_ok { to } else { from });
        rest = &rest[i + from.len()..];
    }
    out.push_str(rest);
    out
}

/// A mysql client script split into the statements to send, honouring
/// `DELIMITER` lines (as the `mariadb` client does) and dropping `--`
/// comments at line ends outside the procedure bodies' own text.
pub fn script_statements(script: &str) -> Vec<String> {
    let mut delimiter = ";".to_string();
    let mut out = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let trimmed = line.trim();
        if let Some(d) = trimmed.strip_prefix("DELIMITER ") {
            delimiter = d.trim().to_string();
            continue;
        }
        let line = match line.find(" -- ") {
            Some(i) if delimiter == ";" => &line[..i],
            _ => line,
        };
        current.push_str(line);
        current.push('\n');
        while let Some(i) = current.find(delimiter.as_str()) {
            let statement = current[..i].trim().to_string();
            current = current[i + delimiter.len()..].to_string();
            if !statement.is_empty() {
                out.push(statement);
            }
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// Drops `schemas` on the master and both replicas without binlogging,
/// after replica 1 has caught up.
pub async fn drop_everywhere(sb: &Sandbox, schemas: &[String]) {
    super::wait_replica_caught_up(sb, Server::Replica(1), std::time::Duration::from_secs(120))
        .await;
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        let mut conn = sb.connect(server).await;
        for s in schemas {
            conn.query_drop(format!(
                "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {}",
                quote_ident(s)
            ))
            .await
            .unwrap();
        }
    }
}

/// Creates `schema` with `tables` (name, then its definition: `(columns)`
/// and any table options) on the master and both replicas, not binlogged.
pub async fn create_everywhere(sb: &Sandbox, schema: &str, tables: &[(&str, &str)]) {
    let q = quote_ident(schema);
    let mut ddl = format!("SET SESSION sql_log_bin = 0; CREATE DATABASE {q};");
    for (table, columns) in tables {
        ddl.push_str(&format!("CREATE TABLE {q}.{table} {columns};"));
    }
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        sb.exec(server, &ddl).await;
    }
}

/// Sets [`TARGET`]'s global `innodb_lock_wait_timeout` to `seconds` (new
/// sessions take it: start shardrep after); returns the value it had, to
/// set back.
pub async fn set_lock_wait_timeout(sb: &Sandbox, seconds: u64) -> u64 {
    let mut replica = sb.connect(TARGET).await;
    let old: u64 = replica
        .query_first("SELECT @@GLOBAL.innodb_lock_wait_timeout")
        .await
        .unwrap()
        .unwrap();
    replica
        .query_drop(format!("SET GLOBAL innodb_lock_wait_timeout = {seconds}"))
        .await
        .unwrap();
    old
}

/// Stops native replication on [`TARGET`] (shardrep applies there).
/// Native replication on the target from the master's current GTID
/// position: running, with nothing old to apply (earlier tests stopped it
/// and applied to the target with shardrep).
pub async fn native_from_now(sb: &Sandbox) {
    let mut master = sb.connect(Server::Master).await;
    let pos: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let mut replica = sb.connect(TARGET).await;
    replica.query_drop("STOP SLAVE").await.unwrap();
    replica
        .exec_drop("SET GLOBAL gtid_slave_pos = ?", (pos,))
        .await
        .unwrap();
    replica
        .query_drop("CHANGE MASTER TO MASTER_USE_GTID = slave_pos; START SLAVE")
        .await
        .unwrap();
}

/// Rotates the master's binlog and purges every binlog before the new one
/// (once MariaDB's asynchronous binlog checkpoint lets it); returns the new
/// binlog's name.
pub async fn flush_and_purge_binlogs(sb: &Sandbox) -> String {
    let mut master = sb.connect(Server::Master).await;
    master.query_drop("FLUSH BINARY LOGS").await.unwrap();
    crate::common::wait_binlog_checkpoint_settled(&mut master).await;
    let current: String = master
        .query_first::<mysql_async::Row, _>("SHOW MASTER STATUS")
        .await
        .unwrap()
        .and_then(|row| row.get(0))
        .unwrap();
    master
        .query_drop(format!("PURGE BINARY LOGS TO '{current}'"))
        .await
        .unwrap();
    current
}

/// Native replication on replica 2 catches up with the master (within
/// 2 minutes) and its SQL thread runs with `Last_Errno` 0.
pub async fn assert_native_ok(sb: &Sandbox) {
    super::wait_replica_caught_up(sb, TARGET, std::time::Duration::from_secs(120)).await;
    let mut replica = sb.connect(TARGET).await;
    let status = shardrep::replica::slave_status(&mut replica)
        .await
        .unwrap()
        .expect("replication configured");
    assert!(status.sql_running, "{status:?}");
    assert_eq!(status.last_errno, 0, "{status:?}");
}

/// Stops native replication on replica 2.
pub async fn stop_target_slave(sb: &Sandbox) {
    sb.connect(TARGET)
        .await
        .query_drop("STOP SLAVE")
        .await
        .unwrap();
}

/// Runs `sql` (statements separated by `;`, each its own transaction
/// unless the text says otherwise) on one master connection.
pub async fn on_master(sb: &Sandbox, sql: &str) {
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
}

/// Creates `schema.t (id INT PRIMARY KEY, n INT)` on the master with rows
/// `1..=rows` (`n = 0`), one transaction per row: seqnos 0 to `rows + 1`
/// of a service that starts before it.
pub async fn create_table(sb: &Sandbox, schema: &str, rows: u32) {
    let s = quote_ident(schema);
    let mut sql = format!("CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY, n INT);");
    for id in 1..=rows {
        sql.push_str(&format!(" INSERT INTO {s}.t VALUES ({id}, 0);"));
    }
    on_master(sb, &sql).await;
}

/// Waits (at most 120 s) until the service is in `state`.
pub fn wait_state(spec: &ServiceSpec, state: &str) {
    ctl_ok(spec, &["wait", "--state", state, "--timeout-secs", "120"]);
}

/// Stops the service with SIGTERM (it must stop cleanly), drops `schemas`
/// everywhere and removes the service's catalog and files.
pub async fn cleanup(
    sb: &Sandbox,
    spec: &ServiceSpec,
    process: ShardrepProcess,
    schemas: &[String],
) {
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, schemas).await;
    spec.remove(sb).await;
}

/// A replica session holds row `id` of `schema.t` (an uncommitted insert
/// of `(id, 99)`); the master then inserts `id` and `id + 1`, the second
/// of which commits on another channel; then the session commits and the
/// master's insert of `id` fails with 1062. Returns once seqno `second`
/// (the insert of `id + 1`) is in a restart row, and the session has
/// committed.
pub async fn fail_with_uneven_rows(
    sb: &Sandbox,
    spec: &ServiceSpec,
    schema: &str,
    id: i32,
    second: i64,
) {
    let q = quote_ident(schema);
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; START TRANSACTION; INSERT INTO {q}.t VALUES ({id}, 99)"
        ))
        .await
        .unwrap();
    on_master(
        sb,
        &format!(
            "INSERT INTO {q}.t VALUES ({id}, 0); INSERT INTO {q}.t VALUES ({}, 0)",
            id + 1
        ),
    )
    .await;
    super::wait_until(
        &format!("seqno {second} committed"),
        std::time::Duration::from_secs(60),
        || async {
            let rows = spec.restart_records(sb).await;
            rows.iter()
                .any(|(seqno, _, _)| *seqno == second)
                .then_some(())
        },
    )
    .await
    .unwrap();
    holder.query_drop("COMMIT").await.unwrap();
    drop(holder);
}
