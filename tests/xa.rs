//! XA transactions through the real binaries (issue 14 §4): the master's
//! `XA PREPARE` is replayed on the replica as a prepared XA transaction,
//! its `XA COMMIT` / `XA ROLLBACK` applied when it arrives, interleaved
//! with ordinary transactions of the same and other schemas; a restart
//! (SIGTERM, and kill -9) while a prepared transaction is open; a handback
//! while one is open (native replication then commits it); the takeover
//! of a replica where native replication prepared it; `XA COMMIT … ONE
//! PHASE`; and the crash window between an XA statement and its restart
//! row. Every case ends with the replica's tables equal to the master's,
//! row by row, and no prepared XA transaction left behind.
//!
//! The tests share replica 2 and run one at a time (`LOCK`).

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use common::service::{
    assert_native_ok, ctl, ctl_ok, drop_everywhere, master_position, native_from_now, status,
    stop_target_slave, wait_applied_to_master, wait_for_socket, ServiceSpec, ShardrepProcess,
    TARGET,
};
use common::{
    assert_table_equal, quote_ident, sandbox, unique_schema, wait_replica_caught_up, wait_until,
    Sandbox, Server,
};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `sql` on `conn`, failing with the SQL.
async fn run(conn: &mut Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
}

/// Creates `schema.t (id INT PRIMARY KEY, n INT, b VARBINARY(16))` on the
/// master with rows 1..=5.
async fn create_table(sb: &Sandbox, schema: &str) {
    let s = quote_ident(schema);
    let mut master = sb.connect(Server::Master).await;
    run(
        &mut master,
        &format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY, n INT, b VARBINARY(16)); \
             INSERT INTO {s}.t VALUES (1, 1, X'00'), (2, 2, X'27'), (3, 3, NULL), (4, 4, X'ff'), \
             (5, 5, X'5c')"
        ),
    )
    .await;
}

/// Prepares XA transaction `xid` (SQL form) on a new master connection
/// that runs `body` inside it; returns the connection (the transaction
/// stays attached to it until it disconnects).
async fn prepare_on_master(sb: &Sandbox, xid: &str, body: &str) -> Conn {
    let mut conn = sb.connect(Server::Master).await;
    run(
        &mut conn,
        &format!("XA START {xid}; {body}; XA END {xid}; XA PREPARE {xid}"),
    )
    .await;
    conn
}

/// The xids `XA RECOVER` lists on `server` whose gtrid starts with
/// `prefix`, as `(formatID, data)`.
async fn prepared(sb: &Sandbox, server: Server, prefix: &str) -> Vec<(i64, Vec<u8>)> {
    let mut conn = sb.connect(server).await;
    let rows: Vec<(i64, u64, u64, Vec<u8>)> = conn.query("XA RECOVER").await.unwrap();
    rows.into_iter()
        .filter(|(_, _, _, data)| data.starts_with(prefix.as_bytes()))
        .map(|(f, _, _, data)| (f, data))
        .collect()
}

/// Rolls back every XA transaction prepared on the master and replica 2
/// whose gtrid starts with `prefix` (a failed earlier run's leftovers
/// would hold locks).
async fn rollback_leftovers(sb: &Sandbox, prefix: &str) {
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        let mut conn = sb.connect(server).await;
        let rows: Vec<(i64, u64, u64, Vec<u8>)> = conn.query("XA RECOVER").await.unwrap();
        for (format_id, gtrid_length, _, data) in rows {
            if data.starts_with(prefix.as_bytes()) {
                let (g, b) = data.split_at(gtrid_length as usize);
                let hex = |x: &[u8]| x.iter().map(|c| format!("{c:02x}")).collect::<String>();
                let _ = conn
                    .query_drop(format!(
                        "SET SESSION sql_log_bin = 0; XA ROLLBACK X'{}',X'{}',{format_id}",
                        hex(g),
                        hex(b)
                    ))
                    .await;
            }
        }
    }
}

