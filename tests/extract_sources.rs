//! Event sources against the sandbox master: binlog files in the master's
//! binlog directory ([`FileSource`]) and the live binlog dump
//! ([`LiveSource`]), compared byte for byte.
//!
//! The tests write to the master and some need it idle (heartbeats, reading
//! files to their end), so they take one lock and run one at a time.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use shardrep::config::{LiveSourceConfig, Secret};
use shardrep::extractor::files::{FileOptions, FileSource};
use shardrep::extractor::live::{is_artificial, master_status, LiveOptions, LiveSource, LiveStart};
use shardrep::extractor::{EventHeader, EventSource, ExtractError, RawEvent};
use shardrep::position::{BinlogPosition, GtidPos};

use common::{
    quote_ident, sandbox, unique_schema, wait_binlog_checkpoint_settled, Sandbox, Server,
};

const ROTATE: u8 = 4;
const FORMAT_DESCRIPTION: u8 = 15;
const HEARTBEAT: u8 = 27;
const WRITE_ROWS_V1: u8 = 23;
const WRITE_ROWS_V2: u8 = 30;

/// One test at a time on the master.
static MASTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A server id no other connection of this run uses.
fn server_id() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    10_000 + (std::process::id() % 10_000) * 64 + N.fetch_add(1, Ordering::Relaxed)
}

fn live_options(sb: &Sandbox) -> LiveOptions {
    LiveOptions::new(LiveSourceConfig::new(
        sb.host.clone(),
        sb.port(Server::Master),
        sb.user.clone(),
        Secret::new(sb.password.clone()),
        server_id(),
    ))
}

fn binlog_dir(sb: &Sandbox) -> PathBuf {
    sb.dir.join("master").join("binlog")
}

fn header(e: &RawEvent) -> EventHeader {
    EventHeader::parse(&e.bytes).expect("event header")
}

/// Whether the CRC-32 trailer matches. MariaDB computes a
/// FORMAT_DESCRIPTION's CRC as if LOG_EVENT_BINLOG_IN_USE_F (0x1) were
/// clear, and sets the flag in the file it is writing.
fn crc_ok(bytes: &[u8]) -> bool {
    let mut data = bytes[..bytes.len() - 4].to_vec();
    if data[4] == FORMAT_DESCRIPTION {
        data[17] &= !1;
    }
    crc32fast::hash(&data) == u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap())
}

async fn status(sb: &Sandbox) -> (BinlogPosition, GtidPos) {
    wait_binlog_checkpoint_settled(&mut sb.connect(Server::Master).await).await;
    master_status(&live_options(sb))
        .await
        .expect("master status")
}

/// Creates a schema with table `t (id INT PRIMARY KEY AUTO_INCREMENT, v
/// LONGBLOB)`; returns the qualified table name.
async fn make_table(conn: &mut mysql_async::Conn, label: &str) -> (String, String) {
    let schema = unique_schema(label);
    let q = quote_ident(&schema);
    conn.query_drop(format!("CREATE DATABASE {q}"))
        .await
        .unwrap();
    conn.query_drop(format!(
        "CREATE TABLE {q}.t (id INT PRIMARY KEY AUTO_INCREMENT, v LONGBLOB) ENGINE=InnoDB"
    ))
    .await
    .unwrap();
    (schema.clone(), format!("{q}.t"))
}

async fn drop_schema(conn: &mut mysql_async::Conn, schema: &str) {
    conn.query_drop(format!("DROP DATABASE IF EXISTS {}", quote_ident(schema)))
        .await
        .unwrap();
}

/// Every event of the files source from `start` to the end of the files
/// (the master is idle: the caller holds the lock).
async fn file_events(sb: &Sandbox, start: &BinlogPosition) -> (Vec<RawEvent>, BinlogPosition) {
    let mut source =
        FileSource::new(binlog_dir(sb), start.clone(), FileOptions::default()).unwrap();
    let mut events = Vec::new();
    while let Some(e) = source.next_event().await.unwrap() {
        events.push(e);
    }
    (events, source.position().clone())
}

