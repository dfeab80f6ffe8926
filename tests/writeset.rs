//! Writesets against the sandbox (issue 16, part 1): [`Writesets::load`]
//! reads the exact key metadata of a schema from `information_schema`
//! (primary and unique keys, a keyless table, foreign keys with a cascade
//! and across schemas, a trigger, a prefix key, case-insensitive and binary
//! collations); [`Writesets::reload_schema`] sees a schema's DDL;
//! transactions the extractor reads back from the master's binlog conflict
//! exactly where the server's keys say so; and the collation fold agrees
//! with the server: every pair of strings a whitelisted collation holds
//! equal gets one row key.
//!
//! The metadata is read from the master (the same `information_schema`
//! as a replica's; the tables replicate to the sandbox's replicas as any
//! test's do). The collation check uses a temporary table (not binlogged
//! in ROW format).

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use shardrep::config::{FilesSourceConfig, SourceEndpoint};
use shardrep::event::{
    Change, ColumnInfo, RowImage, RowKind, RowPair, RowsChange, TableInfo, Transaction, Value,
};
use shardrep::extractor::reader::{ExtractStart, Extractor};
use shardrep::position::{BinlogPosition, Seqno};
use shardrep::shard::writeset::{
    shard_key_id, string_rule, table_key_id, ColumnDef, Fallback, Key, KeyPart, StringRule,
    TableKeys, UniqueKey, Writeset, Writesets, CI_COLLATIONS, SYSTEM_SCHEMAS,
};

use common::{
    quote_ident, sandbox, unique_schema, wait_binlog_checkpoint_settled, Sandbox, Server,
};

async fn run(conn: &mut mysql_async::Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("on the master: {e}\n{sql}"));
}

/// The schema of [`load_reads_the_exact_key_metadata`] and the others: the
/// SQL creating it, with `A` and `B` standing for the schema names.
const SCHEMA_SQL: &str = "
CREATE DATABASE A;
CREATE DATABASE B;
CREATE TABLE A.users (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  email VARCHAR(50) COLLATE utf8mb4_general_ci NULL,
  code CHAR(4) COLLATE utf8mb4_bin NOT NULL,
  note VARCHAR(20) COLLATE utf8mb4_unicode_ci,
  UNIQUE KEY uk_email (email), UNIQUE KEY uk_code (code), KEY k_note (note));
CREATE TABLE A.keyless (a INT, b VARCHAR(10) COLLATE utf8mb4_general_ci);
CREATE TABLE A.parent (id INT PRIMARY KEY);
CREATE TABLE A.child (id INT PRIMARY KEY, pid INT,
  CONSTRAINT fk_child FOREIGN KEY (pid) REFERENCES A.parent (id) ON DELETE CASCADE);
CREATE TABLE A.audited (id INT PRIMARY KEY, v INT);
CREATE TRIGGER A.audit_ins AFTER INSERT ON A.audited FOR EACH ROW
  INSERT INTO A.keyless VALUES (NEW.id, 'audit');
CREATE TABLE A.prefixed (id INT PRIMARY KEY, t VARCHAR(100) COLLATE utf8mb4_bin,
  UNIQUE KEY ut (t(10)));
CREATE TABLE A.danish (id VARCHAR(10) COLLATE utf8mb4_danish_ci PRIMARY KEY);
CREATE TABLE A.numbers (u TINYINT UNSIGNED NOT NULL, d DECIMAL(6,2) NOT NULL,
  b BINARY(4) NOT NULL, PRIMARY KEY (u), UNIQUE KEY ud (d), UNIQUE KEY ub (b));
CREATE VIEW A.parents AS SELECT id FROM A.parent;
CREATE TABLE B.remote_child (id INT PRIMARY KEY, pid INT,
  CONSTRAINT fk_remote FOREIGN KEY (pid) REFERENCES A.parent (id));
";

