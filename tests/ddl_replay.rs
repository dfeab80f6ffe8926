//! A DDL transaction marked as started (restart row `ddl_seqno` above
//! `seqno`) when shardrep stopped: the restart replays it only when a
//! second run is harmless; otherwise OFFLINE:ERROR with the way out, which
//! a plain `online` repeats and `online --skip-seqno N` gets past.
//!
//! The crash window (the DDL committed, its restart row did not) is
//! simulated as in tests/xa.rs: stop cleanly after the DDL, then rewind the
//! restart rows to `seqno - 1` with `ddl_seqno = seqno`.
//! Needs the sandbox: `scripts/sandbox.sh up 2`.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use common::service::{
    ctl_ok, drop_everywhere, master_position, status, stop_target_slave, wait_applied_to_master,
    wait_for_socket, ServiceSpec, ShardrepProcess, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

async fn run(conn: &mut Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
}

fn start(sb: &Sandbox, spec: &ServiceSpec, state: &str) -> ShardrepProcess {
    let mut process = spec.spawn(sb, false);
    wait_for_socket(spec, &mut process);
    wait_state(spec, state);
    process
}

fn wait_state(spec: &ServiceSpec, state: &str) {
    ctl_ok(spec, &["wait", "--state", state, "--timeout-secs", "120"]);
}

async fn show_create(sb: &Sandbox, server: Server, schema: &str, table: &str) -> String {
    let mut conn = sb.connect(server).await;
    let row: Option<(String, String)> = conn
        .query_first(format!(
            "SHOW CREATE TABLE {}.{}",
            quote_ident(schema),
            quote_ident(table)
        ))
        .await
        .unwrap();
    row.unwrap().1
}

/// Definitions and rows of `tables` equal on the master and the replica.
async fn replica_equal(sb: &Sandbox, schema: &str, tables: &[&str]) {
    for t in tables {
        assert_eq!(
            show_create(sb, TARGET, schema, t).await,
            show_create(sb, Server::Master, schema, t).await,
            "{t}"
        );
        assert_table_equal(sb, Server::Master, TARGET, schema, t).await;
    }
}

