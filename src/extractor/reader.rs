//! From a source of raw events to complete transactions: decode, assemble,
//! and (for a live master) reconnect after a connection loss at the last
//! complete transaction, never in the middle of one.

use std::collections::VecDeque;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::config::{SourceEndpoint, StartPosition};
use crate::event::Transaction;
use crate::position::{BinlogPosition, GtidPos, Seqno};

use super::assemble::Assembler;
use super::binlog::event_type;
use super::decode::Decoder;
use super::files::{FileOptions, FileSource};
use super::live::{master_status, LiveOptions, LiveSource, LiveStart};
use super::{BinlogEvent, EventSource, ExtractError, RawEvent};

/// Decodes and assembles the events of one source into transactions.
pub struct TransactionReader<S: EventSource> {
    source: S,
    decoder: Decoder,
    assembler: Assembler,
    /// Events of a TRANSACTION_PAYLOAD not yet assembled, with the end
    /// position of their outer event.
    pending: VecDeque<(BinlogEvent, BinlogPosition)>,
    /// Set at each HEARTBEAT between transactions.
    idle_mark: Option<std::sync::Arc<super::IdleMark>>,
    /// Keep each transaction's row events as the binlog holds them
    /// ([`crate::event::Transaction::row_events`]).
    keep_row_events: bool,
}

/// Whether the raw bytes of an event of `type_code` are kept for the
/// `binlog` apply method: FORMAT_DESCRIPTION, TABLE_MAP and every rows
/// event type (plain, v2 and MariaDB's compressed ones).
fn kept_raw(type_code: u8) -> bool {
    use event_type::*;
    matches!(
        type_code,
        FORMAT_DESCRIPTION
            | TABLE_MAP
            | WRITE_ROWS_V1
            | UPDATE_ROWS_V1
            | DELETE_ROWS_V1
            | WRITE_ROWS_V2
            | UPDATE_ROWS_V2
            | DELETE_ROWS_V2
            | MARIADB_WRITE_ROWS_COMPRESSED_V1
            | MARIADB_UPDATE_ROWS_COMPRESSED_V1
            | MARIADB_DELETE_ROWS_COMPRESSED_V1
            | MARIADB_WRITE_ROWS_COMPRESSED_V2
            | MARIADB_UPDATE_ROWS_COMPRESSED_V2
            | MARIADB_DELETE_ROWS_COMPRESSED_V2
    )
}

fn end_of(raw: &RawEvent) -> BinlogPosition {
    raw.position
        .with_offset(raw.position.offset() + raw.bytes.len() as u64)
}

impl<S: EventSource> TransactionReader<S> {
    /// A reader over `source`; `assembler` holds the next seqno and the
    /// position the source starts at.
    pub fn new(source: S, assembler: Assembler) -> TransactionReader<S> {
        TransactionReader {
            source,
            decoder: Decoder::new(),
            assembler,
            pending: VecDeque::new(),
            idle_mark: None,
            keep_row_events: false,
        }
    }

    /// Keeps each transaction's row events as the binlog holds them
    /// ([`crate::event::Transaction::row_events`], for the `binlog` apply
    /// method); off by default.
    pub fn keep_row_events(&mut self, on: bool) {
        self.keep_row_events = on;
    }

    /// Records each HEARTBEAT between transactions in `mark`.
    pub fn set_idle_mark(&mut self, mark: std::sync::Arc<super::IdleMark>) {
        self.idle_mark = Some(mark);
    }

    /// The assembler: next seqno, and the binlog and GTID positions after
    /// the last complete transaction.
    pub fn assembler(&self) -> &Assembler {
        &self.assembler
    }

    /// The assembler, to set how it cuts large transactions
    /// ([`Assembler::set_fragment_bytes`], [`Assembler::resume_inside`]).
    pub fn assembler_mut(&mut self) -> &mut Assembler {
        &mut self.assembler
    }

    /// Replaces the source (after a reconnect): the partly received
    /// transaction is dropped and decoding starts afresh (the new stream
    /// re-sends its FORMAT_DESCRIPTION and TABLE_MAPs).
    pub fn replace_source(&mut self, source: S) {
        self.source = source;
        self.decoder = Decoder::new();
        self.assembler.discard_partial();
        self.pending.clear();
    }

