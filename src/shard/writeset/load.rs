//! Reads [`TableKeys`] from the replica's `information_schema`: `COLUMNS`
//! (with `TABLES`, views left out), `STATISTICS` (unique indexes),
//! `TRIGGERS`, and every foreign key of the server from
//! `REFERENTIAL_CONSTRAINTS` (all schemas: a group may join loaded tables
//! through tables of other schemas). Every value is bound, never spliced
//! into the SQL.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;

use super::metadata::{sort_keys, ColumnDef, KeyPart, TableKeys, UniqueKey};

/// The schemas never loaded when every schema is asked for: the server's
/// own.
pub const SYSTEM_SCHEMAS: [&str; 4] = ["information_schema", "performance_schema", "mysql", "sys"];

/// An error reading the replica's key metadata.
#[derive(Debug, thiserror::Error)]
pub enum WritesetError {
    /// A query on `information_schema` failed.
    #[error(
        "reading {what} of {scope} from the replica's information_schema: {}",
        crate::mysql::ErrorText(cause)
    )]
    Query {
        /// What was read: `columns`, `unique keys`, `triggers`, `foreign keys`.
        what: &'static str,
        /// Which schemas: `schema \`s\`` or `every non-system schema`.
        scope: String,
        /// The server's or the connection's error.
        cause: mysql_async::Error,
    },
}

/// Which schemas one round of queries reads.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scope<'a> {
    /// Every schema but [`SYSTEM_SCHEMAS`].
    All,
    /// One schema.
    One(&'a str),
}

impl Scope<'_> {
    fn describe(self) -> String {
        match self {
            Scope::All => "every non-system schema".to_owned(),
            Scope::One(s) => format!("schema `{s}`"),
        }
    }

    /// `column = ?` or `column NOT IN (system schemas)`, with its parameters.
    fn filter(self, column: &str) -> (String, Vec<mysql_async::Value>) {
        match self {
            Scope::All => (
                format!(
                    "{column} NOT IN ({})",
                    vec!["?"; SYSTEM_SCHEMAS.len()].join(", ")
                ),
                SYSTEM_SCHEMAS.iter().map(|s| (*s).into()).collect(),
            ),
            Scope::One(s) => (format!("{column} = ?"), vec![s.into()]),
        }
    }

    fn error(self, what: &'static str) -> impl FnOnce(mysql_async::Error) -> WritesetError {
        let scope = self.describe();
        move |source| WritesetError::Query {
            what,
            scope,
            cause: source,
        }
    }
}

type ColumnRow = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
);

/// `TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME, SUB_PART` of
/// `STATISTICS`.
type KeyRow = (String, String, String, Option<String>, Option<u32>);

/// The tables of `scope` with their columns, unique keys and triggers
/// (no foreign keys: [`read_references`]), in `(schema, table)` order.
///
/// # Errors
/// [`WritesetError::Query`] naming the query and the scope.
pub(super) async fn read_tables(
    conn: &mut mysql_async::Conn,
    scope: Scope<'_>,
) -> Result<Vec<TableKeys>, WritesetError> {
    let (filter, params) = scope.filter("c.TABLE_SCHEMA");
    let rows: Vec<ColumnRow> = conn
        .exec(
            format!(
                "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, \
                 c.COLLATION_NAME, c.IS_NULLABLE \
                 FROM information_schema.COLUMNS c JOIN information_schema.TABLES t \
                 ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME \
                 WHERE t.TABLE_TYPE NOT IN ('VIEW', 'SYSTEM VIEW') AND {filter} \
                 ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
            ),
            params,
        )
        .await
        .map_err(scope.error("columns"))?;
    let mut tables: BTreeMap<(String, String), TableKeys> = BTreeMap::new();
    for (schema, table, name, data_type, column_type, collation, nullable) in rows {
        let t = tables
            .entry((schema, table))
            .or_insert_with_key(|(s, t)| TableKeys::new(s, t, Vec::new()));
        t.columns.push(ColumnDef {
            name,
            data_type: data_type.to_ascii_lowercase(),
            unsigned: column_type.to_ascii_lowercase().contains("unsigned"),
            collation,
            nullable: nullable.eq_ignore_ascii_case("YES"),
        });
    }

    let (filter, params) = scope.filter("TABLE_SCHEMA");
    let rows: Vec<KeyRow> = conn
        .exec(
            format!(
                "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME, SUB_PART \
                 FROM information_schema.STATISTICS WHERE NON_UNIQUE = 0 AND {filter} \
                 ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"
            ),
            params,
        )
        .await
        .map_err(scope.error("unique keys"))?;
    for (schema, table, index, column, prefix) in rows {
        // A table created after COLUMNS was read: left out (unknown).
        let Some(t) = tables.get_mut(&(schema, table)) else {
            continue;
        };
        let column = column
            .and_then(|c| t.columns.iter().position(|d| d.name == c))
            .map_or(u16::MAX, |i| i as u16);
        let part = KeyPart { column, prefix };
        match t.unique_keys.iter_mut().find(|k| k.name == index) {
            Some(k) => k.parts.push(part),
            None => t.unique_keys.push(UniqueKey {
                name: index,
                parts: vec![part],
            }),
        }
    }

    let (filter, params) = scope.filter("EVENT_OBJECT_SCHEMA");
    let rows: Vec<(String, String)> = conn
        .exec(
            format!(
                "SELECT DISTINCT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE \
                 FROM information_schema.TRIGGERS WHERE {filter}"
            ),
            params,
        )
        .await
        .map_err(scope.error("triggers"))?;
    for key in rows {
        if let Some(t) = tables.get_mut(&key) {
            t.triggers = true;
        }
    }
    Ok(tables
        .into_values()
        .map(|mut t| {
            sort_keys(&mut t.unique_keys);
            t
        })
        .collect())
}

/// Every foreign key of the server as (child `(schema, table)`, referenced
/// `(schema, table)`), sorted, without duplicates.
///
/// # Errors
/// [`WritesetError::Query`].
pub(super) async fn read_references(
    conn: &mut mysql_async::Conn,
) -> Result<Vec<((String, String), (String, String))>, WritesetError> {
    let rows: Vec<(String, String, String, String)> = conn
        .query(
            "SELECT DISTINCT CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, \
             REFERENCED_TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS \
             ORDER BY 1, 2, 3, 4",
        )
        .await
        .map_err(|source| WritesetError::Query {
            what: "foreign keys",
            scope: "the server".to_owned(),
            cause: source,
        })?;
    Ok(rows
        .into_iter()
        .map(|(cs, ct, ps, pt)| ((cs, ct), (ps, pt)))
        .collect())
}
