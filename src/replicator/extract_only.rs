//! A run of a service with `[service] role = "extractor"`: the extractor
//! fills the queue and nothing else. No replica connection is opened, no
//! catalog created, no transaction applied or purged; `shardrepctl log
//! list` and `status --name queue` read what it stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::extract::{ExtractorThread, FirstStart};
use super::{RunError, RunOptions, RunReport};
use crate::config::Config;
use crate::queue::{QueueOptions, TransactionQueue};

/// How often the run checks its stop flag and the extractor thread.
const POLL: Duration = Duration::from_millis(50);

/// Runs the extractor into the queue until `stop` (or, with
/// `options.stop_when_idle`, until the source has nothing more).
///
/// # Errors
/// [`RunError::Queue`] when the queue cannot be opened,
/// [`RunError::Extract`] with the master's code when the extractor stops
/// on an error.
pub(super) fn run(
    config: &Config,
    stop: Arc<AtomicBool>,
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let queue = Arc::new(TransactionQueue::open(QueueOptions::from_config(
        &config.queue,
    ))?);
    super::run::warn_if_queue_space_short(config);
    let first = queue.next_seqno();
    tracing::info!(
        role = "extractor",
        queue_next = first.get(),
        "starting: extracting into the queue only (no replica)"
    );
    let extractor = ExtractorThread::spawn(
        config,
        &queue,
        options.stop_when_idle,
        FirstStart::Configured(config.source.start.clone()),
        None,
        None,
    )?;
    if let Some(o) = &options.observer {
        *o.queue.lock().expect("observer") = Some(queue.clone());
        o.applying.store(true, Ordering::Release);
    }
    while !extractor.is_finished() && !stop.load(Ordering::Acquire) {
        std::thread::sleep(POLL);
    }
    let result = extractor.stop();
    queue.flush()?;
    result?;
    tracing::info!(
        stored = queue.next_seqno().get() - first.get(),
        "extractor stopped"
    );
    Ok(RunReport {
        restart_rows: Vec::new(),
        dispatched: 0,
        dropped: 0,
        serializations: 0,
        skipped: 0,
        retries: 0,
        elapsed: started.elapsed(),
    })
}
