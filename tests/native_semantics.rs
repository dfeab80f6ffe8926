//! Under `[apply] method = "binlog"` the replica's own row applier
//! applies the master's row events: the replica ends exactly as a native
//! replica of the same master, where the `sql` method re-writes rows as
//! SQL and differs.
//!
//! One master workload, two replicas: the sandbox's native replica
//! (`replica1`, native replication running) and the shardrep target
//! (`replica2`, native replication stopped). Every table, and every
//! system-versioned table's whole history, must be equal on both, under
//! both `binlog_row_metadata` levels:
//! - triggers on the replicas (as a replica cloned from its master has
//!   them): row events must not fire them, statement events (a MIXED
//!   master) must;
//! - system-versioned tables, with implicit and explicit period columns:
//!   the history's timestamps are the master's;
//! - generated columns: stored, virtual, indexed, unique;
//! - a replica table with an extra trailing column (both replicas).

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Value;

use common::row_metadata::{RowMetadata, LEVELS};
use common::service::{
    create_everywhere, drop_everywhere, master_position, stop_target_slave, wait_applied_to_master,
    wait_for_socket, ServiceSpec, TARGET,
};
use common::{quote_ident, sandbox, unique_schema, Sandbox, Server};

/// The tests of this file one at a time (they set the master's
/// `binlog_row_metadata`).
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The native replica.
const NATIVE: Server = Server::Replica(1);

/// The rows `sql` returns on `server`.
async fn rows(sb: &Sandbox, server: Server, sql: &str) -> Vec<Vec<Value>> {
    let rows: Vec<mysql_async::Row> = sb.connect(server).await.query(sql).await.unwrap();
    rows.into_iter().map(|r| r.unwrap()).collect()
}

/// Asserts that `sql` returns the same rows on the native replica and on
/// the target; returns how many.
async fn assert_native_equal(sb: &Sandbox, what: &str, sql: &str) -> usize {
    let native = rows(sb, NATIVE, sql).await;
    let target = rows(sb, TARGET, sql).await;
    assert_eq!(
        native, target,
        "{what}: the shardrep replica differs from the native replica ({sql})"
    );
    native.len()
}

/// Runs `statements` on every server with `sql_log_bin = 0` (objects a
/// replica cloned from its master has).
async fn everywhere(sb: &Sandbox, statements: &str) {
    for server in [Server::Master, NATIVE, TARGET] {
        sb.exec(
            server,
            &format!("SET SESSION sql_log_bin = 0; {statements}"),
        )
        .await;
    }
}

/// Applies the master's binlog from `start` to the target with the
/// `binlog` method until it reached the master's end, waits for the
/// native replica too, and stops the service.
async fn apply_binlog_method(sb: &'static Sandbox, schema: &str, start: &str) {
    let target_start = rows(sb, TARGET, "SHOW MASTER STATUS").await;
    let mut spec = ServiceSpec::new("native", &[schema.to_string()], start);
    spec.method = Some("binlog");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    common::wait_replica_caught_up(sb, NATIVE, std::time::Duration::from_secs(120)).await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    assert_no_binlog_text_in_the_replicas_binlog(sb, &target_start).await;
}

/// The target binlogs what shardrep applied (`log_slave_updates` as a
/// native replica would): its binlog since `start` (a `SHOW MASTER STATUS`
/// row) must not carry the BINLOG statements' text, which a server with
/// `binlog_annotate_row_events` logs before every rows event it applies
/// (a replica binlog 80 times the master's, before the fix).
async fn assert_no_binlog_text_in_the_replicas_binlog(sb: &Sandbox, start: &[Vec<Value>]) {
    let text = |v: &Value| match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    let Some(first) = start.first() else {
        return; // the target does not binlog
    };
    let (file, pos) = (text(&first[0]), text(&first[1]));
    let logs = rows(sb, TARGET, "SHOW BINARY LOGS").await;
    let mut annotated = 0;
    for log in logs.iter().map(|l| text(&l[0])).filter(|l| *l >= file) {
        let from = if log == file { pos.clone() } else { "4".into() };
        let events = rows(
            sb,
            TARGET,
            &format!("SHOW BINLOG EVENTS IN '{log}' FROM {from}"),
        )
        .await;
        for e in &events {
            let info = text(&e[5]);
            assert!(
                !info.starts_with("BINLOG '"),
                "the target's binlog {log} holds a BINLOG statement's text: {}",
                &info[..info.len().min(200)]
            );
            annotated += usize::from(text(&e[2]) == "Annotate_rows");
        }
    }
    eprintln!("target binlog since {file}:{pos}: {annotated} annotations, none a BINLOG statement");
}

