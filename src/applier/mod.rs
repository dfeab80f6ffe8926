//! The applier: N channels applying queued transactions on the replica,
//! each committing its restart position with its data.
//!
//! - [`sql`]: statements for row changes (prepared, bound parameters,
//!   cached, multi-row inserts).
//! - [`columns`]: column facts a `NO_LOG` binlog lacks (signedness,
//!   binary CHAR/BINARY), from the replica's definitions.
//! - [`table`]: a channel's view of the replica's tables (names, key,
//!   column facts), cached until DDL.
//! - [`session`]: the session a channel sets up, and the session context
//!   of logged statements.
//! - [`retry`]: which errors are retried and which stop the service.
//! - [`ddl_replay`]: which DDL a channel replays after a crash.
//! - [`restart`]: the per-channel restart rows in the catalog schema
//!   (their table's names and statement texts: [`crate::catalog`]), and
//!   what a restart applies from them (`restart::recover`).
//! - [`skipped`]: the seqnos the DBA chose to skip, in the catalog schema.
//! - [`work`]: what the scheduler sends a channel, and the markers.
//! - [`progress`]: what the channels share with the scheduler and status.
//! - [`low_water`]: the running low-water mark (every seqno up to it done).
//! - [`error`]: the definite apply error.
//! - [`channel`]: one channel's thread, blocks and commits.

pub mod channel;
pub mod columns;
pub mod ddl_replay;
pub mod error;
pub mod low_water;
pub mod progress;
pub mod restart;
pub mod retry;
pub mod session;
pub mod skipped;
pub mod sql;
pub mod table;
pub mod work;
