//! XA transactions in the transaction model: the xid, and how a queued
//! transaction says it is the prepare or the outcome of an XA transaction.
//!
//! MariaDB 10.5+ binlogs an XA transaction as two event groups (MariaDB
//! knowledge base "XA Transactions", MDEV-742; `log_event.h`
//! `XA_prepare_log_event`):
//! - at `XA PREPARE`: a GTID event with `FL_PREPARED_XA` and the xid, the
//!   rows, a QUERY `XA END <xid>`, then an XA_PREPARE event (type 38:
//!   `one_phase` u8, `formatID` u32, `gtrid_length` u32, `bqual_length`
//!   u32, then gtrid and bqual bytes);
//! - at `XA COMMIT` / `XA ROLLBACK`: a GTID event with `FL_COMPLETED_XA` and
//!   the xid, then a QUERY `XA COMMIT <xid>` / `XA ROLLBACK <xid>`.
//!
//! Each group is its own transaction with its own seqno and binlog
//! position. The extractor turns the first into `XA START <xid>`, the
//! changes, `XA END <xid>`, `XA PREPARE <xid>` ([`XaRole::Prepare`]); the
//! second is the single statement it holds ([`XaRole::Commit`],
//! [`XaRole::Rollback`]). The applier replays this protocol on the replica,
//! as native replication does, so a prepared XA transaction is a prepared
//! XA transaction on the replica too (see `applier::channel::xa`).
//! `XA COMMIT … ONE PHASE` is binlogged as an ordinary transaction and is
//! none of these.
//!
//! The xid is written the way the server writes it in the binlog
//! (`X'<gtrid hex>',X'<bqual hex>',<formatID>`), which [`Xid::parse_sql`]
//! reads back.

use std::fmt;

use crate::event::{Change, Transaction};

/// An XA transaction id (X/Open XA: format id, global transaction id and
/// branch qualifier, each of at most 64 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Xid {
    /// `formatID` (the server's default is 1).
    pub format_id: i64,
    /// Global transaction id bytes.
    pub gtrid: Vec<u8>,
    /// Branch qualifier bytes (may be empty).
    pub bqual: Vec<u8>,
}

impl Xid {
    /// The xid as SQL: `X'<gtrid hex>',X'<bqual hex>',<formatID>` (the
    /// form the server binlogs; an empty part is `X''`).
    pub fn to_sql(&self) -> String {
        format!(
            "X'{}',X'{}',{}",
            hex(&self.gtrid),
            hex(&self.bqual),
            self.format_id
        )
    }

    /// Parses the xid of an XA statement as the server binlogs it:
    /// `X'hex'[,X'hex'[,number]]` (surrounding spaces allowed). `None`
    /// when the text has another form.
    pub fn parse_sql(text: &str) -> Option<Xid> {
        let mut rest = text.trim();
        let mut parts: Vec<Vec<u8>> = Vec::new();
        while parts.len() < 2 {
            let Some(tail) = rest.strip_prefix("X'").or_else(|| rest.strip_prefix("x'")) else {
                break;
            };
            let end = tail.find('\'')?;
            parts.push(unhex(&tail[..end])?);
            rest = tail[end + 1..].trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None => break,
            }
        }
        let gtrid = parts.first()?.clone();
        let bqual = parts.get(1).cloned().unwrap_or_default();
        let format_id = if rest.is_empty() {
            1
        } else {
            rest.trim().parse().ok()?
        };
        Some(Xid {
            format_id,
            gtrid,
            bqual,
        })
    }
}

impl fmt::Display for Xid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_sql())
    }
}

/// What an XA transaction of the queue does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XaRole {
    /// `XA START`, changes, `XA END`, `XA PREPARE` of this xid.
    Prepare(Xid),
    /// `XA COMMIT <xid>` (two-phase: the transaction was prepared earlier).
    Commit(Xid),
    /// `XA ROLLBACK <xid>` of a prepared transaction.
    Rollback(Xid),
}

impl XaRole {
    /// The xid.
    pub fn xid(&self) -> &Xid {
        match self {
            XaRole::Prepare(x) | XaRole::Commit(x) | XaRole::Rollback(x) => x,
        }
    }
}

