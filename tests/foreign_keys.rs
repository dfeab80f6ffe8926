//! Foreign keys across shards (issue 14, §2): shards joined by a foreign
//! key are applied on one channel, in the master's order, through a real
//! takeover of a lagging replica with 8 channels.
//!
//! The schemas' names are chosen so that each parent and child schema hash
//! to different channels: without the foreign-key groups, their backlogs
//! would be applied in parallel and race (a child inserted before its
//! parent: error 1452; a parent deleted before its children, or its schema
//! dropped first: error 1451; a cascaded delete before a child's update:
//! error 1032).

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::Value;
use shardrep::shard::hash_channel;

use common::service::{
    ctl_ok, drop_everywhere, native_from_now, wait_applied_to_master, wait_for_socket, ServiceSpec,
    TARGET,
};
use common::{
    assert_table_equal, quote_ident, sandbox, unique_schema, wait_replica_caught_up, Sandbox,
    Server,
};

const CHANNELS: u16 = 8;

/// The tests of this file take over the same replica: one at a time.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A fresh (parent, child) pair of schema names that hash to different
/// channels of [`CHANNELS`].
fn pair(label: &str) -> (String, String) {
    let parent = unique_schema(&format!("{label}_p"));
    loop {
        let child = unique_schema(&format!("{label}_c"));
        if hash_channel(&parent, CHANNELS) != hash_channel(&child, CHANNELS) {
            return (parent, child);
        }
    }
}

async fn on_master(master: &mut mysql_async::Conn, sql: &str) {
    master
        .query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
}

async fn schema_exists(sb: &Sandbox, server: Server, schema: &str) -> bool {
    let n: Option<i64> = sb
        .connect(server)
        .await
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (schema,),
        )
        .await
        .unwrap();
    n == Some(1)
}

async fn count(sb: &Sandbox, server: Server, schema: &str, table: &str) -> i64 {
    sb.connect(server)
        .await
        .query_first(format!(
            "SELECT COUNT(*) FROM {}.{}",
            quote_ident(schema),
            quote_ident(table)
        ))
        .await
        .unwrap()
        .unwrap()
}

/// The `status --name shards --json` entry of `shard`.
fn shard_entry<'a>(shards: &'a Value, shard: &str) -> &'a Value {
    shards
        .as_array()
        .expect("a list")
        .iter()
        .find(|s| s["shardId"] == shard)
        .unwrap_or_else(|| panic!("no shard {shard} in {shards}"))
}

/// Every table of `schemas` equal to the master's, row by row, with the
/// rows the backlog leaves; E and F dropped.
async fn assert_replica_equal(sb: &Sandbox, schemas: &Schemas) {
    let Schemas { a, b, c, d, e, f } = schemas;
    for (schema, table, rows) in [
        // Parents 0 and 147..150, with their children.
        (&a, "parent", 5),
        (&b, "child_cascade", 8),
        (&b, "child_restrict", 4),
        // Parents 72..146 deleted after the key was added, with their
        // children.
        (&c, "parent", 76),
        (&d, "child", 75),
    ] {
        assert_eq!(
            count(sb, Server::Master, schema, table).await,
            rows,
            "{schema}.{table}"
        );
        assert_table_equal(sb, Server::Master, TARGET, schema, table).await;
    }
    for schema in [&e, &f] {
        assert!(
            !schema_exists(sb, TARGET, schema).await,
            "{schema} on the replica"
        );
    }
}

/// The schemas of a run: (A, B), (C, D), (E, F) as (parent, child).
struct Schemas {
    a: String,
    b: String,
    c: String,
    d: String,
    e: String,
    f: String,
}

impl Schemas {
    fn all(&self) -> Vec<String> {
        [&self.a, &self.b, &self.c, &self.d, &self.e, &self.f]
            .map(|s| s.to_string())
            .to_vec()
    }

    /// Children first: a parent schema cannot be dropped before them.
    fn drop_order(&self) -> Vec<String> {
        [&self.b, &self.a, &self.d, &self.c, &self.f, &self.e]
            .map(|s| s.to_string())
            .to_vec()
    }
}

