//! SQL for row changes: prepared statements with bound parameters, cached
//! per table, kind and column set.
//!
//! - INSERT uses the after image; consecutive rows of one rows event with
//!   the same column set go out as one multi-row INSERT, split into chunks
//!   of [`INSERT_CHUNKS`] rows so that only a few statement texts exist per
//!   table (each is prepared once and cached by the connection).
//! - UPDATE sets the columns of the after image that differ from the
//!   before image (all after-image columns when the before image lacks
//!   them, as with MINIMAL images), and every TIMESTAMP/DATETIME column of
//!   the after image (so that `ON UPDATE CURRENT_TIMESTAMP` never fires on
//!   the replica with the replica's clock), and DELETE removes, matching on the
//!   primary key from the before image when the key is known and present
//!   in the image, else on every present column with NULL-safe equality
//!   (`<=>`) and `LIMIT 1`.
//! - **Merged updates** (the batched block path only): consecutive UPDATE
//!   rows of one table, and a DELETE followed by the INSERT of the same
//!   keys, go out as multi-row `INSERT … ON DUPLICATE KEY UPDATE`
//!   statements ([`SqlBuilder::merge_set`], [`SqlBuilder::fuse_set`],
//!   [`SqlBuilder::plan_merged_updates`]) when the replica's table allows
//!   it (primary key the only unique key, no triggers, foreign keys or
//!   generated columns). Rows keep their order; each counts 2 affected rows
//!   when it finds its key, so a short count (a missing row) sends the
//!   block back to the plain statements, which report the divergence.
//!   One statement instead of one per row: the replica parses, locks and
//!   answers once (sysbench `oltp_read_write`: 10 row changes a
//!   transaction become about one statement per table per block).
//! - Identifiers are quoted with backticks, a backtick doubled
//!   ([`quote_ident`]); values are never spliced into SQL text (the batched
//!   block path turns the bound values into literals with
//!   [`crate::mysql::literal`], see `applier::channel`).
//!
//! Values are bound as the session expects them under `time_zone =
//! '+00:00'`, `sql_mode = 'NO_AUTO_VALUE_ON_ZERO'` (as the server's own
//! row applier runs) and `SET NAMES binary`: integers and floats as
//! numbers, DECIMAL as its exact text, strings and blobs as raw bytes
//! (a fixed-length binary value padded with zero bytes to its column's
//! length, see [`crate::applier::columns`]),
//! temporal values as their text with the column's precision (zero and
//! partial-zero dates included), YEAR/ENUM/SET/BIT as their numbers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use mysql_async::Value as Param;

use crate::event::{ColumnInfo, RowImage, RowKind, RowsChange, Value};
use crate::inspect::{fsp_of, value_text};
use crate::mysql::quote_ident;

/// Row counts a multi-row INSERT is split into, largest first: `n` rows go
/// out as chunks of these sizes, so at most four statement texts exist per
/// table and column set.
pub const INSERT_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// Most rows of one merged update statement
/// ([`SqlBuilder::plan_merged_updates`]).
pub const MERGED_UPDATE_ROWS: usize = 64;

/// Whether a column is TIMESTAMP or DATETIME (any precision): the types
/// that can carry `ON UPDATE CURRENT_TIMESTAMP`.
fn is_date_time(column: &ColumnInfo) -> bool {
    use crate::event::column_type::{DATETIME, DATETIME2, TIMESTAMP, TIMESTAMP2};
    matches!(
        column.column_type,
        TIMESTAMP | TIMESTAMP2 | DATETIME | DATETIME2
    )
}

/// The column names and key of a table as the applier uses them: names
/// from the binlog metadata or, when the master did not log them, from the
/// replica's `information_schema`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableShape {
    /// Schema name.
    pub schema: String,
    /// Table name.
    pub table: String,
    /// Column names in table order.
    pub columns: Vec<String>,
    /// Primary key column indexes, in key order; `None` when the table has
    /// no primary key (or it is unknown).
    pub primary_key: Option<Vec<u16>>,
}

/// One statement to execute: the SQL text (shared from the cache) and its
/// parameters, with the number of rows it must affect.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedStatement {
    /// SQL text with `?` placeholders.
    pub sql: Arc<str>,
    /// Parameters, in placeholder order.
    pub params: Vec<Param>,
    /// Insert, update or delete.
    pub kind: RowKind,
    /// Rows the statement must affect (matched rows for UPDATE, with the
    /// connection's `CLIENT_FOUND_ROWS`): fewer means a row was not found
    /// (the replica diverged, or the values bound differ from the
    /// master's row).
    pub expected_rows: u64,
    /// Columns the WHERE clause matches on (UPDATE/DELETE; empty for
    /// INSERT); their values are the last `matched.len()` parameters.
    pub matched: Vec<u16>,
}

