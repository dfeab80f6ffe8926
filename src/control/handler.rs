//! [`ServiceHandler`]: the [`ControlHandler`] of a running
//! [`Service`]. Each request calls the service's method of the same name
//! and turns its typed answer into the protocol's result (the status views
//! in [`super::status`]); a [`ServiceError`] becomes the [`ControlError`]
//! of the matching [`ErrorKind`], with the same message.

use std::sync::Arc;

use serde_json::{json, Value};

use super::protocol::{
    ChannelStatus, ControlError, ErrorKind, LogEntry, OfflineRequest, OnlineRequest, ShardRow,
    ShardStatus, SourceSetRequest, Status,
};
use super::server::ControlHandler;
use super::status;
use crate::position::Seqno;
use crate::replicator::service::{Service, ServiceError};
use crate::replicator::state::OfflineEnd;
use crate::shard::map::ShardEntry;

impl From<ServiceError> for ControlError {
    fn from(e: ServiceError) -> Self {
        let kind = match &e {
            ServiceError::IllegalState(_) | ServiceError::Transition(_) => ErrorKind::IllegalState,
            ServiceError::Invalid(_) => ErrorKind::Invalid,
            ServiceError::NotFound(_) => ErrorKind::NotFound,
            ServiceError::Unsupported(_) => ErrorKind::Unsupported,
            ServiceError::Failed(_) => ErrorKind::Failed,
        };
        ControlError::new(kind, e.to_string())
    }
}

/// Serves a [`Service`] on the control socket
/// ([`ControlServer::start`](super::ControlServer::start)).
#[derive(Clone)]
pub struct ServiceHandler {
    service: Arc<Service>,
}

impl ServiceHandler {
    /// The handler of `service`.
    pub fn new(service: Arc<Service>) -> Self {
        ServiceHandler { service }
    }
}

/// The shard map entries of `rows`, all checked before any is used.
///
/// # Errors
/// An [`ErrorKind::Invalid`] error naming the first bad value.
fn entries(rows: &[ShardRow]) -> Result<Vec<ShardEntry>, ControlError> {
    rows.iter().map(ShardEntry::try_from).collect()
}

impl ControlHandler for ServiceHandler {
    fn status(&self) -> Result<Status, ControlError> {
        Ok(status::status(self.service.status()))
    }

    fn channel_status(&self) -> Result<Vec<ChannelStatus>, ControlError> {
        let channels = self.service.channel_status();
        Ok(channels.into_iter().map(status::channel).collect())
    }

    fn shard_status(&self) -> Result<Vec<ShardStatus>, ControlError> {
        let shards = self.service.shard_status()?;
        Ok(shards.into_iter().map(status::shard).collect())
    }

    fn queue_status(&self) -> Result<Value, ControlError> {
        self.log_info()
    }

    fn online(&self, request: OnlineRequest) -> Result<Value, ControlError> {
        let OnlineRequest {
            skip_seqnos,
            until_seqno,
        } = request;
        let state = self.service.go_online(skip_seqnos, until_seqno)?;
        Ok(json!({ "state": state }))
    }

    fn offline(&self, request: OfflineRequest) -> Result<Value, ControlError> {
        let (state, number) = self
            .service
            .go_offline_numbered(request.immediate, request.at_seqno)?;
        Ok(json!({
            "state": state,
            "offlineAtSeqno": request.at_seqno,
            "offlineNumber": number,
        }))
    }

    fn offline_end(&self, number: u64) -> Result<OfflineEnd, ControlError> {
        Ok(self.service.offline_end(number))
    }

    fn shard_list(&self) -> Result<Vec<ShardRow>, ControlError> {
        let map = self.service.shard_map()?;
        Ok(map.iter().map(ShardRow::from).collect())
    }

    fn shard_insert(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        Ok(self.service.insert_shards(entries(&rows)?)?)
    }

    fn shard_update(&self, rows: Vec<ShardRow>) -> Result<usize, ControlError> {
        Ok(self.service.update_shards(entries(&rows)?)?)
    }

    fn shard_delete(&self, ids: Vec<String>) -> Result<usize, ControlError> {
        Ok(self.service.delete_shards(&ids)?)
    }

    fn shard_delete_all(&self) -> Result<usize, ControlError> {
        Ok(self.service.delete_all_shards()?)
    }

