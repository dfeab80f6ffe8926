//! Issue 9: the system-of-record multi-master pair on real servers
//! (`scripts/multimaster.sh`, `conf/sjc.toml`, `conf/nyc.toml`, `shard.map`).
//!
//! Masters `sjc` and `nyc` both take writes; service `sjc` applies master
//! sjc's binlog to nyc and service `nyc` the other way round, both with
//! `enforce_home` and `preserve_origin`. Checked:
//!
//! - concurrent writes to `acme` (and the critical `billing`) on sjc and to
//!   `pinnacle` on nyc, for a while: both masters end with identical
//!   tables, and each master's binlog holds every row change exactly once,
//!   with its true origin (server id and GTID domain): nothing loops back;
//! - `superior` (`#LOCAL`), written on both, stays different on each and
//!   never crosses;
//! - a write to `acme` on the wrong master (nyc) is not applied to sjc; it
//!   is counted in `droppedCount` and logged as a warning;
//! - `CREATE DATABASE newshard` on nyc stops service nyc `OFFLINE:ERROR`
//!   with a pending error naming seqno and shard; `shard insert` and
//!   `online` resume it and `newshard` arrives on sjc with nothing lost.
//!
//! Runs on its own sandbox (not the default one): `MM_DIR` (default
//! `/tmp/shardrep-mm`), `MM_SJC_PORT` (29306), `MM_NYC_PORT` (29406), as
//! `scripts/multimaster.sh`, which it starts. `MM_TEST_WRITE_SECS` (default
//! 20) sets how long the concurrent writes run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// `conf/sandbox.env`'s value of `key`, the environment winning.
fn sandbox_setting(key: &str) -> String {
    if let Ok(v) = std::env::var(key) {
        return v;
    }
    let text = std::fs::read_to_string(root().join("conf/sandbox.env")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("conf/sandbox.env lacks {key}"))
        .to_string()
}

/// One master of the pair.
#[derive(Clone, Debug)]
struct Master {
    name: &'static str,
    port: u16,
    server_id: u32,
    domain: u32,
    binlog_dir: PathBuf,
}

impl Master {
    async fn connect(&self) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some(sandbox_setting("SANDBOX_USER")))
            .pass(Some(sandbox_setting("SANDBOX_PASSWORD")))
            .prefer_socket(false);
        Conn::new(opts).await.expect("connect to master")
    }
}

/// A running `shardrep run` of one direction.
struct Service {
    name: &'static str,
    dir: PathBuf,
    child: Option<Child>,
}

impl Service {
    fn config(&self) -> PathBuf {
        self.dir.join("shardrep.toml")
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("shardrep.log")).unwrap_or_default()
    }

    fn ctl(&self, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shardrepctl"));
        command
            .arg("--config")
            .arg(self.config())
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("run shardrepctl");
        if let Some(text) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ctl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (code, out, err) = self.ctl(args, stdin);
        assert_eq!(
            code, 0,
            "service {}: shardrepctl {args:?} failed:\n{out}\n{err}",
            self.name
        );
        out
    }

    fn status(&self) -> Value {
        serde_json::from_str(&self.ctl_ok(&["status", "--json"], None)).expect("status JSON")
    }

    fn state(&self) -> String {
        field_text(&self.status(), "state")
    }

    fn wait_state(&self, state: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if self.ctl(&["services"], None).0 == 0 && self.state() == state {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "service {} not {state} within {secs} s (status {:?}); log:\n{}",
                self.name,
                self.ctl(&["status"], None).1,
                tail(&self.log_text())
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Panics with the pending error when the service is OFFLINE:ERROR.
    fn assert_not_failed(&self) {
        let status = self.status();
        assert_ne!(
            field_text(&status, "state"),
            "OFFLINE:ERROR",
            "service {} failed: {status}\nlog:\n{}",
            self.name,
            tail(&self.log_text())
        );
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(60);
            while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if child.try_wait().unwrap().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The value of `key` anywhere in a status document.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|x| field(x, key))),
        Value::Array(items) => items.iter().find_map(|x| field(x, key)),
        _ => None,
    }
}

