//! The GRANT statements `shardrep check-config --grants` prints are
//! enough: with accounts that hold only them, on a replica that runs
//! `read_only = ON` (so the conditional `READ_ONLY ADMIN` applies), the
//! service takes the replica over from native replication, applies a
//! catch-up with DDL, a foreign key and a MIXED session's temporary table
//! under the master's GTIDs, keeps `gtid_slave_pos`, runs `check`, goes
//! offline and hands back; native replication then goes on with
//! `Last_Errno` 0 and the tables equal the master's.

mod common;

use mysql_async::prelude::Queryable;

use common::service::{
    assert_native_ok, ctl, ctl_ok, native_from_now, status, wait_applied_to_master,
    wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

/// The accounts of the test: (user, password) on the master and on the
/// replica.
const SOURCE: (&str, &str) = ("shardrep_gsrc", "gsrc-pw");
const REPLICA: (&str, &str) = ("shardrep_grep", "grep-pw");

/// Drops the accounts and puts `read_only` back, even when the test
/// panics.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let sb = sandbox();
        for (server, sql) in [
            (
                Server::Master,
                format!(
                    "SET SESSION sql_log_bin = 0; DROP USER IF EXISTS '{}'@'127.0.0.1'",
                    SOURCE.0
                ),
            ),
            (
                TARGET,
                format!(
                    "SET GLOBAL read_only = OFF; SET SESSION sql_log_bin = 0; \
                     DROP USER IF EXISTS '{}'@'127.0.0.1'",
                    REPLICA.0
                ),
            ),
        ] {
            sb.exec_best_effort(server, &sql);
        }
    }
}

/// The statements of `script` (the `--grants` output) for the server
/// whose section begins with `header`: its `GRANT` lines, and the
/// conditional ones (`-- only if ...: GRANT ...`) when `conditional`.
fn grants_of(script: &str, header: &str, conditional: bool) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in script.lines() {
        if line.starts_with("-- On the ") {
            inside = line.starts_with(header);
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("GRANT ") {
            out.push(line.to_string());
        } else if let (true, Some((_, grant))) = (
            conditional && line.starts_with("-- only if "),
            line.split_once(": GRANT "),
        ) {
            out.push(format!("GRANT {grant}"));
        }
    }
    out
}

async fn run_as_root(sb: &Sandbox, server: Server, sql: &str) {
    sb.connect(server).await.query_drop(sql).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_grants_are_enough_for_a_takeover_catch_up_check_and_handback() {
    let sb = sandbox();
    let _restore = Restore;
    native_from_now(sb).await;
    let schema = unique_schema("grants");
    let q = quote_ident(&schema);
    run_as_root(
        sb,
        Server::Master,
        &format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.p (id INT PRIMARY KEY, n INT); \
             CREATE TABLE {q}.c (id INT PRIMARY KEY, pid INT, \
             FOREIGN KEY (pid) REFERENCES {q}.p (id)); INSERT INTO {q}.p VALUES (1, 0)"
        ),
    )
    .await;
    common::wait_replica_caught_up(sb, TARGET, std::time::Duration::from_secs(120)).await;
    for (server, (user, password)) in [(Server::Master, SOURCE), (TARGET, REPLICA)] {
        run_as_root(
            sb,
            server,
            &format!(
                "SET SESSION sql_log_bin = 0; DROP USER IF EXISTS '{user}'@'127.0.0.1'; \
                 CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'"
            ),
        )
        .await;
    }
    let mut spec = ServiceSpec::new("grants", std::slice::from_ref(&schema), "takeover");
    spec.source_account = Some((SOURCE.0.into(), SOURCE.1.into()));
    spec.replica_user = Some(REPLICA.0.into());
    spec.replica_password = Some(REPLICA.1.into());
    spec.binlog_gtids = Some("master");
    let _catalog = spec.drop_catalog_on_panic(sb);
    let config = spec.write_config(sb);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .args(["check-config", "--config"])
        .arg(&config)
        .arg("--grants")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let script = String::from_utf8(out.stdout).unwrap();
    let on_master = grants_of(&script, "-- On the master", false);
    let on_replica = grants_of(&script, "-- On the replica", true);
    assert_eq!(on_master.len(), 2, "{script}");
    assert_eq!(on_replica.len(), 6, "{script}");
    for (server, grants) in [(Server::Master, &on_master), (TARGET, &on_replica)] {
        for grant in grants {
            run_as_root(sb, server, &format!("SET SESSION sql_log_bin = 0; {grant}")).await;
        }
    }
    run_as_root(sb, TARGET, "SET GLOBAL read_only = ON").await;
    // A lagging replica: its SQL thread stopped, the backlog written.
    run_as_root(sb, TARGET, "STOP SLAVE SQL_THREAD").await;

    // The backlog: rows, DDL, a foreign key, a MIXED session's temporary
    // table.
    let mut master = sb.connect(Server::Master).await;
    for i in 2..=40 {
        master
            .query_drop(format!(
                "INSERT INTO {q}.p VALUES ({i}, {i}); INSERT INTO {q}.c VALUES ({i}, {i})"
            ))
            .await
            .unwrap();
    }
    master
        .query_drop(format!(
            "ALTER TABLE {q}.p ADD COLUMN note VARCHAR(10); \
             SET SESSION binlog_format = 'MIXED'; \
             CREATE TEMPORARY TABLE {q}.tmp (id INT PRIMARY KEY); \
             INSERT INTO {q}.tmp VALUES (3), (4); \
             UPDATE {q}.p SET note = 'tmp' WHERE id IN (SELECT id FROM {q}.tmp); \
             DROP TEMPORARY TABLE {q}.tmp; SET SESSION binlog_format = 'ROW'"
        ))
        .await
        .unwrap();
    drop(master);

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}\n{}", process.log_text());
    for table in ["p", "c"] {
        assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
    }
    let (code, out, err) = ctl(&spec, &["check", "--schema", &schema]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("identical: 2 tables"), "{out}{err}");
    ctl_ok(&spec, &["offline"]);
    ctl_ok(
        &spec,
        &["wait", "--state", "OFFLINE:NORMAL", "--timeout-secs", "60"],
    );
    // gtid_slave_pos kept at the applied position.
    let applied: String = sb
        .connect(Server::Master)
        .await
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let slave_pos: String = sb
        .connect(TARGET)
        .await
        .query_first("SELECT @@gtid_slave_pos")
        .await
        .unwrap()
        .unwrap();
    for gtid in applied.split(',').filter(|g| g.starts_with("0-")) {
        assert!(
            slave_pos.split(',').any(|g| g == gtid),
            "{slave_pos} {applied}"
        );
    }
    ctl_ok(&spec, &["handback", "--start-slave"]);
    run_as_root(
        sb,
        Server::Master,
        &format!("INSERT INTO {q}.p (id, n) VALUES (41, 41)"),
    )
    .await;
    assert_native_ok(sb).await;
    common::wait_replica_caught_up(sb, TARGET, std::time::Duration::from_secs(120)).await;
    for table in ["p", "c"] {
        assert_table_equal(sb, Server::Master, TARGET, &schema, table).await;
    }
    assert_eq!(status(&spec)["state"], "OFFLINE:NORMAL");
    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    spec.remove(sb).await;
    common::service::drop_everywhere(sb, &[schema]).await;
}
