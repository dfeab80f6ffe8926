//! One segment of the queue: a directory holding the blocks of a
//! contiguous range of seqnos.
//!
//! Directory name: `seg-` followed by the segment's first seqno as 20
//! decimal digits (`seg-00000000000000001234`), so names sort by seqno.
//!
//! A segment written by this version keeps its blocks in one append-only
//! file, `log` ([`super::log`]). Segments written by versions before it
//! are sled 0.34 databases (files `conf` and `db`); they are still read,
//! and never written again: the writer starts a new segment instead.
//!
//! sled keys: `b'r'`, the block's first seqno (u64 big endian), the chunk
//! index (u32 big endian): 13 bytes. A block is stored as one value (chunk
//! 0) when it is at most [`CHUNK_BYTES`] long, else split into chunks 0, 1,
//! ... of [`CHUNK_BYTES`]. An external record is a file
//! `rec-<seqno, 20 digits>` in the segment directory, and its block (chunk
//! 0 of its sled key, or its frame of the log) holds only a reference to it
//! ([`EXTERNAL_TAG`], see [`Segment::write_external`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::position::Seqno;

use super::log::{Frame, Log, LogError, LOG_FILE};
use super::{codec, QueueError};

/// Largest sled value the queue writes, bytes. sled 0.34 stores a tree
/// node whose serialized size exceeds a quarter of its log segment
/// (512 KiB by default, so about 128 KiB) as a separate "blob" file that
/// its `flush` never fsyncs; a leaf holds up to about 20 values, so
/// values of at most 6 KiB keep every node inline in the fsynced log.
pub const CHUNK_BYTES: usize = 6 * 1024;

/// Name of the marker file a segment gets once it holds a durable block:
/// an empty segment with the marker has lost its data (sled 0.34 may
/// recover a damaged data file as an empty database).
pub const HAS_DATA_MARKER: &str = "HAS-DATA";

/// Prefix of the directory a segment is created under before it is
/// renamed into place.
pub const NEW_PREFIX: &str = "new-";

/// Key prefix of block chunks.
const BLOCK_PREFIX: u8 = b'r';

/// First byte of the sled value that stands for an *external* record: a
/// record stored alone in its own file of the segment directory
/// ([`external_file_name`]) instead of in sled. The value is this byte and
/// the record's length in bytes (u64 little endian): 9 bytes. Records
/// start with their format byte (1), so the two never mix.
pub const EXTERNAL_TAG: u8 = 0xFE;

/// Length of the sled value of an external record, bytes.
const EXTERNAL_VALUE_LEN: usize = 9;

/// Prefix of the file names of external records.
pub const EXTERNAL_PREFIX: &str = "rec-";

/// The file name of the external record of `seqno`: `rec-` and the seqno
/// as 20 decimal digits.
pub fn external_file_name(seqno: Seqno) -> String {
    format!("{EXTERNAL_PREFIX}{:020}", seqno.0)
}

/// The seqno of an external record's file name; `None` for other names.
pub fn parse_external_file_name(name: &str) -> Option<Seqno> {
    let digits = name.strip_prefix(EXTERNAL_PREFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Seqno)
}

/// Write buffer of an external record's file, bytes.
const EXTERNAL_WRITE_BUFFER: usize = 256 << 10;

/// Cache of each open segment's sled database, bytes. sled 0.34 keeps
/// more than this (it holds the values written since the database was
/// opened), which is why segments are closed when nobody uses them (see
/// [`Segment::pin`]).
pub const SLED_CACHE_BYTES: u64 = 4 << 20;

/// The sled key of chunk `chunk` of the block that starts at `first`.
pub fn block_key(first: Seqno, chunk: u32) -> [u8; 13] {
    let mut key = [0u8; 13];
    key[0] = BLOCK_PREFIX;
    key[1..9].copy_from_slice(&first.0.to_be_bytes());
    key[9..13].copy_from_slice(&chunk.to_be_bytes());
    key
}

/// The (first seqno, chunk index) of a block key; `None` for any other
/// key.
pub fn parse_block_key(key: &[u8]) -> Option<(Seqno, u32)> {
    if key.len() != 13 || key[0] != BLOCK_PREFIX {
        return None;
    }
    let first = u64::from_be_bytes(key[1..9].try_into().ok()?);
    let chunk = u32::from_be_bytes(key[9..13].try_into().ok()?);
    Some((Seqno(first), chunk))
}

/// The directory name of the segment starting at `start`.
pub fn segment_dir_name(start: Seqno) -> String {
    format!("seg-{:020}", start.0)
}

/// The first seqno of a segment directory name; `None` when `name` is not
/// one.
pub fn parse_segment_dir_name(name: &str) -> Option<Seqno> {
    let digits = name.strip_prefix("seg-")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Seqno)
}

