//! A consistency check run by the service (issue 18): for each table, the
//! master's and the replica's read views are taken at the same point of
//! the stream with the run's scheduler hold ([`crate::scheduler::hold`]),
//! then the table is compared chunk by chunk ([`crate::check`]). Nothing
//! is written on either server; the scheduler is stopped only for the
//! moment the replica's read view is opened.
//!
//! Per table: pause the scheduler; open the master's consistent snapshot
//! and read its binlog position (`binlog_snapshot_file` and
//! `binlog_snapshot_position`, MariaDB); let the scheduler apply up to that
//! position and hold; open the replica's consistent snapshot; confirm the
//! hold lasted; release. A hold lost meanwhile (the scheduler released it
//! after [`crate::scheduler::hold::HOLD_MAX`], or the run stopped) is
//! retried up to [`SNAPSHOT_ATTEMPTS`] times.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use serde::Serialize;

use crate::check::{check_table, CheckOptions, TablePlan};
use crate::mysql::ErrorText;
use crate::position::BinlogPosition;
use crate::scheduler::hold::Hold;

/// Times a table's two read views are tried before the check fails.
pub const SNAPSHOT_ATTEMPTS: usize = 3;

/// What to check and how.
#[derive(Clone, Debug, Default)]
pub struct CheckRequest {
    /// Tables named `schema.table`.
    pub tables: Vec<(String, String)>,
    /// Every table of these schemas.
    pub schemas: Vec<String>,
    /// Chunking and pauses.
    pub options: CheckOptions,
    /// Longest wait for the service to apply up to a master snapshot's
    /// position (it may be catching up).
    pub catch_up_timeout: Duration,
}

/// Where a check is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckState {
    /// Comparing.
    #[default]
    Running,
    /// Done: every table identical.
    Identical,
    /// Done: differences found.
    Differences,
    /// Could not finish (see `error`).
    Failed,
    /// Stopped at the DBA's request (`check --cancel`).
    Cancelled,
}

/// A check's progress and result (`status --name check`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckStatus {
    /// Running or how it ended.
    pub state: CheckState,
    /// Tables to compare.
    pub tables: u64,
    /// Tables compared.
    pub tables_done: u64,
    /// The table being compared (`schema.table`).
    pub current_table: Option<String>,
    /// Chunks compared.
    pub chunks: u64,
    /// Master rows compared.
    pub rows: u64,
    /// Rows per second since the start.
    pub rows_per_second: f64,
    /// Differences found (all counted).
    pub differences: u64,
    /// The differences, as text, at most [`CheckOptions::max_differences`]
    /// per table.
    pub found: Vec<String>,
    /// Why the check could not finish.
    pub error: Option<String>,
    /// The master position of the last table's read views.
    pub position: Option<String>,
    /// Tables not compared, each with why (a table engine without
    /// consistent snapshots, a table dropped on the master meanwhile).
    pub skipped: Vec<String>,
    /// Milliseconds since the start (to the end when done).
    pub elapsed_ms: u64,
    /// What the check waits for now, when it waits for the service: to
    /// pause its scheduler (`the service's scheduler to pause …`), or to
    /// apply up to a master snapshot's position (a lagging service: `the
    /// service to apply up to FILE:POS`).
    pub waiting_for: Option<String>,
}

/// Runs `request` to the end (blocking: a runtime of its own), keeping
/// `status` current. `shards`: the schemas the service applies (the
/// default set of tables). `cancel` stops it after the chunk in hand (or
/// the wait for a hold, which the canceller releases).
pub fn run_check(
    master: Opts,
    replica: Opts,
    hold: Arc<Hold>,
    shards: Vec<String>,
    request: CheckRequest,
    status: Arc<Mutex<CheckStatus>>,
    cancel: Arc<AtomicBool>,
) {
    let started = Instant::now();
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start an async runtime: {e}"))
        .and_then(|rt| {
            rt.block_on(check_all(
                master, replica, &hold, shards, &request, &status, &cancel, started,
            ))
        });
    hold.release();
    let mut s = status.lock().expect("check status");
    s.elapsed_ms = started.elapsed().as_millis() as u64;
    s.current_table = None;
    match outcome {
        Ok(()) if s.differences == 0 => s.state = CheckState::Identical,
        Ok(()) => s.state = CheckState::Differences,
        Err(e) if cancel.load(Ordering::Acquire) => {
            tracing::info!(error = %e, "consistency check cancelled");
            s.state = CheckState::Cancelled;
            s.error = Some("cancelled at the DBA's request".into());
        }
        Err(e) => {
            tracing::warn!(error = %e, "consistency check failed");
            s.state = CheckState::Failed;
            s.error = Some(e);
        }
    }
    tracing::info!(
        state = ?s.state,
        tables = s.tables_done,
        rows = s.rows,
        differences = s.differences,
        "consistency check done"
    );
}

