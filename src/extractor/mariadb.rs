//! MariaDB's own event types (160..), decoded by hand from the event body
//! (common header and checksum trailer already removed by
//! the `decode` module's `Decoder`), following MariaDB's knowledge base
//! ("ANNOTATE_ROWS_EVENT", "BINLOG_CHECKPOINT_EVENT", "GTID_EVENT",
//! "GTID_LIST_EVENT", "START_ENCRYPTION_EVENT", "Compressed Binary Log") and
//! the server source (`sql/log_event.cc`):
//!
//! - ANNOTATE_ROWS (160): no post-header; the body is the SQL text of the
//!   following rows events.
//! - BINLOG_CHECKPOINT (161): post-header `binlog_file_len` u32; then the
//!   file name.
//! - GTID (162): `seq_no` u64, `domain_id` u32, `flags2` u8; `commit_id` u64
//!   when `FL_GROUP_COMMIT_ID`; the XA xid (`formatID` u32, `gtrid_length`
//!   u8, `bqual_length` u8, data) when `FL_PREPARED_XA | FL_COMPLETED_XA`;
//!   then, when bytes remain, `flags_extra` u8 (`extra_engines` u8 when
//!   `FL_EXTRA_MULTI_ENGINE_E1`, the START ALTER `seq_no` u64 when
//!   `FL_COMMIT_ALTER_E1 | FL_ROLLBACK_ALTER_E1`); zero-padded to 19 bytes.
//! - GTID_LIST (163): count u32 (low 28 bits; the high 4 bits are flags),
//!   then `count` × (domain u32, server u32, seq_no u64).
//! - START_ENCRYPTION (164): the rest of the file is encrypted; the decoder
//!   reports [`ExtractError::Encrypted`](super::ExtractError::Encrypted).
//! - QUERY_COMPRESSED (165) and WRITE/UPDATE/DELETE_ROWS_COMPRESSED, v1
//!   (166-168) and v2 (169-171), written with `log_bin_compress=ON`: the
//!   event is its plain counterpart (QUERY, 23-25, 30-32) with one part
//!   compressed — the SQL text of a query (after the NUL of the default
//!   schema), the row data of a rows event (after the column count and the
//!   column bitmaps). A compressed part starts with a header byte (bit 7 set,
//!   bits 4-6 the algorithm, 0 = zlib; low 3 bits the number of bytes of the
//!   uncompressed length), the uncompressed length big-endian, then the zlib
//!   stream.

use crate::position::Gtid;

use super::binlog::{event_type, Reader};
use super::compression::uncompress;
use super::EventBody;

/// GTID flag: no terminating COMMIT/XID (standalone DDL or statement).
pub const FL_STANDALONE: u8 = 1;
/// GTID flag: the event group was group-committed; a commit id follows.
pub const FL_GROUP_COMMIT_ID: u8 = 2;
/// GTID flag: the event group can be rolled back (transactional engines).
pub const FL_TRANSACTIONAL: u8 = 4;
/// GTID flag: may be applied in parallel (optimistic parallel replication).
pub const FL_ALLOW_PARALLEL: u8 = 8;
/// GTID flag: the transaction waited on a row lock on the master.
pub const FL_WAITED: u8 = 16;
/// GTID flag: the event group is DDL.
pub const FL_DDL: u8 = 32;
/// GTID flag: XA transaction prepared (XA PREPARE); the xid follows.
pub const FL_PREPARED_XA: u8 = 64;
/// GTID flag: XA transaction completed (XA COMMIT/ROLLBACK); the xid follows.
pub const FL_COMPLETED_XA: u8 = 128;

/// GTID extra flag: the transaction involved several engines.
const FL_EXTRA_MULTI_ENGINE_E1: u8 = 1;
/// GTID extra flags: COMMIT/ROLLBACK of a two-phase ALTER; its START ALTER
/// seq_no follows.
const FL_COMMIT_ALTER_E1: u8 = 4;
const FL_ROLLBACK_ALTER_E1: u8 = 8;