/// A block read back: its first seqno and its bytes (records
/// concatenated).
#[derive(Clone, Debug)]
pub struct Block {
    /// Seqno of the block's first record.
    pub first: Seqno,
    /// The records.
    pub bytes: BlockBytes,
}

/// The bytes of a block: a frame read from a log file, sled's value, or
/// the chunks of a large record joined (owned, so that a large record is
/// not copied once more into a sled value).
#[derive(Clone, Debug)]
pub enum BlockBytes {
    /// A frame of a log file read whole: its header, then the block.
    Log(Vec<u8>),
    /// A block stored as one sled value.
    Value(sled::IVec),
    /// Chunks joined, or a copy of records not written to sled yet.
    Owned(Vec<u8>),
    /// An external record: one record in its own file, read from there
    /// (see [`crate::queue::codec::read_record_file`]); it has no bytes
    /// here (it derefs to an empty slice).
    External {
        /// The record's file.
        path: PathBuf,
        /// The record's length, bytes.
        len: u64,
    },
}

impl std::ops::Deref for BlockBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            BlockBytes::Log(v) => &v[super::log::FRAME_HEADER_BYTES..],
            BlockBytes::Value(v) => v,
            BlockBytes::Owned(v) => v,
            BlockBytes::External { .. } => &[],
        }
    }
}

/// An open segment's storage.
#[derive(Clone)]
enum Store {
    /// A segment of this version: its log file.
    Log(Arc<Log>),
    /// A segment written by an earlier version.
    Sled(sled::Db),
}

/// The storage of a segment and how many users keep it open.
#[derive(Default)]
struct DbState {
    db: Option<Store>,
    /// [`SegmentPin`]s and calls in progress. The database is closed when
    /// this drops to zero.
    users: usize,
}

/// One segment: directory, storage (log file or sled database) opened
/// while it is used, size accounting.
///
/// The storage is opened on first use and closed as soon as nobody uses
/// it: every method that reads or writes it holds it open for the call,
/// and a [`SegmentPin`] (the writer's active segment, the segment a reader
/// is in) holds it open across calls. An open log holds its file and its
/// frame index (24 bytes a block); sled 0.34 keeps in memory much of what
/// was written or read since the database was opened, whatever its cache
/// capacity, so the queue's memory is bounded by the number of open
/// segments and their size, not by the backlog.
pub struct Segment {
    start: Seqno,
    dir: PathBuf,
    /// A sled segment of an earlier version (read, never written).
    legacy: bool,
    /// The queue directory (for the trash rename on removal).
    queue_dir: PathBuf,
    db: Mutex<DbState>,
    /// Open segments of the queue (shared by its segments).
    open_count: Arc<AtomicUsize>,
    /// Bytes on disk at the last measurement.
    measured_bytes: AtomicU64,
    /// Block bytes written since the last measurement.
    written_since: AtomicU64,
    /// Block bytes written into the segment (estimated from the size on
    /// disk for a segment found at open).
    written_total: AtomicU64,
    /// Delete the directory when the last handle goes.
    remove_on_drop: AtomicBool,
    /// The [`HAS_DATA_MARKER`] file exists.
    marked: AtomicBool,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("start", &self.start)
            .field("dir", &self.dir)
            .finish()
    }
}

/// Keeps a segment's sled database open while it lives (see
/// [`Segment`]). Cloning it adds a user.
pub struct SegmentPin {
    seg: Arc<Segment>,
}

impl SegmentPin {
    /// The pinned segment.
    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }
}

impl std::ops::Deref for SegmentPin {
    type Target = Segment;

    fn deref(&self) -> &Segment {
        &self.seg
    }
}

impl Clone for SegmentPin {
    fn clone(&self) -> SegmentPin {
        let mut state = self.seg.state();
        debug_assert!(state.users > 0 && state.db.is_some());
        state.users += 1;
        drop(state);
        SegmentPin {
            seg: self.seg.clone(),
        }
    }
}

impl Drop for SegmentPin {
    fn drop(&mut self) {
        self.seg.release();
    }
}

impl std::fmt::Debug for SegmentPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SegmentPin").field(&self.seg.start).finish()
    }
}

/// The storage of a segment held open for one call.
struct DbUse<'a> {
    seg: &'a Segment,
    db: Option<Store>,
}

impl std::ops::Deref for DbUse<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.db.as_ref().expect("held until drop")
    }
}

impl Drop for DbUse<'_> {
    fn drop(&mut self) {
        // Our handle first, so that closing drops the last one.
        drop(self.db.take());
        self.seg.release();
    }
}

