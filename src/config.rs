//! The service configuration: `conf/shardrep.toml`, loaded and validated.
//!
//! [`Config::load`] reads a TOML file, [`Config::from_toml_str`] parses text.
//! Both resolve passwords (`password`, `password_file` or `password_env`) into
//! [`Secret`]s and run [`Config::validate`]. Every problem found is returned at
//! once in [`ConfigError::Invalid`], one [`ConfigProblem`] per dotted key:
//! unknown keys, missing keys, values out of range, unreadable password files.
//! Only TOML syntax errors and values of the wrong TOML type (a string where
//! a number belongs) stop earlier, as [`ConfigError::Parse`].
//!
//! Sections and keys: [`accepted_keys`] lists every key the parser
//! accepts; `docs/src/configuration.md` explains each (`tests/docs.rs`
//! checks that it names them all) and `conf/shardrep.toml` is a commented
//! example.
//!
//! Every duration and size key names its unit (`_ms`, `_bytes`, `_seqnos`,
//! `_txns`). Paths are used as written (relative paths are relative to the
//! process's working directory), except `password_file`, which is resolved
//! against the directory of the configuration file.
//!
//! Layout: this file holds [`Config`] and its typed sections; beside it,
//! [`defaults`] (every key's default and bounds, written once), `raw` (the
//! document as written), `keys` (unknown keys and their "did you mean"),
//! `load` (raw to typed, every problem at once), `password` (the three
//! password sources), `validate` (the rules on the values), `problems`
//! ([`ConfigError`], [`ConfigProblem`]), `start` ([`StartPosition`]),
//! `secret` ([`Secret`]) and `redact` (passwords kept out of TOML errors).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub mod defaults;
mod keys;
mod load;
mod password;
mod problems;
mod raw;
mod redact;
mod secret;
mod start;
mod validate;

pub use problems::{ConfigError, ConfigProblem};
pub use secret::Secret;
pub use start::{StartPosition, StartPositionError};
pub use validate::{is_service_name, SERVICE_NAME_MAX_CHARS};

/// Every key the configuration accepts, as dotted paths
/// (`apply.channels`, `source.origin_services`), sections in the order of
/// the document's description: the field names of the raw sections, the
/// same list the unknown-key check takes (so it cannot drift from the
/// parser). For documentation checks (`tests/docs.rs`).
pub fn accepted_keys() -> Vec<String> {
    keys::sections()
        .iter()
        .flat_map(|section| {
            keys::section_fields(section)
                .unwrap_or_default()
                .iter()
                .map(move |key| format!("{section}.{key}"))
        })
        .collect()
}

/// What a service does (`service.role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// `"applier"` (the default): extract into the queue and apply to the
    /// replica.
    #[default]
    Applier,
    /// `"extractor"`: fill the queue only.
    Extractor,
}

impl Role {
    /// Every role, in the order messages list them.
    pub const ALL: [Role; 2] = [Role::Applier, Role::Extractor];

    /// The TOML spelling: `applier` or `extractor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Applier => "applier",
            Role::Extractor => "extractor",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the shard filter does with a transaction it does not want to apply
/// as is (`shard_filter.unknown_shard_policy`,
/// `shard_filter.unwanted_shard_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardPolicy {
    /// `"accept"`: apply it.
    Accept,
    /// `"drop"`: skip it without applying (counted in status).
    Drop,
    /// `"warn"`: drop it and log the reason as a warning.
    Warn,
    /// `"error"`: stop with `OFFLINE:ERROR` naming the seqno and shard.
    Error,
}

impl ShardPolicy {
    /// Every policy, in the order messages list them.
    pub const ALL: [ShardPolicy; 4] = [
        ShardPolicy::Accept,
        ShardPolicy::Drop,
        ShardPolicy::Warn,
        ShardPolicy::Error,
    ];

    /// The TOML spelling: `accept`, `drop`, `warn` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardPolicy::Accept => "accept",
            ShardPolicy::Drop => "drop",
            ShardPolicy::Warn => "warn",
            ShardPolicy::Error => "error",
        }
    }
}

