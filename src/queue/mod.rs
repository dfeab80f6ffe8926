//! The on-disk transaction queue: every extracted transaction is stored
//! here, durably and in seqno order, before it is applied (in the spirit of
//! Tungsten's transaction history log).
//!
//! [`TransactionQueue`] is written by one extractor and read by any number
//! of [`QueueReader`]s, each from its own seqno onwards; readers see
//! transactions appended after they were created. Each record carries the
//! extractor's resume position ([`ExtractorProgress`]) after its
//! transaction, and records reach the disk in blocks, each appended to its
//! segment's log file with one `writev` and checked by a CRC (an external
//! record's file is fsynced before its reference is appended), so the
//! progress is stored atomically with its transaction: after a crash at
//! any point, [`TransactionQueue::last_progress`] is the position right
//! after the last stored transaction, and a restarted extractor neither
//! skips nor repeats one.
//!
//! # On-disk layout
//! ```text
//! QUEUE_DIR/
//!   lock                        flock'ed while the queue is open
//!   seg-00000000000000000000/   one directory per segment: the records of
//!   seg-00000000000000051234/   seqnos [name, next segment's name)
//!     log                       the blocks, appended (see log.rs)
//!     HAS-DATA                  marker: the segment was flushed with records
//!     rec-00000000000000051300  an external record (one large transaction)
//!   floor                       lowest kept seqno (decimal text), see purge
//!   new-seg-…/, trash-seg-…/    a segment being created / deleted (a crash
//!                               may leave them; the next open removes them)
//! ```
//! - A **segment** is started when the current one holds
//!   `segment_size_bytes` of records. Purging drops whole segments, so
//!   space returns to the file system; the segment that holds the lowest
//!   kept seqno stays whole until it is purged entirely.
//! - Inside a segment, records are packed into **blocks** of up to
//!   [`BLOCK_BYTES`] (64 KiB); a larger record is a block of its own. A
//!   block is one frame of the segment's `log` file: a 20-byte header
//!   (first seqno, length, CRC-32 of the block, CRC-32 of the header) and
//!   the records; see [`log`] for the exact bytes and for how a write cut
//!   short by a crash is found and cut off at the next open. The frames'
//!   headers are read when a segment is opened, to index its blocks by
//!   seqno in memory.
//! - A transaction whose [`Transaction::approx_bytes`] reach
//!   [`EXTERNAL_MIN_BYTES`] (256 KiB) is an **external record**: its record
//!   (the same bytes as in a block) is serialized straight into its own
//!   file `rec-<seqno>` in the segment directory, which is fsynced (and the
//!   directory) before a 9-byte reference (tag `0xFE`, length u64 LE) is
//!   appended as its block; the reference becomes durable with the next
//!   flush, like any block. Readers decode it from the file (a CRC pass,
//!   then a decoding pass), so neither side holds its bytes whole. A crash
//!   before the reference is durable leaves a file for a seqno at or above
//!   the queue's next seqno, which the next (writable) open deletes: that
//!   transaction is extracted again, as any not-yet-durable one. A file
//!   that is missing, cut short or damaged is an error naming its seqno.
//!   There is no size limit on a record.
//! - A **record** is a format byte, a CRC-32 and a postcard payload holding
//!   the progress and the [`Transaction`]; see [`codec`] for the exact
//!   bytes. A record or block that fails its checks is an error naming the
//!   seqno ([`QueueError::Corrupt`]), never a wrong transaction.
//! - Segments written by versions before the log file are sled 0.34
//!   databases (`conf`, `db`; records in 6 KiB values, larger ones in
//!   chunks). They are read as before and never written: the first append
//!   after such a queue is opened starts a new segment. See
//!   "Segments of earlier versions" below.
//!
//! # Open segments and memory
//! A segment is open (its log file and its block index, 24 bytes a block)
//! only while something uses it (see [`segment::Segment`]): the writer's
//! active segment, the segment each reader is in, the segment
//! [`TransactionQueue::get`] read last, and any segment for the duration of
//! one call (recovery at open). The writer lets go of a segment when it
//! rolls past it, after flushing it; a reader when it moves to the next
//! segment or to the records not yet written to the log. So a queue with
//! one reader has at most two or three segments open, whatever its
//! backlog. The queue's own memory is: the tail (records not yet written,
//! at most [`BLOCK_BYTES`]) and the writer's copy of it, each reader's
//! current block (a 64 KiB read buffer for an external record), while a
//! record is appended its bytes when it is smaller than
//! [`EXTERNAL_MIN_BYTES`] (a 256 KiB write buffer for an external record),
//! and the block indexes. It does not grow with the backlog nor with the
//! largest transaction: what does is the decoded [`Transaction`] the
//! appender passes in and the one a reader returns, which belong to the
//! caller (about 1.2 times the record's size each in `shardrep run`: the
//! extractor's and the applier's copies). The written blocks are in the
//! kernel's page cache, which the kernel reclaims.
//!
//! # Durability contract
//! - [`TransactionQueue::append`] returns once the transaction is in the
//!   queue's memory (or the log file's page cache): readers see it at
//!   once, but it is **not yet durable**.
//! - A background flusher writes the pending records as a block and calls
//!   `fdatasync` on the log file when `flush_bytes` bytes are pending or
//!   `flush_interval_ms` after the first pending append, whichever comes
//!   first. [`TransactionQueue::durable_seqno`] is the highest seqno known to
//!   be on disk; [`TransactionQueue::flush`] and
//!   [`TransactionQueue::wait_durable`] force and wait for it. Anything
//!   acknowledged to the outside (a semi-synchronous ack to a master, a
//!   status line telling a DBA what is safe) must use `durable_seqno`, never
//!   the last appended seqno. [`QueueReader::durable_only`] gives a reader
//!   that only sees durable transactions.
//! - A normal reader may see (and the applier apply) a transaction that a
//!   crash then loses from the queue; the restarted extractor extracts it
//!   again from the durable progress, with the same seqno, and the channels
//!   skip what they already committed.
//! - **What a crash loses.** A process crash (kill -9) loses the records
//!   not yet written to the log file (the tail, at most [`BLOCK_BYTES`],
//!   written at every flush) and a block whose write it interrupted, not
//!   what the file holds (it is in the page cache); a power loss loses at
//!   most the transactions appended after the last completed flush:
//!   normally at
//!   most `flush_interval_ms` milliseconds or `flush_bytes` bytes of
//!   transactions, more only if the disk cannot keep up with appends. What
//!   survives is always a prefix of the appended seqnos, each with its own
//!   progress, so the extractor re-reads exactly the lost ones from the
//!   master (which still has them: they are milliseconds old). Nothing at
//!   or below `durable_seqno` is lost unless the disk itself loses fsynced
//!   data.
//! - Segment rollover flushes the old segment before writing the new one,
//!   and a purged segment is deleted only once a later segment holds a
//!   durable record, so the newest progress always survives.
//! - Purge marks (`floor`) are not fsynced: after a power loss a purge may
//!   be forgotten, and the purged transactions are listed again until the
//!   next purge. That is harmless: purge only reclaims space.
//!
//! # Retention and back-pressure
//! When the queue holds `max_size_bytes` on disk (estimated between
//! measurements), [`TransactionQueue::append`] waits until a purge makes
//! room (a condition variable is signalled by [`TransactionQueue::purge_below`]
//! and by the flusher); [`TransactionQueue::append_async`] waits on a tokio
//! `Notify` instead, and [`TransactionQueue::try_append`] returns
//! [`QueueError::Full`]. Nothing is ever dropped. A queue whose every
//! transaction is purged always accepts the next one, whatever its size.
//! [`TransactionQueue::purge_applied`] purges below the minimum committed
//! seqno minus `retention_seqnos`.
//!
//! [`TransactionQueue::append`] and [`TransactionQueue::append_async`] also
//! wait (asking for a flush) while the records appended since the start of
//! the last completed flush reach four times `flush_bytes` (at least
//! [`MIN_MAX_UNFLUSHED_BYTES`]): a writer faster than the disk would
//! otherwise fill the page cache with dirty pages that a power loss
//! loses, and stretch the time a flush takes without bound. A single
//! record of any size is accepted when nothing waits for a flush.
//! [`TransactionQueue::try_append`] does not wait for flushes.
//!
//! # Segments of earlier versions (sled 0.34.7)
//! Until the log file, every segment was a sled database, which took a
//! third of shardrep's CPU in a catch-up (issue 17: its inserts, tree
//! splits and I/O threads) and two bytes on disk per record byte. What is
//! still true of such segments, which are read and never written:
//! - A flipped byte in a data file makes sled panic while recovering
//!   ("tried to serialize Uninitialized") instead of returning an error;
//!   the panic is caught and the segment reported as
//!   [`QueueError::SegmentCorrupt`] (a read of one of its seqnos as
//!   [`QueueError::Corrupt`] naming the seqno). Other damage makes sled
//!   recover the file as an empty database, silently; the `HAS-DATA`
//!   marker makes that an error too, instead of an empty segment.
//! - Every open of a database that holds data pads its last log segment to
//!   512 KiB, and sled takes its own lock on the database while it is open.

