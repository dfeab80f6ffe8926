//! Unit tests of the queue: appends, readers, purge, segments, reopen,
//! durability bookkeeping, back-pressure.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::event::{Change, RowImage, RowKind, RowPair, RowsChange, Transaction, Value};
use crate::position::{BinlogPosition, Epoch, Gtid};

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shardrep-queue-unit-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn txn(seqno: u64, payload: usize) -> Transaction {
    Transaction {
        seqno: Seqno(seqno),
        server_id: 1,
        gtid: Some(Gtid::new(0, 1, 1000 + seqno)),
        commit_id: None,
        start_position: BinlogPosition::new("mariadb-bin.000001", 4 + seqno * 100).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000001", 104 + seqno * 100).unwrap(),
        commit_timestamp: 1_700_000_000,
        shard: format!("db{}", seqno % 3),
        tables: vec![],
        changes: vec![Change::Rows(RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 1,
            rows: vec![RowPair {
                before: None,
                after: Some(RowImage {
                    columns: vec![0, 1],
                    values: vec![
                        Value::Int(seqno as i64),
                        Value::Bytes(vec![(seqno % 251) as u8; payload]),
                    ],
                }),
            }],
        })],
        row_events: None,
        fragment: None,
    }
}

fn progress(t: &Transaction) -> ExtractorProgress {
    ExtractorProgress::after(t, Epoch(0))
}

fn options(dir: &TempDir) -> QueueOptions {
    QueueOptions::new(&dir.0)
}

fn append_range(q: &TransactionQueue, range: std::ops::Range<u64>, payload: usize) {
    for s in range {
        let t = txn(s, payload);
        q.append(&t, &progress(&t)).unwrap();
    }
}

fn read_all(q: &TransactionQueue, from: u64) -> Vec<u64> {
    q.reader_from(Seqno(from))
        .unwrap()
        .map(|r| r.unwrap().seqno.0)
        .collect()
}

#[test]
fn append_read_and_bounds() {
    let dir = TempDir::new("basic");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.min_seqno(), None);
    assert_eq!(q.max_seqno(), None);
    assert_eq!(q.next_seqno(), Seqno(0));
    assert_eq!(q.last_progress(), None);
    append_range(&q, 0..100, 50);
    assert_eq!(q.min_seqno(), Some(Seqno(0)));
    assert_eq!(q.max_seqno(), Some(Seqno(99)));
    assert_eq!(read_all(&q, 0), (0..100).collect::<Vec<_>>());
    assert_eq!(read_all(&q, 37), (37..100).collect::<Vec<_>>());
    assert_eq!(q.get(Seqno(42)).unwrap(), Some(txn(42, 50)));
    assert_eq!(q.get(Seqno(100)).unwrap(), None);
    assert_eq!(q.last_progress(), Some(progress(&txn(99, 50))));
}

#[test]
fn gaps_and_going_back_are_errors() {
    let dir = TempDir::new("order");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    let t1 = txn(1, 10);
    let err = q.append(&t1, &progress(&t1)).unwrap_err();
    assert!(matches!(
        err,
        QueueError::OutOfOrder {
            expected: Seqno(0),
            got: Seqno(1),
            ..
        }
    ));
    assert!(err.to_string().contains("cannot append seqno 1"), "{err}");
    append_range(&q, 0..3, 10);
    let t = txn(1, 10);
    assert!(matches!(
        q.append(&t, &progress(&t)),
        Err(QueueError::OutOfOrder {
            expected: Seqno(3),
            got: Seqno(1),
            ..
        })
    ));
    let t = txn(3, 10);
    let mut p = progress(&t);
    p.seqno = Seqno(4);
    assert!(matches!(
        q.append(&t, &p),
        Err(QueueError::ProgressMismatch { .. })
    ));
    // Nothing of the failed appends is stored.
    assert_eq!(read_all(&q, 0), vec![0, 1, 2]);
}

#[test]
fn readers_see_new_appends_and_are_independent() {
    let dir = TempDir::new("readers");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    append_range(&q, 0..10, 100);
    let mut a = q.reader_from(Seqno(0)).unwrap();
    let mut b = q.reader_from(Seqno(5)).unwrap();
    assert_eq!(a.by_ref().count(), 10);
    assert_eq!(b.try_next().unwrap().unwrap().seqno, Seqno(5));
    assert!(a.try_next().unwrap().is_none());
    append_range(&q, 10..2000, 100);
    // a continues where it stopped; b too.
    let rest: Vec<u64> = a.by_ref().map(|r| r.unwrap().seqno.0).collect();
    assert_eq!(rest, (10..2000).collect::<Vec<_>>());
    let rest: Vec<u64> = b.map(|r| r.unwrap().seqno.0).collect();
    assert_eq!(rest, (6..2000).collect::<Vec<_>>());
}

