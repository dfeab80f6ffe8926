//! [`ServiceError`]: why the service refused or failed a DBA's request.
//!
//! The control layer maps each variant to the protocol's error kind
//! (`crate::control`); the message is the error's `Display`, one line,
//! with no password.

use crate::replicator::state::IllegalTransition;

/// Why a request to the [`Service`](super::Service) was refused or
/// failed. Nothing was changed unless the message says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The service's state does not allow the request: a run is (or is
    /// not) active, a seqno is already past, the last stop was not clean,
    /// the restart rows are not at one seqno (a handback refused), a DDL
    /// was started but not recorded, temporary tables are open.
    #[error("{0}")]
    IllegalState(String),
    /// An event the state machine does not allow in the current state.
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
    /// The request's values were refused: skipped seqnos already handled,
    /// not extracted yet or too many; a wrong `reset` confirmation; a
    /// shard the map refuses; a `log list` range too long.
    #[error("{0}")]
    Invalid(String),
    /// A named shard does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Not offered by this service (an extractor-role service never
    /// connects to the replica).
    #[error("{0}")]
    Unsupported(String),
    /// The operation was tried and failed: the replica, the queue, the
    /// file system, a thread or runtime that did not start.
    #[error("{0}")]
    Failed(String),
}

impl ServiceError {
    /// [`ServiceError::IllegalState`].
    pub fn illegal_state(message: impl Into<String>) -> Self {
        ServiceError::IllegalState(message.into())
    }

    /// [`ServiceError::Failed`].
    pub fn failed(message: impl Into<String>) -> Self {
        ServiceError::Failed(message.into())
    }
}
