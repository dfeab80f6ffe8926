//! The status views of the control protocol, assembled from what the
//! service reports ([`crate::replicator::service::report`]): `status`
//! ([`Status`], trepctl's field names), `status --name channels|shards`
//! ([`ChannelStatus`], [`ShardStatus`]) and `status --name queue` / `log
//! info` (a JSON object).

use serde_json::{json, Value};

use super::protocol::{ChannelStatus, ShardStatus, Status};
use crate::position::Seqno;
use crate::queue::QueueInfo;
use crate::replicator::service::{ChannelSnapshot, RowStatus, ShardSnapshot, StatusSnapshot};

/// `status`: every key of [`Status`] from the service's snapshot.
pub fn status(s: StatusSnapshot) -> Status {
    let mut status = Status::new(s.service_name, s.role.as_str(), s.state);
    status.applied_last_seqno = s.applied_last_seqno.map(Seqno::get);
    status.applied_last_event_id = s.applied_last_event_id;
    if let Some((host, port)) = s.source {
        status.source_host = Some(host);
        status.source_port = Some(port);
    }
    status.source_switched_at = s.source_switched_at;
    status.source_switch_unfinished = s.source_switch_unfinished;
    status.source_switch_under_way = s.source_switch_under_way;
    status.source_first_seqno = s.source_first_seqno.map(Seqno::get);
    status.applied_latency = s.applied_latency;
    status.relative_latency = s.relative_latency;
    status.channels = s.channels;
    status.serialization_count = s.serialization_count;
    status.dropped_count = s.dropped_count;
    status.skipped_count = s.skipped_count;
    status.skipped_seqnos = seqno_ranges(&s.skipped_seqnos);
    status.open_temp_tables = s.open_temp_tables;
    status.parallelism = s.parallelism.as_str().to_string();
    status.apply_method = s.apply_method.as_str().to_string();
    status.binlog_gtids = s.binlog_gtids.as_str().to_string();
    status.binlog_gtids_configured = s.binlog_gtids_configured.as_str().to_string();
    status.dependency_wait_count = s.row.dependency_waits;
    status.window_wait_count = s.window_wait_count;
    status.fallback_counts = fallback_counts(&s.row);
    status.in_flight_count = s.row.in_flight;
    status.in_flight_keys = s.row.keys_held;
    status.minimum_stored_seq_no = s.minimum_stored_seqno.map(Seqno::get);
    status.maximum_stored_seq_no = s.maximum_stored_seqno.map(Seqno::get);
    status.pending_error = s.pending_error;
    status.until_seqno = s.until_seqno;
    status.offline_at_seqno = s.offline_at_seqno;
    status.last_offline_clean = s.last_offline_clean;
    status.uptime_seconds = s.uptime.as_secs_f64();
    status.time_in_state_seconds = s.time_in_state.as_secs_f64();
    status.transactions_applied_count = s.applied.transactions;
    status.row_changes_applied_count = s.applied.row_changes;
    status.blocks_committed_count = s.applied.blocks;
    status.retry_count = s.applied.retry_count();
    status.retry_counts = code_counts(s.applied.retries.iter().map(|(c, n)| (u32::from(*c), *n)));
    status.unknown_outcome_committed_count = s.applied.unknown_outcome_committed;
    status.unknown_outcome_reapplied_count = s.applied.unknown_outcome_reapplied;
    status.error_counts = code_counts(s.applied.errors.iter().map(|(c, n)| (*c, *n)));
    // Queued and not applied, from this snapshot's own seqnos.
    status.transactions_behind = status
        .maximum_stored_seq_no
        .map(|stored| stored.saturating_sub(status.applied_last_seqno.unwrap_or(0)));
    if let Some(lag) = s.lag {
        status.master_binlog_end = Some(lag.master_end.to_string());
        status.master_gtid_pos = Some(lag.master_gtid);
        status.bytes_behind = lag.bytes_behind;
        status.apply_rate_bytes_per_second = lag.rate_bytes_per_second;
        status.apply_rate_transactions_per_second = lag.rate_transactions_per_second;
        status.catch_up_eta_seconds = lag.eta_seconds;
    }
    status
}

/// `code=N[,code=N...]` of the codes with a count; `None` for none.
fn code_counts(counts: impl Iterator<Item = (u32, u64)>) -> Option<String> {
    let text: Vec<String> = counts
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{c}={n}"))
        .collect();
    (!text.is_empty()).then(|| text.join(","))
}

