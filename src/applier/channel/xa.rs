//! Applying XA transactions ([`crate::xa`]): the channel replays the XA
//! protocol on the replica, as MariaDB's own replication does, so that a
//! transaction prepared on the master is a prepared XA transaction on the
//! replica until its outcome arrives.
//!
//! - **Prepare** (seqno S): on a connection of its own, `XA START <xid>`,
//!   the changes, `XA END <xid>`, `XA PREPARE <xid>`, then that connection
//!   disconnects (the prepared transaction survives it, MariaDB 10.5+, and
//!   any session may end it later). The channel's restart row then moves
//!   to S in a transaction of its own.
//! - **Outcome** (`XA COMMIT <xid>` / `XA ROLLBACK <xid>`, seqno S): run on
//!   the channel's connection outside any transaction (inside one the
//!   server refuses it, error 1400), then the restart row moves to S in a
//!   transaction of its own. The transaction may have been prepared by
//!   this service or, before a takeover, by native replication.
//!
//! Neither can commit with the restart row (a restart row written inside
//! the XA branch would only commit at `XA COMMIT`, and would hold the
//! row's lock until then). Exactly once comes from the DDL mark instead
//! (`ddl_seqno`, [`crate::catalog::restart_mark_ddl`]), committed before the
//! XA statement once the check below passes (never on a definite error,
//! so no later start reads a failed seqno as done), and from `XA
//! RECOVER`, which lists the xids prepared on the replica:
//! - prepare at S, xid listed: if S is marked (a stop or a retry came
//!   between the prepare and the restart row), it was prepared here and
//!   only the restart row moves; if not, the xid belongs to something else
//!   on the replica: a definite error (1440, XAER_DUPID).
//! - outcome at S, xid listed: run it.
//! - outcome at S, xid not listed: if S is marked, the outcome ran before
//!   the stop (the mark was committed before it, and the xid was prepared
//!   when every earlier seqno was applied), so only the restart row moves;
//!   if not, the replica never had this prepared transaction (or someone
//!   ended it by hand): a definite error (1397, XAER_NOTA) naming the xid,
//!   with `online --skip-seqno S` as the way past it.
//!
//! XA transactions are `#UNKNOWN` ([`crate::extractor::assemble::shard_of`]),
//! so they run alone behind a barrier, in the master's order.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::{Attempt, Channel};
use crate::applier::error::{elide, ApplyError};
use crate::applier::restart::RestartRow;
use crate::event::{Change, Transaction};
use crate::mysql::error_codes::{ER_XAER_DUPID, ER_XAER_NOTA};
use crate::position::Epoch;
use crate::xa::{is_xa_sql, XaRole, Xid};

/// Whether `XA RECOVER` on `conn` lists `xid` (prepared on the replica).
///
/// # Errors
/// The query failed.
pub(super) async fn is_prepared(conn: &mut Conn, xid: &Xid) -> Result<bool, mysql_async::Error> {
    let rows: Vec<(i64, u64, u64, Vec<u8>)> = conn.query("XA RECOVER").await?;
    Ok(rows.iter().any(|(format_id, gtrid_length, _, data)| {
        *format_id == xid.format_id
            && *gtrid_length as usize == xid.gtrid.len()
            && data.len() == xid.gtrid.len() + xid.bqual.len()
            && data.starts_with(&xid.gtrid)
            && data.ends_with(&xid.bqual)
    }))
}

