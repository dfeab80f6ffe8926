//! The control surface (DESIGN §6, issue 7): a JSON-lines protocol over a
//! Unix socket (mode 0600) between a running service and `shardrepctl`.
//!
//! - [`protocol`]: the [`Request`]s, [`Response`]s and result shapes
//!   ([`Status`] with trepctl's field names, ...);
//! - [`server`]: [`ControlServer`], which binds `[control] socket` and
//!   dispatches each request to a [`ControlHandler`]; `wait` is done by the
//!   server, polling the handler's status;
//! - [`handler`]: [`ServiceHandler`], the [`ControlHandler`] of a
//!   [`Service`](crate::replicator::service::Service): the service's
//!   answers and errors as the protocol's results and error kinds;
//! - [`status`]: the status views assembled from the service's snapshots;
//! - [`client`]: [`Client`], one request per connection.
//!
//! The control layer sits above the replicator: it calls the service, the
//! service knows nothing of the protocol.

pub mod client;
pub mod handler;
pub mod metrics;
pub mod progress;
pub mod protocol;
pub mod server;
pub mod status;

pub use client::{socket_from_config, Client, ClientError};
pub use handler::ServiceHandler;
pub use protocol::{
    ChannelStatus, ControlError, ErrorKind, LogEntry, OfflineRequest, OnlineRequest, Request,
    Response, ServiceInfo, ShardRow, ShardStatus, Status, StatusName, WaitFor, WaitResult,
};
pub use server::{ControlHandler, ControlServer, ServerError};