/// Live events until the stream's next event would start at `end`.
async fn live_events(source: &mut LiveSource, end: &BinlogPosition) -> Vec<RawEvent> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut events = Vec::new();
    while source.position().as_ref() != Some(end) {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = tokio::time::timeout(left, source.next_event())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "live stream did not reach {end} in time; at {:?} after {} events",
                    source.position(),
                    events.len()
                )
            })
            .unwrap()
            .expect("blocking stream does not end");
        events.push(e);
    }
    events
}

/// Events from the file in the range `[start, ..)`, dropping the replayed
/// FORMAT_DESCRIPTION.
fn in_range(events: Vec<RawEvent>, start: &BinlogPosition) -> Vec<RawEvent> {
    events
        .into_iter()
        .filter(|e| e.position >= *start)
        .collect()
}

/// Real (non-artificial) live events at or after `start`.
fn real_from(events: Vec<RawEvent>, start: &BinlogPosition) -> Vec<RawEvent> {
    events
        .into_iter()
        .filter(|e| !is_artificial(&header(e)) && e.position >= *start)
        .collect()
}

/// Asserts both sequences hold the same events: same positions and
/// identical bytes, except that the master sends the FORMAT_DESCRIPTION of
/// the file it is writing with LOG_EVENT_BINLOG_IN_USE_F (0x1) cleared.
fn assert_same_events(from_files: &[RawEvent], live: &[RawEvent], what: &str) {
    let positions = |v: &[RawEvent]| v.iter().map(|e| e.position.to_string()).collect::<Vec<_>>();
    assert_eq!(
        positions(from_files),
        positions(live),
        "{what}: positions differ"
    );
    for (f, l) in from_files.iter().zip(live) {
        let mut expected = f.bytes.clone();
        if header(f).type_code == FORMAT_DESCRIPTION {
            expected[17] &= !1;
        }
        assert!(
            expected == l.bytes,
            "{what}: bytes differ at {}",
            f.position
        );
        assert!(crc_ok(&l.bytes), "{what}: CRC at {}", l.position);
    }
}

/// Each event starts where the previous one ended; a ROTATE leads to
/// `next file:4`; sizes and log_pos agree with the bytes.
fn assert_contiguous(events: &[RawEvent]) {
    for e in events {
        let h = header(e);
        assert_eq!(
            h.event_size as usize,
            e.bytes.len(),
            "size at {}",
            e.position
        );
        assert_eq!(
            u64::from(h.log_pos),
            e.position.offset() + e.bytes.len() as u64,
            "log_pos at {}",
            e.position
        );
        assert!(crc_ok(&e.bytes), "CRC at {}", e.position);
    }
    for pair in events.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if header(a).type_code == ROTATE {
            assert_eq!(b.position.offset(), 4, "after the ROTATE at {}", a.position);
            assert_eq!(b.position.file_index(), a.position.file_index() + 1);
        } else {
            assert_eq!(
                b.position,
                a.position
                    .with_offset(a.position.offset() + a.bytes.len() as u64),
                "gap after {}",
                a.position
            );
        }
    }
}

/// `SHOW BINLOG EVENTS` of `file` from `from`: (Pos, End_log_pos).
async fn server_event_list(conn: &mut mysql_async::Conn, file: &str, from: u64) -> Vec<(u64, u64)> {
    let rows: Vec<mysql_async::Row> = conn
        .query(format!("SHOW BINLOG EVENTS IN '{file}' FROM {from}"))
        .await
        .unwrap();
    rows.into_iter()
        .map(|r| (r.get::<u64, _>(1).unwrap(), r.get::<u64, _>(4).unwrap()))
        .collect()
}

