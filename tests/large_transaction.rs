//! Large transactions are stored as fragments and applied as a stream
//! inside one replica transaction (`[queue] fragment_bytes`, here 64 KiB so
//! that a few thousand rows make dozens of fragments): the replica ends
//! equal to the master, each transaction applied exactly once (keyless
//! tables would show a repeat), under both apply methods, after a lock
//! wait that makes the channel apply the transaction again from the queue,
//! and after a kill -9 in the middle of one.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::service::{
    create_everywhere, drop_everywhere, master_position, set_lock_wait_timeout, status,
    stop_target_slave, wait_applied_to_master, wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

/// The fragment bound of these tests, bytes.
const FRAGMENT_BYTES: u64 = 64 * 1024;

/// The sandbox's native replica, applying the same master workload.
const NATIVE: Server = Server::Replica(1);

/// Rows of the large transactions.
const ROWS: u64 = 4_000;

/// The tests of this file one at a time (some change a global variable of
/// the replica).
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `schema` with a keyed table `big` and a keyless table `nk`, everywhere.
async fn create_tables(sb: &Sandbox, schema: &str) {
    create_everywhere(
        sb,
        schema,
        &[
            (
                "big",
                "(id INT PRIMARY KEY, pad VARCHAR(200) NOT NULL, v INT NOT NULL)",
            ),
            ("nk", "(id INT NOT NULL, pad VARCHAR(200) NOT NULL)"),
            ("small", "(id INT PRIMARY KEY, v INT NOT NULL)"),
        ],
    )
    .await;
}

/// On the master: a small transaction, one large INSERT into both tables,
/// one UPDATE of every row, one DELETE of half of them, a small one.
async fn write_large_transactions(sb: &Sandbox, schema: &str) {
    let q = quote_ident(schema);
    sb.exec(
        Server::Master,
        &format!(
            "INSERT INTO {q}.small VALUES (1, 0); \
             BEGIN; \
             INSERT INTO {q}.big SELECT seq, REPEAT('x', 150), 0 FROM {q}.seq_1_to_{ROWS}; \
             INSERT INTO {q}.nk SELECT seq, REPEAT('y', 150) FROM {q}.seq_1_to_{ROWS}; \
             COMMIT; \
             UPDATE {q}.big SET v = v + 1, pad = REPEAT('z', 150); \
             DELETE FROM {q}.big WHERE id % 2 = 0; \
             UPDATE {q}.small SET v = 1 WHERE id = 1"
        ),
    )
    .await;
}

async fn assert_equal(sb: &Sandbox, schema: &str) {
    for table in ["big", "small"] {
        assert_table_equal(sb, Server::Master, TARGET, schema, table).await;
    }
    // The same workload through native replication (replica 1) ends the
    // same: the native replica is the reference.
    common::wait_replica_caught_up(sb, NATIVE, Duration::from_secs(120)).await;
    for table in ["big", "small"] {
        assert_table_equal(sb, NATIVE, TARGET, schema, table).await;
    }
    // The keyless table: the same rows, each once.
    let count = |server| async move {
        let mut c = sb.connect(server).await;
        let n: Option<(u64, u64)> = c
            .query_first(format!(
                "SELECT COUNT(*), COUNT(DISTINCT id) FROM {}.nk",
                quote_ident(schema)
            ))
            .await
            .unwrap();
        n.unwrap()
    };
    assert_eq!(count(Server::Master).await, (ROWS, ROWS));
    assert_eq!(
        count(NATIVE).await,
        (ROWS, ROWS),
        "nk on the native replica"
    );
    assert_eq!(count(TARGET).await, (ROWS, ROWS), "nk on the replica");
}

