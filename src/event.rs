//! The transaction model: what the extractor produces, the queue stores and
//! the applier applies.
//!
//! A [`Transaction`] is one source transaction: its identity (seqno, GTID,
//! server id), where it ends in the master's binlog (the restart point), its
//! shard, the table definitions it uses ([`TableInfo`], from TABLE_MAP events)
//! and its [`Change`]s in binlog order: row changes ([`RowsChange`], one per
//! WRITE/UPDATE/DELETE_ROWS event) and statements ([`Statement`], QUERY
//! events other than BEGIN/COMMIT, with the session context needed to apply
//! them).
//!
//! Values ([`Value`]) are exact: DECIMAL as its decimal text, integers with
//! their signedness, temporal values as their fields (zero and partial-zero
//! dates included), strings and blobs as raw bytes (their charset is in
//! [`ColumnInfo::charset`]). Formats follow the MySQL source's
//! "Rows_log_event" and "Table_map_log_event" documentation
//! (libbinlogevents `rows_event.h`, `field_types.h`) and MariaDB's
//! "Binary Log Formats" knowledge-base pages.
//!
//! Ownership of the seqno: the **extractor** assigns it, densely from the
//! queue's next free seqno, when it hands a complete transaction to the queue
//! writer; a transaction decoded for display only (`shardrep extract`
//! without a queue) is numbered from 0 by the extractor run.

use serde::{Deserialize, Serialize};

use crate::position::{BinlogPosition, Gtid, Seqno};

/// The shard of a transaction that touches no schema, two or more schemas,
/// or a statement that cannot be attributed (shared/DESIGN.md §2). Always
/// critical.
pub const UNKNOWN_SHARD: &str = "#UNKNOWN";

/// One source transaction, complete (from its GTID/BEGIN to its
/// COMMIT/XID, or one standalone DDL statement).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    /// Dense number assigned by the extractor (see the module doc).
    pub seqno: Seqno,
    /// `server_id` of the server where the transaction originated (from the
    /// event header; kept through `log_slave_updates`).
    pub server_id: u32,
    /// MariaDB GTID of the transaction, when the master logged one.
    pub gtid: Option<Gtid>,
    /// MariaDB group-commit id (GTID event flag `FL_GROUP_COMMIT_ID`):
    /// transactions with the same id committed together on the master and
    /// may be applied in parallel even within a shard.
    pub commit_id: Option<u64>,
    /// Binlog position of the transaction's first event (for messages).
    pub start_position: BinlogPosition,
    /// Binlog position *after* the transaction: where to resume.
    pub end_position: BinlogPosition,
    /// Master commit time: the header timestamp of the last event, in
    /// seconds since the Unix epoch (UTC).
    pub commit_timestamp: u32,
    /// The shard (schema) the transaction touches, or [`UNKNOWN_SHARD`].
    pub shard: String,
    /// Table definitions (from TABLE_MAP events) that [`RowsChange::table`]
    /// indexes into, in first-use order.
    pub tables: Vec<TableInfo>,
    /// The changes, in binlog order.
    pub changes: Vec<Change>,
    /// The master's own bytes of the row events, for the `binlog` apply
    /// method; `None` when the extractor did not keep them (see
    /// [`RowEvents`]). Stored in the queue record beside the transaction
    /// (format 3), not by the transaction's serde layout.
    #[serde(skip)]
    pub row_events: Option<std::sync::Arc<RowEvents>>,
    /// Set when this record is one fragment of a transaction too large to
    /// hold in memory whole ([`Fragment`]); `None` for a whole
    /// transaction. Stored in the queue record beside the transaction
    /// (format 4), not by the transaction's serde layout.
    #[serde(skip)]
    pub fragment: Option<Fragment>,
}

