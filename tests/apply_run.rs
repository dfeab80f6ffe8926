//! The whole pipeline against the sandbox: the master's binlog extracted
//! into the queue and applied by N channels to replica 2 (whose native
//! replication is stopped), compared row by row with the master.
//!
//! Each test creates its schemas on the master with `sql_log_bin = 0` and
//! identically on replica 2, records the master's position, writes on the
//! master, and runs shardrep from that position until it is idle. A shard
//! map lists only the test's schemas (master = the test's service) and
//! drops unknown shards, so nothing else in the binlog range is applied.

mod common;

use mysql_async::prelude::Queryable;
use shardrep::position::Seqno;

use common::row_metadata::{RowMetadata, LEVELS};
use common::service::{
    ctl_ok, drop_everywhere, master_position, wait_applied_to_master, wait_for_socket, ServiceSpec,
    TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

const REPLICA: Server = TARGET;

/// From the replica's general log (`log_output = 'TABLE'`): every statement
/// the connection that inserted into `schema` ran, in order, with
/// multi-statement queries split at their ";\n" joins.
async fn channel_statements(replica: &mut mysql_async::Conn, schema: &str) -> Vec<String> {
    let thread: u64 = replica
        .exec_first(
            "SELECT thread_id FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') \
             AND CONVERT(argument USING utf8mb4) LIKE CONCAT('%INSERT INTO `', ?, '`%') LIMIT 1",
            (schema,),
        )
        .await
        .unwrap()
        .expect("the channel's INSERT is in the general log");
    let entries: Vec<String> = replica
        .exec(
            "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log \
             WHERE thread_id = ? AND command_type IN ('Query', 'Execute') ORDER BY event_time",
            (thread,),
        )
        .await
        .unwrap();
    entries
        .iter()
        .flat_map(|e| e.split(";\n").map(str::to_string))
        .collect()
}

static MASTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `ddl` on the master without binlogging it, and on both replicas
/// (replica 1 keeps replicating natively, so it needs the tables too).
async fn create_on_both(sb: &Sandbox, ddl: &str) {
    let mut replica = sb.connect(REPLICA).await;
    replica.query_drop("STOP SLAVE").await.unwrap();
    for server in [REPLICA, Server::Replica(1)] {
        sb.connect(server)
            .await
            .query_drop(format!("SET SESSION sql_log_bin = 0; {ddl}"))
            .await
            .unwrap();
    }
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!("SET SESSION sql_log_bin = 0; {ddl}"))
        .await
        .unwrap();
}

/// [`sharded_workload_once`] with the master at each
/// `binlog_row_metadata` of [`LEVELS`] (NO_LOG: the applier takes names,
/// keys and signedness from the replica).
async fn sharded_workload(block: u32) {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    for level in LEVELS {
        let _metadata = RowMetadata::set(sb, level).await;
        sharded_workload_once(sb, block).await;
    }
}

async fn sharded_workload_once(sb: &'static Sandbox, block: u32) {
    let schemas: Vec<String> = (0..4)
        .map(|i| unique_schema(&format!("apply{i}")))
        .collect();
    let mut ddl = String::new();
    for s in &schemas {
        let q = quote_ident(s);
        ddl.push_str(&format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, k INT, c VARCHAR(40), d DECIMAL(12,2), ts DATETIME(6), INDEX (k));\n"
        ));
    }
    create_on_both(sb, &ddl).await;
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    for round in 0..30 {
        for (i, s) in schemas.iter().enumerate() {
            let q = quote_ident(s);
            master
                .query_drop(format!(
                    "START TRANSACTION; \
                     INSERT INTO {q}.t VALUES ({id}, {round}, 'row {round} of {i}', {round}.25, '2024-02-29 12:00:00.{round:06}'); \
                     UPDATE {q}.t SET k = k + 1, c = CONCAT(c, '!') WHERE id <= {round}; \
                     DELETE FROM {q}.t WHERE id = {del}; \
                     COMMIT",
                    id = round + 1000,
                    del = round + 999,
                ))
                .await
                .unwrap();
        }
        // A transaction across two schemas (case B19): one #UNKNOWN shard,
        // applied alone and atomically.
        let (a, b) = (quote_ident(&schemas[0]), quote_ident(&schemas[1]));
        master
            .query_drop(format!(
                "START TRANSACTION; UPDATE {a}.t SET d = d + 1 WHERE id = {id}; \
                 INSERT INTO {b}.t VALUES ({other}, 0, 'cross', 0, NULL); COMMIT",
                id = round + 1000,
                other = round + 5000,
            ))
            .await
            .unwrap();
    }
    let mut spec = ServiceSpec::new("t", &schemas, &start);
    spec.block = block;
    let report = spec.run_until_idle(sb).expect("run succeeds");
    for s in &schemas {
        assert_table_equal(sb, Server::Master, REPLICA, s, "t").await;
    }
    eprintln!("report: {report:?}");
    let seqnos: Vec<Option<Seqno>> = report.restart_rows.iter().map(|r| r.seqno).collect();
    assert_eq!(seqnos.len(), 4);
    assert!(
        seqnos.iter().all(|s| *s == seqnos[0] && s.is_some()),
        "restart rows differ: {seqnos:?}"
    );
    assert!(
        report.serializations >= 30,
        "cross-schema transactions run behind barriers"
    );
    drop_everywhere(sb, &schemas).await;
    spec.remove(sb).await;
}

