//! MariaDB's own event types (160..), decoded by hand from the event body
//! (common header and checksum trailer already removed by
//! [`super::decode::Decoder`]), following MariaDB's knowledge base
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
mod tests {
    use super::*;
    use crate::extractor::fixtures::fixture_event;
    use std::io::Write;

    /// The body of a fixture event (header and CRC32 trailer removed).
    fn body_of(dir: &str, offset: u64) -> Vec<u8> {
        let raw = fixture_event(dir, "mariadb-bin.000001", offset);
        raw.bytes[19..raw.bytes.len() - 4].to_vec()
    }

    /// XA_PREPARE: the fixture's xid; a negative formatID; truncated and
    /// oversized bodies are clear errors.
    #[test]
    fn xa_prepare_body() {
        let body = body_of("xa", 933);
        match parse_xa_prepare(&body).unwrap() {
            EventBody::XaPrepare { one_phase, xid } => {
                assert!(!one_phase);
                assert_eq!(xid.to_sql(), "X'66782d6774726964',X'66782d627175616c',7");
            }
            other => panic!("{other:?}"),
        }
        let mut negative = vec![1];
        negative.extend_from_slice(&(-2i32).to_le_bytes());
        negative.extend_from_slice(&1u32.to_le_bytes());
        negative.extend_from_slice(&0u32.to_le_bytes());
        negative.push(b'g');
        match parse_xa_prepare(&negative).unwrap() {
            EventBody::XaPrepare { one_phase, xid } => {
                assert!(one_phase);
                assert_eq!(xid.to_sql(), "X'67',X'',-2");
            }
            other => panic!("{other:?}"),
        }
        let err = parse_xa_prepare(&body[..body.len() - 1]).unwrap_err();
        assert!(err.contains("truncated bqual"), "{err}");
        let mut long = body.clone();
        long.push(0);
        assert!(parse_xa_prepare(&long)
            .unwrap_err()
            .contains("unexpected bytes"));
        let mut oversized = body.clone();
        oversized[5..9].copy_from_slice(&65u32.to_le_bytes());
        let err = parse_xa_prepare(&oversized).unwrap_err();
        assert!(err.contains("gtrid 65"), "{err}");
    }

    fn gtid_body(seq: u64, domain: u32, flags: u8, tail: &[u8]) -> Vec<u8> {
        let mut b = seq.to_le_bytes().to_vec();
        b.extend_from_slice(&domain.to_le_bytes());
        b.push(flags);
        b.extend_from_slice(tail);
        while b.len() < GTID_HEADER_LEN {
            b.push(0);
        }
        b
    }

    #[test]
    fn gtid_standalone_and_transactional() {
        let g = parse_gtid(&gtid_body(100, 2, FL_STANDALONE | FL_DDL, &[]), 19, 7).unwrap();
        assert_eq!(g.gtid.to_string(), "2-7-100");
        assert!(g.standalone());
        assert_eq!(
            (g.commit_id, g.xa_xid.clone(), g.flags_extra),
            (None, None, 0)
        );
        assert_eq!(
            g.into_body(),
            EventBody::MariadbGtid {
                gtid: Gtid::new(2, 7, 100),
                commit_id: None,
                flags: FL_STANDALONE | FL_DDL
            }
        );
        let g = parse_gtid(&gtid_body(5, 0, FL_TRANSACTIONAL, &[]), 19, 1).unwrap();
        assert!(!g.standalone());
    }

    #[test]
    fn gtid_commit_id() {
        let flags = FL_GROUP_COMMIT_ID | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL;
        let g = parse_gtid(&gtid_body(9, 0, flags, &0xABCDu64.to_le_bytes()), 19, 1).unwrap();
        assert_eq!(g.commit_id, Some(0xABCD));
        // FL_GROUP_COMMIT_ID in a 19-byte body: only 6 bytes for 8.
        let mut short = gtid_body(9, 0, flags, &[]);
        short.truncate(19);
        let err = parse_gtid(&short, 19, 1).unwrap_err();
        assert!(err.contains("truncated commit_id"), "{err}");
        // The captured group commit: two GTIDs with the same commit id.
        let a = parse_gtid(&body_of("gcommit", 621), 19, 1).unwrap();
        let b = parse_gtid(&body_of("gcommit", 837), 19, 1).unwrap();
        assert_eq!(a.gtid.to_string(), "0-1-3");
        assert_eq!(b.gtid.to_string(), "0-1-4");
        assert!(a.commit_id.is_some());
        assert_eq!(a.commit_id, b.commit_id);
    }