/// One fragment of a large source transaction. The extractor cuts a
/// transaction whose changes pass `[queue] fragment_bytes` into
/// fragments as its events arrive, the way Tungsten Replicator's THL
/// fragments one (seqno and fragno); here each fragment takes a seqno of
/// its own, densely, so the queue's records stay one per seqno. The
/// fragments of one transaction are consecutive seqnos; every fragment
/// carries the transaction's identity (server id, GTID, commit id) and the
/// changes of its part, with the table definitions they use. Only the
/// last one ends the transaction: its `end_position` is the transaction's
/// restart point, and a channel applies all the fragments inside one
/// replica transaction that commits with the last one's restart row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fragment {
    /// 0 for the first fragment of the transaction, then 1, 2, ...
    pub index: u32,
    /// Whether this fragment ends the transaction (its COMMIT or XID).
    pub last: bool,
}

impl Transaction {
    /// Whether this record is a fragment that does not end its
    /// transaction: more fragments follow it at the next seqnos.
    pub fn continues(&self) -> bool {
        self.fragment.is_some_and(|f| !f.last)
    }

    /// Whether this record is a fragment after the first of its
    /// transaction (it continues what the previous seqno began).
    pub fn is_continuation(&self) -> bool {
        self.fragment.is_some_and(|f| f.index > 0)
    }
}

/// The master's binlog events behind a transaction's row changes, as it
/// wrote them (header, body and checksum trailer when its binlog has one):
/// what the replica's own row applier is given (`BINLOG '<base64>'`,
/// the statements `mariadb-binlog` prints) under `[apply] method =
/// "binlog"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowEvents {
    /// The FORMAT_DESCRIPTION event the events were written under (the
    /// first BINLOG statement of a session must be one: it tells the
    /// server the post-header lengths and whether events end with a
    /// checksum).
    #[serde(with = "serde_bytes")]
    pub format: Vec<u8>,
    /// One entry per [`Change::Rows`] of the transaction, in order: the
    /// TABLE_MAP events the master logged right before that rows event
    /// (none when it shares the previous one's), then the rows event.
    pub rows: Vec<RowEventBytes>,
}

/// The bytes of one entry of [`RowEvents::rows`]: whole events,
/// concatenated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowEventBytes(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl RowEvents {
    /// Total bytes of the events (format excluded).
    pub fn len_bytes(&self) -> usize {
        self.rows.iter().map(|r| r.0.len()).sum()
    }
}

impl Transaction {
    /// Approximate size of the transaction in memory, bytes: row images,
    /// statement texts and a fixed overhead per change. Used to bound the
    /// memory held between the scheduler and the channels.
    pub fn approx_bytes(&self) -> usize {
        256 + self
            .changes
            .iter()
            .map(|c| {
                64 + match c {
                    Change::Rows(r) => r
                        .rows
                        .iter()
                        .map(|p| {
                            16 + p.before.as_ref().map_or(0, RowImage::approx_bytes)
                                + p.after.as_ref().map_or(0, RowImage::approx_bytes)
                        })
                        .sum::<usize>(),
                    Change::Statement(s) => s.sql.len(),
                    Change::Annotation(a) => a.len(),
                }
            })
            .sum::<usize>()
            + self
                .row_events
                .as_ref()
                .map_or(0, |e| e.format.len() + e.len_bytes())
    }

    /// Total number of row images pairs (rows) in the transaction.
    pub fn row_count(&self) -> usize {
        self.changes
            .iter()
            .map(|c| match c {
                Change::Rows(r) => r.rows.len(),
                _ => 0,
            })
            .sum()
    }

    /// The table definition a rows change refers to.
    ///
    /// # Panics
    /// When `change.table` is not an index into [`Transaction::tables`],
    /// which the extractor never produces.
    pub fn table_of(&self, change: &RowsChange) -> &TableInfo {
        &self.tables[change.table as usize]
    }
}

/// One change of a transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Change {
    /// Row changes of one rows event (one table, one kind).
    Rows(RowsChange),
    /// A statement to execute (DDL, or statement-format DML).
    Statement(Statement),
    /// The original SQL of the following row events (MariaDB
    /// ANNOTATE_ROWS, MySQL ROWS_QUERY): kept for display, never applied.
    Annotation(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// Kind of a row change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RowKind {
    /// WRITE_ROWS: after image only.
    Insert,
    /// UPDATE_ROWS (and MySQL PARTIAL_UPDATE_ROWS): before and after images.
    Update,
    /// DELETE_ROWS: before image only.
    Delete,
}

