//! The consistency check's table comparison (issue 18) against the
//! sandbox's master and replica1: tables written on each server separately
//! (`sql_log_bin = 0`, so native replication carries nothing), identical
//! ones compare equal, and differences made on the replica are each
//! reported with their table, key and columns, whatever chunk they fall in.

mod common;

use common::{quote_ident, sandbox, unique_schema, Server};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use shardrep::check::{check_table, CheckOptions, TablePlan, TableReport};

/// Runs `sql` (statements separated by `;`) on `conn` without logging it.
async fn run(conn: &mut Conn, sql: &str) {
    conn.query_drop(format!("SET SESSION sql_log_bin = 0; {sql}"))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The same SQL on the master and the replica.
async fn both(master: &mut Conn, replica: &mut Conn, sql: &str) {
    run(master, sql).await;
    run(replica, sql).await;
}

async fn check(
    master: &mut Conn,
    replica: &mut Conn,
    schema: &str,
    table: &str,
    chunk_rows: u64,
) -> (TablePlan, TableReport) {
    let plan = TablePlan::read(master, schema, table).await.unwrap();
    let options = CheckOptions {
        chunk_rows,
        ..CheckOptions::default()
    };
    let mut seen = 0;
    let report = check_table(master, replica, &plan, &options, |p| {
        assert_eq!(p.chunks, seen + 1, "progress after each chunk");
        seen = p.chunks;
        true
    })
    .await
    .unwrap();
    (plan, report)
}

/// What shows a write on the master: its binlog file and size, its GTID
/// position and the bytes it wrote to its binlog since it started.
async fn master_writes(master: &mut Conn) -> (String, u64, String, String) {
    let (file, size): (String, u64) = master
        .query_first("SHOW MASTER STATUS")
        .await
        .unwrap()
        .map(|(f, s, _, _): (String, u64, Option<String>, Option<String>)| (f, s))
        .unwrap();
    let (gtid, written): (String, String) = master
        .query_first(
            "SELECT @@gtid_binlog_pos, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'BINLOG_BYTES_WRITTEN')",
        )
        .await
        .unwrap()
        .unwrap();
    (file, size, gtid, written)
}

fn shown(report: &TableReport) -> Vec<String> {
    report
        .differences
        .iter()
        .map(|d| d.to_string().replacen(&format!("{}.", d.schema), "", 1))
        .collect()
}

#[tokio::test]
async fn differences_are_named_by_table_key_and_column() {
    let sb = sandbox();
    let schema = unique_schema("check_diff");
    let q = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(Server::Replica(1)).await;
    both(
        &mut master,
        &mut replica,
        &format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.typed (id INT PRIMARY KEY, i INT, d DECIMAL(12,4), f FLOAT, \
               dt DATETIME(6), b BLOB, s VARCHAR(20) NULL, p VARCHAR(20) COLLATE utf8mb4_general_ci, \
               g INT AS (i * 2) VIRTUAL, gs INT AS (i + 1) STORED); \
             INSERT INTO {q}.typed (id, i, d, f, dt, b, s, p) \
               SELECT seq, seq, seq / 7, seq / 3, '2026-01-02 03:04:05.123456' + INTERVAL seq SECOND, \
                 UNHEX(REPEAT('00ff', seq)), IF(seq % 2, NULL, ''), CONCAT('p', seq) \
               FROM {q}.seq_1_to_40"
        ),
    )
    .await;
    let (plan, same) = check(&mut master, &mut replica, &schema, "typed", 7).await;
    assert_eq!(
        plan.columns,
        ["id", "i", "d", "f", "dt", "b", "s", "p", "gs"],
        "VIRTUAL g left out"
    );
    assert_eq!(same.progress.chunks, 6, "40 rows in chunks of 7");
    assert_eq!(same.progress.rows, 40);
    assert!(same.differences.is_empty(), "{:?}", same.differences);

    run(
        &mut replica,
        &format!(
            "UPDATE {q}.typed SET i = i + 1 WHERE id = 1; \
             UPDATE {q}.typed SET d = d + 0.0001 WHERE id = 8; \
             UPDATE {q}.typed SET f = f * 2 WHERE id = 15; \
             UPDATE {q}.typed SET dt = dt + INTERVAL 1 MICROSECOND WHERE id = 22; \
             UPDATE {q}.typed SET b = CONCAT(b, x'00') WHERE id = 29; \
             UPDATE {q}.typed SET s = '' WHERE id = 35; \
             UPDATE {q}.typed SET p = CONCAT(p, ' ') WHERE id = 36; \
             DELETE FROM {q}.typed WHERE id = 7; \
             INSERT INTO {q}.typed (id, i) VALUES (41, 0), (0, 0)"
        ),
    )
    .await;
    // The check reads the master with a user that may only SELECT, and
    // writes nothing there (the binlog and the GTID position stand still).
    let user = format!("ro_{}", std::process::id());
    run(
        &mut master,
        &format!(
            "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'ro-pass'; \
             GRANT SELECT ON {q}.* TO '{user}'@'127.0.0.1'"
        ),
    )
    .await;
    let opts = mysql_async::OptsBuilder::from_opts(sb.opts(Server::Master))
        .user(Some(user.clone()))
        .pass(Some("ro-pass"));
    let mut reader = Conn::new(opts).await.unwrap();
    let before = master_writes(&mut master).await;
    let (_, diff) = check(&mut reader, &mut replica, &schema, "typed", 7).await;
    let after = master_writes(&mut master).await;
    assert_eq!(before, after, "the check wrote to the master");
    drop(reader);
    run(&mut master, &format!("DROP USER '{user}'@'127.0.0.1'")).await;
    assert_eq!(
        shown(&diff),
        [
            "typed [id=1]: columns differ: i, gs",
            "typed [id=7]: missing on the replica",
            "typed [id=0]: extra row on the replica",
            "typed [id=8]: columns differ: d",
            "typed [id=15]: columns differ: f",
            "typed [id=22]: columns differ: dt",
            "typed [id=29]: columns differ: b",
            "typed [id=35]: columns differ: s",
            "typed [id=36]: columns differ: p",
            "typed [id=41]: extra row on the replica",
        ]
    );
    assert_eq!(diff.progress.differences, 10);
    run(&mut master, &format!("DROP DATABASE {q}")).await;
    run(&mut replica, &format!("DROP DATABASE {q}")).await;
}

