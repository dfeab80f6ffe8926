//! The control surface (DESIGN §6, issue 7): a JSON-lines protocol over a
//! Unix socket (mode 0600) between a running service and `shardrepctl`.
//!
//! - [`protocol`]: the [`Request`]s, [`Response`]s and result shapes
//!   ([`Status`] with trepctl's field names, ...);
//! - [`server`]: [`ControlServer`], which binds `[control] socket` and
//!   dispatches each request to a [`ControlHandler`] (implemented by the
//!   replicator); `wait` is done by the server, polling the handler's
//!   status;
//! - [`client`]: [`Client`], one request per connection.

pub mod client;
pub mod protocol;
pub mod server;

pub use client::{socket_from_config, Client, ClientError};
pub use protocol::{
    ChannelStatus, ControlError, ErrorKind, LogEntry, OfflineRequest, OnlineRequest, Request,
    Response, ServiceInfo, ShardRow, ShardStatus, Status, StatusName, WaitFor, WaitResult,
};
pub use server::{ControlHandler, ControlServer, ServerError};
