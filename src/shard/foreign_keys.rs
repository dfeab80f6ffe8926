//! Shards joined by foreign keys (issue 14, §2; shared/DESIGN.md §4,
//! "Dependencies").
//!
//! A shard is a unit of independence only when no foreign key crosses it:
//! a child row in schema `b` referencing a parent in schema `a` must be
//! inserted after its parent and deleted before it (error 1452 or 1451
//! otherwise), and `ON DELETE CASCADE` on the parent changes the child's
//! rows. So shards joined by a foreign key, directly or through others,
//! form one **group** ([`ForeignKeyGroups`], union-find over the replica's
//! `information_schema.REFERENTIAL_CONSTRAINTS`): every shard of a group is
//! applied on one channel, in the master's commit order.
//!
//! # The group's channel
//!
//! The channel of the group's first shard (name order) that has an
//! explicit `shard=channel` line in `shard.list`; when none has, the
//! channel of the group's first shard by the `(*)` default or the hash.
//! Explicit lines of other shards of the group that name another channel
//! are overridden: [`ShardGroup::conflicts`] names them (logged as a
//! warning, shown in `status --name shards`).
//!
//! # Keeping the knowledge current
//!
//! The groups are read from the replica at start, after takeover (the
//! replica's foreign keys are then those of the position the service
//! starts from). A transaction that may change them
//! ([`may_change_foreign_keys`]) is applied alone, and the scheduler reads
//! the groups again after it has committed and before it routes the next
//! transaction (see [`crate::scheduler`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use mysql_async::prelude::Queryable;

use super::channel::{AssignedBy, ChannelAssignment};
use super::statement::leading_verb;
use crate::event::{Change, Transaction, UNKNOWN_SHARD};
use crate::position::ChannelId;

/// One foreign key whose child and parent tables are in different
/// schemas (shards).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ForeignKey {
    /// The child table's schema.
    pub child_schema: String,
    /// The child table.
    pub child_table: String,
    /// The constraint's name.
    pub name: String,
    /// The referenced (parent) table's schema.
    pub parent_schema: String,
    /// The referenced table.
    pub parent_table: String,
}

impl fmt::Display for ForeignKey {
    /// `b.child (fk_name) -> a.parent`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} ({}) -> {}.{}",
            self.child_schema, self.child_table, self.name, self.parent_schema, self.parent_table
        )
    }
}

/// The query reading the replica's cross-schema foreign keys: child
/// schema, child table, constraint, parent schema, parent table.
pub const FOREIGN_KEYS_QUERY: &str = "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, \
     UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME \
     FROM information_schema.REFERENTIAL_CONSTRAINTS \
     WHERE CONSTRAINT_SCHEMA <> UNIQUE_CONSTRAINT_SCHEMA \
     ORDER BY CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME";

/// Reads the foreign keys of `conn`'s server whose child and parent are in
/// different schemas ([`FOREIGN_KEYS_QUERY`]).
///
/// # Errors
/// The server's error (e.g. no privilege on information_schema).
pub async fn read_foreign_keys(
    conn: &mut mysql_async::Conn,
) -> Result<Vec<ForeignKey>, mysql_async::Error> {
    let rows: Vec<(String, String, String, String, String)> =
        conn.query(FOREIGN_KEYS_QUERY).await?;
    Ok(rows
        .into_iter()
        .map(
            |(child_schema, child_table, name, parent_schema, parent_table)| ForeignKey {
                child_schema,
                child_table,
                name,
                parent_schema,
                parent_table,
            },
        )
        .collect())
}

/// Shards joined by foreign keys, applied on one channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardGroup {
    /// The shards, in name order.
    pub shards: Vec<String>,
    /// The channel every shard of the group is applied on.
    pub channel: ChannelId,
    /// The shard whose assignment gives the channel, and how.
    pub channel_of: (String, AssignedBy),
    /// The foreign keys that join the group.
    pub keys: Vec<ForeignKey>,
    /// Shards of the group whose explicit `shard=channel` line names
    /// another channel (overridden), with that channel.
    pub conflicts: Vec<(String, ChannelId)>,
}

impl ShardGroup {
    /// Why the group's shards are serialized, for status and logs:
    /// `foreign keys b.child (fk) -> a.parent; channel 3 (of shard a,
    /// hash)`, plus the overridden `shard.list` lines.
    pub fn reason(&self) -> String {
        let keys: Vec<String> = self.keys.iter().map(ToString::to_string).collect();
        let how = match self.channel_of.1 {
            AssignedBy::Explicit => "shard.list",
            AssignedBy::Default => "shard.list (*)",
            AssignedBy::Hash => "hash",
        };
        let mut text = format!(
            "foreign key{} {}; channel {} (of shard {}, {how})",
            if keys.len() == 1 { "" } else { "s" },
            keys.join(", "),
            self.channel,
            self.channel_of.0
        );
        for (shard, channel) in &self.conflicts {
            text.push_str(&format!("; shard.list line {shard}={channel} overridden"));
        }
        text
    }
}

