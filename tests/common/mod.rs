//! Test harness shared by the integration tests: starts or reuses the MariaDB
//! sandbox of `scripts/sandbox.sh` (settings from `conf/sandbox.env`, the
//! environment winning), gives each test its own schema names, compares
//! tables on two servers row by row and waits on conditions with a deadline.
//!
//! Every integration test file declares `mod common;` and uses what it needs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Value};

pub mod committed_watch;
pub mod fault_proxy;
pub mod row_metadata;
pub mod row_workload;
pub mod service;

/// One server of the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// The master, at `SANDBOX_MASTER_PORT`.
    Master,
    /// Native replica K (1-based), at `SANDBOX_MASTER_PORT + K`.
    Replica(u16),
}

impl Server {
    /// The sandbox's name for the server: `master`, `replica1`, ...
    pub fn name(self) -> String {
        match self {
            Server::Master => "master".to_string(),
            Server::Replica(k) => format!("replica{k}"),
        }
    }
}

/// Connection facts of the running sandbox.
#[derive(Debug)]
pub struct Sandbox {
    /// The repository root (where `scripts/` and `conf/` are).
    pub root: PathBuf,
    /// Loopback address every server listens on.
    pub host: String,
    /// The master's TCP port; replica K listens on `master_port + K`.
    pub master_port: u16,
    /// Administrative user with all privileges on every server.
    pub user: String,
    /// That user's password.
    pub password: String,
    /// The sandbox's base directory (datadirs, sockets, logs).
    pub dir: PathBuf,
}

/// How many native replicas the tests need running.
pub const REPLICAS: u16 = 2;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `conf/sandbox.env` merged with the environment (the environment wins).
fn sandbox_settings(root: &Path) -> HashMap<String, String> {
    let path = root.join("conf/sandbox.env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut settings = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: bad line {line:?}", path.display()));
        let value = std::env::var(key).unwrap_or_else(|_| value.to_string());
        settings.insert(key.to_string(), value);
    }
    settings
}

fn port_open(host: &str, port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &format!("{host}:{port}").parse().expect("loopback address"),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// The sandbox, started with `scripts/sandbox.sh up` on first use in this
/// test process when its master or replicas are not answering. Panics with
/// the script's output when it cannot be started.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        let root = repo_root();
        let settings = sandbox_settings(&root);
        let get = |k: &str| {
            settings
                .get(k)
                .cloned()
                .unwrap_or_else(|| panic!("conf/sandbox.env lacks {k}"))
        };
        let sandbox = Sandbox {
            host: get("SANDBOX_HOST"),
            master_port: get("SANDBOX_MASTER_PORT")
                .parse()
                .expect("SANDBOX_MASTER_PORT"),
            user: get("SANDBOX_USER"),
            password: get("SANDBOX_PASSWORD"),
            dir: PathBuf::from(get("SHARDREP_SANDBOX_DIR")),
            root: root.clone(),
        };
        let all_up = (0..=REPLICAS).all(|k| port_open(&sandbox.host, sandbox.master_port + k));
        if !all_up {
            let out = Command::new("bash")
                .arg(root.join("scripts/sandbox.sh"))
                .arg("up")
                .arg(REPLICAS.to_string())
                .output()
                .expect("run scripts/sandbox.sh");
            assert!(
                out.status.success(),
                "scripts/sandbox.sh up {REPLICAS} failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        sandbox
    })
}

impl Sandbox {
    /// TCP port of `server`.
    pub fn port(&self, server: Server) -> u16 {
        match server {
            Server::Master => self.master_port,
            Server::Replica(k) => self.master_port + k,
        }
    }

    /// Connection options for `server` over loopback TCP. `prefer_socket` is
    /// off so the test really uses TCP, as shardrep does.
    pub fn opts(&self, server: Server) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port(server))
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .prefer_socket(false)
            .into()
    }

    /// Runs `sql` (one statement or several, `;`-separated) on `server` on
    /// a connection of its own; panics naming the server and the SQL.
    pub async fn exec(&self, server: Server, sql: &str) {
        self.connect(server)
            .await
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}\n{sql}", server.name()));
    }

    /// Runs `sql` on `server` with the `mariadb` client, ignoring the
    /// outcome: for `Drop` guards that put a server back even when a test
    /// panics (no async runtime there).
    pub fn exec_best_effort(&self, server: Server, sql: &str) {
        let _ = std::process::Command::new("mariadb")
            .args([
                "--no-defaults",
                &format!("-h{}", self.host),
                &format!("-P{}", self.port(server)),
                &format!("-u{}", self.user),
                &format!("-p{}", self.password),
                "-e",
                sql,
            ])
            .output();
    }

    /// A new connection to `server`; panics naming the server when it fails.
    pub async fn connect(&self, server: Server) -> Conn {
        Conn::new(self.opts(server))
            .await
            .unwrap_or_else(|e| panic!("connect to {} ({}): {e}", server.name(), self.port(server)))
    }
}

/// A schema name of this test's own: `t_<label>_<pid>_<n>`, at most 64
/// characters, never equal to another test's in this or a concurrent run.
pub fn unique_schema(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("_{}_{n}", std::process::id());
    let mut label: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    label.truncate(64 - 2 - suffix.len());
    format!("t_{label}{suffix}")
}