/// Two fresh schemas (A, B) with [`SCHEMA_SQL`] run on the master.
async fn make_schemas(sb: &Sandbox, label: &str) -> (String, String) {
    let a = unique_schema(&format!("{label}_a"));
    let b = unique_schema(&format!("{label}_b"));
    let sql = SCHEMA_SQL
        .replace("A.", &format!("{}.", quote_ident(&a)))
        .replace("B.", &format!("{}.", quote_ident(&b)))
        .replace("DATABASE A", &format!("DATABASE {}", quote_ident(&a)))
        .replace("DATABASE B", &format!("DATABASE {}", quote_ident(&b)));
    let mut master = sb.connect(Server::Master).await;
    run(&mut master, &sql).await;
    (a, b)
}

async fn drop_schemas(sb: &Sandbox, schemas: &[&str]) {
    let mut master = sb.connect(Server::Master).await;
    // The child schema first: its key references the other.
    for s in schemas.iter().rev() {
        run(
            &mut master,
            &format!("DROP DATABASE IF EXISTS {}", quote_ident(s)),
        )
        .await;
    }
}

fn fallbacks(w: &Writesets, schema: &str, table: &str) -> Vec<Fallback> {
    w.table_fallbacks(schema, table)
        .unwrap_or_else(|| panic!("{schema}.{table} not loaded"))
        .to_vec()
}

#[tokio::test]
async fn load_reads_the_exact_key_metadata() {
    let sb = sandbox();
    let (a, b) = make_schemas(sb, "ws_load").await;
    let mut master = sb.connect(Server::Master).await;
    let w = Writesets::load(&mut master, Some(std::slice::from_ref(&a)))
        .await
        .expect("load");

    let names: Vec<&str> = w.tables().iter().map(|t| t.table.as_str()).collect();
    assert_eq!(
        names,
        ["audited", "child", "danish", "keyless", "numbers", "parent", "prefixed", "users"],
        "base tables of {a} only, no view"
    );
    let users = w.table(&a, "users").unwrap();
    assert_eq!(
        *users,
        TableKeys {
            schema: a.clone(),
            table: "users".into(),
            columns: vec![
                ColumnDef::new("id", "int").unsigned(),
                ColumnDef::new("email", "varchar")
                    .collation("utf8mb4_general_ci")
                    .nullable(),
                ColumnDef::new("code", "char").collation("utf8mb4_bin"),
                ColumnDef::new("note", "varchar")
                    .collation("utf8mb4_unicode_ci")
                    .nullable(),
            ],
            unique_keys: vec![
                UniqueKey::new("PRIMARY", &[0]),
                UniqueKey::new("uk_code", &[2]),
                UniqueKey::new("uk_email", &[1]),
            ],
            triggers: false,
            references: vec![],
        }
    );
    assert_eq!(
        w.table(&a, "prefixed").unwrap().unique_keys[1].parts,
        [KeyPart {
            column: 1,
            prefix: Some(10)
        }]
    );
    assert_eq!(
        w.table(&a, "child").unwrap().references,
        [(a.clone(), "parent".to_string())]
    );
    assert!(w.table(&a, "audited").unwrap().triggers);
    assert!(!w.table(&a, "keyless").unwrap().triggers);

    assert_eq!(fallbacks(&w, &a, "users"), []);
    assert_eq!(fallbacks(&w, &a, "numbers"), []);
    assert_eq!(fallbacks(&w, &a, "keyless"), [Fallback::NoUniqueKey]);
    assert_eq!(fallbacks(&w, &a, "parent"), [Fallback::ForeignKey]);
    assert_eq!(fallbacks(&w, &a, "child"), [Fallback::ForeignKey]);
    assert_eq!(fallbacks(&w, &a, "audited"), [Fallback::Triggers]);
    assert_eq!(fallbacks(&w, &a, "prefixed"), [Fallback::PrefixKey]);
    assert_eq!(fallbacks(&w, &a, "danish"), [Fallback::Collation]);
    // B is not loaded, but its foreign key joins A.parent's group.
    let group = w.foreign_key_group(&a, "parent").expect("a group");
    assert_eq!(w.foreign_key_group(&a, "child"), Some(group));
    assert_eq!(w.foreign_key_group(&b, "remote_child"), Some(group));
    assert_eq!(
        fallbacks(&w, &b, "remote_child"),
        [Fallback::ForeignKey, Fallback::UnknownTable]
    );
    assert_eq!(w.table(&b, "remote_child"), None);

    // Every non-system schema: B's table with its reference.
    let all = Writesets::load(&mut master, None).await.expect("load all");
    assert!(all
        .tables()
        .iter()
        .all(|t| !SYSTEM_SCHEMAS.contains(&t.schema.as_str())));
    assert_eq!(
        all.table(&b, "remote_child").unwrap().references,
        [(a.clone(), "parent".to_string())]
    );
    assert_eq!(fallbacks(&all, &b, "remote_child"), [Fallback::ForeignKey]);
    assert_eq!(all.foreign_key_group(&b, "remote_child"), Some(group));
    assert_eq!(all.table(&a, "users"), w.table(&a, "users"));
    drop_schemas(sb, &[&a, &b]).await;
}

