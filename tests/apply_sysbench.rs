//! A sharded catch-up: sysbench `oltp_read_write` (`--index-updates=4
//! --non-index-updates=2`) over 8 schemas runs on the sandbox master while
//! replica 2 is stopped; shardrep then applies the whole backlog (the
//! schemas' creation, `sysbench prepare` and the load) with 8 channels,
//! once with block commit on and once with it off. Every table ends
//! identical to the master's: equal CHECKSUM TABLE and equal rows.
//!
//! Needs `sysbench` on the PATH (`.ci/run` installs it).

mod common;

use std::process::Command;

use mysql_async::prelude::Queryable;

use common::service::{drop_everywhere, master_position, stop_target_slave, ServiceSpec, TARGET};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};

/// Runs sysbench `oltp_read_write` with `args` against `schema` on the
/// master; panics with its output when it fails.
fn sysbench(sb: &Sandbox, schema: &str, args: &[&str]) -> std::process::Child {
    Command::new("sysbench")
        .arg("oltp_read_write")
        .arg("--db-driver=mysql")
        .arg(format!("--mysql-host={}", sb.host))
        .arg(format!("--mysql-port={}", sb.port(Server::Master)))
        .arg(format!("--mysql-user={}", sb.user))
        .arg(format!("--mysql-password={}", sb.password))
        .arg(format!("--mysql-db={schema}"))
        .arg("--tables=1")
        .arg("--table-size=1000")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sysbench is installed (apt-get install -y sysbench)")
}

fn wait_all(children: Vec<std::process::Child>) {
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "sysbench failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

async fn checksums(sb: &Sandbox, server: Server, schemas: &[String]) -> Vec<(String, i64)> {
    let mut conn = sb.connect(server).await;
    let mut out = Vec::new();
    for s in schemas {
        let row: Option<(String, Option<i64>)> = conn
            .query_first(format!("CHECKSUM TABLE {}.sbtest1", quote_ident(s)))
            .await
            .unwrap();
        let (table, sum) = row.unwrap();
        out.push((table, sum.expect("the table exists")));
    }
    out
}

async fn assert_identical(sb: &Sandbox, schemas: &[String]) {
    let master = checksums(sb, Server::Master, schemas).await;
    let replica = checksums(sb, TARGET, schemas).await;
    assert_eq!(master, replica, "CHECKSUM TABLE differs");
    for s in schemas {
        assert_table_equal(sb, Server::Master, TARGET, s, "sbtest1").await;
    }
}

// Block commit on (100 transactions a commit) and off (1), 8 channels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_over_8_schemas_catches_up_identical_with_and_without_block_commit() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let schemas: Vec<String> = (1..=8)
        .map(|i| unique_schema(&format!("sb{i:02}")))
        .collect();
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    for s in &schemas {
        master
            .query_drop(format!("CREATE DATABASE {}", quote_ident(s)))
            .await
            .unwrap();
    }
    wait_all(
        schemas
            .iter()
            .map(|s| sysbench(sb, s, &["prepare"]))
            .collect(),
    );
    wait_all(
        schemas
            .iter()
            .map(|s| {
                sysbench(
                    sb,
                    s,
                    &[
                        "--threads=1",
                        // A fixed load, whatever the machine's speed.
                        "--events=150",
                        "--time=0",
                        "--index-updates=4",
                        "--non-index-updates=2",
                        "run",
                    ],
                )
            })
            .collect(),
    );

    for block in [100, 1] {
        let mut spec = ServiceSpec::new(&format!("sysb{block}_"), &schemas, &start);
        spec.channels = 8;
        spec.block = block;
        spec.sync_interval = 1000;
        // Block commit on: through the replica's Unix socket; off: TCP.
        spec.replica_socket = block > 1;
        let report = spec.run_until_idle(sb).expect("catch-up succeeds");
        eprintln!(
            "block commit {block}: {} transactions in {:.2} s ({:.0}/s), {} barriers",
            report.dispatched,
            report.elapsed.as_secs_f64(),
            report.dispatched as f64 / report.elapsed.as_secs_f64(),
            report.serializations
        );
        // 8 × (CREATE DATABASE, prepare, 150 read-write transactions).
        assert!(report.dispatched > 8 * 150, "{report:?}");
        assert_eq!(report.serializations, 0, "one schema per transaction");
        let seqnos: Vec<_> = report.restart_rows.iter().map(|r| r.seqno).collect();
        assert!(seqnos.iter().all(|s| *s == seqnos[0]), "{seqnos:?}");
        assert_identical(sb, &schemas).await;
        // Start the next mode from scratch on the replica.
        let mut replica = sb.connect(TARGET).await;
        for s in &schemas {
            replica
                .query_drop(format!(
                    "SET SESSION sql_log_bin = 0; DROP DATABASE {}",
                    quote_ident(s)
                ))
                .await
                .unwrap();
        }
        spec.remove(sb).await;
    }
    drop_everywhere(sb, &schemas).await;
}