/// `skippedSeqnos`: ranges as `N[,M-K...]` (the text `online
/// --skip-seqno` takes); `None` for no range.
fn seqno_ranges(ranges: &[std::ops::RangeInclusive<u64>]) -> Option<String> {
    (!ranges.is_empty()).then(|| {
        ranges
            .iter()
            .map(|r| {
                if r.start() == r.end() {
                    r.start().to_string()
                } else {
                    format!("{}-{}", r.start(), r.end())
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// `fallbackCounts`: `reason=N` for every reason with a non-zero count,
/// comma-separated; `None` for none.
fn fallback_counts(row: &RowStatus) -> Option<String> {
    use std::fmt::Write;
    let mut text = String::new();
    for (reason, n) in row.fallback_counts() {
        let comma = if text.is_empty() { "" } else { "," };
        let _ = write!(text, "{comma}{reason}={n}");
    }
    (!text.is_empty()).then_some(text)
}

/// One entry of `status --name channels`.
pub fn channel(c: ChannelSnapshot) -> ChannelStatus {
    ChannelStatus {
        channel: c.channel,
        applied_last_seqno: c.applied_last_seqno.map(Seqno::get),
        applied_last_event_id: c.applied_last_event_id,
        applied_latency: c.applied_latency,
        applied_count: c.applied_count,
        shard_id: c.shard_id,
    }
}

/// One entry of `status --name shards`.
pub fn shard(s: ShardSnapshot) -> ShardStatus {
    let applied = s.applied;
    ShardStatus {
        shard_id: s.shard_id,
        channel: s.channel.get(),
        critical: s.critical,
        applied_last_seqno: applied.as_ref().map(|a| a.seqno.get()),
        applied_last_event_id: applied.as_ref().map(|a| a.event_id.clone()),
        applied_latency: applied.as_ref().map(|a| a.latency),
        event_count: applied.map_or(0, |a| a.count),
        foreign_key_group: s.foreign_key_group,
        serialized_reason: s.serialized_reason,
    }
}

/// `status --name queue` and `log info`: the queue's summary.
pub fn queue(info: &QueueInfo) -> Value {
    json!({
        "dir": info.dir.display().to_string(),
        "minSeqno": info.min_seqno.map(Seqno::get),
        "maxSeqno": info.max_seqno.map(Seqno::get),
        "count": info.count,
        "durableSeqno": info.durable_seqno.map(Seqno::get),
        "sizeBytes": info.size_bytes,
        "segments": info.segments.len(),
        "extractorPosition": info.progress.as_ref().map(|p| p.position.to_string()),
        "extractorGtidPosition": info.progress.as_ref().map(|p| p.gtid_position.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::applier::work::ShardApplied;
    use crate::config::{Parallelism, Role};
    use crate::position::ChannelId;
    use crate::replicator::service::lag::Lag;
    use crate::replicator::service::report::ApplyTotals;
    use crate::replicator::state::{PendingError, State};
    use std::time::Duration;

    #[test]
    fn status_from_a_snapshot() {
        let mut error = PendingError::new("channel 1 failed");
        error.seqno = Some(8);
        let snapshot = StatusSnapshot {
            service_name: "sjc".into(),
            role: Role::Extractor,
            state: State::OfflineError,
            applied_last_seqno: Some(Seqno(7)),
            applied_last_event_id: Some("mariadb-bin.000002:610".into()),
            applied_latency: Some(0.25),
            relative_latency: Some(1.5),
            channels: 4,
            serialization_count: 3,
            window_wait_count: 6,
            dropped_count: 2,
            skipped_count: 4,
            skipped_seqnos: vec![9..=9, 11..=13],
            open_temp_tables: 1,
            parallelism: Parallelism::Row,
            apply_method: crate::config::ApplyMethod::Sql,
            binlog_gtids: crate::config::BinlogGtids::Own,
            binlog_gtids_configured: crate::config::BinlogGtids::Auto,
            row: RowStatus {
                dependency_waits: 5,
                // no_unique_key, statement, ..., foreign_key (ALL order).
                fallbacks: [4, 2, 0, 7, 0, 0, 0, 0, 0, 0],
                in_flight: 12,
                keys_held: 40,
            },
            minimum_stored_seqno: Some(Seqno(0)),
            maximum_stored_seqno: Some(Seqno(20)),
            pending_error: Some(error.clone()),
            until_seqno: Some(30),
            offline_at_seqno: Some(25),
            last_offline_clean: Some(true),
            uptime: Duration::from_millis(2500),
            time_in_state: Duration::from_millis(500),
            applied: ApplyTotals {
                transactions: 100,
                row_changes: 950,
                blocks: 9,
                retries: [(1213, 2), (0, 1)].into_iter().collect(),
                unknown_outcome_committed: 2,
                unknown_outcome_reapplied: 1,
                errors: [(1062, 1)].into_iter().collect(),
            },
            lag: Some(Lag {
                master_end: "mariadb-bin.000003:4000".parse().unwrap(),
                master_gtid: "0-1-120".into(),
                bytes_behind: Some(9000),
                transactions_behind: Some(13),
                rate_bytes_per_second: Some(3000.0),
                rate_transactions_per_second: Some(40.0),
                eta_seconds: Some(3.0),
                seen: std::time::Instant::now(),
            }),
            source: Some(("db2".into(), 3307)),
            source_switched_at: Some("2026-12-03 16:00:00.000000".into()),
            source_first_seqno: Some(Seqno(21)),
            source_switch_unfinished: Some("to db3:3306 did not finish: refused".into()),
            source_switch_under_way: Some("to db4:3306".into()),
        };
        let mut expected = Status::new("sjc", "extractor", State::OfflineError);
        expected.applied_last_seqno = Some(7);
        expected.applied_last_event_id = Some("mariadb-bin.000002:610".into());
        expected.applied_latency = Some(0.25);
        expected.relative_latency = Some(1.5);
        expected.channels = 4;
        expected.serialization_count = 3;
        expected.dropped_count = 2;
        expected.skipped_count = 4;
        expected.skipped_seqnos = Some("9,11-13".into());
        expected.open_temp_tables = 1;
        expected.parallelism = "row".into();
        expected.apply_method = "sql".into();
        expected.binlog_gtids = "own".into();
        expected.binlog_gtids_configured = "auto".into();
        expected.dependency_wait_count = 5;
        expected.window_wait_count = 6;
        expected.fallback_counts = Some("no_unique_key=4,statement=2,foreign_key=7".into());
        expected.in_flight_count = 12;
        expected.in_flight_keys = 40;
        expected.minimum_stored_seq_no = Some(0);
        expected.maximum_stored_seq_no = Some(20);
        expected.pending_error = Some(error);
        expected.until_seqno = Some(30);
        expected.offline_at_seqno = Some(25);
        expected.last_offline_clean = Some(true);
        expected.uptime_seconds = 2.5;
        expected.time_in_state_seconds = 0.5;
        expected.transactions_applied_count = 100;
        expected.row_changes_applied_count = 950;
        expected.blocks_committed_count = 9;
        expected.retry_count = 3;
        expected.retry_counts = Some("0=1,1213=2".into());
        expected.unknown_outcome_committed_count = 2;
        expected.unknown_outcome_reapplied_count = 1;
        expected.error_counts = Some("1062=1".into());
        expected.master_binlog_end = Some("mariadb-bin.000003:4000".into());
        expected.master_gtid_pos = Some("0-1-120".into());
        expected.bytes_behind = Some(9000);
        expected.transactions_behind = Some(13);
        expected.apply_rate_bytes_per_second = Some(3000.0);
        expected.apply_rate_transactions_per_second = Some(40.0);
        expected.catch_up_eta_seconds = Some(3.0);
        expected.source_host = Some("db2".into());
        expected.source_port = Some(3307);
        expected.source_switched_at = Some("2026-12-03 16:00:00.000000".into());
        expected.source_switch_unfinished = Some("to db3:3306 did not finish: refused".into());
        expected.source_switch_under_way = Some("to db4:3306".into());
        expected.source_first_seqno = Some(21);
        assert_eq!(status(snapshot), expected);
    }

    #[test]
    fn channel_and_shard_views() {
        let c = channel(ChannelSnapshot {
            channel: 2,
            applied_last_seqno: Some(Seqno(5)),
            applied_last_event_id: Some("b.000001:400".into()),
            applied_latency: None,
            applied_count: 6,
            shard_id: Some("acme".into()),
        });
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({
                "channel": 2,
                "appliedLastSeqno": 5,
                "appliedLastEventId": "b.000001:400",
                "appliedLatency": null,
                "appliedCount": 6,
                "shardId": "acme",
            })
        );
        let applied = ShardApplied {
            seqno: Seqno(5),
            event_id: "b.000001:400".into(),
            latency: 0.5,
            count: 3,
        };
        let s = shard(ShardSnapshot {
            shard_id: "acme".into(),
            channel: ChannelId::new(1, 2).unwrap(),
            critical: true,
            applied: Some(applied),
            foreign_key_group: Vec::new(),
            serialized_reason: None,
        });
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "shardId": "acme",
                "channel": 1,
                "critical": true,
                "appliedLastSeqno": 5,
                "appliedLastEventId": "b.000001:400",
                "appliedLatency": 0.5,
                "eventCount": 3,
            })
        );
        let idle = shard(ShardSnapshot {
            shard_id: "b".into(),
            channel: ChannelId::new(0, 2).unwrap(),
            critical: false,
            applied: None,
            foreign_key_group: vec!["a".into(), "b".into()],
            serialized_reason: Some("fk".into()),
        });
        assert_eq!(
            (
                idle.applied_last_seqno,
                idle.event_count,
                idle.foreign_key_group.len()
            ),
            (None, 0, 2)
        );
    }

    #[test]
    fn fallback_counts_list_the_non_zero_reasons_in_order() {
        let mut row = RowStatus::default();
        assert_eq!(fallback_counts(&row), None);
        row.fallbacks[9] = 1;
        assert_eq!(fallback_counts(&row).as_deref(), Some("key_type=1"));
        row.fallbacks[0] = 30;
        assert_eq!(
            fallback_counts(&row).as_deref(),
            Some("no_unique_key=30,key_type=1")
        );
    }

    #[test]
    fn skipped_seqnos_as_ranges() {
        assert_eq!(seqno_ranges(&[]), None);
        assert_eq!(
            seqno_ranges(&[3..=3, 5..=7, 9..=9]).as_deref(),
            Some("3,5-7,9")
        );
    }
}