// Triggers on both replicas: the master's row events carry what its own
// triggers did (the audit rows), and neither replica fires its trigger
// for them; statement-format events do fire them, on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_fire_as_under_native_replication() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    for level in LEVELS {
        let _meta = RowMetadata::set(sb, level).await;
        let schema = unique_schema("native_trg");
        let q = quote_ident(&schema);
        create_everywhere(
            sb,
            &schema,
            &[
                ("t", "(id INT PRIMARY KEY, v INT NOT NULL)"),
                (
                    "audit",
                    "(id INT AUTO_INCREMENT PRIMARY KEY, tid INT NOT NULL, note VARCHAR(10))",
                ),
                ("s", "(id INT PRIMARY KEY)"),
                ("counter", "(id INT PRIMARY KEY, n INT NOT NULL)"),
            ],
        )
        .await;
        everywhere(
            sb,
            &format!(
                "INSERT INTO {q}.counter VALUES (1, 0); \
                 CREATE TRIGGER {q}.t_ai AFTER INSERT ON {q}.t FOR EACH ROW \
                 INSERT INTO {q}.audit (tid, note) VALUES (NEW.id, 'ins'); \
                 CREATE TRIGGER {q}.t_au AFTER UPDATE ON {q}.t FOR EACH ROW \
                 INSERT INTO {q}.audit (tid, note) VALUES (NEW.id, 'upd'); \
                 CREATE TRIGGER {q}.s_ai AFTER INSERT ON {q}.s FOR EACH ROW \
                 UPDATE {q}.counter SET n = n + 1 WHERE id = 1"
            ),
        )
        .await;
        let start = master_position(sb).await;
        let mut master = sb.connect(Server::Master).await;
        for i in 0..20 {
            master
                .query_drop(format!(
                    "BEGIN; INSERT INTO {q}.t VALUES ({i}, {i}); \
                     UPDATE {q}.t SET v = v + 100 WHERE id = {i} DIV 2; COMMIT"
                ))
                .await
                .unwrap();
        }
        master
            .query_drop("SET SESSION binlog_format = 'STATEMENT'")
            .await
            .unwrap();
        for i in 0..10 {
            master
                .query_drop(format!("INSERT INTO {q}.s VALUES ({i})"))
                .await
                .unwrap();
        }
        drop(master);
        apply_binlog_method(sb, &schema, &start).await;
        for (table, want) in [("t", 20), ("audit", 40), ("s", 10), ("counter", 1)] {
            let n = assert_native_equal(
                sb,
                &format!("{level}: {table}"),
                &format!("SELECT * FROM {q}.{table} ORDER BY 1"),
            )
            .await;
            assert_eq!(n, want, "{level}: rows of {table}");
        }
        let counter = rows(sb, TARGET, &format!("SELECT n FROM {q}.counter")).await;
        assert_eq!(
            counter,
            vec![vec![Value::Bytes(b"10".to_vec())]],
            "{level}: the statement events fired the replica's trigger"
        );
        drop_everywhere(sb, &[schema]).await;
    }
}

