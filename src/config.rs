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
//! Sections and keys (see `conf/shardrep.toml` for a commented example):
//!
//! | section          | keys |
//! | ---------------- | ---- |
//! | `[service]`      | `name`, `role` |
//! | `[source]`       | `kind`, `start`, `origin_services`; live: `host`, `port`, `user`, `password`/`password_file`/`password_env`, `server_id`, `heartbeat_period_ms`, `connect_timeout_ms`, `reconnect_max_backoff_ms`; files: `binlog_dir`, `binlog_index` |
//! | `[replica]`      | `host`, `port`, `socket`, `user`, `password`/`password_file`/`password_env`, `catalog_schema`, `sql_log_bin`, `preserve_origin`, `connect_timeout_ms`, `allow_native_replication` |
//! | `[queue]`        | `dir`, `max_size_bytes`, `retention_seqnos`, `segment_size_bytes`, `flush_interval_ms`, `flush_bytes` |
//! | `[apply]`        | `channels`, `block_commit_txns`, `block_commit_interval_ms`, `sync_interval_seqnos`, `max_in_flight_bytes`, `shard_list`, `retry_max_attempts`, `retry_max_backoff_ms` |
//! | `[shard_filter]` | `map_file`, `enforce_home`, `unknown_shard_policy`, `unwanted_shard_policy`, `auto_create` |
//! | `[control]`      | `socket` |
//!
//! Every duration and size key names its unit (`_ms`, `_bytes`, `_seqnos`,
//! `_txns`). Paths are used as written (relative paths are relative to the
//! process's working directory), except `password_file`, which is resolved
//! against the directory of the configuration file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

mod redact;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, permissions, not UTF-8).
    #[error("{}: cannot read configuration file", file.display())]
    Read {
        /// The configuration file.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML, or a value has the wrong TOML type. The
    /// message is toml's, with line and column where known; in the value
    /// of a password-like key it names line, column and key only, never
    /// any of the line.
    #[error("{}: {message}", file.display())]
    Parse {
        /// The configuration file (or the origin given to
        /// [`Config::from_toml_str`]).
        file: PathBuf,
        /// What is wrong and where.
        message: String,
    },
    /// The TOML is well formed but the configuration is not usable. Every
    /// problem found is listed, one per line, as `  key: message`.
    #[error("{}: invalid configuration:{}", file.display(), ProblemLines(problems))]
    Invalid {
        /// The configuration file (or the origin given to
        /// [`Config::from_toml_str`]).
        file: PathBuf,
        /// Every problem found, ordered by section (`service`, `source`,
        /// `replica`, `queue`, `apply`, `shard_filter`, `control`, then
        /// unknown sections) and by key within a section.
        problems: Vec<ConfigProblem>,
    },
}

/// One thing wrong with one key of the configuration.
///
/// Displays as `key: message`, e.g.
/// `replica.pasword: unknown key (did you mean `password`?)`. A message never
/// contains a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Full dotted path of the key, e.g. `apply.channels`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigProblem {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigProblem {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

struct ProblemLines<'a>(&'a [ConfigProblem]);

impl fmt::Display for ProblemLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Secret
// ---------------------------------------------------------------------------

/// A password. `Debug` and `Display` print `***`; only [`Secret::expose`]
/// gives the text, so a secret cannot reach a log or a status line by
/// accident.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Secret(text.into())
    }

    /// The password text. Call this only where it is handed to a connection.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

// ---------------------------------------------------------------------------
// Small enums
// ---------------------------------------------------------------------------

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

/// Which kind of source a service reads (`source.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `"live"`: connect to the master as a replica and dump its binlog.
    Live,
    /// `"files"`: read binlog files from a directory.
    Files,
}

impl SourceKind {
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

// ---------------------------------------------------------------------------
// StartPosition
// ---------------------------------------------------------------------------

/// Where extraction begins when the service has no stored position of its
/// own yet (`source.start`). Once the queue holds transactions, restarts
/// continue from the queue and this setting is not used.
///
/// Parsed from and displayed as `takeover`, `current`, `FILE:POS` or
/// `gtid:D-S-N[,D-S-N...]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StartPosition {
    /// `takeover` (the default): stop the replica's native replication and
    /// start at its executed position.
    #[default]
    Takeover,
    /// `current`: start at the master's current end of binlog.
    Current,
    /// `FILE:POS`: a binlog file name and a byte offset in it.
    File {
        /// Binlog file name, e.g. `mysql-bin.000042`.
        file: String,
        /// Byte offset of the first event to read.
        offset: u64,
    },
    /// `gtid:D-S-N[,D-S-N...]`: a MariaDB GTID position, one
    /// `domain-server-sequence` per domain; holds the text after `gtid:`.
    Gtid(String),
}

/// Why a `source.start` text is not a [`StartPosition`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StartPositionError(String);

const START_FORMS: &str = "takeover, current, FILE:POS or gtid:D-S-N[,D-S-N...]";

impl FromStr for StartPosition {
    type Err = StartPositionError;

    /// Parses `takeover`, `current`, `FILE:POS` (POS all digits, fits `u64`)
    /// or `gtid:` followed by comma-separated `D-S-N` items (unsigned
    /// integers, `D` and `S` 32-bit, one item per domain).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "takeover" => return Ok(StartPosition::Takeover),
            "current" => return Ok(StartPosition::Current),
            _ => {}
        }
        if let Some(gtids) = s.strip_prefix("gtid:") {
            check_gtid_list(gtids).map_err(StartPositionError)?;
            return Ok(StartPosition::Gtid(gtids.to_string()));
        }
        let Some((file, pos)) = s.rsplit_once(':') else {
            return Err(StartPositionError(format!(
                "expected {START_FORMS}, got {s:?}"
            )));
        };
        if file.is_empty() {
            return Err(StartPositionError(format!(
                "expected FILE:POS with a binlog file name before ':', got {s:?}"
            )));
        }
        if pos.is_empty() || !pos.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StartPositionError(format!(
                "expected FILE:POS with digits after ':', got {s:?}"
            )));
        }
        let offset = pos.parse::<u64>().map_err(|_| {
            StartPositionError(format!("binlog position {pos} is too large in {s:?}"))
        })?;
        Ok(StartPosition::File {
            file: file.to_string(),
            offset,
        })
    }
}

impl fmt::Display for StartPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartPosition::Takeover => f.write_str("takeover"),
            StartPosition::Current => f.write_str("current"),
            StartPosition::File { file, offset } => write!(f, "{file}:{offset}"),
            StartPosition::Gtid(list) => write!(f, "gtid:{list}"),
        }
    }
}

