//! A live master as an event source (binlog dump as a replica).
//!
//! [`LiveSource`] connects to the master, registers as a replica with its
//! own server id and asks for the binlog from a `file:pos` or (MariaDB) a
//! GTID position. Each event is handed out as the exact bytes the master
//! sent: the 19-byte header, the body and the CRC-32 trailer (checksums are
//! negotiated with `SET @master_binlog_checksum = @@global.binlog_checksum`,
//! so events arrive as they are stored in the binlog file).
//!
//! # How the raw bytes are read
//! mysql_async's `BinlogStream` parses every event with mysql_common (and
//! rebuilds nothing byte-exact), it can only be consumed through the
//! `futures_core::Stream` trait, and `Conn`'s packet-level methods are
//! crate-private. So the replication connection is a small client of its
//! own over a tokio `TcpStream`: the MySQL handshake (protocol 41,
//! `mysql_native_password`, and `caching_sha2_password` fast path, with
//! mysql_common's scramble functions), `COM_QUERY` for the session
//! variables, `COM_REGISTER_SLAVE` and `COM_BINLOG_DUMP`; then every packet
//! (packets of 16 MiB - 1 bytes are joined with their continuation
//! packets, so events of any size arrive whole) is an OK byte followed by
//! one event. TLS and compression are not supported on this connection.
//! [`master_status`] uses mysql_async for its ordinary queries.
//!
//! # Positions
//! The stream starts with an artificial ROTATE (log_pos 0, flag 0x20) naming
//! the file and offset where the stream starts, then that file's
//! FORMAT_DESCRIPTION. A [`RawEvent`]'s position is:
//! - for a real event (log_pos != 0, no artificial flag): the file of the
//!   last ROTATE and `log_pos - event_size` (kept exact past 4 GiB by
//!   tracking offsets);
//! - for the artificial ROTATE: the file and offset it announces;
//! - for other artificial events: the current file and the offset where
//!   the next real event starts. That covers the FORMAT_DESCRIPTION the
//!   master replays with log_pos 0 when the dump starts mid-file (so it
//!   sits at the start position, unlike [`super::files::FileSource`], which
//!   gives it its real `file:4`), HEARTBEAT events, and the artificial
//!   GTID_LIST (flag 0x20) a MariaDB master sends after skipping to a GTID
//!   start; the last two carry the master's position in log_pos, which
//!   moves the offset forward.
//!
//! See [`is_artificial`] for the test the source uses.
//!
//! # Bytes that differ from the file
//! Real events arrive exactly as stored, with two exceptions made by the
//! master: a replayed FORMAT_DESCRIPTION has log_pos 0, and every
//! FORMAT_DESCRIPTION of the binlog file the master is still writing has
//! its `LOG_EVENT_BINLOG_IN_USE_F` (0x1) flag cleared. (MariaDB computes a
//! FORMAT_DESCRIPTION's CRC-32 as if that flag were clear, so the trailer
//! verifies on the live bytes; in the file it verifies only with the flag
//! masked. A replayed one gets a recomputed CRC.) MariaDB sends ANNOTATE_ROWS
//! events only when asked ([`LiveOptions::annotate_rows`], on by default).
//!
//! # Heartbeats
//! With `heartbeat_period_ms > 0` the master sends a HEARTBEAT event (type
//! 27) whenever it has sent nothing for that long; they are handed out like
//! any event (the decoder reports them as [`super::EventBody::Heartbeat`]).
//! When nothing at all arrives for [`LiveOptions::read_timeout`] the
//! connection is considered dead (a transient error).
//!
//! # Errors and reconnecting
//! The source never reconnects by itself. A lost connection, a read
//! timeout, a master shutting down and the server errors that go away by
//! waiting (too many connections, connection killed, ...) are
//! [`ExtractError::Master`] with `transient: true`; everything else (access
//! denied, binlog purged / position not found, a malformed packet, an
//! unsupported authentication plugin) has `transient: false`. After any
//! error the source is finished: every later call returns the same kind of
//! error. The driver recreates it with [`LiveSource::new`] and the position
//! it wants to resume at (the end of its last complete transaction, as
//! `file:pos` or GTID position). Passwords never appear in errors or logs.
//!
//! `next_event` is cancellation safe: the packet being received is kept in
//! the source, so dropping the future (e.g. in a `select!`) loses nothing.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use mysql_async::prelude::Queryable;

use crate::config::{LiveSourceConfig, Secret};
use crate::mysql::error_codes::{
    ER_ABORTING_CONNECTION, ER_CLIENT_INTERACTION_TIMEOUT, ER_CONNECTION_KILLED,
    ER_CON_COUNT_ERROR, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, ER_NET_WRITE_INTERRUPTED,
    ER_QUERY_INTERRUPTED, ER_SERVER_SHUTDOWN, ER_TOO_MANY_USER_CONNECTIONS,
    ER_UNKNOWN_SYSTEM_VARIABLE,
};
use crate::position::{BinlogPosition, GtidPos};

use super::binlog::Reader;
use super::files::{
    fde_has_crc, rotate_target, FORMAT_DESCRIPTION_EVENT, HEARTBEAT_EVENT, ROTATE_EVENT,
};
use super::{
    EventHeader, EventSource, ExtractError, RawEvent, EVENT_HEADER_LEN, LOG_EVENT_ARTIFICIAL_F,
};

