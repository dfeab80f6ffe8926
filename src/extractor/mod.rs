//! The extractor: reads a master's binlog (files in a directory, or a live
//! master as a replica), decodes its events and assembles them into
//! [`Transaction`](crate::event::Transaction)s.
//!
//! Layers, bottom up:
//! - [`binlog`]: event type codes and the byte reader (a leaf: imports
//!   nothing else of the extractor).
//! - [`decode`]: one raw event (header + body, checksum included) into a
//!   [`BinlogEvent`]; stateful (format description, checksum algorithm,
//!   table-map cache). Row images are decoded by [`rows`], MariaDB's own
//!   event types by [`mariadb`].
//! - [`assemble`]: a stream of [`BinlogEvent`]s into transactions, each with
//!   the binlog position after it.
//! - sources ([`files`], [`live`]) behind [`EventSource`]: raw events with
//!   their positions.
//!
//! Event layout: MySQL "Binary Log" internals documentation (event header v4
//! = 19 bytes: timestamp u32, type u8, server_id u32, event_size u32,
//! log_pos u32, flags u16; little endian) and MariaDB's "Binary Log Formats"
//! / "Binlog Event Header" knowledge-base pages.

pub mod assemble;
pub mod binlog;
mod compression;
mod decimal;
pub mod decode;
pub mod files;
#[cfg(test)]
mod fixtures;
pub mod live;
pub mod mariadb;
pub mod reader;
pub mod rows;

use crate::event::{RowKind, Statement, TableInfo, UserVar};
use crate::position::{BinlogPosition, Gtid};

/// Hasher of the extractor's maps keyed by binlog table id (the decoder's
/// TABLE_MAP cache, the assembler's per-transaction table index): a
/// multiplicative (Fibonacci) hash of the `u64`, much cheaper than SipHash
/// on a path that looks a table id up for every TABLE_MAP and rows event.
/// Table ids come from the master's binlog, not from an adversary, so the
/// DoS resistance of SipHash buys nothing here.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TableIdHasher(u64);

impl std::hash::Hasher for TableIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by binlog table id (see [`TableIdHasher`]).
pub(crate) type TableIdMap<V> =
    std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<TableIdHasher>>;

/// Length of a v4 binlog event header, bytes.
pub const EVENT_HEADER_LEN: usize = 19;
/// The 4 magic bytes at the start of every binlog file.
pub const BINLOG_MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
/// Event header flag `LOG_EVENT_ARTIFICIAL_F` (0x20): an event made up by
/// the server (e.g. the fake ROTATE at the start of a dump).
pub const LOG_EVENT_ARTIFICIAL_F: u16 = 0x20;

/// The 19-byte common header of every event (binlog v4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHeader {
    /// Seconds since the Unix epoch when the statement began on the master.
    pub timestamp: u32,
    /// Event type code (MySQL `Log_event_type`, MariaDB codes 160..).
    pub type_code: u8,
    /// Server id of the server where the event originated.
    pub server_id: u32,
    /// Size of the whole event, header and checksum included, bytes.
    pub event_size: u32,
    /// Binlog offset just after this event (0 for artificial events).
    pub log_pos: u32,
    /// Header flags (`LOG_EVENT_*_F`).
    pub flags: u16,
}

impl EventHeader {
    /// Parses the first 19 bytes of `raw`; `None` when shorter.
    pub fn parse(raw: &[u8]) -> Option<EventHeader> {
        if raw.len() < EVENT_HEADER_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([raw[i], raw[i + 1], raw[i + 2], raw[i + 3]]);
        Some(EventHeader {
            timestamp: u32_at(0),
            type_code: raw[4],
            server_id: u32_at(5),
            event_size: u32_at(9),
            log_pos: u32_at(13),
            flags: u16::from_le_bytes([raw[17], raw[18]]),
        })
    }
}

/// One decoded binlog event with its header and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct BinlogEvent {
    /// The common header.
    pub header: EventHeader,
    /// Binlog file and offset where the event starts.
    pub position: BinlogPosition,
    /// The decoded body.
    pub body: EventBody,
}

/// Checksum algorithm announced by a FORMAT_DESCRIPTION event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumAlg {
    /// `binlog_checksum=NONE`: no trailer.
    None,
    /// `binlog_checksum=CRC32`: a 4-byte CRC-32 (ISO-HDLC, as zlib's
    /// `crc32`) of header and body ends every event.
    Crc32,
}

/// What a FORMAT_DESCRIPTION event says about the events that follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatDescription {
    /// Binlog format version (4 for every supported server).
    pub binlog_version: u16,
    /// Server version text, e.g. `10.11.19-MariaDB-0+deb12u1-log`.
    pub server_version: String,
    /// Post-header length of each event type, indexed by `type_code - 1`.
    pub post_header_lengths: Vec<u8>,
    /// Checksum algorithm of the following events.
    pub checksum: ChecksumAlg,
}

