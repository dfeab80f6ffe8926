//! Native replication takeover and handback (`shardrep::replica`) against
//! the sandbox: replica 1 replicates natively from the master (GTID,
//! `slave_pos`); each test takes it over and/or hands it back, and leaves it
//! replicating natively again (`MASTER_USE_GTID = slave_pos`, running).
//!
//! The tests share the master and replica 1, so they run one at a time
//! (`LOCK`), and compare positions with the master's `SHOW MASTER STATUS`,
//! `@@gtid_binlog_pos` and `SHOW BINLOG EVENTS`, which only hold while no
//! other test writes.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shardrep::position::GtidPos;
use shardrep::replica::{
    check_master, check_replica, handback, slave_status, takeover, HandbackPoint, ReplicaError,
    RowImage, TakeoverPoint, UsingGtid,
};

use common::{
    assert_table_equal, quote_ident, sandbox, unique_schema, wait_replica_caught_up, Sandbox,
    Server,
};

const REPLICA: Server = Server::Replica(1);
const CATCH_UP: Duration = Duration::from_secs(60);

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Replica 1 back to native GTID replication, running, without error.
async fn restore_native(sb: &Sandbox) {
    let mut r = sb.connect(REPLICA).await;
    r.query_drop("STOP SLAVE; CHANGE MASTER TO MASTER_USE_GTID = slave_pos; START SLAVE")
        .await
        .expect("restore native replication");
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let s = slave_status(&mut r).await.unwrap().expect("configured");
    assert!(s.sql_running, "{s:?}");
    assert_eq!(s.using_gtid, UsingGtid::SlavePos);
    assert_eq!(s.last_errno, 0, "{s:?}");
}

/// The master's `SHOW MASTER STATUS` file and position.
async fn master_status(master: &mut Conn) -> (String, u64) {
    master
        .query_first("SHOW MASTER STATUS")
        .await
        .unwrap()
        .map(|row: Row| {
            (
                row.get::<String, _>(0).unwrap(),
                row.get::<u64, _>(1).unwrap(),
            )
        })
        .expect("binary logging on")
}