#[tokio::test]
async fn reload_schema_sees_the_ddl_of_that_schema() {
    let sb = sandbox();
    let (a, b) = make_schemas(sb, "ws_reload").await;
    let mut master = sb.connect(Server::Master).await;
    let mut w = Writesets::load(&mut master, Some(&[a.clone(), b.clone()]))
        .await
        .expect("load");
    assert_eq!(fallbacks(&w, &b, "remote_child"), [Fallback::ForeignKey]);
    let qa = quote_ident(&a);
    run(
        &mut master,
        &format!(
            "DROP TRIGGER {qa}.audit_ins; ALTER TABLE {qa}.child DROP FOREIGN KEY fk_child; \
             ALTER TABLE {qa}.keyless ADD PRIMARY KEY (a); \
             CREATE TABLE {qa}.fresh (id INT PRIMARY KEY, f DOUBLE, UNIQUE KEY uf (f)); \
             DROP TABLE {qa}.danish"
        ),
    )
    .await;
    w.reload_schema(&mut master, &a).await.expect("reload");
    assert_eq!(fallbacks(&w, &a, "audited"), []);
    assert_eq!(fallbacks(&w, &a, "child"), [], "its key dropped");
    assert_eq!(w.foreign_key_group(&a, "child"), None);
    assert_eq!(fallbacks(&w, &a, "keyless"), []);
    assert_eq!(fallbacks(&w, &a, "fresh"), [Fallback::FloatKey]);
    assert_eq!(w.table_fallbacks(&a, "danish"), None);
    // B's key still joins A.parent.
    assert_eq!(fallbacks(&w, &a, "parent"), [Fallback::ForeignKey]);
    assert_eq!(
        w.foreign_key_group(&a, "parent"),
        w.foreign_key_group(&b, "remote_child")
    );
    // A dropped schema is forgotten.
    drop_schemas(sb, &[&b]).await;
    w.reload_schema(&mut master, &b).await.expect("reload");
    assert_eq!(w.table_fallbacks(&b, "remote_child"), None);
    assert_eq!(fallbacks(&w, &a, "parent"), [], "no key references it now");
    drop_schemas(sb, &[&a]).await;
}

/// The master's binlog position once its checkpoint has settled.
async fn master_position(master: &mut mysql_async::Conn) -> BinlogPosition {
    wait_binlog_checkpoint_settled(master).await;
    let row: mysql_async::Row = master
        .query_first("SHOW MASTER STATUS")
        .await
        .expect("SHOW MASTER STATUS")
        .expect("binlog on");
    BinlogPosition::new(
        row.get::<String, _>(0).unwrap(),
        row.get::<u64, _>(1).unwrap(),
    )
    .unwrap()
}