#[test]
fn reopen_recovers_last_transaction_and_progress() {
    let dir = TempDir::new("reopen");
    {
        let q = TransactionQueue::open(options(&dir)).unwrap();
        append_range(&q, 0..500, 300);
        let t = txn(500, 300);
        let mut p = progress(&t);
        p.epoch = Epoch(500);
        p.gtid_position = "0-1-1500,7-7-7".parse().unwrap();
        p.position = BinlogPosition::new("mariadb-bin.000002", 4).unwrap();
        q.append(&t, &p).unwrap();
        q.close().unwrap();
    }
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.next_seqno(), Seqno(501));
    assert_eq!(q.durable_seqno(), Some(Seqno(500)));
    let p = q.last_progress().unwrap();
    assert_eq!(p.seqno, Seqno(500));
    assert_eq!(p.epoch, Epoch(500));
    assert_eq!(p.position.to_string(), "mariadb-bin.000002:4");
    assert_eq!(p.gtid_position.to_string(), "0-1-1500,7-7-7");
    assert_eq!(read_all(&q, 0), (0..501).collect::<Vec<_>>());
    append_range(&q, 501..510, 300);
    assert_eq!(q.max_seqno(), Some(Seqno(509)));
}

#[test]
fn segments_roll_and_purge_deletes_them() {
    let dir = TempDir::new("segments");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 64 << 10;
    let q = TransactionQueue::open(opts.clone()).unwrap();
    append_range(&q, 0..3000, 200);
    q.flush().unwrap();
    let segs = q.info().unwrap().segments;
    assert!(segs.len() >= 4, "{segs:?}");
    assert_eq!(segs[0].start, Seqno(0));
    assert_eq!(read_all(&q, 0).len(), 3000);
    // Reading across segment boundaries from any seqno.
    for seg in &segs[1..] {
        let from = seg.start.0 - 1;
        assert_eq!(read_all(&q, from), (from..3000).collect::<Vec<_>>());
    }
    let size_before = q.size_bytes().unwrap();
    let cut = segs[segs.len() - 1].start;
    assert_eq!(q.purge_below(cut).unwrap(), cut);
    assert_eq!(q.min_seqno(), Some(cut));
    let after = q.info().unwrap();
    assert_eq!(after.segments.len(), 1, "{:?}", after.segments);
    assert!(q.size_bytes().unwrap() < size_before / 2);
    assert!(matches!(
        q.reader_from(Seqno(0)),
        Err(QueueError::Purged { first_kept, .. }) if first_kept == cut
    ));
    let names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("trash-")), "{names:?}");
    // Purge inside the last segment hides records without deleting it.
    // Where the last segment starts depends on when the queue flushed
    // (a loaded machine rolled it at 2996 once): purge half way into it.
    let inside = (cut.0 + 2999) / 2;
    q.purge_below(Seqno(inside)).unwrap();
    assert_eq!(read_all(&q, inside), (inside..3000).collect::<Vec<_>>());
    q.close().unwrap();
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.min_seqno(), Some(Seqno(inside)));
    assert_eq!(q.max_seqno(), Some(Seqno(2999)));
}

#[test]
fn purge_everything_keeps_next_seqno_and_progress() {
    let dir = TempDir::new("purge-all");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    append_range(&q, 0..20, 10);
    assert_eq!(q.purge_below(Seqno(1000)).unwrap(), Seqno(20));
    assert_eq!(q.min_seqno(), None);
    assert_eq!(q.max_seqno(), None);
    assert_eq!(q.next_seqno(), Seqno(20));
    q.close().unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.min_seqno(), None);
    assert_eq!(q.next_seqno(), Seqno(20));
    assert_eq!(q.last_progress().unwrap().seqno, Seqno(19));
    append_range(&q, 20..25, 10);
    assert_eq!(read_all(&q, 20), (20..25).collect::<Vec<_>>());
}