impl Channel {
    /// One attempt at an XA transaction (module doc), alone in its block;
    /// `row` is the restart row that records it.
    pub(super) async fn try_xa(
        &mut self,
        txn: &Transaction,
        epoch: Epoch,
        role: &XaRole,
        row: &RestartRow,
    ) -> Attempt {
        let at = Some((txn, epoch));
        let seqno = txn.seqno;
        let replay = self.replay_ddl == Some(seqno);
        let xid = role.xid();
        let xa_recover = "XA RECOVER";
        let prepared = is_prepared(&mut self.conn, xid)
            .await
            .map_err(|e| (self.error_at(at, xa_recover, &e), Some(e)))?;
        // Marked only once the checks below pass, so that a definite
        // error leaves no mark that a later start would read as "done".
        let proceed =
            replay || (prepared == matches!(role, XaRole::Commit(_) | XaRole::Rollback(_)));
        if proceed && !replay {
            self.mark_started(txn, epoch).await?;
            // From here a retry of this seqno may find it done.
            self.replay_ddl = Some(seqno);
        }
        match role {
            XaRole::Prepare(_) if prepared => {
                if !replay {
                    return Err((
                        self.definite(
                            txn,
                            &format!("XA START {xid}"),
                            ER_XAER_DUPID,
                            &format!(
                                "XA transaction {xid} is already prepared on the replica (XA \
                                 RECOVER lists it) but this channel did not prepare it: the \
                                 replica has a prepared XA transaction of its own with the \
                                 master's xid"
                            ),
                        ),
                        None,
                    ));
                }
                tracing::warn!(
                    channel = self.settings.channel.get(),
                    seqno = seqno.get(),
                    xid = %xid,
                    "XA transaction was prepared before the last stop and its restart row was \
                     not committed; not preparing it again"
                );
            }
            XaRole::Prepare(_) => self.prepare_alone(txn, epoch, xid).await?,
            XaRole::Commit(_) | XaRole::Rollback(_) if prepared => {
                let verb = if matches!(role, XaRole::Commit(_)) {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                };
                self.set_origin(txn, epoch).await?;
                self.exec_text(&format!("XA {verb} {}", xid.to_sql()), at)
                    .await?;
            }
            XaRole::Commit(_) | XaRole::Rollback(_) => {
                if !replay {
                    let sql = match role {
                        XaRole::Commit(_) => format!("XA COMMIT {xid}"),
                        _ => format!("XA ROLLBACK {xid}"),
                    };
                    return Err((
                        self.definite(
                            txn,
                            &sql,
                            ER_XAER_NOTA,
                            &format!(
                                "the replica has no prepared XA transaction {xid} (XA RECOVER \
                                 does not list it): its XA PREPARE was never applied here, or \
                                 it was ended by hand; check the replica, then `online \
                                 --skip-seqno {}` if the outcome must not be applied",
                                seqno.get()
                            ),
                        ),
                        None,
                    ));
                }
                tracing::warn!(
                    channel = self.settings.channel.get(),
                    seqno = seqno.get(),
                    xid = %xid,
                    "XA outcome ran before the last stop (the xid is no longer prepared) and \
                     its restart row was not committed; recording it"
                );
            }
        }
        self.record_alone(txn, epoch, row).await?;
        self.replay_ddl = None;
        Ok(())
    }

    /// `XA START`, the changes, `XA END`, `XA PREPARE` on a new connection
    /// set up as the channel's, which then disconnects (leaving the
    /// transaction prepared, or rolling back one that is not).
    async fn prepare_alone(&mut self, txn: &Transaction, epoch: Epoch, xid: &Xid) -> Attempt {
        let at = Some((txn, epoch));
        let xa_conn = Conn::new(self.settings.opts.clone())
            .await
            .map_err(|e| (self.error_at(at, "(connect)", &e), Some(e)))?;
        let mut body = txn.clone();
        body.changes
            .retain(|c| !matches!(c, Change::Statement(s) if is_xa_sql(&s.sql)));
        let own = std::mem::replace(&mut self.conn, xa_conn);
        let own_origin = self.session_origin.take();
        // The FORMAT_DESCRIPTION the own session had (binlog method): the
        // XA session gets its own, and the own session's is restored.
        let own_format = self.binlog_format.take();
        let result = async {
            self.setup_session().await.map_err(|e| (e, None))?;
            self.set_origin(txn, epoch).await?;
            let xid = xid.to_sql();
            self.exec_text(&format!("XA START {xid}"), at).await?;
            self.apply_txn(&body, epoch).await?;
            self.flush_binlog(at).await?;
            self.exec_text(&format!("XA END {xid}"), at).await?;
            self.exec_text(&format!("XA PREPARE {xid}"), at).await
        }
        .await;
        let xa_conn = std::mem::replace(&mut self.conn, own);
        self.session_origin = own_origin;
        self.reset_binlog(true);
        self.binlog_format = own_format;
        let _ = xa_conn.disconnect().await;
        result
    }

    /// Writes the restart row `row` in a transaction of its own (not
    /// binlogged: it carries no data).
    async fn record_alone(&mut self, txn: &Transaction, epoch: Epoch, row: &RestartRow) -> Attempt {
        let at = Some((txn, epoch));
        self.write_row_alone(row, txn.commit_timestamp, at).await
    }

    fn definite(&self, txn: &Transaction, sql: &str, code: u16, message: &str) -> ApplyError {
        self.plain_error(txn, elide(sql), code, message.to_string())
    }
}
