//! `shardrepctl check` against `shardrep run` on the sandbox (replica 2):
//! exit 0 and a summary for identical tables, exit 1 with each difference
//! for a row changed by hand on the replica, exit 2 for a bad request and
//! for a check while the service is offline (with why), and the last
//! check's status in `status --name check`.

mod common;

use mysql_async::prelude::Queryable;

use common::service::{
    ctl, ctl_ok, ctl_spawn, master_position, stop_target_slave, wait_for_socket, ServiceSpec,
    TARGET,
};
use common::{quote_ident, sandbox, unique_schema, wait_until, Server};

/// `shardrepctl check` in chunks of 100 rows with `pause_ms` between them,
/// started in the background (output piped) and seen running.
async fn running_check(
    sb: &common::Sandbox,
    spec: &ServiceSpec,
    pause_ms: &str,
) -> std::process::Child {
    spec.write_config(sb);
    let child = ctl_spawn(
        spec,
        &["check", "--chunk-rows", "100", "--pause-ms", pause_ms],
    );
    wait_until(
        "the check to run",
        std::time::Duration::from_secs(10),
        || async {
            let s = ctl_ok(spec, &["--json", "status", "--name", "check"]);
            s.contains("\"running\"").then_some(())
        },
    )
    .await
    .unwrap();
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shardrepctl_check_exit_codes_and_output() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let schema = unique_schema("ctl_check");
    let q = quote_ident(&schema);
    // A schema and a table whose names hold a dot.
    let dotted = format!("{schema}.d");
    let qd = quote_ident(&dotted);
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, n INT, s TEXT); \
             INSERT INTO {q}.t SELECT seq, seq, REPEAT('x', seq % 50) FROM {q}.seq_1_to_1500; \
             CREATE TABLE {q}.u (v INT); CREATE VIEW {q}.v AS SELECT id FROM {q}.t; \
             CREATE DATABASE {qd}; CREATE TABLE {qd}.`t.1` (id INT PRIMARY KEY, v INT); \
             INSERT INTO {qd}.`t.1` VALUES (1, 1), (2, 2), (3, 3)"
        ))
        .await
        .unwrap();
    let schemas = [schema.clone(), dotted.clone()];
    let spec = ServiceSpec::new("ctlcheck", &schemas, &start);
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    ctl_ok(
        &spec,
        &["wait", "--state", "ONLINE", "--timeout-secs", "120"],
    );
    assert_eq!(
        ctl_ok(&spec, &["status", "--name", "check"]),
        "no consistency check has run since the service started\n"
    );

    let (code, out, err) = ctl(&spec, &["check", "--chunk-rows", "400"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "identical: 3 tables, 1503 rows compared\n");
    assert!(
        err.contains("check: 3/3 tables, 6 chunks, 1503 rows"),
        "{err}"
    );

    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {q}.t SET s = 'changed' WHERE id = 777; \
             DELETE FROM {q}.t WHERE id = 1500; INSERT INTO {q}.u VALUES (1)"
        ))
        .await
        .unwrap();
    let (code, out, err) = ctl(
        &spec,
        &[
            "check",
            "--table",
            &format!("{schema}.t"),
            "--table",
            &format!("{schema}.u"),
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        out,
        format!(
            "{schema}.t [id=777]: columns differ: s\n\
             {schema}.t [id=1500]: missing on the replica\n\
             {schema}.u: the table differs (0 rows on the master, 1 on the replica); it has no \
             primary key or NOT NULL unique key, so the rows cannot be named\n"
        )
    );
    assert!(
        err.contains("shardrepctl: 3 differences found in 2 tables (1500 rows compared)"),
        "{err}"
    );
    let last = ctl_ok(&spec, &["--json", "status", "--name", "check"]);
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["state"], "differences");
    assert_eq!(last["differences"], 3);

    // Names with dots, in backticks as SQL writes them; shown the same way.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {qd}.`t.1` SET v = 0 WHERE id = 2"
        ))
        .await
        .unwrap();
    let (code, out, err) = ctl(&spec, &["check", "--table", &format!("{qd}.`t.1`")]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, format!("{qd}.`t.1` [id=2]: columns differ: v\n"));
    let (code, out, err) = ctl(&spec, &["check", "--schema", &dotted]);
    assert_eq!(
        (code, out),
        (1, format!("{qd}.`t.1` [id=2]: columns differ: v\n")),
        "{err}"
    );
    assert!(
        err.contains("shardrepctl: 1 difference found in 1 table (3 rows compared)"),
        "{err}"
    );

    // A quiet master after a binlog rotation: the master's snapshot is in
    // the new file, past the service's last transaction; the service is
    // there all the same (the heartbeat says so), and the check runs.
    master.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let (code, out, err) = ctl(&spec, &["check", "--schema", &qd]);
    assert_eq!(
        (code, out),
        (1, format!("{qd}.`t.1` [id=2]: columns differ: v\n")),
        "{err}"
    );

    // A table the replica lacks, a FLOAT that differs past its 6th digit,
    // a MyISAM table: a difference each for the first two (the check goes
    // on after the missing table), the last skipped with why.
    master
        .query_drop(format!(
            "CREATE TABLE {q}.a_gone (id INT PRIMARY KEY); \
             CREATE TABLE {q}.b_float (id INT PRIMARY KEY, f FLOAT); \
             INSERT INTO {q}.b_float VALUES (1, 4), (2, 1.5); \
             CREATE TABLE {q}.c_myisam (id INT PRIMARY KEY) ENGINE=MyISAM"
        ))
        .await
        .unwrap();
    wait_until(
        "the new tables on the replica",
        std::time::Duration::from_secs(60),
        || async {
            let mut replica = sb.connect(TARGET).await;
            let n: Option<i64> = replica
                .query_first(format!("SELECT COUNT(*) FROM {q}.b_float"))
                .await
                .ok()
                .flatten();
            (n == Some(2)).then_some(())
        },
    )
    .await
    .unwrap();
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DROP TABLE {q}.a_gone; \
             UPDATE {q}.b_float SET f = 4.000001 WHERE id = 1"
        ))
        .await
        .unwrap();
    let tables: Vec<String> = ["a_gone", "b_float", "c_myisam", "t"]
        .iter()
        .map(|t| format!("{schema}.{t}"))
        .collect();
    let mut args = vec!["check"];
    for t in &tables {
        args.extend(["--table", t.as_str()]);
    }
    let (code, out, err) = ctl(&spec, &args);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        out,
        format!(
            "skipped: {schema}.c_myisam: ENGINE=MyISAM has no consistent snapshot, so it \
             cannot be read at one point of the stream; compare it on a quiet pair (CHECKSUM \
             TABLE)\n\
             {schema}.a_gone: the table differs on the replica: ERROR 1146 Table \
             '{schema}.a_gone' doesn't exist\n\
             {schema}.b_float [id=1]: columns differ: f\n\
             {schema}.t [id=777]: columns differ: s\n\
             {schema}.t [id=1500]: missing on the replica\n"
        )
    );
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {q}.b_float SET f = 4 WHERE id = 1"
        ))
        .await
        .unwrap();

    // What cannot be checked is refused, each with why (exit 2).
    for (args, why) in [
        (
            vec!["--table".to_string(), format!("{schema}.v")],
            format!("{schema}.v is a view on the master: a check compares base tables"),
        ),
        (
            vec!["--table".to_string(), format!("{schema}.nosuch")],
            format!("{schema}.nosuch: no such table on the master"),
        ),
        (
            vec!["--schema".to_string(), "mysql".to_string()],
            "mysql is a system schema".to_string(),
        ),
        (
            vec!["--schema".to_string(), format!("{schema}_nosuch")],
            format!("no schema {schema}_nosuch on the master"),
        ),
        (
            vec!["--table".to_string(), format!("{dotted}.t")],
            "more than one dot".to_string(),
        ),
        (
            vec!["--chunk-time-ms".to_string(), "0".to_string()],
            "chunkTimeMs must be at least 1".to_string(),
        ),
    ] {
        let mut full = vec!["check"];
        full.extend(args.iter().map(String::as_str));
        let (code, out, err) = ctl(&spec, &full);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(&why), "{args:?}: {err}");
    }

    // shardrepctl killed during a check: the service finishes the check
    // and goes on applying (no channel left held).
    let mut killed = running_check(sb, &spec, "100").await;
    killed.kill().unwrap();
    killed.wait().unwrap();
    wait_until(
        "the check to end",
        std::time::Duration::from_secs(60),
        || async {
            let s = ctl_ok(&spec, &["--json", "status", "--name", "check"]);
            (!s.contains("\"running\"")).then_some(())
        },
    )
    .await
    .unwrap();
    master
        .query_drop(format!("INSERT INTO {q}.t VALUES (5000, 5000, 'after')"))
        .await
        .unwrap();
    wait_until(
        "the row after the check on the replica",
        std::time::Duration::from_secs(60),
        || {
            let q = q.clone();
            async move {
                let mut replica = sb.connect(TARGET).await;
                let n: Option<i64> = replica
                    .query_first(format!("SELECT n FROM {q}.t WHERE id = 5000"))
                    .await
                    .unwrap();
                n.filter(|&n| n == 5000)
            }
        },
    )
    .await
    .unwrap();
    assert!(ctl_ok(&spec, &["--json", "status"]).contains("\"ONLINE\""));

    // check --cancel: the running check stops, its shardrepctl exits 2.
    let (code, _, err) = ctl(&spec, &["check", "--cancel"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no consistency check is running"), "{err}");
    let follower = running_check(sb, &spec, "200").await;
    assert_eq!(ctl_ok(&spec, &["check", "--cancel"]), "cancelled : true\n");
    let done = follower.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("shardrepctl: the check was cancelled"),
        "{err}"
    );
    let last = ctl_ok(&spec, &["--json", "status", "--name", "check"]);
    assert!(last.contains("\"state\":\"cancelled\""), "{last}");

    let (code, _, err) = ctl(&spec, &["check", "--table", "nodot"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not schema.table"), "{err}");

    // Offline during a check: the check fails (at once, whether it waits
    // for the service or compares a table), saying the service stopped
    // applying.
    let follower = running_check(sb, &spec, "200").await;
    ctl_ok(&spec, &["offline"]);
    let done = follower.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("shardrepctl: the check could not finish: ")
            && err.contains("the service stopped applying (it went OFFLINE or failed)"),
        "{err}"
    );

    let (code, _, err) = ctl(&spec, &["check"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs the service ONLINE") && err.contains("OFFLINE:NORMAL"),
        "{err}"
    );
    // The refusal leaves the last check's result in place.
    let last = ctl_ok(&spec, &["--json", "status", "--name", "check"]);
    assert!(last.contains("\"state\":\"failed\""), "{last}");

    // OFFLINE:ERROR (a duplicate key made on the replica): refused too.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {q}.t VALUES (9000, 0, 'replica')"
        ))
        .await
        .unwrap();
    ctl_ok(&spec, &["online"]);
    master
        .query_drop(format!("INSERT INTO {q}.t VALUES (9000, 1, 'master')"))
        .await
        .unwrap();
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "120"],
    );
    let (code, _, err) = ctl(&spec, &["check"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs the service ONLINE") && err.contains("OFFLINE:ERROR"),
        "{err}"
    );

    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, &schemas).await;
    spec.remove(sb).await;
}