impl fmt::Display for ShardPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one shard's transactions are spread over the channels
/// (`apply.parallelism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// `"shard"`: every transaction of a shard on the shard's channel, in
    /// the master's commit order (shared/DESIGN.md §4).
    Shard,
    /// `"row"`: transactions on any channel, ordered only where their row
    /// keys (primary and unique key values) or coarser keys meet
    /// ([`crate::shard::writeset`]); within a shard, commits may happen in
    /// another order than on the master, per key never.
    Row,
}

impl Parallelism {
    /// Every mode, in the order messages list them.
    pub const ALL: [Parallelism; 2] = [Parallelism::Shard, Parallelism::Row];

    /// The TOML spelling: `shard` or `row`.
    pub fn as_str(self) -> &'static str {
        match self {
            Parallelism::Shard => "shard",
            Parallelism::Row => "row",
        }
    }
}

impl fmt::Display for Parallelism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the replica's binlog records of the transactions shardrep applies
/// (`replica.binlog_gtids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinlogGtids {
    /// `"auto"` (the default): `"master"` when the replica writes a binlog
    /// with `log_slave_updates` (as native replication binlogs what it
    /// applies), else `"off"` (native replication binlogs nothing of it),
    /// decided at every start from the replica's settings.
    Auto,
    /// `"master"`: each master transaction is committed on the replica as
    /// a transaction of its own under the master's GTID (`SET SESSION
    /// gtid_domain_id, server_id, gtid_seq_no`, as `mariadb-binlog`
    /// replays do), the commits in the master's order, and shardrep's
    /// restart rows are written outside them without binary logging: the
    /// replica's binlog then holds the master's transactions only, as
    /// under native replication with `log_slave_updates` (GTID strict
    /// mode, replicas of the replica, failover tools).
    Master,
    /// `"own"`: blocks of transactions committed together under the
    /// replica's own server id and GTID domain, the restart row in them
    /// (the fastest way to binlog; not for GTID topologies: the replica's
    /// GTIDs differ from the master's).
    Own,
    /// `"off"`: nothing applied is binlogged (`sql_log_bin = 0`).
    Off,
}

impl BinlogGtids {
    /// Every mode, in the order messages list them.
    pub const ALL: [BinlogGtids; 4] = [
        BinlogGtids::Auto,
        BinlogGtids::Master,
        BinlogGtids::Own,
        BinlogGtids::Off,
    ];

    /// The TOML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BinlogGtids::Auto => "auto",
            BinlogGtids::Master => "master",
            BinlogGtids::Own => "own",
            BinlogGtids::Off => "off",
        }
    }

    /// Whether applied changes may be binlogged (`"auto"`: when the
    /// replica's settings say so).
    pub fn logs(self) -> bool {
        self != BinlogGtids::Off
    }

    /// The mode a start applies with on a replica whose `log_bin` and
    /// `log_slave_updates` are as given: `"auto"` resolved, the others as
    /// they are.
    pub fn resolve(self, log_bin: bool, log_slave_updates: bool) -> BinlogGtids {
        match self {
            BinlogGtids::Auto if log_bin && log_slave_updates => BinlogGtids::Master,
            BinlogGtids::Auto => BinlogGtids::Off,
            other => other,
        }
    }
}

impl fmt::Display for BinlogGtids {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a channel hands row changes to the replica (`apply.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMethod {
    /// `"binlog"`: the master's own TABLE_MAP and rows events, as
    /// `BINLOG '<base64>'` statements (what `mariadb-binlog` prints), so
    /// that the replica's own row applier applies them exactly as native
    /// replication does (no triggers for row events, system-versioned
    /// history from the row images, generated columns computed by the
    /// replica, `slave_type_conversions`). Needs the `BINLOG REPLAY`
    /// privilege (MariaDB 10.5.2 and later) or SUPER. Transactions whose
    /// events were not kept (queued by an older version, MySQL's
    /// compressed payloads and partial JSON updates) are applied as SQL.
    Binlog,
    /// `"sql"`: each row change rewritten as SQL (`INSERT`, `UPDATE …
    /// WHERE <key>`, `DELETE`), merged and batched by shardrep.
    Sql,
}

impl ApplyMethod {
    /// Every method, in the order messages list them.
    pub const ALL: [ApplyMethod; 2] = [ApplyMethod::Binlog, ApplyMethod::Sql];

