//! Native replication takeover and handback (shared/DESIGN.md §1 steps 1
//! and 6, issue 7 parts 2 and 3).
//!
//! shardrep runs next to a MariaDB replica that already replicates natively
//! from the source master. To take over it stops the replica's slave threads
//! at a transaction boundary and reads the replica's executed position; the
//! extractor then reads the master's binlog from there. To hand back it points
//! the replica's native replication at the position after the last
//! transaction shardrep applied, and optionally starts it again.
//!
//! # The steps and who calls them
//! 1. [`check_master`] on a connection to the configured source: binary
//!    logging, row format, row image, checksum, server id, GTID domain and the
//!    binlogs still present ([`MasterFacts`]).
//! 2. [`check_replica`] on a connection to the replica: it is not the master
//!    itself, it replicates from that same master ([`ReplicaFacts`]).
//! 3. [`takeover`] (runs [`check_replica`] itself, so it cannot stop a
//!    replica of another master): `STOP SLAVE`, wait for the SQL thread to be
//!    stopped, read its executed position ([`TakeoverPoint`]).
//! 4. [`handback`]: `STOP SLAVE` if running, `CHANGE MASTER TO` the
//!    [`HandbackPoint`] (file:pos, or `gtid_slave_pos` with
//!    `MASTER_USE_GTID = slave_pos`), optionally `START SLAVE` and verify
//!    that both slave threads run without error.
//!
//! # Position semantics (verified on MariaDB 10.11 in `tests/replica_takeover.rs`)
//! - `Exec_Master_Log_Pos` in `Relay_Master_Log_File` is the master binlog
//!   offset *after* the last event the SQL thread executed, which is the
//!   start of the next event group: after a transaction it is the
//!   `End_log_pos` of that transaction's `Xid`/`COMMIT` event, i.e. exactly
//!   shardrep's [`crate::event::Transaction::end_position`] of the last
//!   applied transaction. The SQL thread also "executes" the non-transaction
//!   events that follow (`Gtid_list`, `Binlog_checkpoint`, `Rotate`), so the
//!   position may be past the end of the last transaction (e.g.
//!   `mariadb-bin.000002:389` after a `FLUSH BINARY LOGS`), but it is never
//!   inside a transaction and never after a transaction that was not
//!   executed. With a caught-up idle replica it equals the master's
//!   `SHOW MASTER STATUS`. (MariaDB KB, "SHOW REPLICA STATUS":
//!   `Exec_Master_Log_Pos`, `Relay_Master_Log_File`.)
//! - `@@gtid_slave_pos` is, per replication domain, the GTID of the last
//!   transaction the SQL thread applied (MariaDB KB, "Global Transaction
//!   ID", gtid_slave_pos); extraction resumes after it.
//! - At handback `MASTER_LOG_POS` is the `end_position` of the last applied
//!   transaction (its `Xid` event's `End_log_pos`), and `MASTER_LOG_FILE` its
//!   file: the replica's IO thread reads from that offset, which is the next
//!   transaction's first event (or the `Rotate` that ends the file). In GTID
//!   mode `gtid_slave_pos` is the GTID position after that transaction.
//!
//! A replica's SQL thread stops only between event groups: `STOP SLAVE`
//! waits for the current group to commit (MariaDB KB, "STOP REPLICA"). A
//! group with non-transactional changes that cannot finish within 60 s is
//! interrupted with an error, which [`takeover`] refuses
//! (`Last_SQL_Errno != 0`), so a takeover position is always a group
//! boundary.
//!
//! Every error ([`ReplicaError`]) names the server (`host:port`), the setting
//! or status field, the expected and the actual value. Passwords are never
//! part of an error or a log line.

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row};

use crate::catalog;
use crate::config::Secret;
use crate::mysql::sql_string_literal;
use crate::position::{BinlogPosition, GtidPos};

/// How long [`takeover`] and [`handback`] wait for the slave threads to
/// stop after `STOP SLAVE` (it normally returns when they have).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long [`handback`] with `start_slave` waits for both slave threads to
/// run after `START SLAVE`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// After both slave threads run, how long [`handback`] keeps watching that
/// neither stops on an error (a wrong position shows up as an IO error 1236
/// or an SQL error 1062/1032 within moments).
pub const START_SETTLE: Duration = Duration::from_millis(1500);

/// A server address as shardrep connects to it (`host:port`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Host name or address, as configured.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Endpoint {
    /// An endpoint.
    pub fn new(host: impl Into<String>, port: u16) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
        }
    }

    /// The address `conn` was opened to (its `Opts`), so that facts read on a
    /// connection are always attributed to the server they came from.
    pub fn of(conn: &Conn) -> Endpoint {
        let opts = conn.opts();
        Endpoint::new(opts.ip_or_hostname(), opts.tcp_port())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Connection options for the master or the replica: TCP to `host:port`,
/// or the Unix socket `socket` when given (the replica's `[replica]
/// socket`); `prefer_socket` off, so the configured transport is the one
/// used, as the apply channels connect ([`crate::mysql::connection_opts`]).
pub fn opts(
    host: &str,
    port: u16,
    socket: Option<&std::path::Path>,
    user: &str,
    password: &Secret,
) -> Opts {
    crate::mysql::connection_opts(host, port, socket, user, password.expose())
}

/// Opens a connection with [`opts`].
///
/// # Errors
/// [`ReplicaError::Connect`] naming `host:port` (never the password).
pub async fn connect(
    host: &str,
    port: u16,
    socket: Option<&std::path::Path>,
    user: &str,
    password: &Secret,
) -> Result<Conn, ReplicaError> {
    Conn::new(opts(host, port, socket, user, password))
        .await
        .map_err(|e| ReplicaError::Connect {
            server: Endpoint::new(host, port),
            message: describe(&e),
            code: match &e {
                mysql_async::Error::Server(s) => Some(s.code),
                _ => None,
            },
        })
}

/// Why a takeover or handback step refused or failed. Every variant names
/// the server; the messages name the setting or status field, the expected
/// and the actual value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    /// The server could not be reached.
    #[error("cannot connect to {server}: {message}")]
    Connect {
        /// The server.
        server: Endpoint,
        /// The driver's message.
        message: String,
        /// The server's error code (e.g. 1045, `ER_ACCESS_DENIED_ERROR`)
        /// when the server refused the login; `None` when no server
        /// answered.
        code: Option<u16>,
    },
    /// A statement failed.
    #[error("{server}: `{statement}` failed: {message}")]
    Sql {
        /// The server.
        server: Endpoint,
        /// The statement (never contains a password).
        statement: String,
        /// The server's code and message, or the driver's.
        message: String,
    },
    /// A server setting or status field has a value shardrep refuses.
    #[error("{server}: {setting} is {actual}, expected {expected}{hint}")]
    Setting {
        /// The server.
        server: Endpoint,
        /// The system variable or `SHOW SLAVE STATUS` field.
        setting: &'static str,
        /// What shardrep needs.
        expected: String,
        /// What the server has.
        actual: String,
        /// What to do about it (empty or starting with `; `).
        hint: &'static str,
    },
    /// The binlog a position needs is no longer (or not yet) on the master.
    #[error(
        "binlog purged: {master} no longer has {file} (needed for position {file}:{pos}); \
         its binary logs are {binlogs} (SHOW BINARY LOGS). Re-seed the replica \
         or keep binlogs longer (expire_logs_days / binlog_expire_logs_seconds)"
    )]
    BinlogPurged {
        /// The master.
        master: Endpoint,
        /// The needed file.
        file: String,
        /// The needed offset.
        pos: u64,
        /// The binlogs present, `OLDEST .. NEWEST`.
        binlogs: String,
    },
    /// The position is not in any binlog the master has (a file newer than
    /// its newest, or an offset beyond a file's size): another master, or
    /// a master that was reset.
    #[error(
        "{master} has no position {file}:{pos}: {reason} (SHOW BINARY LOGS: {binlogs}); \
         is this the replica's master, or was the master reset?"
    )]
    NoSuchPosition {
        /// The master.
        master: Endpoint,
        /// The file.
        file: String,
        /// The offset.
        pos: u64,
        /// What does not match.
        reason: String,
        /// The binlogs present, `OLDEST .. NEWEST`.
        binlogs: String,
    },
    /// A takeover position and the master's binlog disagree.
    #[error(
        "{master}: position {file}:{pos} does not match gtid_slave_pos {gtid_slave_pos:?}: \
         BINLOG_GTID_POS({file}, {pos}) is {binlog_gtid_pos}, expected {gtid_slave_pos:?}"
    )]
    PositionMismatch {
        /// The master.
        master: Endpoint,
        /// `Relay_Master_Log_File`.
        file: String,
        /// `Exec_Master_Log_Pos`.
        pos: u64,
        /// The replica's `gtid_slave_pos`.
        gtid_slave_pos: String,
        /// What the master says (or why NULL).
        binlog_gtid_pos: String,
    },
    /// The replica has no native replication configured.
    #[error(
        "{replica}: no slave is configured (SHOW SLAVE STATUS returns no row or an empty \
         Master_Host); configure native replication (CHANGE MASTER TO) before takeover or handback"
    )]
    NotConfigured {
        /// The replica.
        replica: Endpoint,
    },
    /// The replica has several named master connections (multi-source).
    #[error(
        "{replica}: has {count} master connections (SHOW ALL SLAVES STATUS), expected 1; \
         shardrep takes over only a single-source replica"
    )]
    MultiSource {
        /// The replica.
        replica: Endpoint,
        /// Number of connections.
        count: usize,
    },
    /// The replica replicates from another server than the configured source.
    #[error(
        "{replica} replicates from {actual} (Master_Host/Master_Port of SHOW SLAVE STATUS), \
         but the configured source is {expected}{detail}; refusing to read the wrong master"
    )]
    WrongMaster {
        /// The replica.
        replica: Endpoint,
        /// The configured source master.
        expected: Endpoint,
        /// The replica's own master setting.
        actual: Endpoint,
        /// More detail (server ids), empty or starting with `; `.
        detail: String,
    },
    /// The "replica" is the master itself.
    #[error(
        "{replica} is the source master {master} itself: {reason}; \
         configure the replica's address in [replica]"
    )]
    SameServer {
        /// The replica as configured.
        replica: Endpoint,
        /// The master as configured.
        master: Endpoint,
        /// Which identity matched (server_id, @@hostname:@@port).
        reason: String,
    },
    /// The slave SQL thread stopped on an error.
    #[error(
        "{replica}: the slave SQL thread stopped with an error: Last_SQL_Errno is {errno}, \
         expected 0 (Last_SQL_Error: {message}); fix native replication first"
    )]
    SqlThreadError {
        /// The replica.
        replica: Endpoint,
        /// `Last_SQL_Errno`.
        errno: u32,
        /// `Last_SQL_Error`.
        message: String,
    },
    /// The slave IO thread stopped on an error (after `START SLAVE`).
    #[error(
        "{replica}: the slave IO thread failed: Last_IO_Errno is {errno}, expected 0 \
         (Last_IO_Error: {message})"
    )]
    IoThreadError {
        /// The replica.
        replica: Endpoint,
        /// `Last_IO_Errno`.
        errno: u32,
        /// `Last_IO_Error`.
        message: String,
    },
    /// A wait did not finish in time.
    #[error("{replica}: {field} is still {actual} after {waited_ms} ms, expected {expected}")]
    Timeout {
        /// The replica.
        replica: Endpoint,
        /// The status field.
        field: String,
        /// Wanted value.
        expected: String,
        /// Value at the deadline.
        actual: String,
        /// How long we waited, milliseconds.
        waited_ms: u128,
    },
    /// A status field or variable has a value shardrep cannot read.
    #[error("{server}: cannot read {field}: {message}")]
    Field {
        /// The server.
        server: Endpoint,
        /// The field or variable.
        field: String,
        /// Why.
        message: String,
    },
    /// A handback position is malformed (checked before the replica is
    /// touched).
    #[error("invalid handback {what} {value:?}: {reason}")]
    InvalidPosition {
        /// `MASTER_LOG_FILE`, `MASTER_LOG_POS` or `gtid_slave_pos`.
        what: String,
        /// The offending value (for a file name, as given).
        value: String,
        /// Why.
        reason: String,
    },
}