async fn gtid_binlog_pos(master: &mut Conn) -> String {
    master
        .query_first("SELECT @@GLOBAL.gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap()
}

/// `End_log_pos` of the last `Xid` event of `file`: the end position of the
/// last transaction there.
async fn last_xid_end(master: &mut Conn, file: &str) -> u64 {
    let rows: Vec<Row> = master
        .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
        .await
        .unwrap();
    rows.iter()
        .filter(|r| r.get::<String, _>("Event_type").as_deref() == Some("Xid"))
        .map(|r| r.get::<u64, _>("End_log_pos").unwrap())
        .next_back()
        .expect("an Xid event")
}

/// A schema with table `t (id INT PRIMARY KEY, v INT)` created on the master
/// (binlogged, so the replicas get it natively).
async fn create_schema(sb: &Sandbox, label: &str) -> String {
    let schema = unique_schema(label);
    let q = quote_ident(&schema);
    sb.connect(Server::Master)
        .await
        .query_drop(format!(
            "CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY, v INT)"
        ))
        .await
        .unwrap();
    schema
}

/// Transactions `from..to` on the master, one per id: an INSERT and an
/// UPDATE of the previous row.
async fn write(sb: &Sandbox, schema: &str, ids: std::ops::Range<i32>) {
    let q = quote_ident(schema);
    let mut m = sb.connect(Server::Master).await;
    for id in ids {
        m.query_drop(format!(
            "START TRANSACTION; INSERT INTO {q}.t VALUES ({id}, {id}); \
             UPDATE {q}.t SET v = v + 100 WHERE id = {prev}; COMMIT",
            prev = id - 1
        ))
        .await
        .unwrap();
    }
}

async fn drop_schema(sb: &Sandbox, schema: &str) {
    sb.connect(Server::Master)
        .await
        .query_drop(format!("DROP DATABASE {}", quote_ident(schema)))
        .await
        .unwrap();
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
}

async fn replica_status(sb: &Sandbox) -> shardrep::replica::SlaveStatus {
    slave_status(&mut sb.connect(REPLICA).await)
        .await
        .unwrap()
        .expect("replica 1 is configured")
}

// (a) Takeover of a running, caught-up replica returns exactly the master's
// position after the last transaction: SHOW MASTER STATUS, the End_log_pos
// of that transaction's Xid event, and @@gtid_binlog_pos. Taking over again
// returns the same point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_returns_the_position_after_the_last_applied_transaction() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "takeover").await;
    write(sb, &schema, 1..6).await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;

    let mut master = sb.connect(Server::Master).await;
    let (file, pos) = master_status(&mut master).await;
    let xid_end = last_xid_end(&mut master, &file).await;
    let gtid = gtid_binlog_pos(&mut master).await;
    assert_eq!(pos, xid_end, "the master's last event is the last Xid");

    let facts = check_master(&mut master).await.unwrap();
    assert_eq!(facts.server_id, 1);
    assert_eq!(facts.port, sb.port(Server::Master));
    assert_eq!(facts.row_image, RowImage::Full);
    assert_eq!(facts.binlog_checksum, "CRC32");
    assert_eq!(facts.gtid_domain_id, 0);
    assert_eq!(facts.newest_binlog(), file);
    assert_eq!(facts.gtid_binlog_pos.to_string(), gtid);

    let mut replica = sb.connect(REPLICA).await;
    let replica_facts = check_replica(&mut replica, &facts).await.unwrap();
    assert_eq!(replica_facts.server_id, 2);
    assert!(!replica_facts.read_only);
    assert_eq!(replica_facts.slave.master_port, sb.port(Server::Master));

    let point = takeover(&mut replica, &mut master, &facts).await.unwrap();
    assert_eq!(
        point,
        TakeoverPoint {
            file: file.clone(),
            pos,
            gtid_slave_pos: gtid.parse::<GtidPos>().unwrap(),
            using_gtid: UsingGtid::SlavePos,
            master_host: sb.host.clone(),
            master_port: sb.port(Server::Master),
        }
    );
    let s = replica_status(sb).await;
    assert!(!s.sql_running);
    assert_eq!(s.io_running, "No");

    // Idempotent: already stopped, same point; master writes meanwhile do
    // not move it.
    write(sb, &schema, 6..9).await;
    let again = takeover(&mut replica, &mut master, &facts).await.unwrap();
    assert_eq!(again, point);

    restore_native(sb).await;
    assert_table_equal(sb, Server::Master, REPLICA, &schema, "t").await;
    drop_schema(sb, &schema).await;
}

// (b) Takeover refuses a replica whose master is not the configured source
// (message names both addresses) and leaves its replication running; it
// refuses the master itself as a replica, and a server with no slave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_refuses_the_wrong_master_and_the_master_itself() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let (pm, p1, p2) = (
        sb.port(Server::Master),
        sb.port(REPLICA),
        sb.port(Server::Replica(2)),
    );
    let host = &sb.host;
    // Replica 2 (binlog on, ROW) posing as the configured source.
    let mut other = sb.connect(Server::Replica(2)).await;
    let other_facts = check_master(&mut other).await.unwrap();
    let mut replica = sb.connect(REPLICA).await;
    let err = takeover(&mut replica, &mut other, &other_facts)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{host}:{p1} replicates from {host}:{pm} (Master_Host/Master_Port of SHOW SLAVE \
             STATUS), but the configured source is {host}:{p2}; refusing to read the wrong master"
        )
    );
    assert!(replica_status(sb).await.sql_running, "replica 1 untouched");

    // A master connection that is not the checked master.
    let mut master = sb.connect(Server::Master).await;
    let err = takeover(&mut replica, &mut master, &other_facts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReplicaError::WrongMaster { expected, actual, .. }
            if expected.port == p2 && actual.port == pm),
        "{err}"
    );

    // The master itself as the replica.
    let facts = check_master(&mut master).await.unwrap();
    let mut master2 = sb.connect(Server::Master).await;
    let err = takeover(&mut master2, &mut master, &facts)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{host}:{pm} is the source master {host}:{pm} itself: both have server_id 1; \
             configure the replica's address in [replica]"
        )
    );

    // A server without native replication (the master, checked against
    // replica 2 as the source).
    let err = takeover(&mut master2, &mut other, &other_facts)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ReplicaError::NotConfigured {
            replica: shardrep::replica::Endpoint::new(host.clone(), pm)
        }
    );
    assert!(replica_status(sb).await.sql_running, "replica 1 untouched");
}

