//! Every `shardrepctl` subcommand against the real service: `shardrep run`
//! on the sandbox (replica 2, native replication stopped there, a FILE:POS
//! start and `unknown_shard_policy = "drop"`), driven through its control
//! socket by the real `shardrepctl` binary, with exact outputs, JSON fields
//! and exit codes.
//!
//! The tests of this file take one lock and run one at a time (they share
//! replica 2 and the two cores).

mod common;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::service::{
    cleanup, create_table, ctl, ctl_ok, ctl_spawn, ctl_with_stdin, fail_with_uneven_rows,
    flush_and_purge_binlogs, master_position, native_from_now, on_master, status,
    stop_target_slave, wait_applied_to_master, wait_for_socket, wait_state, ServiceSpec,
    ShardrepProcess, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every key `status --json` always has (trepctl's names where it has
/// them), `null` when unknown.
const STATUS_KEYS: &[&str] = &[
    "serviceName",
    "role",
    "state",
    "appliedLastSeqno",
    "appliedLastEventId",
    "appliedLatency",
    "relativeLatency",
    "channels",
    "serializationCount",
    "droppedCount",
    "skippedCount",
    "skippedSeqnos",
    "openTempTables",
    "parallelism",
    "applyMethod",
    "dependencyWaitCount",
    "windowWaitCount",
    "fallbackCounts",
    "inFlightCount",
    "inFlightKeys",
    "minimumStoredSeqNo",
    "maximumStoredSeqNo",
    "pendingError",
    "pendingErrorCode",
    "pendingErrorSeqno",
    "pendingErrorEventId",
    "pendingErrorShard",
    "pendingErrorChannel",
    "pendingExceptionMessage",
    "untilSeqno",
    "offlineAtSeqno",
    "lastOfflineClean",
    "uptimeSeconds",
    "timeInStateSeconds",
    "transactionsAppliedCount",
    "rowChangesAppliedCount",
    "blocksCommittedCount",
    "retryCount",
    "retryCounts",
    "errorCounts",
    "masterBinlogEnd",
    "masterGtidPos",
    "bytesBehind",
    "transactionsBehind",
    "unknownOutcomeCommittedCount",
    "unknownOutcomeReappliedCount",
    "applyRateBytesPerSecond",
    "applyRateTransactionsPerSecond",
    "binlogGtids",
    "binlogGtidsConfigured",
    "catchUpEtaSeconds",
    "sourceHost",
    "sourcePort",
    "sourceSwitchedAt",
    "sourceSwitchUnfinished",
    "sourceSwitchUnderWay",
    "sourceFirstSeqno",
];

/// The rows of `schema.t` on `server` as `(id, n)`, by id.
async fn rows_of(sb: &Sandbox, server: Server, schema: &str) -> Vec<(i32, i32)> {
    let mut conn = sb.connect(server).await;
    conn.query(format!(
        "SELECT id, n FROM {}.t ORDER BY id",
        quote_ident(schema)
    ))
    .await
    .unwrap_or_else(|e| panic!("{schema}.t on {}: {e}", server.name()))
}

/// Whether `schema` exists on `server`.
async fn schema_exists(sb: &Sandbox, server: Server, schema: &str) -> bool {
    let mut conn = sb.connect(server).await;
    let n: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (schema,),
        )
        .await
        .unwrap();
    n == Some(1)
}

/// `shardrepctl --json args…` (must exit 0), parsed.
fn ctl_json(spec: &ServiceSpec, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = ctl_ok(spec, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out:?}"))
}

/// `log list --json` lines, parsed (one transaction per line).
fn log_list(spec: &ServiceSpec, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json", "log", "list"];
    all.extend_from_slice(args);
    ctl_ok(spec, &all)
        .lines()
        .map(|l| serde_json::from_str(l).expect("log list JSON line"))
        .collect()
}

/// `name : value` lines as printed for one object, names sorted and
/// padded to the longest, values as `shardrepctl` renders scalars.
fn text_block(fields: &[(&str, &str)]) -> String {
    let mut fields = fields.to_vec();
    fields.sort();
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    fields
        .iter()
        .map(|(k, v)| format!("{k:<width$} : {v}\n"))
        .collect()
}

/// A text answer (`name : value` lines) as a list of (name, value).
fn parse_text(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once(" : ")
                .unwrap_or_else(|| panic!("not a `name : value` line: {l:?}"));
            (k.trim_end().to_string(), v.to_string())
        })
        .collect()
}

/// The catalog's stored shard map on replica 2: (shard_id, master,
/// critical) rows in shard_id order.
async fn stored_shard_map(sb: &Sandbox, spec: &ServiceSpec) -> Vec<(String, String, i8)> {
    let mut replica = sb.connect(TARGET).await;
    replica
        .query(format!(
            "SELECT shard_id, master, critical FROM {}.shard_map ORDER BY shard_id",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap()
}

/// Starts the service offline (`shardrep run --offline`) and waits for
/// its socket.
fn start_offline(sb: &Sandbox, spec: &ServiceSpec) -> ShardrepProcess {
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(spec, &mut process);
    process
}

// `wait` run before the service has started (no socket yet) waits for
// the socket within its time-out, then for the state; with no service at
// all it gives up once its time-out has passed, saying so (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_started_before_the_service_waits_for_its_socket() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctlw");
    let start = master_position(sb).await;
    create_table(sb, &a, 2).await;
    let spec = ServiceSpec::new("ctlw", std::slice::from_ref(&a), &start);
    spec.write_config(sb);
    let socket = spec.dir.join("control.sock");

    let (code, out, err) = ctl(&spec, &["wait", "--state", "ONLINE", "--timeout-secs", "1"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        format!(
            "shardrepctl: no shardrep service is listening on {}: is it running? (waited 1 s \
             for it to listen)\n",
            socket.display()
        )
    );

    // The wait first, the service after it.
    assert!(!socket.exists());
    let waiter = ctl_spawn(
        &spec,
        &[
            "--json",
            "wait",
            "--state",
            "ONLINE",
            "--timeout-secs",
            "120",
        ],
    );
    // Ordering only: the waiter tries before the socket exists.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let process = spec.spawn(sb, false);
    let waited = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(0), "{stderr}");
    let answer: Value = serde_json::from_slice(&waited.stdout).unwrap();
    assert_eq!(answer["state"], "ONLINE", "{answer}");
    assert!(process.terminate());

    // status --watch --until-caught-up before the service: the same.
    let watcher = ctl_spawn(
        &spec,
        &[
            "status",
            "--watch",
            "--interval-secs",
            "1",
            "--until-caught-up",
            "--timeout-secs",
            "120",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!socket.exists());
    let process = spec.spawn(sb, false);
    let watched = watcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&watched.stderr);
    assert_eq!(watched.status.code(), Some(0), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&watched.stdout).is_empty(),
        "{stderr}"
    );
    cleanup(sb, &spec, process, &[a]).await;
}

