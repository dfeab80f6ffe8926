//! The APPLY and POSITION cases of `shared/cases/` (SQL copied to
//! `tests/cases/`) through the whole pipeline: the case's SQL runs on the
//! sandbox master, shardrep extracts it and applies it with several
//! channels to replica 2 (native replication stopped there), and the
//! replica must end with the case's exact rows (and the master's).
//!
//! Each case's schema names are replaced by names of the test's own; the
//! service's shard map lists only those, and drops unknown shards, so
//! nothing else in the binlog range is applied. The tests of this file take
//! one lock and run one at a time (some change replica settings or kill
//! processes).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use shardrep::position::{BinlogPosition, Seqno};
use shardrep::queue::{QueueOptions, TransactionQueue};
use shardrep::replicator::RunError;
use shardrep::scheduler::SchedulerError;
use shardrep::shard::channel::ChannelAssignment;

use common::committed_watch::{jitter, CommittedWatch, WatchReport};
use common::service::{
    case_sql, drop_everywhere, master_position, script_statements, stop_target_slave, ServiceSpec,
    TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

static MASTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Fresh names for the case's schemas: `(case name, unique name)`.
fn renames(names: &[&'static str]) -> Vec<(&'static str, String)> {
    names.iter().map(|n| (*n, unique_schema(n))).collect()
}

fn case_for(case: &str, renames: &[(&'static str, String)]) -> String {
    let pairs: Vec<(&str, &str)> = renames.iter().map(|(a, b)| (*a, b.as_str())).collect();
    case_sql(case, &pairs)
}

fn names(renames: &[(&'static str, String)]) -> Vec<String> {
    renames.iter().map(|(_, b)| b.clone()).collect()
}

/// Runs a case script (DELIMITER-aware) on one master connection.
async fn run_script(sb: &Sandbox, script: &str) {
    let mut master = sb.connect(Server::Master).await;
    for statement in script_statements(script) {
        master
            .query_drop(statement.as_str())
            .await
            .unwrap_or_else(|e| panic!("case SQL on the master: {e}\n{statement}"));
    }
}

async fn query_i64s(conn: &mut mysql_async::Conn, sql: &str) -> Vec<Option<i64>> {
    let row: Option<mysql_async::Row> = conn.query_first(sql).await.expect(sql);
    let row = row.expect("one row");
    (0..row.len()).map(|i| row.get(i).unwrap()).collect()
}

// B19: a transfer between two shards is one transaction on the replica
// (applied alone behind a barrier), and the later single-shard updates of
// both shards apply after it. A reader polling the replica sees the sum
// 200 (before), 270 or 269 (after the transfer and one or both later
// updates) or 199 (shard b's later update before shard a's: the shards
// are not ordered against each other outside barriers), never a half
// transfer (170 or 230).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_schema_transfer_is_atomic_and_ordered_against_both_shards() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["shard_a", "shard_b"]);
    let (a, b) = (quote_ident(&r[0].1), quote_ident(&r[1].1));
    let start = master_position(sb).await;
    run_script(sb, &case_for("B19", &r)).await;
    // More transfers and later updates, so the poller has something to see.
    let mut master = sb.connect(Server::Master).await;
    for _ in 0..100 {
        master
            .query_drop(format!(
                "START TRANSACTION; UPDATE {a}.wallet SET bal = bal - 5 WHERE id = 1; \
                 UPDATE {b}.wallet SET bal = bal + 5 WHERE id = 1; COMMIT; \
                 START TRANSACTION; UPDATE {b}.wallet SET bal = bal - 5 WHERE id = 1; \
                 UPDATE {a}.wallet SET bal = bal + 5 WHERE id = 1; COMMIT"
            ))
            .await
            .unwrap();
    }
    drop(master);
    let spec = ServiceSpec::new("b19", &names(&r), &start);

    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(BTreeMap::<i64, u64>::new()));
    let poller = {
        let (done, seen) = (done.clone(), seen.clone());
        let sql = format!("SELECT a.bal + b.bal FROM {a}.wallet a, {b}.wallet b");
        tokio::spawn(async move {
            let mut conn = sb.connect(TARGET).await;
            while !done.load(Ordering::Acquire) {
                if let Ok(Some(total)) = conn.query_first::<i64, _>(sql.as_str()).await {
                    *seen.lock().unwrap().entry(total).or_default() += 1;
                }
            }
        })
    };
    let report = spec.run_until_idle(sb).expect("run succeeds");
    done.store(true, Ordering::Release);
    poller.await.unwrap();

    let mut replica = sb.connect(TARGET).await;
    let balances = query_i64s(
        &mut replica,
        &format!("SELECT (SELECT bal FROM {a}.wallet WHERE id = 1), (SELECT bal FROM {b}.wallet WHERE id = 1)"),
    )
    .await;
    assert_eq!(balances, [Some(140), Some(129)]);
    assert_table_equal(sb, Server::Master, TARGET, &r[0].1, "wallet").await;
    assert_table_equal(sb, Server::Master, TARGET, &r[1].1, "wallet").await;
    let seen = seen.lock().unwrap().clone();
    eprintln!("totals seen by the reader: {seen:?}");
    for total in seen.keys() {
        assert!(
            [200, 270, 269, 199].contains(total),
            "a reader saw a half-applied transfer: total {total} ({seen:?})"
        );
    }
    // One barrier per run of cross-shard transactions: the first transfer,
    // then each of the 200 more, between single-shard ones... at least 1.
    assert!(report.serializations >= 1, "{report:?}");
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// An UPDATE that leaves an `ON UPDATE CURRENT_TIMESTAMP` column at its
// value on the master (two updates in the same second) must not let the
// replica's own clock fill it in while it catches up: the row keeps the
// master's TIMESTAMP and DATETIME(3), to the microsecond.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_update_current_timestamp_columns_keep_the_masters_values() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["onupd"]);
    let q = quote_ident(&r[0].1);
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT, \
               ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, \
               dt DATETIME(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)); \
             SET time_zone = '+00:00'; \
             SET timestamp = 1000000000; INSERT INTO {q}.t (id, v) VALUES (1, 0), (2, 0); \
             SET timestamp = 1000000100.25; UPDATE {q}.t SET v = 1 WHERE id = 1; \
             UPDATE {q}.t SET v = 2 WHERE id = 1; \
             UPDATE {q}.t SET v = 3, dt = NULL WHERE id = 2; \
             UPDATE {q}.t SET v = 4, dt = NULL WHERE id = 2; \
             SET timestamp = DEFAULT"
        ))
        .await
        .unwrap();
    drop(master);
    let spec = ServiceSpec::new("onupd", &names(&r), &start);
    spec.run_until_idle(sb).expect("run succeeds");
    let mut replica = sb.connect(TARGET).await;
    let rows: Vec<(i64, i64, i64, Option<String>)> = replica
        .query(format!(
            "SELECT id, v, UNIX_TIMESTAMP(ts), CAST(dt AS CHAR) FROM {q}.t ORDER BY id"
        ))
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            (
                1,
                2,
                1_000_000_100,
                Some("2001-09-09 01:48:20.250".to_string())
            ),
            (2, 4, 1_000_000_100, None),
        ]
    );
    assert_table_equal(sb, Server::Master, TARGET, &r[0].1, "t").await;
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// A table with generated columns, VIRTUAL and STORED, one of them in a
// unique key, and a keyless one: the replica computes them itself (the
// channel's non-strict sql_mode makes the server ignore a value the row
// image carries for one, warning 1906), rows are still found by the key or
// by every column, and merged updates are not used for such a table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_columns_are_computed_by_the_replica() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["gencol"]);
    let q = quote_ident(&r[0].1);
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.t (id INT PRIMARY KEY, a INT, b VARCHAR(10), \
               v INT AS (a * 2) VIRTUAL, \
               s VARCHAR(20) AS (CONCAT(b, '-', a)) STORED, \
               UNIQUE KEY (s)); \
             CREATE TABLE {q}.k (a INT, v INT AS (a + 1) VIRTUAL); \
             INSERT INTO {q}.t (id, a, b) VALUES (1, 1, 'x'), (2, 2, 'y'), (3, 3, 'z'); \
             UPDATE {q}.t SET a = a + 10 WHERE id IN (1, 2); \
             UPDATE {q}.t SET b = 'w' WHERE id = 2; \
             DELETE FROM {q}.t WHERE id = 3; \
             INSERT INTO {q}.t (id, a, b) VALUES (3, 30, 'z'); \
             INSERT INTO {q}.k (a) VALUES (1), (2), (2); \
             UPDATE {q}.k SET a = 5 WHERE a = 2 LIMIT 1; \
             DELETE FROM {q}.k WHERE a = 1"
        ))
        .await
        .unwrap();
    drop(master);
    let spec = ServiceSpec::new("gencol", &names(&r), &start);
    spec.run_until_idle(sb).expect("run succeeds");
    let mut replica = sb.connect(TARGET).await;
    let rows: Vec<(i64, i64, String, i64, String)> = replica
        .query(format!("SELECT id, a, b, v, s FROM {q}.t ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            (1, 11, "x".to_string(), 22, "x-11".to_string()),
            (2, 12, "w".to_string(), 24, "w-12".to_string()),
            (3, 30, "z".to_string(), 60, "z-30".to_string()),
        ]
    );
    let keyless: Vec<(i64, i64)> = replica
        .query(format!("SELECT a, v FROM {q}.k ORDER BY a"))
        .await
        .unwrap();
    assert_eq!(keyless, [(2, 3), (5, 6)]);
    assert_table_equal(sb, Server::Master, TARGET, &r[0].1, "t").await;
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// Consecutive UPDATE rows of one table, and a DELETE followed by the
// INSERT of the same key, go out as one merged statement (multi-row
// INSERT … ON DUPLICATE KEY UPDATE): rows keep their order (the same row
// updated twice in a run, a multi-row UPDATE on the master, a re-inserted
// row identical to the deleted one, which counts 1 and takes the plain path),
// a table with a second unique key is never merged (its rows move a unique
// value between rows in order), and a row missing on the replica still
// stops the service with 1032 naming its key, without the merged statement
// having inserted it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_updates_keep_order_and_a_missing_row_still_stops() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["merged"]);
    let q = quote_ident(&r[0].1);
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.t (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(20) NOT NULL); \
             CREATE TABLE {q}.u (id INT PRIMARY KEY, k INT NOT NULL, UNIQUE KEY (k)); \
             INSERT INTO {q}.t SELECT seq, seq, CONCAT('c', seq) FROM {q}.seq_1_to_100; \
             INSERT INTO {q}.u VALUES (1, 1), (2, 2), (3, 3); \
             START TRANSACTION; \
             UPDATE {q}.t SET k = k + 1 WHERE id = 1; UPDATE {q}.t SET k = k + 1 WHERE id = 1; \
             UPDATE {q}.t SET k = k + 1 WHERE id = 2; UPDATE {q}.t SET k = k * 2 WHERE id <= 90; \
             UPDATE {q}.t SET c = 'x' WHERE id = 3; UPDATE {q}.t SET c = 'y' WHERE id = 3; \
             COMMIT; \
             UPDATE {q}.u SET k = k + 1 ORDER BY k DESC; \
             UPDATE {q}.t SET k = -k WHERE id BETWEEN 10 AND 12; \
             UPDATE {q}.t SET k = -k WHERE id BETWEEN 20 AND 22; \
             START TRANSACTION; DELETE FROM {q}.t WHERE id = 50; \
             INSERT INTO {q}.t VALUES (50, 500, 'new'); UPDATE {q}.t SET k = 1 WHERE id = 51; \
             DELETE FROM {q}.t WHERE id = 60; INSERT INTO {q}.t VALUES (60, 120, 'c60'); \
             COMMIT"
        ))
        .await
        .unwrap();
    let mut spec = ServiceSpec::new("merged", &names(&r), &start);
    spec.channels = 2;
    spec.replica_socket = true;
    spec.run_until_idle(sb).expect("first run");
    let mut replica = sb.connect(TARGET).await;
    let rows: Vec<(i32, i32, String)> = replica
        .query(format!(
            "SELECT id, k, c FROM {q}.t WHERE id IN (1, 2, 3, 11, 21, 50, 51, 60, 95) ORDER BY id"
        ))
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            (1, 6, "c1".to_string()),
            (2, 6, "c2".to_string()),
            (3, 6, "y".to_string()),
            (11, -22, "c11".to_string()),
            (21, -42, "c21".to_string()),
            (50, 500, "new".to_string()),
            (51, 1, "c51".to_string()),
            (60, 120, "c60".to_string()),
            (95, 95, "c95".to_string()),
        ]
    );
    let u: Vec<(i32, i32)> = replica
        .query(format!("SELECT id, k FROM {q}.u ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(u, [(1, 2), (2, 3), (3, 4)]);
    assert_table_equal(sb, Server::Master, TARGET, &r[0].1, "t").await;
    assert_table_equal(sb, Server::Master, TARGET, &r[0].1, "u").await;

    // A row missing on the replica, in the middle of a merged run.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DELETE FROM {q}.t WHERE id = 77"
        ))
        .await
        .unwrap();
    master
        .query_drop(format!("UPDATE {q}.t SET k = 0 WHERE id IN (76, 77, 78)"))
        .await
        .unwrap();
    let error = match spec.run_until_idle(sb) {
        Err(RunError::Apply(SchedulerError::Apply(e))) => e,
        other => panic!("expected a divergence error, got {other:?}"),
    };
    assert_eq!(error.code, 1032, "{error}");
    assert!(
        error.message.contains("key `id` = 77"),
        "the message names the key: {error}"
    );
    let left: Vec<(i32, i32)> = replica
        .query(format!(
            "SELECT id, k FROM {q}.t WHERE id BETWEEN 76 AND 78 ORDER BY id"
        ))
        .await
        .unwrap();
    assert_eq!(
        left,
        [(76, 152), (78, 156)],
        "nothing of the failed block committed"
    );
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