/// The number of fragments of the large transactions the log reports
/// committed.
fn committed_fragments(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("large transaction committed"))
        .filter_map(|l| {
            let at = l.find("fragments=")? + "fragments=".len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

// Both methods: three large transactions, each as dozens of fragments,
// applied once each; the replica equal; the service ONLINE without error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transactions_are_applied_once_from_their_fragments() {
    let _lock = LOCK.lock().await;
    for method in ["binlog", "sql"] {
        let sb = sandbox();
        stop_target_slave(sb).await;
        let schema = unique_schema(&format!("large_{method}"));
        create_tables(sb, &schema).await;
        let start = master_position(sb).await;
        write_large_transactions(sb, &schema).await;
        let mut spec = ServiceSpec::new("large", std::slice::from_ref(&schema), &start);
        spec.method = Some(method);
        spec.fragment_bytes = Some(FRAGMENT_BYTES);
        let _catalog = spec.drop_catalog_on_panic(sb);
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        let s = wait_applied_to_master(sb, &spec).await;
        assert_eq!(s["state"], "ONLINE", "{method}: {s}");
        assert_eq!(s["errorCounts"], Value::Null, "{method}: {s}");
        assert_equal(sb, &schema).await;
        let log = process.log_text();
        let fragments = committed_fragments(&log);
        assert_eq!(
            fragments.len(),
            3,
            "{method}: three large transactions:\n{log}"
        );
        assert!(
            fragments.iter().all(|&f| f >= 10),
            "{method}: each in many fragments: {fragments:?}"
        );
        assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
        spec.remove(sb).await;
        drop_everywhere(sb, &[schema]).await;
    }
}

// A replica session holds a lock on a row near the end of the large
// INSERT: the channel's transaction waits past a 1 s
// `innodb_lock_wait_timeout`, is rolled back and applied again from its
// first fragment, read again from the queue, until the lock goes. Then a
// kill -9 while another large transaction waits for such a lock on its
// last row (its other fragments applied, uncommitted): after the restart
// everything is applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_or_killed_large_transaction_is_applied_once() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("large_retry");
    let q = quote_ident(&schema);
    create_tables(sb, &schema).await;
    let timeout = set_lock_wait_timeout(sb, 1).await;
    // A row the large INSERT writes late: the replica's own session
    // inserts it first, uncommitted, so the channel waits on it.
    let mut holder = sb.connect(TARGET).await;
    let late = ROWS - 10;
    holder
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; BEGIN; INSERT INTO {q}.big VALUES ({late}, '', 0)"
        ))
        .await
        .unwrap();
    let start = master_position(sb).await;
    write_large_transactions(sb, &schema).await;
    let mut spec = ServiceSpec::new("large_retry", std::slice::from_ref(&schema), &start);
    spec.fragment_bytes = Some(FRAGMENT_BYTES);
    spec.retry_max_attempts = 1000;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let retries = || {
        let s = status(&spec);
        assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
        s["retryCounts"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .find_map(|p| p.strip_prefix("1205=").and_then(|n| n.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    common::wait_until(
        "two lock wait retries",
        Duration::from_secs(120),
        || async { (retries() >= 2).then_some(()) },
    )
    .await
    .unwrap();
    holder.query_drop("ROLLBACK").await.unwrap();
    wait_applied_to_master(sb, &spec).await;
    assert_equal(sb, &schema).await;
    let log = process.log_text();
    assert!(
        log.contains("applying it again from its first fragment"),
        "the retry says how it runs again:\n{log}"
    );
    // A lock on the last row, then another large UPDATE on the master:
    // kill -9 while its transaction waits for the lock.
    holder
        .query_drop(format!(
            "BEGIN; SELECT * FROM {q}.big WHERE id = {} FOR UPDATE",
            ROWS - 1
        ))
        .await
        .unwrap();
    let before = retries();
    sb.exec(
        Server::Master,
        &format!("UPDATE {q}.big SET v = v + 10, pad = REPEAT('w', 150)"),
    )
    .await;
    common::wait_until(
        "a lock wait in the UPDATE",
        Duration::from_secs(120),
        || async { (retries() > before).then_some(()) },
    )
    .await
    .unwrap();
    process.kill();
    holder.query_drop("ROLLBACK").await.unwrap();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    set_lock_wait_timeout(sb, timeout).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_equal(sb, &schema).await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}
