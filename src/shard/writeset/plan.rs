//! What [`Writesets`](super::Writesets) keeps per table, decided once from
//! its [`TableKeys`] ([`TablePlan::compile`]): the ids of its table and
//! shard keys, the coarse keys every change of it holds (and why), and
//! how each unique key's row key is hashed ([`KeyPlan`]). Also the
//! foreign-key groups ([`fk_groups`]) and the hashes of names.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;

use super::normalize::Norm;
use super::{Fallback, Key, TableKeys};
use crate::event::{RowImage, Value};

/// Seed of every name hash (any fixed value: the hashes live only in this
/// process).
const NAME_SEED: u64 = 0x7368_6172_6472_6570;

/// A fixed hash of `tag` and `names` (each delimited by its length).
pub(super) fn name_hash(tag: u8, names: &[&str]) -> u64 {
    let mut h = FixedState::with_seed(NAME_SEED).build_hasher();
    h.write_u8(tag);
    for n in names {
        h.write(n.as_bytes());
        h.write_usize(n.len());
    }
    h.finish()
}

/// The id of the table key of `schema.table` ([`Key::Table`]).
pub fn table_key_id(schema: &str, table: &str) -> u64 {
    name_hash(b't', &[schema, table])
}

/// The id of the shard key of `shard` ([`Key::Shard`]).
pub fn shard_key_id(shard: &str) -> u64 {
    name_hash(b's', &[shard])
}

/// The id of the table key of the foreign-key group whose first table (in
/// `(schema, table)` order) is `schema.table`.
pub(super) fn group_key_id(schema: &str, table: &str) -> u64 {
    name_hash(b'g', &[schema, table])
}

/// One key column: where it is in the image and how it is normalized.
#[derive(Clone, Debug)]
pub(super) struct PartPlan {
    column: u16,
    norm: Norm,
}

/// How one unique key's row key is hashed.
#[derive(Clone, Debug)]
pub(super) struct KeyPlan {
    /// Hash of (schema, table, index name): the hasher's seed.
    seed: u64,
    parts: Vec<PartPlan>,
}

impl KeyPlan {
    /// The row key of `image`, `Ok(None)` when a part is NULL (NULLs never
    /// collide in a unique index).
    ///
    /// # Errors
    /// `PartialImage` when a key column is not in the image; the value's
    /// [`Norm::write`] error.
    #[inline]
    pub(super) fn row_key(&self, image: &RowImage) -> Result<Option<u64>, Fallback> {
        let mut h = FixedState::with_seed(self.seed).build_hasher();
        for part in &self.parts {
            let value = match value_of(image, part.column) {
                Some(Value::Null) => return Ok(None),
                Some(v) => v,
                None => return Err(Fallback::PartialImage),
            };
            part.norm.write(value, &mut h)?;
        }
        Ok(Some(h.finish()))
    }
}

/// The value of column `column` in `image`: direct when the image holds
/// every column up to it (FULL images), else by binary search.
#[inline]
fn value_of(image: &RowImage, column: u16) -> Option<&Value> {
    let i = usize::from(column);
    if image.columns.get(i) == Some(&column) {
        return image.values.get(i);
    }
    image.get(column)
}

/// What every change of one table holds.
#[derive(Clone, Debug)]
pub(super) struct TablePlan {
    /// [`table_key_id`] of the table.
    pub(super) table_id: u64,
    /// [`shard_key_id`] of its schema.
    pub(super) shard_id: u64,
    /// Keys every change holds besides its table and shard keys; when not
    /// empty, no row keys are computed (these cover every row).
    pub(super) coarse: Vec<Key>,
    /// Why (the reasons of `coarse`).
    pub(super) fallbacks: Vec<Fallback>,
    /// The row keys' plans (empty when `coarse` is not).
    pub(super) keys: Vec<KeyPlan>,
    /// The foreign-key group's key id, when the table is in one.
    pub(super) group: Option<u64>,
}

