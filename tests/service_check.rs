//! The service's consistency check (issue 18) against the sandbox: a
//! service applies to replica 2 (native replication stopped there) while
//! a writer changes the master; a check of the service's tables under that
//! load finds them identical (the two read views are taken at one point
//! of the stream), and a row changed by hand on the replica is reported.
//! A check while the service is offline is refused.
//!
//! One test: it owns replica 2 and the service.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use common::service::{master_position, stop_target_slave, ServiceSpec, TARGET};
use common::{quote_ident, sandbox, unique_schema, wait_until, Server};
use shardrep::check::CheckOptions;
use shardrep::replicator::check::{CheckRequest, CheckState, CheckStatus};
use shardrep::replicator::service::Service;
use shardrep::replicator::state::State;
use tokio::task::block_in_place as blocking;

async fn finished(service: &Service) -> CheckStatus {
    wait_until("the check to end", Duration::from_secs(300), || async {
        service
            .check_status()
            .filter(|s| s.state != CheckState::Running)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_under_load_finds_no_false_difference_and_names_a_real_one() {
    let sb = sandbox();
    stop_target_slave(sb).await;
    let start = master_position(sb).await;
    let schema = unique_schema("svc_check");
    let q = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.a (id INT PRIMARY KEY, n INT, s VARCHAR(40)); \
             CREATE TABLE {q}.b (k1 INT, k2 INT, v DECIMAL(10,2), PRIMARY KEY (k1, k2)); \
             INSERT INTO {q}.a SELECT seq, 0, CONCAT('row ', seq) FROM {q}.seq_1_to_3000; \
             INSERT INTO {q}.b SELECT seq DIV 10, seq % 10, seq / 4 FROM {q}.seq_1_to_2000"
        ))
        .await
        .unwrap();
    let spec = ServiceSpec::new("svccheck", std::slice::from_ref(&schema), &start);
    let _catalog = spec.drop_catalog_on_panic(sb);
    let service = blocking(|| Service::new(spec.config(sb), false));

    // Offline: refused, with the reason.
    let refused = blocking(|| service.start_check(CheckRequest::default())).unwrap_err();
    assert!(
        refused.to_string().contains("needs the service ONLINE")
            && refused.to_string().contains("OFFLINE:NORMAL"),
        "{refused}"
    );

    blocking(|| service.go_online(None, None)).unwrap();
    wait_until("ONLINE", Duration::from_secs(60), || async {
        (service.state() == State::Online).then_some(())
    })
    .await
    .unwrap();

    // A writer on the master during the check: single-row updates of
    // both tables, each its own transaction.
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (writing, q) = (writing.clone(), q.clone());
        let mut conn = sb.connect(Server::Master).await;
        tokio::spawn(async move {
            let mut i = 0u64;
            while writing.load(Ordering::Relaxed) {
                i += 1;
                conn.query_drop(format!(
                    "UPDATE {q}.a SET n = n + 1, s = CONCAT('w', {i}) WHERE id = {}; \
                     UPDATE {q}.b SET v = v + 1 WHERE k1 = {} AND k2 = {}",
                    1 + i * 7 % 3000,
                    i % 200,
                    i % 10
                ))
                .await
                .unwrap();
            }
            i
        })
    };
    // And DDL: a table created and dropped again, a new name each time,
    // which a check must never report as only on the replica.
    let churning = Arc::new(AtomicBool::new(true));
    let churn = {
        let (churning, q) = (churning.clone(), q.clone());
        let mut conn = sb.connect(Server::Master).await;
        tokio::spawn(async move {
            let mut i = 0u64;
            while churning.load(Ordering::Relaxed) {
                i += 1;
                conn.query_drop(format!(
                    "CREATE TABLE {q}.tmp_{i} (id INT PRIMARY KEY); DROP TABLE {q}.tmp_{i}"
                ))
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            i
        })
    };
    let request = CheckRequest {
        options: CheckOptions {
            chunk_rows: 250,
            ..CheckOptions::default()
        },
        catch_up_timeout: Duration::from_secs(120),
        ..CheckRequest::default()
    };
    // Table a write-locked on the replica: the check cannot read it, so
    // it is surely still running when it is asked for again (a check of
    // 5,000 rows can end before a second call on a fast machine).
    let mut locker = sb.connect(TARGET).await;
    let count_a = format!("SELECT COUNT(*) FROM {q}.a");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let n: Option<Option<u64>> = locker.query_first(count_a.as_str()).await.ok();
        if n.flatten() == Some(3000) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "table a not on the replica"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    locker
        .query_drop(format!("LOCK TABLES {q}.a WRITE"))
        .await
        .unwrap();
    blocking(|| service.start_check(request.clone())).unwrap();
    let again = blocking(|| service.start_check(request.clone()))
        .map_err(|e| e.to_string())
        .map(|()| service.check_status());
    assert!(
        again.as_ref().is_err_and(|e| e.contains("already running")),
        "a second check while one runs: {again:?}"
    );
    // The writes to a, stuck behind the lock, keep the service from
    // pausing or short of the master's snapshot: the check says it waits.
    let waiting = wait_until("the check to wait", Duration::from_secs(30), || async {
        service.check_status().and_then(|s| s.waiting_for)
    })
    .await
    .unwrap();
    assert!(
        waiting.starts_with("the service to apply up to mariadb-bin.")
            || waiting.starts_with("the service's scheduler to pause"),
        "{waiting}"
    );
    locker.query_drop("UNLOCK TABLES").await.unwrap();
    drop(locker);
    let under_load = finished(&service).await;
    writing.store(false, Ordering::Relaxed);
    churning.store(false, Ordering::Relaxed);
    let writes = writer.await.unwrap();
    let churned = churn.await.unwrap();
    assert!(churned > 0);
    assert_eq!(under_load.error, None);
    assert_eq!(under_load.state, CheckState::Identical, "{under_load:?}");
    // a and b; and a churned table when the master's listing met one
    // between its CREATE and DROP (on a loaded machine the pair can take
    // long enough): compared too, and never a difference.
    assert!(
        matches!((under_load.tables, under_load.tables_done), (2, 2) | (3, 3)),
        "{under_load:?}"
    );
    assert_eq!(under_load.rows, 5000);
    assert!(under_load.found.is_empty());
    assert!(
        writes > 10,
        "the load ran during the check ({writes} writes)"
    );

    // A row changed on the replica only, and a table only the replica has.
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {q}.b SET v = -1 WHERE k1 = 150 AND k2 = 3; \
             CREATE TABLE {q}.extra (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    blocking(|| service.start_check(request.clone())).unwrap();
    let found = finished(&service).await;
    assert_eq!(found.state, CheckState::Differences, "{found:?}");
    assert_eq!(found.differences, 2);
    assert_eq!(
        found.found,
        [
            format!("{schema}.extra: only on the replica (the master has no such table)"),
            format!("{schema}.b [k1=150, k2=3]: columns differ: v")
        ]
    );

    // A schema without tables: nothing to compare is a failure that says
    // so, never "identical".
    let empty = format!("{schema}_empty");
    let qe = quote_ident(&empty);
    master
        .query_drop(format!("CREATE DATABASE {qe}"))
        .await
        .unwrap();
    blocking(|| {
        service.start_check(CheckRequest {
            schemas: vec![empty.clone()],
            ..request
        })
    })
    .unwrap();
    let nothing = finished(&service).await;
    assert_eq!(nothing.state, CheckState::Failed);
    assert_eq!(
        nothing.error.as_deref(),
        Some(
            format!(
                "nothing to compare: the schemas named ({empty}) have no base table on the master"
            )
            .as_str()
        )
    );
    assert_eq!((nothing.tables, nothing.tables_done), (0, 0));
    master
        .query_drop(format!("DROP DATABASE {qe}"))
        .await
        .unwrap();

    blocking(|| {
        service.go_offline(false, None).unwrap();
        service.wait_until_stopped();
    });
    master
        .query_drop(format!("DROP DATABASE {q}"))
        .await
        .unwrap();
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {q}"
        ))
        .await
        .unwrap();
    spec.remove(sb).await;
}
