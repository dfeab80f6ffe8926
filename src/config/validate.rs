//! The rules on a configuration's values, checked together:
//! [`Config::validate`] and the parser both report what [`Config::problems`]
//! finds. The names' rules ([`check_service_name`]) are also those of the
//! shard map's `master` column.

use std::path::Path;

use super::defaults::{self, IntKey};
use super::start::check_gtid_list;
use super::{Config, ConfigProblem, Role, SourceEndpoint, StartPosition};

/// Longest `control.socket`, in bytes: `sun_path` holds 108 bytes with the
/// terminating NUL.
const SOCKET_PATH_MAX_BYTES: usize = 107;

/// Longest service name, in characters.
pub const SERVICE_NAME_MAX_CHARS: usize = 48;

/// Longest catalog schema name, in characters (MariaDB's identifier
/// limit).
const SCHEMA_NAME_MAX_CHARS: usize = 64;

impl Config {
    /// Every rule broken by the values, as [`Config::validate`] reports
    /// them (in the order checked; the parser sorts).
    pub(super) fn problems(&self) -> Vec<ConfigProblem> {
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
                p.int(&defaults::SOURCE_PORT, live.port);
                p.non_empty("source.user", &live.user);
                if let Err(m) = defaults::SOURCE_SERVER_ID.check(live.server_id.into()) {
                    p.push("source.server_id", m);
                }
                p.int(
                    &defaults::SOURCE_HEARTBEAT_PERIOD_MS,
                    live.heartbeat_period_ms,
                );
                p.int(
                    &defaults::SOURCE_CONNECT_TIMEOUT_MS,
                    live.connect_timeout_ms,
                );
                p.int(
                    &defaults::SOURCE_RECONNECT_MAX_BACKOFF_MS,
                    live.reconnect_max_backoff_ms,
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
        p.int(&defaults::REPLICA_PORT, self.replica.port);
        p.non_empty("replica.user", &self.replica.user);
        if let Some(schema) = &self.replica.catalog_schema {
            if let Err(m) = check_schema_name(schema) {
                p.push("replica.catalog_schema", m);
            }
        }
        p.int(
            &defaults::REPLICA_CONNECT_TIMEOUT_MS,
            self.replica.connect_timeout_ms,
        );

        let q = &self.queue;
        p.path("queue.dir", &q.dir);
        p.int(&defaults::QUEUE_MAX_SIZE_BYTES, q.max_size_bytes);
        p.int(&defaults::QUEUE_RETENTION_SEQNOS, q.retention_seqnos);
        p.int(&defaults::QUEUE_SEGMENT_SIZE_BYTES, q.segment_size_bytes);
        if q.segment_size_bytes > q.max_size_bytes && q.max_size_bytes > 0 {
            p.push(
                "queue.segment_size_bytes",
                format!(
                    "must not exceed queue.max_size_bytes ({}), got {}",
                    q.max_size_bytes, q.segment_size_bytes
                ),
            );
        }
        p.int(&defaults::QUEUE_FLUSH_INTERVAL_MS, q.flush_interval_ms);
        p.int(&defaults::QUEUE_FLUSH_BYTES, q.flush_bytes);
        p.int(&defaults::QUEUE_FRAGMENT_BYTES, q.fragment_bytes);

        let a = &self.apply;
        p.int(&defaults::APPLY_CHANNELS, a.channels);
        p.int(&defaults::APPLY_BLOCK_COMMIT_TXNS, a.block_commit_txns);
        p.int(
            &defaults::APPLY_BLOCK_COMMIT_INTERVAL_MS,
            a.block_commit_interval_ms,
        );
        p.int(
            &defaults::APPLY_SYNC_INTERVAL_SEQNOS,
            a.sync_interval_seqnos,
        );
        p.int(&defaults::APPLY_MAX_IN_FLIGHT_BYTES, a.max_in_flight_bytes);
        p.int(
            &defaults::APPLY_COMMIT_WINDOW_SEQNOS,
            a.commit_window_seqnos,
        );
        if let Some(list) = &a.shard_list {
            p.path("apply.shard_list", list);
        }
        p.int(
            &defaults::APPLY_RETRY_MAX_BACKOFF_MS,
            a.retry_max_backoff_ms,
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

/// The problems found so far, in the order found.
#[derive(Default)]
struct Problems(Vec<ConfigProblem>);

impl Problems {
    fn push(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigProblem::new(key, message));
    }

    /// An integer key's value against its bounds.
    fn int<T: Into<i128>>(&mut self, key: &IntKey<T>, value: T) {
        if let Err(m) = key.bounds.check(value.into()) {
            self.push(key.key, m);
        }
    }

    /// A required text that must not be empty.
    fn non_empty(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            self.push(key, "must not be empty");
        }
    }

    /// A host name or address: not empty, no white space.
    fn host(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            self.push(key, "must not be empty");
        } else if value.chars().any(char::is_whitespace) {
            self.push(key, format!("must not contain spaces, got {value:?}"));
        }
    }

    /// A path that must not be empty.
    fn path(&mut self, key: &str, value: &Path) {
        if value.as_os_str().is_empty() {
            self.push(key, "must not be empty");
        }
    }
}

/// Whether `name` is a service name: 1 to [`SERVICE_NAME_MAX_CHARS`]
/// characters of `A-Z a-z 0-9 _` (`service.name`, the values of
/// `source.origin_services`, the shard map's `master` column).
pub fn is_service_name(name: &str) -> bool {
    let len = name.chars().count();
    (1..=SERVICE_NAME_MAX_CHARS).contains(&len)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a service name ([`is_service_name`]).
///
/// # Errors
/// `must be 1 to 48 characters of A-Z, a-z, 0-9 and _, got "NAME"`.
pub(super) fn check_service_name(name: &str) -> Result<(), String> {
    if is_service_name(name) {
        Ok(())
    } else {
        Err(format!(
            "must be 1 to {SERVICE_NAME_MAX_CHARS} characters of A-Z, a-z, 0-9 and _, got {name:?}"
        ))
    }
}

/// Checks a catalog schema name: 1 to 64 characters of `A-Z a-z 0-9 _ $`.
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
