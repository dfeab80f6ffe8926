//! [`ApplyError`], a definite apply error naming what failed and where,
//! and the texts that go into it (the block it failed in, elided SQL, the
//! values a short UPDATE/DELETE matched on).

use std::fmt::Write as _;
use std::sync::Arc;

use mysql_async::Value as Param;

use crate::applier::sql::{PlannedStatement, TableShape};
use crate::event::{RowKind, Transaction};
use crate::mysql::quote_ident;
use crate::position::{BinlogPosition, ChannelId, Epoch, Seqno};

/// A definite apply error: what failed and where. Displays as `channel C
/// failed at seqno S (event FILE:POS, shard X): error CODE: MESSAGE; SQL:
/// …`, without `error CODE: ` when no server sent a code (a lost
/// connection); an error that names no transaction shows seqno 0 and an
/// empty event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyError {
    /// The channel.
    pub channel: ChannelId,
    /// Seqno of the failing transaction (or marker); `None` when the
    /// error names none.
    pub seqno: Option<Seqno>,
    /// Its binlog position (after it); `None` when the error names no
    /// transaction.
    pub event_id: Option<BinlogPosition>,
    /// Its shard.
    pub shard: String,
    /// The SQL that failed, values elided past 200 characters.
    pub sql: String,
    /// Server error code (0 when the error came from elsewhere).
    pub code: u16,
    /// The message.
    pub message: String,
}

impl ApplyError {
    /// An error of channel `channel` outside any transaction and
    /// statement (its runtime, its connection, its restart row).
    pub fn on_channel(channel: ChannelId, code: u16, message: String) -> ApplyError {
        ApplyError {
            channel,
            seqno: None,
            event_id: None,
            shard: String::new(),
            sql: String::new(),
            code,
            message,
        }
    }

    /// An error of channel `channel` at transaction `txn` (its seqno,
    /// binlog position and shard).
    pub fn at(
        channel: ChannelId,
        txn: &Transaction,
        sql: String,
        code: u16,
        message: String,
    ) -> ApplyError {
        ApplyError {
            channel,
            seqno: Some(txn.seqno),
            event_id: Some(txn.end_position.clone()),
            shard: txn.shard.clone(),
            sql,
            code,
            message,
        }
    }

    /// The seqno as status and logs show it: 0 when the error names no
    /// transaction.
    pub fn seqno_number(&self) -> u64 {
        self.seqno.map_or(0, Seqno::get)
    }

    /// The binlog position as status and logs show it (`file:pos`), empty
    /// when the error names no transaction.
    pub fn event_text(&self) -> String {
        self.event_id
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    }
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.seqno.is_none() {
            // No transaction failed (a session's set-up, a lost replica).
            return write!(
                f,
                "channel {} failed outside any transaction: {}{}; SQL: {}",
                self.channel,
                ServerCode(self.code),
                self.message,
                self.sql
            );
        }
        write!(
            f,
            "channel {} failed at seqno {} (event {}, shard {}): {}{}; SQL: {}",
            self.channel,
            self.seqno_number(),
            self.event_text(),
            self.shard,
            ServerCode(self.code),
            self.message,
            self.sql
        )
    }
}

impl std::error::Error for ApplyError {}

/// `error CODE: ` for a server's code, nothing for 0 (no server code).
pub struct ServerCode(pub u16);

impl std::fmt::Display for ServerCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            code => write!(f, "error {code}: "),
        }
    }
}

/// `error` placed at the block `todo` when it names no transaction (it
/// failed before one: `START TRANSACTION`, a session setting, a
/// reconnect): the block's first seqno, binlog position and shard, and its
/// seqno range in the message. `reconnect` is the last failed reconnect's
/// message, added when the error itself is only a closed connection.
pub fn at_block(
    mut error: ApplyError,
    todo: &[&(Arc<Transaction>, Epoch)],
    reconnect: Option<&str>,
) -> ApplyError {
    let (Some((first, _)), Some((last, _))) = (todo.first(), todo.last()) else {
        return error;
    };
    if error.event_id.is_none() {
        error.seqno = Some(first.seqno);
        error.event_id = Some(first.end_position.clone());
        error.shard = first.shard.clone();
        error.message = if first.seqno == last.seqno {
            format!("{} (block of seqno {})", error.message, first.seqno)
        } else {
            format!(
                "{} (block of seqnos {} to {}, last event {})",
                error.message, first.seqno, last.seqno, last.end_position
            )
        };
    }
    if let Some(reconnect) = reconnect.filter(|_| error.code == 0) {
        error.message = format!(
            "{}; the last reconnect to the replica failed: {reconnect}",
            error.message
        );
    }
    error
}

/// `sql` cut at 200 characters, with its length in bytes when cut.
pub fn elide(sql: &str) -> String {
    if sql.chars().count() > 200 {
        let cut: String = sql.chars().take(200).collect();
        format!("{cut}… ({} bytes)", sql.len())
    } else {
        sql.to_string()
    }
}