// System-versioned tables (implicit and explicit period columns) and
// generated columns (stored, virtual, indexed, unique), and a replica
// table with an extra trailing column: the whole history and every
// column as on the native replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_history_and_generated_columns_are_the_masters() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    for level in LEVELS {
        let _meta = RowMetadata::set(sb, level).await;
        let schema = unique_schema("native_ver");
        let q = quote_ident(&schema);
        create_everywhere(
            sb,
            &schema,
            &[
                (
                    "v1",
                    "(id INT PRIMARY KEY, x INT NOT NULL) WITH SYSTEM VERSIONING",
                ),
                (
                    "v2",
                    "(id INT PRIMARY KEY, x INT NOT NULL, \
                     rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START, \
                     re TIMESTAMP(6) GENERATED ALWAYS AS ROW END, \
                     PERIOD FOR SYSTEM_TIME (rs, re)) WITH SYSTEM VERSIONING",
                ),
                (
                    "g",
                    "(id INT PRIMARY KEY, a INT NOT NULL, b INT AS (a * 2) STORED, \
                     c INT AS (a + 1) VIRTUAL, d VARCHAR(12) AS (CONCAT('k', a)) VIRTUAL, \
                     UNIQUE KEY (d), KEY (c))",
                ),
                ("x", "(id INT PRIMARY KEY, v INT NOT NULL)"),
            ],
        )
        .await;
        for server in [NATIVE, TARGET] {
            sb.exec(
                server,
                &format!(
                    "SET SESSION sql_log_bin = 0; \
                     ALTER TABLE {q}.x ADD COLUMN extra INT NOT NULL DEFAULT 7"
                ),
            )
            .await;
        }
        let start = master_position(sb).await;
        let mut master = sb.connect(Server::Master).await;
        for i in 0..10 {
            master
                .query_drop(format!(
                    "BEGIN; INSERT INTO {q}.v1 VALUES ({i}, {i}); \
                     INSERT INTO {q}.v2 (id, x) VALUES ({i}, {i}); \
                     INSERT INTO {q}.g (id, a) VALUES ({i}, {i}); \
                     INSERT INTO {q}.x VALUES ({i}, {i}); COMMIT"
                ))
                .await
                .unwrap();
        }
        for i in 0..10 {
            master
                .query_drop(format!(
                    "BEGIN; UPDATE {q}.v1 SET x = x + 1 WHERE id = {i}; \
                     UPDATE {q}.v2 SET x = x + 1 WHERE id = {i}; \
                     UPDATE {q}.g SET a = a + 100 WHERE id = {i}; \
                     UPDATE {q}.x SET v = v + 1 WHERE id = {i}; COMMIT"
                ))
                .await
                .unwrap();
        }
        master
            .query_drop(format!(
                "DELETE FROM {q}.v1 WHERE id < 3; DELETE FROM {q}.v2 WHERE id < 3; \
                 DELETE FROM {q}.g WHERE id < 3; DELETE FROM {q}.x WHERE id < 3"
            ))
            .await
            .unwrap();
        drop(master);
        apply_binlog_method(sb, &schema, &start).await;
        for (what, sql, want) in [
            (
                "v1 history",
                format!(
                    "SELECT id, x, row_start, row_end FROM {q}.v1 FOR SYSTEM_TIME ALL \
                     ORDER BY id, row_start"
                ),
                20,
            ),
            (
                "v2 history",
                format!("SELECT id, x, rs, re FROM {q}.v2 FOR SYSTEM_TIME ALL ORDER BY id, rs"),
                20,
            ),
            (
                "g",
                format!("SELECT id, a, b, c, d FROM {q}.g ORDER BY id"),
                7,
            ),
            (
                "g by its unique key",
                format!("SELECT d FROM {q}.g FORCE INDEX (d) ORDER BY d"),
                7,
            ),
            ("x", format!("SELECT * FROM {q}.x ORDER BY id"), 7),
        ] {
            let n = assert_native_equal(sb, &format!("{level}: {what}"), &sql).await;
            assert_eq!(n, want, "{level}: rows of {what}");
        }
        drop_everywhere(sb, &[schema]).await;
    }
}

// A replica user without BINLOG REPLAY (or SUPER) is refused at the start,
// before anything on the replica changes (no catalog schema), with the
// grant to run; with the grant the same start goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_binlog_replay_is_refused_before_any_change() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let user = format!("nobl{}", std::process::id());
    let account = format!("'{user}'@'127.0.0.1'");
    sb.exec(
        TARGET,
        &format!(
            "SET SESSION sql_log_bin = 0; DROP USER IF EXISTS {account}; \
             CREATE USER {account} IDENTIFIED BY 'pw'; GRANT ALL ON *.* TO {account}; \
             REVOKE SUPER, BINLOG REPLAY ON *.* FROM {account}"
        ),
    )
    .await;
    let start = master_position(sb).await;
    let mut spec = ServiceSpec::new("nobl", &["nobl_nothing".to_string()], &start);
    spec.method = Some("binlog");
    spec.replica_user = Some(user.clone());
    spec.replica_password = Some("pw".to_string());
    let _catalog = spec.drop_catalog_on_panic(sb);
    let error = spec
        .run_until_idle(sb)
        .expect_err("a start without BINLOG REPLAY")
        .to_string();
    assert!(
        error.contains(&format!(
            "needs the BINLOG REPLAY privilege (or SUPER) for [replica] user \"{user}\""
        )) && error.contains("GRANT BINLOG REPLAY ON *.* TO")
            && error.contains("Nothing was changed on the replica"),
        "{error}"
    );
    let catalogs = rows(
        sb,
        TARGET,
        &format!(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{}'",
            spec.catalog()
        ),
    )
    .await;
    assert!(catalogs.is_empty(), "the catalog was created: {catalogs:?}");
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; GRANT BINLOG REPLAY ON *.* TO {account}"),
    )
    .await;
    let report = spec.run_until_idle(sb).expect("a start with BINLOG REPLAY");
    drop(report);
    spec.remove(sb).await;
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DROP USER {account}"),
    )
    .await;
}

