//! The applier: N channels applying queued transactions on the replica,
//! each committing its restart position with its data.
//!
//! - [`sql`]: statements for row changes (prepared, bound parameters,
//!   cached, multi-row inserts).
//! - [`retry`]: which errors are retried and which stop the service.

pub mod retry;
pub mod sql;
