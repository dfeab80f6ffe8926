//! The queue's record format: one stored transaction with the extractor's
//! progress after it.
//!
//! # Record, formats 1 to 3
//! ```text
//! offset  size      field
//! 0       1         format byte = 3 (FORMAT_V3; 1 or 2 in older queues)
//! 1       4         CRC-32 (IEEE 802.3, crc32fast), little endian, over
//!                   the format byte, the length bytes and the payload
//! 5       1..=10    payload length in bytes, unsigned LEB128 varint
//!                   (the varint of postcard's wire format)
//! 5+n     length    payload: postcard 1.x encoding of the record
//! ```
//! The record is, field by field in this order (postcard: no field names,
//! integers as varints, `Option` as a 0/1 byte then the value, strings and
//! byte strings length-prefixed, enums as a varint variant index). The
//! `Vec<u8>` fields (row values, statement text, annotations, user
//! variables) are serialized with `serde_bytes`, as one byte string; on the
//! wire that is the same as a sequence of `u8` (length varint, then the
//! bytes), so formats 1 and 2 are unchanged by it (tests/queue_fixture.rs).
//! The fields:
//! 1. `epoch`: [`Epoch`] (u64);
//! 2. `position`: `Option<BinlogPosition>` as `FILE:OFFSET` text; `None`
//!    means "the transaction's own `end_position`" (the usual case);
//! 3. `gtid_position`: `Option<GtidPos>` as text; `None` means "exactly the
//!    transaction's GTID" (or empty when it has none): the usual case with
//!    one replication domain;
//! 4. `transaction`: [`Transaction`] as its serde derive lays it out
//!    (src/event.rs field and variant order).
//!
//! Format 2 (written by this version) differs from format 1 in one field
//! only: [`crate::event::Statement`] ends with `thread_id:
//! Option<u32>` (the master session, for temporary tables). Format 1
//! records are still read (their statements get `thread_id: None`), by
//! the frozen layout in [`v1`].
//!
//! Format 3 (written by this version) adds a fifth field after the
//! transaction: `row_events`: `Option<RowEvents>`
//! ([`crate::event::RowEvents`]: the FORMAT_DESCRIPTION as a byte string,
//! then one byte string per rows change), the master's own events kept
//! for `[apply] method = "binlog"`; `None` when they were not kept.
//! Records of formats 1 and 2 read with `row_events: None`.
//!
//! Format 4 adds a sixth field after the row events: `fragment`:
//! `Option<Fragment>` ([`crate::event::Fragment`]: `index` as a varint,
//! `last` as a 0/1 byte). It is written only for the fragments of a large
//! transaction; a whole transaction is still written as format 3, so a
//! queue without fragments stays readable by the versions before it.
//!
//! Compatibility: formats 1 to 4 are frozen. A change to the layout of
//! [`Transaction`] (field order, types, enum variant order) or of the
//! record needs a new format byte and the older decoders kept beside it;
//! `tests/queue_fixture.rs` reads records and a queue directory written by
//! format 1 and records of format 2, and fails when they stop decoding to
//! the same values.
//!
//! Records are concatenated into *blocks* (see [`super`]); a block is
//! parsed record by record with [`RecordCursor`].

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::event::{Fragment, RowEvents, Transaction};
use crate::position::{BinlogPosition, Epoch, GtidPos, Seqno};

/// The format byte of records written before statements carried their
/// master session (read, never written).
pub const FORMAT_V1: u8 = 1;

/// The format byte of records written before records carried the
/// master's row events (read, never written).
pub const FORMAT_V2: u8 = 2;

/// The format byte of this version's records of whole transactions.
pub const FORMAT_V3: u8 = 3;

/// The format byte of this version's records of fragments
/// ([`crate::event::Fragment`]).
pub const FORMAT_V4: u8 = 4;

/// Whether this version reads records of `format`.
fn readable(format: u8) -> bool {
    (FORMAT_V1..=FORMAT_V4).contains(&format)
}

