//! Case B29 through the real binaries: `shardrep run` takes over replica
//! 2's native replication, applies the B28 load in parallel, goes offline
//! cleanly and hands back (`shardrepctl offline`, `shardrepctl handback
//! --start-slave`); native replication continues with no error and equal
//! tables; then shardrep takes over again from the native position, with
//! no gap and no duplicate, and hands back once more. Also: handback is
//! refused after an unclean stop, and a takeover of a master logging
//! STATEMENT format stops with OFFLINE:ERROR naming `binlog_format`.

mod common;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::service::{
    assert_native_ok, case_sql, ctl, ctl_ok, drop_everywhere, native_from_now, script_statements,
    status, wait_applied_to_master, wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run_on_master(sb: &Sandbox, sql: &str) {
    let mut master = sb.connect(Server::Master).await;
    for statement in script_statements(sql) {
        master.query_drop(statement.as_str()).await.unwrap();
    }
}

async fn tables_equal(sb: &Sandbox, schemas: &[String]) {
    for s in schemas {
        assert_table_equal(sb, Server::Master, TARGET, s, "ev").await;
    }
}

// B29 both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_parallel_apply_handback_and_takeover_again() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    native_from_now(sb).await;
    let names = ["shard_w1", "shard_w2", "shard_w3", "shard_w4"];
    let unique: Vec<String> = names.iter().map(|n| unique_schema(n)).collect();
    let renames: Vec<(&str, &str)> = names
        .iter()
        .zip(&unique)
        .map(|(a, b)| (*a, b.as_str()))
        .collect();
    let script = case_sql("B28", &renames);
    let (setup, _) = script.rsplit_once("CALL ").unwrap();
    run_on_master(sb, setup).await;
    assert_native_ok(sb).await;