/// Key of a cached statement text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TextKey {
    schema: String,
    table: String,
    kind: RowKind,
    /// Columns set / inserted.
    set: Vec<u16>,
    /// Columns matched in WHERE; `by_key` tells whether with `=` on the
    /// primary key or `<=>` on every present column with LIMIT 1.
    matched: Vec<u16>,
    by_key: bool,
    rows: usize,
}

/// Builds and caches statement texts. One per channel (not shared).
#[derive(Debug, Default)]
pub struct SqlBuilder {
    texts: HashMap<TextKey, Arc<str>>,
}

impl SqlBuilder {
    /// An empty builder.
    pub fn new() -> SqlBuilder {
        SqlBuilder::default()
    }

    /// Number of distinct statement texts built so far.
    pub fn cached_texts(&self) -> usize {
        self.texts.len()
    }

    /// Forgets the texts of `schema.table` (after DDL on it).
    pub fn invalidate(&mut self, schema: &str, table: &str) {
        self.texts
            .retain(|k, _| !(k.schema == schema && k.table == table));
    }

    /// Appends the statements that apply `change` to `out`.
    ///
    /// # Errors
    /// A message when an image is missing (insert without after image,
    /// update/delete without before image) or names a column the table
    /// does not have.
    pub fn plan(
        &mut self,
        change: &RowsChange,
        columns: &[ColumnInfo],
        shape: &TableShape,
        out: &mut Vec<PlannedStatement>,
    ) -> Result<(), String> {
        let check = |image: &RowImage| -> Result<(), String> {
            match image
                .columns
                .iter()
                .find(|&&c| c as usize >= shape.columns.len())
            {
                // Every table has a column: none read means none there.
                Some(_) if shape.columns.is_empty() => Err(format!(
                    "{}.{}: no such table on the replica (information_schema.COLUMNS lists no \
                     column of it), so its row changes cannot be applied",
                    shape.schema, shape.table
                )),
                Some(c) => Err(format!(
                    "{}.{}: row image names column {} but the table has {} columns (under \
                     [apply] method = \"sql\"; a system-versioned table's hidden period \
                     columns are such columns: the \"binlog\" method applies them as \
                     native replication does)",
                    shape.schema,
                    shape.table,
                    c + 1,
                    shape.columns.len()
                )),
                None => Ok(()),
            }
        };
        match change.kind {
            RowKind::Insert => {
                let mut i = 0;
                while i < change.rows.len() {
                    let first = change.rows[i]
                        .after
                        .as_ref()
                        .ok_or("insert row without an after image")?;
                    check(first)?;
                    // The run of following rows with the same column set.
                    let mut end = i + 1;
                    while end < change.rows.len()
                        && change.rows[end]
                            .after
                            .as_ref()
                            .is_some_and(|a| a.columns == first.columns)
                    {
                        end += 1;
                    }
                    let mut at = i;
                    while at < end {
                        let n = INSERT_CHUNKS
                            .iter()
                            .copied()
                            .find(|&c| c <= end - at)
                            .unwrap_or(1);
                        let sql = self.insert_text(shape, &first.columns, n);
                        let mut params = Vec::with_capacity(n * first.columns.len());
                        for pair in &change.rows[at..at + n] {
                            let image = pair.after.as_ref().expect("checked in the run");
                            push_params(image, columns, &mut params);
                        }
                        out.push(PlannedStatement {
                            sql,
                            params,
                            kind: RowKind::Insert,
                            expected_rows: n as u64,
                            matched: Vec::new(),
                        });
                        at += n;
                    }
                    i = end;
                }
            }
            RowKind::Update => {
                for pair in &change.rows {
                    let before = pair
                        .before
                        .as_ref()
                        .ok_or("update row without a before image")?;
                    let after = pair
                        .after
                        .as_ref()
                        .ok_or("update row without an after image")?;
                    check(before)?;
                    check(after)?;
                    // Columns that change; when the before image lacks a
                    // column (MINIMAL), it is set unconditionally. Temporal
                    // columns are always set: an `ON UPDATE
                    // CURRENT_TIMESTAMP` column the master left at its value
                    // (same second) would otherwise take the replica's clock.
                    let mut set = Vec::with_capacity(after.columns.len());
                    let mut set_values = Vec::with_capacity(after.columns.len());
                    for (&c, v) in after.columns.iter().zip(&after.values) {
                        let temporal = columns.get(c as usize).is_some_and(is_date_time);
                        if temporal || before.get(c) != Some(v) {
                            set.push(c);
                            set_values.push((c, v));
                        }
                    }
                    if set.is_empty() {
                        // Nothing changes: still match the row (divergence
                        // check) by setting the first after column to itself.
                        set.push(after.columns[0]);
                        set_values.push((after.columns[0], &after.values[0]));
                    }
                    let (matched, by_key) = match_columns(before, shape);
                    let sql = self.update_text(shape, &set, &matched, by_key);
                    let mut params = Vec::with_capacity(set.len() + matched.len());
                    for (c, v) in set_values {
                        params.push(to_param(v, &columns[c as usize]));
                    }
                    push_match_params(before, &matched, columns, &mut params);
                    out.push(PlannedStatement {
                        sql,
                        params,
                        kind: RowKind::Update,
                        expected_rows: 1,
                        matched,
                    });
                }
            }
            RowKind::Delete => {
                for pair in &change.rows {
                    let before = pair
                        .before
                        .as_ref()
                        .ok_or("delete row without a before image")?;
                    check(before)?;
                    let (matched, by_key) = match_columns(before, shape);
                    let sql = self.delete_text(shape, &matched, by_key);
                    let mut params = Vec::with_capacity(matched.len());
                    push_match_params(before, &matched, columns, &mut params);
                    out.push(PlannedStatement {
                        sql,
                        params,
                        kind: RowKind::Delete,
                        expected_rows: 1,
                        matched,
                    });
                }
            }
        }
        Ok(())
    }

