//! Damaged records are errors naming their seqno, never wrong
//! transactions.
//!
//! - A stored record whose bytes change (one byte of its payload, its
//!   length or its format byte, rewritten through sled as a bug or bad
//!   memory would) fails its CRC or format check: reading it is
//!   [`QueueError::Corrupt`] / [`QueueError::UnsupportedFormat`] with its
//!   seqno, the other records still read.
//! - A flipped byte in a segment's sled data file makes sled 0.34 panic
//!   while recovering; the queue catches it: reads of that segment's
//!   seqnos are errors naming the seqno, and a damaged last segment makes
//!   `open` fail with an error, not a panic.

mod queue_support;

use std::path::{Path, PathBuf};

use shardrep::position::Seqno;
use shardrep::queue::codec::RecordCursor;
use shardrep::queue::segment::{block_key, parse_block_key, segment_dir_name};
use shardrep::queue::{QueueError, QueueOptions, TransactionQueue};

use queue_support::{progress, txn, TempDir};

fn fill(
    dir: &Path,
    count: u64,
    payload: usize,
    segment_bytes: u64,
) -> Vec<shardrep::event::Transaction> {
    let mut options = QueueOptions::new(dir);
    options.config.segment_size_bytes = segment_bytes;
    let q = TransactionQueue::open(options).unwrap();
    let mut all = Vec::new();
    for s in 0..count {
        let t = txn(s, payload);
        q.append(&t, &progress(&t)).unwrap();
        all.push(t);
    }
    q.close().unwrap();
    all
}

fn segment_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .collect();
    segs.sort();
    segs
}

/// Rewrites, through sled, the block holding `seqno` with `edit` applied
/// to the bytes of that record (`edit` gets the record's bytes and its
/// offset in the block).
fn damage_record(segment: &Path, seqno: u64, edit: impl FnOnce(&mut [u8])) {
    let db = sled::open(segment).unwrap();
    let (key, value) = db
        .range(..=block_key(Seqno(seqno), u32::MAX))
        .next_back()
        .unwrap()
        .unwrap();
    let (first, chunk) = parse_block_key(&key).unwrap();
    assert_eq!(chunk, 0, "the test damages small records only");
    let mut bytes = value.to_vec();
    let mut cursor = RecordCursor::new(&bytes, 0, first);
    while cursor.seqno() < Seqno(seqno) {
        cursor.next_raw().unwrap();
    }
    let start = cursor.offset();
    let (_, raw) = cursor.next_raw().unwrap();
    let len = raw.len;
    edit(&mut bytes[start..start + len]);
    db.insert(block_key(first, 0), bytes).unwrap();
    db.flush().unwrap();
}

fn open(dir: &Path) -> TransactionQueue {
    TransactionQueue::open(QueueOptions::new(dir)).unwrap()
}

#[test]
fn flipped_payload_byte_is_a_checksum_error_naming_the_seqno() {
    let dir = TempDir::new("corrupt-payload");
    let all = fill(dir.path(), 200, 300, 256 << 20);
    let seg = dir.path().join(segment_dir_name(Seqno(0)));
    damage_record(&seg, 100, |rec| {
        let i = rec.len() / 2;
        rec[i] ^= 0x10;
    });
    let q = open(dir.path());
    let mut r = q.reader_from(Seqno(0)).unwrap();
    for t in all.iter().take(100) {
        assert_eq!(&r.next().unwrap().unwrap(), t);
    }
    let err = r.next().unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            QueueError::Corrupt {
                seqno: Seqno(100),
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("record of seqno 100 is corrupt"), "{text}");
    assert!(text.contains("CRC mismatch"), "{text}");
    assert!(text.contains(&segment_dir_name(Seqno(0))), "{text}");
    // The reader stays on the bad record; the ones after it still read.
    assert!(r.next().unwrap().is_err());
    assert_eq!(q.get(Seqno(101)).unwrap().unwrap(), all[101]);
    assert_eq!(q.get(Seqno(99)).unwrap().unwrap(), all[99]);
}

#[test]
fn damaged_length_makes_the_rest_of_the_block_unreadable_not_wrong() {
    let dir = TempDir::new("corrupt-length");
    let all = fill(dir.path(), 200, 300, 256 << 20);
    let seg = dir.path().join(segment_dir_name(Seqno(0)));
    // Byte 5 is the first byte of the payload length varint.
    damage_record(&seg, 50, |rec| rec[5] ^= 0x04);
    let q = open(dir.path());
    let err = q.get(Seqno(50)).unwrap_err();
    assert_eq!(err.seqno(), Some(Seqno(50)), "{err}");
    // Later records of the same block cannot be located any more: errors
    // naming them, never a misplaced record.
    let mut errors = 0;
    for s in 51..200u64 {
        match q.get(Seqno(s)) {
            Ok(Some(t)) => assert_eq!(t, all[s as usize]),
            Ok(None) => panic!("seqno {s} missing"),
            Err(e) => {
                assert_eq!(e.seqno(), Some(Seqno(s)), "{e}");
                assert!(
                    e.to_string().contains("record of seqno 50 before it"),
                    "{e}"
                );
                errors += 1;
            }
        }
    }
    assert!(errors > 0);
}

