//! Assembling decoded events into transactions.
//!
//! The rules follow how MySQL and MariaDB group events in the binlog
//! (MariaDB knowledge base "GTID" and "Binary Log Formats"; MySQL internals
//! "Replication > Binary log"):
//! - MariaDB: a GTID event (162) opens every transaction; it stands in for
//!   `BEGIN`. With `FL_STANDALONE` set the transaction is the single
//!   statement that follows (DDL); otherwise it ends at XID (transactional
//!   engines) or at a QUERY `COMMIT` (non-transactional engines).
//! - MySQL, and servers without GTIDs: an optional GTID event, then either
//!   `BEGIN` … `XID`/`COMMIT`, or one standalone statement (DDL).
//! - INTVAR, RAND and USER_VAR events belong to the statement that follows
//!   them; ANNOTATE_ROWS/ROWS_QUERY are kept for display.
//! - A `ROLLBACK` query ends a transaction whose non-transactional changes
//!   were real on the master: it is kept as the transaction's last
//!   statement so the applier rolls back exactly as the master did.
//!
//! Every transaction carries the binlog position after its last event (the
//! restart position) and the GTID position it leaves the stream at.

use std::borrow::Cow;

use crate::event::{
    Change, Fragment, RowEventBytes, RowEvents, RowsChange, SessionContext, Statement, Transaction,
    UNKNOWN_SHARD,
};
use crate::position::{BinlogPosition, Gtid, GtidPos, Seqno};
use crate::shard::statement::{is_transaction_control, statement_shard};

use super::{BinlogEvent, EventBody, ExtractError, TableIdMap};

/// MariaDB GTID event flag `FL_STANDALONE`: a single statement without
/// BEGIN/COMMIT follows.
pub const GTID_FL_STANDALONE: u8 = 1;

/// MariaDB GTID event flag `FL_PREPARED_XA`: the group ends with XA
/// PREPARE.
pub const GTID_FL_PREPARED_XA: u8 = 64;

/// MariaDB GTID event flag `FL_COMPLETED_XA`: XA COMMIT or XA ROLLBACK.
pub const GTID_FL_COMPLETED_XA: u8 = 128;

/// A transaction being assembled.
#[derive(Debug)]
struct Open {
    txn: Transaction,
    /// Table id → index into `txn.tables`.
    table_index: TableIdMap<u32>,
    /// A standalone statement ends the transaction (MariaDB FL_STANDALONE,
    /// or a GTID/statement without BEGIN).
    standalone: bool,
    /// BEGIN (or a MariaDB non-standalone GTID) was seen.
    explicit: bool,
    /// Raw TABLE_MAP events since the last rows event (see
    /// [`Assembler::push_raw`]).
    maps: Vec<u8>,
    /// One entry per rows change so far: its TABLE_MAPs and itself.
    row_events: Vec<RowEventBytes>,
    /// A TABLE_MAP or rows event came without its raw bytes: the
    /// transaction gets no [`RowEvents`].
    raw_missing: bool,
    /// An XA transaction (GTID flag `FL_PREPARED_XA` or
    /// `FL_COMPLETED_XA`): never cut into fragments (its XA START is
    /// placed at the front when it ends).
    xa: bool,
    /// Approximate bytes of the changes and row events since the last cut
    /// ([`Assembler::set_fragment_bytes`]).
    bytes: usize,
    /// The index the next fragment gets (0 until a first cut).
    fragment_index: u32,
    /// Where the next fragment starts: the transaction's start, then the
    /// end of the last fragment cut.
    fragment_start: BinlogPosition,
    /// The raw TABLE_MAPs of the current statement (before its first rows
    /// event), kept while fragments are cut: a fragment that starts in the
    /// middle of a statement sends them again, since a rows event whose
    /// table id is not mapped is skipped by the server without an error.
    stmt_maps: Vec<u8>,
    /// The next rows entry needs `stmt_maps` in front (a cut came before
    /// it, or the rows before it were skipped).
    resend_maps: bool,
    /// Resumed inside this transaction ([`Assembler::resume_inside`]):
    /// changes of events that end at or before this position are in the
    /// queue already and are skipped.
    skip_through: Option<BinlogPosition>,
}

