//! The SQL of a consistency check: the row hash both servers compute per
//! chunk, the key-range conditions that cut a table into chunks, and the
//! queries that walk the key and fetch a chunk's rows for the drill-down.
//!
//! Every value goes into the hash as its bytes (`CAST(c AS BINARY)`: the
//! stored bytes of a string or blob, the server's text of a number or a
//! temporal value, microseconds included), preceded by its length, and the
//! NULL flags of all columns end the row, so that NULL and `''`, or `'a#'
//! 'b'` and `'a' '#b'`, hash apart. The row hash is MD5; a chunk's digest is
//! its row count and the XOR of the rows' MD5 halves as two 64-bit numbers
//! (order-independent, 128 bits), as pt-table-checksum computes it
//! (`BIT_XOR(CAST(CONV(SUBSTRING(MD5(…), …), 16, 10) AS UNSIGNED))`).
//! XOR cancels equal rows in pairs, which only a table without a unique
//! key can hold: there the digest adds the exact `SUM` (DECIMAL) of the
//! first 64-bit half, so `{a, a, b}` and `{b, c, c}` differ.
//!
//! Identifiers are quoted ([`quote_ident`]); key values are bound
//! parameters, never spliced into the text.

use crate::mysql::quote_ident;

/// `schema`.`table`, quoted.
pub fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

/// A compared column's value as bytes: `CAST(c AS BINARY)`, a FLOAT
/// column (named in `floats`) through DOUBLE first, whose text has every
/// digit (a FLOAT's own text has 6 significant digits).
pub fn value(column: &str, floats: &[String]) -> String {
    let q = quote_ident(column);
    if floats.iter().any(|f| f == column) {
        format!("CAST(CAST({q} AS DOUBLE) AS BINARY)")
    } else {
        format!("CAST({q} AS BINARY)")
    }
}

/// The MD5 (32 hex digits) of one row's compared `columns` (FLOAT ones
/// in `floats`, see [`value`]).
pub fn row_hash(columns: &[String], floats: &[String]) -> String {
    let mut parts = Vec::with_capacity(columns.len() * 2 + 1);
    let mut nulls = Vec::with_capacity(columns.len());
    for c in columns {
        let q = quote_ident(c);
        let v = value(c, floats);
        parts.push(format!("OCTET_LENGTH({v})"));
        parts.push(v);
        nulls.push(format!("ISNULL({q})"));
    }
    parts.push(format!("CONCAT({})", nulls.join(", ")));
    format!("MD5(CONCAT_WS('#', {}))", parts.join(", "))
}

/// A condition on the key columns `key` (all NOT NULL): rows strictly
/// after the key value given as `key.len()` parameters, in key order.
/// `(a, b) > (?, ?)` spelled out as `a > ? OR (a = ? AND b > ?)`, which
/// every version turns into an index range; takes
/// [`after_params`]`(key.len())` parameters: the value's columns in the
/// order [`after_param_order`] gives.
pub fn after(key: &[String]) -> String {
    let mut terms = Vec::with_capacity(key.len());
    for i in 0..key.len() {
        let mut t: Vec<String> = key[..i]
            .iter()
            .map(|k| format!("{} = ?", quote_ident(k)))
            .collect();
        t.push(format!("{} > ?", quote_ident(&key[i])));
        terms.push(format!("({})", t.join(" AND ")));
    }
    format!("({})", terms.join(" OR "))
}

/// The number of parameters of [`after`] for a key of `n` columns.
pub fn after_params(n: usize) -> usize {
    n * (n + 1) / 2
}

/// The index into the key value of each parameter of [`after`], in order.
pub fn after_param_order(n: usize) -> Vec<usize> {
    (0..n).flat_map(|i| 0..=i).collect()
}

/// The WHERE clause of the chunk after `lower` (exclusive) up to `upper`
/// (inclusive); `None` is an open end. Parameters: those of [`after`] for
/// the lower bound, then those of [`after`] for the upper (negated).
pub fn chunk_range(key: &[String], lower: bool, upper: bool) -> String {
    match (lower, upper) {
        (false, false) => "1".to_owned(),
        (true, false) => after(key),
        (false, true) => format!("NOT {}", after(key)),
        (true, true) => format!("{} AND NOT {}", after(key), after(key)),
    }
}

