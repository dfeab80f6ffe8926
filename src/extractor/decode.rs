//! Decoding one raw event into a [`BinlogEvent`](super::BinlogEvent).
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

use crate::event::{SessionContext, Statement, TableInfo, UserVar, UserVarValue};
use crate::position::BinlogPosition;

use super::binlog::{event_type, event_type_name, Reader};
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
    info: TableInfo,
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
        self.tables.get(&table_id).map(|c| &c.info)
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
    fn table_map(&mut self, body: &[u8], phl: usize) -> Result<TableInfo, String> {
        if let Ok(id) = rows_table_id(body, phl) {
            if let Some(cached) = self.tables.get(&id) {
                if cached.body == body {
                    return Ok(cached.info.clone());
                }
            }
        }
        let table = rows_api::parse_table_map(body, phl, &self.format.server_version)?;
        match self.tables.entry(table.table_id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let cached = e.get_mut();
                cached.info.clone_from(&table);
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
            self.tables.get(&id).map(|c| &c.info)
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
            return Err(format!(
                "payload decompresses to {}{} bytes, the event says {expected}",
                if out.len() as u64 > expected {
                    "more than "
                } else {
                    ""
                },
                out.len().min(expected as usize),
            ));
        }
    } else if out.len() as u64 > limit {
        return Err(format!("payload decompresses to more than {limit} bytes"));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::{RowPair, Value};
    use crate::extractor::mariadb::{
        FL_ALLOW_PARALLEL, FL_COMPLETED_XA, FL_DDL, FL_GROUP_COMMIT_ID, FL_PREPARED_XA,
        FL_STANDALONE, FL_TRANSACTIONAL,
    };
    use crate::position::Gtid;

    // -- fixtures ------------------------------------------------------------

    use crate::extractor::fixtures::{fixture_event, fixture_events};

    fn file_name(n: u32) -> String {
        format!("mariadb-bin.{n:06}")
    }

    /// Decodes files 1..=`files` of a fixture with one decoder.
    fn walk_results(dir: &str, files: u32) -> Vec<(RawEvent, Result<BinlogEvent, ExtractError>)> {
        let mut decoder = Decoder::new();
        let mut out = Vec::new();
        for n in 1..=files {
            for raw in fixture_events(dir, &file_name(n)) {
                let result = decoder.decode(&raw);
                out.push((raw, result));
            }
        }
        out
    }

    /// As [`walk_results`], every event must decode; also checks that each
    /// event's `log_pos` is its end.
    fn walk(dir: &str, files: u32) -> Vec<BinlogEvent> {
        walk_results(dir, files)
            .into_iter()
            .map(|(raw, result)| {
                let event = result.unwrap_or_else(|e| panic!("{dir}: {e}"));
                assert_eq!(
                    u64::from(event.header.log_pos),
                    raw.position.offset() + raw.bytes.len() as u64,
                    "{dir} {}: log_pos",
                    raw.position
                );
                assert_eq!(event.position, raw.position);
                event
            })
            .collect()
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    fn value(v: &Value) -> String {
        match v {
            Value::Int(i) => i.to_string(),
            Value::Bytes(b) if b.len() > 20 => {
                let first = b[0];
                if b.iter().all(|&x| x == first) {
                    format!("'{}'x{}", char::from(first), b.len())
                } else {
                    format!("'{}'", text(b))
                }
            }
            Value::Bytes(b) => format!("'{}'", text(b)),
            Value::Null => "NULL".to_owned(),
            other => format!("{other:?}"),
        }
    }

    fn image(img: &Option<crate::event::RowImage>) -> String {
        match img {
            None => "-".to_owned(),
            Some(img) => {
                let values: Vec<String> = img.values.iter().map(value).collect();
                format!("({})", values.join(","))
            }
        }
    }

    fn rows_text(rows: &[RowPair]) -> String {
        rows.iter()
            .map(|r| format!("{}>{}", image(&r.before), image(&r.after)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// One line per event, without the values that change when the
    /// fixtures are regenerated (header timestamps, xids, table ids).
    fn summary(e: &BinlogEvent) -> String {
        let body = match &e.body {
            EventBody::FormatDescription(f) => format!(
                "FDE {} {:?} {} lengths",
                f.server_version,
                f.checksum,
                f.post_header_lengths.len()
            ),
            EventBody::Rotate {
                next_file,
                position,
                artificial,
            } => format!("ROTATE {next_file}:{position} artificial={artificial}"),
            EventBody::Begin => "BEGIN".to_owned(),
            EventBody::Commit => "COMMIT".to_owned(),
            EventBody::Rollback => "ROLLBACK".to_owned(),
            EventBody::Query(s) => format!(
                "QUERY db={} {}",
                s.default_schema.as_deref().unwrap_or("-"),
                text(&s.sql)
            ),
            EventBody::TableMap(t) => format!("TABLE_MAP {}.{}", t.schema, t.table),
            EventBody::Rows {
                kind, flags, rows, ..
            } => format!("ROWS {kind:?} flags={flags} {}", rows_text(rows)),
            EventBody::Xid(_) => "XID".to_owned(),
            EventBody::Intvar { kind, value } => format!("INTVAR {kind}={value}"),
            EventBody::Rand { seed1, seed2 } => format!("RAND {seed1},{seed2}"),
            EventBody::UserVar(v) => format!("USER_VAR {} {:?}", v.name, v.value),
            EventBody::Heartbeat => "HEARTBEAT".to_owned(),
            EventBody::Stop => "STOP".to_owned(),
            EventBody::MariadbGtid {
                gtid,
                commit_id,
                flags,
            } => format!(
                "GTID {gtid} flags={flags}{}",
                if commit_id.is_some() { " cid" } else { "" }
            ),
            EventBody::AnnotateRows(sql) => format!("ANNOTATE {}", text(sql)),
            EventBody::BinlogCheckpoint { file } => format!("CHECKPOINT {file}"),
            EventBody::GtidList(list) => format!(
                "GTID_LIST [{}]",
                list.iter()
                    .map(Gtid::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            EventBody::MysqlGtid { uuid, gno } => format!("MYSQL_GTID {uuid}:{gno}"),
            EventBody::XaPrepare { one_phase, xid } => {
                format!("XA_PREPARE {xid} one_phase={one_phase}")
            }
            EventBody::Ignored => format!("IGNORED type {}", e.header.type_code),
        };
        format!("{} {body}", e.position.offset())
    }

    fn summaries(events: &[BinlogEvent]) -> Vec<String> {
        events.iter().map(summary).collect()
    }

    fn strip_offset(line: &str) -> &str {
        line.split_once(' ').map_or(line, |(_, rest)| rest)
    }

    fn at(events: &[BinlogEvent], file: &str, offset: u64) -> BinlogEvent {
        events
            .iter()
            .find(|e| e.position.file() == file && e.position.offset() == offset)
            .unwrap_or_else(|| panic!("no event at {file}:{offset}"))
            .clone()
    }

    fn statement(e: &BinlogEvent) -> Statement {
        match &e.body {
            EventBody::Query(s) => s.clone(),
            other => panic!("{}: expected a QUERY, found {other:?}", e.position),
        }
    }

    const SERVER: &str = "10.11.19-MariaDB-0+deb12u1-log";
    /// `sql_mode` default of MariaDB 10.11 (STRICT_TRANS_TABLES,
    /// ERROR_FOR_DIVISION_BY_ZERO, NO_AUTO_CREATE_USER,
    /// NO_ENGINE_SUBSTITUTION).
    const DEFAULT_SQL_MODE: u64 = 0x5420_0000;

    // -- fixture tests -------------------------------------------------------

    /// The row workload with CRC32 checksums: the whole MariaDB event set
    /// (B17), standalone DDL GTIDs, a non-transactional COMMIT and a
    /// ROLLBACK, every event at its exact position.
    #[test]
    fn crc32_fixture_decodes_every_event_exactly() {
        let events = walk("crc32", 1);
        let expected = [
            format!("4 FDE {SERVER} Crc32 171 lengths"),
            "256 GTID_LIST []".to_owned(),
            "285 CHECKPOINT mariadb-bin.000001".to_owned(),
            "330 GTID 0-1-1 flags=41".to_owned(),
            "372 QUERY db=fx CREATE DATABASE fx".to_owned(),
            "455 GTID 0-1-2 flags=41".to_owned(),
            "497 QUERY db=- CREATE TABLE fx.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"
                .to_owned(),
            "636 GTID 0-1-3 flags=41".to_owned(),
            "678 QUERY db=- CREATE TABLE fx.m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM"
                .to_owned(),
            "817 GTID 0-1-4 flags=12".to_owned(),
            "859 ANNOTATE INSERT INTO fx.t VALUES (1, 'one'), (2, 'two')".to_owned(),
            "928 TABLE_MAP fx.t".to_owned(),
            "989 ROWS Insert flags=1 ->(1,'one') ->(2,'two')".to_owned(),
            "1040 XID".to_owned(),
            "1071 GTID 0-1-5 flags=12".to_owned(),
            "1113 ANNOTATE UPDATE fx.t SET v = 'uno' WHERE id = 1".to_owned(),
            "1174 TABLE_MAP fx.t".to_owned(),
            "1235 ROWS Update flags=1 (1,'one')>(1,'uno')".to_owned(),
            "1287 XID".to_owned(),
            "1318 GTID 0-1-6 flags=12".to_owned(),
            "1360 ANNOTATE DELETE FROM fx.t WHERE id = 2".to_owned(),
            "1412 TABLE_MAP fx.t".to_owned(),
            "1473 ROWS Delete flags=1 (2,'two')>-".to_owned(),
            "1515 XID".to_owned(),
            "1546 GTID 0-1-7 flags=8".to_owned(),
            "1588 ANNOTATE INSERT INTO fx.m VALUES (1, 'myisam')".to_owned(),
            "1648 TABLE_MAP fx.m".to_owned(),
            "1709 ROWS Insert flags=1 ->(1,'myisam')".to_owned(),
            "1754 COMMIT".to_owned(),
            "1823 GTID 0-1-8 flags=8".to_owned(),
            "1865 QUERY db=- INSERT INTO fx.t VALUES (3, 'gone')".to_owned(),
            "1963 QUERY db=- INSERT INTO fx.m VALUES (2, 'kept')".to_owned(),
            "2061 ROLLBACK".to_owned(),
            "2132 ROTATE mariadb-bin.000002:4 artificial=false".to_owned(),
        ];
        assert_eq!(summaries(&events), expected);
        // Standalone DDL: FL_STANDALONE | FL_ALLOW_PARALLEL | FL_DDL.
        assert_eq!(41, FL_STANDALONE | FL_ALLOW_PARALLEL | FL_DDL);
        assert_eq!(12, FL_TRANSACTIONAL | FL_ALLOW_PARALLEL);
        // The session context of a DDL.
        let ddl = statement(&at(&events, "mariadb-bin.000001", 497));
        assert_eq!(ddl.error_code, 0);
        assert_eq!(ddl.context.sql_mode, Some(DEFAULT_SQL_MODE));
        assert_eq!(ddl.context.flags2, Some(0x0100_0000));
        assert_eq!(ddl.context.charset_client, Some(33));
        assert_eq!(ddl.context.collation_connection, Some(33));
        assert_eq!(ddl.context.collation_server, Some(45));
        assert_eq!(ddl.context.timestamp, ddl_header_timestamp(&events, 497));
        assert!(!ddl.context.foreign_key_checks_off());
    }

    fn ddl_header_timestamp(events: &[BinlogEvent], offset: u64) -> u32 {
        at(events, "mariadb-bin.000001", offset).header.timestamp
    }

    /// The same workload with binlog_checksum=NONE decodes to the same
    /// events (4 bytes shorter each, the FORMAT_DESCRIPTION excepted).
    #[test]
    fn none_fixture_matches_the_crc32_one() {
        let crc = walk("crc32", 1);
        let none = walk("none", 1);
        let strip = |events: &[BinlogEvent]| -> Vec<String> {
            summaries(events)
                .iter()
                .map(|s| {
                    strip_offset(s)
                        .replace("Crc32", "CHECKSUM")
                        .replace("None", "CHECKSUM")
                })
                .collect()
        };
        assert_eq!(strip(&crc), strip(&none));
        assert_eq!(none.len(), crc.len());
        let EventBody::FormatDescription(f) = &none[0].body else {
            panic!("first event: {:?}", none[0].body)
        };
        assert_eq!(f.checksum, ChecksumAlg::None);
        // The FORMAT_DESCRIPTION keeps its algorithm byte and 4 trailer
        // bytes in both; every other event is 4 bytes shorter.
        for (i, (c, n)) in crc.iter().zip(&none).enumerate() {
            let shrink = if i == 0 { 0 } else { 4 };
            assert_eq!(
                n.header.event_size + shrink,
                c.header.event_size,
                "{}",
                c.position
            );
        }
    }

    /// B16: the checksum algorithm changes at each rotation (CRC32, NONE,
    /// NONE, CRC32) and the decoder follows each file's FORMAT_DESCRIPTION;
    /// GTID_LIST is 39 bytes without checksums and 43 with; a clean shutdown
    /// writes STOP; rows decode to the case's values.
    #[test]
    fn b16_checksum_switches_across_rotations() {
        let events = walk("b16", 5);
        let per_file: Vec<(String, ChecksumAlg)> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::FormatDescription(f) => Some((e.position.file().to_owned(), f.checksum)),
                _ => None,
            })
            .collect();
        assert_eq!(
            per_file,
            [
                (file_name(1), ChecksumAlg::Crc32),
                (file_name(2), ChecksumAlg::None),
                (file_name(3), ChecksumAlg::None),
                (file_name(4), ChecksumAlg::Crc32),
                (file_name(5), ChecksumAlg::Crc32),
            ]
        );
        let gtid_lists: Vec<(String, u32, String)> = events
            .iter()
            .filter(|e| matches!(e.body, EventBody::GtidList(_)))
            .map(|e| {
                let s = summary(e);
                (
                    e.position.file().to_owned(),
                    e.header.event_size,
                    strip_offset(&s).to_owned(),
                )
            })
            .collect();
        assert_eq!(
            gtid_lists,
            [
                (file_name(1), 29, "GTID_LIST []".to_owned()),
                (file_name(2), 39, "GTID_LIST [0-1-3]".to_owned()),
                (file_name(3), 39, "GTID_LIST [0-1-4]".to_owned()),
                (file_name(4), 43, "GTID_LIST [0-1-5]".to_owned()),
                (file_name(5), 43, "GTID_LIST [0-1-7]".to_owned()),
            ]
        );
        let data: Vec<String> = events
            .iter()
            .filter(|e| {
                matches!(
                    e.body,
                    EventBody::Rows { .. }
                        | EventBody::Rotate { .. }
                        | EventBody::Stop
                        | EventBody::MariadbGtid { .. }
                )
            })
            .map(|e| format!("{}:{}", e.position.file(), summary(e)))
            .collect();
        assert_eq!(
            data,
            [
                "mariadb-bin.000001:330 GTID 0-1-1 flags=41",
                "mariadb-bin.000001:463 GTID 0-1-2 flags=41",
                "mariadb-bin.000001:633 GTID 0-1-3 flags=12",
                "mariadb-bin.000001:801 ROWS Insert flags=1 ->(1,'crc32-file')",
                "mariadb-bin.000001:881 ROTATE mariadb-bin.000002:4 artificial=false",
                "mariadb-bin.000002:377 GTID 0-1-4 flags=12",
                "mariadb-bin.000002:539 ROWS Insert flags=1 ->(2,'no-checksum-file')",
                "mariadb-bin.000002:617 ROTATE mariadb-bin.000003:4 artificial=false",
                "mariadb-bin.000003:377 GTID 0-1-5 flags=12",
                "mariadb-bin.000003:534 ROWS Insert flags=1 ->(3,'after-flush')",
                "mariadb-bin.000003:607 ROTATE mariadb-bin.000004:4 artificial=false",
                "mariadb-bin.000004:389 GTID 0-1-6 flags=12",
                "mariadb-bin.000004:558 ROWS Insert flags=1 ->(4,'crc32-again')",
                "mariadb-bin.000004:639 GTID 0-1-7 flags=12",
                "mariadb-bin.000004:818 ROWS Update flags=1 \
                 (2,'no-checksum-file')>(2,'no-checksum-file!') \
                 (3,'after-flush')>(3,'after-flush!')",
                "mariadb-bin.000004:963 STOP",
                "mariadb-bin.000005:344 ROTATE mariadb-bin.000006:4 artificial=false",
            ]
        );
        // STOP is the last event of its file (23 bytes with CRC32).
        let stop = at(&events, "mariadb-bin.000004", 963);
        assert_eq!(stop.header.event_size, 23);
        assert_eq!(stop.header.log_pos, 986);
        // Each file's table map is gone after the next FORMAT_DESCRIPTION.
        let mut decoder = Decoder::new();
        let mut table_id = None;
        for raw in fixture_events("b16", &file_name(1)) {
            if let EventBody::TableMap(t) = decoder.decode(&raw).unwrap().body {
                table_id = Some(t.table_id);
            }
        }
        let table_id = table_id.unwrap();
        assert_eq!(decoder.table(table_id).unwrap().table, "k");
        decoder
            .decode(&fixture_events("b16", &file_name(2))[0])
            .unwrap();
        assert!(decoder.table(table_id).is_none());
        assert_eq!(decoder.format().checksum, ChecksumAlg::None);
    }

    /// B15: with log_bin_compress=ON the CREATE TABLE is a QUERY_COMPRESSED
    /// and the rows events are *_ROWS_COMPRESSED_V1 (166-168); they decode
    /// to exactly what the uncompressed run of the same statements gives.
    #[test]
    fn b15_compressed_events_equal_the_uncompressed_ones() {
        let events = walk("b15", 1);
        let file = "mariadb-bin.000001";
        let compressed_ddl = at(&events, file, 507);
        assert_eq!(
            compressed_ddl.header.type_code,
            event_type::MARIADB_QUERY_COMPRESSED
        );
        let plain_ddl = at(&events, file, 1940);
        assert_eq!(plain_ddl.header.type_code, event_type::QUERY);
        let (c, p) = (statement(&compressed_ddl), statement(&plain_ddl));
        assert_eq!(
            text(&c.sql),
            "CREATE TABLE cz (id INT PRIMARY KEY, b INT, pad VARCHAR(500))"
        );
        assert_eq!(c.sql, p.sql);
        assert_eq!(c.default_schema.as_deref(), Some("rt_comp"));
        assert_eq!(p.default_schema.as_deref(), Some("rt_plain"));
        assert_eq!(c.context.sql_mode, p.context.sql_mode);

        let pairs = [
            (
                859,
                event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1,
                2286,
                event_type::WRITE_ROWS_V1,
            ),
            (
                1136,
                event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V1,
                2952,
                event_type::UPDATE_ROWS_V1,
            ),
            (
                1402,
                event_type::MARIADB_DELETE_ROWS_COMPRESSED_V1,
                4004,
                event_type::DELETE_ROWS_V1,
            ),
            (
                1673,
                event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1,
                4268,
                event_type::WRITE_ROWS_V1,
            ),
        ];
        // The 400-byte pad compresses.
        assert!(
            at(&events, file, 859).header.event_size
                < at(&events, file, 2286).header.event_size / 4
        );
        let mut texts = Vec::new();
        for (c_off, c_type, p_off, p_type) in pairs {
            let c = at(&events, file, c_off);
            let p = at(&events, file, p_off);
            assert_eq!(c.header.type_code, c_type);
            assert_eq!(p.header.type_code, p_type);
            let (
                EventBody::Rows {
                    kind: ck,
                    flags: cf,
                    rows: cr,
                    ..
                },
                EventBody::Rows {
                    kind: pk,
                    flags: pf,
                    rows: pr,
                    ..
                },
            ) = (&c.body, &p.body)
            else {
                panic!("{c_off}/{p_off}: not rows events")
            };
            assert_eq!((ck, cf, cr), (pk, pf, pr), "{c_off} vs {p_off}");
            texts.push(summary(&c));
        }
        assert_eq!(
            texts,
            [
                "859 ROWS Insert flags=1 ->(1,100,'p'x400) ->(2,200,'short')",
                "1136 ROWS Update flags=1 (1,100,'p'x400)>(1,888888,'p'x400)",
                "1402 ROWS Delete flags=1 (2,200,'short')>-",
                "1673 ROWS Insert flags=1 ->(3,3,'q'x300)",
            ]
        );
        let schemas: Vec<String> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::TableMap(t) => {
                    Some(format!("{}:{}.{}", e.position.offset(), t.schema, t.table))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            schemas,
            [
                "787:rt_comp.cz",
                "1064:rt_comp.cz",
                "1330:rt_comp.cz",
                "1601:rt_comp.cz",
                "2213:rt_plain.cz",
                "2879:rt_plain.cz",
                "3931:rt_plain.cz",
                "4195:rt_plain.cz",
            ]
        );
    }

    /// A v2 compressed rows event (MariaDB types 169-171, which 10.11 does
    /// not write) made from the captured v1 one decodes to the same rows.
    #[test]
    fn v2_compressed_rows_decode_like_v1() {
        let mut decoder = Decoder::new();
        let mut v1_rows = None;
        let mut v2_event = None;
        for raw in fixture_events("b15", "mariadb-bin.000001") {
            if raw.position.offset() == 1136 {
                // UPDATE_ROWS_COMPRESSED_V1 -> UPDATE_ROWS_COMPRESSED (v2):
                // insert an empty extra-data block (length 2) after the
                // table id and flags, fix size and CRC.
                let mut bytes = raw.bytes[..19 + 8].to_vec();
                bytes.extend_from_slice(&[2, 0]);
                bytes.extend_from_slice(&raw.bytes[19 + 8..raw.bytes.len() - 4]);
                bytes[4] = event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V2;
                let size = (bytes.len() + 4) as u32;
                bytes[9..13].copy_from_slice(&size.to_le_bytes());
                let crc = crc32fast::hash(&bytes);
                bytes.extend_from_slice(&crc.to_le_bytes());
                v2_event = Some(RawEvent {
                    position: raw.position.clone(),
                    bytes,
                });
            }
            let decoded = decoder.decode(&raw).unwrap();
            if raw.position.offset() == 1136 {
                v1_rows = Some(decoded.body);
                break;
            }
        }
        let v2 = decoder.decode(&v2_event.unwrap()).unwrap();
        assert_eq!(
            v2.header.type_code,
            event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V2
        );
        assert_eq!(Some(v2.body), v1_rows);
    }

    /// B18: statement events carry their session context; the default
    /// schema is the `USE`d one, not the changed one; INTVAR, USER_VAR (every
    /// value type) and RAND events come before their statement.
    #[test]
    fn b18_statements_with_session_context() {
        let events = walk("b18", 1);
        let file = "mariadb-bin.000001";
        let from = |offset: u64| {
            events
                .iter()
                .skip_while(|e| e.position.offset() != offset)
                .map(summary)
                .take_while(|s| !s.ends_with(" XID"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            from(1198),
            [
                "1198 GTID 0-1-6 flags=12",
                "1240 INTVAR 2=1",
                "1272 QUERY db=shard_q1 INSERT INTO a (v, ts) VALUES (10, NOW())",
            ]
        );
        assert_eq!(
            from(1426),
            [
                "1426 GTID 0-1-7 flags=12",
                "1468 INTVAR 1=1",
                "1500 INTVAR 2=2",
                "1532 QUERY db=shard_q1 INSERT INTO a (v, ts) VALUES (LAST_INSERT_ID() + 100, NOW())",
            ]
        );
        assert_eq!(
            from(1706),
            [
                "1706 GTID 0-1-8 flags=12",
                "1748 QUERY db=shard_q1 UPDATE shard_q2.b SET v = v + 5 WHERE id = 1",
            ]
        );
        assert_eq!(
            from(1894),
            [
                "1894 GTID 0-1-9 flags=12",
                "1936 USER_VAR x Some(Int { value: 7, unsigned: false })",
                "1983 QUERY db=shard_q1 INSERT INTO shard_q2.b VALUES (2, @x)",
            ]
        );
        let first = statement(&at(&events, file, 1272));
        assert_eq!(first.context.timestamp, 1_700_000_000);
        assert_eq!(first.context.timestamp_micros, Some(0));
        assert_eq!(first.context.time_zone.as_deref(), Some("+02:00"));
        assert_eq!(first.context.sql_mode, Some(DEFAULT_SQL_MODE));
        let update = statement(&at(&events, file, 1748));
        assert_eq!(update.context.timestamp, 1_700_000_000);
        assert_eq!(update.default_schema.as_deref(), Some("shard_q1"));

        // USER_VAR of every type before one statement.
        let vars: Vec<UserVar> = events
            .iter()
            .filter(|e| (2401..2654).contains(&e.position.offset()))
            .map(|e| match &e.body {
                EventBody::UserVar(v) => v.clone(),
                other => panic!("{}: {other:?}", e.position),
            })
            .collect();
        let var = |name: &str, value: Option<UserVarValue>| UserVar {
            name: name.to_owned(),
            value,
        };
        assert_eq!(
            vars,
            [
                var(
                    "s",
                    Some(UserVarValue::String {
                        bytes: b"abc".to_vec(),
                        collation: 33
                    })
                ),
                var("r", Some(UserVarValue::Real(1.5))),
                var(
                    "i",
                    Some(UserVarValue::Int {
                        value: -5,
                        unsigned: false
                    })
                ),
                var(
                    "u",
                    Some(UserVarValue::Int {
                        value: -1,
                        unsigned: true
                    })
                ),
                var("d", Some(UserVarValue::Decimal("-12.345".to_owned()))),
                var("n", None),
            ]
        );
        let uv = statement(&at(&events, file, 2654));
        assert_eq!(
            text(&uv.sql),
            "INSERT INTO shard_q2.uv (s, r, i, u, d, n) VALUES (@s, @r, @i, @u, @d, @n)"
        );
        assert_eq!(uv.context.timestamp, 1_700_000_001);

        // sql_mode, lc_time_names, auto_increment_*.
        assert_eq!(summary(&at(&events, file, 2872)), "2872 INTVAR 2=7");
        let modes = statement(&at(&events, file, 2904));
        assert_eq!(text(&modes.sql), "INSERT INTO shard_q1.a (v) VALUES (7)");
        assert_eq!(modes.context.sql_mode, Some(0x4 | 0x8_0000)); // ANSI_QUOTES, NO_AUTO_VALUE_ON_ZERO
        assert_eq!(modes.context.lc_time_names, Some(4)); // de_DE
        assert_eq!(modes.context.auto_increment, Some((5, 2)));

        // SET NAMES latin1: the text is the client's bytes.
        let latin1 = statement(&at(&events, file, 3093));
        assert_eq!(
            latin1.sql,
            "INSERT INTO shard_q2.uv (s) VALUES ('café')".as_bytes()
        );
        assert_eq!(latin1.context.charset_client, Some(8));
        assert_eq!(latin1.context.collation_connection, Some(8));
        assert_eq!(latin1.context.collation_server, Some(45));

        // RAND seeds before the statement.
        assert!(matches!(
            at(&events, file, 3281).body,
            EventBody::Rand { .. }
        ));
        let rand = statement(&at(&events, file, 3320));
        assert_eq!(
            text(&rand.sql),
            "INSERT INTO shard_q2.uv (f) VALUES (RAND(1) + RAND())"
        );
        assert_eq!(rand.context.charset_client, Some(45));

        // foreign_key_checks = 0, unique_checks = 0.
        let checks = statement(&at(&events, file, 3517));
        assert_eq!(checks.context.flags2, Some(0x0D00_0000));
        assert!(checks.context.foreign_key_checks_off());
        assert!(checks.context.unique_checks_off());

        // A standalone DDL with its GTID.
        assert_eq!(
            summary(&at(&events, file, 3655)),
            "3655 GTID 0-1-16 flags=41"
        );
        let ddl = statement(&at(&events, file, 3697));
        assert_eq!(text(&ddl.sql), "ALTER TABLE shard_q2.b ADD COLUMN w INT");
        assert_eq!(ddl.default_schema.as_deref(), Some("shard_q1"));
    }

    /// Two transactions group-committed together carry the same commit id.
    #[test]
    fn group_commit_ids() {
        let events = walk("gcommit", 1);
        let gtids: Vec<(Gtid, Option<u64>, u8)> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::MariadbGtid {
                    gtid,
                    commit_id,
                    flags,
                } => Some((*gtid, *commit_id, *flags)),
                _ => None,
            })
            .collect();
        assert_eq!(gtids.len(), 4);
        assert_eq!((gtids[0].1, gtids[1].1), (None, None));
        let (a, b) = (gtids[2], gtids[3]);
        assert_eq!(
            (a.0.to_string(), b.0.to_string()),
            ("0-1-3".into(), "0-1-4".into())
        );
        assert!(a.1.is_some());
        assert_eq!(a.1, b.1);
        assert_eq!(
            a.2,
            FL_GROUP_COMMIT_ID | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL
        );
        assert_eq!(b.2, a.2);
        let rows: Vec<String> = events
            .iter()
            .filter(|e| matches!(e.body, EventBody::Rows { .. }))
            .map(summary)
            .collect();
        assert_eq!(
            rows,
            [
                "768 ROWS Insert flags=1 ->(1)",
                "984 ROWS Insert flags=1 ->(2)"
            ]
        );
    }

    /// An XA transaction: the GTID flags say prepared / completed; the
    /// XA_PREPARE event gives the xid; XA COMMIT is a statement.
    #[test]
    fn xa_transaction() {
        let results = walk_results("xa", 1);
        let get = |offset: u64| {
            results
                .iter()
                .find(|(raw, _)| raw.position.offset() == offset)
                .unwrap()
        };
        let gtid = |offset: u64| match &get(offset).1.as_ref().unwrap().body {
            EventBody::MariadbGtid { gtid, flags, .. } => (gtid.to_string(), *flags),
            other => panic!("{offset}: {other:?}"),
        };
        assert_eq!(
            gtid(621),
            (
                "0-1-3".to_owned(),
                FL_PREPARED_XA | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL
            )
        );
        assert_eq!(
            gtid(985),
            (
                "0-1-4".to_owned(),
                FL_COMPLETED_XA | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL | FL_STANDALONE
            )
        );
        match &get(933).1.as_ref().unwrap().body {
            EventBody::XaPrepare { one_phase, xid } => {
                assert!(!one_phase);
                assert_eq!(xid.format_id, 7);
                assert_eq!(xid.gtrid, b"fx-gtrid");
                assert_eq!(xid.bqual, b"fx-bqual");
            }
            other => panic!("933: {other:?}"),
        }
        let commit = statement(get(1043).1.as_ref().unwrap());
        assert_eq!(
            text(&commit.sql),
            "XA COMMIT X'66782d6774726964',X'66782d627175616c',7"
        );
        // Every other event decodes.
        let failed: Vec<u64> = results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(raw, _)| raw.position.offset())
            .collect();
        assert!(failed.is_empty(), "{failed:?}");
    }

    // -- errors ----------------------------------------------------------------

    /// A decoder that has read the FORMAT_DESCRIPTION of fixture `dir`.
    fn primed(dir: &str) -> Decoder {
        let mut decoder = Decoder::new();
        decoder
            .decode(&fixture_events(dir, "mariadb-bin.000001")[0])
            .unwrap();
        decoder
    }

    #[test]
    fn flipped_checksum_algorithm_or_version_byte_is_caught_at_the_format_description() {
        // One bit in the algorithm byte (CRC32 -> NONE) must not turn the
        // checks off: the FORMAT_DESCRIPTION's own CRC catches it.
        let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
        let alg = fde.bytes.len() - 5;
        fde.bytes[alg] ^= 0x01;
        let err = Decoder::new().decode(&fde).unwrap_err();
        assert!(matches!(err, ExtractError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("mariadb-bin.000001:4"), "{err}");
        // A version flipped to look pre-checksum ("00.11.19") is refused.
        let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
        fde.bytes[19 + 2] ^= 0x01;
        let err = Decoder::new().decode(&fde).unwrap_err();
        assert!(err.to_string().contains("mariadb-bin.000001:4"), "{err}");
        assert!(err.to_string().contains("not supported"), "{err}");
        // A NONE binlog's FORMAT_DESCRIPTION still carries a valid CRC.
        let fde = fixture_event("none", "mariadb-bin.000001", 4);
        Decoder::new().decode(&fde).unwrap();
    }

    #[test]
    fn flipped_byte_gives_checksum_error_naming_the_position() {
        let mut raw = fixture_event("crc32", "mariadb-bin.000001", 497);
        raw.bytes[19 + 30] ^= 0x01;
        let mut decoder = primed("crc32");
        let err = decoder.decode(&raw).unwrap_err();
        match &err {
            ExtractError::Checksum {
                position,
                expected,
                actual,
            } => {
                assert_eq!(position.to_string(), "mariadb-bin.000001:497");
                assert_ne!(expected, actual);
                let stored =
                    u32::from_le_bytes(raw.bytes[raw.bytes.len() - 4..].try_into().unwrap());
                assert_eq!(*expected, stored);
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("mariadb-bin.000001:497"), "{err}");
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        // Without verification the (corrupt) event decodes.
        decoder.set_verify_checksums(false);
        assert!(matches!(
            decoder.decode(&raw).unwrap().body,
            EventBody::Query(_)
        ));
        // The FORMAT_DESCRIPTION's own CRC is verified too.
        let mut fde = fixture_event("crc32", "mariadb-bin.000001", 4);
        fde.bytes[40] ^= 0x20;
        assert!(matches!(
            Decoder::new().decode(&fde),
            Err(ExtractError::Checksum { position, .. }) if position.offset() == 4
        ));
    }

    #[test]
    fn unknown_type_code_gives_unknown_event() {
        // No checksum: just change the type.
        let mut raw = fixture_event("none", "mariadb-bin.000001", 992);
        raw.bytes[4] = 200;
        let err = primed("none").decode(&raw).unwrap_err();
        match &err {
            ExtractError::UnknownEvent {
                position,
                type_code,
            } => {
                assert_eq!(*type_code, 200);
                assert_eq!(position.to_string(), "mariadb-bin.000001:992");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "binlog mariadb-bin.000001:992: unknown event type 200"
        );
        // With a valid CRC.
        for type_code in [0u8, 43, 99, 159, 172, 255] {
            let mut raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
            raw.bytes[4] = type_code;
            let n = raw.bytes.len();
            let crc = crc32fast::hash(&raw.bytes[..n - 4]);
            raw.bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
            assert!(
                matches!(
                    primed("crc32").decode(&raw),
                    Err(ExtractError::UnknownEvent { type_code: t, .. }) if t == type_code
                ),
                "type {type_code}"
            );
        }
    }

    #[test]
    fn start_encryption_gives_encrypted() {
        let mut body = vec![1u8];
        body.extend_from_slice(&7u32.to_le_bytes());
        body.extend_from_slice(&[0xAB; 12]);
        let raw = synthetic(event_type::MARIADB_START_ENCRYPTION, &body, true, 300, 0);
        match primed("crc32").decode(&raw) {
            Err(ExtractError::Encrypted { position }) => {
                assert_eq!(position.to_string(), "mysql-bin.000007:1234")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn header_sanity() {
        let mut decoder = primed("crc32");
        let short = RawEvent {
            position: BinlogPosition::new("mariadb-bin.000001", 99).unwrap(),
            bytes: vec![0; 10],
        };
        let err = decoder.decode(&short).unwrap_err();
        assert!(
            err.to_string()
                .contains("at least the 19-byte event header"),
            "{err}"
        );
        let mut raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
        raw.bytes.push(0);
        let err = decoder.decode(&raw).unwrap_err();
        assert!(
            err.to_string()
                .contains("header says event_size 31 but the event has 32 bytes"),
            "{err}"
        );
    }

    /// A rows event whose TABLE_MAP was not seen names the table id.
    #[test]
    fn rows_event_without_table_map() {
        let mut decoder = Decoder::new();
        for raw in fixture_events("crc32", "mariadb-bin.000001") {
            if raw.position.offset() == 928 {
                continue; // skip the TABLE_MAP
            }
            if raw.position.offset() == 989 {
                let err = decoder.decode(&raw).unwrap_err();
                match err {
                    ExtractError::Decode { event, message, .. } => {
                        assert_eq!(event, "WRITE_ROWS_V1");
                        assert!(message.starts_with("unknown table id "), "{message}");
                    }
                    other => panic!("{other:?}"),
                }
                return;
            }
            decoder.decode(&raw).unwrap();
        }
        panic!("no rows event");
    }

    /// `decode_owned` gives what `decode` gives, event by event.
    #[test]
    fn decode_owned_matches_decode() {
        for dir in ["crc32", "none", "b15", "b18", "gcommit", "xa"] {
            let (mut a, mut b) = (Decoder::new(), Decoder::new());
            for raw in fixture_events(dir, "mariadb-bin.000001") {
                let want = a.decode(&raw).map_err(|e| e.to_string());
                let got = b.decode_owned(raw).map_err(|e| e.to_string());
                assert_eq!(got, want, "{dir}");
            }
        }
    }

    /// A TABLE_MAP body for table id `id`: `s`.`name` with INT columns.
    fn table_map_body(id: u64, name: &str, columns: usize) -> Vec<u8> {
        let mut b = id.to_le_bytes()[..6].to_vec();
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[1, b's', 0]);
        b.push(name.len() as u8);
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.push(columns as u8);
        b.extend(std::iter::repeat_n(
            crate::event::column_type::LONG,
            columns,
        ));
        b.push(0); // no type metadata
        b.extend(std::iter::repeat_n(0xffu8, columns.div_ceil(8)));
        b
    }

    /// The TABLE_MAP cache answers a repeated TABLE_MAP without parsing it
    /// again, and a changed one for the same table id replaces it.
    #[test]
    fn table_map_cache_follows_changed_definitions() {
        let mut d = primed("none");
        let decode = |d: &mut Decoder, body: &[u8]| match d
            .decode(&synthetic(event_type::TABLE_MAP, body, false, 0, 0))
            .unwrap()
            .body
        {
            EventBody::TableMap(t) => t,
            other => panic!("{other:?}"),
        };
        let first = decode(&mut d, &table_map_body(77, "t", 1));
        assert_eq!((first.table.as_str(), first.columns.len()), ("t", 1));
        assert_eq!(decode(&mut d, &table_map_body(77, "t", 1)), first);
        assert_eq!(d.table(77), Some(&first));
        let changed = decode(&mut d, &table_map_body(77, "t2", 2));
        assert_eq!((changed.table.as_str(), changed.columns.len()), ("t2", 2));
        assert_eq!(d.table(77), Some(&changed));
        let other = decode(&mut d, &table_map_body(78, "t", 1));
        assert_eq!(other.table_id, 78);
        assert_eq!(d.table(77), Some(&changed));
        // A FORMAT_DESCRIPTION empties the cache.
        d.decode(&fixture_events("none", "mariadb-bin.000001")[0])
            .unwrap();
        assert_eq!(d.table(77), None);
    }

    // -- synthetic events ------------------------------------------------------

    /// An event of `type_code` with `body`, optionally with a CRC-32
    /// trailer, at mysql-bin.000007:1234.
    pub(crate) fn synthetic(
        type_code: u8,
        body: &[u8],
        crc: bool,
        log_pos: u32,
        flags: u16,
    ) -> RawEvent {
        RawEvent {
            position: BinlogPosition::new("mysql-bin.000007", 1234).unwrap(),
            bytes: event_bytes(type_code, body, crc, log_pos, flags),
        }
    }

    fn event_bytes(type_code: u8, body: &[u8], crc: bool, log_pos: u32, flags: u16) -> Vec<u8> {
        let size = (19 + body.len() + if crc { 4 } else { 0 }) as u32;
        let mut v = Vec::new();
        v.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        v.push(type_code);
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&log_pos.to_le_bytes());
        v.extend_from_slice(&flags.to_le_bytes());
        v.extend_from_slice(body);
        if crc {
            let c = crc32fast::hash(&v);
            v.extend_from_slice(&c.to_le_bytes());
        }
        v
    }

    fn query_body(db: &str, error_code: u16, status: &[u8], sql: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&42u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.push(db.len() as u8);
        b.extend_from_slice(&error_code.to_le_bytes());
        b.extend_from_slice(&(status.len() as u16).to_le_bytes());
        b.extend_from_slice(status);
        b.extend_from_slice(db.as_bytes());
        b.push(0);
        b.extend_from_slice(sql);
        b
    }

    #[test]
    fn begin_commit_rollback_are_exact_matches() {
        let mut d = primed("none");
        let decode = |d: &mut Decoder, sql: &[u8]| {
            d.decode(&synthetic(
                event_type::QUERY,
                &query_body("", 0, &[], sql),
                false,
                9,
                0,
            ))
            .unwrap()
            .body
        };
        assert_eq!(decode(&mut d, b"BEGIN"), EventBody::Begin);
        assert_eq!(decode(&mut d, b"COMMIT"), EventBody::Commit);
        assert_eq!(decode(&mut d, b"ROLLBACK"), EventBody::Rollback);
        for sql in [
            &b"begin"[..],
            b"BEGIN ",
            b"XA START 'x'",
            b"ROLLBACK TO SAVEPOINT s",
            b"COMMIT /* x */",
        ] {
            assert!(
                matches!(decode(&mut d, sql), EventBody::Query(_)),
                "{sql:?}"
            );
        }
        // BEGIN with a default schema and status variables is still BEGIN.
        let body = query_body("db1", 0, &[0, 0, 0, 0, 1], b"BEGIN");
        let e = d
            .decode(&synthetic(event_type::QUERY, &body, false, 9, 0))
            .unwrap();
        assert_eq!(e.body, EventBody::Begin);
    }

    /// Every MySQL and MariaDB status variable code, in one block.
    #[test]
    fn every_status_variable() {
        let mut s = Vec::new();
        s.push(0); // Q_FLAGS2
        s.extend_from_slice(&0x0C00_4000u32.to_le_bytes());
        s.push(1); // Q_SQL_MODE
        s.extend_from_slice(&0x1234_5678_9abcu64.to_le_bytes());
        s.extend_from_slice(&[2, 3, b's', b't', b'd', 0]); // Q_CATALOG
        s.push(3); // Q_AUTO_INCREMENT
        s.extend_from_slice(&[2, 0, 1, 0]);
        s.push(4); // Q_CHARSET
        s.extend_from_slice(&[33, 0, 8, 0, 45, 0]);
        s.extend_from_slice(&[5, 6]); // Q_TIME_ZONE
        s.extend_from_slice(b"+02:00");
        s.extend_from_slice(&[6, 3, b's', b't', b'd']); // Q_CATALOG_NZ
        s.extend_from_slice(&[7, 4, 0]); // Q_LC_TIME_NAMES
        s.extend_from_slice(&[8, 28, 0]); // Q_CHARSET_DATABASE
        s.push(9); // Q_TABLE_MAP_FOR_UPDATE
        s.extend_from_slice(&5u64.to_le_bytes());
        s.push(10); // Q_MASTER_DATA_WRITTEN
        s.extend_from_slice(&77u32.to_le_bytes());
        s.extend_from_slice(&[11, 4, b'r', b'o', b'o', b't', 9]); // Q_INVOKER
        s.extend_from_slice(b"localhost");
        s.extend_from_slice(&[12, 2, b'a', 0, b'b', b'b', 0]); // Q_UPDATED_DB_NAMES
        s.extend_from_slice(&[13, 0x40, 0xE2, 0x01]); // Q_MICROSECONDS 123456
        s.extend_from_slice(&[14, 15]); // Q_COMMIT_TS, Q_COMMIT_TS2
        s.extend_from_slice(&[16, 1]); // Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP
        s.push(17); // Q_DDL_LOGGED_WITH_XID
        s.extend_from_slice(&9u64.to_le_bytes());
        s.extend_from_slice(&[18, 255, 0]); // Q_DEFAULT_COLLATION_FOR_UTF8MB4
        s.extend_from_slice(&[19, 1]); // Q_SQL_REQUIRE_PRIMARY_KEY
        s.extend_from_slice(&[20, 0]); // Q_DEFAULT_TABLE_ENCRYPTION
        s.extend_from_slice(&[128, 0xF1, 0xFB, 0x09]); // Q_HRNOW 654321
        s.push(129); // Q_XID
        s.extend_from_slice(&11u64.to_le_bytes());
        s.extend_from_slice(&[130, 4]); // Q_GTID_FLAGS3 with COMMIT_ALTER
        s.extend_from_slice(&3u64.to_le_bytes());
        s.extend_from_slice(&[131, 2, 33, 0, 45, 0, 8, 0, 47, 0]); // Q_CHARACTER_SET_COLLATIONS
        s.extend_from_slice(&[12, 254, 130, 0]); // over-max updated dbs, then flags3 0
        let body = query_body("shop", 1062, &s, b"INSERT INTO t VALUES (1)");
        let e = primed("none")
            .decode(&synthetic(event_type::QUERY, &body, false, 9, 0))
            .unwrap();
        let st = statement(&e);
        assert_eq!(st.sql, b"INSERT INTO t VALUES (1)");
        assert_eq!(st.default_schema.as_deref(), Some("shop"));
        assert_eq!(st.error_code, 1062);
        let expected = SessionContext {
            timestamp: 1_700_000_000,
            timestamp_micros: Some(654_321),
            sql_mode: Some(0x1234_5678_9abc),
            flags2: Some(0x0C00_4000),
            charset_client: Some(33),
            collation_connection: Some(8),
            collation_server: Some(45),
            collation_database: Some(28),
            time_zone: Some("+02:00".to_owned()),
            lc_time_names: Some(4),
            auto_increment: Some((2, 1)),
            ..SessionContext::default()
        };
        assert_eq!(st.context, expected);
        assert!(st.context.foreign_key_checks_off() && st.context.unique_checks_off());
    }

    #[test]
    fn unknown_or_truncated_status_variable_is_an_error() {
        let mut d = primed("none");
        let mut decode = |status: &[u8]| {
            let body = query_body("", 0, status, b"DO 1");
            match d.decode(&synthetic(event_type::QUERY, &body, false, 9, 0)) {
                Err(ExtractError::Decode { event, message, .. }) => {
                    assert_eq!(event, "QUERY");
                    message
                }
                other => panic!("{other:?}"),
            }
        };
        let m = decode(&[0, 1, 2, 3, 4, 99, 1, 2]);
        assert!(
            m.contains("unknown status variable code 99 at status offset 5"),
            "{m}"
        );
        let m = decode(&[1, 1, 2, 3]);
        assert!(
            m.contains("status variable 1 at status offset 0: truncated sql_mode"),
            "{m}"
        );
        let m = decode(&[5, 10, b'x']);
        assert!(m.contains("truncated time zone"), "{m}");
        // status_vars_len beyond the body.
        let mut body = query_body("", 0, &[], b"");
        body[11] = 200;
        let m = match d.decode(&synthetic(event_type::QUERY, &body, false, 9, 0)) {
            Err(ExtractError::Decode { message, .. }) => message,
            other => panic!("{other:?}"),
        };
        assert!(m.contains("truncated status variables"), "{m}");
    }

    #[test]
    fn rotate_real_and_artificial() {
        let mut body = 4u64.to_le_bytes().to_vec();
        body.extend_from_slice(b"mariadb-bin.000009");
        let expected = |artificial| EventBody::Rotate {
            next_file: "mariadb-bin.000009".to_owned(),
            position: 4,
            artificial,
        };
        // The fake ROTATE a dump starts with, before any FORMAT_DESCRIPTION,
        // with or without a trailer: the name never includes the CRC.
        for crc in [false, true] {
            let e = Decoder::new()
                .decode(&synthetic(
                    event_type::ROTATE,
                    &body,
                    crc,
                    0,
                    LOG_EVENT_ARTIFICIAL_F,
                ))
                .unwrap();
            assert_eq!(e.body, expected(true), "crc {crc}");
            // And after a CRC32 or NONE FORMAT_DESCRIPTION.
            for dir in ["crc32", "none"] {
                let e = primed(dir)
                    .decode(&synthetic(event_type::ROTATE, &body, crc, 0, 0))
                    .unwrap();
                assert_eq!(e.body, expected(true), "crc {crc} after {dir}");
            }
        }
        // A real ROTATE follows the file's checksum.
        let e = primed("crc32")
            .decode(&synthetic(event_type::ROTATE, &body, true, 500, 0))
            .unwrap();
        assert_eq!(e.body, expected(false));
        let e = primed("none")
            .decode(&synthetic(event_type::ROTATE, &body, false, 500, 0))
            .unwrap();
        assert_eq!(e.body, expected(false));
    }

    #[test]
    fn small_events() {
        let mut d = primed("none");
        let mut one = |type_code: u8, body: &[u8]| {
            d.decode(&synthetic(type_code, body, false, 9, 0))
                .map(|e| e.body)
        };
        assert_eq!(one(event_type::STOP, &[]).unwrap(), EventBody::Stop);
        assert_eq!(
            one(event_type::HEARTBEAT, b"mariadb-bin.000001").unwrap(),
            EventBody::Heartbeat
        );
        assert_eq!(
            one(event_type::HEARTBEAT_V2, &[1, 2, 3]).unwrap(),
            EventBody::Heartbeat
        );
        for t in [
            event_type::IGNORABLE,
            event_type::PREVIOUS_GTIDS,
            event_type::TRANSACTION_CONTEXT,
            event_type::VIEW_CHANGE,
        ] {
            assert_eq!(one(t, &[0; 8]).unwrap(), EventBody::Ignored, "type {t}");
        }
        let mut intvar = vec![2];
        intvar.extend_from_slice(&77u64.to_le_bytes());
        assert_eq!(
            one(event_type::INTVAR, &intvar).unwrap(),
            EventBody::Intvar { kind: 2, value: 77 }
        );
        intvar[0] = 3;
        assert!(one(event_type::INTVAR, &intvar).is_err());
        let mut rand = 1u64.to_le_bytes().to_vec();
        rand.extend_from_slice(&2u64.to_le_bytes());
        assert_eq!(
            one(event_type::RAND, &rand).unwrap(),
            EventBody::Rand { seed1: 1, seed2: 2 }
        );
        assert!(one(event_type::RAND, &rand[..15]).is_err());
        assert_eq!(
            one(event_type::XID, &9u64.to_le_bytes()).unwrap(),
            EventBody::Xid(9)
        );
        assert!(one(event_type::XID, &[1, 2, 3]).is_err());
        // MySQL ROWS_QUERY: a length byte, then the text.
        assert_eq!(
            one(event_type::ROWS_QUERY, b"\x0bINSERT 1234").unwrap(),
            EventBody::AnnotateRows(b"INSERT 1234".to_vec())
        );
        // MySQL GTID: commit flag, uuid, gno, logical clock.
        let mut gtid = vec![1];
        gtid.extend_from_slice(&[
            0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42,
            0x95, 0x62,
        ]);
        gtid.extend_from_slice(&23u64.to_le_bytes());
        gtid.push(2);
        gtid.extend_from_slice(&[0; 16]);
        for t in [event_type::GTID, event_type::ANONYMOUS_GTID] {
            assert_eq!(
                one(t, &gtid).unwrap(),
                EventBody::MysqlGtid {
                    uuid: "3e11fa47-71ca-11e1-9e33-c80aa9429562".to_owned(),
                    gno: 23
                }
            );
        }
        // INCIDENT and LOAD DATA events: clear errors.
        let mut incident = 1u16.to_le_bytes().to_vec();
        incident.push(11);
        incident.extend_from_slice(b"LOST_EVENTS");
        match one(event_type::INCIDENT, &incident) {
            Err(ExtractError::Decode { message, .. }) => {
                assert!(
                    message.contains("INCIDENT 1 (\"LOST_EVENTS\")"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        match one(event_type::EXECUTE_LOAD_QUERY, &[0; 40]) {
            Err(ExtractError::Decode { message, .. }) => {
                assert!(message.contains("LOAD DATA"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn user_var_errors() {
        let mut d = primed("none");
        let mut one = |body: &[u8]| d.decode(&synthetic(event_type::USER_VAR, body, false, 9, 0));
        // INT without the flags byte (pre-5.1 writer): signed.
        let mut b = 1u32.to_le_bytes().to_vec();
        b.extend_from_slice(b"v");
        b.push(0);
        b.push(INT_RESULT);
        b.extend_from_slice(&63u32.to_le_bytes());
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&(-3i64).to_le_bytes());
        assert_eq!(
            one(&b).unwrap().body,
            EventBody::UserVar(UserVar {
                name: "v".to_owned(),
                value: Some(UserVarValue::Int {
                    value: -3,
                    unsigned: false
                })
            })
        );
        // Value length beyond the event.
        let mut bad = b.clone();
        bad[11..15].copy_from_slice(&100u32.to_le_bytes());
        assert!(one(&bad).is_err());
        // ROW_RESULT is not a value type of USER_VAR.
        let mut bad = b.clone();
        bad[6] = 3;
        assert!(one(&bad).is_err());
    }

    #[test]
    fn decimal_binary_format() {
        // MySQL's documentation example: DECIMAL(14,4).
        let pos = [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2];
        assert_eq!(decode_decimal(14, 4, &pos).unwrap(), "1234567890.1234");
        let neg = [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D];
        assert_eq!(decode_decimal(14, 4, &neg).unwrap(), "-1234567890.1234");
        // DECIMAL(5,2) 0.00 and -0.05; DECIMAL(3,0) 7.
        assert_eq!(decode_decimal(5, 2, &[0x80, 0x00, 0x00]).unwrap(), "0.00");
        assert_eq!(decode_decimal(5, 2, &[0x7F, 0xFF, 0xFA]).unwrap(), "-0.05");
        assert_eq!(decode_decimal(3, 0, &[0x80, 0x07]).unwrap(), "7");
        // DECIMAL(20,10): two full groups and partials.
        assert!(decode_decimal(14, 4, &pos[..6]).is_err());
        assert!(decode_decimal(0, 0, &[]).is_err());
        assert!(decode_decimal(3, 4, &[0x80]).is_err());
        assert!(decode_decimal(2, 0, &[0x80 | 0x7F]).is_err()); // 127 > 99
    }

    // -- TRANSACTION_PAYLOAD ---------------------------------------------------

    fn lenenc(v: u64) -> Vec<u8> {
        match v {
            0..=250 => vec![v as u8],
            251..=0xffff => {
                let mut out = vec![0xfc];
                out.extend_from_slice(&(v as u16).to_le_bytes());
                out
            }
            _ => {
                let mut out = vec![0xfe];
                out.extend_from_slice(&v.to_le_bytes());
                out
            }
        }
    }

    fn payload_body(compression: u64, uncompressed: Option<u64>, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        let mut field = |t: u64, value: u64| {
            let value = lenenc(value);
            b.extend(lenenc(t));
            b.extend(lenenc(value.len() as u64));
            b.extend(value);
        };
        field(PAYLOAD_SIZE, payload.len() as u64);
        field(PAYLOAD_COMPRESSION_TYPE, compression);
        if let Some(u) = uncompressed {
            field(PAYLOAD_UNCOMPRESSED_SIZE, u);
        }
        b.push(PAYLOAD_END_MARK as u8);
        b.extend_from_slice(payload);
        b
    }

    /// A zstd frame holding `data` in one raw (stored) block.
    fn zstd_raw_frame(data: &[u8]) -> Vec<u8> {
        assert!(data.len() < 256);
        let mut f = vec![0x28, 0xB5, 0x2F, 0xFD];
        f.push(0x20); // single segment, 1-byte content size, no checksum
        f.push(data.len() as u8);
        let block = 1u32 | ((data.len() as u32) << 3); // last block, raw
        f.extend_from_slice(&block.to_le_bytes()[..3]);
        f.extend_from_slice(data);
        f
    }

    fn inner_events() -> Vec<u8> {
        let mut inner = event_bytes(
            event_type::QUERY,
            &query_body("", 0, &[], b"BEGIN"),
            false,
            0,
            0,
        );
        let mut intvar = vec![1];
        intvar.extend_from_slice(&5u64.to_le_bytes());
        inner.extend(event_bytes(event_type::INTVAR, &intvar, false, 0, 0));
        inner.extend(event_bytes(
            event_type::XID,
            &8u64.to_le_bytes(),
            false,
            0,
            0,
        ));
        inner
    }

    #[test]
    fn transaction_payload_expands_to_its_events() {
        let inner = inner_events();
        for (compression, payload) in [
            (PAYLOAD_NONE, inner.clone()),
            (PAYLOAD_ZSTD, zstd_raw_frame(&inner)),
        ] {
            for uncompressed in [Some(inner.len() as u64), None] {
                let body = payload_body(compression, uncompressed, &payload);
                let raw = synthetic(event_type::TRANSACTION_PAYLOAD, &body, true, 5000, 0);
                let mut d = primed("crc32");
                let events = d.decode_expanded(&raw).unwrap();
                let bodies: Vec<EventBody> = events.iter().map(|e| e.body.clone()).collect();
                assert_eq!(
                    bodies,
                    [
                        EventBody::Begin,
                        EventBody::Intvar { kind: 1, value: 5 },
                        EventBody::Xid(8)
                    ],
                    "compression {compression}"
                );
                assert!(events.iter().all(|e| e.position == raw.position));
                // decode() refuses it with a pointer to decode_expanded.
                match d.decode(&raw) {
                    Err(ExtractError::Decode { message, .. }) => {
                        assert!(message.contains("decode_expanded"), "{message}")
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        // Other events expand to themselves.
        let raw = fixture_event("crc32", "mariadb-bin.000001", 1040);
        let events = primed("crc32").decode_expanded(&raw).unwrap();
        assert_eq!(events.len(), 1);
        assert!(matches!(events[0].body, EventBody::Xid(_)));
    }

    #[test]
    fn transaction_payload_errors() {
        let inner = inner_events();
        let expand = |body: Vec<u8>| {
            let raw = synthetic(event_type::TRANSACTION_PAYLOAD, &body, false, 5000, 0);
            match primed("none").decode_expanded(&raw) {
                Err(ExtractError::Decode { message, .. }) => message,
                other => panic!("{other:?}"),
            }
        };
        let m = expand(payload_body(7, None, &inner));
        assert!(m.contains("compression type 7"), "{m}");
        let m = expand(payload_body(PAYLOAD_NONE, Some(3), &inner));
        assert!(m.contains("the event says 3"), "{m}");
        let m = expand(payload_body(PAYLOAD_ZSTD, None, &inner));
        assert!(m.contains("cannot decompress"), "{m}");
        let m = expand(payload_body(PAYLOAD_NONE, None, &inner[..inner.len() - 3]));
        assert!(m.contains("inner event #2"), "{m}");
        let mut nested = inner.clone();
        nested.extend(event_bytes(
            event_type::TRANSACTION_PAYLOAD,
            &[0],
            false,
            0,
            0,
        ));
        let m = expand(payload_body(PAYLOAD_NONE, None, &nested));
        assert!(m.contains("inner event #3 is a TRANSACTION_PAYLOAD"), "{m}");
    }

    // -- no panics ---------------------------------------------------------------

    /// Every fixture event with the decoder state just before it.
    fn fixture_states() -> &'static Vec<(Decoder, RawEvent)> {
        static STATES: std::sync::OnceLock<Vec<(Decoder, RawEvent)>> = std::sync::OnceLock::new();
        STATES.get_or_init(|| {
            let mut out = Vec::new();
            for (dir, files) in [
                ("crc32", 1),
                ("none", 1),
                ("b16", 5),
                ("b15", 1),
                ("b18", 1),
                ("gcommit", 1),
                ("xa", 1),
            ] {
                let mut d = Decoder::new();
                for n in 1..=files {
                    for raw in fixture_events(dir, &file_name(n)) {
                        out.push((d.clone(), raw.clone()));
                        let _ = d.decode(&raw);
                    }
                }
            }
            out
        })
    }

    fn decode_all_ways(decoder: &Decoder, raw: &RawEvent) {
        for verify in [true, false] {
            let mut d = decoder.clone();
            d.set_verify_checksums(verify);
            let _ = d.decode(raw);
            let _ = d.clone().decode_expanded(raw);
        }
    }

    proptest::proptest! {
        // PROPTEST_CASES overrides the default of 2000 cases.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
        ))]

        #[test]
        fn random_bytes_never_panic(
            mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            type_code in proptest::prelude::any::<u8>(),
            fix in proptest::prelude::any::<bool>(),
        ) {
            if fix && bytes.len() >= EVENT_HEADER_LEN {
                bytes[4] = type_code;
                let size = bytes.len() as u32;
                bytes[9..13].copy_from_slice(&size.to_le_bytes());
            }
            let raw = RawEvent {
                position: BinlogPosition::new("mariadb-bin.000001", 4).unwrap(),
                bytes,
            };
            decode_all_ways(&Decoder::new(), &raw);
            let states = fixture_states();
            decode_all_ways(&states[1].0, &raw);
        }

        #[test]
        fn mutated_fixture_events_never_panic(
            index in proptest::prelude::any::<proptest::sample::Index>(),
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
                0..6,
            ),
            cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
            grow in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
            type_code in proptest::option::of(proptest::prelude::any::<u8>()),
            fix_size in proptest::prelude::any::<bool>(),
        ) {
            let states = fixture_states();
            let (decoder, raw) = &states[index.index(states.len())];
            let mut raw = raw.clone();
            for (at, byte) in edits {
                let i = EVENT_HEADER_LEN.min(raw.bytes.len() - 1)
                    + at.index(raw.bytes.len() - EVENT_HEADER_LEN.min(raw.bytes.len() - 1));
                raw.bytes[i] = byte;
            }
            if let Some(cut) = cut {
                raw.bytes.truncate(cut.index(raw.bytes.len() + 1));
            }
            raw.bytes.extend(grow);
            if raw.bytes.len() >= EVENT_HEADER_LEN {
                if let Some(t) = type_code {
                    raw.bytes[4] = t;
                }
                if fix_size {
                    let size = raw.bytes.len() as u32;
                    raw.bytes[9..13].copy_from_slice(&size.to_le_bytes());
                }
            }
            decode_all_ways(decoder, &raw);
        }
    }

    /// Prints every fixture event (`cargo test dump_fixtures -- --ignored
    /// --nocapture`), to update the expected values after regenerating the
    /// fixtures with `scripts/fixtures-events.sh`.
    #[test]
    #[ignore]
    fn dump_fixtures() {
        for (dir, files) in [
            ("crc32", 1),
            ("none", 1),
            ("b16", 5),
            ("b15", 1),
            ("b18", 1),
            ("gcommit", 1),
            ("xa", 1),
        ] {
            for (raw, result) in walk_results(dir, files) {
                match result {
                    Ok(e) => println!("{dir} {}: {}", raw.position.file(), summary(&e)),
                    Err(e) => println!("{dir} {}: ERROR {e}", raw.position.file()),
                }
            }
        }
    }
}