    /// The TOML spelling: `binlog` or `sql`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyMethod::Binlog => "binlog",
            ApplyMethod::Sql => "sql",
        }
    }
}

impl fmt::Display for ApplyMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which kind of source a service reads (`source.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `"live"`: connect to the master as a replica and dump its binlog.
    Live,
    /// `"files"`: read binlog files from a directory.
    Files,
}

impl SourceKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [SourceKind; 2] = [SourceKind::Live, SourceKind::Files];

    /// The TOML spelling: `live` or `files`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Live => "live",
            SourceKind::Files => "files",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A loaded, validated service configuration.
///
/// Obtain one with [`Config::load`] or [`Config::from_toml_str`]; both
/// resolve passwords and validate. `Debug` never shows a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `[service]`: name and role.
    pub service: ServiceConfig,
    /// `[source]`: where transactions come from.
    pub source: SourceConfig,
    /// `[replica]`: the database the channels apply to.
    pub replica: ReplicaConfig,
    /// `[queue]`: the on-disk transaction queue.
    pub queue: QueueConfig,
    /// `[apply]`: channels, block commit, retries. May be omitted (defaults).
    pub apply: ApplyConfig,
    /// `[shard_filter]`: shard map and policies. May be omitted (defaults).
    pub shard_filter: ShardFilterConfig,
    /// `[control]`: the control socket.
    pub control: ControlConfig,
    /// `[metrics]`: the Prometheus endpoint. May be omitted (off).
    pub metrics: MetricsConfig,
    /// The file this configuration came from (or the origin given to
    /// [`Config::from_toml_str`]); named in errors.
    pub origin: PathBuf,
}

/// `[service]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// `name` (required): 1–48 characters of `[A-Za-z0-9_]`. It forms the
    /// catalog schema name `shardrep_<name>` on the replica.
    pub name: String,
    /// `role`: `"applier"` (default) or `"extractor"`.
    pub role: Role,
    /// `stop_grace_ms`: after SIGTERM or SIGINT, how long a clean stop
    /// that open temporary tables of master sessions refuse is tried
    /// again before the service stops at once, losing them (as `offline
    /// --immediate`); a second signal stops at once. Default 60000.
    pub stop_grace_ms: u64,
}

/// `[source]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// `kind = "live"` with its connection keys, or `kind = "files"` with
    /// its directory keys. Keys of the other kind are errors.
    pub endpoint: SourceEndpoint,
    /// `start`: where extraction begins on a fresh service. Default
    /// `takeover`.
    pub start: StartPosition,
    /// `[source.origin_services]`: master server id → the name of the
    /// service that masters on that server, to know on which master a
    /// transaction originated. Keys are server ids written as TOML keys
    /// (`1 = "sjc"`); values follow the `service.name` rules. Default empty.
    pub origin_services: BTreeMap<u32, String>,
}

impl SourceConfig {
    /// Whether the source is live or files.
    pub fn kind(&self) -> SourceKind {
        match self.endpoint {
            SourceEndpoint::Live(_) => SourceKind::Live,
            SourceEndpoint::Files(_) => SourceKind::Files,
        }
    }

    /// The live connection settings, if `kind = "live"`.
    pub fn live(&self) -> Option<&LiveSourceConfig> {
        match &self.endpoint {
            SourceEndpoint::Live(live) => Some(live),
            SourceEndpoint::Files(_) => None,
        }
    }

    /// The binlog directory settings, if `kind = "files"`.
    pub fn files(&self) -> Option<&FilesSourceConfig> {
        match &self.endpoint {
            SourceEndpoint::Files(files) => Some(files),
            SourceEndpoint::Live(_) => None,
        }
    }
}

/// The source's kind and its kind-specific settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEndpoint {
    /// `kind = "live"`.
    Live(LiveSourceConfig),
    /// `kind = "files"`.
    Files(FilesSourceConfig),
}

