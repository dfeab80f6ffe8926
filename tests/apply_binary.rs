//! Fixed-length binary columns (BINARY(n), INET6, UUID) through the whole
//! pipeline, under each `binlog_row_metadata` level the master may run
//! ([`LEVELS`]: MariaDB's default `NO_LOG`, and `FULL`).
//!
//! The master logs BINARY(n) values without their trailing `0x00` bytes
//! (as it logs CHAR(n) without trailing spaces). With `NO_LOG` the binlog
//! cannot tell BINARY(n) from CHAR(n); the applier learns it from the
//! replica's column definitions and binds the value padded back to n
//! bytes, so that an UPDATE or DELETE finds a row whose key ends in zero
//! bytes. CHAR(n), in a multi-byte character set too, is never padded with
//! zeros. Each scenario ends with the replica equal to the master byte for
//! byte (every column compared as `HEX()`).
//!
//! The tests of this file change the master's global
//! `binlog_row_metadata`, so they take one lock and run one at a time (see
//! `common::row_metadata`).

mod common;

use mysql_async::prelude::Queryable;
use shardrep::config::{FilesSourceConfig, SourceEndpoint};
use shardrep::event::Change;
use shardrep::extractor::reader::{ExtractStart, Extractor};
use shardrep::position::{BinlogPosition, Seqno};
use shardrep::replicator::RunError;
use shardrep::scheduler::SchedulerError;

use common::row_metadata::{RowMetadata, LEVELS};
use common::service::{drop_everywhere, master_position, stop_target_slave, ServiceSpec, TARGET};
use common::{quote_ident, sandbox, unique_schema, Sandbox, Server};

static MASTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every row of `schema.table` on `server` with every column as `HEX()`
/// (NULL stays NULL), ordered by all of them.
async fn hex_rows(
    sb: &Sandbox,
    server: Server,
    schema: &str,
    table: &str,
) -> Vec<Vec<Option<String>>> {
    let mut conn = sb.connect(server).await;
    let columns: Vec<String> = conn
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        .await
        .unwrap();
    assert!(!columns.is_empty(), "{schema}.{table} not found");
    let hex: Vec<String> = columns
        .iter()
        .map(|c| format!("HEX({})", quote_ident(c)))
        .collect();
    let sql = format!(
        "SELECT {} FROM {}.{} ORDER BY {}",
        hex.join(", "),
        quote_ident(schema),
        quote_ident(table),
        (1..=hex.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.unwrap();
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<Option<String>, _>(i).unwrap())
                .collect()
        })
        .collect()
}

/// Asserts the replica's `schema.table` equals the master's, every column
/// compared as `HEX()`; returns the rows.
async fn assert_hex_equal(sb: &Sandbox, schema: &str, table: &str) -> Vec<Vec<Option<String>>> {
    let master = hex_rows(sb, Server::Master, schema, table).await;
    let replica = hex_rows(sb, TARGET, schema, table).await;
    assert_eq!(
        replica, master,
        "{schema}.{table}: the replica differs from the master (HEX of every column)"
    );
    master
}

/// The collation the binlog's TABLE_MAP gives each column of
/// `schema.table` (`None`: not logged), from the master's binlog files
/// after `start`.
async fn logged_charsets(sb: &Sandbox, start: &str, schema: &str, table: &str) -> Vec<Option<u16>> {
    let endpoint = SourceEndpoint::Files(FilesSourceConfig {
        binlog_dir: sb.dir.join("master").join("binlog"),
        binlog_index: None,
    });
    let start: BinlogPosition = start.parse().expect("FILE:POS");
    let mut extractor = Extractor::open(&endpoint, ExtractStart::File(start), Seqno(0), false)
        .expect("open the master's binlog");
    while let Some(txn) = extractor.next_transaction().await.expect("extract") {
        for change in &txn.changes {
            if let Change::Rows(rows) = change {
                let info = txn.table_of(rows);
                if info.schema == schema && info.table == table {
                    return info.columns.iter().map(|c| c.charset).collect();
                }
            }
        }
    }
    panic!("no rows event of {schema}.{table} in the master's binlog");
}

