//! The replicator service, wired: extractor → queue → scheduler → N apply
//! channels, run in the foreground until a stop request, with a clean stop
//! (every channel's restart row at the same seqno).
//!
//! Threads: `shardrep-extract` (a tokio runtime reading the source and
//! appending to the queue), the caller's thread as the scheduler, and one
//! `shardrep-apply-NN` thread per channel.
//!
//! Shard map: stored in the catalog (`shard::store`), seeded from
//! `shard_filter.map_file` at first start.
//!
//! Start: each channel's restart row (catalog schema on the replica) says
//! what it committed; the scheduler reads the queue from the lowest of them
//! plus one and each channel skips what it already has. The extractor
//! resumes after the queue's last stored transaction, or, with an empty
//! queue, at the configured `source.start`.
//!
//! Files, one part of a run each:
//! - `run.rs`: [`run`], which only connects the parts, and its teardown
//!   order;
//! - `setup.rs`: the replica's catalog at start (restart rows, skips,
//!   shard map), the lost-queue refusal, the router, the final rows;
//! - `takeover.rs`: the takeover decision and the takeover itself;
//! - `native.rs`: the native-replication check, at start and while
//!   applying;
//! - [`extract`]: the one extract loop (source → queue), used by the
//!   extractor thread and by `shardrep extract --to-queue`;
//! - `channels.rs`: starting and joining the apply channels;
//! - `feed.rs`: the queue → scheduler feed (stop requests, `stop_at`,
//!   idle end), with `purge.rs`, the queue purge every 1000 transactions;
//! - `error.rs`: [`RunError`], [`ExtractFailure`] and which error wins;
//! - `extract_only.rs`, `first_start.rs`, `skips.rs`: the extractor role,
//!   the first start's master check, `--skip-seqno`;
//! - [`service`] and [`state`]: the service around runs, and its states.

mod apply_method;
mod channels;
pub mod check;
mod error;
pub mod extract;
mod extract_only;
mod feed;
mod first_start;
mod gtid_reconcile;
mod gtid_topology;
mod native;
mod purge;
mod run;
pub mod service;
mod setup;
mod skips;
pub mod source;
pub mod state;
pub mod switch_scan;
mod takeover;

pub use error::{ExtractFailure, RunError, SetupServer};
pub use native::NATIVE_REPLICATION_CHECK_INTERVAL;
pub use run::{run, Observer, RunOptions, RunReport};
pub(crate) use skips::{future_skip_message, skip_ranges};

use crate::config::Config;

/// The connection options of the configured replica.
pub(crate) fn replica_opts(config: &Config) -> mysql_async::Opts {
    crate::mysql::connection_opts(
        &config.replica.host,
        config.replica.port,
        config.replica.socket.as_deref(),
        &config.replica.user,
        config.replica.password.expose(),
    )
}

/// A new connection to the configured replica, as
/// [`crate::replica::connect`] opens it (takeover and handback).
///
/// # Errors
/// [`crate::replica::ReplicaError`] naming the replica.
async fn connect_replica_for_native(
    config: &Config,
) -> Result<mysql_async::Conn, crate::replica::ReplicaError> {
    crate::replica::connect(
        &config.replica.host,
        config.replica.port,
        config.replica.socket.as_deref(),
        &config.replica.user,
        &config.replica.password,
    )
    .await
}

/// A new connection to the configured replica.
///
/// # Errors
/// [`RunError::Setup`] "cannot connect to the replica", with the server's
/// code when it sent one.
async fn connect_replica(config: &Config) -> Result<mysql_async::Conn, RunError> {
    mysql_async::Conn::new(replica_opts(config))
        .await
        .map_err(|e| {
            RunError::setup_client(
                error::SetupServer::Replica,
                format!(
                    "cannot connect to the replica: {}",
                    crate::mysql::ErrorText(&e)
                ),
                &e,
            )
        })
}
