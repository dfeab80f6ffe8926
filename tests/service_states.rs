//! Issue 36, items 4 and 5: states stay honest against the real service
//! (`shardrep run` on the sandbox's replica 2, driven by the real
//! `shardrepctl`).
//!
//! - An `offline` client answers once its own offline has completed, even
//!   when another client's `online` changed the state right after (it
//!   used to wait for `OFFLINE:NORMAL` until its time-out).
//! - `offline` from `OFFLINE:ERROR` keeps the error in status while the
//!   channels' restart rows are uneven, until a successful online passes
//!   the failed seqno or the DBA resets.
//! - `lastOfflineClean` is shown only while the service is offline.
//!
//! The tests of this file take one lock and run one at a time (they share
//! replica 2 and the two cores).

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;
use shardrep::control::{Client, Request};

use common::service::{
    cleanup, create_table, ctl, ctl_ok, ctl_spawn, fail_with_uneven_rows, master_position,
    on_master, status, stop_target_slave, wait_applied_to_master, wait_for_socket, wait_state,
    ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Server};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The pending error's fields of a status.
fn pending_fields(s: &Value) -> Vec<(&'static str, Value)> {
    [
        "pendingError",
        "pendingErrorCode",
        "pendingErrorSeqno",
        "pendingErrorEventId",
        "pendingErrorShard",
        "pendingErrorChannel",
        "pendingExceptionMessage",
    ]
    .into_iter()
    .map(|k| (k, s[k].clone()))
    .collect()
}