    /// The columns an UPDATE rows change would set if every row of it can
    /// go into a merged update ([`SqlBuilder::plan_merged_updates`]), else
    /// `None`. Every row must: have a before image holding the primary key
    /// and a complete after image (all `shape.columns`, in order), keep its
    /// primary key, change at least one column, and set the same columns as
    /// the others (the changed columns plus every TIMESTAMP/DATETIME column,
    /// as [`SqlBuilder::plan`] sets them).
    pub fn merge_set(
        change: &RowsChange,
        columns: &[ColumnInfo],
        shape: &TableShape,
    ) -> Option<Vec<u16>> {
        let key = shape.primary_key.as_ref().filter(|k| !k.is_empty())?;
        if change.kind != RowKind::Update || change.rows.is_empty() {
            return None;
        }
        let n = shape.columns.len();
        let mut common: Option<Vec<u16>> = None;
        for pair in &change.rows {
            let (before, after) = (pair.before.as_ref()?, pair.after.as_ref()?);
            if after.columns.len() != n
                || after
                    .columns
                    .iter()
                    .enumerate()
                    .any(|(i, &c)| c as usize != i)
                || columns.len() < n
            {
                return None;
            }
            if key
                .iter()
                .any(|&k| before.get(k).is_none() || before.get(k) != after.get(k))
            {
                return None;
            }
            let mut set = Vec::new();
            let mut changed = false;
            for (&c, v) in after.columns.iter().zip(&after.values) {
                let differs = before.get(c) != Some(v);
                changed |= differs;
                if differs || is_date_time(&columns[c as usize]) {
                    set.push(c);
                }
            }
            if !changed {
                return None;
            }
            match &common {
                None => common = Some(set),
                Some(c) if *c == set => {}
                Some(_) => return None,
            }
        }
        common
    }

    /// The columns a DELETE rows change followed by an INSERT of the same
    /// keys would set if the pair goes into a merged update as the INSERT's
    /// rows (every column but the primary key: the INSERT replaces the
    /// whole row), else `None`. The tables must be the same (the caller
    /// checks); the INSERT's after images must be complete, and row `i` of
    /// the INSERT must carry the primary key of row `i` of the DELETE.
    pub fn fuse_set(
        delete: &RowsChange,
        insert: &RowsChange,
        columns: &[ColumnInfo],
        shape: &TableShape,
    ) -> Option<Vec<u16>> {
        let key = shape.primary_key.as_ref().filter(|k| !k.is_empty())?;
        if delete.kind != RowKind::Delete
            || insert.kind != RowKind::Insert
            || delete.rows.is_empty()
            || delete.rows.len() != insert.rows.len()
        {
            return None;
        }
        let n = shape.columns.len();
        if columns.len() < n {
            return None;
        }
        for (gone, new) in delete.rows.iter().zip(&insert.rows) {
            let (before, after) = (gone.before.as_ref()?, new.after.as_ref()?);
            if after.columns.len() != n
                || after
                    .columns
                    .iter()
                    .enumerate()
                    .any(|(i, &c)| c as usize != i)
            {
                return None;
            }
            if key
                .iter()
                .any(|&k| before.get(k).is_none() || before.get(k) != after.get(k))
            {
                return None;
            }
        }
        Some((0..n as u16).filter(|c| !key.contains(c)).collect())
    }