async fn set_global(sb: &Sandbox, assignment: &str) {
    sb.connect(Server::Master)
        .await
        .query_drop(format!("SET GLOBAL {assignment}"))
        .await
        .unwrap();
}

// (c) check_master refuses binlog_format STATEMENT, naming the setting,
// ROW or MIXED and the actual value, and accepts MIXED; it accepts and
// reports MINIMAL and NOBLOB row images.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_master_refuses_statement_format_and_reports_the_row_image() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let pm = sb.port(Server::Master);
    set_global(sb, "binlog_format = 'STATEMENT'").await;
    let result = check_master(&mut sb.connect(Server::Master).await).await;
    set_global(sb, "binlog_format = 'MIXED'").await;
    let mixed = check_master(&mut sb.connect(Server::Master).await).await;
    set_global(sb, "binlog_format = 'ROW'").await;
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:{pm}: binlog_format is STATEMENT, expected ROW or MIXED; statement format \
             replays unsafe statements as they are (SET GLOBAL binlog_format = 'ROW' and \
             binlog_format = ROW in the master's configuration)",
            sb.host
        )
    );
    assert_eq!(mixed.unwrap().row_image, RowImage::Full);
    for (image, expected) in [("MINIMAL", RowImage::Minimal), ("NOBLOB", RowImage::Noblob)] {
        set_global(sb, &format!("binlog_row_image = '{image}'")).await;
        let result = check_master(&mut sb.connect(Server::Master).await).await;
        set_global(sb, "binlog_row_image = 'FULL'").await;
        assert_eq!(result.unwrap().row_image, expected);
    }
    let facts = check_master(&mut sb.connect(Server::Master).await)
        .await
        .unwrap();
    assert_eq!(facts.row_image, RowImage::Full);
}

async fn last_errno_zero_and_equal(sb: &Sandbox, schema: &str, using: UsingGtid) {
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let s = replica_status(sb).await;
    assert!(s.sql_running, "{s:?}");
    assert_eq!(s.io_running, "Yes", "{s:?}");
    assert_eq!(s.last_errno, 0, "{s:?}");
    assert_eq!(s.last_sql_errno, 0, "{s:?}");
    assert_eq!(s.using_gtid, using);
    assert_table_equal(sb, Server::Master, REPLICA, schema, "t").await;
}

// (d) Takeover, more master writes, handback at the takeover point by
// file:pos and then by GTID: native replication applies exactly what it
// had not, Last_Errno 0, tables equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handback_at_the_takeover_point_by_file_pos_and_by_gtid() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "handback").await;
    write(sb, &schema, 1..4).await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let mut master = sb.connect(Server::Master).await;
    let facts = check_master(&mut master).await.unwrap();
    let mut replica = sb.connect(REPLICA).await;

    // By file:pos.
    let point = takeover(&mut replica, &mut master, &facts).await.unwrap();
    write(sb, &schema, 4..9).await;
    let back = HandbackPoint::from_takeover(&point);
    let report = handback(&mut replica, &back, false, true, None)
        .await
        .unwrap();
    assert_eq!(
        report.statements,
        vec![
            format!("SET GLOBAL gtid_slave_pos = '{}'", point.gtid_slave_pos),
            format!(
                "CHANGE MASTER TO MASTER_LOG_FILE = '{}', MASTER_LOG_POS = {}, MASTER_USE_GTID = no",
                point.file, point.pos
            ),
            "START SLAVE".to_owned(),
        ]
    );
    assert_eq!(report.status.master_port, sb.port(Server::Master));
    last_errno_zero_and_equal(sb, &schema, UsingGtid::No).await;

    // By GTID, from a replica that replicated by file:pos.
    let facts = check_master(&mut master).await.unwrap();
    let point = takeover(&mut replica, &mut master, &facts).await.unwrap();
    assert_eq!(point.using_gtid, UsingGtid::No);
    assert_eq!(
        point.gtid_slave_pos.to_string(),
        gtid_binlog_pos(&mut master).await
    );
    write(sb, &schema, 9..14).await;
    let report = handback(
        &mut replica,
        &HandbackPoint::from_takeover(&point),
        true,
        true,
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        report.statements,
        vec![
            format!("SET GLOBAL gtid_slave_pos = '{}'", point.gtid_slave_pos),
            "CHANGE MASTER TO MASTER_USE_GTID = slave_pos".to_owned(),
            "START SLAVE".to_owned(),
        ]
    );
    last_errno_zero_and_equal(sb, &schema, UsingGtid::SlavePos).await;
    drop_schema(sb, &schema).await;
    restore_native(sb).await;
}