/// Settings of a [`LiveSource`]: the `[source]` connection settings, held
/// once in the configuration's own type, and what only the running source
/// chooses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveOptions {
    /// The `[source] kind = "live"` settings the source uses: `host`,
    /// `port`, `user` (with `REPLICATION SLAVE`, and `REPLICATION CLIENT` /
    /// `BINLOG MONITOR` for [`master_status`]), the password (never
    /// logged), `server_id`, `heartbeat_period_ms` (0, which only code can
    /// set, asks for no heartbeats) and `connect_timeout_ms` (the limit for
    /// connecting, authenticating and requesting the dump).
    /// `reconnect_max_backoff_ms` is the driver's
    /// ([`super::reader::Extractor`]): the source never reconnects.
    pub config: LiveSourceConfig,
    /// When nothing (no event, no heartbeat) arrives for this long, the
    /// connection is dead: a transient error. `None`: no limit. Default:
    /// 4 heartbeat periods but at least 30 s when heartbeats are on, else
    /// `None`.
    pub read_timeout: Option<Duration>,
    /// MariaDB `@slave_gtid_strict_mode` for a GTID start (`None`: the
    /// server's default, off).
    pub gtid_strict_mode: Option<bool>,
    /// MariaDB `@slave_gtid_ignore_duplicates` for a GTID start (`None`:
    /// the server's default, off).
    pub gtid_ignore_duplicates: Option<bool>,
    /// Ask the master to end the stream (`Ok(None)`) when it has sent
    /// everything instead of waiting for more (`BINLOG_DUMP_NON_BLOCK`).
    /// Default `false`.
    pub non_blocking: bool,
    /// Ask a MariaDB master for its ANNOTATE_ROWS events (the SQL of row
    /// events; dump flag `BINLOG_SEND_ANNOTATE_ROWS_EVENT`), which it
    /// otherwise leaves out of the stream although they are in the file.
    /// Default `true`.
    pub annotate_rows: bool,
}

impl LiveOptions {
    /// Options for `config` (for a test, [`LiveSourceConfig::new`] gives
    /// one with the configuration's defaults: heartbeat period 1000 ms,
    /// connect timeout 10 s) with the runtime fields at their defaults:
    /// derived read timeout, server defaults for the GTID switches,
    /// blocking dump, ANNOTATE_ROWS asked for.
    pub fn new(config: LiveSourceConfig) -> LiveOptions {
        let mut options = LiveOptions {
            config,
            read_timeout: None,
            gtid_strict_mode: None,
            gtid_ignore_duplicates: None,
            non_blocking: false,
            annotate_rows: true,
        };
        options.read_timeout = options.default_read_timeout();
        options
    }

    /// Options from a `[source] kind = "live"` configuration.
    pub fn from_config(config: &LiveSourceConfig) -> LiveOptions {
        LiveOptions::new(config.clone())
    }

    /// Sets the heartbeat period and the read timeout derived from it.
    pub fn with_heartbeat_ms(mut self, heartbeat_period_ms: u64) -> LiveOptions {
        self.config.heartbeat_period_ms = heartbeat_period_ms;
        self.read_timeout = self.default_read_timeout();
        self
    }

    fn default_read_timeout(&self) -> Option<Duration> {
        (self.config.heartbeat_period_ms > 0).then(|| {
            Duration::from_millis(self.config.heartbeat_period_ms.saturating_mul(4))
                .max(Duration::from_secs(30))
        })
    }

    /// `host:port`, as errors name the master.
    pub fn address(&self) -> String {
        if self.config.host.contains(':') {
            format!("[{}]:{}", self.config.host, self.config.port)
        } else {
            format!("{}:{}", self.config.host, self.config.port)
        }
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.config.connect_timeout_ms.max(1))
    }

    /// mysql_async options for ordinary queries (over TCP).
    fn mysql_opts(&self) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname(self.config.host.clone())
            .tcp_port(self.config.port)
            .user(Some(self.config.user.clone()))
            .pass(Some(self.config.password.expose().to_owned()))
            .prefer_socket(false)
            .into()
    }
}

/// Where a [`LiveSource`] starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiveStart {
    /// At this file and offset (offset 0 means 4, the file's start).
    File(BinlogPosition),
    /// Just after this MariaDB GTID position (`@slave_connect_state`);
    /// MariaDB masters only.
    Gtid(GtidPos),
}

impl std::fmt::Display for LiveStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveStart::File(p) => write!(f, "{p}"),
            LiveStart::Gtid(g) => write!(f, "gtid:{g}"),
        }
    }
}

/// A live master as an [`EventSource`]; see the module documentation.
pub struct LiveSource {
    options: LiveOptions,
    start: LiveStart,
    wire: Option<Wire>,
    /// Set after an error: the source is finished.
    failed: Option<(String, bool)>,
    /// Set when a non-blocking dump has ended.
    ended: bool,
    server_version: String,
    connection_id: u32,
    /// File of the last ROTATE (at some offset: only its validated,
    /// shared file name is used).
    file: Option<BinlogPosition>,
    /// Offset where the next real event starts.
    next_offset: u64,
    /// Whether events carry a CRC-32 trailer (from the last
    /// FORMAT_DESCRIPTION).
    crc: Option<bool>,
}

impl LiveSource {
    /// A source that connects on its first `next_event` and streams from
    /// `start`. The driver calls this again, with the position after its
    /// last complete transaction, to reconnect after a transient error.
    pub fn new(options: LiveOptions, start: LiveStart) -> LiveSource {
        LiveSource {
            options,
            start,
            wire: None,
            failed: None,
            ended: false,
            server_version: String::new(),
            connection_id: 0,
            file: None,
            next_offset: 0,
            crc: None,
        }
    }

    /// Like [`LiveSource::new`], but connects, authenticates and requests
    /// the dump now, so that a bad password or position is reported here.
    ///
    /// # Errors
    /// [`ExtractError::Master`], transient for connection problems.
    pub async fn connect(
        options: LiveOptions,
        start: LiveStart,
    ) -> Result<LiveSource, ExtractError> {
        let mut source = LiveSource::new(options, start);
        source.ensure_connected().await?;
        Ok(source)
    }

    /// Where the stream started.
    pub fn start(&self) -> &LiveStart {
        &self.start
    }

    /// The options.
    pub fn options(&self) -> &LiveOptions {
        &self.options
    }

    /// The master's version text from the handshake (empty before
    /// connecting).
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// Whether the master is MariaDB (known after connecting).
    pub fn is_mariadb(&self) -> bool {
        self.server_version.contains("MariaDB")
    }

    /// The master's id of this connection (`KILL`-able), 0 before
    /// connecting.
    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    /// Where the next real event starts, once the stream has named its file.
    pub fn position(&self) -> Option<BinlogPosition> {
        Some(self.file.as_ref()?.with_offset(self.next_offset))
    }