// The replica refuses the service's password: the service goes
// OFFLINE:ERROR at start with the server's code (1045) in pendingErrorCode,
// and neither status nor the log shows the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_replica_login_is_offline_error_with_its_code() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let start = master_position(sb).await;
    let mut spec = ServiceSpec::new("badpw", &[unique_schema("badpw")], &start);
    let wrong = "wrong-replica-password-8123";
    spec.replica_password = Some(wrong.to_string());
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1045, "{s}");
    let error = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "cannot connect to the replica {}:{}",
            sb.host,
            sb.port(TARGET)
        )),
        "{s}"
    );
    assert!(error.contains("Access denied"), "{s}");
    let (_, text, _) = ctl(&spec, &["status"]);
    for shown in [s.to_string(), text, process.log_text()] {
        assert!(!shown.contains(wrong), "the password is shown: {shown}");
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
}

// The master refuses the dump (its start binlog does not exist): the
// service goes OFFLINE:ERROR with the master's code (1236) and a message
// that names the requested start, not a generic queue error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_binlog_dump_is_offline_error_with_its_code() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let (file, _) = start.split_once(':').expect("FILE:POS");
    let (base, _) = file.rsplit_once('.').expect("base.NNNNNN");
    let missing = format!("{base}.999999:4");
    let spec = ServiceSpec::new("nobinlog", &[unique_schema("nobinlog")], &missing);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1236, "{s}");
    let error = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(&format!(
            "extractor: master {}:{}: binlog dump from {missing}: server error 1236",
            sb.host,
            sb.port(Server::Master)
        )),
        "{s}"
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
}

// A clean stop at the end of a binlog, then FLUSH and PURGE BINARY LOGS on
// the master: the restart position's file is gone although nothing after it
// is. The service resumes at the same point by GTID (the master refused the
// file position with 1236) and applies what came after, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_position_in_a_purged_binlog_resumes_by_gtid() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let a = unique_schema("purged");
    create_table(sb, &a, 2).await;
    let spec = ServiceSpec::new("purged", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");

    let mut master = sb.connect(Server::Master).await;
    flush_and_purge_binlogs(sb).await;
    let (start_file, _) = start.split_once(':').unwrap();
    let oldest: String = master
        .query_first::<mysql_async::Row, _>("SHOW BINARY LOGS")
        .await
        .unwrap()
        .and_then(|row| row.get(0))
        .unwrap();
    assert!(oldest.as_str() > start_file, "{oldest} is purged up to");
    on_master(
        sb,
        &format!("INSERT INTO {}.t VALUES (3, 0)", quote_ident(&a)),
    )
    .await;

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 0), (2, 0), (3, 0)]);
    assert!(
        process.log_text().contains("resuming at its GTID position"),
        "{}",
        process.log_text()
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");

    // A transaction after the restart position purged too: no way to
    // resume, OFFLINE:ERROR saying so (never a silent skip).
    on_master(
        sb,
        &format!("INSERT INTO {}.t VALUES (4, 0)", quote_ident(&a)),
    )
    .await;
    flush_and_purge_binlogs(sb).await;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1236, "{s}");
    assert!(
        s["pendingError"]
            .as_str()
            .unwrap_or_default()
            .contains("are purged from the master: re-seed the replica"),
        "{s}"
    );
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 0), (2, 0), (3, 0)]);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, std::slice::from_ref(&a)).await;
    spec.remove(sb).await;
}

// Native replication running on the replica (two appliers diverge): a
// service refuses to start, and one that is running stops with
// OFFLINE:ERROR within seconds of a START SLAVE, naming the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_replication_on_the_replica_is_refused() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let native = format!("connection '' from {}:{}", sb.host, sb.port(Server::Master));
    // At start.
    native_from_now(sb).await;
    let start = master_position(sb).await;
    let a = unique_schema("native");
    let spec = ServiceSpec::new("native", std::slice::from_ref(&a), &start);
    let err = spec.run_until_idle(sb).expect_err("refused at start");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "native replication is running on the replica {}:{} at start: {native}; ",
            sb.host,
            sb.port(TARGET)
        )),
        "{text}"
    );
    // While running: OFFLINE:ERROR, with what was applied kept.
    stop_target_slave(sb).await;
    create_table(sb, &a, 2).await;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    wait_applied_to_master(sb, &spec).await;
    native_from_now(sb).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    let error = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("(started while this service applied): {native}; ")),
        "{s}"
    );
    stop_target_slave(sb).await;
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 0), (2, 0)]);
    // Stopped natively: online again works.
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "ONLINE");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, std::slice::from_ref(&a)).await;
    spec.remove(sb).await;
}

/// The server's `Aborted_clients` counter: connections closed without
/// COM_QUIT, each also logged as "Aborted connection".
async fn aborted_clients(conn: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, u64)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Aborted_clients'")
        .await
        .unwrap();
    row.expect("the counter exists").1
}

// A run that ends (here: idle) closes its channels' replica connections
// and its master connections with COM_QUIT: neither server counts (and
// logs) an aborted connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_leaves_no_aborted_connections() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let a = unique_schema("quit");
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("quit", std::slice::from_ref(&a), &start);
    let mut replica = sb.connect(TARGET).await;
    let mut master = sb.connect(Server::Master).await;
    let (replica_before, master_before) = (
        aborted_clients(&mut replica).await,
        aborted_clients(&mut master).await,
    );
    let report = spec.run_until_idle(sb).expect("run succeeds");
    assert_eq!(report.dispatched, 5, "{report:?}");
    assert_eq!(
        (
            aborted_clients(&mut replica).await - replica_before,
            aborted_clients(&mut master).await - master_before
        ),
        (0, 0),
        "aborted connections on (replica, master)"
    );
    drop((replica, master));
    common::service::drop_everywhere(sb, std::slice::from_ref(&a)).await;
    spec.remove(sb).await;
}