/// The seqno of the first queued transaction whose statement contains
/// `needle`, and its shard.
fn queued_statement(spec: &ServiceSpec, sb: &Sandbox, needle: &str) -> (u64, String) {
    let config = spec.config(sb);
    let queue = TransactionQueue::open(QueueOptions::from_config(&config.queue)).unwrap();
    let mut reader = queue.reader_from(shardrep::position::Seqno(0)).unwrap();
    while let Some((txn, _)) = reader.try_next_with_progress().unwrap() {
        let hit = txn.changes.iter().any(|c| match c {
            shardrep::event::Change::Statement(s) => {
                String::from_utf8_lossy(&s.sql).contains(needle)
            }
            _ => false,
        });
        if hit {
            return (txn.seqno.get(), txn.shard.clone());
        }
    }
    panic!("no queued statement contains {needle:?}");
}

// B21: ALTER (table_id changes), CREATE … SELECT (DDL and rows in one
// group), RENAME across schemas (a critical #UNKNOWN transaction) and DROP
// COLUMN apply in order, with rows decoded against the definition valid at
// their position. Then a crash right after a DDL is simulated (the DDL ran,
// its restart row did not commit): the restart replays it, treating "can't
// drop; check that it exists" as already done, and ends with the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_applies_in_order_and_is_not_rerun_after_a_crash() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["shard_a", "shard_b"]);
    let (a, b) = (r[0].1.clone(), r[1].1.clone());
    let start = master_position(sb).await;
    run_script(sb, &case_for("B21", &r)).await;
    let mut spec = ServiceSpec::new("b21", &names(&r), &start);
    // The crash window below is made by rewinding the restart rows alone:
    // under the master's GTIDs the replica's binlog would still record the
    // DDL as done (tests/gtid_topology.rs).
    spec.binlog_gtids = Some("own");
    let report = spec.run_until_idle(sb).expect("run succeeds");
    assert!(
        report.serializations >= 1,
        "the RENAME runs behind a barrier"
    );

    let expect = |sb: &'static Sandbox, a: String, b: String| async move {
        let mut replica = sb.connect(TARGET).await;
        let acct: Vec<(i32, String)> = replica
            .query(format!(
                "SELECT * FROM {}.acct ORDER BY id",
                quote_ident(&a)
            ))
            .await
            .unwrap();
        assert_eq!(
            acct,
            [(1, "GBP".to_string()), (2, "EUR".into()), (3, "USD".into())]
        );
        let copy: Vec<(i32, i32)> = replica
            .query(format!(
                "SELECT id, bal FROM {}.acct_copy ORDER BY id",
                quote_ident(&b)
            ))
            .await
            .unwrap();
        assert_eq!(copy, [(2, 20), (3, 30), (4, 40)]);
        let left: Option<i64> = replica
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'acct_copy'",
                (a.as_str(),),
            )
            .await
            .unwrap();
        assert_eq!(left, Some(0), "{a}.acct_copy must not exist");
        assert_table_equal(sb, Server::Master, TARGET, &a, "acct").await;
        assert_table_equal(sb, Server::Master, TARGET, &b, "acct_copy").await;
    };
    expect(sb, a.clone(), b.clone()).await;

    // Crash after the DROP COLUMN ran but before its restart row: rewind
    // that channel's row to just before it and mark the DDL as started;
    // no row can record the DDL as done (every low-water mark below it).
    let (ddl_seqno, shard) = queued_statement(&spec, sb, "DROP COLUMN");
    assert_eq!(shard, a);
    let channel = ChannelAssignment::from_config(&spec.config(sb).apply)
        .unwrap()
        .channel_of(&shard)
        .get();
    let table = format!("{}.restart_position", quote_ident(&spec.catalog()));
    let mut replica = sb.connect(TARGET).await;
    replica
        .exec_drop(
            format!("UPDATE {table} SET seqno = ?, ddl_seqno = ? WHERE channel = ?"),
            (ddl_seqno as i64 - 1, ddl_seqno as i64, channel),
        )
        .await
        .unwrap();
    let below_the_ddl = format!("UPDATE {table} SET low_water = {}", ddl_seqno as i64 - 1);
    replica.query_drop(&below_the_ddl).await.unwrap();
    let report = spec
        .run_until_idle(sb)
        .expect("the DDL replay is tolerated");
    // The DDL and the UPDATE after it are sent again; nothing else.
    assert_eq!(report.dispatched, 2, "{report:?}");
    let seqnos = spec.restart_seqnos(sb).await;
    assert!(seqnos.iter().all(|s| *s >= ddl_seqno as i64), "{seqnos:?}");
    expect(sb, a.clone(), b.clone()).await;

    // Without the mark the same rewind is a definite error, not a skip.
    replica
        .exec_drop(
            format!("UPDATE {table} SET seqno = ?, ddl_seqno = -1 WHERE channel = ?"),
            (ddl_seqno as i64 - 1, channel),
        )
        .await
        .unwrap();
    replica.query_drop(&below_the_ddl).await.unwrap();
    match spec.run_until_idle(sb) {
        Err(RunError::Apply(SchedulerError::Apply(e))) => {
            assert_eq!(e.code, 1091, "{e}");
            assert_eq!(e.seqno, Some(Seqno(ddl_seqno)), "{e}");
            assert!(e.sql.contains("DROP COLUMN"), "{e}");
        }
        other => panic!("expected error 1091 at seqno {ddl_seqno}, got {other:?}"),
    }
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// B23: a row locked on the replica longer than innodb_lock_wait_timeout
// makes the channel's block fail with 1205; it is rolled back and retried
// until the lock goes, and the replica ends with the master's rows. Then a
// row deleted on the replica by hand makes the master's UPDATE of it a
// definite error (1032) naming the table and key: the service stops, the
// restart rows stay before it, a second run stops the same way, and only
// the DBA's --skip-seqno gets past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried_and_divergence_stops() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["shard_r"]);
    let q = quote_ident(&r[0].1);
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.r (id INT PRIMARY KEY, v INT); \
             INSERT INTO {q}.r VALUES (1,1),(2,2)"
        ))
        .await
        .unwrap();
    let mut spec = ServiceSpec::new("b23", &names(&r), &start);
    spec.channels = 2;
    spec.run_until_idle(sb).expect("first run");

    let mut replica = sb.connect(TARGET).await;
    let old_timeout: i64 = replica
        .query_first("SELECT @@GLOBAL.innodb_lock_wait_timeout")
        .await
        .unwrap()
        .unwrap();
    replica
        .query_drop("SET GLOBAL innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "START TRANSACTION; SELECT * FROM {q}.r WHERE id = 1 FOR UPDATE"
        ))
        .await
        .unwrap();
    master
        .query_drop(format!(
            "UPDATE {q}.r SET v = 10 WHERE id = 1; UPDATE {q}.r SET v = 20 WHERE id = 2"
        ))
        .await
        .unwrap();
    let run = {
        let spec = spec.clone();
        std::thread::spawn(move || spec.run_until_idle(sandbox()))
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    holder.query_drop("COMMIT").await.unwrap();
    let report = run.join().unwrap().expect("retried until the lock went");
    replica
        .query_drop(format!(
            "SET GLOBAL innodb_lock_wait_timeout = {old_timeout}"
        ))
        .await
        .unwrap();
    assert!(report.retries > 0, "{report:?}");
    assert_eq!(report.skipped, 0);
    let rows: Vec<(i32, i32)> = replica
        .query(format!("SELECT id, v FROM {q}.r ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(rows, [(1, 10), (2, 20)]);

    // Divergence.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DELETE FROM {q}.r WHERE id = 2"
        ))
        .await
        .unwrap();
    master
        .query_drop(format!("UPDATE {q}.r SET v = 30 WHERE id = 2"))
        .await
        .unwrap();
    let before = spec.restart_seqnos(sb).await;
    let error = match spec.run_until_idle(sb) {
        Err(RunError::Apply(SchedulerError::Apply(e))) => e,
        other => panic!("expected a divergence error, got {other:?}"),
    };
    assert_eq!(error.code, 1032, "{error}");
    assert_eq!(error.shard, r[0].1);
    assert!(
        error.message.contains(&format!("{q}.`r`")) && error.message.contains("key `id` = 2"),
        "the message names the table and key: {error}"
    );
    // The failing channel's row stays before the transaction; the other
    // channel may record the clean-stop marker (it had nothing there).
    let after = spec.restart_seqnos(sb).await;
    let failed = error.channel.index();
    assert_eq!(
        after[failed], before[failed],
        "the failing channel did not advance"
    );
    assert!(
        after[failed] < error.seqno_number() as i64,
        "{after:?} vs {error}"
    );
    assert_eq!(after.len(), 2, "one restart row per channel");
    // It stays stopped: the same error again, nothing skipped.
    match spec.run_until_idle(sb) {
        Err(RunError::Apply(SchedulerError::Apply(e))) => assert_eq!(e, error),
        other => panic!("expected the same error again, got {other:?}"),
    }
    // The DBA skips it.
    let report = spec
        .run_with(sb, vec![error.seqno_number()..=error.seqno_number()])
        .expect("skipped");
    assert_eq!(report.skipped, 1);
    let rows: Vec<(i32, i32)> = replica
        .query(format!("SELECT id, v FROM {q}.r ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(rows, [(1, 10)]);
    assert!(spec
        .restart_seqnos(sb)
        .await
        .iter()
        .all(|s| *s >= error.seqno_number() as i64));
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// B27: one transaction of 150,000 row changes over two shards is applied
// as one replica transaction. shardrep is killed (SIGKILL) while it applies
// it: both tables are still empty; the restart finishes it. A reader never
// sees one table filled and the other empty, and the restart rows end at
// or after the transaction's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn very_large_transaction_commits_whole_across_a_kill() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["shard_l1", "shard_l2"]);
    let (l1, l2) = (quote_ident(&r[0].1), quote_ident(&r[1].1));
    let script = case_for("B27", &r);
    let (create, big) = script
        .split_once("START TRANSACTION")
        .expect("the case's transaction");
    let start = master_position(sb).await;
    run_script(sb, create).await;
    // The tables first; then a gap lock on the empty second table, so the
    // large transaction fills the first table and waits there, mid-way,
    // when shardrep is killed.
    let spec = ServiceSpec::new("b27", &names(&r), &start);
    spec.run_until_idle(sb).expect("tables created");
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "START TRANSACTION; SELECT * FROM {l2}.big WHERE id = 25000 FOR UPDATE"
        ))
        .await
        .unwrap();
    run_script(sb, &format!("USE {l1};\nSTART TRANSACTION{big}")).await;
    let end: BinlogPosition = master_position(sb).await.parse().unwrap();

    let counts_sql =
        format!("SELECT (SELECT COUNT(*) FROM {l1}.big), (SELECT COUNT(*) FROM {l2}.big)");
    let mut replica = sb.connect(TARGET).await;
    let process = spec.spawn(sb, true);
    common::wait_until(
        "the large transaction waiting mid-way",
        Duration::from_secs(120),
        || async {
            let mut conn = sb.connect(TARGET).await;
            let modified: Option<Option<i64>> = conn
                .query_first(
                    "SELECT MAX(trx_rows_modified) FROM information_schema.INNODB_TRX \
                     WHERE trx_state = 'LOCK WAIT'",
                )
                .await
                .unwrap();
            (modified.flatten().unwrap_or(0) >= 50_000).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}:\n{}", process.log_text()));
    process.kill();
    holder.query_drop("COMMIT").await.unwrap();
    let counts = query_i64s(&mut replica, &counts_sql).await;
    assert_eq!(
        counts,
        [Some(0), Some(0)],
        "nothing committed before the end"
    );

    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let done = done.clone();
        let sql = counts_sql.clone();
        tokio::spawn(async move {
            let mut conn = sb.connect(TARGET).await;
            let mut samples = Vec::new();
            while !done.load(Ordering::Acquire) {
                samples.push(query_i64s(&mut conn, &sql).await);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            samples
        })
    };
    let process = spec.spawn(sb, true);
    let log = process.log.clone();
    assert!(
        process.wait(),
        "the restart fails:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    done.store(true, Ordering::Release);
    for sample in poller.await.unwrap() {
        assert!(
            sample == [Some(0), Some(0)] || sample == [Some(50_000), Some(50_000)],
            "a reader saw a partial transaction: {sample:?}"
        );
    }
    let sums = query_i64s(
        &mut replica,
        &format!(
            "SELECT (SELECT COUNT(*) FROM {l1}.big), (SELECT SUM(v) FROM {l1}.big), \
             (SELECT COUNT(*) FROM {l2}.big), (SELECT SUM(v) FROM {l2}.big)"
        ),
    )
    .await;
    assert_eq!(
        sums,
        [
            Some(50_000),
            Some(1_250_075_000),
            Some(50_000),
            Some(2_500_050_000)
        ]
    );
    let mut conn = sb.connect(TARGET).await;
    let event_ids: Vec<String> = conn
        .query(format!(
            "SELECT event_id FROM {}.restart_position",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    for id in event_ids {
        let pos: BinlogPosition = id.parse().unwrap();
        assert!(pos >= end, "restart position {pos} before the end {end}");
    }
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}

// B28: the case's load (2,000 rounds over four shards, a hot row, a
// cross-shard transaction every 10 rounds, deletes) runs on the master,
// its rounds in GTID domain 2, while shardrep applies it with 4 channels
// and is killed with SIGKILL three times at random moments and stopped
// cleanly (SIGTERM) once, each time restarted. Every restart row only
// moves forward, the committed set the rows record (every seqno up to the
// highest low_water, and each row's committed_above) never loses a seqno,
// no run ever logs a 1062 or 1032, and each shard ends with the case's
// exact count, sum and checksum, every row at one seqno and every seqno up
// to it recorded done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_parallel_catch_up_lose_and_repeat_nothing() {
    kills_during_catch_up("shard").await;
}

// The same under `parallelism = "row"`: a restart sends a transaction to
// whichever channel its dependencies allow, not the one that ran it before
// (the restart rows' committed set decides what is applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_row_parallel_catch_up_lose_and_repeat_nothing() {
    kills_during_catch_up("row").await;
}

async fn kills_during_catch_up(parallelism: &'static str) {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let r = renames(&["shard_w1", "shard_w2", "shard_w3", "shard_w4"]);
    let script = case_for("B28", &r);
    let (setup, call) = script
        .rsplit_once("CALL ")
        .expect("the case ends with its CALL");
    let start = master_position(sb).await;
    run_script(sb, setup).await;
    let mut spec = ServiceSpec::new("b28", &names(&r), &start);
    spec.block = 20;
    spec.sync_interval = 100;
    spec.parallelism = parallelism;

    let load = {
        let call = format!("CALL {}", call.trim().trim_end_matches(';'));
        tokio::spawn(async move {
            let mut master = sandbox().connect(Server::Master).await;
            master
                .query_drop("SET SESSION gtid_domain_id = 2")
                .await
                .unwrap();
            master.query_drop(call).await.unwrap();
        })
    };
    // Restart rows, sampled all along (`CommittedWatch`).
    let watch = CommittedWatch::start(&spec);
    let mut stops = Vec::new();
    for round in 0..4 {
        let mut process = spec.spawn(sb, false);
        tokio::time::sleep(jitter(1_000, 3_000)).await;
        assert!(process.running(), "shardrep died:\n{}", process.log_text());
        let before = spec.restart_seqnos(sb).await;
        if round == 2 {
            assert!(process.terminate(), "clean stop failed");
            let after = spec.restart_seqnos(sb).await;
            assert!(
                after.iter().all(|s| *s == after[0]),
                "a clean stop leaves every channel at one seqno: {after:?}"
            );
            stops.push(format!("SIGTERM at {after:?}"));
        } else {
            process.kill();
            stops.push(format!("SIGKILL near {before:?}"));
        }
    }
    load.await.unwrap();
    let process = spec.spawn(sb, true);
    let log = process.log.clone();
    let ok = process.wait();
    let WatchReport { samples, with_gaps } = watch.finish().await;
    let log = std::fs::read_to_string(log).unwrap_or_default();
    eprintln!(
        "{parallelism}: stops: {stops:?}; {samples} restart-row samples, {with_gaps} with seqnos recorded \
         above the low-water mark"
    );
    assert!(ok, "the final run fails:\n{log}");
    for code in ["error 1062", "error 1032"] {
        assert!(!log.contains(code), "a run logged {code}:\n{log}");
    }
    let mut replica = sb.connect(TARGET).await;
    let expected = [
        (2000, 2000, 1973471638),
        (1980, 180, 2080964911),
        (200, 201000, 619556862),
        (200, 201000, 3342796111),
    ];
    for ((_, schema), (count, sum, crc)) in r.iter().zip(expected) {
        let got = query_i64s(
            &mut replica,
            &format!(
                "SELECT COUNT(*), SUM(n), BIT_XOR(CRC32(payload)) FROM {}.ev",
                quote_ident(schema)
            ),
        )
        .await;
        assert_eq!(got, [Some(count), Some(sum), Some(crc)], "{schema}");
        assert_table_equal(sb, Server::Master, TARGET, schema, "ev").await;
    }
    // Every row at one seqno, everything up to it recorded done (a final
    // run that had nothing left to handle sends no STOP: a row may keep
    // what the last kill left, above a lower low_water of its own).
    let records = spec.restart_records(sb).await;
    let last = records[0].0;
    assert!(records.iter().all(|r| r.0 == last), "{records:?}");
    assert_eq!(
        records.iter().map(|r| r.1).max(),
        Some(Some(last)),
        "{records:?}"
    );
    drop_everywhere(sb, &names(&r)).await;
    spec.remove(sb).await;
}