/// Turns decoded events into transactions, assigning dense seqnos.
///
/// Feed every event in binlog order with [`Assembler::push`]; it returns a
/// transaction when one completes. After a connection loss, call
/// [`Assembler::discard_partial`] and resume the source at
/// [`Assembler::resume_position`].
#[derive(Debug)]
pub struct Assembler {
    next_seqno: Seqno,
    open: Option<Open>,
    /// GTID seen (MySQL) that belongs to the next transaction.
    pending_gtid: Option<(Gtid, Option<u64>, BinlogPosition)>,
    /// INTVAR/RAND/USER_VAR context for the next statement.
    pending_context: SessionContext,
    /// Binlog position after the last complete transaction, or the start.
    resume: BinlogPosition,
    /// GTID position after the last complete transaction.
    gtid_pos: GtidPos,
    /// Sizes (changes, tables) of the last complete transaction, capped at
    /// [`CAPACITY_HINT_MAX`]: the capacity a new transaction starts with, so
    /// that a stream of similar transactions does not grow its vectors
    /// push by push.
    capacity_hint: (usize, usize),
    /// The raw FORMAT_DESCRIPTION in force (see [`Assembler::push_raw`]).
    format_event: Option<Vec<u8>>,
    /// Cut a transaction into fragments past this many bytes
    /// ([`Assembler::set_fragment_bytes`]); `None`: never.
    fragment_bytes: Option<usize>,
    /// The next transaction opened continues one whose first fragments are
    /// stored: skip through this position, number fragments from this
    /// index ([`Assembler::resume_inside`]).
    resume_inside: Option<(BinlogPosition, u32)>,
}

/// What a rows event costs in memory per byte of the event, for
/// [`Assembler::set_fragment_bytes`]: its decoded row images (about twice
/// its size, measured on sysbench and wide VARCHAR rows) and its raw bytes.
const ROWS_BYTES_PER_EVENT_BYTE: usize = 3;

/// Largest capacity a new transaction reserves from the previous one's size.
const CAPACITY_HINT_MAX: usize = 64;

impl Assembler {
    /// A new assembler whose first transaction gets `next_seqno`, starting
    /// at binlog position `start` with GTID position `gtid_pos` (empty when
    /// unknown).
    pub fn new(next_seqno: Seqno, start: BinlogPosition, gtid_pos: GtidPos) -> Assembler {
        Assembler {
            next_seqno,
            open: None,
            pending_gtid: None,
            pending_context: SessionContext::default(),
            resume: start,
            gtid_pos,
            capacity_hint: (0, 0),
            format_event: None,
            fragment_bytes: None,
            resume_inside: None,
        }
    }

    /// Cuts a transaction into fragments ([`crate::event::Fragment`]) as
    /// its events arrive, once its changes since the last cut pass `bytes`
    /// (approximate: decoded row images plus raw row events); `None`:
    /// transactions are returned whole. A cut comes only right after a
    /// rows event, never inside an XA transaction or a standalone
    /// statement; each fragment takes the next seqno.
    pub fn set_fragment_bytes(&mut self, bytes: Option<usize>) {
        self.fragment_bytes = bytes.map(|b| b.max(1));
    }

    /// The next transaction (the one that starts at
    /// [`Assembler::resume_position`]) continues a transaction whose
    /// fragments up to index `next_index - 1` are stored, the last of them
    /// ending at `stored_through`: its events up to there are read for
    /// their state (TABLE_MAPs) only, and its fragments continue from
    /// `next_index`. Used when an extraction resumes after a stop in the
    /// middle of a large transaction.
    pub fn resume_inside(&mut self, stored_through: BinlogPosition, next_index: u32) {
        self.resume_inside = Some((stored_through, next_index));
    }

