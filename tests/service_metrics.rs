//! `[metrics] listen` (issue 19): `shardrep run` serves Prometheus text at
//! `/metrics`, scraped during a catch-up of a backlog on the sandbox
//! (replica 2) and once it is applied, each value checked against
//! `shardrepctl status`; an address in use stops the start with a clear
//! error.

mod common;

use std::io::{Read, Write};

use mysql_async::prelude::Queryable;

use common::service::{
    ctl, ctl_ok, master_position, stop_target_slave, wait_for_socket, ServiceSpec,
};
use common::{quote_ident, sandbox, unique_schema, wait_until, Server};

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body.
fn get(port: u16, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

/// The value of the sample `name{labels}` (labels as written after the
/// service label, e.g. `channel="0"`); `None` when absent.
fn sample(text: &str, service: &str, name: &str, labels: &str) -> Option<f64> {
    let labels = if labels.is_empty() {
        format!("service=\"{service}\"")
    } else {
        format!("{labels},service=\"{service}\"")
    };
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_a_catch_up_and_equal_status() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let schema = unique_schema("metrics");
    let q = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    // A backlog: 3,000 one-row transactions, then one of 3,000 rows.
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, n INT); \
             CREATE PROCEDURE {q}.fill() BEGIN DECLARE i INT DEFAULT 1; \
             WHILE i <= 3000 DO INSERT INTO {q}.t VALUES (i, 0); SET i = i + 1; END WHILE; END"
        ))
        .await
        .unwrap();
    master
        .query_drop(format!("CALL {q}.fill(); UPDATE {q}.t SET n = n + 1"))
        .await
        .unwrap();
    let end = master_position(sb).await;
    let port = free_port();
    let mut spec = ServiceSpec::new("metrics", std::slice::from_ref(&schema), &start);
    spec.extra_toml = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let service = spec.service.clone();

    // During the catch-up: the endpoint answers, applied <= extracted.
    let (code, during) = get(port, "/metrics");
    assert_eq!(code, 200, "{during}");
    assert!(
        during.contains("# TYPE shardrep_transactions_applied_total counter"),
        "{during}"
    );
    let states: Vec<f64> = [
        "OFFLINE:NORMAL",
        "GOING-ONLINE:SYNCHRONIZING",
        "ONLINE",
        "GOING-OFFLINE",
        "OFFLINE:ERROR",
    ]
    .iter()
    .map(|s| {
        sample(
            &during,
            &service,
            "shardrep_state",
            &format!("state=\"{s}\""),
        )
        .unwrap()
    })
    .collect();
    assert_eq!(
        states.iter().sum::<f64>(),
        1.0,
        "one state at a time: {during}"
    );
    if let (Some(applied), Some(extracted)) = (
        sample(&during, &service, "shardrep_applied_seqno", ""),
        sample(&during, &service, "shardrep_extracted_seqno", ""),
    ) {
        assert!(applied <= extracted, "{during}");
    }

    // Caught up: every value equals status.
    wait_until(
        "the backlog applied",
        std::time::Duration::from_secs(180),
        || async {
            let s: serde_json::Value =
                serde_json::from_str(&ctl_ok(&spec, &["--json", "status"])).unwrap();
            (s["appliedLastEventId"] == end.as_str()).then_some(())
        },
    )
    .await
    .unwrap();
    // The lag thread looks at the master every 2 s.
    wait_until(
        "the master's end in status",
        std::time::Duration::from_secs(30),
        || async {
            let s: serde_json::Value =
                serde_json::from_str(&ctl_ok(&spec, &["--json", "status"])).unwrap();
            (s["bytesBehind"] == 0 && s["catchUpEtaSeconds"] == 0.0).then_some(())
        },
    )
    .await
    .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&ctl_ok(&spec, &["--json", "status"])).unwrap();
    let (code, after) = get(port, "/metrics");
    assert_eq!(code, 200);
    let m = |name: &str| sample(&after, &service, name, "");
    assert_eq!(m("shardrep_state"), None, "state is labelled");
    assert_eq!(
        sample(&after, &service, "shardrep_state", "state=\"ONLINE\""),
        Some(1.0)
    );
    for (metric, key) in [
        ("shardrep_applied_seqno", "appliedLastSeqno"),
        ("shardrep_extracted_seqno", "maximumStoredSeqNo"),
        ("shardrep_queue_first_seqno", "minimumStoredSeqNo"),
        (
            "shardrep_transactions_applied_total",
            "transactionsAppliedCount",
        ),
        (
            "shardrep_row_changes_applied_total",
            "rowChangesAppliedCount",
        ),
        ("shardrep_blocks_committed_total", "blocksCommittedCount"),
        ("shardrep_barriers_total", "serializationCount"),
        ("shardrep_dependency_waits_total", "dependencyWaitCount"),
        ("shardrep_transactions_dropped_total", "droppedCount"),
        ("shardrep_transactions_behind", "transactionsBehind"),
    ] {
        assert_eq!(
            m(metric),
            status[key].as_f64(),
            "{metric} against status {key}: {after}"
        );
    }
    // Exact figures of this backlog: 3,000 inserted rows and 3,000
    // updated ones, nothing behind.
    assert_eq!(m("shardrep_row_changes_applied_total"), Some(6000.0));
    assert_eq!(status["transactionsBehind"], 0);
    assert!(
        m("shardrep_transactions_applied_total").unwrap() >= 3003.0,
        "the DDL, 3,000 inserts and the update: {after}"
    );
    assert!(m("shardrep_blocks_committed_total").unwrap() >= 1.0);
    assert!(m("shardrep_queue_bytes").unwrap() > 0.0);
    // The channels' applied seqnos and counts, as `status --name channels`.
    let channels: serde_json::Value =
        serde_json::from_str(&ctl_ok(&spec, &["--json", "status", "--name", "channels"])).unwrap();
    let mut counted = 0.0;
    for c in channels.as_array().unwrap() {
        let label = format!("channel=\"{}\"", c["channel"]);
        assert_eq!(
            sample(&after, &service, "shardrep_channel_applied_seqno", &label),
            c["appliedLastSeqno"].as_f64(),
            "{label}: {after}"
        );
        let n = sample(
            &after,
            &service,
            "shardrep_channel_transactions_applied_total",
            &label,
        )
        .unwrap();
        assert_eq!(Some(n), c["appliedCount"].as_f64(), "{label}");
        counted += n;
    }
    assert_eq!(Some(counted), m("shardrep_transactions_applied_total"));
    assert_eq!(m("shardrep_binlog_bytes_behind"), Some(0.0));
    assert_eq!(
        status["masterBinlogEnd"].as_str(),
        Some(end.as_str()),
        "the master's end is the applied position"
    );
    assert_eq!(
        m("shardrep_catch_up_eta_seconds"),
        status["catchUpEtaSeconds"].as_f64()
    );
    assert_eq!(
        status["masterGtidPos"].as_str().map(|g| !g.is_empty()),
        Some(true)
    );

    // Every metric the Grafana dashboard draws is served; the counters by
    // code are there at 0 before their first retry or error.
    for name in ["shardrep_retries_total", "shardrep_errors_total"] {
        assert_eq!(
            sample(&after, &service, name, "code=\"0\""),
            Some(0.0),
            "{after}"
        );
    }
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conf/grafana-shardrep.json"
    ))
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut drawn = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("shardrep_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                drawn.push(name);
            }
        }
    }
    drawn.sort();
    drawn.dedup();
    assert!(drawn.len() >= 15, "{drawn:?}");
    for name in drawn {
        assert!(
            after.contains(&format!("\n# TYPE {name} ")),
            "the dashboard draws {name}, not served: {after}"
        );
    }

    // Scrape parameters are ignored; another path is not found.
    assert_eq!(get(port, "/metrics?module=x").0, 200);
    assert_eq!(get(port, "/").0, 404);

    // The same address for a second service: refused at start, clearly.
    let mut second = ServiceSpec::new("metrics2", std::slice::from_ref(&schema), &start);
    second.extra_toml = spec.extra_toml.clone();
    let config = second.write_config(sb);
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .args(["run", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "metrics: cannot listen on 127.0.0.1:{port} ([metrics] listen): "
        )) && err.contains("in use"),
        "{err}"
    );
    assert!(!second.dir.join("queue").exists(), "nothing started");
    assert_eq!(ctl(&second, &["status"]).0, 2, "no control socket");

    assert!(process.terminate(), "shardrep stops cleanly on SIGTERM");
    common::service::drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}
