//! What a check compares of one table: its columns (stored ones: a
//! VIRTUAL generated column is computed from the others on read) and the
//! key it walks, read from the master's `information_schema`.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::CheckError;

/// The key a table is walked by: its primary key, else a unique key whose
/// columns are all NOT NULL (with NULLs, a unique key may hold the same
/// value twice and has no total order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckKey {
    /// The index name (`PRIMARY` for the primary key).
    pub index: String,
    /// The key's columns, in index order.
    pub columns: Vec<String>,
}

/// One table as the check compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePlan {
    /// Schema name.
    pub schema: String,
    /// Table name.
    pub table: String,
    /// The compared columns, in table order: every column but VIRTUAL
    /// generated ones.
    pub columns: Vec<String>,
    /// The key, or `None`: the table is compared whole (count and digest)
    /// and a difference cannot be drilled down to rows.
    pub key: Option<CheckKey>,
    /// The compared columns of type FLOAT: compared as their DOUBLE value
    /// (a FLOAT's text has 6 significant digits, `1.000001` shows as `1`).
    pub float_columns: Vec<String>,
}

impl TablePlan {
    /// Reads the plan of `schema.table` from `conn` (the master).
    ///
    /// # Errors
    /// [`CheckError::NoSuchTable`] when the table does not exist (or is a
    /// view); [`CheckError::Sql`] for a failed query.
    pub async fn read(conn: &mut Conn, schema: &str, table: &str) -> Result<TablePlan, CheckError> {
        let sql = |e| CheckError::sql(format!("read the columns of {schema}.{table}"), e);
        let kind: Option<String> = conn
            .exec_first(
                "SELECT TABLE_TYPE FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (schema, table),
            )
            .await
            .map_err(sql)?;
        if kind.as_deref() != Some("BASE TABLE") {
            return Err(CheckError::NoSuchTable {
                schema: schema.to_owned(),
                table: table.to_owned(),
            });
        }
        let columns: Vec<(String, String, String)> = conn
            .exec(
                "SELECT COLUMN_NAME, EXTRA, DATA_TYPE FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            .await
            .map_err(sql)?;
        let is_virtual = |extra: &str| extra.to_ascii_uppercase().contains("VIRTUAL");
        let stored = || columns.iter().filter(|(_, extra, _)| !is_virtual(extra));
        let compared: Vec<String> = stored().map(|(name, _, _)| name.clone()).collect();
        let float_columns: Vec<String> = stored()
            .filter(|(_, _, data_type)| data_type.eq_ignore_ascii_case("float"))
            .map(|(name, _, _)| name.clone())
            .collect();
        let indexes: Vec<(String, String, String)> = conn
            .exec(
                "SELECT INDEX_NAME, COLUMN_NAME, NULLABLE FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 \
                 ORDER BY INDEX_NAME <> 'PRIMARY', INDEX_NAME, SEQ_IN_INDEX",
                (schema, table),
            )
            .await
            .map_err(sql)?;
        Ok(TablePlan {
            schema: schema.to_owned(),
            table: table.to_owned(),
            key: choose_key(&indexes, &compared),
            columns: compared,
            float_columns,
        })
    }
}

/// The first usable unique index of `indexes` (rows of index name, column
/// name, NULLABLE as `information_schema.STATISTICS` gives them, primary
/// key first, each index's columns in order): every column NOT NULL and
/// compared (not VIRTUAL).
fn choose_key(indexes: &[(String, String, String)], compared: &[String]) -> Option<CheckKey> {
    let mut i = 0;
    while i < indexes.len() {
        let name = &indexes[i].0;
        let end = i + indexes[i..].iter().take_while(|r| &r.0 == name).count();
        let rows = &indexes[i..end];
        if rows
            .iter()
            .all(|(_, column, nullable)| nullable.is_empty() && compared.contains(column))
        {
            return Some(CheckKey {
                index: name.clone(),
                columns: rows.iter().map(|r| r.1.clone()).collect(),
            });
        }
        i = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: &str, c: &str, n: &str) -> (String, String, String) {
        (i.into(), c.into(), n.into())
    }

    #[test]
    fn the_primary_key_else_the_first_not_null_unique_key() {
        let compared: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let pk = [
            row("PRIMARY", "a", ""),
            row("PRIMARY", "b", ""),
            row("u", "c", ""),
        ];
        assert_eq!(
            choose_key(&pk, &compared),
            Some(CheckKey {
                index: "PRIMARY".into(),
                columns: vec!["a".into(), "b".into()]
            })
        );
        let uniques = [
            row("u1", "b", "YES"),
            row("u2", "c", ""),
            row("u2", "a", ""),
        ];
        assert_eq!(
            choose_key(&uniques, &compared),
            Some(CheckKey {
                index: "u2".into(),
                columns: vec!["c".into(), "a".into()]
            })
        );
        // A unique key on a VIRTUAL column (not compared) is not walked.
        assert_eq!(choose_key(&[row("v", "g", "")], &compared), None);
        assert_eq!(choose_key(&[], &compared), None);
    }
}
