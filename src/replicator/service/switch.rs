//! `source set`: switches the service to another master of the same
//! replication topology (a master failover, issue 20), by GTID.
//!
//! 1. The new master is checked as a takeover checks a master (`log_bin`,
//!    `binlog_format`, row image) and its `@@gtid_binlog_state` read (the
//!    last GTID of each domain and server id in its binlog).
//! 2. A running service goes offline cleanly, before the first queued
//!    transaction the new master lacks (`offline --at-seqno` the one
//!    before it), or after everything queued when it has them all.
//! 3. Offline, with every restart row at one seqno A (a clean stop): the
//!    GTID position applied up to A is compared with the new master's
//!    binlog state ([`missing_on`]). If the replica holds transactions the new
//!    master lacks (errant transactions: the old master's tail that never
//!    reached the promoted replica) the switch is refused naming them;
//!    nothing changes.
//! 4. The queued transactions after A are kept up to the last one the new
//!    master has (without a gap: from the first it lacks, the rest of the
//!    queue is discarded, recorded as skipped, never applied; the new
//!    master sends again those of them it has). Extraction resumes on the
//!    new master by GTID after the last kept one.
//! 5. One catalog transaction stores the new source, the resume point and
//!    the discarded seqnos ([`super::super::source::write`]): a crash
//!    before it leaves the old source, after it the new one, and a
//!    restart of `shardrep run` reads from the master it names. Before
//!    step 2 a mark of the switch under way is committed
//!    ([`super::super::source::mark_pending`]; that transaction removes
//!    it, and so does a refusal): while it is there no run starts, so a
//!    crash between the offline and the switch's transaction leaves the
//!    service offline (`OFFLINE:ERROR` naming the switch) instead of
//!    applying the old master's queue, which the new master may lack,
//!    until `source set` runs again.
//! 6. A service that was running goes online again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{block_on, failed, handback_position, Service, ServiceError};
use crate::applier::restart;
use crate::applier::skipped::{self, SkippedSeqno};
use crate::config::Secret;
use crate::mysql::error_codes::ER_ACCESS_DENIED_ERROR;
use crate::position::{BinlogPosition, GtidPos, Seqno, SeqnoRanges};
use crate::queue::{QueueOptions, TransactionQueue};
use crate::replicator::source::{
    self, missing_on, ranges_text, written_since, BinlogState, MissingRange, StoredSource,
    SwitchResume,
};
use crate::replicator::state::State;
use crate::replicator::switch_scan::scan_new_master;

/// How often a switch looks whether the service has gone offline.
const STOP_POLL: Duration = Duration::from_millis(50);

/// The arguments of `source set`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRequest {
    /// The new master's host name or address.
    pub host: String,
    /// Its TCP port.
    pub port: u16,
    /// The user to read its binlog as; default: the current source's.
    pub user: Option<String>,
    /// The server id to announce to it; default: the current source's.
    pub server_id: Option<u32>,
    /// How long a running service may take to go offline.
    pub timeout: Duration,
}

/// What a switch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSwitched {
    /// `host:port` of the source before.
    pub previous: String,
    /// `host:port` of the source now.
    pub source: String,
    /// The new master's `@@server_id`.
    pub source_server_id: u32,
    /// The new master's `@@gtid_binlog_pos` when checked.
    pub master_gtid_pos: GtidPos,
    /// The new master's `@@gtid_binlog_state` when checked.
    pub master_gtid_state: BinlogState,
    /// The seqno every channel had applied (`None`: nothing applied).
    pub applied_seqno: Option<Seqno>,
    /// The GTID position applied up to it.
    pub applied_gtid: GtidPos,
    /// The last queued seqno kept (applied later); `None` when none is
    /// queued after the applied one.
    pub kept_through: Option<Seqno>,
    /// Queued seqnos discarded (recorded as skipped), as ranges; empty
    /// when none.
    pub discarded: String,
    /// Where extraction resumes on the new master.
    pub resume_gtid: Option<GtidPos>,
    /// The first seqno the new master's transactions get.
    pub first_seqno: Option<Seqno>,
    /// The state afterwards.
    pub state: State,
    /// The new master, with that login, was already the service's source:
    /// nothing was done (a failover hook run twice). Then `previous` and
    /// `source` are the same, `applied_seqno` is the last applied, and
    /// `applied_gtid` is empty, `resume_gtid` and `first_seqno` `None`.
    pub unchanged: bool,
}