pub mod codec;
mod error;
pub mod log;
pub mod private;
pub mod segment;
pub mod space;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::QueueConfig;
use crate::event::Transaction;
use crate::position::Seqno;

pub use codec::ExtractorProgress;
pub use error::QueueError;

use codec::{RecordCursor, RecordError};
use segment::{parse_segment_dir_name, sync_path, BlockBytes, Segment, SegmentPin};

/// Name of the file holding the purge floor in the queue directory.
const FLOOR_FILE: &str = "floor";

/// Name of the file a queue holds an exclusive `flock` on while it is
/// open, so that two processes never open one queue.
pub const LOCK_FILE: &str = "lock";

/// How long an open waits for the lock: a queue closed an instant ago by
/// this process may still be held by a reader being dropped.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Largest block the writer packs records into, bytes: records of at
/// most this size are gathered in the tail and written together as one
/// block (one `writev`, one frame of the log file); a larger record is a
/// block of its own.
pub const BLOCK_BYTES: usize = 64 << 10;

/// Least number of record bytes appends may run ahead of the last
/// completed flush (see [`TransactionQueue::append`]); the bound is four
/// times `flush_bytes` when that is more.
pub const MIN_MAX_UNFLUSHED_BYTES: u64 = 16 << 20;

/// A transaction whose [`Transaction::approx_bytes`] reach this (256 KiB)
/// is stored as an *external record* (its own file in the segment
/// directory, see [`segment::Segment::write_external`]) instead of in a
/// block, so that the queue never holds it whole in memory.
pub const EXTERNAL_MIN_BYTES: usize = 256 << 10;

/// Largest capacity, bytes, that [`Inner::encode`] gives a record's buffer
/// before serializing into it (the length of the previous record and a
/// quarter more, at most this): most records then fit without the buffer
/// growing by doubling from empty.
const ENCODE_RESERVE_MAX_BYTES: usize = 64 << 10;

/// Largest buffer, bytes, that a [`QueueReader`] keeps from a block it has
/// read for the next one (a block of a large record is freed instead).
const SPARE_KEEP_BYTES: usize = 4 * BLOCK_BYTES;

/// How a queue is opened: the `[queue]` settings of the configuration plus
/// the read-only switch of the offline tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// The `[queue]` settings: the directory (created if missing, unless
    /// read-only), `max_size_bytes` (appends wait when the queue holds this
    /// many bytes on disk), `retention_seqnos` (kept below the minimum
    /// committed seqno by [`TransactionQueue::purge_applied`]),
    /// `segment_size_bytes`, `flush_interval_ms` and `flush_bytes`.
    pub config: QueueConfig,
    /// Open for reading only: no appends, no purges, no flusher thread, no
    /// repairs of the directory (a torn tail is left as it is; sled may
    /// still write its own recovery bookkeeping into the files of a
    /// segment of an earlier version).
    pub read_only: bool,
}

impl QueueOptions {
    /// Options for `dir` with the configuration's defaults
    /// ([`QueueConfig::with_defaults`]).
    pub fn new(dir: impl Into<PathBuf>) -> QueueOptions {
        QueueOptions::from_config(&QueueConfig::with_defaults(dir))
    }

    /// The options of a configuration's `[queue]` section.
    pub fn from_config(config: &QueueConfig) -> QueueOptions {
        QueueOptions {
            config: config.clone(),
            read_only: false,
        }
    }

    fn validate(&self) -> Result<(), QueueError> {
        let zero = [
            ("max_size_bytes", self.config.max_size_bytes),
            ("segment_size_bytes", self.config.segment_size_bytes),
            ("flush_interval_ms", self.config.flush_interval_ms),
            ("flush_bytes", self.config.flush_bytes),
        ];
        for (name, value) in zero {
            if value == 0 {
                return Err(QueueError::InvalidOptions {
                    dir: self.config.dir.clone(),
                    message: format!("{name} must be at least 1"),
                });
            }
        }
        Ok(())
    }
}

/// One segment as [`TransactionQueue::info`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The first seqno the segment holds (or held, if purged in part).
    pub start: Seqno,
    /// Its directory.
    pub dir: PathBuf,
    /// Bytes on disk.
    pub size_bytes: u64,
}

/// A summary of the queue (`shardrep log info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueInfo {
    /// The queue directory.
    pub dir: PathBuf,
    /// Lowest stored (not purged) seqno.
    pub min_seqno: Option<Seqno>,
    /// Highest stored seqno.
    pub max_seqno: Option<Seqno>,
    /// Number of stored transactions.
    pub count: u64,
    /// Highest seqno known to be on disk.
    pub durable_seqno: Option<Seqno>,
    /// Bytes on disk (every file under the queue directory).
    pub size_bytes: u64,
    /// The segments, oldest first.
    pub segments: Vec<SegmentInfo>,
    /// The extractor's progress after the last stored transaction.
    pub progress: Option<ExtractorProgress>,
}

/// Records appended but not yet written to the log file, visible to
/// readers.
#[derive(Debug, Default)]
struct Tail {
    /// Seqno of the first record in `data`.
    first: Seqno,
    /// Records, concatenated.
    data: Vec<u8>,
    /// Number of records in `data`.
    count: u64,
}

/// State shared by the writer, the flusher and the readers.
struct Shared {
    segments: BTreeMap<Seqno, Arc<Segment>>,
    /// The seqno the next append gets.
    next: Seqno,
    /// Seqnos below this are purged.
    floor: Seqno,
    /// Seqnos below this are durable.
    durable_next: Seqno,
    tail: Tail,
    progress: Option<ExtractorProgress>,
    unflushed_bytes: u64,
    unflushed_since: Option<Instant>,
    /// Record bytes appended since the queue was opened.
    appended_bytes: u64,
    /// `appended_bytes` when the last completed flush started: what is
    /// above it sits in the tail or in dirty pages of the page cache.
    durable_bytes: u64,
    flush_requested: bool,
    closed: bool,
    failed: Option<String>,
    waiting_readers: usize,
    /// Bumped whenever room may have appeared (purge, flush).
    space_epoch: u64,
}

impl Shared {
    fn estimated_size(&self) -> u64 {
        self.segments
            .values()
            .map(|s| s.estimated_bytes())
            .sum::<u64>()
            + 2 * self.tail.data.len() as u64
    }

    /// Removes the segments that are entirely purged and followed by a
    /// segment with a durable record; the caller drops them (which deletes
    /// their directories) after releasing the lock.
    fn take_purged_segments(&mut self) -> Vec<Arc<Segment>> {
        let starts: Vec<Seqno> = self.segments.keys().copied().collect();
        let mut removed = Vec::new();
        for pair in starts.windows(2) {
            let (current, following) = (pair[0], pair[1]);
            if following <= self.floor && following < self.durable_next {
                let seg = self.segments.remove(&current).expect("listed");
                seg.remove_when_dropped();
                removed.push(seg);
            } else {
                break;
            }
        }
        removed
    }

    fn segment_for(&self, seqno: Seqno) -> Option<Arc<Segment>> {
        self.segments
            .range(..=seqno)
            .next_back()
            .map(|(_, s)| s.clone())
    }
}

/// The writer's own state (one appender at a time).
struct Writer {
    /// The segment appends go to, held open.
    active: Option<SegmentPin>,
    next: Seqno,
}

