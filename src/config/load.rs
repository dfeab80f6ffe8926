//! Loading: TOML text to a validated [`Config`], every problem reported at
//! once. The raw sections ([`super::raw`]) are turned into the typed ones
//! here, taking each key's default and bounds from [`super::defaults`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::defaults::{self, Bounds, IntKey};
use super::password::{self, EnvLookup, PasswordKeys};
use super::raw::{
    Int, RawApply, RawConfig, RawQueue, RawReplica, RawService, RawShardFilter, RawSource,
};
use super::start::StartPositionError;
use super::{
    keys, redact, ApplyConfig, ApplyMethod, BinlogGtids, Config, ConfigError, ConfigProblem,
    ControlConfig, FilesSourceConfig, LiveSourceConfig, MetricsConfig, Parallelism, QueueConfig,
    ReplicaConfig, Role, Secret, ServiceConfig, ShardFilterConfig, ShardPolicy, SourceConfig,
    SourceEndpoint, SourceKind, StartPosition,
};

/// Parses `text` as read from `origin`, resolving passwords with `env`, and
/// validates the result ([`super::Config::from_toml_str`] with the process's
/// environment).
///
/// The steps: TOML syntax (a stop, [`redact`]ed), unknown keys and
/// non-string passwords (removed and reported), the raw sections (a type
/// error stops, listing the problems found so far), the typed
/// [`Config`] with every missing or bad value reported, then the
/// validation rules for what was not reported yet.
pub(super) fn parse(text: &str, origin: &Path, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let parse_error = |message: String| ConfigError::Parse {
        file: origin.to_path_buf(),
        message,
    };
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| parse_error(redact::syntax_error_message(text, &e)))?;

    let mut b = Builder::new(origin, env);
    b.problems = keys::strip_unknown_keys(&mut table);
    b.source_keys = table
        .get("source")
        .and_then(toml::Value::as_table)
        .map(|keys| keys.keys().cloned().collect())
        .unwrap_or_default();
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
    let top = keys::sections();
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

/// Turns raw sections into a [`Config`], recording problems that the typed
/// config cannot represent (missing keys, out-of-range integers, unknown enum
/// names, password resolution). Where a value is unusable a placeholder is
/// stored and its key remembered, so validation does not report it twice.
struct Builder<'a> {
    origin: &'a Path,
    env: EnvLookup<'a>,
    /// The keys written in `[source]` (all known), to tell the keys of the
    /// other kind.
    source_keys: Vec<String>,
    problems: Vec<ConfigProblem>,
    placeholders: BTreeSet<String>,
}

impl<'a> Builder<'a> {
    fn new(origin: &'a Path, env: EnvLookup<'a>) -> Self {
        Builder {
            origin,
            env,
            source_keys: Vec::new(),
            problems: Vec::new(),
            placeholders: BTreeSet::new(),
        }
    }

    fn problem(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(ConfigProblem::new(key, message));
    }

    /// A required text key; `missing` when absent.
    fn required(&mut self, key: &str, value: Option<String>) -> String {
        value.unwrap_or_else(|| {
            self.problem(key, "missing");
            String::new()
        })
    }

    /// An integer key: its default when absent, a problem (and the default)
    /// when out of bounds.
    fn int<T: TryFrom<i64> + Copy>(&mut self, key: &IntKey<T>, value: Option<Int>) -> T {
        self.int_within(key.key, value, key.default, key.bounds)
    }

    /// A required integer key; `missing` when absent.
    fn required_int<T: TryFrom<i64> + Default>(
        &mut self,
        key: &str,
        value: Option<Int>,
        bounds: Bounds,
    ) -> T {
        if value.is_none() {
            self.problem(key, "missing");
            return T::default();
        }
        self.int_within(key, value, T::default(), bounds)
    }