impl Service {
    /// `source set`: switches the service to the master `request` names
    /// (see the module documentation), from any state but a running
    /// transition; a running service is taken offline cleanly first and
    /// goes online again afterwards.
    ///
    /// # Errors
    /// [`ServiceError::Unsupported`] for an extractor-role service or a
    /// binlog-directory source; [`ServiceError::Failed`] when the new
    /// master cannot be read or refuses a check, the service does not go
    /// offline in time or fails on the way; [`ServiceError::IllegalState`]
    /// when the restart rows do not allow it (an unclean stop, a started
    /// DDL) or the replica holds transactions the new master lacks (the
    /// message names them). Nothing is switched then.
    pub fn set_source(&self, request: SourceRequest) -> Result<SourceSwitched, ServiceError> {
        self.needs_replica("source set")?;
        let current = self.effective_config();
        let Some(live) = current.source.live() else {
            return Err(ServiceError::Unsupported(
                "source set switches a live source (kind = \"live\"); this service reads a \
                 binlog directory"
                    .into(),
            ));
        };
        let limit = Duration::from_millis(live.connect_timeout_ms.max(1));
        let candidate = StoredSource {
            host: request.host.clone(),
            port: request.port,
            user: request.user.clone().unwrap_or_else(|| live.user.clone()),
            server_id: request.server_id.unwrap_or(live.server_id),
            previous: format!("{}:{}", live.host, live.port),
            resume: None,
            discarded: String::new(),
            switched_at: String::new(),
        };
        let is_current = |l: &crate::config::LiveSourceConfig| {
            l.host == candidate.host
                && l.port == candidate.port
                && l.user == candidate.user
                && l.server_id == candidate.server_id
        };
        if is_current(live) {
            // Run again after it succeeded: done, nothing to change (the
            // master is still checked: the hook learns it answers).
            let master = new_master(&candidate, &live.password, limit)?;
            // An interrupted switch to another master is given up: its
            // mark goes, and the service stays on this source.
            if self.unfinished_switch.lock().expect("switch").is_some() {
                self.pending(None)?;
                *self.unfinished_switch.lock().expect("switch") = None;
                tracing::warn!(
                    source = %candidate.address(),
                    "source set to the current source: the interrupted switch is given up"
                );
            }
            // A refused switch that stopped the service left it to the
            // next source set that succeeds to go online again: this one.
            if self.online_after_switch.swap(false, Ordering::AcqRel) && self.lock().run.is_none() {
                self.go_online(None, None).map_err(|e| {
                    failed(format!(
                        "source set: {} is the source already, but going online again \
                         failed: {e}; run shardrepctl online",
                        candidate.address()
                    ))
                })?;
            }
            return Ok(SourceSwitched {
                previous: candidate.address(),
                source: candidate.address(),
                source_server_id: master.server_id,
                master_gtid_pos: master.gtid_pos,
                master_gtid_state: master.state,
                applied_seqno: self.status().applied_last_seqno,
                applied_gtid: GtidPos::new(),
                kept_through: None,
                discarded: String::new(),
                resume_gtid: None,
                first_seqno: None,
                state: self.state(),
                unchanged: true,
            });
        }
        // One switch at a time; a second one to another master is told
        // which runs, one to the same master waits for it and answers as
        // a run again does (a hook fired twice).
        let address = candidate.address();
        let deadline = Instant::now() + request.timeout;
        loop {
            let mut switching = self.switching.lock().expect("switching");
            match &*switching {
                None => {
                    *switching = Some(address);
                    break;
                }
                Some(other) if *other != address || Instant::now() >= deadline => {
                    return Err(ServiceError::illegal_state(format!(
                        "a source set to {other} is under way: wait for its answer (status \
                         shows sourceHost and sourcePort once it is done)"
                    )));
                }
                Some(_) => {
                    drop(switching);
                    std::thread::sleep(STOP_POLL);
                }
            }
        }
        if self
            .effective_config()
            .source
            .live()
            .is_some_and(is_current)
        {
            // The switch waited for made it the source meanwhile.
            *self.switching.lock().expect("switching") = None;
            return self.set_source(request);
        }
        let done = self.set_source_alone(candidate, &live.password, limit, request.timeout);
        *self.switching.lock().expect("switching") = None;
        done
    }

    /// The new master `candidate` as read before anything stops, refused
    /// when it is the replica itself or when the server id to announce is
    /// the new master's or the replica's.
    ///
    /// # Errors
    /// The new master cannot be read or fails a takeover's master checks
    /// ([`new_master`]), or [`ServiceError::Invalid`] for the two refusals.
    fn check_candidate(
        &self,
        candidate: &StoredSource,
        password: &Secret,
        limit: Duration,
    ) -> Result<NewMaster, ServiceError> {
        let master = new_master(candidate, password, limit)?;
        let replica_id = self.replica_server_id();
        if replica_id == Some(master.server_id) {
            return Err(ServiceError::Invalid(format!(
                "source set: {} is the replica this service applies to (server_id {}), not a \
                 master of it; nothing is done",
                candidate.address(),
                master.server_id
            )));
        }
        // The id announced to the new master (--server-id, else the
        // source's server_id) must be no server's of the topology: MariaDB
        // drops a replica connection whose id another one uses.
        let whose = if candidate.server_id == master.server_id {
            Some("the new master's own")
        } else if replica_id == Some(candidate.server_id) {
            Some("the replica's (this service applies to it)")
        } else {
            None
        };
        if let Some(whose) = whose {
            return Err(ServiceError::Invalid(format!(
                "source set: the server id shardrep would announce to {} ({}: --server-id, else \
                 the source's server_id) is {whose} server_id; give --server-id with an id no \
                 server of the topology uses. Nothing is done",
                candidate.address(),
                candidate.server_id,
            )));
        }
        Ok(master)
    }

    /// [`Service::set_source`] to `candidate`, another master (or
    /// login), the only switch under way; `limit` bounds each read of the
    /// new master, `timeout` the wait for the service to go offline.
    fn set_source_alone(
        &self,
        candidate: StoredSource,
        password: &Secret,
        limit: Duration,
        timeout: Duration,
    ) -> Result<SourceSwitched, ServiceError> {
        let address = candidate.address();
        let master = match self.check_candidate(&candidate, password, limit) {
            Ok(master) => master,
            Err(e) => {
                tracing::warn!(to = %address, error = %e, "source set refused; nothing is done");
                return Err(e);
            }
        };
        // Until the switch is stored (or refused), no run starts: a crash
        // in between never resumes applying the old master's queue.
        self.pending(Some(&candidate))?;
        let was_running = self.lock().run.is_some();
        let online_again = self.online_after_switch.swap(false, Ordering::AcqRel) || was_running;
        let switched = if was_running {
            // The new master's state again once the service stopped: the
            // first read may predate transactions the service applied
            // while it went offline (a planned switch under load).
            self.stop_for_switch(&master.state, timeout)
                .and_then(|()| new_master(&candidate, password, limit))
        } else {
            Ok(master)
        }
        .and_then(|master| self.switch_offline(candidate, master, timeout));
        let mut done = match switched {
            Ok(done) => {
                *self.unfinished_switch.lock().expect("switch") = None;
                done
            }
            Err(e) => {
                // Warned: a refusal may have taken a running service
                // offline.
                tracing::warn!(to = %address, error = %e, "source set refused or failed");
                if let Err(cleared) = self.pending(None) {
                    tracing::warn!(error = %cleared, "source set: cannot remove the mark of the switch");
                }
                if online_again && self.lock().run.is_none() {
                    self.online_after_switch.store(true, Ordering::Release);
                }
                return Err(e);
            }
        };
        if online_again {
            done.state = self.go_online(None, None).map_err(|e| {
                failed(format!(
                    "source set: switched to {}, but going online again failed: {e}; run \
                     shardrepctl online",
                    done.source
                ))
            })?;
        }
        Ok(done)
    }