#[test]
fn purge_applied_keeps_the_retention() {
    let dir = TempDir::new("retention");
    let mut opts = options(&dir);
    opts.config.retention_seqnos = 10;
    let q = TransactionQueue::open(opts).unwrap();
    append_range(&q, 0..100, 10);
    assert_eq!(q.purge_applied(Seqno(49)).unwrap(), Seqno(40));
    assert_eq!(q.min_seqno(), Some(Seqno(40)));
    assert_eq!(q.purge_applied(Seqno(5)).unwrap(), Seqno(40));
}

#[test]
fn records_of_every_size_read_back_from_one_log_file() {
    let dir = TempDir::new("large");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    let sizes = [10usize, 7_000, 100, 3 << 20, 6_000, 20];
    for (s, &n) in sizes.iter().enumerate() {
        let t = txn(s as u64, n);
        q.append(&t, &progress(&t)).unwrap();
    }
    for (s, &n) in sizes.iter().enumerate() {
        assert_eq!(q.get(Seqno(s as u64)).unwrap().unwrap(), txn(s as u64, n));
    }
    q.close().unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    let all: Vec<Transaction> = q
        .reader_from(Seqno(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all.len(), sizes.len());
    for (t, &n) in all.iter().zip(&sizes) {
        assert_eq!(*t, txn(t.seqno.0, n));
    }
    // Every record but the external one (3 MiB) is in the log file.
    let seg = dir.0.join(segment::segment_dir_name(Seqno(0)));
    let mut names: Vec<String> = std::fs::read_dir(&seg)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            segment::HAS_DATA_MARKER.to_string(),
            log::LOG_FILE.to_string(),
            segment::external_file_name(Seqno(3))
        ]
    );
}

#[test]
fn flush_makes_durable_and_flusher_runs_on_interval() {
    let dir = TempDir::new("durable");
    let mut opts = options(&dir);
    opts.config.flush_interval_ms = 20;
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.durable_seqno(), None);
    append_range(&q, 0..5, 10);
    assert!(q.wait_durable(Seqno(4), Duration::from_secs(10)).unwrap());
    assert_eq!(q.durable_seqno(), Some(Seqno(4)));
    append_range(&q, 5..6, 10);
    // The interval flush happens without asking.
    let deadline = Instant::now() + Duration::from_secs(10);
    while q.durable_seqno() != Some(Seqno(5)) {
        assert!(Instant::now() < deadline, "interval flush did not happen");
        std::thread::sleep(Duration::from_millis(5));
    }
    append_range(&q, 6..7, 10);
    assert_eq!(q.flush().unwrap(), Some(Seqno(6)));
}

#[test]
fn flush_bytes_triggers_a_flush() {
    let dir = TempDir::new("flush-bytes");
    let mut opts = options(&dir);
    opts.config.flush_interval_ms = 3_600_000;
    opts.config.flush_bytes = 10_000;
    let q = TransactionQueue::open(opts).unwrap();
    append_range(&q, 0..100, 500);
    let deadline = Instant::now() + Duration::from_secs(10);
    while q.durable_seqno().is_none_or(|d| d < Seqno(50)) {
        assert!(
            Instant::now() < deadline,
            "byte-triggered flush did not happen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn durable_only_readers_wait_for_the_flush() {
    let dir = TempDir::new("durable-reader");
    let mut opts = options(&dir);
    opts.config.flush_interval_ms = 3_600_000;
    let q = TransactionQueue::open(opts).unwrap();
    append_range(&q, 0..3, 10);
    let mut r = q.reader_from(Seqno(0)).unwrap().durable_only();
    assert!(r.try_next().unwrap().is_none());
    q.flush().unwrap();
    assert_eq!(r.by_ref().count(), 3);
}

#[test]
fn blocking_reader_is_woken_by_append() {
    let dir = TempDir::new("wake");
    let q = Arc::new(TransactionQueue::open(options(&dir)).unwrap());
    let mut r = q.reader_from(Seqno(0)).unwrap();
    let writer = {
        let q = q.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            append_range(&q, 0..3, 10);
        })
    };
    let t = r.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(t.seqno, Seqno(0));
    writer.join().unwrap();
    assert!(r.next_timeout(Duration::from_secs(10)).unwrap().is_some());
    assert!(r.next_timeout(Duration::from_secs(10)).unwrap().is_some());
    assert!(r.next_timeout(Duration::from_millis(20)).unwrap().is_none());
}