// Ten kill -9s of shardrep during a catch-up under the binlog method and
// row parallelism, while the master keeps writing to tables with
// triggers and a system-versioned table: after the last restart the
// shardrep replica equals the native replica, history included, and no
// run logged a duplicate or a missing row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_a_binlog_catch_up_leave_it_equal_to_native() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("native_kill");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[
            ("t", "(id INT PRIMARY KEY, v INT NOT NULL)"),
            (
                "audit",
                "(id INT AUTO_INCREMENT PRIMARY KEY, tid INT NOT NULL, v INT NOT NULL)",
            ),
            (
                "h",
                "(id INT PRIMARY KEY, x INT NOT NULL) WITH SYSTEM VERSIONING",
            ),
        ],
    )
    .await;
    everywhere(
        sb,
        &format!(
            "CREATE TRIGGER {q}.t_au AFTER UPDATE ON {q}.t FOR EACH ROW \
             INSERT INTO {q}.audit (tid, v) VALUES (NEW.id, NEW.v)"
        ),
    )
    .await;
    let start = master_position(sb).await;
    let load = {
        let q = q.clone();
        tokio::spawn(async move {
            let sb = sandbox();
            let mut master = sb.connect(Server::Master).await;
            for i in 0..40 {
                master
                    .query_drop(format!(
                        "INSERT INTO {q}.t VALUES ({i}, 0); INSERT INTO {q}.h VALUES ({i}, 0)"
                    ))
                    .await
                    .unwrap();
            }
            for n in 0..1500 {
                let id = (n * 7) % 40;
                master
                    .query_drop(format!(
                        "BEGIN; UPDATE {q}.t SET v = v + 1 WHERE id = {id}; \
                         UPDATE {q}.h SET x = x + 1 WHERE id = {id}; COMMIT"
                    ))
                    .await
                    .unwrap();
            }
        })
    };
    let mut spec = ServiceSpec::new("native_kill", std::slice::from_ref(&schema), &start);
    spec.method = Some("binlog");
    spec.channels = 8;
    spec.sync_interval = 100;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut applied = Vec::new();
    for round in 0..10 {
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        // Applying (its restart rows moved past the last kill's), then a
        // kill at a random moment.
        let before = spec
            .restart_seqnos(sb)
            .await
            .into_iter()
            .max()
            .unwrap_or(-1);
        common::wait_until(
            "the restart rows move",
            std::time::Duration::from_secs(60),
            || async {
                let now = spec
                    .restart_seqnos(sb)
                    .await
                    .into_iter()
                    .max()
                    .unwrap_or(-1);
                (now > before || load.is_finished()).then_some(())
            },
        )
        .await
        .unwrap();
        tokio::time::sleep(common::committed_watch::jitter(50, 400)).await;
        assert!(
            process.running(),
            "shardrep died in round {round}:\n{}",
            process.log_text()
        );
        applied.push(spec.restart_seqnos(sb).await);
        process.kill();
    }
    load.await.expect("the workload");
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    common::wait_replica_caught_up(sb, NATIVE, std::time::Duration::from_secs(120)).await;
    eprintln!("native_kill: restart rows before each kill {applied:?}");
    let log = process.log_text();
    for code in ["error 1062", "error 1032"] {
        assert!(!log.contains(code), "a run logged {code}:\n{log}");
    }
    for (what, sql, want) in [
        ("t", format!("SELECT * FROM {q}.t ORDER BY id"), 40),
        (
            "audit",
            format!("SELECT * FROM {q}.audit ORDER BY id"),
            1500,
        ),
        (
            "h history",
            format!(
                "SELECT id, x, row_start, row_end FROM {q}.h FOR SYSTEM_TIME ALL \
                 ORDER BY id, row_start"
            ),
            1540,
        ),
    ] {
        let n = assert_native_equal(sb, what, &sql).await;
        assert_eq!(n, want, "rows of {what}");
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

// One statement whose row events are larger than the replica's
// max_allowed_packet (64 KiB here: 2,000 rows of 200 bytes in about 50
// events of 8 KiB) is sent as several BINLOG statements of one
// transaction, each later one starting with the statement's TABLE_MAP
// again: every row arrives (without the map the server skips the events
// silently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_larger_than_max_allowed_packet_is_cut_and_applied_whole() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("native_big");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[("t", "(id INT PRIMARY KEY, pad VARCHAR(200) NOT NULL)")],
    )
    .await;
    let packet: Vec<Vec<Value>> = rows(sb, TARGET, "SELECT @@GLOBAL.max_allowed_packet").await;
    let packet = match &packet[0][0] {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("max_allowed_packet: {other:?}"),
    };
    sb.exec(TARGET, "SET GLOBAL max_allowed_packet = 65536")
        .await;
    let _restore = RestoreGlobal {
        root: sb.root.clone(),
        sql: format!("SET GLOBAL max_allowed_packet = {packet}"),
    };
    let start = master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!(
            "USE {q}; INSERT INTO {q}.t SELECT seq, REPEAT('x', 200) FROM seq_1_to_2000; \
             UPDATE {q}.t SET pad = REPEAT('y', 200) WHERE id > 1000"
        ),
    )
    .await;
    let mut spec = ServiceSpec::new("native_big", std::slice::from_ref(&schema), &start);
    spec.method = Some("binlog");
    spec.channels = 2;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    let n = common::assert_table_equal(sb, Server::Master, TARGET, &schema, "t")
        .await
        .len();
    assert_eq!(n, 2000);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