/// The format byte a record of `txn` is written with: 4 for a fragment,
/// 3 otherwise (so a queue without fragments stays readable by the
/// versions before format 4).
fn format_of(txn: &Transaction) -> u8 {
    if txn.fragment.is_some() {
        FORMAT_V4
    } else {
        FORMAT_V3
    }
}

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
    row_events: Option<&'a RowEvents>,
    /// Written only in format 4 (a fragment); a format-3 record ends
    /// before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    fragment: Option<&'a Fragment>,
}

/// A record of format 4 (this version's, for a fragment).
#[derive(Deserialize)]
struct RecordOwned {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    transaction: Transaction,
    row_events: Option<RowEvents>,
    fragment: Option<Fragment>,
}

impl RecordOwned {
    /// The transaction with its row events and fragment in place.
    fn into_parts(self) -> (Epoch, Option<BinlogPosition>, Option<GtidPos>, Transaction) {
        let mut txn = self.transaction;
        txn.row_events = self.row_events.map(std::sync::Arc::new);
        txn.fragment = self.fragment;
        (self.epoch, self.position, self.gtid_position, txn)
    }
}

/// A format-3 record: as [`RecordOwned`] without the fragment.
#[derive(Deserialize)]
struct RecordOwnedV3 {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    transaction: Transaction,
    row_events: Option<RowEvents>,
}

impl From<RecordOwnedV3> for RecordOwned {
    fn from(r: RecordOwnedV3) -> RecordOwned {
        RecordOwned {
            epoch: r.epoch,
            position: r.position,
            gtid_position: r.gtid_position,
            transaction: r.transaction,
            row_events: r.row_events,
            fragment: None,
        }
    }
}

/// A format-2 record: as [`RecordOwned`] without the row events.
#[derive(Deserialize)]
struct RecordOwnedV2 {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    transaction: Transaction,
}

impl From<RecordOwnedV2> for RecordOwned {
    fn from(r: RecordOwnedV2) -> RecordOwned {
        RecordOwned {
            epoch: r.epoch,
            position: r.position,
            gtid_position: r.gtid_position,
            transaction: r.transaction,
            row_events: None,
            fragment: None,
        }
    }
}

/// A format-1 record: as [`RecordOwned`] with the format-1 transaction.
#[derive(Deserialize)]
struct RecordOwnedV1 {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    transaction: v1::Transaction,
}

impl From<RecordOwnedV1> for RecordOwned {
    fn from(r: RecordOwnedV1) -> RecordOwned {
        RecordOwned {
            epoch: r.epoch,
            position: r.position,
            gtid_position: r.gtid_position,
            transaction: r.transaction.into(),
            row_events: None,
            fragment: None,
        }
    }
}

/// The frozen format-1 layout of the types that changed in format 2
/// (field for field as they were; the unchanged types are shared).
pub mod v1 {
    use serde::Deserialize;

    use crate::event::{RowsChange, SessionContext, TableInfo};
    use crate::position::{BinlogPosition, Gtid, Seqno};

    /// [`crate::event::Transaction`] of format 1.
    #[derive(Deserialize)]
    pub struct Transaction {
        seqno: Seqno,
        server_id: u32,
        gtid: Option<Gtid>,
        commit_id: Option<u64>,
        start_position: BinlogPosition,
        end_position: BinlogPosition,
        commit_timestamp: u32,
        shard: String,
        tables: Vec<TableInfo>,
        changes: Vec<Change>,
    }

    /// [`crate::event::Change`] of format 1.
    #[derive(Deserialize)]
    pub enum Change {
        /// Unchanged.
        Rows(RowsChange),
        /// Without `thread_id`.
        Statement(Statement),
        /// Unchanged.
        Annotation(#[serde(with = "serde_bytes")] Vec<u8>),
    }

    /// [`crate::event::Statement`] of format 1: no `thread_id`.
    #[derive(Deserialize)]
    pub struct Statement {
        #[serde(with = "serde_bytes")]
        sql: Vec<u8>,
        default_schema: Option<String>,
        context: SessionContext,
        error_code: u16,
    }