/// `name` as a MySQL identifier (the crate's own quoting).
pub use shardrep::mysql::quote_ident;

/// Polls `check` until it yields `Some`, at most until `timeout` has passed;
/// then fails with `what` in the message. The poll interval grows from 5 ms
/// to 100 ms: waiting is bounded by the condition, not by a fixed sleep.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Waits until the master's current binlog file holds its final
/// `Binlog_checkpoint` event, so that `SHOW MASTER STATUS` stops moving
/// while nothing is written.
///
/// After a rotation (FLUSH BINARY LOGS, a change of `binlog_checksum`,
/// `max_binlog_size`) MariaDB writes a Binlog_checkpoint event into the new
/// file from its binlog background thread once the storage engines have
/// made the older files' transactions durable (MariaDB KB
/// "Binlog_checkpoint_log_event"; mysql-test's `wait_for_purge.inc` calls
/// them "async binlog checkpoints"). That can be a second after the
/// statement returned, so an end position read too early lies before it and
/// one read late lies after the last transaction. Settled: the file's last
/// checkpoint names the file itself. Panics after 30 s.
pub async fn wait_binlog_checkpoint_settled(master: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let file: String = master
            .query_first::<mysql_async::Row, _>("SHOW MASTER STATUS")
            .await
            .expect("SHOW MASTER STATUS")
            .and_then(|row| row.get(0))
            .expect("the master logs binlogs");
        let events: Vec<(String, String)> = master
            .query_map(
                format!(
                    "SHOW BINLOG EVENTS IN '{}'",
                    file.replace('\\', "\\\\").replace('\'', "''")
                ),
                |row: mysql_async::Row| {
                    (
                        row.get::<String, _>("Event_type").unwrap_or_default(),
                        String::from_utf8_lossy(&row.get::<Vec<u8>, _>("Info").unwrap_or_default())
                            .into_owned(),
                    )
                },
            )
            .await
            .expect("SHOW BINLOG EVENTS");
        let last_checkpoint = events
            .iter()
            .rev()
            .find(|(kind, _)| kind == "Binlog_checkpoint")
            .map(|(_, info)| info.trim().to_string());
        // No checkpoint at all: a binlog format without them; nothing to wait for.
        if last_checkpoint.as_deref().is_none_or(|named| named == file) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the master's binlog {file} still has no Binlog_checkpoint naming itself after 30 s \
             (last names {last_checkpoint:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `replica` has executed everything the master has binlogged
/// so far (`MASTER_GTID_WAIT` on the master's `gtid_binlog_pos`).
pub async fn wait_replica_caught_up(sandbox: &Sandbox, replica: Server, timeout: Duration) {
    let mut master = sandbox.connect(Server::Master).await;
    let pos: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("read master gtid_binlog_pos")
        .expect("one row");
    let mut conn = sandbox.connect(replica).await;
    let waited: Option<i64> = conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (pos.clone(), timeout.as_secs_f64()),
        )
        .await
        .expect("MASTER_GTID_WAIT");
    assert_eq!(
        waited,
        Some(0),
        "{} did not reach master position {pos} within {timeout:?}",
        replica.name()
    );
}

/// Primary-key columns of `schema.table` in key order (empty without a key).
pub async fn primary_key_columns(conn: &mut Conn, schema: &str, table: &str) -> Vec<String> {
    conn.exec(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' \
         ORDER BY SEQ_IN_INDEX",
        (schema, table),
    )
    .await
    .expect("read primary key columns")
}

/// Every row of `schema.table` as raw values (`SET NAMES binary`, so strings
/// are the stored bytes), ordered by the primary key, or by every column
/// when the table has none.
pub async fn table_rows(conn: &mut Conn, schema: &str, table: &str) -> Vec<Vec<Value>> {
    conn.query_drop("SET NAMES binary")
        .await
        .expect("SET NAMES binary");
    let mut order = primary_key_columns(conn, schema, table).await;
    if order.is_empty() {
        order = conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            .await
            .expect("read columns");
    }
    assert!(!order.is_empty(), "table {schema}.{table} not found");
    let order_by: Vec<String> = order.iter().map(|c| quote_ident(c)).collect();
    let sql = format!(
        "SELECT * FROM {}.{} ORDER BY {}",
        quote_ident(schema),
        quote_ident(table),
        order_by.join(", ")
    );
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.expect("read table rows");
    rows.into_iter().map(|r| r.unwrap()).collect()
}

/// Asserts that `schema.table` holds exactly the same rows, in primary-key
/// order, on `left` and `right`; returns the rows.
pub async fn assert_table_equal(
    sandbox: &Sandbox,
    left: Server,
    right: Server,
    schema: &str,
    table: &str,
) -> Vec<Vec<Value>> {
    let mut l = sandbox.connect(left).await;
    let mut r = sandbox.connect(right).await;
    let left_rows = table_rows(&mut l, schema, table).await;
    let right_rows = table_rows(&mut r, schema, table).await;
    assert_eq!(
        left_rows.len(),
        right_rows.len(),
        "{schema}.{table}: row counts differ between {} and {}",
        left.name(),
        right.name()
    );
    for (i, (a, b)) in left_rows.iter().zip(&right_rows).enumerate() {
        assert_eq!(
            a,
            b,
            "{schema}.{table}: row {i} differs between {} and {}",
            left.name(),
            right.name()
        );
    }
    left_rows
}