/// The rows of one WRITE/UPDATE/DELETE_ROWS event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowsChange {
    /// Index into [`Transaction::tables`].
    pub table: u32,
    /// Insert, update or delete.
    pub kind: RowKind,
    /// The event's flags: bit 0x0002 `NO_FOREIGN_KEY_CHECKS`, 0x0004
    /// `RELAXED_UNIQUE_CHECKS`, 0x0008 `COMPLETE_ROWS`; bit 0x0001 is
    /// `STMT_END` (last event of a statement).
    pub flags: u16,
    /// The rows, in event order.
    pub rows: Vec<RowPair>,
}

/// Rows event flag: foreign key checks were off on the master.
pub const ROWS_FLAG_NO_FOREIGN_KEY_CHECKS: u16 = 0x0002;
/// Rows event flag: unique checks were relaxed on the master.
pub const ROWS_FLAG_RELAXED_UNIQUE_CHECKS: u16 = 0x0004;

impl RowsChange {
    /// Whether foreign key checks must be off while applying these rows.
    pub fn foreign_key_checks_off(&self) -> bool {
        self.flags & ROWS_FLAG_NO_FOREIGN_KEY_CHECKS != 0
    }
    /// Whether unique checks were relaxed on the master for these rows.
    pub fn unique_checks_off(&self) -> bool {
        self.flags & ROWS_FLAG_RELAXED_UNIQUE_CHECKS != 0
    }
}

/// The images of one row: `before` for update/delete, `after` for
/// insert/update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowPair {
    /// Image before the change (update, delete).
    pub before: Option<RowImage>,
    /// Image after the change (insert, update).
    pub after: Option<RowImage>,
}

/// One row image: which columns are present (the event's column bitmap) and
/// their values. A column absent from the image (MINIMAL/NOBLOB row images)
/// is different from a present NULL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowImage {
    /// Column indexes (0-based, table order) present in the image,
    /// ascending.
    pub columns: Vec<u16>,
    /// The values of those columns, same order and length as `columns`.
    pub values: Vec<Value>,
}

impl Value {
    /// Approximate heap plus inline size of the value in memory, bytes.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Value>()
            + match self {
                Value::Decimal(d) => d.len(),
                Value::Bytes(b) => b.len(),
                _ => 0,
            }
    }
}

impl RowImage {
    /// Approximate size of the image in memory, bytes.
    pub fn approx_bytes(&self) -> usize {
        self.columns.len() * 2 + self.values.iter().map(Value::approx_bytes).sum::<usize>()
    }

    /// The value of column `index`, or `None` when the column is not in the
    /// image.
    pub fn get(&self, index: u16) -> Option<&Value> {
        self.columns
            .binary_search(&index)
            .ok()
            .map(|i| &self.values[i])
    }
}