#[test]
fn blocking_reader_with_progress_is_woken_by_append() {
    let dir = TempDir::new("wake-progress");
    let q = Arc::new(TransactionQueue::open(options(&dir)).unwrap());
    let mut r = q.reader_from(Seqno(0)).unwrap();
    let started = Instant::now();
    assert!(r
        .next_timeout_with_progress(Duration::from_millis(30))
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(30));
    let writer = {
        let q = q.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let t = txn(0, 10);
            let mut p = progress(&t);
            p.epoch = Epoch(7);
            q.append(&t, &p).unwrap();
        })
    };
    let (t, p) = r
        .next_timeout_with_progress(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    writer.join().unwrap();
    assert_eq!(t, txn(0, 10));
    assert_eq!(p.seqno, Seqno(0));
    assert_eq!(p.epoch, Epoch(7));
    assert_eq!(p.position, t.end_position);
    assert_eq!(p, q.last_progress().unwrap());
    assert_eq!(r.next_seqno(), Seqno(1));
}

#[test]
fn full_queue_waits_for_purge_and_never_drops() {
    let dir = TempDir::new("full");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 32 << 10;
    opts.config.max_size_bytes = 400 << 10;
    opts.config.flush_interval_ms = 5;
    let q = Arc::new(TransactionQueue::open(opts).unwrap());
    let total = 3000u64;
    let writer = {
        let q = q.clone();
        std::thread::spawn(move || append_range(&q, 0..total, 500))
    };
    // Without purges the writer blocks: the next seqno stops moving (with
    // the queue near its maximum: a slow segment open on a loaded machine
    // also stops it for a while).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = q.next_seqno();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = q.next_seqno();
        if now == last && q.estimated_size_bytes() + 2_000 > 400 << 10 {
            break;
        }
        assert!(Instant::now() < deadline, "the queue never filled up");
        last = now;
    }
    let blocked_at = last.0;
    assert!(blocked_at < total, "the queue never filled up");
    assert!(q.estimated_size_bytes() + 2_000 > 400 << 10);
    let t = txn(blocked_at + 1, 500);
    assert!(matches!(
        q.try_append(&t, &progress(&t)),
        Err(QueueError::OutOfOrder { .. })
    ));
    // Consume and purge; the writer must resume, never fail.
    let mut r = q.reader_from(Seqno(0)).unwrap();
    let mut seen = 0u64;
    let mut max_size = 0u64;
    while seen < total {
        match r.next_timeout(Duration::from_secs(30)).unwrap() {
            Some(t) => {
                assert_eq!(t, txn(seen, 500));
                seen += 1;
            }
            None => panic!("reader starved at {seen}"),
        }
        if seen.is_multiple_of(100) {
            max_size = max_size.max(q.size_bytes().unwrap());
            q.purge_below(Seqno(seen)).unwrap();
        }
    }
    writer.join().unwrap();
    // The estimate bounds the disk use to about max_size plus a segment.
    assert!(max_size < 2 * (400 << 10), "disk use {max_size}");
}

#[test]
fn async_append_and_read() {
    let dir = TempDir::new("async");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 32 << 10;
    opts.config.max_size_bytes = 200 << 10;
    opts.config.flush_interval_ms = 5;
    let q = Arc::new(TransactionQueue::open(opts).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let writer = {
            let q = q.clone();
            tokio::spawn(async move {
                for s in 0..2000 {
                    let t = txn(s, 400);
                    q.append_async(&t, &progress(&t)).await.unwrap();
                }
            })
        };
        let mut r = q.reader_from(Seqno(0)).unwrap();
        for s in 0..2000u64 {
            let t = r.next_async().await.unwrap().unwrap();
            assert_eq!(t.seqno, Seqno(s));
            if s % 50 == 49 {
                q.purge_below(Seqno(s + 1)).unwrap();
            }
        }
        writer.await.unwrap();
    });
}

#[test]
fn trailing_empty_segment_is_removed_on_open() {
    let dir = TempDir::new("empty-seg");
    {
        let q = TransactionQueue::open(options(&dir)).unwrap();
        append_range(&q, 0..10, 10);
        q.close().unwrap();
    }
    // As if a crash happened right after creating the next segment.
    let empty = dir.0.join(segment::segment_dir_name(Seqno(10)));
    std::fs::create_dir(&empty).unwrap();
    log::Log::create(&empty.join(log::LOG_FILE), Seqno(10)).unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.next_seqno(), Seqno(10));
    assert_eq!(q.info().unwrap().segments.len(), 1);
    drop(q);
    assert!(!empty.exists());
}

