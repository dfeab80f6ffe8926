//! Prometheus metrics over HTTP (`[metrics] listen`, issue 19): `GET
//! /metrics` answers the service's status in the Prometheus text format
//! (version 0.0.4), rendered by the `prometheus` crate from the same
//! snapshot `shardrepctl status` shows, at the moment of the scrape.
//!
//! Names follow Prometheus' conventions
//! (<https://prometheus.io/docs/practices/naming/>): the `shardrep_`
//! prefix, base units (seconds, bytes), `_total` for counters. Counters
//! count since the process started, except the per-channel
//! `shardrep_channel_transactions_applied_total`, which starts again at
//! each `online` (Prometheus' `rate()` takes that as a counter reset). A
//! value that is not known (no seqno applied yet, no live source) is left
//! out rather than shown as 0. Every metric carries the label `service`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus::core::Collector;
use prometheus::{Encoder, Gauge, GaugeVec, IntCounter, IntCounterVec, Opts, Registry};

use super::protocol::Status;
use crate::replicator::service::Service;
use crate::replicator::state::State;

/// The metrics server could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address cannot be listened on (in use, not local, no right).
    #[error(
        "metrics: cannot listen on {addr} ([metrics] listen): {message} (the address must be \
         one of this host's and the port free)"
    )]
    Listen {
        /// `[metrics] listen`.
        addr: SocketAddr,
        /// The system's reason.
        message: String,
    },
}

/// The running metrics server: one thread answering scrapes.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` and serves `service`'s metrics until
    /// [`MetricsServer::shutdown`].
    ///
    /// # Errors
    /// [`MetricsError::Listen`] when `addr` cannot be bound (e.g. in use).
    pub fn start(addr: SocketAddr, service: Arc<Service>) -> Result<MetricsServer, MetricsError> {
        let server = tiny_http::Server::http(addr).map_err(|e| MetricsError::Listen {
            addr,
            message: e.to_string(),
        })?;
        let server = Arc::new(server);
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("shardrep-metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    answer(request, &service);
                }
            })
            .map_err(|e| MetricsError::Listen {
                addr,
                message: format!("cannot start its thread: {e}"),
            })?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr,
        })
    }

    /// The address listened on (the port chosen when `listen` gave 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and waits for the thread.
    pub fn shutdown(mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(request: tiny_http::Request, service: &Service) {
    let content_type = |value: &str| {
        tiny_http::Header::from_bytes(&b"Content-Type"[..], value.as_bytes())
            .expect("a valid header")
    };
    // A scrape may add parameters (`params:` of a scrape config).
    let path = request.url().split('?').next().unwrap_or_default();
    let plain = content_type("text/plain; charset=utf-8");
    let response = match (request.method(), path) {
        (tiny_http::Method::Get | tiny_http::Method::Head, "/metrics") => match render(service) {
            Ok(text) => tiny_http::Response::from_string(text)
                .with_header(content_type(prometheus::TEXT_FORMAT)),
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot render");
                tiny_http::Response::from_string(format!("cannot render the metrics: {e}\n"))
                    .with_status_code(500)
                    .with_header(plain)
            }
        },
        (_, "/metrics") => tiny_http::Response::from_string("only GET /metrics\n")
            .with_status_code(405)
            .with_header(plain),
        _ => tiny_http::Response::from_string("shardrep serves its metrics at /metrics\n")
            .with_status_code(404)
            .with_header(plain),
    };
    let _ = request.respond(response);
}

