//! How far behind the master the service is, for `status` and the
//! metrics (issue 19): the master's binlog end (bytes and GTID), the bytes
//! and transactions still to apply, the recent apply rate and the time
//! the catch-up should still take.
//!
//! A thread of the service ([`spawn`]) looks at the master every
//! [`LAG_INTERVAL`]: `SHOW BINARY LOGS` (each binlog file's size: the
//! master's end is the last file at its size, and a position's distance
//! to it is the rest of its file plus every later file) and
//! `@@gtid_binlog_pos`. It samples the service's applied position every
//! [`SAMPLE_INTERVAL`] and measures it against the master's last look;
//! the rate is the applied bytes and seqnos over the samples of the last
//! [`RATE_WINDOW`]; the ETA divides the bytes behind by the rate they
//! close at, exponentially weighted with [`ETA_RATE_TAU`]. `SHOW BINARY LOGS` needs the source user's
//! `BINLOG MONITOR` (MariaDB 10.5+) or `REPLICATION CLIENT` privilege;
//! without it these fields stay empty (logged once).

use std::collections::VecDeque;
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::mysql::ErrorText;
use crate::position::{BinlogPosition, GtidPos};

/// How often the master is looked at.
pub const LAG_INTERVAL: Duration = Duration::from_secs(2);

/// How often the applied position is sampled (and the lag measured
/// against the master's last look): status is at most this old.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);

/// The span of samples the apply rate is measured over.
pub const RATE_WINDOW: Duration = Duration::from_secs(30);

/// The shortest span of samples a rate is given from.
pub const MIN_RATE_SPAN: Duration = Duration::from_millis(500);

/// The time constant of the closing rate the ETA is computed from (an
/// exponentially weighted rate: a sample `dt` old weighs `exp(-dt/TAU)`),
/// so that the ETA follows the recent apply speed rather than a catch-up's
/// slow start (caches warming, the queue filling).
pub const ETA_RATE_TAU: Duration = Duration::from_secs(5);

/// The master's end and the service's distance to it, as of `seen`.
#[derive(Debug, Clone, PartialEq)]
pub struct Lag {
    /// The master's last binlog file at its size (the next event's
    /// position).
    pub master_end: BinlogPosition,
    /// The master's `@@gtid_binlog_pos`.
    pub master_gtid: String,
    /// Binlog bytes from the applied position to the master's end;
    /// `None` when the applied position is unknown or its file is no
    /// longer on the master.
    pub bytes_behind: Option<u64>,
    /// Transactions in the queue not applied yet (the highest stored
    /// seqno minus the applied one); those the extractor has not read yet
    /// are in `bytes_behind` only.
    pub transactions_behind: Option<u64>,
    /// Applied binlog bytes per second over the last [`RATE_WINDOW`].
    pub rate_bytes_per_second: Option<f64>,
    /// Applied seqnos per second over the same window.
    pub rate_transactions_per_second: Option<f64>,
    /// `bytes_behind` at the rate it closes (the apply rate less the
    /// master's writes, exponentially weighted over the last seconds:
    /// [`ETA_RATE_TAU`]), seconds: 0 when nothing is behind, `None` while
    /// it does not close.
    pub eta_seconds: Option<f64>,
    /// When the lag was measured (the master looked at up to
    /// [`LAG_INTERVAL`] before).
    pub seen: Instant,
}

/// One binlog file of the master and its size in bytes.
type BinlogFile = (String, u64);

/// The position's distance in bytes from the start of the oldest file
/// listed; `None` when its file is not listed.
fn absolute(files: &[BinlogFile], position: &BinlogPosition) -> Option<u64> {
    let mut before = 0u64;
    for (name, size) in files {
        if name == position.file() {
            return Some(before + position.offset());
        }
        before += size;
    }
    None
}

/// A sample of the applied position: when, its absolute byte offset
/// ([`absolute`]) and the applied seqno.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    bytes: Option<u64>,
    seqno: Option<u64>,
    /// Bytes behind the master's end then.
    behind: Option<u64>,
}

/// The samples of the last [`RATE_WINDOW`] and the rates they give.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    samples: VecDeque<Sample>,
    /// Bytes behind closed per second, exponentially weighted
    /// ([`ETA_RATE_TAU`]); `None` until the samples span
    /// [`MIN_RATE_SPAN`].
    closing_ewma: Option<f64>,
    /// The last sample that knew the bytes behind, and when.
    last_behind: Option<(Instant, u64)>,
}