#[tokio::test]
async fn file_source_reads_across_rotation_with_contiguous_positions() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "files_rotation").await;

    let (start, _) = status(sb).await;
    for i in 0..3 {
        conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('before {i}')"))
            .await
            .unwrap();
    }
    conn.query_drop("FLUSH BINARY LOGS").await.unwrap();
    for i in 0..3 {
        conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('after {i}')"))
            .await
            .unwrap();
    }
    let (end, _) = status(sb).await;
    assert_eq!(end.file_index(), start.file_index() + 1);

    let (events, reached) = file_events(sb, &start).await;
    assert_eq!(reached, end, "the source stops at the master's end");
    if start.offset() > 4 {
        assert_eq!(events[0].position, start.with_offset(4));
        assert_eq!(header(&events[0]).type_code, FORMAT_DESCRIPTION);
    }
    let events = in_range(events, &start);
    assert_eq!(events[0].position, start);
    assert_contiguous(&events);
    let last = events.last().unwrap();
    assert_eq!(
        last.position
            .with_offset(last.position.offset() + last.bytes.len() as u64),
        end
    );
    let rows_events = events
        .iter()
        .filter(|e| matches!(header(e).type_code, WRITE_ROWS_V1 | WRITE_ROWS_V2))
        .count();
    assert_eq!(rows_events, 6);

    // Exactly the events the server lists, file by file.
    let mut ours: Vec<(String, u64, u64)> = events
        .iter()
        .map(|e| {
            let end = e.position.offset() + e.bytes.len() as u64;
            (e.position.file().to_owned(), e.position.offset(), end)
        })
        .collect();
    let mut listed = Vec::new();
    for (file, from) in [(start.file(), start.offset()), (end.file(), 4)] {
        for (pos, end_pos) in server_event_list(&mut conn, file, from).await {
            listed.push((file.to_owned(), pos, end_pos));
        }
    }
    ours.sort();
    listed.sort();
    assert_eq!(ours, listed);

    drop_schema(&mut conn, &schema).await;
}

#[tokio::test]
async fn file_source_follow_sees_events_written_after_the_end() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "files_follow").await;
    let (start, _) = status(sb).await;

    let options = FileOptions {
        poll_interval: Duration::from_millis(20),
        ..FileOptions::follow(true)
    };
    let mut source = FileSource::new(binlog_dir(sb), start.clone(), options).unwrap();
    // Drain what is there: the replayed FDE at most.
    while let Some(e) = source.try_next_event().unwrap() {
        assert!(e.position < start, "unexpected event {}", e.position);
    }
    assert_eq!(source.position(), &start);

    let target = std::sync::Arc::new(std::sync::Mutex::new(None::<BinlogPosition>));
    let reader_target = target.clone();
    let reader = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = Vec::new();
        loop {
            let want = reader_target.lock().unwrap().clone();
            if want.as_ref() == Some(source.position()) {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "follow source stuck at {}",
                source.position()
            );
            // Short timeouts: next_event is cancellation safe.
            if let Ok(e) =
                tokio::time::timeout(Duration::from_millis(200), source.next_event()).await
            {
                events.push(e.unwrap().expect("follow mode never ends"));
            }
        }
    });

    conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('one')"))
        .await
        .unwrap();
    conn.query_drop("FLUSH BINARY LOGS").await.unwrap();
    conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('two')"))
        .await
        .unwrap();
    let (end, _) = status(sb).await;
    *target.lock().unwrap() = Some(end.clone());
    let events = reader.await.unwrap();

    assert_eq!(events.first().unwrap().position, start);
    assert_contiguous(&events);
    assert!(events.iter().any(|e| header(e).type_code == ROTATE));
    assert_eq!(events.last().unwrap().position.file(), end.file());
    let (from_files, _) = file_events(sb, &start).await;
    assert!(
        in_range(from_files, &start) == events,
        "follow vs. read: events differ"
    );

    drop_schema(&mut conn, &schema).await;
}