#[tokio::test]
async fn composite_unique_and_keyless_tables() {
    let sb = sandbox();
    let schema = unique_schema("check_keys");
    let q = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(Server::Replica(1)).await;
    both(
        &mut master,
        &mut replica,
        &format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.`com``posite` (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)); \
             INSERT INTO {q}.`com``posite` SELECT seq DIV 5, CONCAT('k', seq % 5), seq FROM {q}.seq_0_to_49; \
             CREATE TABLE {q}.uniq (x INT NULL, y INT NOT NULL, z INT NOT NULL, v INT, \
               UNIQUE KEY ux (x), UNIQUE KEY uyz (y, z)); \
             INSERT INTO {q}.uniq SELECT NULL, seq % 3, seq, seq FROM {q}.seq_1_to_30; \
             CREATE TABLE {q}.keyless (v INT, w TEXT); \
             INSERT INTO {q}.keyless SELECT seq % 4, 'same' FROM {q}.seq_1_to_20; \
             CREATE TABLE {q}.dups (v INT, w TEXT)"
        ),
    )
    .await;
    // Duplicate rows: {a, a, b} on the master, {b, c, c} on the replica,
    // whose XORs of row hashes are equal (b); the sum tells them apart.
    run(
        &mut master,
        &format!("INSERT INTO {q}.dups VALUES (1, 'a'), (1, 'a'), (2, 'b')"),
    )
    .await;
    run(
        &mut replica,
        &format!("INSERT INTO {q}.dups VALUES (2, 'b'), (3, 'c'), (3, 'c')"),
    )
    .await;
    let (_, d) = check(&mut master, &mut replica, &schema, "dups", 4).await;
    assert_eq!(
        shown(&d),
        [
            "dups: the table differs (3 rows on the master, 3 on the replica); it has no \
          primary key or NOT NULL unique key, so the rows cannot be named"
        ]
    );
    for table in ["com`posite", "uniq", "keyless"] {
        let (_, r) = check(&mut master, &mut replica, &schema, table, 4).await;
        assert!(r.differences.is_empty(), "{table}: {:?}", r.differences);
    }
    let (plan, _) = check(&mut master, &mut replica, &schema, "uniq", 4).await;
    let key = plan.key.unwrap();
    assert_eq!(
        (key.index.as_str(), key.columns),
        ("uyz", vec!["y".to_string(), "z".to_string()]),
        "ux has NULLs"
    );

    run(
        &mut replica,
        &format!(
            "UPDATE {q}.`com``posite` SET v = -1 WHERE a = 3 AND b = 'k2'; \
             DELETE FROM {q}.`com``posite` WHERE a = 9 AND b = 'k4'; \
             UPDATE {q}.uniq SET v = 0 WHERE y = 2 AND z = 17; \
             UPDATE {q}.keyless SET w = 'other' WHERE v = 1 LIMIT 1"
        ),
    )
    .await;
    let (_, c) = check(&mut master, &mut replica, &schema, "com`posite", 4).await;
    assert_eq!(
        shown(&c),
        [
            "`com``posite` [a=3, b=k2]: columns differ: v",
            "`com``posite` [a=9, b=k4]: missing on the replica",
        ]
    );
    let (_, u) = check(&mut master, &mut replica, &schema, "uniq", 4).await;
    assert_eq!(shown(&u), ["uniq [y=2, z=17]: columns differ: v"]);
    let (_, k) = check(&mut master, &mut replica, &schema, "keyless", 4).await;
    assert_eq!(k.progress.chunks, 1);
    assert_eq!(
        shown(&k),
        [
            "keyless: the table differs (20 rows on the master, 20 on the replica); it has no \
          primary key or NOT NULL unique key, so the rows cannot be named"
        ]
    );
    run(&mut master, &format!("DROP DATABASE {q}")).await;
    run(&mut replica, &format!("DROP DATABASE {q}")).await;
}

