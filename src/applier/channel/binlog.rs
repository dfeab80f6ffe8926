//! The `binlog` apply method (`[apply] method = "binlog"`): a
//! transaction's row changes reach the replica as the master's own
//! TABLE_MAP and rows events, in `BINLOG '<base64>'` statements (what
//! `mariadb-binlog` prints), so that the replica's row applier applies
//! them exactly as native replication would: no triggers for row events
//! (`slave_run_triggers_for_rbr=NO`), system-versioned history from the
//! row images, generated columns computed by the replica, type conversions
//! under the replica's `slave_type_conversions`.
//!
//! A session first gets the FORMAT_DESCRIPTION the events were written
//! under (the server refuses a BINLOG statement of row events before one,
//! error 1609, and reads post-header lengths and the checksum algorithm
//! from it); it is sent again only when a transaction's differs. The
//! events of consecutive row changes, of one transaction or of several in
//! a block, share one BINLOG statement up to [`BinlogBuffer::limit`]
//! bytes, cut only after a rows event that ends its statement
//! (`STMT_END_F`), so that every statement carries its own TABLE_MAPs.
//! Statement events in between run as SQL, as they do under the `sql`
//! method (they must fire the replica's triggers, as natively). The block
//! commits with the restart row as under every method (DESIGN §4).
//!
//! Rows of another service's restart table are left out, with their
//! TABLE_MAP, as under the `sql` method.
//!
//! Formats: MariaDB's `sql_binlog.cc` (BINLOG statement) and
//! `log_event.cc`; the knowledge base's "BINLOG" page (privilege `BINLOG
//! REPLAY` from 10.5.2, SUPER before).

use base64::Engine as _;

use super::{Attempt, Channel};
use crate::event::{RowEventBytes, RowEvents, Transaction};
use crate::position::Epoch;

/// Offset of `event_size` in an event header.
const EVENT_SIZE_AT: usize = 9;
/// Offset of the type code in an event header.
const TYPE_AT: usize = 4;
/// Length of the common event header.
const HEADER_LEN: usize = 19;
/// TABLE_MAP's type code.
const TABLE_MAP: u8 = 19;
/// Rows event flag: last event of a statement.
const STMT_END_F: u16 = 0x0001;

/// `ER_UNKNOWN_ERROR`: what a BINLOG statement returns when the row
/// applier refuses a row event for a reason it reports only to the
/// server's error log (checked on MariaDB 10.11: a column of another type
/// than the master's without `slave_type_conversions` allowing it).
pub const ER_UNKNOWN_ERROR: u16 = 1105;

/// What [`ER_UNKNOWN_ERROR`] of a BINLOG statement means, added to its
/// message.
pub const UNKNOWN_ERROR_NOTE: &str =
    "the replica's row applier refused these row events and gives its reason only in \
     the replica's error log; the usual cause is a column whose type differs from the \
     master's, which the replica converts only as its slave_type_conversions allows, as \
     for native replication";

/// Most rows [`Channel::describe_rows`] names.
const DESCRIBED_ROWS: usize = 3;

/// Raw event bytes after which a BINLOG statement is sent when the
/// replica's `max_allowed_packet` allows more: bounds the text held in
/// memory (the events, their base64 text and the client's copy of it:
/// about 3.7 times this while one is sent). A single event larger than
/// this still goes, alone, up to what `max_allowed_packet` allows.
pub const MAX_STATEMENT_EVENT_BYTES: usize = 4 << 20;

