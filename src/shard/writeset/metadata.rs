//! What the replica says about a table's keys ([`TableKeys`]): its columns
//! in `ORDINAL_POSITION` order, its unique keys, whether it has triggers
//! and which tables its foreign keys reference. Read by
//! [`Writesets::load`](super::Writesets::load) from `information_schema`
//! (`COLUMNS`, `STATISTICS`, `TRIGGERS`, `REFERENTIAL_CONSTRAINTS`), or built
//! by hand with the builders here (tests, benches).
//!
//! The values are kept as `information_schema` spells them (`DATA_TYPE`,
//! `COLLATION_NAME`); what they mean for a key is decided when the
//! [`Writesets`](super::Writesets) are built (`normalize`).

/// One column of a replica table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDef {
    /// `COLUMN_NAME`.
    pub name: String,
    /// `DATA_TYPE`, lower case: `int`, `varchar`, `decimal`, `binary`, ...
    pub data_type: String,
    /// An UNSIGNED numeric column (`COLUMN_TYPE` ends in `unsigned`).
    pub unsigned: bool,
    /// `COLLATION_NAME` of a character column (`utf8mb4_general_ci`);
    /// `None` for other columns, binary strings included.
    pub collation: Option<String>,
    /// `IS_NULLABLE = 'YES'`.
    pub nullable: bool,
}

impl ColumnDef {
    /// A signed, NOT NULL column without collation of `data_type`
    /// (lower-cased).
    pub fn new(name: &str, data_type: &str) -> ColumnDef {
        ColumnDef {
            name: name.to_owned(),
            data_type: data_type.to_ascii_lowercase(),
            unsigned: false,
            collation: None,
            nullable: false,
        }
    }

    /// The same column, UNSIGNED.
    pub fn unsigned(mut self) -> ColumnDef {
        self.unsigned = true;
        self
    }

    /// The same column, nullable.
    pub fn nullable(mut self) -> ColumnDef {
        self.nullable = true;
        self
    }

    /// The same column with `COLLATION_NAME` `collation`.
    pub fn collation(mut self, collation: &str) -> ColumnDef {
        self.collation = Some(collation.to_owned());
        self
    }
}

/// One part of a unique key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPart {
    /// Index of the column in [`TableKeys::columns`] (0-based, the binlog's
    /// column number). An index out of range (a key part on an expression,
    /// or on a column `COLUMNS` did not list) makes the key unusable: the
    /// table falls back to table level (`KeyType`).
    pub column: u16,
    /// `SUB_PART`: the indexed prefix length in characters (bytes for
    /// binary strings), `None` for the whole column.
    pub prefix: Option<u32>,
}

/// One unique index (`NON_UNIQUE = 0`), the primary key included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueKey {
    /// `INDEX_NAME` (`PRIMARY` for the primary key). Part of every row key's
    /// hash: equal values in two indexes are two keys.
    pub name: String,
    /// The parts in `SEQ_IN_INDEX` order.
    pub parts: Vec<KeyPart>,
}

impl UniqueKey {
    /// A unique key on whole columns (`columns` are indexes into
    /// [`TableKeys::columns`]).
    pub fn new(name: &str, columns: &[u16]) -> UniqueKey {
        UniqueKey {
            name: name.to_owned(),
            parts: columns
                .iter()
                .map(|&column| KeyPart {
                    column,
                    prefix: None,
                })
                .collect(),
        }
    }

    /// Whether this is the primary key.
    pub fn is_primary(&self) -> bool {
        self.name == "PRIMARY"
    }
}

/// The key metadata of one replica table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableKeys {
    /// `TABLE_SCHEMA`.
    pub schema: String,
    /// `TABLE_NAME`.
    pub table: String,
    /// Every column in `ORDINAL_POSITION` order: binlog column `i` is
    /// `columns[i]` (the applier assumes the same shape, `applier::table`).
    pub columns: Vec<ColumnDef>,
    /// The unique keys: `PRIMARY` first, then by name.
    pub unique_keys: Vec<UniqueKey>,
    /// The table has at least one trigger on the replica.
    pub triggers: bool,
    /// The tables (`(schema, table)`) this table's foreign keys reference,
    /// sorted, without duplicates; the table itself when a key references
    /// its own table.
    pub references: Vec<(String, String)>,
}

impl TableKeys {
    /// A table without keys, triggers or foreign keys.
    pub fn new(schema: &str, table: &str, columns: Vec<ColumnDef>) -> TableKeys {
        TableKeys {
            schema: schema.to_owned(),
            table: table.to_owned(),
            columns,
            unique_keys: Vec::new(),
            triggers: false,
            references: Vec::new(),
        }
    }

    /// The same table with one more unique key (kept `PRIMARY` first, then
    /// by name).
    pub fn with_key(mut self, key: UniqueKey) -> TableKeys {
        self.unique_keys.push(key);
        sort_keys(&mut self.unique_keys);
        self
    }

    /// The same table with triggers.
    pub fn with_triggers(mut self) -> TableKeys {
        self.triggers = true;
        self
    }

    /// The same table with a foreign key referencing `schema.table`.
    pub fn referencing(mut self, schema: &str, table: &str) -> TableKeys {
        self.references.push((schema.to_owned(), table.to_owned()));
        self.references.sort();
        self.references.dedup();
        self
    }

    /// Whether some unique key identifies every row: the primary key, or a
    /// unique key on whole NOT NULL columns.
    pub fn has_identity(&self) -> bool {
        self.unique_keys.iter().any(|k| {
            k.is_primary()
                || k.parts.iter().all(|p| {
                    self.columns
                        .get(usize::from(p.column))
                        .is_some_and(|c| !c.nullable)
                })
        })
    }
}

/// `PRIMARY` first, then by name.
pub(super) fn sort_keys(keys: &mut [UniqueKey]) {
    keys.sort_by(|a, b| (!a.is_primary(), &a.name).cmp(&(!b.is_primary(), &b.name)));
}
