//! Catch-up progress as `shardrepctl status --watch` shows it (issue 19):
//! one line from a `status` answer (applied and stored seqnos, bytes and
//! transactions behind the master, the apply rate, the time left), and
//! whether the service has caught up.

use super::protocol::Status;
use crate::replicator::state::State;

/// Bytes as `12.3 MiB` (binary units, one decimal; bytes below 1 KiB).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Seconds as `2h03m`, `4m05s` or `7s`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The progress of `status` in one line, e.g. `ONLINE seqno 1200/4000,
/// 3.4 MiB behind (2800 txns queued), 950 txn/s, caught up in 3s`.
pub fn line(status: &Status) -> String {
    let seqno = |s: Option<u64>| s.map_or("-".to_string(), |s| s.to_string());
    let mut out = format!(
        "{} seqno {}/{}",
        status.state,
        seqno(status.applied_last_seqno),
        seqno(status.maximum_stored_seq_no)
    );
    match status.bytes_behind {
        Some(b) => {
            out.push_str(&format!(", {} behind", bytes(b)));
            if let Some(t) = status.transactions_behind {
                out.push_str(&format!(" ({t} txns queued)"));
            }
        }
        None if status.master_binlog_end.is_some() => out.push_str(", applied position unknown"),
        None => out.push_str(", master's end unknown"),
    }
    if let Some(rate) = status.apply_rate_transactions_per_second {
        out.push_str(&format!(", {rate:.0} txn/s"));
    }
    if let Some(rate) = status.apply_rate_bytes_per_second {
        out.push_str(&format!(" ({}/s)", bytes(rate as u64)));
    }
    match (caught_up(status), status.catch_up_eta_seconds) {
        (true, _) => out.push_str(", caught up"),
        (false, Some(eta)) => out.push_str(&format!(", caught up in {}", duration(eta))),
        (false, None) => {}
    }
    if let Some(error) = &status.pending_error {
        out.push_str(&format!(": {}", error.message));
    }
    out
}

/// Whether every transaction of the master is applied (`bytesBehind`
/// 0) while the service is ONLINE.
pub fn caught_up(status: &Status) -> bool {
    status.state == State::Online && status.bytes_behind == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catch_up_in_one_line() {
        let mut s = Status::new("q", "applier", State::Online);
        s.applied_last_seqno = Some(1200);
        s.maximum_stored_seq_no = Some(4000);
        assert_eq!(line(&s), "ONLINE seqno 1200/4000, master's end unknown");
        s.bytes_behind = Some(3_565_158);
        s.transactions_behind = Some(2800);
        s.apply_rate_transactions_per_second = Some(950.4);
        s.apply_rate_bytes_per_second = Some(1_200_000.0);
        s.catch_up_eta_seconds = Some(125.2);
        assert_eq!(
            line(&s),
            "ONLINE seqno 1200/4000, 3.4 MiB behind (2800 txns queued), 950 txn/s (1.1 MiB/s), \
             caught up in 2m05s"
        );
        assert!(!caught_up(&s));
        s.bytes_behind = Some(0);
        assert!(caught_up(&s));
        assert!(line(&s).ends_with(", caught up"));
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(duration(7300.0), "2h01m");
        assert_eq!(duration(7.4), "7s");
    }
}