// status (text and JSON, offline and online), services, online, wait
// --state / --applied (and their time-outs), status --name
// channels|shards|queue, log list --seqno / --low --high, log info, and a
// clean offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_services_online_wait_log_and_clean_offline() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_a");
    let b = unique_schema("ctl_b");
    let start = master_position(sb).await;
    create_table(sb, &a, 5).await;
    create_table(sb, &b, 5).await;
    let spec = ServiceSpec::new("ctls", &[a.clone(), b.clone()], &start);
    let process = start_offline(sb, &spec);

    // Offline, nothing applied yet.
    let services = ctl_ok(&spec, &["services"]);
    assert_eq!(
        services,
        text_block(&[
            ("serviceName", &spec.service),
            ("role", "applier"),
            ("state", "OFFLINE:NORMAL")
        ])
    );
    let services = ctl_json(&spec, &["services"]);
    assert_eq!(
        services,
        serde_json::json!([{"serviceName": spec.service, "role": "applier", "state": "OFFLINE:NORMAL"}])
    );
    let s = status(&spec);
    for key in STATUS_KEYS {
        assert!(s.get(key).is_some(), "status lacks {key}: {s}");
    }
    assert_eq!(s.as_object().unwrap().len(), STATUS_KEYS.len(), "{s}");
    assert_eq!(s["serviceName"], spec.service.as_str());
    assert_eq!(s["state"], "OFFLINE:NORMAL");
    assert_eq!(s["channels"], 4);
    assert_eq!(s["appliedLastSeqno"], Value::Null);
    assert_eq!(s["pendingError"], Value::Null);
    assert_eq!(s["lastOfflineClean"], false);
    let text = parse_text(&ctl_ok(&spec, &["status"]));
    let names: Vec<&str> = text.iter().map(|(k, _)| k.as_str()).collect();
    let mut sorted = STATUS_KEYS.to_vec();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "text status: every field, names sorted");
    let get = |name: &str| text.iter().find(|(k, _)| k == name).unwrap().1.clone();
    assert_eq!(get("state"), "OFFLINE:NORMAL");
    assert_eq!(get("channels"), "4");
    assert_eq!(get("appliedLastSeqno"), "NONE");
    assert_eq!(get("serviceName"), spec.service);

    // A wait that cannot be met times out with exit 1.
    let (code, out, err) = ctl(&spec, &["wait", "--state", "ONLINE", "--timeout-secs", "1"]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err,
        "shardrepctl: timed out after 1 s waiting for state ONLINE (state OFFLINE:NORMAL, \
         appliedLastSeqno none)\n"
    );
    // Offline from OFFLINE:NORMAL is refused.
    let (code, _, err) = ctl(&spec, &["offline", "--at-seqno", "3"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("needs a running service"), "{err}");

    // Online.
    assert_eq!(
        ctl_ok(&spec, &["online"]),
        "state : GOING-ONLINE:SYNCHRONIZING\n"
    );
    let waited = ctl_json(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    assert_eq!(waited["state"], "ONLINE");
    let (code, _, err) = ctl(&spec, &["online"]);
    assert_eq!(code, 1, "online while ONLINE: {err}");
    // 2 × (CREATE DATABASE, CREATE TABLE, 5 INSERTs): 14 transactions.
    let applied = wait_applied_to_master(sb, &spec).await;
    let first = applied["minimumStoredSeqNo"].as_u64().expect("stored");
    let last = applied["maximumStoredSeqNo"].as_u64().expect("stored");
    assert_eq!(last - first + 1, 14, "{applied}");
    assert_eq!(applied["appliedLastSeqno"].as_u64(), Some(last));
    let waited = ctl_json(&spec, &["wait", "--applied", &last.to_string()]);
    assert_eq!(
        waited,
        serde_json::json!({"state": "ONLINE", "appliedLastSeqno": last})
    );
    let beyond = (last + 1).to_string();
    let (code, _, err) = ctl(
        &spec,
        &["wait", "--applied", &beyond, "--timeout-secs", "1"],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!(
            "shardrepctl: timed out after 1 s waiting for appliedLastSeqno >= {beyond} \
             (state ONLINE, appliedLastSeqno {last})\n"
        )
    );
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE");
    assert_eq!(s["droppedCount"], 0);
    assert_eq!(s["pendingError"], Value::Null);
    assert!(s["appliedLatency"].as_f64().is_some(), "{s}");

    // status --name channels: every channel at the last seqno (idle SYNC).
    let channels = ctl_json(&spec, &["status", "--name", "channels"]);
    let channels = channels.as_array().unwrap();
    assert_eq!(channels.len(), 4);
    for (i, c) in channels.iter().enumerate() {
        assert_eq!(c["channel"], i, "{c}");
        assert_eq!(c["appliedLastSeqno"].as_u64(), Some(last), "{c}");
        assert_eq!(
            c["appliedLastEventId"], applied["appliedLastEventId"],
            "{c}"
        );
    }
    // Every transaction was committed once, by one channel.
    let committed: u64 = channels
        .iter()
        .map(|c| c["appliedCount"].as_u64().unwrap())
        .sum();
    assert_eq!(committed, 14, "{channels:?}");
    let text = ctl_ok(&spec, &["status", "--name", "channels"]);
    assert_eq!(
        text.split("\n\n").count(),
        4,
        "one block per channel:\n{text}"
    );
    assert!(text.starts_with("appliedCount"), "{text}");

    // status --name shards: the map's shards, with their channel.
    let shards = ctl_json(&spec, &["status", "--name", "shards"]);
    let mut ids: Vec<&str> = shards
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shardId"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [a.as_str(), b.as_str()]);
    for shard in shards.as_array().unwrap() {
        assert_eq!(shard["critical"], false, "{shard}");
        assert!(shard["channel"].as_u64().unwrap() < 4, "{shard}");
        // a's 7 transactions came first, then b's.
        assert_eq!(shard["eventCount"], 7, "{shard}");
        let shard_last = if shard["shardId"] == a.as_str() {
            first + 6
        } else {
            last
        };
        assert_eq!(
            shard["appliedLastSeqno"].as_u64(),
            Some(shard_last),
            "{shard}"
        );
        assert!(shard["appliedLatency"].as_f64().is_some(), "{shard}");
        if shard_last == last {
            assert_eq!(
                shard["appliedLastEventId"], applied["appliedLastEventId"],
                "{shard}"
            );
        }
    }

    // status --name queue and log info: the same summary.
    let queue = ctl_json(&spec, &["status", "--name", "queue"]);
    assert_eq!(queue["minSeqno"].as_u64(), Some(first), "{queue}");
    assert_eq!(queue["maxSeqno"].as_u64(), Some(last), "{queue}");
    assert_eq!(queue["count"], 14, "{queue}");
    assert_eq!(
        queue["extractorPosition"], applied["appliedLastEventId"],
        "{queue}"
    );
    let info = ctl_json(&spec, &["log", "info"]);
    for key in ["dir", "minSeqno", "maxSeqno", "count", "extractorPosition"] {
        assert_eq!(info[key], queue[key], "{key}: {info} vs {queue}");
    }
    assert_eq!(
        info["dir"],
        spec.dir.join("queue").display().to_string().as_str()
    );
    let text = parse_text(&ctl_ok(&spec, &["log", "info"]));
    assert!(
        text.contains(&("count".to_string(), "14".to_string())),
        "{text:?}"
    );

    // log list --seqno N: the third INSERT into a (id 3).
    let third = first + 2 + 2;
    let one = log_list(&spec, &["--seqno", &third.to_string()]);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["seqno"].as_u64(), Some(third));
    assert_eq!(one[0]["shard"], a.as_str(), "{}", one[0]);
    let text = ctl_ok(&spec, &["log", "list", "--seqno", &third.to_string()]);
    assert!(text.starts_with(&format!("SEQ# = {third}\n")), "{text}");
    assert!(text.contains(&format!("- SHARD = {a}\n")), "{text}");
    assert_eq!(text.matches("SEQ# = ").count(), 1, "{text}");
    // log list --low A --high B: exactly A..=B, in order.
    let range = log_list(
        &spec,
        &[
            "--low",
            &(first + 1).to_string(),
            "--high",
            &(first + 5).to_string(),
        ],
    );
    let seqnos: Vec<u64> = range.iter().map(|t| t["seqno"].as_u64().unwrap()).collect();
    assert_eq!(seqnos, (first + 1..=first + 5).collect::<Vec<_>>());
    assert_eq!(log_list(&spec, &[]).len(), 14);
    let (code, _, err) = ctl(&spec, &["log", "list", "--low", "5", "--high", "3"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err, "shardrepctl: --low 5 is above --high 3\n");
    // A seqno the queue does not hold: an error saying what it holds; an
    // empty range: nothing listed, and a note.
    let held = format!("it holds seqnos {first} to {last} (later seqnos are not stored yet)");
    let (code, out, err) = ctl(&spec, &["log", "list", "--seqno", &beyond]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err,
        format!("shardrepctl: seqno {beyond} is not in the queue: {held}\n")
    );
    let (code, out, err) = ctl(&spec, &["log", "list", "--low", &beyond]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(
        err,
        format!("shardrepctl: no transaction in that range: {held}\n")
    );
    // With --json: no line, and nothing on stderr.
    let (code, out, err) = ctl(&spec, &["--json", "log", "list", "--low", &beyond]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));

    // Clean offline: every restart row at the last seqno.
    assert_eq!(
        ctl_ok(&spec, &["offline"]),
        text_block(&[
            ("appliedLastSeqno", &last.to_string()),
            ("state", "OFFLINE:NORMAL")
        ])
    );
    let seqnos = spec.restart_seqnos(sb).await;
    assert_eq!(seqnos, vec![last as i64; 4]);
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL");
    assert_eq!(s["lastOfflineClean"], true);
    assert_eq!(s["appliedLastSeqno"].as_u64(), Some(last));
    assert_eq!(s["minimumStoredSeqNo"].as_u64(), Some(first));
    assert_eq!(s["maximumStoredSeqNo"].as_u64(), Some(last));
    // The queue is still readable offline.
    assert_eq!(log_list(&spec, &["--seqno", &third.to_string()]), one);
    assert_eq!(ctl_json(&spec, &["log", "info"])["count"], 14);
    let (code, _, err) = ctl(&spec, &["offline"]);
    assert_eq!(code, 1, "offline while OFFLINE:NORMAL: {err}");
    for s in [&a, &b] {
        assert_table_equal(sb, Server::Master, TARGET, s, "t").await;
    }
    cleanup(sb, &spec, process, &[a, b]).await;
}

// online --until-seqno N and offline --at-seqno N stop with every channel
// at exactly N; offline --immediate stops at once (no handback after it),
// and the next online resumes with no gap and no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_seqno_at_seqno_and_immediate_offline() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_a");
    let b = unique_schema("ctl_b");
    let start = master_position(sb).await;
    // Seqnos 0-11: a (CREATE DATABASE, CREATE TABLE, ids 1-10); 12-23: b.
    create_table(sb, &a, 10).await;
    create_table(sb, &b, 10).await;
    let spec = ServiceSpec::new("ctlu", &[a.clone(), b.clone()], &start);
    let process = start_offline(sb, &spec);

    // online --until-seqno 7: a's ids 1-6 (seqnos 2-7), nothing of b.
    assert_eq!(
        ctl_ok(&spec, &["online", "--until-seqno", "7"]),
        "state : GOING-ONLINE:SYNCHRONIZING\n"
    );
    wait_state(&spec, "OFFLINE:NORMAL");
    assert_eq!(spec.restart_seqnos(sb).await, [7; 4]);
    let s = status(&spec);
    assert_eq!(s["appliedLastSeqno"], 7, "{s}");
    assert_eq!(s["lastOfflineClean"], true, "{s}");
    assert_eq!(
        s["untilSeqno"],
        Value::Null,
        "reached: no longer pending: {s}"
    );
    assert_eq!(
        rows_of(sb, TARGET, &a).await,
        (1..=6).map(|id| (id, 0)).collect::<Vec<_>>()
    );
    assert!(!schema_exists(sb, TARGET, &b).await);
    // A seqno already applied cannot be run until.
    let (code, _, err) = ctl(&spec, &["online", "--until-seqno", "5"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        "shardrepctl: online --until-seqno 5: seqno 7 is already applied; \
         name a seqno of at least 7\n"
    );
    assert_eq!(status(&spec)["state"], "OFFLINE:NORMAL");

    // offline --at-seqno 30, ahead of the master: answers at once, stops
    // once seqno 30 (a's id 17) is applied.
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "ONLINE");
    ctl_ok(&spec, &["wait", "--applied", "23", "--timeout-secs", "120"]);
    assert_eq!(
        ctl_ok(&spec, &["offline", "--at-seqno", "30"]),
        text_block(&[("offlineAtSeqno", "30"), ("state", "ONLINE")])
    );
    let s = status(&spec);
    assert_eq!(s["offlineAtSeqno"], 30, "{s}");
    assert_eq!(s["state"], "ONLINE", "{s}");
    let qa = quote_ident(&a);
    let more: String = (11..=20)
        .map(|id| format!("INSERT INTO {qa}.t VALUES ({id}, 0);"))
        .collect();
    on_master(sb, &more).await;
    wait_state(&spec, "OFFLINE:NORMAL");
    assert_eq!(spec.restart_seqnos(sb).await, [30; 4]);
    let s = status(&spec);
    assert_eq!(s["appliedLastSeqno"], 30, "{s}");
    assert_eq!(s["lastOfflineClean"], true, "{s}");
    assert_eq!(s["offlineAtSeqno"], Value::Null, "reached: {s}");
    assert_eq!(
        rows_of(sb, TARGET, &a).await,
        (1..=17).map(|id| (id, 0)).collect::<Vec<_>>()
    );

    // A seqno already applied cannot be stopped at.
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "ONLINE");
    ctl_ok(&spec, &["wait", "--applied", "33", "--timeout-secs", "120"]);
    let (code, _, err) = ctl(&spec, &["offline", "--at-seqno", "20"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        "shardrepctl: offline --at-seqno 20: seqno 33 is already handled; \
         name a seqno of at least 33, or use offline\n"
    );
    assert_eq!(status(&spec)["state"], "ONLINE");

    // offline --immediate under load: offline at once, not clean (no
    // handback); online again applies the rest, no gap, no duplicate.
    let qb = quote_ident(&b);
    let load: String = (0..200)
        .map(|i| {
            format!(
                "UPDATE {qa}.t SET n = n + 1 WHERE id = {}; UPDATE {qb}.t SET n = n + 1 WHERE id = {};",
                i % 20 + 1,
                i % 10 + 1
            )
        })
        .collect();
    on_master(sb, &load).await;
    assert_eq!(
        parse_text(&ctl_ok(&spec, &["offline", "--immediate"]))
            .into_iter()
            .find(|(k, _)| k == "state"),
        Some(("state".to_string(), "OFFLINE:NORMAL".to_string()))
    );
    let s = status(&spec);
    assert_eq!(s["lastOfflineClean"], false, "{s}");
    let (code, _, err) = ctl(&spec, &["handback"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("immediate"), "{err}");
    ctl_ok(&spec, &["online"]);
    wait_applied_to_master(sb, &spec).await;
    for s in [&a, &b] {
        assert_table_equal(sb, Server::Master, TARGET, s, "t").await;
    }
    ctl_ok(&spec, &["offline"]);
    let seqnos = spec.restart_seqnos(sb).await;
    assert!(seqnos.iter().all(|s| *s == seqnos[0]), "{seqnos:?}");
    cleanup(sb, &spec, process, &[a, b]).await;
}

// shard list / insert / update / delete / delete-all: stored in the
// catalog's shard_map and pushed to the running filter, so a shard
// inserted while ONLINE is applied from its next transaction, an updated
// one runs critical, a deleted one is dropped again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_edits_are_stored_and_applied_live() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_a");
    let d = unique_schema("ctl_d");
    let start = master_position(sb).await;
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("ctlm", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    wait_applied_to_master(sb, &spec).await;
    let svc = spec.service.as_str();
    let map_text = |rows: &[(&str, bool)]| {
        let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(8) + 2;
        let w1 = if rows.is_empty() { 6 } else { svc.len().max(6) } + 2;
        let mut out = format!("{:<w0$}{:<w1$}critical\n", "shard_id", "master");
        for (id, critical) in rows {
            out.push_str(&format!("{id:<w0$}{svc:<w1$}{critical}\n"));
        }
        out
    };
    let catalog_rows = || stored_shard_map(sb, &spec);
    assert_eq!(ctl_ok(&spec, &["shard", "list"]), map_text(&[(&a, false)]));
    assert_eq!(
        ctl_json(&spec, &["shard", "list"]),
        serde_json::json!([{"shardId": a, "master": svc, "critical": false}])
    );

    // d's transactions are dropped until d is in the map.
    create_table(sb, &d, 2).await;
    let before = wait_applied_to_master(sb, &spec).await;
    assert!(!schema_exists(sb, TARGET, &d).await);
    assert_eq!(before["droppedCount"], 4, "{before}");

    // insert: stdin in shard.map format; e, created on the master after
    // the insert, is applied live (while ONLINE).
    let e = unique_schema("ctl_e");
    let (code, out, err) = ctl_with_stdin(
        &spec,
        &["shard", "insert"],
        &format!("shard_id master critical\n{e} {svc} false\n"),
    );
    assert_eq!((code, out.as_str()), (0, "inserted : 1\n"), "{err}");
    assert_eq!(
        ctl_ok(&spec, &["shard", "list"]),
        map_text(&[(&a, false), (&e, false)])
    );
    assert_eq!(
        catalog_rows().await,
        [
            (a.clone(), svc.to_string(), 0),
            (e.clone(), svc.to_string(), 0)
        ]
    );
    // Inserting it again is refused, all or none.
    let (code, _, err) = ctl_with_stdin(
        &spec,
        &["shard", "insert"],
        &format!("shard_id master critical\nnew_one {svc} false\n{e} {svc} false\n"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&e), "{err}");
    assert_eq!(catalog_rows().await.len(), 2, "nothing inserted");
    // Not in shard.map format: a usage error, nothing sent.
    let (code, _, err) = ctl_with_stdin(&spec, &["shard", "insert"], "");
    assert_eq!(code, 2, "{err}");
    create_table(sb, &e, 2).await;
    let qe = quote_ident(&e);
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["state"], "ONLINE");
    assert_eq!(rows_of(sb, TARGET, &e).await, [(1, 0), (2, 0)]);
    assert!(!schema_exists(sb, TARGET, &d).await);

    // update: e becomes critical; its next transaction runs behind a
    // barrier.
    let (code, out, err) = ctl_with_stdin(
        &spec,
        &["shard", "update"],
        &format!("shard_id master critical\n{e} {svc} true\n"),
    );
    assert_eq!((code, out.as_str()), (0, "updated : 1\n"), "{err}");
    assert_eq!(
        ctl_ok(&spec, &["shard", "list"]),
        map_text(&[(&a, false), (&e, true)])
    );
    assert_eq!(catalog_rows().await[1], (e.clone(), svc.to_string(), 1));
    let shards = ctl_json(&spec, &["status", "--name", "shards"]);
    let shard_e = shards
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["shardId"] == e.as_str())
        .cloned()
        .unwrap();
    assert_eq!(shard_e["critical"], true, "{shards}");
    let barriers = status(&spec)["serializationCount"].as_u64().unwrap();
    on_master(sb, &format!("UPDATE {qe}.t SET n = 2 WHERE id = 1")).await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["serializationCount"].as_u64(), Some(barriers + 1), "{s}");
    assert_eq!(rows_of(sb, TARGET, &e).await, [(1, 2), (2, 0)]);
    let (code, _, err) = ctl_with_stdin(
        &spec,
        &["shard", "update"],
        &format!("shard_id master critical\nno_such_shard {svc} true\n"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no_such_shard"), "{err}");

    // delete: e's transactions are dropped again.
    assert_eq!(ctl_ok(&spec, &["shard", "delete", &e]), "deleted : 1\n");
    assert_eq!(ctl_ok(&spec, &["shard", "list"]), map_text(&[(&a, false)]));
    assert_eq!(catalog_rows().await.len(), 1);
    let (code, _, err) = ctl(&spec, &["shard", "delete", &e]);
    assert_eq!(code, 1, "{err}");
    on_master(sb, &format!("UPDATE {qe}.t SET n = 3 WHERE id = 2")).await;
    let qa = quote_ident(&a);
    on_master(sb, &format!("UPDATE {qa}.t SET n = 3 WHERE id = 1")).await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(rows_of(sb, TARGET, &e).await, [(1, 2), (2, 0)]);
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 3), (2, 0), (3, 0)]);
    // delete with the ids on stdin.
    let (code, _, err) = ctl_with_stdin(
        &spec,
        &["shard", "insert"],
        &format!("shard_id master critical\n{e} {svc} false\n"),
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ctl_with_stdin(&spec, &["shard", "delete"], &format!("{e}\n"));
    assert_eq!((code, out.as_str()), (0, "deleted : 1\n"), "{err}");

    // delete-all: an empty map (kept empty, not re-seeded from the
    // map file); a's transactions are dropped too.
    assert_eq!(ctl_ok(&spec, &["shard", "delete-all"]), "deleted : 1\n");
    assert_eq!(ctl_ok(&spec, &["shard", "list"]), map_text(&[]));
    assert_eq!(ctl_json(&spec, &["shard", "list"]), serde_json::json!([]));
    assert!(catalog_rows().await.is_empty());
    on_master(sb, &format!("UPDATE {qa}.t SET n = 4 WHERE id = 2")).await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 3), (2, 0), (3, 0)]);
    // droppedCount counts since the service started, across runs: d's 4
    // transactions, e's UPDATE after its delete, a's after delete-all.
    assert_eq!(status(&spec)["droppedCount"], 6);
    ctl_ok(&spec, &["offline"]);
    assert_eq!(status(&spec)["droppedCount"], 6);
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "ONLINE");
    assert_eq!(status(&spec)["droppedCount"], 6);
    // Still empty after a restart of the service.
    assert!(process.terminate());
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(&spec, &mut process);
    assert_eq!(ctl_ok(&spec, &["shard", "list"]), map_text(&[]));
    cleanup(sb, &spec, process, &[a, d, e]).await;
}