fn describe(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => {
            format!("server error {} ({}): {}", s.code, s.state, s.message)
        }
        other => crate::mysql::error_text(other),
    }
}

fn sql_error(server: &Endpoint, statement: &str, e: &mysql_async::Error) -> ReplicaError {
    ReplicaError::Sql {
        server: server.clone(),
        statement: statement.to_owned(),
        message: describe(e),
    }
}

async fn run(conn: &mut Conn, server: &Endpoint, statement: &str) -> Result<(), ReplicaError> {
    conn.query_drop(statement)
        .await
        .map_err(|e| sql_error(server, statement, &e))
}

/// One row of `SELECT` with text columns; `None` values become "".
async fn select_row(
    conn: &mut Conn,
    server: &Endpoint,
    statement: &str,
) -> Result<Row, ReplicaError> {
    let row: Option<Row> = conn
        .query_first(statement)
        .await
        .map_err(|e| sql_error(server, statement, &e))?;
    row.ok_or_else(|| ReplicaError::Field {
        server: server.clone(),
        field: statement.to_owned(),
        message: "no row returned".into(),
    })
}

/// Column `name` of `row` as text (`None` for SQL NULL or a missing column).
fn text(row: &Row, name: &str) -> Option<String> {
    let idx = row
        .columns_ref()
        .iter()
        .position(|c| c.name_str() == name)?;
    match row.as_ref(idx)? {
        mysql_async::Value::NULL => None,
        mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        other => Some(other.as_sql(true).trim_matches('\'').to_owned()),
    }
}

fn required(row: &Row, server: &Endpoint, name: &str) -> Result<String, ReplicaError> {
    text(row, name).ok_or_else(|| ReplicaError::Field {
        server: server.clone(),
        field: name.to_owned(),
        message: "missing or NULL".into(),
    })
}

fn number<T: std::str::FromStr>(
    row: &Row,
    server: &Endpoint,
    name: &str,
) -> Result<T, ReplicaError> {
    let value = required(row, server, name)?;
    value.trim().parse().map_err(|_| ReplicaError::Field {
        server: server.clone(),
        field: name.to_owned(),
        message: format!("expected a number, got {value:?}"),
    })
}

fn on_off(value: &str) -> bool {
    matches!(value.to_ascii_uppercase().as_str(), "1" | "ON" | "YES")
}

// ---------------------------------------------------------------------------
// Master checks
// ---------------------------------------------------------------------------

/// The master's `binlog_row_image` (MariaDB KB, "Replication and Binary Log
/// System Variables": binlog_row_image).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowImage {
    /// `FULL`: every column in before and after images.
    Full,
    /// `MINIMAL`: key columns in before images, changed columns in after
    /// images.
    Minimal,
    /// `NOBLOB`: like FULL without unneeded BLOB/TEXT columns.
    Noblob,
}

impl fmt::Display for RowImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RowImage::Full => "FULL",
            RowImage::Minimal => "MINIMAL",
            RowImage::Noblob => "NOBLOB",
        })
    }
}

/// One line of `SHOW BINARY LOGS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryLog {
    /// `Log_name`, e.g. `mariadb-bin.000012`.
    pub name: String,
    /// `File_size` in bytes when it was read (the newest file grows).
    pub size: u64,
}

/// What [`check_master`] found on the source master. Built only by
/// [`check_master`], so a value always describes a master that passed the
/// checks, at the address it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MasterFacts {
    /// Where the facts were read (the configured source address).
    pub endpoint: Endpoint,
    /// `@@server_id`.
    pub server_id: u32,
    /// `@@hostname` (the machine's name as the server reports it).
    pub hostname: String,
    /// `@@port`.
    pub port: u16,
    /// `@@version`.
    pub version: String,
    /// `@@gtid_domain_id`.
    pub gtid_domain_id: u32,
    /// `@@global.binlog_row_image`.
    pub row_image: RowImage,
    /// `@@global.binlog_checksum` (`NONE` or `CRC32`).
    pub binlog_checksum: String,
    /// `@@gtid_binlog_pos` when read.
    pub gtid_binlog_pos: GtidPos,
    /// `SHOW BINARY LOGS`, oldest first (never empty).
    pub binary_logs: Vec<BinaryLog>,
}

impl MasterFacts {
    /// The oldest binlog still present on the master.
    pub fn oldest_binlog(&self) -> &str {
        &self.binary_logs[0].name
    }

    /// The newest binlog (the one being written).
    pub fn newest_binlog(&self) -> &str {
        &self.binary_logs[self.binary_logs.len() - 1].name
    }

    /// `OLDEST .. NEWEST` binlog names.
    pub fn binlog_range(&self) -> String {
        format!("{} .. {}", self.oldest_binlog(), self.newest_binlog())
    }

