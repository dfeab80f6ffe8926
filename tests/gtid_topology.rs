//! The replica stays a good citizen of its GTID topology under
//! `[replica] binlog_gtids = "master"` (the default).
//!
//! The topology: the master; replica 2 ([`TARGET`]) with
//! `gtid_strict_mode = ON` and `log_slave_updates`; replica 3 replicating
//! from replica 2 by GTID (`MASTER_USE_GTID = slave_pos`). shardrep takes
//! replica 2 over from native replication and catches up a row-parallel
//! workload (8 channels, DDL, foreign keys, hot rows) while it is killed
//! with SIGKILL six times. Then:
//!
//! - replica 3 applies everything replica 2 binlogs, never stops (its SQL
//!   thread runs with `Last_Errno` 0 at every kill), and ends equal to the
//!   master, as does replica 1, which replicates the master natively;
//! - at the clean offline replica 2's `gtid_binlog_pos` (and its
//!   `gtid_slave_pos` and `gtid_current_pos`, as failover tools read them)
//!   equals the
//!   master's (the GTID position shardrep applied), and every transaction
//!   replica 2 binlogged since the takeover carries a master GTID (server
//!   id 1), each domain's sequence numbers rising (`SHOW BINLOG EVENTS`,
//!   the events `mariadb-binlog` prints);
//! - the handback gives native replication that goes on under strict mode
//!   with `Last_Errno` 0;
//! - replica 3, re-pointed to the master with `MASTER_USE_GTID =
//!   slave_pos`, neither misses nor repeats a transaction: it stays equal
//!   to the master through more writes.

mod common;

use std::time::Duration;

use common::committed_watch::jitter;
use common::row_workload::{assert_schema_equal, Workload};
use common::service::{
    assert_native_ok, ctl_ok, drop_everywhere, native_from_now, status, wait_applied_to_master,
    wait_for_socket, ServiceSpec, TARGET,
};
use common::{quote_ident, sandbox, unique_schema, wait_replica_caught_up, Sandbox, Server};
use mysql_async::prelude::Queryable;
use serde_json::Value;

/// The tests share replica 2 ([`TARGET`]) and the master's binlog.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Replica 3: reads replica 2's binlog.
const CHAINED: Server = Server::Replica(3);

/// The master's server id in the sandbox (`SANDBOX_MASTER_SERVER_ID`).
const MASTER_SERVER_ID: u32 = 1;

/// Starts replica 3 when it is not running (`scripts/sandbox.sh up 3`).
fn ensure_chained_replica(sb: &Sandbox) {
    if std::net::TcpStream::connect(("127.0.0.1", sb.port(CHAINED))).is_ok() {
        return;
    }
    let out = std::process::Command::new("bash")
        .arg(sb.root.join("scripts/sandbox.sh"))
        .args(["up", "3"])
        .output()
        .expect("run scripts/sandbox.sh");
    assert!(
        out.status.success(),
        "scripts/sandbox.sh up 3 failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Replica 3's SQL thread runs with `Last_Errno` 0.
async fn assert_chained_running(sb: &Sandbox, when: &str) {
    let mut conn = sb.connect(CHAINED).await;
    let status = shardrep::replica::slave_status(&mut conn)
        .await
        .unwrap()
        .expect("replica 3 replicates");
    assert!(status.sql_running, "replica 3 {when}: {status:?}");
    assert_eq!(status.last_errno, 0, "replica 3 {when}: {status:?}");
}

/// Points replica 3 at `port` by GTID, from `@@gtid_slave_pos` `pos`
/// (`None`: the one it has).
async fn point_chained(sb: &Sandbox, port: u16, pos: Option<&str>) {
    let mut conn = sb.connect(CHAINED).await;
    conn.query_drop("STOP SLAVE").await.unwrap();
    if let Some(pos) = pos {
        conn.query_drop("RESET SLAVE ALL").await.unwrap();
        conn.exec_drop("SET GLOBAL gtid_slave_pos = ?", (pos,))
            .await
            .unwrap();
    }
    let settings = sb.root.join("conf/sandbox.env");
    let text = std::fs::read_to_string(settings).unwrap();
    let get = |key: &str| {
        std::env::var(key).unwrap_or_else(|_| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("conf/sandbox.env lacks {key}"))
                .to_string()
        })
    };
    // CHANGE MASTER takes no placeholders: literals (the sandbox's own
    // user and password, quoted).
    let quote = |s: String| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
    conn.query_drop(format!(
        "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {port}, MASTER_USER = {}, \
         MASTER_PASSWORD = {}, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
        quote(get("SANDBOX_REPL_USER")),
        quote(get("SANDBOX_REPL_PASSWORD"))
    ))
    .await
    .unwrap();
    conn.query_drop("START SLAVE").await.unwrap();
}

