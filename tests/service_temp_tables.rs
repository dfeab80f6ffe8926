//! Temporary tables of master sessions in statement and mixed binlog
//! formats (issue 14, part 3), through the real binaries against the
//! sandbox: the master's sessions set `binlog_format` per session, so their
//! temporary tables are binlogged as statements while the server stays in
//! ROW format.
//!
//! - one session creates a temporary table, fills it, copies it into a real
//!   table (also with a statement naming two schemas, `#UNKNOWN`) and drops
//!   it, under MIXED and STATEMENT;
//! - two sessions use the same temporary table name at the same time,
//!   interleaved; `status` counts their open temporary tables
//!   (`openTempTables`); a clean `offline` while they are open is refused
//!   naming both sessions, and their later statements still apply; after
//!   one drops its table and the other disconnects (the master logs
//!   `DROP /*!40005 TEMPORARY */ TABLE IF EXISTS`), the count is 0 and a
//!   clean offline and online work;
//! - a takeover while native replication holds temporary tables
//!   (`Slave_open_temp_tables` > 0) is refused, and works once they are
//!   closed.
//!
//! Each test ends with the real tables equal to the master's, row by row,
//! and the service ONLINE without error.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use serde_json::Value;

use common::service::{
    ctl, ctl_ok, drop_everywhere, master_position, status, stop_target_slave,
    wait_applied_to_master, wait_for_socket, ServiceSpec, ShardrepProcess, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A master session logging `format`, with `schema` as its default schema;
/// returns it with its connection id (the binlog's thread id).
async fn master_session(sb: &Sandbox, format: &str, schema: &str) -> (Conn, u32) {
    let mut conn = sb.connect(Server::Master).await;
    conn.query_drop(format!(
        "SET SESSION binlog_format = '{format}'; USE {}",
        quote_ident(schema)
    ))
    .await
    .unwrap();
    let id: u32 = conn
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    (conn, id)
}

async fn run(conn: &mut Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
}

/// Creates `a.r` and `b.t` (`id INT PRIMARY KEY, v VARCHAR(20)`) on the
/// master, `b.t` with three rows, and starts a service applying from
/// before them with 4 channels; waits until it is ONLINE.
async fn setup(sb: &Sandbox, label: &str) -> (ServiceSpec, ShardrepProcess, String, String) {
    stop_target_slave(sb).await;
    let a = unique_schema(&format!("{label}_a"));
    let b = unique_schema(&format!("{label}_b"));
    let start = master_position(sb).await;
    let mut m = sb.connect(Server::Master).await;
    for s in [&a, &b] {
        let q = quote_ident(s);
        run(
            &mut m,
            &format!(
                "CREATE DATABASE {q}; CREATE TABLE {q}.{} (id INT PRIMARY KEY, v VARCHAR(20))",
                if s == &a { "r" } else { "t" }
            ),
        )
        .await;
    }
    run(
        &mut m,
        &format!(
            "INSERT INTO {}.t VALUES (1, 'b1'), (2, 'b2'), (3, 'b3')",
            quote_ident(&b)
        ),
    )
    .await;
    let spec = ServiceSpec::new(label, &[a.clone(), b.clone()], &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    (spec, process, a, b)
}

async fn assert_equal_and_online(sb: &Sandbox, spec: &ServiceSpec, a: &str, b: &str) {
    let s = wait_applied_to_master(sb, spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    let rows = assert_table_equal(sb, Server::Master, TARGET, a, "r").await;
    assert!(!rows.is_empty());
    assert_table_equal(sb, Server::Master, TARGET, b, "t").await;
}

async fn cleanup(sb: &Sandbox, spec: &ServiceSpec, process: ShardrepProcess, schemas: &[String]) {
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, schemas).await;
    spec.remove(sb).await;
}

/// Waits until `status` says `openTempTables` is `n`.
async fn wait_open_temp_tables(spec: &ServiceSpec, n: u64) -> Value {
    common::wait_until(
        &format!("openTempTables = {n}"),
        Duration::from_secs(60),
        || async move {
            let s = status(spec);
            assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
            (s["openTempTables"] == n).then_some(s)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", status(spec)))
}

// (a) One master session: CREATE TEMPORARY TABLE, fill, INSERT ... SELECT
// into a real table (one of them naming a second schema: `#UNKNOWN`, a
// barrier on any channel before), UPDATE, again, DROP; under MIXED and
// STATEMENT. Traffic of the other schema runs in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_creates_uses_and_drops_a_temporary_table() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (spec, process, a, b) = setup(sb, "tmp1").await;
    let (qa, qb) = (quote_ident(&a), quote_ident(&b));
    let mut other = sb.connect(Server::Master).await;
    for (k, format) in ["MIXED", "STATEMENT"].iter().enumerate() {
        let base = 100 * (k as i32 + 1);
        let (mut m, _) = master_session(sb, format, &a).await;
        run(
            &mut m,
            "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v VARCHAR(20))",
        )
        .await;
        run(
            &mut m,
            &format!("INSERT INTO tmp VALUES ({base}, 'x'), ({}, 'y')", base + 1),
        )
        .await;
        run(
            &mut other,
            &format!("INSERT INTO {qb}.t VALUES ({base}, 'other')"),
        )
        .await;
        run(&mut m, "INSERT INTO r SELECT id, v FROM tmp").await;
        run(&mut m, "UPDATE tmp SET id = id + 10, v = CONCAT(v, '!')").await;
        run(
            &mut other,
            &format!("UPDATE {qb}.t SET v = 'changed' WHERE id = 1"),
        )
        .await;
        // Two schemas: shard #UNKNOWN.
        run(
            &mut m,
            &format!(
                "INSERT INTO {qa}.r SELECT tmp.id + t.id, t.v FROM tmp JOIN {qb}.t t ON t.id = 2"
            ),
        )
        .await;
        run(&mut m, "DROP TEMPORARY TABLE tmp").await;
        run(
            &mut m,
            &format!("INSERT INTO r VALUES ({}, 'after')", base + 50),
        )
        .await;
    }
    // A temporary table shadowing a real table of the same name: another
    // session's row changes right after it (#UNKNOWN: the same channel,
    // as the critical run goes on) go to the real table.
    let (mut m, _) = master_session(sb, "MIXED", &a).await;
    run(
        &mut m,
        "CREATE TEMPORARY TABLE r (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    run(
        &mut other,
        &format!(
            "BEGIN; INSERT INTO {qa}.r VALUES (900, 'real'); \
             INSERT INTO {qb}.t VALUES (900, 'real'); COMMIT"
        ),
    )
    .await;
    run(&mut m, "INSERT INTO r VALUES (1, 'shadow')").await;
    run(
        &mut m,
        &format!("INSERT INTO {qb}.t SELECT id + 1000, v FROM r"),
    )
    .await;
    run(&mut m, "DROP TEMPORARY TABLE r").await;
    assert_equal_and_online(sb, &spec, &a, &b).await;
    let s = status(&spec);
    assert_eq!(s["openTempTables"], 0, "{s}");
    // 2 × (2 copied + 2 updated copies joined + 1 after) rows, and 900.
    let mut r = sb.connect(TARGET).await;
    let n: i64 = r
        .query_first(format!("SELECT COUNT(*) FROM {qa}.r"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 11);
    let v: Option<String> = r
        .query_first(format!("SELECT v FROM {qb}.t WHERE id = 1001"))
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("shadow"));
    cleanup(sb, &spec, process, &[a, b]).await;
}

// (b) Two master sessions use the same temporary table name at the same
// time, interleaved. (d) status counts their open temporary tables. (c) A
// clean offline while they are open is refused, naming both sessions; the
// sessions' later statements still apply; once they are closed (one by
// DROP, one by ending the session), offline and online work and a new
// session's temporary table works after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_share_a_temporary_table_name_and_offline_waits_for_them() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (spec, process, a, b) = setup(sb, "tmp2").await;
    let qb = quote_ident(&b);
    let (mut s1, id1) = master_session(sb, "STATEMENT", &a).await;
    let (mut s2, id2) = master_session(sb, "MIXED", &a).await;
    let create = "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v VARCHAR(20))";
    run(&mut s1, create).await;
    run(&mut s2, create).await;
    run(&mut s1, "INSERT INTO tmp VALUES (1, 's1-a')").await;
    run(&mut s2, "INSERT INTO tmp VALUES (1, 's2-a'), (2, 's2-b')").await;
    run(&mut s2, "CREATE TEMPORARY TABLE tmp_more (id INT)").await;
    run(&mut s1, "INSERT INTO tmp VALUES (3, 's1-c')").await;
    run(&mut s1, "INSERT INTO r SELECT id, v FROM tmp").await;
    run(&mut s2, "INSERT INTO r SELECT id + 10, v FROM tmp").await;

    // (d) three temporary tables open: s1's tmp, s2's tmp and tmp_more.
    wait_applied_to_master(sb, &spec).await;
    let s = wait_open_temp_tables(&spec, 3).await;
    assert_eq!(s["state"], "ONLINE", "{s}");

    // (c) a clean offline is refused, naming both sessions and tables.
    let (code, _, err) = ctl(&spec, &["offline"]);
    assert_eq!(code, 1, "{err}");
    let server_id: u32 = sb
        .connect(Server::Master)
        .await
        .query_first("SELECT @@server_id")
        .await
        .unwrap()
        .unwrap();
    let (first, second) = if id1 < id2 {
        (format!("{a}.tmp"), format!("{a}.tmp, {a}.tmp_more"))
    } else {
        (format!("{a}.tmp, {a}.tmp_more"), format!("{a}.tmp"))
    };
    let (lo, hi) = (id1.min(id2), id1.max(id2));
    assert!(
        err.contains(&format!(
            "offline refused: 3 temporary table(s) of master sessions are open on the replica \
             (server {server_id} thread {lo}: {first}; server {server_id} thread {hi}: {second})"
        )) && err.contains("offline --immediate"),
        "{err}"
    );
    assert_eq!(status(&spec)["state"], "ONLINE");

    // The sessions go on using their tables.
    run(&mut s1, "UPDATE tmp SET v = CONCAT(v, '+')").await;
    run(&mut s2, "INSERT INTO tmp_more VALUES (7)").await;
    run(&mut s1, "INSERT INTO r SELECT id + 100, v FROM tmp").await;
    run(
        &mut s2,
        &format!("INSERT INTO r SELECT tmp.id + 200, t.v FROM tmp JOIN {qb}.t t ON t.id = tmp.id"),
    )
    .await;
    run(
        &mut s2,
        "INSERT INTO r SELECT id + 300, 'more' FROM tmp_more",
    )
    .await;
    run(&mut s1, "DROP TEMPORARY TABLE tmp").await;
    wait_applied_to_master(sb, &spec).await;
    wait_open_temp_tables(&spec, 2).await;
    // Ending s2's session: the master logs the DROP of its tables.
    s2.disconnect().await.unwrap();
    wait_open_temp_tables(&spec, 0).await;
    assert_equal_and_online(sb, &spec, &a, &b).await;

    // Nothing open: a clean offline, then online.
    ctl_ok(&spec, &["offline"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:NORMAL", "--timeout-secs", "120"],
    );
    assert_eq!(status(&spec)["lastOfflineClean"], true);
    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    run(&mut s1, create).await;
    run(&mut s1, "INSERT INTO tmp VALUES (50, 'again')").await;
    run(&mut s1, "INSERT INTO r SELECT id + 400, v FROM tmp").await;
    run(&mut s1, "DROP TEMPORARY TABLE tmp").await;
    assert_equal_and_online(sb, &spec, &a, &b).await;
    assert_eq!(status(&spec)["openTempTables"], 0);
    let mut r = sb.connect(TARGET).await;
    let n: i64 = r
        .query_first(format!("SELECT COUNT(*) FROM {}.r", quote_ident(&a)))
        .await
        .unwrap()
        .unwrap();
    // s1: 2 + 2 + 1; s2: 2 + 2 + 1.
    assert_eq!(n, 10);
    cleanup(sb, &spec, process, &[a, b]).await;
}

// A takeover while native replication holds temporary tables of master
// sessions (`Slave_open_temp_tables` > 0) is refused, naming the status
// variable, and native replication goes on; once the master session has
// dropped its table, the takeover works and the table's rows are equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_waits_for_native_temporary_tables() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    common::service::native_from_now(sb).await;
    let a = unique_schema("tmp3_a");
    let qa = quote_ident(&a);
    let mut m = sb.connect(Server::Master).await;
    run(
        &mut m,
        &format!("CREATE DATABASE {qa}; CREATE TABLE {qa}.r (id INT PRIMARY KEY, v VARCHAR(20))"),
    )
    .await;
    let (mut s1, _) = master_session(sb, "MIXED", &a).await;
    run(
        &mut s1,
        "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    run(&mut s1, "INSERT INTO tmp VALUES (1, 'one'), (2, 'two')").await;
    common::wait_replica_caught_up(sb, TARGET, Duration::from_secs(60)).await;

    let spec = ServiceSpec::new("tmp3", std::slice::from_ref(&a), "takeover");
    spec.write_config(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = status(&spec);
    let message = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "{}:{}: Slave_open_temp_tables is 1, expected 0; native replication holds \
             temporary tables of master sessions",
            sb.host,
            sb.port(TARGET)
        )),
        "{s}"
    );
    // Native replication runs again and applies the session's statements.
    run(&mut s1, "INSERT INTO r SELECT id, v FROM tmp").await;
    run(&mut s1, "DROP TEMPORARY TABLE tmp").await;
    common::wait_replica_caught_up(sb, TARGET, Duration::from_secs(60)).await;
    assert_table_equal(sb, Server::Master, TARGET, &a, "r").await;

    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    run(&mut s1, "CREATE TEMPORARY TABLE tmp (id INT)").await;
    run(&mut s1, "INSERT INTO tmp VALUES (3)").await;
    run(&mut s1, "INSERT INTO r SELECT id, 'three' FROM tmp").await;
    run(&mut s1, "DROP TEMPORARY TABLE tmp").await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    let rows = assert_table_equal(sb, Server::Master, TARGET, &a, "r").await;
    assert_eq!(rows.len(), 3);
    ctl_ok(&spec, &["offline"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:NORMAL", "--timeout-secs", "120"],
    );
    ctl_ok(&spec, &["handback", "--start-slave"]);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, &[a]).await;
    spec.remove(sb).await;
}

// SIGTERM while a master session holds a temporary table (MIXED): the
// clean stop is refused (it would lose the table), the log says so and
// names it, and after `[service] stop_grace_ms` the service stops at once
// and exits. With a long grace period, a second SIGTERM stops it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_an_open_temporary_table_ends_after_the_grace_period_or_a_second_signal() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    for (grace_ms, second_signal) in [(2_000, false), (600_000, true)] {
        stop_target_slave(sb).await;
        let a = unique_schema("sigterm_tmp");
        let q = quote_ident(&a);
        let start = master_position(sb).await;
        let mut m = sb.connect(Server::Master).await;
        run(
            &mut m,
            &format!("CREATE DATABASE {q}; CREATE TABLE {q}.r (id INT PRIMARY KEY, v VARCHAR(20))"),
        )
        .await;
        let mut spec = ServiceSpec::new("sigterm_tmp", std::slice::from_ref(&a), &start);
        spec.stop_grace_ms = Some(grace_ms);
        let _catalog = spec.drop_catalog_on_panic(sb);
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        ctl_ok(
            &spec,
            &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
        );
        let (mut session, _) = master_session(sb, "MIXED", &a).await;
        run(
            &mut session,
            "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY)",
        )
        .await;
        run(&mut session, "INSERT INTO tmp VALUES (1), (2)").await;
        run(&mut session, "INSERT INTO r SELECT id, 'from tmp' FROM tmp").await;
        wait_open_temp_tables(&spec, 1).await;

        process.signal_term();
        if second_signal {
            common::wait_until(
                "the refused clean stop in the log",
                Duration::from_secs(60),
                || async {
                    process
                        .log_text()
                        .contains("the clean stop is refused")
                        .then_some(())
                },
            )
            .await
            .unwrap();
            process.signal_term();
        }
        // Bounded: the grace period (2 s), or the second signal (the
        // grace period of 10 minutes is far away).
        let exited = process.wait_exit(Duration::from_secs(120));
        let log = process.log_text();
        assert_eq!(exited, Some(true), "shardrep still runs or failed:\n{log}");
        assert!(log.contains("the clean stop is refused"), "{log}");
        assert!(
            log.contains("offline refused: 1 temporary table(s)"),
            "{log}"
        );
        if second_signal {
            assert!(
                log.contains("second stop request: stopping at once"),
                "{log}"
            );
        } else {
            assert!(
                log.contains("stopping at once; the temporary tables named above are lost"),
                "{log}"
            );
        }
        // What was applied before the stop is there.
        assert_table_equal(sb, Server::Master, TARGET, &a, "r").await;
        run(&mut session, "DROP TEMPORARY TABLE tmp").await;
        drop(session);
        drop_everywhere(sb, std::slice::from_ref(&a)).await;
        spec.remove(sb).await;
    }
}