// `auto_create = true`: a schema the map does not know is added to the
// map (mastered by this service) and applied; the running service stores
// it in the catalog within a second, with no `shard list`, so it survives
// a `kill -9`; one created just before a clean stop is stored as the run
// ends; `shard list` and a check's default set of tables include them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_created_shards_are_listed_stored_and_checked() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_auto_a");
    let n = unique_schema("ctl_auto_new");
    let last = unique_schema("ctl_auto_last");
    let start = master_position(sb).await;
    create_table(sb, &a, 2).await;
    let mut spec = ServiceSpec::new("ctlauto", std::slice::from_ref(&a), &start);
    spec.auto_create = true;
    spec.unknown_shard_policy = "error";
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    create_table(sb, &n, 3).await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["state"], "ONLINE");
    assert_eq!(rows_of(sb, TARGET, &n).await, [(1, 0), (2, 0), (3, 0)]);
    let svc = spec.service.as_str();
    let row = |s: &str| (s.to_string(), svc.to_string(), 0i8);
    let stored = || stored_shard_map(sb, &spec);
    // Stored by the running service itself.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored().await != [row(&a), row(&n)] {
        assert!(std::time::Instant::now() < deadline, "{:?}", stored().await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let listed = serde_json::json!([
        {"shardId": a, "master": svc, "critical": false},
        {"shardId": n, "master": svc, "critical": false},
    ]);
    assert_eq!(ctl_json(&spec, &["shard", "list"]), listed);
    // The check's default tables: both shards' (a.t and n.t).
    let (code, out, err) = ctl(&spec, &["check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        ctl_json(&spec, &["status", "--name", "check"])["tablesDone"],
        2
    );
    // kill -9: the stored map stays.
    process.kill();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    assert_eq!(ctl_json(&spec, &["shard", "list"]), listed);
    // A shard created right before a clean stop is stored as it ends.
    create_table(sb, &last, 1).await;
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate());
    let mut want = vec![row(&a), row(&n), row(&last)];
    want.sort();
    assert_eq!(stored().await, want);
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(&spec, &mut process);
    assert_eq!(
        ctl_json(&spec, &["shard", "list"])
            .as_array()
            .unwrap()
            .len(),
        3
    );
    cleanup(sb, &spec, process, &[a, n, last]).await;
}