/// Every GTID in replica 2's binlog, in binlog order (`SHOW BINLOG
/// EVENTS` of each file: the Gtid events `mariadb-binlog` prints).
async fn target_binlog_gtids(sb: &Sandbox) -> Vec<(u32, u32, u64)> {
    let mut conn = sb.connect(TARGET).await;
    let files: Vec<String> = conn
        .query::<mysql_async::Row, _>("SHOW BINARY LOGS")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.get::<String, _>(0).unwrap())
        .collect();
    let mut gtids = Vec::new();
    for file in files {
        let events: Vec<mysql_async::Row> = conn
            .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
            .await
            .unwrap();
        for e in events {
            let kind: String = e.get(2).unwrap();
            if kind != "Gtid" {
                continue;
            }
            let server: u32 = e.get(3).unwrap();
            let info: String = e.get(5).unwrap();
            // "BEGIN GTID 0-1-5", "GTID 0-1-6" (DDL), "XA START ... GTID".
            let text = info
                .split_whitespace()
                .find(|w| {
                    w.matches('-').count() == 2 && w.starts_with(|c: char| c.is_ascii_digit())
                })
                .unwrap_or_else(|| panic!("no GTID in {info:?}"));
            let mut parts = text.split('-');
            let domain: u32 = parts.next().unwrap().parse().unwrap();
            let gtid_server: u32 = parts.next().unwrap().parse().unwrap();
            let seq: u64 = parts.next().unwrap().parse().unwrap();
            assert_eq!(server, gtid_server, "{info}");
            gtids.push((domain, gtid_server, seq));
        }
    }
    gtids
}

async fn gtid_binlog_pos(sb: &Sandbox, server: Server) -> String {
    sb.connect(server)
        .await
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap()
}

/// Restores `gtid_strict_mode = OFF` on replica 2 and stops replica 3
/// (which would otherwise read replica 2 in the next tests), even when the
/// test panics.
struct TopologyGuard;

