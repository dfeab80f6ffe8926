//! Binlog basics shared by the decoders, with no dependency on the rest of
//! the extractor: the event type codes (and their names), and the
//! bounds-checked byte reader every event body is read with.
//!
//! The decoders (`decode`, `mariadb`, `rows`) import from here; this module
//! imports nothing of the extractor (a leaf, so that the decoders do not
//! import each other).
//!
//! Type codes: MySQL `Log_event_type` (libbinlogevents `binlog_event.h`) and
//! MariaDB's `Log_event_type` (`sql/log_event.h`, codes 160..).

/// Binlog event type codes (MySQL `Log_event_type`, MariaDB 160..).
pub mod event_type {
    #![allow(missing_docs)]
    pub const UNKNOWN: u8 = 0;
    pub const START_V3: u8 = 1;
    pub const QUERY: u8 = 2;
    pub const STOP: u8 = 3;
    pub const ROTATE: u8 = 4;
    pub const INTVAR: u8 = 5;
    pub const LOAD: u8 = 6;
    pub const SLAVE: u8 = 7;
    pub const CREATE_FILE: u8 = 8;
    pub const APPEND_BLOCK: u8 = 9;
    pub const EXEC_LOAD: u8 = 10;
    pub const DELETE_FILE: u8 = 11;
    pub const NEW_LOAD: u8 = 12;
    pub const RAND: u8 = 13;
    pub const USER_VAR: u8 = 14;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const XID: u8 = 16;
    pub const BEGIN_LOAD_QUERY: u8 = 17;
    pub const EXECUTE_LOAD_QUERY: u8 = 18;
    pub const TABLE_MAP: u8 = 19;
    pub const PRE_GA_WRITE_ROWS: u8 = 20;
    pub const PRE_GA_UPDATE_ROWS: u8 = 21;
    pub const PRE_GA_DELETE_ROWS: u8 = 22;
    pub const WRITE_ROWS_V1: u8 = 23;
    pub const UPDATE_ROWS_V1: u8 = 24;
    pub const DELETE_ROWS_V1: u8 = 25;
    pub const INCIDENT: u8 = 26;
    pub const HEARTBEAT: u8 = 27;
    pub const IGNORABLE: u8 = 28;
    pub const ROWS_QUERY: u8 = 29;
    pub const WRITE_ROWS_V2: u8 = 30;
    pub const UPDATE_ROWS_V2: u8 = 31;
    pub const DELETE_ROWS_V2: u8 = 32;
    pub const GTID: u8 = 33;
    pub const ANONYMOUS_GTID: u8 = 34;
    pub const PREVIOUS_GTIDS: u8 = 35;
    pub const TRANSACTION_CONTEXT: u8 = 36;
    pub const VIEW_CHANGE: u8 = 37;
    pub const XA_PREPARE: u8 = 38;
    pub const PARTIAL_UPDATE_ROWS: u8 = 39;
    pub const TRANSACTION_PAYLOAD: u8 = 40;
    pub const HEARTBEAT_V2: u8 = 41;
    pub const GTID_TAGGED: u8 = 42;
    pub const MARIADB_ANNOTATE_ROWS: u8 = 160;
    pub const MARIADB_BINLOG_CHECKPOINT: u8 = 161;
    pub const MARIADB_GTID: u8 = 162;
    pub const MARIADB_GTID_LIST: u8 = 163;
    pub const MARIADB_START_ENCRYPTION: u8 = 164;
    pub const MARIADB_QUERY_COMPRESSED: u8 = 165;
    pub const MARIADB_WRITE_ROWS_COMPRESSED_V1: u8 = 166;
    pub const MARIADB_UPDATE_ROWS_COMPRESSED_V1: u8 = 167;
    pub const MARIADB_DELETE_ROWS_COMPRESSED_V1: u8 = 168;
    pub const MARIADB_WRITE_ROWS_COMPRESSED_V2: u8 = 169;
    pub const MARIADB_UPDATE_ROWS_COMPRESSED_V2: u8 = 170;
    pub const MARIADB_DELETE_ROWS_COMPRESSED_V2: u8 = 171;
}