// A definite error (a row deleted on the replica by hand, then an UPDATE
// of it on the master) stops the service OFFLINE:ERROR with the pending
// error (code 1032, its seqno); `online` retries and fails again;
// `online --skip-seqno N` resumes without applying N.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definite_error_then_online_skip_seqno() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_a");
    let start = master_position(sb).await;
    // Seqnos 0-4: CREATE DATABASE, CREATE TABLE, ids 1-3.
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("ctle", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    ctl_ok(&spec, &["wait", "--applied", "4", "--timeout-secs", "120"]);
    let qa = quote_ident(&a);
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DELETE FROM {qa}.t WHERE id = 2"
        ))
        .await
        .unwrap();
    // 5: a schema not in the map (dropped); 6: the UPDATE of the missing
    // row; 7, 8: fine.
    let b = unique_schema("ctl_b");
    on_master(
        sb,
        &format!(
            "CREATE DATABASE {}; \
             UPDATE {qa}.t SET n = 1 WHERE id = 2; UPDATE {qa}.t SET n = 1 WHERE id = 3; \
             INSERT INTO {qa}.t VALUES (4, 0)",
            quote_ident(&b)
        ),
    )
    .await;
    wait_state(&spec, "OFFLINE:ERROR");
    let check_error = |s: &Value| {
        assert_eq!(s["state"], "OFFLINE:ERROR", "{s}");
        assert_eq!(s["pendingErrorCode"], 1032, "{s}");
        assert_eq!(s["pendingErrorSeqno"], 6, "{s}");
        assert_eq!(s["pendingErrorShard"], a.as_str(), "{s}");
        assert!(s["pendingError"].as_str().unwrap().contains("1032"), "{s}");
        assert!(s["pendingErrorEventId"].is_string(), "{s}");
        assert!(s["pendingErrorChannel"].is_u64(), "{s}");
        assert!(s["droppedCount"].as_u64() >= Some(1), "{s}");
    };
    let s = status(&spec);
    check_error(&s);
    // The failed run's counters are kept.
    assert_eq!(s["droppedCount"], 1, "{s}");
    let event_id = s["pendingErrorEventId"].as_str().unwrap().to_string();
    let six = ctl_ok(&spec, &["log", "list", "--seqno", "6"]);
    assert!(six.contains(&format!("- EVENTID = {event_id} ")), "{six}");
    assert!(six.contains("- SHARD = "), "{six}");
    let text = parse_text(&ctl_ok(&spec, &["status"]));
    assert!(text.contains(&("pendingErrorCode".into(), "1032".into())));
    // Waiting for anything else fails at once.
    let (code, _, err) = ctl(&spec, &["wait", "--applied", "8", "--timeout-secs", "120"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("OFFLINE:ERROR"), "{err}");

    // online retries: the same error again.
    assert_eq!(
        ctl_ok(&spec, &["online"]),
        "state : GOING-ONLINE:SYNCHRONIZING\n"
    );
    wait_state(&spec, "OFFLINE:ERROR");
    check_error(&status(&spec));

    // online --skip-seqno 6: 7 and 8 are applied, 6 is not.
    ctl_ok(&spec, &["online", "--skip-seqno", "6"]);
    ctl_ok(&spec, &["wait", "--applied", "8", "--timeout-secs", "120"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["skippedCount"], 1, "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(s["pendingErrorCode"], Value::Null, "{s}");
    assert_eq!(rows_of(sb, TARGET, &a).await, [(1, 0), (3, 1), (4, 0)]);
    assert_eq!(
        rows_of(sb, Server::Master, &a).await,
        [(1, 0), (2, 1), (3, 1), (4, 0)]
    );
    assert!(
        process.log_text().contains("--skip-seqno"),
        "the skip is logged"
    );
    ctl_ok(&spec, &["offline"]);
    assert_eq!(spec.restart_seqnos(sb).await, [8; 4]);
    assert!(!schema_exists(sb, TARGET, &b).await);
    cleanup(sb, &spec, process, &[a, b]).await;
}

// offline --handback: a clean offline, then the replica's native
// replication is pointed at the position after the last applied seqno
// (not started); the service forgets its queue and restart rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_handback_points_native_replication_after_the_last_seqno() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ctl_a");
    let start = master_position(sb).await;
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("ctlh", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    let applied = wait_applied_to_master(sb, &spec).await;
    assert_eq!(applied["appliedLastSeqno"], 4, "{applied}");
    let out = ctl_ok(&spec, &["--json", "offline", "--handback"]);
    let mut lines = out.lines();
    let offline: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        offline,
        serde_json::json!({"state": "OFFLINE:NORMAL", "appliedLastSeqno": 4})
    );
    let handback: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(lines.next(), None);
    assert_eq!(handback["seqno"], 4, "{handback}");
    assert_eq!(handback["slaveStarted"], false, "{handback}");
    let end = format!(
        "{}:{}",
        handback["masterLogFile"].as_str().unwrap(),
        handback["masterLogPos"]
    );
    assert_eq!(end, applied["appliedLastEventId"].as_str().unwrap());
    let mut replica = sb.connect(TARGET).await;
    let slave = shardrep::replica::slave_status(&mut replica)
        .await
        .unwrap()
        .expect("replication configured");
    assert!(!slave.sql_running, "{slave:?}");
    if handback["useGtid"] == true {
        let pos: String = replica
            .query_first("SELECT @@gtid_slave_pos")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pos, handback["gtidSlavePos"].as_str().unwrap());
    }
    // The service forgot its position: no restart rows, no queue.
    assert!(spec.restart_seqnos(sb).await.is_empty());
    assert!(!spec.dir.join("queue").exists());
    // A second handback has nothing to hand back.
    let (code, _, err) = ctl(&spec, &["handback"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no restart position"), "{err}");
    // The line shardrep prints as it stops names the seqno handed back
    // after, although status no longer does (the restart rows are gone).
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    assert_eq!(
        std::fs::read_to_string(spec.dir.join("shardrep.out")).unwrap(),
        format!(
            "{}: OFFLINE:NORMAL at seqno 4 (handed back to native replication at {end}), 0 \
             dropped by the shard filter, 0 barriers, 0 skipped by request\n",
            spec.service
        )
    );
    common::service::drop_everywhere(sb, &[a]).await;
    spec.remove(sb).await;
}

/// Inserts `(id, n)` into `schema.t` on the replica without binlogging:
/// a row the master does not have, so that the master's insert of `id`
/// fails there with a duplicate key (1062).
async fn conflicting_row_on_replica(sb: &Sandbox, schema: &str, id: i32, n: i32) {
    sb.connect(TARGET)
        .await
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {}.t VALUES ({id}, {n})",
            quote_ident(schema)
        ))
        .await
        .unwrap();
}