    /// Appends statements that apply consecutive UPDATE rows changes of one
    /// table, all accepted by [`SqlBuilder::merge_set`] with this `set`, as
    /// multi-row `INSERT … ON DUPLICATE KEY UPDATE` statements of at most
    /// [`MERGED_UPDATE_ROWS`] rows: each lists the primary key and `set`
    /// columns of the after image (in table order) and, on the primary key's
    /// duplicate, sets the `set` columns from it. Rows keep their order (an
    /// IODKU applies its rows one after the other). The other columns are
    /// left out, which needs the channel's non-strict `sql_mode` (a column
    /// without a default only warns on the insert path, never taken when
    /// the counts match).
    ///
    /// With `CLIENT_FOUND_ROWS`, each row that finds its key and changes
    /// counts 2 affected rows and a row inserted counts 1, so a statement's
    /// `expected_rows` is twice its rows: a short count means a row was
    /// missing on the replica (or already held its new values), and the
    /// caller must roll back and apply the rows as plain UPDATEs, which tell
    /// which. Only for tables whose primary key is their only unique key,
    /// without triggers, foreign keys or generated columns (the caller
    /// checks the replica's table), where the IODKU can only ever meet the
    /// row the UPDATE would match.
    pub fn plan_merged_updates(
        &mut self,
        changes: &[&RowsChange],
        set: &[u16],
        columns: &[ColumnInfo],
        shape: &TableShape,
        out: &mut Vec<PlannedStatement>,
    ) {
        let mut rows = changes
            .iter()
            .flat_map(|c| c.rows.iter())
            .filter_map(|p| p.after.as_ref())
            .peekable();
        let key = shape.primary_key.clone().unwrap_or_default();
        let mut listed: Vec<u16> = key.iter().chain(set).copied().collect();
        listed.sort_unstable();
        listed.dedup();
        while rows.peek().is_some() {
            let chunk: Vec<&RowImage> = rows.by_ref().take(MERGED_UPDATE_ROWS).collect();
            let sql = self.merged_update_text(shape, &listed, set, chunk.len());
            let mut params = Vec::with_capacity(chunk.len() * listed.len());
            for image in &chunk {
                for &c in &listed {
                    let value = image
                        .get(c)
                        .expect("merge_set checked a complete after image");
                    params.push(to_param(value, &columns[c as usize]));
                }
            }
            out.push(PlannedStatement {
                sql,
                params,
                kind: RowKind::Update,
                expected_rows: 2 * chunk.len() as u64,
                matched: key.clone(),
            });
        }
    }

    fn merged_update_text(
        &mut self,
        shape: &TableShape,
        listed: &[u16],
        set: &[u16],
        rows: usize,
    ) -> Arc<str> {
        let key = TextKey {
            schema: shape.schema.clone(),
            table: shape.table.clone(),
            kind: RowKind::Update,
            set: set.to_vec(),
            matched: listed.to_vec(),
            by_key: true,
            rows,
        };
        self.cached(key, || {
            let mut sql = insert_values_text(shape, listed, rows);
            sql.push_str(" ON DUPLICATE KEY UPDATE ");
            for (i, &c) in set.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                let name = quote_ident(&shape.columns[c as usize]);
                let _ = write!(sql, "{name} = VALUES({name})");
            }
            sql
        })
    }

    fn cached(&mut self, key: TextKey, build: impl FnOnce() -> String) -> Arc<str> {
        self.texts
            .entry(key)
            .or_insert_with(|| Arc::from(build()))
            .clone()
    }

    fn insert_text(&mut self, shape: &TableShape, set: &[u16], rows: usize) -> Arc<str> {
        let key = TextKey {
            schema: shape.schema.clone(),
            table: shape.table.clone(),
            kind: RowKind::Insert,
            set: set.to_vec(),
            matched: Vec::new(),
            by_key: false,
            rows,
        };
        self.cached(key, || insert_values_text(shape, set, rows))
    }

    fn update_text(
        &mut self,
        shape: &TableShape,
        set: &[u16],
        matched: &[u16],
        by_key: bool,
    ) -> Arc<str> {
        let key = TextKey {
            schema: shape.schema.clone(),
            table: shape.table.clone(),
            kind: RowKind::Update,
            set: set.to_vec(),
            matched: matched.to_vec(),
            by_key,
            rows: 1,
        };
        self.cached(key, || {
            let mut sql = format!("UPDATE {} SET ", qualified(shape));
            for (i, &c) in set.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                let _ = write!(sql, "{} = ?", quote_ident(&shape.columns[c as usize]));
            }
            push_where(&mut sql, shape, matched, by_key);
            sql
        })
    }

    fn delete_text(&mut self, shape: &TableShape, matched: &[u16], by_key: bool) -> Arc<str> {
        let key = TextKey {
            schema: shape.schema.clone(),
            table: shape.table.clone(),
            kind: RowKind::Delete,
            set: Vec::new(),
            matched: matched.to_vec(),
            by_key,
            rows: 1,
        };
        self.cached(key, || {
            let mut sql = format!("DELETE FROM {}", qualified(shape));
            push_where(&mut sql, shape, matched, by_key);
            sql
        })
    }
}

