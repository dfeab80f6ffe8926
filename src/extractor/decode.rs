//! Decoding one raw event into a [`super::BinlogEvent`].
//!
//! [`Decoder`] is stateful: it keeps the current FORMAT_DESCRIPTION (binlog
//! version, post-header lengths, checksum algorithm) and the TABLE_MAP cache
//! of the current binlog file. Each [`RawEvent`] is checked (header sanity,
//! `event_size` equal to the bytes given, CRC-32 trailer when the file's
//! FORMAT_DESCRIPTION announces `binlog_checksum=CRC32`), then decoded by type:
//!
//! | type | code | result |
//! | --- | --- | --- |
//! | QUERY | 2 | [`EventBody::Begin`] / [`EventBody::Commit`] / [`EventBody::Rollback`] for exactly `BEGIN` / `COMMIT` / `ROLLBACK`, else [`EventBody::Query`] with every status variable applied to the [`SessionContext`] |
//! | STOP | 3 | [`EventBody::Stop`] |
//! | ROTATE | 4 | [`EventBody::Rotate`] (artificial when `log_pos` is 0 or flag `0x20` is set) |
//! | INTVAR, RAND, USER_VAR | 5, 13, 14 | [`EventBody::Intvar`], [`EventBody::Rand`], [`EventBody::UserVar`] |
//! | FORMAT_DESCRIPTION | 15 | [`EventBody::FormatDescription`]; replaces the format and clears the table-map cache |
//! | XID | 16 | [`EventBody::Xid`] |
//! | TABLE_MAP | 19 | [`EventBody::TableMap`] (cached by table id) |
//! | *_ROWS v1, v2, PARTIAL_UPDATE_ROWS | 23-25, 30-32, 39 | [`EventBody::Rows`] |
//! | HEARTBEAT (v1, v2) | 27, 41 | [`EventBody::Heartbeat`] |
//! | IGNORABLE, PREVIOUS_GTIDS, TRANSACTION_CONTEXT, VIEW_CHANGE | 28, 35-37 | [`EventBody::Ignored`] |
//! | ROWS_QUERY | 29 | [`EventBody::AnnotateRows`] |
//! | GTID, ANONYMOUS_GTID (MySQL) | 33, 34 | [`EventBody::MysqlGtid`] |
//! | TRANSACTION_PAYLOAD (MySQL 8.0.20+) | 40 | its inner events, through [`Decoder::decode_expanded`] |
//! | XA_PREPARE (MariaDB 10.5+) | 38 | [`EventBody::XaPrepare`] (see [`crate::xa`]) |
//! | MariaDB events | 160-171 | see [`super::mariadb`] |
//!
//! Event types that are known but cannot be replicated by shardrep (LOAD DATA
//! in statement format, INCIDENT, MySQL tagged GTIDs, pre-v4
//! events) give [`ExtractError::Decode`] saying so; any other type code gives
//! [`ExtractError::UnknownEvent`]. Nothing is ever skipped silently, and no
//! input makes the decoder panic.
//!
//! Formats: MySQL "Binary Log" internals documentation and libbinlogevents
//! (`statement_events.cpp`, `control_events.cpp`), MariaDB's "Binary Log
//! Formats" knowledge-base pages and its server source (`log_event.cc`).

use std::io::Read;
use std::sync::Arc;

use crate::event::{SessionContext, Statement, TableInfo, UserVar, UserVarValue};
use crate::position::BinlogPosition;

use super::binlog::{event_type, event_type_name, Reader};
use super::compression::length_mismatch;
use super::decimal::decode_decimal;
use super::{
    mariadb, BinlogEvent, ChecksumAlg, EventBody, EventHeader, ExtractError, FormatDescription,
    RawEvent, TableIdMap, EVENT_HEADER_LEN, LOG_EVENT_ARTIFICIAL_F,
};

/// The event name used in [`ExtractError::Decode`]: the type name, or
/// `type N`.
pub(crate) fn event_label(type_code: u8) -> String {
    match event_type_name(type_code) {
        Some(name) => name.to_owned(),
        None => format!("type {type_code}"),
    }
}

/// Length of the CRC-32 trailer, bytes.
const CHECKSUM_LEN: usize = 4;
/// FORMAT_DESCRIPTION checksum algorithm byte values
/// (`enum_binlog_checksum_alg`).
const CHECKSUM_ALG_OFF: u8 = 0;
const CHECKSUM_ALG_CRC32: u8 = 1;
const CHECKSUM_ALG_UNDEF: u8 = 255;
/// Length of the server version field of FORMAT_DESCRIPTION.
const SERVER_VERSION_LEN: usize = 50;

/// Post-header lengths written by MariaDB 10.11 (types 1..=171), used until
/// the first FORMAT_DESCRIPTION arrives and for types a (MySQL)
/// FORMAT_DESCRIPTION does not list.
const DEFAULT_POST_HEADER_LENGTHS: [u8; 171] = {
    let mut t = [0u8; 171];
    let known: [(u8, u8); 36] = [
        (1, 56),
        (2, 13),
        (4, 8),
        (6, 18),
        (8, 4),
        (9, 4),
        (10, 4),
        (11, 4),
        (12, 18),
        (15, 228),
        (17, 4),
        (18, 26),
        (19, 8),
        (23, 8),
        (24, 8),
        (25, 8),
        (26, 2),
        (30, 10),
        (31, 10),
        (32, 10),
        (33, 42),
        (34, 42),
        (36, 18),
        (37, 52),
        (39, 10),
        (40, 0),
        (161, 4),
        (162, 19),
        (163, 4),
        (165, 13),
        (166, 8),
        (167, 8),
        (168, 8),
        (169, 10),
        (170, 10),
        (171, 10),
    ];
    let mut i = 0;
    while i < known.len() {
        t[known[i].0 as usize - 1] = known[i].1;
        i += 1;
    }
    t
};

/// Upper bound of a decompressed TRANSACTION_PAYLOAD when the event does not
/// state its uncompressed size (MySQL's own limit is `max_allowed_packet`,
/// at most 1 GiB).
const MAX_PAYLOAD_UNCOMPRESSED: u64 = 1 << 30;