    /// The next complete transaction; `Ok(None)` when a non-following
    /// source has no more events.
    ///
    /// # Errors
    /// Any decode, sequence or source error; and
    /// [`ExtractError::Sequence`] when the source ends inside a
    /// transaction.
    pub async fn next_transaction(&mut self) -> Result<Option<Transaction>, ExtractError> {
        loop {
            if let Some((event, end)) = self.pending.pop_front() {
                if let Some(txn) = self.assembler.push(event, &end)? {
                    return Ok(Some(txn));
                }
                continue;
            }
            let Some(raw) = self.source.next_event().await? else {
                if self.assembler.in_transaction() && !self.source.ended_in_active_file() {
                    return Err(ExtractError::Sequence {
                        position: self.assembler.resume_position().clone(),
                        message: "the binlog ends inside the transaction that starts after \
                                  this position (truncated binlog?)"
                            .to_string(),
                    });
                }
                return Ok(None);
            };
            let end = end_of(&raw);
            if let Some(mark) = &self.idle_mark {
                let heartbeat = matches!(
                    raw.bytes.get(4),
                    Some(&event_type::HEARTBEAT | &event_type::HEARTBEAT_V2)
                );
                // A heartbeat stands where the master's next event starts.
                if heartbeat && !self.assembler.in_transaction() && self.pending.is_empty() {
                    mark.set(raw.position.clone(), self.assembler.next_seqno());
                }
            }
            if self.keep_row_events && raw.bytes.get(4).is_some_and(|&t| kept_raw(t)) {
                let event = self.decoder.decode(&raw)?;
                if let Some(txn) = self.assembler.push_raw(event, &end, Some(raw.bytes))? {
                    return Ok(Some(txn));
                }
                continue;
            }
            if raw.bytes.get(4) != Some(&event_type::TRANSACTION_PAYLOAD) {
                // One raw event is one decoded event (every event but a
                // MySQL TRANSACTION_PAYLOAD): straight to the assembler.
                let event = self.decoder.decode_owned(raw)?;
                if let Some(txn) = self.assembler.push(event, &end)? {
                    return Ok(Some(txn));
                }
                continue;
            }
            for event in self.decoder.decode_expanded(&raw)? {
                self.pending.push_back((event, end.clone()));
            }
        }
    }
}

/// Either source, as the configuration names it.
pub enum AnySource {
    /// Binlog files in a directory.
    Files(FileSource),
    /// A live master.
    Live(LiveSource),
}

impl EventSource for AnySource {
    async fn next_event(&mut self) -> Result<Option<RawEvent>, ExtractError> {
        match self {
            AnySource::Files(s) => s.next_event().await,
            AnySource::Live(s) => s.next_event().await,
        }
    }

    fn ended_in_active_file(&self) -> bool {
        match self {
            AnySource::Files(s) => s.ended_in_active_file(),
            AnySource::Live(_) => false,
        }
    }
}

/// Where an extraction run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtractStart {
    /// A binlog file and offset.
    File(BinlogPosition),
    /// Just after a MariaDB GTID position (live masters only).
    Gtid(GtidPos),
}

/// Reads transactions from the configured source. When following, it
/// reconnects to a live master after transient errors with a capped,
/// doubling backoff (from 100 ms to `reconnect_max_backoff_ms`), each time
/// at the position after the last complete transaction; a one-shot read
/// returns the error.
pub struct Extractor {
    reader: TransactionReader<AnySource>,
    live: Option<LiveOptions>,
    /// Where a reconnect resumes before any transaction completed.
    start: ExtractStart,
    /// Whether a transaction completed since the start.
    progressed: bool,
    /// Reading follows the binlog (a service); a one-shot read reports a
    /// lost or unreachable master instead of reconnecting forever.
    follow: bool,
    /// Waits between reconnects; kept across calls (a caller may cancel
    /// [`Extractor::next_transaction`] on a timeout and call again).
    backoff: Backoff,
    /// A reconnect due at this instant, resuming there.
    reconnect: Option<(tokio::time::Instant, ExtractStart)>,
}