    /// Closes the connection (`COM_QUIT`), ignoring errors.
    pub async fn close(mut self) {
        if let Some(mut wire) = self.wire.take() {
            wire.seq = 0;
            let _ =
                tokio::time::timeout(Duration::from_secs(1), wire.write_packet(&[COM_QUIT])).await;
        }
    }

    fn error(&self, message: String, transient: bool) -> ExtractError {
        self.error_with_code(message, None, transient)
    }

    fn error_with_code(&self, message: String, code: Option<u16>, transient: bool) -> ExtractError {
        ExtractError::Master {
            address: self.options.address(),
            message,
            code,
            transient,
        }
    }

    fn fail(&mut self, e: WireError, context: &str) -> ExtractError {
        let (message, transient) = e.describe();
        let code = match &e {
            WireError::Server { code, .. } => Some(*code),
            _ => None,
        };
        let message = format!("{context}: {message}");
        // The caller reports the error (the service's reconnect warning,
        // or OFFLINE:ERROR): one report per failure.
        tracing::debug!(master = %self.options.address(), transient, "binlog stream: {message}");
        self.wire = None;
        self.failed = Some((message.clone(), transient));
        self.error_with_code(message, code, transient)
    }

    async fn ensure_connected(&mut self) -> Result<(), ExtractError> {
        if self.wire.is_some() {
            return Ok(());
        }
        if let Some((message, transient)) = &self.failed {
            return Err(self.error(
                format!("the binlog stream failed earlier ({message}); create a new source"),
                *transient,
            ));
        }
        let timeout = self.options.connect_timeout();
        let result =
            match tokio::time::timeout(timeout, open_dump(&self.options, &self.start)).await {
                Ok(r) => r,
                Err(_) => Err(WireError::Timeout(format!(
                    "no answer within the connect timeout of {} ms",
                    timeout.as_millis()
                ))),
            };
        match result {
            Ok((wire, hello)) => {
                tracing::info!(
                    master = %self.options.address(),
                    server_version = %hello.server_version,
                    connection_id = hello.connection_id,
                    start = %self.start,
                    "binlog stream: dump requested"
                );
                self.wire = Some(wire);
                self.server_version = hello.server_version;
                self.connection_id = hello.connection_id;
                Ok(())
            }
            Err(e) => {
                let context = format!("cannot start the binlog dump at {}", self.start);
                Err(self.fail(e, &context))
            }
        }
    }

    /// Turns one event's bytes into a [`RawEvent`] with its position and
    /// updates the stream position.
    fn place(&mut self, bytes: Vec<u8>) -> Result<RawEvent, WireError> {
        let header = EventHeader::parse(&bytes).ok_or_else(|| {
            WireError::Protocol(format!(
                "event of {} bytes is shorter than the {EVENT_HEADER_LEN}-byte header",
                bytes.len()
            ))
        })?;
        let size = bytes.len() as u64;
        if u64::from(header.event_size) != size {
            return Err(WireError::Protocol(format!(
                "event (type {}, log_pos {}) header says {} bytes, the packet carries {size}",
                header.type_code, header.log_pos, header.event_size
            )));
        }
        let artificial = is_artificial(&header);
        if header.type_code == ROTATE_EVENT {
            let (name, pos) = rotate_target(&bytes, self.crc).ok_or_else(|| {
                WireError::Protocol("ROTATE event too short to name a file".to_owned())
            })?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| {
                WireError::Protocol("ROTATE event names a file that is not UTF-8".to_owned())
            })?;
            let target = BinlogPosition::new(name, pos)
                .map_err(|e| WireError::Protocol(format!("ROTATE event: {e}")))?;
            let position = if artificial {
                target.clone()
            } else {
                self.real_start(&header, size)?
            };
            self.file = Some(target);
            self.next_offset = pos;
            return Ok(RawEvent { position, bytes });
        }
        if header.type_code == FORMAT_DESCRIPTION_EVENT {
            self.crc = fde_has_crc(&bytes);
        }
        let position = if artificial {
            // A replayed FORMAT_DESCRIPTION has log_pos 0: it stands at
            // the next event. HEARTBEAT and the GTID_LIST a MariaDB master
            // makes up after skipping to a GTID start carry the master's
            // position in log_pos: where the next event starts.
            let log_pos = u64::from(header.log_pos);
            if log_pos > self.next_offset && self.next_offset <= u64::from(u32::MAX) {
                self.next_offset = log_pos;
            }
            self.current(self.next_offset)?
        } else {
            let position = self.real_start(&header, size)?;
            self.next_offset = position.offset() + size;
            position
        };
        Ok(RawEvent { position, bytes })
    }

    fn current(&self, offset: u64) -> Result<BinlogPosition, WireError> {
        let file = self.file.as_ref().ok_or_else(|| {
            WireError::Protocol("an event arrived before the ROTATE naming its file".to_owned())
        })?;
        Ok(file.with_offset(offset))
    }

    /// Start offset of a real event: `log_pos - size`, kept exact beyond
    /// 4 GiB by preferring the tracked offset when it agrees modulo 2^32.
    fn real_start(&self, header: &EventHeader, size: u64) -> Result<BinlogPosition, WireError> {
        let tracked = self.next_offset;
        let offset = if (tracked + size) as u32 == header.log_pos {
            tracked
        } else if u64::from(header.log_pos) >= size {
            u64::from(header.log_pos) - size
        } else {
            return Err(WireError::Protocol(format!(
                "event (type {}) has log_pos {} smaller than its size {size}",
                header.type_code, header.log_pos
            )));
        };
        self.current(offset)
    }
}

/// Whether an event was made up by the master rather than read from the
/// binlog file: log_pos 0 (the ROTATE starting a dump, a replayed
/// FORMAT_DESCRIPTION), the `LOG_EVENT_ARTIFICIAL_F` flag, or a HEARTBEAT.
pub fn is_artificial(header: &EventHeader) -> bool {
    header.log_pos == 0
        || header.flags & LOG_EVENT_ARTIFICIAL_F != 0
        || header.type_code == HEARTBEAT_EVENT
}