    impl From<Transaction> for crate::event::Transaction {
        fn from(t: Transaction) -> crate::event::Transaction {
            crate::event::Transaction {
                seqno: t.seqno,
                server_id: t.server_id,
                gtid: t.gtid,
                commit_id: t.commit_id,
                start_position: t.start_position,
                end_position: t.end_position,
                commit_timestamp: t.commit_timestamp,
                shard: t.shard,
                tables: t.tables,
                changes: t
                    .changes
                    .into_iter()
                    .map(|c| match c {
                        Change::Rows(r) => crate::event::Change::Rows(r),
                        Change::Annotation(a) => crate::event::Change::Annotation(a),
                        Change::Statement(s) => {
                            crate::event::Change::Statement(crate::event::Statement {
                                sql: s.sql,
                                default_schema: s.default_schema,
                                context: s.context,
                                error_code: s.error_code,
                                thread_id: None,
                            })
                        }
                    })
                    .collect(),
                row_events: None,
                fragment: None,
            }
        }
    }
}

/// Why bytes are not a valid record. The caller adds the seqno and the
/// segment (see [`super::QueueError::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record's format byte is not one this version reads.
    #[error(
        "unsupported record format {0} (this version reads formats {FORMAT_V1} to {FORMAT_V4})"
    )]
    UnsupportedFormat(u8),
    /// The bytes are damaged or cut short.
    #[error("{0}")]
    Corrupt(String),
}

/// Appends the record of `txn` with `progress` to `out`, serializing the
/// payload in place (no intermediate buffer).
///
/// # Errors
/// postcard's message if the transaction cannot be serialized (it always
/// can: every type in it is plain data).
pub fn encode_record(
    txn: &Transaction,
    progress: &ExtractorProgress,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let own_gtid = own_gtid_position(txn);
    let record = RecordRef {
        epoch: progress.epoch,
        position: (progress.position != txn.end_position).then_some(&progress.position),
        gtid_position: (progress.gtid_position != own_gtid).then_some(&progress.gtid_position),
        transaction: txn,
        row_events: txn.row_events.as_deref(),
        fragment: txn.fragment.as_ref(),
    };
    let start = out.len();
    // Header with room for a length varint of LEN_GUESS bytes (payloads of
    // 128 bytes to 16 KiB); the payload is serialized after it, and the
    // varint is moved into place when its length differs.
    const LEN_GUESS: usize = 2;
    out.push(format_of(txn));
    out.extend_from_slice(&[0; 4 + LEN_GUESS]);
    let payload_at = out.len();
    postcard::serialize_with_flavor(&record, VecTail(out)).map_err(|e| e.to_string())?;
    let payload_len = out.len() - payload_at;
    let mut varint = Vec::with_capacity(10);
    push_varint(&mut varint, payload_len as u64);
    let len_at = start + FIXED_HEADER;
    if varint.len() == LEN_GUESS {
        out[len_at..payload_at].copy_from_slice(&varint);
    } else {
        out.splice(len_at..payload_at, varint);
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&out[start..start + 1]);
    hasher.update(&out[start + FIXED_HEADER..]);
    let crc = hasher.finalize();
    out[start + 1..start + FIXED_HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// A postcard output that appends to a vector it borrows.
struct VecTail<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for VecTail<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// The record of `txn` with `progress`, as a new vector.
///
/// # Errors
/// See [`encode_record`].
pub fn record_bytes(txn: &Transaction, progress: &ExtractorProgress) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_record(txn, progress, &mut out)?;
    Ok(out)
}

/// Length in bytes of the record of `txn` with `progress` (header and
/// payload), computed without building it: one serialization pass that
/// only counts.
///
/// # Errors
/// See [`encode_record`].
pub fn record_len(txn: &Transaction, progress: &ExtractorProgress) -> Result<u64, String> {
    let own_gtid = own_gtid_position(txn);
    let record = record_ref(txn, progress, &own_gtid);
    let payload = postcard::experimental::serialized_size(&record).map_err(|e| e.to_string())?;
    let mut varint = Vec::with_capacity(10);
    push_varint(&mut varint, payload as u64);
    Ok((FIXED_HEADER + varint.len() + payload) as u64)
}

fn record_ref<'a>(
    txn: &'a Transaction,
    progress: &'a ExtractorProgress,
    own_gtid: &GtidPos,
) -> RecordRef<'a> {
    RecordRef {
        epoch: progress.epoch,
        position: (progress.position != txn.end_position).then_some(&progress.position),
        gtid_position: (progress.gtid_position != *own_gtid).then_some(&progress.gtid_position),
        transaction: txn,
        row_events: txn.row_events.as_deref(),
        fragment: txn.fragment.as_ref(),
    }
}