    fn log_list(&self, low: Option<u64>, high: Option<u64>) -> Result<Vec<LogEntry>, ControlError> {
        let transactions = self.service.log_list(low, high)?;
        Ok(transactions.iter().map(LogEntry::of).collect())
    }

    fn log_info(&self) -> Result<Value, ControlError> {
        Ok(status::queue(&self.service.queue_info()?))
    }

    fn handback(&self, start_slave: bool) -> Result<Value, ControlError> {
        let done = self.service.handback(start_slave)?;
        let result = json!({
            "seqno": done.seqno.map(Seqno::get),
            "masterLogFile": done.point.file,
            "masterLogPos": done.point.pos,
            "gtidSlavePos": done.point.gtid_pos,
            "useGtid": done.use_gtid,
            "slaveStarted": done.slave_started,
            "statements": done.statements,
        });
        Ok(result)
    }

    fn reset(&self, confirm: &str, drop_catalog: bool) -> Result<Value, ControlError> {
        let done = self.service.reset(confirm, drop_catalog)?;
        Ok(json!({
            "state": done.state,
            "queueRemoved": done.queue_removed.map(|dir| dir.display().to_string()),
            "restartRowsDeleted": done.restart_rows_deleted,
            "skippedDeleted": done.skipped_deleted,
            "catalogDropped": done.catalog_dropped,
        }))
    }

    fn source_set(&self, request: SourceSetRequest) -> Result<Value, ControlError> {
        let done = self
            .service
            .set_source(crate::replicator::service::switch::SourceRequest {
                host: request.host,
                port: request.port,
                user: request.user,
                server_id: request.server_id,
                timeout: std::time::Duration::from_secs(request.timeout_secs),
            })?;
        // An empty GTID position or state is null, as every other field
        // without a value.
        let text = |t: String| (!t.is_empty()).then_some(t);
        Ok(json!({
            "previous": done.previous,
            "source": done.source,
            "sourceServerId": done.source_server_id,
            "masterGtidPos": text(done.master_gtid_pos.to_string()),
            "masterGtidState": text(done.master_gtid_state.to_string()),
            "appliedSeqno": done.applied_seqno.map(Seqno::get),
            "appliedGtid": text(done.applied_gtid.to_string()),
            "keptThroughSeqno": done.kept_through.map(Seqno::get),
            "discardedSeqnos": (!done.discarded.is_empty()).then_some(done.discarded),
            "resumeGtid": done.resume_gtid.map(|g| g.to_string()),
            "firstSeqno": done.first_seqno.map(Seqno::get),
            "state": done.state,
            "unchanged": done.unchanged,
        }))
    }

    fn check(
        &self,
        request: crate::replicator::check::CheckRequest,
    ) -> Result<Value, ControlError> {
        self.service.start_check(request)?;
        Ok(serde_json::json!({ "started": true }))
    }

    fn check_cancel(&self) -> Result<Value, ControlError> {
        self.service.cancel_check()?;
        Ok(serde_json::json!({ "cancelled": true }))
    }

    fn check_status(&self) -> Result<Value, ControlError> {
        serde_json::to_value(self.service.check_status())
            .map_err(|e| ControlError::failed(format!("check status: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicator::state::{Event, StateMachine};

    #[test]
    fn service_errors_keep_their_message_and_get_their_kind() {
        let transition = StateMachine::new().apply(Event::Offline).unwrap_err();
        for (error, kind) in [
            (
                ServiceError::illegal_state("a run is active"),
                ErrorKind::IllegalState,
            ),
            (
                ServiceError::Invalid("seqno 3 is handled".into()),
                ErrorKind::Invalid,
            ),
            (
                ServiceError::NotFound("no shard x".into()),
                ErrorKind::NotFound,
            ),
            (
                ServiceError::Unsupported("extractor".into()),
                ErrorKind::Unsupported,
            ),
            (ServiceError::failed("replica down"), ErrorKind::Failed),
            (
                ServiceError::Transition(transition),
                ErrorKind::IllegalState,
            ),
        ] {
            let message = error.to_string();
            assert_eq!(ControlError::from(error), ControlError::new(kind, message));
        }
        assert_eq!(
            ControlError::from(ServiceError::from(
                StateMachine::new().apply(Event::Offline).unwrap_err()
            ))
            .message,
            "cannot offline in state OFFLINE:NORMAL: already offline"
        );
    }
}