// A BINARY(16) primary key whose values end in zero bytes (one is all
// zeros), with a non-key BINARY(8), an INET6, a UUID and a CHAR(4) utf8mb4: rows
// inserted, updated one at a time and all at once (a merged update),
// a key changed, rows deleted. Under NO_LOG the binlog has no collations,
// under FULL it says binary (63) for BINARY, INET6 and UUID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_keys_ending_in_zero_bytes_are_updated_and_deleted() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    for level in LEVELS {
        let metadata = RowMetadata::set(sb, level).await;
        let schema = unique_schema(&format!("binkey_{level}"));
        let q = quote_ident(&schema);
        let start = master_position(sb).await;
        let mut master = sb.connect(Server::Master).await;
        for sql in [
            format!(
                "CREATE DATABASE {q}; CREATE TABLE {q}.k (id BINARY(16) PRIMARY KEY, v INT, \
                 b BINARY(8), ip INET6, u UUID, c CHAR(4) CHARACTER SET utf8mb4) ENGINE=InnoDB"
            ),
            format!(
                "INSERT INTO {q}.k VALUES \
                 (x'01', 1, x'ff', '::', '123e4567-e89b-12d3-a456-426614174000', 'é'), \
                 (x'00000000000000000000000000000000', 2, x'00', '1::', \
                  '00000000-0000-0000-0000-000000000000', 'ab  '), \
                 (x'0203040506070809000a0b0c0d0e0f00', 3, x'0102000300000000', '::1', NULL, NULL), \
                 (x'ffffffffffffffffffffffffffffffff', 4, NULL, NULL, \
                  'ffffffff-ffff-ffff-ffff-ffffffffff00', 'üüüü')"
            ),
            // One row at a time (plain UPDATEs), then every row at once.
            format!("UPDATE {q}.k SET v = 10 WHERE id = x'01000000000000000000000000000000'"),
            format!("UPDATE {q}.k SET b = x'0a00' WHERE id = x'00000000000000000000000000000000'"),
            format!("UPDATE {q}.k SET v = v + 100"),
            // A key ending in zeros changed to another.
            format!("UPDATE {q}.k SET id = x'05', ip = 'ff::' WHERE id = x'01000000000000000000000000000000'"),
            format!("DELETE FROM {q}.k WHERE id = x'0203040506070809000a0b0c0d0e0f00'"),
            format!(
                "INSERT INTO {q}.k VALUES (x'06', 6, x'0600', '6::', \
                 '00000000-0000-0000-0000-000000000600', 'é ')"
            ),
            format!("DELETE FROM {q}.k WHERE id = x'00000000000000000000000000000000'"),
            format!("UPDATE {q}.k SET c = 'xé' WHERE id = x'06000000000000000000000000000000'"),
        ] {
            master
                .query_drop(sql.as_str())
                .await
                .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
        }
        drop(master);
        let charsets = logged_charsets(sb, &start, &schema, "k").await;
        let expected = if level == "FULL" {
            vec![Some(63), None, Some(63), Some(63), Some(63), Some(45)]
        } else {
            vec![None; 6]
        };
        assert_eq!(charsets, expected, "{level}: the TABLE_MAP's collations");

        let spec = ServiceSpec::new("binkey", std::slice::from_ref(&schema), &start);
        spec.run_until_idle(sb)
            .unwrap_or_else(|e| panic!("{level}: the run fails: {e:?}"));
        let rows = assert_hex_equal(sb, &schema, "k").await;
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows,
            [
                vec![
                    s("05000000000000000000000000000000"),
                    s("6E"),
                    s("FF00000000000000"),
                    s("00FF0000000000000000000000000000"),
                    s("123E4567E89B12D3A456426614174000"),
                    s("C3A9"),
                ],
                vec![
                    s("06000000000000000000000000000000"),
                    s("6"),
                    s("0600000000000000"),
                    s("00060000000000000000000000000000"),
                    s("00000000000000000000000000000600"),
                    s("78C3A9"),
                ],
                vec![
                    s("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"),
                    s("68"),
                    None,
                    None,
                    s("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFF00"),
                    s("C3BCC3BCC3BCC3BC"),
                ],
            ],
            "{level}: the rows"
        );
        drop_everywhere(sb, &[schema]).await;
        spec.remove(sb).await;
        drop(metadata);
    }
}

/// Runs `statements` on the master, one at a time and in order.
async fn on_master(sb: &Sandbox, statements: &[String]) {
    let mut master = sb.connect(Server::Master).await;
    for sql in statements {
        master
            .query_drop(sql.as_str())
            .await
            .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
    }
}

// A table without a key, with a BINARY(4) column: its rows are found by
// every column (`<=>`), the BINARY one included, so its value must be
// padded too; two rows the master logs differently (x'61' and x'6100')
// are the same once padded, and both are updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_table_with_a_binary_column() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    for level in LEVELS {
        let metadata = RowMetadata::set(sb, level).await;
        let schema = unique_schema(&format!("binnokey_{level}"));
        let q = quote_ident(&schema);
        let start = master_position(sb).await;
        on_master(
            sb,
            &[
                format!(
                    "CREATE DATABASE {q}; CREATE TABLE {q}.n (b BINARY(4), n INT, \
                     c CHAR(3) CHARACTER SET utf8mb4) ENGINE=InnoDB"
                ),
                format!(
                    "INSERT INTO {q}.n VALUES (x'61', 1, 'a'), (x'6100', 1, 'a'), \
                     (x'00', 2, 'é'), (NULL, 3, 'x'), (x'61000062', 4, 'ü ')"
                ),
                format!("UPDATE {q}.n SET n = 11 WHERE b = x'61000000'"),
                format!("UPDATE {q}.n SET b = x'0700' WHERE b = x'00000000'"),
                format!("DELETE FROM {q}.n WHERE b = x'61000062'"),
                format!("UPDATE {q}.n SET c = 'éé' WHERE n = 11"),
            ],
        )
        .await;
        let spec = ServiceSpec::new("binnokey", std::slice::from_ref(&schema), &start);
        spec.run_until_idle(sb)
            .unwrap_or_else(|e| panic!("{level}: the run fails: {e:?}"));
        let rows = assert_hex_equal(sb, &schema, "n").await;
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows,
            [
                vec![None, s("3"), s("78")],
                vec![s("07000000"), s("2"), s("C3A9")],
                vec![s("61000000"), s("B"), s("C3A9C3A9")],
                vec![s("61000000"), s("B"), s("C3A9C3A9")],
            ],
            "{level}: the rows"
        );
        drop_everywhere(sb, &[schema]).await;
        spec.remove(sb).await;
        drop(metadata);
    }
}