    /// Checks that `file:pos` can still be read from the master (retention):
    /// `file` is one of its binary logs and `pos` is not beyond that file's
    /// size (for the newest file, its size when [`check_master`] ran).
    ///
    /// # Errors
    /// [`ReplicaError::BinlogPurged`] when `file` is older than the oldest
    /// binlog present; [`ReplicaError::NoSuchPosition`] when it is newer than
    /// the newest, missing from the list, or `pos` is past its end.
    pub fn check_retained(&self, file: &str, pos: u64) -> Result<(), ReplicaError> {
        let no_such = |reason: String| ReplicaError::NoSuchPosition {
            master: self.endpoint.clone(),
            file: file.to_owned(),
            pos,
            reason,
            binlogs: self.binlog_range(),
        };
        if let Some(log) = self.binary_logs.iter().find(|l| l.name == file) {
            let newest = log.name == self.newest_binlog();
            if pos > log.size && !newest {
                return Err(no_such(format!(
                    "offset {pos} is beyond the file's size {} bytes",
                    log.size
                )));
            }
            return Ok(());
        }
        let wanted = BinlogPosition::new(file, pos).ok();
        let oldest = BinlogPosition::new(self.oldest_binlog(), 4).ok();
        if let (Some(w), Some(o)) = (&wanted, &oldest) {
            if w.same_log_family(o) && w.file_index() < o.file_index() {
                return Err(ReplicaError::BinlogPurged {
                    master: self.endpoint.clone(),
                    file: file.to_owned(),
                    pos,
                    binlogs: self.binlog_range(),
                });
            }
        }
        Err(no_such("the master has no binlog of that name".into()))
    }
}

/// Checks the source master's preconditions for row-based extraction and
/// returns what it found. The address is taken from `conn` itself
/// ([`Endpoint::of`]), so facts cannot be attributed to another server.
///
/// Checks (MariaDB KB, "Replication and Binary Log System Variables" and
/// "Binary Log Formats"):
/// - `log_bin` is `ON` (else [`ReplicaError::Setting`] naming `log_bin`);
/// - `binlog_format` (global) is `ROW` or `MIXED` (MIXED logs as
///   statements only what is safe to replay, temporary tables included,
///   which the channels apply as statements); `STATEMENT` is refused
///   naming `binlog_format`, expected `ROW or MIXED` and the actual value;
/// - `binlog_row_image` is `FULL`, `MINIMAL` or `NOBLOB` (reported in
///   [`MasterFacts::row_image`]); anything else is refused;
/// - reads `binlog_checksum`, `server_id`, `gtid_domain_id`,
///   `gtid_binlog_pos`, `@@hostname`/`@@port` and `SHOW BINARY LOGS`
///   (needs the `BINLOG MONITOR` / `REPLICATION CLIENT` privilege).
///
/// Logs nothing: a takeover checks twice (before and after `STOP SLAVE`),
/// and its caller logs the facts once.
///
/// # Errors
/// [`ReplicaError::Setting`] for a refused setting, [`ReplicaError::Sql`] /
/// [`ReplicaError::Field`] when something cannot be read.
pub async fn check_master(conn: &mut Conn) -> Result<MasterFacts, ReplicaError> {
    let server = Endpoint::of(conn);
    let row = select_row(
        conn,
        &server,
        "SELECT @@GLOBAL.log_bin AS log_bin, @@GLOBAL.binlog_format AS binlog_format, \
         @@GLOBAL.binlog_row_image AS binlog_row_image, \
         @@GLOBAL.binlog_checksum AS binlog_checksum, @@GLOBAL.server_id AS server_id, \
         @@GLOBAL.gtid_domain_id AS gtid_domain_id, @@GLOBAL.gtid_binlog_pos AS gtid_binlog_pos, \
         @@hostname AS hostname, @@port AS port, @@version AS version",
    )
    .await?;
    let setting = |name: &'static str, expected: &str, actual: &str, hint: &'static str| {
        ReplicaError::Setting {
            server: server.clone(),
            setting: name,
            expected: expected.to_owned(),
            actual: actual.to_owned(),
            hint,
        }
    };
    let log_bin = required(&row, &server, "log_bin")?;
    if !on_off(&log_bin) {
        return Err(setting(
            "log_bin",
            "ON",
            "OFF",
            "; start the master with --log-bin",
        ));
    }
    let format = required(&row, &server, "binlog_format")?.to_ascii_uppercase();
    if format != "ROW" && format != "MIXED" {
        return Err(setting(
            "binlog_format",
            "ROW or MIXED",
            &format,
            "; statement format replays unsafe statements as they are (SET GLOBAL \
             binlog_format = 'ROW' and binlog_format = ROW in the master's configuration)",
        ));
    }
    let image = required(&row, &server, "binlog_row_image")?.to_ascii_uppercase();
    let row_image = match image.as_str() {
        "FULL" => RowImage::Full,
        "MINIMAL" => RowImage::Minimal,
        "NOBLOB" => RowImage::Noblob,
        other => {
            return Err(setting(
                "binlog_row_image",
                "FULL, MINIMAL or NOBLOB",
                other,
                "",
            ))
        }
    };
    let gtid_text = text(&row, "gtid_binlog_pos").unwrap_or_default();
    let gtid_binlog_pos = gtid_text.parse().map_err(|e| ReplicaError::Field {
        server: server.clone(),
        field: "gtid_binlog_pos".into(),
        message: format!("{e}"),
    })?;
    let statement = "SHOW BINARY LOGS";
    let logs: Vec<Row> = conn
        .query(statement)
        .await
        .map_err(|e| sql_error(&server, statement, &e))?;
    let mut binary_logs = Vec::with_capacity(logs.len());
    for log in &logs {
        binary_logs.push(BinaryLog {
            name: required(log, &server, "Log_name")?,
            size: number(log, &server, "File_size")?,
        });
    }
    if binary_logs.is_empty() {
        return Err(ReplicaError::Field {
            server,
            field: statement.into(),
            message: "no binary logs listed".into(),
        });
    }
    let facts = MasterFacts {
        server_id: number(&row, &server, "server_id")?,
        hostname: required(&row, &server, "hostname")?,
        port: number(&row, &server, "port")?,
        version: required(&row, &server, "version")?,
        gtid_domain_id: number(&row, &server, "gtid_domain_id")?,
        row_image,
        binlog_checksum: required(&row, &server, "binlog_checksum")?.to_ascii_uppercase(),
        gtid_binlog_pos,
        binary_logs,
        endpoint: server,
    };
    Ok(facts)
}

// ---------------------------------------------------------------------------
// Slave status
// ---------------------------------------------------------------------------

/// `Using_Gtid` of `SHOW SLAVE STATUS` / `MASTER_USE_GTID` of `CHANGE MASTER
/// TO` (MariaDB KB, "CHANGE MASTER TO": MASTER_USE_GTID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsingGtid {
    /// `No`: the replica connects by file:pos.
    No,
    /// `Slave_Pos`: connects at `@@gtid_slave_pos`.
    SlavePos,
    /// `Current_Pos`: connects at `@@gtid_current_pos`.
    CurrentPos,
}

impl UsingGtid {
    fn parse(text: &str) -> Option<UsingGtid> {
        match text.to_ascii_lowercase().as_str() {
            "no" => Some(UsingGtid::No),
            "slave_pos" => Some(UsingGtid::SlavePos),
            "current_pos" => Some(UsingGtid::CurrentPos),
            _ => None,
        }
    }
}

impl fmt::Display for UsingGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UsingGtid::No => "No",
            UsingGtid::SlavePos => "Slave_Pos",
            UsingGtid::CurrentPos => "Current_Pos",
        })
    }
}

/// The fields of `SHOW SLAVE STATUS` shardrep uses (MariaDB KB, "SHOW
/// REPLICA STATUS").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveStatus {
    /// `Master_Host`.
    pub master_host: String,
    /// `Master_Port`.
    pub master_port: u16,
    /// `Master_Server_Id` (0 until the IO thread has connected once).
    pub master_server_id: u32,
    /// `Slave_IO_Running`: `Yes`, `No` or `Preparing`/`Connecting`.
    pub io_running: String,
    /// `Slave_SQL_Running` is `Yes`.
    pub sql_running: bool,
    /// `Master_Log_File`: the master binlog the IO thread reads.
    pub master_log_file: String,
    /// `Read_Master_Log_Pos`.
    pub read_master_log_pos: u64,
    /// `Relay_Master_Log_File`: master binlog of the last executed event.
    pub relay_master_log_file: String,
    /// `Exec_Master_Log_Pos`: offset after the last executed event in
    /// `Relay_Master_Log_File` (see the module doc).
    pub exec_master_log_pos: u64,
    /// `Using_Gtid`.
    pub using_gtid: UsingGtid,
    /// `Last_Errno`.
    pub last_errno: u32,
    /// `Last_SQL_Errno`.
    pub last_sql_errno: u32,
    /// `Last_SQL_Error`.
    pub last_sql_error: String,
    /// `Last_IO_Errno`.
    pub last_io_errno: u32,
    /// `Last_IO_Error`.
    pub last_io_error: String,
}