/// Runs `sql` on the target (or `server`) when dropped, also when the
/// test panics (a global variable the test changed).
struct RestoreGlobal {
    root: std::path::PathBuf,
    sql: String,
}

impl RestoreGlobal {
    /// Restores `variable` of `server` to the value it has now.
    async fn variable(sb: &Sandbox, server: Server, variable: &str) -> (Server, RestoreGlobalOn) {
        let value = rows(sb, server, &format!("SELECT @@GLOBAL.{variable}")).await;
        let value = match &value[0][0] {
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{variable}: {other:?}"),
        };
        (
            server,
            RestoreGlobalOn {
                root: sb.root.clone(),
                server: server.name(),
                sql: format!("SET GLOBAL {variable} = '{value}'"),
            },
        )
    }
}

/// [`RestoreGlobal`] on any server.
struct RestoreGlobalOn {
    root: std::path::PathBuf,
    server: String,
    sql: String,
}

impl Drop for RestoreGlobalOn {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.root.join("scripts/sandbox.sh"))
            .args(["sql", &self.server, "-e", &self.sql])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Drop for RestoreGlobal {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.root.join("scripts/sandbox.sh"))
            .args(["sql", &TARGET.name(), "-e", &self.sql])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

// A replica column of another type than the master's (INT on the master,
// BIGINT on both replicas): the replica's row applier converts it as
// native replication does under the replica's `slave_type_conversions`.
// With 'ALL_NON_LOSSY' both replicas convert and end equal; with '' (the
// server's default) the conversion is refused and shardrep stops saying
// so, with the variable to set as the way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_difference_converts_as_slave_type_conversions_says() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("native_conv");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[("w", "(id INT PRIMARY KEY, v INT NOT NULL)")],
    )
    .await;
    for server in [NATIVE, TARGET] {
        sb.exec(
            server,
            &format!("SET SESSION sql_log_bin = 0; ALTER TABLE {q}.w MODIFY v BIGINT NOT NULL"),
        )
        .await;
    }
    let (_, _native) = RestoreGlobal::variable(sb, NATIVE, "slave_type_conversions").await;
    let (_, _target) = RestoreGlobal::variable(sb, TARGET, "slave_type_conversions").await;
    for server in [NATIVE, TARGET] {
        sb.exec(
            server,
            "SET GLOBAL slave_type_conversions = 'ALL_NON_LOSSY'",
        )
        .await;
    }
    let start = master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!(
            "INSERT INTO {q}.w VALUES (1, -2147483648), (2, 2147483647); \
             UPDATE {q}.w SET v = v - 1 WHERE id = 2"
        ),
    )
    .await;
    apply_binlog_method(sb, &schema, &start).await;
    let n = assert_native_equal(sb, "w", &format!("SELECT * FROM {q}.w ORDER BY id")).await;
    assert_eq!(n, 2);

    // The server's default on the target: refused, and said so.
    sb.exec(TARGET, "SET GLOBAL slave_type_conversions = ''")
        .await;
    let start = master_position(sb).await;
    sb.exec(Server::Master, &format!("INSERT INTO {q}.w VALUES (3, 3)"))
        .await;
    let mut spec = ServiceSpec::new("native_conv", std::slice::from_ref(&schema), &start);
    spec.method = Some("binlog");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    common::service::ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = common::service::status(&spec);
    // Through a BINLOG statement the server answers 1105 "Unknown error"
    // (its reason, 1677, goes to its error log only).
    assert_eq!(s["pendingErrorCode"], 1105, "{s}");
    let error = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        error.contains("a column whose type differs from the master's")
            && error.contains("SET GLOBAL slave_type_conversions = 'ALL_NON_LOSSY'"),
        "{s}"
    );
    // The way out as printed: allow the conversion, go online.
    sb.exec(
        TARGET,
        "SET GLOBAL slave_type_conversions = 'ALL_NON_LOSSY'",
    )
    .await;
    common::service::ctl_ok(&spec, &["online"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    common::wait_replica_caught_up(sb, NATIVE, std::time::Duration::from_secs(120)).await;
    let n = assert_native_equal(sb, "w", &format!("SELECT * FROM {q}.w ORDER BY id")).await;
    assert_eq!(n, 3);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

// A transaction queued under the "sql" method that the method cannot
// apply as native replication does (a system-versioned table's history;
// a table with triggers on the replicas, which SQL would fire) stops with
// the way out, and is applied after a switch to "binlog" and a restart:
// the queue keeps every transaction's row events under either method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_from_sql_to_binlog_applies_what_sql_could_not() {
    let _lock = LOCK.lock().await;
    for triggers in [false, true] {
        sql_then_binlog(triggers).await;
    }
}

async fn sql_then_binlog(triggers: bool) {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("native_switch");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[
            (
                "vt",
                "(id INT PRIMARY KEY, x INT NOT NULL) WITH SYSTEM VERSIONING",
            ),
            ("tr", "(id INT PRIMARY KEY, x INT NOT NULL)"),
            (
                "audit",
                "(n INT AUTO_INCREMENT PRIMARY KEY, id INT NOT NULL, x INT NOT NULL)",
            ),
        ],
    )
    .await;
    // As a replica cloned from its master has them.
    everywhere(
        sb,
        &format!(
            "CREATE TRIGGER {q}.tr_ai AFTER INSERT ON {q}.tr FOR EACH ROW \
             INSERT INTO {q}.audit (id, x) VALUES (NEW.id, NEW.x)"
        ),
    )
    .await;
    let start = master_position(sb).await;
    let (sql, what) = if triggers {
        (
            format!("INSERT INTO {q}.tr VALUES (1, 1); INSERT INTO {q}.tr VALUES (2, 2)"),
            format!("{q}.`tr` has triggers on the replica"),
        )
    } else {
        (
            format!("INSERT INTO {q}.vt VALUES (1, 1); UPDATE {q}.vt SET x = 2 WHERE id = 1"),
            format!("{q}.`vt` is system-versioned on the replica"),
        )
    };
    sb.exec(Server::Master, &sql).await;
    let mut spec = ServiceSpec::new("native_switch", std::slice::from_ref(&schema), &start);
    spec.method = Some("sql");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    common::service::ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = common::service::status(&spec);
    let error = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("not under method = \"sql\": {what}"))
            && error.contains(
                "Way out: set [apply] method = \"binlog\" (the server's own row applier; it \
                 needs BINLOG REPLAY"
            )
            && !error.contains("handback"),
        "{s}"
    );
    assert!(process.terminate(), "shardrep stops on SIGTERM");
    // The way out, as printed.
    spec.method = Some("binlog");
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    common::wait_replica_caught_up(sb, NATIVE, std::time::Duration::from_secs(120)).await;
    for (table, sql, want) in [
        (
            "vt history",
            format!(
                "SELECT id, x, row_start, row_end FROM {q}.vt FOR SYSTEM_TIME ALL \
                 ORDER BY id, row_start"
            ),
            if triggers { 0 } else { 2 },
        ),
        (
            "tr",
            format!("SELECT * FROM {q}.tr ORDER BY id"),
            if triggers { 2 } else { 0 },
        ),
        (
            "audit",
            format!("SELECT * FROM {q}.audit ORDER BY n"),
            if triggers { 2 } else { 0 },
        ),
    ] {
        let n = assert_native_equal(sb, table, &sql).await;
        assert_eq!(n, want, "rows of {table}");
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}