    #[test]
    fn gtid_xa_xid_and_extra_flags() {
        // Captured XA PREPARE: prepared flag, xid, multi-engine extra flag.
        let g = parse_gtid(&body_of("xa", 621), 19, 1).unwrap();
        assert_eq!(g.gtid.to_string(), "0-1-3");
        assert_eq!(
            g.flags,
            FL_PREPARED_XA | FL_TRANSACTIONAL | FL_ALLOW_PARALLEL
        );
        let xid = XaXid {
            format_id: 7,
            gtrid: b"fx-gtrid".to_vec(),
            bqual: b"fx-bqual".to_vec(),
        };
        assert_eq!(g.xa_xid.as_ref(), Some(&xid));
        assert_eq!(g.flags_extra, FL_EXTRA_MULTI_ENGINE_E1);
        assert!(g.extra_engines.is_some());
        // Captured XA COMMIT: completed flag and the same xid.
        let g = parse_gtid(&body_of("xa", 985), 19, 1).unwrap();
        assert_eq!(g.gtid.to_string(), "0-1-4");
        assert_eq!(g.flags & FL_COMPLETED_XA, FL_COMPLETED_XA);
        assert!(g.standalone());
        assert_eq!(g.xa_xid, Some(xid));
        // Synthetic: commit id, xid, then COMMIT ALTER with its seq_no.
        let mut tail = 77u64.to_le_bytes().to_vec();
        tail.extend_from_slice(&1u32.to_le_bytes());
        tail.extend_from_slice(&[1, 2, b'g', b'b', b'q']);
        tail.push(FL_COMMIT_ALTER_E1 | FL_EXTRA_MULTI_ENGINE_E1);
        tail.push(1);
        tail.extend_from_slice(&41u64.to_le_bytes());
        let g = parse_gtid(
            &gtid_body(3, 1, FL_GROUP_COMMIT_ID | FL_COMPLETED_XA, &tail),
            19,
            2,
        )
        .unwrap();
        assert_eq!(g.commit_id, Some(77));
        assert_eq!(
            g.xa_xid,
            Some(XaXid {
                format_id: 1,
                gtrid: b"g".to_vec(),
                bqual: b"bq".to_vec()
            })
        );
        assert_eq!((g.extra_engines, g.start_alter_seq_no), (Some(1), Some(41)));
        // Oversized xid parts.
        let mut bad = 1u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&[65, 0]);
        bad.extend_from_slice(&[0; 70]);
        let err = parse_gtid(&gtid_body(3, 1, FL_PREPARED_XA, &bad), 19, 2).unwrap_err();
        assert!(err.contains("gtrid_length 65"), "{err}");
    }

    #[test]
    fn gtid_rejects_short_events() {
        assert!(parse_gtid(&[0; 18], 19, 1)
            .unwrap_err()
            .contains("18 bytes"));
        assert!(parse_gtid(&[0; 30], 13, 1)
            .unwrap_err()
            .contains("post-header length 13"));
    }

    #[test]
    fn gtid_list() {
        let mut b = (2u32 | (1 << 28)).to_le_bytes().to_vec(); // count 2, a flag bit
        for (d, s, n) in [(0u32, 1u32, 10u64), (3, 2, 7)] {
            b.extend_from_slice(&d.to_le_bytes());
            b.extend_from_slice(&s.to_le_bytes());
            b.extend_from_slice(&n.to_le_bytes());
        }
        assert_eq!(
            parse_gtid_list(&b, 4).unwrap(),
            [Gtid::new(0, 1, 10), Gtid::new(3, 2, 7)]
        );
        assert!(parse_gtid_list(&b[..b.len() - 1], 4)
            .unwrap_err()
            .contains("2 GTIDs need 32 bytes, 31 left"));
        assert_eq!(parse_gtid_list(&0u32.to_le_bytes(), 4).unwrap(), []);
        // Captured: the list at the start of a file after 0-1-5.
        let raw = fixture_event("b16", "mariadb-bin.000004", 256);
        let body = &raw.bytes[19..raw.bytes.len() - 4];
        assert_eq!(parse_gtid_list(body, 4).unwrap(), [Gtid::new(0, 1, 5)]);
    }

    #[test]
    fn binlog_checkpoint_and_annotate() {
        let mut b = 18u32.to_le_bytes().to_vec();
        b.extend_from_slice(b"mariadb-bin.000042");
        assert_eq!(
            parse_binlog_checkpoint(&b, 4).unwrap(),
            EventBody::BinlogCheckpoint {
                file: "mariadb-bin.000042".to_owned()
            }
        );
        assert!(parse_binlog_checkpoint(&b[..10], 4)
            .unwrap_err()
            .contains("truncated binlog file name"));
        assert_eq!(
            parse_binlog_checkpoint(&body_of("crc32", 285), 4).unwrap(),
            EventBody::BinlogCheckpoint {
                file: "mariadb-bin.000001".to_owned()
            }
        );
        assert_eq!(
            parse_annotate_rows(&body_of("crc32", 1360)),
            b"DELETE FROM fx.t WHERE id = 2"
        );
    }

    fn compress(data: &[u8], len_len: usize) -> Vec<u8> {
        let mut out = vec![0x80 | len_len as u8];
        let len = data.len() as u64;
        for i in (0..len_len).rev() {
            out.push((len >> (8 * i)) as u8);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        out.extend(z.finish().unwrap());
        out
    }

    #[test]
    fn uncompress_format() {
        let data = b"SELECT 1 -- ".repeat(30);
        for len_len in [2, 3, 4] {
            assert_eq!(uncompress(&compress(&data, len_len)).unwrap(), data);
        }
        assert_eq!(uncompress(&compress(b"x", 1)).unwrap(), b"x");
        let good = compress(&data, 2);
        let err = |bytes: &[u8]| uncompress(bytes).unwrap_err();
        assert!(err(&[]).contains("empty"));
        assert!(err(&[0x02, 1, 2]).contains("expected bit 7 set"));
        let mut alg1 = good.clone();
        alg1[0] |= 0x10;
        assert!(err(&alg1).contains("algorithm 1 is not supported"));
        assert!(err(&[0x80, 1]).contains("length of the length 0"));
        assert!(err(&[0x85, 1]).contains("length of the length 5"));
        assert!(err(&[0x84, 1]).contains("truncated uncompressed length"));
        let mut longer = good.clone();
        longer[2] = longer[2].wrapping_add(1);
        assert!(err(&longer).contains("the header says"));
        let mut shorter = good.clone();
        shorter[2] -= 1;
        assert!(err(&shorter).contains("more than"));
        let mut garbage = good.clone();
        garbage[5] ^= 0xff;
        assert!(err(&garbage).contains("zlib"));
        assert!(err(&[0x81, 0]).contains("uncompressed length 0"));
    }

    /// The captured QUERY_COMPRESSED: the same post-header, status
    /// variables and schema, the SQL text decompressed.
    #[test]
    fn captured_query_compressed() {
        let body = body_of("b15", 507);
        let plain = uncompress_query(&body, 13).unwrap();
        let status_len = usize::from(u16::from_le_bytes([body[11], body[12]]));
        let prefix = 13 + status_len + "rt_comp".len() + 1;
        assert_eq!(plain[..prefix], body[..prefix]);
        assert_eq!(
            &plain[prefix..],
            b"CREATE TABLE cz (id INT PRIMARY KEY, b INT, pad VARCHAR(500))"
        );
        assert!(uncompress_query(&body[..prefix], 13)
            .unwrap_err()
            .contains("expected compressed SQL text"));
        assert!(uncompress_query(&body, 11)
            .unwrap_err()
            .contains("post-header length 11"));
    }

    /// The captured WRITE_ROWS_COMPRESSED_V1 decompresses to the body of
    /// the plain WRITE_ROWS_V1 of the same INSERT (table id aside).
    #[test]
    fn captured_rows_compressed() {
        let compressed = body_of("b15", 859);
        let plain = body_of("b15", 2286);
        let (t, body) =
            uncompress_rows(&compressed, event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1, 8).unwrap();
        assert_eq!(t, event_type::WRITE_ROWS_V1);
        assert_eq!(body[6..], plain[6..]);
        assert_ne!(body[..6], plain[..6]);
        // Update: two bitmaps before the compressed part.
        let (t, body) = uncompress_rows(
            &body_of("b15", 1136),
            event_type::MARIADB_UPDATE_ROWS_COMPRESSED_V1,
            8,
        )
        .unwrap();
        assert_eq!(t, event_type::UPDATE_ROWS_V1);
        assert_eq!(body[6..], body_of("b15", 2952)[6..]);
        // v2: an extra-data block after table id and flags.
        let mut v2 = compressed[..8].to_vec();
        v2.extend_from_slice(&[4, 0, 0xEE, 0xFF]);
        v2.extend_from_slice(&compressed[8..]);
        let (t, body) =
            uncompress_rows(&v2, event_type::MARIADB_WRITE_ROWS_COMPRESSED_V2, 10).unwrap();
        assert_eq!(t, event_type::WRITE_ROWS_V2);
        assert_eq!(body[..12], v2[..12]);
        assert_eq!(body[12..], plain[8..]);
        // Errors.
        let err = uncompress_rows(
            &compressed[..10],
            event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1,
            8,
        )
        .unwrap_err();
        assert!(err.contains("expected compressed row data"), "{err}");
        let err = uncompress_rows(&compressed, event_type::WRITE_ROWS_V1, 8).unwrap_err();
        assert!(err.contains("not a compressed rows event"), "{err}");
        let mut bad = compressed.clone();
        bad[10] = 0x00;
        let err =
            uncompress_rows(&bad, event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1, 8).unwrap_err();
        assert!(
            err.starts_with("compressed row data: compression header byte 0x00"),
            "{err}"
        );
    }
}