async fn tables_equal(sb: &Sandbox, schemas: &[String]) {
    for s in schemas {
        assert_table_equal(sb, Server::Master, TARGET, s, "t").await;
    }
}

fn wait_online(spec: &ServiceSpec) {
    ctl_ok(
        spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
}

fn start(sb: &Sandbox, spec: &ServiceSpec) -> ShardrepProcess {
    let mut process = spec.spawn(sb, false);
    wait_for_socket(spec, &mut process);
    wait_online(spec);
    process
}

/// The ids of `schema.t` on `server`.
async fn ids(sb: &Sandbox, server: Server, schema: &str) -> Vec<i32> {
    let mut conn = sb.connect(server).await;
    conn.query(format!(
        "SELECT id FROM {}.t ORDER BY id",
        quote_ident(schema)
    ))
    .await
    .unwrap()
}

// Prepare + commit and prepare + rollback interleaved with ordinary
// transactions of the same and another schema, an xid with a quote and
// binary bytes, ONE PHASE; a clean restart and a kill -9 while a prepared
// transaction is open, its outcome arriving after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_commit_rollback_restart_and_kill_while_prepared() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    rollback_leftovers(sb, "sxa").await;
    let prefix = format!("sxa{}", std::process::id());
    stop_target_slave(sb).await;
    let a = unique_schema("xa_a");
    let b = unique_schema("xa_b");
    let start_at = master_position(sb).await;
    create_table(sb, &a).await;
    create_table(sb, &b).await;
    let (qa, qb) = (quote_ident(&a), quote_ident(&b));
    let mut spec = ServiceSpec::new("xa", &[a.clone(), b.clone()], &start_at);
    spec.block = 10;
    spec.write_config(sb);
    let process = start(sb, &spec);
    let mut other = sb.connect(Server::Master).await;

    // x1: prepared, ordinary transactions of both schemas meanwhile, then
    // committed. Its gtrid holds a quote and a backslash.
    let x1 = format!("'{prefix}''1\\\\','q',7");
    let c1 = prepare_on_master(
        sb,
        &x1,
        &format!(
            "INSERT INTO {qa}.t VALUES (100, 100, X'0027'); UPDATE {qa}.t SET n = 11 WHERE id = 1"
        ),
    )
    .await;
    run(
        &mut other,
        &format!(
            "INSERT INTO {qa}.t VALUES (200, 200, X'01'); UPDATE {qb}.t SET n = n + 1; \
             START TRANSACTION; DELETE FROM {qb}.t WHERE id = 5; INSERT INTO {qa}.t VALUES (201, 1, NULL); COMMIT"
        ),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    // Prepared on the replica as on the master, and not visible yet.
    let mut x1_data = format!("{prefix}'1\\").into_bytes();
    x1_data.push(b'q');
    assert_eq!(prepared(sb, TARGET, &prefix).await, [(7, x1_data.clone())]);
    assert!(!ids(sb, TARGET, &a).await.contains(&100));
    tables_equal(sb, &[a.clone(), b.clone()]).await;
    let mut c1 = c1;
    run(&mut c1, &format!("XA COMMIT {x1}")).await;

    // x2: binary gtrid, touches both schemas, rolled back from another
    // connection after its own disconnected.
    let x2 = format!("X'{}00ff',X'',3", hex(prefix.as_bytes()));
    let c2 = prepare_on_master(
        sb,
        &x2,
        &format!("DELETE FROM {qa}.t WHERE id = 2; INSERT INTO {qb}.t VALUES (300, 3, X'ff00')"),
    )
    .await;
    c2.disconnect().await.unwrap();
    run(
        &mut other,
        &format!("UPDATE {qa}.t SET n = n + 1 WHERE id = 3"),
    )
    .await;
    run(&mut other, &format!("XA ROLLBACK {x2}")).await;
    // ONE PHASE: an ordinary transaction in the binlog.
    let x3 = format!("'{prefix}3'");
    run(
        &mut other,
        &format!(
            "XA START {x3}; INSERT INTO {qb}.t VALUES (400, 4, X'04'); XA END {x3}; \
             XA COMMIT {x3} ONE PHASE"
        ),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(prepared(sb, TARGET, &prefix).await, []);
    assert!(ids(sb, TARGET, &a).await.contains(&100));
    assert!(ids(sb, TARGET, &b).await.contains(&400));
    assert!(!ids(sb, TARGET, &b).await.contains(&300));
    tables_equal(sb, &[a.clone(), b.clone()]).await;

    // x4 prepared; a clean restart; x4 still prepared on the replica;
    // then a kill -9, more work, and the commit arrives while the service
    // is down.
    let c4 = prepare_on_master(
        sb,
        &format!("'{prefix}4'"),
        &format!(
            "UPDATE {qb}.t SET b = X'4444' WHERE id = 4; INSERT INTO {qb}.t VALUES (500, 5, NULL)"
        ),
    )
    .await;
    c4.disconnect().await.unwrap();
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    assert_eq!(
        prepared(sb, TARGET, &prefix).await,
        [(1, format!("{prefix}4").into_bytes())]
    );
    let process = start(sb, &spec);
    run(
        &mut other,
        &format!("INSERT INTO {qa}.t VALUES (600, 6, X'06')"),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    process.kill();
    run(
        &mut other,
        &format!(
            "INSERT INTO {qb}.t VALUES (700, 7, X'07'); XA COMMIT '{prefix}4'; \
             UPDATE {qa}.t SET n = 0 WHERE id = 600"
        ),
    )
    .await;
    let process = start(sb, &spec);
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(prepared(sb, TARGET, &prefix).await, []);
    assert!(ids(sb, TARGET, &b).await.contains(&500));
    tables_equal(sb, &[a.clone(), b.clone()]).await;
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");

    // Clean offline ends on every channel at one seqno.
    ctl_ok(&spec, &["offline"]);
    let seqnos = spec.restart_seqnos(sb).await;
    assert!(seqnos.iter().all(|s| *s == seqnos[0]), "{seqnos:?}");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, &[a, b]).await;
    spec.remove(sb).await;
}

/// The highest restart-row seqno once it reaches `seqno` (or the last one
/// read after 60 s). After a restart, status reports the restart rows read
/// at start, so `wait_applied_to_master` can return before the channel
/// that replays the rewound transaction has written its restart row.
async fn restart_max_reaches(sb: &Sandbox, spec: &ServiceSpec, seqno: i64) -> Option<i64> {
    let reached = wait_until("the restart rows", Duration::from_secs(60), || async {
        let max = spec.restart_seqnos(sb).await.into_iter().max();
        (max >= Some(seqno)).then_some(max)
    })
    .await;
    match reached {
        Ok(max) => max,
        Err(_) => spec.restart_seqnos(sb).await.into_iter().max(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|c| format!("{c:02x}")).collect()
}

// The crash windows: an XA statement ran, its restart row did not commit
// (simulated: the restart rows are put back before the XA transaction,
// with its seqno marked as started). The restart neither prepares again
// nor fails on the missing xid. Without the mark, the outcome of an xid
// the replica never prepared is a definite error naming the xid (1397),
// and `online --skip-seqno` gets past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_an_xa_statement_and_its_restart_row() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    rollback_leftovers(sb, "cxa").await;
    let prefix = format!("cxa{}", std::process::id());
    stop_target_slave(sb).await;
    let a = unique_schema("xa_crash");
    let start_at = master_position(sb).await;
    create_table(sb, &a).await;
    let qa = quote_ident(&a);
    let mut spec = ServiceSpec::new("xacrash", std::slice::from_ref(&a), &start_at);
    // The crash windows are made by rewinding the restart rows alone: under
    // the master's GTIDs the replica's binlog would still record the XA
    // steps as done (tests/gtid_topology.rs).
    spec.binlog_gtids = Some("own");
    spec.channels = 2;
    spec.write_config(sb);
    let process = start(sb, &spec);
    let catalog = quote_ident(&spec.catalog());
    let mut replica = sb.connect(TARGET).await;
    // Restart rows back to `seqno - 1` (their low-water marks too), with
    // `seqno` marked as started.
    let rewind = |seqno: i64| {
        format!(
            "SET SESSION sql_log_bin = 0; UPDATE {catalog}.restart_position \
             SET seqno = {before}, low_water = {before}, ddl_seqno = {seqno}",
            before = seqno - 1
        )
    };

    // The prepare: applied, then "crashed" before its restart row.
    let c = prepare_on_master(
        sb,
        &format!("'{prefix}1'"),
        &format!("INSERT INTO {qa}.t VALUES (10, 10, X'10')"),
    )
    .await;
    c.disconnect().await.unwrap();
    let applied = wait_applied_to_master(sb, &spec).await;
    let prepare_seqno = applied["appliedLastSeqno"].as_i64().unwrap();
    assert!(process.terminate());
    assert_eq!(prepared(sb, TARGET, &prefix).await.len(), 1);
    run(&mut replica, &rewind(prepare_seqno)).await;
    let process = start(sb, &spec);
    wait_applied_to_master(sb, &spec).await;
    // The channel that ran it moved to it (the other has no marker yet).
    assert_eq!(
        restart_max_reaches(sb, &spec, prepare_seqno).await,
        Some(prepare_seqno)
    );
    assert_eq!(prepared(sb, TARGET, &prefix).await.len(), 1);
    assert!(process.log_text().contains("not preparing it again"));

    // The commit: applied, then "crashed" before its restart row.
    let mut master = sb.connect(Server::Master).await;
    run(&mut master, &format!("XA COMMIT '{prefix}1'")).await;
    let applied = wait_applied_to_master(sb, &spec).await;
    let commit_seqno = applied["appliedLastSeqno"].as_i64().unwrap();
    assert_eq!(commit_seqno, prepare_seqno + 1);
    assert!(process.terminate());
    assert_eq!(prepared(sb, TARGET, &prefix).await, []);
    run(&mut replica, &rewind(commit_seqno)).await;
    let process = start(sb, &spec);
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(
        restart_max_reaches(sb, &spec, commit_seqno).await,
        Some(commit_seqno)
    );
    assert!(process
        .log_text()
        .contains("XA outcome ran before the last stop"));
    tables_equal(sb, std::slice::from_ref(&a)).await;

    // An outcome for an xid the replica does not have (rolled back by hand
    // there): OFFLINE:ERROR naming it, nothing applied after it.
    let c = prepare_on_master(
        sb,
        &format!("'{prefix}2'"),
        &format!("INSERT INTO {qa}.t VALUES (20, 20, NULL)"),
    )
    .await;
    c.disconnect().await.unwrap();
    wait_applied_to_master(sb, &spec).await;
    run(
        &mut replica,
        &format!("SET SESSION sql_log_bin = 0; XA ROLLBACK '{prefix}2'"),
    )
    .await;
    run(
        &mut master,
        &format!("XA COMMIT '{prefix}2'; INSERT INTO {qa}.t VALUES (30, 30, NULL)"),
    )
    .await;
    let s = common::wait_until("OFFLINE:ERROR", Duration::from_secs(60), || async {
        let s = status(&spec);
        (s["state"] == "OFFLINE:ERROR").then_some(s)
    })
    .await
    .unwrap();
    assert_eq!(s["pendingErrorCode"], 1397, "{s}");
    let failed = s["pendingErrorSeqno"].as_i64().unwrap();
    let message = s["pendingError"].as_str().unwrap_or_default().to_string()
        + s["pendingExceptionMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "X'{}',X'',1",
            hex(format!("{prefix}2").as_bytes())
        )) && message.contains("XA RECOVER does not list it"),
        "{s}"
    );
    assert!(!ids(sb, TARGET, &a).await.contains(&30));
    // Online again without a skip: the same error, not a silent skip.
    ctl_ok(&spec, &["online"]);
    let s = common::wait_until("OFFLINE:ERROR again", Duration::from_secs(60), || async {
        let s = status(&spec);
        (s["state"] == "OFFLINE:ERROR").then_some(s)
    })
    .await
    .unwrap();
    assert_eq!(s["pendingErrorSeqno"].as_i64(), Some(failed), "{s}");
    ctl_ok(&spec, &["online", "--skip-seqno", &failed.to_string()]);
    wait_online(&spec);
    wait_applied_to_master(sb, &spec).await;
    // The master committed 20; the replica rolled it back by hand.
    assert!(ids(sb, TARGET, &a).await.contains(&30));
    assert!(!ids(sb, TARGET, &a).await.contains(&20));
    assert!(process.terminate());
    drop_everywhere(sb, &[a]).await;
    spec.remove(sb).await;
}

