//! Binlog files in a directory as an event source.
//!
//! [`FileSource`] reads the binlog files of a master (or a copy of them) from
//! a directory, starting at a [`BinlogPosition`], and hands out each event's
//! complete bytes (19-byte header, body, checksum trailer when present) with
//! the position where the event starts. It follows rotation: after a ROTATE
//! event it continues in the file the ROTATE names; at the end of a file
//! without one (a server that crashed, or a file set copied by hand) it
//! continues in the next file listed by the index file.
//!
//! # Start position and the replayed FORMAT_DESCRIPTION
//! A start offset of 0 or 4 means the start of the file. When the start
//! offset is past the first event, the file's FORMAT_DESCRIPTION event (at
//! offset 4) is still delivered **first**, with its real position
//! (`file:4`), because the decoder needs it to know the file's checksum
//! algorithm and post-header lengths. The next event is then the one at the
//! start offset. So a caller sees one event whose position is *before*
//! [`FileSource::start`]: it is context for the decoder only, not part of the
//! requested range, and must not move a resume position backwards.
//! [`RawEvent`]s with `position < source.start()` are exactly these.
//!
//! # Index file
//! The index (`<base>.index` in the directory unless another is given) lists
//! one binlog path a line; paths may be relative or absolute, and only their
//! file name is used: files are always opened in the source's directory, so
//! a copied directory works. Without an index file the directory's files
//! named `<base>.<digits>` are used in index order.
//!
//! # Modes
//! - `follow = false`: read what is there and stop with `Ok(None)` at the
//!   end of the last file. A last event that is cut short is an
//!   [`ExtractError::File`] naming file, offset and the expected and actual
//!   sizes.
//! - `follow = true` (tail): at the end of the last file, wait and poll for
//!   more bytes or a new file; a partly written event is waited for and never
//!   handed out. [`EventSource::next_event`] then only returns when an event
//!   is complete (or on an error). A cut-short event in a file the server
//!   has already rotated away from is an error in both modes.
//!
//! # Checks
//! Every file must start with the binlog magic `fe 62 69 6e`; every event
//! must be at least 19 bytes and at most [`FileOptions::max_event_size`]; with
//! [`FileOptions::verify_log_pos`] (the default) every event's header
//! `log_pos` must be the offset just after it (modulo 2^32), which catches a
//! start offset in the middle of an event and a corrupt size. Each problem is
//! an [`ExtractError::File`] with the file path and offset. Nothing panics.
//!
//! # Bytes
//! Events are handed out exactly as stored. Note for checksum checks: in the
//! file a MariaDB master is still writing, the FORMAT_DESCRIPTION has
//! `LOG_EVENT_BINLOG_IN_USE_F` (0x1) set, and its CRC-32 was computed with
//! that flag clear (the live stream sends it cleared).
//!
//! # I/O
//! Files are read with a large buffered reader (1 MiB by default) and each
//! event is read exactly once into its own `Vec`. The reads are ordinary
//! blocking file reads done inside the async `next_event` (local files, page
//! cache, at most one buffer refill per call); only the follow-mode waits
//! are async sleeps. [`FileSource::try_next_event`] is the same reader
//! without any waiting, usable from synchronous code. `next_event` is
//! cancellation safe: when its future is dropped while waiting, nothing has
//! been consumed and the next call continues at the same event.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::FilesSourceConfig;
use crate::position::BinlogPosition;

use super::{EventHeader, EventSource, ExtractError, RawEvent, BINLOG_MAGIC, EVENT_HEADER_LEN};

/// Event type code of ROTATE.
pub(crate) const ROTATE_EVENT: u8 = 4;
/// Event type code of FORMAT_DESCRIPTION.
pub(crate) const FORMAT_DESCRIPTION_EVENT: u8 = 15;
/// Event type code of HEARTBEAT.
pub(crate) const HEARTBEAT_EVENT: u8 = 27;

