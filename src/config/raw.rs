//! The TOML document as written, before any check: the raw sections the
//! parser deserializes, and the loose [`Int`] their integers are read as.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// The TOML document as written: every key optional, integers as TOML's
/// i64 ([`Int`]), enums as strings, so that missing keys and bad values become
/// problems (all reported together) rather than a first-error stop. Keys
/// that no field names are ignored here and reported by
/// [`super::keys::strip_unknown_keys`].
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawConfig {
    pub(super) service: RawService,
    pub(super) source: RawSource,
    pub(super) replica: RawReplica,
    pub(super) queue: RawQueue,
    pub(super) apply: RawApply,
    pub(super) shard_filter: RawShardFilter,
    pub(super) control: RawControl,
    pub(super) metrics: RawMetrics,
}

/// `[service]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawService {
    pub(super) name: Option<String>,
    pub(super) role: Option<String>,
    pub(super) stop_grace_ms: Option<Int>,
}

/// `[source]` as written, the keys of both kinds.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawSource {
    pub(super) kind: Option<String>,
    pub(super) start: Option<String>,
    pub(super) origin_services: Option<BTreeMap<String, String>>,
    pub(super) host: Option<String>,
    pub(super) port: Option<Int>,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) password_file: Option<String>,
    pub(super) password_env: Option<String>,
    pub(super) server_id: Option<Int>,
    pub(super) heartbeat_period_ms: Option<Int>,
    pub(super) connect_timeout_ms: Option<Int>,
    pub(super) reconnect_max_backoff_ms: Option<Int>,
    pub(super) binlog_dir: Option<String>,
    pub(super) binlog_index: Option<String>,
}

/// `[replica]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawReplica {
    pub(super) host: Option<String>,
    pub(super) port: Option<Int>,
    pub(super) socket: Option<String>,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) password_file: Option<String>,
    pub(super) password_env: Option<String>,
    pub(super) catalog_schema: Option<String>,
    pub(super) sql_log_bin: Option<bool>,
    pub(super) binlog_gtids: Option<String>,
    pub(super) preserve_origin: Option<bool>,
    pub(super) connect_timeout_ms: Option<Int>,
    pub(super) allow_native_replication: Option<bool>,
}

/// `[queue]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawQueue {
    pub(super) dir: Option<String>,
    pub(super) max_size_bytes: Option<Int>,
    pub(super) retention_seqnos: Option<Int>,
    pub(super) segment_size_bytes: Option<Int>,
    pub(super) flush_interval_ms: Option<Int>,
    pub(super) flush_bytes: Option<Int>,
    pub(super) fragment_bytes: Option<Int>,
}

/// `[apply]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawApply {
    pub(super) channels: Option<Int>,
    pub(super) block_commit_txns: Option<Int>,
    pub(super) block_commit_interval_ms: Option<Int>,
    pub(super) sync_interval_seqnos: Option<Int>,
    pub(super) max_in_flight_bytes: Option<Int>,
    pub(super) shard_list: Option<String>,
    pub(super) retry_max_attempts: Option<Int>,
    pub(super) retry_max_backoff_ms: Option<Int>,
    pub(super) parallelism: Option<String>,
    pub(super) commit_window_seqnos: Option<Int>,
    pub(super) compound_blocks: Option<bool>,
    pub(super) method: Option<String>,
}

/// `[shard_filter]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawShardFilter {
    pub(super) map_file: Option<String>,
    pub(super) enforce_home: Option<bool>,
    pub(super) unknown_shard_policy: Option<String>,
    pub(super) unwanted_shard_policy: Option<String>,
    pub(super) auto_create: Option<bool>,
}

/// `[control]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawControl {
    pub(super) socket: Option<String>,
}

/// `[metrics]` as written.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RawMetrics {
    pub(super) listen: Option<String>,
}

/// A TOML integer; a value of another type is reported as "expected an
/// integer" rather than naming a Rust type.
#[derive(Clone, Copy)]
pub(super) struct Int(pub(super) i64);

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