#[test]
fn unfinished_segment_creation_is_cleaned_up() {
    let dir = TempDir::new("new-seg");
    {
        let q = TransactionQueue::open(options(&dir)).unwrap();
        append_range(&q, 0..10, 10);
        q.close().unwrap();
    }
    // A crash inside the creation of the next segment: its log file's
    // header cut short.
    let new = dir.0.join(format!(
        "{}{}",
        segment::NEW_PREFIX,
        segment::segment_dir_name(Seqno(10))
    ));
    std::fs::create_dir(&new).unwrap();
    std::fs::write(new.join(log::LOG_FILE), &log::file_header(Seqno(10))[..5]).unwrap();
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 1;
    let q = TransactionQueue::open(opts).unwrap();
    assert!(!new.exists());
    append_range(&q, 10..20, 10);
    assert_eq!(read_all(&q, 0), (0..20).collect::<Vec<_>>());
    assert!(q.info().unwrap().segments.len() > 1);
}

#[test]
fn lone_empty_segment_not_at_zero_is_refused() {
    let dir = TempDir::new("lone-empty");
    let seg = dir.0.join(segment::segment_dir_name(Seqno(5)));
    std::fs::create_dir_all(&seg).unwrap();
    log::Log::create(&seg.join(log::LOG_FILE), Seqno(5)).unwrap();
    let err = TransactionQueue::open(options(&dir)).unwrap_err();
    assert!(matches!(err, QueueError::Layout { .. }), "{err}");
    // So is an empty sled segment of an earlier version.
    std::fs::remove_dir_all(&seg).unwrap();
    drop(sled::open(&seg).unwrap());
    let err = TransactionQueue::open(options(&dir)).unwrap_err();
    assert!(matches!(err, QueueError::Layout { .. }), "{err}");
}

#[test]
fn a_write_cut_short_by_a_crash_is_cut_off_and_the_queue_goes_on() {
    let dir = TempDir::new("torn");
    {
        let q = TransactionQueue::open(options(&dir)).unwrap();
        append_range(&q, 0..10, 100);
        q.close().unwrap();
    }
    let path = dir
        .0
        .join(segment::segment_dir_name(Seqno(0)))
        .join(log::LOG_FILE);
    let good = std::fs::metadata(&path).unwrap().len();
    // Half of a frame holding seqno 10: what a kill -9 in the middle of
    // the write leaves.
    let t = txn(10, 100);
    let mut record = Vec::new();
    codec::encode_record(&t, &progress(&t), &mut record).unwrap();
    let mut frame = log::frame_header(Seqno(10), &record).to_vec();
    frame.extend_from_slice(&record);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&frame[..frame.len() / 2]);
    std::fs::write(&path, bytes).unwrap();
    // A read-only open leaves the file alone.
    let mut ro = options(&dir);
    ro.read_only = true;
    let q = TransactionQueue::open(ro).unwrap();
    assert_eq!(q.next_seqno(), Seqno(10));
    drop(q);
    assert!(std::fs::metadata(&path).unwrap().len() > good);
    // The writer's open cuts it, and appends go on from seqno 10.
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    assert_eq!(q.next_seqno(), Seqno(10));
    assert_eq!(q.last_progress().unwrap().seqno, Seqno(9));
    append_range(&q, 10..20, 100);
    q.close().unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(read_all(&q, 0), (0..20).collect::<Vec<_>>());
}

#[test]
fn second_open_of_the_same_queue_fails() {
    let dir = TempDir::new("lock");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    append_range(&q, 0..1, 10);
    let err = TransactionQueue::open(options(&dir)).unwrap_err();
    assert!(err.to_string().contains("could not acquire lock"), "{err}");
    // The lock file names the process that holds it.
    assert!(
        err.to_string().contains(&format!(
            "(process {}, as its lock file says)",
            std::process::id()
        )),
        "{err}"
    );
    // Closing releases the lock.
    q.close().unwrap();
    let again = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(again.next_seqno(), Seqno(1));
}