// Issue 14 §5. Two skips in a row: seqno 5 fails (a conflicting row on
// the replica), `online --skip-seqno 5`; then 6 fails, `online
// --skip-seqno 6`. The first skip holds although the channel's restart
// row never passed 5 (it was recorded in the catalog), and both hold
// after a `kill -9` right after the second skip: 5 and 6 are never
// applied. They are counted as skipped (not dropped) and shown in status
// and the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_seqnos_are_recorded_and_never_applied_later() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("skip2");
    let qa = quote_ident(&a);
    let start = master_position(sb).await;
    // Seqnos 0-4: CREATE DATABASE, CREATE TABLE, ids 1-3.
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("skip2", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "4", "--timeout-secs", "120"]);
    conflicting_row_on_replica(sb, &a, 5, 99).await;
    conflicting_row_on_replica(sb, &a, 6, 99).await;
    // 5 and 6, queued together: both conflict.
    on_master(
        sb,
        &format!("INSERT INTO {qa}.t VALUES (5, 0); INSERT INTO {qa}.t VALUES (6, 0)"),
    )
    .await;
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 5, "{s}");
    assert_eq!(s["pendingErrorCode"], 1062, "{s}");
    let error = s["pendingError"].as_str().unwrap();
    assert!(
        error.contains("`shardrepctl online --skip-seqno 5`"),
        "the error names the way out: {s}"
    );
    assert!(
        error.contains(&format!("`shardrepctl reset --confirm {}`", spec.service)),
        "{s}"
    );

    // A seqno every channel has passed cannot be recorded as skipped.
    let (code, _, err) = ctl(&spec, &["online", "--skip-seqno", "3,5"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("seqno 3 is already handled (every channel's restart row is at seqno 4"),
        "{err}"
    );
    assert_eq!(status(&spec)["state"], "OFFLINE:ERROR");

    // Nor a seqno not extracted yet: it would skip a future transaction.
    assert_eq!(status(&spec)["maximumStoredSeqNo"], 6);
    let (code, _, err) = ctl(&spec, &["online", "--skip-seqno", "6-9"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "online --skip-seqno 6-9: seqno 9 is not in the queue yet (highest stored: 6); a \
             skip names a transaction shown by the pending error or `shardrepctl log list`"
        ),
        "{err}"
    );
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:ERROR", "{s}");
    assert_eq!(s["skippedCount"], 0, "nothing recorded: {s}");
    // The table is created by the first recorded skip: none so far.
    let mut replica = sb.connect(TARGET).await;
    let recorded: Result<Vec<u64>, _> = replica
        .query(format!(
            "SELECT seqno FROM {}.skipped_seqno",
            quote_ident(&spec.catalog())
        ))
        .await;
    match recorded {
        Ok(rows) => assert!(rows.is_empty(), "{rows:?}"),
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1146, "{e}"),
        Err(e) => panic!("{e}"),
    }
    drop(replica);

    ctl_ok(&spec, &["online", "--skip-seqno", "5"]);
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 6, "the skip of 5 held: {s}");
    assert_eq!(s["skippedCount"], 1, "{s}");
    assert_eq!(s["skippedSeqnos"], "5", "{s}");
    assert_eq!(s["droppedCount"], 0, "{s}");
    // The failing channel's restart row is still below 5: only the
    // catalog says 5 is skipped.
    assert!(
        spec.restart_seqnos(sb).await.iter().any(|&r| r < 5),
        "{:?}",
        spec.restart_seqnos(sb).await
    );

    // Skip 6, the last queued seqno, and kill -9 as soon as the run
    // applies (nothing after 6 exists to commit on that channel).
    ctl_ok(&spec, &["online", "--skip-seqno", "6"]);
    wait_state(&spec, "ONLINE");
    process.kill();
    let mut replica = sb.connect(TARGET).await;
    let recorded: Vec<(u64, String)> = replica
        .query(format!(
            "SELECT seqno, shard_id FROM {}.skipped_seqno ORDER BY seqno",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    assert_eq!(recorded, [(5, a.clone()), (6, a.clone())]);

    // Restarted without any --skip-seqno: neither 5 nor 6 is applied.
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    on_master(sb, &format!("INSERT INTO {qa}.t VALUES (7, 0)")).await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["appliedLastSeqno"], 7, "{s}");
    assert_eq!(s["skippedCount"], 2, "{s}");
    assert_eq!(s["skippedSeqnos"], "5-6", "{s}");
    assert_eq!(s["droppedCount"], 0, "a skip is not a drop: {s}");
    assert_eq!(
        rows_of(sb, TARGET, &a).await,
        [(1, 0), (2, 0), (3, 0), (5, 99), (6, 99), (7, 0)]
    );
    let log = process.log_text();
    assert!(
        log.contains("seqnos recorded as skipped") && log.contains("seqnos=5,6"),
        "the log names the skipped seqnos: {log}"
    );
    ctl_ok(&spec, &["offline"]);
    assert_eq!(spec.restart_seqnos(sb).await, [7; 4]);
    cleanup(sb, &spec, process, &[a]).await;
}