impl EventSource for LiveSource {
    async fn next_event(&mut self) -> Result<Option<RawEvent>, ExtractError> {
        if self.ended {
            return Ok(None);
        }
        self.ensure_connected().await?;
        let read_timeout = self.options.read_timeout;
        let wire = self.wire.as_mut().expect("connected");
        let packet = match read_timeout {
            // A packet already whole in the read buffer needs no timer
            // (one per event was about 2% of shardrep's CPU in a catch-up).
            Some(_) if wire.packet_buffered() => wire.read_packet().await,
            Some(limit) => match tokio::time::timeout(limit, wire.read_packet()).await {
                Ok(r) => r,
                Err(_) => Err(WireError::Timeout(format!(
                    "nothing received for {} ms (no event, no heartbeat)",
                    limit.as_millis()
                ))),
            },
            None => wire.read_packet().await,
        };
        let mut packet = match packet {
            Ok(p) => p,
            Err(e) => return Err(self.fail(e, "binlog stream")),
        };
        match packet.first() {
            Some(0) => {
                packet.drain(..1);
                match self.place(packet) {
                    Ok(event) => Ok(Some(event)),
                    Err(e) => Err(self.fail(e, "binlog stream")),
                }
            }
            Some(0xff) => {
                // Name where the stream stood: an error right after the
                // dump request (1236: file purged or unknown) is about the
                // requested start.
                let e = parse_err_packet(&packet);
                let context = match self.position() {
                    Some(at) => format!("binlog stream at {at}"),
                    None => format!("binlog dump from {}", self.start),
                };
                Err(self.fail(e, &context))
            }
            Some(0xfe) if packet.len() < 9 => {
                if self.options.non_blocking {
                    self.ended = true;
                    self.wire = None;
                    Ok(None)
                } else {
                    let e = WireError::Closed("the master ended the binlog stream".to_owned());
                    Err(self.fail(e, "binlog stream"))
                }
            }
            _ => {
                let e = WireError::Protocol(format!(
                    "unexpected packet in the binlog stream (first byte {:?}, {} bytes)",
                    packet.first(),
                    packet.len()
                ));
                Err(self.fail(e, "binlog stream"))
            }
        }
    }
}

/// The master's current binlog position (`SHOW MASTER STATUS`) and its
/// `@@gtid_binlog_pos` (empty on a server without MariaDB GTIDs), read
/// consistently: the GTID position is read before and after, and the pair is
/// retried until both reads agree. Used for `start = "current"`.
///
/// # Errors
/// [`ExtractError::Master`]; not transient when binary logging is off.
pub async fn master_status(
    options: &LiveOptions,
) -> Result<(BinlogPosition, GtidPos), ExtractError> {
    let address = options.address();
    let err = |message: String, transient: bool, code: Option<u16>| ExtractError::Master {
        address: address.clone(),
        message,
        code,
        transient,
    };
    let connect = mysql_async::Conn::new(options.mysql_opts());
    let mut conn = match tokio::time::timeout(options.connect_timeout(), connect).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            let (m, t) = describe_mysql_error(&e);
            return Err(err(format!("cannot connect: {m}"), t, server_code(&e)));
        }
        Err(_) => return Err(err("cannot connect: timed out".to_owned(), true, None)),
    };
    let result = async {
        for _ in 0..20 {
            let before = gtid_binlog_pos(&mut conn).await?;
            let row: Option<mysql_async::Row> = conn.query_first("SHOW MASTER STATUS").await?;
            let after = gtid_binlog_pos(&mut conn).await?;
            let Some(row) = row else {
                return Ok(Err((
                    "binary logging is disabled on the master \
                               (SHOW MASTER STATUS returns no row)"
                        .to_owned(),
                    false,
                )));
            };
            if before != after {
                continue;
            }
            let file: Option<String> = row.get(0);
            let pos: Option<u64> = row.get(1);
            let (Some(file), Some(pos)) = (file, pos) else {
                return Ok(Err((
                    "SHOW MASTER STATUS: unexpected columns".to_owned(),
                    false,
                )));
            };
            let position = BinlogPosition::new(file, pos)
                .map_err(|e| (format!("SHOW MASTER STATUS: {e}"), false));
            let gtid = after
                .unwrap_or_default()
                .parse::<GtidPos>()
                .map_err(|e| (format!("@@gtid_binlog_pos: {e}"), false));
            return Ok(position.and_then(|p| gtid.map(|g| (p, g))));
        }
        Ok(Err((
            "the master's GTID position kept changing while reading its status".to_owned(),
            true,
        )))
    }
    .await;
    let _ = conn.disconnect().await;
    match result {
        Ok(Ok(status)) => Ok(status),
        Ok(Err((m, t))) => Err(err(m, t, None)),
        Err(e) => {
            let (m, t) = describe_mysql_error(&e);
            Err(err(m, t, server_code(&e)))
        }
    }
}