/// Decodes raw events of one binlog stream; see the module documentation.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// The current format (the default v4 one until the first
    /// FORMAT_DESCRIPTION).
    format: FormatDescription,
    /// Whether a FORMAT_DESCRIPTION has set the checksum algorithm; until
    /// then an event has a CRC-32 trailer exactly when its last 4 bytes are
    /// the CRC-32 of the rest.
    checksum_known: bool,
    /// TABLE_MAP cache of the current file, by table id.
    tables: TableIdMap<CachedTable>,
    /// Verify CRC-32 trailers (default on).
    verify_checksums: bool,
}

/// A cached table map: the decoded table and the TABLE_MAP body (checksum
/// excluded) it was decoded from.
///
/// A master logs a TABLE_MAP before every rows event (every statement), and
/// the same table keeps its table id, and so the same TABLE_MAP bytes, for as
/// long as it stays in the master's table cache. Parsing is a pure function
/// of the body, the post-header length and the server flavor (the last two
/// change only with a FORMAT_DESCRIPTION, which empties the cache), so a
/// TABLE_MAP whose body equals the cached one is answered from the cache
/// without parsing it again: the hot path of a sysbench binlog.
#[derive(Debug, Clone)]
struct CachedTable {
    info: Arc<TableInfo>,
    body: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

/// Where the bytes of an event come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// A binlog file or the replication stream: the file's checksum
    /// algorithm applies.
    Stream,
    /// An event inside a TRANSACTION_PAYLOAD: never checksummed (MySQL
    /// WL#3549).
    Payload,
}

impl Decoder {
    /// A decoder with the default binlog v4 format, no table maps and
    /// checksum verification on. The checksum algorithm is unknown until
    /// the stream's FORMAT_DESCRIPTION arrives.
    pub fn new() -> Decoder {
        Decoder {
            format: FormatDescription {
                binlog_version: 4,
                server_version: String::new(),
                post_header_lengths: DEFAULT_POST_HEADER_LENGTHS.to_vec(),
                checksum: ChecksumAlg::None,
            },
            checksum_known: false,
            tables: TableIdMap::default(),
            verify_checksums: true,
        }
    }

    /// Turns CRC-32 verification on or off (default on). When off, the
    /// trailer is still stripped.
    pub fn set_verify_checksums(&mut self, on: bool) {
        self.verify_checksums = on;
    }

    /// The table map of `table_id` in the current file, if one was seen.
    pub fn table(&self, table_id: u64) -> Option<&TableInfo> {
        self.tables.get(&table_id).map(|c| &*c.info)
    }

    /// The current format description.
    pub fn format(&self) -> &FormatDescription {
        &self.format
    }

    /// Decodes one event.
    ///
    /// # Errors
    /// [`ExtractError::Decode`] for a malformed event (with its position and
    /// type, and what was expected), [`ExtractError::Checksum`] for a CRC-32
    /// mismatch, [`ExtractError::UnknownEvent`] for a type code no server
    /// defines, [`ExtractError::Encrypted`] for MariaDB START_ENCRYPTION. A
    /// MySQL TRANSACTION_PAYLOAD is an error here: it holds several events,
    /// use [`Decoder::decode_expanded`].
    pub fn decode(&mut self, raw: &RawEvent) -> Result<BinlogEvent, ExtractError> {
        let header = self.check_header(&raw.bytes, &raw.position)?;
        if header.type_code == event_type::TRANSACTION_PAYLOAD {
            // Checksum first, so that a corrupt event says so.
            self.strip_checksum(&raw.bytes, &header, &raw.position, Framing::Stream)?;
            return Err(decode_error(
                &raw.position,
                header.type_code,
                "a TRANSACTION_PAYLOAD holds several events: decode it with \
                 Decoder::decode_expanded",
            ));
        }
        self.decode_one(&raw.bytes, header, &raw.position, Framing::Stream)
    }

    /// As [`Decoder::decode`], consuming the raw event: its position moves
    /// into the decoded event instead of being copied (the reader's hot
    /// path).
    ///
    /// # Errors
    /// As [`Decoder::decode`].
    pub fn decode_owned(&mut self, raw: RawEvent) -> Result<BinlogEvent, ExtractError> {
        let header = self.check_header(&raw.bytes, &raw.position)?;
        if header.type_code == event_type::TRANSACTION_PAYLOAD {
            return self.decode(&raw);
        }
        let body = self.decode_body(&raw.bytes, header, &raw.position, Framing::Stream)?;
        Ok(BinlogEvent {
            header,
            position: raw.position,
            body,
        })
    }

    /// Decodes one event into the events it stands for: the inner events of
    /// a MySQL TRANSACTION_PAYLOAD (decompressed, in order, each with the
    /// payload event's position), or the event itself for every other type.
    ///
    /// # Errors
    /// As [`Decoder::decode`]; an inner event's error names the payload's
    /// position.
    pub fn decode_expanded(&mut self, raw: &RawEvent) -> Result<Vec<BinlogEvent>, ExtractError> {
        let header = self.check_header(&raw.bytes, &raw.position)?;
        if header.type_code != event_type::TRANSACTION_PAYLOAD {
            return Ok(vec![self.decode_one(
                &raw.bytes,
                header,
                &raw.position,
                Framing::Stream,
            )?]);
        }
        let body = self.strip_checksum(&raw.bytes, &header, &raw.position, Framing::Stream)?;
        let inner = decompress_payload(body)
            .map_err(|m| decode_error(&raw.position, header.type_code, m))?;
        let mut events = Vec::new();
        let mut at = 0usize;
        while at < inner.len() {
            let index = events.len();
            let rest = &inner[at..];
            let inner_header = EventHeader::parse(rest).ok_or_else(|| {
                decode_error(
                    &raw.position,
                    header.type_code,
                    format!(
                        "inner event #{index} at payload offset {at}: {} bytes left, \
                         expected a 19-byte event header",
                        rest.len()
                    ),
                )
            })?;
            let size = inner_header.event_size as usize;
            if size < EVENT_HEADER_LEN || size > rest.len() {
                return Err(decode_error(
                    &raw.position,
                    header.type_code,
                    format!(
                        "inner event #{index} at payload offset {at}: event_size {size} \
                         but {} bytes left in the payload",
                        rest.len()
                    ),
                ));
            }
            if matches!(
                inner_header.type_code,
                event_type::TRANSACTION_PAYLOAD | event_type::FORMAT_DESCRIPTION
            ) {
                return Err(decode_error(
                    &raw.position,
                    header.type_code,
                    format!(
                        "inner event #{index} is a {}, which a payload cannot hold",
                        event_label(inner_header.type_code)
                    ),
                ));
            }
            let event = self
                .decode_one(&rest[..size], inner_header, &raw.position, Framing::Payload)
                .map_err(|e| match e {
                    ExtractError::Decode {
                        position,
                        event,
                        message,
                    } => ExtractError::Decode {
                        position,
                        event: format!("TRANSACTION_PAYLOAD inner {event}"),
                        message: format!("inner event #{index}: {message}"),
                    },
                    other => other,
                })?;
            events.push(event);
            at += size;
        }
        Ok(events)
    }