impl Extractor {
    /// Opens the source `endpoint` (the config's `[source]`) at `start`; the first transaction gets
    /// `next_seqno`. `follow` keeps reading at the end of the binlog
    /// (files: tail the last file; live: blocking dump) instead of ending.
    ///
    /// # Errors
    /// [`ExtractError::Start`] for a GTID start on a files source, and
    /// the source's own errors.
    pub fn open(
        endpoint: &SourceEndpoint,
        start: ExtractStart,
        next_seqno: Seqno,
        follow: bool,
    ) -> Result<Extractor, ExtractError> {
        Self::open_with(endpoint, start, next_seqno, follow, false)
    }

    /// [`Extractor::open`]; with `gtid_strict` a GTID start asks a MariaDB
    /// master for `@slave_gtid_strict_mode = 1`: the master refuses (error
    /// 1236) a start GTID that its binlog lacks although it holds a later
    /// one of the same domain and server ("a hole"), as for a native
    /// replica in GTID strict mode (MariaDB KB, "GTID": gtid_strict_mode).
    /// A new master after a switch is read so: a server of another
    /// topology with overlapping GTIDs is refused, not read from its start.
    ///
    /// # Errors
    /// As [`Extractor::open`].
    pub fn open_with(
        endpoint: &SourceEndpoint,
        start: ExtractStart,
        next_seqno: Seqno,
        follow: bool,
        gtid_strict: bool,
    ) -> Result<Extractor, ExtractError> {
        let (source, live, max_backoff) = match endpoint {
            SourceEndpoint::Files(files) => {
                let ExtractStart::File(position) = &start else {
                    return Err(ExtractError::Start {
                        message: "a GTID start needs a live master; binlog files start at FILE:POS"
                            .to_string(),
                    });
                };
                let mut options = FileOptions::follow(follow);
                options.index_file = files.binlog_index.clone();
                let source = FileSource::new(files.binlog_dir.clone(), position.clone(), options)?;
                (AnySource::Files(source), None, Duration::ZERO)
            }
            SourceEndpoint::Live(live) => {
                let mut options = LiveOptions::from_config(live);
                options.non_blocking = !follow;
                if gtid_strict {
                    options.gtid_strict_mode = Some(true);
                }
                let source = LiveSource::new(options.clone(), live_start(&start));
                (
                    AnySource::Live(source),
                    Some(options),
                    Duration::from_millis(live.reconnect_max_backoff_ms),
                )
            }
        };
        let (position, gtid) = match &start {
            ExtractStart::File(p) => (p.clone(), GtidPos::new()),
            ExtractStart::Gtid(g) => (
                BinlogPosition::new("unknown.000000", 4).expect("valid literal"),
                g.clone(),
            ),
        };
        Ok(Extractor {
            reader: TransactionReader::new(source, Assembler::new(next_seqno, position, gtid)),
            live,
            start,
            progressed: false,
            follow,
            backoff: reconnect_backoff(max_backoff),
            reconnect: None,
        })
    }

    /// The assembler's view: next seqno, positions after the last complete
    /// transaction.
    pub fn assembler(&self) -> &Assembler {
        self.reader.assembler()
    }

    /// The assembler, to set how it cuts large transactions (see
    /// [`TransactionReader::assembler_mut`]).
    pub fn assembler_mut(&mut self) -> &mut Assembler {
        self.reader.assembler_mut()
    }

    /// Keeps each transaction's row events as the binlog holds them (see
    /// [`TransactionReader::keep_row_events`]).
    pub fn keep_row_events(&mut self, on: bool) {
        self.reader.keep_row_events(on);
    }

    /// Records each HEARTBEAT between transactions in `mark`
    /// ([`super::IdleMark`]).
    pub fn set_idle_mark(&mut self, mark: std::sync::Arc<super::IdleMark>) {
        self.reader.set_idle_mark(mark);
    }

    /// Sets the GTID position the assembler starts from (a restart from a
    /// stored FILE:POS keeps the stored GTID position this way).
    pub fn set_gtid_position(&mut self, gtid_pos: GtidPos) {
        self.reader.assembler.set_gtid_position(gtid_pos);
    }