impl Drop for TopologyGuard {
    fn drop(&mut self) {
        let sb = sandbox();
        let run = |server: Server, sql: &str| sb.exec_best_effort(server, sql);
        run(TARGET, "SET GLOBAL gtid_strict_mode = OFF");
        run(CHAINED, "STOP SLAVE");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_and_a_chained_replica_follow_the_masters_gtids() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    ensure_chained_replica(sb);
    let _guard = TopologyGuard;

    // Replica 2's binlog from now on, strict mode, native replication from
    // the master's position; replica 3 reading replica 2 from the start of
    // its (new) binlog.
    let mut target = sb.connect(TARGET).await;
    target.query_drop("STOP SLAVE").await.unwrap();
    point_chained(sb, sb.port(TARGET), Some("")).await;
    sb.connect(CHAINED)
        .await
        .query_drop("STOP SLAVE")
        .await
        .unwrap();
    target
        .query_drop("RESET MASTER; SET GLOBAL gtid_strict_mode = ON")
        .await
        .unwrap();
    drop(target);
    native_from_now(sb).await;
    let master_pos = gtid_binlog_pos(sb, Server::Master).await;
    // Replica 3 starts where replica 2 is (same data: the schemas below
    // are new).
    point_chained(sb, sb.port(TARGET), Some(&master_pos)).await;
    let scratch = unique_schema("gtidpre");
    sb.exec(
        Server::Master,
        &format!("CREATE DATABASE {}", quote_ident(&scratch)),
    )
    .await;
    // A second schema written beside the workload: a MyISAM table (the
    // server binlogs its change as the statement ends) and a table written
    // in GTID domain 5 (the session's domain changes with its GTID).
    let extra = unique_schema("gtidextra");
    let qe = quote_ident(&extra);
    sb.exec(
        Server::Master,
        &format!(
            "CREATE DATABASE {qe}; \
             CREATE TABLE {qe}.myi (id INT PRIMARY KEY, n INT) ENGINE = MyISAM; \
             INSERT INTO {qe}.myi VALUES (1, 0); \
             CREATE TABLE {qe}.d5 (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
        ),
    )
    .await;
    assert_native_ok(sb).await;
    wait_replica_caught_up(sb, CHAINED, Duration::from_secs(120)).await;
    assert_chained_running(sb, "before the takeover").await;

    let schema = unique_schema("gtidtopo");
    let mut spec = ServiceSpec::new("gtidtopo", &[schema.clone(), extra.clone()], "takeover");
    spec.channels = 8;
    spec.parallelism = "row";
    spec.sync_interval = 100;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "60"],
    );
    assert_eq!(status(&spec)["binlogGtids"], "master");
    let load = {
        let workload = Workload::new(&schema, 6, 2_000, 0x6e1d_0035);
        tokio::spawn(async move { workload.run(sandbox()).await })
    };
    let extra_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let extra_load = {
        let done = extra_done.clone();
        let qe = qe.clone();
        tokio::spawn(async move {
            let mut master = sandbox().connect(Server::Master).await;
            let mut rounds = 0u32;
            while !done.load(std::sync::atomic::Ordering::Acquire) || rounds < 20 {
                rounds += 1;
                master
                    .query_drop(format!(
                        "UPDATE {qe}.myi SET n = n + 1 WHERE id = 1; \
                         SET SESSION gtid_domain_id = 5; \
                         INSERT INTO {qe}.d5 (v) VALUES ({rounds}); \
                         SET SESSION gtid_domain_id = 0"
                    ))
                    .await
                    .expect("the extra load");
            }
            rounds
        })
    };
    let mut first = Some(process);
    for round in 0..6 {
        let mut process = first.take().unwrap_or_else(|| spec.spawn(sb, false));
        tokio::time::sleep(jitter(400, 1_200)).await;
        assert!(
            process.running(),
            "shardrep died in round {round}:\n{}",
            process.log_text()
        );
        assert_chained_running(sb, &format!("at kill {round}")).await;
        process.kill();
    }
    let done = load.await.expect("the workload");
    assert!(done.transactions > 0, "{done:?}");
    extra_done.store(true, std::sync::atomic::Ordering::Release);
    let extra_rounds = extra_load.await.expect("the extra load");
    assert!(extra_rounds >= 20, "{extra_rounds}");

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;
    let log = process.log_text();
    for code in ["error 1062", "error 1032", "error 1950"] {
        assert!(!log.contains(code), "a run logged {code}:\n{log}");
    }
    assert_schema_equal(sb, TARGET, &schema).await;
    assert_schema_equal(sb, TARGET, &extra).await;
    // Replica 3 has applied everything replica 2 binlogged: the master's
    // GTIDs, so it can wait for the master's position.
    wait_replica_caught_up(sb, CHAINED, Duration::from_secs(120)).await;
    assert_chained_running(sb, "after the catch-up").await;
    assert_schema_equal(sb, CHAINED, &schema).await;
    assert_schema_equal(sb, CHAINED, &extra).await;
    // Replica 1, natively replicating the same master workload, is equal
    // too.
    wait_replica_caught_up(sb, Server::Replica(1), Duration::from_secs(120)).await;
    assert_schema_equal(sb, Server::Replica(1), &schema).await;
    assert_schema_equal(sb, Server::Replica(1), &extra).await;

    // A clean offline: replica 2's binlog is at the master's position.
    ctl_ok(&spec, &["offline"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:NORMAL", "--timeout-secs", "60"],
    );
    // (Each domain replica 2's binlog has had since its RESET MASTER: the
    // master's binlog may also hold other domains, of earlier tests.)
    let by_domain = |pos: String| -> std::collections::BTreeMap<String, String> {
        pos.split(',')
            .filter(|g| !g.is_empty())
            .map(|g| (g.split('-').next().unwrap().to_string(), g.to_string()))
            .collect()
    };
    let master_pos = by_domain(gtid_binlog_pos(sb, Server::Master).await);
    let target_pos = by_domain(gtid_binlog_pos(sb, TARGET).await);
    assert!(target_pos.contains_key("0"), "{target_pos:?}");
    assert!(target_pos.contains_key("5"), "{target_pos:?}");
    for (domain, gtid) in &target_pos {
        assert_eq!(
            Some(gtid),
            master_pos.get(domain),
            "{target_pos:?} {master_pos:?}"
        );
    }
    // The restart rows (every one at one seqno) record the same position.
    let recorded: Vec<String> = sb
        .connect(TARGET)
        .await
        .query(format!(
            "SELECT DISTINCT gtid FROM {}.restart_position",
            quote_ident(&spec.catalog())
        ))
        .await
        .unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let recorded = by_domain(recorded[0].clone());
    assert_eq!(recorded.get("0"), target_pos.get("0"), "{recorded:?}");
    // As under native replication, gtid_slave_pos (and gtid_current_pos,
    // which failover tools read) is the applied position in every domain
    // applied.
    for variable in ["gtid_slave_pos", "gtid_current_pos"] {
        let pos: String = sb
            .connect(TARGET)
            .await
            .query_first(format!("SELECT @@{variable}"))
            .await
            .unwrap()
            .unwrap();
        let pos = by_domain(pos);
        for (domain, gtid) in &target_pos {
            assert_eq!(pos.get(domain), Some(gtid), "{variable} {pos:?}");
        }
    }
    let gtids = target_binlog_gtids(sb).await;
    assert!(gtids.len() as u64 >= done.transactions, "{}", gtids.len());
    let mut last = std::collections::BTreeMap::new();
    for (domain, server, seq) in &gtids {
        assert_eq!(*server, MASTER_SERVER_ID, "{domain}-{server}-{seq}");
        if let Some(before) = last.insert(*domain, *seq) {
            assert!(*seq > before, "{domain}-{server}-{seq} after {before}");
        }
    }

    // Handback under strict mode: native replication goes on.
    let handback: Value =
        serde_json::from_str(&ctl_ok(&spec, &["--json", "handback", "--start-slave"])).unwrap();
    assert!(handback["seqno"].as_i64().is_some(), "{handback}");
    let q = quote_ident(&schema);
    sb.exec(
        Server::Master,
        &format!(
            "UPDATE {q}.hot SET v = v + 1 WHERE id = 1; \
             INSERT INTO {q}.pk (id, v) VALUES (9000001, 1)"
        ),
    )
    .await;
    assert_native_ok(sb).await;
    assert_schema_equal(sb, TARGET, &schema).await;
    wait_replica_caught_up(sb, CHAINED, Duration::from_secs(120)).await;
    assert_schema_equal(sb, CHAINED, &schema).await;

    // Replica 3 re-pointed to the master: no gap, no repeat.
    point_chained(sb, sb.port(Server::Master), None).await;
    sb.exec(
        Server::Master,
        &format!(
            "UPDATE {q}.hot SET v = v + 1 WHERE id = 2; \
             INSERT INTO {q}.pk (id, v) VALUES (9000002, 2); \
             DELETE FROM {q}.pk WHERE id = 9000001"
        ),
    )
    .await;
    wait_replica_caught_up(sb, CHAINED, Duration::from_secs(120)).await;
    assert_chained_running(sb, "re-pointed to the master").await;
    assert_schema_equal(sb, CHAINED, &schema).await;

    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    let mut chained = sb.connect(CHAINED).await;
    chained.query_drop("STOP SLAVE").await.unwrap();
    for s in [&schema, &scratch] {
        chained
            .query_drop(format!(
                "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {}",
                quote_ident(s)
            ))
            .await
            .unwrap();
    }
    drop(chained);
    drop_everywhere(sb, &[schema, scratch, extra]).await;
}