/// The message of an UPDATE/DELETE that matched fewer rows than the
/// master changed: the values it matched on, as shardrep bound them. It
/// does not claim that the replica diverged: the values are the binlog's
/// before image as shardrep decoded and completed it (padding, signedness
/// from the replica's definition), and a fault there looks the same.
pub fn divergence_message(
    statement: &PlannedStatement,
    shape: &TableShape,
    affected: u64,
) -> String {
    format!(
        "{} of {}.{} matched {affected} of {} rows: the replica has no row with {} \
         (the values shardrep bound from the binlog's before image). Either the replica \
         has diverged from the master, or these values differ from the master's row \
         (a decoding or binding fault of shardrep: report it with this seqno)",
        match statement.kind {
            RowKind::Update => "UPDATE",
            RowKind::Delete => "DELETE",
            RowKind::Insert => "INSERT",
        },
        quote_ident(&shape.schema),
        quote_ident(&shape.table),
        statement.expected_rows,
        describe_match(statement, shape)
    )
}

/// `key `id` = 2` (or `columns `a` = 1, `b` = NULL` for a table without a
/// primary key): the matched columns and their values as bound, bytes with
/// control characters (a BINARY value's zero bytes) in hex, each value cut
/// at 64 characters.
fn describe_match(statement: &PlannedStatement, shape: &TableShape) -> String {
    let values = &statement.params[statement.params.len() - statement.matched.len()..];
    let by_key = shape
        .primary_key
        .as_ref()
        .is_some_and(|k| *k == statement.matched);
    let pairs: Vec<String> = statement
        .matched
        .iter()
        .zip(values)
        .map(|(&c, v)| {
            let name = shape
                .columns
                .get(c as usize)
                .map_or_else(|| format!("@{}", c + 1), |n| quote_ident(n));
            let mut text = match v {
                // Binary bytes (zero bytes of a BINARY key, control
                // characters) in hex, exactly as bound.
                Param::Bytes(b) if b.iter().any(|&c| c < 0x20 || c == 0x7f) => {
                    let mut hex = String::with_capacity(2 + 2 * b.len());
                    hex.push_str("0x");
                    for c in b {
                        let _ = write!(hex, "{c:02X}");
                    }
                    hex
                }
                _ => v.as_sql(false),
            };
            if text.chars().count() > 64 {
                text = text.chars().take(64).collect::<String>() + "…";
            }
            format!("{name} = {text}")
        })
        .collect();
    format!(
        "{} {}",
        if by_key { "key" } else { "columns" },
        pairs.join(", ")
    )
}

/// The error of a channel that cannot connect to the replica.
pub fn connect_error(channel: ChannelId, e: &mysql_async::Error) -> ApplyError {
    let code = match e {
        mysql_async::Error::Server(s) => s.code,
        _ => 0,
    };
    ApplyError::on_channel(
        channel,
        code,
        format!(
            "cannot connect to the replica: {}",
            crate::mysql::ErrorText(e)
        ),
    )
}

#[cfg(test)]
mod block_error_tests {
    use super::*;

    fn txn(seqno: u64, pos: u64, shard: &str) -> (Arc<Transaction>, Epoch) {
        let at = |p| BinlogPosition::new("mariadb-bin.000002", p).unwrap();
        let t = Transaction {
            seqno: Seqno(seqno),
            server_id: 1,
            gtid: None,
            commit_id: None,
            start_position: at(pos - 10),
            end_position: at(pos),
            commit_timestamp: 0,
            shard: shard.into(),
            tables: Vec::new(),
            changes: Vec::new(),
            row_events: None,
            fragment: None,
        };
        (Arc::new(t), Epoch(0))
    }

    fn lost() -> ApplyError {
        ApplyError {
            sql: "START TRANSACTION".into(),
            ..ApplyError::on_channel(
                ChannelId::recorded(3),
                0,
                "Connection to the server is closed".into(),
            )
        }
    }

    #[test]
    fn an_error_before_any_transaction_names_the_block() {
        let (a, b) = (txn(40, 1200, "acme"), txn(42, 1500, "acme"));
        let e = at_block(lost(), &[&a, &b], Some("Connection refused (os error 111)"));
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 40 (event mariadb-bin.000002:1200, shard acme): \
             Connection to the server is closed (block of seqnos 40 to 42, last event \
             mariadb-bin.000002:1500); the last reconnect to the replica failed: Connection \
             refused (os error 111); SQL: START TRANSACTION"
        );
        let e = at_block(lost(), &[&a], None);
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 40 (event mariadb-bin.000002:1200, shard acme): \
             Connection to the server is closed (block of seqno 40); SQL: START TRANSACTION"
        );
    }

    /// An error that names no transaction (a session's set-up on a lost
    /// replica) does not read as a failure at seqno 0.
    #[test]
    fn an_error_outside_any_transaction_names_none() {
        let mut e = lost();
        e.sql = "SET SESSION sql_log_bin = 0".into();
        assert_eq!(
            e.to_string(),
            "channel 3 failed outside any transaction: Connection to the server is closed; \
             SQL: SET SESSION sql_log_bin = 0"
        );
    }

    #[test]
    fn a_server_error_keeps_its_transaction_and_code() {
        let a = txn(40, 1200, "acme");
        let mut e = lost();
        (e.seqno, e.event_id, e.shard) = (
            Some(Seqno(41)),
            Some("mariadb-bin.000002:1300".parse().unwrap()),
            "beta".into(),
        );
        (e.code, e.message) = (1927, "Connection was killed".into());
        let e = at_block(e, &[&a], Some("refused"));
        assert_eq!(
            e.to_string(),
            "channel 3 failed at seqno 41 (event mariadb-bin.000002:1300, shard beta): \
             error 1927: Connection was killed; SQL: START TRANSACTION"
        );
    }
}
