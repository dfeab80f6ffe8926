//! What a channel knows of a replica table ([`ReplicaTable`]): names, key
//! and the column facts a `NO_LOG` binlog lacks, from the binlog's
//! metadata when complete, else from the replica's `information_schema`;
//! cached per channel until DDL ([`TableCache`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::applier::columns::{self, ReplicaColumn};
use crate::applier::sql::TableShape;
use crate::event::{ColumnInfo, TableInfo};

/// What the replica says about a table: names, key and the column facts
/// a `NO_LOG` binlog lacks (signedness, fixed-length binary strings).
#[derive(Debug)]
pub struct ReplicaTable {
    /// Names and key, as the SQL builder takes them.
    pub shape: TableShape,
    /// The replica's columns in table order; empty when the binlog's
    /// metadata was complete and the replica was not asked.
    pub columns: Vec<ReplicaColumn>,
    /// Consecutive UPDATEs (and DELETE + INSERT pairs of the same keys) may
    /// go out merged ([`SqlBuilder::plan_merged_updates`](crate::applier::sql::SqlBuilder::plan_merged_updates)): the replica's
    /// table has a primary key and no other unique key, no triggers, no
    /// foreign keys either way (none of its own, none referencing it) and
    /// no generated columns.
    pub merge_updates: bool,
    /// The table's storage engine, when it does not take part in
    /// transactions (`information_schema.ENGINES.TRANSACTIONS` is `NO`:
    /// MyISAM, Aria, MEMORY, CSV, ...): its changes stay whatever the
    /// transaction around them does, so a transaction that changes it is
    /// applied alone and never run again after a part of it ran.
    pub non_transactional: Option<String>,
    /// The replica's table has triggers (`information_schema.TRIGGERS`):
    /// its row changes cannot be re-written as SQL (they would fire them,
    /// where native replication's row applier does not).
    pub triggers: bool,
    /// The replica's table is system-versioned
    /// (`information_schema.TABLES.TABLE_TYPE`): its history's period
    /// columns are the master's only through the server's row applier.
    pub system_versioned: bool,
    /// The last [`ReplicaTable::complete_columns`] answer and the binlog
    /// columns it was made from (the same for every rows change of the
    /// table until DDL): asked for every rows change.
    completed: Mutex<Option<Completed>>,
}

/// Binlog columns and [`ReplicaTable::complete_columns`]'s answer for them.
type Completed = (Vec<ColumnInfo>, Arc<[ColumnInfo]>);

impl ReplicaTable {
    /// The binlog's columns with what its metadata lacked (signedness,
    /// binary CHAR/BINARY) filled in from the replica's definition
    /// ([`columns::complete`]); the previous answer again when `binlog`
    /// equals the columns it was made from.
    pub fn complete_columns(&self, binlog: &[ColumnInfo]) -> Arc<[ColumnInfo]> {
        let mut completed = self.completed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((from, answer)) = &*completed {
            if from[..] == *binlog {
                return answer.clone();
            }
        }
        let answer: Arc<[ColumnInfo]> = if self.columns.is_empty() {
            binlog.into()
        } else {
            columns::complete(binlog, &self.columns).into()
        };
        *completed = Some((binlog.to_vec(), answer.clone()));
        answer
    }
}

/// A channel's [`ReplicaTable`]s by schema, then table, kept until DDL
/// (two levels so that a lookup, made for every rows change, borrows the
/// names instead of building a key).
#[derive(Debug, Default)]
pub struct TableCache {
    /// Each table with the number of columns of the binlog's TABLE_MAP it
    /// was looked up for: a TABLE_MAP with another count means the table
    /// changed. (Not the replica's own count: a system-versioned table's
    /// TABLE_MAP has its hidden period columns, which
    /// `information_schema.COLUMNS` does not list, so that comparison
    /// looked the table up again for every transaction.)
    tables: HashMap<String, HashMap<String, (usize, Arc<ReplicaTable>)>>,
}

impl TableCache {
    /// Forgets every table (after DDL).
    pub fn clear(&mut self) {
        self.tables.clear();
    }