/// Decoded body of a binlog event.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody {
    /// FORMAT_DESCRIPTION (15).
    FormatDescription(FormatDescription),
    /// ROTATE (4): the next event is at `position` of `next_file`.
    /// `artificial` is true for the fake ROTATE a dump starts with (log_pos
    /// 0 or flag 0x20).
    Rotate {
        /// File the stream continues in.
        next_file: String,
        /// Offset in that file.
        position: u64,
        /// Made up by the server, not in the binlog file.
        artificial: bool,
    },
    /// QUERY (2) with `BEGIN`: a transaction starts.
    Begin,
    /// QUERY (2) with `COMMIT` (non-transactional engines): the
    /// transaction ends.
    Commit,
    /// QUERY (2) with `ROLLBACK`: the transaction ends without effect on
    /// transactional tables.
    Rollback,
    /// Any other QUERY (2): DDL or statement-format DML.
    Query(Statement),
    /// TABLE_MAP (19): the table the following rows events refer to (also
    /// kept in the decoder's cache by table id, and shared with it: MariaDB
    /// repeats a transaction's TABLE_MAP before every rows event, and a
    /// repeat costs a reference count, not a copy of the definition).
    TableMap(std::sync::Arc<TableInfo>),
    /// WRITE/UPDATE/DELETE_ROWS v1 (23-25) or v2 (30-32), and MySQL
    /// PARTIAL_UPDATE_ROWS (39), with the rows decoded against the table
    /// map of `table_id`.
    Rows {
        /// Table id the rows refer to.
        table_id: u64,
        /// Insert, update or delete.
        kind: RowKind,
        /// Rows event flags (see [`crate::event::RowsChange::flags`]).
        flags: u16,
        /// The decoded rows.
        rows: Vec<crate::event::RowPair>,
    },
    /// XID (16): the transaction commits.
    Xid(u64),
    /// INTVAR (5): `LAST_INSERT_ID` (type 1) or `INSERT_ID` (type 2).
    Intvar {
        /// 1 = LAST_INSERT_ID, 2 = INSERT_ID.
        kind: u8,
        /// The value.
        value: u64,
    },
    /// RAND (13): the two RAND() seeds.
    Rand {
        /// seed1
        seed1: u64,
        /// seed2
        seed2: u64,
    },
    /// USER_VAR (14).
    UserVar(UserVar),
    /// HEARTBEAT (27): the master is alive; nothing to apply.
    Heartbeat,
    /// STOP (3): the master stopped; the file ends here.
    Stop,
    /// MariaDB GTID (162): a transaction (or standalone statement) starts.
    MariadbGtid {
        /// The GTID (domain from the event, server id from the header).
        gtid: Gtid,
        /// Group-commit id when `FL_GROUP_COMMIT_ID` is set.
        commit_id: Option<u64>,
        /// GTID flags byte (`FL_STANDALONE` 1, `FL_GROUP_COMMIT_ID` 2,
        /// `FL_TRANSACTIONAL` 4, `FL_ALLOW_PARALLEL` 8, `FL_WAITED` 16,
        /// `FL_DDL` 32, `FL_PREPARED_XA` 64, `FL_COMPLETED_XA` 128).
        flags: u8,
    },
    /// XA_PREPARE (38, MariaDB 10.5+): ends the event group of an `XA
    /// PREPARE` (see [`crate::xa`]).
    XaPrepare {
        /// Set for `XA COMMIT … ONE PHASE` (not binlogged this way by
        /// MariaDB; refused if seen).
        one_phase: bool,
        /// The prepared transaction's xid.
        xid: crate::xa::Xid,
    },
    /// MariaDB ANNOTATE_ROWS (160): the SQL of the following rows events.
    AnnotateRows(Vec<u8>),
    /// MariaDB BINLOG_CHECKPOINT (161).
    BinlogCheckpoint {
        /// The oldest binlog file still needed for crash recovery.
        file: String,
    },
    /// MariaDB GTID_LIST (163): GTID state at the start of a file.
    GtidList(Vec<Gtid>),
    /// MySQL GTID (33) / ANONYMOUS_GTID (34): a transaction starts.
    MysqlGtid {
        /// Source uuid as 8-4-4-4-12 lowercase hex (all zeros when
        /// anonymous).
        uuid: String,
        /// Transaction number.
        gno: u64,
    },
    /// MySQL PREVIOUS_GTIDS (35), ROWS_QUERY (29 carries text and is
    /// reported as [`EventBody::AnnotateRows`]), and other events that
    /// carry nothing to apply: kept with their type code.
    Ignored,
}

