//! Writesets: the dependency keys of a transaction, from its row images
//! (issue 16, part 1; shared/DESIGN.md §4 "Dependencies";
//! shared/research/writeset.md §1, §4, §6).
//!
//! With `[apply] parallelism = "row"` the scheduler runs transactions of one
//! shard on several channels when they write different rows. What a
//! transaction writes is its [`Writeset`], a set of [`Key`]s; two
//! transactions conflict when they hold keys that conflict
//! ([`Key::conflicts`]). [`Writesets`] holds the replica's key metadata of
//! every table ([`TableKeys`], from `information_schema`) and computes the
//! writeset of a transaction ([`Writesets::writeset`]).
//!
//! # The keys of a transaction
//! - Every changed row: one [`Key::Row`] per unique key (the primary key
//!   and every UNIQUE index) of its before image and of its after image (an
//!   UPDATE that changes a key conflicts on both values). The hash covers
//!   the schema, the table, the index name and the key's values
//!   normalized as the server compares them (`normalize`): two values the
//!   index holds equal give the same key; a key with a NULL part gives none
//!   (NULLs never collide). A collision of two different values only costs
//!   parallelism.
//! - Every row change also holds `Table { id: its table, exclusive: false }`
//!   and `Shard { id: its schema, exclusive: false }`, so that a later
//!   exclusive key of its table or shard conflicts with it (a table not in
//!   the metadata holds its exclusive table key instead).
//! - Where a row key does not decide, coarser keys, each with its reason
//!   ([`Fallback`], counted by the scheduler's status):
//!   - `Table { id: the table, exclusive: true }` for every change of a
//!     table without primary key or NOT NULL unique key (`NoUniqueKey`),
//!     with a prefix unique key (`PrefixKey`), a FLOAT/DOUBLE key column
//!     (`FloatKey`), a key column of a collation shardrep does not fold
//!     (`Collation`) or of a type it does not normalize (`KeyType`); for a
//!     change whose image lacks a key column (`PartialImage`: MINIMAL or
//!     NOBLOB row images) or holds a value the collation's fold cannot
//!     handle (`Collation`: a non-ASCII byte under a case-insensitive
//!     collation); for a table not in the metadata (`UnknownTable`);
//!   - `Table { id: the group, exclusive: true }` for every change of a
//!     table joined to others by foreign keys (child or parent, in one
//!     schema or across, transitively: one group), since cascades and
//!     key checks run on the replica, invisible to row keys
//!     (`ForeignKey`);
//!   - [`Key::Global`] for every change of a table with triggers on the
//!     replica (`Triggers`): shardrep applies through SQL, so they fire
//!     and may write anything;
//!   - a statement ([`Change::Statement`]: DDL or statement-format DML)
//!     holds `Shard { id: its shard, exclusive: true }` (`Statement`),
//!     plus the exclusive keys of the foreign-key groups with a table in
//!     that schema (`ForeignKey`), and [`Key::Global`] when the schema has a
//!     table with triggers (`Triggers`) or the shard is `#UNKNOWN`.
//! - [`Change::Annotation`] and rows of a shardrep restart table
//!   ([`crate::shard::is_catalog_table`]) hold nothing.
//!
//! Binlog column `i` is the replica table's column with `ORDINAL_POSITION`
//! `i + 1` (as the applier assumes, `applier::table`).
//!
//! # Cost
//! [`Writesets::writeset`] allocates nothing once its output's vectors have
//! grown to a transaction's size: tables are looked up once per
//! transaction and table by borrowed names, values are hashed with
//! foldhash from a per-index seed, case folding goes through a stack
//! buffer. `bench/writeset.rs` measures it.

use std::collections::BTreeMap;

use crate::event::{Change, RowsChange, Transaction, UNKNOWN_SHARD};

mod load;
mod metadata;
mod normalize;
mod plan;
#[cfg(test)]
mod tests;

pub use load::{WritesetError, SYSTEM_SCHEMAS};
pub use metadata::{ColumnDef, KeyPart, TableKeys, UniqueKey};
pub use normalize::{fold_ascii, string_rule, StringRule, BIN_CHARSETS, CI_COLLATIONS};
pub use plan::{shard_key_id, table_key_id};