/// `[source]` with `kind = "live"`: shardrep connects to the master as a
/// replica and dumps its binlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSourceConfig {
    /// `host` (required): master host name or address.
    pub host: String,
    /// `port`: 1..=65535, default 3306.
    pub port: u16,
    /// `user` (required): needs `REPLICATION SLAVE` (and `REPLICATION
    /// CLIENT` for `start = "current"`).
    pub user: String,
    /// From exactly one of `password`, `password_file`, `password_env`.
    pub password: Secret,
    /// `server_id` (required): nonzero; the server id shardrep announces
    /// when it registers as a replica. Must differ from every server in the
    /// topology.
    pub server_id: u32,
    /// `heartbeat_period_ms`: how often the master sends a heartbeat when
    /// idle, in milliseconds; 1..=4294967000, default 1000.
    pub heartbeat_period_ms: u64,
    /// `connect_timeout_ms`: connection timeout in milliseconds, at least
    /// 1, default 10000.
    pub connect_timeout_ms: u64,
    /// `reconnect_max_backoff_ms`: cap of the doubling wait between
    /// reconnect attempts, in milliseconds; at least 1, default 30000.
    pub reconnect_max_backoff_ms: u64,
}

impl LiveSourceConfig {
    /// The `[source]` of a live configuration that sets only the required
    /// keys (and `port`): every other key at its default.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        user: impl Into<String>,
        password: Secret,
        server_id: u32,
    ) -> LiveSourceConfig {
        LiveSourceConfig {
            host: host.into(),
            port,
            user: user.into(),
            password,
            server_id,
            heartbeat_period_ms: defaults::SOURCE_HEARTBEAT_PERIOD_MS.default,
            connect_timeout_ms: defaults::SOURCE_CONNECT_TIMEOUT_MS.default,
            reconnect_max_backoff_ms: defaults::SOURCE_RECONNECT_MAX_BACKOFF_MS.default,
        }
    }
}

/// `[source]` with `kind = "files"`: shardrep reads binlog files from a
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesSourceConfig {
    /// `binlog_dir` (required): directory holding the binlog files.
    pub binlog_dir: PathBuf,
    /// `binlog_index`: file name of the `.index` file listing the binlogs in
    /// order, relative to `binlog_dir`. Absent: the binlog files of the
    /// directory in name order.
    pub binlog_index: Option<PathBuf>,
}

/// `[replica]`: the database the channels apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// `host` (required): replica host name or address.
    pub host: String,
    /// `port`: 1..=65535, default 3306.
    pub port: u16,
    /// `socket`: absolute path of the replica's Unix socket, for a replica
    /// on shardrep's own host. When set, every connection to the replica
    /// (apply channels, catalog, takeover and handback) goes through it
    /// instead of TCP to `host:port`, which stay the replica's identity
    /// (takeover checks, messages). A local socket costs the replica and
    /// shardrep less CPU per statement than loopback TCP. Default: unset
    /// (TCP; mysql_async's `prefer_socket` stays off either way).
    pub socket: Option<PathBuf>,
    /// `user` (required).
    pub user: String,
    /// From exactly one of `password`, `password_file`, `password_env`.
    pub password: Secret,
    /// `catalog_schema`: schema of shardrep's restart table; 1–64
    /// characters of `[A-Za-z0-9_$]`. Absent: `shardrep_<service.name>`;
    /// see [`Config::catalog_schema`].
    pub catalog_schema: Option<String>,
    /// `sql_log_bin`: whether applied changes are written to the replica's
    /// own binlog (for chained replicas and multi-master). Default true.
    /// The restart rows are written in the same transaction as the data,
    /// so they are binlogged with it; every shard filter drops them
    /// (`crate::shard::filter`, rule 1, and [`crate::shard::is_catalog_table`]).
    pub sql_log_bin: bool,
    /// `binlog_gtids` ([`BinlogGtids`]): `"auto"`, `"master"`, `"own"` or
    /// `"off"`. Absent: `"own"` when `sql_log_bin = true` is written,
    /// `"off"` when `sql_log_bin = false`, else the default `"auto"`.
    /// `sql_log_bin` above is false exactly when this is `"off"`.
    pub binlog_gtids: BinlogGtids,
    /// Whether [`ReplicaConfig::binlog_gtids`] comes from the older
    /// `sql_log_bin` key (`binlog_gtids` absent), so that a refusal names
    /// the key the DBA wrote.
    pub binlog_gtids_from_sql_log_bin: bool,
    /// `preserve_origin`: on each channel's connection, set the session's
    /// `server_id` and `gtid_domain_id` to the source transaction's before
    /// applying it, so the replica binlogs the applied changes with their
    /// origin (as `mariadb-binlog` output replays do) instead of its own.
    /// Needed when the replica is itself a master read by another service
    /// (multi-master): that service's filter then knows where each
    /// transaction came from (`[source] origin_services`). A block holds
    /// only transactions of one origin. Needs SUPER or BINLOG REPLAY on the
    /// replica. Default false.
    pub preserve_origin: bool,
    /// `connect_timeout_ms`: connection timeout in milliseconds, at least
    /// 1, default 10000.
    pub connect_timeout_ms: u64,
    /// `allow_native_replication`: whether the service may run while
    /// native replication's SQL thread runs on the replica. Default false:
    /// the service refuses to start, and stops with OFFLINE:ERROR when one
    /// is started under it (checked every few seconds), because two
    /// appliers writing the same rows diverge. Set it only when native
    /// replication applies other data (e.g. a multi-source connection
    /// filtered to other schemas).
    pub allow_native_replication: bool,
}

