//! The data file of a queue segment written by this version: an
//! append-only log of blocks, the file `log` in the segment directory.
//!
//! # Format (integers little endian)
//! ```text
//! header  16 bytes  magic "SHRQLOG1", the segment's first seqno (u64)
//! frame   20 bytes  first seqno (u64), payload length (u32),
//!                   CRC-32 of the payload (u32),
//!                   CRC-32 of these 16 header bytes (u32)
//!         payload   one block: records back to back (see super::codec),
//!                   or an external record's 9-byte reference
//!                   (super::segment::EXTERNAL_TAG, length u64)
//! frame   ...
//! ```
//! CRC-32 is crc32fast's (the IEEE 802.3 polynomial, as zlib). Frames'
//! first seqnos strictly increase. The header's own CRC tells a damaged
//! length (an error: the frames after it cannot be located) from a frame
//! cut short by a crash (a torn tail).
//!
//! # Writes and crashes
//! A block is appended with one `writev` on a file opened with `O_APPEND`
//! and made durable by [`Log::sync`] (`fdatasync`, which covers the file's
//! new length). The segment's blocks are indexed in memory by a scan of
//! the frame headers when the file is opened (16 bytes read per block).
//! A crash can leave only the end of the file incomplete: a `kill -9` in
//! the middle of a write, or a power loss before the next `fdatasync`. The
//! scan stops at the first frame that runs past the end of the file, or
//! whose bytes from its header on are all zero to the end of the file (a
//! file extended but never written), and [`Log::cut_torn_tail`] cuts it
//! off. A complete frame that fails its CRC is damage, not a torn write:
//! reading it is an error, never a silent cut.

use std::fs::File;
use std::io::{IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::position::Seqno;

/// Name of a segment's log file.
pub const LOG_FILE: &str = "log";

/// The first 8 bytes of a log file.
pub const LOG_MAGIC: &[u8; 8] = b"SHRQLOG1";

/// Length of the file header, bytes.
pub const FILE_HEADER_BYTES: u64 = 16;

/// Length of a frame header, bytes.
pub const FRAME_HEADER_BYTES: usize = 20;

/// Largest payload the scan accepts, bytes: more is a damaged length (a
/// block holds at most one record above the block size, and records of
/// 256 KiB and more are external).
pub const MAX_FRAME_PAYLOAD: u32 = 1 << 30;

/// One block of the log, as indexed at open or when appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Seqno of the block's first record.
    pub first: Seqno,
    /// Offset of the frame header in the file, bytes.
    pub offset: u64,
    /// Payload length, bytes.
    pub len: u32,
}

impl Frame {
    /// Offset just past the frame, bytes.
    pub fn end(&self) -> u64 {
        self.offset + FRAME_HEADER_BYTES as u64 + u64::from(self.len)
    }
}

/// The end of a file that a crash left incomplete, found by the scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where the last complete frame ends (where the file is cut), bytes.
    pub valid_end: u64,
    /// The file's length, bytes.
    pub file_len: u64,
    /// What is incomplete.
    pub reason: String,
}

/// Why a log cannot be opened or a block read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A system call failed.
    #[error("cannot {op}: {cause}")]
    Io {
        /// What was being done.
        op: String,
        /// The error.
        cause: std::io::Error,
    },
    /// The file's header or a frame header is damaged: the blocks from
    /// there on cannot be located.
    #[error("{reason}")]
    Damaged {
        /// Offset of the damage, bytes.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A block's frame fails its checks (CRC, length, seqno).
    #[error("{reason}")]
    BadFrame {
        /// The frame's first seqno as indexed.
        first: Seqno,
        /// What is wrong.
        reason: String,
    },
}

fn io_error(op: impl Into<String>) -> impl FnOnce(std::io::Error) -> LogError {
    let op = op.into();
    move |source| LogError::Io { op, cause: source }
}

