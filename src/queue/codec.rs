//! The queue's record format: one stored transaction with the extractor's
//! progress after it.
//!
//! # Record, format 1
//! ```text
//! offset  size      field
//! 0       1         format byte = 1 (FORMAT_V1)
//! 1       4         CRC-32 (IEEE 802.3, crc32fast), little endian, over
//!                   the format byte, the length bytes and the payload
//! 5       1..=10    payload length in bytes, unsigned LEB128 varint
//!                   (the varint of postcard's wire format)
//! 5+n     length    payload: postcard 1.x encoding of RecordV1
//! ```
//! `RecordV1` is, field by field in this order (postcard: no field names,
//! integers as varints, `Option` as a 0/1 byte then the value, strings and
//! byte strings length-prefixed, enums as a varint variant index):
//! 1. `epoch`: [`Epoch`] (u64);
//! 2. `position`: `Option<BinlogPosition>` as `FILE:OFFSET` text; `None`
//!    means "the transaction's own `end_position`" (the usual case);
//! 3. `gtid_position`: `Option<GtidPos>` as text; `None` means "exactly the
//!    transaction's GTID" (or empty when it has none): the usual case with
//!    one replication domain;
//! 4. `transaction`: [`Transaction`] as its serde derive lays it out
//!    (src/event.rs field and variant order).
//!
//! Compatibility: format 1 is frozen. A change to the layout of
//! [`Transaction`] (field order, types, enum variant order) or of
//! `RecordV1` needs a new format byte and a decoder for format 1 kept
//! beside it; `tests/queue_fixture.rs` reads records and a queue directory
//! written by this version and fails when they stop decoding to the same
//! values.
//!
//! Records are concatenated into *blocks* (see [`super`]); a block is
//! parsed record by record with [`RecordCursor`].

use serde::{Deserialize, Serialize};

use crate::event::Transaction;
use crate::position::{BinlogPosition, Epoch, GtidPos, Seqno};

/// The format byte of records written by this version.
pub const FORMAT_V1: u8 = 1;

/// Bytes of a record before its length varint: format byte and CRC.
const FIXED_HEADER: usize = 5;

/// The extractor's resume point after a stored transaction: where a
/// restarted extractor continues so that it neither skips nor repeats a
/// transaction. Stored inside the transaction's own record, so it is
/// written atomically with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractorProgress {
    /// Seqno of the last stored transaction; the next one gets
    /// `seqno + 1`.
    pub seqno: Seqno,
    /// The seqno at which the extraction run that stored it started.
    pub epoch: Epoch,
    /// Binlog position just after that transaction (`FILE:OFFSET`).
    pub position: BinlogPosition,
    /// MariaDB GTID position after that transaction (all domains; empty
    /// when the master logs no GTIDs).
    pub gtid_position: GtidPos,
}

impl ExtractorProgress {
    /// The progress right after `txn` for a run that started at `epoch`,
    /// when the GTID position holds only `txn`'s own GTID (one domain).
    pub fn after(txn: &Transaction, epoch: Epoch) -> ExtractorProgress {
        ExtractorProgress {
            seqno: txn.seqno,
            epoch,
            position: txn.end_position.clone(),
            gtid_position: own_gtid_position(txn),
        }
    }
}

fn own_gtid_position(txn: &Transaction) -> GtidPos {
    let mut pos = GtidPos::new();
    if let Some(g) = txn.gtid {
        pos.update(g);
    }
    pos
}

#[derive(Serialize)]
struct RecordRef<'a> {
    epoch: Epoch,
    position: Option<&'a BinlogPosition>,
    gtid_position: Option<&'a GtidPos>,
    transaction: &'a Transaction,
}

#[derive(Deserialize)]
struct RecordOwned {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    transaction: Transaction,
}

/// Why bytes are not a valid record. The caller adds the seqno and the
/// segment (see [`super::QueueError::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record's format byte is not one this version reads.
    #[error("unsupported record format {0} (this version reads format {FORMAT_V1})")]
    UnsupportedFormat(u8),
    /// The bytes are damaged or cut short.
    #[error("{0}")]
    Corrupt(String),
}