// Item 4 (issue item 6): `shardrepctl offline --timeout-secs 60` while
// another client goes online as soon as the state is OFFLINE:NORMAL. The
// offline client returns at once with success: its offline ended in
// OFFLINE:NORMAL (and `stateNow` says when another request changed the
// state since). Three rounds, each racing the client's next look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_online_does_not_hold_an_offline_client() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("race");
    let start = master_position(sb).await;
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("race", std::slice::from_ref(&a), &start);
    let _guard = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_state(&spec, "ONLINE");
    let applied = wait_applied_to_master(sb, &spec).await;
    assert_eq!(applied["appliedLastSeqno"], 4, "{applied}");
    let client = Client::new(spec.dir.join("control.sock"));
    let timeout = Duration::from_secs(60);
    let mut raced = 0;
    for round in 1..=3 {
        let started = Instant::now();
        let mut offline = ctl_spawn(
            &spec,
            &[
                "--json",
                "offline",
                "--timeout-secs",
                &timeout.as_secs().to_string(),
            ],
        );
        // Online as soon as the offline has completed (looked at as
        // often as the socket answers).
        loop {
            let s = client
                .request(&Request::Status { name: None })
                .expect("status");
            if s["state"] == "OFFLINE:NORMAL" {
                break;
            }
            assert!(
                started.elapsed() < timeout,
                "round {round}: never OFFLINE:NORMAL: {s}"
            );
        }
        let online = client
            .request(&Request::Online {
                skip_seqnos: None,
                until_seqno: None,
            })
            .expect("online");
        assert_eq!(online["state"], "GOING-ONLINE:SYNCHRONIZING", "{online}");
        // The offline client ends well before its time-out.
        let status = loop {
            if let Some(status) = offline.try_wait().expect("try_wait") {
                break status;
            }
            if started.elapsed() > timeout / 2 {
                let _ = offline.kill();
                let out = offline.wait_with_output().expect("output");
                panic!(
                    "round {round}: the offline client still waits after {:?}: {}",
                    started.elapsed(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = offline.wait_with_output().expect("output");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(status.success(), "round {round}: {stdout}{stderr}");
        assert_eq!(stderr, "", "round {round}");
        let answer: Value = serde_json::from_str(stdout.trim_end()).expect("one JSON line");
        assert_eq!(answer["state"], "OFFLINE:NORMAL", "round {round}: {answer}");
        assert_eq!(answer["appliedLastSeqno"], 4, "round {round}: {answer}");
        match answer.get("stateNow") {
            None => assert_eq!(answer.as_object().unwrap().len(), 2, "{answer}"),
            Some(now) => {
                raced += 1;
                assert!(
                    now == "GOING-ONLINE:SYNCHRONIZING" || now == "ONLINE",
                    "round {round}: {answer}"
                );
            }
        }
        wait_state(&spec, "ONLINE");
    }
    eprintln!("the online came before the offline client's next look in {raced} of 3 rounds");
    ctl_ok(&spec, &["offline"]);
    cleanup(sb, &spec, process, &[a]).await;
}

// Item 5: a definite error that leaves the restart rows uneven (seqno 6
// committed on one channel, 5 failed with 1062 on another) stays in
// status after `offline` (OFFLINE:NORMAL, every pendingError field as in
// OFFLINE:ERROR, handback still refused); an online that passes seqno 5
// and a clean offline clear it. A second such error, acknowledged, is
// cleared by reset. `lastOfflineClean` is null while going online and
// online, false after the error and its acknowledgement, true after the
// clean offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_error_stays_while_the_rows_are_uneven() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("ackerr");
    let qa = quote_ident(&a);
    let start = master_position(sb).await;
    // Seqnos 0-4: CREATE DATABASE, CREATE TABLE, ids 1-3.
    create_table(sb, &a, 3).await;
    let mut spec = ServiceSpec::new("ackerr", std::slice::from_ref(&a), &start);
    spec.block = 1;
    // Seqno 6 commits before 5: out of order, which the master's GTIDs
    // (commits in the master's order) do not allow.
    spec.binlog_gtids = Some("own");
    let _guard = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "4", "--timeout-secs", "120"]);
    let s = status(&spec);
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["lastOfflineClean"], Value::Null, "online: {s}");

    // Seqno 5 (id 4) fails, 6 (id 5) is committed: the rows are uneven.
    fail_with_uneven_rows(sb, &spec, &a, 4, 6).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let failed = status(&spec);
    assert_eq!(failed["pendingErrorSeqno"], 5, "{failed}");
    assert_eq!(failed["pendingErrorCode"], 1062, "{failed}");
    assert_eq!(failed["pendingErrorShard"], a.as_str(), "{failed}");
    assert_eq!(failed["lastOfflineClean"], false, "{failed}");
    let rows = spec.restart_records(sb).await;
    let seqnos: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert!(seqnos.contains(&6), "{rows:?}");
    assert!(seqnos.iter().any(|&s| s < 5), "{rows:?}");

    // offline acknowledges: OFFLINE:NORMAL, the error still shown.
    let (code, out, err) = ctl(&spec, &["--json", "offline", "--timeout-secs", "60"]);
    assert_eq!(code, 0, "{out}{err}");
    let answer: Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(answer["state"], "OFFLINE:NORMAL", "{answer}");
    assert_eq!(answer.get("stateNow"), None, "{answer}");
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(pending_fields(&s), pending_fields(&failed), "{s}");
    assert_eq!(s["lastOfflineClean"], false, "{s}");
    assert!(
        process
            .log_text()
            .contains("the last error stays in status (pendingError)"),
        "the log says why"
    );
    let (code, _, err) = ctl(&spec, &["handback"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("different seqnos"), "{err}");

    // Repaired, online passes seqno 5: no error while online, none after
    // a clean offline.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DELETE FROM {qa}.t WHERE id = 4"),
    )
    .await;
    assert_eq!(
        ctl_ok(&spec, &["online"]),
        "state : GOING-ONLINE:SYNCHRONIZING\n"
    );
    let s = status(&spec);
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(s["lastOfflineClean"], Value::Null, "{s}");
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["appliedLastSeqno"], 6, "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    assert_eq!(s["lastOfflineClean"], Value::Null, "{s}");
    assert_table_equal(sb, Server::Master, TARGET, &a, "t").await;
    ctl_ok(&spec, &["offline"]);
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(pending_fields(&s), pending_fields(&Value::Null), "{s}");
    assert_eq!(s["lastOfflineClean"], true, "{s}");
    assert_eq!(spec.restart_seqnos(sb).await, [6; 4]);

    // Again (seqno 7, id 6, fails; 8 commits), acknowledged: reset
    // clears it.
    ctl_ok(&spec, &["online"]);
    wait_state(&spec, "ONLINE");
    fail_with_uneven_rows(sb, &spec, &a, 6, 8).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let failed = status(&spec);
    assert_eq!(failed["pendingErrorSeqno"], 7, "{failed}");
    ctl_ok(&spec, &["offline"]);
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(pending_fields(&s), pending_fields(&failed), "{s}");
    ctl_ok(&spec, &["reset", "--confirm", &spec.service]);
    let s = status(&spec);
    assert_eq!(s["state"], "OFFLINE:NORMAL", "{s}");
    assert_eq!(pending_fields(&s), pending_fields(&Value::Null), "{s}");
    cleanup(sb, &spec, process, &[a]).await;
}