/// One column value, exact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// SQL NULL (present in the image, null bit set).
    Null,
    /// A signed integer (TINYINT..BIGINT), or an integer whose signedness is
    /// unknown ([`ColumnInfo::unsigned`] is `None`): then the applier
    /// reinterprets it with the replica's definition.
    Int(i64),
    /// An unsigned integer (TINYINT..BIGINT UNSIGNED).
    UInt(u64),
    /// FLOAT, bit-exact.
    Float(f32),
    /// DOUBLE, bit-exact.
    Double(f64),
    /// DECIMAL as MySQL prints it: optional `-`, integer digits, and exactly
    /// `scale` fraction digits after a `.` (none when scale is 0).
    Decimal(String),
    /// CHAR/VARCHAR/TEXT/BLOB/BINARY/VARBINARY/GEOMETRY and MariaDB JSON:
    /// the stored bytes (BINARY(n) padded back to n bytes with zeros).
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// DATE; zero and partial-zero dates are kept as their fields.
    Date {
        /// 0..=9999
        year: u16,
        /// 0..=12
        month: u8,
        /// 0..=31
        day: u8,
    },
    /// DATETIME(fsp); `micros` holds the fraction in microseconds whatever
    /// the precision (the column's fsp is in [`ColumnInfo::meta`]).
    DateTime {
        /// 0..=9999
        year: u16,
        /// 0..=12
        month: u8,
        /// 0..=31
        day: u8,
        /// 0..=23
        hour: u8,
        /// 0..=59
        minute: u8,
        /// 0..=59
        second: u8,
        /// 0..=999_999
        micros: u32,
    },
    /// TIMESTAMP(fsp): seconds since the Unix epoch (UTC) and microseconds;
    /// `0` seconds is the zero timestamp `0000-00-00 00:00:00`.
    Timestamp {
        /// Seconds since 1970-01-01 00:00:00 UTC.
        seconds: u32,
        /// 0..=999_999
        micros: u32,
    },
    /// TIME(fsp), signed: `-838:59:59.000000` ..= `838:59:59.000000`.
    Time {
        /// True for a negative time.
        negative: bool,
        /// 0..=838
        hours: u32,
        /// 0..=59
        minutes: u8,
        /// 0..=59
        seconds: u8,
        /// 0..=999_999
        micros: u32,
    },
    /// YEAR: 0 (`0000`) or 1901..=2155.
    Year(u16),
    /// BIT(n), n up to 64, right-aligned.
    Bit(u64),
    /// ENUM as its 1-based index (0 is the empty error value).
    Enum(u16),
    /// SET as its bitmask of members.
    Set(u64),
    /// MySQL binary JSON decoded to its JSON text (UTF-8).
    Json(String),
}

/// A table definition from a TABLE_MAP event, with the optional metadata
/// (`binlog_row_metadata=MINIMAL|FULL`) when the master logged it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableInfo {
    /// The binlog's table id (valid only within its binlog file run).
    pub table_id: u64,
    /// Schema (database) name.
    pub schema: String,
    /// Table name.
    pub table: String,
    /// Columns in table order.
    pub columns: Vec<ColumnInfo>,
    /// Primary key column indexes in key order, when the metadata carried
    /// them (`binlog_row_metadata=FULL`); `None` when unknown.
    pub primary_key: Option<Vec<u16>>,
}

/// One column of a [`TableInfo`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// Binlog column type code (`MYSQL_TYPE_*`, see [`column_type`]).
    pub column_type: u8,
    /// Type metadata from the TABLE_MAP event (meaning per type: length
    /// bytes, fsp, precision/scale, real type and length for STRING, ...).
    pub meta: u16,
    /// Whether the column is nullable.
    pub nullable: bool,
    /// Column name (`binlog_row_metadata=FULL`), else `None`.
    pub name: Option<String>,
    /// Signedness of numeric columns when the metadata carried it
    /// (`MINIMAL` or `FULL`); `None` when unknown or not numeric.
    pub unsigned: Option<bool>,
    /// Collation id of a character column when known (metadata), else
    /// `None`; 63 is binary.
    pub charset: Option<u16>,
}

/// `MYSQL_TYPE_*` column type codes as they appear in TABLE_MAP events
/// (MySQL `field_types.h`; MariaDB uses the same codes).
pub mod column_type {
    #![allow(missing_docs)]
    pub const DECIMAL: u8 = 0;
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const NULL: u8 = 6;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const NEWDATE: u8 = 14;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    pub const TYPED_ARRAY: u8 = 20;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const TINY_BLOB: u8 = 249;
    pub const MEDIUM_BLOB: u8 = 250;
    pub const LONG_BLOB: u8 = 251;
    pub const BLOB: u8 = 252;
    pub const VAR_STRING: u8 = 253;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

/// A statement to execute on the replica, with its session context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// The SQL text, as the bytes the master logged (in the charset named by
    /// [`SessionContext::charset_client`]).
    #[serde(with = "serde_bytes")]
    pub sql: Vec<u8>,
    /// Default schema (`USE`) the statement ran with; `None` when none.
    pub default_schema: Option<String>,
    /// Session state the statement needs.
    pub context: SessionContext,
    /// Error code the statement ended with on the master (QUERY event
    /// `error_code`; nonzero for a partly executed non-transactional
    /// statement).
    pub error_code: u16,
    /// The master session that ran the statement: the QUERY event's
    /// `thread_id` (its `pseudo_thread_id`), which keys that session's
    /// temporary tables; `None` when not known (records of queue format 1).
    pub thread_id: Option<u32>,
}

