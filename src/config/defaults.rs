//! The default and the bounds of every configuration key, written once.
//!
//! The parser (a key left out takes its default, a value out of bounds is a
//! problem), [`Config::validate`](super::Config::validate), the typed
//! sections' `Default`s and constructors
//! ([`QueueConfig::with_defaults`](super::QueueConfig::with_defaults) and
//! [`LiveSourceConfig::new`](super::LiveSourceConfig::new), which the
//! runtime options built without a configuration use) and the test that
//! checks the commented example `conf/shardrep.toml` all read them from
//! here.

use super::{ApplyMethod, Parallelism, ShardPolicy};

/// Inclusive bounds of an integer key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Least value allowed.
    pub min: i128,
    /// Greatest value allowed.
    pub max: i128,
}

impl Bounds {
    /// Bounds `min..=max`.
    pub const fn new(min: i128, max: i128) -> Bounds {
        Bounds { min, max }
    }

    /// Checks `value`.
    ///
    /// # Errors
    /// `must be between MIN and MAX, got VALUE`, or `must be at least MIN,
    /// got VALUE` when the bounds reach past `i64` (a TOML integer cannot
    /// exceed them).
    pub fn check(self, value: i128) -> Result<(), String> {
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

/// An integer key with a default: its full dotted name, the value taken
/// when it is left out, and the values allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntKey<T> {
    /// Full dotted name, e.g. `apply.channels`.
    pub key: &'static str,
    /// The value when the key is left out.
    pub default: T,
    /// The values allowed.
    pub bounds: Bounds,
}

impl<T> IntKey<T> {
    /// The key `key` with `default` and `bounds`.
    pub const fn new(key: &'static str, default: T, bounds: Bounds) -> IntKey<T> {
        IntKey {
            key,
            default,
            bounds,
        }
    }
}

const PORT: Bounds = Bounds::new(1, 65_535);
const POSITIVE: Bounds = Bounds::new(1, u64::MAX as i128);
const NON_NEGATIVE: Bounds = Bounds::new(0, u64::MAX as i128);
const POSITIVE_U32: Bounds = Bounds::new(1, u32::MAX as i128);
const NON_NEGATIVE_U32: Bounds = Bounds::new(0, u32::MAX as i128);

/// Default of `source.port` and `replica.port`: MariaDB's port.
pub const DEFAULT_PORT: u16 = 3306;
/// Default of `source.connect_timeout_ms` and `replica.connect_timeout_ms`.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// `source.server_id` (required, no default): a nonzero 32-bit server id.
pub const SOURCE_SERVER_ID: Bounds = Bounds::new(1, u32::MAX as i128);

/// `source.port`.
pub const SOURCE_PORT: IntKey<u16> = IntKey::new("source.port", DEFAULT_PORT, PORT);
/// `source.heartbeat_period_ms`: the largest period MariaDB accepts
/// (`MASTER_HEARTBEAT_PERIOD` up to 4294967 s).
pub const SOURCE_HEARTBEAT_PERIOD_MS: IntKey<u64> = IntKey::new(
    "source.heartbeat_period_ms",
    1000,
    Bounds::new(1, 4_294_967_000),
);
/// `service.stop_grace_ms`: how long SIGTERM/SIGINT wait for a clean stop
/// that open temporary tables of master sessions refuse, before the
/// service stops at once (losing them).
pub const SERVICE_STOP_GRACE_MS: IntKey<u64> =
    IntKey::new("service.stop_grace_ms", 60_000, POSITIVE);
/// `source.connect_timeout_ms`.
pub const SOURCE_CONNECT_TIMEOUT_MS: IntKey<u64> = IntKey::new(
    "source.connect_timeout_ms",
    DEFAULT_CONNECT_TIMEOUT_MS,
    POSITIVE,
);
/// `source.reconnect_max_backoff_ms`.
pub const SOURCE_RECONNECT_MAX_BACKOFF_MS: IntKey<u64> =
    IntKey::new("source.reconnect_max_backoff_ms", 30_000, POSITIVE);

/// `replica.port`.
pub const REPLICA_PORT: IntKey<u16> = IntKey::new("replica.port", DEFAULT_PORT, PORT);
/// `replica.connect_timeout_ms`.
pub const REPLICA_CONNECT_TIMEOUT_MS: IntKey<u64> = IntKey::new(
    "replica.connect_timeout_ms",
    DEFAULT_CONNECT_TIMEOUT_MS,
    POSITIVE,
);
/// `apply.compound_blocks`: on. In one run of the catch-up benchmark per
/// setting (cache data, no replica binlog; issue 17's note) it cut
/// shardrep's CPU per transaction from 68 to 59 µs (8 schemas, flush=2),
/// 78 to 58 (flush=1) and 117 to 82 (one hot schema, flush=2), and the
/// replica's from 156 to 150, 196 to 177 and 292 to 302 µs, with catch-up
/// ratios 1.47x to 1.57x, 2.46x to 2.77x and 0.88x to 1.00x.
pub const APPLY_COMPOUND_BLOCKS: bool = true;
/// `replica.binlog_gtids` when neither it nor `sql_log_bin` is written:
/// as native replication does, the master's GTIDs with
/// `log_slave_updates`, nothing without.
pub const REPLICA_BINLOG_GTIDS: crate::config::BinlogGtids = crate::config::BinlogGtids::Auto;
/// `replica.preserve_origin`.
pub const REPLICA_PRESERVE_ORIGIN: bool = false;
/// `replica.allow_native_replication`.
pub const REPLICA_ALLOW_NATIVE_REPLICATION: bool = false;

/// `queue.max_size_bytes`: 10 GiB.
pub const QUEUE_MAX_SIZE_BYTES: IntKey<u64> =
    IntKey::new("queue.max_size_bytes", 10 << 30, POSITIVE);
/// `queue.retention_seqnos`.
pub const QUEUE_RETENTION_SEQNOS: IntKey<u64> =
    IntKey::new("queue.retention_seqnos", 0, NON_NEGATIVE);
/// `queue.segment_size_bytes`: 64 MiB.
pub const QUEUE_SEGMENT_SIZE_BYTES: IntKey<u64> =
    IntKey::new("queue.segment_size_bytes", 64 << 20, POSITIVE);
/// `queue.flush_interval_ms`.
pub const QUEUE_FLUSH_INTERVAL_MS: IntKey<u64> =
    IntKey::new("queue.flush_interval_ms", 100, POSITIVE);
/// `queue.flush_bytes`: 4 MiB.
pub const QUEUE_FLUSH_BYTES: IntKey<u64> = IntKey::new("queue.flush_bytes", 4 << 20, POSITIVE);
/// `queue.fragment_bytes`: 8 MiB.
pub const QUEUE_FRAGMENT_BYTES: IntKey<u64> =
    IntKey::new("queue.fragment_bytes", 8 << 20, POSITIVE);

/// `apply.channels`.
pub const APPLY_CHANNELS: IntKey<u16> = IntKey::new("apply.channels", 8, Bounds::new(1, 256));
/// `apply.block_commit_txns`. The default was chosen from a sweep (1, 10,
/// 25, 50, 100, 200, 400) on the quick catch-up backlog (`bench/catchup`,
/// 8 schemas, 11,770 transactions, two rounds): at
/// flush_log_at_trx_commit=1, 100 to 400 applied 3,400-4,300
/// transactions/s against 2,500-3,700 for 10 to 50 and 725-1,300 for 1; at
/// =2 every size from 10 up was within the noise (3,300-4,200/s). The
/// smallest size on that plateau keeps blocks short, which shortens a
/// retry and the time row locks are held.
pub const APPLY_BLOCK_COMMIT_TXNS: IntKey<u32> =
    IntKey::new("apply.block_commit_txns", 100, POSITIVE_U32);
/// `apply.block_commit_interval_ms`.
pub const APPLY_BLOCK_COMMIT_INTERVAL_MS: IntKey<u64> =
    IntKey::new("apply.block_commit_interval_ms", 0, NON_NEGATIVE);
/// `apply.sync_interval_seqnos`.
pub const APPLY_SYNC_INTERVAL_SEQNOS: IntKey<u64> =
    IntKey::new("apply.sync_interval_seqnos", 1000, POSITIVE);
/// `apply.max_in_flight_bytes`: 64 MiB.
pub const APPLY_MAX_IN_FLIGHT_BYTES: IntKey<u64> =
    IntKey::new("apply.max_in_flight_bytes", 64 << 20, POSITIVE);
/// `apply.retry_max_attempts`.
pub const APPLY_RETRY_MAX_ATTEMPTS: IntKey<u32> =
    IntKey::new("apply.retry_max_attempts", 10, NON_NEGATIVE_U32);
/// `apply.retry_max_backoff_ms`.
pub const APPLY_RETRY_MAX_BACKOFF_MS: IntKey<u64> =
    IntKey::new("apply.retry_max_backoff_ms", 5000, POSITIVE);

/// `apply.commit_window_seqnos`: at most 4096, so that a restart row's
/// record of the seqnos its channel committed above the low-water mark
/// (`committed_above`, a MariaDB `TEXT` of at most 65,535 bytes) always
/// fits: a window of W seqnos lists at most W seqnos, as ranges of at most
/// 14 bytes a seqno (`a-b,` of two 20-digit seqnos per 3 seqnos), 57,344
/// bytes at 4096.
pub const APPLY_COMMIT_WINDOW_SEQNOS: IntKey<u64> =
    IntKey::new("apply.commit_window_seqnos", 4096, Bounds::new(1, 4096));

/// `apply.parallelism`: `"row"`, chosen from the catch-up benchmark
/// (issue 16; 2 cores, MariaDB 10.11, cache-resident data, 8 channels, one
/// run each): with one hot schema `"row"` applied 1.42× native at
/// `innodb_flush_log_at_trx_commit=1` against 1.13× for `"shard"`, with 8
/// schemas one taking 60% of the load 1.34× against 1.21× (0.92× against
/// 0.84× at `=2`), and with 8 equal schemas it was within the noise of
/// `"shard"` (1.44× against 1.46× at `=2`, 1.79× against 1.84× at `=1`,
/// 5.04× against 4.91× with the replica's binlog and `sync_binlog=1`).
pub const APPLY_PARALLELISM: Parallelism = Parallelism::Row;

/// `apply.method`: how row changes reach the replica (see
/// [`ApplyMethod`]).
pub const APPLY_METHOD: ApplyMethod = ApplyMethod::Binlog;

/// `shard_filter.enforce_home`.
pub const SHARD_FILTER_ENFORCE_HOME: bool = false;
/// `shard_filter.unknown_shard_policy`.
pub const SHARD_FILTER_UNKNOWN_SHARD_POLICY: ShardPolicy = ShardPolicy::Error;
/// `shard_filter.unwanted_shard_policy`.
pub const SHARD_FILTER_UNWANTED_SHARD_POLICY: ShardPolicy = ShardPolicy::Drop;
/// `shard_filter.auto_create`.
pub const SHARD_FILTER_AUTO_CREATE: bool = false;