#[tokio::test]
async fn truncated_copy_gives_a_file_error_naming_file_and_offset() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "files_truncated").await;
    let (start, _) = status(sb).await;
    conn.exec_drop(
        format!("INSERT INTO {table} (v) VALUES (?)"),
        (vec![0x5au8; 100_000],),
    )
    .await
    .unwrap();
    conn.query_drop("FLUSH BINARY LOGS").await.unwrap();

    let (events, _) = file_events(sb, &start).await;
    let big = events
        .iter()
        .filter(|e| e.position.file() == start.file())
        .max_by_key(|e| e.bytes.len())
        .unwrap();
    assert!(big.bytes.len() > 100_000);

    let copy = std::env::temp_dir().join(format!("shardrep-truncated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    let original = std::fs::read(binlog_dir(sb).join(start.file())).unwrap();
    let keep = big.position.offset() as usize + big.bytes.len() / 2;
    std::fs::write(copy.join(start.file()), &original[..keep]).unwrap();

    let mut source = FileSource::new(&copy, start.with_offset(4), FileOptions::default()).unwrap();
    let mut seen = 0;
    let err = loop {
        match source.next_event().await {
            Ok(Some(_)) => seen += 1,
            Ok(None) => panic!("truncated file read to its end without an error"),
            Err(e) => break e,
        }
    };
    assert!(seen > 0);
    match err {
        ExtractError::File {
            file,
            offset,
            message,
        } => {
            assert!(file.ends_with(start.file()), "{file}");
            assert_eq!(offset, big.position.offset());
            assert!(
                message.contains(&format!("expected {} bytes", big.bytes.len()))
                    && message.contains(&format!("has {} bytes", big.bytes.len() / 2)),
                "{message}"
            );
            let text = ExtractError::File {
                file: file.clone(),
                offset,
                message: message.clone(),
            }
            .to_string();
            assert!(text.contains(start.file()) && text.contains(&offset.to_string()));
        }
        other => panic!("expected a File error, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&copy);
    drop_schema(&mut conn, &schema).await;
}

#[tokio::test]
async fn live_source_matches_files_from_file_pos_and_from_gtid() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "live_same").await;
    let (start, start_gtid) = status(sb).await;
    assert!(!start_gtid.is_empty());

    let mut tx = conn.start_transaction(Default::default()).await.unwrap();
    for i in 0..5 {
        tx.exec_drop(
            format!("INSERT INTO {table} (v) VALUES (?)"),
            (format!("row {i}"),),
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    conn.query_drop(format!("UPDATE {table} SET v = CONCAT(v, '!')"))
        .await
        .unwrap();
    conn.query_drop("FLUSH BINARY LOGS").await.unwrap();
    conn.query_drop(format!("DELETE FROM {table} WHERE id % 2 = 0"))
        .await
        .unwrap();
    conn.query_drop(format!("ALTER TABLE {table} ADD COLUMN w INT"))
        .await
        .unwrap();
    let (end, _) = status(sb).await;

    let (from_files, reached) = file_events(sb, &start).await;
    assert_eq!(reached, end);
    let from_files = in_range(from_files, &start);
    assert!(from_files.len() > 10);

    // From file:pos.
    let mut live = LiveSource::connect(live_options(sb), LiveStart::File(start.clone()))
        .await
        .unwrap();
    assert!(live.is_mariadb());
    let events = live_events(&mut live, &end).await;
    // The stream opens with the artificial ROTATE naming the start, then the
    // FORMAT_DESCRIPTION.
    let first = header(&events[0]);
    assert_eq!(first.type_code, ROTATE);
    assert!(is_artificial(&first));
    assert_eq!(events[0].position, start);
    assert_eq!(header(&events[1]).type_code, FORMAT_DESCRIPTION);
    assert_same_events(
        &from_files,
        &real_from(events, &start),
        "live from file:pos",
    );
    live.close().await;

    // From the GTID position.
    let mut live = LiveSource::connect(live_options(sb), LiveStart::Gtid(start_gtid.clone()))
        .await
        .unwrap();
    let events = live_events(&mut live, &end).await;
    assert_eq!(header(&events[0]).type_code, ROTATE);
    assert!(is_artificial(&header(&events[0])));
    // Anything real before the start is the start file's header (FDE,
    // GTID_LIST, BINLOG_CHECKPOINT), never a transaction.
    for e in events.iter().filter(|e| e.position < start) {
        assert!(
            matches!(header(e).type_code, ROTATE | FORMAT_DESCRIPTION | 161 | 163),
            "event of type {} at {} before the GTID start",
            header(e).type_code,
            e.position
        );
    }
    assert_same_events(&from_files, &real_from(events, &start), "live from GTID");
    live.close().await;

    drop_schema(&mut conn, &schema).await;
}

#[tokio::test]
async fn event_larger_than_16_mib_arrives_whole_from_both_sources() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "big_event").await;
    let (start, _) = status(sb).await;
    let blob: Vec<u8> = (0..20_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    conn.exec_drop(
        format!("INSERT INTO {table} (v) VALUES (?)"),
        (blob.clone(),),
    )
    .await
    .unwrap();
    let (end, _) = status(sb).await;

    let check = |events: &[RawEvent], what: &str| -> RawEvent {
        // The ANNOTATE_ROWS event (the statement with its 20 MB literal)
        // is big too; the rows event is the one checked here.
        let big: Vec<&RawEvent> = events
            .iter()
            .filter(|e| {
                e.bytes.len() > 16 << 20
                    && matches!(header(e).type_code, WRITE_ROWS_V1 | WRITE_ROWS_V2)
            })
            .collect();
        assert_eq!(big.len(), 1, "{what}: one rows event above 16 MiB");
        let e = big[0];
        let h = header(e);
        assert_eq!(h.event_size as usize, e.bytes.len());
        assert!(crc_ok(&e.bytes), "{what}: CRC");
        let n = e.bytes.len();
        assert!(
            e.bytes[n - 4 - blob.len()..n - 4] == blob[..],
            "{what}: blob bytes"
        );
        e.clone()
    };
    let (from_files, _) = file_events(sb, &start).await;
    let f = check(&from_files, "files");

    let mut live = LiveSource::connect(live_options(sb), LiveStart::File(start.clone()))
        .await
        .unwrap();
    let events = live_events(&mut live, &end).await;
    let l = check(&events, "live");
    assert_eq!(f, l);
    assert_same_events(
        &in_range(from_files, &start),
        &real_from(events, &start),
        "big",
    );
    live.close().await;
    drop_schema(&mut conn, &schema).await;
}

#[tokio::test]
async fn heartbeats_arrive_on_an_idle_master() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let (start, _) = status(sb).await;
    let options = live_options(sb).with_heartbeat_ms(100);
    let mut live = LiveSource::connect(options, LiveStart::File(start.clone()))
        .await
        .unwrap();
    let began = Instant::now();
    let mut heartbeats = 0;
    while heartbeats < 3 {
        let e = tokio::time::timeout(Duration::from_secs(10), live.next_event())
            .await
            .expect("an event or heartbeat within 10 s")
            .unwrap()
            .unwrap();
        let h = header(&e);
        if h.type_code == HEARTBEAT {
            assert!(is_artificial(&h));
            assert_eq!(e.position, start, "a heartbeat stands at the next event");
            assert_eq!(u64::from(h.log_pos), start.offset());
            heartbeats += 1;
        } else {
            assert!(
                is_artificial(&h) || h.type_code == FORMAT_DESCRIPTION,
                "idle master sent type {} at {}",
                h.type_code,
                e.position
            );
        }
    }
    // Three 100 ms heartbeats: well under the 1 s default period each.
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    live.close().await;
}

#[tokio::test]
async fn lost_connection_is_transient_and_the_source_can_be_recreated() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let (start, _) = status(sb).await;
    let options = live_options(sb).with_heartbeat_ms(100);
    let mut live = LiveSource::connect(options.clone(), LiveStart::File(start.clone()))
        .await
        .unwrap();
    live.next_event().await.unwrap().unwrap();
    let mut admin = sb.connect(Server::Master).await;
    admin
        .query_drop(format!("KILL {}", live.connection_id()))
        .await
        .unwrap();
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), live.next_event())
            .await
            .expect("the kill is noticed within 10 s")
        {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    match &err {
        ExtractError::Master {
            address, transient, ..
        } => {
            assert!(*transient, "{err}");
            assert_eq!(address, &options.address());
        }
        other => panic!("expected a Master error, got {other:?}"),
    }
    // The source stays failed; a new one resumes where asked.
    assert!(matches!(
        live.next_event().await,
        Err(ExtractError::Master {
            transient: true,
            ..
        })
    ));
    let resume = live.position().unwrap();
    assert_eq!(resume, start);
    let mut again = LiveSource::new(options, LiveStart::File(resume.clone()));
    let e = again.next_event().await.unwrap().unwrap();
    assert_eq!(header(&e).type_code, ROTATE);
    assert_eq!(e.position, resume);
    again.close().await;
}