impl SlaveStatus {
    /// `Master_Host:Master_Port`.
    pub fn master(&self) -> Endpoint {
        Endpoint::new(self.master_host.clone(), self.master_port)
    }
}

/// `SHOW SLAVE STATUS` of the default connection; `None` when no slave is
/// configured (no row, or an empty `Master_Host`).
///
/// # Errors
/// [`ReplicaError::Sql`], or [`ReplicaError::Field`] for an unreadable field.
pub async fn slave_status(conn: &mut Conn) -> Result<Option<SlaveStatus>, ReplicaError> {
    let server = Endpoint::of(conn);
    let statement = "SHOW SLAVE STATUS";
    let row: Option<Row> = conn
        .query_first(statement)
        .await
        .map_err(|e| sql_error(&server, statement, &e))?;
    let Some(row) = row else { return Ok(None) };
    let master_host = text(&row, "Master_Host").unwrap_or_default();
    if master_host.is_empty() {
        return Ok(None);
    }
    let using = required(&row, &server, "Using_Gtid")?;
    let using_gtid = UsingGtid::parse(&using).ok_or_else(|| ReplicaError::Field {
        server: server.clone(),
        field: "Using_Gtid".into(),
        message: format!("expected No, Slave_Pos or Current_Pos, got {using:?}"),
    })?;
    Ok(Some(SlaveStatus {
        master_host,
        master_port: number(&row, &server, "Master_Port")?,
        master_server_id: number(&row, &server, "Master_Server_Id")?,
        io_running: required(&row, &server, "Slave_IO_Running")?,
        sql_running: on_off(&required(&row, &server, "Slave_SQL_Running")?),
        master_log_file: text(&row, "Master_Log_File").unwrap_or_default(),
        read_master_log_pos: number(&row, &server, "Read_Master_Log_Pos")?,
        relay_master_log_file: text(&row, "Relay_Master_Log_File").unwrap_or_default(),
        exec_master_log_pos: number(&row, &server, "Exec_Master_Log_Pos")?,
        using_gtid,
        last_errno: number(&row, &server, "Last_Errno")?,
        last_sql_errno: number(&row, &server, "Last_SQL_Errno")?,
        last_sql_error: text(&row, "Last_SQL_Error").unwrap_or_default(),
        last_io_errno: number(&row, &server, "Last_IO_Errno")?,
        last_io_error: text(&row, "Last_IO_Error").unwrap_or_default(),
    }))
}

/// Other shardrep services applying to this server: the schemas other than
/// `own_catalog` that hold a restart table ([`catalog::RESTART_TABLE`])
/// with rows, each as `<schema> at seqno <lowest>`. A takeover by another
/// service would start from native replication's position, which such a
/// service has left behind.
///
/// # Errors
/// [`ReplicaError::Sql`].
pub async fn other_services(
    conn: &mut Conn,
    own_catalog: &str,
) -> Result<Vec<String>, ReplicaError> {
    let server = Endpoint::of(conn);
    let statement = catalog::other_restart_tables();
    let catalogs: Vec<String> = conn
        .exec(&statement, (own_catalog,))
        .await
        .map_err(|e| sql_error(&server, &statement, &e))?;
    let mut out = Vec::new();
    for catalog in catalogs {
        let statement = catalog::restart_rows_and_lowest(&catalog);
        let row: Option<(u64, Option<i64>)> = conn
            .query_first(&statement)
            .await
            .map_err(|e| sql_error(&server, &statement, &e))?;
        if let Some((_, lowest)) = row.filter(|(rows, _)| *rows > 0) {
            out.push(match lowest {
                Some(seqno) => format!("{catalog} at seqno {seqno}"),
                None => catalog,
            });
        }
    }
    Ok(out)
}

/// The replication connections of this server whose SQL thread is running
/// (`SHOW ALL SLAVES STATUS`, MariaDB KB "SHOW REPLICA STATUS"), each
/// described as `connection '<name>' from <master host>:<port>`. Empty when
/// native replication applies nothing.
///
/// # Errors
/// [`ReplicaError::Sql`].
pub async fn running_native_appliers(conn: &mut Conn) -> Result<Vec<String>, ReplicaError> {
    let server = Endpoint::of(conn);
    let statement = "SHOW ALL SLAVES STATUS";
    let rows: Vec<Row> = conn
        .query(statement)
        .await
        .map_err(|e| sql_error(&server, statement, &e))?;
    Ok(rows
        .iter()
        .filter(|row| text(row, "Slave_SQL_Running").is_some_and(|v| on_off(&v)))
        .map(|row| {
            format!(
                "connection '{}' from {}:{}",
                text(row, "Connection_name").unwrap_or_default(),
                text(row, "Master_Host").unwrap_or_default(),
                text(row, "Master_Port").unwrap_or_default()
            )
        })
        .collect())
}

async fn configured_status(conn: &mut Conn) -> Result<SlaveStatus, ReplicaError> {
    slave_status(conn)
        .await?
        .ok_or_else(|| ReplicaError::NotConfigured {
            replica: Endpoint::of(conn),
        })
}

// ---------------------------------------------------------------------------
// Replica checks
// ---------------------------------------------------------------------------

/// What [`check_replica`] found on the replica.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaFacts {
    /// Where the facts were read (the configured replica address).
    pub endpoint: Endpoint,
    /// `@@server_id`.
    pub server_id: u32,
    /// `@@hostname`.
    pub hostname: String,
    /// `@@port`.
    pub port: u16,
    /// `@@read_only` is ON (shardrep's user then needs `SUPER` /
    /// `READ_ONLY ADMIN` to write; reported, not refused).
    pub read_only: bool,
    /// `@@slave_parallel_threads` (with more than 0 and several GTID
    /// domains, only `gtid_slave_pos` is an exact position; see [`takeover`]).
    pub parallel_threads: u64,
    /// `@@gtid_slave_pos`.
    pub gtid_slave_pos: GtidPos,
    /// `SHOW SLAVE STATUS`.
    pub slave: SlaveStatus,
}

/// Whether `a` and `b` name the same host: equal ignoring ASCII case, or
/// resolving (with any port) to at least one common address.
async fn same_host(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    async fn addresses(host: &str) -> BTreeSet<std::net::IpAddr> {
        match tokio::net::lookup_host((host, 0)).await {
            Ok(iter) => iter.map(|a| a.ip()).collect(),
            Err(_) => BTreeSet::new(),
        }
    }
    let (x, y) = (addresses(a).await, addresses(b).await);
    !x.is_disjoint(&y)
}

/// Refuses unless the replica's `Master_Host:Master_Port` is `master`'s
/// address (same port; host equal or resolving to a common address) and,
/// when the replica has seen its master, `Master_Server_Id` is `master`'s
/// server id.
async fn check_same_master(
    replica: &Endpoint,
    status: &SlaveStatus,
    master: &Endpoint,
    master_server_id: Option<u32>,
) -> Result<(), ReplicaError> {
    let actual = status.master();
    let address_ok = actual.port == master.port && same_host(&actual.host, &master.host).await;
    if !address_ok {
        return Err(ReplicaError::WrongMaster {
            replica: replica.clone(),
            expected: master.clone(),
            actual,
            detail: String::new(),
        });
    }
    if let Some(id) = master_server_id {
        if status.master_server_id != 0 && status.master_server_id != id {
            return Err(ReplicaError::WrongMaster {
                replica: replica.clone(),
                expected: master.clone(),
                actual,
                detail: format!(
                    "; Master_Server_Id is {}, expected the source's server_id {id}",
                    status.master_server_id
                ),
            });
        }
    }
    Ok(())
}