/// A crash between a COMMIT and the restart row written after it (under
/// the master's GTIDs the row is a transaction of its own), made by
/// rewinding the restart rows by hand: the next start finds the
/// transactions the rows do not record in the replica's binlog (their
/// master GTIDs in `@@gtid_binlog_state`) and applies none of them again
/// (no 1062), the tables equal to the master's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_restart_row_was_lost_is_found_in_the_replicas_binlog() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    common::service::stop_target_slave(sb).await;
    let schema = unique_schema("gtidrow");
    let q = quote_ident(&schema);
    let start = common::service::master_position(sb).await;
    sb.exec(
        Server::Master,
        &format!("CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT)"),
    )
    .await;
    for id in 1..=6 {
        sb.exec(
            Server::Master,
            &format!("INSERT INTO {q}.t VALUES ({id}, {id})"),
        )
        .await;
    }
    let mut spec = ServiceSpec::new("gtidrow", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    let _catalog = spec.drop_catalog_on_panic(sb);
    let first = spec.run_until_idle(sb).expect("first run");
    assert_eq!(first.dispatched, 8, "{first:?}");
    let last = *spec.restart_seqnos(sb).await.iter().max().unwrap();
    assert_eq!(last, 7);
    // Rows rewound 4 seqnos: the last four INSERTs committed, unrecorded.
    sb.exec(
        TARGET,
        &format!(
            "SET SESSION sql_log_bin = 0; UPDATE {}.restart_position \
             SET seqno = {at}, low_water = {at}, committed_above = ''",
            quote_ident(&spec.catalog()),
            at = last - 4
        ),
    )
    .await;
    let again = spec.run_until_idle(sb).expect("second run");
    assert_eq!(again.dispatched, 0, "{again:?}");
    common::assert_table_equal(sb, Server::Master, TARGET, &schema, "t").await;
    // The rows record them now: a third run reads nothing either.
    let third = spec.run_until_idle(sb).expect("third run");
    assert_eq!(third.dispatched, 0, "{third:?}");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

/// An errant GTID on replica 2 (a write made there in the master's domain,
/// sequence number ahead of the master's) under `gtid_strict_mode = ON`:
/// the master's next transaction cannot be binlogged after it (error
/// 1950), as native replication would meet it. The service stops with the
/// error and a way out that works: strict mode off, `online`, the master's
/// transactions applied, the table equal to the master's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_errant_gtid_under_strict_mode_stops_with_a_way_out_that_works() {
    let _lock = LOCK.lock().await;
    let _restore = TopologyGuard;
    let sb = sandbox();
    common::service::stop_target_slave(sb).await;
    let schema = unique_schema("gtiderrant");
    let q = quote_ident(&schema);
    let start = common::service::master_position(sb).await;
    // Seqnos 0-4: CREATE DATABASE, CREATE TABLE, ids 1-2, a side table.
    common::service::create_table(sb, &schema, 2).await;
    common::service::on_master(sb, &format!("CREATE TABLE {q}.side (id INT PRIMARY KEY)")).await;
    let mut spec = ServiceSpec::new("gtiderrant", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    spec.binlog_gtids = Some("master");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "4", "--timeout-secs", "120"]);
    // The errant write: replica 2's own server id, the master's domain,
    // a sequence number far ahead of the master's.
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop("SET GLOBAL gtid_strict_mode = ON")
        .await
        .unwrap();
    let (domain, seq, replica_id): (u32, u64, u32) = replica
        .query_first("SELECT @@gtid_domain_id, 1000000, @@server_id")
        .await
        .unwrap()
        .unwrap();
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 1, gtid_domain_id = {domain}; \
             SET SESSION gtid_seq_no = {seq}; INSERT INTO {q}.side VALUES (1)"
        ))
        .await
        .unwrap();
    drop(replica);
    common::service::on_master(sb, &format!("INSERT INTO {q}.t VALUES (3, 0)")).await;
    common::service::wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorCode"], 1950, "{s}");
    // Where it stands, both ways.
    assert_eq!(s["appliedLastSeqno"], 4, "{s}");
    assert!(s["appliedLastEventId"].is_string(), "{s}");
    assert_eq!(s["pendingErrorSeqno"], 5, "{s}");
    let message = s["pendingError"].as_str().unwrap();
    assert!(
        message.contains("native replication would stop here too")
            && message.contains(
                "`SET GLOBAL gtid_strict_mode = 0` on the replica, then `shardrepctl online`"
            ),
        "{message}"
    );
    // The way out, as printed.
    sb.exec(TARGET, "SET GLOBAL gtid_strict_mode = 0").await;
    ctl_ok(&spec, &["online"]);
    common::service::on_master(sb, &format!("INSERT INTO {q}.t VALUES (4, 0)")).await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["state"], "ONLINE");
    common::assert_table_equal(sb, Server::Master, TARGET, &schema, "t").await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    // Strict mode on again while the errant GTID is still ahead: the next
    // start refuses before applying anything, naming it.
    sb.exec(TARGET, "SET GLOBAL gtid_strict_mode = ON").await;
    common::service::on_master(sb, &format!("INSERT INTO {q}.t VALUES (5, 0)")).await;
    let refused = spec
        .run_until_idle(sb)
        .expect_err("a start under strict mode with an errant GTID ahead")
        .to_string();
    assert!(
        refused.contains(&format!(
            "the replica's binlog holds GTIDs of another server ahead of the master's position \
             that shardrep applied, in the same domain: {domain}-{replica_id}-{seq} (the \
             master's applied: {domain}-1-"
        )) && refused.contains("SET GLOBAL gtid_strict_mode = 0 on the replica, then start"),
        "{refused}"
    );
    // Its way out.
    sb.exec(TARGET, "SET GLOBAL gtid_strict_mode = 0").await;
    spec.run_until_idle(sb)
        .expect("a start without strict mode");
    common::assert_table_equal(sb, Server::Master, TARGET, &schema, "t").await;
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
    // The errant GTID out of replica 2's binlog state for the next tests.
    sb.exec(TARGET, "RESET MASTER").await;
}