// A temporary table in a schema that exists on neither server (MariaDB
// accepts `CREATE TEMPORARY TABLE nodb.tmp`): the DROP the master logs
// when the session ends runs under `USE nodb`, which a client cannot
// select; it runs with its names qualified instead, as the server's own
// applier runs it. The service stays ONLINE, the table is gone from the
// replica's session (openTempTables 0), and later changes apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_in_a_schema_that_does_not_exist_is_dropped_at_session_end() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let a = unique_schema("tmp_nodb_a");
    let nodb = unique_schema("tmp_nodb_missing");
    let start = master_position(sb).await;
    let mut m = sb.connect(Server::Master).await;
    let q = quote_ident(&a);
    run(
        &mut m,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.r (id INT PRIMARY KEY, v VARCHAR(20))"),
    )
    .await;
    let spec = ServiceSpec::new("tmp_nodb", &[a.clone(), nodb.clone()], &start);
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    {
        let (mut session, _) = master_session(sb, "MIXED", &a).await;
        let n = quote_ident(&nodb);
        run(
            &mut session,
            &format!("CREATE TEMPORARY TABLE {n}.tmp (id INT)"),
        )
        .await;
        run(
            &mut session,
            &format!("INSERT INTO {n}.tmp VALUES (1), (2)"),
        )
        .await;
        wait_open_temp_tables(&spec, 1).await;
        // The session ends: the master logs the DROP under `USE nodb`.
        session.disconnect().await.unwrap();
    }
    wait_open_temp_tables(&spec, 0).await;
    run(&mut m, &format!("INSERT INTO {q}.r VALUES (1, 'after')")).await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(
        assert_table_equal(sb, Server::Master, TARGET, &a, "r")
            .await
            .len(),
        1
    );
    cleanup(sb, &spec, process, &[a]).await;
}