/// Appends the record of `txn` with `progress` to `out`. `scratch` is a
/// reusable buffer (cleared here).
///
/// # Errors
/// postcard's message if the transaction cannot be serialized (it always
/// can: every type in it is plain data).
pub fn encode_record(
    txn: &Transaction,
    progress: &ExtractorProgress,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let own_gtid = own_gtid_position(txn);
    let record = RecordRef {
        epoch: progress.epoch,
        position: (progress.position != txn.end_position).then_some(&progress.position),
        gtid_position: (progress.gtid_position != own_gtid).then_some(&progress.gtid_position),
        transaction: txn,
    };
    scratch.clear();
    let payload =
        postcard::to_extend(&record, std::mem::take(scratch)).map_err(|e| e.to_string())?;
    let start = out.len();
    out.push(FORMAT_V1);
    out.extend_from_slice(&[0; 4]);
    push_varint(out, payload.len() as u64);
    out.extend_from_slice(&payload);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&out[start..start + 1]);
    hasher.update(&out[start + FIXED_HEADER..]);
    let crc = hasher.finalize();
    out[start + 1..start + FIXED_HEADER].copy_from_slice(&crc.to_le_bytes());
    *scratch = payload;
    Ok(())
}

/// The record of `txn` with `progress`, as a new vector.
///
/// # Errors
/// See [`encode_record`].
pub fn record_bytes(txn: &Transaction, progress: &ExtractorProgress) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_record(txn, progress, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a LEB128 varint at the start of `bytes`: `(value, bytes used)`.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        let part = u64::from(b & 0x7f);
        if i == 9 && part > 1 {
            return None;
        }
        value |= part << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// One record located in a block: its whole bytes, checked against its
/// CRC.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// The format byte.
    pub format: u8,
    /// The postcard payload.
    pub payload: &'a [u8],
    /// Total bytes of the record (header and payload).
    pub len: usize,
}

/// Locates and checks (format, length, CRC) the record at the start of
/// `bytes`; the payload is not decoded.
///
/// # Errors
/// [`RecordError::UnsupportedFormat`] for an unknown format byte,
/// [`RecordError::Corrupt`] for a record cut short, a malformed length or
/// a CRC mismatch.
pub fn check_record(bytes: &[u8]) -> Result<RawRecord<'_>, RecordError> {
    let Some(&format) = bytes.first() else {
        return Err(RecordError::Corrupt("no record bytes".into()));
    };
    if format != FORMAT_V1 {
        return Err(RecordError::UnsupportedFormat(format));
    }
    if bytes.len() < FIXED_HEADER + 1 {
        return Err(RecordError::Corrupt(format!(
            "record header cut short: {} bytes",
            bytes.len()
        )));
    }
    let stored_crc = u32::from_le_bytes(bytes[1..FIXED_HEADER].try_into().expect("4 bytes"));
    let (len, used) = read_varint(&bytes[FIXED_HEADER..])
        .ok_or_else(|| RecordError::Corrupt("malformed payload length".into()))?;
    let start = FIXED_HEADER + used;
    let available = (bytes.len() - start) as u64;
    if len > available {
        return Err(RecordError::Corrupt(format!(
            "record cut short: payload length {len} bytes, {available} bytes present"
        )));
    }
    let end = start + len as usize;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..1]);
    hasher.update(&bytes[FIXED_HEADER..end]);
    let crc = hasher.finalize();
    if crc != stored_crc {
        return Err(RecordError::Corrupt(format!(
            "CRC mismatch: stored {stored_crc:#010x}, computed {crc:#010x} over {} bytes",
            end - FIXED_HEADER + 1
        )));
    }
    Ok(RawRecord {
        format,
        payload: &bytes[start..end],
        len: end,
    })
}

/// Decodes a checked record into its transaction and the progress after
/// it.
///
/// # Errors
/// [`RecordError::Corrupt`] when the payload is not a format-1 record or
/// has bytes left over (cannot happen for a record that passed its CRC
/// unless the writer was a different program).
pub fn decode_record(raw: &RawRecord<'_>) -> Result<(Transaction, ExtractorProgress), RecordError> {
    let record = decode_payload(raw)?;
    let txn = record.transaction;
    let progress = ExtractorProgress {
        seqno: txn.seqno,
        epoch: record.epoch,
        position: record.position.unwrap_or_else(|| txn.end_position.clone()),
        gtid_position: record
            .gtid_position
            .unwrap_or_else(|| own_gtid_position(&txn)),
    };
    Ok((txn, progress))
}

