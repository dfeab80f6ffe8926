//! Proves the test harness against the real sandbox: a row written on the
//! master reaches a native replica, compared exactly.
mod common;

use std::time::Duration;

use common::{quote_ident, sandbox, unique_schema, Server};
use mysql_async::prelude::Queryable;
use mysql_async::Value;

#[tokio::test]
async fn row_written_on_master_reaches_native_replica_exactly() {
    let sb = sandbox();
    let schema = unique_schema("harness");
    // A table name with a backtick proves identifiers are quoted everywhere.
    let table = "odd`name";
    let qualified = format!("{}.{}", quote_ident(&schema), quote_ident(table));
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!("CREATE DATABASE {}", quote_ident(&schema)))
        .await
        .unwrap();
    master
        .query_drop(format!(
            "CREATE TABLE {qualified} (id INT PRIMARY KEY, amount DECIMAL(20,6), \
             name VARCHAR(40) CHARACTER SET utf8mb4, note TEXT NULL)"
        ))
        .await
        .unwrap();
    master
        .exec_drop(
            format!("INSERT INTO {qualified} VALUES (?, ?, ?, ?), (?, ?, ?, ?)"),
            (
                1,
                "12345678901234.000001",
                "Zoë ☃",
                Value::NULL,
                2,
                "-0.500000",
                "b",
                "x",
            ),
        )
        .await
        .unwrap();

    common::wait_replica_caught_up(sb, Server::Replica(1), Duration::from_secs(30)).await;
    let rows =
        common::assert_table_equal(sb, Server::Master, Server::Replica(1), &schema, table).await;

    let bytes = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    assert_eq!(
        rows,
        vec![
            vec![
                bytes("1"),
                bytes("12345678901234.000001"),
                bytes("Zoë ☃"),
                Value::NULL
            ],
            vec![bytes("2"), bytes("-0.500000"), bytes("b"), bytes("x")],
        ]
    );
    master
        .query_drop(format!("DROP DATABASE {}", quote_ident(&schema)))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_difference_between_master_and_replica_is_detected() {
    let sb = sandbox();
    let schema = unique_schema("harness_diff");
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY, v INT); INSERT INTO {s}.t VALUES (1, 10)",
            s = quote_ident(&schema)
        ))
        .await
        .unwrap();
    common::wait_replica_caught_up(sb, Server::Replica(1), Duration::from_secs(30)).await;
    // Change the replica alone, without binlogging it.
    let mut replica = sb.connect(Server::Replica(1)).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {}.t SET v = 11 WHERE id = 1",
            quote_ident(&schema)
        ))
        .await
        .unwrap();
    let schema_in_task = schema.clone();
    let compare = tokio::spawn(async move {
        common::assert_table_equal(
            sandbox(),
            Server::Master,
            Server::Replica(1),
            &schema_in_task,
            "t",
        )
        .await;
    });
    let outcome = compare.await;
    let panic = outcome.expect_err("the comparison must fail on a differing row");
    let message = panic.into_panic();
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("row 0 differs between master and replica1"),
        "got: {message}"
    );
    master
        .query_drop(format!("DROP DATABASE {}", quote_ident(&schema)))
        .await
        .unwrap();
}

#[tokio::test]
async fn wait_until_reports_its_deadline() {
    let err = common::wait_until(
        "a condition that never holds",
        Duration::from_millis(50),
        || async { None::<()> },
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        "timed out after 50ms waiting for a condition that never holds"
    );
    let got = common::wait_until("three polls", Duration::from_secs(5), {
        let mut polls = 0;
        move || {
            polls += 1;
            let n = polls;
            async move { (n >= 3).then_some(n) }
        }
    })
    .await
    .unwrap();
    assert_eq!(got, 3);
}