#[test]
fn a_sealed_segment_cut_short_is_an_error_that_says_so() {
    let dir = TempDir::new("cut-sealed");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 16 << 10;
    {
        let q = TransactionQueue::open(opts.clone()).unwrap();
        append_range(&q, 0..100, 1000);
        q.close().unwrap();
    }
    let first = dir
        .0
        .join(segment::segment_dir_name(Seqno(0)))
        .join(log::LOG_FILE);
    let len = std::fs::metadata(&first).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.next_seqno(), Seqno(100));
    let mut r = q.reader_from(Seqno(0)).unwrap();
    let mut read = 0;
    let err = loop {
        match r.try_next() {
            Ok(Some(t)) => {
                assert_eq!(t, txn(read, 1000));
                read += 1;
            }
            Ok(None) => panic!("read to the end despite the cut"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.seqno(), Some(Seqno(read)), "{err}");
    let text = err.to_string();
    assert!(text.contains("no block of the segment holds it"), "{text}");
    assert!(
        text.contains("ends in an incomplete block at byte"),
        "{text}"
    );
    assert!(text.contains(&format!("of {}", len - 100)), "{text}");
    assert!(text.contains("was cut short"), "{text}");
}

#[test]
fn read_only_refuses_writes() {
    let dir = TempDir::new("ro");
    {
        let q = TransactionQueue::open(options(&dir)).unwrap();
        append_range(&q, 0..3, 10);
    }
    let mut opts = options(&dir);
    opts.read_only = true;
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(read_all(&q, 0), vec![0, 1, 2]);
    let t = txn(3, 10);
    assert!(matches!(
        q.append(&t, &progress(&t)),
        Err(QueueError::ReadOnly { .. })
    ));
    assert!(matches!(
        q.purge_below(Seqno(1)),
        Err(QueueError::ReadOnly { .. })
    ));
}

#[test]
fn read_only_open_of_a_new_empty_directory_is_an_empty_queue() {
    // What a kill -9 leaves when it comes right after the directory's creation.
    let dir = TempDir::new("ro-empty");
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut opts = options(&dir);
    opts.read_only = true;
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.next_seqno(), Seqno(0));
    assert_eq!(q.last_progress(), None);
}

#[test]
fn invalid_options_are_rejected() {
    let dir = TempDir::new("opts");
    let mut opts = options(&dir);
    opts.config.flush_bytes = 0;
    let err = TransactionQueue::open(opts).unwrap_err();
    assert!(
        err.to_string().contains("flush_bytes must be at least 1"),
        "{err}"
    );
}

#[test]
fn defaults_match_the_configuration() {
    let text = "[service]\nname = \"t\"\n[source]\nkind = \"files\"\nbinlog_dir = \"/b\"\n\
                [replica]\nhost = \"h\"\nuser = \"u\"\npassword = \"p\"\n\
                [queue]\ndir = \"/q\"\n[control]\nsocket = \"/s\"\n";
    let cfg = crate::config::Config::from_toml_str(text, "test.toml").unwrap();
    assert_eq!(
        QueueOptions::from_config(&cfg.queue),
        QueueOptions::new("/q")
    );
}

#[test]
fn segments_nobody_uses_are_closed() {
    let dir = TempDir::new("open-bound");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 32 << 10;
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.open_segments(), 0);
    // A reader that falls further and further behind the writer.
    let mut r = q.reader_from(Seqno(0)).unwrap();
    let mut read = 0u64;
    let mut max_open = 0;
    for s in 0..1500u64 {
        append_range(&q, s..s + 1, 1000);
        if s % 3 == 0 {
            assert_eq!(r.try_next().unwrap().unwrap().seqno, Seqno(read));
            read += 1;
        }
        max_open = max_open.max(q.open_segments());
    }
    let segments = q.info().unwrap().segments.len();
    assert!(segments > 20, "only {segments} segments");
    // The writer's segment, the reader's, and for an instant the one the
    // flusher is finishing when the writer rolls.
    assert!(max_open <= 3, "{max_open} segments open at once");
    while let Some(t) = r.try_next().unwrap() {
        assert_eq!(t.seqno, Seqno(read));
        read += 1;
        max_open = max_open.max(q.open_segments());
    }
    assert_eq!(read, 1500);
    assert!(max_open <= 3, "{max_open} segments open at once");
    q.flush().unwrap();
    // Caught up: the reader reads the writer's segment.
    assert_eq!(q.open_segments(), 1);
    // A second reader from the start opens one segment at a time.
    let mut again = q.reader_from(Seqno(0)).unwrap();
    for expected in 0..1500u64 {
        assert_eq!(again.try_next().unwrap().unwrap().seqno, Seqno(expected));
        assert!(q.open_segments() <= 2, "{} open", q.open_segments());
    }
    drop(again);
    assert_eq!(q.open_segments(), 1);
    // get keeps the segment it read open for the next get, and no more.
    assert_eq!(q.get(Seqno(0)).unwrap().unwrap().seqno, Seqno(0));
    assert_eq!(q.open_segments(), 2);
    assert_eq!(q.get(Seqno(1)).unwrap().unwrap().seqno, Seqno(1));
    assert_eq!(q.get(Seqno(700)).unwrap().unwrap().seqno, Seqno(700));
    assert_eq!(q.open_segments(), 2);
    // Purging its segment closes it (and deletes it).
    q.purge_below(Seqno(1400)).unwrap();
    assert_eq!(q.open_segments(), 1);
    assert!(q.info().unwrap().segments.len() < segments);
    // Closing the queue closes the writer's segment; a reader keeps the
    // one it is in.
    q.close().unwrap();
    drop(r);
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.open_segments(), 1);
    assert_eq!(read_all(&q, 1400), (1400..1500).collect::<Vec<_>>());
    assert_eq!(q.open_segments(), 1);
}