impl Segment {
    /// A handle on the segment directory `queue_dir/seg-<start>`, not yet
    /// opened. `open_count` counts the queue's open segments.
    pub fn new(queue_dir: &Path, start: Seqno, open_count: Arc<AtomicUsize>) -> Segment {
        let dir = queue_dir.join(segment_dir_name(start));
        let measured = dir_size(&dir).unwrap_or(0);
        let marked = dir.join(HAS_DATA_MARKER).exists();
        let legacy =
            !dir.join(LOG_FILE).exists() && (dir.join("conf").exists() || dir.join("db").exists());
        Segment {
            start,
            dir,
            legacy,
            queue_dir: queue_dir.to_path_buf(),
            db: Mutex::new(DbState::default()),
            open_count,
            measured_bytes: AtomicU64::new(measured),
            written_since: AtomicU64::new(0),
            written_total: AtomicU64::new(measured / footprint(legacy)),
            remove_on_drop: AtomicBool::new(false),
            marked: AtomicBool::new(marked),
        }
    }

    /// Whether the segment was marked as holding durable data.
    pub fn has_data_marker(&self) -> bool {
        self.marked.load(Ordering::Relaxed)
    }

    /// Creates the [`HAS_DATA_MARKER`] file (once) and fsyncs it and the
    /// directory. Call after a flush that made a block of the segment
    /// durable.
    ///
    /// # Errors
    /// I/O errors, as [`QueueError::Io`].
    pub fn mark_has_data(&self) -> Result<(), QueueError> {
        if self.marked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let path = self.dir.join(HAS_DATA_MARKER);
        super::private::create_file(&path)
            .and_then(|f| f.sync_all())
            .and_then(|()| sync_path(&self.dir))
            .map_err(|e| QueueError::Io {
                dir: self.queue_dir.clone(),
                op: format!("create {}", path.display()),
                cause: e,
            })?;
        self.marked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Creates the segment starting at `start` so that a crash never leaves
    /// a half-made one: its directory is made as `new-seg-<start>` with a
    /// log file holding only its header, both fsynced, then renamed to
    /// `seg-<start>` (and the queue directory fsynced). The returned
    /// segment is open, held by the returned pin.
    ///
    /// # Errors
    /// [`QueueError::Layout`] when `seg-<start>` exists; I/O errors.
    pub fn create(
        queue_dir: &Path,
        start: Seqno,
        open_count: Arc<AtomicUsize>,
    ) -> Result<SegmentPin, QueueError> {
        let name = segment_dir_name(start);
        let final_dir = queue_dir.join(&name);
        let tmp = queue_dir.join(format!("{NEW_PREFIX}{name}"));
        let io = |op: String, e: std::io::Error| QueueError::Io {
            dir: queue_dir.to_path_buf(),
            op,
            cause: e,
        };
        if final_dir.exists() {
            return Err(QueueError::Layout {
                dir: queue_dir.to_path_buf(),
                message: format!("cannot start segment {name}: it exists already"),
            });
        }
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)
                .map_err(|e| io(format!("delete {}", tmp.display()), e))?;
        }
        super::private::create_dir(&tmp).map_err(|e| io(format!("create {}", tmp.display()), e))?;
        let log = tmp.join(LOG_FILE);
        Log::create(&log, start).map_err(|e| io(format!("create {}", log.display()), e))?;
        sync_path(&tmp).map_err(|e| io(format!("fsync {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &final_dir)
            .map_err(|e| io(format!("rename {} to {name}", tmp.display()), e))?;
        sync_path(queue_dir).map_err(|e| io("fsync the directory".into(), e))?;
        let seg = Arc::new(Segment::new(queue_dir, start, open_count));
        seg.pin()
    }

    /// The segment's first seqno.
    pub fn start(&self) -> Seqno {
        self.start
    }

    /// The segment's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the segment is a sled database written by an earlier
    /// version (read, never written).
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DbState> {
        // Every update of the state completes before its guard drops.
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A [`QueueError::SegmentIo`] for this segment.
    fn segment_io(&self, op: String, source: std::io::Error) -> QueueError {
        QueueError::SegmentIo {
            segment: self.dir.clone(),
            op,
            cause: source,
        }
    }

    /// A log error met while opening, writing or flushing the segment
    /// (not a read: see [`Segment::read_error`]).
    fn log_error(&self, e: LogError) -> QueueError {
        match e {
            LogError::Io { op, cause: source } => self.segment_io(op, source),
            LogError::Damaged { offset, .. } => QueueError::SegmentCorrupt {
                segment: self.dir.clone(),
                start: self.start,
                reason: format!(
                    "its {LOG_FILE} file: {e}. If this is the queue's last segment, cutting \
                     the file there (truncate -s {offset} {}) drops those blocks, and the \
                     extractor reads their transactions again from the master",
                    self.dir.join(LOG_FILE).display()
                ),
            },
            LogError::BadFrame { .. } => QueueError::SegmentCorrupt {
                segment: self.dir.clone(),
                start: self.start,
                reason: format!("its {LOG_FILE} file: {e}"),
            },
        }
    }

    /// A log error met while reading the block of `seqno`.
    fn read_error(&self, seqno: Seqno, e: LogError) -> QueueError {
        match e {
            LogError::Io { op, cause: source } => self.segment_io(op, source),
            other => QueueError::Corrupt {
                segment: self.dir.clone(),
                seqno,
                reason: other.to_string(),
            },
        }
    }

    /// Adds a user, opening the storage if it is closed; returns a handle
    /// on it.
    ///
    /// # Errors
    /// [`QueueError::SegmentIo`] and [`QueueError::SegmentCorrupt`] (a
    /// damaged file header or frame header) for a log;
    /// [`QueueError::Storage`] when sled fails (the message says when the
    /// lock is held by another process), [`QueueError::SegmentCorrupt`]
    /// when sled panics while recovering the data file (sled 0.34 does so
    /// on a damaged log instead of returning an error).
    fn acquire(&self) -> Result<Store, QueueError> {
        let mut state = self.state();
        let db = match &state.db {
            Some(db) => db.clone(),
            None => {
                let db = if self.legacy {
                    Store::Sled(open_sled(&self.dir, self.start)?)
                } else {
                    let path = self.dir.join(LOG_FILE);
                    if !path.exists() {
                        return Err(QueueError::SegmentCorrupt {
                            segment: self.dir.clone(),
                            start: self.start,
                            reason: format!("its {LOG_FILE} file is missing"),
                        });
                    }
                    Store::Log(Arc::new(
                        Log::open(&path, self.start).map_err(|e| self.log_error(e))?,
                    ))
                };
                self.open_count.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(segment = %self.dir.display(), "queue segment opened");
                state.db = Some(db.clone());
                db
            }
        };
        state.users += 1;
        Ok(db)
    }

    /// Removes a user; closes the storage when it was the last one.
    fn release(&self) {
        let mut state = self.state();
        state.users -= 1;
        if state.users == 0 {
            if let Some(db) = state.db.take() {
                // Closed under the lock, so that a reopen waits for sled to
                // release its file lock. Dropping flushes what is left.
                drop(db);
                self.open_count.fetch_sub(1, Ordering::Relaxed);
                tracing::debug!(segment = %self.dir.display(), "queue segment closed");
            }
        }
    }

    /// The storage held open for one call.
    fn db(&self) -> Result<DbUse<'_>, QueueError> {
        let db = self.acquire()?;
        Ok(DbUse {
            seg: self,
            db: Some(db),
        })
    }

    /// Keeps the storage open (opening it now) until the pin and its
    /// clones are dropped.
    ///
    /// # Errors
    /// As opening the storage: [`QueueError::SegmentIo`],
    /// [`QueueError::Storage`], [`QueueError::SegmentCorrupt`].
    pub fn pin(self: &Arc<Self>) -> Result<SegmentPin, QueueError> {
        self.acquire()?;
        Ok(SegmentPin { seg: self.clone() })
    }

    /// Whether the storage is open.
    pub fn is_open(&self) -> bool {
        self.state().db.is_some()
    }

    /// Estimated bytes on disk: the last measurement plus the block bytes
    /// written since (twice them for sled, whose log holds about two bytes
    /// per byte written).
    pub fn estimated_bytes(&self) -> u64 {
        self.measured_bytes.load(Ordering::Relaxed)
            + footprint(self.legacy) * self.written_since.load(Ordering::Relaxed)
    }

    /// Accounts `n` block bytes written.
    pub fn add_written(&self, n: u64) {
        self.written_since.fetch_add(n, Ordering::Relaxed);
        self.written_total.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether the segment is full for a segment size of `segment_bytes`:
    /// its record bytes (twice them for sled) reach it.
    pub fn is_full(&self, segment_bytes: u64) -> bool {
        footprint(self.legacy) * self.written_total.load(Ordering::Relaxed) >= segment_bytes
    }

    /// Measures the directory's size on disk now and resets the estimate.
    pub fn measure(&self) -> u64 {
        let written = self.written_since.swap(0, Ordering::Relaxed);
        if self.legacy {
            // Files sled added since (snapshots, blobs) become private too.
            super::private::restrict_tree_or_warn(&self.dir);
        }
        match dir_size(&self.dir) {
            Ok(n) => {
                self.measured_bytes.store(n, Ordering::Relaxed);
                n
            }
            Err(_) => {
                self.written_since.fetch_add(written, Ordering::Relaxed);
                self.estimated_bytes()
            }
        }
    }

    /// Marks the segment for deletion when its last handle is dropped.
    pub fn remove_when_dropped(&self) {
        self.remove_on_drop.store(true, Ordering::Relaxed);
    }

    /// Whether the segment holds no block.
    ///
    /// # Errors
    /// As opening the storage; sled errors, as [`QueueError::Storage`].
    pub fn is_empty(&self) -> Result<bool, QueueError> {
        let db = self.db()?;
        match &*db {
            Store::Log(log) => Ok(log.is_empty()),
            Store::Sled(db) => {
                let first = db
                    .first()
                    .map_err(|e| self.storage("read the first key", e))?;
                Ok(first.is_none())
            }
        }
    }

    /// Cuts the end of the segment's log file that a crash left incomplete
    /// (see [`super::log`]), logging what was cut. Only for the writer's
    /// open of the last segment. Returns the bytes cut.
    ///
    /// # Errors
    /// As opening the storage; [`QueueError::SegmentIo`] when the file
    /// cannot be truncated.
    pub fn cut_torn_tail(&self) -> Result<u64, QueueError> {
        let db = self.db()?;
        let Store::Log(log) = &*db else {
            return Ok(0);
        };
        let Some(torn) = log.cut_torn_tail().map_err(|e| self.log_error(e))? else {
            return Ok(0);
        };
        let cut = torn.file_len - torn.valid_end;
        tracing::warn!(
            file = %log.path().display(),
            at_byte = torn.valid_end,
            bytes = cut,
            reason = %torn.reason,
            "cut the incomplete end of the queue's last segment (a write a crash \
             interrupted, or a file cut short); the extractor reads the transactions it \
             held again from the master"
        );
        Ok(cut)
    }

    /// Words on an incomplete end of the segment's log file, when the
    /// open found one (for the error of a seqno no block holds): the
    /// file was cut short, or a writer is appending to it.
    pub fn torn_tail_note(&self) -> Option<String> {
        let db = self.db().ok()?;
        let Store::Log(log) = &*db else {
            return None;
        };
        let torn = log.torn_tail()?;
        Some(format!(
            "its {LOG_FILE} file ends in an incomplete block at byte {} of {} ({}): the file \
             was cut short",
            torn.valid_end, torn.file_len, torn.reason
        ))
    }

    /// The first seqno of the first and of the last block, `None` when the
    /// segment is empty.
    ///
    /// # Errors
    /// As opening the storage; sled errors; [`QueueError::Corrupt`] for a
    /// sled key that is not a block key.
    pub fn block_bounds(&self) -> Result<Option<(Seqno, Seqno)>, QueueError> {
        let db = self.db()?;
        let db = match &*db {
            Store::Log(log) => return Ok(log.bounds().map(|(f, l)| (f.first, l.first))),
            Store::Sled(db) => db,
        };
        let first = db
            .first()
            .map_err(|e| self.storage("read the first key", e))?;
        let last = db
            .last()
            .map_err(|e| self.storage("read the last key", e))?;
        match (first, last) {
            (Some((fk, _)), Some((lk, _))) => {
                let f = parse_block_key(&fk).ok_or_else(|| self.bad_key(&fk))?;
                let l = parse_block_key(&lk).ok_or_else(|| self.bad_key(&lk))?;
                Ok(Some((f.0, l.0)))
            }
            _ => Ok(None),
        }
    }

    fn bad_key(&self, key: &[u8]) -> QueueError {
        QueueError::Corrupt {
            segment: self.dir.clone(),
            seqno: self.start,
            reason: format!("unexpected key {key:02x?} in the segment"),
        }
    }

    /// The segment's log, for a write; an error for a sled segment, which
    /// is never written.
    fn log_for_write<'a>(
        &self,
        db: &'a DbUse<'_>,
        seqno: Seqno,
    ) -> Result<&'a Arc<Log>, QueueError> {
        match &**db {
            Store::Log(log) => Ok(log),
            Store::Sled(_) => Err(QueueError::Layout {
                dir: self.queue_dir.clone(),
                message: format!(
                    "cannot write seqno {seqno} into {}: segments of earlier versions (sled) are \
                     read only",
                    self.dir.display()
                ),
            }),
        }
    }

    /// Appends a block starting at `first`.
    ///
    /// # Errors
    /// As opening the storage; [`QueueError::SegmentIo`] when the write
    /// fails; [`QueueError::Layout`] for a sled segment.
    pub fn write_block(&self, first: Seqno, bytes: &[u8]) -> Result<(), QueueError> {
        let db = self.db()?;
        let log = self.log_for_write(&db, first)?;
        log.append(first, bytes).map_err(|e| self.log_error(e))?;
        self.add_written(bytes.len() as u64);
        Ok(())
    }

    /// Writes the record of `txn` (seqno `seqno`) with `progress`, `len`
    /// bytes long ([`codec::record_len`]), as an external record: the
    /// record is serialized straight into its own file (so it is never
    /// held whole in memory), the file and the directory are fsynced, and
    /// only then the 9-byte reference is appended as the record's block,
    /// which makes the record part of the segment (durable at the next
    /// flush, like any block). A crash before that leaves a file without a
    /// reference, deleted at the next open
    /// ([`Segment::remove_external_from`]).
    ///
    /// # Errors
    /// [`QueueError::Io`] when the file cannot be written (it is deleted
    /// again), [`QueueError::Encode`] when the record does not have the
    /// counted length, as [`Segment::write_block`] for the reference.
    pub fn write_external(
        &self,
        seqno: Seqno,
        txn: &crate::event::Transaction,
        progress: &codec::ExtractorProgress,
        len: u64,
    ) -> Result<(), QueueError> {
        let db = self.db()?;
        let log = self.log_for_write(&db, seqno)?;
        let path = self.dir.join(external_file_name(seqno));
        let written = (|| {
            let file = super::private::create_file(&path)?;
            let mut out = std::io::BufWriter::with_capacity(EXTERNAL_WRITE_BUFFER, file);
            codec::write_record(txn, progress, len, &mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            sync_path(&self.dir)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(if e.kind() == std::io::ErrorKind::InvalidData {
                QueueError::Encode {
                    dir: self.queue_dir.clone(),
                    seqno,
                    message: e.to_string(),
                }
            } else {
                QueueError::Io {
                    dir: self.queue_dir.clone(),
                    op: format!(
                        "write the {len} byte record of seqno {seqno} to {}",
                        path.display()
                    ),
                    cause: e,
                }
            });
        }
        let mut value = [0u8; EXTERNAL_VALUE_LEN];
        value[0] = EXTERNAL_TAG;
        value[1..].copy_from_slice(&len.to_le_bytes());
        log.append(seqno, &value).map_err(|e| self.log_error(e))?;
        self.add_written(len);
        Ok(())
    }

    /// Deletes the external record files of seqnos at or above `from`:
    /// after a crash, the files of records whose reference did not reach
    /// the disk (the queue's next seqno is `from`). Returns how many were
    /// deleted.
    ///
    /// # Errors
    /// I/O errors, as [`QueueError::Io`].
    pub fn remove_external_from(&self, from: Seqno) -> Result<usize, QueueError> {
        let io = |op: String, e: std::io::Error| QueueError::Io {
            dir: self.queue_dir.clone(),
            op,
            cause: e,
        };
        let mut removed = 0;
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| io(format!("list {}", self.dir.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(format!("list {}", self.dir.display()), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if parse_external_file_name(&name).is_some_and(|s| s >= from) {
                tracing::info!(
                    file = %entry.path().display(),
                    "deleting the file of a record whose write did not complete before a crash"
                );
                std::fs::remove_file(entry.path())
                    .map_err(|e| io(format!("delete {}", entry.path().display()), e))?;
                removed += 1;
            }
        }
        if removed > 0 {
            sync_path(&self.dir).map_err(|e| io(format!("fsync {}", self.dir.display()), e))?;
        }
        Ok(removed)
    }

    /// The block that holds `seqno`: the block with the greatest first
    /// seqno at or below it. `None` when the segment has no such block.
    ///
    /// # Errors
    /// As opening the storage; [`QueueError::Corrupt`] naming `seqno` when
    /// the block fails its checks (a log frame's CRC, sled chunks not
    /// numbered 0, 1, 2, ...); [`QueueError::SegmentIo`], sled errors.
    pub fn block_at(&self, seqno: Seqno) -> Result<Option<Block>, QueueError> {
        self.block_at_into(seqno, &mut Vec::new())
    }

    /// As [`Segment::block_at`], reading a log frame into `spare` (taken:
    /// the block owns it then), a buffer of a block read before.
    ///
    /// # Errors
    /// As [`Segment::block_at`].
    pub fn block_at_into(
        &self,
        seqno: Seqno,
        spare: &mut Vec<u8>,
    ) -> Result<Option<Block>, QueueError> {
        let db = self.db()?;
        let db = match &*db {
            Store::Log(log) => {
                return match log.frame_at(seqno) {
                    Some(frame) => self.load_frame(log, frame, seqno, spare).map(Some),
                    None => Ok(None),
                }
            }
            Store::Sled(db) => db,
        };
        let found = db
            .range(..=block_key(seqno, u32::MAX))
            .next_back()
            .transpose()
            .map_err(|e| self.storage(&format!("find the block of seqno {seqno}"), e))?;
        let Some((key, _)) = found else {
            return Ok(None);
        };
        let (first, _) = parse_block_key(&key).ok_or_else(|| self.bad_key(&key))?;
        self.load_block(db, first).map(Some)
    }

    /// The block that starts exactly at `first`, if any.
    ///
    /// # Errors
    /// As [`Segment::block_at`].
    pub fn block_starting_at(&self, first: Seqno) -> Result<Option<Block>, QueueError> {
        self.block_starting_at_into(first, &mut Vec::new())
    }

    /// As [`Segment::block_starting_at`], with a buffer to reuse as
    /// [`Segment::block_at_into`].
    ///
    /// # Errors
    /// As [`Segment::block_at`].
    pub fn block_starting_at_into(
        &self,
        first: Seqno,
        spare: &mut Vec<u8>,
    ) -> Result<Option<Block>, QueueError> {
        let db = self.db()?;
        match &*db {
            Store::Log(log) => match log.frame_starting_at(first) {
                Some(frame) => self.load_frame(log, frame, first, spare).map(Some),
                None => Ok(None),
            },
            Store::Sled(db) => self.load_chunks(db, first),
        }
    }

    /// Reads and checks a log frame into `spare` (taken); errors name
    /// `seqno`, the seqno asked for.
    fn load_frame(
        &self,
        log: &Log,
        frame: Frame,
        seqno: Seqno,
        spare: &mut Vec<u8>,
    ) -> Result<Block, QueueError> {
        let mut buf = std::mem::take(spare);
        log.read_into(frame, &mut buf)
            .map_err(|e| self.read_error(seqno, e))?;
        let payload = &buf[super::log::FRAME_HEADER_BYTES..];
        let bytes = if payload.first() == Some(&EXTERNAL_TAG) {
            self.external(frame.first, payload)?
        } else {
            BlockBytes::Log(buf)
        };
        Ok(Block {
            first: frame.first,
            bytes,
        })
    }

    /// The block of an external record from its reference `value`.
    fn external(&self, first: Seqno, value: &[u8]) -> Result<BlockBytes, QueueError> {
        let len = value
            .get(1..EXTERNAL_VALUE_LEN)
            .filter(|_| value.len() == EXTERNAL_VALUE_LEN)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| QueueError::Corrupt {
                segment: self.dir.clone(),
                seqno: first,
                reason: format!(
                    "the reference to its external record is {} bytes, not {EXTERNAL_VALUE_LEN}",
                    value.len()
                ),
            })?;
        Ok(BlockBytes::External {
            path: self.dir.join(external_file_name(first)),
            len,
        })
    }

    fn load_block(&self, db: &sled::Db, first: Seqno) -> Result<Block, QueueError> {
        self.load_chunks(db, first)?
            .ok_or_else(|| QueueError::Corrupt {
                segment: self.dir.clone(),
                seqno: first,
                reason: "chunk 0 of the record is missing".into(),
            })
    }

    /// The chunks of the sled block that starts at `first`, joined; `None`
    /// when there is none. A large record is copied chunk by chunk into a
    /// buffer sized from its last chunk's index, so it is held once, not
    /// twice.
    fn load_chunks(&self, db: &sled::Db, first: Seqno) -> Result<Option<Block>, QueueError> {
        let range = || db.range(block_key(first, 0)..=block_key(first, u32::MAX));
        let read_error = |e| self.storage(&format!("read the block of seqno {first}"), e);
        let Some(last) = range().next_back().transpose().map_err(read_error)? else {
            return Ok(None);
        };
        let (_, last_index) = parse_block_key(&last.0).ok_or_else(|| self.bad_key(&last.0))?;
        let mut single = None;
        let mut joined = Vec::new();
        let mut count = 0usize;
        for item in range() {
            let (key, value) = item.map_err(read_error)?;
            let (_, index) = parse_block_key(&key).ok_or_else(|| self.bad_key(&key))?;
            if index as usize != count {
                return Err(QueueError::Corrupt {
                    segment: self.dir.clone(),
                    seqno: first,
                    reason: format!("chunk {count} of the record is missing (found chunk {index})"),
                });
            }
            count += 1;
            if last_index == 0 {
                single = Some(value);
            } else {
                if joined.is_empty() {
                    joined.reserve_exact((last_index as usize + 1).saturating_mul(value.len()));
                }
                joined.extend_from_slice(&value);
            }
        }
        let bytes = match (count, single) {
            (0, _) => return Ok(None),
            (1, Some(value)) if value.first() == Some(&EXTERNAL_TAG) => {
                self.external(first, &value)?
            }
            (1, Some(value)) => BlockBytes::Value(value),
            _ => BlockBytes::Owned(joined),
        };
        Ok(Some(Block { first, bytes }))
    }

    /// Makes the blocks written so far durable: `fdatasync` of the log
    /// file (sled's `flush` for a sled segment).
    ///
    /// # Errors
    /// [`QueueError::SegmentIo`], [`QueueError::Storage`].
    pub fn flush(&self) -> Result<(), QueueError> {
        let db = self.db()?;
        match &*db {
            Store::Log(log) => log.sync().map_err(|e| self.log_error(e)),
            Store::Sled(db) => {
                db.flush().map_err(|e| self.storage("flush (fsync)", e))?;
                Ok(())
            }
        }
    }

    /// fsyncs the segment's data files and its directory directly (after
    /// recovery: what the process found may still be only in the page
    /// cache).
    ///
    /// # Errors
    /// I/O errors, as [`QueueError::Io`].
    pub fn sync_files(&self) -> Result<(), QueueError> {
        for path in [
            self.dir.join(LOG_FILE),
            self.dir.join("db"),
            self.dir.join("conf"),
            self.dir.clone(),
        ] {
            if path.exists() {
                sync_path(&path).map_err(|e| QueueError::Io {
                    dir: self.queue_dir.clone(),
                    op: format!("fsync {}", path.display()),
                    cause: e,
                })?;
            }
        }
        Ok(())
    }

    /// A [`QueueError::Storage`] for this (sled) segment.
    pub fn storage(&self, op: &str, source: sled::Error) -> QueueError {
        QueueError::Storage {
            segment: self.dir.clone(),
            op: op.to_string(),
            cause: source,
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // Close sled first: its drop flushes and releases the file lock.
        let state = self.db.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(db) = state.db.take() {
            drop(db);
            self.open_count.fetch_sub(1, Ordering::Relaxed);
        }
        if !*self.remove_on_drop.get_mut() {
            return;
        }
        let Some(name) = self.dir.file_name() else {
            return;
        };
        let trash = self
            .queue_dir
            .join(format!("trash-{}", name.to_string_lossy()));
        let result = std::fs::rename(&self.dir, &trash)
            .and_then(|()| sync_path(&self.queue_dir))
            .and_then(|()| std::fs::remove_dir_all(&trash));
        if let Err(e) = result {
            tracing::warn!(
                segment = %self.dir.display(),
                error = %e,
                "could not delete a purged queue segment; it is deleted at the next open"
            );
        }
    }
}

/// How long an open waits for sled's file lock: a database closed an
/// instant ago by this process may still be held by sled's background
/// threads.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens (creating if missing) the sled database of a segment, turning a
/// sled panic into [`QueueError::SegmentCorrupt`]. Waits up to
/// [`LOCK_WAIT`] for the file lock.
fn open_sled(dir: &Path, start: Seqno) -> Result<sled::Db, QueueError> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match open_sled_once(dir, start) {
            Err(QueueError::Storage { cause: source, .. })
                if source.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn open_sled_once(dir: &Path, start: Seqno) -> Result<sled::Db, QueueError> {
    let config = sled::Config::new()
        .path(dir)
        .cache_capacity(SLED_CACHE_BYTES)
        .flush_every_ms(None)
        .mode(sled::Mode::HighThroughput);
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| config.open()));
    match opened {
        Ok(Ok(db)) => {
            // sled created its files with the umask's modes.
            super::private::restrict_tree_or_warn(dir);
            Ok(db)
        }
        Ok(Err(e)) => Err(QueueError::Storage {
            segment: dir.to_path_buf(),
            op: "open the sled database".into(),
            cause: e,
        }),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(QueueError::SegmentCorrupt {
                segment: dir.to_path_buf(),
                start,
                reason: format!("sled panicked while recovering its log: {reason}"),
            })
        }
    }
}

/// Bytes on disk per block byte of a segment: 2 for sled (`legacy`;
/// measured 1.9-2.0), 1 for a log file (plus 20 bytes a block).
fn footprint(legacy: bool) -> u64 {
    if legacy {
        2
    } else {
        1
    }
}

/// fsync of a file or directory.
pub fn sync_path(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// Total size of the files under `dir`, bytes (apparent sizes). Entries
/// that disappear during the walk (a segment being created or deleted)
/// are skipped.
///
/// # Errors
/// I/O errors other than "not found" below `dir`; "not found" for `dir`
/// itself.
pub fn dir_size(dir: &Path) -> std::io::Result<u64> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            match dir_size(&entry.path()) {
                Ok(n) => total += n,
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e),
            }
        } else {
            total += meta.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_seqno_then_chunk() {
        let a = block_key(Seqno(1), 5);
        let b = block_key(Seqno(2), 0);
        let c = block_key(Seqno(256), 0);
        assert!(a < b && b < c);
        assert_eq!(parse_block_key(&a), Some((Seqno(1), 5)));
        assert_eq!(parse_block_key(&c[..12]), None);
        assert_eq!(parse_block_key(b"x123456789012"), None);
    }

    #[test]
    fn segment_names() {
        assert_eq!(segment_dir_name(Seqno(1234)), "seg-00000000000000001234");
        assert_eq!(
            parse_segment_dir_name("seg-00000000000000001234"),
            Some(Seqno(1234))
        );
        assert_eq!(
            parse_segment_dir_name(&segment_dir_name(Seqno(u64::MAX))),
            Some(Seqno(u64::MAX))
        );
        assert_eq!(parse_segment_dir_name("seg-1234"), None);
        assert_eq!(parse_segment_dir_name("seg-0000000000000000123x"), None);
        assert_eq!(
            parse_segment_dir_name("trash-seg-00000000000000001234"),
            None
        );
        assert_eq!(parse_segment_dir_name("seg-99999999999999999999"), None);
    }
}