// A temporary table lost with the replica connection that held it (the
// channels' sessions killed on the replica): the next statement of its
// master session that uses it stops the service with 1146 and says that a
// temporary table of that session was lost, naming it and the way out;
// following that way out (the statement's change made by hand, the seqno
// skipped) ends with the tables equal to the master's, ONLINE, and the
// session's later DROP applied without error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_lost_with_its_connection_names_the_session_and_the_way_out() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (spec, process, a, b) = setup(sb, "tmplost").await;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let qa = quote_ident(&a);
    let (mut m, thread) = master_session(sb, "MIXED", &a).await;
    run(
        &mut m,
        "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    run(&mut m, "INSERT INTO tmp VALUES (1, 'x'), (2, 'y')").await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["openTempTables"], 1);
    // Every channel's replica session ends (each recorded its connection
    // id in its restart row): the temporary table goes with its own.
    let mut replica = sb.connect(TARGET).await;
    let sessions: Vec<u64> = replica
        .query(format!(
            "SELECT session_id FROM {}.restart_position WHERE session_id IS NOT NULL",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    assert!(!sessions.is_empty());
    for id in sessions {
        // (A session that ended already is not an error here.)
        let _ = replica.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    run(&mut m, "INSERT INTO r SELECT id, v FROM tmp").await;
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "120"],
    );
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1146, "{s}");
    let seqno = s["pendingErrorSeqno"].as_u64().expect("a seqno");
    let message = s["pendingError"].as_str().unwrap().to_string();
    for part in [
        "a temporary table is lost: ".to_string(),
        format!("seqno {seqno} failed"),
        format!("master session server 1 thread {thread}"),
        format!("temporary table(s) {a}.tmp were open"),
        format!("`shardrepctl online --skip-seqno {seqno}`"),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    assert!(!message.contains("Way out: fix the replica"), "{message}");
    // The way out: the change made by hand from the master's rows, the
    // seqno skipped.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {qa}.r VALUES (1, 'x'), (2, 'y')"
        ))
        .await
        .unwrap();
    ctl_ok(&spec, &["online", "--skip-seqno", &seqno.to_string()]);
    run(&mut m, "DROP TEMPORARY TABLE tmp").await;
    run(&mut m, "INSERT INTO r VALUES (3, 'after')").await;
    drop(m);
    assert_equal_and_online(sb, &spec, &a, &b).await;
    assert_eq!(status(&spec)["openTempTables"], 0);
    cleanup(sb, &spec, process, &[a, b]).await;
}