/// The GTID position to resume at when the binlog of file position
/// `position` (with GTID state `state` there) has been purged from the
/// master: the state at the start of the master's oldest binlog
/// (`BINLOG_GTID_POS(<oldest>, 4)`, MariaDB KB "BINLOG_GTID_POS"), with
/// `state`'s own GTID for each domain it has. `Ok(None)` when transactions
/// after `position` are purged too (the oldest binlog starts past `state`
/// in some domain), or the master cannot say.
///
/// Every transaction of a purged binlog is at or before the oldest
/// binlog's start state; when `state` is at or past it in every domain
/// `state` has, nothing after `position` was purged. A domain `state` lacks
/// had no transaction since the extraction started, so the start state's
/// GTID of that domain is before `position`.
///
/// # Errors
/// [`ExtractError::Master`] when the master cannot be asked.
pub async fn gtid_start_after_purge(
    options: &LiveOptions,
    state: &GtidPos,
) -> Result<Option<GtidPos>, ExtractError> {
    let address = options.address();
    let err = |e: mysql_async::Error| {
        let (message, transient) = describe_mysql_error(&e);
        ExtractError::Master {
            address: address.clone(),
            message: format!("looking for the oldest binlog's GTID position: {message}"),
            code: server_code(&e),
            transient,
        }
    };
    let mut conn = mysql_async::Conn::new(options.mysql_opts())
        .await
        .map_err(err)?;
    let result = async {
        let oldest: Option<String> = conn
            .query_first::<mysql_async::Row, _>("SHOW BINARY LOGS")
            .await?
            .and_then(|row| row.get(0));
        let Some(oldest) = oldest else {
            return Ok(None);
        };
        let start: Option<Option<String>> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, 4)", (oldest,))
            .await?;
        Ok::<_, mysql_async::Error>(start.flatten())
    }
    .await;
    let _ = conn.disconnect().await;
    let Some(text) = result.map_err(err)? else {
        return Ok(None);
    };
    let Ok(oldest_start) = text.parse::<GtidPos>() else {
        return Ok(None);
    };
    let mut resume = GtidPos::new();
    for gtid in oldest_start.iter() {
        match state.get(gtid.domain_id) {
            Some(ours) if ours.seq_no < gtid.seq_no => return Ok(None),
            Some(ours) => resume.update(*ours),
            None => resume.update(*gtid),
        };
    }
    for gtid in state.iter() {
        if resume.get(gtid.domain_id).is_none() {
            resume.update(*gtid);
        }
    }
    Ok(Some(resume))
}

/// `@@gtid_binlog_pos`, or `None` on a server without it (MySQL).
async fn gtid_binlog_pos(
    conn: &mut mysql_async::Conn,
) -> Result<Option<String>, mysql_async::Error> {
    match conn
        .query_first::<String, _>("SELECT @@gtid_binlog_pos")
        .await
    {
        Ok(v) => Ok(v),
        Err(mysql_async::Error::Server(e)) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => Ok(None),
        Err(e) => Err(e),
    }
}

/// The server's error code of a client error, when the server sent one.
fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn describe_mysql_error(e: &mysql_async::Error) -> (String, bool) {
    match e {
        mysql_async::Error::Server(s) => (
            format!("server error {} ({}): {}", s.code, s.state, s.message),
            transient_code(s.code),
        ),
        mysql_async::Error::Io(io) => (format!("connection error: {io}"), true),
        other => (other.to_string(), false),
    }
}

// ---------------------------------------------------------------------------
// The replication connection: a minimal MySQL protocol client.
// ---------------------------------------------------------------------------

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_BINLOG_DUMP: u8 = 0x12;
const COM_REGISTER_SLAVE: u8 = 0x15;

/// `COM_BINLOG_DUMP` flag: end the stream at the end of the binlog.
const BINLOG_DUMP_NON_BLOCK: u16 = 1;
/// MariaDB `COM_BINLOG_DUMP` flag: also send ANNOTATE_ROWS events.
const BINLOG_SEND_ANNOTATE_ROWS_EVENT: u16 = 2;

const CLIENT_LONG_PASSWORD: u32 = 0x1;
const CLIENT_LONG_FLAG: u32 = 0x4;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_MULTI_RESULTS: u32 = 0x20000;
const CLIENT_PLUGIN_AUTH: u32 = 0x80000;
const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x200000;

/// Largest packet payload; a payload of exactly this size is continued in
/// the next packet.
const MAX_PAYLOAD: usize = 0xff_ffff;
/// utf8mb3_general_ci: known to every server.
const CHARSET_UTF8: u8 = 33;

/// Server error codes that go away by reconnecting later: too many
/// connections, server shutdown, the network errors (aborted connection,
/// read/write errors and timeouts), `max_user_connections`, a lock wait
/// timeout or deadlock, an interrupted query, a killed connection, a
/// disconnect for inactivity.
fn transient_code(code: u16) -> bool {
    matches!(
        code,
        ER_CON_COUNT_ERROR | ER_SERVER_SHUTDOWN | ER_ABORTING_CONNECTION
            ..=ER_NET_WRITE_INTERRUPTED
                | ER_TOO_MANY_USER_CONNECTIONS
                | ER_LOCK_WAIT_TIMEOUT
                | ER_LOCK_DEADLOCK
                | ER_QUERY_INTERRUPTED
                | ER_CONNECTION_KILLED
                | ER_CLIENT_INTERACTION_TIMEOUT
    )
}

/// Errors of the replication connection.
#[derive(Debug)]
enum WireError {
    Io(io::Error),
    /// The connection was closed or ended.
    Closed(String),
    Timeout(String),
    Server {
        code: u16,
        state: String,
        message: String,
    },
    Protocol(String),
    Unsupported(String),
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            WireError::Closed("the master closed the connection".to_owned())
        } else {
            WireError::Io(e)
        }
    }
}

impl WireError {
    /// Message and whether it is transient.
    fn describe(&self) -> (String, bool) {
        match self {
            WireError::Io(e) => (format!("connection error: {e}"), true),
            WireError::Closed(m) => (m.clone(), true),
            WireError::Timeout(m) => (m.clone(), true),
            WireError::Server {
                code,
                state,
                message,
            } => {
                let state = if state.is_empty() {
                    String::new()
                } else {
                    format!(" ({state})")
                };
                (
                    format!("server error {code}{state}: {message}"),
                    transient_code(*code),
                )
            }
            WireError::Protocol(m) => (format!("protocol error: {m}"), false),
            WireError::Unsupported(m) => (format!("not supported: {m}"), false),
        }
    }
}

/// Facts from the server's greeting.
struct Hello {
    server_version: String,
    connection_id: u32,
}

/// Packet framing over a buffered TCP stream. Reading keeps its progress in
/// the struct, so a dropped `read_packet` future loses nothing.
struct Wire {
    stream: BufReader<TcpStream>,
    /// Sequence id expected next / to send next.
    seq: u8,
    /// Packet header being read.
    header: [u8; 4],
    header_len: usize,
    /// Inside a packet's payload (header done).
    in_payload: bool,
    /// The payload being read is the last of the logical packet.
    last_chunk: bool,
    /// Joined payload; bytes up to `filled` are received.
    payload: Vec<u8>,
    filled: usize,
}

