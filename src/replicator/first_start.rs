//! A service's first start: the catalog schema on the replica is created
//! only once both servers answer, so a first start that fails on the
//! master (a wrong password, a master that is down) leaves the replica as
//! it was; and a first start that fails after creating it, before any
//! channel applies (a refused takeover, native replication running),
//! removes it again ([`remove_new_catalog`]).

use super::error::SetupServer;
use super::RunError;
use crate::config::{Config, SourceEndpoint};

/// Whether `catalog` exists on the replica (`conn`).
///
/// # Errors
/// [`RunError::Setup`] with the server's code.
async fn catalog_exists(conn: &mut mysql_async::Conn, catalog: &str) -> Result<bool, RunError> {
    use mysql_async::prelude::Queryable;
    let found: Option<String> = conn
        .exec_first(crate::catalog::SCHEMA_EXISTS, (catalog,))
        .await
        .map_err(|e| {
            RunError::setup_client(
                SetupServer::Replica,
                format!(
                    "cannot look for the catalog schema {catalog} on the replica: {}",
                    crate::mysql::ErrorText(&e)
                ),
                &e,
            )
        })?;
    Ok(found.is_some())
}

/// Before the catalog is created (first start, live source): connects to
/// the master once and disconnects, so a master that refuses the
/// service's user or does not answer fails the start with its error (and
/// code) before anything is written to the replica. A later start (the
/// catalog exists) does not ask: the channels apply what is queued while
/// the extractor waits for the master. Returns whether the catalog exists
/// (else this start creates it).
///
/// # Errors
/// [`RunError::Setup`] naming the master, with its code (e.g. 1045).
pub(super) async fn master_answers_before_catalog(
    config: &Config,
    replica: &mut mysql_async::Conn,
    catalog: &str,
) -> Result<bool, RunError> {
    if catalog_exists(replica, catalog).await? {
        return Ok(true);
    }
    let SourceEndpoint::Live(live) = &config.source.endpoint else {
        return Ok(false);
    };
    let opts = crate::mysql::connection_opts(
        &live.host,
        live.port,
        None,
        &live.user,
        live.password.expose(),
    );
    match mysql_async::Conn::new(opts).await {
        Ok(master) => {
            let _ = master.disconnect().await;
            Ok(false)
        }
        Err(e) => Err(RunError::setup_client(
            SetupServer::Master,
            format!(
                "cannot connect to the master {}:{}: {}; nothing was created on the replica \
                 (the catalog {catalog} is created once both servers answer)",
                live.host,
                live.port,
                crate::mysql::ErrorText(&e)
            ),
            &e,
        )),
    }
}

/// Drops the catalog schema `catalog` that this start created (without
/// binary logging, as it was created), after the start failed before any
/// channel applied: a failed first start leaves the replica as it was. An
/// empty catalog left behind would hold restart rows, and another
/// service's takeover of this replica would be refused as if this service
/// applied there. A catalog that cannot be dropped now is logged and left:
/// the next start of the service reuses it.
pub(super) async fn remove_new_catalog(config: &Config, catalog: &str, why: &RunError) {
    use crate::mysql::QueryNoLog;
    let dropped = async {
        let mut conn = mysql_async::Conn::new(super::replica_opts(config)).await?;
        conn.query_drop_no_log(&crate::catalog::schema_drop(catalog))
            .await?;
        conn.disconnect().await
    }
    .await;
    match dropped {
        Ok(()) => tracing::info!(
            catalog,
            "the first start failed before applying anything: the catalog schema it created \
             is removed"
        ),
        Err(e) => tracing::warn!(
            catalog,
            error = %crate::mysql::ErrorText(&e),
            start_error = %why,
            "the first start failed, and the catalog schema it created cannot be removed: \
             the next start reuses it"
        ),
    }
}