    /// The seqno the next completed transaction will get.
    pub fn next_seqno(&self) -> Seqno {
        self.next_seqno
    }

    /// Binlog position after the last complete transaction (where a
    /// restarted source must resume; never inside a transaction).
    pub fn resume_position(&self) -> &BinlogPosition {
        &self.resume
    }

    /// GTID position after the last complete transaction.
    pub fn gtid_position(&self) -> &GtidPos {
        &self.gtid_pos
    }

    /// Replaces the GTID position after the last complete transaction
    /// (when resuming from a stored position).
    pub fn set_gtid_position(&mut self, gtid_pos: GtidPos) {
        self.gtid_pos = gtid_pos;
    }

    /// Whether a transaction is open (events seen since its start, not
    /// committed yet).
    pub fn in_transaction(&self) -> bool {
        self.open.is_some() || self.pending_gtid.is_some()
    }

    /// Forgets a partly received transaction (after a connection loss); the
    /// source must resume at [`Assembler::resume_position`].
    pub fn discard_partial(&mut self) {
        if let Some(open) = self.open.take().filter(|o| o.fragment_index > 0) {
            // Fragments of it are out already: the transaction read again
            // from its start continues after them.
            self.resume_inside = Some((open.fragment_start, open.fragment_index));
        }
        self.pending_gtid = None;
        self.pending_context = SessionContext::default();
    }

    /// Feeds one event; `end` is the binlog position just after it. Returns
    /// the transaction it completes, if any.
    ///
    /// # Errors
    /// [`ExtractError::Sequence`] when the event cannot occur where it is:
    /// a rows event outside a transaction, a GTID or rotation inside one, a
    /// rows event naming a table id without a TABLE_MAP in this transaction.
    pub fn push(
        &mut self,
        event: BinlogEvent,
        end: &BinlogPosition,
    ) -> Result<Option<Transaction>, ExtractError> {
        self.push_raw(event, end, None)
    }