    /// The next complete transaction (see [`TransactionReader`]).
    ///
    /// # Errors
    /// Definite errors (decode, sequence, a master error that is not
    /// transient); transient master errors are retried here.
    pub async fn next_transaction(&mut self) -> Result<Option<Transaction>, ExtractError> {
        loop {
            // A reconnect decided earlier (possibly by a call that was
            // cancelled while it waited): wait until its time, then open
            // the new source. Cancel-safe: the deadline is kept.
            if let Some((at, resume)) = &self.reconnect {
                tokio::time::sleep_until(*at).await;
                let options = self.live.clone().expect("reconnects are for live masters");
                self.reader.replace_source(AnySource::Live(LiveSource::new(
                    options,
                    live_start(resume),
                )));
                self.reconnect = None;
            }
            match self.reader.next_transaction().await {
                Err(ExtractError::Master {
                    address,
                    message,
                    code,
                    transient: true,
                }) if self.live.is_some() && self.follow => {
                    let resume = if self.progressed {
                        ExtractStart::File(self.reader.assembler().resume_position().clone())
                    } else {
                        self.start.clone()
                    };
                    let delay = self.backoff.next_delay();
                    tracing::warn!(
                        master = %address,
                        error = %message,
                        code,
                        resume = ?resume,
                        attempt = self.backoff.attempts(),
                        backoff_ms = delay.as_millis() as u64,
                        "lost the master; reconnecting at the last complete transaction"
                    );
                    self.reconnect = Some((tokio::time::Instant::now() + delay, resume));
                }
                Ok(Some(txn)) => {
                    self.progressed = true;
                    self.backoff.reset();
                    return Ok(Some(txn));
                }
                other => return other,
            }
        }
    }
}

/// The first wait before reconnecting to a lost master.
pub const RECONNECT_INITIAL_BACKOFF: Duration = Duration::from_millis(100);

/// The waits between reconnects to a lost master: 100 ms
/// ([`RECONNECT_INITIAL_BACKOFF`]), doubled after each failed attempt up to
/// `max` (`reconnect_max_backoff_ms`, never below 100 ms), back to 100 ms
/// once a transaction arrives ([`Backoff::reset`]).
pub fn reconnect_backoff(max: Duration) -> Backoff {
    Backoff::new(
        RECONNECT_INITIAL_BACKOFF,
        max.max(RECONNECT_INITIAL_BACKOFF),
    )
}

fn live_start(start: &ExtractStart) -> LiveStart {
    match start {
        ExtractStart::File(p) => LiveStart::File(p.clone()),
        ExtractStart::Gtid(g) => LiveStart::Gtid(g.clone()),
    }
}