// `online --skip-seqno` naming a seqno that never failed: another
// channel committed it before the seqno below it failed. It is not
// skipped (it was applied): neither recorded, counted nor logged as
// skipped; the one that failed is. Seqno 5 (id 4) waits for a row lock a
// replica session holds, 6 (id 5) commits on another channel meanwhile,
// then the session commits its own id 4 and 5 fails (1062).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skip_of_a_seqno_already_committed_is_not_counted() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("skipdone");
    let start = master_position(sb).await;
    // Seqnos 0-4: CREATE DATABASE, CREATE TABLE, ids 1-3.
    create_table(sb, &a, 3).await;
    let mut spec = ServiceSpec::new("skipdone", std::slice::from_ref(&a), &start);
    spec.block = 1;
    // Seqno 6 commits before 5: out of order, which the master's GTIDs
    // (commits in the master's order) do not allow.
    spec.binlog_gtids = Some("own");
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "4", "--timeout-secs", "120"]);
    fail_with_uneven_rows(sb, &spec, &a, 4, 6).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 5, "{s}");
    assert_eq!(s["pendingErrorCode"], 1062, "{s}");

    ctl_ok(&spec, &["online", "--skip-seqno", "5-6"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["skippedCount"], 1, "{s}");
    assert_eq!(s["skippedSeqnos"], "5", "{s}");
    let recorded: Vec<u64> = sb
        .connect(TARGET)
        .await
        .query(format!(
            "SELECT seqno FROM {}.skipped_seqno",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    assert_eq!(recorded, [5]);
    let log = process.log_text();
    assert!(
        log.contains(
            "--skip-seqno: the restart rows record these seqnos committed on the replica: not \
             skipped (nothing recorded or counted) seqnos=6"
        ),
        "{log}"
    );
    let skipped_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("transaction skipped at the DBA's request"))
        .collect();
    assert_eq!(skipped_lines.len(), 1, "{log}");
    assert!(skipped_lines[0].contains("seqno=5 "), "{log}");
    assert_eq!(
        rows_of(sb, TARGET, &a).await,
        [(1, 0), (2, 0), (3, 0), (4, 99), (5, 0)]
    );
    ctl_ok(&spec, &["offline"]);
    cleanup(sb, &spec, process, &[a]).await;
}

// Issue 14 §6. The master purged a binlog the service still needs: the
// service is OFFLINE:ERROR (1236) and pendingError says what to do (re-seed,
// then reset). `reset` is refused without the service's name; with it, it
// removes the queue, the restart rows and the recorded skips; with the
// replica re-seeded and a new start position, the service applies again
// and the replica ends equal to the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purged_binlog_error_is_left_by_reset_and_a_new_start() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("reset");
    let qa = quote_ident(&a);
    let start = master_position(sb).await;
    create_table(sb, &a, 2).await;
    let mut spec = ServiceSpec::new("reset", std::slice::from_ref(&a), &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    // A transaction after the restart position, then its binlog purged.
    on_master(sb, &format!("INSERT INTO {qa}.t VALUES (3, 0)")).await;
    flush_and_purge_binlogs(sb).await;

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1236, "{s}");
    let error = s["pendingError"].as_str().unwrap();
    assert!(
        error.contains("Re-seed the replica from the master, then `shardrepctl reset --confirm ")
            && error.contains(&spec.service),
        "status names the way out: {s}"
    );
    // online fails the same way; handback does not help (the binlog is gone).
    let (code, _, err) = ctl(&spec, &["reset", "--confirm", "not-this-one"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("confirm with --confirm {}", spec.service)),
        "{err}"
    );
    assert_eq!(spec.restart_seqnos(sb).await.len(), 4, "nothing removed");
    assert!(spec.dir.join("queue").exists());

    let reset = ctl_json(&spec, &["reset", "--confirm", &spec.service]);
    assert_eq!(
        reset,
        serde_json::json!({
            "state": "OFFLINE:NORMAL",
            "queueRemoved": spec.dir.join("queue").display().to_string(),
            "restartRowsDeleted": 4,
            "catalogDropped": null,
            "skippedDeleted": 0,
        })
    );
    assert!(spec.restart_seqnos(sb).await.is_empty());
    assert!(!spec.dir.join("queue").exists());
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(s["appliedLastSeqno"], Value::Null, "{s}");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");

    // Re-seed the replica's copy from the quiet master, and start at the
    // master's position now.
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; REPLACE INTO {qa}.t VALUES (3, 0)"
        ))
        .await
        .unwrap();
    spec.start = master_position(sb).await;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    on_master(
        sb,
        &format!("INSERT INTO {qa}.t VALUES (4, 0); UPDATE {qa}.t SET n = 1 WHERE id = 3"),
    )
    .await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["appliedLastSeqno"], 1, "{s}");
    assert_eq!(
        rows_of(sb, TARGET, &a).await,
        [(1, 0), (2, 0), (3, 1), (4, 0)]
    );
    assert_table_equal(sb, Server::Master, TARGET, &a, "t").await;
    cleanup(sb, &spec, process, &[a]).await;
}

