//! A run's errors ([`RunError`], [`ExtractFailure`]) and which one wins
//! when several parts of a run fail ([`Ended::first_error`]).

use crate::applier::error::ApplyError;
use crate::applier::restart;
use crate::config::Config;
use crate::scheduler::{self, SchedulerError};

use super::native::native_replication_error;

/// Errors of a run: what failed, with the part's own message.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run could not start: configuration files (shard map, shard
    /// list) could not be loaded, the replica refused the connection, the
    /// restart table or shard store could not be prepared.
    #[error("{message}")]
    Setup {
        /// What failed, one line.
        message: String,
        /// The server's error code (e.g. 1045), when a server sent one.
        code: Option<u16>,
        /// The server that failed, when the error came from one.
        server: Option<SetupServer>,
    },
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] crate::queue::QueueError),
    /// A queued transaction could not be read back (a damaged record or
    /// segment): nothing from it on was applied.
    #[error("cannot read seqno {seqno} from the queue: {message}")]
    QueueRead {
        /// The seqno that could not be read.
        seqno: u64,
        /// The queue's error.
        message: String,
    },
    /// The replica's restart table failed.
    #[error(transparent)]
    Restart(#[from] restart::RestartError),
    /// The extractor stopped on an error.
    #[error("extractor: {message}")]
    Extract {
        /// What failed, one line (binlog position or master address).
        message: String,
        /// The master's error code, when it sent one.
        code: Option<u16>,
    },
    /// The queue's file system is full (or the user's quota is used up):
    /// the extractor could not store the next transaction. Nothing stored
    /// is lost; the extraction resumes after the last stored one.
    #[error("extractor: {message}")]
    QueueFull {
        /// The queue's error, naming the file that could not be written.
        message: String,
    },
    /// The scheduler or a channel stopped on an error (OFFLINE:ERROR).
    #[error(transparent)]
    Apply(#[from] scheduler::SchedulerError),
    /// Native replication's SQL thread runs on the replica (see
    /// [`crate::config::ReplicaConfig::allow_native_replication`]).
    #[error("{0}")]
    NativeReplication(String),
}

impl RunError {
    /// A [`RunError::Setup`] without a server code.
    pub fn setup(message: impl Into<String>) -> RunError {
        RunError::Setup {
            message: message.into(),
            code: None,
            server: None,
        }
    }

    /// A [`RunError::Setup`] for a client error `e` of `server`, with its
    /// server code.
    pub(super) fn setup_client(
        server: SetupServer,
        message: String,
        e: &mysql_async::Error,
    ) -> RunError {
        RunError::Setup {
            message,
            code: match e {
                mysql_async::Error::Server(s) => Some(s.code),
                _ => None,
            },
            server: Some(server),
        }
    }
}

/// The server a [`RunError::Setup`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupServer {
    /// The source master (`[source]`).
    Master,
    /// The replica (`[replica]`).
    Replica,
}

impl SetupServer {
    /// The configuration section of its connection: `source`, `replica`.
    pub fn section(self) -> &'static str {
        match self {
            SetupServer::Master => "source",
            SetupServer::Replica => "replica",
        }
    }

    /// `the master`, `the replica`.
    pub fn name(self) -> &'static str {
        match self {
            SetupServer::Master => "the master",
            SetupServer::Replica => "the replica",
        }
    }
}

/// Why the extractor thread stopped: the message and, when the master sent
/// an error packet, its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractFailure {
    /// What failed, one line.
    pub message: String,
    /// The master's error code.
    pub code: Option<u16>,
    /// The queue's file system is full ([`RunError::QueueFull`]).
    pub queue_full: bool,
}

impl From<String> for ExtractFailure {
    fn from(message: String) -> Self {
        ExtractFailure {
            message,
            code: None,
            queue_full: false,
        }
    }
}

impl From<&str> for ExtractFailure {
    fn from(message: &str) -> Self {
        ExtractFailure::from(message.to_string())
    }
}

impl From<crate::extractor::ExtractError> for ExtractFailure {
    fn from(e: crate::extractor::ExtractError) -> Self {
        let code = match &e {
            crate::extractor::ExtractError::Master { code, .. } => *code,
            _ => None,
        };
        ExtractFailure {
            message: e.to_string(),
            code,
            queue_full: false,
        }
    }
}

impl From<ExtractFailure> for RunError {
    fn from(
        ExtractFailure {
            message,
            code,
            queue_full,
        }: ExtractFailure,
    ) -> Self {
        if queue_full {
            RunError::QueueFull { message }
        } else {
            RunError::Extract { message, code }
        }
    }
}

/// How each part of a run ended, once every thread is joined.
pub(super) struct Ended {
    /// The scheduler's outcome.
    pub scheduler: Result<(), SchedulerError>,
    /// The first error a channel recorded, possibly after the scheduler's
    /// last look.
    pub channel_error: Option<ApplyError>,
    /// The first channel (index) whose thread panicked.
    pub panicked: Option<usize>,
    /// The native appliers the feed found running on the replica.
    pub native_running: Option<Vec<String>>,
    /// The seqno a queue read failed at (the scheduler's queue error is
    /// its text).
    pub read_failed_at: Option<u64>,
    /// The extractor thread's outcome.
    pub extract: Result<(), ExtractFailure>,
}

impl Ended {
    /// The error the run ends with, the first of:
    /// 1. a channel's apply error: it may come after the scheduler's last
    ///    look (e.g. on the last block before a STOP marker) and wins over
    ///    a clean outcome and over the "channel gone" it causes;
    /// 2. a channel thread that panicked ([`SchedulerError::ChannelGone`]);
    /// 3. native replication found running while the run applied
    ///    ([`RunError::NativeReplication`]);
    /// 4. a queue read that failed ([`RunError::QueueRead`], with its
    ///    seqno);
    /// 5. the scheduler's own error;
    /// 6. the extractor's error ([`RunError::Extract`], with the master's
    ///    code): the scheduler dispatched everything extracted before it.
    ///
    /// # Errors
    /// That error; `Ok` when every part ended cleanly.
    pub fn first_error(self, config: &Config) -> Result<(), RunError> {
        if let Some(error) = self.channel_error {
            return Err(RunError::Apply(SchedulerError::Apply(Box::new(error))));
        }
        if let Some(index) = self.panicked {
            return Err(RunError::Apply(SchedulerError::ChannelGone(
                crate::position::ChannelId::recorded(index as u16),
            )));
        }
        if let Some(running) = self.native_running {
            return Err(native_replication_error(
                config,
                &running,
                "(started while this service applied)",
            ));
        }
        if let (Err(SchedulerError::Queue(message)), Some(seqno)) =
            (&self.scheduler, self.read_failed_at)
        {
            return Err(RunError::QueueRead {
                seqno,
                message: message.clone(),
            });
        }
        self.scheduler?;
        self.extract?;
        Ok(())
    }
}
