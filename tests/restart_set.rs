//! The restart rows record exactly which seqnos are committed (issue 16,
//! point 3): each row's `low_water` (every seqno up to it done) and
//! `committed_above` (what its channel committed above it). A restart
//! applies exactly the seqnos no row records, whatever channel committed
//! what, and out-of-order commits (gaps) included:
//! - rows edited into out-of-order commits by two channels, with the
//!   replica's data made to match: the restart applies exactly the missing
//!   seqnos (no 1062), every table equal to the master's, and a clean stop
//!   leaves every row at one seqno with empty sets, under `parallelism =
//!   "shard"` and `"row"`;
//! - a restart table of an older shardrep (no `low_water` and
//!   `committed_above`): read as such, upgraded, resumed; rows at one seqno
//!   resume there, rows at different seqnos by the legacy rule (each
//!   channel skips through its own row), refused under row parallelism;
//! - a malformed `committed_above`, or one naming a seqno above its row,
//!   stops the start (OFFLINE:ERROR) naming the channel and the text, the
//!   table unchanged.

mod common;

use mysql_async::prelude::Queryable;

use common::service::{
    ctl, master_position, status, stop_target_slave, wait_for_socket, ServiceSpec, TARGET,
};
use common::{assert_table_equal, quote_ident, sandbox, unique_schema, Sandbox, Server};
use shardrep::applier::restart::{self, LowWater};
use shardrep::position::Seqno;
use shardrep::queue::{QueueOptions, TransactionQueue};
use shardrep::shard::{hash_channel, ChannelAssignment};

/// Tests of this file use replica 2 ([`TARGET`]) and number the master's
/// transactions: one at a time.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One restart row as stored: `channel, seqno, low_water, committed_above`.
type Stored = (u16, i64, Option<i64>, String);

async fn stored_rows(conn: &mut mysql_async::Conn, spec: &ServiceSpec) -> Vec<Stored> {
    conn.query(format!(
        "SELECT channel, seqno, low_water, committed_above FROM {}.restart_position \
         ORDER BY channel",
        quote_ident(&spec.catalog())
    ))
    .await
    .unwrap()
}

async fn on(sb: &Sandbox, server: Server, sql: &str) {
    sb.connect(server).await.query_drop(sql).await.unwrap();
}

/// Two shards `a` and `b` on different channels, each with `t (id INT
/// PRIMARY KEY, v INT)`, applied by a 2-channel service up to a clean
/// stop; returns the spec, the shards and the seqno every row is at.
async fn two_shards(sb: &Sandbox, label: &str) -> (ServiceSpec, [String; 2], i64) {
    stop_target_slave(sb).await;
    let a = unique_schema(&format!("{label}_a"));
    let b = std::iter::repeat_with(|| unique_schema(&format!("{label}_b")))
        .find(|b| hash_channel(b, 2) != hash_channel(&a, 2))
        .expect("a name on the other channel");
    let shards = [a, b];
    let start = master_position(sb).await;
    for s in &shards {
        let q = quote_ident(s);
        on(
            sb,
            Server::Master,
            &format!("CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT)"),
        )
        .await;
    }
    let mut spec = ServiceSpec::new(label, &shards, &start);
    // The rows are edited by hand into a state the replica's data is made
    // to match: under the master's GTIDs the replica's binlog would still
    // record the removed seqnos as committed (tests/gtid_topology.rs).
    spec.binlog_gtids = Some("own");
    spec.channels = 2;
    spec.run_until_idle(sb).expect("set-up run");
    let mut replica = sb.connect(TARGET).await;
    let rows = stored_rows(&mut replica, &spec).await;
    let at = rows[0].1;
    assert_eq!(
        rows,
        [
            (0, at, Some(at), String::new()),
            (1, at, Some(at), String::new())
        ],
        "a clean stop: every row at one seqno, low_water there, nothing above"
    );
    (spec, shards, at)
}

/// Inserts `(k, 10k)` for k in `ks` on the master, one transaction each,
/// into shard `a` for odd k and `b` for even k.
async fn insert_each(sb: &Sandbox, shards: &[String; 2], ks: impl Iterator<Item = i64>) {
    let mut master = sb.connect(Server::Master).await;
    for k in ks {
        let shard = &shards[usize::from(k % 2 == 0)];
        master
            .query_drop(format!(
                "INSERT INTO {}.t VALUES ({k}, {})",
                quote_ident(shard),
                k * 10
            ))
            .await
            .unwrap();
    }
}

/// Checks that the queue holds `ks` at seqnos `at + k` (the master wrote
/// nothing else meanwhile), each of its shard.
fn assert_numbering(spec: &ServiceSpec, shards: &[String; 2], at: i64, ks: &[i64]) {
    let mut options = QueueOptions::new(spec.dir.join("queue"));
    options.read_only = true;
    let queue = TransactionQueue::open(options).unwrap();
    for k in ks {
        let txn = queue
            .get(Seqno((at + k) as u64))
            .unwrap()
            .unwrap_or_else(|| panic!("seqno {} in the queue", at + k));
        assert_eq!(
            txn.shard,
            shards[usize::from(k % 2 == 0)],
            "seqno {}",
            at + k
        );
    }
}