/// The names of the external record files of the segment starting at
/// `start`.
fn external_files(dir: &TempDir, start: u64) -> Vec<String> {
    let seg = dir.0.join(segment::segment_dir_name(Seqno(start)));
    let mut names: Vec<String> = std::fs::read_dir(seg)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(segment::EXTERNAL_PREFIX))
        .collect();
    names.sort();
    names
}

#[test]
fn large_records_are_external_files_and_round_trip() {
    let dir = TempDir::new("external");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    let big = EXTERNAL_MIN_BYTES + 1000;
    append_range(&q, 0..3, 50);
    let t3 = txn(3, big);
    // An explicit progress (not derived from the transaction) survives.
    let mut p3 = progress(&t3);
    p3.position = BinlogPosition::new("mariadb-bin.000007", 4).unwrap();
    p3.gtid_position = "0-1-1003,5-9-1".parse().unwrap();
    q.append(&t3, &p3).unwrap();
    append_range(&q, 4..6, 50);
    let t6 = txn(6, 3 * big);
    q.append(&t6, &progress(&t6)).unwrap();
    // Readers see them before and after the flush.
    assert_eq!(q.get(Seqno(3)).unwrap().unwrap(), t3);
    let mut reader = q.reader_from(Seqno(2)).unwrap();
    let got: Vec<u64> = reader.by_ref().map(|r| r.unwrap().seqno.0).collect();
    assert_eq!(got, vec![2, 3, 4, 5, 6]);
    q.flush().unwrap();
    assert_eq!(
        external_files(&dir, 0),
        vec![
            segment::external_file_name(Seqno(3)),
            segment::external_file_name(Seqno(6))
        ]
    );
    drop(reader);
    q.close().unwrap();
    // Reopened with an external record last: its progress is recovered.
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.next_seqno(), Seqno(7));
    assert_eq!(q.last_progress(), Some(progress(&t6)));
    let mut reader = q.reader_from(Seqno(0)).unwrap();
    for s in 0..7u64 {
        let (t, p) = reader.try_next_with_progress().unwrap().unwrap();
        assert_eq!(t.seqno, Seqno(s));
        match s {
            3 => assert_eq!((t, p), (t3.clone(), p3.clone())),
            6 => assert_eq!(t, t6),
            _ => assert_eq!(t, txn(s, 50)),
        }
    }
    assert!(reader.try_next().unwrap().is_none());
    drop(reader);
    // Purging the segment deletes its files with it.
    append_range(&q, 7..8, 50);
    q.close().unwrap();
}