#[tokio::test]
async fn a_million_row_table_in_chunks_finds_its_one_changed_row() {
    let sb = sandbox();
    let schema = unique_schema("check_big");
    let q = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(Server::Replica(1)).await;
    both(
        &mut master,
        &mut replica,
        &format!(
            "CREATE DATABASE {q}; \
             CREATE TABLE {q}.sbtest1 (id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60), KEY (k)); \
             INSERT INTO {q}.sbtest1 SELECT seq, seq % 1000, REPEAT(CHAR(48 + seq % 10), 119), \
               REPEAT('x', 59) FROM {q}.seq_1_to_1000000"
        ),
    )
    .await;
    run(
        &mut replica,
        &format!("UPDATE {q}.sbtest1 SET pad = 'y' WHERE id = 777777"),
    )
    .await;
    let (_, report) = check(&mut master, &mut replica, &schema, "sbtest1", 10_000).await;
    // 100 full chunks, then the open-ended one after the master's last
    // key (empty here; it would hold rows only the replica has).
    assert_eq!(report.progress.chunks, 101);
    assert_eq!(report.progress.rows, 1_000_000);
    assert_eq!(shown(&report), ["sbtest1 [id=777777]: columns differ: pad"]);
    run(&mut master, &format!("DROP DATABASE {q}")).await;
    run(&mut replica, &format!("DROP DATABASE {q}")).await;
}
