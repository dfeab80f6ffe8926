//! A service's first start: the catalog schema on the replica is created
//! only once both servers answer, so a first start that fails on the
//! master (a wrong password, a master that is down) leaves the replica as
//! it was.

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
/// the extractor waits for the master.
///
/// # Errors
/// [`RunError::Setup`] naming the master, with its code (e.g. 1045).
pub(super) async fn master_answers_before_catalog(
    config: &Config,
    replica: &mut mysql_async::Conn,
    catalog: &str,
) -> Result<(), RunError> {
    let SourceEndpoint::Live(live) = &config.source.endpoint else {
        return Ok(());
    };
    if catalog_exists(replica, catalog).await? {
        return Ok(());
    }
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
            Ok(())
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