    /// Parses and checks the common header against the bytes.
    fn check_header(
        &self,
        bytes: &[u8],
        position: &BinlogPosition,
    ) -> Result<EventHeader, ExtractError> {
        let header = EventHeader::parse(bytes).ok_or_else(|| ExtractError::Decode {
            position: position.clone(),
            event: "event".to_owned(),
            message: format!(
                "{} bytes, expected at least the {EVENT_HEADER_LEN}-byte event header",
                bytes.len()
            ),
        })?;
        if header.event_size as usize != bytes.len() {
            return Err(decode_error(
                position,
                header.type_code,
                format!(
                    "header says event_size {} but the event has {} bytes",
                    header.event_size,
                    bytes.len()
                ),
            ));
        }
        Ok(header)
    }

    /// Verifies (when asked) and strips the CRC-32 trailer; returns the body
    /// (the bytes after the common header).
    fn strip_checksum<'b>(
        &self,
        bytes: &'b [u8],
        header: &EventHeader,
        position: &BinlogPosition,
        framing: Framing,
    ) -> Result<&'b [u8], ExtractError> {
        if framing == Framing::Payload {
            return Ok(&bytes[EVENT_HEADER_LEN..]);
        }
        // Events the server makes up for a replica (the fake ROTATE, the
        // heartbeats) carry a trailer only when the replica negotiated one,
        // whatever the file's algorithm: recognise the trailer by its value.
        let self_described = header.type_code == event_type::HEARTBEAT
            || header.type_code == event_type::HEARTBEAT_V2
            || (header.type_code == event_type::ROTATE && is_artificial(header));
        let has_crc = if self_described || !self.checksum_known {
            crc_trailer_matches(bytes)
        } else {
            self.format.checksum == ChecksumAlg::Crc32
        };
        if !has_crc {
            return Ok(&bytes[EVENT_HEADER_LEN..]);
        }
        if bytes.len() < EVENT_HEADER_LEN + CHECKSUM_LEN {
            return Err(decode_error(
                position,
                header.type_code,
                format!(
                    "{} bytes, expected the {EVENT_HEADER_LEN}-byte header and a \
                     {CHECKSUM_LEN}-byte CRC32 trailer",
                    bytes.len()
                ),
            ));
        }
        let split = bytes.len() - CHECKSUM_LEN;
        if self.verify_checksums {
            verify_crc(bytes, position)?;
        }
        Ok(&bytes[EVENT_HEADER_LEN..split])
    }

    /// Decodes one event whose header was checked.
    fn decode_one(
        &mut self,
        bytes: &[u8],
        header: EventHeader,
        position: &BinlogPosition,
        framing: Framing,
    ) -> Result<BinlogEvent, ExtractError> {
        let body = self.decode_body(bytes, header, position, framing)?;
        Ok(event(header, position, body))
    }

    /// The body of one event (see [`Decoder::decode_one`]).
    fn decode_body(
        &mut self,
        bytes: &[u8],
        header: EventHeader,
        position: &BinlogPosition,
        framing: Framing,
    ) -> Result<EventBody, ExtractError> {
        let type_code = header.type_code;
        let err = |message: String| decode_error(position, type_code, message);
        if type_code == event_type::FORMAT_DESCRIPTION {
            let format = parse_format_description(bytes).map_err(err)?;
            // A FORMAT_DESCRIPTION always ends with a real CRC-32, even in
            // a binlog written with binlog_checksum=NONE (seen on MariaDB
            // 10.11 and MySQL 5.6+): verifying it whatever the algorithm
            // byte says keeps one flipped bit in that byte from turning
            // every later check off.
            if self.verify_checksums {
                verify_crc(bytes, position)?;
            }
            self.format = format.clone();
            self.checksum_known = true;
            self.tables.clear();
            return Ok(EventBody::FormatDescription(format));
        }
        let body = self.strip_checksum(bytes, &header, position, framing)?;
        let phl = self.post_header_len(type_code);
        use event_type::*;
        let decoded = match type_code {
            QUERY => parse_query(body, phl, header.timestamp).map_err(err)?,
            STOP => EventBody::Stop,
            ROTATE => parse_rotate(body, phl, &header).map_err(err)?,
            INTVAR => parse_intvar(body).map_err(err)?,
            RAND => {
                let mut r = Reader::new(body);
                let seed1 = r.u64("seed1").map_err(err)?;
                let seed2 = r.u64("seed2").map_err(err)?;
                r.finish().map_err(err)?;
                EventBody::Rand { seed1, seed2 }
            }
            USER_VAR => EventBody::UserVar(parse_user_var(body).map_err(err)?),
            XID => {
                let mut r = Reader::new(body);
                let xid = r.u64("xid").map_err(err)?;
                r.finish().map_err(err)?;
                EventBody::Xid(xid)
            }
            TABLE_MAP => EventBody::TableMap(self.table_map(body, phl).map_err(err)?),
            WRITE_ROWS_V1 | UPDATE_ROWS_V1 | DELETE_ROWS_V1 | WRITE_ROWS_V2 | UPDATE_ROWS_V2
            | DELETE_ROWS_V2 | PARTIAL_UPDATE_ROWS => {
                self.decode_rows(body, type_code, phl).map_err(err)?
            }
            HEARTBEAT | HEARTBEAT_V2 => EventBody::Heartbeat,
            IGNORABLE | PREVIOUS_GTIDS | TRANSACTION_CONTEXT | VIEW_CHANGE => EventBody::Ignored,
            ROWS_QUERY => match body.split_first() {
                // One length byte (the text truncated to 255), then the
                // whole text up to the end of the event.
                Some((_, text)) => EventBody::AnnotateRows(text.to_vec()),
                None => return Err(err("empty body, expected a length byte".to_owned())),
            },
            GTID | ANONYMOUS_GTID => parse_mysql_gtid(body).map_err(err)?,
            TRANSACTION_PAYLOAD => {
                return Err(err(
                    "a TRANSACTION_PAYLOAD cannot be nested or decoded as one event".to_owned(),
                ))
            }
            MARIADB_ANNOTATE_ROWS => EventBody::AnnotateRows(mariadb::parse_annotate_rows(body)),
            MARIADB_BINLOG_CHECKPOINT => {
                mariadb::parse_binlog_checkpoint(body, phl).map_err(err)?
            }
            MARIADB_GTID => mariadb::parse_gtid(body, phl, header.server_id)
                .map_err(err)?
                .into_body(),
            MARIADB_GTID_LIST => {
                EventBody::GtidList(mariadb::parse_gtid_list(body, phl).map_err(err)?)
            }
            MARIADB_START_ENCRYPTION => {
                return Err(ExtractError::Encrypted {
                    position: position.clone(),
                })
            }
            MARIADB_QUERY_COMPRESSED => {
                let plain = mariadb::uncompress_query(body, phl).map_err(err)?;
                parse_query(&plain, phl, header.timestamp).map_err(err)?
            }
            MARIADB_WRITE_ROWS_COMPRESSED_V1
            | MARIADB_UPDATE_ROWS_COMPRESSED_V1
            | MARIADB_DELETE_ROWS_COMPRESSED_V1
            | MARIADB_WRITE_ROWS_COMPRESSED_V2
            | MARIADB_UPDATE_ROWS_COMPRESSED_V2
            | MARIADB_DELETE_ROWS_COMPRESSED_V2 => {
                let (plain_type, plain) =
                    mariadb::uncompress_rows(body, type_code, phl).map_err(err)?;
                self.decode_rows(&plain, plain_type, phl).map_err(err)?
            }
            INCIDENT => return Err(err(parse_incident(body, phl))),
            XA_PREPARE => mariadb::parse_xa_prepare(body).map_err(err)?,
            GTID_TAGGED => {
                return Err(err(
                    "MySQL tagged GTIDs (GTID_TAGGED_LOG_EVENT) are not supported".to_owned(),
                ))
            }
            BEGIN_LOAD_QUERY | EXECUTE_LOAD_QUERY | LOAD | NEW_LOAD | CREATE_FILE
            | APPEND_BLOCK | EXEC_LOAD | DELETE_FILE => {
                return Err(err(
                    "LOAD DATA in statement format is not supported: use binlog_format=ROW"
                        .to_owned(),
                ))
            }
            START_V3 | SLAVE | PRE_GA_WRITE_ROWS | PRE_GA_UPDATE_ROWS | PRE_GA_DELETE_ROWS => {
                return Err(err(
                    "event of a pre-5.1 binlog (format before v4) is not supported".to_owned(),
                ))
            }
            _ => {
                return Err(ExtractError::UnknownEvent {
                    position: position.clone(),
                    type_code,
                })
            }
        };
        Ok(decoded)
    }

    /// Post-header length of `type_code` in the current format.
    fn post_header_len(&self, type_code: u8) -> usize {
        let index = usize::from(type_code).wrapping_sub(1);
        self.format
            .post_header_lengths
            .get(index)
            .or_else(|| DEFAULT_POST_HEADER_LENGTHS.get(index))
            .copied()
            .map_or(0, usize::from)
    }

    /// Decodes a plain rows event body against the table-map cache.
    /// Decodes a TABLE_MAP body (or takes it from the cache when the same
    /// table id was mapped with the same bytes) and caches it.
    fn table_map(&mut self, body: &[u8], phl: usize) -> Result<Arc<TableInfo>, String> {
        if let Ok(id) = rows_table_id(body, phl) {
            if let Some(cached) = self.tables.get(&id) {
                if cached.body == body {
                    return Ok(cached.info.clone());
                }
            }
        }
        let table = Arc::new(rows_api::parse_table_map(
            body,
            phl,
            &self.format.server_version,
        )?);
        match self.tables.entry(table.table_id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let cached = e.get_mut();
                cached.info = table.clone();
                cached.body.clear();
                cached.body.extend_from_slice(body);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(CachedTable {
                    info: table.clone(),
                    body: body.to_vec(),
                });
            }
        }
        Ok(table)
    }

    fn decode_rows(&self, body: &[u8], type_code: u8, phl: usize) -> Result<EventBody, String> {
        let table_id = rows_table_id(body, phl)?;
        if !self.tables.contains_key(&table_id) {
            return Err(format!(
                "unknown table id {table_id}: no TABLE_MAP for it since the file's \
                 FORMAT_DESCRIPTION"
            ));
        }
        let decoded = rows_api::decode_rows(body, type_code, phl, |id| {
            self.tables.get(&id).map(|c| &*c.info)
        })?;
        Ok(EventBody::Rows {
            table_id: decoded.table_id,
            kind: decoded.kind,
            flags: decoded.flags,
            rows: decoded.rows,
        })
    }
}