const ROUNDS: i32 = 150;

/// Creates the schemas and their tables (native replication brings them to
/// the replica), stops the replica's SQL thread, and writes the backlog on
/// the master (see the first test).
async fn write_backlog(sb: &Sandbox) -> Schemas {
    native_from_now(sb).await;
    let (a, b) = pair("fk_ab");
    let (c, d) = pair("fk_cd");
    let (e, f) = pair("fk_ef");
    let all = [&a, &b, &c, &d, &e, &f].map(|s| s.to_string());
    let [qa, qb, qc, qd, qe, qf] = all.clone().map(|s| quote_ident(&s));
    let mut master = sb.connect(Server::Master).await;
    for s in [&qa, &qb, &qc, &qd, &qe, &qf] {
        on_master(&mut master, &format!("CREATE DATABASE {s}")).await;
    }
    on_master(
        &mut master,
        &format!(
            "CREATE TABLE {qa}.parent (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;
             CREATE TABLE {qb}.child_cascade (id INT PRIMARY KEY, parent_id INT NOT NULL, \
               v INT NOT NULL, CONSTRAINT fk_b_cascade FOREIGN KEY (parent_id) \
               REFERENCES {qa}.parent (id) ON DELETE CASCADE) ENGINE=InnoDB;
             CREATE TABLE {qb}.child_restrict (id INT PRIMARY KEY, parent_id INT NOT NULL, \
               v INT NOT NULL, CONSTRAINT fk_b_restrict FOREIGN KEY (parent_id) \
               REFERENCES {qa}.parent (id)) ENGINE=InnoDB;
             CREATE TABLE {qc}.parent (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;
             CREATE TABLE {qd}.child (id INT PRIMARY KEY, parent_id INT NOT NULL, \
               v INT NOT NULL, KEY (parent_id)) ENGINE=InnoDB;
             CREATE TABLE {qe}.parent (id INT PRIMARY KEY) ENGINE=InnoDB;
             CREATE TABLE {qf}.child (id INT PRIMARY KEY, parent_id INT NOT NULL, \
               CONSTRAINT fk_f_e FOREIGN KEY (parent_id) REFERENCES {qe}.parent (id)) \
               ENGINE=InnoDB;
             INSERT INTO {qa}.parent VALUES (0, 0);
             INSERT INTO {qc}.parent VALUES (0, 0)"
        ),
    )
    .await;
    // The replica has the schemas and keys; then it lags.
    wait_replica_caught_up(sb, TARGET, Duration::from_secs(120)).await;
    sb.connect(TARGET)
        .await
        .query_drop("STOP SLAVE SQL_THREAD")
        .await
        .unwrap();

    // The backlog: each statement its own transaction, parents and
    // children interleaved.
    for i in 1..=ROUNDS {
        let old = i - 4;
        let mut sql = vec![
            format!("INSERT INTO {qa}.parent VALUES ({i}, {i})"),
            format!(
                "INSERT INTO {qb}.child_cascade VALUES ({i}, {i}, 0), ({}, {i}, 0)",
                i + 10_000
            ),
            format!("INSERT INTO {qb}.child_restrict VALUES ({i}, {i}, 0)"),
            format!("UPDATE {qa}.parent SET v = v + 1 WHERE id IN (0, {i})"),
            format!("UPDATE {qb}.child_cascade SET v = v + 1 WHERE parent_id = {i}"),
            format!("INSERT INTO {qc}.parent VALUES ({i}, {i})"),
            format!("INSERT INTO {qd}.child VALUES ({i}, {i}, 0)"),
            format!("INSERT INTO {qe}.parent VALUES ({i})"),
            format!("INSERT INTO {qf}.child VALUES ({i}, {i})"),
        ];
        if old >= 1 {
            // Children first (RESTRICT), then the parent: its cascade
            // deletes the other children, updated just before.
            sql.push(format!(
                "UPDATE {qb}.child_cascade SET v = v + 10 WHERE parent_id = {old}"
            ));
            sql.push(format!(
                "DELETE FROM {qb}.child_restrict WHERE parent_id = {old}"
            ));
            sql.push(format!("DELETE FROM {qa}.parent WHERE id = {old}"));
            if i > ROUNDS / 2 {
                // After the key was added: the cascade reaches D.
                sql.push(format!(
                    "UPDATE {qd}.child SET v = v + 1 WHERE parent_id = {old}"
                ));
                sql.push(format!("DELETE FROM {qc}.parent WHERE id = {old}"));
            }
        }
        for s in &sql {
            on_master(&mut master, s).await;
        }
        if i == ROUNDS / 2 {
            on_master(
                &mut master,
                &format!(
                    "ALTER TABLE {qd}.child ADD CONSTRAINT fk_d_c FOREIGN KEY (parent_id) \
                     REFERENCES {qc}.parent (id) ON DELETE CASCADE"
                ),
            )
            .await;
        }
    }
    on_master(&mut master, &format!("DROP DATABASE {qf}")).await;
    on_master(&mut master, &format!("DROP DATABASE {qe}")).await;
    drop(master);

    Schemas { a, b, c, d, e, f }
}

// A: parent schema, B: child schema (ON DELETE CASCADE and RESTRICT keys
// to A), joined from the start. C, D: joined by a key that ALTER TABLE
// adds in the middle of the stream. E, F: joined, then dropped (child
// schema first, then parent). The master writes a backlog while native
// replication on the replica is stopped; shardrep takes the replica over
// and applies it with 8 channels; every table ends equal to the master's,
// without an error, and status names the serialized shards and their keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_joined_by_foreign_keys_apply_in_the_masters_order() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let schemas = write_backlog(sb).await;
    let Schemas { a, b, c, d, e, f } = &schemas;
    let (qd, all) = (quote_ident(d), schemas.all());
    let mut spec = ServiceSpec::new("fk", &all, "takeover");
    spec.channels = CHANNELS;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["state"], "ONLINE", "{s}");
    assert_eq!(s["pendingError"], Value::Null, "{s}");

    // Status: which shards were serialized together, and why.
    let shards: Value =
        serde_json::from_str(&ctl_ok(&spec, &["status", "--name", "shards", "--json"])).unwrap();
    let first = |x: &str, y: &str| if x < y { x.to_string() } else { y.to_string() };
    for (parent, child, keys) in [
        (
            &a,
            &b,
            vec![
                format!("{b}.child_cascade (fk_b_cascade) -> {a}.parent"),
                format!("{b}.child_restrict (fk_b_restrict) -> {a}.parent"),
            ],
        ),
        (&c, &d, vec![format!("{d}.child (fk_d_c) -> {c}.parent")]),
    ] {
        let group = first(parent, child);
        let channel = hash_channel(&group, CHANNELS);
        let mut members = vec![parent.to_string(), child.to_string()];
        members.sort();
        let reason = format!(
            "foreign key{} {}; channel {channel} (of shard {group}, hash)",
            if keys.len() == 1 { "" } else { "s" },
            keys.join(", ")
        );
        for shard in [parent, child] {
            let entry = shard_entry(&shards, shard);
            assert_eq!(entry["channel"], channel, "{entry}");
            assert_eq!(
                entry["foreignKeyGroup"],
                serde_json::json!(members),
                "{entry}"
            );
            assert_eq!(entry["serializedReason"], reason.as_str(), "{entry}");
            assert!(entry["eventCount"].as_u64().unwrap() > 0, "{entry}");
        }
        // Without the group they would have been applied in parallel.
        assert_ne!(
            hash_channel(parent, CHANNELS),
            hash_channel(child, CHANNELS)
        );
    }
    // E and F were dropped: no key joins them any more.
    for shard in [&e, &f] {
        let entry = shard_entry(&shards, shard);
        assert_eq!(entry.get("foreignKeyGroup"), None, "{entry}");
        assert_eq!(entry.get("serializedReason"), None, "{entry}");
        assert_eq!(entry["channel"], hash_channel(shard, CHANNELS), "{entry}");
    }
    // A key dropped by the last transaction: once it is applied (the
    // source then idle), C and D are independent again.
    let mut master = sb.connect(Server::Master).await;
    on_master(
        &mut master,
        &format!("ALTER TABLE {qd}.child DROP FOREIGN KEY fk_d_c"),
    )
    .await;
    drop(master);
    wait_applied_to_master(sb, &spec).await;
    let shards: Value =
        serde_json::from_str(&ctl_ok(&spec, &["status", "--name", "shards", "--json"])).unwrap();
    for shard in [&c, &d] {
        let entry = shard_entry(&shards, shard);
        assert_eq!(entry.get("foreignKeyGroup"), None, "{entry}");
        assert_eq!(entry["channel"], hash_channel(shard, CHANNELS), "{entry}");
    }
    assert_eq!(
        shard_entry(&shards, a)["foreignKeyGroup"],
        serde_json::json!(if a < b { [&a, &b] } else { [&b, &a] })
    );
    // The backlog went over several channels.
    let channels: Value =
        serde_json::from_str(&ctl_ok(&spec, &["status", "--name", "channels", "--json"])).unwrap();
    let busy = channels
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["appliedCount"].as_u64().unwrap() > 0)
        .count();
    assert!(busy >= 3, "{channels}");
    let log = process.log_text();
    assert!(process.terminate(), "clean stop:\n{log}");

    assert_replica_equal(sb, &schemas).await;
    assert!(
        log.contains("shards joined by foreign keys are serialized on one channel"),
        "{log}"
    );
    assert!(!log.contains("ERROR"), "{log}");

    drop_everywhere(sb, &schemas.drop_order()).await;
    spec.remove(sb).await;
}