/// Default largest accepted event: 1 GiB (MariaDB's largest
/// `max_allowed_packet`) plus 64 KiB for the event's header, post-header,
/// row-image overhead and checksum.
pub const DEFAULT_MAX_EVENT_SIZE: u32 = (1 << 30) + (64 << 10);

/// Options of a [`FileSource`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// Tail the last file (wait for more) instead of stopping at its end.
    /// Default `false`.
    pub follow: bool,
    /// In follow mode, the longest wait between two looks at the last file
    /// and the index. The wait starts at 1 ms and doubles up to this.
    /// Default 50 ms.
    pub poll_interval: Duration,
    /// The index file, relative to the directory (or absolute). `None`: the
    /// directory's `<base>.index` when it exists, else the directory's
    /// `<base>.<digits>` files in index order. Default `None`.
    pub index_file: Option<PathBuf>,
    /// Largest accepted `event_size`, bytes; larger is a corrupt file.
    /// Default [`DEFAULT_MAX_EVENT_SIZE`].
    pub max_event_size: u32,
    /// Check that every event's header `log_pos` is the offset just after
    /// it (true for every binlog a master writes; not for relay logs).
    /// Default `true`.
    pub verify_log_pos: bool,
    /// Capacity of the buffered reader, bytes. Default 1 MiB.
    pub read_buffer_size: usize,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            follow: false,
            poll_interval: Duration::from_millis(50),
            index_file: None,
            max_event_size: DEFAULT_MAX_EVENT_SIZE,
            verify_log_pos: true,
            read_buffer_size: 1 << 20,
        }
    }
}

impl FileOptions {
    /// The defaults with `follow` set.
    pub fn follow(follow: bool) -> Self {
        FileOptions {
            follow,
            ..FileOptions::default()
        }
    }
}

/// The open file being read.
struct OpenFile {
    /// Full path (for errors).
    path: PathBuf,
    /// Buffered reader, positioned at `offset`.
    reader: BufReader<File>,
    /// File length as last seen; refreshed only when a read needs more.
    known_len: u64,
}

/// What the next read attempt found.
enum Step {
    /// A complete event.
    Event(RawEvent),
    /// The current file is done; continue in this one at this offset.
    Switch(String, u64),
    /// Nothing more is available now.
    Wait,
}

/// How the current file's end looks.
enum Tail {
    /// Clean end: no bytes after the last complete event.
    Clean,
    /// `have` bytes of an event (or header) that needs `need`.
    Partial { have: u64, need: u64 },
}

/// Binlog files in a directory as an [`EventSource`]; see the module
/// documentation for the start rule, the modes and the checks.
pub struct FileSource {
    dir: PathBuf,
    options: FileOptions,
    start: BinlogPosition,
    /// Position of the next event to hand out.
    position: BinlogPosition,
    /// The open current file (`position.file()`), if opened.
    file: Option<OpenFile>,
    /// The start file's FORMAT_DESCRIPTION must be delivered before the
    /// event at `start` (start offset past the first event).
    replay_fde: bool,
    /// Whether the current file's events carry a CRC-32 trailer, from its
    /// FORMAT_DESCRIPTION; `None` before it was seen.
    crc: Option<bool>,
    /// After a real ROTATE: the file and offset it names.
    rotate_to: Option<(String, u64)>,
    /// The current file's FORMAT_DESCRIPTION has `LOG_EVENT_BINLOG_IN_USE_F`
    /// (0x1): the server was still writing it (or crashed while it did).
    in_use: bool,
    /// A non-following read stopped before a partly written event at the
    /// end of a file the server is still writing.
    ended_in_active_file: bool,
    /// Buffer for the 19-byte header.
    header: [u8; EVENT_HEADER_LEN],
}