/// The header of a frame holding `payload` (see the module doc).
///
/// # Panics
/// When `payload` is longer than `u32::MAX` bytes (callers bound it by
/// [`MAX_FRAME_PAYLOAD`]).
pub fn frame_header(first: Seqno, payload: &[u8]) -> [u8; FRAME_HEADER_BYTES] {
    let len = u32::try_from(payload.len()).expect("payload bounded by MAX_FRAME_PAYLOAD");
    let mut h = [0u8; FRAME_HEADER_BYTES];
    h[0..8].copy_from_slice(&first.0.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let own = crc32fast::hash(&h[..16]);
    h[16..20].copy_from_slice(&own.to_le_bytes());
    h
}

/// The fields of a frame header: first seqno, payload length, payload
/// CRC; `None` when the header fails its own CRC.
pub fn parse_frame_header(h: &[u8; FRAME_HEADER_BYTES]) -> Option<(Seqno, u32, u32)> {
    let own = u32::from_le_bytes(h[16..20].try_into().expect("4 bytes"));
    if crc32fast::hash(&h[..16]) != own {
        return None;
    }
    let first = Seqno(u64::from_le_bytes(h[0..8].try_into().expect("8 bytes")));
    let len = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
    Some((first, len, crc))
}

/// The 16-byte header of the log file of the segment starting at `start`.
pub fn file_header(start: Seqno) -> [u8; FILE_HEADER_BYTES as usize] {
    let mut h = [0u8; FILE_HEADER_BYTES as usize];
    h[..8].copy_from_slice(LOG_MAGIC);
    h[8..].copy_from_slice(&start.0.to_le_bytes());
    h
}

/// Reads the frame headers of the log file `file` (of the segment
/// starting at `start`): the frames, and the torn tail if the file ends
/// in one.
///
/// # Errors
/// [`LogError::Damaged`] for a wrong file header, a frame header whose
/// seqno does not increase or whose length is above
/// [`MAX_FRAME_PAYLOAD`] (with bytes after it); [`LogError::Io`].
pub fn scan(file: &File, start: Seqno) -> Result<(Vec<Frame>, Option<TornTail>), LogError> {
    let file_len = file
        .metadata()
        .map_err(io_error("read the file's length"))?
        .len();
    let mut header = [0u8; FILE_HEADER_BYTES as usize];
    if file_len < FILE_HEADER_BYTES {
        return Err(LogError::Damaged {
            offset: 0,
            reason: format!("the file is {file_len} bytes long, shorter than its header"),
        });
    }
    file.read_exact_at(&mut header, 0)
        .map_err(io_error("read the file header"))?;
    if header != file_header(start) {
        return Err(LogError::Damaged {
            offset: 0,
            reason: format!(
                "the file header is {header:02x?}, not {LOG_MAGIC:?} and seqno {start}"
            ),
        });
    }
    let mut frames: Vec<Frame> = Vec::new();
    let mut offset = FILE_HEADER_BYTES;
    let torn = |offset: u64, reason: String| TornTail {
        valid_end: offset,
        file_len,
        reason,
    };
    while offset < file_len {
        if file_len - offset < FRAME_HEADER_BYTES as u64 {
            let tail = torn(
                offset,
                format!(
                    "a frame header cut short ({} of {FRAME_HEADER_BYTES} bytes)",
                    file_len - offset
                ),
            );
            return Ok((frames, Some(tail)));
        }
        let mut h = [0u8; FRAME_HEADER_BYTES];
        file.read_exact_at(&mut h, offset)
            .map_err(io_error(format!("read the frame header at byte {offset}")))?;
        if h == [0u8; FRAME_HEADER_BYTES] && zeros_to_end(file, offset, file_len)? {
            let tail = torn(offset, "zero bytes where frames were not written".into());
            return Ok((frames, Some(tail)));
        }
        let after = || {
            frames
                .last()
                .map_or_else(|| format!("segment start {start}"), |l| l.first.to_string())
        };
        let Some((first, len, _)) = parse_frame_header(&h) else {
            return Err(LogError::Damaged {
                offset,
                reason: format!(
                    "the frame header at byte {offset} (after the block of seqno {}) fails its \
                     CRC check, so the blocks from there on cannot be located",
                    after()
                ),
            });
        };
        let frame = Frame { first, offset, len };
        let increasing = match frames.last() {
            Some(last) => first > last.first,
            None => first >= start,
        };
        if len > MAX_FRAME_PAYLOAD || !increasing {
            return Err(LogError::Damaged {
                offset,
                reason: format!(
                    "the frame header at byte {offset} is wrong (length {len}, first seqno \
                     {first} after {}), so the blocks from there on cannot be located",
                    after()
                ),
            });
        }
        if frame.end() > file_len {
            let tail = torn(
                offset,
                format!(
                    "the frame of seqno {first} is cut short ({} of {} bytes)",
                    file_len - offset,
                    frame.end() - offset
                ),
            );
            return Ok((frames, Some(tail)));
        }
        frames.push(frame);
        offset = frame.end();
    }
    Ok((frames, None))
}

/// Whether the bytes of `file` from `offset` to `file_len` are all zero.
fn zeros_to_end(file: &File, offset: u64, file_len: u64) -> Result<bool, LogError> {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = offset;
    while at < file_len {
        let n = ((file_len - at) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], at)
            .map_err(io_error(format!("read byte {at}")))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// What the log knows of its file.
#[derive(Debug)]
struct Index {
    frames: Vec<Frame>,
    /// Where the next frame goes: the end of the last complete frame.
    end: u64,
    /// The torn tail found at open, until it is cut.
    torn: Option<TornTail>,
    /// An append failed: the file may end in a partial frame that could
    /// not be cut, so no more appends.
    failed: bool,
}

/// An open log file: its frame index and the file handle, for appends by
/// one writer and reads by any thread.
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    file: File,
    index: Mutex<Index>,
}

impl Log {
    /// Creates the log file `path` of a segment starting at `start` (mode
    /// 0600) with its header, and fsyncs it.
    ///
    /// # Errors
    /// The I/O error of the create, the write or the fsync.
    pub fn create(path: &Path, start: Seqno) -> std::io::Result<()> {
        let mut file = super::private::create_file(path)?;
        file.write_all(&file_header(start))?;
        file.sync_all()
    }

    /// Opens the log file `path` of the segment starting at `start` and
    /// indexes its frames; a torn tail is kept for
    /// [`Log::cut_torn_tail`] and not read. Opened for appending when the
    /// file is writable, else for reading only.
    ///
    /// # Errors
    /// As [`scan`], and [`LogError::Io`] when the file cannot be opened.
    pub fn open(path: &Path, start: Seqno) -> Result<Log, LogError> {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(path);
        let file = match opened {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => File::open(path),
            other => other,
        }
        .map_err(io_error(format!("open {}", path.display())))?;
        let (frames, torn) = scan(&file, start)?;
        let end = frames.last().map_or(FILE_HEADER_BYTES, Frame::end);
        Ok(Log {
            path: path.to_path_buf(),
            file,
            index: Mutex::new(Index {
                frames,
                end,
                torn,
                failed: false,
            }),
        })
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        // Every update of the index completes before its guard drops.
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The torn tail found at open, if it has not been cut.
    pub fn torn_tail(&self) -> Option<TornTail> {
        self.index().torn.clone()
    }

    /// Truncates the file at the end of its last complete frame when the
    /// scan found a torn tail, and fsyncs it. Returns what was cut. Only
    /// for the writer's open after a crash: a reader must not cut what a
    /// writer may be appending.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn cut_torn_tail(&self) -> Result<Option<TornTail>, LogError> {
        let mut index = self.index();
        let Some(torn) = index.torn.clone() else {
            return Ok(None);
        };
        self.file
            .set_len(torn.valid_end)
            .and_then(|()| self.file.sync_all())
            .map_err(io_error(format!(
                "cut {} at byte {}",
                self.path.display(),
                torn.valid_end
            )))?;
        index.torn = None;
        Ok(Some(torn))
    }

    /// Whether the log holds no block.
    pub fn is_empty(&self) -> bool {
        self.index().frames.is_empty()
    }

    /// The first and the last frame, `None` when the log is empty.
    pub fn bounds(&self) -> Option<(Frame, Frame)> {
        let index = self.index();
        Some((*index.frames.first()?, *index.frames.last()?))
    }

    /// The frame whose first seqno is the greatest at or below `seqno`.
    pub fn frame_at(&self, seqno: Seqno) -> Option<Frame> {
        let index = self.index();
        let n = index.frames.partition_point(|f| f.first <= seqno);
        n.checked_sub(1).map(|i| index.frames[i])
    }

    /// The frame whose first seqno is `first`.
    pub fn frame_starting_at(&self, first: Seqno) -> Option<Frame> {
        let index = self.index();
        index
            .frames
            .binary_search_by_key(&first, |f| f.first)
            .ok()
            .map(|i| index.frames[i])
    }

    /// Bytes of the file up to the end of its last frame.
    pub fn len(&self) -> u64 {
        self.index().end
    }

    /// Appends a frame holding `payload` as the block starting at
    /// `first`. After a failed append the file is cut back to its last
    /// complete frame; if even that fails, every later append fails.
    ///
    /// # Errors
    /// [`LogError::Io`] (`InvalidInput` for a payload above
    /// [`MAX_FRAME_PAYLOAD`] or a seqno not above the last block's).
    pub fn append(&self, first: Seqno, payload: &[u8]) -> Result<(), LogError> {
        let mut index = self.index();
        let invalid = |message: String| LogError::Io {
            op: format!("append the block of seqno {first}"),
            cause: std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
        };
        if index.failed || index.torn.is_some() {
            return Err(invalid(
                "an earlier append failed or the torn tail of a crash was not cut".into(),
            ));
        }
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&n| n <= MAX_FRAME_PAYLOAD)
            .ok_or_else(|| invalid(format!("a block of {} bytes is too large", payload.len())))?;
        if let Some(last) = index.frames.last() {
            if first <= last.first {
                return Err(invalid(format!(
                    "the last block starts at seqno {}",
                    last.first
                )));
            }
        }
        let header = frame_header(first, payload);
        let written = write_all_vectored(
            &self.file,
            &mut [IoSlice::new(&header), IoSlice::new(payload)],
        );
        if let Err(e) = written {
            // Cut the partial frame so that the file stays a sequence of
            // frames; if that fails too, refuse further appends.
            if self.file.set_len(index.end).is_err() {
                index.failed = true;
            }
            return Err(LogError::Io {
                op: format!(
                    "append the {} byte block of seqno {first} to {}",
                    payload.len(),
                    self.path.display()
                ),
                cause: e,
            });
        }
        let offset = index.end;
        index.frames.push(Frame { first, offset, len });
        index.end = offset + FRAME_HEADER_BYTES as u64 + u64::from(len);
        Ok(())
    }

    /// Reads `frame` whole (header and payload) into a buffer and checks
    /// its header and CRC. The payload is `&buf[FRAME_HEADER_BYTES..]`.
    ///
    /// # Errors
    /// [`LogError::Io`]; [`LogError::BadFrame`] when the header does not
    /// match the index or the CRC does not match.
    pub fn read(&self, frame: Frame) -> Result<Vec<u8>, LogError> {
        let mut buf = Vec::new();
        self.read_into(frame, &mut buf)?;
        Ok(buf)
    }

    /// As [`Log::read`], into `buf` (its contents replaced): a reader that
    /// hands back the buffer of the block it is done with reuses its pages
    /// instead of faulting in new ones for every block.
    ///
    /// # Errors
    /// As [`Log::read`].
    pub fn read_into(&self, frame: Frame, buf: &mut Vec<u8>) -> Result<(), LogError> {
        let total = FRAME_HEADER_BYTES + frame.len as usize;
        buf.clear();
        buf.resize(total, 0);
        self.file
            .read_exact_at(buf, frame.offset)
            .map_err(io_error(format!(
                "read the block of seqno {} at byte {} of {}",
                frame.first,
                frame.offset,
                self.path.display()
            )))?;
        check_frame(buf, frame)
    }

    /// fsyncs the file's data and length (`fdatasync`).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn sync(&self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(io_error(format!("fsync {}", self.path.display())))
    }
}