#[tokio::test]
async fn definite_errors_bad_password_and_missing_binlog() {
    let sb = sandbox();
    let (start, _) = status(sb).await;

    let mut options = live_options(sb);
    options.config.password = Secret::new("not-the-password-4711");
    let err = LiveSource::connect(options, LiveStart::File(start.clone()))
        .await
        .err()
        .expect("bad password fails");
    let text = err.to_string();
    assert!(!text.contains("not-the-password-4711"), "{text}");
    assert!(text.contains("1045"), "{text}");
    assert!(
        matches!(
            err,
            ExtractError::Master {
                transient: false,
                code: Some(1045),
                ..
            }
        ),
        "{text}"
    );

    let missing =
        BinlogPosition::new(start.next_file_name().unwrap().replace(".0", ".9"), 4).unwrap();
    let mut live = LiveSource::new(live_options(sb), LiveStart::File(missing));
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), live.next_event())
            .await
            .expect("error within 10 s")
        {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    let text = err.to_string();
    assert!(text.contains("1236"), "{text}");
    assert!(
        matches!(
            err,
            ExtractError::Master {
                transient: false,
                code: Some(1236),
                ..
            }
        ),
        "{text}"
    );
}

#[tokio::test]
async fn master_status_matches_show_master_status() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let (position, gtid) = status(sb).await;
    let mut conn = sb.connect(Server::Master).await;
    let row: mysql_async::Row = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(position.file(), row.get::<String, _>(0).unwrap());
    assert_eq!(position.offset(), row.get::<u64, _>(1).unwrap());
    let text: String = conn
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gtid, text.parse::<GtidPos>().unwrap());
}

