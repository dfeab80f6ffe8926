//! Binlog basics shared by the decoders, with no dependency on the rest of
//! the extractor: the event type codes (and their names), and the
//! bounds-checked byte reader every event body is read with.
//!
//! [`decode`](super::decode), [`mariadb`](super::mariadb) and
//! [`rows`](super::rows) import from here; this module imports from none of
//! them (a leaf, so that the decoders do not import each other).
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

/// A bounds-checked little-endian reader over an event body; every read
/// failure names the field and the offset.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Offset of the next read.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// The rest of the buffer.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
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

    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.remaining() {
            return Err(format!(
                "truncated {what}: {n} bytes needed at body offset {}, {} left",
                self.pos,
                self.remaining()
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn uint(&mut self, n: usize, what: &str) -> Result<u64, String> {
        let b = self.bytes(n, what)?;
        Ok(b.iter()
            .rev()
            .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)))
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(self.uint(2, what)? as u16)
    }

    pub(crate) fn u24(&mut self, what: &str) -> Result<u32, String> {
        Ok(self.uint(3, what)? as u32)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(self.uint(4, what)? as u32)
    }

    pub(crate) fn u48(&mut self, what: &str) -> Result<u64, String> {
        self.uint(6, what)
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.uint(8, what)
    }

    /// A NUL-terminated string (without its NUL).
    pub(crate) fn cstring(&mut self, what: &str) -> Result<&'a [u8], String> {
        let rest = &self.buf[self.pos..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("{what} at body offset {} is not NUL-terminated", self.pos))?;
        self.pos += len + 1;
        Ok(&rest[..len])
    }

    /// A MySQL length-encoded integer.
    pub(crate) fn lenenc(&mut self, what: &str) -> Result<u64, String> {
        let at = self.pos;
        match self.u8(what)? {
            b @ 0..=0xfa => Ok(u64::from(b)),
            0xfc => self.uint(2, what),
            0xfd => self.uint(3, what),
            0xfe => self.uint(8, what),
            b => Err(format!(
                "{what} at body offset {at}: byte {b:#04x} does not start a length-encoded integer"
            )),
        }
    }
}