impl FileSource {
    /// A source reading binlog files from `dir`, starting at `start`
    /// (offset 0 or 4: the file's start). Nothing is opened yet: a missing
    /// file or bad magic is reported by the first `next_event`.
    ///
    /// # Errors
    /// [`ExtractError::File`] when `start`'s offset is 1..=3 (inside the
    /// magic).
    pub fn new(
        dir: impl Into<PathBuf>,
        start: BinlogPosition,
        options: FileOptions,
    ) -> Result<FileSource, ExtractError> {
        let dir = dir.into();
        let offset = start.offset();
        if (1..4).contains(&offset) {
            return Err(ExtractError::File {
                file: dir.join(start.file()).display().to_string(),
                offset,
                message: "start offset inside the 4-byte binlog magic: expected 0, 4 or \
                          the offset of an event"
                    .to_owned(),
            });
        }
        let start = if offset < 4 {
            start.with_offset(4)
        } else {
            start
        };
        Ok(FileSource {
            dir,
            replay_fde: start.offset() > 4,
            position: start.clone(),
            start,
            options,
            file: None,
            crc: None,
            rotate_to: None,
            in_use: false,
            ended_in_active_file: false,
            header: [0; EVENT_HEADER_LEN],
        })
    }

    /// A source for a `[source] kind = "files"` configuration.
    ///
    /// # Errors
    /// As [`FileSource::new`].
    pub fn from_config(
        config: &FilesSourceConfig,
        start: BinlogPosition,
        follow: bool,
    ) -> Result<FileSource, ExtractError> {
        let options = FileOptions {
            follow,
            index_file: config.binlog_index.clone(),
            ..FileOptions::default()
        };
        FileSource::new(config.binlog_dir.clone(), start, options)
    }

    /// Whether a non-following read ended before a partly written event at
    /// the end of the file the server is still writing (its
    /// FORMAT_DESCRIPTION carries `LOG_EVENT_BINLOG_IN_USE_F`): the end is
    /// "what exists now", not a truncated binlog.
    pub fn ended_in_active_file(&self) -> bool {
        self.ended_in_active_file
    }

    /// Where reading started (offset 0 normalized to 4). An event handed out
    /// with a position before this is the start file's replayed
    /// FORMAT_DESCRIPTION.
    pub fn start(&self) -> &BinlogPosition {
        &self.start
    }