/// Checks the replica against the source master `master` (from
/// [`check_master`]) and returns what it found:
/// - it is not the master itself: `@@server_id` differs from the master's,
///   and `@@hostname:@@port` differs from the master's
///   ([`ReplicaError::SameServer`]);
/// - native replication is configured ([`ReplicaError::NotConfigured`]) on a
///   single connection ([`ReplicaError::MultiSource`]);
/// - its `Master_Host`/`Master_Port` (SHOW SLAVE STATUS) is the configured
///   source, and its `Master_Server_Id` (once known) the master's
///   `server_id` ([`ReplicaError::WrongMaster`], naming both addresses).
///
/// `read_only` is reported, not refused. Logs nothing (as
/// [`check_master`]).
///
/// # Errors
/// As listed, and [`ReplicaError::Sql`] / [`ReplicaError::Field`].
pub async fn check_replica(
    conn: &mut Conn,
    master: &MasterFacts,
) -> Result<ReplicaFacts, ReplicaError> {
    let server = Endpoint::of(conn);
    let row = select_row(
        conn,
        &server,
        "SELECT @@GLOBAL.server_id AS server_id, @@hostname AS hostname, @@port AS port, \
         @@GLOBAL.read_only AS read_only, @@GLOBAL.slave_parallel_threads AS parallel_threads, \
         @@GLOBAL.gtid_slave_pos AS gtid_slave_pos",
    )
    .await?;
    let server_id: u32 = number(&row, &server, "server_id")?;
    let hostname = required(&row, &server, "hostname")?;
    let port: u16 = number(&row, &server, "port")?;
    if server_id == master.server_id {
        return Err(ReplicaError::SameServer {
            replica: server,
            master: master.endpoint.clone(),
            reason: format!("both have server_id {server_id}"),
        });
    }
    if hostname == master.hostname && port == master.port {
        return Err(ReplicaError::SameServer {
            replica: server,
            master: master.endpoint.clone(),
            reason: format!("both report @@hostname:@@port {hostname}:{port}"),
        });
    }
    let gtid_text = text(&row, "gtid_slave_pos").unwrap_or_default();
    let gtid_slave_pos = gtid_text.parse().map_err(|e| ReplicaError::Field {
        server: server.clone(),
        field: "gtid_slave_pos".into(),
        message: format!("{e}"),
    })?;
    let statement = "SHOW ALL SLAVES STATUS";
    let all: Vec<Row> = conn
        .query(statement)
        .await
        .map_err(|e| sql_error(&server, statement, &e))?;
    if all.len() > 1 {
        return Err(ReplicaError::MultiSource {
            replica: server,
            count: all.len(),
        });
    }
    let slave = configured_status(conn).await?;
    check_same_master(&server, &slave, &master.endpoint, Some(master.server_id)).await?;
    let facts = ReplicaFacts {
        server_id,
        hostname,
        port,
        read_only: on_off(&required(&row, &server, "read_only")?),
        parallel_threads: number(&row, &server, "parallel_threads")?,
        gtid_slave_pos,
        slave,
        endpoint: server,
    };
    Ok(facts)
}

// ---------------------------------------------------------------------------
// Takeover
// ---------------------------------------------------------------------------

/// Where native replication stopped: the replica's executed position on the
/// master, where extraction starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakeoverPoint {
    /// `Relay_Master_Log_File`: master binlog file.
    pub file: String,
    /// `Exec_Master_Log_Pos`: byte offset in `file` after the last executed
    /// event group, i.e. the start of the next one (see the module doc).
    pub pos: u64,
    /// `@@gtid_slave_pos`: per domain, the GTID of the last applied
    /// transaction.
    pub gtid_slave_pos: GtidPos,
    /// `Using_Gtid` of the native replication that was stopped (hand back
    /// the same way).
    pub using_gtid: UsingGtid,
    /// `Master_Host` of the replica.
    pub master_host: String,
    /// `Master_Port` of the replica.
    pub master_port: u16,
}

impl TakeoverPoint {
    /// `file:pos` as a [`BinlogPosition`].
    ///
    /// # Errors
    /// [`ReplicaError::Field`] when the file name is not `BASE.NNNNNN`.
    pub fn position(&self) -> Result<BinlogPosition, ReplicaError> {
        BinlogPosition::new(self.file.clone(), self.pos).map_err(|e| ReplicaError::Field {
            server: Endpoint::new(self.master_host.clone(), self.master_port),
            field: "Relay_Master_Log_File".into(),
            message: e.to_string(),
        })
    }
}