async fn assert_shards_equal(sb: &Sandbox, shards: &[String; 2]) {
    for s in shards {
        assert_table_equal(sb, Server::Master, TARGET, s, "t").await;
    }
}

async fn drop_all(sb: &Sandbox, spec: &ServiceSpec, shards: &[String; 2]) {
    common::service::drop_everywhere(sb, shards).await;
    spec.remove(sb).await;
}

/// Rows edited into out-of-order commits (two channels, gaps between
/// them), the replica's data made to match: the restart applies exactly
/// the seqnos neither row records, among them one below the row of the
/// channel it runs on (the row keeps its position), and no other; with
/// each shard on its channel, and with row parallelism (any channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_applies_exactly_the_seqnos_no_row_records() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    for parallelism in ["shard", "row"] {
        exactly_the_missing_seqnos(sb, parallelism).await;
    }
}

async fn exactly_the_missing_seqnos(sb: &'static Sandbox, parallelism: &'static str) {
    let (mut spec, shards, at) = two_shards(sb, "rset").await;
    spec.parallelism = parallelism;
    insert_each(sb, &shards, 1..=10).await;
    spec.run_until_idle(sb).expect("all ten applied");
    assert_numbering(&spec, &shards, at, &(1..=10).collect::<Vec<_>>());

    // As if channel 0 had committed 4, 6 and 7 with everything up to 2
    // done, and channel 1 committed 5 with everything up to 1 done, when
    // the service was killed: 3, 8, 9 and 10 are not committed.
    let s = |k: i64| at + k;
    let table = format!("{}.restart_position", quote_ident(&spec.catalog()));
    let mut replica = sb.connect(TARGET).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; \
             UPDATE {table} SET seqno = {}, low_water = {}, committed_above = '{},{}-{}' \
             WHERE channel = 0; \
             UPDATE {table} SET seqno = {}, low_water = {}, committed_above = '{}' \
             WHERE channel = 1",
            s(7),
            s(2),
            s(4),
            s(6),
            s(7),
            s(5),
            s(1),
            s(5)
        ))
        .await
        .unwrap();
    for k in [3, 8, 9, 10] {
        let shard = &shards[usize::from(k % 2 == 0)];
        replica
            .query_drop(format!(
                "SET SESSION sql_log_bin = 0; DELETE FROM {}.t WHERE id = {k}",
                quote_ident(shard)
            ))
            .await
            .unwrap();
    }
    // The edited rows as the service reads them.
    let read = restart::read(&mut replica, &spec.catalog()).await.unwrap();
    let recovery = restart::recover(&read).unwrap();
    assert_eq!(recovery.base(), Some(Seqno(s(2) as u64)));
    assert_eq!(
        recovery.committed().to_string(),
        format!("{}-{}", s(4), s(7))
    );

    let report = spec
        .run_until_idle(sb)
        .expect("the restart applies the gaps");
    assert_eq!(
        report.dispatched, 4,
        "exactly 3, 8, 9 and 10 ({parallelism}): {report:?}"
    );
    assert_shards_equal(sb, &shards).await;
    let last = s(10);
    assert_eq!(
        stored_rows(&mut replica, &spec).await,
        [
            (0, last, Some(last), String::new()),
            (1, last, Some(last), String::new())
        ],
        "a clean stop after the gaps: one seqno, empty sets"
    );

    // Runs after it go on normally.
    insert_each(sb, &shards, 11..=14).await;
    let report = spec.run_until_idle(sb).expect("later run");
    assert_eq!(report.dispatched, 4);
    assert_shards_equal(sb, &shards).await;
    drop_all(sb, &spec, &shards).await;
}