    /// Finishes a switch that a stop of shardrep interrupted (the
    /// catalog's mark of a switch under way, [`source::mark_pending`]):
    /// brings every channel to one seqno when they are not (a run that
    /// applies nothing beyond what they committed), then runs the switch
    /// again to the master the mark names ([`Service::set_source`]). Called
    /// by `shardrep run` before it goes online; does nothing without a
    /// mark. Returns the switch when one was finished.
    ///
    /// # Errors
    /// As [`Service::set_source`]; [`ServiceError::Failed`] when the run
    /// that brings the channels to one seqno fails. (A catalog that cannot
    /// be read is no error here: the run that follows reports the
    /// replica.)
    pub fn finish_interrupted_switch(
        &self,
        timeout: Duration,
    ) -> Result<Option<SourceSwitched>, ServiceError> {
        // A replica that cannot be read now is the run's to report (a
        // run also applies nothing beyond the channels with a mark).
        let Ok(Ok((_, Some(pending)))) = block_on(source::read_both(&self.config)) else {
            return Ok(None);
        };
        let what = format!(
            "to {} (source set --host {} --port {}, started {} UTC) that a stop of shardrep \
             interrupted",
            pending.address(),
            pending.host,
            pending.port,
            pending.started_at
        );
        // Under way, for status (the switch itself goes through
        // `switching` as a source set does).
        *self.finishing_switch.lock().expect("finishing") = Some(pending.address());
        let finished = self.finish_switch_to(pending, timeout);
        *self.finishing_switch.lock().expect("finishing") = None;
        if let Err(e) = &finished {
            // Shown in status; online refused until a source set succeeds
            // (which then goes online by itself).
            *self.unfinished_switch.lock().expect("switch") =
                Some(format!("{what} did not finish at the restart: {e}"));
            self.online_after_switch.store(true, Ordering::Release);
        }
        finished.map(Some)
    }

    /// [`Service::finish_interrupted_switch`] once the mark is read.
    fn finish_switch_to(
        &self,
        pending: source::PendingSwitch,
        timeout: Duration,
    ) -> Result<SourceSwitched, ServiceError> {
        tracing::warn!(
            to = %pending.address(),
            started_at = %pending.started_at,
            "a switch of the source did not finish: finishing it"
        );
        let rows = self.lock().last_rows.clone();
        let committed = rows.iter().filter_map(|r| r.seqno).max();
        let at_one_seqno =
            rows.iter().all(|r| r.seqno == committed) && restart::all_done_at(&rows).is_some();
        if let (false, Some(committed)) = (at_one_seqno, committed) {
            // The run stops at the committed seqno (a pending switch
            // clamps it there in any case).
            self.go_online(None, Some(committed.get()))?;
            self.wait_until_stopped();
            let state = self.state();
            if state != State::OfflineNormal {
                return Err(failed(format!(
                    "source set: finishing the switch to {}: the run that brings every channel \
                     to seqno {committed} ended {state}",
                    pending.address()
                )));
            }
        }
        self.set_source(SourceRequest {
            host: pending.host,
            port: pending.port,
            user: Some(pending.user),
            server_id: Some(pending.server_id),
            timeout,
        })
    }

    /// The replica's `@@server_id`; `None` when it cannot be read (the
    /// steps after report the replica).
    fn replica_server_id(&self) -> Option<u32> {
        block_on(async {
            let mut conn = mysql_async::Conn::new(super::super::replica_opts(&self.config))
                .await
                .ok()?;
            let id: Option<u32> =
                mysql_async::prelude::Queryable::query_first(&mut conn, "SELECT @@server_id")
                    .await
                    .ok()
                    .flatten();
            let _ = conn.disconnect().await;
            id
        })
        .ok()
        .flatten()
    }

    /// Marks a switch to `to` under way in the catalog, or removes the
    /// mark (`None`).
    fn pending(&self, to: Option<&StoredSource>) -> Result<(), ServiceError> {
        let catalog = self.config.catalog_schema();
        block_on(async {
            let mut conn = mysql_async::Conn::new(super::super::replica_opts(&self.config))
                .await
                .map_err(|e| self.replica_conn_error(e))?;
            let done = match to {
                Some(to) => source::mark_pending(&mut conn, &catalog, to).await,
                None => source::clear_pending(&mut conn, &catalog).await,
            };
            let _ = conn.disconnect().await;
            done.map_err(|e| failed(format!("source set: {e}")))
        })?
    }

    /// Takes the running service offline cleanly: before the first queued
    /// transaction `master_gtid` lacks, or after the last queued.
    fn stop_for_switch(
        &self,
        master_state: &BinlogState,
        timeout: Duration,
    ) -> Result<(), ServiceError> {
        let lacking = self.running_queue().and_then(|queue| {
            let first = self
                .status()
                .applied_last_seqno
                .map_or(queue.min_seqno(), |a| Some(a.next()))?;
            let last = queue.max_seqno()?;
            (first.get()..=last.get()).find(|&s| {
                queue
                    .get(Seqno(s))
                    .ok()
                    .flatten()
                    .is_some_and(|t| !t.gtid.is_some_and(|g| master_state.holds(&g)))
            })
        });
        let at = lacking.and_then(|k| k.checked_sub(1));
        let stopping = match at {
            Some(at) => self.go_offline(false, Some(at)).or_else(|e| {
                tracing::info!(
                    error = %e,
                    "source set: cannot stop before the transactions the new master lacks"
                );
                self.go_offline(false, None)
            }),
            None => self.go_offline(false, None),
        };
        stopping?;
        tracing::info!(at_seqno = at, "source set: going offline for the switch");
        let deadline = Instant::now() + timeout;
        while self.lock().run.is_some() {
            if Instant::now() >= deadline {
                return Err(failed(format!(
                    "source set: the service did not go offline within {} s (it is {}); \
                     nothing is switched. Wait for OFFLINE:NORMAL and run source set again",
                    timeout.as_secs(),
                    self.state()
                )));
            }
            std::thread::sleep(STOP_POLL);
        }
        let inner = self.lock();
        if inner.machine.state() == State::OfflineError {
            let message = inner
                .machine
                .pending_error()
                .map(|p| p.message.clone())
                .unwrap_or_default();
            return Err(failed(format!(
                "source set: the service stopped OFFLINE:ERROR on its way offline: {message}; \
                 nothing is switched"
            )));
        }
        Ok(())
    }