/// Applies on replica 1, outside replication (`sql_log_bin = 0`, as a
/// shardrep channel with its own session), what `write` did on the master.
async fn apply_like_shardrep(sb: &Sandbox, schema: &str, ids: std::ops::Range<i32>) {
    let q = quote_ident(schema);
    let mut r = sb.connect(REPLICA).await;
    r.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
    for id in ids {
        r.query_drop(format!(
            "START TRANSACTION; INSERT INTO {q}.t VALUES ({id}, {id}); \
             UPDATE {q}.t SET v = v + 100 WHERE id = {prev}; COMMIT",
            prev = id - 1
        ))
        .await
        .unwrap();
    }
}

// (d, the shardrep case) After takeover the transactions are applied outside
// native replication; handback at the last transaction's end position (the
// End_log_pos of its Xid event = the extractor's `end_position`) resumes
// with the next transaction: nothing is applied twice (no 1062), nothing is
// skipped (tables equal). Once by file:pos, once by GTID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handback_after_the_last_applied_transaction_neither_repeats_nor_skips() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "applied").await;
    write(sb, &schema, 1..3).await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(REPLICA).await;
    let mut next = 3;
    for use_gtid in [false, true] {
        let facts = check_master(&mut master).await.unwrap();
        takeover(&mut replica, &mut master, &facts).await.unwrap();
        write(sb, &schema, next..next + 4).await;
        apply_like_shardrep(sb, &schema, next..next + 4).await;
        let (file, pos) = master_status(&mut master).await;
        let end_position = last_xid_end(&mut master, &file).await;
        assert_eq!(end_position, pos);
        let gtid = gtid_binlog_pos(&mut master).await;
        let point = HandbackPoint {
            file,
            pos: end_position,
            gtid_pos: Some(gtid),
        };
        // The replica's native replication then continues with new writes.
        handback(&mut replica, &point, use_gtid, true, None)
            .await
            .unwrap();
        write(sb, &schema, next + 4..next + 7).await;
        next += 7;
        let using = if use_gtid {
            UsingGtid::SlavePos
        } else {
            UsingGtid::No
        };
        last_errno_zero_and_equal(sb, &schema, using).await;
    }
    drop_schema(sb, &schema).await;
    restore_native(sb).await;
}

// (e) A malformed GTID is refused before the replica is touched; a file name
// with a quote reaches CHANGE MASTER intact (escaped literal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handback_refuses_a_malformed_gtid_and_escapes_the_file_name() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let mut replica = sb.connect(REPLICA).await;
    let bad = HandbackPoint {
        file: "mariadb-bin.000001".into(),
        pos: 4,
        gtid_pos: Some("0-1-5'; STOP SLAVE; --".into()),
    };
    let err = handback(&mut replica, &bad, true, true, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReplicaError::InvalidPosition { what, value, .. }
            if what == "gtid_slave_pos" && value == "0-1-5'; STOP SLAVE; --"),
        "{err}"
    );
    assert!(replica_status(sb).await.sql_running, "replica untouched");

    let quoted = HandbackPoint {
        file: r"it's\x.000001".into(),
        pos: 4,
        gtid_pos: None,
    };
    let report = handback(&mut replica, &quoted, false, false, None)
        .await
        .unwrap();
    assert_eq!(report.status.master_log_file, r"it's\x.000001");
    assert_eq!(report.status.read_master_log_pos, 4);
    assert!(!report.status.sql_running);
    assert_eq!(report.status.using_gtid, UsingGtid::No);
    restore_native(sb).await;
}