    let mut spec = ServiceSpec::new("b29", &unique, "takeover");
    spec.block = 20;
    spec.write_config(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    let call = format!("CALL {}.load_all(300)", quote_ident(&unique[0]));
    run_on_master(sb, &call).await;
    wait_applied_to_master(sb, &spec).await;
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE");
    assert!(s["serializationCount"].as_u64().unwrap() >= 30, "{s}");
    tables_equal(sb, &unique).await;

    // Clean offline, handback, native replication continues.
    ctl_ok(&spec, &["offline"]);
    let seqnos = spec.restart_seqnos(sb).await;
    assert!(seqnos.iter().all(|s| *s == seqnos[0]), "{seqnos:?}");
    let handback = ctl_ok(&spec, &["--json", "handback", "--start-slave"]);
    let handback: Value = serde_json::from_str(&handback).unwrap();
    assert_eq!(handback["seqno"].as_i64(), Some(seqnos[0]), "{handback}");
    run_on_master(
        sb,
        &format!(
            "CALL {w1}.load_all(0); INSERT INTO {w1}.ev VALUES (5001, 'native', 1); \
             UPDATE {w2}.ev SET n = n + 100 WHERE id = 2; DELETE FROM {w3}.ev WHERE id = 10",
            w1 = quote_ident(&unique[0]),
            w2 = quote_ident(&unique[1]),
            w3 = quote_ident(&unique[2]),
        ),
    )
    .await;
    assert_native_ok(sb).await;
    tables_equal(sb, &unique).await;

    // The reverse: take over again from the native position.
    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    run_on_master(
        sb,
        &format!(
            "INSERT INTO {w4}.ev VALUES (6001, 'again', 2); \
             START TRANSACTION; UPDATE {w1}.ev SET n = n + 1 WHERE id = 1; \
             UPDATE {w4}.ev SET n = n + 1 WHERE id = 6001; COMMIT",
            w1 = quote_ident(&unique[0]),
            w4 = quote_ident(&unique[3]),
        ),
    )
    .await;
    wait_applied_to_master(sb, &spec).await;
    tables_equal(sb, &unique).await;
    let mut replica = sb.connect(TARGET).await;
    let sql_running: Option<mysql_async::Row> =
        replica.query_first("SHOW SLAVE STATUS").await.unwrap();
    let sql_running: String = sql_running.unwrap().get("Slave_SQL_Running").unwrap();
    assert_eq!(
        sql_running, "No",
        "shardrep stopped native replication again"
    );

    // Unclean: an immediate offline, then handback is refused.
    ctl_ok(&spec, &["offline", "--immediate"]);
    let (code, _, err) = ctl(&spec, &["handback"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("immediate"), "{err}");
    // Rows at different seqnos (as after a kill -9) are refused too.
    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    ctl_ok(&spec, &["offline"]);
    replica
        .query_drop(format!(
            "UPDATE {}.restart_position SET seqno = seqno - 1 WHERE channel = 0",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    let (code, _, err) = ctl(&spec, &["handback"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("different seqnos"), "{err}");
    replica
        .query_drop(format!(
            "UPDATE {}.restart_position SET seqno = seqno + 1 WHERE channel = 0",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    ctl_ok(&spec, &["handback", "--start-slave"]);
    run_on_master(
        sb,
        &format!(
            "INSERT INTO {w2}.ev VALUES (7001, 'native again', 3)",
            w2 = quote_ident(&unique[1])
        ),
    )
    .await;
    assert_native_ok(sb).await;
    tables_equal(sb, &unique).await;

    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    drop_everywhere(sb, &unique).await;
    spec.remove(sb).await;
}

// Takeover refuses a master that logs STATEMENT format, naming the
// setting, its expected and actual value; the service is OFFLINE:ERROR and
// the replica's native replication is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_refuses_a_statement_format_master() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    native_from_now(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop("SET GLOBAL binlog_format = 'STATEMENT'")
        .await
        .unwrap();
    let spec = ServiceSpec::new("stmt", &[], "takeover");
    spec.write_config(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let waited = ctl(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    master
        .query_drop("SET GLOBAL binlog_format = 'ROW'")
        .await
        .unwrap();
    assert_eq!(waited.0, 0, "{waited:?}");
    let s = status(&spec);
    let message = s["pendingError"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("binlog_format")
            && message.contains("ROW")
            && message.contains("STATEMENT"),
        "{s}"
    );
    assert_native_ok(sb).await;
    // The failed first start leaves no catalog behind (it would hold
    // restart rows, and another service's takeover of this replica would
    // be refused as if this one applied there).
    assert!(!catalog_exists(sb, &spec.catalog()).await);
    assert!(
        process
            .log_text()
            .contains("the first start failed before applying anything: the catalog schema it created is removed"),
        "{}",
        process.log_text()
    );
    // Once the master logs rows, `online` takes over (the catalog again).
    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    assert!(catalog_exists(sb, &spec.catalog()).await);
    ctl_ok(&spec, &["offline"]);
    ctl_ok(&spec, &["handback", "--start-slave"]);
    assert_native_ok(sb).await;
    assert!(process.terminate());
    spec.remove(sb).await;
}

/// Whether the schema `catalog` exists on the replica.
async fn catalog_exists(sb: &Sandbox, catalog: &str) -> bool {
    let n: Option<i64> = sb
        .connect(TARGET)
        .await
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (catalog,),
        )
        .await
        .unwrap();
    n == Some(1)
}

// A lost queue with committed restart rows: the service refuses to start
// (OFFLINE:ERROR naming the queue, the seqno and the way out) instead of
// renumbering and skipping; after `offline` and `handback`, `online` takes
// the replica over afresh and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_queue_is_refused_and_recovered_by_handback() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    native_from_now(sb).await;
    let schema = unique_schema("lostq");
    let q = quote_ident(&schema);
    run_on_master(
        sb,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.ev (id INT PRIMARY KEY, payload CHAR(32), n INT)"),
    )
    .await;
    assert_native_ok(sb).await;
    let spec = ServiceSpec::new("lostq", std::slice::from_ref(&schema), "takeover");
    spec.write_config(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    for i in 0..20 {
        run_on_master(sb, &format!("INSERT INTO {q}.ev VALUES ({i}, 'a', {i})")).await;
    }
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate());
    std::fs::remove_dir_all(spec.dir.join("queue")).unwrap();
    run_on_master(
        sb,
        &format!("INSERT INTO {q}.ev VALUES (100, 'while down', 1)"),
    )
    .await;

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = status(&spec);
    let message = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        message.contains("is empty") && message.contains("handback"),
        "{s}"
    );
    ctl_ok(&spec, &["offline"]);
    ctl_ok(&spec, &["handback", "--start-slave"]);
    assert_native_ok(sb).await;
    ctl_ok(&spec, &["online"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    run_on_master(sb, &format!("INSERT INTO {q}.ev VALUES (101, 'after', 2)")).await;
    wait_applied_to_master(sb, &spec).await;
    assert_table_equal(sb, Server::Master, TARGET, &schema, "ev").await;
    ctl_ok(&spec, &["offline"]);
    ctl_ok(&spec, &["handback", "--start-slave"]);
    assert_native_ok(sb).await;
    assert!(process.terminate());
    drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}

// A second service asked to take over a replica that another service
// already applies to is refused: native replication's position there is
// stale (the first service stopped it long ago), and taking over from it
// would apply again what the first service applied. After the first service
// hands back, native replication is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_takeover_of_an_owned_replica_is_refused() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    native_from_now(sb).await;
    let schema = unique_schema("owned");
    let q = quote_ident(&schema);
    run_on_master(
        sb,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.ev (id INT PRIMARY KEY, n INT)"),
    )
    .await;
    assert_native_ok(sb).await;
    let first = ServiceSpec::new("owner", std::slice::from_ref(&schema), "takeover");
    let mut owner = first.spawn(sb, false);
    wait_for_socket(&first, &mut owner);
    ctl_ok(
        &first,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    for i in 0..5 {
        run_on_master(sb, &format!("INSERT INTO {q}.ev VALUES ({i}, {i})")).await;
    }
    wait_applied_to_master(sb, &first).await;

    let second = ServiceSpec::new("intruder", std::slice::from_ref(&schema), "takeover");
    let mut intruder = second.spawn(sb, false);
    wait_for_socket(&second, &mut intruder);
    ctl_ok(
        &second,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = status(&second);
    let message = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "takeover refused: the replica {}:{} is already applied by another shardrep \
             service ({} at seqno ",
            sb.host,
            sb.port(TARGET),
            first.catalog()
        )),
        "{s}"
    );
    assert!(intruder.terminate());
    assert!(!catalog_exists(sb, &second.catalog()).await);
    second.remove(sb).await;
    // The first service kept applying, alone.
    run_on_master(sb, &format!("INSERT INTO {q}.ev VALUES (10, 10)")).await;
    wait_applied_to_master(sb, &first).await;
    assert_table_equal(sb, Server::Master, TARGET, &schema, "ev").await;
    ctl_ok(&first, &["offline"]);
    ctl_ok(&first, &["handback", "--start-slave"]);
    assert_native_ok(sb).await;
    assert!(owner.terminate());
    drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    first.remove(sb).await;
}

// Issue 14 item 7.3. A takeover, then at once a clean offline with nothing
// applied (every restart row at "-"): `handback` points native
// replication back at the takeover position; it continues with no error
// and the replica ends equal to the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handback_right_after_a_takeover_with_nothing_applied() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    native_from_now(sb).await;
    let schema = unique_schema("empty");
    let q = quote_ident(&schema);
    run_on_master(
        sb,
        &format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.ev (id INT PRIMARY KEY, payload CHAR(32), n INT); \
             INSERT INTO {q}.ev VALUES (1, 'native', 0)"
        ),
    )
    .await;
    assert_native_ok(sb).await;
    let mut replica = sb.connect(TARGET).await;
    let native = shardrep::replica::slave_status(&mut replica)
        .await
        .unwrap()
        .expect("replication configured");
    let gtid_before: String = replica
        .query_first("SELECT @@gtid_slave_pos")
        .await
        .unwrap()
        .unwrap();

    let mut spec = ServiceSpec::new("empty", std::slice::from_ref(&schema), "takeover");
    spec.env = vec![("SHARDREP_LOG_FORMAT".into(), "json".into())];
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    ctl_ok(&spec, &["offline"]);
    assert_eq!(spec.restart_seqnos(sb).await, [-1; 4], "nothing applied");
    let handback: Value =
        serde_json::from_str(&ctl_ok(&spec, &["--json", "handback", "--start-slave"])).unwrap();
    assert_eq!(handback["seqno"], Value::Null, "{handback}");
    assert_eq!(
        handback["masterLogFile"].as_str(),
        Some(native.relay_master_log_file.as_str()),
        "{handback}"
    );
    assert_eq!(
        handback["masterLogPos"].as_u64(),
        Some(native.exec_master_log_pos),
        "{handback}"
    );
    assert_eq!(
        handback["gtidSlavePos"].as_str(),
        Some(gtid_before.as_str()),
        "{handback}"
    );
    assert_eq!(handback["slaveStarted"], true, "{handback}");
    assert!(spec.restart_seqnos(sb).await.is_empty());
    // SHARDREP_LOG_FORMAT=json: every line one JSON object; each event
    // once (the takeover checks the master and the replica twice, before
    // and after STOP SLAVE, and logs what it found once).
    let events: Vec<Value> = process
        .log_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(e[key].is_string(), "{key}: {e}");
        }
    }
    let count = |message: &str| events.iter().filter(|e| e["message"] == message).count();
    for message in [
        "control socket listening",
        "source master checked",
        "replica checked",
        "native replication stopped: taking over",
        "took over from native replication",
        "handed back to native replication",
    ] {
        assert_eq!(count(message), 1, "{message}: {}", process.log_text());
    }
    let handed_back = events
        .iter()
        .find(|e| e["message"] == "handed back to native replication")
        .unwrap();
    assert_eq!(handed_back["seqno"], "-", "{handed_back}");
    assert_eq!(
        handed_back["position"],
        format!(
            "{}:{}",
            native.relay_master_log_file, native.exec_master_log_pos
        ),
        "{handed_back}"
    );

    run_on_master(
        sb,
        &format!("INSERT INTO {q}.ev VALUES (2, 'native again', 1); UPDATE {q}.ev SET n = 5 WHERE id = 1"),
    )
    .await;
    assert_native_ok(sb).await;
    tables_equal(sb, std::slice::from_ref(&schema)).await;
    let rows: Vec<(i32, String, i32)> = replica
        .query(format!("SELECT id, payload, n FROM {q}.ev ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            (1, "native".to_string(), 5),
            (2, "native again".to_string(), 1)
        ]
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    // Nothing was applied: handed back at the takeover position, no seqno.
    assert_eq!(
        std::fs::read_to_string(spec.dir.join("shardrep.out")).unwrap(),
        format!(
            "{}: OFFLINE:NORMAL at seqno - (handed back to native replication at {}:{}), 0 \
             dropped by the shard filter, 0 barriers, 0 skipped by request\n",
            spec.service, native.relay_master_log_file, native.exec_master_log_pos
        )
    );
    drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}