/// Checks `D-S-N[,D-S-N...]`: each item three dash-separated unsigned
/// integers (domain and server id 32-bit, sequence 64-bit), one per domain.
fn check_gtid_list(list: &str) -> Result<(), String> {
    if list.is_empty() {
        return Err("expected gtid:D-S-N[,D-S-N...], got nothing after \"gtid:\"".into());
    }
    let mut domains = BTreeSet::new();
    for item in list.split(',') {
        let parts: Vec<&str> = item.split('-').collect();
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if parts.len() != 3 || !parts.iter().all(|p| digits(p)) {
            return Err(format!(
                "GTID {item:?} is not D-S-N (three unsigned integers joined by '-')"
            ));
        }
        let domain = parts[0].parse::<u32>();
        let server = parts[1].parse::<u32>();
        let seq = parts[2].parse::<u64>();
        let (Ok(domain), Ok(_), Ok(_)) = (domain, server, seq) else {
            return Err(format!(
                "GTID {item:?} is out of range (domain and server id are 32-bit, sequence 64-bit)"
            ));
        };
        if !domains.insert(domain) {
            return Err(format!("GTID domain {domain} appears more than once"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The configuration
// ---------------------------------------------------------------------------

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
}

impl Default for ApplyConfig {
    /// All defaults, as when `[apply]` is omitted.
    fn default() -> Self {
        ApplyConfig {
            channels: DEFAULT_CHANNELS,
            block_commit_txns: DEFAULT_BLOCK_COMMIT_TXNS,
            block_commit_interval_ms: DEFAULT_BLOCK_COMMIT_INTERVAL_MS,
            sync_interval_seqnos: DEFAULT_SYNC_INTERVAL_SEQNOS,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
            shard_list: None,
            retry_max_attempts: DEFAULT_RETRY_MAX_ATTEMPTS,
            retry_max_backoff_ms: DEFAULT_RETRY_MAX_BACKOFF_MS,
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
            enforce_home: false,
            unknown_shard_policy: ShardPolicy::Error,
            unwanted_shard_policy: ShardPolicy::Drop,
            auto_create: false,
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

const DEFAULT_PORT: u16 = 3306;
const DEFAULT_HEARTBEAT_PERIOD_MS: u64 = 1000;
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_RECONNECT_MAX_BACKOFF_MS: u64 = 30_000;
const DEFAULT_MAX_SIZE_BYTES: u64 = 10 << 30;
const DEFAULT_RETENTION_SEQNOS: u64 = 0;
const DEFAULT_SEGMENT_SIZE_BYTES: u64 = 64 << 20;
const DEFAULT_FLUSH_INTERVAL_MS: u64 = 100;
const DEFAULT_FLUSH_BYTES: u64 = 4 << 20;
const DEFAULT_CHANNELS: u16 = 8;
/// Chosen from a sweep (1, 10, 25, 50, 100, 200, 400) on the quick
/// catch-up backlog (`bench/catchup`, 8 schemas, 11,770 transactions, two
/// rounds): at flush_log_at_trx_commit=1, 100 to 400 applied 3,400-4,300
/// transactions/s against 2,500-3,700 for 10 to 50 and 725-1,300 for 1;
/// at =2 every size from 10 up was within the noise (3,300-4,200/s). The
/// smallest size on that plateau keeps blocks short, which shortens a retry
/// and the time row locks are held.
const DEFAULT_BLOCK_COMMIT_TXNS: u32 = 100;
const DEFAULT_BLOCK_COMMIT_INTERVAL_MS: u64 = 0;
const DEFAULT_SYNC_INTERVAL_SEQNOS: u64 = 1000;
const DEFAULT_MAX_IN_FLIGHT_BYTES: u64 = 64 * 1024 * 1024;
const DEFAULT_RETRY_MAX_ATTEMPTS: u32 = 10;
const DEFAULT_RETRY_MAX_BACKOFF_MS: u64 = 5000;

/// Inclusive bounds of an integer key, shared by parsing and validation.
#[derive(Clone, Copy)]
struct Bounds {
    min: i128,
    max: i128,
}

const fn bounds(min: i128, max: i128) -> Bounds {
    Bounds { min, max }
}

const PORT: Bounds = bounds(1, 65_535);
const SERVER_ID: Bounds = bounds(1, u32::MAX as i128);
const HEARTBEAT_MS: Bounds = bounds(1, 4_294_967_000);
const POSITIVE: Bounds = bounds(1, u64::MAX as i128);
const NON_NEGATIVE: Bounds = bounds(0, u64::MAX as i128);
const CHANNELS: Bounds = bounds(1, 256);
const POSITIVE_U32: Bounds = bounds(1, u32::MAX as i128);
const NON_NEGATIVE_U32: Bounds = bounds(0, u32::MAX as i128);

impl Bounds {
    fn check(self, value: i128) -> Result<(), String> {
        if value >= self.min && value <= self.max {
            Ok(())
        } else if self.max >= i64::MAX as i128 {
            Err(format!("must be at least {}, got {value}", self.min))
        } else {
            Err(format!(
                "must be between {} and {}, got {value}",
                self.min, self.max
            ))
        }
    }
}

const SOCKET_PATH_MAX_BYTES: usize = 107;
const SERVICE_NAME_MAX_CHARS: usize = 48;
const SCHEMA_NAME_MAX_CHARS: usize = 64;

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
            source,
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
        parse(text, origin.as_ref(), &|name| std::env::var(name))
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

    fn problems(&self) -> Vec<ConfigProblem> {
        let mut p = Problems::default();
        if let Err(m) = check_service_name(&self.service.name) {
            p.push("service.name", m);
        }
        if self.service.role == Role::Extractor && self.source.start == StartPosition::Takeover {
            p.push(
                "source.start",
                "\"takeover\" needs the replica, which role = \"extractor\" never touches: \
                 set current, FILE:POS or gtid:...",
            );
        }
        match &self.source.endpoint {
            SourceEndpoint::Live(live) => {
                p.host("source.host", &live.host);
                p.range("source.port", live.port.into(), PORT);
                p.non_empty("source.user", &live.user);
                p.range("source.server_id", live.server_id.into(), SERVER_ID);
                p.range(
                    "source.heartbeat_period_ms",
                    live.heartbeat_period_ms.into(),
                    HEARTBEAT_MS,
                );
                p.range(
                    "source.connect_timeout_ms",
                    live.connect_timeout_ms.into(),
                    POSITIVE,
                );
                p.range(
                    "source.reconnect_max_backoff_ms",
                    live.reconnect_max_backoff_ms.into(),
                    POSITIVE,
                );
            }
            SourceEndpoint::Files(files) => {
                p.path("source.binlog_dir", &files.binlog_dir);
                if let Some(index) = &files.binlog_index {
                    p.path("source.binlog_index", index);
                }
            }
        }
        match &self.source.start {
            StartPosition::File { file, .. } if file.is_empty() => {
                p.push("source.start", "binlog file name must not be empty")
            }
            StartPosition::Gtid(list) => {
                if let Err(m) = check_gtid_list(list) {
                    p.push("source.start", m);
                }
            }
            _ => {}
        }
        for (id, name) in &self.source.origin_services {
            let key = format!("source.origin_services.{id}");
            if *id == 0 {
                p.push(&key, "server id must be at least 1");
            }
            if let Err(m) = check_service_name(name) {
                p.push(&key, m);
            }
        }

        p.host("replica.host", &self.replica.host);
        p.range("replica.port", self.replica.port.into(), PORT);
        p.non_empty("replica.user", &self.replica.user);
        if let Some(schema) = &self.replica.catalog_schema {
            if let Err(m) = check_schema_name(schema) {
                p.push("replica.catalog_schema", m);
            }
        }
        p.range(
            "replica.connect_timeout_ms",
            self.replica.connect_timeout_ms.into(),
            POSITIVE,
        );

        let q = &self.queue;
        p.path("queue.dir", &q.dir);
        p.range("queue.max_size_bytes", q.max_size_bytes.into(), POSITIVE);
        p.range(
            "queue.retention_seqnos",
            q.retention_seqnos.into(),
            NON_NEGATIVE,
        );
        p.range(
            "queue.segment_size_bytes",
            q.segment_size_bytes.into(),
            POSITIVE,
        );
        if q.segment_size_bytes > q.max_size_bytes && q.max_size_bytes > 0 {
            p.push(
                "queue.segment_size_bytes",
                format!(
                    "must not exceed queue.max_size_bytes ({}), got {}",
                    q.max_size_bytes, q.segment_size_bytes
                ),
            );
        }
        p.range(
            "queue.flush_interval_ms",
            q.flush_interval_ms.into(),
            POSITIVE,
        );
        p.range("queue.flush_bytes", q.flush_bytes.into(), POSITIVE);

        let a = &self.apply;
        p.range("apply.channels", a.channels.into(), CHANNELS);
        p.range(
            "apply.block_commit_txns",
            a.block_commit_txns.into(),
            POSITIVE_U32,
        );
        p.range(
            "apply.block_commit_interval_ms",
            a.block_commit_interval_ms.into(),
            NON_NEGATIVE,
        );
        p.range(
            "apply.sync_interval_seqnos",
            a.sync_interval_seqnos.into(),
            POSITIVE,
        );
        p.range(
            "apply.max_in_flight_bytes",
            a.max_in_flight_bytes.into(),
            POSITIVE,
        );
        if let Some(list) = &a.shard_list {
            p.path("apply.shard_list", list);
        }
        p.range(
            "apply.retry_max_backoff_ms",
            a.retry_max_backoff_ms.into(),
            POSITIVE,
        );

        if let Some(map) = &self.shard_filter.map_file {
            p.path("shard_filter.map_file", map);
        }

        p.path("control.socket", &self.control.socket);
        let socket_len = self.control.socket.as_os_str().len();
        if socket_len > SOCKET_PATH_MAX_BYTES {
            p.push(
                "control.socket",
                format!(
                    "must be at most {SOCKET_PATH_MAX_BYTES} bytes (Unix socket path limit), got {socket_len}"
                ),
            );
        }
        p.0
    }
}

#[derive(Default)]
struct Problems(Vec<ConfigProblem>);

impl Problems {
    fn push(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigProblem::new(key, message));
    }

    fn range(&mut self, key: &str, value: i128, b: Bounds) {
        if let Err(m) = b.check(value) {
            self.push(key, m);
        }
    }

    fn non_empty(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            self.push(key, "must not be empty");
        }
    }

    fn host(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            self.push(key, "must not be empty");
        } else if value.chars().any(char::is_whitespace) {
            self.push(key, format!("must not contain spaces, got {value:?}"));
        }
    }

    fn path(&mut self, key: &str, value: &Path) {
        if value.as_os_str().is_empty() {
            self.push(key, "must not be empty");
        }
    }
}

fn check_service_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if (1..=SERVICE_NAME_MAX_CHARS).contains(&len) && ok_chars {
        Ok(())
    } else {
        Err(format!(
            "must be 1 to {SERVICE_NAME_MAX_CHARS} characters of A-Z, a-z, 0-9 and _, got {name:?}"
        ))
    }
}

fn check_schema_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if (1..=SCHEMA_NAME_MAX_CHARS).contains(&len) && ok_chars {
        Ok(())
    } else {
        Err(format!(
            "must be 1 to {SCHEMA_NAME_MAX_CHARS} characters of A-Z, a-z, 0-9, _ and $, got {name:?}"
        ))
    }
}

// ---------------------------------------------------------------------------
// Parsing: TOML -> raw sections -> Config
// ---------------------------------------------------------------------------

/// The TOML document as written: every key optional, integers as TOML's
/// i64 ([`Int`]), enums as strings, so that missing keys and bad values become
/// problems (all reported together) rather than a first-error stop.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    service: RawService,
    source: RawSource,
    replica: RawReplica,
    queue: RawQueue,
    apply: RawApply,
    shard_filter: RawShardFilter,
    control: RawControl,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawService {
    name: Option<String>,
    role: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawSource {
    kind: Option<String>,
    start: Option<String>,
    origin_services: Option<BTreeMap<String, String>>,
    host: Option<String>,
    port: Option<Int>,
    user: Option<String>,
    password: Option<String>,
    password_file: Option<String>,
    password_env: Option<String>,
    server_id: Option<Int>,
    heartbeat_period_ms: Option<Int>,
    connect_timeout_ms: Option<Int>,
    reconnect_max_backoff_ms: Option<Int>,
    binlog_dir: Option<String>,
    binlog_index: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawReplica {
    host: Option<String>,
    port: Option<Int>,
    socket: Option<String>,
    user: Option<String>,
    password: Option<String>,
    password_file: Option<String>,
    password_env: Option<String>,
    catalog_schema: Option<String>,
    sql_log_bin: Option<bool>,
    preserve_origin: Option<bool>,
    connect_timeout_ms: Option<Int>,
    allow_native_replication: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawQueue {
    dir: Option<String>,
    max_size_bytes: Option<Int>,
    retention_seqnos: Option<Int>,
    segment_size_bytes: Option<Int>,
    flush_interval_ms: Option<Int>,
    flush_bytes: Option<Int>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawApply {
    channels: Option<Int>,
    block_commit_txns: Option<Int>,
    block_commit_interval_ms: Option<Int>,
    sync_interval_seqnos: Option<Int>,
    max_in_flight_bytes: Option<Int>,
    shard_list: Option<String>,
    retry_max_attempts: Option<Int>,
    retry_max_backoff_ms: Option<Int>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawShardFilter {
    map_file: Option<String>,
    enforce_home: Option<bool>,
    unknown_shard_policy: Option<String>,
    unwanted_shard_policy: Option<String>,
    auto_create: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawControl {
    socket: Option<String>,
}

/// A TOML integer; a value of another type is reported as "expected an
/// integer" rather than naming a Rust type.
#[derive(Clone, Copy)]
struct Int(i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl serde::de::Visitor<'_> for IntVisitor {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Int, E> {
                i64::try_from(v)
                    .map(Int)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
        }
        d.deserialize_i64(IntVisitor)
    }
}

/// Field names of each section, taken from the raw structs themselves so the
/// unknown-key check cannot drift from what serde accepts.
fn section_fields(section: &str) -> Option<&'static [&'static str]> {
    use introspect::fields_of;
    Some(match section {
        "service" => fields_of::<RawService>(),
        "source" => fields_of::<RawSource>(),
        "replica" => fields_of::<RawReplica>(),
        "queue" => fields_of::<RawQueue>(),
        "apply" => fields_of::<RawApply>(),
        "shard_filter" => fields_of::<RawShardFilter>(),
        "control" => fields_of::<RawControl>(),
        _ => return None,
    })
}

/// Keys whose values are free-form tables (their own keys are checked when
/// converted, not as unknown keys).
const FREE_FORM_KEYS: &[&str] = &["source.origin_services"];

mod introspect {
    //! Reads the field list a derived `Deserialize` passes to
    //! `deserialize_struct`.
    use serde::de::{self, Deserialize, Deserializer, Visitor};
    use std::cell::Cell;

    type Fields = &'static [&'static str];

    struct Capture<'a>(&'a Cell<Option<Fields>>);

    impl<'de> Deserializer<'de> for Capture<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: Fields,
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.set(Some(fields));
            Err(de::Error::custom("fields captured"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str
            string bytes byte_buf option unit unit_struct newtype_struct seq
            tuple tuple_struct map enum identifier ignored_any
        }
    }

    /// The TOML keys a struct deriving `Deserialize` accepts.
    pub(super) fn fields_of<T: for<'de> Deserialize<'de>>() -> Fields {
        let cell = Cell::new(None);
        let _ = T::deserialize(Capture(&cell));
        cell.get().unwrap_or(&[])
    }
}

type EnvLookup<'a> = &'a dyn Fn(&str) -> Result<String, std::env::VarError>;

fn parse(text: &str, origin: &Path, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let parse_error = |message: String| ConfigError::Parse {
        file: origin.to_path_buf(),
        message,
    };
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| parse_error(redact::syntax_error_message(text, &e)))?;

    let mut b = Builder::new(origin, env);
    strip_unknown_keys(&mut table, &mut b.problems);
    // A password that is not a string: serde would quote it in a type error.
    for key in redact::non_string_passwords(&mut table, "") {
        b.problems.push(ConfigProblem::new(
            key,
            "must be a TOML string (the value is not shown: it is a password)",
        ));
    }

    // Without unknown keys, deserialize the text itself so type errors carry
    // line and column; otherwise the stripped table (type errors name the key).
    let raw = if b.problems.is_empty() {
        toml::from_str::<RawConfig>(text).map_err(|e| e.to_string())
    } else {
        RawConfig::deserialize(toml::Value::Table(table)).map_err(|e| e.to_string())
    };
    let raw = raw.map_err(|message| {
        let mut message = message.trim_end().to_string();
        for p in &b.problems {
            message.push_str(&format!("\nalso: {p}"));
        }
        parse_error(message)
    })?;

    let config = b.build(raw);
    let mut problems = b.problems;
    let reported: BTreeSet<String> = problems
        .iter()
        .map(|p| p.key.clone())
        .chain(b.placeholders)
        .collect();
    problems.extend(
        config
            .problems()
            .into_iter()
            .filter(|p| !reported.contains(&p.key)),
    );
    if problems.is_empty() {
        return Ok(config);
    }
    let top = introspect::fields_of::<RawConfig>();
    let rank = |key: &str| {
        let section = key.split('.').next().unwrap_or(key);
        top.iter().position(|s| *s == section).unwrap_or(top.len())
    };
    problems.sort_by(|x, y| rank(&x.key).cmp(&rank(&y.key)).then(x.key.cmp(&y.key)));
    Err(ConfigError::Invalid {
        file: origin.to_path_buf(),
        problems,
    })
}

/// Removes every key no section accepts, reporting each with its full path.
fn strip_unknown_keys(table: &mut toml::Table, problems: &mut Vec<ConfigProblem>) {
    table.retain(|section, value| {
        let Some(fields) = section_fields(section) else {
            problems.push(unknown_key(
                section,
                introspect::fields_of::<RawConfig>(),
                section,
            ));
            return false;
        };
        if let toml::Value::Table(keys) = value {
            keys.retain(|key, _| {
                let path = format!("{section}.{key}");
                if fields.contains(&key) || FREE_FORM_KEYS.contains(&path.as_str()) {
                    true
                } else {
                    problems.push(unknown_key(&path, fields, key));
                    false
                }
            });
        }
        true
    });
}

fn unknown_key(path: &str, known: &[&str], key: &str) -> ConfigProblem {
    let closest = known
        .iter()
        .map(|k| (edit_distance(k, key), *k))
        .filter(|(d, _)| *d <= 2)
        .min();
    match closest {
        Some((_, k)) => ConfigProblem::new(path, format!("unknown key (did you mean `{k}`?)")),
        None => ConfigProblem::new(path, "unknown key"),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Turns raw sections into a [`Config`], recording problems that the typed
/// config cannot represent (missing keys, out-of-range integers, unknown enum
/// names, password resolution). Where a value is unusable a placeholder is
/// stored and its key remembered, so validation does not report it twice.
struct Builder<'a> {
    origin: &'a Path,
    env: EnvLookup<'a>,
    problems: Vec<ConfigProblem>,
    placeholders: BTreeSet<String>,
}

impl<'a> Builder<'a> {
    fn new(origin: &'a Path, env: EnvLookup<'a>) -> Self {
        Builder {
            origin,
            env,
            problems: Vec::new(),
            placeholders: BTreeSet::new(),
        }
    }

    fn problem(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(ConfigProblem::new(key, message));
    }

    fn required(&mut self, key: &str, value: Option<String>) -> String {
        value.unwrap_or_else(|| {
            self.problem(key, "missing");
            String::new()
        })
    }

    fn int<T: TryFrom<i64>>(&mut self, key: &str, value: Option<Int>, default: T, b: Bounds) -> T {
        let Some(Int(v)) = value else { return default };
        match b.check(v.into()).map(|()| T::try_from(v)) {
            Ok(Ok(t)) => t,
            Err(m) => {
                self.problem(key, m);
                default
            }
            Ok(Err(_)) => {
                self.problem(key, format!("out of range, got {v}"));
                default
            }
        }
    }

    fn required_int<T: TryFrom<i64> + Default>(
        &mut self,
        key: &str,
        value: Option<Int>,
        b: Bounds,
    ) -> T {
        if value.is_none() {
            self.problem(key, "missing");
            return T::default();
        }
        self.int(key, value, T::default(), b)
    }

    fn choice<T: Copy>(
        &mut self,
        key: &str,
        value: Option<String>,
        default: T,
        options: &[(&str, T)],
    ) -> T {
        let Some(v) = value else { return default };
        match options.iter().find(|(name, _)| *name == v) {
            Some((_, t)) => *t,
            None => {
                let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
                self.problem(
                    key,
                    format!("must be one of {}, got {v:?}", names.join(", ")),
                );
                default
            }
        }
    }

    fn policy(&mut self, key: &str, value: Option<String>, default: ShardPolicy) -> ShardPolicy {
        let options = [
            ("accept", ShardPolicy::Accept),
            ("drop", ShardPolicy::Drop),
            ("warn", ShardPolicy::Warn),
            ("error", ShardPolicy::Error),
        ];
        self.choice(key, value, default, &options)
    }

    /// Resolves exactly one of `password`, `password_file`, `password_env`.
    fn password(
        &mut self,
        section: &str,
        text: Option<String>,
        file: Option<String>,
        env: Option<String>,
    ) -> Secret {
        let key = format!("{section}.password");
        let given: Vec<&str> = [
            ("password", text.is_some()),
            ("password_file", file.is_some()),
            ("password_env", env.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
        match (given.len(), text, file, env) {
            (0, ..) => {
                self.problem(
                    &key,
                    "missing: set one of password, password_file, password_env",
                );
                Secret::default()
            }
            (1, Some(text), _, _) => Secret(text),
            (1, _, Some(file), _) => self.password_from_file(section, &file),
            (1, _, _, Some(var)) => self.password_from_env(section, &var),
            _ => {
                self.problem(
                    &key,
                    format!(
                        "set only one of password, password_file, password_env (found {})",
                        given.join(", ")
                    ),
                );
                Secret::default()
            }
        }
    }

    fn password_from_file(&mut self, section: &str, file: &str) -> Secret {
        let key = format!("{section}.password_file");
        if file.is_empty() {
            self.problem(&key, "must not be empty");
            return Secret::default();
        }
        let dir = self.origin.parent().unwrap_or(Path::new(""));
        let path = dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(mut text) => {
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                if text.is_empty() {
                    self.problem(&key, format!("{} is empty", path.display()));
                }
                Secret(text)
            }
            Err(e) => {
                self.problem(&key, format!("cannot read {}: {e}", path.display()));
                Secret::default()
            }
        }
    }

    fn password_from_env(&mut self, section: &str, var: &str) -> Secret {
        let key = format!("{section}.password_env");
        if var.is_empty() {
            self.problem(&key, "must name an environment variable");
            return Secret::default();
        }
        match (self.env)(var) {
            Ok(text) if text.is_empty() => {
                self.problem(&key, format!("environment variable {var} is empty"));
                Secret::default()
            }
            Ok(text) => Secret(text),
            Err(std::env::VarError::NotPresent) => {
                self.problem(&key, format!("environment variable {var} is not set"));
                Secret::default()
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                self.problem(
                    &key,
                    format!("environment variable {var} is not valid UTF-8"),
                );
                Secret::default()
            }
        }
    }

    fn build(&mut self, raw: RawConfig) -> Config {
        let service = self.service(raw.service);
        let source = self.source(raw.source);
        let replica = self.replica(raw.replica);
        let queue = self.queue(raw.queue);
        let apply = self.apply(raw.apply);
        let shard_filter = self.shard_filter(raw.shard_filter);
        let control = ControlConfig {
            socket: self.required("control.socket", raw.control.socket).into(),
        };
        Config {
            service,
            source,
            replica,
            queue,
            apply,
            shard_filter,
            control,
            origin: self.origin.to_path_buf(),
        }
    }

    fn service(&mut self, raw: RawService) -> ServiceConfig {
        ServiceConfig {
            name: self.required("service.name", raw.name),
            role: self.choice(
                "service.role",
                raw.role,
                Role::Applier,
                &[("applier", Role::Applier), ("extractor", Role::Extractor)],
            ),
        }
    }

    fn source(&mut self, raw: RawSource) -> SourceConfig {
        const LIVE_KEYS: &[&str] = &[
            "host",
            "port",
            "user",
            "password",
            "password_file",
            "password_env",
            "server_id",
            "heartbeat_period_ms",
            "connect_timeout_ms",
            "reconnect_max_backoff_ms",
        ];
        const FILES_KEYS: &[&str] = &["binlog_dir", "binlog_index"];

        let kind = match raw.kind.as_deref() {
            Some("live") => Some(SourceKind::Live),
            Some("files") => Some(SourceKind::Files),
            Some(other) => {
                self.problem(
                    "source.kind",
                    format!("must be one of \"live\", \"files\", got {other:?}"),
                );
                None
            }
            None => {
                self.problem("source.kind", "missing: set \"live\" or \"files\"");
                None
            }
        };
        let given = |key: &str| match key {
            "host" => raw.host.is_some(),
            "port" => raw.port.is_some(),
            "user" => raw.user.is_some(),
            "password" => raw.password.is_some(),
            "password_file" => raw.password_file.is_some(),
            "password_env" => raw.password_env.is_some(),
            "server_id" => raw.server_id.is_some(),
            "heartbeat_period_ms" => raw.heartbeat_period_ms.is_some(),
            "connect_timeout_ms" => raw.connect_timeout_ms.is_some(),
            "reconnect_max_backoff_ms" => raw.reconnect_max_backoff_ms.is_some(),
            "binlog_dir" => raw.binlog_dir.is_some(),
            "binlog_index" => raw.binlog_index.is_some(),
            _ => false,
        };
        let foreign = match kind {
            Some(SourceKind::Live) => FILES_KEYS,
            Some(SourceKind::Files) => LIVE_KEYS,
            None => &[],
        };
        let misplaced: Vec<&str> = foreign.iter().copied().filter(|k| given(k)).collect();
        for key in misplaced {
            let kind = kind.map(SourceKind::as_str).unwrap_or_default();
            self.problem(
                &format!("source.{key}"),
                format!("not used with kind = \"{kind}\""),
            );
        }

        let endpoint = match kind {
            Some(SourceKind::Live) => SourceEndpoint::Live(LiveSourceConfig {
                host: self.required("source.host", raw.host),
                port: self.int("source.port", raw.port, DEFAULT_PORT, PORT),
                user: self.required("source.user", raw.user),
                password: self.password(
                    "source",
                    raw.password,
                    raw.password_file,
                    raw.password_env,
                ),
                server_id: self.required_int("source.server_id", raw.server_id, SERVER_ID),
                heartbeat_period_ms: self.int(
                    "source.heartbeat_period_ms",
                    raw.heartbeat_period_ms,
                    DEFAULT_HEARTBEAT_PERIOD_MS,
                    HEARTBEAT_MS,
                ),
                connect_timeout_ms: self.int(
                    "source.connect_timeout_ms",
                    raw.connect_timeout_ms,
                    DEFAULT_CONNECT_TIMEOUT_MS,
                    POSITIVE,
                ),
                reconnect_max_backoff_ms: self.int(
                    "source.reconnect_max_backoff_ms",
                    raw.reconnect_max_backoff_ms,
                    DEFAULT_RECONNECT_MAX_BACKOFF_MS,
                    POSITIVE,
                ),
            }),
            Some(SourceKind::Files) => SourceEndpoint::Files(FilesSourceConfig {
                binlog_dir: self.required("source.binlog_dir", raw.binlog_dir).into(),
                binlog_index: raw.binlog_index.map(PathBuf::from),
            }),
            None => {
                // The kind is unknown, so the kind's keys cannot be judged.
                for key in LIVE_KEYS.iter().chain(FILES_KEYS) {
                    self.placeholders.insert(format!("source.{key}"));
                }
                SourceEndpoint::Files(FilesSourceConfig {
                    binlog_dir: PathBuf::new(),
                    binlog_index: None,
                })
            }
        };

        let start = match raw.start {
            None => StartPosition::Takeover,
            Some(text) => text.parse().unwrap_or_else(|e: StartPositionError| {
                self.problem("source.start", e.0);
                StartPosition::Takeover
            }),
        };

        let mut origin_services = BTreeMap::new();
        for (id, name) in raw.origin_services.unwrap_or_default() {
            let key = format!("source.origin_services.{id}");
            match id.parse::<u32>() {
                Ok(n) if n > 0 && n.to_string() == id => {
                    origin_services.insert(n, name);
                }
                _ => self.problem(
                    &key,
                    "key must be a master server id (1 to 4294967295, no leading zeros)",
                ),
            }
        }

        SourceConfig {
            endpoint,
            start,
            origin_services,
        }
    }

    fn replica(&mut self, raw: RawReplica) -> ReplicaConfig {
        let socket = raw.socket.map(PathBuf::from);
        if let Some(path) = &socket {
            if !path.is_absolute() {
                self.problem(
                    "replica.socket",
                    format!(
                        "must be an absolute path, got {:?}",
                        path.display().to_string()
                    ),
                );
            }
        }
        ReplicaConfig {
            host: self.required("replica.host", raw.host),
            port: self.int("replica.port", raw.port, DEFAULT_PORT, PORT),
            socket,
            user: self.required("replica.user", raw.user),
            password: self.password("replica", raw.password, raw.password_file, raw.password_env),
            catalog_schema: raw.catalog_schema,
            sql_log_bin: raw.sql_log_bin.unwrap_or(true),
            preserve_origin: raw.preserve_origin.unwrap_or(false),
            connect_timeout_ms: self.int(
                "replica.connect_timeout_ms",
                raw.connect_timeout_ms,
                DEFAULT_CONNECT_TIMEOUT_MS,
                POSITIVE,
            ),
            allow_native_replication: raw.allow_native_replication.unwrap_or(false),
        }
    }

    fn queue(&mut self, raw: RawQueue) -> QueueConfig {
        QueueConfig {
            dir: self.required("queue.dir", raw.dir).into(),
            max_size_bytes: self.int(
                "queue.max_size_bytes",
                raw.max_size_bytes,
                DEFAULT_MAX_SIZE_BYTES,
                POSITIVE,
            ),
            retention_seqnos: self.int(
                "queue.retention_seqnos",
                raw.retention_seqnos,
                DEFAULT_RETENTION_SEQNOS,
                NON_NEGATIVE,
            ),
            segment_size_bytes: self.int(
                "queue.segment_size_bytes",
                raw.segment_size_bytes,
                DEFAULT_SEGMENT_SIZE_BYTES,
                POSITIVE,
            ),
            flush_interval_ms: self.int(
                "queue.flush_interval_ms",
                raw.flush_interval_ms,
                DEFAULT_FLUSH_INTERVAL_MS,
                POSITIVE,
            ),
            flush_bytes: self.int(
                "queue.flush_bytes",
                raw.flush_bytes,
                DEFAULT_FLUSH_BYTES,
                POSITIVE,
            ),
        }
    }

    fn apply(&mut self, raw: RawApply) -> ApplyConfig {
        ApplyConfig {
            channels: self.int("apply.channels", raw.channels, DEFAULT_CHANNELS, CHANNELS),
            block_commit_txns: self.int(
                "apply.block_commit_txns",
                raw.block_commit_txns,
                DEFAULT_BLOCK_COMMIT_TXNS,
                POSITIVE_U32,
            ),
            block_commit_interval_ms: self.int(
                "apply.block_commit_interval_ms",
                raw.block_commit_interval_ms,
                DEFAULT_BLOCK_COMMIT_INTERVAL_MS,
                NON_NEGATIVE,
            ),
            sync_interval_seqnos: self.int(
                "apply.sync_interval_seqnos",
                raw.sync_interval_seqnos,
                DEFAULT_SYNC_INTERVAL_SEQNOS,
                POSITIVE,
            ),
            max_in_flight_bytes: self.int(
                "apply.max_in_flight_bytes",
                raw.max_in_flight_bytes,
                DEFAULT_MAX_IN_FLIGHT_BYTES,
                POSITIVE,
            ),
            shard_list: raw.shard_list.map(PathBuf::from),
            retry_max_attempts: self.int(
                "apply.retry_max_attempts",
                raw.retry_max_attempts,
                DEFAULT_RETRY_MAX_ATTEMPTS,
                NON_NEGATIVE_U32,
            ),
            retry_max_backoff_ms: self.int(
                "apply.retry_max_backoff_ms",
                raw.retry_max_backoff_ms,
                DEFAULT_RETRY_MAX_BACKOFF_MS,
                POSITIVE,
            ),
        }
    }

    fn shard_filter(&mut self, raw: RawShardFilter) -> ShardFilterConfig {
        let d = ShardFilterConfig::default();
        ShardFilterConfig {
            map_file: raw.map_file.map(PathBuf::from),
            enforce_home: raw.enforce_home.unwrap_or(d.enforce_home),
            unknown_shard_policy: self.policy(
                "shard_filter.unknown_shard_policy",
                raw.unknown_shard_policy,
                d.unknown_shard_policy,
            ),
            unwanted_shard_policy: self.policy(
                "shard_filter.unwanted_shard_policy",
                raw.unwanted_shard_policy,
                d.unwanted_shard_policy,
            ),
            auto_create: raw.auto_create.unwrap_or(d.auto_create),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MINIMAL: &str = r#"
[service]
name = "sjc"

[source]
kind = "live"
host = "127.0.0.1"
user = "shardrep"
password = "source-pass-1"
server_id = 4242

[replica]
host = "127.0.0.1"
user = "shardrep"
password = "replica-pass-2"

[queue]
dir = "/tmp/q"

[control]
socket = "/tmp/c.sock"
"#;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")
    }

    /// Parses with a fixed environment instead of the process's.
    fn parse_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(text, Path::new("cfg.toml"), &|name| {
            vars.get(name)
                .cloned()
                .ok_or(std::env::VarError::NotPresent)
        })
    }

    fn problems(result: Result<Config, ConfigError>) -> Vec<(String, String)> {
        match result {
            Err(ConfigError::Invalid { problems, .. }) => {
                problems.into_iter().map(|p| (p.key, p.message)).collect()
            }
            Err(other) => panic!("expected Invalid, got {other}"),
            Ok(cfg) => panic!("expected Invalid, got {cfg:?}"),
        }
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, m)| (k.to_string(), m.to_string()))
            .collect()
    }

    /// MINIMAL with `from` replaced by `to` (which must occur once).
    fn edit(from: &str, to: &str) -> String {
        assert_eq!(MINIMAL.matches(from).count(), 1, "{from}");
        MINIMAL.replace(from, to)
    }

    #[test]
    fn minimal_config_and_its_defaults() {
        let cfg = Config::from_toml_str(MINIMAL, "conf/minimal.toml").unwrap();
        let expected = Config {
            service: ServiceConfig {
                name: "sjc".into(),
                role: Role::Applier,
            },
            source: SourceConfig {
                endpoint: SourceEndpoint::Live(LiveSourceConfig {
                    host: "127.0.0.1".into(),
                    port: 3306,
                    user: "shardrep".into(),
                    password: Secret::new("source-pass-1"),
                    server_id: 4242,
                    heartbeat_period_ms: 1000,
                    connect_timeout_ms: 10_000,
                    reconnect_max_backoff_ms: 30_000,
                }),
                start: StartPosition::Takeover,
                origin_services: BTreeMap::new(),
            },
            replica: ReplicaConfig {
                host: "127.0.0.1".into(),
                port: 3306,
                socket: None,
                user: "shardrep".into(),
                password: Secret::new("replica-pass-2"),
                catalog_schema: None,
                sql_log_bin: true,
                preserve_origin: false,
                connect_timeout_ms: 10_000,
                allow_native_replication: false,
            },
            queue: QueueConfig {
                dir: "/tmp/q".into(),
                max_size_bytes: 10_737_418_240,
                retention_seqnos: 0,
                segment_size_bytes: 67_108_864,
                flush_interval_ms: 100,
                flush_bytes: 4_194_304,
            },
            apply: ApplyConfig {
                channels: 8,
                block_commit_txns: 100,
                block_commit_interval_ms: 0,
                sync_interval_seqnos: 1000,
                max_in_flight_bytes: 67_108_864,
                shard_list: None,
                retry_max_attempts: 10,
                retry_max_backoff_ms: 5000,
            },
            shard_filter: ShardFilterConfig {
                map_file: None,
                enforce_home: false,
                unknown_shard_policy: ShardPolicy::Error,
                unwanted_shard_policy: ShardPolicy::Drop,
                auto_create: false,
            },
            control: ControlConfig {
                socket: "/tmp/c.sock".into(),
            },
            origin: "conf/minimal.toml".into(),
        };
        assert_eq!(cfg, expected);
        assert_eq!(cfg.apply, ApplyConfig::default());
        assert_eq!(cfg.shard_filter, ShardFilterConfig::default());
        assert_eq!(cfg.catalog_schema(), "shardrep_sjc");
        assert_eq!(cfg.source.kind(), SourceKind::Live);
        assert!(cfg.source.files().is_none());
        assert_eq!(
            cfg.source.live().unwrap().password.expose(),
            "source-pass-1"
        );
        cfg.validate().unwrap();
    }

    #[test]
    fn every_key_set_explicitly() {
        let text = r#"
[service]
name = "nyc_2"
role = "extractor"

[source]
kind = "files"
binlog_dir = "/var/lib/mysql"
binlog_index = "mysql-bin.index"
start = "mysql-bin.000042:1234"

[source.origin_services]
1 = "sjc"
2 = "nyc_2"

[replica]
host = "db2.example.com"
port = 3307
socket = "/run/mysqld/mysqld.sock"
user = "applier"
password_env = "REPLICA_PW"
catalog_schema = "tungsten_nyc"
sql_log_bin = false
preserve_origin = true
connect_timeout_ms = 2000

[queue]
dir = "q"
max_size_bytes = 1000000
retention_seqnos = 50
segment_size_bytes = 1000
flush_interval_ms = 7
flush_bytes = 99

[apply]
channels = 256
block_commit_txns = 1
block_commit_interval_ms = 20
sync_interval_seqnos = 10
shard_list = "conf/shard.list"
retry_max_attempts = 0
retry_max_backoff_ms = 100

[shard_filter]
map_file = "shard.map"
enforce_home = true
unknown_shard_policy = "warn"
unwanted_shard_policy = "accept"
auto_create = true

[control]
socket = "ctl.sock"
"#;
        let cfg = parse_with_env(text, &[("REPLICA_PW", "pw")]).unwrap();
        assert_eq!(cfg.service.role, Role::Extractor);
        assert_eq!(
            cfg.source.endpoint,
            SourceEndpoint::Files(FilesSourceConfig {
                binlog_dir: "/var/lib/mysql".into(),
                binlog_index: Some("mysql-bin.index".into()),
            })
        );
        assert_eq!(
            cfg.source.start,
            StartPosition::File {
                file: "mysql-bin.000042".into(),
                offset: 1234
            }
        );
        assert_eq!(
            cfg.source.origin_services,
            BTreeMap::from([(1, "sjc".to_string()), (2, "nyc_2".to_string())])
        );
        assert_eq!(cfg.replica.port, 3307);
        assert_eq!(cfg.replica.password.expose(), "pw");
        assert!(!cfg.replica.sql_log_bin);
        assert!(cfg.replica.preserve_origin);
        assert_eq!(
            cfg.replica.socket.as_deref(),
            Some(std::path::Path::new("/run/mysqld/mysqld.sock"))
        );
        assert_eq!(cfg.replica.connect_timeout_ms, 2000);
        assert_eq!(cfg.catalog_schema(), "tungsten_nyc");
        assert_eq!(
            cfg.queue,
            QueueConfig {
                dir: "q".into(),
                max_size_bytes: 1_000_000,
                retention_seqnos: 50,
                segment_size_bytes: 1000,
                flush_interval_ms: 7,
                flush_bytes: 99,
            }
        );
        assert_eq!(
            cfg.apply,
            ApplyConfig {
                channels: 256,
                block_commit_txns: 1,
                block_commit_interval_ms: 20,
                sync_interval_seqnos: 10,
                max_in_flight_bytes: 67_108_864,
                shard_list: Some("conf/shard.list".into()),
                retry_max_attempts: 0,
                retry_max_backoff_ms: 100,
            }
        );
        assert_eq!(
            cfg.shard_filter,
            ShardFilterConfig {
                map_file: Some("shard.map".into()),
                enforce_home: true,
                unknown_shard_policy: ShardPolicy::Warn,
                unwanted_shard_policy: ShardPolicy::Accept,
                auto_create: true,
            }
        );
        assert_eq!(cfg.control.socket, PathBuf::from("ctl.sock"));
    }

    #[test]
    fn unknown_keys_in_two_sections_are_reported_together() {
        let text = edit("[queue]\n", "[queue]\nmax_size = 5\n")
            + "\n[apply]\nchanels = 4\nchannels = 2\n\n[aply]\nx = 1\n";
        let text = text.replace("[replica]\n", "[replica]\npasword = \"oops\"\n");
        let err = parse_with_env(&text, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cfg.toml: invalid configuration:\n  \
             replica.pasword: unknown key (did you mean `password`?)\n  \
             queue.max_size: unknown key\n  \
             apply.chanels: unknown key (did you mean `channels`?)\n  \
             aply: unknown key (did you mean `apply`?)"
        );
        assert!(!err.to_string().contains("oops"));
    }

    #[test]
    fn missing_password_names_the_key() {
        let text = edit("password = \"replica-pass-2\"\n", "");
        assert_eq!(
            problems(parse_with_env(&text, &[])),
            pairs(&[(
                "replica.password",
                "missing: set one of password, password_file, password_env"
            )])
        );
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let text = edit("password = \"source-pass-1\"\n", "") + "\n[apply]\nchannels = 0\n";
        let err = parse_with_env(&text, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cfg.toml: invalid configuration:\n  \
             source.password: missing: set one of password, password_file, password_env\n  \
             apply.channels: must be between 1 and 256, got 0"
        );
    }

    #[test]
    fn an_empty_file_reports_every_required_key() {
        assert_eq!(
            problems(parse_with_env("", &[])),
            pairs(&[
                ("service.name", "missing"),
                ("source.kind", "missing: set \"live\" or \"files\""),
                ("replica.host", "missing"),
                (
                    "replica.password",
                    "missing: set one of password, password_file, password_env"
                ),
                ("replica.user", "missing"),
                ("queue.dir", "missing"),
                ("control.socket", "missing"),
            ])
        );
    }

    #[test]
    fn values_out_of_range_are_problems() {
        let text = edit("name = \"sjc\"", "name = \"sjc-east\"\nrole = \"both\"")
            .replace("server_id = 4242", "server_id = 0\nport = 70000")
            .replace(
                "[replica]\n",
                "[replica]\nport = 0\ncatalog_schema = \"bad name\"\n",
            )
            .replace(
                "[queue]\n",
                "[queue]\nmax_size_bytes = 10\nsegment_size_bytes = 11\nretention_seqnos = -1\n",
            )
            + "\n[apply]\nchannels = 257\nblock_commit_txns = 0\n\
               \n[shard_filter]\nunknown_shard_policy = \"ignore\"\n";
        assert_eq!(
            problems(parse_with_env(&text, &[])),
            pairs(&[
                (
                    "service.name",
                    "must be 1 to 48 characters of A-Z, a-z, 0-9 and _, got \"sjc-east\""
                ),
                (
                    "service.role",
                    "must be one of \"applier\", \"extractor\", got \"both\""
                ),
                ("source.port", "must be between 1 and 65535, got 70000"),
                (
                    "source.server_id",
                    "must be between 1 and 4294967295, got 0"
                ),
                (
                    "replica.catalog_schema",
                    "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and $, got \"bad name\""
                ),
                ("replica.port", "must be between 1 and 65535, got 0"),
                ("queue.retention_seqnos", "must be at least 0, got -1"),
                (
                    "queue.segment_size_bytes",
                    "must not exceed queue.max_size_bytes (10), got 11"
                ),
                (
                    "apply.block_commit_txns",
                    "must be between 1 and 4294967295, got 0"
                ),
                ("apply.channels", "must be between 1 and 256, got 257"),
                (
                    "shard_filter.unknown_shard_policy",
                    "must be one of \"accept\", \"drop\", \"warn\", \"error\", got \"ignore\""
                ),
            ])
        );
    }

    #[test]
    fn service_name_limits() {
        let name48 = "a".repeat(48);
        let ok = edit("name = \"sjc\"", &format!("name = \"{name48}\""));
        let cfg = parse_with_env(&ok, &[]).unwrap();
        assert_eq!(cfg.catalog_schema(), format!("shardrep_{name48}"));
        let long = edit("name = \"sjc\"", &format!("name = \"{name48}b\""));
        assert_eq!(problems(parse_with_env(&long, &[]))[0].0, "service.name");
        let empty = edit("name = \"sjc\"", "name = \"\"");
        assert_eq!(problems(parse_with_env(&empty, &[]))[0].0, "service.name");
    }

    #[test]
    fn validate_checks_a_config_changed_in_code() {
        let mut cfg = parse_with_env(MINIMAL, &[]).unwrap();
        cfg.apply.channels = 300;
        cfg.control.socket = PathBuf::from(format!("/tmp/{}", "s".repeat(120)));
        let err = cfg.validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "cfg.toml: invalid configuration:\n  \
             apply.channels: must be between 1 and 256, got 300\n  \
             control.socket: must be at most 107 bytes (Unix socket path limit), got 125"
        );
    }

    #[test]
    fn debug_and_display_never_show_passwords() {
        let cfg = parse_with_env(MINIMAL, &[]).unwrap();
        let debug = format!("{cfg:?}");
        let pretty = format!("{cfg:#?}");
        for text in [&debug, &pretty] {
            assert!(!text.contains("source-pass-1"), "{text}");
            assert!(!text.contains("replica-pass-2"), "{text}");
            assert!(text.contains("password: ***"), "{text}");
        }
        let secret = &cfg.replica.password;
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(secret.expose(), "replica-pass-2");
    }

    #[test]
    fn problems_never_show_passwords() {
        let text = edit(
            "password = \"replica-pass-2\"\n",
            "password = \"replica-pass-2\"\npassword_env = \"PW\"\n",
        );
        let err = parse_with_env(&text, &[("PW", "env-pass-3")]).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("replica-pass-2") && !shown.contains("env-pass-3"));
        assert_eq!(
            problems(Err(err)),
            pairs(&[(
                "replica.password",
                "set only one of password, password_file, password_env (found password, password_env)"
            )])
        );
    }

    #[test]
    fn password_env_resolution() {
        let text = edit(
            "password = \"replica-pass-2\"\n",
            "password_env = \"REPLICA_PW\"\n",
        );
        let cfg = parse_with_env(&text, &[("REPLICA_PW", "from-env")]).unwrap();
        assert_eq!(cfg.replica.password.expose(), "from-env");

        assert_eq!(
            problems(parse_with_env(&text, &[])),
            pairs(&[(
                "replica.password_env",
                "environment variable REPLICA_PW is not set"
            )])
        );
        assert_eq!(
            problems(parse_with_env(&text, &[("REPLICA_PW", "")])),
            pairs(&[(
                "replica.password_env",
                "environment variable REPLICA_PW is empty"
            )])
        );
    }

    #[test]
    fn password_env_reads_the_process_environment() {
        let var = "SHARDREP_CONFIG_TEST_PW_7731";
        std::env::set_var(var, "process-env-pw");
        let text = edit(
            "password = \"replica-pass-2\"\n",
            &format!("password_env = \"{var}\"\n"),
        );
        let cfg = Config::from_toml_str(&text, "cfg.toml").unwrap();
        assert_eq!(cfg.replica.password.expose(), "process-env-pw");
        std::env::remove_var(var);
    }

    #[test]
    fn password_file_resolution_relative_to_the_config_file() {
        let cfg = Config::load(fixtures().join("password_file.toml")).unwrap();
        // One trailing newline is removed; a file without one is used as is.
        assert_eq!(cfg.replica.password.expose(), "replica-secret");
        assert_eq!(
            cfg.source.live().unwrap().password.expose(),
            "source-secret"
        );

        let text = edit(
            "password = \"replica-pass-2\"\n",
            "password_file = \"no-such.password\"\n",
        );
        let origin = fixtures().join("inline.toml");
        let got = problems(Config::from_toml_str(&text, &origin));
        let missing = fixtures().join("no-such.password");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "replica.password_file");
        assert!(
            got[0]
                .1
                .starts_with(&format!("cannot read {}: ", missing.display())),
            "{}",
            got[0].1
        );
    }

    #[test]
    fn password_file_trims_exactly_one_newline() {
        let dir = std::env::temp_dir().join(format!("shardrep-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = edit(
            "password = \"replica-pass-2\"\n",
            "password_file = \"pw.txt\"\n",
        );
        for (content, expected) in [("a\r\n", "a"), ("b\n\n", "b\n"), (" c ", " c ")] {
            std::fs::write(dir.join("pw.txt"), content).unwrap();
            let cfg = Config::from_toml_str(&text, dir.join("c.toml")).unwrap();
            assert_eq!(cfg.replica.password.expose(), expected);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn start_positions() {
        let parse = |s: &str| s.parse::<StartPosition>();
        assert_eq!(parse("takeover"), Ok(StartPosition::Takeover));
        assert_eq!(parse("current"), Ok(StartPosition::Current));
        assert_eq!(
            parse("mysql-bin.000001:4"),
            Ok(StartPosition::File {
                file: "mysql-bin.000001".into(),
                offset: 4
            })
        );
        assert_eq!(
            parse("gtid:0-1-100,1-2-5"),
            Ok(StartPosition::Gtid("0-1-100,1-2-5".into()))
        );
        let err = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            err("yesterday"),
            "expected takeover, current, FILE:POS or gtid:D-S-N[,D-S-N...], got \"yesterday\""
        );
        assert_eq!(
            err("mysql-bin.000001:abc"),
            "expected FILE:POS with digits after ':', got \"mysql-bin.000001:abc\""
        );
        assert_eq!(
            err("mysql-bin.000001:"),
            "expected FILE:POS with digits after ':', got \"mysql-bin.000001:\""
        );
        assert_eq!(
            err(":4"),
            "expected FILE:POS with a binlog file name before ':', got \":4\""
        );
        assert_eq!(
            err("f:99999999999999999999"),
            "binlog position 99999999999999999999 is too large in \"f:99999999999999999999\""
        );
        assert_eq!(
            err("gtid:"),
            "expected gtid:D-S-N[,D-S-N...], got nothing after \"gtid:\""
        );
        assert_eq!(
            err("gtid:0-1"),
            "GTID \"0-1\" is not D-S-N (three unsigned integers joined by '-')"
        );
        assert_eq!(
            err("gtid:0-1-2, 1-1-3"),
            "GTID \" 1-1-3\" is not D-S-N (three unsigned integers joined by '-')"
        );
        assert_eq!(
            err("gtid:0--1-2"),
            "GTID \"0--1-2\" is not D-S-N (three unsigned integers joined by '-')"
        );
        assert_eq!(
            err("gtid:4294967296-1-2"),
            "GTID \"4294967296-1-2\" is out of range (domain and server id are 32-bit, sequence 64-bit)"
        );
        assert_eq!(
            err("gtid:0-1-2,0-2-3"),
            "GTID domain 0 appears more than once"
        );
    }

    #[test]
    fn bad_start_position_is_a_problem_of_source_start() {
        let text = edit(
            "server_id = 4242",
            "server_id = 4242\nstart = \"bin.1:xyz\"",
        );
        assert_eq!(
            problems(parse_with_env(&text, &[])),
            pairs(&[(
                "source.start",
                "expected FILE:POS with digits after ':', got \"bin.1:xyz\""
            )])
        );
    }

    proptest! {
        #[test]
        fn start_position_display_parses_back(
            file in "[a-z][a-z0-9._-]{0,20}".prop_filter("not gtid", |f| f != "gtid"),
            offset in any::<u64>(),
            gtids in proptest::collection::btree_map(any::<u32>(), (any::<u32>(), any::<u64>()), 1..5),
        ) {
            let list: Vec<String> = gtids.iter().map(|(d, (s, n))| format!("{d}-{s}-{n}")).collect();
            for pos in [
                StartPosition::File { file: file.clone(), offset },
                StartPosition::Gtid(list.join(",")),
                StartPosition::Takeover,
                StartPosition::Current,
            ] {
                prop_assert_eq!(pos.to_string().parse::<StartPosition>(), Ok(pos.clone()));
            }
        }
    }

    #[test]
    fn source_keys_must_match_the_kind() {
        let files = edit("kind = \"live\"", "kind = \"files\"\nbinlog_dir = \"/b\"");
        assert_eq!(
            problems(parse_with_env(&files, &[])),
            pairs(&[
                ("source.host", "not used with kind = \"files\""),
                ("source.password", "not used with kind = \"files\""),
                ("source.server_id", "not used with kind = \"files\""),
                ("source.user", "not used with kind = \"files\""),
            ])
        );
        let live = edit(
            "kind = \"live\"",
            "kind = \"live\"\nbinlog_index = \"x.index\"",
        );
        assert_eq!(
            problems(parse_with_env(&live, &[])),
            pairs(&[("source.binlog_index", "not used with kind = \"live\"")])
        );
        let unknown = edit("kind = \"live\"", "kind = \"network\"");
        assert_eq!(
            problems(parse_with_env(&unknown, &[])),
            pairs(&[(
                "source.kind",
                "must be one of \"live\", \"files\", got \"network\""
            )])
        );
        let files_without_dir = "[source]\nkind = \"files\"\n";
        let got = problems(parse_with_env(files_without_dir, &[]));
        assert!(got.contains(&("source.binlog_dir".into(), "missing".into())));
    }

    #[test]
    fn origin_services_keys_are_server_ids() {
        let text = MINIMAL.to_string()
            + "\n[source.origin_services]\n1 = \"sjc\"\n2 = \"bad-name\"\nx = \"nyc\"\n01 = \"nyc\"\n";
        assert_eq!(
            problems(parse_with_env(&text, &[])),
            pairs(&[
                (
                    "source.origin_services.01",
                    "key must be a master server id (1 to 4294967295, no leading zeros)"
                ),
                (
                    "source.origin_services.2",
                    "must be 1 to 48 characters of A-Z, a-z, 0-9 and _, got \"bad-name\""
                ),
                (
                    "source.origin_services.x",
                    "key must be a master server id (1 to 4294967295, no leading zeros)"
                ),
            ])
        );
    }

    #[test]
    fn type_error_names_the_file_and_line() {
        let text = edit("[replica]\n", "[replica]\nport = \"abc\"\n");
        let err = Config::from_toml_str(&text, "conf/bad.toml").unwrap_err();
        let ConfigError::Parse { file, message } = &err else {
            panic!("expected Parse, got {err}");
        };
        assert_eq!(file, Path::new("conf/bad.toml"));
        let line = text.lines().position(|l| l == "port = \"abc\"").unwrap() + 1;
        assert!(
            message.starts_with(&format!("TOML parse error at line {line}, column 8")),
            "{message}"
        );
        assert!(
            message.contains("invalid type: string \"abc\", expected an integer"),
            "{message}"
        );
        assert!(err
            .to_string()
            .starts_with("conf/bad.toml: TOML parse error"));
    }

    #[test]
    fn type_error_with_unknown_keys_names_the_key_and_lists_them() {
        let text = edit("[replica]\n", "[replica]\nport = \"abc\"\nprot = 1\n");
        let err = Config::from_toml_str(&text, "conf/bad.toml").unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.starts_with("conf/bad.toml: invalid type: string \"abc\""),
            "{shown}"
        );
        assert!(shown.contains("replica.port"), "{shown}");
        assert!(
            shown.ends_with("\nalso: replica.prot: unknown key (did you mean `port`?)"),
            "{shown}"
        );
    }

    #[test]
    fn syntax_error_names_the_file() {
        let err = Config::from_toml_str("[service\nname = 1\n", "x/y.toml").unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }));
        assert!(
            err.to_string()
                .starts_with("x/y.toml: TOML parse error at line 1"),
            "{err}"
        );
    }

    #[test]
    fn unreadable_file_is_a_read_error() {
        let path = fixtures().join("does-not-exist.toml");
        let err = Config::load(&path).unwrap_err();
        assert!(matches!(&err, ConfigError::Read { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound));
        assert_eq!(
            err.to_string(),
            format!("{}: cannot read configuration file", path.display())
        );
    }

    #[test]
    fn example_configuration_validates() {
        std::env::set_var("SHARDREP_PASSWORD", "example-pw");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/shardrep.toml");
        let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        cfg.validate().unwrap();
        assert_eq!(cfg.service.name, "sjc");
        assert_eq!(cfg.service.role, Role::Applier);
        let live = cfg.source.live().expect("live source");
        assert_eq!((live.host.as_str(), live.port), ("127.0.0.1", 13306));
        assert_eq!(live.user, "shardrep");
        assert_eq!(live.password.expose(), "example-pw");
        assert_eq!(cfg.source.start, StartPosition::Takeover);
        assert_eq!(
            (cfg.replica.host.as_str(), cfg.replica.port),
            ("127.0.0.1", 13307)
        );
        assert_eq!(cfg.replica.user, "shardrep");
        assert_eq!(cfg.replica.password.expose(), "example-pw");
        assert_eq!(cfg.catalog_schema(), "shardrep_sjc");
        assert_eq!(cfg.queue.dir, PathBuf::from("/tmp/shardrep/sjc/queue"));
        assert_eq!(
            cfg.control.socket,
            PathBuf::from("/tmp/shardrep/sjc/control.sock")
        );
        assert_eq!(cfg.shard_filter.map_file, Some(PathBuf::from("shard.map")));
        assert_eq!(cfg.apply.shard_list, Some(PathBuf::from("conf/shard.list")));
    }

    #[test]
    fn unknown_key_check_knows_every_section() {
        let top = introspect::fields_of::<RawConfig>();
        assert_eq!(
            top,
            [
                "service",
                "source",
                "replica",
                "queue",
                "apply",
                "shard_filter",
                "control"
            ]
        );
        for section in top {
            let fields = section_fields(section).unwrap();
            assert!(!fields.is_empty(), "{section}");
        }
        assert!(section_fields("source")
            .unwrap()
            .contains(&"origin_services"));
    }

    #[test]
    fn duration_and_size_keys_name_their_unit() {
        const UNITS: &[&str] = &["_ms", "_secs", "_bytes", "_seqnos", "_txns"];
        const MEASURES: &[&str] = &[
            "timeout",
            "interval",
            "period",
            "backoff",
            "size",
            "retention",
            "flush",
        ];
        for section in introspect::fields_of::<RawConfig>() {
            for key in section_fields(section).unwrap() {
                if MEASURES.iter().any(|m| key.contains(m)) {
                    assert!(
                        UNITS.iter().any(|u| key.ends_with(u)),
                        "{section}.{key} does not name its unit"
                    );
                }
            }
        }
    }
}