    /// As [`Assembler::push`], with the event's raw bytes as the binlog
    /// holds them (`raw`): given for every FORMAT_DESCRIPTION, TABLE_MAP
    /// and rows event, the completed transaction carries its row events
    /// ([`Transaction::row_events`]) for the `binlog` apply method. A
    /// transaction any of whose TABLE_MAP or rows events came without
    /// bytes (or before any FORMAT_DESCRIPTION) gets none.
    ///
    /// # Errors
    /// As [`Assembler::push`].
    pub fn push_raw(
        &mut self,
        event: BinlogEvent,
        end: &BinlogPosition,
        raw: Option<Vec<u8>>,
    ) -> Result<Option<Transaction>, ExtractError> {
        let skipping = self.open.as_ref().is_some_and(|o| {
            o.skip_through
                .as_ref()
                .is_some_and(|through| end <= through)
        });
        let fragmenting = self.fragment_bytes.is_some();
        match (&event.body, raw) {
            (EventBody::FormatDescription(_), raw) => self.format_event = raw,
            (EventBody::TableMap(_), raw) => {
                if let Some(open) = self.open.as_mut() {
                    match raw {
                        Some(raw) => open.maps.extend_from_slice(&raw),
                        None => open.raw_missing = true,
                    }
                }
            }
            (EventBody::Rows { .. }, raw) => {
                if let Some(open) = self.open.as_mut() {
                    match raw {
                        Some(raw) if !open.raw_missing => {
                            let mut bytes = std::mem::take(&mut open.maps);
                            if fragmenting {
                                if !bytes.is_empty() {
                                    open.stmt_maps.clone_from(&bytes);
                                } else if open.resend_maps {
                                    bytes.clone_from(&open.stmt_maps);
                                }
                                open.resend_maps = skipping;
                            }
                            if bytes.is_empty() {
                                bytes = raw;
                            } else {
                                bytes.extend_from_slice(&raw);
                            }
                            if !skipping {
                                open.row_events.push(RowEventBytes(bytes));
                            }
                        }
                        _ => open.raw_missing = true,
                    }
                }
            }
            _ => {}
        }
        let BinlogEvent {
            header,
            position,
            body,
        } = event;
        match body {
            EventBody::MariadbGtid {
                gtid,
                commit_id,
                flags,
            } => {
                self.expect_idle(&position, "GTID")?;
                let mut open = self.open_txn(header.server_id, Some(gtid), commit_id, &position);
                open.standalone = flags & GTID_FL_STANDALONE != 0;
                open.explicit = !open.standalone;
                open.xa = flags & (GTID_FL_PREPARED_XA | GTID_FL_COMPLETED_XA) != 0;
                self.open = Some(open);
                Ok(None)
            }
            EventBody::MysqlGtid { uuid, gno } => {
                self.expect_idle(&position, "GTID")?;
                // MySQL GTIDs are kept for display only; positions are
                // file:pos. The anonymous GTID carries no identity.
                let _ = (uuid, gno);
                self.pending_gtid = None;
                Ok(None)
            }
            EventBody::Begin => {
                match &mut self.open {
                    Some(open) if open.explicit && open.txn.changes.is_empty() => {}
                    Some(_) => {
                        return Err(sequence(&position, "BEGIN inside an open transaction"));
                    }
                    None => {
                        let mut open = self.open_txn(header.server_id, None, None, &position);
                        open.explicit = true;
                        self.open = Some(open);
                    }
                }
                Ok(None)
            }
            EventBody::Xid(_) | EventBody::Commit => {
                if self.open.is_none() {
                    return Err(sequence(&position, "COMMIT/XID outside a transaction"));
                }
                Ok(Some(self.finish(header.timestamp, end)))
            }
            EventBody::Rollback => {
                let Some(open) = self.open.as_mut() else {
                    return Err(sequence(&position, "ROLLBACK outside a transaction"));
                };
                open.txn.changes.push(Change::Statement(Statement {
                    sql: b"ROLLBACK".to_vec(),
                    default_schema: None,
                    context: SessionContext::default(),
                    error_code: 0,
                    thread_id: None,
                }));
                Ok(Some(self.finish(header.timestamp, end)))
            }
            EventBody::Query(mut statement) => {
                let context = std::mem::take(&mut self.pending_context);
                statement.context.insert_id = context.insert_id;
                statement.context.last_insert_id = context.last_insert_id;
                statement.context.rand_seeds = context.rand_seeds;
                statement.context.user_vars = context.user_vars;
                let standalone = match &self.open {
                    Some(open) => open.standalone,
                    None => {
                        self.open = Some(self.open_txn(header.server_id, None, None, &position));
                        true
                    }
                };
                let open = self.open.as_mut().expect("opened above");
                if open
                    .skip_through
                    .as_ref()
                    .is_some_and(|through| end <= through)
                {
                    // Stored in a fragment already.
                    if end >= open.skip_through.as_ref().expect("checked") {
                        open.skip_through = None;
                    }
                    return Ok(None);
                }
                open.bytes += statement.sql.len();
                open.txn.changes.push(Change::Statement(statement));
                if standalone {
                    Ok(Some(self.finish(header.timestamp, end)))
                } else {
                    Ok(None)
                }
            }
            EventBody::XaPrepare { one_phase, xid } => {
                // The end of an XA PREPARE group (crate::xa): the open
                // transaction becomes XA START, its changes (ending with
                // the binlogged XA END), XA PREPARE.
                let Some(open) = self.open.as_mut().filter(|o| o.explicit) else {
                    return Err(sequence(&position, "XA_PREPARE outside a transaction"));
                };
                if one_phase {
                    return Err(sequence(
                        &position,
                        &format!(
                            "XA_PREPARE with one_phase set for xid {xid}: MariaDB binlogs XA \
                             COMMIT … ONE PHASE as an ordinary transaction; this form is not \
                             supported"
                        ),
                    ));
                }
                let ends_with_xa_end = open.txn.changes.iter().rev().find_map(|c| match c {
                    Change::Statement(s) => Some(crate::xa::xa_statement(&s.sql)),
                    _ => None,
                });
                if !matches!(&ends_with_xa_end, Some(Some(("END", x))) if *x == xid) {
                    return Err(sequence(
                        &position,
                        &format!("XA_PREPARE for xid {xid} not preceded by XA END of the same xid"),
                    ));
                }
                let xa = |verb: &str| {
                    Change::Statement(Statement {
                        sql: format!("XA {verb} {}", xid.to_sql()).into_bytes(),
                        default_schema: None,
                        context: SessionContext::default(),
                        error_code: 0,
                        thread_id: None,
                    })
                };
                open.txn.changes.insert(0, xa("START"));
                open.txn.changes.push(xa("PREPARE"));
                Ok(Some(self.finish(header.timestamp, end)))
            }
            EventBody::TableMap(table) => {
                let open = self.require_open(&position, "TABLE_MAP")?;
                // MariaDB repeats the TABLE_MAP before every rows event:
                // an identical definition reuses the transaction's entry.
                if let Some(&index) = open.table_index.get(&table.table_id) {
                    if open.txn.tables[index as usize] == *table {
                        return Ok(None);
                    }
                }
                let index = open.txn.tables.len() as u32;
                open.table_index.insert(table.table_id, index);
                // The transaction's own copy (the decoder keeps its cache).
                open.txn.tables.push(std::sync::Arc::unwrap_or_clone(table));
                Ok(None)
            }
            EventBody::Rows {
                table_id,
                kind,
                flags,
                rows,
            } => {
                let fragment_bytes = self.fragment_bytes;
                let open = self.require_open(&position, "rows")?;
                let Some(&table) = open.table_index.get(&table_id) else {
                    return Err(sequence(
                        &position,
                        &format!("rows event for table id {table_id} without a TABLE_MAP in its transaction"),
                    ));
                };
                let skip = open
                    .skip_through
                    .as_ref()
                    .is_some_and(|through| end <= through);
                if skip {
                    if end >= open.skip_through.as_ref().expect("checked") {
                        open.skip_through = None;
                    }
                    return Ok(None);
                }
                // Its decoded images take about twice the event's size, and
                // its raw bytes are kept beside them: three times, without
                // walking every value on the hot path.
                open.bytes += ROWS_BYTES_PER_EVENT_BYTE * header.event_size as usize;
                open.txn.changes.push(Change::Rows(RowsChange {
                    table,
                    kind,
                    flags,
                    rows,
                }));
                let cut = fragment_bytes
                    .is_some_and(|limit| open.bytes >= limit && open.explicit && !open.xa);
                if cut {
                    return Ok(Some(self.cut(header.timestamp, end)));
                }
                Ok(None)
            }
            EventBody::AnnotateRows(sql) => {
                // An annotation belongs to a transaction; outside one (never
                // seen in practice) it has nothing to describe.
                if let Some(open) = self.open.as_mut().filter(|o| o.skip_through.is_none()) {
                    open.txn.changes.push(Change::Annotation(sql));
                }
                Ok(None)
            }
            EventBody::Intvar { kind, value } => {
                match kind {
                    1 => self.pending_context.last_insert_id = Some(value),
                    _ => self.pending_context.insert_id = Some(value),
                }
                Ok(None)
            }
            EventBody::Rand { seed1, seed2 } => {
                self.pending_context.rand_seeds = Some((seed1, seed2));
                Ok(None)
            }
            EventBody::UserVar(var) => {
                self.pending_context.user_vars.push(var);
                Ok(None)
            }
            EventBody::Rotate { artificial, .. } => {
                if !artificial && self.open.is_some() {
                    return Err(sequence(&position, "ROTATE inside an open transaction"));
                }
                Ok(None)
            }
            EventBody::FormatDescription(_) => {
                // A FORMAT_DESCRIPTION with log_pos 0 is the master's
                // re-send at the start of a dump; a real one starts a file,
                // which cannot happen inside a transaction.
                if header.log_pos != 0 && self.open.is_some() {
                    return Err(sequence(
                        &position,
                        "FORMAT_DESCRIPTION inside an open transaction",
                    ));
                }
                Ok(None)
            }
            EventBody::Stop => {
                if self.open.is_some() {
                    return Err(sequence(&position, "STOP inside an open transaction"));
                }
                Ok(None)
            }
            EventBody::Heartbeat
            | EventBody::BinlogCheckpoint { .. }
            | EventBody::GtidList(_)
            | EventBody::Ignored => Ok(None),
        }
    }