/// The groups of shards joined by foreign keys (module doc). Shards in no
/// group are independent and keep their own channel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForeignKeyGroups {
    groups: Vec<ShardGroup>,
    /// Shard → index in `groups`.
    index: BTreeMap<String, usize>,
}

impl ForeignKeyGroups {
    /// The groups of `keys` (union-find over their schemas; keys within
    /// one schema join nothing), their channels by `assignment`.
    pub fn build(keys: &[ForeignKey], assignment: &ChannelAssignment) -> ForeignKeyGroups {
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        fn find(parent: &mut BTreeMap<String, String>, s: &str) -> String {
            let mut root = s.to_string();
            while let Some(p) = parent.get(&root).filter(|p| **p != root) {
                root = p.clone();
            }
            // Path compression.
            let mut at = s.to_string();
            while at != root {
                let next = parent[&at].clone();
                parent.insert(at, root.clone());
                at = next;
            }
            root
        }
        let keys: BTreeSet<&ForeignKey> = keys
            .iter()
            .filter(|k| k.child_schema != k.parent_schema)
            .collect();
        for k in &keys {
            for s in [&k.child_schema, &k.parent_schema] {
                parent.entry(s.clone()).or_insert_with(|| s.clone());
            }
            let (a, b) = (
                find(&mut parent, &k.child_schema),
                find(&mut parent, &k.parent_schema),
            );
            if a != b {
                // The smaller name is the root: deterministic.
                let (root, child) = if a < b { (a, b) } else { (b, a) };
                parent.insert(child, root);
            }
        }
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let shards: Vec<String> = parent.keys().cloned().collect();
        for s in shards {
            let root = find(&mut parent, &s);
            members.entry(root).or_default().push(s);
        }
        let mut groups = Vec::new();
        let mut index = BTreeMap::new();
        for shards in members.into_values() {
            let explicit = shards
                .iter()
                .find(|s| assignment.assignment_of(s).1 == AssignedBy::Explicit);
            let first = explicit.unwrap_or(&shards[0]);
            let (channel, by) = assignment.assignment_of(first);
            let conflicts = shards
                .iter()
                .filter_map(|s| {
                    let (c, by) = assignment.assignment_of(s);
                    (by == AssignedBy::Explicit && c != channel).then(|| (s.clone(), c))
                })
                .collect();
            let group_keys = keys
                .iter()
                .filter(|k| shards.contains(&k.child_schema))
                .map(|k| (*k).clone())
                .collect();
            for s in &shards {
                index.insert(s.clone(), groups.len());
            }
            groups.push(ShardGroup {
                channel,
                channel_of: (first.clone(), by),
                shards,
                keys: group_keys,
                conflicts,
            });
        }
        ForeignKeyGroups { groups, index }
    }

    /// The group of `shard`, if a foreign key joins it to another shard.
    pub fn group_of(&self, shard: &str) -> Option<&ShardGroup> {
        self.index.get(shard).map(|&i| &self.groups[i])
    }

    /// The channel of `shard`'s group, if it is in one.
    pub fn channel_of(&self, shard: &str) -> Option<ChannelId> {
        self.group_of(shard).map(|g| g.channel)
    }

    /// Every group, in the order of their first shard.
    pub fn groups(&self) -> &[ShardGroup] {
        &self.groups
    }

    /// Whether no foreign key joins two shards.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Logs each group (info) and each overridden `shard.list` line
    /// (warning); `when` says at what point they were read.
    pub fn log(&self, when: &str) {
        if self.groups.is_empty() {
            tracing::info!(when, "no foreign key joins two shards");
        }
        for g in &self.groups {
            tracing::info!(
                when,
                shards = %g.shards.join(","),
                channel = g.channel.get(),
                reason = %g.reason(),
                "shards joined by foreign keys are serialized on one channel"
            );
            for (shard, channel) in &g.conflicts {
                tracing::warn!(
                    shard = %shard,
                    listed = channel.get(),
                    channel = g.channel.get(),
                    group = %g.shards.join(","),
                    "shard.list assigns this shard another channel than its foreign-key group's: \
                     the group's channel is used"
                );
            }
        }
    }
}

/// Reads the replica's cross-schema foreign keys ([`read_foreign_keys`]
/// on a connection of its own); the error is a message for status.
pub type ForeignKeyReader = Box<dyn FnMut() -> Result<Vec<ForeignKey>, String> + Send>;