fn field_text(v: &Value, key: &str) -> String {
    match field(v, key) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn field_u64(v: &Value, key: &str) -> u64 {
    match field(v, key) {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

/// `conf/<name>.toml` with this run's ports, master server ids,
/// directories and the repository's shard.map (what
/// `scripts/multimaster.sh start` does).
fn service_toml(name: &str, dir: &Path, sjc: &Master, nyc: &Master) -> String {
    let text = std::fs::read_to_string(root().join(format!("conf/{name}.toml"))).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let line = match line {
            "port = 29306" => format!("port = {}", sjc.port),
            "port = 29406" => format!("port = {}", nyc.port),
            "10 = \"sjc\"" => format!("{} = \"sjc\"", sjc.server_id),
            "20 = \"nyc\"" => format!("{} = \"nyc\"", nyc.server_id),
            "map_file = \"shard.map\"" => {
                format!("map_file = \"{}\"", root().join("shard.map").display())
            }
            other => other.replace(
                &format!("/tmp/shardrep-mm/service-{name}"),
                &dir.display().to_string(),
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn start_service(name: &'static str, base: &Path, sjc: &Master, nyc: &Master) -> Service {
    let dir = base.join(format!("service-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("shardrep.toml"),
        service_toml(name, &dir, sjc, nyc),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("shardrep.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .arg("run")
        .arg("--config")
        .arg(dir.join("shardrep.toml"))
        .env("SHARDREP_PASSWORD", sandbox_setting("SANDBOX_PASSWORD"))
        .env("SHARDREP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start shardrep");
    Service {
        name,
        dir,
        child: Some(child),
    }
}

async fn exec(conn: &mut Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn wait_until<F, Fut>(what: &str, secs: u64, services: &[&Service], mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if check().await {
            return;
        }
        for s in services {
            s.assert_not_failed();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn table_exists(m: &Master, schema: &str) -> bool {
    let mut c = m.connect().await;
    let n: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'",
            (schema,),
        )
        .await
        .unwrap();
    n == Some(1)
}

type Rows = Vec<(i64, i64, i64, String)>;

/// Per (master, schema): the inserted ids and the updates `(id, n)`.
type Written = BTreeMap<(&'static str, &'static str), (BTreeSet<i64>, BTreeSet<(i64, i64)>)>;

/// Per (kind, schema, id, n after): the origins `(server id, domain)` of
/// each time the change is in a binlog.
type Origins = BTreeMap<(String, String, i64, i64), Vec<(u32, Option<u32>)>>;

async fn rows(m: &Master, schema: &str) -> Rows {
    let mut c = m.connect().await;
    c.query(format!(
        "SELECT id, writer, n, v FROM {schema}.t ORDER BY id"
    ))
    .await
    .unwrap_or_default()
}

/// One writer: `txns` transactions on `schema`.t at `m`, ids from
/// `first_id`; every third transaction also updates the previous row.
/// Returns (inserted ids, (id, n) of every update).
async fn writer(
    m: Master,
    schema: &'static str,
    writer_id: i64,
    first_id: i64,
    stop: Arc<AtomicBool>,
    pause_ms: u64,
) -> (Vec<i64>, Vec<(i64, i64)>) {
    let mut c = m.connect().await;
    let mut ids = Vec::new();
    let mut updates = Vec::new();
    let mut n_of: BTreeMap<i64, i64> = BTreeMap::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = first_id + i;
        let mut tx = c
            .start_transaction(mysql_async::TxOpts::default())
            .await
            .unwrap();
        tx.exec_drop(
            format!("INSERT INTO {schema}.t (id, writer, n, v) VALUES (?, ?, 0, ?)"),
            (id, writer_id, format!("{schema}-{writer_id}-{i}")),
        )
        .await
        .unwrap();
        if i % 3 == 2 {
            let prev = id - 1;
            tx.exec_drop(
                format!("UPDATE {schema}.t SET n = n + 1 WHERE id = ?"),
                (prev,),
            )
            .await
            .unwrap();
            let n = n_of.entry(prev).or_insert(0);
            *n += 1;
            updates.push((prev, *n));
        }
        tx.commit().await.unwrap();
        ids.push(id);
        n_of.entry(id).or_insert(0);
        i += 1;
        if pause_ms > 0 {
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        }
    }
    (ids, updates)
}

/// A row change seen in a binlog: (schema, id, n after) and its origin.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    kind: String,
    schema: String,
    id: i64,
    n: i64,
    server_id: u32,
    domain: Option<u32>,
}

/// Every insert/update of the test schemas in `m`'s binlog from `from`
/// (decoded by `shardrep extract`), and the GTID count per (domain,
/// server id).
fn binlog_changes(m: &Master, from: &str) -> (Vec<Seen>, BTreeMap<(u32, u32), usize>) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .arg("extract")
        .arg("--binlog-dir")
        .arg(&m.binlog_dir)
        .arg("--from")
        .arg(from)
        .arg("--json")
        .output()
        .expect("shardrep extract");
    assert!(
        out.status.success(),
        "extract failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen = Vec::new();
    let mut gtids: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let txn: Value = serde_json::from_str(line).expect("extract JSON");
        let server_id = txn["server_id"].as_u64().unwrap() as u32;
        let domain = txn["gtid"]
            .as_str()
            .and_then(|g| g.split('-').next())
            .and_then(|d| d.parse().ok());
        if let Some(d) = domain {
            *gtids.entry((d, server_id)).or_default() += 1;
        }
        for change in txn["changes"].as_array().unwrap() {
            let kind = change["type"].as_str().unwrap_or("");
            if kind != "insert" && kind != "update" {
                continue;
            }
            let schema = change["schema"].as_str().unwrap().to_string();
            if !["acme", "pinnacle", "billing", "superior", "newshard"].contains(&schema.as_str()) {
                continue;
            }
            for row in change["rows"].as_array().unwrap() {
                let after = &row["after"];
                // Names need binlog_row_metadata=FULL; without them (the
                // server's default NO_LOG) extract names columns by
                // position: `id` is @1, `n` is @3.
                let column = |name: &str, position: &str| {
                    after
                        .get(name)
                        .or_else(|| after.get(position))
                        .and_then(Value::as_i64)
                };
                seen.push(Seen {
                    kind: kind.to_string(),
                    schema: schema.clone(),
                    id: column("id", "@1").unwrap(),
                    n: column("n", "@3").unwrap_or(0),
                    server_id,
                    domain,
                });
            }
        }
    }
    (seen, gtids)
}

async fn binlog_position(m: &Master) -> String {
    let mut c = m.connect().await;
    let row: mysql_async::Row = c
        .query_first("SHOW MASTER STATUS")
        .await
        .unwrap()
        .expect("binlog on");
    let file: String = row.get(0).unwrap();
    let pos: u64 = row.get(1).unwrap();
    format!("{file}:{pos}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_masters_one_service_per_direction() {
    let base = PathBuf::from(env_or("MM_DIR", "/tmp/shardrep-mm"));
    // The pair's masters (idempotent), and no service of the script's own
    // running against them while the test does.
    for cmd in ["up", "stop"] {
        let out = Command::new("bash")
            .arg(root().join("scripts/multimaster.sh"))
            .arg(cmd)
            .output()
            .expect("scripts/multimaster.sh");
        assert!(
            out.status.success(),
            "scripts/multimaster.sh {cmd} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut sjc = Master {
        name: "sjc",
        port: env_or("MM_SJC_PORT", "29306").parse().unwrap(),
        server_id: 0,
        domain: 0,
        binlog_dir: base.join("sjc/master/binlog"),
    };
    let mut nyc = Master {
        name: "nyc",
        port: env_or("MM_NYC_PORT", "29406").parse().unwrap(),
        server_id: 0,
        domain: 0,
        binlog_dir: base.join("nyc/master/binlog"),
    };
    for m in [&mut sjc, &mut nyc] {
        let mut c = m.connect().await;
        let (id, domain): (u32, u32) = c
            .query_first("SELECT @@server_id, @@gtid_domain_id")
            .await
            .unwrap()
            .unwrap();
        m.server_id = id;
        m.domain = domain;
        // A clean start: nothing of an earlier run, not binlogged.
        exec(
            &mut c,
            "SET SESSION sql_log_bin = 0; \
             DROP DATABASE IF EXISTS acme; DROP DATABASE IF EXISTS pinnacle; \
             DROP DATABASE IF EXISTS billing; DROP DATABASE IF EXISTS superior; \
             DROP DATABASE IF EXISTS newshard; DROP DATABASE IF EXISTS shardrep_sjc; \
             DROP DATABASE IF EXISTS shardrep_nyc; SET SESSION sql_log_bin = 1",
        )
        .await;
    }
    let (sjc, nyc) = (&sjc, &nyc);
    assert_ne!(sjc.server_id, nyc.server_id);
    assert_ne!(
        sjc.domain, nyc.domain,
        "the masters need distinct GTID domains"
    );
    let sjc_from = binlog_position(sjc).await;
    let nyc_from = binlog_position(nyc).await;

    let test_dir = base.join(format!("test-{}", std::process::id()));
    let service_sjc = start_service("sjc", &test_dir, sjc, nyc);
    let service_nyc = start_service("nyc", &test_dir, sjc, nyc);
    service_sjc.wait_state("ONLINE", 120);
    service_nyc.wait_state("ONLINE", 120);
    let services = [&service_sjc, &service_nyc];

    // Schemas, each created on its home master; superior on both.
    let table = "CREATE TABLE t (id BIGINT PRIMARY KEY, writer INT NOT NULL, n INT NOT NULL, \
                 v VARCHAR(64) NOT NULL)";
    {
        let mut c = sjc.connect().await;
        for schema in ["acme", "billing", "superior"] {
            exec(&mut c, &format!("CREATE DATABASE {schema}")).await;
            exec(&mut c, &format!("USE {schema}")).await;
            exec(&mut c, table).await;
        }
        let mut c = nyc.connect().await;
        for schema in ["pinnacle", "superior"] {
            exec(&mut c, &format!("CREATE DATABASE {schema}")).await;
            exec(&mut c, &format!("USE {schema}")).await;
            exec(&mut c, table).await;
        }
    }
    wait_until(
        "schemas on the other master",
        120,
        &services,
        || async move {
            table_exists(nyc, "acme").await
                && table_exists(nyc, "billing").await
                && table_exists(sjc, "pinnacle").await
        },
    )
    .await;

    // Concurrent writes in both directions for a while.
    let write_secs: u64 = env_or("MM_TEST_WRITE_SECS", "20").parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (m, schema, writer_id, first, pause) in [
        (sjc, "acme", 1, 1_000_000, 0),
        (sjc, "acme", 2, 2_000_000, 0),
        (sjc, "billing", 3, 3_000_000, 100),
        (sjc, "superior", 4, 4_000_000, 20),
        (nyc, "pinnacle", 5, 5_000_000, 0),
        (nyc, "pinnacle", 6, 6_000_000, 0),
        (nyc, "superior", 7, 7_000_000, 20),
    ] {
        tasks.push((
            m.name,
            schema,
            tokio::spawn(writer(
                Master::clone(m),
                schema,
                writer_id,
                first,
                stop.clone(),
                pause,
            )),
        ));
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(write_secs) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for s in services {
            s.assert_not_failed();
        }
    }
    stop.store(true, Ordering::Relaxed);
    // (master, schema) -> inserted ids, updates (id, n)
    let mut written: Written = BTreeMap::new();
    for (master, schema, task) in tasks {
        let (ids, updates) = task.await.unwrap();
        let entry = written.entry((master, schema)).or_default();
        entry.0.extend(ids);
        entry.1.extend(updates);
    }
    for ((master, schema), (ids, updates)) in &written {
        eprintln!(
            "wrote {} transactions ({} with an update) to {schema} on {master}",
            ids.len(),
            updates.len()
        );
        assert!(!ids.is_empty());
    }

    // Both masters converge on acme, billing and pinnacle.
    for schema in ["acme", "billing", "pinnacle"] {
        let home = if schema == "pinnacle" { "nyc" } else { "sjc" };
        let expected = written[&(home, schema)].0.len();
        wait_until(
            &format!("{schema} equal on both masters"),
            600,
            &services,
            || async move {
                let a = rows(sjc, schema).await;
                a.len() == expected && a == rows(nyc, schema).await
            },
        )
        .await;
    }

    // superior is #LOCAL: each master has only its own rows.
    for (m, writer_id) in [(sjc, 4), (nyc, 7)] {
        let got = rows(m, "superior").await;
        let want = &written[&(m.name, "superior")].0;
        assert_eq!(got.len(), want.len(), "superior on {}", m.name);
        assert!(
            got.iter().all(|r| r.1 == writer_id),
            "superior rows crossed to {}",
            m.name
        );
    }

    // A write on the wrong master: acme on nyc is dropped by service nyc.
    let dropped_before = field_u64(&service_nyc.status(), "droppedCount");
    {
        let mut c = nyc.connect().await;
        exec(
            &mut c,
            "INSERT INTO acme.t (id, writer, n, v) VALUES (9000001, 9, 0, 'wrong master')",
        )
        .await;
        // A home write after it: once it is on sjc, the wrong one was decided.
        exec(
            &mut c,
            "INSERT INTO pinnacle.t (id, writer, n, v) VALUES (9000002, 9, 0, 'after')",
        )
        .await;
    }
    wait_until(
        "the pinnacle row after the wrong write",
        120,
        &services,
        || async move { rows(sjc, "pinnacle").await.iter().any(|r| r.0 == 9000002) },
    )
    .await;
    assert!(
        !rows(sjc, "acme").await.iter().any(|r| r.0 == 9000001),
        "acme written on nyc was applied to sjc"
    );
    let dropped_after = field_u64(&service_nyc.status(), "droppedCount");
    assert!(
        dropped_after > dropped_before,
        "droppedCount did not move ({dropped_before} -> {dropped_after})"
    );
    let log = service_nyc.log_text();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("shard=acme")
            && l.contains("written on this service's master")),
        "no warning about the wrong-master write in service nyc's log:\n{}",
        tail(&log)
    );
    // Keep the tables comparable: remove it on nyc only.
    exec(
        &mut nyc.connect().await,
        "SET SESSION sql_log_bin = 0; DELETE FROM acme.t WHERE id = 9000001; SET SESSION sql_log_bin = 1",
    )
    .await;

    // Each master's binlog holds each change once, with its true origin.
    wait_until(
        "both masters idle and equal",
        300,
        &services,
        || async move {
            rows(sjc, "pinnacle").await == rows(nyc, "pinnacle").await
                && rows(sjc, "acme").await == rows(nyc, "acme").await
        },
    )
    .await;
    for (m, from) in [(sjc, sjc_from.as_str()), (nyc, nyc_from.as_str())] {
        let (seen, gtids) = binlog_changes(m, from);
        eprintln!(
            "{} binlog: GTIDs per (domain, server id): {gtids:?}",
            m.name
        );
        let mut count: Origins = BTreeMap::new();
        for s in &seen {
            count
                .entry((s.kind.clone(), s.schema.clone(), s.id, s.n))
                .or_default()
                .push((s.server_id, s.domain));
        }
        for ((master, schema), (ids, updates)) in &written {
            if *schema == "superior" && *master != m.name {
                // #LOCAL: the other master's superior never reaches m.
                for id in ids {
                    assert!(
                        !count.contains_key(&("insert".into(), schema.to_string(), *id, 0)),
                        "superior row {id} of {master} crossed to {}",
                        m.name
                    );
                }
                continue;
            }
            let origin = if *master == "sjc" { sjc } else { nyc };
            let want = vec![(origin.server_id, Some(origin.domain))];
            for id in ids {
                let key = ("insert".to_string(), schema.to_string(), *id, 0);
                assert_eq!(
                    count.get(&key),
                    Some(&want),
                    "{} binlog: insert of {schema} id {id} (written on {master})",
                    m.name
                );
            }
            for (id, n) in updates {
                let key = ("update".to_string(), schema.to_string(), *id, *n);
                assert_eq!(
                    count.get(&key),
                    Some(&want),
                    "{} binlog: update of {schema} id {id} to n={n} (written on {master})",
                    m.name
                );
            }
        }
        // Nothing of the other master's domain was written with this
        // master's server id (a loop would show there), and each domain
        // carries one server id.
        for (domain, server_id) in gtids.keys() {
            let expected = if *domain == sjc.domain {
                sjc.server_id
            } else {
                nyc.server_id
            };
            assert_eq!(
                *server_id, expected,
                "{} binlog: domain {domain} written by server {server_id}",
                m.name
            );
        }
    }

    // A new shard nobody mapped: service nyc stops with OFFLINE:ERROR.
    {
        let mut c = nyc.connect().await;
        exec(&mut c, "CREATE DATABASE newshard").await;
    }
    service_nyc.wait_state("OFFLINE:ERROR", 120);
    let status = service_nyc.status();
    let pending = field_text(&status, "pendingError");
    let seqno = field_u64(&status, "pendingErrorSeqno");
    assert!(
        pending.contains("shard=newshard") && pending.contains(&format!("seqno={seqno}")),
        "pending error: {status}"
    );
    assert_eq!(field_text(&status, "pendingErrorShard"), "newshard");
    // Writes go on meanwhile; they wait in service nyc's queue.
    {
        let mut c = nyc.connect().await;
        exec(&mut c, "USE newshard").await;
        exec(&mut c, table).await;
        exec(
            &mut c,
            "INSERT INTO newshard.t (id, writer, n, v) VALUES (1, 8, 0, 'new'), (2, 8, 0, 'shard')",
        )
        .await;
    }
    // The DBA maps it (home nyc) in both services, then resumes nyc.
    let row = "shard_id master critical\nnewshard nyc false\n";
    service_sjc.ctl_ok(&["shard", "insert"], Some(row));
    service_nyc.ctl_ok(&["shard", "insert"], Some(row));
    service_nyc.ctl_ok(&["online"], None);
    service_nyc.wait_state("ONLINE", 120);
    wait_until("newshard on sjc", 120, &services, || async move {
        table_exists(sjc, "newshard").await && rows(sjc, "newshard").await.len() == 2
    })
    .await;
    assert_eq!(rows(sjc, "newshard").await, rows(nyc, "newshard").await);
    // Service sjc dropped newshard coming back (home nyc): still online,
    // and nyc holds newshard's rows once.
    assert_eq!(service_sjc.state(), "ONLINE");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (seen, _) = binlog_changes(nyc, &nyc_from);
    assert_eq!(
        seen.iter().filter(|s| s.schema == "newshard").count(),
        2,
        "newshard rows in nyc's binlog"
    );

    drop(service_sjc);
    drop(service_nyc);
    let _ = std::fs::remove_dir_all(&test_dir);
}
