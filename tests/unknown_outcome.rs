//! Exactly once when a COMMIT's reply is lost (shared/DESIGN.md §4,
//! "Unknown outcome"): a channel that loses its connection after sending
//! a block reads its restart row before anything else, and counts the
//! block as applied when the row records it; only otherwise does it run
//! the block again.
//!
//! A fault-injecting proxy ([`common::fault_proxy`]) stands between the
//! service and the replica: it lets a channel's COMMIT reach the server
//! and throws the reply away. Before the fix, the retry ran the block
//! again: a keyless table got its row twice, a primary-key table stopped
//! the service with a false 1062, a DELETE with a false 1032.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use common::fault_proxy::FaultProxy;
use common::service::{
    create_everywhere, ctl_ok, drop_everywhere, master_position, status, stop_target_slave,
    wait_applied_to_master, wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

/// A status counter as a number.
fn count(s: &Value, key: &str) -> u64 {
    s[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count: {s}"))
}

/// A proxy in front of the replica the services apply to.
fn proxy(sb: &Sandbox) -> FaultProxy {
    FaultProxy::start(
        format!("{}:{}", sb.host, sb.port(TARGET))
            .parse()
            .expect("loopback address"),
    )
}

// Every kind of block, each with the reply to its COMMIT lost: a keyless
// INSERT, a primary-key INSERT, an UPDATE, a DELETE, a block of many
// transactions, a statement-format transaction (the statement-at-a-time
// path), and DDL; under the binlog method (BINLOG statements) and the SQL
// method with compound blocks and with multi-statement blocks, in row and
// in shard parallelism. Each ends equal to the master, the
// service ONLINE with no error, the log saying "committed", and status
// counting each such block once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_reply_is_answered_by_the_restart_row() {
    let _lock = LOCK.lock().await;
    for parallelism in ["row", "shard"] {
        for (method, compound) in [("binlog", true), ("sql", true), ("sql", false)] {
            lost_replies(parallelism, method, compound).await;
        }
    }
}

async fn lost_replies(parallelism: &'static str, method: &'static str, compound: bool) {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema(&format!("lost_{parallelism}_{method}_{compound}"));
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[
            ("nk", "(v INT)"),
            ("pk", "(id INT PRIMARY KEY, v INT NOT NULL)"),
        ],
    )
    .await;
    let start = master_position(sb).await;
    let proxy = proxy(sb);
    let mut spec = ServiceSpec::new("lost_reply", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    spec.parallelism = parallelism;
    spec.compound_blocks = compound;
    spec.method = Some(method);
    spec.replica_port = Some(proxy.port());
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );

    let mut many = String::new();
    for n in 0..30 {
        many.push_str(&format!(
            "INSERT INTO {q}.nk VALUES ({n}); UPDATE {q}.pk SET v = v + 1 WHERE id = 102;"
        ));
    }
    let steps = [
        ("a keyless INSERT", format!("INSERT INTO {q}.nk VALUES (2)")),
        (
            "a primary-key INSERT",
            format!("INSERT INTO {q}.pk VALUES (100, 0), (101, 0), (102, 0)"),
        ),
        (
            "an UPDATE",
            format!("UPDATE {q}.pk SET v = v + 1 WHERE id = 101"),
        ),
        ("a DELETE", format!("DELETE FROM {q}.pk WHERE id = 100")),
        ("a block of many transactions", many),
        (
            "a statement-format transaction",
            format!(
                "SET SESSION binlog_format = 'STATEMENT'; BEGIN; \
                 INSERT INTO {q}.pk VALUES (200, 1); INSERT INTO {q}.nk VALUES (7); COMMIT"
            ),
        ),
        (
            "DDL",
            format!(
                "CREATE TABLE {q}.ddl_t (id INT PRIMARY KEY); INSERT INTO {q}.ddl_t VALUES (1)"
            ),
        ),
    ];
    for (what, sql) in &steps {
        let before = status(&spec);
        let lost_before = proxy.lost_replies();
        proxy.lose_commit_replies(true);
        sb.exec(Server::Master, sql).await;
        let after = wait_applied_to_master(sb, &spec).await;
        proxy.lose_commit_replies(false);
        assert!(
            proxy.lost_replies() > lost_before,
            "{what} ({parallelism}, {method}, compound {compound}): no COMMIT reply was lost"
        );
        assert!(
            count(&after, "unknownOutcomeCommittedCount")
                > count(&before, "unknownOutcomeCommittedCount"),
            "{what} ({parallelism}, {method}, compound {compound}): no block counted committed: {after}"
        );
        assert_eq!(after["state"], "ONLINE", "{what}: {after}");
    }

    for table in ["nk", "pk", "ddl_t"] {
        assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
    }
    let s = status(&spec);
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    let log = process.log_text();
    // A block's line (a marker's says "the restart row's write").
    let committed = log.matches("outcome of seqno").count();
    assert!(
        log.contains(": committed (the restart row read again says so)"),
        "{log}"
    );
    // Every reply was lost after its COMMIT ran: none reads as not
    // committed, and each block is counted once.
    assert!(!log.contains("not committed, applying again"), "{log}");
    assert_eq!(count(&s, "unknownOutcomeReappliedCount"), 0, "{s}");
    assert_eq!(
        count(&s, "unknownOutcomeCommittedCount"),
        committed as u64,
        "{s}\n{log}"
    );
    for code in ["error 1062", "error 1032"] {
        assert!(!log.contains(code), "{code}:\n{log}");
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

/// Kills of the apply sessions this test makes at least.
const KILLS: u32 = 60;

// `KILL CONNECTION` of the apply channels' sessions, again and again,
// while the service catches up with a master writing keyless tables and a
// primary-key table: the service never stops, and every table ends equal
// to the master's (a block run twice would leave a keyless row twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_of_the_apply_sessions_during_a_catch_up_leave_the_replica_equal() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("apply_kills");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[
            ("nk0", "(v INT, w INT)"),
            ("nk1", "(v INT, w INT)"),
            ("nk2", "(v INT, w INT)"),
            ("pk", "(id INT PRIMARY KEY, v INT NOT NULL)"),
        ],
    )
    .await;
    sb.exec(
        Server::Master,
        &format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {q}.pk SELECT seq, 0 FROM {q}.seq_0_to_99"
        ),
    )
    .await;
    for server in [TARGET, Server::Replica(1)] {
        sb.exec(
            server,
            &format!(
                "SET SESSION sql_log_bin = 0; INSERT INTO {q}.pk SELECT seq, 0 FROM {q}.seq_0_to_99"
            ),
        )
        .await;
    }
    let start = master_position(sb).await;
    // A backlog first, so that the service starts in a catch-up.
    let writer = |id: u64, stop: std::sync::Arc<std::sync::atomic::AtomicBool>| {
        let q = q.clone();
        async move {
            let mut master = sandbox().connect(Server::Master).await;
            let mut n = 0u64;
            loop {
                let i = id * 1_000_000 + n;
                master
                    .query_drop(format!(
                        "INSERT INTO {q}.nk{id} VALUES ({i}, {id}); \
                         BEGIN; INSERT INTO {q}.nk{id} VALUES ({i}, 0), ({i}, 0); \
                         UPDATE {q}.pk SET v = v + 1 WHERE id = {}; COMMIT",
                        id * 30 + n % 30
                    ))
                    .await
                    .expect("the master's workload");
                n += 1;
                if n >= 300 && stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return n;
                }
                // Pacing: a load the channels can keep up with between
                // kills, not a backlog that outgrows the test.
                if n >= 300 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|id| tokio::spawn(writer(id, stop.clone())))
        .collect();

    let proxy = proxy(sb);
    let mut spec = ServiceSpec::new("apply_kills", std::slice::from_ref(&schema), &start);
    spec.channels = 4;
    spec.replica_port = Some(proxy.port());
    // A kill during a block's backoff can hit it again: never stop on a
    // count this test reaches.
    spec.retry_max_attempts = 100;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    // The kills begin once the channels apply (the catch-up is under way).
    common::wait_until("the service applying", Duration::from_secs(60), || async {
        let s = status(&spec);
        assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
        (s["transactionsAppliedCount"].as_u64() > Some(0)).then_some(())
    })
    .await
    .unwrap();
    let mut admin = sb.connect(TARGET).await;
    let mut kills = 0;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    while kills < KILLS {
        assert!(
            process.running(),
            "shardrep exited:\n{}",
            process.log_text()
        );
        let sessions = proxy.busy_channel_sessions(Duration::from_millis(100));
        if !sessions.is_empty() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let id = sessions[(seed % sessions.len() as u64) as usize];
            // A session that just ended answers 1094 (unknown thread).
            if admin
                .query_drop(format!("KILL CONNECTION {id}"))
                .await
                .is_ok()
            {
                kills += 1;
            }
        }
        // Pacing, not synchronization: the channels reconnect and apply
        // between kills.
        tokio::time::sleep(Duration::from_millis(20 + seed % 60)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut written = 0;
    for w in writers {
        written += w.await.expect("a writer");
    }
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["errorCounts"], Value::Null, "{s}");
    let mut rows = 0;
    for table in ["nk0", "nk1", "nk2", "pk"] {
        rows += assert_table_equal(sb, Server::Master, TARGET, &schema, table)
            .await
            .len();
    }
    let log = process.log_text();
    for code in ["error 1062", "error 1032", "OFFLINE:ERROR"] {
        assert!(!log.contains(code), "{code}:\n{log}");
    }
    let (committed, reapplied) = (
        count(&s, "unknownOutcomeCommittedCount"),
        count(&s, "unknownOutcomeReappliedCount"),
    );
    assert!(committed + reapplied > 0, "{s}");
    eprintln!(
        "apply kills: {kills} kills, {written} master transactions x2, {rows} rows equal; \
         unknown outcomes: {committed} committed, {reapplied} not committed"
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

/// The tests of this file one at a time: each service reads the whole
/// master binlog, the other's load included.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// A `kill -9` of shardrep while a block waits for a row lock on the
// replica: the dead process's session stays on the replica, still running
// its block, which ends with its COMMIT. The next run ends that session
// before it reads the restart rows (the channels record their sessions),
// so the block commits once: the keyless row is on the replica once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_while_a_block_waits_for_a_lock_applies_it_once() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schema = unique_schema("kill9_lock");
    let q = quote_ident(&schema);
    create_everywhere(
        sb,
        &schema,
        &[
            ("nk", "(v INT)"),
            ("pk", "(id INT PRIMARY KEY, v INT NOT NULL)"),
        ],
    )
    .await;
    for server in [Server::Master, TARGET, Server::Replica(1)] {
        sb.exec(
            server,
            &format!("SET SESSION sql_log_bin = 0; INSERT INTO {q}.pk VALUES (5, 0)"),
        )
        .await;
    }
    let mut holder = sb.connect(TARGET).await;
    holder
        .query_drop(format!(
            "BEGIN; SELECT * FROM {q}.pk WHERE id = 5 FOR UPDATE"
        ))
        .await
        .unwrap();
    let start = master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!(
            "BEGIN; INSERT INTO {q}.nk VALUES (999); UPDATE {q}.pk SET v = v + 1000 WHERE id = 5; \
             COMMIT"
        ),
    )
    .await;
    let spec = ServiceSpec::new("kill9_lock", std::slice::from_ref(&schema), &start);
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    // The block is on the replica, waiting for the lock (its UPDATE under
    // the SQL method, its BINLOG statement under the binlog method; the
    // tests of this file run one at a time).
    let waiting = format!(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE (INFO LIKE '%{}%pk%' \
         OR INFO LIKE 'BINLOG %') AND ID <> CONNECTION_ID()",
        schema
    );
    let orphan: u64 = common::wait_until("the block waiting", Duration::from_secs(60), || {
        let waiting = waiting.clone();
        async move {
            let mut admin = sb.connect(TARGET).await;
            admin.query_first(waiting).await.ok().flatten()
        }
    })
    .await
    .unwrap();
    process.kill();
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    // The new run ended the dead process's session before it read the
    // restart rows, so before it is ONLINE (without that, the session
    // would still wait for the lock here, and commit its block once the
    // lock goes: the keyless row twice).
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    let there: Option<u64> = sb
        .connect(TARGET)
        .await
        .query_first(format!(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {orphan}"
        ))
        .await
        .unwrap();
    assert_eq!(there, None, "the dead process's session is still there");
    holder.query_drop("ROLLBACK").await.unwrap();
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(
        assert_table_equal(sb, Server::Master, TARGET, &schema, "nk")
            .await
            .len(),
        1
    );
    assert_table_equal(sb, Server::Master, TARGET, &schema, "pk").await;
    let log = process.log_text();
    assert!(
        log.contains("the replica still runs an old session of this service; killing it"),
        "{log}"
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}