/// The XA statement `sql` is, with its xid: `("START" | "END" | "PREPARE"
/// | "COMMIT" | "ROLLBACK", xid)`. `None` for anything else, including
/// `XA COMMIT … ONE PHASE` and `XA RECOVER`.
pub fn xa_statement(sql: &[u8]) -> Option<(&'static str, Xid)> {
    let text = std::str::from_utf8(sql).ok()?.trim_start();
    let (first, rest) = split_word(text);
    if !first.eq_ignore_ascii_case("XA") {
        return None;
    }
    let (verb, rest) = split_word(rest);
    let verb = ["START", "BEGIN", "END", "PREPARE", "COMMIT", "ROLLBACK"]
        .into_iter()
        .find(|v| v.eq_ignore_ascii_case(verb))?;
    let verb = if verb == "BEGIN" { "START" } else { verb };
    Some((verb, Xid::parse_sql(rest)?))
}

/// Whether `sql` starts with the word `XA` (any XA statement).
pub fn is_xa_sql(sql: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&sql[..sql.len().min(8)]);
    split_word(text.trim_start()).0.eq_ignore_ascii_case("XA")
}

/// The XA role of a queued transaction: a prepare (first statement `XA
/// START`, last `XA PREPARE`), or a transaction of the single statement
/// `XA COMMIT <xid>` / `XA ROLLBACK <xid>`. `None` for every other
/// transaction (`XA COMMIT … ONE PHASE` included: it is ordinary).
pub fn xa_role(txn: &Transaction) -> Option<XaRole> {
    let mut statements = txn.changes.iter().filter_map(|c| match c {
        Change::Statement(s) => Some(&s.sql),
        _ => None,
    });
    let first = statements.next()?;
    let (verb, xid) = xa_statement(first)?;
    match verb {
        "START" => {
            let last = statements.next_back()?;
            match xa_statement(last) {
                Some(("PREPARE", x)) if x == xid => Some(XaRole::Prepare(xid)),
                _ => None,
            }
        }
        "COMMIT" if statements.next().is_none() => Some(XaRole::Commit(xid)),
        "ROLLBACK" if statements.next().is_none() => Some(XaRole::Rollback(xid)),
        _ => None,
    }
}

fn split_word(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    (&text[..end], text[end..].trim_start())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_sql_round_trip() {
        let xid = Xid::parse_sql("X'66782d6774726964',X'66782d627175616c',7").unwrap();
        assert_eq!(xid.gtrid, b"fx-gtrid");
        assert_eq!(xid.bqual, b"fx-bqual");
        assert_eq!(xid.format_id, 7);
        assert_eq!(xid.to_sql(), "X'66782d6774726964',X'66782d627175616c',7");
        let empty = Xid::parse_sql("X'7033',X'',1").unwrap();
        assert_eq!(
            (empty.gtrid.as_slice(), empty.bqual.as_slice()),
            (&b"p3"[..], &b""[..])
        );
        assert_eq!(empty.to_sql(), "X'7033',X'',1");
        assert_eq!(Xid::parse_sql("X'7033'").unwrap().format_id, 1);
        assert_eq!(Xid::parse_sql("'p3'"), None);
        assert_eq!(Xid::parse_sql("X'7'"), None);
        assert_eq!(Xid::parse_sql("X'70',X'71',x"), None);
    }

    #[test]
    fn statements() {
        assert_eq!(
            xa_statement(b"XA COMMIT X'7032',X'62',3").map(|(v, x)| (v, x.to_sql())),
            Some(("COMMIT", "X'7032',X'62',3".to_owned()))
        );
        assert_eq!(
            xa_statement(b"XA ROLLBACK X'7032',X'62',3").map(|(v, _)| v),
            Some("ROLLBACK")
        );
        assert_eq!(xa_statement(b"XA COMMIT X'7032',X'62',3 ONE PHASE"), None);
        assert_eq!(xa_statement(b"XA RECOVER"), None);
        assert_eq!(xa_statement(b"INSERT INTO xa VALUES (1)"), None);
        assert!(is_xa_sql(b"xa end X'00'"));
        assert!(!is_xa_sql(b"XAVIER"));
    }
}