#[test]
fn unknown_format_byte_is_reported_with_the_seqno() {
    let dir = TempDir::new("corrupt-format");
    fill(dir.path(), 30, 100, 256 << 20);
    let seg = dir.path().join(segment_dir_name(Seqno(0)));
    damage_record(&seg, 7, |rec| rec[0] = 9);
    let q = open(dir.path());
    let err = q.get(Seqno(7)).unwrap_err();
    assert!(
        matches!(
            err,
            QueueError::UnsupportedFormat {
                seqno: Seqno(7),
                format: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("has format 9"), "{err}");
}

#[test]
fn damaged_last_record_fails_open_naming_the_seqno() {
    let dir = TempDir::new("corrupt-last");
    fill(dir.path(), 40, 100, 256 << 20);
    let seg = dir.path().join(segment_dir_name(Seqno(0)));
    damage_record(&seg, 39, |rec| {
        let n = rec.len();
        rec[n - 1] ^= 0x01;
    });
    let err = TransactionQueue::open(QueueOptions::new(dir.path())).unwrap_err();
    assert!(
        matches!(
            err,
            QueueError::Corrupt {
                seqno: Seqno(39),
                ..
            }
        ),
        "{err:?}"
    );
}

/// Flips one byte of the `db` file in every copy of `marker` (sled keeps
/// older versions of a node until it cleans them); returns the number of
/// copies.
fn flip_in_file(file: &Path, marker: &[u8]) -> usize {
    let mut bytes = std::fs::read(file).unwrap();
    let hits: Vec<usize> = bytes
        .windows(marker.len())
        .enumerate()
        .filter(|(_, w)| *w == marker)
        .map(|(i, _)| i)
        .collect();
    assert!(!hits.is_empty(), "marker not found in {}", file.display());
    for &at in &hits {
        bytes[at + marker.len() / 2] ^= 0x20;
    }
    std::fs::write(file, bytes).unwrap();
    hits.len()
}

/// The payload of `txn(seqno, n)` starts with these bytes (see
/// queue_support::txn): a marker unique to the seqno.
fn marker_of(seqno: u64) -> Vec<u8> {
    (0..24u64)
        .map(|i| i.wrapping_mul(31).wrapping_add(seqno) as u8)
        .collect()
}

#[test]
fn flipped_byte_in_a_sealed_segment_file_fails_its_reads_by_seqno() {
    let dir = TempDir::new("corrupt-file");
    let all = fill(dir.path(), 400, 2_000, 256 << 10);
    let segs = segment_dirs(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let second_start: u64 = segs[1].file_name().unwrap().to_string_lossy()[4..]
        .parse()
        .unwrap();
    let victim = second_start / 2;
    flip_in_file(&segs[0].join("db"), &marker_of(victim));

    // The damaged segment is not the last: the queue opens.
    let q = open(dir.path());
    assert_eq!(q.max_seqno(), Some(Seqno(399)));
    let mut failed = Vec::new();
    for s in 0..400u64 {
        match q.get(Seqno(s)) {
            Ok(Some(t)) => assert_eq!(t, all[s as usize], "seqno {s} read back wrong"),
            Ok(None) => panic!("seqno {s} missing"),
            Err(e) => {
                assert_eq!(e.seqno(), Some(Seqno(s)), "{e}");
                assert!(e.to_string().contains(&format!("seqno {s}")), "{e}");
                failed.push(s);
            }
        }
    }
    assert!(
        failed.contains(&victim),
        "seqno {victim} read back despite the damage"
    );
    assert!(failed.iter().all(|&s| s < second_start), "{failed:?}");
}

#[test]
fn flipped_byte_in_the_last_segment_file_is_an_error_not_a_panic() {
    let dir = TempDir::new("corrupt-file-last");
    fill(dir.path(), 100, 2_000, 256 << 20);
    let segs = segment_dirs(dir.path());
    assert_eq!(segs.len(), 1);
    flip_in_file(&segs[0].join("db"), &marker_of(50));
    // Depending on where sled meets the damage, recovery panics (caught:
    // the open fails), recovers an empty database (the segment's HAS-DATA
    // marker makes that an error too) or the damaged node only fails when
    // read.
    match TransactionQueue::open(QueueOptions::new(dir.path())) {
        Err(QueueError::SegmentCorrupt { segment, start, .. }) => {
            assert_eq!(segment, segs[0]);
            assert_eq!(start, Seqno(0));
        }
        Err(e) => assert!(e.to_string().contains(&segment_dir_name(Seqno(0))), "{e}"),
        Ok(q) => {
            let mut failed = Vec::new();
            for s in 0..100u64 {
                match q.get(Seqno(s)) {
                    Ok(Some(t)) => assert_eq!(t, txn(s, 2_000), "seqno {s} read back wrong"),
                    Ok(None) => panic!("seqno {s} missing"),
                    Err(e) => {
                        assert!(e.to_string().contains(&format!("seqno {s}")), "{e}");
                        failed.push(s);
                    }
                }
            }
            assert!(
                failed.contains(&50),
                "seqno 50 read back despite the damage"
            );
        }
    }
}