/// The metrics of `service` now, in the Prometheus text format.
///
/// # Errors
/// A metric the `prometheus` crate refuses (a bug: names are fixed).
pub fn render(service: &Service) -> Result<String, prometheus::Error> {
    let status = super::status::status(service.status());
    let channels = service.channel_status();
    let queue = service.running_queue_info();
    let registry = Registry::new_custom(
        None,
        Some(
            [("service".to_string(), status.service_name.clone())]
                .into_iter()
                .collect(),
        ),
    )?;
    let mut m = Metrics {
        registry: &registry,
    };
    m.states(&status)?;
    m.gauge_opt(
        "shardrep_applied_seqno",
        "The highest seqno such that every seqno up to it is committed on the replica \
         (appliedLastSeqno).",
        status.applied_last_seqno.map(|s| s as f64),
    )?;
    m.gauge_opt(
        "shardrep_extracted_seqno",
        "The highest seqno in the queue: the last transaction extracted \
         (maximumStoredSeqNo).",
        status.maximum_stored_seq_no.map(|s| s as f64),
    )?;
    m.gauge_opt(
        "shardrep_queue_first_seqno",
        "The lowest seqno in the queue (minimumStoredSeqNo).",
        status.minimum_stored_seq_no.map(|s| s as f64),
    )?;
    if let Some(q) = &queue {
        m.gauge_opt(
            "shardrep_queue_bytes",
            "Bytes the queue takes on disk (while the service runs).",
            Some(q.size_bytes as f64),
        )?;
        m.gauge_opt(
            "shardrep_queue_transactions",
            "Transactions stored in the queue.",
            Some(q.count as f64),
        )?;
    }
    m.gauge_opt(
        "shardrep_apply_latency_seconds",
        "Seconds from the master's commit to the replica's commit of the last applied \
         transaction (appliedLatency).",
        status.applied_latency,
    )?;
    m.gauge_opt(
        "shardrep_relative_latency_seconds",
        "Seconds from the master's commit of the newest applied transaction to now \
         (relativeLatency).",
        status.relative_latency,
    )?;
    m.counter(
        "shardrep_transactions_applied_total",
        "Transactions committed on the replica.",
        status.transactions_applied_count,
    )?;
    m.counter(
        "shardrep_row_changes_applied_total",
        "Row changes (row image pairs) of the transactions committed on the replica.",
        status.row_changes_applied_count,
    )?;
    m.counter(
        "shardrep_blocks_committed_total",
        "Replica transactions committed (block commit groups source transactions).",
        status.blocks_committed_count,
    )?;
    m.counter(
        "shardrep_barriers_total",
        "Barriers: critical transactions run alone (serializationCount).",
        status.serialization_count,
    )?;
    m.counter(
        "shardrep_dependency_waits_total",
        "Transactions held back until the work they depend on committed \
         (dependencyWaitCount).",
        status.dependency_wait_count,
    )?;
    m.counter(
        "shardrep_window_waits_total",
        "Transactions held back at the commit window (windowWaitCount).",
        status.window_wait_count,
    )?;
    m.counter(
        "shardrep_transactions_dropped_total",
        "Transactions dropped by the shard filter (droppedCount).",
        status.dropped_count,
    )?;
    m.by_code(
        "shardrep_retries_total",
        "Transient errors retried, by server error code (0: a connection error).",
        status.retry_counts.as_deref(),
    )?;
    m.unknown_outcomes(&status)?;
    m.by_code(
        "shardrep_errors_total",
        "Runs ended by an error (OFFLINE:ERROR), by error code (0: none).",
        status.error_counts.as_deref(),
    )?;
    m.gauge_opt(
        "shardrep_in_flight_transactions",
        "Transactions sent to the channels and not yet committed (inFlightCount).",
        Some(status.in_flight_count as f64),
    )?;
    m.gauge_opt(
        "shardrep_binlog_bytes_behind",
        "Binlog bytes from the applied position to the master's binlog end (bytesBehind).",
        status.bytes_behind.map(|b| b as f64),
    )?;
    m.gauge_opt(
        "shardrep_transactions_behind",
        "Transactions in the queue not applied yet (transactionsBehind).",
        status.transactions_behind.map(|t| t as f64),
    )?;
    m.gauge_opt(
        "shardrep_apply_rate_bytes_per_second",
        "Applied binlog bytes per second over the last 30 s (applyRateBytesPerSecond).",
        status.apply_rate_bytes_per_second,
    )?;
    m.gauge_opt(
        "shardrep_apply_rate_transactions_per_second",
        "Applied seqnos per second over the last 30 s (applyRateTransactionsPerSecond).",
        status.apply_rate_transactions_per_second,
    )?;
    m.gauge_opt(
        "shardrep_catch_up_eta_seconds",
        "Estimated seconds until the service has applied the master's binlog end \
         (catchUpEtaSeconds).",
        status.catch_up_eta_seconds,
    )?;
    m.gauge_opt(
        "shardrep_uptime_seconds",
        "Seconds since the service started.",
        Some(status.uptime_seconds),
    )?;
    let applied_seqno = GaugeVec::new(
        Opts::new(
            "shardrep_channel_applied_seqno",
            "The seqno of the channel's last commit (its restart row).",
        ),
        &["channel"],
    )?;
    let applied_count = IntCounterVec::new(
        Opts::new(
            "shardrep_channel_transactions_applied_total",
            "Transactions the channel committed since the service went online.",
        ),
        &["channel"],
    )?;
    for c in &channels {
        let channel = c.channel.to_string();
        if let Some(seqno) = c.applied_last_seqno {
            applied_seqno
                .with_label_values(&[channel.as_str()])
                .set(seqno.get() as f64);
        }
        applied_count
            .with_label_values(&[channel.as_str()])
            .inc_by(c.applied_count);
    }
    registry.register(Box::new(applied_seqno))?;
    registry.register(Box::new(applied_count))?;
    let mut out = Vec::new();
    prometheus::TextEncoder::new().encode(&registry.gather(), &mut out)?;
    Ok(String::from_utf8(out).expect("the text format is UTF-8"))
}

