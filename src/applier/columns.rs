//! Column facts the binlog may lack, completed from the replica's own
//! column definitions.
//!
//! With `binlog_row_metadata=NO_LOG` (MariaDB 10.11's default) a TABLE_MAP
//! carries per column only its type code, type metadata and nullability.
//! Two facts that binding a value needs are then missing:
//! - the signedness of integer columns: the decoder reads them signed
//!   (see `extractor::rows`), and an UNSIGNED column's value must be bound
//!   as the unsigned number of the same bits;
//! - whether a fixed-length STRING column is CHAR(n) or BINARY(n): both
//!   are type `STRING` with the same metadata (the byte length n). The
//!   master strips trailing spaces of CHAR and trailing `0x00` bytes of
//!   BINARY(n) (and of UUID and INET6, binary 16-byte types) when it logs
//!   them. The replica pads what is stored, but a value in a WHERE clause
//!   is compared as given: a BINARY key bound without its zero bytes
//!   matches nothing. CHAR must never be padded with zeros (its value is
//!   text; the replica pads it with spaces itself).
//!
//! With `MINIMAL` or `FULL` metadata the binlog tells both (signedness,
//! collation 63 for binary columns, see `extractor::rows`), and the
//! decoder pads BINARY values itself. Without it, [`complete`] fills them
//! in from the replica's `information_schema.COLUMNS` ([`ReplicaColumn`]),
//! and [`crate::applier::sql::to_param`] pads a binary value to the
//! column's byte length from the binlog, as the decoder does with FULL
//! metadata: both metadata levels bind the same bytes.

use crate::event::{column_type, ColumnInfo};
use crate::extractor::rows::{real_type, string_meta, BINARY_COLLATION};

/// What the replica's `information_schema.COLUMNS` says about one column,
/// as far as binding values needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaColumn {
    /// `COLUMN_NAME`.
    pub name: String,
    /// An UNSIGNED numeric column (`COLUMN_TYPE` ends in `unsigned`).
    pub unsigned: bool,
    /// A fixed-length binary string column: `DATA_TYPE` `binary` (BINARY(n),
    /// CHAR(n) CHARACTER SET binary), `uuid` or `inet6`, whose trailing zero
    /// bytes the binlog drops.
    pub fixed_binary: bool,
}

impl ReplicaColumn {
    /// From `COLUMN_NAME`, `DATA_TYPE` and `COLUMN_TYPE` of
    /// `information_schema.COLUMNS` (case-insensitive).
    pub fn from_definition(name: &str, data_type: &str, column_type: &str) -> ReplicaColumn {
        let data_type = data_type.to_ascii_lowercase();
        ReplicaColumn {
            name: name.to_owned(),
            unsigned: column_type.to_ascii_lowercase().contains("unsigned"),
            fixed_binary: matches!(data_type.as_str(), "binary" | "uuid" | "inet6"),
        }
    }
}

/// Whether an integer type (the types whose signedness the metadata
/// carries and the decoder needs).
pub fn is_integer(c: &ColumnInfo) -> bool {
    matches!(
        c.column_type,
        column_type::TINY
            | column_type::SHORT
            | column_type::INT24
            | column_type::LONG
            | column_type::LONGLONG
    )
}

/// Whether a CHAR/BINARY column (type STRING whose real type is STRING,
/// not ENUM/SET in disguise).
pub fn is_fixed_string(c: &ColumnInfo) -> bool {
    c.column_type == column_type::STRING && real_type(c) == column_type::STRING
}

/// The byte length a value of `c` is padded to with zero bytes: `Some(n)`
/// for a fixed-length binary column (CHAR/BINARY with the binary collation,
/// known from the metadata or completed by [`complete`]), else `None`.
pub fn binary_pad_length(c: &ColumnInfo) -> Option<usize> {
    (is_fixed_string(c) && c.charset == Some(BINARY_COLLATION))
        .then(|| usize::from(string_meta(c.meta).1))
}

/// Whether the binlog's metadata leaves out something [`complete`] needs
/// the replica for: the signedness of an integer column or the collation
/// of a CHAR/BINARY column (`binlog_row_metadata=NO_LOG`).
pub fn needs_replica_definition(columns: &[ColumnInfo]) -> bool {
    columns.iter().any(|c| {
        (c.unsigned.is_none() && is_integer(c)) || (c.charset.is_none() && is_fixed_string(c))
    })
}

/// `columns` (from the binlog) with what the metadata lacked filled in from
/// the replica's definition `replica` (same order; a column the replica
/// lacks is left as it is): the signedness of integer columns, and the
/// binary collation (63) of CHAR/BINARY columns that are fixed-length
/// binary on the replica. A CHAR column's collation stays unknown (`None`):
/// only the binary ones matter, for padding.
pub fn complete(columns: &[ColumnInfo], replica: &[ReplicaColumn]) -> Vec<ColumnInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            let Some(r) = replica.get(i) else { return c };
            if c.unsigned.is_none() && is_integer(&c) {
                c.unsigned = Some(r.unsigned);
            }
            if c.charset.is_none() && is_fixed_string(&c) && r.fixed_binary {
                c.charset = Some(BINARY_COLLATION);
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(column_type: u8, meta: u16) -> ColumnInfo {
        ColumnInfo {
            column_type,
            meta,
            nullable: true,
            name: None,
            unsigned: None,
            charset: None,
        }
    }

    #[test]
    fn definitions_tell_binary_and_unsigned_columns() {
        let r = ReplicaColumn::from_definition;
        assert!(r("a", "binary", "binary(16)").fixed_binary);
        assert!(r("a", "UUID", "uuid").fixed_binary);
        assert!(r("a", "inet6", "inet6").fixed_binary);
        assert!(!r("a", "char", "char(4)").fixed_binary);
        assert!(!r("a", "varbinary", "varbinary(4)").fixed_binary);
        assert!(r("a", "int", "int(10) unsigned").unsigned);
        assert!(!r("a", "int", "int(11)").unsigned);
    }

    #[test]
    fn only_binary_strings_get_the_binary_collation_and_a_pad_length() {
        // BINARY(16), CHAR(4) utf8mb4 (16 bytes), ENUM in a STRING, INT.
        let binlog = [
            col(column_type::STRING, 0xfe10),
            col(column_type::STRING, 0xfe10),
            col(column_type::STRING, 0xf701),
            col(column_type::LONG, 0),
        ];
        assert!(needs_replica_definition(&binlog));
        let replica = [
            ReplicaColumn::from_definition("k", "binary", "binary(16)"),
            ReplicaColumn::from_definition("c", "char", "char(4)"),
            ReplicaColumn::from_definition("e", "enum", "enum('a')"),
            ReplicaColumn::from_definition("n", "int", "int(10) unsigned"),
        ];
        let done = complete(&binlog, &replica);
        assert_eq!(done[0].charset, Some(BINARY_COLLATION));
        assert_eq!(binary_pad_length(&done[0]), Some(16));
        assert_eq!(done[1].charset, None);
        assert_eq!(binary_pad_length(&done[1]), None);
        assert_eq!(done[2].charset, None);
        assert_eq!(binary_pad_length(&done[2]), None);
        assert_eq!(done[3].unsigned, Some(true));
        assert!(!needs_replica_definition(&[
            done[0].clone(),
            done[3].clone()
        ]));
        // Metadata the binlog carried is kept (a CHAR the master logged
        // with utf8mb4 stays text even if the replica's is binary).
        let mut logged = binlog[1].clone();
        logged.charset = Some(45);
        let kept = complete(&[logged], &replica[..1]);
        assert_eq!(kept[0].charset, Some(45));
    }
}