/// Session state of a statement, from the QUERY event's status variables
/// and the INTVAR, RAND and USER_VAR events before it (MySQL
/// `Query_log_event` status vars `Q_FLAGS2_CODE`, `Q_SQL_MODE_CODE`,
/// `Q_CHARSET_CODE`, `Q_TIME_ZONE_CODE`, `Q_AUTO_INCREMENT`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionContext {
    /// `TIMESTAMP` of the statement: seconds since the Unix epoch.
    pub timestamp: u32,
    /// Microseconds of the timestamp (MariaDB `Q_HRNOW`), when logged.
    pub timestamp_micros: Option<u32>,
    /// `sql_mode` bitmask (`Q_SQL_MODE_CODE`), when logged.
    pub sql_mode: Option<u64>,
    /// `Q_FLAGS2_CODE` bits (`OPTION_NO_FOREIGN_KEY_CHECKS` 0x04000000,
    /// `OPTION_RELAXED_UNIQUE_CHECKS` 0x08000000, `OPTION_AUTO_IS_NULL`
    /// 0x00004000, `OPTION_NOT_AUTOCOMMIT` 0x00080000), when logged.
    pub flags2: Option<u32>,
    /// `character_set_client` collation id (`Q_CHARSET_CODE`).
    pub charset_client: Option<u16>,
    /// `collation_connection` id (`Q_CHARSET_CODE`).
    pub collation_connection: Option<u16>,
    /// `collation_server` id (`Q_CHARSET_CODE`).
    pub collation_server: Option<u16>,
    /// `collation_database` id (`Q_COLLATION_DATABASE`... / MariaDB), when
    /// logged.
    pub collation_database: Option<u16>,
    /// Session `time_zone` name (`Q_TIME_ZONE_CODE`), when not the default.
    pub time_zone: Option<String>,
    /// `lc_time_names` id (`Q_LC_TIME_NAMES_CODE`), when not 0 (en_US).
    pub lc_time_names: Option<u16>,
    /// `auto_increment_increment` and `auto_increment_offset`
    /// (`Q_AUTO_INCREMENT`), when not (1, 1).
    pub auto_increment: Option<(u16, u16)>,
    /// `INSERT_ID` from an INTVAR event.
    pub insert_id: Option<u64>,
    /// `LAST_INSERT_ID` from an INTVAR event.
    pub last_insert_id: Option<u64>,
    /// `RAND()` seeds from a RAND event.
    pub rand_seeds: Option<(u64, u64)>,
    /// User variables (`@name`) from USER_VAR events, in event order.
    pub user_vars: Vec<UserVar>,
}

impl SessionContext {
    /// Whether foreign key checks were off (`Q_FLAGS2` bit 0x04000000).
    pub fn foreign_key_checks_off(&self) -> bool {
        self.flags2.is_some_and(|f| f & 0x0400_0000 != 0)
    }
    /// Whether unique checks were relaxed (`Q_FLAGS2` bit 0x08000000).
    pub fn unique_checks_off(&self) -> bool {
        self.flags2.is_some_and(|f| f & 0x0800_0000 != 0)
    }
}

/// A user variable set before a statement (USER_VAR event).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserVar {
    /// Variable name without the `@`.
    pub name: String,
    /// Its value; `None` is NULL.
    pub value: Option<UserVarValue>,
}

/// Value of a user variable (USER_VAR event types STRING_RESULT,
/// REAL_RESULT, INT_RESULT, DECIMAL_RESULT).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum UserVarValue {
    /// String bytes with their collation id.
    String {
        /// The bytes.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
        /// Collation id.
        collation: u32,
    },
    /// A DOUBLE.
    Real(f64),
    /// An integer; `unsigned` from the event's flags.
    Int {
        /// The 8 stored bytes as i64.
        value: i64,
        /// Whether the value is unsigned.
        unsigned: bool,
    },
    /// A DECIMAL as its exact text.
    Decimal(String),
}