// Parallel apply with block commit: every table equals the master's and
// all restart rows end at one seqno.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_catch_up_with_block_commit_matches_the_master() {
    sharded_workload(100).await;
}

// The same with block commit off (one transaction per commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_catch_up_without_block_commit_matches_the_master() {
    sharded_workload(1).await;
}

// One transaction on one channel with block commit off, under
// `binlog_gtids = "own"`: the replica sees, on the channel's connection,
// START TRANSACTION, the DML, the restart-row UPDATE and COMMIT, in that
// order (from the replica's general log; the first four arrive in one
// multi-statement query, COMMIT after their replies are checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_transaction_is_begin_dml_restart_row_commit() {
    one_transaction_layout("own").await;
}

// The same under `binlog_gtids = "master"` (the default): the session is
// set to the master's GTID of the transaction (binary logging on) with
// START TRANSACTION in one query, then the DML, COMMIT, and the restart
// row after it without binary logging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_master_gtids_the_restart_row_follows_the_commit_unlogged() {
    one_transaction_layout("master").await;
}

async fn one_transaction_layout(binlog_gtids: &'static str) {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let schema = unique_schema("order");
    let q = quote_ident(&schema);
    create_on_both(
        sb,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT);"),
    )
    .await;
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "START TRANSACTION; INSERT INTO {q}.t VALUES (1, 10); UPDATE {q}.t SET v = 11 WHERE id = 1; COMMIT"
        ))
        .await
        .unwrap();
    let gtid: String = master
        .query_first("SELECT @@last_gtid")
        .await
        .unwrap()
        .unwrap();
    let mut replica = sb.connect(REPLICA).await;
    replica
        .query_drop("SET GLOBAL log_output = 'TABLE'; TRUNCATE TABLE mysql.general_log; SET GLOBAL general_log = 1")
        .await
        .unwrap();
    let mut spec = ServiceSpec::new("o", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    spec.block = 1;
    spec.binlog_gtids = Some(binlog_gtids);
    // The multi-statement form (compound blocks are checked in
    // apply_batch_error).
    spec.compound_blocks = false;
    // The statements of the SQL method are what this test reads.
    spec.method = Some("sql");
    let service = spec.service.clone();
    let report = spec.run_until_idle(sb).expect("run succeeds");
    replica
        .query_drop("SET GLOBAL general_log = 0")
        .await
        .unwrap();
    assert_eq!(report.dispatched, 1);
    // Row-only blocks go as one multi-statement query (statements joined
    // by ";\n"), then COMMIT once every reply is checked.
    let log = channel_statements(&mut replica, &schema).await;
    let begin = log
        .iter()
        .position(|s| s == "START TRANSACTION")
        .expect("START TRANSACTION");
    // Both modes: START TRANSACTION, the INSERT, the UPDATE; then the
    // restart row in the transaction ("own"), or after its COMMIT without
    // binary logging ("master": binary logging stays off until the next
    // transaction's SET).
    let restart_row = format!("UPDATE `shardrep_{service}`.`restart_position` SET seqno = 0");
    let tail: &[&str] = if binlog_gtids == "master" {
        &["COMMIT", "SET SESSION sql_log_bin = 0", &restart_row]
    } else {
        &[&restart_row, "COMMIT"]
    };
    let steps: Vec<&str> = log[begin..]
        .iter()
        .map(|s| s.as_str())
        .take(3 + tail.len())
        .collect();
    assert_eq!(steps.len(), 3 + tail.len(), "{log:?}");
    assert_eq!(steps[0], "START TRANSACTION");
    assert!(
        steps[1].starts_with(&format!("INSERT INTO `{schema}`.`t`")),
        "{steps:?}"
    );
    assert!(
        steps[2].starts_with(&format!("UPDATE `{schema}`.`t` SET `v` = 11")),
        "{steps:?}"
    );
    for (step, expected) in steps[3..].iter().zip(tail) {
        if *expected == restart_row {
            // Followed by its values.
            assert!(step.starts_with(expected), "{steps:?}");
        } else {
            assert_eq!(step, expected, "{steps:?}");
        }
    }
    if binlog_gtids == "master" {
        // The session was set to the master's GTID with the START
        // TRANSACTION, and the replica binlogged it under that GTID.
        let mut parts = gtid.split('-');
        let (domain, server, seq) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        // The domain and server id first, the sequence number apart (one
        // SET checks gtid_seq_no against the old domain under strict mode).
        assert_eq!(
            log[begin - 2],
            format!("SET SESSION sql_log_bin = 1, server_id = {server}, gtid_domain_id = {domain}"),
            "{log:?}"
        );
        assert_eq!(
            log[begin - 1],
            format!("SET SESSION gtid_seq_no = {seq}"),
            "{log:?}"
        );
        let replica_gtid: String = replica
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .unwrap()
            .unwrap();
        assert!(
            replica_gtid.split(',').any(|g| g == gtid),
            "{replica_gtid} lacks {gtid}"
        );
    }
    assert_table_equal(sb, Server::Master, REPLICA, &schema, "t").await;
    drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}