/// Decodes only the transaction of a checked record (the progress fields
/// are skipped).
///
/// # Errors
/// As [`decode_record`].
pub fn decode_transaction(raw: &RawRecord<'_>) -> Result<Transaction, RecordError> {
    decode_payload(raw).map(|r| r.transaction)
}

fn decode_payload(raw: &RawRecord<'_>) -> Result<RecordOwned, RecordError> {
    if raw.format != FORMAT_V1 {
        return Err(RecordError::UnsupportedFormat(raw.format));
    }
    let (record, rest): (RecordOwned, _) = postcard::take_from_bytes(raw.payload)
        .map_err(|e| RecordError::Corrupt(format!("payload does not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(RecordError::Corrupt(format!(
            "payload has {} bytes after the record",
            rest.len()
        )));
    }
    Ok(record)
}

/// Checks and decodes the single record that makes up `bytes`.
///
/// # Errors
/// See [`check_record`] and [`decode_record`]; also
/// [`RecordError::Corrupt`] when bytes follow the record.
pub fn decode_record_bytes(bytes: &[u8]) -> Result<(Transaction, ExtractorProgress), RecordError> {
    let raw = check_record(bytes)?;
    if raw.len != bytes.len() {
        return Err(RecordError::Corrupt(format!(
            "{} bytes after the record",
            bytes.len() - raw.len
        )));
    }
    decode_record(&raw)
}

/// Walks the records of a block (records concatenated), numbering them
/// from the block's first seqno.
#[derive(Debug, Clone)]
pub struct RecordCursor<'a> {
    bytes: &'a [u8],
    offset: usize,
    seqno: Seqno,
}