// The same backlog, with the service killed (SIGKILL) while it applies it,
// around the ALTER TABLE that joins C and D, then started again: the
// restart reads the replica's foreign keys as they are then, and resumes
// with nothing lost or applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_the_groups_change_resumes_without_error() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let schemas = write_backlog(sb).await;
    let mut spec = ServiceSpec::new("fkkill", &schemas.all(), "takeover");
    spec.channels = CHANNELS;
    spec.block = 10;
    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    // Seqnos count from the takeover point: 9 transactions in each of
    // the first 4 rounds, 12 in the later ones, so the ALTER TABLE is
    // seqno 4 * 9 + 12 * (ROUNDS / 2 - 4) (888). The kill comes a little
    // after the service has applied 90 seqnos less (status polling lags).
    let alter = u64::try_from(4 * 9 + 12 * (ROUNDS / 2 - 4)).unwrap();
    let near = alter - 90;
    common::wait_until(
        "applied near the ALTER TABLE",
        Duration::from_secs(120),
        || {
            let s = common::service::status(&spec);
            assert_ne!(s["state"], "OFFLINE:ERROR", "{s}");
            async move { (s["appliedLastSeqno"].as_u64().unwrap_or(0) >= near).then_some(()) }
        },
    )
    .await
    .unwrap();
    process.kill();
    let restart = spec.restart_seqnos(sb).await;
    eprintln!("restart rows after the kill: {restart:?}");
    // Before the ALTER TABLE ran, every restart row was brought to the
    // seqno before it: a restart never replays a transaction routed
    // without the key it adds.
    let alter = i64::try_from(alter).unwrap();
    if restart.iter().any(|&s| s >= alter) {
        assert!(restart.iter().all(|&s| s >= alter - 1), "{restart:?}");
    }

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let s = wait_applied_to_master(sb, &spec).await;
    assert_eq!(s["pendingError"], Value::Null, "{s}");
    let log = process.log_text();
    assert!(process.terminate(), "clean stop:\n{log}");
    assert_replica_equal(sb, &schemas).await;
    assert!(!log.contains("ERROR"), "{log}");
    drop_everywhere(sb, &schemas.drop_order()).await;
    spec.remove(sb).await;
}