    fn expect_idle(&self, position: &BinlogPosition, what: &str) -> Result<(), ExtractError> {
        if self.open.is_some() {
            return Err(sequence(
                position,
                &format!("{what} event inside an open transaction (the previous transaction never ended)"),
            ));
        }
        Ok(())
    }

    fn require_open(
        &mut self,
        position: &BinlogPosition,
        what: &str,
    ) -> Result<&mut Open, ExtractError> {
        self.open
            .as_mut()
            .ok_or_else(|| sequence(position, &format!("{what} event outside a transaction")))
    }

    fn open_txn(
        &mut self,
        server_id: u32,
        gtid: Option<Gtid>,
        commit_id: Option<u64>,
        position: &BinlogPosition,
    ) -> Open {
        let (skip_through, fragment_index, fragment_start) = match self.resume_inside.take() {
            Some((through, index)) => (Some(through.clone()), index, through),
            None => (None, 0, position.clone()),
        };
        Open {
            txn: Transaction {
                seqno: self.next_seqno,
                server_id,
                gtid,
                commit_id,
                start_position: position.clone(),
                end_position: position.clone(),
                commit_timestamp: 0,
                shard: String::new(),
                tables: Vec::with_capacity(self.capacity_hint.1),
                changes: Vec::with_capacity(self.capacity_hint.0),
                row_events: None,
                fragment: None,
            },
            table_index: TableIdMap::default(),
            standalone: false,
            explicit: false,
            maps: Vec::new(),
            row_events: Vec::new(),
            raw_missing: false,
            xa: false,
            bytes: 0,
            fragment_index,
            fragment_start,
            stmt_maps: Vec::new(),
            resend_maps: skip_through.is_some(),
            skip_through,
        }
    }