/// `RESET MASTER` on replica 2 after commits its restart rows do not
/// record (rows rewound by hand, as a kill -9 leaves them under
/// `"master"`): the start warns, the duplicate that follows says that it
/// may be a transaction applied twice, and its way out (skip each such
/// seqno) leads to a replica equal to the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binlog_reset_after_unrecorded_commits_names_the_duplicates() {
    let _lock = LOCK.lock().await;
    let sb = sandbox();
    common::service::stop_target_slave(sb).await;
    let schema = unique_schema("gtidreset");
    let q = quote_ident(&schema);
    let start = common::service::master_position(sb).await;
    // Seqnos 0-7: CREATE DATABASE, CREATE TABLE, ids 1-6.
    common::service::create_table(sb, &schema, 6).await;
    let mut spec = ServiceSpec::new("gtidreset", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    spec.binlog_gtids = Some("master");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "7", "--timeout-secs", "120"]);
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    // Seqnos 6 and 7 committed, unrecorded; then the binlog reset.
    sb.exec(
        TARGET,
        &format!(
            "SET SESSION sql_log_bin = 0; UPDATE {}.restart_position \
             SET seqno = 5, low_water = 5, committed_above = ''; RESET MASTER",
            quote_ident(&spec.catalog()),
        ),
    )
    .await;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    for seqno in [6, 7] {
        common::service::wait_state(&spec, "OFFLINE:ERROR");
        let s = status(&spec);
        assert_eq!(s["pendingErrorSeqno"], seqno, "{s}");
        assert_eq!(s["pendingErrorCode"], 1062, "{s}");
        assert!(
            s["appliedLastSeqno"].is_u64() && s["appliedLastEventId"].is_string(),
            "{s}"
        );
        let message = s["pendingError"].as_str().unwrap();
        assert!(
            message.contains("this may be a transaction applied twice")
                && message.contains(&format!("`shardrepctl online --skip-seqno {seqno}`")),
            "{message}"
        );
        ctl_ok(&spec, &["online", "--skip-seqno", &seqno.to_string()]);
    }
    common::service::on_master(sb, &format!("INSERT INTO {q}.t VALUES (7, 0)")).await;
    wait_applied_to_master(sb, &spec).await;
    assert_eq!(status(&spec)["state"], "ONLINE");
    common::assert_table_equal(sb, Server::Master, TARGET, &schema, "t").await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
}