/// The row-decoding entry points of [`super::rows`], with the post-header
/// length as the decoder keeps it.
mod rows_api {
    use crate::event::TableInfo;

    pub(super) use super::super::rows::DecodedRows;

    fn phl_u8(phl: usize) -> u8 {
        u8::try_from(phl).unwrap_or(u8::MAX)
    }

    /// TABLE_MAP with the optional-metadata rules of the server that wrote
    /// the binlog (told by the FORMAT_DESCRIPTION's server version; MariaDB
    /// before any FORMAT_DESCRIPTION).
    pub(super) fn parse_table_map(
        body: &[u8],
        phl: usize,
        server_version: &str,
    ) -> Result<TableInfo, String> {
        use super::super::rows::{parse_table_map_with, Flavor};
        let flavor = if server_version.is_empty() {
            Flavor::MariaDb
        } else {
            Flavor::from_server_version(server_version)
        };
        parse_table_map_with(body, phl_u8(phl), flavor)
    }

    pub(super) fn decode_rows<'t>(
        body: &[u8],
        type_code: u8,
        phl: usize,
        tables: impl Fn(u64) -> Option<&'t TableInfo>,
    ) -> Result<DecodedRows, String> {
        super::super::rows::decode_rows(body, type_code, phl_u8(phl), tables)
    }
}

