//! `source.start`: where extraction begins on a fresh service.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

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
pub(super) fn check_gtid_list(list: &str) -> Result<(), String> {
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