/// Splits concatenated whole events into events.
///
/// # Errors
/// A message when an `event_size` does not fit the bytes (a damaged
/// record: the queue's CRC makes that a different writer).
pub fn split_events(mut bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut events = Vec::new();
    while !bytes.is_empty() {
        let size = bytes
            .get(EVENT_SIZE_AT..EVENT_SIZE_AT + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .filter(|&n| n >= HEADER_LEN && n <= bytes.len())
            .ok_or_else(|| {
                format!(
                    "a stored row event's header is damaged ({} bytes left)",
                    bytes.len()
                )
            })?;
        events.push(&bytes[..size]);
        bytes = &bytes[size..];
    }
    Ok(events)
}

/// The schema and table a TABLE_MAP event names (`None` for another event
/// or one too short): table id (6 bytes) and flags (2) after the header,
/// then a length byte, the schema, a zero, a length byte, the table.
pub fn table_map_names(event: &[u8]) -> Option<(&[u8], &[u8])> {
    if event.get(TYPE_AT) != Some(&TABLE_MAP) {
        return None;
    }
    let body = event.get(HEADER_LEN + 8..)?;
    let schema_len = usize::from(*body.first()?);
    let schema = body.get(1..1 + schema_len)?;
    let rest = body.get(1 + schema_len + 1..)?;
    let table_len = usize::from(*rest.first()?);
    let table = rest.get(1..1 + table_len)?;
    Some((schema, table))
}

/// Whether a rows event ends its statement: its flags (after the table id,
/// 6 bytes, in the post-header) have `STMT_END_F`.
fn ends_statement(event: &[u8]) -> bool {
    event
        .get(HEADER_LEN + 6..HEADER_LEN + 8)
        .is_some_and(|f| u16::from_le_bytes([f[0], f[1]]) & STMT_END_F != 0)
}

/// Row events waiting to be sent as one BINLOG statement, with the
/// transactions (seqnos) they belong to.
#[derive(Default)]
pub(super) struct BinlogBuffer {
    events: Vec<u8>,
    /// The transactions with events here.
    txns: Vec<crate::position::Seqno>,
    /// The last rows event sent or buffered did not end its statement
    /// (no `STMT_END_F`): the statement's TABLE_MAPs are still in use.
    open_statement: bool,
    /// The TABLE_MAPs of the last statement: sent again at the start of
    /// the next BINLOG statement when a cut comes inside a statement (a
    /// rows event whose table id the session has not mapped is skipped by
    /// the server without an error: checked on MariaDB 10.11, where 200
    /// rows in 6 events cut after the first without its map applied 39).
    statement_maps: Vec<u8>,
    /// The last BINLOG statement failed holding several transactions'
    /// events.
    pub(super) failed_shared: bool,
}

impl BinlogBuffer {
    /// Most raw bytes in one statement for a replica whose
    /// `max_allowed_packet` is `packet` bytes: base64 takes 4 bytes per 3,
    /// plus the statement's own text.
    pub(super) fn limit(packet: usize) -> usize {
        Self::packet_limit(packet).min(MAX_STATEMENT_EVENT_BYTES)
    }

    /// Most raw bytes one statement can carry at all under a
    /// `max_allowed_packet` of `packet` bytes.
    pub(super) fn packet_limit(packet: usize) -> usize {
        (packet.saturating_sub(1024) / 4 * 3).max(4096)
    }
}

/// What a BINLOG statement of `events` holds, for errors: `BINLOG
/// (N bytes of row events: WRITE_ROWS `db`.`t`, …)`, each kind and table
/// once, in order.
fn describe(events: &[u8]) -> String {
    let mut tables: Vec<(u64, String)> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for event in split_events(events).unwrap_or_default() {
        let id = event
            .get(HEADER_LEN..HEADER_LEN + 6)
            .map(|b| {
                let mut id = [0u8; 8];
                id[..6].copy_from_slice(b);
                u64::from_le_bytes(id)
            })
            .unwrap_or(0);
        if let Some((schema, table)) = table_map_names(event) {
            tables.push((
                id,
                format!(
                    "{}.{}",
                    crate::mysql::quote_ident(&String::from_utf8_lossy(schema)),
                    crate::mysql::quote_ident(&String::from_utf8_lossy(table))
                ),
            ));
            continue;
        }
        let kind = match event.get(TYPE_AT) {
            Some(23 | 30 | 166 | 169) => "WRITE_ROWS",
            Some(24 | 31 | 167 | 170) => "UPDATE_ROWS",
            Some(25 | 32 | 168 | 171) => "DELETE_ROWS",
            _ => "event",
        };
        let table = tables
            .iter()
            .rev()
            .find(|(t, _)| *t == id)
            .map_or("?", |(_, name)| name.as_str());
        let part = format!("{kind} {table}");
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    format!(
        "BINLOG ({} bytes of row events: {})",
        events.len(),
        parts.join(", ")
    )
}

/// The text of `BINLOG '<base64 of events>'`.
fn statement(events: &[u8]) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut sql = String::with_capacity(events.len() / 3 * 4 + 16);
    sql.push_str("BINLOG '");
    engine.encode_string(events, &mut sql);
    sql.push('\'');
    sql
}

impl Channel {
    /// Adds the events of rows change `index` (its position among the
    /// transaction's row changes) of `txn` to the buffer, sending the buffer first when it is
    /// full at a statement's end; the FORMAT_DESCRIPTION goes first when
    /// the session has not had this one. `catalog`: the rows change is of
    /// another service's restart table (its TABLE_MAPs are kept, its rows
    /// never sent).
    pub(super) async fn buffer_row_events(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        events: &RowEvents,
        index: usize,
        catalog: bool,
    ) -> Attempt {
        if self.binlog_format.as_deref() != Some(events.format.as_slice()) {
            self.flush_binlog(Some((txn, epoch))).await?;
            let sql = statement(&events.format);
            self.exec_text(&sql, Some((txn, epoch))).await?;
            self.binlog_format = Some(events.format.clone());
        }
        let Some(RowEventBytes(bytes)) = events.rows.get(index) else {
            return Err(self.unplanned(
                txn,
                format!(
                    "the stored row events hold {} row changes, the transaction more",
                    events.rows.len()
                ),
            ));
        };
        let parts = split_events(bytes).map_err(|m| self.unplanned(txn, m))?;
        let limit = BinlogBuffer::limit(self.max_packet);
        let size: usize = parts.iter().map(|p| p.len()).sum();
        if size > BinlogBuffer::packet_limit(self.max_packet) {
            let packet = self.max_packet;
            return Err(self.unplanned(
                txn,
                format!(
                    "one row event of {size} bytes does not fit in a BINLOG statement under \
                     the replica's max_allowed_packet ({packet} bytes): raise \
                     max_allowed_packet on the replica (SET GLOBAL max_allowed_packet = …, \
                     then restart shardrep) to at least {} bytes",
                    size / 3 * 4 + 2048
                ),
            ));
        }
        let (rows_event, maps) = parts.split_last().expect("at least one event");
        let mut own_maps = Vec::new();
        for map in maps {
            match table_map_names(map) {
                Some((schema, table))
                    if crate::shard::is_catalog_table(
                        &String::from_utf8_lossy(schema),
                        &String::from_utf8_lossy(table),
                    ) => {}
                _ => own_maps.extend_from_slice(map),
            }
        }
        if self.binlog.open_statement {
            // A fragment of a large transaction that starts inside a
            // statement carries the statement's maps again: keep one copy.
            let known = own_maps.is_empty()
                || self
                    .binlog
                    .statement_maps
                    .windows(own_maps.len())
                    .any(|w| w == own_maps.as_slice());
            if !known {
                self.binlog.statement_maps.extend_from_slice(&own_maps);
            }
        } else {
            self.binlog.statement_maps = own_maps.clone();
        }
        if !self.binlog.events.is_empty() && self.binlog.events.len() + size > limit {
            self.flush_binlog(Some((txn, epoch))).await?;
            if self.binlog.open_statement {
                // Inside a statement: its maps again, then its next rows.
                let maps = self.binlog.statement_maps.clone();
                self.binlog.events.extend_from_slice(&maps);
            } else {
                self.binlog.events.extend_from_slice(&own_maps);
            }
        } else {
            self.binlog.events.extend_from_slice(&own_maps);
        }
        if !catalog {
            self.binlog.events.extend_from_slice(rows_event);
            if self.binlog.txns.last() != Some(&txn.seqno) {
                self.binlog.txns.push(txn.seqno);
            }
        }
        self.binlog.open_statement = !ends_statement(rows_event);
        Ok(())
    }

    /// Sends the buffered row events as one BINLOG statement (nothing when
    /// the buffer is empty); `at` names the transaction for errors.
    pub(super) async fn flush_binlog(&mut self, at: Option<(&Transaction, Epoch)>) -> Attempt {
        if self.binlog.events.is_empty() {
            self.binlog.txns.clear();
            return Ok(());
        }
        let sql = statement(&self.binlog.events);
        let described = describe(&self.binlog.events);
        self.binlog.events.clear();
        let txns = std::mem::take(&mut self.binlog.txns);
        let result = self.exec_text(&sql, at).await;
        let result = match (result, at) {
            (Err((mut error, cause)), Some((txn, epoch)))
                if txns.len() == 1
                    && txns[0] == txn.seqno
                    && matches!(
                        error.code,
                        crate::mysql::error_codes::ER_KEY_NOT_FOUND
                            | crate::mysql::error_codes::ER_DUP_ENTRY
                    ) =>
            {
                let rows = self.describe_rows(txn, epoch).await;
                if !rows.is_empty() {
                    error.message = format!(
                        "{} (the replica's row applier, applying seqno {}: {rows})",
                        error.message,
                        txn.seqno.get()
                    );
                }
                Err((error, cause))
            }
            (result, _) => result,
        };
        result.map_err(|(mut error, cause)| {
            error.sql = described;
            if error.code == ER_UNKNOWN_ERROR {
                error.message = format!("{} ({UNKNOWN_ERROR_NOTE})", error.message);
            }
            self.binlog.failed_shared = txns.len() > 1;
            if txns.len() > 1 {
                let seqnos: crate::position::SeqnoRanges = txns.into_iter().collect();
                error.message = format!(
                    "{} (in a BINLOG statement with the row events of seqnos {seqnos})",
                    error.message
                );
            }
            (error, cause)
        })
    }

    /// The rows of `txn`'s row changes by key (at most [`DESCRIBED_ROWS`]),
    /// for a 1032 or 1062 of the replica's row applier, whose own message
    /// names neither the schema nor the key: `UPDATE `d`.`k` key `id` = 2`.
    /// The key is the replica table's primary key, else every column of
    /// the image; a before image for updates and deletes, the after image
    /// for inserts.
    pub(super) async fn describe_rows(&mut self, txn: &Transaction, epoch: Epoch) -> String {
        let mut described = Vec::new();
        for change in &txn.changes {
            let crate::event::Change::Rows(rows) = change else {
                continue;
            };
            let info = txn.table_of(rows);
            if crate::shard::is_catalog_table(&info.schema, &info.table) {
                continue;
            }
            let Ok(table) = self.replica_table(txn, epoch, info).await else {
                continue;
            };
            for pair in &rows.rows {
                if described.len() >= DESCRIBED_ROWS {
                    return described.join("; ");
                }
                let Some(image) = pair.before.as_ref().or(pair.after.as_ref()) else {
                    continue;
                };
                let wanted: Vec<u16> = table
                    .shape
                    .primary_key
                    .clone()
                    .unwrap_or_else(|| image.columns.clone());
                let pairs: Vec<String> = wanted
                    .iter()
                    .filter_map(|&c| {
                        let at = image.columns.iter().position(|&i| i == c)?;
                        let column = info.columns.get(usize::from(c))?;
                        let name = table.shape.columns.get(usize::from(c)).map_or_else(
                            || format!("@{}", c + 1),
                            |n| crate::mysql::quote_ident(n),
                        );
                        let mut text =
                            crate::applier::sql::to_param(&image.values[at], column).as_sql(false);
                        if text.chars().count() > 64 {
                            text = text.chars().take(64).collect::<String>() + "…";
                        }
                        Some(format!("{name} = {text}"))
                    })
                    .collect();
                let kind = match rows.kind {
                    crate::event::RowKind::Insert => "INSERT",
                    crate::event::RowKind::Update => "UPDATE",
                    crate::event::RowKind::Delete => "DELETE",
                };
                described.push(format!(
                    "{kind} {}.{} {} {}",
                    crate::mysql::quote_ident(&info.schema),
                    crate::mysql::quote_ident(&info.table),
                    if table.shape.primary_key.is_some() {
                        "key"
                    } else {
                        "columns"
                    },
                    pairs.join(", ")
                ));
            }
        }
        described.join("; ")
    }

    /// Forgets buffered events (a failed attempt) and, with `session`, the
    /// FORMAT_DESCRIPTION the session had (a new session).
    pub(super) fn reset_binlog(&mut self, session: bool) {
        self.binlog = BinlogBuffer::default();
        if session {
            self.binlog_format = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(type_code: u8, body: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[TYPE_AT] = type_code;
        let size = (HEADER_LEN + body.len()) as u32;
        e[EVENT_SIZE_AT..EVENT_SIZE_AT + 4].copy_from_slice(&size.to_le_bytes());
        e.extend_from_slice(body);
        e
    }

    #[test]
    fn events_split_and_table_maps_name_their_table() {
        let mut body = vec![7, 0, 0, 0, 0, 0, 1, 0];
        body.extend_from_slice(&[2, b'd', b'b', 0, 1, b't', 0]);
        let map = event(TABLE_MAP, &body);
        let rows = event(30, &[7, 0, 0, 0, 0, 0, 1, 0]);
        let mut both = map.clone();
        both.extend_from_slice(&rows);
        let parts = split_events(&both).unwrap();
        assert_eq!(parts, vec![map.as_slice(), rows.as_slice()]);
        assert_eq!(
            table_map_names(parts[0]),
            Some((b"db".as_slice(), b"t".as_slice()))
        );
        assert_eq!(table_map_names(parts[1]), None);
        assert!(ends_statement(parts[1]));
        let mut cut = both.clone();
        cut.truncate(both.len() - 1);
        assert!(split_events(&cut).unwrap_err().contains("damaged"));
    }

    #[test]
    fn the_limit_follows_max_allowed_packet_within_bounds() {
        assert_eq!(BinlogBuffer::limit(0), 4096);
        assert_eq!(BinlogBuffer::limit(1 << 20), ((1 << 20) - 1024) / 4 * 3);
        assert_eq!(BinlogBuffer::limit(1 << 30), MAX_STATEMENT_EVENT_BYTES);
        assert_eq!(
            BinlogBuffer::packet_limit(1 << 30),
            ((1 << 30) - 1024) / 4 * 3
        );
    }

    #[test]
    fn a_statement_is_described_by_its_kinds_and_tables() {
        let mut body = vec![7, 0, 0, 0, 0, 0, 1, 0];
        body.extend_from_slice(&[2, b'd', b'b', 0, 1, b't', 0]);
        let mut events = event(TABLE_MAP, &body);
        events.extend(event(31, &[7, 0, 0, 0, 0, 0, 1, 0]));
        events.extend(event(31, &[7, 0, 0, 0, 0, 0, 1, 0]));
        assert_eq!(
            describe(&events),
            format!(
                "BINLOG ({} bytes of row events: UPDATE_ROWS `db`.`t`)",
                events.len()
            )
        );
    }

    #[test]
    fn the_statement_is_base64() {
        assert_eq!(statement(b"abc"), "BINLOG 'YWJj'");
    }
}
