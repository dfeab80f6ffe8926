//! The check that the replica's native replication is not running while
//! this service applies to it (unless `[replica]
//! allow_native_replication`): once at start, then every
//! [`NATIVE_REPLICATION_CHECK_INTERVAL`] from the feed.
//!
//! Over the same connection and at the same interval, and once more when
//! the run ends, the replica's `@@gtid_slave_pos` follows the master's
//! GTID position that shardrep has applied (every transaction up to the
//! low-water mark), as native replication keeps it with each commit: so
//! that `@@gtid_current_pos`, `SHOW SLAVE STATUS` users and failover tools
//! (which rank replicas by these) see how far the replica is. Only the
//! domains the master's position names change; the replica's other
//! domains stay. Not done with `allow_native_replication` (`SET GLOBAL
//! gtid_slave_pos` needs every slave thread stopped).

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use mysql_async::prelude::Queryable;

use super::{replica_opts, RunError};
use crate::applier::progress::Progress;
use crate::config::Config;
use crate::position::GtidPos;

/// How often a running service checks that native replication has not been
/// started on its replica.
pub const NATIVE_REPLICATION_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// The error for native appliers found running on the replica (`running`,
/// from [`crate::replica::running_native_appliers`]); `when` says at start
/// or while applying.
pub(super) fn native_replication_error(
    config: &Config,
    running: &[String],
    when: &str,
) -> RunError {
    RunError::NativeReplication(format!(
        "native replication is running on the replica {}:{} {when}: {}; it and this service \
         would both apply the master's transactions and the replica would diverge. Stop it \
         (STOP SLAVE, or STOP ALL SLAVES) and go online again, or set [replica] \
         allow_native_replication = true if it replicates other data",
        config.replica.host,
        config.replica.port,
        running.join(", ")
    ))
}

/// The native appliers running on the replica, over `conn` (opened when
/// `None`). `None` when the replica cannot be asked now (the channels
/// report a lost replica themselves).
async fn native_appliers(
    config: &Config,
    conn: &mut Option<mysql_async::Conn>,
) -> Option<Vec<String>> {
    if conn.is_none() {
        *conn = mysql_async::Conn::new(replica_opts(config)).await.ok();
    }
    match crate::replica::running_native_appliers(conn.as_mut()?).await {
        Ok(running) => Some(running),
        Err(e) => {
            tracing::warn!(error = %e, "cannot check native replication on the replica");
            *conn = None;
            None
        }
    }
}

/// The native-replication check of one run: its replica connection (kept
/// open between checks) and the time of the last check.
pub(super) struct NativeCheck<'a> {
    config: &'a Config,
    runtime: &'a Runtime,
    conn: Option<mysql_async::Conn>,
    checked: Instant,
    /// The native appliers found running by [`NativeCheck::poll`].
    pub running: Option<Vec<String>>,
    /// `@@gtid_slave_pos` as last set (or read before the first set);
    /// `None` until read.
    slave_pos: Option<GtidPos>,
    /// A set of `gtid_slave_pos` failed: not tried again this run.
    slave_pos_failed: bool,
}

impl<'a> NativeCheck<'a> {
    /// A check over its own connection, run on `runtime`.
    pub fn new(config: &'a Config, runtime: &'a Runtime) -> NativeCheck<'a> {
        NativeCheck {
            config,
            runtime,
            conn: None,
            checked: Instant::now(),
            running: None,
            slave_pos: None,
            slave_pos_failed: false,
        }
    }

    /// The check before the run starts its channels.
    ///
    /// # Errors
    /// [`RunError::NativeReplication`] when native appliers run on the
    /// replica (the connection is then closed).
    pub fn at_start(&mut self) -> Result<(), RunError> {
        if self.config.replica.allow_native_replication {
            return Ok(());
        }
        if let Some(running) = self
            .runtime
            .block_on(native_appliers(self.config, &mut self.conn))
        {
            if !running.is_empty() {
                self.close();
                return Err(native_replication_error(self.config, &running, "at start"));
            }
        }
        Ok(())
    }

    /// Starts the interval of the checks while applying (at the start of
    /// dispatch).
    pub fn restart_interval(&mut self) {
        self.checked = Instant::now();
    }

    /// The check while applying, once [`NATIVE_REPLICATION_CHECK_INTERVAL`]
    /// has passed since the last one: `true` when native appliers run (then
    /// in [`NativeCheck::running`]) and the run must stop.
    pub fn poll(&mut self, progress: &Progress) -> bool {
        if self.config.replica.allow_native_replication
            || self.checked.elapsed() < NATIVE_REPLICATION_CHECK_INTERVAL
        {
            return false;
        }
        self.checked = Instant::now();
        match self
            .runtime
            .block_on(native_appliers(self.config, &mut self.conn))
        {
            Some(running) if !running.is_empty() => {
                self.running = Some(running);
                true
            }
            Some(_) => {
                self.follow_slave_pos(progress);
                false
            }
            None => false,
        }
    }

    /// Sets `@@gtid_slave_pos` to the master's GTID position of
    /// `progress`'s low-water mark (module doc), when it moved. A failure
    /// is logged once and not tried again this run.
    pub fn follow_slave_pos(&mut self, progress: &Progress) {
        if self.config.replica.allow_native_replication
            || self.slave_pos_failed
            || self.running.is_some()
        {
            return;
        }
        let Some(marker) = progress.low_water_marker().1 else {
            return;
        };
        if marker.gtid.is_empty() {
            return;
        }
        let config = self.config;
        let result = self.runtime.block_on(async {
            if self.conn.is_none() {
                self.conn = Some(mysql_async::Conn::new(replica_opts(config)).await?);
            }
            let conn = self.conn.as_mut().expect("connected");
            let current = match &self.slave_pos {
                Some(p) => p.clone(),
                None => {
                    let text: Option<String> =
                        conn.query_first("SELECT @@GLOBAL.gtid_slave_pos").await?;
                    text.unwrap_or_default().parse().unwrap_or_default()
                }
            };
            let mut next = current.clone();
            for g in marker.gtid.iter() {
                next.update(*g);
            }
            if next != current || self.slave_pos.is_none() {
                conn.exec_drop("SET GLOBAL gtid_slave_pos = ?", (next.to_string(),))
                    .await?;
            }
            Ok::<_, mysql_async::Error>(next)
        });
        match result {
            Ok(pos) => self.slave_pos = Some(pos),
            Err(e) => {
                self.slave_pos_failed = true;
                self.conn = None;
                tracing::warn!(
                    error = %crate::mysql::ErrorText(&e),
                    "cannot set the replica's gtid_slave_pos to the applied position (it stays \
                     where it was until the handback; failover tools that read it see the \
                     replica behind)"
                );
            }
        }
    }

    /// Disconnects from the replica.
    pub fn close(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = self.runtime.block_on(conn.disconnect());
        }
    }
}