    /// Cuts the open transaction's changes so far into a fragment that
    /// ends at `end` (after a rows event); the transaction stays open.
    fn cut(&mut self, timestamp: u32, end: &BinlogPosition) -> Transaction {
        let seqno = self.next_seqno;
        let format = self.format_event.clone();
        let open = self.open.as_mut().expect("caller checked");
        let rows = std::mem::take(&mut open.row_events);
        let row_events = match format {
            Some(format) if !open.raw_missing && !rows.is_empty() => {
                Some(std::sync::Arc::new(RowEvents { format, rows }))
            }
            _ => None,
        };
        let mut fragment = Transaction {
            seqno,
            server_id: open.txn.server_id,
            gtid: open.txn.gtid,
            commit_id: open.txn.commit_id,
            start_position: std::mem::replace(&mut open.fragment_start, end.clone()),
            end_position: end.clone(),
            commit_timestamp: timestamp,
            shard: String::new(),
            tables: open.txn.tables.clone(),
            changes: std::mem::take(&mut open.txn.changes),
            row_events,
            fragment: Some(Fragment {
                index: open.fragment_index,
                last: false,
            }),
        };
        open.fragment_index += 1;
        open.bytes = 0;
        open.resend_maps = true;
        fragment.shard = shard_of(&fragment);
        self.next_seqno = self.next_seqno.next();
        fragment
    }