/// `INSERT INTO schema.table (columns) VALUES (?, …), …`: `rows` rows of
/// one placeholder per column of `columns`.
fn insert_values_text(shape: &TableShape, columns: &[u16], rows: usize) -> String {
    let mut sql = format!("INSERT INTO {} (", qualified(shape));
    for (i, &c) in columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&quote_ident(&shape.columns[c as usize]));
    }
    sql.push_str(") VALUES ");
    let row = format!("({})", vec!["?"; columns.len()].join(", "));
    sql.push_str(&vec![row; rows].join(", "));
    sql
}

fn qualified(shape: &TableShape) -> String {
    format!(
        "{}.{}",
        quote_ident(&shape.schema),
        quote_ident(&shape.table)
    )
}

/// The columns to match a before image on: the primary key when known and
/// wholly present in the image (`by_key`), else every present column.
fn match_columns(before: &RowImage, shape: &TableShape) -> (Vec<u16>, bool) {
    if let Some(key) = &shape.primary_key {
        if !key.is_empty() && key.iter().all(|c| before.get(*c).is_some()) {
            return (key.clone(), true);
        }
    }
    (before.columns.clone(), false)
}

fn push_where(sql: &mut String, shape: &TableShape, matched: &[u16], by_key: bool) {
    sql.push_str(" WHERE ");
    let op = if by_key { " = ?" } else { " <=> ?" };
    for (i, &c) in matched.iter().enumerate() {
        if i > 0 {
            sql.push_str(" AND ");
        }
        sql.push_str(&quote_ident(&shape.columns[c as usize]));
        sql.push_str(op);
    }
    if !by_key {
        sql.push_str(" LIMIT 1");
    }
}

fn push_params(image: &RowImage, columns: &[ColumnInfo], params: &mut Vec<Param>) {
    for (&c, v) in image.columns.iter().zip(&image.values) {
        params.push(to_param(v, &columns[c as usize]));
    }
}

fn push_match_params(
    before: &RowImage,
    matched: &[u16],
    columns: &[ColumnInfo],
    params: &mut Vec<Param>,
) {
    for &c in matched {
        let value = before.get(c).expect("matched columns are in the image");
        params.push(to_param(value, &columns[c as usize]));
    }
}