fn event(header: EventHeader, position: &BinlogPosition, body: EventBody) -> BinlogEvent {
    BinlogEvent {
        header,
        position: position.clone(),
        body,
    }
}

fn decode_error(
    position: &BinlogPosition,
    type_code: u8,
    message: impl Into<String>,
) -> ExtractError {
    ExtractError::Decode {
        position: position.clone(),
        event: event_label(type_code),
        message: message.into(),
    }
}

/// Whether an event was made up by the server (fake ROTATE of a dump).
fn is_artificial(header: &EventHeader) -> bool {
    header.log_pos == 0 || header.flags & LOG_EVENT_ARTIFICIAL_F != 0
}

/// The stored and computed CRC-32 of a whole event (header, body, trailer).
///
/// MariaDB sets `LOG_EVENT_BINLOG_IN_USE_F` (0x1) in the FORMAT_DESCRIPTION
/// of the binlog file it is still writing, but computed that event's CRC
/// with the flag clear (it clears the flag again when it closes the file):
/// the CRC of a FORMAT_DESCRIPTION is computed with the flag masked.
fn crc_pair(bytes: &[u8]) -> Option<(u32, u32)> {
    let split = bytes.len().checked_sub(CHECKSUM_LEN)?;
    let stored = u32::from_le_bytes(bytes[split..].try_into().ok()?);
    if split >= EVENT_HEADER_LEN
        && bytes[4] == event_type::FORMAT_DESCRIPTION
        && bytes[17] & LOG_EVENT_BINLOG_IN_USE_F != 0
    {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&bytes[..17]);
        hasher.update(&[bytes[17] & !LOG_EVENT_BINLOG_IN_USE_F]);
        hasher.update(&bytes[18..split]);
        return Some((stored, hasher.finalize()));
    }
    Some((stored, crc32fast::hash(&bytes[..split])))
}

/// Header flag `LOG_EVENT_BINLOG_IN_USE_F`: set in the FORMAT_DESCRIPTION of
/// a binlog file that is open for writing (or was not closed cleanly).
const LOG_EVENT_BINLOG_IN_USE_F: u8 = 0x01;

fn crc_trailer_matches(bytes: &[u8]) -> bool {
    bytes.len() >= EVENT_HEADER_LEN + CHECKSUM_LEN
        && crc_pair(bytes).is_some_and(|(stored, computed)| stored == computed)
}

fn verify_crc(bytes: &[u8], position: &BinlogPosition) -> Result<(), ExtractError> {
    match crc_pair(bytes) {
        Some((expected, actual)) if expected != actual => Err(ExtractError::Checksum {
            position: position.clone(),
            expected,
            actual,
        }),
        _ => Ok(()),
    }
}

/// The `(major, minor, patch)` numbers at the start of a server version.
fn version_split(version: &str) -> (u32, u32, u32) {
    let mut parts = [0u32; 3];
    let mut rest = version;
    for part in &mut parts {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        *part = rest[..digits].parse().unwrap_or(0);
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(r) => rest = r,
            None => break,
        }
    }
    (parts[0], parts[1], parts[2])
}

/// Whether a server of this version writes the checksum algorithm byte (and
/// a 4-byte trailer) in FORMAT_DESCRIPTION: MySQL 5.6.1+, MariaDB 5.3+.
fn checksum_aware(server_version: &str) -> bool {
    let split = version_split(server_version);
    let mariadb = server_version.contains("MariaDB") || server_version.contains("-maria-");
    if mariadb {
        split >= (5, 3, 0)
    } else {
        split >= (5, 6, 1)
    }
}

/// FORMAT_DESCRIPTION from the whole event bytes.
fn parse_format_description(bytes: &[u8]) -> Result<FormatDescription, String> {
    let mut r = Reader::new(&bytes[EVENT_HEADER_LEN..]);
    let binlog_version = r.u16("binlog_version")?;
    if binlog_version != 4 {
        return Err(format!(
            "binlog format version {binlog_version} is not supported, expected 4"
        ));
    }
    let raw_version = r.bytes(SERVER_VERSION_LEN, "server_version")?;
    let version_len = raw_version
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(SERVER_VERSION_LEN);
    let server_version = String::from_utf8_lossy(&raw_version[..version_len]).into_owned();
    let _create_timestamp = r.u32("create_timestamp")?;
    let header_len = r.u8("common header length")?;
    if usize::from(header_len) != EVENT_HEADER_LEN {
        return Err(format!(
            "common header length {header_len}, expected {EVENT_HEADER_LEN}"
        ));
    }
    let rest = r.rest();
    if !checksum_aware(&server_version) {
        return Err(format!(
            "server version {server_version:?}: binlogs of servers older than MySQL 5.6.1 \
             or MariaDB 5.3 (no checksum algorithm in FORMAT_DESCRIPTION) are not supported"
        ));
    }
    let Some(split) = rest.len().checked_sub(1 + CHECKSUM_LEN) else {
        return Err(format!(
            "{} bytes after the common header length, expected the post-header \
             lengths, the checksum algorithm byte and 4 checksum bytes",
            rest.len()
        ));
    };
    let checksum = match rest[split] {
        CHECKSUM_ALG_OFF | CHECKSUM_ALG_UNDEF => ChecksumAlg::None,
        CHECKSUM_ALG_CRC32 => ChecksumAlg::Crc32,
        other => {
            return Err(format!(
                "checksum algorithm {other}, expected 0 (NONE), 1 (CRC32) or 255 (undefined)"
            ))
        }
    };
    let lengths = &rest[..split];
    Ok(FormatDescription {
        binlog_version,
        server_version,
        post_header_lengths: lengths.to_vec(),
        checksum,
    })
}