// Takeover refuses a replica whose SQL thread stopped on an error
// (Last_SQL_Errno, here a duplicate key), naming the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_refuses_a_replica_stopped_on_an_sql_error() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "sqlerr").await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let q = quote_ident(&schema);
    let mut replica = sb.connect(REPLICA).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; INSERT INTO {q}.t VALUES (1, -1)"
        ))
        .await
        .unwrap();
    write(sb, &schema, 1..2).await;
    common::wait_until(
        "the replica's SQL thread to stop on 1062",
        CATCH_UP,
        || async {
            let s = replica_status(sb).await;
            (!s.sql_running && s.last_sql_errno == 1062).then_some(())
        },
    )
    .await
    .unwrap();
    let mut master = sb.connect(Server::Master).await;
    let facts = check_master(&mut master).await.unwrap();
    let err = takeover(&mut replica, &mut master, &facts)
        .await
        .unwrap_err();
    let ReplicaError::SqlThreadError { errno, message, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*errno, 1062);
    assert!(message.contains("Duplicate entry '1'"), "{message}");
    assert!(
        err.to_string().starts_with(&format!(
            "{}:{}: the slave SQL thread stopped with an error: Last_SQL_Errno is 1062, expected 0",
            sb.host,
            sb.port(REPLICA)
        )),
        "{err}"
    );
    // Repair: remove the replica's own row; native replication re-applies.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DELETE FROM {q}.t WHERE id = 1"
        ))
        .await
        .unwrap();
    restore_native(sb).await;
    assert_table_equal(sb, Server::Master, REPLICA, &schema, "t").await;
    drop_schema(sb, &schema).await;
}

// After a GTID handback without START SLAVE (or a re-seed that set
// gtid_slave_pos), Relay_Master_Log_File / Exec_Master_Log_Pos still show
// the old position while gtid_slave_pos is the new one, from which native
// replication by GTID would start: takeover starts native replication for
// a moment so that it reports its position, and takes over there (never
// at the stale file:pos, which would re-apply transactions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_refreshes_a_stale_file_pos_after_a_gtid_handback() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "stale").await;
    write(sb, &schema, 1..3).await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(REPLICA).await;
    let facts = check_master(&mut master).await.unwrap();
    let old = takeover(&mut replica, &mut master, &facts).await.unwrap();
    write(sb, &schema, 3..6).await;
    apply_like_shardrep(sb, &schema, 3..6).await;
    let (file, pos) = master_status(&mut master).await;
    let gtid = gtid_binlog_pos(&mut master).await;
    let point = HandbackPoint {
        file: file.clone(),
        pos,
        gtid_pos: Some(gtid.clone()),
    };
    handback(&mut replica, &point, true, false, None)
        .await
        .unwrap();
    let s = replica_status(sb).await;
    // Verified on MariaDB 10.11: CHANGE MASTER TO MASTER_USE_GTID keeps the
    // old executed file:pos until the SQL thread runs.
    assert_eq!(
        (s.relay_master_log_file.as_str(), s.exec_master_log_pos),
        (old.file.as_str(), old.pos)
    );
    let facts = check_master(&mut master).await.unwrap();
    let taken = takeover(&mut replica, &mut master, &facts).await.unwrap();
    // Nothing was written since: the master's end, its GTID position.
    assert_eq!((taken.file.as_str(), taken.pos), (file.as_str(), pos));
    assert_eq!(taken.gtid_slave_pos.to_string(), gtid);
    assert!(
        !replica_status(sb).await.sql_running,
        "stopped again for the takeover"
    );
    restore_native(sb).await;
    write(sb, &schema, 6..8).await;
    last_errno_zero_and_equal(sb, &schema, UsingGtid::SlavePos).await;
    drop_schema(sb, &schema).await;
}