/// `[queue]`: the on-disk transaction queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// `dir` (required): queue directory, created if missing.
    pub dir: PathBuf,
    /// `max_size_bytes`: the extractor pauses when the queue holds this many
    /// bytes; at least 1, default 10 GiB (10737418240).
    pub max_size_bytes: u64,
    /// `retention_seqnos`: how many applied seqnos to keep below the
    /// minimum applied seqno of all channels (for `log list`); default 0.
    pub retention_seqnos: u64,
    /// `segment_size_bytes`: storage segment size in bytes; at least 1 and
    /// at most `max_size_bytes`, default 64 MiB (67108864).
    pub segment_size_bytes: u64,
    /// `flush_interval_ms`: longest time between durable flushes, in
    /// milliseconds; at least 1, default 100.
    pub flush_interval_ms: u64,
    /// `flush_bytes`: flush once this many bytes are unflushed; at least 1,
    /// default 4 MiB (4194304).
    pub flush_bytes: u64,
    /// `fragment_bytes`: a source transaction whose changes pass this many
    /// bytes (decoded row images plus the master's row events, approximate)
    /// is stored as fragments of about this size, each a seqno of its own
    /// ([`crate::event::Fragment`]), and applied as a stream inside one
    /// replica transaction; what shardrep holds of one transaction is
    /// bounded by it. At least 1, default 8 MiB (8388608).
    pub fragment_bytes: u64,
}

impl QueueConfig {
    /// The `[queue]` of a configuration that sets only `dir`: every other
    /// key at its default.
    pub fn with_defaults(dir: impl Into<PathBuf>) -> QueueConfig {
        QueueConfig {
            dir: dir.into(),
            max_size_bytes: defaults::QUEUE_MAX_SIZE_BYTES.default,
            retention_seqnos: defaults::QUEUE_RETENTION_SEQNOS.default,
            segment_size_bytes: defaults::QUEUE_SEGMENT_SIZE_BYTES.default,
            flush_interval_ms: defaults::QUEUE_FLUSH_INTERVAL_MS.default,
            flush_bytes: defaults::QUEUE_FLUSH_BYTES.default,
            fragment_bytes: defaults::QUEUE_FRAGMENT_BYTES.default,
        }
    }
}