/// What the router keeps of the foreign keys: the current groups (also
/// published for status) and how to read them again.
pub struct ForeignKeyRouting {
    groups: ForeignKeyGroups,
    shared: std::sync::Arc<std::sync::Mutex<ForeignKeyGroups>>,
    read: ForeignKeyReader,
}

impl fmt::Debug for ForeignKeyRouting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForeignKeyRouting")
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl ForeignKeyRouting {
    /// Reads the groups now with `read` (logged), for `assignment`.
    ///
    /// # Errors
    /// The reader's message.
    pub fn start(
        mut read: ForeignKeyReader,
        assignment: &ChannelAssignment,
    ) -> Result<ForeignKeyRouting, String> {
        let groups = ForeignKeyGroups::build(&read()?, assignment);
        groups.log("at start");
        Ok(ForeignKeyRouting {
            shared: std::sync::Arc::new(std::sync::Mutex::new(groups.clone())),
            groups,
            read,
        })
    }

    /// Fixed groups that are never read again (tests, benchmarks).
    pub fn fixed(groups: ForeignKeyGroups) -> ForeignKeyRouting {
        ForeignKeyRouting {
            shared: std::sync::Arc::new(std::sync::Mutex::new(groups.clone())),
            read: Box::new({
                let keys: Vec<ForeignKey> = groups
                    .groups()
                    .iter()
                    .flat_map(|g| g.keys.iter().cloned())
                    .collect();
                move || Ok(keys.clone())
            }),
            groups,
        }
    }

    /// The current groups.
    pub fn groups(&self) -> &ForeignKeyGroups {
        &self.groups
    }

    /// The groups as status sees them (updated by [`Self::refresh`]).
    pub fn shared(&self) -> std::sync::Arc<std::sync::Mutex<ForeignKeyGroups>> {
        self.shared.clone()
    }

    /// Reads the groups again; logs them when they changed.
    ///
    /// # Errors
    /// The reader's message (the groups are left as they were).
    pub fn refresh(&mut self, assignment: &ChannelAssignment) -> Result<(), String> {
        let groups = ForeignKeyGroups::build(&(self.read)()?, assignment);
        if groups != self.groups {
            groups.log("after DDL");
            *self.shared.lock().expect("foreign-key groups lock") = groups.clone();
            self.groups = groups;
        }
        Ok(())
    }
}

/// Whether `txn`, once applied, may change which shards foreign keys join,
/// so the scheduler applies it alone and reads the groups again after it
/// (module doc). True when it holds a statement that may define something
/// (anything but INSERT, UPDATE, DELETE, REPLACE and transaction control:
/// [`crate::shard::statement::Verb::defines_nothing`]) and either
/// - its text names `REFERENCES`, `FOREIGN` or `RENAME` (ASCII
///   case-insensitive, comments included): it may add a foreign key or
///   move a table with its keys to another schema; or
/// - the transaction's shard is `#UNKNOWN` or in a group: it may drop a
///   table, a schema or a constraint that joins the group (`DROP TABLE`,
///   `DROP DATABASE`, `ALTER TABLE … DROP CONSTRAINT`, `CREATE OR
///   REPLACE TABLE`).
///
/// Other DDL cannot add a cross-schema key, and what it drops joined
/// nothing: the groups stay as they are.
pub fn may_change_foreign_keys(txn: &Transaction, groups: &ForeignKeyGroups) -> bool {
    let grouped = txn.shard == UNKNOWN_SHARD || groups.group_of(&txn.shard).is_some();
    txn.changes.iter().any(|c| match c {
        Change::Statement(s) if !leading_verb(&s.sql).defines_nothing() => {
            grouped || names_any(&s.sql, &[b"REFERENCES", b"FOREIGN", b"RENAME"])
        }
        _ => false,
    })
}