    /// Where the next event starts (after a ROTATE: the file it names, once
    /// the source has moved there).
    pub fn position(&self) -> &BinlogPosition {
        &self.position
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options.
    pub fn options(&self) -> &FileOptions {
        &self.options
    }

    /// The next event if one is complete now, without waiting: `Ok(None)`
    /// when nothing more is available at the moment (in follow mode a
    /// partly written event also gives `Ok(None)`; without follow it is an
    /// error).
    ///
    /// # Errors
    /// [`ExtractError::File`] for a missing file, bad magic, a bad event
    /// size or `log_pos`, a cut-short event; [`ExtractError::Io`] for read
    /// errors.
    pub fn try_next_event(&mut self) -> Result<Option<RawEvent>, ExtractError> {
        loop {
            match self.step()? {
                Step::Event(event) => return Ok(Some(event)),
                Step::Wait => return Ok(None),
                Step::Switch(file, offset) => self.switch_to(file, offset)?,
            }
        }
    }

    fn path_of(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn file_error(&self, offset: u64, message: impl Into<String>) -> ExtractError {
        ExtractError::File {
            file: self.path_of(self.position.file()).display().to_string(),
            offset,
            message: message.into(),
        }
    }

    fn io_error(path: &Path, source: std::io::Error) -> ExtractError {
        ExtractError::Io {
            file: path.display().to_string(),
            cause: source,
        }
    }

    /// Moves to `file` at `offset` (the previous file is done).
    fn switch_to(&mut self, file: String, offset: u64) -> Result<(), ExtractError> {
        let next = BinlogPosition::new(file, offset.max(4)).map_err(|e| {
            self.file_error(self.position.offset(), format!("cannot continue: {e}"))
        })?;
        tracing::debug!(from = %self.position, to = %next, "binlog file source: next file");
        self.position = next;
        self.file = None;
        self.crc = None;
        self.in_use = false;
        self.rotate_to = None;
        self.replay_fde = false;
        Ok(())
    }

    /// Opens the current file when not open: checks the magic and positions
    /// the reader. `Ok(false)`: not ready yet (follow mode: missing magic).
    fn ensure_open(&mut self) -> Result<bool, ExtractError> {
        if self.file.is_some() {
            return Ok(true);
        }
        let path = self.path_of(self.position.file());
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ExtractError::File {
                    file: path.display().to_string(),
                    offset: self.position.offset(),
                    message: format!(
                        "binlog file not found in {} (purged, or a wrong start position?)",
                        self.dir.display()
                    ),
                });
            }
            Err(e) => return Err(Self::io_error(&path, e)),
        };
        let len = file.metadata().map_err(|e| Self::io_error(&path, e))?.len();
        if len < BINLOG_MAGIC.len() as u64 {
            if self.options.follow {
                return Ok(false);
            }
            return Err(ExtractError::File {
                file: path.display().to_string(),
                offset: 0,
                message: format!(
                    "expected the 4-byte binlog magic fe 62 69 6e, the file has {len} bytes"
                ),
            });
        }
        let mut reader = BufReader::with_capacity(self.options.read_buffer_size.max(4096), file);
        let mut magic = [0u8; 4];
        reader
            .read_exact(&mut magic)
            .map_err(|e| Self::io_error(&path, e))?;
        if magic != BINLOG_MAGIC {
            return Err(ExtractError::File {
                file: path.display().to_string(),
                offset: 0,
                message: format!(
                    "not a binlog file: expected magic fe 62 69 6e, found {}",
                    hex(&magic)
                ),
            });
        }
        if self.position.offset() > len && !self.options.follow {
            return Err(ExtractError::File {
                file: path.display().to_string(),
                offset: self.position.offset(),
                message: format!("start offset is beyond the end of the file ({len} bytes)"),
            });
        }
        let target = if self.replay_fde {
            4
        } else {
            self.position.offset()
        };
        if target != 4 {
            reader
                .seek(SeekFrom::Start(target))
                .map_err(|e| Self::io_error(&path, e))?;
        }
        self.file = Some(OpenFile {
            path,
            reader,
            known_len: len,
        });
        Ok(true)
    }

    /// One attempt to produce the next event.
    fn step(&mut self) -> Result<Step, ExtractError> {
        if let Some((file, offset)) = self.rotate_to.clone() {
            // The previous file ended with a real ROTATE: move on as soon as
            // the named file exists.
            if self.path_of(&file).exists() {
                return Ok(Step::Switch(file, offset));
            }
            // Without following, a missing next file is the end of what
            // exists only when nothing later is listed (or, without an
            // index, present): otherwise binlogs are missing in between.
            if !self.options.follow && self.next_listed_file()?.is_some() {
                return Err(self.file_error(
                    self.position.offset(),
                    format!(
                        "the ROTATE event at the end of this file names {file}, which is \
                         missing from {} although later binlogs are listed (purged or not \
                         copied?)",
                        self.dir.display()
                    ),
                ));
            }
            return Ok(Step::Wait);
        }
        if !self.ensure_open()? {
            return Ok(Step::Wait);
        }
        let offset = if self.replay_fde {
            4
        } else {
            self.position.offset()
        };
        match self.read_at(offset)? {
            Ok(event) => Ok(Step::Event(event)),
            Err(tail) => self.at_end(offset, tail),
        }
    }

    /// At the end of what the current file holds now (`offset` is where
    /// the incomplete or missing event starts): decide between waiting,
    /// moving to the next file and failing.
    fn at_end(&mut self, offset: u64, tail: Tail) -> Result<Step, ExtractError> {
        let next = self.next_listed_file()?;
        if let Tail::Partial { have, need } = tail {
            if !self.options.follow {
                if self.in_use && next.is_none() {
                    // The server is still writing this event: a read of
                    // what exists now ends before it.
                    self.ended_in_active_file = true;
                    return Ok(Step::Wait);
                }
                return Err(self.truncated(offset, have, need));
            }
        }
        let Some(next) = next else {
            return Ok(Step::Wait);
        };
        // A newer file is listed. The server wrote everything of this file
        // before listing the next one, so one more look settles whether this
        // file really ends here.
        if let Some(open) = self.file.as_mut() {
            open.known_len = 0;
        }
        match self.read_at(offset)? {
            Ok(event) => Ok(Step::Event(event)),
            Err(Tail::Clean) => {
                if self.replay_fde {
                    return Err(self.file_error(4, "the file has no FORMAT_DESCRIPTION event"));
                }
                let len = self.file.as_ref().map_or(0, |f| f.known_len);
                if offset > len {
                    return Err(self.file_error(
                        offset,
                        format!(
                            "offset is beyond the end of the file ({len} bytes), and the \
                             server has moved on to {next}"
                        ),
                    ));
                }
                Ok(Step::Switch(next, 4))
            }
            Err(Tail::Partial { have, need }) => Err(self.truncated(offset, have, need)),
        }
    }

    fn truncated(&self, offset: u64, have: u64, need: u64) -> ExtractError {
        let what = if need == EVENT_HEADER_LEN as u64 {
            "event header"
        } else {
            "event"
        };
        self.file_error(
            offset,
            format!("truncated {what}: expected {need} bytes, the file has {have} bytes from here"),
        )
    }

    /// Reads the event at `offset` (where the reader stands). `Ok(Err(tail))`
    /// when the file does not hold a complete event there (nothing consumed).
    ///
    /// Hot path: one allocation per event (its bytes, copied once out of the
    /// buffered reader's buffer), plus the file name of its position.
    fn read_at(&mut self, offset: u64) -> Result<Result<RawEvent, Tail>, ExtractError> {
        let max_event_size = self.options.max_event_size;
        let verify_log_pos = self.options.verify_log_pos;
        let replay_fde = self.replay_fde;
        let open = self.file.as_mut().expect("file opened by ensure_open");
        let header_end = offset + EVENT_HEADER_LEN as u64;
        if !available(open, header_end)? {
            let have = open.known_len.saturating_sub(offset);
            return Ok(Err(if have == 0 {
                Tail::Clean
            } else {
                Tail::Partial {
                    have,
                    need: EVENT_HEADER_LEN as u64,
                }
            }));
        }
        open.reader
            .read_exact(&mut self.header)
            .map_err(|e| Self::io_error(&open.path, e))?;
        let header = EventHeader::parse(&self.header).expect("19 bytes");
        let size = u64::from(header.event_size);
        let bad = |path: &Path, message: String| ExtractError::File {
            file: path.display().to_string(),
            offset,
            message,
        };
        if size < EVENT_HEADER_LEN as u64 {
            return Err(bad(
                &open.path,
                format!(
                    "bad event size {size} (type {}): expected at least {EVENT_HEADER_LEN} bytes",
                    header.type_code
                ),
            ));
        }
        if header.event_size > max_event_size {
            return Err(bad(
                &open.path,
                format!(
                    "bad event size {size} (type {}): larger than the {max_event_size} bytes \
                     accepted",
                    header.type_code
                ),
            ));
        }
        let end = offset + size;
        if verify_log_pos && header.log_pos != 0 && header.log_pos != end as u32 {
            return Err(bad(
                &open.path,
                format!(
                    "no event starts here: the header found (type {}, size {size}) ends at \
                     offset {end}, but its log_pos says {} (a start offset inside an event, or \
                     a corrupt file)",
                    header.type_code, header.log_pos
                ),
            ));
        }
        if replay_fde && header.type_code != FORMAT_DESCRIPTION_EVENT {
            return Err(bad(
                &open.path,
                format!(
                    "expected the FORMAT_DESCRIPTION event (type {FORMAT_DESCRIPTION_EVENT}) at \
                     offset 4, found type {}",
                    header.type_code
                ),
            ));
        }
        if !available(open, end)? {
            let have = open.known_len.saturating_sub(offset);
            // Give the header back: nothing is consumed.
            open.reader
                .seek_relative(-(EVENT_HEADER_LEN as i64))
                .map_err(|e| Self::io_error(&open.path, e))?;
            return Ok(Err(Tail::Partial { have, need: size }));
        }
        let size = size as usize;
        let mut bytes = Vec::with_capacity(size);
        bytes.extend_from_slice(&self.header);
        // What the reader's buffer holds is copied straight from it; only
        // the rest of an event that crosses the buffer's end (or is larger
        // than the buffer) is read with read_exact.
        let buffered = open.reader.buffer();
        let from_buffer = buffered.len().min(size - EVENT_HEADER_LEN);
        bytes.extend_from_slice(&buffered[..from_buffer]);
        open.reader.consume(from_buffer);
        if bytes.len() < size {
            let filled = bytes.len();
            bytes.resize(size, 0);
            open.reader.read_exact(&mut bytes[filled..]).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    bad(
                        &open.path,
                        format!(
                            "truncated event: expected {size} bytes, the file shrank while \
                             reading"
                        ),
                    )
                } else {
                    Self::io_error(&open.path, e)
                }
            })?;
        }

        let position = if self.replay_fde {
            // Delivered the FORMAT_DESCRIPTION; now go to the start offset.
            self.replay_fde = false;
            self.crc = fde_has_crc(&bytes);
            self.in_use = fde_in_use(&bytes);
            let target = self.position.offset();
            open.reader
                .seek(SeekFrom::Start(target))
                .map_err(|e| Self::io_error(&open.path, e))?;
            self.position.with_offset(offset)
        } else {
            // The event starts at the current position (`offset`); the
            // source moves on to its end.
            debug_assert_eq!(self.position.offset(), offset);
            let next = self.position.with_offset(end);
            let position = std::mem::replace(&mut self.position, next);
            match header.type_code {
                FORMAT_DESCRIPTION_EVENT => {
                    self.crc = fde_has_crc(&bytes);
                    self.in_use = fde_in_use(&bytes);
                }
                ROTATE_EVENT if header.log_pos != 0 => {
                    let (next, pos) = rotate_target(&bytes, self.crc).ok_or_else(|| {
                        bad(
                            &open.path,
                            "ROTATE event too short to name the next file".to_owned(),
                        )
                    })?;
                    let next = String::from_utf8(next.to_vec()).map_err(|_| {
                        bad(
                            &open.path,
                            format!("ROTATE event names a file that is not UTF-8: {}", hex(next)),
                        )
                    })?;
                    self.rotate_to = Some((next, pos));
                }
                _ => {}
            }
            position
        };
        Ok(Ok(RawEvent { position, bytes }))
    }

    /// The file after the current one in the index (or the directory), if
    /// one is listed.
    fn next_listed_file(&self) -> Result<Option<String>, ExtractError> {
        let current = &self.position;
        let mut best: Option<BinlogPosition> = None;
        for name in self.list_files()? {
            let Ok(candidate) = BinlogPosition::new(name, 4) else {
                continue;
            };
            if !candidate.same_log_family(current) || candidate.file_index() <= current.file_index()
            {
                continue;
            }
            if best
                .as_ref()
                .is_none_or(|b| candidate.file_index() < b.file_index())
            {
                best = Some(candidate);
            }
        }
        Ok(best.map(|b| b.file().to_owned()))
    }

    /// Binlog file names from the index file, or the directory listing.
    fn list_files(&self) -> Result<Vec<String>, ExtractError> {
        let index = match &self.options.index_file {
            Some(p) => Some(self.dir.join(p)),
            None => {
                let p = self
                    .dir
                    .join(format!("{}.index", self.position.base_name()));
                p.exists().then_some(p)
            }
        };
        if let Some(index) = index {
            let text = std::fs::read(&index).map_err(|e| Self::io_error(&index, e))?;
            return Ok(parse_index(&text));
        }
        let entries = std::fs::read_dir(&self.dir).map_err(|e| Self::io_error(&self.dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Self::io_error(&self.dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }
}

/// Whether the file holds at least `end` bytes, refreshing the cached
/// length only when needed.
fn available(open: &mut OpenFile, end: u64) -> Result<bool, ExtractError> {
    if end <= open.known_len {
        return Ok(true);
    }
    open.known_len = open
        .reader
        .get_ref()
        .metadata()
        .map_err(|e| FileSource::io_error(&open.path, e))?
        .len();
    Ok(end <= open.known_len)
}

/// The file names listed by an index file's text: one path a line,
/// relative or absolute; only the last path component is kept.
pub(crate) fn parse_index(text: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(text)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            Path::new(l)
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned)
        })
        .collect()
}