/// The name of an event type as the servers' sources spell it (without
/// `_EVENT`), or `None` for a code neither MySQL nor MariaDB defines.
pub fn event_type_name(type_code: u8) -> Option<&'static str> {
    use event_type::*;
    Some(match type_code {
        START_V3 => "START_V3",
        QUERY => "QUERY",
        STOP => "STOP",
        ROTATE => "ROTATE",
        INTVAR => "INTVAR",
        LOAD => "LOAD",
        SLAVE => "SLAVE",
        CREATE_FILE => "CREATE_FILE",
        APPEND_BLOCK => "APPEND_BLOCK",
        EXEC_LOAD => "EXEC_LOAD",
        DELETE_FILE => "DELETE_FILE",
        NEW_LOAD => "NEW_LOAD",
        RAND => "RAND",
        USER_VAR => "USER_VAR",
        FORMAT_DESCRIPTION => "FORMAT_DESCRIPTION",
        XID => "XID",
        BEGIN_LOAD_QUERY => "BEGIN_LOAD_QUERY",
        EXECUTE_LOAD_QUERY => "EXECUTE_LOAD_QUERY",
        TABLE_MAP => "TABLE_MAP",
        PRE_GA_WRITE_ROWS => "PRE_GA_WRITE_ROWS",
        PRE_GA_UPDATE_ROWS => "PRE_GA_UPDATE_ROWS",
        PRE_GA_DELETE_ROWS => "PRE_GA_DELETE_ROWS",
        WRITE_ROWS_V1 => "WRITE_ROWS_V1",
        UPDATE_ROWS_V1 => "UPDATE_ROWS_V1",
        DELETE_ROWS_V1 => "DELETE_ROWS_V1",
        INCIDENT => "INCIDENT",
        HEARTBEAT => "HEARTBEAT",
        IGNORABLE => "IGNORABLE",
        ROWS_QUERY => "ROWS_QUERY",
        WRITE_ROWS_V2 => "WRITE_ROWS_V2",
        UPDATE_ROWS_V2 => "UPDATE_ROWS_V2",
        DELETE_ROWS_V2 => "DELETE_ROWS_V2",
        GTID => "GTID",
        ANONYMOUS_GTID => "ANONYMOUS_GTID",
        PREVIOUS_GTIDS => "PREVIOUS_GTIDS",
        TRANSACTION_CONTEXT => "TRANSACTION_CONTEXT",
        VIEW_CHANGE => "VIEW_CHANGE",
        XA_PREPARE => "XA_PREPARE",
        PARTIAL_UPDATE_ROWS => "PARTIAL_UPDATE_ROWS",
        TRANSACTION_PAYLOAD => "TRANSACTION_PAYLOAD",
        HEARTBEAT_V2 => "HEARTBEAT_V2",
        GTID_TAGGED => "GTID_TAGGED",
        MARIADB_ANNOTATE_ROWS => "ANNOTATE_ROWS",
        MARIADB_BINLOG_CHECKPOINT => "BINLOG_CHECKPOINT",
        MARIADB_GTID => "MARIADB_GTID",
        MARIADB_GTID_LIST => "GTID_LIST",
        MARIADB_START_ENCRYPTION => "START_ENCRYPTION",
        MARIADB_QUERY_COMPRESSED => "QUERY_COMPRESSED",
        MARIADB_WRITE_ROWS_COMPRESSED_V1 => "WRITE_ROWS_COMPRESSED_V1",
        MARIADB_UPDATE_ROWS_COMPRESSED_V1 => "UPDATE_ROWS_COMPRESSED_V1",
        MARIADB_DELETE_ROWS_COMPRESSED_V1 => "DELETE_ROWS_COMPRESSED_V1",
        MARIADB_WRITE_ROWS_COMPRESSED_V2 => "WRITE_ROWS_COMPRESSED",
        MARIADB_UPDATE_ROWS_COMPRESSED_V2 => "UPDATE_ROWS_COMPRESSED",
        MARIADB_DELETE_ROWS_COMPRESSED_V2 => "DELETE_ROWS_COMPRESSED",
        _ => return None,
    })
}