impl Rates {
    fn push(&mut self, sample: Sample) {
        if let Some(behind) = sample.behind {
            if let (Some(ewma), Some((then, before))) = (self.closing_ewma, self.last_behind) {
                let dt = sample.at.duration_since(then).as_secs_f64();
                if dt > 0.0 {
                    let rate = (before as f64 - behind as f64) / dt;
                    let alpha = 1.0 - (-dt / ETA_RATE_TAU.as_secs_f64()).exp();
                    self.closing_ewma = Some(ewma + alpha * (rate - ewma));
                }
            }
            self.last_behind = Some((sample.at, behind));
        }
        self.samples.push_back(sample);
        while self
            .samples
            .front()
            .is_some_and(|s| sample.at.duration_since(s.at) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Bytes and seqnos applied per second, and bytes behind closed per
    /// second (the apply rate less the master's own writes), between the
    /// oldest sample that has the value and the newest (at least
    /// [`MIN_RATE_SPAN`] apart).
    fn rates(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let per_second = |value: fn(&Sample) -> Option<u64>| {
            let last = self.samples.back()?;
            let now = value(last)?;
            let first = self.samples.iter().find(|s| value(s).is_some())?;
            let then = value(first)?;
            let secs = last.at.duration_since(first.at).as_secs_f64();
            (secs >= MIN_RATE_SPAN.as_secs_f64()).then(|| now.saturating_sub(then) as f64 / secs)
        };
        let closing = (|| {
            let last = self.samples.back()?;
            let now = last.behind?;
            let first = self.samples.iter().find(|s| s.behind.is_some())?;
            let then = first.behind?;
            let secs = last.at.duration_since(first.at).as_secs_f64();
            (secs >= MIN_RATE_SPAN.as_secs_f64()).then(|| (then as f64 - now as f64) / secs)
        })();
        (per_second(|s| s.bytes), per_second(|s| s.seqno), closing)
    }

    /// The closing rate the ETA uses: the exponentially weighted one,
    /// started from the first rate over [`MIN_RATE_SPAN`] of samples.
    fn closing_rate(&mut self) -> Option<f64> {
        if self.closing_ewma.is_none() {
            self.closing_ewma = self.rates().2;
        }
        self.closing_ewma
    }

    /// Forgets every sample (the service stopped applying).
    fn clear(&mut self) {
        self.samples.clear();
        self.closing_ewma = None;
        self.last_behind = None;
    }
}

/// What the service reports of itself for a sample.
#[derive(Debug, Clone, Default)]
pub(crate) struct Applied {
    /// `appliedLastEventId` as a position.
    pub position: Option<BinlogPosition>,
    /// `appliedLastSeqno`.
    pub seqno: Option<u64>,
    /// `maximumStoredSeqNo`.
    pub stored: Option<u64>,
    /// The GTID position after the last stored transaction (every
    /// domain), while a run holds the queue.
    pub stored_gtid: Option<GtidPos>,
    /// Where the source last stood idle and the next seqno then
    /// ([`crate::extractor::IdleMark`]), while a run applies.
    pub idle: Option<(BinlogPosition, crate::position::Seqno)>,
    /// Whether the service is ONLINE (else no rate: nothing is applied).
    pub online: bool,
}

/// The lag from the master's `files` and `gtid`, the service's `applied`
/// position and the rate samples (this sample added).
pub(crate) fn measure(
    files: &[BinlogFile],
    gtid: String,
    applied: &Applied,
    rates: &mut Rates,
    now: Instant,
) -> Option<Lag> {
    let (last, size) = files.last()?;
    let master_end = BinlogPosition::new(last.clone(), *size).ok()?;
    let end = absolute(files, &master_end)?;
    let at = applied.position.as_ref().and_then(|p| absolute(files, p));
    let transactions_behind = applied
        .stored
        .map(|s| s.saturating_sub(applied.seqno.unwrap_or(0)));
    // Every transaction of the master stored and applied: the bytes after
    // the applied position are events of no transaction (a new binlog
    // file's header after a rotation, a checkpoint), nothing to apply.
    let master_gtid: Option<GtidPos> = gtid.parse().ok();
    let caught_up_by_gtid = transactions_behind == Some(0)
        && matches!((&applied.stored_gtid, &master_gtid), (Some(stored), Some(master))
            if master.iter().all(|g| stored.contains(g)));
    // The source idle at the master's end with every seqno it numbered
    // applied (a takeover of a caught-up replica: nothing to apply yet).
    let handled_next = applied.seqno.map_or(0, |s| s + 1);
    let caught_up_idle = applied.idle.as_ref().is_some_and(|(pos, next)| {
        absolute(files, pos).is_some_and(|p| p >= end) && next.get() <= handled_next
    });
    let bytes_behind = if caught_up_by_gtid || caught_up_idle {
        Some(0)
    } else {
        at.map(|a| end.saturating_sub(a))
    };
    if !applied.online {
        rates.clear();
    } else {
        rates.push(Sample {
            at: now,
            bytes: at,
            seqno: applied.seqno,
            behind: bytes_behind,
        });
    }
    let (rate_bytes, rate_txns, _) = rates.rates();
    let closing = rates.closing_rate();
    // The time left at the rate the distance closes (the apply rate less
    // what the master writes meanwhile, weighted to the last seconds:
    // [`ETA_RATE_TAU`]); none while it does not close.
    let eta = match (bytes_behind, closing) {
        (Some(0), _) => Some(0.0),
        (Some(b), Some(r)) if r > 0.0 => Some(b as f64 / r),
        _ => None,
    };
    Some(Lag {
        master_end,
        master_gtid: gtid,
        bytes_behind,
        transactions_behind,
        rate_bytes_per_second: rate_bytes,
        rate_transactions_per_second: rate_txns,
        eta_seconds: eta,
        seen: now,
    })
}

/// Reads the master's binlog files and GTID position.
async fn look(conn: &mut mysql_async::Conn) -> Result<(Vec<BinlogFile>, String), (String, bool)> {
    // (text, whether the server itself refused: a privilege or another
    // server error, not a lost connection)
    let refused = |what: &str, e: &mysql_async::Error| {
        (
            format!("{what}: {}", ErrorText(e)),
            matches!(e, mysql_async::Error::Server(_)),
        )
    };
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| refused("SHOW BINARY LOGS", &e))?;
    let files = rows
        .into_iter()
        .filter_map(|row| {
            let name: String = row.get(0)?;
            let size: u64 = row.get(1)?;
            Some((name, size))
        })
        .collect();
    let gtid: Option<String> = conn
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(|e| refused("SELECT @@gtid_binlog_pos", &e))?;
    Ok((files, gtid.unwrap_or_default()))
}

/// Starts the thread that keeps `slot` current until the service is
/// dropped: every [`LAG_INTERVAL`], the master through `master` (asked at
/// every look: a master switch changes it, and the connection is opened
/// again) and the service's applied position through `applied`.
pub(crate) fn spawn<S: Send + Sync + 'static>(
    service: Weak<S>,
    master: fn(&S) -> mysql_async::Opts,
    applied: fn(&S) -> Applied,
    slot: fn(&S) -> &Mutex<Option<Lag>>,
) {
    let spawned = std::thread::Builder::new()
        .name("shardrep-lag".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let mut conn: Option<mysql_async::Conn> = None;
            let mut rates = Rates::default();
            let mut failing = false;
            // The master's files and GTID position at the last look.
            let mut master_seen: Option<(Vec<BinlogFile>, String)> = None;
            let mut last_look: Option<Instant> = None;
            let mut master_opts: Option<mysql_async::Opts> = None;
            loop {
                let Some(service) = service.upgrade() else {
                    return;
                };
                if last_look.is_none_or(|t| t.elapsed() >= LAG_INTERVAL) {
                    last_look = Some(Instant::now());
                    let opts = master(&service);
                    if master_opts.as_ref() != Some(&opts) {
                        conn = None;
                        master_opts = Some(opts.clone());
                    }
                    // Err((message, refused)): a refused or lost
                    // connection is the extractor's to report; a query
                    // the server refuses (the privilege) is this thread's.
                    let looked = runtime.block_on(async {
                        if conn.is_none() {
                            conn = Some(
                                mysql_async::Conn::new(opts)
                                    .await
                                    .map_err(|e| (format!("connect: {}", ErrorText(&e)), false))?,
                            );
                        }
                        look(conn.as_mut().expect("connected")).await
                    });
                    match looked {
                        Ok(seen) => {
                            if failing {
                                tracing::info!("status shows the master's binlog end again");
                                failing = false;
                            }
                            master_seen = Some(seen);
                        }
                        Err((e, refused)) => {
                            conn = None;
                            if refused && !failing {
                                tracing::warn!(
                                    error = %e,
                                    "cannot read the master's binlog end: status and metrics \
                                     show no bytes behind or catch-up estimate until it can \
                                     (the source user needs BINLOG MONITOR or REPLICATION \
                                     CLIENT)"
                                );
                                failing = true;
                            } else if !refused {
                                tracing::debug!(error = %e, "lag: cannot reach the master");
                            }
                            master_seen = None;
                        }
                    }
                }
                let lag = master_seen.as_ref().and_then(|(files, gtid)| {
                    measure(
                        files,
                        gtid.clone(),
                        &applied(&service),
                        &mut rates,
                        Instant::now(),
                    )
                });
                *slot(&service).lock().expect("lag") = lag;
                drop(service);
                std::thread::sleep(SAMPLE_INTERVAL);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the thread that measures the lag");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(file: &str, offset: u64) -> BinlogPosition {
        BinlogPosition::new(file, offset).unwrap()
    }

    #[test]
    fn bytes_behind_span_files_and_the_rate_gives_the_eta() {
        let files = vec![
            ("mariadb-bin.000001".to_string(), 1000),
            ("mariadb-bin.000002".to_string(), 5000),
        ];
        let mut rates = Rates::default();
        let t0 = Instant::now();
        let applied = |file, offset, seqno| Applied {
            position: Some(pos(file, offset)),
            seqno: Some(seqno),
            stored: Some(100),
            stored_gtid: None,
            idle: None,
            online: true,
        };
        let first = measure(
            &files,
            "0-1-100".into(),
            &applied("mariadb-bin.000001", 400, 10),
            &mut rates,
            t0,
        )
        .unwrap();
        assert_eq!(first.master_end, pos("mariadb-bin.000002", 5000));
        assert_eq!(first.bytes_behind, Some(600 + 5000));
        assert_eq!(first.transactions_behind, Some(90));
        assert_eq!(
            (first.rate_bytes_per_second, first.eta_seconds),
            (None, None)
        );
        let second = measure(
            &files,
            "0-1-100".into(),
            &applied("mariadb-bin.000002", 1000, 30),
            &mut rates,
            t0 + Duration::from_secs(2),
        )
        .unwrap();
        // 1600 bytes and 20 seqnos in 2 s; 4000 bytes left.
        assert_eq!(second.bytes_behind, Some(4000));
        assert_eq!(second.rate_bytes_per_second, Some(800.0));
        assert_eq!(second.rate_transactions_per_second, Some(10.0));
        assert_eq!(second.eta_seconds, Some(5.0));
        // Samples older than the window drop out: no rate from one sample.
        let later = measure(
            &files,
            "0-1-100".into(),
            &applied("mariadb-bin.000002", 5000, 100),
            &mut rates,
            t0 + RATE_WINDOW + Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(later.bytes_behind, Some(0));
        assert_eq!(later.eta_seconds, Some(0.0));
        assert_eq!(later.rate_bytes_per_second, None);
    }

    /// A replayed catch-up: 60 MB behind, the master writing 0.5 MB/s
    /// (its end seen every 2 s), the apply at 1 MB/s for the first 8 s
    /// (the slow start) then 4 MB/s: the ETA follows the fast part within
    /// 20% from 10 s after the change on, where the rate over the last
    /// 30 s (the slow start in it) was 40% or more too high.
    #[test]
    fn the_eta_follows_the_recent_speed_not_the_slow_start() {
        const MB: f64 = 1_000_000.0;
        let t0 = Instant::now();
        let mut rates = Rates::default();
        let applied_at = |t: f64| {
            if t <= 8.0 {
                t * MB
            } else {
                8.0 * MB + (t - 8.0) * 4.0 * MB
            }
        };
        let master_at = |t: f64| 60.0 * MB + 0.5 * MB * t;
        let end_of_catch_up = 8.0 + (60.0 + 4.0 - 8.0) / 3.5;
        let mut checked = 0;
        for step in 0..=((end_of_catch_up - 1.0) * 4.0) as u32 {
            let t = f64::from(step) * 0.25;
            // The master's end as last looked at (every 2 s).
            let end = master_at((t / 2.0).floor() * 2.0) as u64;
            let files = vec![("mariadb-bin.000001".to_string(), end)];
            let applied = Applied {
                position: Some(pos("mariadb-bin.000001", applied_at(t) as u64)),
                seqno: Some(step.into()),
                stored: None,
                stored_gtid: None,
                idle: None,
                online: true,
            };
            let lag = measure(
                &files,
                String::new(),
                &applied,
                &mut rates,
                t0 + Duration::from_secs_f64(t),
            )
            .unwrap();
            if t >= 18.0 {
                let left = end_of_catch_up - t;
                let eta = lag.eta_seconds.unwrap();
                assert!(
                    (eta - left).abs() <= 0.2 * left + 0.5,
                    "at {t} s: ETA {eta:.1} s, {left:.1} s left"
                );
                checked += 1;
            }
            if t == 18.0 {
                let (_, _, window) = rates.rates();
                let window_eta = lag.bytes_behind.unwrap() as f64 / window.unwrap();
                assert!(window_eta > 1.4 * (end_of_catch_up - t), "{window_eta}");
            }
        }
        assert!(checked > 10, "{checked}");
    }

    #[test]
    fn the_rate_starts_at_the_first_known_position() {
        let files = vec![("mariadb-bin.000001".to_string(), 10_000)];
        let mut rates = Rates::default();
        let t0 = Instant::now();
        let mut applied = Applied {
            online: true,
            ..Applied::default()
        };
        // Taking over: no applied position yet.
        measure(&files, String::new(), &applied, &mut rates, t0).unwrap();
        applied.position = Some(pos("mariadb-bin.000001", 1000));
        measure(
            &files,
            String::new(),
            &applied,
            &mut rates,
            t0 + Duration::from_secs(2),
        );
        applied.position = Some(pos("mariadb-bin.000001", 3000));
        let lag = measure(
            &files,
            String::new(),
            &applied,
            &mut rates,
            t0 + Duration::from_secs(4),
        )
        .unwrap();
        assert_eq!(lag.rate_bytes_per_second, Some(1000.0));
        assert_eq!(lag.eta_seconds, Some(7.0));
    }

    #[test]
    fn a_position_in_a_purged_file_has_no_distance() {
        let files = vec![("mariadb-bin.000007".to_string(), 300)];
        let applied = Applied {
            position: Some(pos("mariadb-bin.000003", 4)),
            seqno: None,
            stored: None,
            stored_gtid: None,
            idle: None,
            online: true,
        };
        let lag = measure(
            &files,
            String::new(),
            &applied,
            &mut Rates::default(),
            Instant::now(),
        )
        .unwrap();
        assert_eq!((lag.bytes_behind, lag.transactions_behind), (None, None));
        assert!(measure(
            &[],
            String::new(),
            &applied,
            &mut Rates::default(),
            Instant::now()
        )
        .is_none());
    }

    #[test]
    fn caught_up_by_gtid_is_nothing_behind_after_a_rotation() {
        // Applied up to the end of file 1; file 2 holds only its header.
        let files = vec![
            ("mariadb-bin.000001".to_string(), 1000),
            ("mariadb-bin.000002".to_string(), 385),
        ];
        let mut applied = Applied {
            position: Some(pos("mariadb-bin.000001", 1000)),
            seqno: Some(41),
            stored: Some(41),
            stored_gtid: Some("0-1-50,1-2-7".parse().unwrap()),
            idle: None,
            online: true,
        };
        let now = Instant::now();
        let lag = |applied: &Applied, gtid: &str| {
            measure(&files, gtid.into(), applied, &mut Rates::default(), now).unwrap()
        };
        assert_eq!(lag(&applied, "0-1-50,1-2-7").bytes_behind, Some(0));
        assert_eq!(lag(&applied, "0-1-50,1-2-7").eta_seconds, Some(0.0));
        // The master has a transaction more: the bytes count.
        assert_eq!(lag(&applied, "0-1-51,1-2-7").bytes_behind, Some(385));
        // Stored but not applied: the bytes count.
        applied.stored = Some(42);
        assert_eq!(lag(&applied, "0-1-50,1-2-7").bytes_behind, Some(385));
    }
}