/// `[apply]`: the parallel apply channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConfig {
    /// `channels`: number of parallel apply channels, 1..=256, default 8.
    /// Change only after a clean offline.
    pub channels: u16,
    /// `block_commit_txns`: most transactions a channel commits together;
    /// at least 1 (1 turns block commit off), default 100.
    pub block_commit_txns: u32,
    /// `block_commit_interval_ms`: when a channel's input runs dry before
    /// its block holds `block_commit_txns` transactions, how long it waits
    /// for more before committing, in milliseconds counted from the
    /// block's first transaction; 0 (the default) commits at once. More
    /// than 0 trades latency for fewer commits on a trickling source.
    pub block_commit_interval_ms: u64,
    /// `sync_interval_seqnos`: idle channels advance their restart rows
    /// every this many seqnos; at least 1, default 1000.
    pub sync_interval_seqnos: u64,
    /// `max_in_flight_bytes`: most transaction bytes (as held in memory)
    /// handed to the channels and not yet committed; the scheduler waits
    /// above it (one larger transaction is still admitted alone). At least
    /// 1, default 67108864 (64 MiB).
    pub max_in_flight_bytes: u64,
    /// `shard_list`: channel assignment file (`conf/shard.list` format).
    /// Absent: every shard by the fixed hash.
    pub shard_list: Option<PathBuf>,
    /// `retry_max_attempts`: how many times a block failing with a
    /// transient error (deadlock, lock wait, lost connection) is retried
    /// before the service goes `OFFLINE:ERROR`; 0 = never retry; default 10.
    pub retry_max_attempts: u32,
    /// `retry_max_backoff_ms`: cap of the doubling wait between retries, in
    /// milliseconds; at least 1, default 5000.
    pub retry_max_backoff_ms: u64,
    /// `parallelism`: `"shard"` or `"row"` ([`Parallelism`]); default
    /// `"row"` ([`defaults::APPLY_PARALLELISM`] says why).
    pub parallelism: Parallelism,
    /// `commit_window_seqnos`: a transaction is handed to a channel only
    /// once every transaction this many seqnos or more before it has
    /// committed (the low-water mark is at or above `seqno - window`): how
    /// far the channels may run apart, in seqnos. 1 to 4096, default 4096
    /// ([`defaults::APPLY_COMMIT_WINDOW_SEQNOS`] says why at most 4096).
    pub commit_window_seqnos: u64,
    /// `compound_blocks`: send each batched block (row changes only) as
    /// MariaDB compound statements (`BEGIN NOT ATOMIC … END`) that check
    /// every statement's affected-row count on the replica and end with
    /// the COMMIT: one reply per block instead of one per statement plus a
    /// COMMIT round trip. A block whose check or statement fails is rolled
    /// back and run statement by statement, which reports the error as
    /// always. MariaDB 10.1.1 or later (a channel on another server sends
    /// multi-statement blocks, with a warning); default true
    /// ([`defaults::APPLY_COMPOUND_BLOCKS`] says why).
    pub compound_blocks: bool,
    /// `method`: `"binlog"` or `"sql"` ([`ApplyMethod`]); default
    /// [`defaults::APPLY_METHOD`].
    pub method: ApplyMethod,
}

impl Default for ApplyConfig {
    /// All defaults, as when `[apply]` is omitted.
    fn default() -> Self {
        ApplyConfig {
            channels: defaults::APPLY_CHANNELS.default,
            block_commit_txns: defaults::APPLY_BLOCK_COMMIT_TXNS.default,
            block_commit_interval_ms: defaults::APPLY_BLOCK_COMMIT_INTERVAL_MS.default,
            sync_interval_seqnos: defaults::APPLY_SYNC_INTERVAL_SEQNOS.default,
            max_in_flight_bytes: defaults::APPLY_MAX_IN_FLIGHT_BYTES.default,
            shard_list: None,
            retry_max_attempts: defaults::APPLY_RETRY_MAX_ATTEMPTS.default,
            retry_max_backoff_ms: defaults::APPLY_RETRY_MAX_BACKOFF_MS.default,
            parallelism: defaults::APPLY_PARALLELISM,
            commit_window_seqnos: defaults::APPLY_COMMIT_WINDOW_SEQNOS.default,
            compound_blocks: defaults::APPLY_COMPOUND_BLOCKS,
            method: defaults::APPLY_METHOD,
        }
    }
}