// A definite error in a row-parallel catch-up, with nothing committed at
// or above the failed seqno F. Under "own" the rows record every commit:
// the error's way out is `handback` at once. Under "master" (rows written
// every few commits, the replica's binlog records the rest) it is `online
// --until-seqno F-1`, then `handback`. Followed, native replication resumes
// before seqno F and meets the same error itself (SHOW SLAVE STATUS:
// 1062); fixed there, native replication ends with the replica equal to
// the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_catch_up_is_handed_back_before_the_failed_transaction() {
    for mode in ["own", "master"] {
        hand_back_before_a_failure(mode).await;
    }
}

async fn hand_back_before_a_failure(mode: &'static str) {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    // The service starts at a binlog position (source.start), so its rows
    // know only the GTID domains written since: the handback uses the
    // binlog position (native replication on file positions), which holds
    // whatever domains the master has.
    sb.exec(TARGET, "CHANGE MASTER TO MASTER_USE_GTID = no")
        .await;
    let a = unique_schema(&format!("hbfail_{mode}"));
    let qa = quote_ident(&a);
    let start = master_position(sb).await;
    // Seqnos 0-7: CREATE DATABASE, CREATE TABLE, ids 1-6.
    create_table(sb, &a, 6).await;
    let mut spec = ServiceSpec::new("hbfail", std::slice::from_ref(&a), &start);
    spec.block = 1;
    spec.binlog_gtids = Some(mode);
    let _guard = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(&spec, &["wait", "--applied", "7", "--timeout-secs", "120"]);
    // The replica holds id 7 already: seqno 8, the master's insert of it,
    // fails with 1062; nothing comes after it.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; INSERT INTO {qa}.t VALUES (7, 99)"),
    )
    .await;
    on_master(sb, &format!("INSERT INTO {qa}.t VALUES (7, 0)")).await;
    wait_state(&spec, "OFFLINE:ERROR");
    let s = status(&spec);
    assert_eq!(s["pendingErrorSeqno"], 8, "{s}");
    assert_eq!(s["pendingErrorCode"], 1062, "{s}");
    let message = s["pendingError"].as_str().unwrap();
    if mode == "own" {
        assert!(
            message.contains(
                "or `shardrepctl handback`, then START SLAVE, hands the replica back to \
                 native replication before it"
            ),
            "{message}"
        );
    } else {
        assert!(
            message.contains(
                "to hand the replica back to native replication before it, `shardrepctl \
                 online --until-seqno 7` (the seqnos before it, then a clean stop), then \
                 `shardrepctl handback` and START SLAVE"
            ),
            "{message}"
        );
        ctl_ok(&spec, &["online", "--until-seqno", "7"]);
        wait_state(&spec, "OFFLINE:NORMAL");
    }
    ctl_ok(&spec, &["handback"]);
    sb.exec(TARGET, "START SLAVE").await;
    // Native replication applies seqno 8 and meets its error.
    let native = common::wait_until(
        "native replication stops on the failed transaction",
        Duration::from_secs(120),
        || async {
            let mut replica = sb.connect(TARGET).await;
            shardrep::replica::slave_status(&mut replica)
                .await
                .unwrap()
                .filter(|st| st.last_errno != 0)
        },
    )
    .await
    .unwrap();
    assert_eq!(native.last_errno, 1062, "{native:?}");
    // Fixed as a DBA fixes native replication: the replica's row goes,
    // the SQL thread starts again.
    sb.exec(
        TARGET,
        &format!("SET SESSION sql_log_bin = 0; DELETE FROM {qa}.t WHERE id = 7; START SLAVE"),
    )
    .await;
    common::service::assert_native_ok(sb).await;
    assert_table_equal(sb, Server::Master, TARGET, &a, "t").await;
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, &[a]).await;
    spec.remove(sb).await;
}