// Issue 14 item 7.5. After an apply error, status shows the applied seqno
// the replica's restart rows hold, not the rows read when the process
// started, even when the replica refuses new connections at that moment
// (the service's account is locked while its channels stay connected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_after_an_apply_error_shows_the_restart_rows() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let user = format!("sr_lock{}", std::process::id());
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; \
             CREATE OR REPLACE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{}'; \
             GRANT ALL PRIVILEGES ON *.* TO '{user}'@'127.0.0.1'",
            sb.password
        ))
        .await
        .unwrap();
    let a = unique_schema("st75");
    let qa = quote_ident(&a);
    let start = master_position(sb).await;
    create_table(sb, &a, 3).await;
    let mut spec = ServiceSpec::new("st75", std::slice::from_ref(&a), &start);
    spec.replica_user = Some(user.clone());
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["appliedLastSeqno"], 4, "{s}");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");

    // A new process starts with the rows at 4, then applies 5-9.
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    on_master(
        sb,
        &(4..=8)
            .map(|id| format!("INSERT INTO {qa}.t VALUES ({id}, 0);"))
            .collect::<String>(),
    )
    .await;
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["appliedLastSeqno"], 9, "{s}");
    ctl_ok(&spec, &["wait", "--applied", "9", "--timeout-secs", "60"]);
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; ALTER USER '{user}'@'127.0.0.1' ACCOUNT LOCK"
        ))
        .await
        .unwrap();
    conflicting_row_on_replica(sb, &a, 9, 99).await;
    on_master(sb, &format!("INSERT INTO {qa}.t VALUES (9, 0)")).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 10, "{s}");
    let rows = spec.restart_seqnos(sb).await;
    // The failing channel stays at 9; the others synced past the failed
    // seqno.
    assert_eq!(rows.iter().min(), Some(&9), "{rows:?}");
    assert_eq!(s["appliedLastSeqno"], 9, "not the process start's 4: {s}");
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; ALTER USER '{user}'@'127.0.0.1' ACCOUNT UNLOCK"
        ))
        .await
        .unwrap();
    ctl_ok(&spec, &["offline"]);
    assert_eq!(status(&spec)["appliedLastSeqno"], 9);
    cleanup(sb, &spec, process, &[a]).await;
    sb.connect(TARGET)
        .await
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DROP USER '{user}'@'127.0.0.1'"
        ))
        .await
        .unwrap();
}
