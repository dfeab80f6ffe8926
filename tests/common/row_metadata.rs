//! The master's `binlog_row_metadata` for tests that need a given level.
//!
//! The sandbox runs the server's default (`NO_LOG` on MariaDB 10.11) unless
//! `SANDBOX_BINLOG_ROW_METADATA` says otherwise (conf/sandbox.env). Tests
//! that depend on the level set it with [`RowMetadata::set`] and run their
//! scenario under each of [`LEVELS`].
//!
//! The variable has GLOBAL scope only (MariaDB 10.11 refuses `SET SESSION
//! binlog_row_metadata` with error 1229) and the server reads it each time
//! it writes a TABLE_MAP event, so a change applies at once to the next
//! row event of every session, other tests' included (checked: a session
//! opened before the change logs its next insert without metadata). A test
//! that sets it must therefore hold its file's master lock, which every
//! test of that file writing to the master takes; tests of other files
//! never run at the same time (cargo runs test binaries one after another)
//! and must not depend on the level.

use mysql_async::prelude::Queryable;

use super::{Sandbox, Server};

/// The levels the decode and apply tests run under: MariaDB's default and
/// the one with names, keys and charsets.
pub const LEVELS: [&str; 2] = ["NO_LOG", "FULL"];

/// The master's `binlog_row_metadata` set to one level while this guard
/// lives; dropping it restores the level the master had before (also when
/// the test panicked).
#[must_use = "the level is restored when the guard is dropped"]
pub struct RowMetadata {
    sandbox: &'static Sandbox,
    previous: String,
    /// The level set.
    pub level: &'static str,
}

impl RowMetadata {
    /// Sets the master's global `binlog_row_metadata` to `level` and checks
    /// that it took. The caller holds its file's master lock (module doc).
    pub async fn set(sandbox: &'static Sandbox, level: &'static str) -> RowMetadata {
        let mut master = sandbox.connect(Server::Master).await;
        let previous: String = master
            .query_first("SELECT @@GLOBAL.binlog_row_metadata")
            .await
            .expect("read binlog_row_metadata")
            .expect("one row");
        master
            .query_drop(format!("SET GLOBAL binlog_row_metadata = {level}"))
            .await
            .expect("set binlog_row_metadata");
        let now: String = master
            .query_first("SELECT @@GLOBAL.binlog_row_metadata")
            .await
            .expect("read binlog_row_metadata")
            .expect("one row");
        assert_eq!(now, level, "the master's binlog_row_metadata");
        RowMetadata {
            sandbox,
            previous,
            level,
        }
    }
}

impl Drop for RowMetadata {
    fn drop(&mut self) {
        // Drop cannot await: restore on a thread with a runtime of its own
        // (the test's runtime may be the current-thread kind).
        let (sandbox, previous) = (self.sandbox, self.previous.clone());
        let restored = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(async {
                    let mut master = sandbox.connect(Server::Master).await;
                    master
                        .query_drop(format!("SET GLOBAL binlog_row_metadata = {previous}"))
                        .await
                })
        })
        .join();
        if !std::thread::panicking() {
            restored
                .expect("restore thread")
                .expect("restore binlog_row_metadata");
        }
    }
}