// A composite primary key of a BINARY(6) and a CHAR(5) utf8mb4: the
// BINARY part is padded with zero bytes, the CHAR part never is (its
// trailing spaces are stripped by the master and the replica alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_key_of_binary_and_multibyte_char() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    for level in LEVELS {
        let metadata = RowMetadata::set(sb, level).await;
        let schema = unique_schema(&format!("bincomp_{level}"));
        let q = quote_ident(&schema);
        let start = master_position(sb).await;
        on_master(
            sb,
            &[
                format!(
                    "CREATE DATABASE {q}; CREATE TABLE {q}.c (b BINARY(6), c CHAR(5) \
                     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, v INT, PRIMARY KEY (b, c)) \
                     ENGINE=InnoDB"
                ),
                format!(
                    "INSERT INTO {q}.c VALUES (x'61', 'é', 1), (x'6102', 'é ', 2), \
                     (x'61', 'éé', 3), (x'', '€', 4), (x'00ff', 'a  ', 5), (x'62', '', 6)"
                ),
                format!("UPDATE {q}.c SET v = 10 WHERE b = x'610000000000' AND c = 'é'"),
                format!("UPDATE {q}.c SET v = v + 100 WHERE b <> x'620000000000'"),
                format!("UPDATE {q}.c SET c = '€€' WHERE b = x'000000000000' AND c = '€'"),
                format!("UPDATE {q}.c SET b = x'0100' WHERE b = x'00ff00000000'"),
                format!("DELETE FROM {q}.c WHERE b = x'610000000000' AND c = 'éé'"),
                format!("DELETE FROM {q}.c WHERE b = x'620000000000'"),
            ],
        )
        .await;
        let spec = ServiceSpec::new("bincomp", std::slice::from_ref(&schema), &start);
        spec.run_until_idle(sb)
            .unwrap_or_else(|e| panic!("{level}: the run fails: {e:?}"));
        let rows = assert_hex_equal(sb, &schema, "c").await;
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows,
            [
                vec![s("000000000000"), s("E282ACE282AC"), s("68")],
                vec![s("010000000000"), s("61"), s("69")],
                vec![s("610000000000"), s("C3A9"), s("6E")],
                vec![s("610200000000"), s("C3A9"), s("66")],
            ],
            "{level}: the rows"
        );
        drop_everywhere(sb, &[schema]).await;
        spec.remove(sb).await;
        drop(metadata);
    }
}

// A row missing on the replica: the service stops with 1032 naming the
// key values it matched on, in hex as bound (padded), and does not claim
// that the replica diverged as a certainty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_binary_row_names_the_values_matched_on() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    stop_target_slave(sb).await;
    let metadata = RowMetadata::set(sb, "NO_LOG").await;
    let schema = unique_schema("binmiss");
    let q = quote_ident(&schema);
    let start = master_position(sb).await;
    on_master(
        sb,
        &[format!(
            "CREATE DATABASE {q}; \
                 CREATE TABLE {q}.k (id BINARY(4) PRIMARY KEY, v INT) ENGINE=InnoDB; \
                 INSERT INTO {q}.k VALUES (x'01', 1), (x'02', 2)"
        )],
    )
    .await;
    let mut spec = ServiceSpec::new("binmiss", std::slice::from_ref(&schema), &start);
    // The values the SQL method binds are what this test reads.
    spec.method = Some("sql");
    spec.run_until_idle(sb).expect("first run");
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DELETE FROM {q}.k WHERE id = x'02000000'"
        ))
        .await
        .unwrap();
    on_master(
        sb,
        &[format!("UPDATE {q}.k SET v = 20 WHERE id = x'02000000'")],
    )
    .await;
    let error = match spec.run_until_idle(sb) {
        Err(RunError::Apply(SchedulerError::Apply(e))) => e,
        other => panic!("expected a missing-row error, got {other:?}"),
    };
    assert_eq!(error.code, 1032, "{error}");
    assert!(
        error.message.contains(&format!(
            "UPDATE of {q}.`k` matched 0 of 1 rows: the replica has no row with key `id` = 0x02000000 \
             (the values shardrep bound from the binlog's before image)"
        )),
        "the message names the values matched on: {error}"
    );
    assert!(
        error
            .message
            .contains("Either the replica has diverged from the master, or"),
        "the message does not claim divergence as certain: {error}"
    );
    drop_everywhere(sb, &[schema]).await;
    spec.remove(sb).await;
    drop(metadata);
}