/// A restart table of an older shardrep (no `low_water`, no
/// `committed_above`): read with nothing recorded, then upgraded by the
/// start. Rows at one seqno resume there. Rows at different seqnos
/// (consistent with the replica: the channel of shard `b` did not commit
/// its last two) resume by the legacy rule: every channel is sent what
/// follows the lowest row and skips what it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_an_older_shardrep_are_upgraded_and_resumed() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (mut spec, shards, at) = two_shards(sb, "rlegacy").await;
    // Legacy rows at different seqnos resume only under shard parallelism.
    spec.parallelism = "shard";
    let table = format!("{}.restart_position", quote_ident(&spec.catalog()));
    let mut replica = sb.connect(TARGET).await;
    let drop_columns = format!(
        "SET SESSION sql_log_bin = 0; \
         ALTER TABLE {table} DROP COLUMN low_water, DROP COLUMN committed_above"
    );
    replica.query_drop(&drop_columns).await.unwrap();
    let read = restart::read(&mut replica, &spec.catalog()).await.unwrap();
    assert_eq!(read.len(), 2);
    assert!(read
        .iter()
        .all(|r| r.low_water == LowWater::Unrecorded && r.seqno == Some(Seqno(at as u64))));

    insert_each(sb, &shards, 1..=4).await;
    let report = spec.run_until_idle(sb).expect("resumed at the equal rows");
    assert_eq!(report.dispatched, 4);
    assert_shards_equal(sb, &shards).await;
    let last = at + 4;
    assert_eq!(
        stored_rows(&mut replica, &spec).await,
        [
            (0, last, Some(last), String::new()),
            (1, last, Some(last), String::new())
        ],
        "upgraded: the columns are back and recorded"
    );

    // Rows at different seqnos: b's channel did not commit 6 and 8 (its
    // row at 4's seqno), a's channel committed 5 and 7.
    insert_each(sb, &shards, 5..=8).await;
    spec.run_until_idle(sb).expect("5 to 8");
    assert_numbering(&spec, &shards, at, &[5, 6, 7, 8]);
    let assignment = ChannelAssignment::from_config(&spec.config(sb).apply).unwrap();
    let (ca, cb) = (
        assignment.channel_of(&shards[0]).get(),
        assignment.channel_of(&shards[1]).get(),
    );
    assert_ne!(ca, cb);
    replica.query_drop(&drop_columns).await.unwrap();
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; \
             UPDATE {table} SET seqno = {} WHERE channel = {cb}; \
             DELETE FROM {}.t WHERE id IN (6, 8)",
            at + 4,
            quote_ident(&shards[1])
        ))
        .await
        .unwrap();
    // Under row parallelism a transaction may run on another channel than
    // before: such rows are refused, and left as they are.
    let legacy = restart::read(&mut replica, &spec.catalog()).await.unwrap();
    let mut row_spec = spec.clone();
    row_spec.parallelism = "row";
    let error = row_spec.run_until_idle(sb).unwrap_err().to_string();
    let seqnos = if ca == 0 {
        format!("{},{}", at + 8, at + 4)
    } else {
        format!("{},{}", at + 4, at + 8)
    };
    assert_eq!(
        error,
        format!(
            "restart rows ({seqnos}) were written by an older shardrep (no low_water): they \
             record only each channel's last seqno, which is exact only when each shard always \
             runs on the same channel. Start with parallelism = \"shard\" and go offline \
             cleanly once (every row then records the committed set), then change it"
        )
    );
    assert_eq!(
        restart::read(&mut replica, &spec.catalog()).await.unwrap(),
        legacy
    );
    let report = spec.run_until_idle(sb).expect("resumed by the legacy rule");
    // 5 to 8 are sent; a's channel skips 5 and 7, b's applies 6 and 8.
    assert_eq!(report.dispatched, 4, "{report:?}");
    assert_shards_equal(sb, &shards).await;
    let last = at + 8;
    assert_eq!(
        stored_rows(&mut replica, &spec).await,
        [
            (0, last, Some(last), String::new()),
            (1, last, Some(last), String::new())
        ]
    );
    drop_all(sb, &spec, &shards).await;
}

/// A `committed_above` that is not seqno ranges, or that names a seqno
/// above its row's own: the start stops in OFFLINE:ERROR naming the
/// channel and the text, and the restart table is left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_committed_set_stops_the_start_naming_channel_and_text() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let (spec, shards, at) = two_shards(sb, "rbad").await;
    let catalog = spec.catalog();
    let table = format!("{}.restart_position", quote_ident(&catalog));
    let mut replica = sb.connect(TARGET).await;
    let cases = [
        (
            "5-3".to_string(),
            format!(
                "restart row of channel 1 ({catalog}.restart_position): committed_above \"5-3\" \
                 is not seqno ranges (e.g. 12,14-16): invalid seqno ranges \"5-3\": item \
                 \"5-3\": expected a range FIRST-LAST with FIRST below LAST"
            ),
        ),
        (
            format!("{}", at + 1),
            format!(
                "restart row of channel 1: committed_above \"{n}\" names seqno {n}, above the \
                 row's own seqno {at} (a channel records only the seqnos it committed, the \
                 highest in its seqno column): restore the row",
                n = at + 1
            ),
        ),
    ];
    for (text, expected) in cases {
        replica
            .query_drop(format!(
                "SET SESSION sql_log_bin = 0; \
                 UPDATE {table} SET committed_above = '{text}' WHERE channel = 1"
            ))
            .await
            .unwrap();
        let edited = stored_rows(&mut replica, &spec).await;
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        let (code, out, err) = ctl(
            &spec,
            &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "60"],
        );
        assert_eq!(code, 0, "{out}{err}");
        let s = status(&spec);
        let pending = s["pendingError"].as_str().unwrap_or_default();
        assert!(pending.starts_with(&expected), "{s}");
        assert!(process.terminate());
        assert_eq!(stored_rows(&mut replica, &spec).await, edited);
    }
    // Repaired, the service starts.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {table} SET committed_above = ''"
        ))
        .await
        .unwrap();
    insert_each(sb, &shards, 1..=2).await;
    let report = spec.run_until_idle(sb).expect("repaired");
    assert_eq!(report.dispatched, 2);
    assert_shards_equal(sb, &shards).await;
    drop_all(sb, &spec, &shards).await;
}