    /// The switch itself, on a service that is offline with no run.
    fn switch_offline(
        &self,
        mut candidate: StoredSource,
        master: NewMaster,
        limit: Duration,
    ) -> Result<SourceSwitched, ServiceError> {
        let mut inner = self.lock();
        let state = inner.machine.state();
        if !state.is_offline() || inner.run.is_some() {
            return Err(ServiceError::illegal_state(format!(
                "source set needs the service offline or online; it is {state}: try again"
            )));
        }
        if let Some(reason) = &inner.unclean {
            return Err(ServiceError::illegal_state(format!(
                "{reason}: go online, then offline without --immediate, then source set \
                 (or source set while online)"
            )));
        }
        let catalog = self.config.catalog_schema();
        let config = self.config.clone();
        let name = self.config.service.name.clone();
        let new_address = candidate.address();
        let done = block_on(async {
            let mut conn = mysql_async::Conn::new(super::super::replica_opts(&config))
                .await
                .map_err(|e| self.replica_conn_error(e))?;
            let rows = super::restart_rows_at_rest(&mut conn, &catalog, "source set").await?;
            let mut done = SourceSwitched {
                previous: candidate.previous.clone(),
                source: new_address.clone(),
                source_server_id: master.server_id,
                master_gtid_pos: master.gtid_pos.clone(),
                master_gtid_state: master.state.clone(),
                applied_seqno: None,
                applied_gtid: GtidPos::new(),
                kept_through: None,
                discarded: String::new(),
                resume_gtid: None,
                first_seqno: None,
                state,
                unchanged: false,
            };
            let mut discard = Vec::new();
            if !rows.is_empty() {
                // The condition of a handback: every channel at one seqno.
                let (applied, applied_at, gtid) = handback_position(&rows, &name, None, false)
                    .map_err(|e| {
                        ServiceError::illegal_state(format!(
                            "source set needs every channel's restart row at one seqno (as a \
                         handback does; then run source set where it says hand back): {e}"
                        ))
                    })?;
                let applied_gtid = gtid.ok_or_else(|| {
                    ServiceError::illegal_state(
                        "the restart rows hold no GTID position (a master without GTIDs): a \
                         switch resumes on the new master by GTID",
                    )
                })?;
                let missing = missing_on(
                    &applied_gtid,
                    &master.state.with_replicated(&master.slave_pos),
                );
                if !missing.is_empty() {
                    return Err(errant_refusal(
                        &missing,
                        &Applied {
                            gtid: &applied_gtid,
                            at: &applied_at,
                        },
                        &master,
                        &new_address,
                        &name,
                    ));
                }
                done.applied_seqno = applied;
                done.applied_gtid = applied_gtid.clone();
                let queue = TransactionQueue::open(QueueOptions::from_config(&config.queue))
                    .map_err(|e| failed(format!("source set: the queue: {e}")))?;
                let plan = plan_queue(&queue, applied, &applied_gtid, &master.state)?;
                queue
                    .close()
                    .map_err(|e| failed(format!("source set: closing the queue: {e}")))?;
                // The new master read as the switch would resume there.
                let endpoint = candidate.apply(&config).source.endpoint;
                scan_new_master(&endpoint, &plan.resume_gtid, &master.slave_pos, limit)
                    .await
                    .map_err(|refusal| {
                        let reseed = if refusal.needs_reseed() {
                            format!(
                                ". Re-seed this replica from the new master, then \
                                 `shardrepctl reset --confirm {name}`"
                            )
                        } else {
                            String::new()
                        };
                        ServiceError::illegal_state(format!(
                            "source set refused: the new master {new_address}: \
                             {refusal}{reseed}. Nothing is switched. {LEFT_OFFLINE}"
                        ))
                    })?;
                done.kept_through = plan.kept_through;
                done.resume_gtid = Some(plan.resume_gtid.clone());
                done.first_seqno = Some(plan.first_seqno);
                let mut ranges = SeqnoRanges::default();
                for s in &plan.discard {
                    ranges.insert(s.seqno);
                }
                done.discarded = ranges.to_string();
                candidate.discarded = done.discarded.clone();
                candidate.resume = Some(SwitchResume {
                    first_seqno: plan.first_seqno,
                    gtid: plan.resume_gtid,
                });
                discard = plan.discard;
            }
            source::write(&mut conn, &catalog, &candidate, &discard)
                .await
                .map_err(|e| failed(format!("source set: {e}")))?;
            let skips = skipped::read(&mut conn, &catalog).await.ok();
            let _ = conn.disconnect().await;
            Ok::<_, ServiceError>((done, skips))
        })?;
        let (done, skips) = done?;
        if let Some(skips) = skips {
            inner.skipped = skips;
        }
        *self.source.lock().expect("source") = Some(candidate);
        tracing::warn!(
            previous = %done.previous,
            source = %done.source,
            applied_seqno = done.applied_seqno.map(Seqno::get),
            applied_gtid = %done.applied_gtid,
            master_gtid_pos = %done.master_gtid_pos,
            kept_through = done.kept_through.map(Seqno::get),
            discarded = %done.discarded,
            resume_gtid = %done.resume_gtid.as_ref().map(ToString::to_string).unwrap_or_default(),
            "source switched"
        );
        Ok(done)
    }
}