/// The transactions of `schema` between `start` and `end` in the master's
/// binlog files, as the extractor reads them.
async fn extract(
    sb: &Sandbox,
    start: BinlogPosition,
    end: &BinlogPosition,
    schema: &str,
) -> Vec<Transaction> {
    let endpoint = SourceEndpoint::Files(FilesSourceConfig {
        binlog_dir: sb.dir.join("master").join("binlog"),
        binlog_index: None,
    });
    let mut extractor =
        Extractor::open(&endpoint, ExtractStart::File(start), Seqno(0), true).expect("open");
    let mut out = Vec::new();
    let read = async {
        loop {
            let txn = extractor
                .next_transaction()
                .await
                .expect("extract")
                .expect("a following source does not end");
            let done = txn.end_position >= *end;
            if txn.shard == schema {
                out.push(txn);
            }
            if done {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("extracted up to the end in time");
    out
}

#[tokio::test]
async fn binlog_transactions_conflict_where_the_servers_keys_do() {
    let sb = sandbox();
    let (a, b) = make_schemas(sb, "ws_binlog").await;
    let mut master = sb.connect(Server::Master).await;
    let w = Writesets::load(&mut master, Some(std::slice::from_ref(&a)))
        .await
        .expect("load");
    let start = master_position(&mut master).await;
    // One statement per transaction (autocommit), in this order.
    let statements = [
        // 0: u=200 is logged as -56 without metadata (NO_LOG).
        "INSERT INTO A.numbers VALUES (200, -0.50, 'ab')",
        // 1: the same three keys, other values written the way the server
        //    stores them equal.
        "UPDATE A.numbers SET d = 1.25 WHERE u = 200",
        // 2: another row: independent of 0.
        "INSERT INTO A.numbers VALUES (7, 3.00, 'cd')",
        // 3: takes d = -0.50 (freed by 1): conflicts with 0 and 1 on ud.
        "INSERT INTO A.numbers VALUES (8, -0.5, 'ef')",
        // 4: a case-insensitive email.
        "INSERT INTO A.users VALUES (1, 'Bob@X', 'c1', 'n')",
        // 5: the row goes away.
        "DELETE FROM A.users WHERE id = 1",
        // 6: another row with the same email in another case and a
        //    trailing space: conflicts with 4 and 5.
        "INSERT INTO A.users VALUES (2, 'bob@x ', 'c2', 'n')",
        // 7: independent of 4..6.
        "INSERT INTO A.users VALUES (3, 'alice@x', 'c3', 'n')",
        // 8: 'c2  ' is 'c2' under utf8mb4_bin (PAD SPACE): after 6
        //    frees it, conflicts with 6.
        "UPDATE A.users SET code = 'c9' WHERE id = 2",
        "INSERT INTO A.users VALUES (4, NULL, 'c2  ', 'n')",
        // 10: the parent's delete cascades to the child's row (child 11
        //     holds another key but shares the group).
        "INSERT INTO A.parent VALUES (1)",
        "INSERT INTO A.child VALUES (1, 1)",
        "DELETE FROM A.parent WHERE id = 1",
        // 13: the trigger writes A.keyless: conflicts with everything.
        "INSERT INTO A.audited VALUES (1, 1)",
        // 14: a statement of the shard.
        "ALTER TABLE A.keyless ADD COLUMN c INT",
    ];
    for sql in statements {
        run(
            &mut master,
            &sql.replace("A.", &format!("{}.", quote_ident(&a))),
        )
        .await;
    }
    let end = master_position(&mut master).await;
    let txns = extract(sb, start, &end, &a).await;
    assert_eq!(txns.len(), statements.len(), "{txns:#?}");
    let sets: Vec<Writeset> = txns
        .iter()
        .map(|t| {
            let mut out = Writeset::default();
            w.writeset(t, &mut out);
            out
        })
        .collect();
    let conflicts = |i: usize, j: usize| sets[i].conflicts(&sets[j]);
    assert!(conflicts(0, 1));
    assert!(!conflicts(0, 2));
    assert!(conflicts(0, 3) && conflicts(1, 3) && !conflicts(2, 3));
    assert!(conflicts(4, 5) && conflicts(4, 6) && conflicts(5, 6));
    assert!(!conflicts(4, 7) && !conflicts(6, 7));
    assert!(conflicts(8, 9) && conflicts(6, 9) && !conflicts(7, 9));
    assert!(conflicts(10, 11) && conflicts(11, 12) && conflicts(10, 12));
    assert!(!conflicts(10, 0) && !conflicts(12, 7));
    for i in 0..statements.len() {
        assert!(conflicts(13, i), "the trigger's table with {i}");
    }
    for i in 0..13 {
        assert!(conflicts(14, i), "the shard's statement with {i}");
    }
    // FULL images: no PartialImage; row keys decide, except in the
    // foreign-key group.
    for (i, set) in sets.iter().enumerate().take(10) {
        assert_eq!(set.fallbacks, [], "{i}");
    }
    for (i, set) in sets.iter().enumerate().take(13).skip(10) {
        assert_eq!(set.fallbacks, [Fallback::ForeignKey], "{i}");
    }
    // The trigger's own insert into A.keyless is in the binlog too.
    assert_eq!(
        sets[13].fallbacks,
        [Fallback::NoUniqueKey, Fallback::Triggers]
    );
    assert_eq!(
        sets[14].fallbacks,
        [
            Fallback::Statement,
            Fallback::Triggers,
            Fallback::ForeignKey
        ]
    );
    // Exactly the keys of transaction 0: three row keys, its table and
    // shard.
    let rows = sets[0]
        .keys
        .iter()
        .filter(|k| matches!(k, Key::Row(_)))
        .count();
    assert_eq!(rows, 3);
    assert!(sets[0].keys.contains(&Key::Table {
        id: table_key_id(&a, "numbers"),
        exclusive: false
    }));
    assert!(sets[0].keys.contains(&Key::Shard {
        id: shard_key_id(&a),
        exclusive: false
    }));
    assert_eq!(sets[0].keys.len(), 5);
    drop_schemas(sb, &[&a, &b]).await;
}

/// Strings to compare: every printable ASCII character, control
/// characters alone and after a letter, every pair over
/// an alphabet of letters in both cases, digits, space, punctuation and a
/// tab, and a fixed pseudo-random sample of printable triples.
fn sample_strings() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new()];
    out.extend((0x20u8..=0x7e).map(|c| vec![c]));
    // Control characters (ignorable in some collations) alone and after
    // a letter.
    out.extend((0x00u8..0x20).flat_map(|c| [vec![c], vec![b'a', c], vec![b'A', c]]));
    let alphabet = b"aAbBzZ09 -_.,'\t";
    for &x in alphabet {
        for &y in alphabet {
            out.push(vec![x, y]);
        }
    }
    for &x in b"aA b" {
        for &y in b"aA b" {
            for &z in b"aA b" {
                out.push(vec![x, y, z]);
            }
        }
    }
    let mut r: u64 = 0x5eed_1234;
    let mut next = || {
        r ^= r >> 12;
        r ^= r << 25;
        r ^= r >> 27;
        0x20 + (r.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u8 % 95
    };
    for _ in 0..600 {
        let len = 2 + usize::from(next() % 2);
        out.push((0..len).map(|_| next()).collect());
    }
    out.sort();
    out.dedup();
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The row key of `value` in a one-column table keyed by a VARCHAR of
/// `collation`.
fn key_of(w: &Writesets, value: &[u8]) -> Option<u64> {
    let txn = Transaction {
        seqno: Seqno(0),
        server_id: 1,
        gtid: None,
        commit_id: None,
        start_position: BinlogPosition::new("b.000001", 4).unwrap(),
        end_position: BinlogPosition::new("b.000001", 8).unwrap(),
        commit_timestamp: 0,
        shard: "s".into(),
        tables: vec![TableInfo {
            table_id: 1,
            schema: "s".into(),
            table: "t".into(),
            columns: Vec::<ColumnInfo>::new(),
            primary_key: None,
        }],
        changes: vec![Change::Rows(RowsChange {
            table: 0,
            kind: RowKind::Insert,
            flags: 1,
            rows: vec![RowPair {
                before: None,
                after: Some(RowImage {
                    columns: vec![0],
                    values: vec![Value::Bytes(value.to_vec())],
                }),
            }],
        })],
        row_events: None,
        fragment: None,
    };
    let mut out = Writeset::default();
    w.writeset(&txn, &mut out);
    let rows: Vec<u64> = out
        .keys
        .iter()
        .filter_map(|k| match k {
            Key::Row(h) => Some(*h),
            _ => None,
        })
        .collect();
    assert!(rows.len() <= 1);
    rows.first().copied()
}

#[tokio::test]
async fn the_collation_fold_agrees_with_the_server() {
    let sb = sandbox();
    let mut master = sb.connect(Server::Master).await;
    let strings = sample_strings();
    let schema = unique_schema("ws_fold");
    run(
        &mut master,
        &format!(
            "CREATE DATABASE {0}; USE {0}; \
             CREATE TEMPORARY TABLE ws_fold (b VARBINARY(8) NOT NULL); \
             SET SESSION group_concat_max_len = 1048576",
            quote_ident(&schema)
        ),
    )
    .await;
    let values: Vec<String> = strings.iter().map(|s| format!("(X'{}')", hex(s))).collect();
    run(
        &mut master,
        &format!("INSERT INTO ws_fold VALUES {}", values.join(",")),
    )
    .await;
    let bin = [
        "utf8mb4_bin",
        "utf8mb4_nopad_bin",
        "utf8mb3_bin",
        "latin1_bin",
        "ascii_bin",
    ];
    for &collation in CI_COLLATIONS.iter().chain(&bin) {
        assert!(collation
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_'));
        let charset = collation.split('_').next().unwrap();
        let classes: Vec<String> = master
            .query(format!(
                "SELECT GROUP_CONCAT(HEX(b) SEPARATOR ',') FROM ws_fold \
                 GROUP BY CONVERT(b USING {charset}) COLLATE {collation}"
            ))
            .await
            .unwrap_or_else(|e| panic!("{collation}: {e}"));
        let w = Writesets::from_tables(vec![TableKeys::new(
            "s",
            "t",
            vec![ColumnDef::new("k", "varchar").collation(collation)],
        )
        .with_key(UniqueKey::new("PRIMARY", &[0]))]);
        let rule = string_rule("varchar", Some(collation)).unwrap();
        let mut merged = 0;
        let mut seen = 0;
        for class in &classes {
            let members: Vec<Vec<u8>> = class.split(',').map(unhex).collect();
            seen += members.len();
            let keys: Vec<Option<u64>> = members.iter().map(|m| key_of(&w, m)).collect();
            assert!(keys[0].is_some(), "{collation}: {:?} has a key", members[0]);
            for (m, k) in members.iter().zip(&keys) {
                assert_eq!(
                    *k,
                    keys[0],
                    "{collation}: the server holds {:?} and {:?} equal, their keys differ",
                    String::from_utf8_lossy(&members[0]),
                    String::from_utf8_lossy(m)
                );
            }
            merged += usize::from(members.len() > 1);
        }
        assert_eq!(seen, strings.len(), "{collation}: every string in a class");
        // The check has teeth: the server does merge strings (case, or
        // trailing spaces) except under NO PAD binary collations, and the
        // fold keeps 'a' and 'b' apart.
        if rule == StringRule::Exact {
            assert_eq!(merged, 0, "{collation}: the server merges no two strings");
        } else {
            assert!(merged > 0, "{collation}: no two strings equal?");
        }
        assert_ne!(key_of(&w, b"a"), key_of(&w, b"b"), "{collation}");
        let pad = !collation.contains("nopad");
        match rule {
            StringRule::FoldAscii => {
                assert_eq!(key_of(&w, b"a"), key_of(&w, b"A"), "{collation}");
            }
            StringRule::TrimSpaces => {
                assert!(pad, "{collation}");
                assert_ne!(key_of(&w, b"a"), key_of(&w, b"A"), "{collation}");
                assert_eq!(key_of(&w, b"a"), key_of(&w, b"a  "), "{collation}");
            }
            StringRule::Exact => {
                assert!(!pad, "{collation}");
                assert_ne!(key_of(&w, b"a"), key_of(&w, b"a "), "{collation}");
            }
            StringRule::TrimZeros => panic!("{collation}: a character column"),
        }
    }
    run(&mut master, "DROP TEMPORARY TABLE ws_fold").await;
    drop_schemas(sb, &[&schema]).await;
}