/// An error of the extractor, with what went wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// An event could not be decoded.
    #[error("binlog {position}: cannot decode {event} event: {message}")]
    Decode {
        /// Where the event starts.
        position: BinlogPosition,
        /// Event type name, or `type N`.
        event: String,
        /// What was expected and what was found.
        message: String,
    },
    /// An event type the extractor does not know: never skipped.
    #[error("binlog {position}: unknown event type {type_code}")]
    UnknownEvent {
        /// Where the event starts.
        position: BinlogPosition,
        /// The type code.
        type_code: u8,
    },
    /// The binlog is encrypted (MariaDB START_ENCRYPTION): not supported.
    #[error("binlog {position}: encrypted binlog (START_ENCRYPTION event) is not supported")]
    Encrypted {
        /// Where the event starts.
        position: BinlogPosition,
    },
    /// The event's CRC-32 does not match its bytes.
    #[error("binlog {position}: checksum mismatch: event says {expected:#010x}, bytes give {actual:#010x}")]
    Checksum {
        /// Where the event starts.
        position: BinlogPosition,
        /// CRC in the event trailer.
        expected: u32,
        /// CRC computed over header and body.
        actual: u32,
    },
    /// A binlog file is malformed (bad magic, truncated event, bad size).
    #[error("binlog file {file} at offset {offset}: {message}")]
    File {
        /// File path.
        file: String,
        /// Offset of the problem, bytes.
        offset: u64,
        /// What was expected and what was found.
        message: String,
    },
    /// Events arrived in an order that does not form transactions (e.g. a
    /// rows event outside a transaction, a transaction that never ends).
    #[error("binlog {position}: {message}")]
    Sequence {
        /// Where the offending event starts.
        position: BinlogPosition,
        /// What was expected.
        message: String,
    },
    /// The start position cannot be used with this source.
    #[error("cannot start extraction: {message}")]
    Start {
        /// What is wrong and what to give instead.
        message: String,
    },
    /// I/O error reading a file.
    #[error("binlog file {file}: {cause}")]
    Io {
        /// File path.
        file: String,
        /// The error.
        cause: std::io::Error,
    },
    /// Error from the live master connection.
    #[error("master {address}: {message}")]
    Master {
        /// host:port of the master (never credentials).
        address: String,
        /// The error, with the server's code when it sent one.
        message: String,
        /// The server's error code (e.g. 1045 access denied), when the
        /// master sent an error packet.
        code: Option<u16>,
        /// Whether retrying (reconnecting) may help.
        transient: bool,
    },
}

/// Where a live source stood when it last had nothing to send: a
/// HEARTBEAT (sent by the master after `heartbeat_period_ms` without an
/// event) between transactions gives the master's position, every event
/// before it received, every transaction before it numbered below the
/// seqno given and handed to the caller (the reader returns transactions
/// one at a time, so the caller stored them before it asked for more).
/// The consistency check's hold uses it to know that a quiet service has
/// every transaction up to the master's snapshot (after a rotation, or
/// before the first transaction of a run).
#[derive(Debug, Default)]
pub struct IdleMark(std::sync::Mutex<Option<(BinlogPosition, crate::position::Seqno)>>);

impl IdleMark {
    /// Records that the source stood at `position` with `next_seqno` the
    /// next seqno to assign.
    pub fn set(&self, position: BinlogPosition, next_seqno: crate::position::Seqno) {
        *self.0.lock().expect("idle mark") = Some((position, next_seqno));
    }

    /// The last position recorded and the next seqno then.
    pub fn get(&self) -> Option<(BinlogPosition, crate::position::Seqno)> {
        self.0.lock().expect("idle mark").clone()
    }
}

/// A raw event read from a source: the whole event bytes (header, body and
/// checksum trailer when present) and the binlog position where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEvent {
    /// Binlog file name (no directory) and offset where the event starts.
    pub position: BinlogPosition,
    /// The event bytes.
    pub bytes: Vec<u8>,
}

/// A source of raw binlog events in binlog order: binlog files in a
/// directory ([`files::FileSource`]) or a live master
/// ([`live::LiveSource`]).
pub trait EventSource {
    /// The next raw event; `Ok(None)` when the source has no more events now
    /// and is not following (a finished file set).
    fn next_event(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<RawEvent>, ExtractError>> + Send;

    /// Whether the source ended (`Ok(None)`) at the end of what a server is
    /// still writing, so that a transaction cut off there is incomplete,
    /// not truncated. Default `false`.
    fn ended_in_active_file(&self) -> bool {
        false
    }
}