/// `ORDER BY` the key columns.
fn order_by(key: &[String]) -> String {
    key.iter()
        .map(|k| quote_ident(k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `FORCE INDEX (...)` for the key's index (`PRIMARY` or a unique index).
fn force_index(index: &str) -> String {
    if index == "PRIMARY" {
        "FORCE INDEX (PRIMARY)".to_owned()
    } else {
        format!("FORCE INDEX ({})", quote_ident(index))
    }
}

/// The key value `rows` rows after the lower bound (or from the start):
/// the chunk's upper bound; no row when fewer are left (the last chunk is
/// open-ended). Parameters: the lower bound's, if any, then none (the
/// offset is part of the text: `LIMIT 1 OFFSET rows - 1`).
pub fn upper_bound(
    schema: &str,
    table: &str,
    index: &str,
    key: &[String],
    lower: bool,
    rows: u64,
) -> String {
    format!(
        "SELECT {cols} FROM {t} {fi} WHERE {w} ORDER BY {cols} LIMIT 1 OFFSET {off}",
        cols = order_by(key),
        t = qualified(schema, table),
        fi = force_index(index),
        w = chunk_range(key, lower, false),
        off = rows.max(1) - 1,
    )
}

/// The digest of the rows in a range: `COUNT(*)`, the two XORed halves
/// of the row hashes (unsigned 64-bit) and, for a table without a usable
/// key (`index` `None`: the whole table, `range` must be `"1"`), the sum
/// of the first halves as decimal text (`'0'` with a key, whose rows are
/// unique).
pub fn digest(
    schema: &str,
    table: &str,
    index: Option<&str>,
    columns: &[String],
    floats: &[String],
    range: &str,
) -> String {
    let sum = if index.is_some() {
        "'0'"
    } else {
        "CAST(COALESCE(SUM(CAST(CONV(SUBSTRING(h, 1, 16), 16, 10) AS UNSIGNED)), 0) AS CHAR)"
    };
    format!(
        "SELECT COUNT(*), \
         COALESCE(BIT_XOR(CAST(CONV(SUBSTRING(h, 1, 16), 16, 10) AS UNSIGNED)), 0), \
         COALESCE(BIT_XOR(CAST(CONV(SUBSTRING(h, 17, 16), 16, 10) AS UNSIGNED)), 0), {sum} \
         FROM (SELECT {hash} AS h FROM {t} {fi} WHERE {range}) AS chunk",
        hash = row_hash(columns, floats),
        t = qualified(schema, table),
        fi = index.map(force_index).unwrap_or_default(),
    )
}

/// A range's rows for the drill-down: each compared column as its bytes
/// (`CAST(c AS BINARY)`, NULL as NULL), in key order.
pub fn rows(
    schema: &str,
    table: &str,
    index: &str,
    key: &[String],
    columns: &[String],
    floats: &[String],
    range: &str,
) -> String {
    let cols: Vec<String> = columns.iter().map(|c| value(c, floats)).collect();
    format!(
        "SELECT {cols} FROM {t} {fi} WHERE {range} ORDER BY {order}",
        cols = cols.join(", "),
        t = qualified(schema, table),
        fi = force_index(index),
        order = order_by(key),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn after_spells_out_the_row_comparison() {
        assert_eq!(after(&names(&["a"])), "((`a` > ?))");
        assert_eq!(
            after(&names(&["a", "b`c"])),
            "((`a` > ?) OR (`a` = ? AND `b``c` > ?))"
        );
        assert_eq!(after_params(2), 3);
        assert_eq!(after_param_order(3), vec![0, 0, 1, 0, 1, 2]);
        assert_eq!(after_params(3), after_param_order(3).len());
    }

    #[test]
    fn row_hash_has_lengths_bytes_and_null_flags() {
        assert_eq!(
            row_hash(&names(&["id", "v"]), &[]),
            "MD5(CONCAT_WS('#', OCTET_LENGTH(CAST(`id` AS BINARY)), CAST(`id` AS BINARY), \
             OCTET_LENGTH(CAST(`v` AS BINARY)), CAST(`v` AS BINARY), CONCAT(ISNULL(`id`), \
             ISNULL(`v`))))"
        );
        assert_eq!(
            value("f", &names(&["f"])),
            "CAST(CAST(`f` AS DOUBLE) AS BINARY)"
        );
    }

    #[test]
    fn chunk_queries() {
        let key = names(&["id"]);
        assert_eq!(
            upper_bound("s", "t", "PRIMARY", &key, true, 1000),
            "SELECT `id` FROM `s`.`t` FORCE INDEX (PRIMARY) WHERE ((`id` > ?)) ORDER BY `id` \
             LIMIT 1 OFFSET 999"
        );
        assert_eq!(
            chunk_range(&key, true, true),
            "((`id` > ?)) AND NOT ((`id` > ?))"
        );
        assert!(digest("s", "t", None, &key, &[], "1").ends_with("FROM `s`.`t`  WHERE 1) AS chunk"));
        assert_eq!(
            rows("s", "t", "u_k", &key, &names(&["id", "v"]), &[], "1"),
            "SELECT CAST(`id` AS BINARY), CAST(`v` AS BINARY) FROM `s`.`t` FORCE INDEX (`u_k`) \
             WHERE 1 ORDER BY `id`"
        );
    }
}