/// Whether the events after this FORMAT_DESCRIPTION event (complete bytes)
/// carry a CRC-32 trailer; `None` when the event is too short to say.
///
/// The checksum-algorithm byte precedes the FDE's own 4-byte checksum field
/// in servers that know checksums (MySQL >= 5.6.1, MariaDB >= 5.3); older
/// servers never write checksums.
/// Whether a FORMAT_DESCRIPTION's header flags carry
/// `LOG_EVENT_BINLOG_IN_USE_F` (0x1): the file is still being written.
pub(crate) fn fde_in_use(bytes: &[u8]) -> bool {
    bytes.get(17).is_some_and(|flags| flags & 0x01 != 0)
}

pub(crate) fn fde_has_crc(bytes: &[u8]) -> Option<bool> {
    // header 19 + binlog_version 2 + server_version 50 + create time 4 +
    // header length 1.
    const VERSION_AT: usize = EVENT_HEADER_LEN + 2;
    const FIXED: usize = VERSION_AT + 50 + 4 + 1;
    if bytes.len() < FIXED {
        return None;
    }
    let version = &bytes[VERSION_AT..VERSION_AT + 50];
    let version = &version[..version.iter().position(|&b| b == 0).unwrap_or(50)];
    let text = String::from_utf8_lossy(version);
    let mut numbers = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let v = (
        numbers.next().unwrap_or(0),
        numbers.next().unwrap_or(0),
        numbers.next().unwrap_or(0),
    );
    let knows_checksums = if text.contains("MariaDB") {
        v >= (5, 3, 0)
    } else {
        v >= (5, 6, 1)
    };
    if !knows_checksums {
        return Some(false);
    }
    if bytes.len() < FIXED + 5 {
        return None;
    }
    // 0 = off, 1 = CRC32, 255 = undefined (no checksum).
    Some(bytes[bytes.len() - 5] == 1)
}