/// `[shard_filter]`: which transactions are applied, by shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFilterConfig {
    /// `map_file`: the shard map (`shard.map` format) loaded at start.
    /// Absent: the shard map stored in the catalog is used as is.
    pub map_file: Option<PathBuf>,
    /// `enforce_home`: handle with `unwanted_shard_policy` the transactions
    /// of shards whose master is another service, and those that
    /// originated on another service (by `source.origin_services`).
    /// `#LOCAL` shards are dropped whatever this says. Default false. The
    /// exact rules are in `shard::filter`.
    pub enforce_home: bool,
    /// `unknown_shard_policy`: for shards missing from the shard map;
    /// default `error`.
    pub unknown_shard_policy: ShardPolicy,
    /// `unwanted_shard_policy`: for shards rejected by home enforcement;
    /// default `drop`.
    pub unwanted_shard_policy: ShardPolicy,
    /// `auto_create`: add unknown shards to the shard map (mastered by the
    /// service the transaction originated on) instead of applying
    /// `unknown_shard_policy`. Default false.
    pub auto_create: bool,
}

impl Default for ShardFilterConfig {
    /// All defaults, as when `[shard_filter]` is omitted.
    fn default() -> Self {
        ShardFilterConfig {
            map_file: None,
            enforce_home: defaults::SHARD_FILTER_ENFORCE_HOME,
            unknown_shard_policy: defaults::SHARD_FILTER_UNKNOWN_SHARD_POLICY,
            unwanted_shard_policy: defaults::SHARD_FILTER_UNWANTED_SHARD_POLICY,
            auto_create: defaults::SHARD_FILTER_AUTO_CREATE,
        }
    }
}

/// `[control]`: how `shardrepctl` reaches the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlConfig {
    /// `socket` (required): Unix socket path, at most 107 bytes (the
    /// `sun_path` limit). Created with mode 0600.
    pub socket: PathBuf,
}

/// `[metrics]`: Prometheus metrics over HTTP
/// ([`crate::control::metrics`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `listen`: the address `GET /metrics` is served on, `host:port` with
    /// a numeric host (e.g. `127.0.0.1:9104`, 9104 being the usual port of
    /// a MySQL exporter plus one); `None` (absent): no metrics server.
    pub listen: Option<std::net::SocketAddr>,
}

impl Config {
    /// Reads, parses, resolves passwords and validates the TOML file at
    /// `path`.
    ///
    /// # Errors
    /// [`ConfigError::Read`] if the file cannot be read,
    /// [`ConfigError::Parse`] for TOML syntax errors and wrongly typed
    /// values, [`ConfigError::Invalid`] with every problem found otherwise
    /// (unknown or missing keys, bad values, unresolvable passwords).
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: path.to_path_buf(),
            cause: source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// Parses TOML `text` as if read from `origin`: errors name `origin`,
    /// and relative `password_file` paths are resolved against its
    /// directory. Passwords are resolved and the result validated, as in
    /// [`Config::load`].
    ///
    /// # Errors
    /// [`ConfigError::Parse`] or [`ConfigError::Invalid`], as for
    /// [`Config::load`].
    pub fn from_toml_str(text: &str, origin: impl AsRef<Path>) -> Result<Config, ConfigError> {
        load::parse(text, origin.as_ref(), &|name| std::env::var(name))
    }

    /// Checks every rule on the values (name characters, port and count
    /// ranges, sizes, path lengths, GTID form, catalog schema name) and
    /// reports all violations at once. [`Config::load`] runs it; call it
    /// again after changing a `Config` in code.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming [`Config::origin`] and listing every
    /// problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid {
                file: self.origin.clone(),
                problems,
            })
        }
    }

    /// The effective catalog schema on the replica: `replica.catalog_schema`
    /// if set, else `shardrep_<service.name>`.
    pub fn catalog_schema(&self) -> String {
        match &self.replica.catalog_schema {
            Some(schema) => schema.clone(),
            None => crate::catalog::default_schema(&self.service.name),
        }
    }
}

#[cfg(test)]
mod tests;