    /// Column names, key, signedness and binary strings of a table, from
    /// the binlog metadata when complete, else from the replica (cached
    /// until DDL).
    ///
    /// # Errors
    /// A query on `conn` failed.
    pub async fn lookup(
        &mut self,
        conn: &mut Conn,
        info: &TableInfo,
    ) -> Result<Arc<ReplicaTable>, mysql_async::Error> {
        if let Some(t) = self
            .tables
            .get(&info.schema)
            .and_then(|tables| tables.get(&info.table))
        {
            if t.0 == info.columns.len() {
                return Ok(t.1.clone());
            }
        }
        let names: Option<Vec<String>> = info.columns.iter().map(|c| c.name.clone()).collect();
        let metadata_complete = !columns::needs_replica_definition(&info.columns);
        let table = if let (Some(names), Some(pk), true) =
            (names, info.primary_key.clone(), metadata_complete)
        {
            ReplicaTable {
                shape: TableShape {
                    schema: info.schema.clone(),
                    table: info.table.clone(),
                    columns: names,
                    primary_key: (!pk.is_empty()).then_some(pk),
                },
                columns: Vec::new(),
                merge_updates: false,
                non_transactional: None,
                triggers: false,
                system_versioned: false,
                completed: Mutex::new(None),
            }
        } else {
            let rows: Vec<(String, String, String)> = conn
                .exec(
                    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                    (info.schema.as_str(), info.table.as_str()),
                )
                .await?;
            let key_columns: Vec<String> = conn
                .exec(
                    "SELECT COLUMN_NAME FROM information_schema.STATISTICS \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' \
                     ORDER BY SEQ_IN_INDEX",
                    (info.schema.as_str(), info.table.as_str()),
                )
                .await?;
            let replica_columns: Vec<ReplicaColumn> = rows
                .iter()
                .map(|(n, d, t)| ReplicaColumn::from_definition(n, d, t))
                .collect();
            let names: Vec<String> = replica_columns.iter().map(|c| c.name.clone()).collect();
            let primary_key: Vec<u16> = key_columns
                .iter()
                .filter_map(|k| names.iter().position(|n| n == k).map(|i| i as u16))
                .collect();
            ReplicaTable {
                columns: replica_columns,
                shape: TableShape {
                    schema: info.schema.clone(),
                    table: info.table.clone(),
                    columns: names,
                    primary_key: (!primary_key.is_empty()).then_some(primary_key),
                },
                merge_updates: false,
                non_transactional: None,
                triggers: false,
                system_versioned: false,
                completed: Mutex::new(None),
            }
        };
        let mut table = table;
        let triggers: Option<i64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TRIGGERS \
                 WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?",
                (info.schema.as_str(), info.table.as_str()),
            )
            .await?;
        table.triggers = triggers.unwrap_or(0) > 0;
        // A view or a missing table reads as transactional: applying to
        // it fails on its own.
        let engine: Option<(Option<String>, Option<String>, Option<String>)> = conn
            .exec_first(
                "SELECT t.ENGINE, e.TRANSACTIONS, t.TABLE_TYPE FROM information_schema.TABLES t \
                 LEFT JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE \
                 WHERE t.TABLE_SCHEMA = ? AND t.TABLE_NAME = ?",
                (info.schema.as_str(), info.table.as_str()),
            )
            .await?;
        if let Some((engine, transactions, kind)) = engine {
            if let (Some(engine), Some(transactions)) = (engine, transactions) {
                if transactions.eq_ignore_ascii_case("NO") {
                    table.non_transactional = Some(engine);
                }
            }
            table.system_versioned =
                kind.is_some_and(|k| k.eq_ignore_ascii_case("SYSTEM VERSIONED"));
        }
        if table.shape.primary_key.is_some() {
            let obstacles: Option<i64> = conn
                .exec_first(
                    "SELECT (SELECT COUNT(*) FROM information_schema.STATISTICS \
                       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 \
                       AND INDEX_NAME <> 'PRIMARY') \
                     + (SELECT COUNT(*) FROM information_schema.TRIGGERS \
                       WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?) \
                     + (SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE \
                       WHERE (TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                              AND REFERENCED_TABLE_NAME IS NOT NULL) \
                          OR (REFERENCED_TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME = ?)) \
                     + (SELECT COUNT(*) FROM information_schema.COLUMNS \
                       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'ALWAYS')",
                    (
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                        info.schema.as_str(),
                        info.table.as_str(),
                    ),
                )
                .await?;
            table.merge_updates = obstacles == Some(0);
        }
        let table = Arc::new(table);
        self.tables
            .entry(info.schema.clone())
            .or_default()
            .insert(info.table.clone(), (info.columns.len(), table.clone()));
        Ok(table)
    }
}