#[test]
fn external_record_interrupted_by_a_crash_is_dropped_at_open() {
    let dir = TempDir::new("external-crash");
    let big = EXTERNAL_MIN_BYTES + 1000;
    let q = TransactionQueue::open(options(&dir)).unwrap();
    append_range(&q, 0..4, 50);
    let t4 = txn(4, big);
    q.append(&t4, &progress(&t4)).unwrap();
    append_range(&q, 5..6, 50);
    q.close().unwrap();
    // A crash while the record of seqno 6 was written: part of its file is
    // on disk, its reference in sled is not.
    let t6 = txn(6, 2 * big);
    let p6 = progress(&t6);
    let len = codec::record_len(&t6, &p6).unwrap();
    let mut whole = std::io::Cursor::new(Vec::new());
    codec::write_record(&t6, &p6, len, &mut whole).unwrap();
    let whole = whole.into_inner();
    assert_eq!(whole.len() as u64, len);
    let seg = dir.0.join(segment::segment_dir_name(Seqno(0)));
    let path = seg.join(segment::external_file_name(Seqno(6)));
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    // Read-only opens ignore it.
    let mut ro = options(&dir);
    ro.read_only = true;
    let q = TransactionQueue::open(ro).unwrap();
    assert_eq!(q.next_seqno(), Seqno(6));
    assert_eq!(read_all(&q, 0), (0..6).collect::<Vec<_>>());
    drop(q);
    assert!(path.exists());
    // A writable open deletes it; the progress is the one of seqno 5.
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert!(!path.exists());
    assert_eq!(q.next_seqno(), Seqno(6));
    assert_eq!(q.last_progress(), Some(progress(&txn(5, 50))));
    assert_eq!(
        external_files(&dir, 0),
        vec![segment::external_file_name(Seqno(4))]
    );
    // Seqno 6 is extracted again and stored whole.
    q.append(&t6, &p6).unwrap();
    q.close().unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    assert_eq!(q.last_progress(), Some(p6));
    assert_eq!(q.get(Seqno(6)).unwrap().unwrap(), t6);
    assert_eq!(q.get(Seqno(4)).unwrap().unwrap(), t4);
}

#[test]
fn external_record_alone_in_a_new_segment_interrupted_is_dropped() {
    let dir = TempDir::new("external-crash-seg");
    let mut opts = options(&dir);
    opts.config.segment_size_bytes = 64 << 10;
    let q = TransactionQueue::open(opts.clone()).unwrap();
    append_range(&q, 0..5, 50);
    // Fills the segment: the next append starts a new one.
    let t5 = txn(5, EXTERNAL_MIN_BYTES);
    q.append(&t5, &progress(&t5)).unwrap();
    let t6 = txn(6, EXTERNAL_MIN_BYTES);
    q.append(&t6, &progress(&t6)).unwrap();
    q.close().unwrap();
    let seg = dir.0.join(segment::segment_dir_name(Seqno(6)));
    let file = seg.join(segment::external_file_name(Seqno(6)));
    assert!(file.exists());
    // A crash after the record's file was written but before its
    // reference reached the disk: the segment holds the file only.
    let kept = std::fs::read(&file).unwrap();
    std::fs::remove_dir_all(&seg).unwrap();
    let created = segment::Segment::create(
        &dir.0,
        Seqno(6),
        Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    )
    .unwrap();
    drop(created);
    std::fs::write(&file, kept).unwrap();
    let q = TransactionQueue::open(opts).unwrap();
    assert_eq!(q.next_seqno(), Seqno(6));
    assert_eq!(q.last_progress(), Some(progress(&t5)));
    assert!(!seg.exists());
    assert_eq!(q.get(Seqno(5)).unwrap().unwrap(), t5);
    q.append(&t6, &progress(&t6)).unwrap();
    assert_eq!(q.get(Seqno(6)).unwrap().unwrap(), t6);
}

#[test]
fn damaged_external_record_is_an_error_naming_its_seqno() {
    let dir = TempDir::new("external-damaged");
    let q = TransactionQueue::open(options(&dir)).unwrap();
    append_range(&q, 0..2, 50);
    let t = txn(2, EXTERNAL_MIN_BYTES);
    q.append(&t, &progress(&t)).unwrap();
    append_range(&q, 3..4, 50);
    q.close().unwrap();
    let seg = dir.0.join(segment::segment_dir_name(Seqno(0)));
    let path = seg.join(segment::external_file_name(Seqno(2)));
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let q = TransactionQueue::open(options(&dir)).unwrap();
    match q.get(Seqno(2)) {
        Err(QueueError::Corrupt { seqno, reason, .. }) => {
            assert_eq!(seqno, Seqno(2));
            assert!(reason.contains("CRC"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Cut short.
    std::fs::write(&path, &bytes[..middle]).unwrap();
    match q.get(Seqno(2)) {
        Err(QueueError::Corrupt { seqno, reason, .. }) => {
            assert_eq!(seqno, Seqno(2));
            assert!(reason.contains("holds"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(q.get(Seqno(3)).unwrap().unwrap(), txn(3, 50));
}