    fn finish(&mut self, timestamp: u32, end: &BinlogPosition) -> Transaction {
        let Open {
            mut txn,
            row_events,
            raw_missing,
            fragment_index,
            fragment_start,
            ..
        } = self.open.take().expect("caller checked");
        txn.seqno = self.next_seqno;
        if fragment_index > 0 {
            txn.start_position = fragment_start;
            txn.fragment = Some(Fragment {
                index: fragment_index,
                last: true,
            });
        }
        if !raw_missing && !row_events.is_empty() {
            if let Some(format) = &self.format_event {
                txn.row_events = Some(std::sync::Arc::new(RowEvents {
                    format: format.clone(),
                    rows: row_events,
                }));
            }
        }
        txn.end_position = end.clone();
        txn.commit_timestamp = timestamp;
        txn.shard = shard_of(&txn);
        self.capacity_hint = (
            txn.changes.len().min(CAPACITY_HINT_MAX),
            txn.tables.len().min(CAPACITY_HINT_MAX),
        );
        if let Some(gtid) = txn.gtid {
            self.gtid_pos.update(gtid);
        }
        self.resume = end.clone();
        self.next_seqno = self.next_seqno.next();
        self.pending_context = SessionContext::default();
        txn
    }
}

fn sequence(position: &BinlogPosition, message: &str) -> ExtractError {
    ExtractError::Sequence {
        position: position.clone(),
        message: message.to_string(),
    }
}

/// The shard of a transaction (shared/DESIGN.md §2): the one schema its
/// changes touch. A row change touches its table's schema; a statement
/// touches the schema [`statement_shard`] gives (schema-qualified names
/// parsed with sqlparser, the default schema for unqualified names and
/// statement-format DML, `CREATE/DROP DATABASE x` gives `x`), and a
/// statement it cannot attribute makes the whole transaction
/// [`UNKNOWN_SHARD`]. Transaction-control statements (`ROLLBACK`,
/// `SAVEPOINT`, ...; [`is_transaction_control`]) and annotations do not
/// count. An XA prepare or outcome ([`crate::xa::xa_role`]) is
/// [`UNKNOWN_SHARD`]. Two or more schemas, or none, give [`UNKNOWN_SHARD`] (critical,
/// so it runs alone: always safe).
///
/// Rows of another service's restart table
/// ([`is_catalog_table`](crate::shard::is_catalog_table): binlogged with
/// the data that service applied) do not count either; a transaction of
/// nothing but restart rows has the catalog schema as its shard (which
/// every filter drops).
pub fn shard_of(txn: &Transaction) -> String {
    if crate::xa::xa_role(txn).is_some() {
        // An XA prepare or outcome runs alone, in the master's order
        // (`XA COMMIT <xid>` names no schema).
        return UNKNOWN_SHARD.to_string();
    }
    let mut shard: Option<String> = None;
    let mut catalog: Option<&str> = None;
    for change in &txn.changes {
        let schema: Cow<'_, str> = match change {
            Change::Rows(rows) => {
                let table = &txn.tables[rows.table as usize];
                if crate::shard::is_catalog_table(&table.schema, &table.table) {
                    catalog.get_or_insert(table.schema.as_str());
                    continue;
                }
                Cow::Borrowed(&table.schema)
            }
            Change::Statement(s) if is_transaction_control(&s.sql) => continue,
            Change::Statement(s) => match statement_shard(&s.sql, s.default_schema.as_deref()) {
                Some(name) => Cow::Owned(name),
                None => return UNKNOWN_SHARD.to_string(),
            },
            Change::Annotation(_) => continue,
        };
        match &shard {
            None => shard = Some(schema.into_owned()),
            Some(s) if *s == *schema => {}
            Some(_) => return UNKNOWN_SHARD.to_string(),
        }
    }
    shard
        .or_else(|| catalog.map(str::to_string))
        .unwrap_or_else(|| UNKNOWN_SHARD.to_string())
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
