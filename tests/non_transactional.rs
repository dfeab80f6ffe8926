//! Non-transactional tables (MyISAM here) are never applied twice
//! (shared/DESIGN.md §4): a transaction that changes one is applied in a
//! block of its own, and once its change to such a table ran it is never
//! run again on shardrep's own: an error after it stops the service
//! naming the seqno, the table and its engine.
//!
//! Before the fix, a MyISAM insert and an InnoDB update of two master
//! transactions shared a block; the update met a lock wait (1205), the
//! block was rolled back and run again, and the MyISAM row (which a
//! rollback does not undo) was inserted once per attempt.

mod common;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::service::{
    create_everywhere, ctl_ok, drop_everywhere, master_position, set_lock_wait_timeout, status,
    stop_target_slave, wait_applied_to_master, wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

/// `schema` with a keyless MyISAM table `mi` and InnoDB tables `inn` (row
/// 1) and `inn2`, on the master and both replicas, not binlogged.
async fn create_tables(sb: &Sandbox, schema: &str) {
    create_everywhere(
        sb,
        schema,
        &[
            ("mi", "(v INT) ENGINE = MyISAM"),
            (
                "inn",
                "(id INT PRIMARY KEY, v INT NOT NULL) ENGINE = InnoDB",
            ),
            ("inn2", "(id INT PRIMARY KEY) ENGINE = InnoDB"),
        ],
    )
    .await;
    let q = quote_ident(schema);
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        sb.exec(
            server,
            &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.inn VALUES (1, 0)"),
        )
        .await;
    }
}

/// The tests of this file one at a time (one changes a global variable of
/// the replica).
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// A MyISAM insert and an InnoDB update, two master transactions on one
// channel with block commit on; the update waits for a lock the replica's
// own session holds, past a 1 s `innodb_lock_wait_timeout`, and is
// retried until the lock goes. The MyISAM row is on the replica once,
// every table equal to the master's, and the service never stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_block_never_repeats_a_myisam_change() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("nontx_retry");
    let q = quote_ident(&schema);
    create_tables(sb, &schema).await;
    // The channels' sessions take it when they connect.
    let timeout = set_lock_wait_timeout(sb, 1).await;
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "BEGIN; SELECT * FROM {q}.inn WHERE id = 1 FOR UPDATE"
        ))
        .await
        .unwrap();
    let start = master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!("INSERT INTO {q}.mi VALUES (1); UPDATE {q}.inn SET v = v + 1 WHERE id = 1"),
    )
    .await;

    let mut spec = ServiceSpec::new("nontx_retry", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    spec.retry_max_attempts = 1000;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    // The update has met the lock (and been retried) at least twice.
    common::wait_until(
        "two lock wait retries",
        std::time::Duration::from_secs(60),
        || async {
            let s = status(&spec);
            assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
            let retries = s["retryCounts"].as_str().unwrap_or_default().to_string();
            retries
                .split(',')
                .any(|p| p.strip_prefix("1205=").is_some_and(|n| n != "1"))
                .then_some(())
        },
    )
    .await
    .unwrap();
    holder.query_drop("ROLLBACK").await.unwrap();
    let s = wait_applied_to_master(sb, &spec).await;
    set_lock_wait_timeout(sb, timeout).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    assert_eq!(
        assert_table_equal(sb, Server::Master, TARGET, &schema, "mi")
            .await
            .len(),
        1
    );
    assert_table_equal(sb, Server::Master, TARGET, &schema, "inn").await;
    let log = process.log_text();
    assert!(log.contains("block=1"), "the retry names its block:\n{log}");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

// One master transaction inserts a MyISAM row, and its trigger an InnoDB
// row the replica already has (a divergence: 1062). The
// MyISAM insert ran before the error and a rollback does not undo it, so
// the service stops naming the seqno, the table and its engine, and does
// not run the transaction again (the MyISAM row is on the replica once).
// Following the printed way out (undo the MyISAM change, fix the
// divergence, `online`) ends equal to the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_a_myisam_change_stops_naming_the_table() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("nontx_stop");
    let q = quote_ident(&schema);
    create_tables(sb, &schema).await;
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.inn2 VALUES (5)"),
    )
    .await;
    // The master's trigger puts the MyISAM row and the InnoDB row in one
    // binlog group (a MyISAM change of its own is logged as a group of
    // its own); the replica has no trigger.
    sb.exec(
        Server::Master,
        &format!(
            "SET SESSION sql_log_bin = 0; CREATE TRIGGER {q}.mi_ai AFTER INSERT ON {q}.mi \
             FOR EACH ROW INSERT INTO {q}.inn2 VALUES (NEW.v)"
        ),
    )
    .await;
    let start = master_position(sb).await;
    sb.exec(Server::Master, &format!("INSERT INTO {q}.mi VALUES (5)"))
        .await;
    for compound in [false, true] {
        let mut spec = ServiceSpec::new("nontx_stop", std::slice::from_ref(&schema), &start);
        spec.channels = 2;
        spec.compound_blocks = compound;
        let _catalog = spec.drop_catalog_on_panic(sb);
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        ctl_ok(
            &spec,
            &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
        );
        let s = status(&spec);
        let error = s["pendingError"].as_str().unwrap_or_default().to_string();
        let mi = format!("{q}.`mi`");
        assert!(
            error.contains(&format!(
                "not run again: seqno 0 ran a change of {mi} (engine MyISAM, not transactional"
            )),
            "{s}"
        );
        assert!(error.contains("error 1062"), "{s}");
        assert!(
            error.contains("`shardrepctl online` applies the transaction whole"),
            "{s}"
        );
        // The MyISAM row once (the attempt's), the InnoDB part rolled back.
        let rows: Vec<i32> = sb
            .connect(TARGET)
            .await
            .query(format!("SELECT v FROM {q}.mi"))
            .await
            .unwrap();
        assert_eq!(rows, [5], "compound {compound}");
        // The way out as printed: undo the MyISAM change.
        sb.exec(
            TARGET,
            &format!("SET SESSION sql_log_bin = 0; DELETE FROM {q}.mi"),
        )
        .await;
        if !compound {
            assert!(process.terminate(), "shardrep stops on SIGTERM");
            spec.remove(sb).await;
            continue;
        }
        // ... fix the divergence, then online: applied whole.
        sb.exec(
            TARGET,
            &format!("SET SESSION sql_log_bin = 0; DELETE FROM {q}.inn2 WHERE id = 5"),
        )
        .await;
        ctl_ok(&spec, &["online"]);
        let s = wait_applied_to_master(sb, &spec).await;
        assert_eq!(s["state"], "ONLINE", "{s}");
        assert_eq!(s["pendingError"], Value::Null, "{s}");
        for table in ["mi", "inn", "inn2"] {
            assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
        }
        assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
        spec.remove(sb).await;
    }
    drop_everywhere(sb, &[schema]).await;
}

