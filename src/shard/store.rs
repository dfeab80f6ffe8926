//! The shard map stored with the service: table `shard_map` in the catalog
//! schema `shardrep_<service>` on the replica. At first start (no table
//! yet) it is loaded from `shard_filter.map_file`; afterwards the stored
//! map is the service's map, even when empty (`shardrepctl shard
//! delete-all`), and edits (`shardrepctl shard …`) are written back with
//! [`save`].
//!
//! Columns ([`catalog::shard_map_create`]): `shard_id` (primary key),
//! `master` (a service name or `#LOCAL`), `critical` (0/1). Written with
//! `sql_log_bin = 0`: the map is the service's own configuration, not
//! replicated data.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::catalog::{self, SHARD_MAP_TABLE, TABLE_EXISTS};
use crate::shard::map::{Master, ShardEntry, ShardMap};

/// Errors of the stored shard map.
#[derive(Debug, thiserror::Error)]
pub enum ShardStoreError {
    /// The replica refused a statement.
    #[error(
        "shard map table {catalog}.{SHARD_MAP_TABLE}: {}",
        crate::mysql::ErrorText(cause)
    )]
    Sql {
        /// Catalog schema.
        catalog: String,
        /// The error.
        cause: mysql_async::Error,
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
        cause: source,
    };
    let existed: Option<i64> = conn
        .exec_first(TABLE_EXISTS, (catalog, SHARD_MAP_TABLE))
        .await
        .map_err(sql_err)?;
    let existed = existed.unwrap_or(0) > 0;
    conn.query_drop(catalog::shard_map_create(catalog))
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

/// The map as [`load_or_init`] would return it, without writing anything:
/// the stored map when the table exists, else `initial` (or an empty map).
/// For read-only commands (`shard list`, a check's shard list), which must
/// not create the catalog on a replica the service never took over.
///
/// # Errors
/// [`ShardStoreError`].
pub async fn read_or_initial(
    conn: &mut Conn,
    catalog: &str,
    initial: Option<&ShardMap>,
) -> Result<ShardMap, ShardStoreError> {
    let existed: Option<i64> = conn
        .exec_first(TABLE_EXISTS, (catalog, SHARD_MAP_TABLE))
        .await
        .map_err(|source| ShardStoreError::Sql {
            catalog: catalog.to_string(),
            cause: source,
        })?;
    if existed.unwrap_or(0) > 0 {
        read(conn, catalog).await
    } else {
        Ok(initial.cloned().unwrap_or_default())
    }
}

/// The stored map.
///
/// # Errors
/// [`ShardStoreError`].
pub async fn read(conn: &mut Conn, catalog: &str) -> Result<ShardMap, ShardStoreError> {
    let rows: Vec<(String, String, i8)> = conn
        .query(catalog::shard_map_select(catalog))
        .await
        .map_err(|source| ShardStoreError::Sql {
            catalog: catalog.to_string(),
            cause: source,
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
        cause: source,
    };
    conn.query_drop("SET SESSION sql_log_bin = 0; START TRANSACTION")
        .await
        .map_err(sql_err)?;
    let result = async {
        conn.query_drop(catalog::shard_map_delete(catalog)).await?;
        let insert = catalog::shard_map_insert(catalog);
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
