//! The shard map stored with the service: table `shard_map` in the catalog
//! schema `shardrep_<service>` on the replica. At first start (no table
//! yet) it is loaded from `shard_filter.map_file`; afterwards the stored
//! map is the service's map, even when empty (`shardrepctl shard
//! delete-all`), and edits (`shardrepctl shard …`) are written back with
//! [`save`].
//!
//! Columns: `shard_id` (primary key), `master` (a service name or
//! `#LOCAL`), `critical` (0/1). Written with `sql_log_bin = 0`: the map is
//! the service's own configuration, not replicated data.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::applier::sql::quote_ident;
use crate::shard::map::{Master, ShardEntry, ShardMap};

/// Name of the table inside the catalog schema.
pub const SHARD_MAP_TABLE: &str = "shard_map";

/// Errors of the stored shard map.
#[derive(Debug, thiserror::Error)]
pub enum ShardStoreError {
    /// The replica refused a statement.
    #[error("shard map table {catalog}.{SHARD_MAP_TABLE}: {source}")]
    Sql {
        /// Catalog schema.
        catalog: String,
        /// The error.
        #[source]
        source: mysql_async::Error,
    },
    /// A stored row is not a valid shard map entry.
    #[error("shard map table {catalog}.{SHARD_MAP_TABLE}: shard {shard_id:?}: {message}")]
    BadRow {
        /// Catalog schema.
        catalog: String,
        /// The row's shard id.
        shard_id: String,
        /// What is wrong.
        message: String,
    },
}

fn table(catalog: &str) -> String {
    format!("{}.{}", quote_ident(catalog), quote_ident(SHARD_MAP_TABLE))
}

/// Creates the table if needed and returns the stored map; when the table
/// did not exist yet and `initial` is given, stores `initial` and returns
/// it. An existing table is the map even when empty (an emptied map is not
/// seeded again).
///
/// # Errors
/// [`ShardStoreError`].
pub async fn load_or_init(
    conn: &mut Conn,
    catalog: &str,
    initial: Option<&ShardMap>,
) -> Result<ShardMap, ShardStoreError> {
    let sql_err = |source| ShardStoreError::Sql {
        catalog: catalog.to_string(),
        source,
    };
    let existed: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (catalog, SHARD_MAP_TABLE),
        )
        .await
        .map_err(sql_err)?;
    let existed = existed.unwrap_or(0) > 0;
    conn.query_drop(format!(
        "SET SESSION sql_log_bin = 0; CREATE DATABASE IF NOT EXISTS {}; \
         CREATE TABLE IF NOT EXISTS {} (\
         shard_id VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, \
         master VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL, \
         critical TINYINT NOT NULL DEFAULT 0) ENGINE=InnoDB; \
         SET SESSION sql_log_bin = DEFAULT",
        quote_ident(catalog),
        table(catalog)
    ))
    .await
    .map_err(sql_err)?;
    let stored = read(conn, catalog).await?;
    match initial {
        Some(map) if !existed && stored.is_empty() => {
            save(conn, catalog, map).await?;
            Ok(map.clone())
        }
        _ => Ok(stored),
    }
}

/// The stored map.
///
/// # Errors
/// [`ShardStoreError`].
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<ShardMap, ShardStoreError> {
    let rows: Vec<(String, String, i8)> = conn
        .query(format!(
            "SELECT shard_id, master, critical FROM {} ORDER BY shard_id",
            table(catalog)
        ))
        .await
        .map_err(|source| ShardStoreError::Sql {
            catalog: catalog.to_string(),
            source,
        })?;
    let mut map = ShardMap::new();
    for (shard_id, master, critical) in rows {
        let bad = |message: String| ShardStoreError::BadRow {
            catalog: catalog.to_string(),
            shard_id: shard_id.clone(),
            message,
        };
        let master = Master::parse(&master).map_err(bad)?;
        let entry = ShardEntry::new(shard_id.clone(), master, critical != 0).map_err(bad)?;
        map.insert(entry).map_err(|e| bad(e.to_string()))?;
    }
    Ok(map)
}

/// Replaces the stored map with `map`, in one transaction.
///
/// # Errors
/// [`ShardStoreError`].
pub async fn save(conn: &mut Conn, catalog: &str, map: &ShardMap) -> Result<(), ShardStoreError> {
    let sql_err = |source| ShardStoreError::Sql {
        catalog: catalog.to_string(),
        source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0; START TRANSACTION")
        .await
        .map_err(sql_err)?;
    let result = async {
        conn.query_drop(format!("DELETE FROM {}", table(catalog)))
            .await?;
        let insert = format!(
            "INSERT INTO {} (shard_id, master, critical) VALUES (?, ?, ?)",
            table(catalog)
        );
        for entry in map.iter() {
            conn.exec_drop(
                insert.as_str(),
                (
                    entry.shard_id.as_str(),
                    entry.master.as_str(),
                    u8::from(entry.critical),
                ),
            )
            .await?;
        }
        conn.query_drop("COMMIT").await
    }
    .await;
    if result.is_err() {
        let _ = conn.query_drop("ROLLBACK").await;
    }
    let restore = conn.query_drop("SET SESSION sql_log_bin = DEFAULT").await;
    result.map_err(sql_err)?;
    restore.map_err(sql_err)
}
