//! Damaged records are errors naming their seqno, never wrong
//! transactions.
//!
//! - A stored record whose bytes change (one byte of its payload, its
//!   length or its format byte, changed before the block was written, as
//!   a bug or bad memory would, so that the block's own CRC matches) fails
//!   its CRC or format check: reading it is [`QueueError::Corrupt`] /
//!   [`QueueError::UnsupportedFormat`] with its seqno, the other records
//!   still read.
//! - A flipped byte in a segment's log file (the disk's damage) fails the
//!   CRC of its block: reads of that block's seqnos are errors naming the
//!   seqno, the other blocks still read, and a damaged last block makes
//!   `open` fail with an error, not a panic.

mod queue_support;

use std::path::{Path, PathBuf};

use shardrep::position::Seqno;
use shardrep::queue::codec::RecordCursor;
use shardrep::queue::log::{frame_header, scan, FRAME_HEADER_BYTES, LOG_FILE};
use shardrep::queue::segment::{parse_segment_dir_name, segment_dir_name};
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

/// Where the record of `seqno` is in the segment's log file: the file's
/// path and bytes, its block's frame, and the record's offset and length
/// in the file.
struct Located {
    path: PathBuf,
    file: Vec<u8>,
    frame: shardrep::queue::log::Frame,
    at: usize,
    len: usize,
}

fn locate(segment: &Path, seqno: u64) -> Located {
    let path = segment.join(LOG_FILE);
    let start = parse_segment_dir_name(&segment.file_name().unwrap().to_string_lossy()).unwrap();
    let (frames, torn) = scan(&std::fs::File::open(&path).unwrap(), start).unwrap();
    assert_eq!(torn, None);
    let frame = *frames
        .iter()
        .rev()
        .find(|f| f.first <= Seqno(seqno))
        .unwrap();
    let file = std::fs::read(&path).unwrap();
    let block_at = frame.offset as usize + FRAME_HEADER_BYTES;
    let block = &file[block_at..block_at + frame.len as usize];
    let mut cursor = RecordCursor::new(block, 0, frame.first);
    while cursor.seqno() < Seqno(seqno) {
        cursor.next_raw().unwrap();
    }
    let at = block_at + cursor.offset();
    let len = cursor.next_raw().unwrap().1.len;
    Located {
        path,
        file,
        frame,
        at,
        len,
    }
}

/// Rewrites the block holding `seqno` in the segment's log file with
/// `edit` applied to the bytes of that record, and the frame's header
/// (its CRC) made anew: as if the record had changed before it was
/// written.
fn damage_record(segment: &Path, seqno: u64, edit: impl FnOnce(&mut [u8])) {
    let Located {
        path,
        mut file,
        frame,
        at,
        len,
    } = locate(segment, seqno);
    edit(&mut file[at..at + len]);
    let block_at = frame.offset as usize + FRAME_HEADER_BYTES;
    let header = frame_header(frame.first, &file[block_at..block_at + frame.len as usize]);
    file[frame.offset as usize..block_at].copy_from_slice(&header);
    std::fs::write(&path, file).unwrap();
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
    // 150 KB of records: seqno 7 is in the first block, not the last,
    // whose records the open needs to locate the last one.
    fill(dir.path(), 30, 5_000, 256 << 20);
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

/// Flips one byte in the middle of the record of `seqno` in the segment's
/// log file, as the disk's damage would (no CRC made anew).
fn flip_in_file(segment: &Path, seqno: u64) {
    let Located {
        path,
        mut file,
        at,
        len,
        ..
    } = locate(segment, seqno);
    file[at + len / 2] ^= 0x20;
    std::fs::write(&path, file).unwrap();
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
    flip_in_file(&segs[0], victim);

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
    flip_in_file(&segs[0], 50);
    // The last block is intact: the queue opens, and only the seqnos of
    // the damaged block fail, each naming itself and the CRC.
    let q = TransactionQueue::open(QueueOptions::new(dir.path())).unwrap();
    let mut failed = Vec::new();
    for s in 0..100u64 {
        match q.get(Seqno(s)) {
            Ok(Some(t)) => assert_eq!(t, txn(s, 2_000), "seqno {s} read back wrong"),
            Ok(None) => panic!("seqno {s} missing"),
            Err(e) => {
                assert_eq!(e.seqno(), Some(Seqno(s)), "{e}");
                assert!(e.to_string().contains("CRC mismatch"), "{e}");
                failed.push(s);
            }
        }
    }
    assert!(
        failed.contains(&50),
        "seqno 50 read back despite the damage"
    );
    // One block of 64 KiB at most: 2 KB records, about 30 of them.
    let (lo, hi) = (failed[0], *failed.last().unwrap());
    assert_eq!(failed, (lo..=hi).collect::<Vec<_>>());
    assert!(failed.len() <= 33, "{failed:?}");
    assert!(hi < 99, "the last block is intact");
}

#[test]
fn flipped_byte_in_the_last_block_fails_open_naming_the_seqno() {
    let dir = TempDir::new("corrupt-file-last-block");
    fill(dir.path(), 100, 2_000, 256 << 20);
    let segs = segment_dirs(dir.path());
    flip_in_file(&segs[0], 99);
    let err = TransactionQueue::open(QueueOptions::new(dir.path())).unwrap_err();
    assert!(matches!(err, QueueError::Corrupt { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("CRC mismatch"), "{text}");
    assert!(text.contains(&segment_dir_name(Seqno(0))), "{text}");
}

#[test]
fn flipped_frame_length_fails_open_instead_of_cutting_the_segment() {
    let dir = TempDir::new("corrupt-frame-length");
    fill(dir.path(), 200, 2_000, 256 << 20);
    let segs = segment_dirs(dir.path());
    let path = segs[0].join(LOG_FILE);
    let (frames, _) = scan(&std::fs::File::open(&path).unwrap(), Seqno(0)).unwrap();
    assert!(frames.len() >= 3, "{frames:?}");
    let mut bytes = std::fs::read(&path).unwrap();
    // The high byte of the second frame's length: the frame now runs past
    // the end of the file, as a torn write would, but its header's own CRC
    // tells damage from a cut.
    bytes[frames[1].offset as usize + 11] ^= 0x01;
    let len_before = bytes.len() as u64;
    std::fs::write(&path, bytes).unwrap();
    let err = TransactionQueue::open(QueueOptions::new(dir.path())).unwrap_err();
    assert!(matches!(err, QueueError::SegmentCorrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("fails its CRC check"), "{err}");
    // It says where the readable part ends and how to cut the rest.
    let cut = format!("truncate -s {} {}", frames[1].offset, path.display());
    assert!(err.to_string().contains(&cut), "{err}");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        len_before,
        "nothing cut"
    );
}