// Takeover of a replica where native replication prepared an XA
// transaction: its XA COMMIT, after the takeover, is applied by shardrep.
// Then a transaction prepared by shardrep is still open at a clean
// offline and handback: native replication applies its XA COMMIT with
// Last_Errno 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_and_handback_with_an_open_prepared_transaction() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    rollback_leftovers(sb, "txa").await;
    let prefix = format!("txa{}", std::process::id());
    native_from_now(sb).await;
    let a = unique_schema("xa_take");
    let b = unique_schema("xa_take_b");
    create_table(sb, &a).await;
    create_table(sb, &b).await;
    let (qa, qb) = (quote_ident(&a), quote_ident(&b));
    let c = prepare_on_master(
        sb,
        &format!("'{prefix}1'"),
        &format!("UPDATE {qa}.t SET n = 100 WHERE id = 1; INSERT INTO {qa}.t VALUES (6, 6, X'06')"),
    )
    .await;
    c.disconnect().await.unwrap();
    wait_replica_caught_up(sb, TARGET, Duration::from_secs(60)).await;
    assert_eq!(
        prepared(sb, TARGET, &prefix).await,
        [(1, format!("{prefix}1").into_bytes())],
        "native replication left the transaction prepared on the replica"
    );

    let spec = ServiceSpec::new("xatake", &[a.clone(), b.clone()], "takeover");
    spec.write_config(sb);
    let process = start(sb, &spec);
    let mut master = sb.connect(Server::Master).await;
    run(
        &mut master,
        &format!("INSERT INTO {qb}.t VALUES (10, 10, NULL); XA COMMIT '{prefix}1'; UPDATE {qa}.t SET n = n + 1"),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(prepared(sb, TARGET, &prefix).await, []);
    tables_equal(sb, &[a.clone(), b.clone()]).await;

    // Prepared by shardrep, open at the handback.
    let c = prepare_on_master(
        sb,
        &format!("'{prefix}2','br',9"),
        &format!("DELETE FROM {qb}.t WHERE id = 1; UPDATE {qa}.t SET b = X'0202' WHERE id = 2"),
    )
    .await;
    c.disconnect().await.unwrap();
    run(
        &mut master,
        &format!("INSERT INTO {qb}.t VALUES (11, 11, NULL)"),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    ctl_ok(&spec, &["offline"]);
    assert_eq!(
        prepared(sb, TARGET, &prefix).await,
        [(9, format!("{prefix}2br").into_bytes())]
    );
    ctl_ok(&spec, &["handback", "--start-slave"]);
    run(
        &mut master,
        &format!("XA COMMIT '{prefix}2','br',9; INSERT INTO {qb}.t VALUES (12, 12, X'12')"),
    )
    .await;
    assert_native_ok(sb).await;
    assert_eq!(prepared(sb, TARGET, &prefix).await, []);
    tables_equal(sb, &[a.clone(), b.clone()]).await;
    let (code, _, _) = ctl(&spec, &["status"]);
    assert_eq!(code, 0);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, &[a, b]).await;
    spec.remove(sb).await;
}