/// A decoded value as a bound parameter (see the module doc for the
/// session settings this relies on).
pub fn to_param(value: &Value, column: &ColumnInfo) -> Param {
    match value {
        Value::Null => Param::NULL,
        // A value of an unsigned column read as signed: the binlog carried
        // no signedness (`binlog_row_metadata=NO_LOG`) and the column info
        // was completed from the replica; the stored bits are the unsigned
        // value (bound as such, as with FULL metadata).
        Value::Int(v) if column.unsigned == Some(true) => {
            let bits = match column.column_type {
                crate::event::column_type::TINY => 8,
                crate::event::column_type::SHORT => 16,
                crate::event::column_type::INT24 => 24,
                crate::event::column_type::LONG => 32,
                _ => 64,
            };
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            Param::UInt(*v as u64 & mask)
        }
        Value::Int(v) => Param::Int(*v),
        Value::UInt(v) => Param::UInt(*v),
        Value::Float(v) => Param::Float(*v),
        Value::Double(v) => Param::Double(*v),
        Value::Decimal(s) => Param::Bytes(s.as_bytes().to_vec()),
        // A fixed-length binary column (BINARY(n), UUID, INET6): the
        // binlog dropped the trailing zero bytes and the metadata (or the
        // replica's definition, `applier::columns`) says the column is
        // binary: padded back to its n bytes, as the replica stores it, so
        // that a WHERE on it matches. CHAR is never padded.
        Value::Bytes(b) => match crate::applier::columns::binary_pad_length(column) {
            Some(n) if b.len() < n => {
                let mut padded = Vec::with_capacity(n);
                padded.extend_from_slice(b);
                padded.resize(n, 0);
                Param::Bytes(padded)
            }
            _ => Param::Bytes(b.clone()),
        },
        Value::Json(s) => Param::Bytes(s.as_bytes().to_vec()),
        Value::Year(y) => Param::UInt(u64::from(*y)),
        Value::Bit(v) | Value::Set(v) => Param::UInt(*v),
        Value::Enum(v) => Param::UInt(u64::from(*v)),
        Value::Date { .. }
        | Value::DateTime { .. }
        | Value::Timestamp { .. }
        | Value::Time { .. } => Param::Bytes(value_text(value, fsp_of(column)).into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{column_type, RowPair};

    fn col(t: u8) -> ColumnInfo {
        ColumnInfo {
            column_type: t,
            meta: 0,
            nullable: true,
            name: None,
            unsigned: Some(false),
            charset: None,
        }
    }

    fn shape(key: Option<Vec<u16>>) -> TableShape {
        TableShape {
            schema: "s`b".into(),
            table: "t".into(),
            columns: vec!["id".into(), "k".into(), "c`x".into()],
            primary_key: key,
        }
    }

    fn image(cols: &[u16], vals: &[i64]) -> RowImage {
        RowImage {
            columns: cols.to_vec(),
            values: vals.iter().map(|v| Value::Int(*v)).collect(),
        }
    }

    fn columns() -> Vec<ColumnInfo> {
        vec![
            col(column_type::LONG),
            col(column_type::LONG),
            col(column_type::LONG),
        ]
    }

    #[test]
    fn inserts_are_grouped_into_chunked_multi_row_statements() {
        let rows: Vec<RowPair> = (0..21)
            .map(|i| RowPair {
                before: None,
                after: Some(image(&[0, 1, 2], &[i, i * 10, i * 100])),
            })
            .collect();
        let change = RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 0,
            rows,
        };
        let mut b = SqlBuilder::new();
        let mut out = Vec::new();
        b.plan(&change, &columns(), &shape(Some(vec![0])), &mut out)
            .unwrap();
        let sizes: Vec<u64> = out.iter().map(|s| s.expected_rows).collect();
        assert_eq!(sizes, [16, 4, 1]);
        assert_eq!(
            &*out[2].sql,
            "INSERT INTO `s``b`.`t` (`id`, `k`, `c``x`) VALUES (?, ?, ?)"
        );
        assert_eq!(
            out[2].params,
            [Param::Int(20), Param::Int(200), Param::Int(2000)]
        );
        assert_eq!(out[0].params.len(), 48);
        assert_eq!(b.cached_texts(), 3);
    }

    #[test]
    fn update_sets_changed_columns_and_matches_the_key() {
        let change = RowsChange {
            table: 0,
            kind: RowKind::Update,
            flags: 0,
            rows: vec![RowPair {
                before: Some(image(&[0, 1, 2], &[7, 1, 2])),
                after: Some(image(&[0, 1, 2], &[7, 1, 3])),
            }],
        };
        let mut out = Vec::new();
        SqlBuilder::new()
            .plan(&change, &columns(), &shape(Some(vec![0])), &mut out)
            .unwrap();
        assert_eq!(
            &*out[0].sql,
            "UPDATE `s``b`.`t` SET `c``x` = ? WHERE `id` = ?"
        );
        assert_eq!(out[0].params, [Param::Int(3), Param::Int(7)]);
        assert_eq!(out[0].expected_rows, 1);
    }

    fn update(before: &[i64], after: &[i64]) -> RowsChange {
        RowsChange {
            table: 0,
            kind: RowKind::Update,
            flags: 0,
            rows: vec![RowPair {
                before: Some(image(&[0, 1, 2], before)),
                after: Some(image(&[0, 1, 2], after)),
            }],
        }
    }

    #[test]
    fn merge_set_accepts_only_complete_key_keeping_changing_rows() {
        let key = shape(Some(vec![0]));
        let cols = columns();
        assert_eq!(
            SqlBuilder::merge_set(&update(&[1, 2, 3], &[1, 5, 3]), &cols, &key),
            Some(vec![1])
        );
        // Key changed, nothing changed, no key, not an update.
        assert_eq!(
            SqlBuilder::merge_set(&update(&[1, 2, 3], &[9, 2, 3]), &cols, &key),
            None
        );
        assert_eq!(
            SqlBuilder::merge_set(&update(&[1, 2, 3], &[1, 2, 3]), &cols, &key),
            None
        );
        assert_eq!(
            SqlBuilder::merge_set(&update(&[1, 2, 3], &[1, 5, 3]), &cols, &shape(None)),
            None
        );
        let mut delete = update(&[1, 2, 3], &[1, 5, 3]);
        delete.kind = RowKind::Delete;
        assert_eq!(SqlBuilder::merge_set(&delete, &cols, &key), None);
        // An incomplete after image (MINIMAL) or rows setting different columns.
        let mut minimal = update(&[1, 2, 3], &[1, 5, 3]);
        minimal.rows[0].after = Some(image(&[0, 1], &[1, 5]));
        assert_eq!(SqlBuilder::merge_set(&minimal, &cols, &key), None);
        let mut mixed = update(&[1, 2, 3], &[1, 5, 3]);
        mixed
            .rows
            .push(update(&[2, 2, 3], &[2, 2, 4]).rows.remove(0));
        assert_eq!(SqlBuilder::merge_set(&mixed, &cols, &key), None);
    }

    #[test]
    fn a_delete_and_the_insert_of_the_same_key_fuse() {
        let key = shape(Some(vec![0]));
        let cols = columns();
        let delete = RowsChange {
            table: 0,
            kind: RowKind::Delete,
            flags: 0,
            rows: vec![RowPair {
                before: Some(image(&[0, 1, 2], &[5, 1, 1])),
                after: None,
            }],
        };
        let insert = |id: i64| RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 0,
            rows: vec![RowPair {
                before: None,
                after: Some(image(&[0, 1, 2], &[id, 2, 2])),
            }],
        };
        assert_eq!(
            SqlBuilder::fuse_set(&delete, &insert(5), &cols, &key),
            Some(vec![1, 2])
        );
        assert_eq!(SqlBuilder::fuse_set(&delete, &insert(6), &cols, &key), None);
        assert_eq!(
            SqlBuilder::fuse_set(&delete, &insert(5), &cols, &shape(None)),
            None
        );
        assert_eq!(
            SqlBuilder::fuse_set(&insert(5), &insert(5), &cols, &key),
            None
        );
        let mut out = Vec::new();
        SqlBuilder::new().plan_merged_updates(&[&insert(5)], &[1, 2], &cols, &key, &mut out);
        assert_eq!(
            &*out[0].sql,
            "INSERT INTO `s``b`.`t` (`id`, `k`, `c``x`) VALUES (?, ?, ?) \
             ON DUPLICATE KEY UPDATE `k` = VALUES(`k`), `c``x` = VALUES(`c``x`)"
        );
        assert_eq!(out[0].expected_rows, 2);
    }

    #[test]
    fn consecutive_updates_merge_into_ordered_upserts_counting_two_per_row() {
        let key = shape(Some(vec![0]));
        let cols = columns();
        let a = update(&[1, 2, 3], &[1, 5, 3]);
        let b = update(&[1, 5, 3], &[1, 6, 3]);
        let c = update(&[4, 0, 0], &[4, 7, 0]);
        let mut out = Vec::new();
        let mut builder = SqlBuilder::new();
        builder.plan_merged_updates(&[&a, &b, &c], &[1], &cols, &key, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            &*out[0].sql,
            "INSERT INTO `s``b`.`t` (`id`, `k`) VALUES (?, ?), (?, ?), (?, ?) \
             ON DUPLICATE KEY UPDATE `k` = VALUES(`k`)"
        );
        let ints: Vec<Param> = [1, 5, 1, 6, 4, 7].iter().map(|&v| Param::Int(v)).collect();
        assert_eq!(out[0].params, ints);
        assert_eq!(out[0].expected_rows, 6);
        // Long runs are split.
        let many: Vec<RowsChange> = (0..70).map(|i| update(&[i, 0, 0], &[i, 1, 0])).collect();
        let refs: Vec<&RowsChange> = many.iter().collect();
        out.clear();
        builder.plan_merged_updates(&refs, &[1], &cols, &key, &mut out);
        let sizes: Vec<u64> = out.iter().map(|s| s.expected_rows).collect();
        assert_eq!(sizes, [128, 12]);
    }

    #[test]
    fn update_always_sets_timestamp_and_datetime_columns() {
        // `k` is a TIMESTAMP, `c`x` a DATETIME, both unchanged: an ON UPDATE
        // CURRENT_TIMESTAMP column must get the master's value, not fire.
        let columns = vec![
            col(column_type::LONG),
            col(column_type::TIMESTAMP2),
            col(column_type::DATETIME2),
        ];
        let ts = Value::Timestamp {
            seconds: 1_000_000_100,
            micros: 0,
        };
        let before = RowImage {
            columns: vec![0, 1, 2],
            values: vec![Value::Int(7), ts.clone(), Value::Null],
        };
        let change = RowsChange {
            table: 0,
            kind: RowKind::Update,
            flags: 0,
            rows: vec![RowPair {
                before: Some(before.clone()),
                after: Some(before),
            }],
        };
        let mut out = Vec::new();
        SqlBuilder::new()
            .plan(&change, &columns, &shape(Some(vec![0])), &mut out)
            .unwrap();
        assert_eq!(
            &*out[0].sql,
            "UPDATE `s``b`.`t` SET `k` = ?, `c``x` = ? WHERE `id` = ?"
        );
        assert_eq!(out[0].params.len(), 3);
        assert_eq!(out[0].params[1], Param::NULL);
        assert_eq!(out[0].params[2], Param::Int(7));
    }

    #[test]
    fn keyless_tables_match_every_column_null_safe_with_limit() {
        let change = RowsChange {
            table: 0,
            kind: RowKind::Delete,
            flags: 0,
            rows: vec![RowPair {
                before: Some(RowImage {
                    columns: vec![0, 1, 2],
                    values: vec![Value::Int(1), Value::Null, Value::Int(3)],
                }),
                after: None,
            }],
        };
        let mut out = Vec::new();
        SqlBuilder::new()
            .plan(&change, &columns(), &shape(None), &mut out)
            .unwrap();
        assert_eq!(
            &*out[0].sql,
            "DELETE FROM `s``b`.`t` WHERE `id` <=> ? AND `k` <=> ? AND `c``x` <=> ? LIMIT 1"
        );
        assert_eq!(out[0].params, [Param::Int(1), Param::NULL, Param::Int(3)]);
    }

    #[test]
    fn minimal_images_update_only_present_columns() {
        let change = RowsChange {
            table: 0,
            kind: RowKind::Update,
            flags: 0,
            rows: vec![RowPair {
                before: Some(image(&[0], &[2])),
                after: Some(image(&[1, 2], &[22, 5])),
            }],
        };
        let mut out = Vec::new();
        SqlBuilder::new()
            .plan(&change, &columns(), &shape(Some(vec![0])), &mut out)
            .unwrap();
        assert_eq!(
            &*out[0].sql,
            "UPDATE `s``b`.`t` SET `k` = ?, `c``x` = ? WHERE `id` = ?"
        );
        assert_eq!(
            out[0].params,
            [Param::Int(22), Param::Int(5), Param::Int(2)]
        );
    }

    #[test]
    fn temporal_values_bind_as_text_with_the_column_precision() {
        let mut c = col(column_type::DATETIME2);
        c.meta = 6;
        let v = Value::DateTime {
            year: 2023,
            month: 0,
            day: 15,
            hour: 10,
            minute: 0,
            second: 0,
            micros: 1,
        };
        assert_eq!(
            to_param(&v, &c),
            Param::Bytes(b"2023-00-15 10:00:00.000001".to_vec())
        );
        assert_eq!(
            to_param(&Value::Year(0), &col(column_type::YEAR)),
            Param::UInt(0)
        );
        assert_eq!(
            to_param(
                &Value::Decimal("-0.50".into()),
                &col(column_type::NEWDECIMAL)
            ),
            Param::Bytes(b"-0.50".to_vec())
        );
    }

    #[test]
    fn binary_values_are_padded_to_the_column_length_and_char_never() {
        // BINARY(4) (collation 63), CHAR(4) utf8mb4 (45), CHAR with an
        // unknown collation (NO_LOG, not completed): only BINARY is padded.
        let mut binary = col(column_type::STRING);
        binary.meta = 0xfe04;
        binary.charset = Some(63);
        let mut text = binary.clone();
        text.charset = Some(45);
        let mut unknown = binary.clone();
        unknown.charset = None;
        let v = Value::Bytes(vec![1, 0]);
        assert_eq!(to_param(&v, &binary), Param::Bytes(vec![1, 0, 0, 0]));
        assert_eq!(
            to_param(&Value::Bytes(Vec::new()), &binary),
            Param::Bytes(vec![0; 4])
        );
        assert_eq!(to_param(&v, &text), Param::Bytes(vec![1, 0]));
        assert_eq!(to_param(&v, &unknown), Param::Bytes(vec![1, 0]));
        let full = Value::Bytes(vec![1, 2, 3, 4]);
        assert_eq!(to_param(&full, &binary), Param::Bytes(vec![1, 2, 3, 4]));
        assert_eq!(to_param(&Value::Null, &binary), Param::NULL);
    }

    #[test]
    fn an_image_naming_a_missing_column_is_an_error() {
        let change = RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 0,
            rows: vec![RowPair {
                before: None,
                after: Some(image(&[0, 5], &[1, 2])),
            }],
        };
        let err = SqlBuilder::new()
            .plan(&change, &columns(), &shape(Some(vec![0])), &mut Vec::new())
            .unwrap_err();
        assert!(
            err.starts_with("s`b.t: row image names column 6 but the table has 3 columns"),
            "{err}"
        );
        // A table the replica does not have (no columns read).
        let mut none = shape(None);
        none.columns.clear();
        let err = SqlBuilder::new()
            .plan(&change, &columns(), &none, &mut Vec::new())
            .unwrap_err();
        assert_eq!(
            err,
            "s`b.t: no such table on the replica (information_schema.COLUMNS lists no column of \
             it), so its row changes cannot be applied"
        );
    }
}