// A lagging replica (IO thread ahead of the SQL thread, unexecuted events
// in its relay log): takeover returns the SQL thread's position; after the
// lag is applied outside native replication, handback at the end position
// discards the old relay log (no transaction of it is executed again), by
// file:pos and by GTID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_replica_takeover_and_handback_skip_the_stale_relay_log() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let schema = create_schema(sb, "lag").await;
    write(sb, &schema, 1..3).await;
    wait_replica_caught_up(sb, REPLICA, CATCH_UP).await;
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(REPLICA).await;
    let mut next = 3;
    for use_gtid in [false, true] {
        let (file, pos) = master_status(&mut master).await;
        let gtid = gtid_binlog_pos(&mut master).await;
        replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
        write(sb, &schema, next..next + 5).await;
        let (end_file, end_pos) = master_status(&mut master).await;
        common::wait_until("the IO thread to fetch the lag", CATCH_UP, || async {
            let s = replica_status(sb).await;
            (s.master_log_file == end_file && s.read_master_log_pos == end_pos).then_some(())
        })
        .await
        .unwrap();
        let facts = check_master(&mut master).await.unwrap();
        let point = takeover(&mut replica, &mut master, &facts).await.unwrap();
        assert_eq!((point.file.as_str(), point.pos), (file.as_str(), pos));
        assert_eq!(point.gtid_slave_pos.to_string(), gtid);
        apply_like_shardrep(sb, &schema, next..next + 5).await;
        let back = HandbackPoint {
            file: end_file.clone(),
            pos: end_pos,
            gtid_pos: Some(gtid_binlog_pos(&mut master).await),
        };
        handback(&mut replica, &back, use_gtid, true, None)
            .await
            .unwrap();
        write(sb, &schema, next + 5..next + 7).await;
        next += 7;
        let using = if use_gtid {
            UsingGtid::SlavePos
        } else {
            UsingGtid::No
        };
        last_errno_zero_and_equal(sb, &schema, using).await;
    }
    drop_schema(sb, &schema).await;
    restore_native(sb).await;
}

// The replica's executed position is in a binlog the master has purged
// (its relay log holds the rest): by file:pos, takeover refuses ("binlog
// purged", naming the file and the binlogs present) and starts native
// replication again, as it found it running; by GTID, native replication
// would go on from its relay log, so takeover lets it report a position
// that the master has, and takes over there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_refuses_a_purged_binlog_and_restarts_the_slave() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    restore_native(sb).await;
    let mut replica = sb.connect(REPLICA).await;
    replica
        .query_drop("STOP SLAVE; CHANGE MASTER TO MASTER_USE_GTID = no; START SLAVE")
        .await
        .unwrap();
    purged_under_the_sql_thread(sb, false).await;
    restore_native(sb).await;
    purged_under_the_sql_thread(sb, true).await;
    restore_native(sb).await;
}

async fn purged_under_the_sql_thread(sb: &Sandbox, by_gtid: bool) {
    let mut master = sb.connect(Server::Master).await;
    let mut replica = sb.connect(REPLICA).await;
    // SQL thread stopped in the current file; the IO thread keeps running.
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let (old_file, old_pos) = master_status(&mut master).await;
    master.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let (new_file, _) = master_status(&mut master).await;
    // The IO thread past the rotation (else, by file:pos, it would ask
    // for the purged file when native replication starts again).
    common::wait_until("the IO thread reads the new binlog", CATCH_UP, || async {
        (replica_status(sb).await.master_log_file == new_file).then_some(())
    })
    .await
    .unwrap();
    // PURGE keeps a file the asynchronous binlog checkpoint still needs.
    common::wait_binlog_checkpoint_settled(&mut master).await;
    master
        .query_drop(format!("PURGE BINARY LOGS TO '{new_file}'"))
        .await
        .unwrap();
    let facts = check_master(&mut master).await.unwrap();
    assert_eq!(facts.oldest_binlog(), new_file);
    if by_gtid {
        let taken = takeover(&mut replica, &mut master, &facts).await.unwrap();
        let (end_file, end_pos) = master_status(&mut master).await;
        assert_eq!((taken.file, taken.pos), (end_file, end_pos));
        assert_eq!(
            taken.gtid_slave_pos.to_string(),
            gtid_binlog_pos(&mut master).await
        );
        return;
    }
    let err = takeover(&mut replica, &mut master, &facts)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "binlog purged: {}:{} no longer has {old_file} (needed for position \
             {old_file}:{old_pos}); its binary logs are {new_file} .. {new_file} (SHOW BINARY \
             LOGS). Re-seed the replica or keep binlogs longer (expire_logs_days / \
             binlog_expire_logs_seconds)",
            sb.host,
            sb.port(Server::Master)
        )
    );
    common::wait_until("native replication restarted", CATCH_UP, || async {
        let s = replica_status(sb).await;
        (s.sql_running && s.io_running == "Yes").then_some(())
    })
    .await
    .unwrap();
}