/// Whether `sql` contains one of `words` (upper-case ASCII), ignoring
/// ASCII case.
fn names_any(sql: &[u8], words: &[&[u8]]) -> bool {
    words.iter().any(|w| {
        sql.windows(w.len())
            .any(|window| window.eq_ignore_ascii_case(w))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Statement;
    use crate::position::{BinlogPosition, Seqno};

    fn fk(child: &str, name: &str, parent: &str) -> ForeignKey {
        let (cs, ct) = child.split_once('.').unwrap();
        let (ps, pt) = parent.split_once('.').unwrap();
        ForeignKey {
            child_schema: cs.into(),
            child_table: ct.into(),
            name: name.into(),
            parent_schema: ps.into(),
            parent_table: pt.into(),
        }
    }

    #[test]
    fn groups_are_connected_components_on_the_first_shards_channel() {
        let assignment = ChannelAssignment::hashed(8).unwrap();
        let keys = [
            fk("b.child", "fk1", "a.parent"),
            fk("c.child", "fk2", "b.child"),
            fk("e.t", "fk3", "d.t"),
            fk("f.t", "same", "f.u"),
        ];
        let groups = ForeignKeyGroups::build(&keys, &assignment);
        assert_eq!(groups.groups().len(), 2);
        let g = groups.group_of("c").unwrap();
        assert_eq!(g.shards, ["a", "b", "c"]);
        assert_eq!(g.channel, assignment.channel_of("a"));
        assert_eq!(g.channel_of, ("a".to_string(), AssignedBy::Hash));
        assert_eq!(g.keys, [keys[0].clone(), keys[1].clone()]);
        for s in ["a", "b", "c"] {
            assert_eq!(groups.channel_of(s), Some(assignment.channel_of("a")));
        }
        assert_eq!(groups.group_of("d").unwrap().shards, ["d", "e"]);
        assert_eq!(
            groups.group_of("f"),
            None,
            "a key within one schema joins nothing"
        );
        assert_eq!(groups.channel_of("x"), None);
        assert_eq!(
            g.reason(),
            format!(
                "foreign keys b.child (fk1) -> a.parent, c.child (fk2) -> b.child; channel {} \
                 (of shard a, hash)",
                assignment.channel_of("a")
            )
        );
    }

    #[test]
    fn an_explicit_line_gives_the_group_its_channel_and_others_are_overridden() {
        let assignment = ChannelAssignment::parse("b=5\nc=2\n", 8, "t").unwrap();
        let keys = [fk("b.t", "k", "a.t"), fk("c.t", "k", "a.t")];
        let groups = ForeignKeyGroups::build(&keys, &assignment);
        let g = groups.group_of("a").unwrap();
        assert_eq!(g.channel.get(), 5);
        assert_eq!(g.channel_of, ("b".to_string(), AssignedBy::Explicit));
        assert_eq!(
            g.conflicts,
            [("c".to_string(), ChannelId::new(2, 8).unwrap())]
        );
        assert_eq!(
            g.reason(),
            "foreign keys b.t (k) -> a.t, c.t (k) -> a.t; channel 5 (of shard b, shard.list); \
             shard.list line c=2 overridden"
        );
    }

    fn txn(shard: &str, statements: &[&str]) -> Transaction {
        Transaction {
            seqno: Seqno(1),
            server_id: 1,
            gtid: None,
            commit_id: None,
            start_position: BinlogPosition::new("b.000001", 4).unwrap(),
            end_position: BinlogPosition::new("b.000001", 40).unwrap(),
            commit_timestamp: 0,
            shard: shard.to_string(),
            tables: Vec::new(),
            changes: statements
                .iter()
                .map(|sql| {
                    Change::Statement(Statement {
                        sql: sql.as_bytes().to_vec(),
                        default_schema: None,
                        context: Default::default(),
                        error_code: 0,
                        thread_id: None,
                    })
                })
                .collect(),
            row_events: None,
            fragment: None,
        }
    }

    fn ddl(shard: &str, sql: &str) -> Transaction {
        txn(shard, &[sql])
    }

    #[test]
    fn which_transactions_may_change_the_groups() {
        let assignment = ChannelAssignment::hashed(8).unwrap();
        let groups = ForeignKeyGroups::build(&[fk("b.t", "k", "a.t")], &assignment);
        let yes = [
            (
                "#UNKNOWN",
                "ALTER TABLE b.c ADD FOREIGN KEY (x) REFERENCES a.t (id)",
            ),
            (
                "x",
                "create table t (id int, foreign key (id) references p (id))",
            ),
            ("x", "RENAME TABLE x.t TO y.t"),
            ("b", "DROP DATABASE b"),
            ("a", "DROP TABLE t /* generated by server */"),
            ("b", "ALTER TABLE t ADD COLUMN z INT"),
            ("#UNKNOWN", "DROP TABLE x.t, y.t"),
        ];
        for (shard, sql) in yes {
            assert!(may_change_foreign_keys(&ddl(shard, sql), &groups), "{sql}");
        }
        let no = [
            ("x", "DROP DATABASE x"),
            ("x", "CREATE TABLE t (id INT PRIMARY KEY)"),
            ("b", "INSERT INTO b.t SELECT * FROM a.t"),
            ("b", "  delete from t where id in (select id from a.t)"),
            ("#UNKNOWN", "COMMIT"),
        ];
        for (shard, sql) in no {
            assert!(!may_change_foreign_keys(&ddl(shard, sql), &groups), "{sql}");
        }
        assert!(!may_change_foreign_keys(&txn("b", &[]), &groups));
    }
}