impl Wire {
    fn new(stream: TcpStream) -> Wire {
        Wire {
            stream: BufReader::with_capacity(256 << 10, stream),
            seq: 0,
            header: [0; 4],
            header_len: 0,
            in_payload: false,
            last_chunk: false,
            payload: Vec::new(),
            filled: 0,
        }
    }

    /// Whether the next packet is whole in the read buffer (a single-chunk
    /// packet, none of it consumed yet): [`Wire::read_packet`] then returns
    /// it without waiting on the socket.
    fn packet_buffered(&self) -> bool {
        if self.in_payload || self.header_len != 0 {
            return false;
        }
        let buffered = self.stream.buffer();
        let Some(header) = buffered.get(..4) else {
            return false;
        };
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        len < MAX_PAYLOAD && buffered.len() >= 4 + len
    }

    /// Reads one logical packet (joining 16 MiB - 1 continuations).
    async fn read_packet(&mut self) -> Result<Vec<u8>, WireError> {
        loop {
            if !self.in_payload {
                while self.header_len < 4 {
                    let n = self
                        .stream
                        .read(&mut self.header[self.header_len..])
                        .await?;
                    if n == 0 {
                        return Err(WireError::Closed(
                            "the master closed the connection".to_owned(),
                        ));
                    }
                    self.header_len += n;
                }
                let len = usize::from(self.header[0])
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]) << 16;
                let seq = self.header[3];
                if seq != self.seq {
                    return Err(WireError::Protocol(format!(
                        "packet out of order: sequence id {seq}, expected {}",
                        self.seq
                    )));
                }
                self.seq = seq.wrapping_add(1);
                self.header_len = 0;
                self.in_payload = true;
                self.last_chunk = len < MAX_PAYLOAD;
                let new_len = self.payload.len() + len;
                self.payload.resize(new_len, 0);
            }
            while self.filled < self.payload.len() {
                let n = self.stream.read(&mut self.payload[self.filled..]).await?;
                if n == 0 {
                    return Err(WireError::Closed(
                        "the master closed the connection in the middle of a packet".to_owned(),
                    ));
                }
                self.filled += n;
            }
            self.in_payload = false;
            if self.last_chunk {
                self.filled = 0;
                return Ok(std::mem::take(&mut self.payload));
            }
        }
    }

    /// Writes one logical packet (split into 16 MiB - 1 chunks).
    async fn write_packet(&mut self, payload: &[u8]) -> Result<(), WireError> {
        let mut out = Vec::with_capacity(payload.len() + 8);
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_PAYLOAD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
            out.push(self.seq);
            self.seq = self.seq.wrapping_add(1);
            out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_PAYLOAD {
                break;
            }
        }
        let stream = self.stream.get_mut();
        stream.write_all(&out).await?;
        stream.flush().await?;
        Ok(())
    }

    /// Sends a command (sequence restarts at 0).
    async fn command(&mut self, payload: &[u8]) -> Result<(), WireError> {
        self.seq = 0;
        self.write_packet(payload).await
    }

    /// Reads an OK packet; ERR becomes `WireError::Server`.
    async fn expect_ok(&mut self, what: &str) -> Result<(), WireError> {
        let packet = self.read_packet().await?;
        match packet.first() {
            Some(0x00) => Ok(()),
            Some(0xff) => Err(parse_err_packet(&packet)),
            other => Err(WireError::Protocol(format!(
                "{what}: expected OK, got a packet starting with {other:?}"
            ))),
        }
    }

    async fn query(&mut self, sql: &str) -> Result<(), WireError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(COM_QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.command(&payload).await?;
        self.expect_ok(sql).await.map_err(|e| match e {
            WireError::Server {
                code,
                state,
                message,
            } => WireError::Server {
                code,
                state,
                message: format!("{message} (in `{sql}`)"),
            },
            other => other,
        })
    }
}

/// Parses an ERR packet (`0xff`, code, optional `#` + SQL state, message).
fn parse_err_packet(packet: &[u8]) -> WireError {
    if packet.len() < 3 {
        return WireError::Protocol("short ERR packet".to_owned());
    }
    let code = u16::from_le_bytes([packet[1], packet[2]]);
    let mut rest = &packet[3..];
    let mut state = String::new();
    if rest.first() == Some(&b'#') && rest.len() >= 6 {
        state = String::from_utf8_lossy(&rest[1..6]).into_owned();
        rest = &rest[6..];
    }
    WireError::Server {
        code,
        state,
        message: String::from_utf8_lossy(rest).into_owned(),
    }
}

/// The auth response for `plugin`, or an error for unsupported plugins.
fn auth_response(plugin: &str, nonce: &[u8], password: &Secret) -> Result<Vec<u8>, WireError> {
    let password = password.expose().as_bytes();
    match plugin {
        "mysql_native_password" | "" => {
            Ok(mysql_common::scramble::scramble_native(nonce, password)
                .map(|s| s.to_vec())
                .unwrap_or_default())
        }
        "caching_sha2_password" => Ok(mysql_common::scramble::scramble_sha256(nonce, password)
            .map(|s| s.to_vec())
            .unwrap_or_default()),
        other => Err(WireError::Unsupported(format!(
            "authentication plugin {other:?} (the replication connection supports \
             mysql_native_password and the caching_sha2_password fast path)"
        ))),
    }
}