fn parse_rotate(body: &[u8], phl: usize, header: &EventHeader) -> Result<EventBody, String> {
    let mut r = Reader::new(body);
    let position = if phl >= 8 {
        let position = r.u64("position")?;
        r.bytes(phl - 8, "rest of the post-header")?;
        position
    } else {
        // Binlog v1/v3 has no position: the next file starts at 4.
        r.bytes(phl, "post-header")?;
        4
    };
    let name = r.rest();
    if name.is_empty() {
        return Err("empty next file name".to_owned());
    }
    let next_file = String::from_utf8(name.to_vec())
        .map_err(|_| format!("next file name {name:?} is not UTF-8"))?;
    Ok(EventBody::Rotate {
        next_file,
        position,
        artificial: is_artificial(header),
    })
}

fn parse_intvar(body: &[u8]) -> Result<EventBody, String> {
    let mut r = Reader::new(body);
    let kind = r.u8("type")?;
    let value = r.u64("value")?;
    r.finish()?;
    if kind != 1 && kind != 2 {
        return Err(format!(
            "INTVAR type {kind}, expected 1 (LAST_INSERT_ID) or 2 (INSERT_ID)"
        ));
    }
    Ok(EventBody::Intvar { kind, value })
}

fn parse_incident(body: &[u8], phl: usize) -> String {
    let mut r = Reader::new(body);
    let code = r.u16("incident").unwrap_or(0);
    let _ = r.bytes(phl.saturating_sub(2), "post-header");
    let message = r
        .u8("message length")
        .ok()
        .and_then(|len| r.bytes(usize::from(len), "message").ok())
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .unwrap_or_default();
    format!(
        "the master logged INCIDENT {code} ({message:?}): events may be missing from the \
         binlog; replication cannot continue safely"
    )
}