/// A postcard output that hashes the payload and writes it through.
struct HashingWriter<'w, W: Write> {
    out: &'w mut W,
    hasher: crc32fast::Hasher,
    written: u64,
    error: Option<std::io::Error>,
}

impl<W: Write> HashingWriter<'_, W> {
    fn extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.hasher.update(data);
        self.written += data.len() as u64;
        self.out.write_all(data).map_err(|e| {
            self.error = Some(e);
            postcard::Error::SerializeBufferFull
        })
    }
}

/// Writes the record of `txn` with `progress` to `out`, `len` bytes in all
/// (as [`record_len`] computed), serializing the payload straight into
/// `out` (never into one buffer of the record's size): the header is
/// written with a zero CRC, which is then written in place (`out` is
/// positioned at the record's start when called, and after it on
/// return).
///
/// # Errors
/// I/O errors of `out`; an [`std::io::ErrorKind::InvalidData`] error when
/// the payload does not have the length `len` implies.
pub fn write_record<W: Write + Seek>(
    txn: &Transaction,
    progress: &ExtractorProgress,
    len: u64,
    out: &mut W,
) -> std::io::Result<()> {
    let own_gtid = own_gtid_position(txn);
    let record = record_ref(txn, progress, &own_gtid);
    let start = out.stream_position()?;
    let mut header = vec![format_of(txn), 0, 0, 0, 0];
    // The payload length from the record length: the varint's own size
    // depends on it, so try each size.
    let payload_len = (1..=10u64)
        .filter_map(|n| len.checked_sub(FIXED_HEADER as u64 + n))
        .find(|&p| {
            let mut v = Vec::new();
            push_varint(&mut v, p);
            FIXED_HEADER as u64 + v.len() as u64 + p == len
        })
        .ok_or_else(|| invalid(format!("no payload length gives a record of {len} bytes")))?;
    push_varint(&mut header, payload_len);
    out.write_all(&header)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..1]);
    hasher.update(&header[FIXED_HEADER..]);
    let mut sink = HashingWriter {
        out,
        hasher,
        written: 0,
        error: None,
    };
    let result = postcard::serialize_with_flavor(&record, &mut sink);
    if let Some(e) = sink.error.take() {
        return Err(e);
    }
    result.map_err(|e| invalid(e.to_string()))?;
    if sink.written != payload_len {
        return Err(invalid(format!(
            "the payload took {} bytes, {payload_len} were counted",
            sink.written
        )));
    }
    let crc = sink.hasher.clone().finalize();
    let end = start + len;
    out.seek(SeekFrom::Start(start + 1))?;
    out.write_all(&crc.to_le_bytes())?;
    out.seek(SeekFrom::Start(end))?;
    Ok(())
}

impl<W: Write> postcard::ser_flavors::Flavor for &mut HashingWriter<'_, W> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.extend(data)
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.extend(&[data])
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// A postcard input reading from `R`, at most `remaining` bytes; values
/// that span reads are copied into one scratch buffer (the decoded types
/// own their bytes, so nothing borrows from the input).
struct ReadFlavor<R: Read> {
    input: R,
    remaining: u64,
    scratch: Vec<u8>,
    error: Option<std::io::Error>,
}

impl<R: Read> ReadFlavor<R> {
    fn fill(&mut self, ct: usize) -> postcard::Result<()> {
        if ct as u64 > self.remaining {
            return Err(postcard::Error::DeserializeUnexpectedEnd);
        }
        self.scratch.clear();
        self.scratch.resize(ct, 0);
        self.input.read_exact(&mut self.scratch).map_err(|e| {
            self.error = Some(e);
            postcard::Error::DeserializeUnexpectedEnd
        })?;
        self.remaining -= ct as u64;
        Ok(())
    }
}