/// Connects, authenticates, sets the session up and sends the dump request.
async fn open_dump(options: &LiveOptions, start: &LiveStart) -> Result<(Wire, Hello), WireError> {
    let tcp = TcpStream::connect((options.config.host.as_str(), options.config.port)).await?;
    tcp.set_nodelay(true)?;
    let mut wire = Wire::new(tcp);
    let hello = handshake(&mut wire, options).await?;
    let mariadb = hello.server_version.contains("MariaDB");

    wire.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        .await?;
    // MariaDB sends its GTID events only to replicas announcing capability
    // 4 (MARIA_SLAVE_CAPABILITY_GTID); MySQL ignores the variable.
    wire.query("SET @mariadb_slave_capability = 4").await?;
    if options.config.heartbeat_period_ms > 0 {
        let ns = u128::from(options.config.heartbeat_period_ms) * 1_000_000;
        wire.query(&format!("SET @master_heartbeat_period = {ns}"))
            .await?;
    }
    let (file, pos) = match start {
        LiveStart::File(p) => {
            let pos = if p.offset() < 4 { 4 } else { p.offset() };
            let pos = u32::try_from(pos).map_err(|_| {
                WireError::Unsupported(format!(
                    "start offset {pos} beyond 4 GiB (COM_BINLOG_DUMP carries 32 bits)"
                ))
            })?;
            (p.file().as_bytes().to_vec(), pos)
        }
        LiveStart::Gtid(g) => {
            if !mariadb {
                return Err(WireError::Unsupported(format!(
                    "a GTID start position needs a MariaDB master; this one is {}",
                    hello.server_version
                )));
            }
            let text = g.to_string().replace('\'', "");
            wire.query(&format!("SET @slave_connect_state = '{text}'"))
                .await?;
            if let Some(strict) = options.gtid_strict_mode {
                wire.query(&format!(
                    "SET @slave_gtid_strict_mode = {}",
                    u8::from(strict)
                ))
                .await?;
            }
            if let Some(ignore) = options.gtid_ignore_duplicates {
                wire.query(&format!(
                    "SET @slave_gtid_ignore_duplicates = {}",
                    u8::from(ignore)
                ))
                .await?;
            }
            // MariaDB: an empty file name and position 4 with
            // @slave_connect_state set start at the GTID position.
            (Vec::new(), 4)
        }
    };

    let mut register = Vec::with_capacity(18);
    register.push(COM_REGISTER_SLAVE);
    register.extend_from_slice(&options.config.server_id.to_le_bytes());
    register.extend_from_slice(&[0, 0, 0]); // report host, user, password: empty
    register.extend_from_slice(&0u16.to_le_bytes()); // report port
    register.extend_from_slice(&0u32.to_le_bytes()); // replication rank
    register.extend_from_slice(&0u32.to_le_bytes()); // master id
    wire.command(&register).await?;
    wire.expect_ok("COM_REGISTER_SLAVE").await?;

    let mut flags: u16 = 0;
    if options.non_blocking {
        flags |= BINLOG_DUMP_NON_BLOCK;
    }
    if mariadb && options.annotate_rows {
        flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT;
    }
    let mut dump = Vec::with_capacity(11 + file.len());
    dump.push(COM_BINLOG_DUMP);
    dump.extend_from_slice(&pos.to_le_bytes());
    dump.extend_from_slice(&flags.to_le_bytes());
    dump.extend_from_slice(&options.config.server_id.to_le_bytes());
    dump.extend_from_slice(&file);
    wire.command(&dump).await?;
    Ok((wire, hello))
}