/// The file name and position a ROTATE event (complete bytes) names.
/// `crc`: whether the event has a CRC-32 trailer, when known; when unknown
/// (a ROTATE before any FORMAT_DESCRIPTION, as at the start of a dump) the
/// trailer is recognised by checking it.
pub(crate) fn rotate_target(bytes: &[u8], crc: Option<bool>) -> Option<(&[u8], u64)> {
    let body = bytes.get(EVENT_HEADER_LEN..)?;
    if body.len() < 8 {
        return None;
    }
    let pos = u64::from_le_bytes(body[..8].try_into().ok()?);
    let has_crc = match crc {
        Some(c) => c,
        None => has_valid_crc(bytes),
    };
    let name_end = if has_crc {
        body.len().checked_sub(4)?
    } else {
        body.len()
    };
    if name_end < 8 {
        return None;
    }
    Some((&body[8..name_end], pos))
}

/// Whether the last 4 bytes are the CRC-32 of the bytes before them.
pub(crate) fn has_valid_crc(bytes: &[u8]) -> bool {
    if bytes.len() < EVENT_HEADER_LEN + 4 {
        return false;
    }
    let (data, trailer) = bytes.split_at(bytes.len() - 4);
    crc32fast::hash(data) == u32::from_le_bytes(trailer.try_into().expect("4 bytes"))
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl EventSource for FileSource {
    async fn next_event(&mut self) -> Result<Option<RawEvent>, ExtractError> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(event) = self.try_next_event()? {
                return Ok(Some(event));
            }
            if !self.options.follow {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.options.poll_interval.max(Duration::from_millis(1)));
        }
    }

    fn ended_in_active_file(&self) -> bool {
        FileSource::ended_in_active_file(self)
    }
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