impl<'a> RecordCursor<'a> {
    /// A cursor at byte `offset` of `bytes`, where the record of `seqno`
    /// starts.
    pub fn new(bytes: &'a [u8], offset: usize, seqno: Seqno) -> RecordCursor<'a> {
        RecordCursor {
            bytes,
            offset,
            seqno,
        }
    }

    /// The seqno of the record at the cursor.
    pub fn seqno(&self) -> Seqno {
        self.seqno
    }

    /// The byte offset of the record at the cursor.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Whether the cursor is at the end of the block.
    pub fn at_end(&self) -> bool {
        self.offset >= self.bytes.len()
    }

    /// Moves past the record at the cursor reading only its header
    /// (format byte and length), without checking its CRC: a damaged
    /// record can be stepped over to reach the ones after it (whose own
    /// checks still guard against a wrong length).
    ///
    /// # Errors
    /// An unknown format byte, a malformed length, or a length beyond the
    /// block; the cursor does not move.
    pub fn skip(&mut self) -> Result<(), RecordError> {
        let bytes = &self.bytes[self.offset..];
        let Some(&format) = bytes.first() else {
            return Err(RecordError::Corrupt("no record bytes".into()));
        };
        if format != FORMAT_V1 {
            return Err(RecordError::UnsupportedFormat(format));
        }
        let (len, used) = bytes
            .get(FIXED_HEADER..)
            .and_then(read_varint)
            .ok_or_else(|| RecordError::Corrupt("malformed record header".into()))?;
        let total = (FIXED_HEADER + used) as u64 + len;
        if total > bytes.len() as u64 {
            return Err(RecordError::Corrupt(format!(
                "record cut short: payload length {len} bytes, {} bytes present",
                bytes.len() - FIXED_HEADER - used
            )));
        }
        self.offset += total as usize;
        self.seqno = Seqno(self.seqno.0 + 1);
        Ok(())
    }

    /// Checks the record at the cursor and moves past it.
    ///
    /// # Errors
    /// See [`check_record`]; the cursor does not move.
    pub fn next_raw(&mut self) -> Result<(Seqno, RawRecord<'a>), RecordError> {
        let raw = check_record(&self.bytes[self.offset..])?;
        let seqno = self.seqno;
        self.offset += raw.len;
        self.seqno = Seqno(self.seqno.0 + 1);
        Ok((seqno, raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Change, RowImage, RowKind, RowPair, RowsChange, Value};
    use crate::position::Gtid;

    fn txn(seqno: u64) -> Transaction {
        Transaction {
            seqno: Seqno(seqno),
            server_id: 1,
            gtid: Some(Gtid::new(0, 1, 100 + seqno)),
            commit_id: None,
            start_position: "mariadb-bin.000001:100".parse().unwrap(),
            end_position: "mariadb-bin.000001:500".parse().unwrap(),
            commit_timestamp: 1_700_000_000,
            shard: "s1".into(),
            tables: vec![],
            changes: vec![Change::Rows(RowsChange {
                table: 0,
                kind: RowKind::Insert,
                flags: 1,
                rows: vec![RowPair {
                    before: None,
                    after: Some(RowImage {
                        columns: vec![0, 1],
                        values: vec![Value::Int(-5), Value::Bytes(b"abc".to_vec())],
                    }),
                }],
            })],
        }
    }

    #[test]
    fn round_trip_with_derived_progress() {
        let t = txn(7);
        let p = ExtractorProgress::after(&t, Epoch(3));
        let bytes = record_bytes(&t, &p).unwrap();
        assert_eq!(bytes[0], FORMAT_V1);
        let (t2, p2) = decode_record_bytes(&bytes).unwrap();
        assert_eq!(t2, t);
        assert_eq!(p2, p);
    }

    #[test]
    fn round_trip_with_explicit_progress_is_larger() {
        let t = txn(7);
        let derived = record_bytes(&t, &ExtractorProgress::after(&t, Epoch(3))).unwrap();
        let mut p = ExtractorProgress::after(&t, Epoch(3));
        p.position = "mariadb-bin.000002:4".parse().unwrap();
        p.gtid_position = "0-1-107,5-9-1".parse().unwrap();
        let bytes = record_bytes(&t, &p).unwrap();
        assert!(bytes.len() > derived.len());
        assert_eq!(decode_record_bytes(&bytes).unwrap(), (t, p));
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        let t = txn(1);
        let bytes = record_bytes(&t, &ExtractorProgress::after(&t, Epoch(0))).unwrap();
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                let res = decode_record_bytes(&b);
                assert!(
                    res.is_err(),
                    "flip of bit {bit:#x} of byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncation_and_trailing_bytes_are_errors() {
        let t = txn(1);
        let bytes = record_bytes(&t, &ExtractorProgress::after(&t, Epoch(0))).unwrap();
        for n in 0..bytes.len() {
            assert!(decode_record_bytes(&bytes[..n]).is_err(), "cut at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode_record_bytes(&longer),
            Err(RecordError::Corrupt(m)) if m.contains("after the record")
        ));
    }

    #[test]
    fn unknown_format_is_reported() {
        let t = txn(1);
        let mut bytes = record_bytes(&t, &ExtractorProgress::after(&t, Epoch(0))).unwrap();
        bytes[0] = 2;
        assert_eq!(
            decode_record_bytes(&bytes).unwrap_err(),
            RecordError::UnsupportedFormat(2)
        );
    }

    #[test]
    fn varints() {
        for n in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut v = Vec::new();
            push_varint(&mut v, n);
            assert_eq!(read_varint(&v), Some((n, v.len())), "{n}");
            // The same bytes postcard writes for a u64.
            assert_eq!(postcard::to_allocvec(&n).unwrap(), v);
        }
        assert_eq!(read_varint(&[0x80; 10]), None);
        assert_eq!(read_varint(&[0xff, 0xff]), None);
    }

    #[test]
    fn cursor_walks_a_block() {
        let mut block = Vec::new();
        let mut scratch = Vec::new();
        for s in 10..14 {
            let t = txn(s);
            encode_record(
                &t,
                &ExtractorProgress::after(&t, Epoch(10)),
                &mut scratch,
                &mut block,
            )
            .unwrap();
        }
        let mut c = RecordCursor::new(&block, 0, Seqno(10));
        let mut seen = vec![];
        while !c.at_end() {
            let (s, raw) = c.next_raw().unwrap();
            let (t, _) = decode_record(&raw).unwrap();
            assert_eq!(t.seqno, s);
            seen.push(s.0);
        }
        assert_eq!(seen, vec![10, 11, 12, 13]);
    }
}
