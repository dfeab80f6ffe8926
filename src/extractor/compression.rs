//! MariaDB's compression format, the one parser of its header: compressed
//! parts of binlog events (`log_bin_compress=ON`: the SQL text of
//! QUERY_COMPRESSED, the row data of the *_ROWS_COMPRESSED events) and
//! compressed column values (`BLOB/TEXT/VARCHAR ... COMPRESSED`).
//!
//! A compressed part is a header byte, the uncompressed length (big endian,
//! in as many bytes as the header's low 3 bits say, 1 to 4), then the
//! deflate stream. Header bits: 7 set = compressed; 4-6 the algorithm (0 =
//! zlib, the only one); 3 (columns only) raw deflate instead of a zlib
//! stream. Source: MariaDB's knowledge base ("Compressed Binary Log",
//! "Storage-Engine Independent Column Compression") and server source
//! (`sql/log_event.cc` `binlog_buf_uncompress`, `sql/field.cc`
//! `Field_longstr::uncompress`).

use std::io::Read;

/// Header bit: the data is compressed.
const COMPRESSED_F: u8 = 0x80;
/// Header bits: the algorithm (0 = zlib).
const ALGORITHM_MASK: u8 = 0x70;
/// Header bit (columns): raw deflate rather than a zlib stream.
const RAW_DEFLATE_F: u8 = 0x08;
/// Header bits: bytes of the uncompressed length.
const LENGTH_LEN_MASK: u8 = 0x07;

/// A compressed part split by [`split_header`].
pub(crate) struct Compressed<'a> {
    /// Bit 3 of the header: raw deflate (meaningful for columns only).
    pub(crate) raw: bool,
    /// Uncompressed length from the header, bytes.
    pub(crate) len: u64,
    /// The deflate stream after the header.
    pub(crate) stream: &'a [u8],
}

/// Reads the header of a compressed part: header byte (bit 7 set, algorithm
/// 0), uncompressed length of 1 to 4 bytes.
///
/// # Errors
/// Empty data, bit 7 clear, an algorithm other than zlib, a length of the
/// length outside 1..=4, or fewer length bytes than the header says; the
/// message names the header byte (`0x..`).
pub(crate) fn split_header(data: &[u8]) -> Result<Compressed<'_>, String> {
    let (&head, rest) = data
        .split_first()
        .ok_or("empty compressed data, expected a compression header byte")?;
    if head & COMPRESSED_F == 0 {
        return Err(format!(
            "compression header byte {head:#04x}: expected bit 7 set and algorithm 0 (zlib)"
        ));
    }
    if head & ALGORITHM_MASK != 0 {
        return Err(format!(
            "compression header byte {head:#04x}: algorithm {} is not supported \
             (unknown compression method), expected 0 (zlib)",
            (head & ALGORITHM_MASK) >> 4
        ));
    }
    let len_len = usize::from(head & LENGTH_LEN_MASK);
    if !(1..=4).contains(&len_len) {
        return Err(format!(
            "compression header byte {head:#04x}: length of the length {len_len}, expected 1 to 4"
        ));
    }
    if rest.len() < len_len {
        return Err(format!(
            "truncated uncompressed length after compression header {head:#04x}: \
             {len_len} bytes needed, {} left",
            rest.len()
        ));
    }
    let (len_bytes, stream) = rest.split_at(len_len);
    let len = len_bytes
        .iter()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok(Compressed {
        raw: head & RAW_DEFLATE_F != 0,
        len,
        stream,
    })
}

/// Inflates `stream` (a zlib stream, or raw deflate when `raw`) to exactly
/// `len` bytes.
///
/// # Errors
/// A stream that does not inflate, or inflates to another length than
/// `len` (reading stops at `len + 1` bytes).
pub(crate) fn inflate(stream: &[u8], raw: bool, len: u64) -> Result<Vec<u8>, String> {
    let kind = if raw { "deflate" } else { "zlib" };
    let mut out = Vec::with_capacity(len.min(1 << 20) as usize);
    let limit = len.saturating_add(1);
    let res = if raw {
        flate2::read::DeflateDecoder::new(stream)
            .take(limit)
            .read_to_end(&mut out)
    } else {
        flate2::read::ZlibDecoder::new(stream)
            .take(limit)
            .read_to_end(&mut out)
    };
    res.map_err(|e| format!("cannot inflate the {kind} data: {e}"))?;
    if out.len() as u64 != len {
        return Err(length_mismatch(
            &format!("{kind} data inflates to"),
            out.len(),
            "the header",
            len,
        ));
    }
    Ok(out)
}

/// The error for decompressed data of `got` bytes where `whose` (the header,
/// the event) says `expected`: "{what} [more than ]N bytes, {whose} says
/// {expected}" (a decompression stops one byte past `expected`, so more
/// than `expected` is all that is known then).
pub(crate) fn length_mismatch(what: &str, got: usize, whose: &str, expected: u64) -> String {
    let more = if got as u64 > expected {
        "more than "
    } else {
        ""
    };
    let shown = (got as u64).min(expected);
    format!("{what} {more}{shown} bytes, {whose} says {expected}")
}

/// Decompresses one compressed part of a binlog event (header byte,
/// big-endian length, zlib stream), as MariaDB's `binlog_buf_uncompress`
/// (bit 3 of the header is not used by events and is ignored).
///
/// # Errors
/// Those of [`split_header`] and [`inflate`], and an uncompressed length 0.
pub(crate) fn uncompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let part = split_header(data)?;
    if part.len == 0 {
        return Err("uncompressed length 0".to_owned());
    }
    inflate(part.stream, false, part.len)
}

/// A MariaDB compressed column value (`Field_longstr::uncompress`): empty,
/// or a header byte then the data: header 0 (bit 7 clear) = stored as is;
/// else a compressed part ([`split_header`]), raw deflate when bit 3 is set.
///
/// # Errors
/// Those of [`split_header`] and [`inflate`], prefixed "compressed column".
pub(crate) fn uncompress_column(b: &[u8]) -> Result<Vec<u8>, String> {
    let Some((&h, rest)) = b.split_first() else {
        return Ok(Vec::new());
    };
    if h & COMPRESSED_F == 0 {
        return Ok(rest.to_vec());
    }
    let part = split_header(b).map_err(|e| format!("compressed column: {e}"))?;
    inflate(part.stream, part.raw, part.len).map_err(|e| format!("compressed column: {e}"))
}