/// What a refusal of a switch says of a running service it stopped.
const LEFT_OFFLINE: &str = "A service that was ONLINE is now OFFLINE:NORMAL on the old source \
     (`shardrepctl online` resumes there; a later source set that succeeds takes it online \
     again)";

/// Where the replica stands at a refused switch: the GTID position it
/// applied, and the binlog position (of the old master) after it.
struct Applied<'a> {
    gtid: &'a GtidPos,
    at: &'a BinlogPosition,
}

/// The refusal of a switch to a new master (`address`, read as `master`)
/// that lacks the `missing` transactions this replica applied: names them,
/// and the way out. While the new master took no writes of its own since
/// the streams parted ([`written_since`]), replaying them there is one,
/// with the exact `--start-position` (every domain: mariadb-binlog reads a
/// domain it is not given from its start); once it did, or when it holds
/// nothing of the domain at all (not a server of this topology), only a
/// re-seed is.
fn errant_refusal(
    missing: &[MissingRange],
    applied: &Applied<'_>,
    master: &NewMaster,
    address: &str,
    service: &str,
) -> ServiceError {
    let count: u64 = missing.iter().map(MissingRange::count).sum();
    let upper = missing.iter().any(|m| m.others_within || m.server_absent);
    let count_text = if upper {
        format!("up to {count}")
    } else {
        count.to_string()
    };
    let state = &master.state;
    let state_text = if state.is_empty() {
        "empty".to_string()
    } else {
        state.to_string()
    };
    // The slave position only where it says more than the binlog does (a
    // server seeded from a dump).
    let replicated = state.with_replicated(&master.slave_pos);
    let slave_text = if replicated == *state {
        String::new()
    } else {
        format!(", its gtid_slave_pos {}", master.slave_pos)
    };
    let stranger = missing.iter().find(|m| m.server_absent);
    let bound_text = if let Some(m) = stranger {
        format!(
            " (at most: the new master holds none of server {}'s transactions in domain {}, \
             so which servers wrote those below the last is not known)",
            m.server_id, m.domain
        )
    } else if upper {
        " (at most: the new master's binlog has transactions of other servers inside that \
         range, which this replica may have applied too)"
            .to_string()
    } else {
        String::new()
    };
    let reseed = format!(
        "re-seed this replica from the new master and `shardrepctl reset --confirm {service}`"
    );
    let written = written_since(missing, state);
    // A server with none of the writer's transactions: a real promoted
    // replica lacks only the old master's tail, so say what else it may be.
    let caution = match stranger {
        Some(m) => format!(
            "The new master holds no transaction of server {} (which wrote the last one this \
             replica applied in domain {}): it may not be a server of this replication topology \
             (check --host and --port; then replaying cannot help: {reseed}). If it is a replica \
             that none of server {}'s transactions reached: ",
            m.server_id, m.domain, m.server_id
        ),
        None => String::new(),
    };
    let way_out = if let Some(absent) = missing.iter().find(|m| m.domain_absent) {
        format!(
            "The new master holds no transaction of domain {} at all (neither in its binlog \
             nor as a replica): it is not a server of this replication topology (check --host \
             and --port), or its binlog and GTID state were reset. Replaying cannot help: \
             {reseed}",
            absent.domain
        )
    } else if written.is_empty() {
        // Every domain the replica applied, at the new master's last
        // before each missing range; a range from a domain's first
        // transaction leaves its domain out (read from the start).
        let mut start = GtidPos::new();
        for g in applied.gtid.iter() {
            match missing.iter().find(|m| m.domain == g.domain_id) {
                None => {
                    start.update(*g);
                }
                Some(m) => {
                    if let Some(after) = m.after {
                        start.update(after);
                    }
                }
            }
        }
        let option = if start.is_empty() {
            String::new()
        } else {
            format!("--start-position={start} ")
        };
        format!(
            "Either apply them to the new master before it takes writes, from the old \
             master's binlog files that hold them (mariadb-binlog {option}FILE... | mariadb -h \
             <new master>; FILE: the old master's binlog files up to {}, the file of the last \
             transaction this replica applied; --start-position starts after the GTID it names \
             in each domain, and a domain it does not name is read from its start), then \
             source set again; or {reseed}",
            applied.at.file()
        )
    } else {
        let named: Vec<String> = written.iter().map(ToString::to_string).collect();
        format!(
            "The new master has taken writes of its own since ({}): replayed there now, they \
             would be logged after those writes, which a resume after them would skip. So {reseed}",
            named.join(", ")
        )
    };
    ServiceError::illegal_state(format!(
        "source set refused: the replica applied {count_text} transaction(s) that the new \
         master {address} lacks: {}{bound_text} (the replica is at {}, the new master's \
         gtid_binlog_state is {state_text}{slave_text}). Nothing is switched. They are the old \
         master's transactions that never reached the promoted replica (errant on this \
         replica). {LEFT_OFFLINE}. {caution}{way_out}",
        ranges_text(missing),
        applied.gtid,
    ))
}

/// What a switch reads of the new master.
struct NewMaster {
    /// `@@server_id`.
    server_id: u32,
    /// `@@gtid_binlog_pos`.
    gtid_pos: GtidPos,
    /// `@@gtid_binlog_state`.
    state: BinlogState,
    /// `@@gtid_slave_pos`: where it stopped replicating (empty: never).
    slave_pos: GtidPos,
}

/// The new master's GTID state and server id, after the checks of a
/// takeover's master ([`crate::replica::check_master`]).
fn new_master(
    candidate: &StoredSource,
    password: &Secret,
    limit: Duration,
) -> Result<NewMaster, ServiceError> {
    block_on(async {
        tokio::time::timeout(limit, read_new_master(candidate, password))
            .await
            .unwrap_or_else(|_| {
                Err(failed(format!(
                    "source set: the new master {}: no MariaDB answer within {} ms (the \
                     source's connect_timeout_ms): is a MariaDB server listening there?",
                    candidate.address(),
                    limit.as_millis()
                )))
            })
    })?
}

