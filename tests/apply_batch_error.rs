//! A server error in the middle of a batched block (the multi-statement
//! path of `applier::channel::batch`) rolls the whole block back and is
//! reported for the statement that caused it.
//!
//! MariaDB stops a multi-statement query at its first error. mysql_async
//! then ends the reply early: the failing statement reads as an empty
//! result (0 affected rows) and the error itself is handed to the
//! connection's next command. Before the fix, that 0 was taken for a
//! missing row (a short count, reported as 1032), the `ROLLBACK` that
//! followed received the stale error instead of running, and the
//! statement-at-a-time retry's `START TRANSACTION` committed the part of
//! the block before the error, without the restart row: those
//! transactions were then applied a second time (here: a duplicate key on
//! the block's first INSERT, at the wrong seqno, with its rows left on the
//! replica).

mod common;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::service::{
    ctl_ok, drop_everywhere, master_position, status, stop_target_slave, wait_applied_to_master,
    wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

async fn rows(sb: &Sandbox, server: Server, schema: &str) -> Vec<(i32, i32)> {
    sb.connect(server)
        .await
        .query(format!(
            "SELECT id, u FROM {}.t ORDER BY id",
            quote_ident(schema)
        ))
        .await
        .unwrap()
}

// One transaction of three row changes; on the replica its UPDATE meets a
// row the master does not have (duplicate key 1062 on `uk_u`) after its
// two INSERTs ran. The service stops with that error, at that seqno, and
// the replica holds nothing of the transaction; once the row is removed,
// `online` applies everything exactly once.
//
// Then the same with `[apply] compound_blocks`: the compound statement
// stops at the error before its COMMIT, and the statement-at-a-time path
// reports it exactly as above. Then compound blocks of every kind of row
// change, and a divergence under them. One test, so that each part's
// seqnos are its own (tests of one file run at once on one master).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_inside_a_batch_rolls_the_whole_block_back() {
    server_error_inside_a_batch("sql", false).await;
    server_error_inside_a_batch("sql", true).await;
    // The binlog method: the shared BINLOG statement fails, the block is
    // run again one statement per transaction, which names the seqno.
    server_error_inside_a_batch("binlog", true).await;
    compound_blocks_apply_exactly_and_stop_at_a_divergence().await;
}

async fn server_error_inside_a_batch(method: &'static str, compound: bool) {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("batch_err");
    let q = quote_ident(&schema);
    let ddl = format!(
        "SET SESSION sql_log_bin = 0; CREATE DATABASE {q}; \
         CREATE TABLE {q}.t (id INT PRIMARY KEY, u INT NOT NULL, UNIQUE KEY uk_u (u))"
    );
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        sb.exec(server, &ddl).await;
    }
    // The replica's own row: the master's UPDATE to u = 5 collides with it.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.t VALUES (100, 5)"),
    )
    .await;
    let start = master_position(sb).await;
    // Seqno 0: the transaction that fails on the replica; 1: one more.
    sb.exec(
        Server::Master,
        &format!(
            "BEGIN; INSERT INTO {q}.t VALUES (1, 1); INSERT INTO {q}.t VALUES (2, 2); \
             UPDATE {q}.t SET u = 5 WHERE id = 2; COMMIT; INSERT INTO {q}.t VALUES (3, 3)"
        ),
    )
    .await;

    let mut spec = ServiceSpec::new("batch_err", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    spec.compound_blocks = compound;
    spec.method = Some(method);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1062, "{s}");
    assert_eq!(s["pendingErrorSeqno"], 0, "{s}");
    let message = s["pendingError"].as_str().unwrap_or_default();
    assert!(
        message.contains("Duplicate entry '5' for key 'uk_u'"),
        "the error is the UPDATE's: {s}"
    );
    let sql = s["pendingExceptionMessage"].as_str().unwrap_or_default();
    if method == "sql" {
        assert!(sql.starts_with("UPDATE "), "{s}");
    } else {
        assert!(
            sql.starts_with("BINLOG (") && sql.contains("UPDATE_ROWS"),
            "{s}"
        );
    }
    // Nothing of the failed block is on the replica, and its restart row
    // has not moved.
    assert_eq!(rows(sb, TARGET, &schema).await, [(100, 5)]);
    assert_eq!(spec.restart_seqnos(sb).await, [-1]);

    // Repaired: everything applied once.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DELETE FROM {q}.t WHERE id = 100"),
    )
    .await;
    ctl_ok(&spec, &["online"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(
        assert_table_equal(sb, Server::Master, TARGET, &schema, "t")
            .await
            .len(),
        3
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

// `[apply] compound_blocks`: blocks of inserts, merged updates, deletes and
// fused delete+insert pairs end equal to the master; a row missing on the
// replica (a divergence) still stops the service with 1032 at its seqno,
// with nothing of its block committed.
async fn compound_blocks_apply_exactly_and_stop_at_a_divergence() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("compound");
    let q = quote_ident(&schema);
    let ddl = format!(
        "SET SESSION sql_log_bin = 0; CREATE DATABASE {q}; \
         CREATE TABLE {q}.t (id INT PRIMARY KEY, u INT NOT NULL)"
    );
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        sb.exec(server, &ddl).await;
    }
    let start = master_position(sb).await;
    let mut load = format!("INSERT INTO {q}.t SELECT seq, seq FROM {q}.seq_1_to_200;");
    for n in 0..40 {
        let lo = 1 + (n * 5) % 180;
        load.push_str(&format!(
            "BEGIN; UPDATE {q}.t SET u = u + 1 WHERE id BETWEEN {lo} AND {hi}; \
             DELETE FROM {q}.t WHERE id = {del}; INSERT INTO {q}.t VALUES ({ins}, {n}); \
             UPDATE {q}.t SET u = u * 2 WHERE id = {one}; COMMIT;",
            hi = lo + 6,
            del = 200 - n,
            ins = 1000 + n,
            one = lo + 3,
        ));
    }
    sb.exec(Server::Master, &load).await;
    let mut spec = ServiceSpec::new("compound", std::slice::from_ref(&schema), &start);
    // The compound statements of the SQL method.
    spec.method = Some("sql");
    spec.channels = 2;
    spec.compound_blocks = true;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(
        assert_table_equal(sb, Server::Master, TARGET, &schema, "t")
            .await
            .len(),
        200
    );
    // A divergence: the replica lost row 5, which the master updates in
    // the same transaction as row 6.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DELETE FROM {q}.t WHERE id = 5"),
    )
    .await;
    let before = rows(sb, TARGET, &schema).await;
    sb.exec(Server::Master,
        &format!("BEGIN; UPDATE {q}.t SET u = 77 WHERE id = 6; UPDATE {q}.t SET u = 55 WHERE id = 5; COMMIT"),
    )
    .await;
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1032, "{s}");
    assert_eq!(
        rows(sb, TARGET, &schema).await,
        before,
        "nothing of the block committed"
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}