/// The start position named by `start` (the config's `source.start` or a
/// `--from` text) for the source `endpoint`: `FILE:POS` and `gtid:…` as given;
/// `current` asks a live master for its end of binlog (files: the end of
/// the last file is not supported, name FILE:POS).
///
/// # Errors
/// [`ExtractError::Start`] with a message for `takeover` (the
/// replicator service performs takeover) and unsupported combinations; the
/// master's errors for `current`.
pub async fn resolve_start(
    endpoint: &SourceEndpoint,
    start: &StartPosition,
) -> Result<ExtractStart, ExtractError> {
    let unsupported = |message: &str| ExtractError::Start {
        message: message.to_string(),
    };
    match start {
        StartPosition::File { file, offset } => BinlogPosition::new(file.clone(), *offset)
            .map(ExtractStart::File)
            .map_err(|e| unsupported(&e.to_string())),
        StartPosition::Gtid(text) => text
            .parse::<GtidPos>()
            .map(ExtractStart::Gtid)
            .map_err(|e| unsupported(&e.to_string())),
        StartPosition::Current => match endpoint {
            SourceEndpoint::Live(live) => {
                let (position, _gtid) = master_status(&LiveOptions::from_config(live)).await?;
                Ok(ExtractStart::File(position))
            }
            SourceEndpoint::Files(_) => Err(unsupported(
                "start = \"current\" needs a live master; for binlog files give FILE:POS",
            )),
        },
        StartPosition::Takeover => Err(unsupported(
            "start = \"takeover\" is performed by the replicator service; \
             to inspect a binlog give --from FILE:POS or --from gtid:D-S-N",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::GtidPos;

    #[test]
    fn reconnect_waits_double_up_to_the_cap_and_reset_on_progress() {
        let mut b = reconnect_backoff(Duration::from_millis(1500));
        let waits: Vec<u64> = (0..7).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1500, 1500, 1500]);
        assert_eq!(b.attempts(), 7);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        assert_eq!(b.attempts(), 1);
        // A cap below the first wait waits 100 ms every time.
        let mut b = reconnect_backoff(Duration::from_millis(10));
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }

    fn source(dir: &str) -> FileSource {
        let dir: std::path::PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "tests/fixtures/binlog/events",
            dir,
        ]
        .iter()
        .collect();
        let start = BinlogPosition::new("mariadb-bin.000001", 4).unwrap();
        FileSource::new(dir, start, FileOptions::default()).unwrap()
    }

    fn assembler() -> Assembler {
        Assembler::new(
            Seqno::new(0),
            BinlogPosition::new("mariadb-bin.000001", 4).unwrap(),
            GtidPos::new(),
        )
    }

    /// Transactions (or the error that ends them) the straightforward way:
    /// every raw event through `decode_expanded`, every decoded event into
    /// the assembler with a copy of its end position.
    fn reference(dir: &str) -> Vec<Result<Transaction, String>> {
        let mut src = source(dir);
        let mut decoder = Decoder::new();
        let mut asm = assembler();
        let mut out = Vec::new();
        loop {
            let raw = match src.try_next_event() {
                Ok(Some(raw)) => raw,
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            };
            let end = end_of(&raw);
            let events = match decoder.decode_expanded(&raw) {
                Ok(events) => events,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            };
            for event in events {
                match asm.push(event, &end.clone()) {
                    Ok(Some(txn)) => out.push(Ok(txn)),
                    Ok(None) => {}
                    Err(e) => {
                        out.push(Err(e.to_string()));
                        return out;
                    }
                }
            }
        }
    }

    /// An XA transaction assembles into two transactions: the prepare (XA
    /// START, rows, XA END, XA PREPARE; its own seqno and position) and
    /// the outcome (XA COMMIT), both `#UNKNOWN`.
    #[test]
    fn xa_prepare_and_commit_are_two_transactions() {
        use crate::event::Change;
        use crate::xa::{xa_role, XaRole};
        let txns: Vec<Transaction> = reference("xa").into_iter().map(Result::unwrap).collect();
        assert_eq!(txns.len(), 4);
        let (prepare, commit) = (&txns[2], &txns[3]);
        let xid = crate::xa::Xid {
            format_id: 7,
            gtrid: b"fx-gtrid".to_vec(),
            bqual: b"fx-bqual".to_vec(),
        };
        assert_eq!(xa_role(prepare), Some(XaRole::Prepare(xid.clone())));
        assert_eq!(xa_role(commit), Some(XaRole::Commit(xid)));
        assert_eq!(xa_role(&txns[1]), None);
        let statements: Vec<String> = prepare
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Statement(s) => Some(String::from_utf8_lossy(&s.sql).into_owned()),
                _ => None,
            })
            .collect();
        let x = "X'66782d6774726964',X'66782d627175616c',7";
        assert_eq!(
            statements,
            [
                format!("XA START {x}"),
                format!("XA END {x}"),
                format!("XA PREPARE {x}")
            ]
        );
        assert_eq!(prepare.row_count(), 1);
        assert_eq!(
            (prepare.seqno.get(), prepare.gtid.unwrap().to_string()),
            (2, "0-1-3".to_owned())
        );
        assert_eq!(prepare.end_position.to_string(), "mariadb-bin.000001:985");
        assert_eq!(commit.end_position.to_string(), "mariadb-bin.000001:1157");
        assert_eq!(
            (prepare.shard.as_str(), commit.shard.as_str()),
            ("#UNKNOWN", "#UNKNOWN")
        );
    }

    /// The reader's fast path (one raw event straight to the assembler)
    /// gives exactly what decoding every event with `decode_expanded` gives.
    #[tokio::test]
    async fn reader_matches_the_reference_on_every_fixture() {
        for dir in ["crc32", "none", "b15", "b16", "b18", "gcommit", "xa"] {
            let want = reference(dir);
            let mut reader = TransactionReader::new(source(dir), assembler());
            let mut got = Vec::new();
            loop {
                match reader.next_transaction().await {
                    Ok(Some(txn)) => got.push(Ok(txn)),
                    Ok(None) => break,
                    Err(e) => {
                        got.push(Err(e.to_string()));
                        break;
                    }
                }
            }
            assert!(!got.is_empty(), "{dir}");
            assert_eq!(got, want, "{dir}");
        }
    }
}