    fn int_within<T: TryFrom<i64>>(
        &mut self,
        key: &str,
        value: Option<Int>,
        default: T,
        bounds: Bounds,
    ) -> T {
        let Some(Int(v)) = value else { return default };
        match bounds.check(v.into()).map(|()| T::try_from(v)) {
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

    /// A key naming one of `options` (by its `Display`): `default` when
    /// absent, a problem (and `default`) when it names none.
    fn choice<T: Copy + fmt::Display>(
        &mut self,
        key: &str,
        value: Option<String>,
        default: T,
        options: &[T],
    ) -> T {
        match value {
            Some(v) => self.one_of(key, &v, options).unwrap_or(default),
            None => default,
        }
    }

    /// `replica.binlog_gtids`, or the mode the older `sql_log_bin` names
    /// (`true`: `"own"`, `false`: `"off"`); both written must agree.
    fn binlog_gtids(&mut self, mode: Option<String>, sql_log_bin: Option<bool>) -> BinlogGtids {
        let legacy = sql_log_bin.map(|on| {
            if on {
                BinlogGtids::Own
            } else {
                BinlogGtids::Off
            }
        });
        let Some(text) = mode else {
            return legacy.unwrap_or(defaults::REPLICA_BINLOG_GTIDS);
        };
        let chosen = self.choice(
            "replica.binlog_gtids",
            Some(text),
            defaults::REPLICA_BINLOG_GTIDS,
            &BinlogGtids::ALL,
        );
        if let (Some(on), Some(legacy)) = (sql_log_bin, legacy) {
            // Both written: they must say the same (true is "own").
            if legacy != chosen {
                self.problem(
                    "replica.sql_log_bin",
                    format!(
                        "is {on}, which means binlog_gtids = {:?}, but binlog_gtids = {:?} is \
                         written too; remove sql_log_bin (binlog_gtids replaces it)",
                        legacy.as_str(),
                        chosen.as_str(),
                    ),
                );
            }
        }
        chosen
    }

    /// The option `value` names, or a problem listing them.
    fn one_of<T: Copy + fmt::Display>(
        &mut self,
        key: &str,
        value: &str,
        options: &[T],
    ) -> Option<T> {
        let found = options.iter().find(|o| o.to_string() == value).copied();
        if found.is_none() {
            let names: Vec<String> = options
                .iter()
                .map(|o| format!("{:?}", o.to_string()))
                .collect();
            self.problem(
                key,
                format!("must be one of {}, got {value:?}", names.join(", ")),
            );
        }
        found
    }

    /// The password of `section`; a problem (and an empty secret) when it
    /// cannot be resolved.
    fn password(&mut self, section: &str, keys: PasswordKeys) -> Secret {
        password::resolve(section, keys, self.origin, self.env).unwrap_or_else(|problem| {
            self.problems.push(problem);
            Secret::default()
        })
    }

    /// The typed configuration of `raw`.
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
        let metrics = MetricsConfig {
            listen: raw.metrics.listen.and_then(|text| {
                text.parse()
                    .map_err(|_| {
                        self.problem(
                            "metrics.listen",
                            format!(
                                "{text:?} is not a numeric IP address and port (e.g. \
                                 \"127.0.0.1:9104\"; a host name is not resolved)"
                            ),
                        )
                    })
                    .ok()
            }),
        };
        Config {
            service,
            source,
            replica,
            queue,
            apply,
            shard_filter,
            control,
            metrics,
            origin: self.origin.to_path_buf(),
        }
    }

    /// `[service]`.
    fn service(&mut self, raw: RawService) -> ServiceConfig {
        ServiceConfig {
            name: self.required("service.name", raw.name),
            role: self.choice("service.role", raw.role, Role::default(), &Role::ALL),
            stop_grace_ms: self.int(&defaults::SERVICE_STOP_GRACE_MS, raw.stop_grace_ms),
        }
    }

    /// `[source]`: the kind, its keys (the other kind's are problems),
    /// `start` and `origin_services`.
    fn source(&mut self, raw: RawSource) -> SourceConfig {
        // Every other key of the section belongs to one kind: these to
        // files, the rest to live.
        const COMMON_KEYS: &[&str] = &["kind", "start", "origin_services"];
        const FILES_KEYS: &[&str] = &["binlog_dir", "binlog_index"];
        let kind_keys = || {
            keys::section_fields("source")
                .unwrap_or_default()
                .iter()
                .copied()
                .filter(|key| !COMMON_KEYS.contains(key))
        };

        let kind = match raw.kind {
            Some(kind) => self.one_of("source.kind", &kind, &SourceKind::ALL),
            None => {
                self.problem("source.kind", "missing: set \"live\" or \"files\"");
                None
            }
        };
        let misplaced: Vec<&str> = kind_keys()
            .filter(|key| match kind {
                Some(SourceKind::Live) => FILES_KEYS.contains(key),
                Some(SourceKind::Files) => !FILES_KEYS.contains(key),
                None => false,
            })
            .filter(|key| self.source_keys.iter().any(|k| k == key))
            .collect();
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
                port: self.int(&defaults::SOURCE_PORT, raw.port),
                user: self.required("source.user", raw.user),
                password: self.password(
                    "source",
                    PasswordKeys {
                        text: raw.password,
                        file: raw.password_file,
                        env: raw.password_env,
                    },
                ),
                server_id: self.required_int(
                    "source.server_id",
                    raw.server_id,
                    defaults::SOURCE_SERVER_ID,
                ),
                heartbeat_period_ms: self.int(
                    &defaults::SOURCE_HEARTBEAT_PERIOD_MS,
                    raw.heartbeat_period_ms,
                ),
                connect_timeout_ms: self
                    .int(&defaults::SOURCE_CONNECT_TIMEOUT_MS, raw.connect_timeout_ms),
                reconnect_max_backoff_ms: self.int(
                    &defaults::SOURCE_RECONNECT_MAX_BACKOFF_MS,
                    raw.reconnect_max_backoff_ms,
                ),
            }),
            Some(SourceKind::Files) => SourceEndpoint::Files(FilesSourceConfig {
                binlog_dir: self.required("source.binlog_dir", raw.binlog_dir).into(),
                binlog_index: raw.binlog_index.map(PathBuf::from),
            }),
            None => {
                // The kind is unknown, so the kind's keys cannot be judged.
                for key in kind_keys() {
                    self.placeholders.insert(format!("source.{key}"));
                }
                SourceEndpoint::Files(FilesSourceConfig {
                    binlog_dir: PathBuf::new(),
                    binlog_index: None,
                })
            }
        };

        let start = match raw.start {
            None => StartPosition::default(),
            Some(text) => text.parse().unwrap_or_else(|e: StartPositionError| {
                self.problem("source.start", e.to_string());
                StartPosition::default()
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

    /// `[replica]`.
    fn replica(&mut self, raw: RawReplica) -> ReplicaConfig {
        let from_sql_log_bin = raw.binlog_gtids.is_none() && raw.sql_log_bin.is_some();
        let binlog_gtids = self.binlog_gtids(raw.binlog_gtids, raw.sql_log_bin);
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
            port: self.int(&defaults::REPLICA_PORT, raw.port),
            socket,
            user: self.required("replica.user", raw.user),
            password: self.password(
                "replica",
                PasswordKeys {
                    text: raw.password,
                    file: raw.password_file,
                    env: raw.password_env,
                },
            ),
            catalog_schema: raw.catalog_schema,
            sql_log_bin: binlog_gtids.logs(),
            binlog_gtids,
            binlog_gtids_from_sql_log_bin: from_sql_log_bin,
            preserve_origin: raw
                .preserve_origin
                .unwrap_or(defaults::REPLICA_PRESERVE_ORIGIN),
            connect_timeout_ms: self.int(
                &defaults::REPLICA_CONNECT_TIMEOUT_MS,
                raw.connect_timeout_ms,
            ),
            allow_native_replication: raw
                .allow_native_replication
                .unwrap_or(defaults::REPLICA_ALLOW_NATIVE_REPLICATION),
        }
    }

    /// `[queue]`.
    fn queue(&mut self, raw: RawQueue) -> QueueConfig {
        QueueConfig {
            dir: self.required("queue.dir", raw.dir).into(),
            max_size_bytes: self.int(&defaults::QUEUE_MAX_SIZE_BYTES, raw.max_size_bytes),
            retention_seqnos: self.int(&defaults::QUEUE_RETENTION_SEQNOS, raw.retention_seqnos),
            segment_size_bytes: self
                .int(&defaults::QUEUE_SEGMENT_SIZE_BYTES, raw.segment_size_bytes),
            flush_interval_ms: self.int(&defaults::QUEUE_FLUSH_INTERVAL_MS, raw.flush_interval_ms),
            flush_bytes: self.int(&defaults::QUEUE_FLUSH_BYTES, raw.flush_bytes),
            fragment_bytes: self.int(&defaults::QUEUE_FRAGMENT_BYTES, raw.fragment_bytes),
        }
    }

    /// `[apply]`.
    fn apply(&mut self, raw: RawApply) -> ApplyConfig {
        ApplyConfig {
            channels: self.int(&defaults::APPLY_CHANNELS, raw.channels),
            block_commit_txns: self.int(&defaults::APPLY_BLOCK_COMMIT_TXNS, raw.block_commit_txns),
            block_commit_interval_ms: self.int(
                &defaults::APPLY_BLOCK_COMMIT_INTERVAL_MS,
                raw.block_commit_interval_ms,
            ),
            sync_interval_seqnos: self.int(
                &defaults::APPLY_SYNC_INTERVAL_SEQNOS,
                raw.sync_interval_seqnos,
            ),
            max_in_flight_bytes: self.int(
                &defaults::APPLY_MAX_IN_FLIGHT_BYTES,
                raw.max_in_flight_bytes,
            ),
            shard_list: raw.shard_list.map(PathBuf::from),
            retry_max_attempts: self
                .int(&defaults::APPLY_RETRY_MAX_ATTEMPTS, raw.retry_max_attempts),
            retry_max_backoff_ms: self.int(
                &defaults::APPLY_RETRY_MAX_BACKOFF_MS,
                raw.retry_max_backoff_ms,
            ),
            parallelism: self.choice(
                "apply.parallelism",
                raw.parallelism,
                defaults::APPLY_PARALLELISM,
                &Parallelism::ALL,
            ),
            commit_window_seqnos: self.int(
                &defaults::APPLY_COMMIT_WINDOW_SEQNOS,
                raw.commit_window_seqnos,
            ),
            compound_blocks: raw
                .compound_blocks
                .unwrap_or(defaults::APPLY_COMPOUND_BLOCKS),
            method: self.choice(
                "apply.method",
                raw.method,
                defaults::APPLY_METHOD,
                &ApplyMethod::ALL,
            ),
        }
    }

    /// `[shard_filter]`.
    fn shard_filter(&mut self, raw: RawShardFilter) -> ShardFilterConfig {
        let d = ShardFilterConfig::default();
        ShardFilterConfig {
            map_file: raw.map_file.map(PathBuf::from),
            enforce_home: raw.enforce_home.unwrap_or(d.enforce_home),
            unknown_shard_policy: self.choice(
                "shard_filter.unknown_shard_policy",
                raw.unknown_shard_policy,
                d.unknown_shard_policy,
                &ShardPolicy::ALL,
            ),
            unwanted_shard_policy: self.choice(
                "shard_filter.unwanted_shard_policy",
                raw.unwanted_shard_policy,
                d.unwanted_shard_policy,
                &ShardPolicy::ALL,
            ),
            auto_create: raw.auto_create.unwrap_or(d.auto_create),
        }
    }
}