// A temporary table lost with a restart of shardrep (kill -9: nothing
// could be recorded): the next statement of its master session that uses
// it stops with 1146 and says that a temporary table of that session,
// created before this run, may be lost, with the same way out, which ends
// with the tables equal to the master's and ONLINE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_lost_with_a_restart_says_so_and_the_way_out_works() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (spec, process, a, b) = setup(sb, "tmprestart").await;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let qa = quote_ident(&a);
    let (mut m, thread) = master_session(sb, "MIXED", &a).await;
    run(
        &mut m,
        "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    run(&mut m, "INSERT INTO tmp VALUES (1, 'x'), (2, 'y')").await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["openTempTables"], 1);
    process.kill();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    run(&mut m, "INSERT INTO r SELECT id, v FROM tmp").await;
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "120"],
    );
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1146, "{s}");
    let seqno = s["pendingErrorSeqno"].as_u64().expect("a seqno");
    let message = s["pendingError"].as_str().unwrap().to_string();
    for part in [
        "a table is missing, perhaps a lost temporary table: ".to_string(),
        format!("seqno {seqno} failed"),
        format!("master session server 1 thread {thread}"),
        format!("`shardrepctl online --skip-seqno {seqno}`"),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    assert!(!message.contains("Way out: fix the replica"), "{message}");
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {qa}.r VALUES (1, 'x'), (2, 'y')"
        ))
        .await
        .unwrap();
    ctl_ok(&spec, &["online", "--skip-seqno", &seqno.to_string()]);
    run(&mut m, "DROP TEMPORARY TABLE tmp").await;
    run(&mut m, "INSERT INTO r VALUES (3, 'after')").await;
    drop(m);
    assert_equal_and_online(sb, &spec, &a, &b).await;
    // A session without a default schema: its DROP of a temporary table
    // lost with a restart names the table with its schema, and runs.
    let mut n = sb.connect(Server::Master).await;
    run(&mut n, "SET SESSION binlog_format = 'MIXED'").await;
    run(
        &mut n,
        &format!("CREATE TEMPORARY TABLE {qa}.tmp2 (id INT PRIMARY KEY)"),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    process.kill();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    run(&mut n, &format!("DROP TEMPORARY TABLE {qa}.tmp2")).await;
    run(&mut n, &format!("INSERT INTO {qa}.r VALUES (4, 'last')")).await;
    drop(n);
    assert_equal_and_online(sb, &spec, &a, &b).await;
    cleanup(sb, &spec, process, &[a, b]).await;
}