use load::Scope;
use plan::{fk_groups, TablePlan};

/// One dependency key. Two transactions conflict when they hold keys that
/// conflict ([`Key::conflicts`]): equal `Row`s; `Table`/`Shard` keys with
/// the same id where at least one is exclusive; `Global` conflicts with
/// everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A row: hash of (schema, table, index name, normalized key values).
    Row(u64),
    /// A table ([`table_key_id`]) or a foreign-key group.
    Table {
        /// [`table_key_id`] of the table, or the group's id.
        id: u64,
        /// Conflicts with every key of the same id (else only with an
        /// exclusive one).
        exclusive: bool,
    },
    /// A shard (schema), [`shard_key_id`].
    Shard {
        /// [`shard_key_id`] of the shard's name.
        id: u64,
        /// Conflicts with every key of the same id (else only with an
        /// exclusive one).
        exclusive: bool,
    },
    /// Conflicts with every key.
    Global,
}

impl Key {
    /// Whether a transaction holding `self` conflicts with one holding
    /// `other` (the rule of the type's doc; symmetric).
    pub fn conflicts(self, other: Key) -> bool {
        match (self, other) {
            (Key::Global, _) | (_, Key::Global) => true,
            (Key::Row(a), Key::Row(b)) => a == b,
            (
                Key::Table {
                    id: a,
                    exclusive: x,
                },
                Key::Table {
                    id: b,
                    exclusive: y,
                },
            )
            | (
                Key::Shard {
                    id: a,
                    exclusive: x,
                },
                Key::Shard {
                    id: b,
                    exclusive: y,
                },
            ) => a == b && (x || y),
            _ => false,
        }
    }
}

/// Why a transaction (or part of it) fell back to a coarser key than its
/// rows' (module doc; status counts them per reason, [`Fallback::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fallback {
    /// A table without primary key or NOT NULL unique key.
    NoUniqueKey,
    /// A statement (DDL, statement-format DML).
    Statement,
    /// A table with triggers on the replica.
    Triggers,
    /// A table joined to others by foreign keys.
    ForeignKey,
    /// A key column of a collation shardrep does not fold, or a value the
    /// fold cannot handle (non-ASCII under a case-insensitive collation).
    Collation,
    /// A FLOAT/DOUBLE key column.
    FloatKey,
    /// A unique key on a column prefix.
    PrefixKey,
    /// A row image without one of the key columns (MINIMAL/NOBLOB images).
    PartialImage,
    /// A table the metadata does not know.
    UnknownTable,
    /// A key column of a type shardrep does not normalize (spatial, vector,
    /// unknown), or a key part that is not a column.
    KeyType,
}

impl Fallback {
    /// Every reason, in declaration order.
    pub const ALL: [Fallback; 10] = [
        Fallback::NoUniqueKey,
        Fallback::Statement,
        Fallback::Triggers,
        Fallback::ForeignKey,
        Fallback::Collation,
        Fallback::FloatKey,
        Fallback::PrefixKey,
        Fallback::PartialImage,
        Fallback::UnknownTable,
        Fallback::KeyType,
    ];