/// [`new_master`]'s queries, unbounded.
async fn read_new_master(
    candidate: &StoredSource,
    password: &Secret,
) -> Result<NewMaster, ServiceError> {
    {
        let what = |e: crate::replica::ReplicaError| {
            let denied = matches!(
                e,
                crate::replica::ReplicaError::Connect {
                    code: Some(ER_ACCESS_DENIED_ERROR),
                    ..
                }
            );
            let text = e.to_string();
            // Most replica errors name the server already.
            let named = if text.contains(&candidate.address()) {
                String::new()
            } else {
                format!(" {}", candidate.address())
            };
            // A server that answers, but not as MariaDB (an ssh banner
            // read as a packet header).
            // (Not when the connection itself failed: refused, or a name
            // that does not resolve; no byte was read then.)
            let unreached = text.contains("os error") || text.contains("lookup address");
            let hint = if !unreached
                && (text.contains("max_allowed_packet") || text.contains("Input/output"))
            {
                " (its first bytes are no MariaDB handshake: is a MariaDB server listening there?)"
                    .to_string()
            } else if denied {
                // The service's one password.
                format!(
                    " (shardrep logs in to the new master as {} with the service's password: \
                     [source] password, password_file or password_env; where that user has \
                     another password there, edit the configuration and restart shardrep, then \
                     source set again)",
                    candidate.user
                )
            } else {
                String::new()
            };
            failed(format!("source set: the new master{named}: {text}{hint}"))
        };
        let mut conn = crate::replica::connect(
            &candidate.host,
            candidate.port,
            None,
            &candidate.user,
            password,
        )
        .await
        .map_err(what)?;
        let facts = crate::replica::check_master(&mut conn)
            .await
            .map_err(what)?;
        // One statement: the position and the state of one moment.
        let read: Option<(Option<String>, Option<String>, Option<String>)> =
            mysql_async::prelude::Queryable::query_first(
                &mut conn,
                "SELECT @@GLOBAL.gtid_binlog_state, @@GLOBAL.gtid_binlog_pos, \
                 @@GLOBAL.gtid_slave_pos",
            )
            .await
            .map_err(|e| {
                failed(format!(
                    "source set: the new master {}: reading its GTID state: {}",
                    candidate.address(),
                    crate::mysql::ErrorText(&e)
                ))
            })?;
        let (state, pos, slave_pos) = read.unwrap_or_default();
        // Each variable parsed, an error naming it and its text.
        fn parse<T: std::str::FromStr<Err: std::fmt::Display>>(
            candidate: &StoredSource,
            variable: &str,
            text: Option<String>,
        ) -> Result<T, ServiceError> {
            let text = text.unwrap_or_default();
            text.parse().map_err(|e| {
                failed(format!(
                    "source set: the new master {}: {variable} {text:?}: {e}",
                    candidate.address()
                ))
            })
        }
        let gtid_pos: GtidPos = parse(candidate, "gtid_binlog_pos", pos)?;
        let slave_pos: GtidPos = parse(candidate, "gtid_slave_pos", slave_pos)?;
        let state: BinlogState = parse(candidate, "gtid_binlog_state", state)?;
        let _ = conn.disconnect().await;
        Ok(NewMaster {
            server_id: facts.server_id,
            gtid_pos,
            state,
            slave_pos,
        })
    }
}

/// What happens to the queue at a switch.
struct QueuePlan {
    /// Queued, not applied, and on the new master: applied later.
    kept_through: Option<Seqno>,
    /// From the first queued transaction the new master lacks to the end
    /// of the queue: recorded as skipped.
    discard: Vec<SkippedSeqno>,
    /// The GTID position after the last kept transaction.
    resume_gtid: GtidPos,
    /// The queue's next seqno (the new master's first transaction).
    first_seqno: Seqno,
}