async fn wait_sql_stopped(conn: &mut Conn, timeout: Duration) -> Result<SlaveStatus, ReplicaError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        let status = configured_status(conn).await?;
        if !status.sql_running {
            return Ok(status);
        }
        if started.elapsed() >= timeout {
            return Err(ReplicaError::Timeout {
                replica: Endpoint::of(conn),
                field: "Slave_SQL_Running".into(),
                expected: "No".into(),
                actual: "Yes".into(),
                waited_ms: started.elapsed().as_millis(),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Takes over from the replica's native replication:
/// 1. `master` must be the connection [`check_master`] read
///    `expected_master` from (same address), and [`check_replica`] must pass
///    against it (refuses a replica of another master, or the master itself),
///    before anything is changed;
/// 2. `STOP SLAVE` (MariaDB KB, "STOP REPLICA": the SQL thread finishes its
///    current event group first), then polls `SHOW SLAVE STATUS` until
///    `Slave_SQL_Running = No` (at most [`STOP_TIMEOUT`]);
/// 3. refuses when the SQL thread stopped on an error (`Last_SQL_Errno != 0`:
///    the position might be inside a group that was interrupted);
/// 4. reads `Relay_Master_Log_File`, `Exec_Master_Log_Pos`, `Using_Gtid` and
///    `@@gtid_slave_pos`;
/// 5. on the master: the file is still present
///    ([`MasterFacts::check_retained`], re-read with `SHOW BINARY LOGS`), and
///    [`verify_point`]: `BINLOG_GTID_POS(file, pos)` is not NULL (the position
///    is an event-group boundary of the master's binlog) and equals
///    `gtid_slave_pos` (file:pos and GTID name the same point).
///
/// Idempotent: on a replica whose slave threads are already stopped it
/// returns the same point (STOP SLAVE then only warns 1255). When a check of
/// step 5 fails, native replication is started again if takeover stopped it.
///
/// With `slave_parallel_threads > 0` the stop is at a consistent point for
/// the in-order parallel modes; with several GTID domains replicated out of
/// order only `gtid_slave_pos` is exact, and [`verify_point`] refuses.
///
/// # Errors
/// [`ReplicaError::WrongMaster`] when `master` is not where
/// `expected_master` was read; those of [`check_replica`];
/// [`ReplicaError::SqlThreadError`], [`ReplicaError::Timeout`],
/// [`ReplicaError::BinlogPurged`] / [`ReplicaError::NoSuchPosition`],
/// [`ReplicaError::PositionMismatch`], [`ReplicaError::Sql`].
pub async fn takeover(
    replica: &mut Conn,
    master: &mut Conn,
    expected_master: &MasterFacts,
) -> Result<TakeoverPoint, ReplicaError> {
    let server = Endpoint::of(replica);
    let master_at = Endpoint::of(master);
    if master_at != expected_master.endpoint {
        return Err(ReplicaError::WrongMaster {
            replica: server,
            expected: expected_master.endpoint.clone(),
            actual: master_at,
            detail: "; the master connection given to takeover is not the checked master".into(),
        });
    }
    let before = check_replica(replica, expected_master).await?;
    let was_running = before.slave.sql_running || before.slave.io_running != "No";
    let mut refreshed = false;
    let point = loop {
        let (point, checked) = stop_and_check(replica, master, expected_master, &server).await?;
        match checked {
            Ok(()) => break point,
            Err(e) if !refreshed && point.using_gtid != UsingGtid::No && stale_position(&e) => {
                // Native replication by GTID starts from gtid_slave_pos,
                // whatever file:pos says (a re-seed, a GTID handback): let
                // it run a moment so that it reports its position again.
                refreshed = true;
                tracing::warn!(
                    replica = %server,
                    position = %format!("{}:{}", point.file, point.pos),
                    gtid_slave_pos = %point.gtid_slave_pos,
                    using_gtid = %point.using_gtid,
                    error = %e,
                    "the replica's file position does not name its gtid_slave_pos, from which \
                     native replication (by GTID) would start: starting native replication for \
                     a moment so that it reports its position, then taking over again"
                );
                if let Err(why) = refresh_position(replica, &server, &point).await {
                    tracing::warn!(replica = %server, error = %why,
                        "native replication did not report a new position");
                    let _ = run(replica, &server, "STOP SLAVE").await;
                    if was_running {
                        let _ = run(replica, &server, "START SLAVE").await;
                    }
                    return Err(e);
                }
            }
            Err(e) => {
                if was_running {
                    if let Err(restart) = run(replica, &server, "START SLAVE").await {
                        tracing::error!(replica = %server, error = %restart,
                            "could not restart native replication after a refused takeover");
                    }
                }
                return Err(e);
            }
        }
    };
    tracing::info!(
        replica = %server,
        position = %format!("{}:{}", point.file, point.pos),
        gtid_slave_pos = %point.gtid_slave_pos,
        using_gtid = %point.using_gtid,
        "native replication stopped: taking over"
    );
    Ok(point)
}

/// How long [`refresh_position`] lets native replication run at most
/// before it must have reported a new position.
pub const REFRESH_TIMEOUT: Duration = Duration::from_secs(60);

/// `STOP SLAVE`, then the takeover point and its checks against the master
/// (steps 2 to 5 of [`takeover`]): the point and whether it passed.
async fn stop_and_check(
    replica: &mut Conn,
    master: &mut Conn,
    expected_master: &MasterFacts,
    server: &Endpoint,
) -> Result<(TakeoverPoint, Result<(), ReplicaError>), ReplicaError> {
    run(replica, server, "STOP SLAVE").await?;
    let status = wait_sql_stopped(replica, STOP_TIMEOUT).await?;
    if status.last_sql_errno != 0 {
        return Err(ReplicaError::SqlThreadError {
            replica: server.clone(),
            errno: status.last_sql_errno,
            message: status.last_sql_error,
        });
    }
    let row = select_row(
        replica,
        server,
        "SELECT @@GLOBAL.gtid_slave_pos AS gtid_slave_pos",
    )
    .await?;
    let gtid_text = text(&row, "gtid_slave_pos").unwrap_or_default();
    let gtid_slave_pos: GtidPos = gtid_text.parse().map_err(|e| ReplicaError::Field {
        server: server.clone(),
        field: "gtid_slave_pos".into(),
        message: format!("{e}"),
    })?;
    let point = TakeoverPoint {
        file: status.relay_master_log_file.clone(),
        pos: status.exec_master_log_pos,
        gtid_slave_pos,
        using_gtid: status.using_gtid,
        master_host: status.master_host.clone(),
        master_port: status.master_port,
    };
    let checked = async {
        // The master setting cannot change while the slave is stopped by us,
        // but the status we return is checked against the master once more.
        check_same_master(
            server,
            &status,
            &expected_master.endpoint,
            Some(expected_master.server_id),
        )
        .await?;
        if point.file.is_empty() {
            return Err(ReplicaError::Field {
                server: server.clone(),
                field: "Relay_Master_Log_File".into(),
                message: "empty: the replica has not executed anything from its master yet".into(),
            });
        }
        check_no_open_temp_tables(replica, server).await?;
        let fresh = check_master(master).await?;
        fresh.check_retained(&point.file, point.pos)?;
        verify_point(master, &point).await
    }
    .await;
    Ok((point, checked))
}

/// Whether `e` says that the replica's file position is not where its
/// `gtid_slave_pos` is (purged, not a transaction boundary, another GTID
/// position, or none yet): stale while the replica replicates by GTID.
fn stale_position(e: &ReplicaError) -> bool {
    match e {
        ReplicaError::BinlogPurged { .. }
        | ReplicaError::NoSuchPosition { .. }
        | ReplicaError::PositionMismatch { .. } => true,
        ReplicaError::Field { field, .. } => field == "Relay_Master_Log_File",
        _ => false,
    }
}

/// `START SLAVE`, then waits (at most [`REFRESH_TIMEOUT`]) until the SQL
/// thread reports another executed position than `stale`'s, as it does
/// when it starts from `gtid_slave_pos` (the master's first event names
/// the position); the caller stops it again at once, so that native
/// replication applies as little as it can.
///
/// # Errors
/// A text saying why not: native replication stopped with an error, or
/// did not move in time.
async fn refresh_position(
    replica: &mut Conn,
    server: &Endpoint,
    stale: &TakeoverPoint,
) -> Result<(), String> {
    run(replica, server, "START SLAVE")
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    loop {
        let s = configured_status(replica)
            .await
            .map_err(|e| e.to_string())?;
        if s.last_sql_errno != 0 || s.last_io_errno != 0 {
            return Err(format!(
                "native replication stopped: {} {}",
                s.last_sql_error, s.last_io_error
            ));
        }
        let moved = (s.relay_master_log_file.as_str(), s.exec_master_log_pos)
            != (stale.file.as_str(), stale.pos)
            && !s.relay_master_log_file.is_empty();
        if moved && s.sql_running {
            // At once: native replication should apply as little as it can
            // before the takeover.
            return Ok(());
        }
        if started.elapsed() >= REFRESH_TIMEOUT {
            return Err(format!(
                "after {} s it still reports {}:{} (Slave_IO_Running {}, Slave_SQL_Running {})",
                REFRESH_TIMEOUT.as_secs(),
                s.relay_master_log_file,
                s.exec_master_log_pos,
                s.io_running,
                if s.sql_running { "Yes" } else { "No" }
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Refuses a takeover while the replica's SQL thread holds temporary
/// tables of master sessions (`Slave_open_temp_tables` > 0, statement or
/// mixed format): they live in the SQL thread, not on shardrep's
/// connections, so the sessions' later statements would fail.
///
/// # Errors
/// [`ReplicaError::Setting`] naming `Slave_open_temp_tables`;
/// [`ReplicaError::Sql`] / [`ReplicaError::Field`] when it cannot be read.
async fn check_no_open_temp_tables(conn: &mut Conn, server: &Endpoint) -> Result<(), ReplicaError> {
    let row = select_row(
        conn,
        server,
        "SELECT VARIABLE_VALUE AS open FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME = 'SLAVE_OPEN_TEMP_TABLES'",
    )
    .await?;
    let open = text(&row, "open").unwrap_or_default();
    if open.trim() != "0" && !open.is_empty() {
        return Err(ReplicaError::Setting {
            server: server.clone(),
            setting: "Slave_open_temp_tables",
            expected: "0".into(),
            actual: open,
            hint: "; native replication holds temporary tables of master sessions, which a \
                   takeover would lose: let it run until the master sessions have dropped them \
                   or ended, then take over",
        });
    }
    Ok(())
}

/// Checks a takeover point against the master's binlog (MariaDB KB,
/// "BINLOG_GTID_POS"): `BINLOG_GTID_POS(file, pos)` must not be NULL (NULL:
/// the file is not on the master, or `pos` is not the start of an event
/// group, i.e. it is inside a transaction) and must equal the point's
/// `gtid_slave_pos` in every domain's sequence number
/// ([`GtidPos::compare`]), so file:pos and GTID name the same transaction
/// boundary. A difference is refused when the replica used GTIDs
/// (`Using_Gtid` not `No`): then file:pos can be stale, e.g. after `CHANGE
/// MASTER TO MASTER_USE_GTID` before the SQL thread executed anything; start
/// native replication briefly and take over again. With `Using_Gtid = No`
/// file:pos is authoritative and a difference is only logged; an empty
/// `gtid_slave_pos` is always accepted.
///
/// # Errors
/// [`ReplicaError::PositionMismatch`], [`ReplicaError::Sql`].
pub async fn verify_point(master: &mut Conn, point: &TakeoverPoint) -> Result<(), ReplicaError> {
    let server = Endpoint::of(master);
    let statement = "SELECT BINLOG_GTID_POS(?, ?)";
    let found: Option<Option<String>> = master
        .exec_first(statement, (point.file.as_str(), point.pos))
        .await
        .map_err(|e| sql_error(&server, statement, &e))?;
    let mismatch = |actual: String| ReplicaError::PositionMismatch {
        master: server.clone(),
        file: point.file.clone(),
        pos: point.pos,
        gtid_slave_pos: point.gtid_slave_pos.to_string(),
        binlog_gtid_pos: actual,
    };
    let Some(text) = found.flatten() else {
        return Err(mismatch(
            "NULL (not an event-group boundary of a present binlog)".into(),
        ));
    };
    let at: GtidPos = text.parse().map_err(|e| ReplicaError::Field {
        server: server.clone(),
        field: "BINLOG_GTID_POS".into(),
        message: format!("{e}"),
    })?;
    if point.gtid_slave_pos.is_empty()
        || point.gtid_slave_pos.compare(&at) == Some(std::cmp::Ordering::Equal)
    {
        return Ok(());
    }
    if point.using_gtid == UsingGtid::No {
        // file:pos is what native replication used; gtid_slave_pos only
        // follows the domains it applied since it was last set.
        tracing::warn!(
            master = %server,
            position = %format!("{}:{}", point.file, point.pos),
            gtid_slave_pos = %point.gtid_slave_pos,
            binlog_gtid_pos = %at,
            "the replica replicated by file:pos and its gtid_slave_pos differs from the \
             master's GTID position at that point; file:pos is used"
        );
        return Ok(());
    }
    // As parsed (domains in order), like gtid_slave_pos beside it: the
    // server lists domains in its own order.
    Err(mismatch(at.to_string()))
}

// ---------------------------------------------------------------------------
// Handback
// ---------------------------------------------------------------------------

/// Where native replication continues after shardrep: the position after
/// the last transaction shardrep applied (every channel at the same seqno
/// after a clean offline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandbackPoint {
    /// `MASTER_LOG_FILE`: the master binlog file of the last applied
    /// transaction's end (`BASE.NNNNNN`).
    pub file: String,
    /// `MASTER_LOG_POS`: the byte offset after that transaction (its
    /// `end_position`, the `End_log_pos` of its `Xid`/`COMMIT` event); at
    /// least 4.
    pub pos: u64,
    /// The master's GTID position after that transaction
    /// (`D-S-N[,D-S-N...]`), set as `@@gtid_slave_pos`. Required for a GTID
    /// handback; with a file:pos handback it keeps `gtid_slave_pos`
    /// consistent when given.
    pub gtid_pos: Option<String>,
}

impl HandbackPoint {
    /// The point at a binlog position and GTID position.
    pub fn new(position: &BinlogPosition, gtid_pos: Option<&GtidPos>) -> HandbackPoint {
        HandbackPoint {
            file: position.file().to_owned(),
            pos: position.offset(),
            gtid_pos: gtid_pos.map(|g| g.to_string()),
        }
    }

    /// Back where a takeover found native replication.
    pub fn from_takeover(point: &TakeoverPoint) -> HandbackPoint {
        HandbackPoint {
            file: point.file.clone(),
            pos: point.pos,
            gtid_pos: Some(point.gtid_slave_pos.to_string()),
        }
    }
}

/// What [`handback`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandbackReport {
    /// The statements run, in order (no secrets).
    pub statements: Vec<String>,
    /// Warnings the server gave for them (`Level Code: Message`).
    pub warnings: Vec<String>,
    /// `SHOW SLAVE STATUS` at the end.
    pub status: SlaveStatus,
}

/// The validated statements of a handback, before the replica is touched.
#[derive(Debug, PartialEq, Eq)]
struct HandbackPlan {
    set_gtid: Option<String>,
    change_master: String,
}

fn plan_handback(
    point: &HandbackPoint,
    use_gtid: bool,
    no_backslash_escapes: bool,
) -> Result<HandbackPlan, ReplicaError> {
    let invalid = |what: &str, value: String, reason: String| ReplicaError::InvalidPosition {
        what: what.to_owned(),
        value,
        reason,
    };
    BinlogPosition::new(point.file.clone(), point.pos)
        .map_err(|e| invalid("MASTER_LOG_FILE", point.file.clone(), e.to_string()))?;
    if point.pos < 4 {
        return Err(invalid(
            "MASTER_LOG_POS",
            point.pos.to_string(),
            "a binlog position is at least 4 (after the magic header)".into(),
        ));
    }
    let gtid = match &point.gtid_pos {
        Some(text) => {
            let pos: GtidPos = text
                .parse()
                .map_err(|e| invalid("gtid_slave_pos", text.clone(), format!("{e}")))?;
            if pos.is_empty() {
                return Err(invalid(
                    "gtid_slave_pos",
                    text.clone(),
                    "an empty GTID position would replay the master from its first binlog".into(),
                ));
            }
            Some(pos)
        }
        None if use_gtid => {
            return Err(invalid(
                "gtid_slave_pos",
                String::new(),
                "a GTID handback needs the GTID position after the last applied transaction".into(),
            ))
        }
        None => None,
    };
    // The canonical GTID text is digits, '-' and ',' only.
    let set_gtid = gtid.map(|g| format!("SET GLOBAL gtid_slave_pos = '{g}'"));
    let change_master = if use_gtid {
        "CHANGE MASTER TO MASTER_USE_GTID = slave_pos".to_owned()
    } else {
        format!(
            "CHANGE MASTER TO MASTER_LOG_FILE = {}, MASTER_LOG_POS = {}, MASTER_USE_GTID = no",
            sql_string_literal(&point.file, no_backslash_escapes).map_err(|e| invalid(
                "MASTER_LOG_FILE",
                point.file.clone(),
                e.to_string()
            ))?,
            point.pos
        )
    };
    Ok(HandbackPlan {
        set_gtid,
        change_master,
    })
}

async fn warnings(conn: &mut Conn, server: &Endpoint) -> Result<Vec<String>, ReplicaError> {
    let rows: Vec<(String, u32, String)> = conn
        .query("SHOW WARNINGS")
        .await
        .map_err(|e| sql_error(server, "SHOW WARNINGS", &e))?;
    Ok(rows
        .into_iter()
        .map(|(level, code, message)| format!("{level} {code}: {message}"))
        .collect())
}

/// Waits until both slave threads run (`Slave_IO_Running = Yes`,
/// `Slave_SQL_Running = Yes`, at most `timeout`), then keeps checking for
/// `settle` that neither stops on an error. Returns the last status.
///
/// # Errors
/// [`ReplicaError::SqlThreadError`] (`Last_SQL_Errno != 0`, e.g. 1062/1032
/// after a wrong position), [`ReplicaError::IoThreadError`]
/// (`Last_IO_Errno != 0`, e.g. 1236 for a position the master does not
/// have), [`ReplicaError::Setting`] for `Last_Errno != 0` or a stopped SQL
/// thread, [`ReplicaError::Timeout`].
pub async fn verify_slave_running(
    conn: &mut Conn,
    timeout: Duration,
    settle: Duration,
) -> Result<SlaveStatus, ReplicaError> {
    let server = Endpoint::of(conn);
    let started = Instant::now();
    let mut running_since: Option<Instant> = None;
    loop {
        let s = configured_status(conn).await?;
        if s.last_sql_errno != 0 {
            return Err(ReplicaError::SqlThreadError {
                replica: server,
                errno: s.last_sql_errno,
                message: s.last_sql_error,
            });
        }
        if s.last_io_errno != 0 && s.io_running != "Yes" {
            return Err(ReplicaError::IoThreadError {
                replica: server,
                errno: s.last_io_errno,
                message: s.last_io_error,
            });
        }
        if s.last_errno != 0 {
            return Err(ReplicaError::Setting {
                server,
                setting: "Last_Errno",
                expected: "0".into(),
                actual: s.last_errno.to_string(),
                hint: "",
            });
        }
        let running = s.sql_running && s.io_running == "Yes";
        if running_since.is_some() && !s.sql_running {
            return Err(ReplicaError::Setting {
                server,
                setting: "Slave_SQL_Running",
                expected: "Yes".into(),
                actual: "No".into(),
                hint: " (it stopped after START SLAVE)",
            });
        }
        match (running, running_since) {
            (true, None) => running_since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() >= settle => return Ok(s),
            _ => {}
        }
        if running_since.is_none() && started.elapsed() >= timeout {
            let (field, actual) = if s.sql_running {
                let actual = if s.last_io_errno != 0 {
                    format!(
                        "{} (Last_IO_Errno {}: {})",
                        s.io_running, s.last_io_errno, s.last_io_error
                    )
                } else {
                    s.io_running.clone()
                };
                ("Slave_IO_Running", actual)
            } else {
                ("Slave_SQL_Running", "No".to_owned())
            };
            return Err(ReplicaError::Timeout {
                replica: server,
                field: field.into(),
                expected: "Yes".into(),
                actual,
                waited_ms: started.elapsed().as_millis(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Hands the replica back to native replication at `point`, keeping its
/// `CHANGE MASTER` connection settings (host, port, user, password, SSL):
/// only the position and `MASTER_USE_GTID` change.
///
/// Everything is validated before the replica is touched: the file name
/// (`BASE.NNNNNN`, no whitespace/control characters), `pos >= 4`, and the
/// GTID position (strict `D-S-N[,D-S-N...]`, not empty). Then (MariaDB KB,
/// "CHANGE MASTER TO", "gtid_slave_pos"):
/// 1. `STOP SLAVE` if a slave thread runs, and wait for it to stop;
/// 2. `SET GLOBAL gtid_slave_pos = '<gtid_pos>'` when a GTID position is
///    given (required with `use_gtid`; with file:pos it keeps
///    `gtid_slave_pos` consistent for a later switch to GTID);
/// 3. `use_gtid`: `CHANGE MASTER TO MASTER_USE_GTID = slave_pos`; else
///    `CHANGE MASTER TO MASTER_LOG_FILE = '<file>', MASTER_LOG_POS = <pos>,
///    MASTER_USE_GTID = no` (MariaDB does not take placeholders in CHANGE
///    MASTER: the file name is a quoted literal built by
///    [`sql_string_literal`] for the session's `sql_mode`; the position is
///    an integer). CHANGE MASTER with a log position discards the relay logs,
///    so nothing fetched before the takeover is executed;
/// 4. with `start_slave`: `START SLAVE`, then [`verify_slave_running`] with
///    [`START_TIMEOUT`] and [`START_SETTLE`].
///
/// With `master` (the service switched to another master, issue 20)
/// step 3 also points native replication at it: `CHANGE MASTER TO
/// MASTER_HOST = '<host>', MASTER_PORT = <port>, MASTER_USE_GTID =
/// slave_pos` (the user, password and SSL settings stay; a GTID handback
/// is then required, since the point's file:pos may be the previous
/// master's).
///
/// Logs the server's warnings; the caller logs the handback itself.
///
/// # Errors
/// [`ReplicaError::InvalidPosition`] (nothing changed),
/// [`ReplicaError::NotConfigured`], [`ReplicaError::Sql`], and those of
/// [`verify_slave_running`].
pub async fn handback(
    conn: &mut Conn,
    point: &HandbackPoint,
    use_gtid: bool,
    start_slave: bool,
    master: Option<(&str, u16)>,
) -> Result<HandbackReport, ReplicaError> {
    let server = Endpoint::of(conn);
    let mode = select_row(conn, &server, "SELECT @@SESSION.sql_mode AS sql_mode").await?;
    let no_backslash_escapes = text(&mode, "sql_mode")
        .unwrap_or_default()
        .split(',')
        .any(|m| m.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES"));
    let mut plan = plan_handback(point, use_gtid || master.is_some(), no_backslash_escapes)?;
    if let Some((host, port)) = master {
        let host = sql_string_literal(host, no_backslash_escapes).map_err(|e| {
            ReplicaError::InvalidPosition {
                what: "MASTER_HOST".to_owned(),
                value: host.to_owned(),
                reason: e.to_string(),
            }
        })?;
        plan.change_master = format!(
            "CHANGE MASTER TO MASTER_HOST = {host}, MASTER_PORT = {port}, \
             MASTER_USE_GTID = slave_pos"
        );
    }
    let status = configured_status(conn).await?;
    let mut statements = Vec::new();
    let mut warned = Vec::new();
    if status.sql_running || status.io_running != "No" {
        run(conn, &server, "STOP SLAVE").await?;
        statements.push("STOP SLAVE".to_owned());
        wait_sql_stopped(conn, STOP_TIMEOUT).await?;
    }
    if point.gtid_pos.is_none() {
        tracing::warn!(
            replica = %server,
            "handback without a GTID position: @@gtid_slave_pos keeps its old value"
        );
    }
    for statement in plan
        .set_gtid
        .iter()
        .chain(std::iter::once(&plan.change_master))
    {
        run(conn, &server, statement).await?;
        statements.push(statement.clone());
        warned.extend(warnings(conn, &server).await?);
    }
    let final_status = if start_slave {
        run(conn, &server, "START SLAVE").await?;
        statements.push("START SLAVE".to_owned());
        verify_slave_running(conn, START_TIMEOUT, START_SETTLE).await?
    } else {
        configured_status(conn).await?
    };
    for w in &warned {
        tracing::warn!(replica = %server, warning = %w, "handback");
    }
    Ok(HandbackReport {
        statements,
        warnings: warned,
        status: final_status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(file: &str, pos: u64, gtid: Option<&str>) -> HandbackPoint {
        HandbackPoint {
            file: file.into(),
            pos,
            gtid_pos: gtid.map(str::to_owned),
        }
    }

    #[test]
    fn file_pos_plan_is_one_change_master_with_a_quoted_file() {
        let plan = plan_handback(
            &point("mariadb-bin.000002", 610, Some("0-1-7")),
            false,
            false,
        )
        .unwrap();
        assert_eq!(
            plan,
            HandbackPlan {
                set_gtid: Some("SET GLOBAL gtid_slave_pos = '0-1-7'".into()),
                change_master: "CHANGE MASTER TO MASTER_LOG_FILE = 'mariadb-bin.000002', \
                                MASTER_LOG_POS = 610, MASTER_USE_GTID = no"
                    .into(),
            }
        );
        let plan = plan_handback(&point("it's.000003", 4, None), false, false).unwrap();
        assert_eq!(plan.set_gtid, None);
        assert_eq!(
            plan.change_master,
            "CHANGE MASTER TO MASTER_LOG_FILE = 'it''s.000003', MASTER_LOG_POS = 4, \
             MASTER_USE_GTID = no"
        );
    }

    #[test]
    fn gtid_plan_sets_the_canonical_position() {
        let plan = plan_handback(
            &point("mariadb-bin.000002", 610, Some(" 1-2-8 , 0-1-7 ")),
            true,
            false,
        )
        .unwrap();
        assert_eq!(
            plan,
            HandbackPlan {
                set_gtid: Some("SET GLOBAL gtid_slave_pos = '0-1-7,1-2-8'".into()),
                change_master: "CHANGE MASTER TO MASTER_USE_GTID = slave_pos".into(),
            }
        );
    }

    #[test]
    fn malformed_positions_are_refused_naming_the_setting() {
        let msg =
            |p: HandbackPoint, gtid: bool| plan_handback(&p, gtid, false).unwrap_err().to_string();
        for bad in ["0-1-7'; DROP TABLE t; --", "0-1", "x-1-2", "0-1-2,0-1-3"] {
            assert_eq!(
                msg(point("b.000001", 4, Some(bad)), true),
                format!(
                    "invalid handback gtid_slave_pos {bad:?}: {}",
                    bad.parse::<GtidPos>().unwrap_err()
                )
            );
        }
        assert!(msg(point("b.000001", 4, Some("0-1")), true)
            .starts_with("invalid handback gtid_slave_pos \"0-1\": "));
        assert_eq!(
            msg(point("b.000001", 4, Some("")), true),
            "invalid handback gtid_slave_pos \"\": an empty GTID position would replay the \
             master from its first binlog"
        );
        assert_eq!(
            msg(point("b.000001", 4, None), true),
            "invalid handback gtid_slave_pos \"\": a GTID handback needs the GTID position \
             after the last applied transaction"
        );
        assert_eq!(
            msg(point("b.000001", 3, None), false),
            "invalid handback MASTER_LOG_POS \"3\": a binlog position is at least 4 (after the \
             magic header)"
        );
        assert!(msg(point("b 1.000001", 4, None), false)
            .starts_with("invalid handback MASTER_LOG_FILE \"b 1.000001\": "));
        assert!(msg(point("nofile", 4, None), false)
            .starts_with("invalid handback MASTER_LOG_FILE \"nofile\": "));
    }

    fn facts(logs: &[(&str, u64)]) -> MasterFacts {
        MasterFacts {
            endpoint: Endpoint::new("127.0.0.1", 3306),
            server_id: 1,
            hostname: "db1".into(),
            port: 3306,
            version: "10.11".into(),
            gtid_domain_id: 0,
            row_image: RowImage::Full,
            binlog_checksum: "CRC32".into(),
            gtid_binlog_pos: GtidPos::new(),
            binary_logs: logs
                .iter()
                .map(|(n, s)| BinaryLog {
                    name: (*n).into(),
                    size: *s,
                })
                .collect(),
        }
    }

    #[test]
    fn retention_names_purged_and_unknown_files() {
        let f = facts(&[("mariadb-bin.000003", 1000), ("mariadb-bin.000004", 500)]);
        assert_eq!(f.check_retained("mariadb-bin.000003", 1000), Ok(()));
        assert_eq!(f.check_retained("mariadb-bin.000004", 900), Ok(()));
        assert_eq!(
            f.check_retained("mariadb-bin.000002", 400)
                .unwrap_err()
                .to_string(),
            "binlog purged: 127.0.0.1:3306 no longer has mariadb-bin.000002 (needed for position \
             mariadb-bin.000002:400); its binary logs are mariadb-bin.000003 .. mariadb-bin.000004 \
             (SHOW BINARY LOGS). Re-seed the replica or keep binlogs longer (expire_logs_days / \
             binlog_expire_logs_seconds)"
        );
        assert_eq!(
            f.check_retained("mariadb-bin.000003", 1001)
                .unwrap_err()
                .to_string(),
            "127.0.0.1:3306 has no position mariadb-bin.000003:1001: offset 1001 is beyond the \
             file's size 1000 bytes (SHOW BINARY LOGS: mariadb-bin.000003 .. mariadb-bin.000004); \
             is this the replica's master, or was the master reset?"
        );
        assert!(matches!(
            f.check_retained("mariadb-bin.000009", 4),
            Err(ReplicaError::NoSuchPosition { .. })
        ));
        assert!(matches!(
            f.check_retained("other-bin.000001", 4),
            Err(ReplicaError::NoSuchPosition { .. })
        ));
    }

    #[test]
    fn endpoint_display_brackets_ipv6() {
        assert_eq!(Endpoint::new("::1", 3306).to_string(), "[::1]:3306");
        assert_eq!(Endpoint::new("db", 3307).to_string(), "db:3307");
    }

    #[tokio::test]
    async fn same_host_compares_names_and_addresses() {
        assert!(same_host("DB.example", "db.example").await);
        assert!(same_host("127.0.0.1", "127.0.0.1").await);
        assert!(same_host("localhost", "127.0.0.1").await);
        assert!(!same_host("127.0.0.1", "127.0.0.2").await);
    }
}