// A statement-format transaction (no row events to look tables up by):
// an InnoDB update, a MyISAM insert, then an InnoDB update of a row the
// replica's own session holds past a 1 s `innodb_lock_wait_timeout`. The
// replica's ROLLBACK warns that a non-transactional change stays (1196):
// the service stops naming the seqno instead of retrying (a retry
// inserted the MyISAM row once per attempt), and the printed way out ends
// equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_format_myisam_change_is_not_retried() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("nontx_stmt");
    let q = quote_ident(&schema);
    create_tables(sb, &schema).await;
    sb.exec(
        Server::Master,
        &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.inn VALUES (50, 0)"),
    )
    .await;
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.inn VALUES (50, 0)"),
    )
    .await;
    let mut replica = sb.connect(TARGET).await;
    let timeout = set_lock_wait_timeout(sb, 1).await;
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "BEGIN; SELECT * FROM {q}.inn WHERE id = 50 FOR UPDATE"
        ))
        .await
        .unwrap();
    let start = master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!(
            "SET SESSION binlog_format = 'STATEMENT'; BEGIN; \
             UPDATE {q}.inn SET v = v + 1 WHERE id = 1; INSERT INTO {q}.mi VALUES (778); \
             UPDATE {q}.inn SET v = v + 1 WHERE id = 50; COMMIT"
        ),
    )
    .await;
    let mut spec = ServiceSpec::new("nontx_stmt", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
    );
    set_lock_wait_timeout(sb, timeout).await;
    let s = status(&spec);
    let error = s["pendingError"].as_str().unwrap_or_default().to_string();
    assert!(
        error.contains("not run again: seqno 0 ran a change of a table that is not transactional"),
        "{s}"
    );
    assert!(error.contains("error 1205"), "{s}");
    let rows: Vec<i32> = replica
        .query(format!("SELECT v FROM {q}.mi"))
        .await
        .unwrap();
    assert_eq!(rows, [778], "the MyISAM row once");
    // The way out: undo the MyISAM change, then online (lock released).
    holder.query_drop("ROLLBACK").await.unwrap();
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DELETE FROM {q}.mi"),
    )
    .await;
    ctl_ok(&spec, &["online"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    for table in ["mi", "inn"] {
        assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}