#[allow(clippy::too_many_arguments)]
async fn check_all(
    master: Opts,
    replica: Opts,
    hold: &Arc<Hold>,
    shards: Vec<String>,
    request: &CheckRequest,
    status: &Mutex<CheckStatus>,
    cancel: &AtomicBool,
    started: Instant,
) -> Result<(), String> {
    let connect = |opts: Opts, side: &'static str| async move {
        let mut conn = Conn::new(opts)
            .await
            .map_err(|e| format!("connect to the {side}: {}", ErrorText(&e)))?;
        // UTC as the applier writes: a TIMESTAMP's text is the same on
        // both servers whatever their time_zone.
        conn.query_drop(
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET SESSION time_zone = '+00:00'",
        )
        .await
        .map_err(|e| {
            format!(
                "set REPEATABLE READ and time_zone on the {side}: {}",
                ErrorText(&e)
            )
        })?;
        Ok::<Conn, String>(conn)
    };
    let mut m = connect(master, "master").await?;
    let mut r = connect(replica, "replica").await?;
    let (tables, skipped) = tables_of(&mut m, request, &shards).await?;
    let none_skipped = skipped.is_empty();
    {
        let mut s = status.lock().expect("check status");
        s.tables = tables.len() as u64;
        s.skipped = skipped;
    }
    let align = Alignment {
        hold,
        catch_up_timeout: request.catch_up_timeout,
        cancel,
        status,
    };
    // A table only the replica has, in a schema compared whole, is a
    // difference too.
    let whole = whole_schemas(request, &shards);
    let mut extra = Vec::new();
    if !whole.is_empty() {
        extra = replica_only_tables(&mut m, &mut r, whole, &align).await?;
    }
    if tables.is_empty() && extra.is_empty() {
        // "identical" over no table would tell the DBA nothing is wrong.
        return Err(nothing_to_compare(request, &shards, none_skipped));
    }
    {
        let mut s = status.lock().expect("check status");
        s.differences += extra.len() as u64;
        s.found.extend(extra.iter().map(|(schema, table)| {
            format!(
                "{}: only on the replica (the master has no such table)",
                crate::check::name::display(schema, table)
            )
        }));
    }
    for (schema, table) in tables {
        if cancel.load(Ordering::Acquire) {
            return Err("cancelled".into());
        }
        let name = crate::check::name::display(&schema, &table);
        status.lock().expect("check status").current_table = Some(name.clone());
        let plan = match TablePlan::read(&mut m, &schema, &table).await {
            Ok(plan) => plan,
            Err(crate::check::CheckError::NoSuchTable { .. }) => {
                let mut s = status.lock().expect("check status");
                s.skipped
                    .push(format!("{name}: dropped on the master during the check"));
                s.tables_done += 1;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let position = aligned_snapshots(&mut m, &mut r, &align).await?;
        let base = status.lock().expect("check status").clone();
        let report = check_table(&mut m, &mut r, &plan, &request.options, |p| {
            let mut s = status.lock().expect("check status");
            s.chunks = base.chunks + p.chunks;
            s.rows = base.rows + p.rows;
            s.differences = base.differences + p.differences;
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            s.rows_per_second = s.rows as f64 / secs;
            s.elapsed_ms = started.elapsed().as_millis() as u64;
            !cancel.load(Ordering::Acquire) && !hold.is_closed()
        })
        .await;
        // Both read views end, whatever the outcome.
        let _ = m.query_drop("COMMIT").await;
        let _ = r.query_drop("COMMIT").await;
        let report = match report {
            Ok(report) => report,
            Err(e @ crate::check::CheckError::ReplicaTable { .. }) => {
                let mut s = status.lock().expect("check status");
                s.tables_done += 1;
                s.differences += 1;
                s.position = Some(position.to_string());
                s.found.push(e.to_string());
                continue;
            }
            Err(crate::check::CheckError::Cancelled) if hold.is_closed() => {
                return Err(format!(
                    "the service stopped applying (it went OFFLINE or failed) while {name} was \
                     compared: run the check again once it is ONLINE"
                ))
            }
            Err(e) => return Err(e.to_string()),
        };
        let mut s = status.lock().expect("check status");
        s.tables_done += 1;
        s.position = Some(position.to_string());
        s.found
            .extend(report.differences.iter().map(|d| d.to_string()));
    }
    Ok(())
}

/// The base tables of `schemas` that the replica has and the master has
/// not: those [`replica_only_once`] finds twice in a row. One look can
/// be fooled by DDL on the master (a table created after the master's
/// first listing and dropped before its second, which the replica has not
/// dropped yet when listed); a table only the replica has is found by
/// both.
async fn replica_only_tables(
    m: &mut Conn,
    r: &mut Conn,
    schemas: &[String],
    align: &Alignment<'_>,
) -> Result<Vec<(String, String)>, String> {
    let first = replica_only_once(m, r, schemas, align).await?;
    if first.is_empty() {
        return Ok(first);
    }
    let second = replica_only_once(m, r, schemas, align).await?;
    Ok(first.into_iter().filter(|t| second.contains(t)).collect())
}

/// One look for [`replica_only_tables`]: the master is listed before and
/// after the replica, and the replica once the service has applied up to
/// a master position read after the first listing
/// ([`aligned_snapshots`]): a table the master dropped before its first
/// listing is gone from the replica by then, and one it created meanwhile
/// is in its second listing.
async fn replica_only_once(
    m: &mut Conn,
    r: &mut Conn,
    schemas: &[String],
    align: &Alignment<'_>,
) -> Result<Vec<(String, String)>, String> {
    let before = base_tables(m, schemas, "master").await?;
    aligned_snapshots(m, r, align).await?;
    let _ = m.query_drop("COMMIT").await;
    let _ = r.query_drop("COMMIT").await;
    let replica = base_tables(r, schemas, "replica").await?;
    let after = base_tables(m, schemas, "master").await?;
    Ok(replica
        .into_iter()
        .filter(|t| !before.contains(t) && !after.contains(t))
        .collect())
}

/// The base tables of `schemas` on one server, as (schema, table), in
/// name order.
async fn base_tables(
    conn: &mut Conn,
    schemas: &[String],
    side: &str,
) -> Result<std::collections::BTreeSet<(String, String)>, String> {
    let mut all = std::collections::BTreeSet::new();
    for schema in schemas {
        let names: Vec<String> = conn
            .exec(
                "SELECT TABLE_NAME FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'",
                (schema.as_str(),),
            )
            .await
            .map_err(|e| {
                format!(
                    "list the tables of {schema} on the {side}: {}",
                    ErrorText(&e)
                )
            })?;
        all.extend(names.into_iter().map(|t| (schema.clone(), t)));
    }
    Ok(all)
}

/// The schemas whose every table a request compares: those it names, or
/// (when it names neither tables nor schemas) the service's shards.
fn whole_schemas<'a>(request: &'a CheckRequest, shards: &'a [String]) -> &'a [String] {
    if request.tables.is_empty() && request.schemas.is_empty() {
        shards
    } else {
        &request.schemas
    }
}

/// Why a check found no table to compare, and what to do.
fn nothing_to_compare(request: &CheckRequest, shards: &[String], none_skipped: bool) -> String {
    let what = if !request.tables.is_empty() || !request.schemas.is_empty() {
        if request.schemas.is_empty() {
            "the tables named".to_string()
        } else {
            format!(
                "the schemas named ({}) have no base table on the master",
                request.schemas.join(", ")
            )
        }
    } else if shards.is_empty() {
        "the service's shard map lists no shard (shard list), so there is no default set of \
         tables; name schemas or tables to compare"
            .to_string()
    } else {
        format!(
            "the service's shards ({}) have no base table on the master",
            shards.join(", ")
        )
    };
    if none_skipped {
        format!("nothing to compare: {what}")
    } else {
        format!("nothing to compare: {what} (the tables found are skipped: see skipped)")
    }
}

/// Whether `schema` is one of the server's own (`mysql`, `sys`; and
/// `information_schema`, `performance_schema` in any case, as the server
/// reads them), which a check refuses: shardrep does not apply them, and
/// they differ between any two servers.
fn is_system_schema(schema: &str) -> bool {
    matches!(schema, "mysql" | "sys")
        || schema.eq_ignore_ascii_case("information_schema")
        || schema.eq_ignore_ascii_case("performance_schema")
}

/// Table engines whose reads see a consistent snapshot (`START
/// TRANSACTION WITH CONSISTENT SNAPSHOT`): the others are skipped (under
/// load their two reads would show different moments).
const SNAPSHOT_ENGINES: [&str; 2] = ["InnoDB", "ROCKSDB"];

/// The tables a request names: its tables, those of its schemas, or (with
/// neither) those of the service's shards; base tables only, in name
/// order, each once; and the tables skipped, each with why (an engine
/// without consistent snapshots).
///
/// # Errors
/// A system schema ([`is_system_schema`]), a named schema the master
/// does not have, a named table that is not a base table on the master
/// (a view, a sequence, none), or a failed query.
async fn tables_of(
    master: &mut Conn,
    request: &CheckRequest,
    shards: &[String],
) -> Result<(Vec<(String, String)>, Vec<String>), String> {
    use crate::check::name::display;
    let mut named = request
        .tables
        .iter()
        .map(|(s, _)| s)
        .chain(&request.schemas);
    if let Some(system) = named.find(|s| is_system_schema(s)) {
        return Err(format!(
            "{system} is a system schema: shardrep does not apply it, so a check does not \
             compare it"
        ));
    }
    // (schema, table, engine) of every table to compare.
    let mut found: Vec<(String, String, Option<String>)> = Vec::new();
    for (schema, table) in &request.tables {
        let row: Option<(String, Option<String>)> = master
            .exec_first(
                "SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (schema.as_str(), table.as_str()),
            )
            .await
            .map_err(|e| {
                format!(
                    "look up {} on the master: {}",
                    display(schema, table),
                    ErrorText(&e)
                )
            })?;
        match row {
            Some((kind, engine)) if kind == "BASE TABLE" => {
                found.push((schema.clone(), table.clone(), engine))
            }
            Some((kind, _)) => {
                return Err(format!(
                    "{} is a {} on the master: a check compares base tables",
                    display(schema, table),
                    kind.to_ascii_lowercase()
                ))
            }
            None => {
                return Err(format!(
                    "{}: no such table on the master",
                    display(schema, table)
                ))
            }
        }
    }
    for schema in whole_schemas(request, shards) {
        let exists: Option<String> = master
            .exec_first(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (schema.as_str(),),
            )
            .await
            .map_err(|e| {
                format!(
                    "look up the schema {schema} on the master: {}",
                    ErrorText(&e)
                )
            })?;
        if exists.is_none() {
            // A shard of the map may have no schema (yet): only a schema
            // the DBA named is an error.
            if request.schemas.contains(schema) {
                return Err(format!("no schema {schema} on the master"));
            }
            continue;
        }
        let names: Vec<(String, Option<String>)> = master
            .exec(
                "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
                (schema.as_str(),),
            )
            .await
            .map_err(|e| {
                format!(
                    "list the tables of {schema} on the master: {}",
                    ErrorText(&e)
                )
            })?;
        found.extend(names.into_iter().map(|(t, e)| (schema.clone(), t, e)));
    }
    found.sort();
    found.dedup();
    let mut tables = Vec::new();
    let mut skipped = Vec::new();
    for (schema, table, engine) in found {
        let engine = engine.unwrap_or_default();
        if SNAPSHOT_ENGINES
            .iter()
            .any(|e| e.eq_ignore_ascii_case(&engine))
        {
            tables.push((schema, table));
        } else {
            skipped.push(format!(
                "{}: ENGINE={engine} has no consistent snapshot, so it cannot be read at one \
                 point of the stream; compare it on a quiet pair (CHECKSUM TABLE)",
                display(&schema, &table)
            ));
        }
    }
    Ok((tables, skipped))
}

/// What opening the two read views at one point of the stream needs: the
/// run's hold on its scheduler, how long the service may take to get
/// there, the DBA's cancel, and the status that says what is waited for.
struct Alignment<'a> {
    hold: &'a Arc<Hold>,
    catch_up_timeout: Duration,
    cancel: &'a AtomicBool,
    status: &'a Mutex<CheckStatus>,
}