/// Post-header length of GTID (`GTID_HEADER_LEN`).
const GTID_HEADER_LEN: usize = 19;
/// Largest XA gtrid / bqual length (`MAXGTRIDSIZE`, `MAXBQUALSIZE`).
const XA_MAX_PART: u8 = 64;
/// Size of one GTID_LIST element.
const GTID_LIST_ELEMENT: usize = 16;

/// An XA transaction id (`XID`) from a GTID event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XaXid {
    /// `formatID`.
    pub format_id: u32,
    /// Global transaction id part.
    pub gtrid: Vec<u8>,
    /// Branch qualifier part.
    pub bqual: Vec<u8>,
}

/// Everything a MariaDB GTID event carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MariadbGtidEvent {
    /// `domain-server-seq` (server id from the event header).
    pub gtid: Gtid,
    /// Group-commit id (`FL_GROUP_COMMIT_ID`).
    pub commit_id: Option<u64>,
    /// `flags2` (`FL_*` constants of this module).
    pub flags: u8,
    /// XA xid (`FL_PREPARED_XA | FL_COMPLETED_XA`).
    pub xa_xid: Option<XaXid>,
    /// `flags_extra` (0 when absent).
    pub flags_extra: u8,
    /// Number of extra engines (`FL_EXTRA_MULTI_ENGINE_E1`).
    pub extra_engines: Option<u8>,
    /// seq_no of the START ALTER a COMMIT/ROLLBACK ALTER completes.
    pub start_alter_seq_no: Option<u64>,
}

impl MariadbGtidEvent {
    /// Whether the event group has no terminating COMMIT/XID.
    pub fn standalone(&self) -> bool {
        self.flags & FL_STANDALONE != 0
    }

    /// The [`EventBody::MariadbGtid`] of this event.
    pub fn into_body(self) -> EventBody {
        EventBody::MariadbGtid {
            gtid: self.gtid,
            commit_id: self.commit_id,
            flags: self.flags,
        }
    }
}

/// ANNOTATE_ROWS: the whole body is the SQL text.
pub fn parse_annotate_rows(body: &[u8]) -> Vec<u8> {
    body.to_vec()
}

/// BINLOG_CHECKPOINT: `binlog_file_len` u32 (post-header), then the name.
pub fn parse_binlog_checkpoint(body: &[u8], post_header_len: usize) -> Result<EventBody, String> {
    if post_header_len < 4 {
        return Err(format!(
            "post-header length {post_header_len}, expected at least 4"
        ));
    }
    let mut r = Reader::new(body);
    let len = r.u32("binlog_file_len")? as usize;
    r.bytes(post_header_len - 4, "rest of the post-header")?;
    let name = r.bytes(len, "binlog file name")?;
    let file = String::from_utf8(name.to_vec())
        .map_err(|_| format!("binlog file name {name:?} is not UTF-8"))?;
    Ok(EventBody::BinlogCheckpoint { file })
}