impl<'de, R: Read + 'de> postcard::de_flavors::Flavor<'de> for ReadFlavor<R> {
    type Remainder = u64;
    type Source = ();

    fn pop(&mut self) -> postcard::Result<u8> {
        self.fill(1)?;
        Ok(self.scratch[0])
    }

    fn try_take_n(&mut self, _ct: usize) -> postcard::Result<&'de [u8]> {
        // Only borrowed `&str`/`&[u8]` fields ask for this; records hold
        // none.
        Err(postcard::Error::DeserializeBadEncoding)
    }

    fn try_take_n_temp<'a>(&'a mut self, ct: usize) -> postcard::Result<&'a [u8]>
    where
        'de: 'a,
    {
        self.fill(ct)?;
        Ok(&self.scratch)
    }

    fn finalize(self) -> postcard::Result<u64> {
        Ok(self.remaining)
    }
}

/// Checks and decodes the record stored alone in the file at `path` (an
/// external record, see [`super::segment`]), which must be `len` bytes
/// long: a first pass checks its header and CRC, a second decodes it
/// straight from the file, so the record is never held whole in memory
/// (only the decoded transaction is). With `head_only`, only the progress
/// and the transaction's first fields are decoded; the returned
/// transaction then has no tables and no changes.
///
/// # Errors
/// [`RecordError::Corrupt`] for a file of another length, a damaged or
/// cut record, or an I/O error reading it;
/// [`RecordError::UnsupportedFormat`].
pub fn read_record_file(
    path: &Path,
    len: u64,
    head_only: bool,
) -> Result<(Transaction, ExtractorProgress), RecordError> {
    let io =
        |e: std::io::Error| RecordError::Corrupt(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(io)?;
    let actual = file.metadata().map_err(io)?.len();
    if actual != len {
        return Err(RecordError::Corrupt(format!(
            "its file {} holds {actual} bytes, the record is {len} bytes",
            path.display()
        )));
    }
    let mut input = std::io::BufReader::with_capacity(64 << 10, file);
    let mut head = [0u8; FIXED_HEADER + 10];
    let n = (len as usize).min(head.len());
    input.read_exact(&mut head[..n]).map_err(io)?;
    let head = &head[..n];
    let Some(&format) = head.first() else {
        return Err(RecordError::Corrupt("no record bytes".into()));
    };
    if !readable(format) {
        return Err(RecordError::UnsupportedFormat(format));
    }
    let stored_crc = u32::from_le_bytes(
        head.get(1..FIXED_HEADER)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| RecordError::Corrupt("record header cut short".into()))?,
    );
    let (payload_len, used) = read_varint(&head[FIXED_HEADER.min(head.len())..])
        .ok_or_else(|| RecordError::Corrupt("malformed payload length".into()))?;
    let payload_start = (FIXED_HEADER + used) as u64;
    if payload_start + payload_len != len {
        return Err(RecordError::Corrupt(format!(
            "record of {len} bytes with a payload length of {payload_len} bytes"
        )));
    }
    // Pass 1: the CRC over the format byte, the length and the payload.
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&head[..1]);
    hasher.update(&head[FIXED_HEADER..]);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let got = input.read(&mut buf).map_err(io)?;
        if got == 0 {
            break;
        }
        hasher.update(&buf[..got]);
    }
    drop(buf);
    let crc = hasher.finalize();
    if crc != stored_crc {
        return Err(RecordError::Corrupt(format!(
            "CRC mismatch: stored {stored_crc:#010x}, computed {crc:#010x} over {} bytes",
            len - FIXED_HEADER as u64 + 1
        )));
    }
    // Pass 2: decode from the file.
    input.seek(SeekFrom::Start(payload_start)).map_err(io)?;
    let mut de = postcard::Deserializer::from_flavor(ReadFlavor {
        input,
        remaining: payload_len,
        scratch: Vec::new(),
        error: None,
    });
    let bad = |e: postcard::Error| RecordError::Corrupt(format!("payload does not decode: {e}"));
    if head_only {
        let record = RecordHead::deserialize(&mut de).map_err(bad)?;
        let txn = Transaction {
            seqno: record.seqno,
            server_id: record.server_id,
            gtid: record.gtid,
            commit_id: record.commit_id,
            start_position: record.start_position,
            end_position: record.end_position,
            commit_timestamp: 0,
            shard: String::new(),
            tables: Vec::new(),
            changes: Vec::new(),
            row_events: None,
            fragment: None,
        };
        let progress = progress_of(&txn, record.epoch, record.position, record.gtid_position);
        return Ok((txn, progress));
    }
    let record: RecordOwned = match format {
        FORMAT_V1 => RecordOwnedV1::deserialize(&mut de).map_err(bad)?.into(),
        FORMAT_V2 => RecordOwnedV2::deserialize(&mut de).map_err(bad)?.into(),
        FORMAT_V3 => RecordOwnedV3::deserialize(&mut de).map_err(bad)?.into(),
        _ => RecordOwned::deserialize(&mut de).map_err(bad)?,
    };
    let rest = de.finalize().map_err(bad)?;
    if rest != 0 {
        return Err(RecordError::Corrupt(format!(
            "payload has {rest} bytes after the record"
        )));
    }
    let (epoch, position, gtid_position, txn) = record.into_parts();
    let progress = progress_of(&txn, epoch, position, gtid_position);
    Ok((txn, progress))
}