/// MySQL GTID / ANONYMOUS_GTID: flags u8, source uuid (16 bytes), gno i64,
/// then logical-clock fields that shardrep does not use.
fn parse_mysql_gtid(body: &[u8]) -> Result<EventBody, String> {
    let mut r = Reader::new(body);
    let _flags = r.u8("commit flag")?;
    let sid = r.bytes(16, "source uuid")?;
    let gno = r.u64("gno")?;
    let hex: String = sid.iter().map(|b| format!("{b:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    Ok(EventBody::MysqlGtid { uuid, gno })
}

/// Table id of a rows event: 6 bytes (4 when the post-header is 6 bytes,
/// MySQL 5.1.0-5.1.15).
fn rows_table_id(body: &[u8], phl: usize) -> Result<u64, String> {
    let mut r = Reader::new(body);
    if phl == 6 {
        Ok(u64::from(r.u32("table id")?))
    } else {
        r.u48("table id")
    }
}

// ---------------------------------------------------------------------------
// QUERY
// ---------------------------------------------------------------------------

/// Status variable codes of QUERY (MySQL `Query_event` and MariaDB
/// `Query_log_event`).
mod status_var {
    pub const Q_FLAGS2: u8 = 0;
    pub const Q_SQL_MODE: u8 = 1;
    pub const Q_CATALOG: u8 = 2;
    pub const Q_AUTO_INCREMENT: u8 = 3;
    pub const Q_CHARSET: u8 = 4;
    pub const Q_TIME_ZONE: u8 = 5;
    pub const Q_CATALOG_NZ: u8 = 6;
    pub const Q_LC_TIME_NAMES: u8 = 7;
    pub const Q_CHARSET_DATABASE: u8 = 8;
    pub const Q_TABLE_MAP_FOR_UPDATE: u8 = 9;
    pub const Q_MASTER_DATA_WRITTEN: u8 = 10;
    pub const Q_INVOKER: u8 = 11;
    pub const Q_UPDATED_DB_NAMES: u8 = 12;
    pub const Q_MICROSECONDS: u8 = 13;
    pub const Q_COMMIT_TS: u8 = 14;
    pub const Q_COMMIT_TS2: u8 = 15;
    pub const Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP: u8 = 16;
    pub const Q_DDL_LOGGED_WITH_XID: u8 = 17;
    pub const Q_DEFAULT_COLLATION_FOR_UTF8MB4: u8 = 18;
    pub const Q_SQL_REQUIRE_PRIMARY_KEY: u8 = 19;
    pub const Q_DEFAULT_TABLE_ENCRYPTION: u8 = 20;
    pub const Q_HRNOW: u8 = 128;
    pub const Q_XID: u8 = 129;
    pub const Q_GTID_FLAGS3: u8 = 130;
    pub const Q_CHARACTER_SET_COLLATIONS: u8 = 131;
    /// `MAX_DBS_IN_EVENT_MTS`: above it, Q_UPDATED_DB_NAMES lists no names.
    pub const MAX_UPDATED_DBS: u8 = 16;
    /// MariaDB `Gtid_log_event::FL_COMMIT_ALTER_E1 | FL_ROLLBACK_ALTER_E1`.
    pub const FLAGS3_ALTER_SEQ_NO: u8 = 4 | 8;
}

/// Post-header fields of QUERY that precede the status variables.
const QUERY_HEADER_MINIMAL_LEN: usize = 11;

/// QUERY body (no header, no trailer) into Begin/Commit/Rollback/Query.
pub(crate) fn parse_query(body: &[u8], phl: usize, timestamp: u32) -> Result<EventBody, String> {
    if phl < QUERY_HEADER_MINIMAL_LEN {
        return Err(format!(
            "post-header length {phl}, expected at least {QUERY_HEADER_MINIMAL_LEN}"
        ));
    }
    let mut r = Reader::new(body);
    let thread_id = r.u32("thread id")?;
    let _exec_time = r.u32("exec time")?;
    let db_len = usize::from(r.u8("schema length")?);
    let error_code = r.u16("error code")?;
    let status_len = if phl >= QUERY_HEADER_MINIMAL_LEN + 2 {
        let len = usize::from(r.u16("status variables length")?);
        r.bytes(
            phl - QUERY_HEADER_MINIMAL_LEN - 2,
            "rest of the post-header",
        )?;
        len
    } else {
        0
    };
    let status = r.bytes(status_len, "status variables")?;
    let db = r.bytes(db_len, "default schema")?;
    if r.u8("default schema terminator")? != 0 {
        return Err("default schema is not NUL-terminated".to_owned());
    }
    let sql = r.rest();
    match sql {
        b"BEGIN" => return Ok(EventBody::Begin),
        b"COMMIT" => return Ok(EventBody::Commit),
        b"ROLLBACK" => return Ok(EventBody::Rollback),
        _ => {}
    }
    let mut context = SessionContext {
        timestamp,
        ..SessionContext::default()
    };
    apply_status_vars(status, &mut context)?;
    let default_schema = if db.is_empty() {
        None
    } else {
        Some(
            String::from_utf8(db.to_vec())
                .map_err(|_| format!("default schema {db:?} is not UTF-8"))?,
        )
    };
    Ok(EventBody::Query(Statement {
        sql: sql.to_vec(),
        default_schema,
        context,
        error_code,
        thread_id: Some(thread_id),
    }))
}

/// Applies the status variable block of a QUERY to `context`. An unknown
/// code is an error: the block has no per-item lengths, so nothing after it
/// could be read.
fn apply_status_vars(block: &[u8], context: &mut SessionContext) -> Result<(), String> {
    use status_var::*;
    let mut r = Reader::new(block);
    while r.remaining() > 0 {
        let at = r.offset();
        let code = r.u8("status variable code")?;
        let fail = |e: String| format!("status variable {code} at status offset {at}: {e}");
        match code {
            Q_FLAGS2 => context.flags2 = Some(r.u32("flags2").map_err(fail)?),
            Q_SQL_MODE => context.sql_mode = Some(r.u64("sql_mode").map_err(fail)?),
            Q_CATALOG => {
                // Length, name, NUL (5.0.0-5.0.3 masters).
                let len = r.u8("catalog length").map_err(fail)?;
                r.bytes(usize::from(len) + 1, "catalog").map_err(fail)?;
            }
            Q_AUTO_INCREMENT => {
                let increment = r.u16("auto_increment_increment").map_err(fail)?;
                let offset = r.u16("auto_increment_offset").map_err(fail)?;
                context.auto_increment = Some((increment, offset));
            }
            Q_CHARSET => {
                context.charset_client = Some(r.u16("character_set_client").map_err(fail)?);
                context.collation_connection = Some(r.u16("collation_connection").map_err(fail)?);
                context.collation_server = Some(r.u16("collation_server").map_err(fail)?);
            }
            Q_TIME_ZONE => {
                let len = r.u8("time zone length").map_err(fail)?;
                let name = r.bytes(usize::from(len), "time zone").map_err(fail)?;
                let name = String::from_utf8(name.to_vec())
                    .map_err(|_| fail(format!("time zone {name:?} is not UTF-8")))?;
                context.time_zone = Some(name);
            }
            Q_CATALOG_NZ => {
                let len = r.u8("catalog length").map_err(fail)?;
                r.bytes(usize::from(len), "catalog").map_err(fail)?;
            }
            Q_LC_TIME_NAMES => context.lc_time_names = Some(r.u16("lc_time_names").map_err(fail)?),
            Q_CHARSET_DATABASE => {
                context.collation_database = Some(r.u16("collation_database").map_err(fail)?)
            }
            Q_TABLE_MAP_FOR_UPDATE => {
                r.u64("table_map_for_update").map_err(fail)?;
            }
            Q_MASTER_DATA_WRITTEN => {
                r.u32("master_data_written").map_err(fail)?;
            }
            Q_INVOKER => {
                let user = r.u8("invoker user length").map_err(fail)?;
                r.bytes(usize::from(user), "invoker user").map_err(fail)?;
                let host = r.u8("invoker host length").map_err(fail)?;
                r.bytes(usize::from(host), "invoker host").map_err(fail)?;
            }
            Q_UPDATED_DB_NAMES => {
                let count = r.u8("updated schema count").map_err(fail)?;
                if count <= MAX_UPDATED_DBS {
                    for _ in 0..count {
                        r.cstring("updated schema name").map_err(fail)?;
                    }
                }
            }
            Q_MICROSECONDS | Q_HRNOW => {
                context.timestamp_micros = Some(r.u24("microseconds").map_err(fail)?)
            }
            // Reserved for MySQL Cluster, never written with a value.
            Q_COMMIT_TS | Q_COMMIT_TS2 => {}
            Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP
            | Q_SQL_REQUIRE_PRIMARY_KEY
            | Q_DEFAULT_TABLE_ENCRYPTION => {
                r.u8("flag").map_err(fail)?;
            }
            Q_DDL_LOGGED_WITH_XID | Q_XID => {
                r.u64("xid").map_err(fail)?;
            }
            Q_DEFAULT_COLLATION_FOR_UTF8MB4 => {
                r.u16("default_collation_for_utf8mb4").map_err(fail)?;
            }
            Q_GTID_FLAGS3 => {
                let flags = r.u8("gtid flags3").map_err(fail)?;
                if flags & FLAGS3_ALTER_SEQ_NO != 0 {
                    r.u64("start alter seq_no").map_err(fail)?;
                }
            }
            Q_CHARACTER_SET_COLLATIONS => {
                let count = r.u8("character_set_collations count").map_err(fail)?;
                r.bytes(4 * usize::from(count), "character_set_collations")
                    .map_err(fail)?;
            }
            _ => {
                return Err(format!(
                    "unknown status variable code {code} at status offset {at}: its length \
                     is unknown, so the rest of the status block ({} bytes) cannot be read",
                    block.len() - at
                ))
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// USER_VAR
// ---------------------------------------------------------------------------

/// `Item_result` of USER_VAR.
const STRING_RESULT: u8 = 0;
const REAL_RESULT: u8 = 1;
const INT_RESULT: u8 = 2;
const DECIMAL_RESULT: u8 = 4;
/// USER_VAR flag: the integer is unsigned.
const USER_VAR_UNSIGNED_F: u8 = 1;

/// USER_VAR: name length u32, name, is_null u8; unless NULL: value type u8,
/// collation u32, value length u32, value, then (5.1.x+) flags u8.
fn parse_user_var(body: &[u8]) -> Result<UserVar, String> {
    let mut r = Reader::new(body);
    let name_len = r.u32("name length")? as usize;
    let name = r.bytes(name_len, "name")?;
    let name = String::from_utf8(name.to_vec())
        .map_err(|_| format!("variable name {name:?} is not UTF-8"))?;
    if r.u8("is_null")? != 0 {
        return Ok(UserVar { name, value: None });
    }
    let kind = r.u8("value type")?;
    let collation = r.u32("collation")?;
    let len = r.u32("value length")? as usize;
    let value = r.bytes(len, "value")?;
    let flags = if r.remaining() > 0 { r.u8("flags")? } else { 0 };
    let value = match kind {
        STRING_RESULT => UserVarValue::String {
            bytes: value.to_vec(),
            collation,
        },
        REAL_RESULT => {
            let bytes: [u8; 8] = value
                .try_into()
                .map_err(|_| format!("REAL value of {len} bytes, expected 8"))?;
            UserVarValue::Real(f64::from_le_bytes(bytes))
        }
        INT_RESULT => {
            let bytes: [u8; 8] = value
                .try_into()
                .map_err(|_| format!("INT value of {len} bytes, expected 8"))?;
            UserVarValue::Int {
                value: i64::from_le_bytes(bytes),
                unsigned: flags & USER_VAR_UNSIGNED_F != 0,
            }
        }
        DECIMAL_RESULT => {
            let (&precision, rest) = value
                .split_first()
                .ok_or("DECIMAL value without precision")?;
            let (&scale, digits) = rest.split_first().ok_or("DECIMAL value without scale")?;
            UserVarValue::Decimal(decode_decimal(precision, scale, digits)?)
        }
        other => {
            return Err(format!(
                "value type {other}, expected 0 (STRING), 1 (REAL), 2 (INT) or 4 (DECIMAL)"
            ))
        }
    };
    Ok(UserVar {
        name,
        value: Some(value),
    })
}

// ---------------------------------------------------------------------------
// TRANSACTION_PAYLOAD (MySQL 8.0.20+)
// ---------------------------------------------------------------------------

/// TRANSACTION_PAYLOAD header field types (`Transaction_payload_event`).
const PAYLOAD_END_MARK: u64 = 0;
const PAYLOAD_SIZE: u64 = 1;
const PAYLOAD_COMPRESSION_TYPE: u64 = 2;
const PAYLOAD_UNCOMPRESSED_SIZE: u64 = 3;
/// Compression types.
const PAYLOAD_ZSTD: u64 = 0;
const PAYLOAD_NONE: u64 = 255;

/// The decompressed inner event stream of a TRANSACTION_PAYLOAD body: a
/// header of (type, length, value) fields in length-encoded integers up to
/// the end mark, then the payload.
fn decompress_payload(body: &[u8]) -> Result<Vec<u8>, String> {
    use mysql_common::binlog::consts::TransactionPayloadCompressionType as Compression;
    use mysql_common::binlog::events::TransactionPayloadEvent;

    let mut r = Reader::new(body);
    let mut size = None;
    let mut compression = None;
    let mut uncompressed = None;
    loop {
        let field = r.lenenc("payload header field type")?;
        if field == PAYLOAD_END_MARK {
            break;
        }
        let len = usize::try_from(r.lenenc("payload header field length")?)
            .map_err(|_| "payload header field length too large".to_owned())?;
        let value = r.bytes(len, "payload header field value")?;
        let mut v = Reader::new(value);
        match field {
            PAYLOAD_SIZE => size = Some(v.lenenc("payload size")?),
            PAYLOAD_COMPRESSION_TYPE => compression = Some(v.lenenc("compression type")?),
            PAYLOAD_UNCOMPRESSED_SIZE => uncompressed = Some(v.lenenc("uncompressed size")?),
            _ => {} // a field of a later version: its length says how to skip it
        }
    }
    let size = size.ok_or("payload header without the payload size field")?;
    let compression = compression.ok_or("payload header without the compression type field")?;
    let payload = r.rest();
    if size != payload.len() as u64 {
        return Err(format!(
            "payload size field says {size} bytes but {} follow the header",
            payload.len()
        ));
    }
    let algorithm = match compression {
        PAYLOAD_ZSTD => Compression::ZSTD,
        PAYLOAD_NONE => Compression::NONE,
        other => {
            return Err(format!(
                "compression type {other}, expected 0 (ZSTD) or 255 (NONE)"
            ))
        }
    };
    let limit = uncompressed.unwrap_or(MAX_PAYLOAD_UNCOMPRESSED);
    let event = TransactionPayloadEvent::new(size, algorithm, uncompressed.unwrap_or(0), payload);
    let reader = event
        .decompressed()
        .map_err(|e| format!("cannot decompress the payload: {e}"))?;
    let mut out = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("cannot decompress the payload: {e}"))?;
    if let Some(expected) = uncompressed {
        if out.len() as u64 != expected {
            return Err(length_mismatch(
                "payload decompresses to",
                out.len(),
                "the event",
                expected,
            ));
        }
    } else if out.len() as u64 > limit {
        return Err(format!("payload decompresses to more than {limit} bytes"));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