/// Checks a frame read whole against its index entry: header fields and
/// CRC.
///
/// # Errors
/// [`LogError::BadFrame`] saying what differs.
pub fn check_frame(buf: &[u8], frame: Frame) -> Result<(), LogError> {
    let bad = |reason: String| LogError::BadFrame {
        first: frame.first,
        reason: format!(
            "the block starting at seqno {} (byte {} of the log file) {reason}",
            frame.first, frame.offset
        ),
    };
    let (h, payload) = buf.split_at(FRAME_HEADER_BYTES);
    let h: &[u8; FRAME_HEADER_BYTES] = h.try_into().expect("split at the header length");
    let Some((first, len, crc)) = parse_frame_header(h) else {
        return Err(bad("has a header that fails its CRC check".into()));
    };
    if len != frame.len || first != frame.first {
        return Err(bad(format!(
            "has a header that changed since the file was opened (length {len}, seqno {first})"
        )));
    }
    let actual = crc32fast::hash(payload);
    if actual != crc {
        return Err(bad(format!(
            "fails its CRC check (CRC mismatch: stored {crc:08x}, computed {actual:08x})"
        )));
    }
    Ok(())
}

/// Writes all of `bufs` with `writev` (the file's `O_APPEND` puts them at
/// its end), going on after short writes.
fn write_all_vectored(mut file: &File, mut bufs: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "the file took no more bytes",
                ))
            }
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shardrep-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(LOG_FILE)
    }

    #[test]
    fn appended_blocks_read_back_and_reopen_with_the_same_index() {
        let path = temp("roundtrip");
        Log::create(&path, Seqno(10)).unwrap();
        let log = Log::open(&path, Seqno(10)).unwrap();
        assert!(log.is_empty());
        log.append(Seqno(10), b"first block").unwrap();
        log.append(Seqno(12), &[7u8; 70_000]).unwrap();
        log.append(Seqno(13), b"").unwrap();
        let err = log.append(Seqno(13), b"again").unwrap_err();
        assert!(
            err.to_string().contains("last block starts at seqno 13"),
            "{err}"
        );
        let f = log.frame_at(Seqno(11)).unwrap();
        assert_eq!((f.first, f.offset, f.len), (Seqno(10), 16, 11));
        assert_eq!(
            log.frame_starting_at(Seqno(12)).unwrap().offset,
            16 + 20 + 11
        );
        assert_eq!(&log.read(f).unwrap()[FRAME_HEADER_BYTES..], b"first block");
        assert_eq!(log.frame_at(Seqno(9)), None);
        assert_eq!(log.frame_starting_at(Seqno(11)), None);
        let big = log.frame_starting_at(Seqno(12)).unwrap();
        assert_eq!(log.read(big).unwrap().len(), FRAME_HEADER_BYTES + 70_000);
        let frames: Vec<Frame> = [Seqno(10), Seqno(12), Seqno(13)]
            .iter()
            .map(|&s| log.frame_starting_at(s).unwrap())
            .collect();
        let len = log.len();
        assert_eq!(len, std::fs::metadata(&path).unwrap().len());
        drop(log);
        let (scanned, torn) = scan(&File::open(&path).unwrap(), Seqno(10)).unwrap();
        assert_eq!(scanned, frames);
        assert_eq!(torn, None);
        // The wrong start seqno is a damaged header.
        let err = Log::open(&path, Seqno(11)).unwrap_err();
        assert!(matches!(err, LogError::Damaged { offset: 0, .. }), "{err}");
    }

    #[test]
    fn a_cut_frame_or_zeros_at_the_end_are_a_torn_tail_that_is_cut() {
        for (name, tail) in [
            ("half-header", frame_header(Seqno(3), b"xyz")[..9].to_vec()),
            ("half-payload", {
                let mut v = frame_header(Seqno(3), b"xyz").to_vec();
                v.extend_from_slice(b"x");
                v
            }),
            ("zeros", vec![0u8; 5000]),
        ] {
            let path = temp(name);
            Log::create(&path, Seqno(0)).unwrap();
            let log = Log::open(&path, Seqno(0)).unwrap();
            log.append(Seqno(0), b"kept").unwrap();
            let good_end = log.len();
            drop(log);
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(&tail).unwrap();
            drop(f);
            let log = Log::open(&path, Seqno(0)).unwrap();
            let torn = log.torn_tail().unwrap();
            assert_eq!(torn.valid_end, good_end, "{name}");
            assert_eq!(torn.file_len, good_end + tail.len() as u64, "{name}");
            assert!(log.append(Seqno(3), b"no").is_err(), "{name}");
            assert_eq!(log.cut_torn_tail().unwrap().unwrap().valid_end, good_end);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), good_end);
            log.append(Seqno(3), b"after").unwrap();
            drop(log);
            let log = Log::open(&path, Seqno(0)).unwrap();
            assert_eq!(log.torn_tail(), None);
            let f = log.frame_starting_at(Seqno(3)).unwrap();
            assert_eq!(&log.read(f).unwrap()[FRAME_HEADER_BYTES..], b"after");
        }
    }

    #[test]
    fn a_flipped_payload_byte_fails_the_read_of_its_block_only() {
        let path = temp("flip");
        Log::create(&path, Seqno(0)).unwrap();
        let log = Log::open(&path, Seqno(0)).unwrap();
        log.append(Seqno(0), b"block zero").unwrap();
        log.append(Seqno(5), b"block five").unwrap();
        let five = log.frame_starting_at(Seqno(5)).unwrap();
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[five.offset as usize + FRAME_HEADER_BYTES + 3] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let log = Log::open(&path, Seqno(0)).unwrap();
        assert_eq!(log.torn_tail(), None, "a complete frame is never torn");
        let err = log.read(five).unwrap_err();
        assert!(
            matches!(
                err,
                LogError::BadFrame {
                    first: Seqno(5),
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("CRC mismatch"), "{err}");
        let zero = log.frame_starting_at(Seqno(0)).unwrap();
        assert!(log.read(zero).is_ok());
    }

    #[test]
    fn a_damaged_frame_header_before_other_frames_is_an_error() {
        let path = temp("header");
        Log::create(&path, Seqno(0)).unwrap();
        let log = Log::open(&path, Seqno(0)).unwrap();
        for s in 0..3 {
            log.append(Seqno(s), b"0123456789").unwrap();
        }
        let second = log.frame_starting_at(Seqno(1)).unwrap();
        drop(log);
        let bytes = std::fs::read(&path).unwrap();
        // A flipped length bit: the header's own CRC fails.
        let mut flipped = bytes.clone();
        flipped[second.offset as usize + 9] ^= 0x40;
        std::fs::write(&path, &flipped).unwrap();
        let err = Log::open(&path, Seqno(0)).unwrap_err();
        assert!(matches!(err, LogError::Damaged { .. }), "{err}");
        assert!(err.to_string().contains("fails its CRC check"), "{err}");
        // A header rewritten whole (as a bug would) with a seqno that does
        // not increase.
        let mut rewritten = bytes.clone();
        let at = second.offset as usize;
        let payload = &bytes[at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + 10];
        rewritten[at..at + FRAME_HEADER_BYTES].copy_from_slice(&frame_header(Seqno(0), payload));
        std::fs::write(&path, &rewritten).unwrap();
        let err = Log::open(&path, Seqno(0)).unwrap_err();
        assert!(err.to_string().contains("is wrong"), "{err}");
    }
}