/// A service that never took the replica over leaves no trace there with
/// read-only commands (`shard list`, a refused `check`), and `handback`
/// says there is nothing to hand back (not the replica's 1146).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_leave_no_trace_and_handback_has_nothing_to_do() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let a = unique_schema("notrace");
    let start = master_position(sb).await;
    let spec = ServiceSpec::new("notrace", std::slice::from_ref(&a), &start);
    let _guard = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(&spec, &mut process);
    let catalog_exists = || async {
        let mut replica = sb.connect(TARGET).await;
        use mysql_async::prelude::Queryable;
        replica
            .exec_first::<u64, _, _>(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (spec.catalog(),),
            )
            .await
            .unwrap()
            .unwrap()
    };
    assert_eq!(catalog_exists().await, 0, "before any command");
    ctl_ok(&spec, &["shard", "list"]);
    let (code, out, err) = ctl(&spec, &["check"]);
    assert_ne!(code, 0, "check refused offline:\n{out}\n{err}");
    assert!(err.contains("needs the service ONLINE"), "{out}\n{err}");
    let (code, out, err) = ctl(&spec, &["handback"]);
    assert_ne!(code, 0, "handback refused:\n{out}\n{err}");
    assert!(
        err.contains(&format!(
            "nothing to hand back: the replica holds no restart rows of this service (table \
             {}.restart_position does not exist)",
            spec.catalog()
        )),
        "{out}\n{err}"
    );
    assert_eq!(
        catalog_exists().await,
        0,
        "after shard list, check, handback"
    );
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
}

/// `reset --drop-catalog` removes every trace of the service on the
/// replica after a handback; while the restart rows hold a takeover in
/// force it is refused, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_drop_catalog_after_a_handback_leaves_no_trace() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    sb.exec(TARGET, "CHANGE MASTER TO MASTER_USE_GTID = no")
        .await;
    let a = unique_schema("droptrace");
    let start = master_position(sb).await;
    create_table(sb, &a, 3).await;
    let spec = ServiceSpec::new("droptrace", std::slice::from_ref(&a), &start);
    let _guard = spec.drop_catalog_on_panic(sb);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;
    ctl_ok(&spec, &["offline"]);
    wait_state(&spec, "OFFLINE:NORMAL");
    let catalogs = || async {
        use mysql_async::prelude::Queryable;
        sb.connect(TARGET)
            .await
            .exec_first::<u64, _, _>(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (spec.catalog(),),
            )
            .await
            .unwrap()
            .unwrap()
    };
    let name = spec.service.clone();
    let (code, out, err) = ctl(&spec, &["reset", "--confirm", &name, "--drop-catalog"]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("a takeover is in force") && err.contains("`shardrepctl handback` first"),
        "{err}"
    );
    assert_eq!(catalogs().await, 1, "refused: nothing changed");
    assert_eq!(
        spec.restart_seqnos(sb).await.len(),
        4,
        "refused: the rows are there"
    );
    ctl_ok(&spec, &["handback"]);
    let done = ctl_ok(
        &spec,
        &["--json", "reset", "--confirm", &name, "--drop-catalog"],
    );
    let done: Value = serde_json::from_str(&done).unwrap();
    assert_eq!(done["catalogDropped"], spec.catalog().as_str(), "{done}");
    assert_eq!(catalogs().await, 0, "the catalog is dropped");
    assert!(!spec.dir.join("queue").exists(), "the queue is removed");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, &[a]).await;
    spec.remove(sb).await;
    common::service::native_from_now(sb).await;
}