/// The one bounds-checked little-endian cursor of the extractor, over an
/// event body, a column value or a protocol packet. It never panics.
///
/// Two families of reads:
/// - `Option` reads for hot paths that build their own error ([`take`],
///   [`array`], [`byte`], [`uint_le`]): `None` when too few bytes are left;
/// - reads that name the field in their `String` error: [`bytes`], [`u8`]
///   .. [`u64`], [`cstring`], [`lenenc`] say "truncated {field} ... at body
///   offset N" (event bodies), [`need`] and [`packed`] say "{field}: need N
///   bytes, M left" (row images).
///
/// [`take`]: Reader::take
/// [`array`]: Reader::array
/// [`byte`]: Reader::byte
/// [`uint_le`]: Reader::uint_le
/// [`bytes`]: Reader::bytes
/// [`u8`]: Reader::u8
/// [`u64`]: Reader::u64
/// [`cstring`]: Reader::cstring
/// [`lenenc`]: Reader::lenenc
/// [`need`]: Reader::need
/// [`packed`]: Reader::packed
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Offset of the next read.
    #[inline]
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// The rest of the buffer (empty when all was read).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        rest
    }

    /// Error unless everything was read.
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} unexpected bytes after the last field at body offset {}",
                self.remaining(),
                self.pos
            ))
        }
    }

    /// The next `n` bytes, or `None` (nothing consumed) when fewer are left.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// The next `N` bytes as an array, or `None`.
    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).and_then(|s| s.try_into().ok())
    }

    /// The next byte, or `None`.
    #[inline]
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Little-endian unsigned integer of `n` (1..=8) bytes, or `None`.
    #[inline]
    pub(crate) fn uint_le(&mut self, n: usize) -> Option<u64> {
        let b = self.take(n)?;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate().take(8) {
            v |= u64::from(x) << (8 * i);
        }
        Some(v)
    }

    /// The next `n` bytes; the error says "truncated {what}" and where.
    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let (at, left) = (self.pos, self.remaining());
        self.take(n).ok_or_else(|| {
            format!("truncated {what}: {n} bytes needed at body offset {at}, {left} left")
        })
    }

    /// The next `n` bytes; the error says "{what}: need n bytes, m left".
    pub(crate) fn need(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let left = self.remaining();
        self.take(n)
            .ok_or_else(|| format!("{what}: need {n} bytes, {left} left"))
    }

    fn uint(&mut self, n: usize, what: &str) -> Result<u64, String> {
        let (at, left) = (self.pos, self.remaining());
        self.uint_le(n).ok_or_else(|| {
            format!("truncated {what}: {n} bytes needed at body offset {at}, {left} left")
        })
    }

    /// One byte.
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.bytes(1, what)?[0])
    }

    /// Little-endian u16.
    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(self.uint(2, what)? as u16)
    }

    /// Little-endian 3-byte integer.
    pub(crate) fn u24(&mut self, what: &str) -> Result<u32, String> {
        Ok(self.uint(3, what)? as u32)
    }

    /// Little-endian u32.
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(self.uint(4, what)? as u32)
    }

    /// Little-endian 6-byte integer.
    pub(crate) fn u48(&mut self, what: &str) -> Result<u64, String> {
        self.uint(6, what)
    }

    /// Little-endian u64.
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.uint(8, what)
    }

    /// A NUL-terminated string (without its NUL).
    pub(crate) fn cstring(&mut self, what: &str) -> Result<&'a [u8], String> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("{what} at body offset {} is not NUL-terminated", self.pos))?;
        self.pos += len + 1;
        Ok(&rest[..len])
    }

    /// A NUL-terminated string (without its NUL), or the rest of the buffer
    /// when no NUL follows (lenient, for protocol packets).
    pub(crate) fn cstring_or_rest(&mut self) -> &'a [u8] {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        let n = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        self.pos += (n + 1).min(rest.len());
        &rest[..n]
    }

    /// Width of a length-encoded integer from its first byte: `Ok(value)` for
    /// one byte, `Err(Some(n))` when `n` more bytes follow, `Err(None)` for
    /// a byte that cannot start one (0xfb, 0xff).
    #[inline]
    fn lenenc_first(first: u8) -> Result<u64, Option<usize>> {
        match first {
            0..=0xfa => Ok(u64::from(first)),
            0xfc => Err(Some(2)),
            0xfd => Err(Some(3)),
            0xfe => Err(Some(8)),
            _ => Err(None),
        }
    }

    /// A MySQL length-encoded integer; errors in the "body offset" style.
    pub(crate) fn lenenc(&mut self, what: &str) -> Result<u64, String> {
        let at = self.pos;
        let first = self.u8(what)?;
        match Self::lenenc_first(first) {
            Ok(v) => Ok(v),
            Err(Some(n)) => self.uint(n, what),
            Err(None) => Err(format!(
                "{what} at body offset {at}: byte {first:#04x} does not start a length-encoded integer"
            )),
        }
    }

    /// A MySQL length-encoded ("packed") integer; errors in the "need N
    /// bytes" style.
    pub(crate) fn packed(&mut self, what: &str) -> Result<u64, String> {
        let left = self.remaining();
        let first = self
            .byte()
            .ok_or_else(|| format!("{what}: need a packed integer, 0 bytes left"))?;
        match Self::lenenc_first(first) {
            Ok(v) => Ok(v),
            Err(Some(n)) => self.uint_le(n).ok_or_else(|| {
                format!("{what}: packed integer needs {} bytes, {left} left", n + 1)
            }),
            Err(None) => Err(format!(
                "{what}: expected a packed integer, found first byte {first:#04x}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake packet read as the live source reads it.
    #[test]
    fn cursor_reads() {
        let bytes = b"\x0a5.5.5-10.11\x00\x01\x00\x00\x00rest";
        let mut c = Reader::new(bytes);
        assert_eq!(c.byte(), Some(10));
        assert_eq!(c.cstring_or_rest(), b"5.5.5-10.11");
        assert_eq!(c.uint_le(4).map(|v| v as u32), Some(1));
        assert_eq!(c.take(10), None);
        assert_eq!(c.rest(), b"rest");
        assert_eq!(c.cstring_or_rest(), b"");
        assert_eq!(c.byte(), None);
    }
}