struct Inner {
    options: QueueOptions,
    writer: Mutex<Writer>,
    shared: Mutex<Shared>,
    /// Readers and durability waiters.
    changed: Condvar,
    /// Appenders waiting for room.
    space: Condvar,
    /// The flusher.
    flush_cv: Condvar,
    data_notify: tokio::sync::Notify,
    space_notify: tokio::sync::Notify,
    purge_lock: Mutex<()>,
    /// Segments open now.
    open_segments: Arc<AtomicUsize>,
    /// The segment [`TransactionQueue::get`] read last, kept open for the
    /// next call (`log list` gets seqno after seqno).
    get_pin: Mutex<Option<SegmentPin>>,
    /// Length in bytes of the last record [`Inner::encode`] made: the
    /// capacity it gives the next one.
    last_record_bytes: AtomicUsize,
    /// The locked [`LOCK_FILE`], released when the queue is closed.
    lock_file: Mutex<Option<std::fs::File>>,
}

/// Opens `dir`'s [`LOCK_FILE`] (creating it, mode 0600) and takes an
/// exclusive `flock` on it, waiting up to [`LOCK_WAIT`]. A read-only open
/// of a directory where the file cannot be created goes without the lock.
///
/// # Errors
/// [`QueueError::Locked`] when another open holds it;
/// [`QueueError::Io`].
fn lock_queue(dir: &Path, read_only: bool) -> Result<Option<std::fs::File>, QueueError> {
    let path = dir.join(LOCK_FILE);
    let io = |op: &str, source: std::io::Error| QueueError::Io {
        dir: dir.to_path_buf(),
        op: format!("{op} {}", path.display()),
        cause: source,
    };
    let opened = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            std::fs::OpenOptions::new().read(true).open(&path)
        }
        other => other,
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match private::create_file(&path) {
            Ok(f) => f,
            Err(e) if read_only => {
                tracing::debug!(error = %e, "read-only queue open without its lock file");
                return Ok(None);
            }
            Err(e) => return Err(io("create", e)),
        },
        Err(e) => return Err(io("open", e)),
    };
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => {
                // The holder's id, for the error another open gets (best
                // effort: a read-only open may not write).
                let mut f = &file;
                let _ = file.set_len(0).and_then(|()| {
                    std::io::Write::write_all(
                        &mut f,
                        format!("{}\n", std::process::id()).as_bytes(),
                    )
                });
                return Ok(Some(file));
            }
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse().ok());
                return Err(QueueError::Locked {
                    dir: dir.to_path_buf(),
                    holder,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", e)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a queue lock leaves consistent state (every
    // update is completed before the guard drops), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The durable, ordered, purgeable transaction queue. See the module
/// documentation for the layout and the durability contract.
///
/// All methods take `&self`; share the queue between threads with an
/// `Arc`. Appends are serialized internally; they must come in dense seqno
/// order from 0. Dropping the queue flushes it (errors are logged); use
/// [`TransactionQueue::close`] to see them.
pub struct TransactionQueue {
    inner: Arc<Inner>,
    flusher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TransactionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionQueue")
            .field("dir", &self.inner.options.config.dir)
            .finish()
    }
}

enum TryAppend {
    Done,
    /// No room; the space epoch seen.
    Full {
        epoch: u64,
        size_bytes: u64,
    },
}

/// A record ready to append.
enum Encoded {
    /// Its bytes (small and chunked records).
    Bytes(Vec<u8>),
    /// An external record, serialized into its own file when it is
    /// appended; its length in bytes.
    External { len: u64 },
}

impl Encoded {
    /// The record's length, bytes.
    fn len(&self) -> u64 {
        match self {
            Encoded::Bytes(b) => b.len() as u64,
            Encoded::External { len } => *len,
        }
    }
}

impl TransactionQueue {
    /// Opens the queue in `options.config.dir`, creating it if missing, and
    /// recovers its state: the last stored transaction and its progress,
    /// the purge floor. Empty segments left by a crash after the last
    /// stored transaction are deleted. Starts the flusher thread
    /// (`shardrep-queue-flush`) unless read-only.
    ///
    /// # Errors
    /// [`QueueError::InvalidOptions`]; [`QueueError::Io`] when the
    /// directory cannot be created or listed; [`QueueError::Locked`] when
    /// another process has the queue open; [`QueueError::SegmentIo`] (and
    /// [`QueueError::Storage`] for sled segments) when a segment's files
    /// cannot be read; [`QueueError::Corrupt`],
    /// [`QueueError::SegmentCorrupt`] or [`QueueError::Layout`] when the
    /// last stored transaction cannot be read back.
    pub fn open(options: QueueOptions) -> Result<TransactionQueue, QueueError> {
        options.validate()?;
        let dir = options.config.dir.clone();
        let io = |op: &str, source: std::io::Error| QueueError::Io {
            dir: dir.clone(),
            op: op.to_string(),
            cause: source,
        };
        if options.read_only {
            if !dir.is_dir() {
                return Err(io(
                    "open the queue directory",
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
                ));
            }
        } else {
            private::create_dir(&dir).map_err(|e| io("create the directory (mode 0700)", e))?;
        }
        let lock_file = lock_queue(&dir, options.read_only)?;
        let mut starts = Vec::new();
        let mut floor_text = None;
        for entry in std::fs::read_dir(&dir).map_err(|e| io("list the directory", e))? {
            let entry = entry.map_err(|e| io("list the directory", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(start) = parse_segment_dir_name(&name) {
                starts.push(start);
            } else if name.starts_with("seg-") {
                return Err(QueueError::Layout {
                    dir: dir.clone(),
                    message: format!(
                        "{name:?} looks like a segment but is not seg-<20 digits>; move it away"
                    ),
                });
            } else if name.starts_with("trash-") && !options.read_only {
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| io(&format!("delete the purged segment {name}"), e))?;
            } else if name.starts_with(segment::NEW_PREFIX) && !options.read_only {
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| io(&format!("delete the unfinished segment {name}"), e))?;
            } else if name == FLOOR_FILE {
                floor_text = std::fs::read_to_string(entry.path()).ok();
            }
        }
        starts.sort();
        let open_segments = Arc::new(AtomicUsize::new(0));
        let mut segments: Vec<Arc<Segment>> = starts
            .iter()
            .map(|&s| Arc::new(Segment::new(&dir, s, open_segments.clone())))
            .collect();

        // The last segment with a block holds the last stored transaction;
        // it stays open for the writer.
        let mut trailing_empty = Vec::new();
        let mut last_pin = None;
        while let Some(seg) = segments.last() {
            let pin = seg.pin()?;
            if seg.is_empty()? {
                if seg.has_data_marker() {
                    return Err(QueueError::SegmentCorrupt {
                        segment: seg.dir().to_path_buf(),
                        start: seg.start(),
                        reason: format!(
                            "it holds no record although it was flushed with transactions \
                             ({} marker): its data file is damaged",
                            segment::HAS_DATA_MARKER
                        ),
                    });
                }
                drop(pin);
                trailing_empty.push(segments.pop().expect("last"));
            } else {
                last_pin = Some(pin);
                break;
            }
        }
        let (next, progress) = match segments.last() {
            Some(seg) => {
                let (last_txn, progress) = last_record(seg)?;
                (Seqno(last_txn.0 + 1), Some(progress))
            }
            None => (Seqno(0), None),
        };
        if segments.is_empty() {
            if let Some(seg) = trailing_empty.iter().find(|s| s.start() != Seqno(0)) {
                return Err(QueueError::Layout {
                    dir: dir.clone(),
                    message: format!(
                        "segment {} is empty and no segment before it holds a transaction, \
                         so the queue cannot tell where the extractor stopped; \
                         move the directory away to start afresh",
                        seg.dir().display()
                    ),
                });
            }
        }
        for seg in trailing_empty {
            if !options.read_only {
                tracing::info!(
                    segment = %seg.dir().display(),
                    "deleting an empty queue segment left after the last stored transaction"
                );
                seg.remove_when_dropped();
            }
        }
        if let Some(seg) = segments.last() {
            if !options.read_only {
                // The end of a write a crash interrupted.
                seg.cut_torn_tail()?;
                // Files of external records whose reference a crash lost.
                seg.remove_external_from(next)?;
                seg.sync_files()?;
                sync_path(&dir).map_err(|e| io("fsync the directory", e))?;
            }
        }

        let first_start = segments.first().map_or(next, |s| s.start());
        let floor_file = floor_text.and_then(|t| t.trim().parse::<u64>().ok());
        let floor = Seqno(floor_file.unwrap_or(0).max(first_start.0).min(next.0));
        // A sled segment of an earlier version is not written: the first
        // append starts a new segment.
        let active = last_pin.filter(|pin| !pin.is_legacy());
        let mut shared = Shared {
            segments: segments.into_iter().map(|s| (s.start(), s)).collect(),
            next,
            floor,
            durable_next: next,
            tail: Tail {
                first: next,
                data: Vec::new(),
                count: 0,
            },
            progress,
            unflushed_bytes: 0,
            unflushed_since: None,
            appended_bytes: 0,
            durable_bytes: 0,
            flush_requested: false,
            closed: false,
            failed: None,
            waiting_readers: 0,
            space_epoch: 0,
        };
        let purged = if options.read_only {
            Vec::new()
        } else {
            shared.take_purged_segments()
        };
        drop(purged);
        let read_only = options.read_only;
        let inner = Arc::new(Inner {
            options,
            writer: Mutex::new(Writer { active, next }),
            shared: Mutex::new(shared),
            changed: Condvar::new(),
            space: Condvar::new(),
            flush_cv: Condvar::new(),
            data_notify: tokio::sync::Notify::new(),
            space_notify: tokio::sync::Notify::new(),
            purge_lock: Mutex::new(()),
            open_segments,
            get_pin: Mutex::new(None),
            last_record_bytes: AtomicUsize::new(0),
            lock_file: Mutex::new(lock_file),
        });
        let flusher = if read_only {
            None
        } else {
            let inner = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("shardrep-queue-flush".into())
                    .spawn(move || inner.flusher_loop())
                    .map_err(|e| io("start the flusher thread", e))?,
            )
        };
        Ok(TransactionQueue { inner, flusher })
    }

    /// The queue directory.
    pub fn dir(&self) -> &Path {
        &self.inner.options.config.dir
    }

    /// The options the queue was opened with.
    pub fn options(&self) -> &QueueOptions {
        &self.inner.options
    }

    /// Appends `txn` with the extractor's `progress` after it, waiting
    /// while the queue is full. Returns when readers can see it; it is
    /// durable later (see [`TransactionQueue::durable_seqno`]).
    ///
    /// # Errors
    /// [`QueueError::OutOfOrder`] unless `txn.seqno` is the next seqno
    /// (0 for a new queue); [`QueueError::ProgressMismatch`] unless
    /// `progress.seqno == txn.seqno`; [`QueueError::SegmentIo`] when the
    /// write fails (the queue then refuses appends with
    /// [`QueueError::Failed`]);
    /// [`QueueError::Closed`], [`QueueError::ReadOnly`].
    pub fn append(
        &self,
        txn: &Transaction,
        progress: &ExtractorProgress,
    ) -> Result<(), QueueError> {
        let record = self.inner.encode(txn, progress)?;
        loop {
            match self.inner.try_append(txn, progress, &record, true)? {
                TryAppend::Done => return Ok(()),
                TryAppend::Full { epoch, .. } => {
                    let mut s = lock(&self.inner.shared);
                    while s.space_epoch == epoch && !s.closed && s.failed.is_none() {
                        s = self.inner.space.wait(s).unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
        }
    }

    /// Like [`TransactionQueue::append`], but returns
    /// [`QueueError::Full`] instead of waiting.
    ///
    /// # Errors
    /// As [`TransactionQueue::append`], and [`QueueError::Full`].
    pub fn try_append(
        &self,
        txn: &Transaction,
        progress: &ExtractorProgress,
    ) -> Result<(), QueueError> {
        let record = self.inner.encode(txn, progress)?;
        match self.inner.try_append(txn, progress, &record, false)? {
            TryAppend::Done => Ok(()),
            TryAppend::Full { size_bytes, .. } => Err(QueueError::Full {
                dir: self.inner.options.config.dir.clone(),
                size_bytes,
                max_size_bytes: self.inner.options.config.max_size_bytes,
            }),
        }
    }

    /// Like [`TransactionQueue::append`] for async callers: while the queue
    /// is full it awaits a tokio `Notify` (signalled by purges and flushes)
    /// instead of blocking the thread. The append itself (a memory copy,
    /// now and then one block written to the log file) runs on the calling
    /// thread.
    ///
    /// # Errors
    /// As [`TransactionQueue::append`].
    pub async fn append_async(
        &self,
        txn: &Transaction,
        progress: &ExtractorProgress,
    ) -> Result<(), QueueError> {
        let record = self.inner.encode(txn, progress)?;
        loop {
            // Registered for a wake-up only when full (then tried again,
            // so that room made before the registration is not missed).
            if let TryAppend::Done = self.inner.try_append(txn, progress, &record, true)? {
                return Ok(());
            }
            let notified = self.inner.space_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.inner.try_append(txn, progress, &record, true)? {
                TryAppend::Done => return Ok(()),
                TryAppend::Full { .. } => notified.await,
            }
        }
    }

    /// A reader that returns the transactions from `seqno` on, in order,
    /// including those appended after it was created.
    ///
    /// # Errors
    /// [`QueueError::Purged`] when `seqno` is below the lowest kept seqno.
    pub fn reader_from(&self, seqno: Seqno) -> Result<QueueReader, QueueError> {
        let s = lock(&self.inner.shared);
        if seqno < s.floor {
            return Err(QueueError::Purged {
                dir: self.inner.options.config.dir.clone(),
                seqno,
                first_kept: s.floor,
            });
        }
        drop(s);
        Ok(QueueReader {
            inner: self.inner.clone(),
            next: seqno,
            durable_only: false,
            current: None,
            spare: Vec::new(),
            pin: None,
        })
    }

    /// The transaction `seqno`, `None` when it is not stored yet. The
    /// segment it is read from stays open until a `get` needs another one
    /// or the segment is purged.
    ///
    /// # Errors
    /// As [`QueueReader::try_next`].
    pub fn get(&self, seqno: Seqno) -> Result<Option<Transaction>, QueueError> {
        let mut reader = self.reader_from(seqno)?;
        reader.pin = lock(&self.inner.get_pin).take();
        let result = reader.try_next();
        let old = std::mem::replace(&mut *lock(&self.inner.get_pin), reader.pin.take());
        drop(old);
        result
    }

    /// How many segments are open now: the writer's, the ones readers are
    /// in, the last one [`TransactionQueue::get`] read and the ones a call
    /// is using at this instant. Each costs a file descriptor and its
    /// block index (sled's cache and what it keeps of the values written
    /// and read, for a segment of an earlier version), so tests and
    /// diagnostics watch it.
    pub fn open_segments(&self) -> usize {
        self.inner.open_segments.load(Ordering::Relaxed)
    }

    /// The lowest stored (not purged) seqno; `None` when the queue holds
    /// no transaction.
    pub fn min_seqno(&self) -> Option<Seqno> {
        let s = lock(&self.inner.shared);
        (s.floor < s.next).then_some(s.floor)
    }

    /// The highest stored seqno; `None` when the queue holds no
    /// transaction.
    pub fn max_seqno(&self) -> Option<Seqno> {
        let s = lock(&self.inner.shared);
        (s.floor < s.next).then(|| Seqno(s.next.0 - 1))
    }

    /// The seqno the next append must have (one more than the last stored
    /// transaction ever, purged or not).
    pub fn next_seqno(&self) -> Seqno {
        lock(&self.inner.shared).next
    }

    /// The highest seqno known to be on disk (flushed and fsynced);
    /// `None` before the first flush of a new queue.
    pub fn durable_seqno(&self) -> Option<Seqno> {
        let s = lock(&self.inner.shared);
        s.durable_next.0.checked_sub(1).map(Seqno)
    }

    /// The extractor's progress after the last stored transaction: after
    /// [`TransactionQueue::open`], the one recovered from disk (where the
    /// extractor must resume); later, the one of the last append. `None`
    /// for a queue that never stored a transaction.
    pub fn last_progress(&self) -> Option<ExtractorProgress> {
        lock(&self.inner.shared).progress.clone()
    }

    /// Purges every transaction below `below` (at most up to the next
    /// seqno): they can no longer be read, and every segment that holds only
    /// purged transactions is deleted (once a later segment holds a durable
    /// transaction). Wakes appenders waiting for room. Returns the lowest
    /// kept seqno.
    ///
    /// # Errors
    /// [`QueueError::ReadOnly`]; [`QueueError::Io`] when the floor file
    /// cannot be written (the purge still holds in memory).
    pub fn purge_below(&self, below: Seqno) -> Result<Seqno, QueueError> {
        let inner = &self.inner;
        if inner.options.read_only {
            return Err(QueueError::ReadOnly {
                dir: inner.options.config.dir.clone(),
            });
        }
        let _serial = lock(&inner.purge_lock);
        let (floor, moved, removed) = {
            let mut s = lock(&inner.shared);
            let target = below.min(s.next);
            let moved = target > s.floor;
            if moved {
                s.floor = target;
            }
            let removed = s.take_purged_segments();
            if moved || !removed.is_empty() {
                s.space_epoch += 1;
            }
            (s.floor, moved, removed)
        };
        if moved || !removed.is_empty() {
            inner.space.notify_all();
            inner.space_notify.notify_waiters();
        }
        inner.drop_purged(removed);
        if moved {
            inner.write_floor(floor)?;
        }
        Ok(floor)
    }

    /// Purges below `min_committed + 1 - retention_seqnos`: what every
    /// channel has committed, less the configured retention.
    ///
    /// # Errors
    /// As [`TransactionQueue::purge_below`].
    pub fn purge_applied(&self, min_committed: Seqno) -> Result<Seqno, QueueError> {
        let below =
            (min_committed.0 + 1).saturating_sub(self.inner.options.config.retention_seqnos);
        self.purge_below(Seqno(below))
    }

    /// Bytes on disk now: every file under the queue directory.
    ///
    /// # Errors
    /// [`QueueError::Io`] when the directory cannot be walked.
    pub fn size_bytes(&self) -> Result<u64, QueueError> {
        segment::dir_size(&self.inner.options.config.dir).map_err(|e| QueueError::Io {
            dir: self.inner.options.config.dir.clone(),
            op: "measure the directory".into(),
            cause: e,
        })
    }

    /// The estimate of bytes on disk that back-pressure uses (measured at
    /// each flush, plus twice the bytes written since).
    pub fn estimated_size_bytes(&self) -> u64 {
        lock(&self.inner.shared).estimated_size()
    }

    /// Writes and fsyncs everything appended so far; returns the durable
    /// seqno.
    ///
    /// # Errors
    /// [`QueueError::SegmentIo`] when the write or the fsync fails.
    pub fn flush(&self) -> Result<Option<Seqno>, QueueError> {
        if self.inner.options.read_only {
            return Ok(self.durable_seqno());
        }
        self.inner.flush_now()?;
        Ok(self.durable_seqno())
    }

    /// Waits until `seqno` is durable, asking the flusher to flush now;
    /// `Ok(false)` after `timeout`.
    ///
    /// # Errors
    /// [`QueueError::Failed`] when flushing failed.
    pub fn wait_durable(&self, seqno: Seqno, timeout: Duration) -> Result<bool, QueueError> {
        let inner = &self.inner;
        let deadline = Instant::now() + timeout;
        let mut s = lock(&inner.shared);
        loop {
            if s.durable_next > seqno {
                return Ok(true);
            }
            if let Some(message) = &s.failed {
                return Err(QueueError::Failed {
                    dir: inner.options.config.dir.clone(),
                    message: message.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline || s.closed {
                return Ok(false);
            }
            s.flush_requested = true;
            inner.flush_cv.notify_one();
            s.waiting_readers += 1;
            s = inner
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            s.waiting_readers -= 1;
        }
    }

    /// A summary: seqno range, count, durable seqno, bytes on disk,
    /// segments, progress.
    ///
    /// # Errors
    /// [`QueueError::Io`] when sizes cannot be measured.
    pub fn info(&self) -> Result<QueueInfo, QueueError> {
        let (segments, progress) = {
            let s = lock(&self.inner.shared);
            (
                s.segments.values().cloned().collect::<Vec<_>>(),
                s.progress.clone(),
            )
        };
        let segments = segments
            .iter()
            .map(|seg| SegmentInfo {
                start: seg.start(),
                dir: seg.dir().to_path_buf(),
                size_bytes: segment::dir_size(seg.dir()).unwrap_or(0),
            })
            .collect();
        let min_seqno = self.min_seqno();
        let max_seqno = self.max_seqno();
        Ok(QueueInfo {
            dir: self.inner.options.config.dir.clone(),
            min_seqno,
            max_seqno,
            count: match (min_seqno, max_seqno) {
                (Some(a), Some(b)) => b.0 - a.0 + 1,
                _ => 0,
            },
            durable_seqno: self.durable_seqno(),
            size_bytes: self.size_bytes()?,
            segments,
            progress,
        })
    }

    /// Flushes, stops the flusher and closes the queue. Readers created
    /// from it keep working on what is stored, and keep the segment each
    /// is in open. The queue's lock is released.
    ///
    /// # Errors
    /// The final flush's error; [`QueueError::Failed`] when an earlier
    /// write or flush failed (what was appended after the last durable
    /// seqno may be lost).
    pub fn close(mut self) -> Result<(), QueueError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), QueueError> {
        let result = self.stop_flusher();
        // Close the segments the queue itself holds open (readers keep
        // theirs).
        let active = lock(&self.inner.writer).active.take();
        drop(active);
        let cached = lock(&self.inner.get_pin).take();
        drop(cached);
        let lock_file = lock(&self.inner.lock_file).take();
        drop(lock_file);
        result
    }

    /// Stops the flusher (once; read-only queues have none) and flushes
    /// what is left.
    fn stop_flusher(&mut self) -> Result<(), QueueError> {
        let Some(flusher) = self.flusher.take() else {
            return Ok(());
        };
        {
            let mut s = lock(&self.inner.shared);
            s.closed = true;
        }
        self.inner.flush_cv.notify_all();
        self.inner.changed.notify_all();
        self.inner.space.notify_all();
        self.inner.data_notify.notify_waiters();
        self.inner.space_notify.notify_waiters();
        let _ = flusher.join();
        if let Some(message) = lock(&self.inner.shared).failed.clone() {
            return Err(QueueError::Failed {
                dir: self.inner.options.config.dir.clone(),
                message,
            });
        }
        self.inner.flush_now().map(|_| ())
    }
}

impl Drop for TransactionQueue {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "closing the transaction queue");
        }
    }
}

/// Reads the last block of `seg` and decodes its last record.
fn last_record(seg: &Segment) -> Result<(Seqno, ExtractorProgress), QueueError> {
    let Some((first_block, last_block)) = seg.block_bounds()? else {
        return Err(QueueError::Corrupt {
            segment: seg.dir().to_path_buf(),
            seqno: seg.start(),
            reason: "the segment became empty while it was opened".into(),
        });
    };
    if first_block != seg.start() {
        return Err(QueueError::Corrupt {
            segment: seg.dir().to_path_buf(),
            seqno: seg.start(),
            reason: format!(
                "the segment's first block starts at seqno {first_block}, not at the segment's \
                 first seqno"
            ),
        });
    }
    let block = seg
        .block_starting_at(last_block)?
        .expect("the last key's block exists");
    if let BlockBytes::External { path, len } = &block.bytes {
        // Only the progress is needed: the transaction's changes are not
        // decoded.
        let (txn, progress) = codec::read_record_file(path, *len, true)
            .map_err(|e| record_error(seg.dir(), block.first, e))?;
        if txn.seqno != block.first {
            return Err(wrong_seqno(seg.dir(), block.first, txn.seqno));
        }
        return Ok((block.first, progress));
    }
    // Step over the records before the last by their headers (a damaged
    // payload among them is an error when read, not at open); the last is
    // checked whole.
    let mut cursor = RecordCursor::new(&block.bytes, 0, block.first);
    let mut last = None;
    while !cursor.at_end() {
        let seqno = cursor.seqno();
        let mut probe = cursor.clone();
        cursor
            .skip()
            .map_err(|e| record_error(seg.dir(), seqno, e))?;
        if cursor.at_end() {
            let (_, raw) = probe
                .next_raw()
                .map_err(|e| record_error(seg.dir(), seqno, e))?;
            last = Some((seqno, raw));
        }
    }
    let (seqno, raw) = last.ok_or_else(|| QueueError::Corrupt {
        segment: seg.dir().to_path_buf(),
        seqno: block.first,
        reason: "the segment's last block is empty".into(),
    })?;
    let (txn, progress) =
        codec::decode_record(&raw).map_err(|e| record_error(seg.dir(), seqno, e))?;
    if txn.seqno != seqno {
        return Err(wrong_seqno(seg.dir(), seqno, txn.seqno));
    }
    Ok((seqno, progress))
}

fn record_error(segment: &Path, seqno: Seqno, e: RecordError) -> QueueError {
    match e {
        RecordError::UnsupportedFormat(format) => QueueError::UnsupportedFormat {
            segment: segment.to_path_buf(),
            seqno,
            format,
        },
        RecordError::Corrupt(reason) => QueueError::Corrupt {
            segment: segment.to_path_buf(),
            seqno,
            reason,
        },
    }
}

fn wrong_seqno(segment: &Path, seqno: Seqno, found: Seqno) -> QueueError {
    QueueError::Corrupt {
        segment: segment.to_path_buf(),
        seqno,
        reason: format!("the record in its place holds seqno {found}"),
    }
}

impl Inner {
    /// Encodes `txn`'s record (an external one only counted).
    fn encode(
        &self,
        txn: &Transaction,
        progress: &ExtractorProgress,
    ) -> Result<Encoded, QueueError> {
        if progress.seqno != txn.seqno {
            return Err(QueueError::ProgressMismatch {
                dir: self.options.config.dir.clone(),
                txn: txn.seqno,
                progress: progress.seqno,
            });
        }
        let encode_error = |message| QueueError::Encode {
            dir: self.options.config.dir.clone(),
            seqno: txn.seqno,
            message,
        };
        if txn.approx_bytes() >= EXTERNAL_MIN_BYTES {
            let len = codec::record_len(txn, progress).map_err(encode_error)?;
            if len > BLOCK_BYTES as u64 {
                return Ok(Encoded::External { len });
            }
        }
        let last = self.last_record_bytes.load(Ordering::Relaxed);
        let mut out = Vec::with_capacity((last + last / 4).min(ENCODE_RESERVE_MAX_BYTES));
        codec::encode_record(txn, progress, &mut out).map_err(encode_error)?;
        self.last_record_bytes.store(out.len(), Ordering::Relaxed);
        Ok(Encoded::Bytes(out))
    }

    fn fail(&self, e: &QueueError) {
        {
            let mut s = lock(&self.shared);
            if s.failed.is_none() {
                s.failed = Some(e.to_string());
            }
        }
        // Appenders waiting for room or for a flush see the failure.
        self.space.notify_all();
        self.space_notify.notify_waiters();
    }

    /// Record bytes an appender may put ahead of the last completed flush
    /// before it waits for the next one (unless none are: a record of any
    /// size is accepted alone).
    fn max_unflushed(&self) -> u64 {
        (4 * self.options.config.flush_bytes).max(MIN_MAX_UNFLUSHED_BYTES)
    }

    /// Appends unless the queue is full, or (`wait_for_flush`) more than
    /// [`Inner::max_unflushed`] bytes wait for a flush.
    fn try_append(
        &self,
        txn: &Transaction,
        progress: &ExtractorProgress,
        record: &Encoded,
        wait_for_flush: bool,
    ) -> Result<TryAppend, QueueError> {
        let dir = &self.options.config.dir;
        if self.options.read_only {
            return Err(QueueError::ReadOnly { dir: dir.clone() });
        }
        let mut w = lock(&self.writer);
        let rec_len = record.len();
        let (live, over) = {
            let mut s = lock(&self.shared);
            if s.closed {
                return Err(QueueError::Closed { dir: dir.clone() });
            }
            if let Some(message) = &s.failed {
                return Err(QueueError::Failed {
                    dir: dir.clone(),
                    message: message.clone(),
                });
            }
            if txn.seqno != w.next {
                return Err(QueueError::OutOfOrder {
                    dir: dir.clone(),
                    expected: w.next,
                    got: txn.seqno,
                });
            }
            let live = s.next > s.floor;
            let size = s.estimated_size() + 2 * rec_len;
            let over = size > self.options.config.max_size_bytes;
            if live && over {
                return Ok(TryAppend::Full {
                    epoch: s.space_epoch,
                    size_bytes: size,
                });
            }
            if wait_for_flush && s.appended_bytes - s.durable_bytes >= self.max_unflushed() {
                // The writer is ahead of the disk: wait for the flush
                // (which bumps the space epoch) instead of piling up dirty
                // pages.
                s.flush_requested = true;
                self.flush_cv.notify_one();
                return Ok(TryAppend::Full {
                    epoch: s.space_epoch,
                    size_bytes: size,
                });
            }
            (live, over)
        };

        // A new segment when the current one is full, or when everything is
        // purged but the queue still counts as full (so the old one can go).
        let roll = match &w.active {
            None => true,
            Some(active) => {
                active.start() < w.next
                    && (active.is_full(self.options.config.segment_size_bytes) || (!live && over))
            }
        };
        if roll {
            self.roll(&mut w)?;
        }
        let active = w.active.clone().expect("rolled above");

        let seqno = txn.seqno;
        let small = match record {
            Encoded::Bytes(bytes) if bytes.len() <= BLOCK_BYTES => Some(bytes),
            _ => None,
        };
        match (record, small) {
            (_, Some(bytes)) => {
                let tail_len = lock(&self.shared).tail.data.len();
                if tail_len + bytes.len() > BLOCK_BYTES {
                    self.seal_tail(&mut w)?;
                }
            }
            (Encoded::Bytes(bytes), None) => {
                self.seal_tail(&mut w)?;
                if let Err(e) = active.write_block(seqno, bytes) {
                    self.fail(&e);
                    return Err(e);
                }
            }
            (Encoded::External { len }, None) => {
                self.seal_tail(&mut w)?;
                if let Err(e) = active.write_external(seqno, txn, progress, *len) {
                    self.fail(&e);
                    return Err(e);
                }
            }
        }
        w.next = Seqno(seqno.0 + 1);
        let (wake_readers, wake_flusher) = {
            let mut s = lock(&self.shared);
            if let Some(bytes) = small {
                if s.tail.count == 0 {
                    s.tail.first = seqno;
                }
                s.tail.data.extend_from_slice(bytes);
                s.tail.count += 1;
            } else {
                s.tail.first = w.next;
            }
            s.next = w.next;
            s.progress = Some(progress.clone());
            s.unflushed_bytes += rec_len;
            s.appended_bytes += rec_len;
            let first_pending = s.unflushed_since.is_none();
            if first_pending {
                s.unflushed_since = Some(Instant::now());
            }
            (
                s.waiting_readers > 0,
                first_pending || s.unflushed_bytes >= self.options.config.flush_bytes,
            )
        };
        if wake_readers {
            self.changed.notify_all();
        }
        self.data_notify.notify_waiters();
        if wake_flusher {
            self.flush_cv.notify_one();
        }
        Ok(TryAppend::Done)
    }

    /// Writes the tail's records to the active segment as one block. The
    /// write (one `writev` into the page cache) is made under the shared
    /// lock, straight from the tail: readers of the tail wait for it, and
    /// the records are not copied once more.
    fn seal_tail(&self, w: &mut Writer) -> Result<(), QueueError> {
        let mut s = lock(&self.shared);
        if s.tail.count == 0 {
            return Ok(());
        }
        let active = w.active.as_ref().expect("a tail implies an active segment");
        if let Err(e) = active.write_block(s.tail.first, &s.tail.data) {
            drop(s);
            self.fail(&e);
            return Err(e);
        }
        s.tail.data.clear();
        s.tail.count = 0;
        s.tail.first = w.next;
        Ok(())
    }

    /// Starts a new segment at the writer's next seqno, after sealing and
    /// flushing the current one.
    fn roll(&self, w: &mut Writer) -> Result<(), QueueError> {
        if let Some(old) = w.active.clone() {
            self.seal_tail(w)?;
            if let Err(e) = old.flush() {
                self.fail(&e);
                return Err(e);
            }
            if old.start() < w.next {
                if let Err(e) = old.mark_has_data() {
                    self.fail(&e);
                    return Err(e);
                }
            }
            old.measure();
            let mut s = lock(&self.shared);
            if w.next > s.durable_next {
                s.durable_next = w.next;
            }
            s.durable_bytes = s.appended_bytes;
        }
        let seg =
            match Segment::create(&self.options.config.dir, w.next, self.open_segments.clone()) {
                Ok(pin) => pin,
                Err(e) => {
                    self.fail(&e);
                    return Err(e);
                }
            };
        seg.measure();
        let removed = {
            let mut s = lock(&self.shared);
            s.segments.insert(seg.start(), seg.segment().clone());
            s.tail.first = w.next;
            s.space_epoch += 1;
            s.take_purged_segments()
        };
        // The old segment is flushed: it closes unless a reader is in it.
        let old = w.active.replace(seg);
        drop(old);
        self.changed.notify_all();
        self.drop_purged(removed);
        Ok(())
    }

    /// Seals the tail and flushes the active segment; advances the durable
    /// seqno and deletes segments that became deletable.
    fn flush_now(&self) -> Result<Seqno, QueueError> {
        let (target, appended, active) = {
            let mut w = lock(&self.writer);
            self.seal_tail(&mut w)?;
            let mut s = lock(&self.shared);
            s.unflushed_bytes = 0;
            s.unflushed_since = None;
            (w.next, s.appended_bytes, w.active.clone())
        };
        if let Some(active) = &active {
            if let Err(e) = active.flush() {
                self.fail(&e);
                return Err(e);
            }
            if active.start() < target {
                if let Err(e) = active.mark_has_data() {
                    self.fail(&e);
                    return Err(e);
                }
            }
            active.measure();
        }
        let removed = {
            let mut s = lock(&self.shared);
            if target > s.durable_next {
                s.durable_next = target;
            }
            s.durable_bytes = s.durable_bytes.max(appended);
            s.space_epoch += 1;
            s.take_purged_segments()
        };
        self.changed.notify_all();
        self.space.notify_all();
        self.data_notify.notify_waiters();
        self.space_notify.notify_waiters();
        drop(active);
        self.drop_purged(removed);
        Ok(target)
    }

    /// Drops segments taken out of the queue by
    /// [`Shared::take_purged_segments`] (deleting their directories once no
    /// reader holds them), and the segment kept open by
    /// [`TransactionQueue::get`] if it is one of them.
    fn drop_purged(&self, removed: Vec<Arc<Segment>>) {
        if removed.is_empty() {
            return;
        }
        let cached = {
            let mut get_pin = lock(&self.get_pin);
            let purged = get_pin
                .as_ref()
                .is_some_and(|p| removed.iter().any(|r| Arc::ptr_eq(r, p.segment())));
            if purged {
                get_pin.take()
            } else {
                None
            }
        };
        drop(cached);
        drop(removed);
    }

    fn flusher_loop(&self) {
        let interval = Duration::from_millis(self.options.config.flush_interval_ms);
        loop {
            {
                let mut s = lock(&self.shared);
                loop {
                    if s.closed {
                        return;
                    }
                    if s.failed.is_none() {
                        if s.flush_requested || s.unflushed_bytes >= self.options.config.flush_bytes
                        {
                            break;
                        }
                        if let Some(since) = s.unflushed_since {
                            let deadline = since + interval;
                            let now = Instant::now();
                            if now >= deadline {
                                break;
                            }
                            s = self
                                .flush_cv
                                .wait_timeout(s, deadline - now)
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                            continue;
                        }
                    }
                    s = self.flush_cv.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.flush_requested = false;
            }
            if let Err(e) = self.flush_now() {
                tracing::error!(error = %e, "queue flush failed; appends are refused");
                self.changed.notify_all();
            }
        }
    }

    fn write_floor(&self, floor: Seqno) -> Result<(), QueueError> {
        let dir = &self.options.config.dir;
        let tmp = dir.join(format!("{FLOOR_FILE}.tmp"));
        private::create_file(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{floor}\n").as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, dir.join(FLOOR_FILE)))
            .map_err(|e| QueueError::Io {
                dir: dir.clone(),
                op: format!("write {FLOOR_FILE}"),
                cause: e,
            })
    }
}

/// A cursor over the queue from one seqno onwards. Independent of other
/// readers; sees transactions appended after its creation.
///
/// [`QueueReader::try_next`] never waits; [`QueueReader::next_timeout`]
/// blocks on a condition variable and [`QueueReader::next_async`] awaits a
/// tokio `Notify` until the next transaction is appended. As an
/// [`Iterator`] it yields what is stored now and then `None`; iterating
/// again later continues with what was appended meanwhile. After an error
/// the reader stays on the failing seqno.
pub struct QueueReader {
    inner: Arc<Inner>,
    next: Seqno,
    durable_only: bool,
    current: Option<Loaded>,
    /// The buffer of the last log block the reader was done with, read
    /// into by the next block load (its pages stay mapped).
    spare: Vec<u8>,
    /// The segment the reader is in, held open while it reads it; released
    /// when the reader moves past it.
    pin: Option<SegmentPin>,
}

impl std::fmt::Debug for QueueReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueReader")
            .field("dir", &self.inner.options.config.dir)
            .field("next", &self.next)
            .field("durable_only", &self.durable_only)
            .finish()
    }
}

/// Lets go of a reader's block in hand, keeping its buffer (up to
/// [`SPARE_KEEP_BYTES`]) in `spare` for the next block load.
fn release_block(current: &mut Option<Loaded>, spare: &mut Vec<u8>) {
    if let Some(Loaded {
        bytes: BlockBytes::Log(buf) | BlockBytes::Owned(buf),
        ..
    }) = current.take()
    {
        if buf.capacity() <= SPARE_KEEP_BYTES {
            *spare = buf;
        }
    }
}

/// A block (or a copy of tail records) the reader is walking.
struct Loaded {
    /// The segment directory, for errors (the queue directory for tail
    /// copies).
    origin: PathBuf,
    bytes: BlockBytes,
    /// Offset of the record of `seqno`.
    offset: usize,
    seqno: Seqno,
    /// A damaged record stepped over before `seqno` in this block (its
    /// seqno and what is wrong): the records after it were located through
    /// its possibly damaged length.
    damaged_before: Option<(Seqno, String)>,
}

impl Loaded {
    fn error(&self, seqno: Seqno, e: RecordError) -> QueueError {
        match &self.damaged_before {
            None => record_error(&self.origin, seqno, e),
            Some((at, why)) => QueueError::Corrupt {
                segment: self.origin.clone(),
                seqno,
                reason: format!(
                    "{e}; the record of seqno {at} before it in the same block is damaged \
                     ({why}), so it cannot be located"
                ),
            },
        }
    }
}

impl QueueReader {
    /// Only return transactions that are durable (flushed), e.g. to
    /// acknowledge them to a third party.
    pub fn durable_only(mut self) -> QueueReader {
        self.durable_only = true;
        self
    }

    /// The seqno the next call returns.
    pub fn next_seqno(&self) -> Seqno {
        self.next
    }

    /// The next transaction if it is stored, else `None` (without
    /// waiting).
    ///
    /// # Errors
    /// [`QueueError::Purged`] when the reader's seqno was purged;
    /// [`QueueError::Corrupt`] (naming the seqno) when its record fails its
    /// checks or is missing; [`QueueError::UnsupportedFormat`];
    /// [`QueueError::SegmentIo`], [`QueueError::Storage`] (sled) and
    /// [`QueueError::SegmentCorrupt`] when its segment cannot be opened.
    pub fn try_next(&mut self) -> Result<Option<Transaction>, QueueError> {
        Ok(self.next_record(false)?.map(|(t, _)| t))
    }

    /// As [`QueueReader::try_next`], with the extractor progress stored
    /// with the transaction.
    ///
    /// # Errors
    /// As [`QueueReader::try_next`].
    pub fn try_next_with_progress(
        &mut self,
    ) -> Result<Option<(Transaction, ExtractorProgress)>, QueueError> {
        Ok(self
            .next_record(true)?
            .map(|(t, p)| (t, p.expect("asked for the progress"))))
    }

    fn next_record(
        &mut self,
        with_progress: bool,
    ) -> Result<Option<(Transaction, Option<ExtractorProgress>)>, QueueError> {
        loop {
            let segment = {
                let s = lock(&self.inner.shared);
                if self.next < s.floor {
                    release_block(&mut self.current, &mut self.spare);
                    let floor = s.floor;
                    drop(s);
                    // Let the purged segment close and go.
                    self.pin = None;
                    return Err(QueueError::Purged {
                        dir: self.inner.options.config.dir.clone(),
                        seqno: self.next,
                        first_kept: floor,
                    });
                }
                let limit = if self.durable_only {
                    s.durable_next
                } else {
                    s.next
                };
                if self.next >= limit {
                    return Ok(None);
                }
                if let Some(loaded) = &self.current {
                    let external = matches!(loaded.bytes, BlockBytes::External { .. });
                    if loaded.seqno == self.next && (external || loaded.offset < loaded.bytes.len())
                    {
                        None
                    } else {
                        release_block(&mut self.current, &mut self.spare);
                        Some(self.locate(&s)?)
                    }
                } else {
                    Some(self.locate(&s)?)
                }
            };
            if let Some(found) = segment {
                match found {
                    Located::Loaded(loaded) => {
                        // Tail records: the reader is past every segment
                        // but the writer's, which the writer holds open.
                        self.current = Some(loaded);
                        self.pin = None;
                    }
                    Located::InSegment(seg) => {
                        let pinned = self
                            .pin
                            .as_ref()
                            .is_some_and(|p| Arc::ptr_eq(p.segment(), &seg));
                        if !pinned {
                            // Hold the new segment open, then let the one
                            // the reader moved past close.
                            let pin = seg.pin().map_err(|e| self.opening_error(e))?;
                            let old = self.pin.replace(pin);
                            drop(old);
                        }
                        let mut spare = std::mem::take(&mut self.spare);
                        self.current = Some(self.load(&seg, &mut spare)?);
                    }
                }
                continue;
            }
            let loaded = self.current.as_mut().expect("checked above");
            if let BlockBytes::External { path, len } = &loaded.bytes {
                // A record alone in its own file: decoded from there.
                let seqno = loaded.seqno;
                let (txn, progress) = codec::read_record_file(path, *len, false)
                    .map_err(|e| loaded.error(seqno, e))?;
                if txn.seqno != seqno {
                    return Err(loaded.error(
                        seqno,
                        RecordError::Corrupt(format!(
                            "the record in its place holds seqno {}",
                            txn.seqno
                        )),
                    ));
                }
                release_block(&mut self.current, &mut self.spare);
                self.next = Seqno(seqno.0 + 1);
                return Ok(Some((txn, with_progress.then_some(progress))));
            }
            let mut cursor = RecordCursor::new(&loaded.bytes, loaded.offset, loaded.seqno);
            let (seqno, raw) = cursor
                .next_raw()
                .map_err(|e| loaded.error(loaded.seqno, e))?;
            let (txn, progress) = if with_progress {
                let (t, p) = codec::decode_record(&raw).map_err(|e| loaded.error(seqno, e))?;
                (t, Some(p))
            } else {
                let t = codec::decode_transaction(&raw).map_err(|e| loaded.error(seqno, e))?;
                (t, None)
            };
            if txn.seqno != seqno {
                return Err(loaded.error(
                    seqno,
                    RecordError::Corrupt(format!(
                        "the record in its place holds seqno {}",
                        txn.seqno
                    )),
                ));
            }
            loaded.offset = cursor.offset();
            loaded.seqno = cursor.seqno();
            self.next = loaded.seqno;
            return Ok(Some((txn, progress)));
        }
    }

    /// Where the record of `self.next` is: copied from the tail, or in a
    /// segment.
    fn locate(&self, s: &Shared) -> Result<Located, QueueError> {
        if self.next >= s.tail.first && s.tail.count > 0 {
            // Copy the tail from our seqno on.
            let mut cursor = RecordCursor::new(&s.tail.data, 0, s.tail.first);
            while cursor.seqno() < self.next {
                let seqno = cursor.seqno();
                cursor
                    .skip()
                    .map_err(|e| record_error(&self.inner.options.config.dir, seqno, e))?;
            }
            return Ok(Located::Loaded(Loaded {
                origin: self.inner.options.config.dir.clone(),
                bytes: BlockBytes::Owned(s.tail.data[cursor.offset()..].to_vec()),
                offset: 0,
                seqno: self.next,
                damaged_before: None,
            }));
        }
        match s.segment_for(self.next) {
            Some(seg) => Ok(Located::InSegment(seg)),
            None => Err(QueueError::Purged {
                dir: self.inner.options.config.dir.clone(),
                seqno: self.next,
                first_kept: s.floor,
            }),
        }
    }

    /// A segment that cannot be opened: an error naming the reader's
    /// seqno.
    fn opening_error(&self, e: QueueError) -> QueueError {
        match e {
            QueueError::SegmentCorrupt {
                segment, reason, ..
            } => QueueError::Corrupt {
                segment,
                seqno: self.next,
                reason: format!("its segment cannot be opened: {reason}"),
            },
            other => other,
        }
    }

    fn load(&self, seg: &Segment, spare: &mut Vec<u8>) -> Result<Loaded, QueueError> {
        let seqno = self.next;
        let named = |e: QueueError| self.opening_error(e);
        let block = match seg.block_starting_at_into(seqno, spare).map_err(named)? {
            Some(b) => Some(b),
            None => seg.block_at_into(seqno, spare).map_err(named)?,
        };
        let missing = || QueueError::Corrupt {
            segment: seg.dir().to_path_buf(),
            seqno,
            reason: match seg.torn_tail_note() {
                Some(note) => format!("no block of the segment holds it; {note}"),
                None => "no block of the segment holds it".into(),
            },
        };
        let block = block.ok_or_else(missing)?;
        if let BlockBytes::External { .. } = block.bytes {
            if block.first != seqno {
                return Err(missing());
            }
            return Ok(Loaded {
                origin: seg.dir().to_path_buf(),
                offset: 0,
                seqno,
                bytes: block.bytes,
                damaged_before: None,
            });
        }
        let mut cursor = RecordCursor::new(&block.bytes, 0, block.first);
        let mut damaged_before = None;
        while cursor.seqno() < seqno {
            if cursor.at_end() {
                return Err(missing());
            }
            let at = cursor.seqno();
            // Step over by the header alone; note the first record that
            // fails its own checks.
            if damaged_before.is_none() {
                let mut probe = cursor.clone();
                if let Err(e) = probe.next_raw() {
                    damaged_before = Some((at, e.to_string()));
                }
            }
            cursor.skip().map_err(|e| {
                let (first_bad, why) = damaged_before
                    .clone()
                    .unwrap_or_else(|| (at, e.to_string()));
                QueueError::Corrupt {
                    segment: seg.dir().to_path_buf(),
                    seqno,
                    reason: format!(
                        "the record of seqno {first_bad} before it in the same block is damaged \
                         ({why}), so it cannot be located"
                    ),
                }
            })?;
        }
        if cursor.at_end() {
            return Err(missing());
        }
        Ok(Loaded {
            origin: seg.dir().to_path_buf(),
            offset: cursor.offset(),
            seqno,
            bytes: block.bytes,
            damaged_before,
        })
    }

    fn available(&self, s: &Shared) -> bool {
        let limit = if self.durable_only {
            s.durable_next
        } else {
            s.next
        };
        self.next < limit || self.next < s.floor
    }

    /// The next transaction, waiting up to `timeout` for it to be
    /// appended; `None` after the timeout or when the queue is closed.
    ///
    /// # Errors
    /// As [`QueueReader::try_next`].
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Transaction>, QueueError> {
        Ok(self.wait_record(timeout, false)?.map(|(t, _)| t))
    }

    /// As [`QueueReader::next_timeout`], with the extractor progress
    /// stored with the transaction.
    ///
    /// # Errors
    /// As [`QueueReader::try_next`].
    pub fn next_timeout_with_progress(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<(Transaction, ExtractorProgress)>, QueueError> {
        Ok(self
            .wait_record(timeout, true)?
            .map(|(t, p)| (t, p.expect("asked for the progress"))))
    }

    /// The next record, waiting up to `timeout` for its append.
    fn wait_record(
        &mut self,
        timeout: Duration,
        with_progress: bool,
    ) -> Result<Option<(Transaction, Option<ExtractorProgress>)>, QueueError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self.next_record(with_progress)? {
                return Ok(Some(found));
            }
            let mut s = lock(&self.inner.shared);
            if self.available(&s) {
                continue;
            }
            let now = Instant::now();
            if s.closed || now >= deadline {
                return Ok(None);
            }
            s.waiting_readers += 1;
            s = self
                .inner
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            s.waiting_readers -= 1;
        }
    }

    /// The next transaction, awaiting its append; `None` when the queue is
    /// closed.
    ///
    /// # Errors
    /// As [`QueueReader::try_next`].
    pub async fn next_async(&mut self) -> Result<Option<Transaction>, QueueError> {
        let inner = self.inner.clone();
        loop {
            let notified = inner.data_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(txn) = self.try_next()? {
                return Ok(Some(txn));
            }
            if lock(&inner.shared).closed {
                return Ok(None);
            }
            notified.await;
        }
    }
}

enum Located {
    Loaded(Loaded),
    InSegment(Arc<Segment>),
}

impl Iterator for QueueReader {
    type Item = Result<Transaction, QueueError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.try_next().transpose()
    }
}

#[cfg(test)]
mod tests;
