//! Unit tests of [`super`] (`extractor/mariadb.rs`).

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
    let (t, body) = uncompress_rows(&v2, event_type::MARIADB_WRITE_ROWS_COMPRESSED_V2, 10).unwrap();
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
    let err = uncompress_rows(&bad, event_type::MARIADB_WRITE_ROWS_COMPRESSED_V1, 8).unwrap_err();
    assert!(
        err.starts_with("compressed row data: compression header byte 0x00"),
        "{err}"
    );
}