/// The connection phase: greeting, handshake response, auth exchange.
async fn handshake(wire: &mut Wire, options: &LiveOptions) -> Result<Hello, WireError> {
    let greeting = wire.read_packet().await?;
    if greeting.first() == Some(&0xff) {
        return Err(parse_err_packet(&greeting));
    }
    let bad = |what: &str| WireError::Protocol(format!("malformed server greeting: {what}"));
    let mut c = Reader::new(&greeting);
    let protocol = c.byte().ok_or_else(|| bad("empty"))?;
    if protocol != 10 {
        return Err(WireError::Unsupported(format!(
            "handshake protocol version {protocol} (expected 10)"
        )));
    }
    let server_version = String::from_utf8_lossy(c.cstring_or_rest()).into_owned();
    let connection_id = c
        .uint_le(4)
        .map(|v| v as u32)
        .ok_or_else(|| bad("no connection id"))?;
    let mut nonce = c.take(8).ok_or_else(|| bad("no auth data"))?.to_vec();
    c.byte();
    let caps_low = c
        .uint_le(2)
        .map(|v| v as u16)
        .ok_or_else(|| bad("no capabilities"))?;
    let mut server_caps = u32::from(caps_low);
    let mut plugin = String::new();
    if let Some(_charset) = c.byte() {
        c.uint_le(2).map(|v| v as u16); // status
        let caps_high = c.uint_le(2).map(|v| v as u16).unwrap_or(0);
        server_caps |= u32::from(caps_high) << 16;
        let auth_len = c.byte().unwrap_or(0);
        c.take(10);
        if server_caps & CLIENT_SECURE_CONNECTION != 0 {
            let n = usize::from(auth_len).saturating_sub(8).max(13);
            let part = c.take(n).unwrap_or_else(|| c.rest());
            nonce.extend_from_slice(part);
            if nonce.last() == Some(&0) {
                nonce.pop();
            }
        }
        if server_caps & CLIENT_PLUGIN_AUTH != 0 {
            plugin = String::from_utf8_lossy(c.cstring_or_rest()).into_owned();
        }
    }
    if server_caps & CLIENT_PROTOCOL_41 == 0 || server_caps & CLIENT_SECURE_CONNECTION == 0 {
        return Err(WireError::Unsupported(format!(
            "server {server_version} without the 4.1 protocol"
        )));
    }
    let wanted = CLIENT_LONG_PASSWORD
        | CLIENT_LONG_FLAG
        | CLIENT_PROTOCOL_41
        | CLIENT_TRANSACTIONS
        | CLIENT_SECURE_CONNECTION
        | CLIENT_MULTI_RESULTS
        | CLIENT_PLUGIN_AUTH
        | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA;
    let caps = wanted & server_caps;
    let plugin = if plugin == "caching_sha2_password" {
        plugin
    } else {
        "mysql_native_password".to_owned()
    };
    let auth = auth_response(&plugin, &nonce, &options.config.password)?;

    let mut response = Vec::with_capacity(64 + options.config.user.len() + auth.len());
    response.extend_from_slice(&caps.to_le_bytes());
    response.extend_from_slice(&(1u32 << 30).to_le_bytes()); // max packet
    response.push(CHARSET_UTF8);
    response.extend_from_slice(&[0; 23]);
    response.extend_from_slice(options.config.user.as_bytes());
    response.push(0);
    // A length-encoded integer (LENENC capability) and the 1-byte length
    // (SECURE_CONNECTION) are the same byte for scrambles (20 or 32 bytes).
    response.push(auth.len() as u8);
    response.extend_from_slice(&auth);
    if caps & CLIENT_PLUGIN_AUTH != 0 {
        response.extend_from_slice(plugin.as_bytes());
        response.push(0);
    }
    wire.write_packet(&response).await?;

    let mut current_plugin = plugin;
    for _ in 0..8 {
        let packet = wire.read_packet().await?;
        match packet.first() {
            Some(0x00) => {
                return Ok(Hello {
                    server_version,
                    connection_id,
                })
            }
            Some(0xff) => return Err(parse_err_packet(&packet)),
            Some(0xfe) => {
                // Auth switch request: plugin name, then the new nonce.
                if packet.len() == 1 {
                    return Err(WireError::Unsupported(
                        "the pre-4.1 authentication (mysql_old_password)".to_owned(),
                    ));
                }
                let mut c = Reader::new(&packet[1..]);
                current_plugin = String::from_utf8_lossy(c.cstring_or_rest()).into_owned();
                let mut data = c.rest().to_vec();
                if data.last() == Some(&0) {
                    data.pop();
                }
                let auth = auth_response(&current_plugin, &data, &options.config.password)?;
                wire.write_packet(&auth).await?;
            }
            Some(0x01) if current_plugin == "caching_sha2_password" => match packet.get(1) {
                Some(3) => {} // fast auth succeeded; OK follows
                Some(4) => {
                    return Err(WireError::Unsupported(
                        "caching_sha2_password full authentication (needs TLS or RSA key \
                         exchange); log in once with another client to fill the server's \
                         cache, or use mysql_native_password for the replication user"
                            .to_owned(),
                    ))
                }
                _ => {
                    return Err(WireError::Protocol(
                        "unexpected caching_sha2_password message".to_owned(),
                    ))
                }
            },
            other => {
                return Err(WireError::Protocol(format!(
                    "unexpected packet during authentication (first byte {other:?})"
                )))
            }
        }
    }
    Err(WireError::Protocol(
        "authentication did not finish after 8 exchanges".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artificial_events() {
        let h = |type_code, log_pos, flags| EventHeader {
            timestamp: 0,
            type_code,
            server_id: 1,
            event_size: 40,
            log_pos,
            flags,
        };
        assert!(is_artificial(&h(ROTATE_EVENT, 0, 0x20)));
        assert!(is_artificial(&h(ROTATE_EVENT, 0, 0)));
        assert!(is_artificial(&h(FORMAT_DESCRIPTION_EVENT, 0, 0)));
        assert!(is_artificial(&h(HEARTBEAT_EVENT, 1234, 0)));
        assert!(is_artificial(&h(2, 1234, 0x20)));
        assert!(!is_artificial(&h(2, 1234, 0x08)));
        assert!(!is_artificial(&h(ROTATE_EVENT, 400, 0)));
    }

    #[test]
    fn err_packets() {
        let mut p = vec![0xff];
        p.extend_from_slice(&1236u16.to_le_bytes());
        p.extend_from_slice(b"#HY000Could not find first log file name");
        match parse_err_packet(&p) {
            WireError::Server {
                code,
                state,
                message,
            } => {
                assert_eq!(code, 1236);
                assert_eq!(state, "HY000");
                assert_eq!(message, "Could not find first log file name");
            }
            other => panic!("{other:?}"),
        }
        let mut p = vec![0xff];
        p.extend_from_slice(&1040u16.to_le_bytes());
        p.extend_from_slice(b"Too many connections");
        let (m, transient) = parse_err_packet(&p).describe();
        assert!(transient);
        assert_eq!(m, "server error 1040: Too many connections");
        assert!(!parse_err_packet(&[0xff]).describe().1);
    }

    #[test]
    fn options_never_show_the_password() {
        let o = LiveOptions::new(LiveSourceConfig::new(
            "db1",
            3306,
            "repl",
            Secret::new("hunter2"),
            7,
        ));
        assert!(!format!("{o:?}").contains("hunter2"));
        assert_eq!(o.address(), "db1:3306");
        assert_eq!(o.read_timeout, Some(Duration::from_secs(30)));
        let o = o.with_heartbeat_ms(20_000);
        assert_eq!(o.read_timeout, Some(Duration::from_secs(80)));
        let o = o.with_heartbeat_ms(0);
        assert_eq!(o.read_timeout, None);
        assert_eq!(
            LiveOptions::new(LiveSourceConfig::new(
                "::1",
                3306,
                "u",
                Secret::default(),
                1
            ))
            .address(),
            "[::1]:3306"
        );
    }

    #[test]
    fn defaults_match_the_configuration() {
        let text = "[service]\nname = \"t\"\n\
                    [source]\nkind = \"live\"\nhost = \"db1\"\nuser = \"repl\"\n\
                    password = \"pw\"\nserver_id = 7\n\
                    [replica]\nhost = \"h\"\nuser = \"u\"\npassword = \"p\"\n\
                    [queue]\ndir = \"/q\"\n[control]\nsocket = \"/s\"\n";
        let cfg = crate::config::Config::from_toml_str(text, "test.toml").unwrap();
        let options = LiveOptions::from_config(cfg.source.live().unwrap());
        assert_eq!(
            options,
            LiveOptions::new(LiveSourceConfig::new(
                "db1",
                3306,
                "repl",
                Secret::new("pw"),
                7
            ))
        );
        assert_eq!(options.read_timeout, Some(Duration::from_secs(30)));
        assert_eq!(
            (
                options.config.heartbeat_period_ms,
                options.config.connect_timeout_ms
            ),
            (1000, 10_000)
        );
    }
}