/// A master transaction whose row events change a non-transactional
/// table and a transactional one in one group (an InnoDB insert whose
/// trigger writes a MyISAM table, autocommit on the master): a client
/// session can only binlog it as two groups, the second under the
/// sequence number the master's next transaction has too, which
/// `gtid_strict_mode` would refuse (1950) at that next transaction. The
/// service stops before applying it, with the way out (strict mode off,
/// online), which ends with the tables equal to the master's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_with_a_non_transactional_change_stops_before_a_split_under_strict_mode() {
    let _lock = LOCK.lock().await;
    let _restore = TopologyGuard;
    let sb = sandbox();
    common::service::stop_target_slave(sb).await;
    sb.exec(TARGET, "RESET MASTER; SET GLOBAL gtid_strict_mode = ON")
        .await;
    let schema = unique_schema("gtidmixed");
    let q = quote_ident(&schema);
    let start = common::service::master_position(sb).await;
    // Seqnos 0-3: the schema, the tables, the trigger (replicated too:
    // under the binlog method the replica's row applier fires none).
    common::service::on_master(
        sb,
        &format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT) ENGINE = InnoDB; \
             CREATE TABLE {q}.log (id INT PRIMARY KEY, v INT) ENGINE = MyISAM; \
             CREATE TRIGGER {q}.t_ai AFTER INSERT ON {q}.t FOR EACH ROW \
             INSERT INTO {q}.log VALUES (NEW.id, NEW.v)"
        ),
    )
    .await;
    for id in 1..=3 {
        common::service::on_master(
            sb,
            &format!(
                "INSERT INTO {q}.t VALUES ({id}, {id}); UPDATE {q}.t SET v = 0 WHERE id = {id}"
            ),
        )
        .await;
    }
    let mut spec = ServiceSpec::new("gtidmixed", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    spec.binlog_gtids = Some("master");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    common::service::wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 4, "{s}");
    let message = s["pendingError"].as_str().unwrap();
    assert!(
        message.starts_with("channel ")
            && message.contains("one master transaction, two binlog groups: seqno 4 (GTID 0-1-")
            && message.contains(&format!("changes {q}.`log` (engine MyISAM)"))
            && message
                .contains("Nothing of it was applied. Way out: `SET GLOBAL gtid_strict_mode = 0`"),
        "{message}"
    );
    // The way out, as printed.
    sb.exec(TARGET, "SET GLOBAL gtid_strict_mode = 0").await;
    ctl_ok(&spec, &["online"]);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    for table in ["t", "log"] {
        common::assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
    }
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    drop_everywhere(sb, &[schema]).await;
    sb.exec(TARGET, "RESET MASTER").await;
}