impl TablePlan {
    /// The plan of `t`, in the foreign-key group `group` (if any).
    pub(super) fn compile(t: &TableKeys, group: Option<u64>) -> TablePlan {
        let table_id = table_key_id(&t.schema, &t.table);
        let mut fallbacks = Vec::new();
        let mut keys = Vec::with_capacity(t.unique_keys.len());
        if !t.has_identity() {
            fallbacks.push(Fallback::NoUniqueKey);
        }
        for key in &t.unique_keys {
            let mut parts = Vec::with_capacity(key.parts.len());
            for part in &key.parts {
                if part.prefix.is_some() {
                    fallbacks.push(Fallback::PrefixKey);
                }
                let Some(column) = t.columns.get(usize::from(part.column)) else {
                    fallbacks.push(Fallback::KeyType);
                    continue;
                };
                match Norm::of(
                    &column.data_type,
                    column.unsigned,
                    column.collation.as_deref(),
                ) {
                    Ok(norm) => parts.push(PartPlan {
                        column: part.column,
                        norm,
                    }),
                    Err(reason) => fallbacks.push(reason),
                }
            }
            keys.push(KeyPlan {
                seed: name_hash(b'k', &[&t.schema, &t.table, &key.name]),
                parts,
            });
        }
        let mut coarse = Vec::new();
        if !fallbacks.is_empty() {
            coarse.push(Key::Table {
                id: table_id,
                exclusive: true,
            });
        }
        if let Some(id) = group {
            coarse.push(Key::Table {
                id,
                exclusive: true,
            });
            fallbacks.push(Fallback::ForeignKey);
        }
        if t.triggers {
            coarse.push(Key::Global);
            fallbacks.push(Fallback::Triggers);
        }
        fallbacks.sort_unstable();
        fallbacks.dedup();
        if !coarse.is_empty() {
            keys.clear();
        }
        TablePlan {
            table_id,
            shard_id: shard_key_id(&t.schema),
            coarse,
            fallbacks,
            keys,
            group,
        }
    }

    /// The plan of a table known only from a foreign key (its schema was
    /// not loaded, or it no longer exists): table level, in its group.
    pub(super) fn outside(schema: &str, table: &str, group: u64) -> TablePlan {
        let table_id = table_key_id(schema, table);
        TablePlan {
            table_id,
            shard_id: shard_key_id(schema),
            coarse: vec![
                Key::Table {
                    id: table_id,
                    exclusive: true,
                },
                Key::Table {
                    id: group,
                    exclusive: true,
                },
            ],
            fallbacks: vec![Fallback::ForeignKey, Fallback::UnknownTable],
            keys: Vec::new(),
            group: Some(group),
        }
    }
}

/// The foreign-key groups: every table named by `edges` (child, parent)
/// mapped to its group's key id ([`group_key_id`] of the group's first
/// table). Tables joined by a key, directly or through others, in one
/// schema or across, are one group (union-find).
pub(super) fn fk_groups<'a>(
    edges: impl IntoIterator<Item = (&'a (String, String), &'a (String, String))>,
) -> BTreeMap<(String, String), u64> {
    let mut parent: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    fn root(
        parent: &BTreeMap<(String, String), (String, String)>,
        t: &(String, String),
    ) -> (String, String) {
        let mut at = t.clone();
        while let Some(p) = parent.get(&at).filter(|p| **p != at) {
            at = p.clone();
        }
        at
    }
    for (child, referenced) in edges {
        for t in [child, referenced] {
            parent.entry(t.clone()).or_insert_with(|| t.clone());
        }
        let (a, b) = (root(&parent, child), root(&parent, referenced));
        if a != b {
            // The smaller name is the root: the group's first table.
            let (r, other) = if a < b { (a, b) } else { (b, a) };
            parent.insert(other, r);
        }
    }
    let tables: Vec<(String, String)> = parent.keys().cloned().collect();
    tables
        .into_iter()
        .map(|t| {
            let r = root(&parent, &t);
            (t, group_key_id(&r.0, &r.1))
        })
        .collect()
}