/// Registers metrics of one scrape.
struct Metrics<'a> {
    registry: &'a Registry,
}

impl Metrics<'_> {
    fn register(&mut self, c: impl Collector + 'static) -> Result<(), prometheus::Error> {
        self.registry.register(Box::new(c))
    }

    /// A gauge, left out when `value` is unknown.
    fn gauge_opt(
        &mut self,
        name: &str,
        help: &str,
        value: Option<f64>,
    ) -> Result<(), prometheus::Error> {
        let Some(value) = value else {
            return Ok(());
        };
        let g = Gauge::new(name, help)?;
        g.set(value);
        self.register(g)
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) -> Result<(), prometheus::Error> {
        let c = IntCounter::new(name, help)?;
        c.inc_by(value);
        self.register(c)
    }

    /// A counter by `code` from status's `code=N[,code=N...]`.
    fn by_code(
        &mut self,
        name: &str,
        help: &str,
        counts: Option<&str>,
    ) -> Result<(), prometheus::Error> {
        let c = IntCounterVec::new(Opts::new(name, help), &["code"])?;
        // Code 0 always, so that the series exists (at 0) before the
        // first one: `increase()` then sees the first error too.
        c.with_label_values(&["0"]);
        for pair in counts.into_iter().flat_map(|t| t.split(',')) {
            if let Some((code, n)) = pair.split_once('=') {
                c.with_label_values(&[code]).inc_by(n.parse().unwrap_or(0));
            }
        }
        self.register(c)
    }

    /// `shardrep_unknown_outcomes_total{outcome="committed"|"not_committed"}`:
    /// blocks whose COMMIT's reply was lost, by what their restart row
    /// said (unknownOutcomeCommittedCount, unknownOutcomeReappliedCount).
    fn unknown_outcomes(&mut self, status: &Status) -> Result<(), prometheus::Error> {
        let c = IntCounterVec::new(
            Opts::new(
                "shardrep_unknown_outcomes_total",
                "Blocks whose COMMIT's reply was lost, by what the restart row read again said: \
                 committed (not applied again) or not_committed (applied again).",
            ),
            &["outcome"],
        )?;
        c.with_label_values(&["committed"])
            .inc_by(status.unknown_outcome_committed_count);
        c.with_label_values(&["not_committed"])
            .inc_by(status.unknown_outcome_reapplied_count);
        self.register(c)
    }

    /// `shardrep_state{state="..."}`: 1 for the current state, 0 for the
    /// others (the enum pattern of the Prometheus naming guide).
    fn states(&mut self, status: &Status) -> Result<(), prometheus::Error> {
        let g = GaugeVec::new(
            Opts::new(
                "shardrep_state",
                "The service's state: 1 for the current one, 0 for the others.",
            ),
            &["state"],
        )?;
        for state in State::ALL {
            g.with_label_values(&[state.to_string().as_str()])
                .set(if state == status.state { 1.0 } else { 0.0 });
        }
        self.register(g)
    }
}
