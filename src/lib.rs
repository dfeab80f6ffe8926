//! # shardrep
//!
//! A parallel replication applier for MySQL-family databases. shardrep takes
//! over an existing replica, reads the master's row-based binlog, keeps every
//! transaction in an on-disk queue, assigns each transaction to one of N apply
//! channels by its shard (schema), applies the channels in parallel and can
//! hand the replica back to native replication at the exact point where it
//! stopped.
//!
//! ```text
//!  source ──> extractor ──> queue (log)  ──> scheduler ──> channel 0 ──> replica
//!  (files |   decode,        durable,         filter,       channel 1 ──>
//!   live)     seqno, shard   ordered by       assign,        ...
//!                            seqno            barriers      channel N-1 ──>
//! ```
//!
//! ## Glossary
//! - **service**: one replication flow from one source master to one replica.
//! - **seqno**: dense `u64` assigned by the extractor, from 0, one per source
//!   transaction ([`position::Seqno`]). **epoch**: the seqno at which the
//!   current extraction run started ([`position::Epoch`]).
//! - **binlog position** / event id: `file:pos` of the master binlog *after* a
//!   transaction ([`position::BinlogPosition`]). **GTID**: MariaDB
//!   `domain-server-seq` ([`position::Gtid`], [`position::GtidPos`]).
//! - **shard**: the schema a transaction touches, `#UNKNOWN` otherwise.
//! - **channel**: one apply lane `0..N-1` ([`position::ChannelId`]).
//! - **critical shard**: a shard whose transactions run alone.
//! - **restart position**: the per-channel row committed with the data.
//!
//! The architecture and contracts are in `shared/DESIGN.md`.
//!
//! ## Error texts
//! Every error type of the crate displays a complete message, its cause's
//! text included (`queue q: cannot create q/seg-0: Permission denied (os
//! error 13)`), and returns no `source()`: status, logs and the binaries
//! show an error by its `Display` alone, and a printer that walks the
//! chain (anyhow's `{:#}`) shows each cause once. A MySQL client error is
//! shown through [`mysql::ErrorText`] (mysql_async names an I/O error's
//! kind twice).

pub mod applier;
pub mod backoff;
pub mod catalog;
pub mod check;
pub mod config;
pub mod control;
pub mod event;
pub mod extractor;
pub mod grants;
pub mod inspect;
pub mod memory;
pub mod mysql;
pub mod position;
pub mod queue;
pub mod replica;
pub mod replicator;
pub mod scheduler;
pub mod shard;
pub mod xa;