    /// The reason's name for status and logs (snake_case).
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::NoUniqueKey => "no_unique_key",
            Fallback::Statement => "statement",
            Fallback::Triggers => "triggers",
            Fallback::ForeignKey => "foreign_key",
            Fallback::Collation => "collation",
            Fallback::FloatKey => "float_key",
            Fallback::PrefixKey => "prefix_key",
            Fallback::PartialImage => "partial_image",
            Fallback::UnknownTable => "unknown_table",
            Fallback::KeyType => "key_type",
        }
    }
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys of one transaction ([`Writesets::writeset`] fills it; reuse
/// one across transactions to allocate nothing).
#[derive(Clone, Debug, Default)]
pub struct Writeset {
    /// The keys, sorted, without duplicates.
    pub keys: Vec<Key>,
    /// Why some keys are coarser than rows, sorted, without duplicates.
    pub fallbacks: Vec<Fallback>,
    /// Per [`Transaction::tables`] entry, its plan once looked up.
    resolved: Vec<u32>,
}

impl Writeset {
    /// Whether a transaction with these keys conflicts with one with
    /// `other`'s: some pair of keys conflicts. A writeset without keys
    /// conflicts with nothing. Quadratic in the key counts (for tests and
    /// models; a scheduler indexes the keys in flight).
    pub fn conflicts(&self, other: &Writeset) -> bool {
        self.keys
            .iter()
            .any(|&a| other.keys.iter().any(|&b| a.conflicts(b)))
    }
}

/// [`Writeset::resolved`]: not looked up yet.
const UNRESOLVED: u32 = u32::MAX;
/// [`Writeset::resolved`]: a shardrep restart table (no keys).
const CATALOG: u32 = u32::MAX - 1;
/// [`Writeset::resolved`]: not in the metadata.
const UNKNOWN: u32 = u32::MAX - 2;

/// What a statement of a schema holds besides its exclusive shard key.
#[derive(Clone, Debug, Default)]
struct SchemaPlan {
    /// Table name → index in [`Writesets::plans`].
    tables: foldhash::HashMap<String, u32>,
    /// [`shard_key_id`] of the schema.
    shard_id: u64,
    /// Some table of the schema has triggers.
    triggers: bool,
    /// The foreign-key groups with a table in the schema.
    groups: Vec<u64>,
}

/// A foreign key: (child `(schema, table)`, referenced `(schema, table)`).
type Reference = ((String, String), (String, String));

/// The replica's key metadata of every table, and the writeset of a
/// transaction (module doc).
#[derive(Clone, Debug, Default)]
pub struct Writesets {
    /// The metadata, in `(schema, table)` order.
    tables: Vec<TableKeys>,
    /// One plan per table of `tables` (same index), then one per table
    /// known only from a foreign key.
    plans: Vec<TablePlan>,
    /// Schema → its tables' plans.
    schemas: foldhash::HashMap<String, SchemaPlan>,
}

impl Writesets {
    /// Reads the metadata of every table in `schemas` (`None`: every schema
    /// but [`SYSTEM_SCHEMAS`]) from the replica's `information_schema`,
    /// and every foreign key of the server.
    ///
    /// # Errors
    /// [`WritesetError::Query`] naming what was read and for which schema.
    pub async fn load(
        conn: &mut mysql_async::Conn,
        schemas: Option<&[String]>,
    ) -> Result<Writesets, WritesetError> {
        let mut tables = Vec::new();
        match schemas {
            None => tables = load::read_tables(conn, Scope::All).await?,
            Some(list) => {
                for schema in list {
                    tables.extend(load::read_tables(conn, Scope::One(schema)).await?);
                }
            }
        }
        let references = load::read_references(conn).await?;
        Ok(Writesets::assemble(tables, references))
    }

    /// Reads `schema` again (after a DDL of that schema committed): its
    /// tables replace the ones held, and every foreign key of the server is
    /// read again (groups may have changed elsewhere). A schema that no
    /// longer exists is forgotten.
    ///
    /// # Errors
    /// [`WritesetError::Query`]; the metadata held is then unchanged.
    pub async fn reload_schema(
        &mut self,
        conn: &mut mysql_async::Conn,
        schema: &str,
    ) -> Result<(), WritesetError> {
        let fresh = load::read_tables(conn, Scope::One(schema)).await?;
        let references = load::read_references(conn).await?;
        let tables = std::mem::take(&mut self.tables)
            .into_iter()
            .filter(|t| t.schema != schema)
            .chain(fresh)
            .map(|mut t| {
                t.references.clear();
                t
            })
            .collect();
        *self = Writesets::assemble(tables, references);
        Ok(())
    }

    /// From metadata read elsewhere (tests, benches): `tables` with their
    /// own [`TableKeys::references`]. A later `(schema, table)` replaces an
    /// earlier one.
    pub fn from_tables(tables: Vec<TableKeys>) -> Writesets {
        Writesets::build(tables, &[])
    }

    /// `tables` (without references) with the server's `references`
    /// distributed to their children.
    fn assemble(mut tables: Vec<TableKeys>, references: Vec<Reference>) -> Writesets {
        tables.sort_by(|a, b| (&a.schema, &a.table).cmp(&(&b.schema, &b.table)));
        // A schema listed twice: one copy of its tables.
        tables.dedup_by(|a, b| a.schema == b.schema && a.table == b.table);
        let mut outside = Vec::new();
        for (child, parent) in references {
            match tables.binary_search_by(|t| {
                (t.schema.as_str(), t.table.as_str()).cmp(&(&child.0, &child.1))
            }) {
                Ok(i) => {
                    let refs = &mut tables[i].references;
                    if !refs.contains(&parent) {
                        refs.push(parent);
                        refs.sort();
                    }
                }
                Err(_) => outside.push((child, parent)),
            }
        }
        Writesets::build(tables, &outside)
    }

    /// The plans of `tables`, in foreign-key groups with the tables named by
    /// `outside` (keys whose child is not in `tables`: a schema not loaded).
    fn build(tables: Vec<TableKeys>, outside: &[Reference]) -> Writesets {
        let mut by_name: BTreeMap<(String, String), TableKeys> = BTreeMap::new();
        for t in tables {
            by_name.insert((t.schema.clone(), t.table.clone()), t);
        }
        let tables: Vec<TableKeys> = by_name.into_values().collect();
        let owned: Vec<Reference> = tables
            .iter()
            .flat_map(|t| {
                t.references
                    .iter()
                    .map(|r| ((t.schema.clone(), t.table.clone()), r.clone()))
            })
            .collect();
        let groups = fk_groups(owned.iter().chain(outside).map(|(c, p)| (c, p)));

        let mut plans = Vec::with_capacity(tables.len());
        let mut schemas: foldhash::HashMap<String, SchemaPlan> = Default::default();
        let add = |schemas: &mut foldhash::HashMap<String, SchemaPlan>,
                   plans: &mut Vec<TablePlan>,
                   schema: &str,
                   table: &str,
                   plan: TablePlan,
                   triggers: bool| {
            let s = schemas
                .entry(schema.to_owned())
                .or_insert_with(|| SchemaPlan {
                    shard_id: shard_key_id(schema),
                    ..SchemaPlan::default()
                });
            s.triggers |= triggers;
            if let Some(g) = plan.group {
                if !s.groups.contains(&g) {
                    s.groups.push(g);
                }
            }
            s.tables.insert(table.to_owned(), plans.len() as u32);
            plans.push(plan);
        };
        for t in &tables {
            let group = groups.get(&(t.schema.clone(), t.table.clone())).copied();
            add(
                &mut schemas,
                &mut plans,
                &t.schema,
                &t.table,
                TablePlan::compile(t, group),
                t.triggers,
            );
        }
        for ((schema, table), &group) in &groups {
            let known = schemas
                .get(schema.as_str())
                .is_some_and(|s| s.tables.contains_key(table.as_str()));
            if !known {
                add(
                    &mut schemas,
                    &mut plans,
                    schema,
                    table,
                    TablePlan::outside(schema, table, group),
                    false,
                );
            }
        }
        for s in schemas.values_mut() {
            s.groups.sort_unstable();
        }
        Writesets {
            tables,
            plans,
            schemas,
        }
    }

    /// The metadata held, in `(schema, table)` order.
    pub fn tables(&self) -> &[TableKeys] {
        &self.tables
    }

    /// The metadata of `schema.table`, if loaded.
    pub fn table(&self, schema: &str, table: &str) -> Option<&TableKeys> {
        self.tables
            .binary_search_by(|t| (t.schema.as_str(), t.table.as_str()).cmp(&(schema, table)))
            .ok()
            .map(|i| &self.tables[i])
    }

    /// Why every change of `schema.table` holds coarse keys (sorted; empty
    /// when its rows decide), or `None` for a table the metadata does not
    /// know (`UnknownTable` at run time).
    pub fn table_fallbacks(&self, schema: &str, table: &str) -> Option<&[Fallback]> {
        self.plan(schema, table).map(|p| p.fallbacks.as_slice())
    }

    /// The id of the foreign-key group of `schema.table` (its exclusive
    /// [`Key::Table`]), if it is in one.
    pub fn foreign_key_group(&self, schema: &str, table: &str) -> Option<u64> {
        self.plan(schema, table).and_then(|p| p.group)
    }

    fn plan(&self, schema: &str, table: &str) -> Option<&TablePlan> {
        let i = *self.schemas.get(schema)?.tables.get(table)?;
        self.plans.get(i as usize)
    }

    /// Clears `out` and fills it with `txn`'s keys and fallbacks (module
    /// doc), sorted and without duplicates.
    pub fn writeset(&self, txn: &Transaction, out: &mut Writeset) {
        out.keys.clear();
        out.fallbacks.clear();
        out.resolved.clear();
        out.resolved.resize(txn.tables.len(), UNRESOLVED);
        for change in &txn.changes {
            match change {
                Change::Rows(rows) => self.rows(txn, rows, out),
                Change::Statement(_) => self.statement(&txn.shard, out),
                Change::Annotation(_) => {}
            }
        }
        out.keys.sort_unstable();
        out.keys.dedup();
        out.fallbacks.sort_unstable();
        out.fallbacks.dedup();
    }

    fn statement(&self, shard: &str, out: &mut Writeset) {
        out.fallbacks.push(Fallback::Statement);
        if shard == UNKNOWN_SHARD {
            out.keys.push(Key::Global);
            return;
        }
        let Some(s) = self.schemas.get(shard) else {
            out.keys.push(Key::Shard {
                id: shard_key_id(shard),
                exclusive: true,
            });
            return;
        };
        out.keys.push(Key::Shard {
            id: s.shard_id,
            exclusive: true,
        });
        if s.triggers {
            out.keys.push(Key::Global);
            out.fallbacks.push(Fallback::Triggers);
        }
        if !s.groups.is_empty() {
            out.fallbacks.push(Fallback::ForeignKey);
            out.keys.extend(s.groups.iter().map(|&id| Key::Table {
                id,
                exclusive: true,
            }));
        }
    }

    fn rows(&self, txn: &Transaction, change: &RowsChange, out: &mut Writeset) {
        let index = change.table as usize;
        let Some(info) = txn.tables.get(index) else {
            // Never produced by the extractor: nothing to attribute it to.
            out.keys.push(Key::Global);
            out.fallbacks.push(Fallback::UnknownTable);
            return;
        };
        let mut slot = out.resolved[index];
        if slot == UNRESOLVED {
            slot = if super::is_catalog_table(&info.schema, &info.table) {
                CATALOG
            } else {
                self.schemas
                    .get(info.schema.as_str())
                    .and_then(|s| s.tables.get(info.table.as_str()))
                    .copied()
                    .unwrap_or(UNKNOWN)
            };
            out.resolved[index] = slot;
        }
        match slot {
            CATALOG => {}
            UNKNOWN => {
                let id = table_key_id(&info.schema, &info.table);
                out.keys.extend([
                    Key::Table {
                        id,
                        exclusive: true,
                    },
                    Key::Shard {
                        id: shard_key_id(&info.schema),
                        exclusive: false,
                    },
                ]);
                out.fallbacks.push(Fallback::UnknownTable);
            }
            i => self.plan_rows(&self.plans[i as usize], change, out),
        }
    }

    #[inline]
    fn plan_rows(&self, plan: &TablePlan, change: &RowsChange, out: &mut Writeset) {
        out.keys.extend([
            Key::Table {
                id: plan.table_id,
                exclusive: false,
            },
            Key::Shard {
                id: plan.shard_id,
                exclusive: false,
            },
        ]);
        if !plan.coarse.is_empty() {
            out.keys.extend_from_slice(&plan.coarse);
            out.fallbacks.extend_from_slice(&plan.fallbacks);
            return;
        }
        for pair in &change.rows {
            for image in [&pair.before, &pair.after].into_iter().flatten() {
                for key in &plan.keys {
                    match key.row_key(image) {
                        Ok(Some(hash)) => out.keys.push(Key::Row(hash)),
                        Ok(None) => {}
                        Err(reason) => {
                            // The table's exclusive key covers every row.
                            out.keys.push(Key::Table {
                                id: plan.table_id,
                                exclusive: true,
                            });
                            out.fallbacks.push(reason);
                            return;
                        }
                    }
                }
            }
        }
    }
}