#[tokio::test]
async fn checksum_switch_across_rotation_matches_between_sources() {
    let sb = sandbox();
    let _lock = MASTER.lock().await;
    let mut conn = sb.connect(Server::Master).await;
    let (schema, table) = make_table(&mut conn, "checksum_switch").await;
    let (start, _) = status(sb).await;
    // Each change of binlog_checksum rotates the binlog.
    conn.query_drop("SET GLOBAL binlog_checksum = NONE")
        .await
        .unwrap();
    let mut failed = None;
    for sql in [
        format!("INSERT INTO {table} (v) VALUES ('no crc')"),
        "FLUSH BINARY LOGS".to_owned(),
        format!("INSERT INTO {table} (v) VALUES ('still no crc')"),
    ] {
        if let Err(e) = conn.query_drop(&sql).await {
            failed = Some(format!("{sql}: {e}"));
            break;
        }
    }
    // Restored before anything can fail.
    conn.query_drop("SET GLOBAL binlog_checksum = CRC32")
        .await
        .unwrap();
    assert_eq!(failed, None);
    conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('crc again')"))
        .await
        .unwrap();
    let (end, _) = status(sb).await;
    assert!(end.file_index() >= start.file_index() + 3);

    let (from_files, reached) = file_events(sb, &start).await;
    assert_eq!(reached, end);
    let from_files = in_range(from_files, &start);
    let mut live = LiveSource::connect(live_options(sb), LiveStart::File(start.clone()))
        .await
        .unwrap();
    let events = real_from(live_events(&mut live, &end).await, &start);
    live.close().await;

    // Compare exactly; which events carry a CRC follows each file's FDE.
    let positions = |v: &[RawEvent]| v.iter().map(|e| e.position.to_string()).collect::<Vec<_>>();
    assert_eq!(positions(&from_files), positions(&events));
    let mut crc = true;
    let mut without_crc = 0;
    for (f, l) in from_files.iter().zip(&events) {
        let h = header(f);
        let mut expected = f.bytes.clone();
        if h.type_code == FORMAT_DESCRIPTION {
            expected[17] &= !1;
            crc = f.bytes[f.bytes.len() - 5] == 1;
        }
        assert!(expected == l.bytes, "bytes differ at {}", f.position);
        if crc || h.type_code == FORMAT_DESCRIPTION {
            assert!(crc_ok(&l.bytes), "CRC at {}", l.position);
        } else {
            without_crc += 1;
        }
    }
    assert!(without_crc >= 6, "{without_crc} events without CRC");
    // Positions are contiguous within each file and rotation leads on.
    for pair in from_files.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if header(a).type_code == ROTATE {
            assert_eq!(
                (b.position.file_index(), b.position.offset()),
                (a.position.file_index() + 1, 4)
            );
        } else {
            assert_eq!(
                b.position.offset(),
                a.position.offset() + a.bytes.len() as u64
            );
        }
    }
    drop_schema(&mut conn, &schema).await;
}
