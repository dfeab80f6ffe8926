//! Watches a service's restart rows while a test stops and restarts it
//! (`kill -9` tests): sampled every 20 ms, no channel's row seqno ever
//! goes back, and the committed set the rows record (every seqno up to
//! the highest `low_water`, and every seqno a row's `committed_above`
//! lists) never loses a seqno it once held (issue 16, point 3).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shardrep::position::{Seqno, SeqnoRanges};

use super::sandbox;
use super::service::ServiceSpec;

/// A running watch ([`CommittedWatch::start`]); its assertions fail the
/// test when [`CommittedWatch::finish`] joins it.
pub struct CommittedWatch {
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<WatchReport>,
}

/// What a watch saw.
#[derive(Clone, Copy, Debug)]
pub struct WatchReport {
    /// Samples that found the rows.
    pub samples: u64,
    /// Samples whose rows recorded committed seqnos above the low-water
    /// mark (out-of-order commits across channels).
    pub with_gaps: u64,
}

impl CommittedWatch {
    /// Starts sampling `spec`'s restart rows on the sandbox's replica.
    pub fn start(spec: &ServiceSpec) -> CommittedWatch {
        let done = Arc::new(AtomicBool::new(false));
        let task = {
            let (done, spec) = (done.clone(), spec.clone());
            tokio::spawn(async move {
                let mut last: Vec<i64> = Vec::new();
                let mut last_set: Option<(i64, SeqnoRanges)> = None;
                let mut report = WatchReport {
                    samples: 0,
                    with_gaps: 0,
                };
                while !done.load(Ordering::Acquire) {
                    let records = spec.restart_records(sandbox()).await;
                    let now: Vec<i64> = records.iter().map(|r| r.0).collect();
                    if !records.is_empty() {
                        let base = records.iter().map(|r| r.1.expect("low_water")).max();
                        let base = base.expect("rows");
                        let mut set = SeqnoRanges::new();
                        for (_, _, above) in &records {
                            set.extend(&above.parse().expect("committed_above"));
                        }
                        let has = |s: i64| s <= base || set.contains(Seqno(s as u64));
                        if let Some((old_base, old_set)) = &last_set {
                            for s in
                                (base + 1..=*old_base).chain(old_set.iter().map(|s| s.get() as i64))
                            {
                                assert!(
                                    has(s),
                                    "the committed set lost seqno {s}: was up to {old_base} \
                                     and {old_set}, now up to {base} and {set} ({records:?})"
                                );
                            }
                        }
                        if !set.is_empty() {
                            report.with_gaps += 1;
                        }
                        last_set = Some((base, set));
                    }
                    if now.len() == last.len() {
                        for (c, (old, new)) in last.iter().zip(&now).enumerate() {
                            assert!(
                                new >= old,
                                "channel {c} restart row went back: {old} -> {new}"
                            );
                        }
                    }
                    if !now.is_empty() {
                        last = now;
                        report.samples += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                report
            })
        };
        CommittedWatch { done, task }
    }

    /// Stops sampling; panics with the watch's failed assertion, if any.
    pub async fn finish(self) -> WatchReport {
        self.done.store(true, Ordering::Release);
        self.task.await.expect("the committed set watch")
    }
}

/// A random pause in `low..high` milliseconds (from the clock's
/// nanoseconds: enough to vary where a kill lands).
pub fn jitter(low: u64, high: u64) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    Duration::from_millis(low + nanos % (high - low))
}