/// Reads the queue after `applied` (whose GTID position is
/// `applied_gtid`): keeps the transactions `master` holds, up to the
/// first it lacks, and discards from there to the end.
fn plan_queue(
    queue: &TransactionQueue,
    applied: Option<Seqno>,
    applied_gtid: &GtidPos,
    master: &BinlogState,
) -> Result<QueuePlan, ServiceError> {
    let first_seqno = queue.next_seqno();
    let mut plan = QueuePlan {
        kept_through: None,
        discard: Vec::new(),
        resume_gtid: applied_gtid.clone(),
        first_seqno,
    };
    let start = match applied {
        Some(a) => a.next(),
        None => queue.min_seqno().unwrap_or(first_seqno),
    };
    if start < first_seqno {
        let mut reader = queue.reader_from(start).map_err(|e| {
            failed(format!(
                "source set: reading the queue from seqno {start}: {e}"
            ))
        })?;
        let mut lacking = false;
        // The fragments of a large transaction are kept only with its
        // last one: the extraction on the new master resumes after a
        // whole transaction, never inside one.
        let mut fragments: Vec<SkippedSeqno> = Vec::new();
        while let Some((txn, progress)) = reader
            .try_next_with_progress()
            .map_err(|e| failed(format!("source set: reading the queue: {e}")))?
        {
            let skipped = SkippedSeqno {
                seqno: txn.seqno,
                event_id: txn.end_position.to_string(),
                shard_id: txn.shard.clone(),
            };
            if !lacking && txn.gtid.is_some_and(|g| master.holds(&g)) {
                if txn.continues() {
                    fragments.push(skipped);
                    continue;
                }
                fragments.clear();
                plan.kept_through = Some(txn.seqno);
                plan.resume_gtid = progress.gtid_position;
                continue;
            }
            lacking = true;
            plan.discard.append(&mut fragments);
            plan.discard.push(skipped);
        }
        plan.discard.append(&mut fragments);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Transaction;
    use crate::position::{BinlogPosition, Epoch, Gtid};
    use crate::queue::ExtractorProgress;

    /// A queue in a fresh directory holding seqnos 0..=5, whose GTIDs are
    /// 0-1-1000.. except seqno 5's, 1-7-3 (another domain); each
    /// transaction's progress holds the GTID position after it, every
    /// domain.
    fn queue(label: &str) -> (TransactionQueue, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "shardrep-switch-unit-{label}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let queue = TransactionQueue::open(QueueOptions::new(&dir)).unwrap();
        let mut pos: GtidPos = "1-7-2".parse().unwrap();
        for s in 0..=5u64 {
            let gtid = if s == 5 {
                Gtid::new(1, 7, 3)
            } else {
                Gtid::new(0, 1, 1000 + s)
            };
            pos.update(gtid);
            let txn = Transaction {
                seqno: Seqno(s),
                server_id: gtid.server_id,
                gtid: Some(gtid),
                commit_id: None,
                start_position: BinlogPosition::new("mariadb-bin.000001", 4 + s * 100).unwrap(),
                end_position: BinlogPosition::new("mariadb-bin.000001", 104 + s * 100).unwrap(),
                commit_timestamp: 1_700_000_000,
                shard: format!("db{s}"),
                tables: vec![],
                changes: vec![],
                row_events: None,
                fragment: None,
            };
            let progress = ExtractorProgress {
                seqno: Seqno(s),
                epoch: Epoch(0),
                position: txn.end_position.clone(),
                gtid_position: pos.clone(),
            };
            queue.append(&txn, &progress).unwrap();
        }
        (queue, dir)
    }

    fn state(text: &str) -> BinlogState {
        text.parse().unwrap()
    }

    #[test]
    fn keeps_what_the_new_master_holds_and_discards_from_the_first_it_lacks() {
        let (queue, dir) = queue("lacks");
        let applied: GtidPos = "0-1-1001,1-7-2".parse().unwrap();
        // The new master has 0-1-1002 and 0-1-1003 (seqnos 2, 3), not
        // 0-1-1004 (seqno 4); it has 1-7-3 (seqno 5), which comes after
        // the gap and is discarded too (the new master sends it again).
        let plan = plan_queue(
            &queue,
            Some(Seqno(1)),
            &applied,
            &state("0-1-1003,0-2-1010,1-7-5"),
        )
        .unwrap();
        assert_eq!(plan.kept_through, Some(Seqno(3)));
        let discarded: Vec<(u64, String, String)> = plan
            .discard
            .iter()
            .map(|d| (d.seqno.get(), d.event_id.clone(), d.shard_id.clone()))
            .collect();
        assert_eq!(
            discarded,
            [
                (4, "mariadb-bin.000001:504".to_string(), "db4".to_string()),
                (5, "mariadb-bin.000001:604".to_string(), "db5".to_string())
            ]
        );
        assert_eq!(plan.resume_gtid.to_string(), "0-1-1003,1-7-2");
        assert_eq!(plan.first_seqno, Seqno(6));
        queue.close().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    // The queue ends inside a large transaction (seqnos 2 and 3, its first
    // two fragments; the rest not extracted yet): its fragments are
    // discarded though the new master holds its GTID, and the extraction
    // resumes before it, so that the new master sends it again whole.
    #[test]
    fn the_first_fragments_of_a_large_transaction_are_not_kept_without_the_last() {
        let dir = std::env::temp_dir().join(format!(
            "shardrep-switch-unit-fragments-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let queue = TransactionQueue::open(QueueOptions::new(&dir)).unwrap();
        let mut pos = GtidPos::new();
        for (s, seq, fragment) in [
            (0u64, 1000u64, None),
            (1, 1001, None),
            (2, 1002, Some(0)),
            (3, 1002, Some(1)),
        ] {
            let gtid = Gtid::new(0, 1, seq);
            let txn = Transaction {
                seqno: Seqno(s),
                server_id: 1,
                gtid: Some(gtid),
                commit_id: None,
                start_position: BinlogPosition::new("mariadb-bin.000001", 4 + s * 100).unwrap(),
                end_position: BinlogPosition::new("mariadb-bin.000001", 104 + s * 100).unwrap(),
                commit_timestamp: 1_700_000_000,
                shard: "db".into(),
                tables: vec![],
                changes: vec![],
                row_events: None,
                fragment: fragment.map(|index| crate::event::Fragment { index, last: false }),
            };
            if fragment.is_none() {
                pos.update(gtid);
            }
            let progress = ExtractorProgress {
                seqno: Seqno(s),
                epoch: Epoch(0),
                position: txn.end_position.clone(),
                gtid_position: pos.clone(),
            };
            queue.append(&txn, &progress).unwrap();
        }
        let applied: GtidPos = "0-1-1000".parse().unwrap();
        let plan = plan_queue(&queue, Some(Seqno(0)), &applied, &state("0-1-1010")).unwrap();
        assert_eq!(plan.kept_through, Some(Seqno(1)));
        let discarded: Vec<u64> = plan.discard.iter().map(|d| d.seqno.get()).collect();
        assert_eq!(discarded, [2, 3]);
        assert_eq!(plan.resume_gtid.to_string(), "0-1-1001");
        queue.close().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn keeps_the_whole_queue_when_the_new_master_holds_it() {
        let (queue, dir) = queue("holds");
        let applied: GtidPos = "0-1-1001,1-7-2".parse().unwrap();
        let plan = plan_queue(&queue, Some(Seqno(1)), &applied, &state("0-1-1004,1-7-3")).unwrap();
        assert_eq!(plan.kept_through, Some(Seqno(5)));
        assert!(plan.discard.is_empty());
        assert_eq!(plan.resume_gtid.to_string(), "0-1-1004,1-7-3");
        assert_eq!(plan.first_seqno, Seqno(6));
        queue.close().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn resumes_after_the_applied_when_nothing_is_queued_after_it() {
        let (queue, dir) = queue("applied");
        let applied: GtidPos = "0-1-1004,1-7-3".parse().unwrap();
        let plan = plan_queue(&queue, Some(Seqno(5)), &applied, &state("0-1-1004,1-7-3")).unwrap();
        assert_eq!(plan.kept_through, None);
        assert!(plan.discard.is_empty());
        assert_eq!(plan.resume_gtid, applied);
        assert_eq!(plan.first_seqno, Seqno(6));
        // The first queued transaction lacking: everything after the
        // applied one is discarded, resuming right after it.
        let applied: GtidPos = "0-1-1001,1-7-2".parse().unwrap();
        let plan = plan_queue(
            &queue,
            Some(Seqno(1)),
            &applied,
            &state("0-1-1001,0-2-1009"),
        )
        .unwrap();
        assert_eq!(plan.kept_through, None);
        let seqnos: Vec<u64> = plan.discard.iter().map(|d| d.seqno.get()).collect();
        assert_eq!(seqnos, [2, 3, 4, 5]);
        assert_eq!(plan.resume_gtid, applied);
        queue.close().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The new master read as `state` and `slave_pos`.
    fn master(state_text: &str, slave_pos: &str) -> NewMaster {
        NewMaster {
            server_id: 2,
            gtid_pos: GtidPos::new(),
            state: state(state_text),
            slave_pos: slave_pos.parse().unwrap(),
        }
    }

    fn refusal(applied: &str, new_master: &NewMaster) -> String {
        let gtid: GtidPos = applied.parse().unwrap();
        let at: BinlogPosition = "mariadb-bin.000007:1234".parse().unwrap();
        let missing = missing_on(
            &gtid,
            &new_master.state.with_replicated(&new_master.slave_pos),
        );
        assert!(!missing.is_empty());
        errant_refusal(
            &missing,
            &Applied {
                gtid: &gtid,
                at: &at,
            },
            new_master,
            "db2:3306",
            "svc",
        )
        .to_string()
    }

    #[test]
    fn a_refusal_gives_the_exact_replay_position_until_the_new_master_takes_writes() {
        let text = refusal("0-1-624", &master("0-1-621,0-3-400", "0-1-621"));
        assert!(
            text.contains(
                "the replica applied 3 transaction(s) that the new master db2:3306 lacks: \
                 0-1-622..0-1-624 (the replica is at 0-1-624, the new master's \
                 gtid_binlog_state is 0-1-621,0-3-400). Nothing"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mariadb-binlog --start-position=0-1-621 FILE... | mariadb -h <new master>; \
                 FILE: the old master's binlog files up to mariadb-bin.000007,"
            ),
            "{text}"
        );
        assert!(text.contains("reset --confirm svc"), "{text}");

        let text = refusal("0-1-624", &master("0-1-621,0-2-1218,0-3-400", ""));
        assert!(
            text.contains("The new master has taken writes of its own since (0-2-1218)"),
            "{text}"
        );
        assert!(!text.contains("--start-position"), "{text}");
        assert!(text.contains("reset --confirm svc"), "{text}");
    }

    #[test]
    fn the_replay_position_names_every_domain() {
        // Domain 9 is on the new master already: mariadb-binlog must not
        // read it from its start.
        let text = refusal("0-3-96862,9-78-1", &master("0-3-96852,9-78-1", ""));
        assert!(
            text.contains("mariadb-binlog --start-position=0-3-96852,9-78-1 FILE..."),
            "{text}"
        );
    }

    #[test]
    fn a_new_master_seeded_from_a_dump_is_judged_by_its_slave_position() {
        let text = refusal("0-1-94022", &master("", "0-1-93992"));
        assert!(
            text.contains(
                "applied 30 transaction(s) that the new master db2:3306 lacks: \
                 0-1-93993..0-1-94022 (the replica is at 0-1-94022, the new master's \
                 gtid_binlog_state is empty, its gtid_slave_pos 0-1-93992)"
            ),
            "{text}"
        );
        assert!(
            text.contains("--start-position=0-1-93992 FILE..."),
            "{text}"
        );
    }

    #[test]
    fn a_server_with_none_of_the_writers_transactions_is_named_as_maybe_another_topology() {
        // A standalone server of server id 1 at 0-1-7; the replica applied
        // up to 0-2-10373 (server 1's seqnos below 7270 and server 2's after).
        let text = refusal("0-2-10373", &master("0-1-7", ""));
        assert!(
            text.contains(
                "applied up to 10366 transaction(s) that the new master db2:3306 lacks: \
                 domain 0's seq_no 8..10373 (the last 0-2-10373) (at most: the new master holds \
                 none of server 2's transactions in domain 0, so which servers wrote those below \
                 the last is not known)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "The new master holds no transaction of server 2 (which wrote the last one this \
                 replica applied in domain 0): it may not be a server of this replication \
                 topology (check --host and --port; then replaying cannot help: re-seed this \
                 replica from the new master and `shardrepctl reset --confirm svc`). If it is a \
                 replica that none of server 2's transactions reached: Either apply them"
            ),
            "{text}"
        );
        assert!(text.contains("--start-position=0-1-7 FILE..."), "{text}");
    }

    #[test]
    fn a_server_without_the_domain_gets_no_replay_advice() {
        let text = refusal("0-3-96829", &master("", ""));
        assert!(
            text.contains("holds no transaction of domain 0 at all"),
            "{text}"
        );
        assert!(!text.contains("mariadb-binlog"), "{text}");
        assert!(text.contains("reset --confirm svc"), "{text}");
    }

    #[test]
    fn other_servers_inside_the_range_make_the_count_an_upper_bound() {
        let text = refusal("0-1-93992", &master("0-1-24935,0-3-87787", ""));
        assert!(
            text.contains(
                "applied up to 69057 transaction(s) that the new master db2:3306 lacks: \
                 0-1-24936..0-1-93992 (at most:"
            ),
            "{text}"
        );
    }
}