/// GTID (162); `server_id` is the event header's.
pub fn parse_gtid(
    body: &[u8],
    post_header_len: usize,
    server_id: u32,
) -> Result<MariadbGtidEvent, String> {
    if post_header_len < GTID_HEADER_LEN {
        return Err(format!(
            "post-header length {post_header_len}, expected at least {GTID_HEADER_LEN}"
        ));
    }
    if body.len() < post_header_len {
        return Err(format!(
            "{} bytes, expected at least the {post_header_len}-byte post-header",
            body.len()
        ));
    }
    let mut r = Reader::new(body);
    let seq_no = r.u64("seq_no")?;
    let domain_id = r.u32("domain_id")?;
    let flags = r.u8("flags2")?;
    let commit_id = if flags & FL_GROUP_COMMIT_ID != 0 {
        Some(r.u64("commit_id")?)
    } else {
        None
    };
    let xa_xid = if flags & (FL_PREPARED_XA | FL_COMPLETED_XA) != 0 {
        let format_id = r.u32("XA formatID")?;
        let gtrid_len = r.u8("XA gtrid_length")?;
        let bqual_len = r.u8("XA bqual_length")?;
        if gtrid_len > XA_MAX_PART || bqual_len > XA_MAX_PART {
            return Err(format!(
                "XA gtrid_length {gtrid_len} / bqual_length {bqual_len}, expected at most \
                 {XA_MAX_PART} each"
            ));
        }
        let gtrid = r.bytes(usize::from(gtrid_len), "XA gtrid")?.to_vec();
        let bqual = r.bytes(usize::from(bqual_len), "XA bqual")?.to_vec();
        Some(XaXid {
            format_id,
            gtrid,
            bqual,
        })
    } else {
        None
    };
    let mut flags_extra = 0;
    let mut extra_engines = None;
    let mut start_alter_seq_no = None;
    if r.remaining() > 0 {
        flags_extra = r.u8("flags_extra")?;
        if flags_extra & FL_EXTRA_MULTI_ENGINE_E1 != 0 {
            extra_engines = Some(r.u8("extra_engines")?);
        }
        if flags_extra & (FL_COMMIT_ALTER_E1 | FL_ROLLBACK_ALTER_E1) != 0 {
            start_alter_seq_no = Some(r.u64("start alter seq_no")?);
        }
    }
    // What remains is the zero padding up to GTID_HEADER_LEN (or fields of
    // a later server version, which change nothing shardrep uses).
    Ok(MariadbGtidEvent {
        gtid: Gtid::new(domain_id, server_id, seq_no),
        commit_id,
        flags,
        xa_xid,
        flags_extra,
        extra_engines,
        start_alter_seq_no,
    })
}

/// GTID_LIST (163).
pub fn parse_gtid_list(body: &[u8], post_header_len: usize) -> Result<Vec<Gtid>, String> {
    if post_header_len < 4 {
        return Err(format!(
            "post-header length {post_header_len}, expected at least 4"
        ));
    }
    let mut r = Reader::new(body);
    let count = (r.u32("count")? & ((1 << 28) - 1)) as usize;
    r.bytes(post_header_len - 4, "rest of the post-header")?;
    if r.remaining() < count * GTID_LIST_ELEMENT {
        return Err(format!(
            "{count} GTIDs need {} bytes, {} left",
            count * GTID_LIST_ELEMENT,
            r.remaining()
        ));
    }
    let mut list = Vec::with_capacity(count);
    for _ in 0..count {
        let domain_id = r.u32("domain_id")?;
        let server_id = r.u32("server_id")?;
        let seq_no = r.u64("seq_no")?;
        list.push(Gtid::new(domain_id, server_id, seq_no));
    }
    Ok(list)
}

/// XA_PREPARE (38, `XA_prepare_log_event`): `one_phase` u8, then the xid
/// as MariaDB's `XID` struct: `formatID` u32 (signed), `gtrid_length`
/// u32, `bqual_length` u32, then gtrid and bqual bytes (each at most 64,
/// as `XIDDATASIZE` 128 in all). No post-header.
pub fn parse_xa_prepare(body: &[u8]) -> Result<EventBody, String> {
    let mut r = Reader::new(body);
    let one_phase = r.u8("one_phase")? != 0;
    let format_id = i64::from(r.u32("formatID")? as i32);
    let gtrid_length = r.u32("gtrid_length")? as usize;
    let bqual_length = r.u32("bqual_length")? as usize;
    if gtrid_length > 64 || bqual_length > 64 {
        return Err(format!(
            "xid lengths gtrid {gtrid_length} and bqual {bqual_length} exceed 64 bytes"
        ));
    }
    let gtrid = r.bytes(gtrid_length, "gtrid")?.to_vec();
    let bqual = r.bytes(bqual_length, "bqual")?.to_vec();
    r.finish()?;
    Ok(EventBody::XaPrepare {
        one_phase,
        xid: crate::xa::Xid {
            format_id,
            gtrid,
            bqual,
        },
    })
}