/// Runs `ddl` on the master, waits for it, stops the service and rewinds
/// the restart rows into the crash window (the DDL marked started, no row
/// recording it done: every low-water mark below it); returns its seqno.
async fn ddl_in_the_crash_window(
    sb: &Sandbox,
    spec: &ServiceSpec,
    process: ShardrepProcess,
    ddl: &str,
) -> i64 {
    run(&mut sb.connect(Server::Master).await, ddl).await;
    let applied = wait_applied_to_master(sb, spec).await;
    let seqno = applied["appliedLastSeqno"].as_i64().unwrap();
    assert!(process.terminate());
    run(
        &mut sb.connect(TARGET).await,
        &format!(
            "SET SESSION sql_log_bin = 0; UPDATE {}.restart_position \
             SET seqno = {before}, low_water = {before}, ddl_seqno = {seqno}",
            quote_ident(&spec.catalog()),
            before = seqno - 1
        ),
    )
    .await;
    seqno
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_ddl_is_replayed_only_when_a_second_run_is_harmless() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let a = unique_schema("ddl_replay");
    let qa = quote_ident(&a);
    let start_at = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    run(
        &mut master,
        &format!(
            "CREATE DATABASE {qa}; \
             CREATE TABLE {qa}.sa (id INT PRIMARY KEY, v VARCHAR(10)); \
             INSERT INTO {qa}.sa VALUES (1, 'A'); \
             CREATE TABLE {qa}.sb (id INT PRIMARY KEY, v VARCHAR(10)); \
             INSERT INTO {qa}.sb VALUES (1, 'B'), (2, 'B'); \
             CREATE TABLE {qa}.ix (id INT PRIMARY KEY, c INT); \
             INSERT INTO {qa}.ix VALUES (1, 5)"
        ),
    )
    .await;
    let mut spec = ServiceSpec::new("ddlreplay", std::slice::from_ref(&a), &start_at);
    spec.channels = 2;
    // The crash window is made by rewinding the restart rows alone, and
    // the messages tell to run the DDL with `sql_log_bin = 1`: under the
    // master's GTIDs the replica's binlog would record the DDL as done.
    spec.binlog_gtids = Some("own");
    spec.write_config(sb);
    let process = start(sb, &spec, "ONLINE");
    let tables = ["sa", "sb", "ix"];

    // (1) Safe: ADD COLUMN run again fails with 1060, tolerated.
    let seqno = ddl_in_the_crash_window(
        sb,
        &spec,
        process,
        &format!("ALTER TABLE {qa}.ix ADD COLUMN d INT"),
    )
    .await;
    let process = start(sb, &spec, "ONLINE");
    run(
        &mut master,
        &format!("INSERT INTO {qa}.ix VALUES (2, 6, 7)"),
    )
    .await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["appliedLastSeqno"], seqno + 1, "{s}");
    assert!(process
        .log_text()
        .contains("replayed DDL had already run before the stop"));
    replica_equal(sb, &a, &tables).await;

    // (2) Unsafe: a swap by RENAME TABLE would swap back, and it ran.
    let swap = format!("RENAME TABLE {qa}.sa TO {qa}.tmp, {qa}.sb TO {qa}.sa, {qa}.tmp TO {qa}.sb");
    let seqno = ddl_in_the_crash_window(sb, &spec, process, &swap).await;
    let process = start(sb, &spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], seqno, "{s}");
    let error = s["pendingError"].as_str().unwrap().to_string();
    let position = s["pendingErrorEventId"].as_str().unwrap();
    assert!(position.starts_with("mariadb-bin."), "{s}");
    for part in [
        format!("unsafe DDL replay: seqno {seqno} (binlog position {position})"),
        format!("so it was not run: {swap}. Way out: compare the replica with the statement"),
        format!("If it ran, `shardrepctl online --skip-seqno {seqno}`"),
        // The service binlogs (replica.sql_log_bin = true).
        "`SET SESSION sql_log_bin = 1`".to_string(),
    ] {
        assert!(error.contains(&part), "{part}\n{error}");
    }
    assert!(!error.contains("Way out: fix the replica"), "{error}");
    // A plain online stops at it again and never runs it.
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "OFFLINE:ERROR");
    let again = status(&spec);
    assert_eq!(again["pendingError"], error.as_str(), "{again}");
    replica_equal(sb, &a, &tables).await;
    // It ran: skip it.
    ctl_ok(&spec, &["online", "--skip-seqno", &seqno.to_string()]);
    wait_state(&spec, "ONLINE");
    run(&mut master, &format!("INSERT INTO {qa}.sa VALUES (3, 'C')")).await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["appliedLastSeqno"], seqno + 1, "{s}");
    assert_eq!(s["skippedSeqnos"], seqno.to_string(), "{s}");
    replica_equal(sb, &a, &tables).await;

    // (3) Unsafe: an unnamed ADD INDEX would add c_2. This time it did
    // not run (dropped by hand): run it by hand as told, then skip it.
    let add_index = format!("ALTER TABLE {qa}.ix ADD INDEX (c)");
    let seqno = ddl_in_the_crash_window(sb, &spec, process, &add_index).await;
    let mut replica = sb.connect(TARGET).await;
    run(
        &mut replica,
        &format!("SET SESSION sql_log_bin = 0; ALTER TABLE {qa}.ix DROP INDEX c"),
    )
    .await;
    let process = start(sb, &spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], seqno, "{s}");
    let error = s["pendingError"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!("so it was not run: {add_index}.")),
        "{error}"
    );
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "OFFLINE:ERROR");
    assert_eq!(status(&spec)["pendingError"], error.as_str());
    assert!(!show_create(sb, TARGET, &a, "ix").await.contains("KEY `c`"));
    run(
        &mut replica,
        &format!("SET SESSION sql_log_bin = 1; {add_index}"),
    )
    .await;
    ctl_ok(&spec, &["online", "--skip-seqno", &seqno.to_string()]);
    wait_state(&spec, "ONLINE");
    run(
        &mut master,
        &format!("INSERT INTO {qa}.ix VALUES (3, 8, 9)"),
    )
    .await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["appliedLastSeqno"], seqno + 1, "{s}");
    replica_equal(sb, &a, &tables).await;
    assert!(show_create(sb, TARGET, &a, "ix")
        .await
        .contains("KEY `c` (`c`)"));
    assert!(!show_create(sb, TARGET, &a, "ix").await.contains("c_2"));

    assert!(process.terminate());
    spec.remove(sb).await;
    drop_everywhere(sb, std::slice::from_ref(&a)).await;
}