// `block_commit_interval_ms`: a channel whose input runs dry waits that long
// (from the block's first transaction) for more before committing a block
// that is not full, and the idle source's SYNC markers do not cut the block
// short. Three transactions written 300 ms apart on a live source are
// committed with one COMMIT on the channel's connection (with the default 0
// each would commit at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_source_is_committed_in_one_block_within_the_interval() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let schema = unique_schema("trickle");
    let q = quote_ident(&schema);
    create_on_both(
        sb,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT);"),
    )
    .await;
    let start = master_position(sb).await;
    let mut spec = ServiceSpec::new("trickle", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    // Blocks of several transactions: not under the master's GTIDs (one
    // transaction per commit there).
    spec.binlog_gtids = Some("own");
    spec.block_interval_ms = 4000;
    // The statements of the SQL method are what this test reads.
    spec.method = Some("sql");
    let mut replica = sb.connect(REPLICA).await;
    replica
        .query_drop("SET GLOBAL log_output = 'TABLE'; TRUNCATE TABLE mysql.general_log; SET GLOBAL general_log = 1")
        .await
        .unwrap();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    let mut master = sb.connect(Server::Master).await;
    for id in 1..=3 {
        master
            .query_drop(format!("INSERT INTO {q}.t VALUES ({id}, {id})"))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    wait_applied_to_master(sb, &spec).await;
    assert!(process.terminate(), "clean stop");
    replica
        .query_drop("SET GLOBAL general_log = 0")
        .await
        .unwrap();
    let log = channel_statements(&mut replica, &schema).await;
    let insert = format!("INSERT INTO `{schema}`.`t`");
    let at: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, s)| s.starts_with(&insert))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 3, "{log:?}");
    let commits = log[at[0]..=at[2]]
        .iter()
        .filter(|s| **s == "COMMIT")
        .count();
    assert_eq!(commits, 0, "one block for the three transactions: {log:?}");
    assert_table_equal(sb, Server::Master, REPLICA, &schema, "t").await;
    drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}