/// The body of the QUERY that a QUERY_COMPRESSED body stands for: the
/// post-header, status variables and default schema as they are, the SQL
/// text decompressed.
pub fn uncompress_query(body: &[u8], post_header_len: usize) -> Result<Vec<u8>, String> {
    if post_header_len < 13 {
        return Err(format!(
            "post-header length {post_header_len}, expected at least 13"
        ));
    }
    let mut r = Reader::new(body);
    r.bytes(8, "thread id and exec time")?;
    let db_len = usize::from(r.u8("schema length")?);
    r.u16("error code")?;
    let status_len = usize::from(r.u16("status variables length")?);
    let prefix = post_header_len + status_len + db_len + 1;
    if body.len() <= prefix {
        return Err(format!(
            "{} bytes, expected compressed SQL text after byte {prefix}",
            body.len()
        ));
    }
    let sql = uncompress(&body[prefix..]).map_err(|e| format!("compressed SQL text: {e}"))?;
    let mut plain = Vec::with_capacity(prefix + sql.len());
    plain.extend_from_slice(&body[..prefix]);
    plain.extend_from_slice(&sql);
    Ok(plain)
}

/// The plain rows event a compressed one stands for: its type code
/// (WRITE/UPDATE/DELETE_ROWS v1 or v2) and body, with the row data
/// decompressed.
pub fn uncompress_rows(
    body: &[u8],
    type_code: u8,
    post_header_len: usize,
) -> Result<(u8, Vec<u8>), String> {
    use event_type::*;
    let (plain_type, v2) = match type_code {
        MARIADB_WRITE_ROWS_COMPRESSED_V1 => (WRITE_ROWS_V1, false),
        MARIADB_UPDATE_ROWS_COMPRESSED_V1 => (UPDATE_ROWS_V1, false),
        MARIADB_DELETE_ROWS_COMPRESSED_V1 => (DELETE_ROWS_V1, false),
        MARIADB_WRITE_ROWS_COMPRESSED_V2 => (WRITE_ROWS_V2, true),
        MARIADB_UPDATE_ROWS_COMPRESSED_V2 => (UPDATE_ROWS_V2, true),
        MARIADB_DELETE_ROWS_COMPRESSED_V2 => (DELETE_ROWS_V2, true),
        other => return Err(format!("type {other} is not a compressed rows event")),
    };
    let mut r = Reader::new(body);
    if v2 {
        // table id, flags, then the extra data whose length (itself
        // included) ends the post-header.
        if post_header_len < 2 {
            return Err(format!(
                "post-header length {post_header_len}, expected at least 2"
            ));
        }
        r.bytes(post_header_len - 2, "table id and flags")?;
        let extra = usize::from(r.u16("extra data length")?);
        if extra < 2 {
            return Err(format!("extra data length {extra}, expected at least 2"));
        }
        r.bytes(extra - 2, "extra data")?;
    } else {
        r.bytes(post_header_len, "post-header")?;
    }
    let width = r.lenenc("column count")?;
    let bitmap = usize::try_from(width.div_ceil(8))
        .map_err(|_| format!("column count {width} is too large"))?;
    let bitmaps = if matches!(plain_type, UPDATE_ROWS_V1 | UPDATE_ROWS_V2) {
        2
    } else {
        1
    };
    for _ in 0..bitmaps {
        r.bytes(bitmap, "columns bitmap")?;
    }
    let prefix = r.offset();
    if body.len() <= prefix {
        return Err(format!(
            "{} bytes, expected compressed row data after byte {prefix}",
            body.len()
        ));
    }
    let rows = uncompress(&body[prefix..]).map_err(|e| format!("compressed row data: {e}"))?;
    let mut plain = Vec::with_capacity(prefix + rows.len());
    plain.extend_from_slice(&body[..prefix]);
    plain.extend_from_slice(&rows);
    Ok((plain_type, plain))
}

#[cfg(test)]
#[path = "mariadb_tests.rs"]
mod tests;