impl Alignment<'_> {
    /// Shows `what` as the status's `waiting_for` (`None`: no wait).
    fn waiting(&self, what: Option<String>) {
        self.status.lock().expect("check status").waiting_for = what;
    }
}

/// Opens the two read views at one point of the stream (see the module
/// doc) and returns its master position.
async fn aligned_snapshots(
    master: &mut Conn,
    replica: &mut Conn,
    align: &Alignment<'_>,
) -> Result<BinlogPosition, String> {
    let Alignment {
        hold,
        catch_up_timeout,
        cancel,
        ..
    } = *align;
    let mut last_error = String::new();
    for _ in 0..SNAPSHOT_ATTEMPTS {
        // A cancel releases the hold, which ends a wait below.
        if cancel.load(Ordering::Acquire) {
            return Err("cancelled".into());
        }
        let h = hold.clone();
        align.waiting(Some(
            "the service's scheduler to pause (it routes the transaction in hand first)".into(),
        ));
        let paused = tokio::task::spawn_blocking(move || h.pause(catch_up_timeout)).await;
        align.waiting(None);
        let (paused, _) = paused.map_err(|e| e.to_string())?.map_err(|e| {
            format!(
                "could not pause the service's scheduler: {e} (it finishes the transaction \
                     in hand first: a very large one takes that long; check again later)"
            )
        })?;
        let position = master_snapshot(master).await;
        let position = match position {
            Ok(p) => p,
            Err(e) => {
                hold.release();
                return Err(e);
            }
        };
        if paused.as_ref().is_some_and(|p| p > &position) {
            hold.release();
            let _ = master.query_drop("ROLLBACK").await;
            return Err(format!(
                "the master's snapshot is at {position}, before the service's position {}: \
                 is the service's source this master?",
                paused.expect("checked")
            ));
        }
        let (h, at) = (hold.clone(), position.clone());
        align.waiting(Some(format!("the service to apply up to {position}")));
        let reached = tokio::task::spawn_blocking(move || h.hold_at(at, catch_up_timeout))
            .await
            .map_err(|e| e.to_string());
        align.waiting(None);
        let reached = reached?;
        if let Err(e) = reached {
            hold.release();
            let _ = master.query_drop("ROLLBACK").await;
            if e == crate::scheduler::hold::HoldError::Closed {
                return Err(format!("could not hold the service at {position}: {e}"));
            }
            last_error = e.to_string();
            continue;
        }
        let opened = replica
            .query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            .await
            .map_err(|e| format!("open a snapshot on the replica: {}", ErrorText(&e)));
        let confirmed = hold.confirm();
        hold.release();
        opened?;
        match confirmed {
            Ok(()) => return Ok(position),
            Err(e @ crate::scheduler::hold::HoldError::Closed) => {
                return Err(format!("could not hold the service at {position}: {e}"))
            }
            Err(e) => {
                let _ = master.query_drop("ROLLBACK").await;
                let _ = replica.query_drop("ROLLBACK").await;
                last_error = e.to_string();
            }
        }
    }
    Err(format!(
        "could not hold the service at the master's snapshot in {SNAPSHOT_ATTEMPTS} attempts: \
         {last_error}"
    ))
}

/// Opens a consistent snapshot on the master and returns its binlog
/// position.
async fn master_snapshot(master: &mut Conn) -> Result<BinlogPosition, String> {
    master
        .query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .map_err(|e| format!("open a snapshot on the master: {}", ErrorText(&e)))?;
    let vars: Vec<(String, String)> = master
        .query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(|e| {
            format!(
                "read the master snapshot's binlog position: {}",
                ErrorText(&e)
            )
        })?;
    let get = |name: &str| {
        vars.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let (Some(file), Some(offset)) = (get("binlog_snapshot_file"), get("binlog_snapshot_position"))
    else {
        return Err(
            "the master shows no binlog_snapshot_file/position (MariaDB with its binlog \
                    on is needed)"
                .into(),
        );
    };
    let offset: u64 = offset
        .parse()
        .map_err(|_| format!("binlog_snapshot_position {offset:?} is not a number"))?;
    BinlogPosition::new(file, offset).map_err(|e| format!("the master snapshot's position: {e}"))
}