/// The first fields of a record: its progress and what the progress is
/// derived from.
#[derive(Deserialize)]
struct RecordHead {
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
    seqno: Seqno,
    server_id: u32,
    gtid: Option<crate::position::Gtid>,
    commit_id: Option<u64>,
    start_position: BinlogPosition,
    end_position: BinlogPosition,
}

fn progress_of(
    txn: &Transaction,
    epoch: Epoch,
    position: Option<BinlogPosition>,
    gtid_position: Option<GtidPos>,
) -> ExtractorProgress {
    ExtractorProgress {
        seqno: txn.seqno,
        epoch,
        position: position.unwrap_or_else(|| txn.end_position.clone()),
        gtid_position: gtid_position.unwrap_or_else(|| own_gtid_position(txn)),
    }
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
    if !readable(format) {
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
/// [`RecordError::Corrupt`] when the payload is not a record of its format or
/// has bytes left over (cannot happen for a record that passed its CRC
/// unless the writer was a different program).
pub fn decode_record(raw: &RawRecord<'_>) -> Result<(Transaction, ExtractorProgress), RecordError> {
    let (epoch, position, gtid_position, txn) = decode_payload(raw)?.into_parts();
    let progress = progress_of(&txn, epoch, position, gtid_position);
    Ok((txn, progress))
}

/// Decodes only the transaction of a checked record (the progress fields
/// are skipped).
///
/// # Errors
/// As [`decode_record`].
pub fn decode_transaction(raw: &RawRecord<'_>) -> Result<Transaction, RecordError> {
    decode_payload(raw).map(|r| r.into_parts().3)
}

fn decode_payload(raw: &RawRecord<'_>) -> Result<RecordOwned, RecordError> {
    let bad = |e: postcard::Error| RecordError::Corrupt(format!("payload does not decode: {e}"));
    let (record, rest) = match raw.format {
        FORMAT_V1 => {
            let (record, rest): (RecordOwnedV1, _) =
                postcard::take_from_bytes(raw.payload).map_err(bad)?;
            (record.into(), rest)
        }
        FORMAT_V2 => {
            let (record, rest): (RecordOwnedV2, _) =
                postcard::take_from_bytes(raw.payload).map_err(bad)?;
            (record.into(), rest)
        }
        FORMAT_V3 => {
            let (record, rest): (RecordOwnedV3, _) =
                postcard::take_from_bytes(raw.payload).map_err(bad)?;
            (record.into(), rest)
        }
        FORMAT_V4 => postcard::take_from_bytes::<RecordOwned>(raw.payload).map_err(bad)?,
        other => return Err(RecordError::UnsupportedFormat(other)),
    };
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
        if !readable(format) {
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
            row_events: None,
            fragment: None,
        }
    }

    #[test]
    fn round_trip_with_derived_progress() {
        let t = txn(7);
        let p = ExtractorProgress::after(&t, Epoch(3));
        let bytes = record_bytes(&t, &p).unwrap();
        assert_eq!(bytes[0], FORMAT_V3);
        let (t2, p2) = decode_record_bytes(&bytes).unwrap();
        assert_eq!(t2, t);
        assert_eq!(p2, p);
    }

    /// A fragment is written as format 4: format 3's fields, then the
    /// fragment; whole transactions stay format 3. Both ways of writing
    /// and reading agree.
    #[test]
    fn a_fragment_is_format_4_and_round_trips() {
        let whole = txn(7);
        let mut t = whole.clone();
        t.fragment = Some(crate::event::Fragment {
            index: 300,
            last: false,
        });
        let mut p = ExtractorProgress::after(&t, Epoch(3));
        p.position = "mariadb-bin.000001:100".parse().unwrap();
        let bytes = record_bytes(&t, &p).unwrap();
        assert_eq!(bytes[0], FORMAT_V4);
        let v3 = record_bytes(&whole, &p).unwrap();
        assert_eq!(v3[0], FORMAT_V3);
        // The payload: format 3's, then Some, index 300 (varint), false.
        let payload =
            |b: &[u8]| b[FIXED_HEADER + read_varint(&b[FIXED_HEADER..]).unwrap().1..].to_vec();
        let mut expected = payload(&v3);
        expected.extend_from_slice(&[1, 0xac, 0x02, 0]);
        assert_eq!(payload(&bytes), expected);
        assert_eq!(decode_record_bytes(&bytes).unwrap(), (t.clone(), p.clone()));
        let len = record_len(&t, &p).unwrap();
        let mut file = std::io::Cursor::new(Vec::new());
        write_record(&t, &p, len, &mut file).unwrap();
        assert_eq!(file.get_ref(), &bytes);
        let dir = std::env::temp_dir().join(format!("shardrep-codec-v4-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("record");
        std::fs::write(&path, &bytes).unwrap();
        let read = read_record_file(&path, len, false).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read, (t, p));
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
        bytes[0] = 5;
        assert_eq!(
            decode_record_bytes(&bytes).unwrap_err(),
            RecordError::UnsupportedFormat(5)
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

    /// Payloads whose length varint is 1, 2 and 3 bytes long (the encoder
    /// guesses 2 and moves the payload when it is not): the same bytes as
    /// serializing the payload first, and read back whole.
    #[test]
    fn length_varints_of_every_size_are_minimal_and_read_back() {
        for len in [
            0usize, 60, 100, 127, 128, 200, 16_200, 16_383, 16_384, 20_000, 2_100_000,
        ] {
            let mut t = txn(7);
            t.changes.push(Change::Annotation(vec![b'x'; len]));
            let p = ExtractorProgress::after(&t, Epoch(3));
            let mut out = vec![9, 9];
            encode_record(&t, &p, &mut out).unwrap();
            assert_eq!(&out[..2], &[9, 9]);
            let own = own_gtid_position(&t);
            let payload = postcard::to_allocvec(&record_ref(&t, &p, &own)).unwrap();
            let mut header_len = Vec::new();
            push_varint(&mut header_len, payload.len() as u64);
            assert_eq!(
                out.len() - 2,
                FIXED_HEADER + header_len.len() + payload.len(),
                "{len}"
            );
            assert_eq!(
                &out[2 + FIXED_HEADER..2 + FIXED_HEADER + header_len.len()],
                &header_len[..]
            );
            assert_eq!(&out[2 + FIXED_HEADER + header_len.len()..], &payload[..]);
            assert_eq!(record_len(&t, &p).unwrap(), (out.len() - 2) as u64);
            let (back, progress) = decode_record_bytes(&out[2..]).unwrap();
            assert_eq!(back, t);
            assert_eq!(progress, p);
        }
    }

    #[test]
    fn cursor_walks_a_block() {
        let mut block = Vec::new();
        for s in 10..14 {
            let t = txn(s);
            encode_record(&t, &ExtractorProgress::after(&t, Epoch(10)), &mut block).unwrap();
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
