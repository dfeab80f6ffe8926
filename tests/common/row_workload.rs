//! A seeded workload for row parallelism (issue 16): many small
//! transactions over a small key space in ONE schema, written by several
//! concurrent master connections, so that in the binlog many transactions
//! are independent and many conflict, in every way the writesets must
//! see:
//!
//! - `hot`: four rows updated again and again to random values (a stale
//!   after image applied last shows), one or two rows a transaction (two:
//!   dependencies on two channels, the scheduler waits);
//! - `pk`: primary-key changes (`UPDATE … SET id = …`) in a space of 12,
//!   and in one transaction a move that frees a key and one that takes it;
//! - `swap`: two unique columns; two rows exchange their `(a, b)` pairs
//!   (`a=1,b=5` and `a=5,b=1` become each other) through temporary values,
//!   inside one transaction and across three;
//! - `dr`: delete and re-insert of one key (in one transaction and in two),
//!   `REPLACE`; after the DDL, a new column `tag` with a unique key that
//!   transactions move between rows (they conflict only through the new
//!   key);
//! - `odku`: `INSERT … ON DUPLICATE KEY UPDATE` hitting the primary key or
//!   a case-insensitive unique key;
//! - `ci`: a `VARCHAR` unique key in `utf8mb4_general_ci` with values that
//!   differ only in case or trailing spaces (`'abc'` deleted, `'ABC '`
//!   inserted; renames within a family and across), and one family of
//!   non-ASCII values (`'жук'`, `'ЖУК'`: equal under the collation, which
//!   the writesets do not fold: table level, reason `collation`);
//! - `parent`/`child`: a foreign key `ON DELETE CASCADE ON UPDATE
//!   CASCADE` (the cascades run on the replica, invisible in the binlog);
//! - `nokey`: no primary or unique key, duplicate rows, inserts, updates
//!   and deletes (`LIMIT 1`);
//! - two DDL statements in the middle, while the connections write:
//!   `ALTER TABLE dr ADD COLUMN tag`, `ALTER TABLE dr ADD UNIQUE KEY
//!   uk_tag (tag)`, and then writes that rely on them.
//!
//! The statements that fail on the master (duplicate keys, a child of a
//! missing parent, deadlocks) are rolled back and leave nothing in the
//! binlog. [`Committed`] counts what reached it: per operation kind, and
//! the transactions that changed a row of a table whose writeset falls back
//! to a coarser key (foreign key, no unique key, non-ASCII value of a
//! case-insensitive key), so a test can expect the row scheduler's
//! `fallbackCounts` exactly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Value};

use super::{quote_ident, Sandbox, Server};

/// The tables of the workload, in creation order.
pub const TABLES: &[&str] = &[
    "hot", "pk", "swap", "dr", "odku", "ci", "nokey", "parent", "child",
];

/// The DDL that creates the tables (run on a connection whose default
/// schema is the workload's), after `CREATE DATABASE`.
const CREATE: &[&str] = &[
    "CREATE TABLE hot (id INT PRIMARY KEY, v INT NOT NULL, w VARCHAR(16) NOT NULL)",
    "CREATE TABLE pk (id INT PRIMARY KEY, v INT NOT NULL)",
    "CREATE TABLE swap (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, \
     UNIQUE KEY uk_a (a), UNIQUE KEY uk_b (b))",
    "CREATE TABLE dr (id INT PRIMARY KEY, v INT NOT NULL)",
    "CREATE TABLE odku (id INT PRIMARY KEY, k VARCHAR(8) NOT NULL, n INT NOT NULL, \
     last INT NOT NULL, UNIQUE KEY uk_k (k))",
    "CREATE TABLE ci (id INT PRIMARY KEY, \
     name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, \
     v INT NOT NULL, UNIQUE KEY uk_name (name))",
    "CREATE TABLE nokey (a INT NOT NULL, b VARCHAR(8) NOT NULL)",
    "CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(16) NOT NULL)",
    "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT NOT NULL, v INT NOT NULL, \
     KEY k_parent (parent_id), CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) \
     REFERENCES parent (id) ON DELETE CASCADE ON UPDATE CASCADE)",
];

/// The DDL run in the middle of the load.
const MIDDLE: &[&str] = &[
    "ALTER TABLE dr ADD COLUMN tag VARCHAR(8) NULL",
    "ALTER TABLE dr ADD UNIQUE KEY uk_tag (tag)",
];

/// DDL statements in the binlog: `CREATE DATABASE`, the tables, the two in
/// the middle. Each is a transaction of its own whose writeset falls back
/// with reason `statement`.
pub const DDL_STATEMENTS: u64 = 1 + CREATE.len() as u64 + MIDDLE.len() as u64;

/// DDL statements run once the foreign key exists (the two in the
/// middle): their writesets also hold the foreign-key group (reason
/// `foreign_key`).
pub const DDL_AFTER_FOREIGN_KEY: u64 = MIDDLE.len() as u64;

/// Rows of `hot`, ids 1..=HOT.
const HOT: i64 = 4;
/// Key space of `pk` (6 rows at first).
const PK_SPACE: i64 = 12;
/// Rows of `swap`, ids 1..=SWAP, `a = id`, `b = SWAP + 1 - id` at first.
const SWAP: i64 = 5;
/// Key space of `dr` (5 rows at first).
const DR_SPACE: i64 = 8;
/// Tags of `dr` after the DDL (fewer than its rows: they collide).
const TAGS: &[&str] = &["t1", "T1", "t2 ", "T2", "t3"];
/// Key space of `odku` and its unique values (case and trailing spaces
/// variants of 4 keys).
const ODKU_SPACE: i64 = 8;
const ODKU_KEYS: &[&str] = &["k1", "K1", "k1 ", "k2", "K2  ", "k3", "K3", "k4"];
/// Families of `ci` names: the members of one are equal under
/// `utf8mb4_general_ci` (case, trailing spaces); the families are not.
const CI_FAMILIES: &[&[&str]] = &[
    &["abc", "ABC ", "Abc", "aBc  ", "ABC"],
    &["xyz", "XYZ", "xYz ", "Xyz"],
    &["mno ", "MNO", "mNo", "Mno   "],
    &["жук", "ЖУК", "Жук ", "жУк"],
];
/// Ids of `parent` and `child`.
const PARENTS: i64 = 6;
const CHILDREN: i64 = 16;
/// Values of `nokey`.
const NOKEY_A: i64 = 4;
const NOKEY_B: &[&str] = &["x", "y", "z"];

/// A small deterministic generator (splitmix64): the same seed gives the
/// same choices.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `1..=n`.
    pub fn id(&mut self, n: i64) -> i64 {
        1 + (self.next_u64() % n as u64) as i64
    }

    /// Two different numbers in `1..=n` (n ≥ 2).
    pub fn two_ids(&mut self, n: i64) -> (i64, i64) {
        let a = self.id(n);
        let b = 1 + (a + self.id(n - 1) - 1) % n;
        (a, b)
    }

    /// An element of `xs`.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next_u64() % xs.len() as u64) as usize]
    }

    /// A value in `0..1_000_000`.
    pub fn value(&mut self) -> i64 {
        (self.next_u64() % 1_000_000) as i64
    }
}

/// The tables whose changes fall back to a coarser key, that a
/// transaction changed rows of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touch {
    /// `parent` or `child` (reason `foreign_key`).
    pub foreign_key: bool,
    /// `nokey` (reason `no_unique_key`).
    pub no_unique_key: bool,
    /// A non-ASCII `ci.name` in a before or after image (reason
    /// `collation`).
    pub collation: bool,
}

impl Touch {
    const NONE: Touch = Touch {
        foreign_key: false,
        no_unique_key: false,
        collation: false,
    };
    const FK: Touch = Touch {
        foreign_key: true,
        ..Touch::NONE
    };
    const NOKEY: Touch = Touch {
        no_unique_key: true,
        ..Touch::NONE
    };

    /// A change of `ci` naming `names`: `collation` when one is not ASCII
    /// (the families are apart, so the row images are then non-ASCII).
    fn ci(names: &[&str]) -> Touch {
        Touch {
            collation: names.iter().any(|n| !n.is_ascii()),
            ..Touch::NONE
        }
    }

    fn add(&mut self, other: Touch) {
        self.foreign_key |= other.foreign_key;
        self.no_unique_key |= other.no_unique_key;
        self.collation |= other.collation;
    }
}

/// What reached the master's binlog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// Transactions that changed rows (DDL not included).
    pub transactions: u64,
    /// Of them, those that changed rows of `parent` or `child`.
    pub foreign_key: u64,
    /// Those that changed rows of `nokey`.
    pub no_unique_key: u64,
    /// Those with a non-ASCII `ci.name` in a row image.
    pub collation: u64,
    /// Statements the master refused (duplicate key, missing parent,
    /// deadlock), rolled back.
    pub refused: u64,
    /// Per operation kind, how many ran to their end with every
    /// transaction committed.
    pub operations: BTreeMap<&'static str, u64>,
}

impl Committed {
    fn merge(&mut self, other: &Committed) {
        self.transactions += other.transactions;
        self.foreign_key += other.foreign_key;
        self.no_unique_key += other.no_unique_key;
        self.collation += other.collation;
        self.refused += other.refused;
        for (k, n) in &other.operations {
            *self.operations.entry(k).or_default() += n;
        }
    }
}

/// The workload's size and seed.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The schema it creates and writes.
    pub schema: String,
    /// Concurrent master connections.
    pub connections: usize,
    /// Operations per connection (one to three transactions each).
    pub operations: usize,
    /// Seed of connection `i`'s choices: `seed + i`.
    pub seed: u64,
}

/// Server errors the workload expects from the master and rolls back.
const REFUSED: &[u16] = &[
    1062, // duplicate key
    1452, // child without parent
    1213, // deadlock
    1205, // lock wait timeout
];

/// One master connection of the workload, counting what it commits.
struct Session {
    conn: Conn,
    pending: Touch,
    changed: bool,
    in_txn: bool,
    done: Committed,
}

impl Session {
    async fn new(sb: &Sandbox, schema: &str) -> Session {
        let opts = OptsBuilder::from_opts(sb.opts(Server::Master)).db_name(Some(schema));
        Session {
            conn: Conn::new(opts).await.expect("connect to the master"),
            pending: Touch::NONE,
            changed: false,
            in_txn: false,
            done: Committed::default(),
        }
    }

    async fn begin(&mut self) {
        self.conn.query_drop("BEGIN").await.expect("BEGIN");
        self.in_txn = true;
    }

    /// Runs one statement (inside the open transaction, or as one of its
    /// own); `Ok(false)` when the master refused it (a [`REFUSED`] error:
    /// the open transaction is rolled back). Other errors panic: the
    /// workload's SQL is wrong.
    async fn exec(&mut self, sql: &str, params: Vec<Value>, touch: Touch) -> bool {
        match self.conn.exec_drop(sql, params).await {
            Ok(()) => {
                if self.conn.affected_rows() > 0 {
                    self.pending.add(touch);
                    self.changed = true;
                }
                if !self.in_txn {
                    self.finish(true);
                }
                true
            }
            Err(mysql_async::Error::Server(e)) if REFUSED.contains(&e.code) => {
                self.done.refused += 1;
                if self.in_txn {
                    self.conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
                    self.in_txn = false;
                }
                self.finish(false);
                false
            }
            Err(e) => panic!("workload statement failed: {e}\n{sql}"),
        }
    }

    /// Reads `(a, b)` of `swap` row `id` (in the open transaction with
    /// `FOR UPDATE`).
    async fn swap_row(&mut self, id: i64) -> Option<(i64, i64)> {
        let lock = if self.in_txn { " FOR UPDATE" } else { "" };
        let sql = format!("SELECT a, b FROM swap WHERE id = ?{lock}");
        match self.conn.exec_first(sql, (id,)).await {
            Ok(row) => row,
            Err(mysql_async::Error::Server(e)) if REFUSED.contains(&e.code) => {
                self.done.refused += 1;
                if self.in_txn {
                    self.conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
                    self.in_txn = false;
                }
                self.finish(false);
                None
            }
            Err(e) => panic!("reading swap: {e}"),
        }
    }

    /// Commits the open transaction; whether it committed.
    async fn commit(&mut self) -> bool {
        if !self.in_txn {
            return false;
        }
        self.in_txn = false;
        match self.conn.query_drop("COMMIT").await {
            Ok(()) => {
                self.finish(true);
                true
            }
            Err(mysql_async::Error::Server(e)) if REFUSED.contains(&e.code) => {
                self.done.refused += 1;
                self.finish(false);
                false
            }
            Err(e) => panic!("COMMIT: {e}"),
        }
    }

    /// Ends a transaction: counts it when it committed a change.
    fn finish(&mut self, committed: bool) {
        if committed && self.changed {
            let d = &mut self.done;
            d.transactions += 1;
            d.foreign_key += u64::from(self.pending.foreign_key);
            d.no_unique_key += u64::from(self.pending.no_unique_key);
            d.collation += u64::from(self.pending.collation);
        }
        self.pending = Touch::NONE;
        self.changed = false;
    }

    /// Ends an operation of `kind`: counts it when every transaction of
    /// it committed; rolls back a transaction it left open.
    async fn count(&mut self, kind: &'static str, ok: bool) {
        if self.in_txn {
            self.conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
            self.in_txn = false;
            self.finish(false);
        }
        if ok {
            *self.done.operations.entry(kind).or_default() += 1;
        }
    }
}

macro_rules! params {
    ($($v:expr),* $(,)?) => { vec![$(Value::from($v)),*] };
}

impl Workload {
    /// `connections` connections of `operations` operations each, seeded.
    pub fn new(schema: &str, connections: usize, operations: usize, seed: u64) -> Workload {
        Workload {
            schema: schema.to_string(),
            connections,
            operations,
            seed,
        }
    }

    /// Creates the schema and its tables with their first rows, runs the
    /// connections concurrently with the DDL of [`MIDDLE`] once a third of
    /// the operations are done, and returns what was committed.
    pub async fn run(&self, sb: &'static Sandbox) -> Committed {
        let mut setup = sb.connect(Server::Master).await;
        setup
            .query_drop(format!("CREATE DATABASE {}", quote_ident(&self.schema)))
            .await
            .unwrap();
        drop(setup);
        let mut s = Session::new(sb, &self.schema).await;
        for ddl in CREATE {
            s.conn.query_drop(*ddl).await.unwrap();
        }
        // The first rows, one transaction a table.
        let first: &[(&str, Touch)] = &[
            (
                "INSERT INTO hot (id, v, w) VALUES (1, 0, ''), (2, 0, ''), (3, 0, ''), (4, 0, '')",
                Touch::NONE,
            ),
            (
                "INSERT INTO pk (id, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)",
                Touch::NONE,
            ),
            (
                "INSERT INTO swap (id, a, b) VALUES (1, 1, 5), (2, 2, 4), (3, 3, 3), (4, 4, 2), \
                 (5, 5, 1)",
                Touch::NONE,
            ),
            (
                "INSERT INTO dr (id, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)",
                Touch::NONE,
            ),
            (
                "INSERT INTO ci (id, name, v) VALUES (1, 'abc', 1), (2, 'XYZ', 2), (3, 'mno ', 3), \
                 (4, 'жук', 4)",
                Touch::ci(&["жук"]),
            ),
            (
                "INSERT INTO nokey (a, b) VALUES (1, 'x'), (1, 'x'), (2, 'y')",
                Touch::NOKEY,
            ),
            (
                "INSERT INTO parent (id, name) VALUES (1, 'p1'), (2, 'p2'), (3, 'p3'), (4, 'p4')",
                Touch::FK,
            ),
            (
                "INSERT INTO child (id, parent_id, v) VALUES (1, 1, 1), (2, 2, 2), (3, 3, 3), \
                 (4, 4, 4), (5, 1, 5), (6, 2, 6)",
                Touch::FK,
            ),
        ];
        for (sql, touch) in first {
            assert!(s.exec(sql, Vec::new(), *touch).await, "{sql}");
        }
        let mut committed = s.done.clone();

        let total = (self.connections * self.operations) as u64;
        let progress = Arc::new(AtomicU64::new(0));
        let ddl_done = Arc::new(AtomicBool::new(false));
        let ddl = {
            let (progress, ddl_done) = (progress.clone(), ddl_done.clone());
            let schema = self.schema.clone();
            tokio::spawn(async move {
                while progress.load(Ordering::Acquire) < total / 3 {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                let mut s = Session::new(sb, &schema).await;
                for ddl in MIDDLE {
                    s.conn.query_drop(*ddl).await.unwrap();
                }
                ddl_done.store(true, Ordering::Release);
            })
        };
        let results = Arc::new(Mutex::new(Vec::new()));
        let mut workers = Vec::new();
        for c in 0..self.connections {
            let (progress, ddl_done, results) =
                (progress.clone(), ddl_done.clone(), results.clone());
            let schema = self.schema.clone();
            let mut rng = Rng::new(self.seed.wrapping_add(c as u64));
            let operations = self.operations;
            workers.push(tokio::spawn(async move {
                let mut s = Session::new(sb, &schema).await;
                for n in 0..operations {
                    // A value no other operation uses (temporary unique
                    // values of swaps, new ids of `ci`).
                    let unique = (c as i64 + 1) * 100_000 + n as i64;
                    operation(&mut s, &mut rng, unique, ddl_done.load(Ordering::Acquire)).await;
                    progress.fetch_add(1, Ordering::AcqRel);
                }
                results.lock().unwrap().push(s.done);
            }));
        }
        for w in workers {
            w.await.expect("workload connection");
        }
        ddl.await.expect("DDL connection");
        for done in results.lock().unwrap().iter() {
            committed.merge(done);
        }
        committed
    }
}

/// One operation of a connection: one to three transactions.
async fn operation(s: &mut Session, rng: &mut Rng, unique: i64, after_ddl: bool) {
    // After the DDL, about 40% of the operations move unique tags.
    let kinds = if after_ddl { 43 } else { 25 };
    match rng.next_u64() % kinds {
        0 | 1 => {
            let ok = s
                .exec(
                    "UPDATE hot SET v = ?, w = ? WHERE id = ?",
                    params![rng.value(), format!("c{unique}"), rng.id(HOT)],
                    Touch::NONE,
                )
                .await;
            s.count("hot_one", ok).await;
        }
        2 | 3 => {
            let (x, y) = rng.two_ids(HOT);
            s.begin().await;
            let ok = s
                .exec(
                    "UPDATE hot SET v = ? WHERE id = ?",
                    params![rng.value(), x],
                    Touch::NONE,
                )
                .await
                && s.exec(
                    "UPDATE hot SET v = ?, w = ? WHERE id = ?",
                    params![rng.value(), format!("t{unique}"), y],
                    Touch::NONE,
                )
                .await
                && s.commit().await;
            s.count("hot_two", ok).await;
        }
        4 => {
            let ok = s
                .exec(
                    "UPDATE pk SET id = ? WHERE id = ?",
                    params![rng.id(PK_SPACE), rng.id(PK_SPACE)],
                    Touch::NONE,
                )
                .await;
            s.count("pk_move", ok).await;
        }
        5 => {
            // Frees key a and takes it again in the same transaction.
            let (a, b) = rng.two_ids(PK_SPACE);
            let c = rng.id(PK_SPACE);
            s.begin().await;
            let ok = s
                .exec(
                    "UPDATE pk SET id = ? WHERE id = ?",
                    params![b, a],
                    Touch::NONE,
                )
                .await
                && s.exec(
                    "UPDATE pk SET id = ? WHERE id = ?",
                    params![a, c],
                    Touch::NONE,
                )
                .await
                && s.commit().await;
            s.count("pk_chain", ok).await;
        }
        6 => {
            let ok = s
                .exec(
                    "UPDATE pk SET v = ? WHERE id = ?",
                    params![rng.value(), rng.id(PK_SPACE)],
                    Touch::NONE,
                )
                .await;
            s.count("pk_touch", ok).await;
        }
        7 | 8 => {
            // Two rows exchange (a, b) through temporary values, inside
            // one transaction.
            let (x, y) = rng.two_ids(SWAP);
            s.begin().await;
            let ok = swap(s, x, y, -unique).await && s.commit().await;
            s.count("swap_in_one", ok).await;
        }
        9 | 10 => {
            // The same in three transactions.
            let (x, y) = rng.two_ids(SWAP);
            let ok = swap(s, x, y, -unique).await;
            s.count("swap_across", ok).await;
        }
        11 => {
            let k = rng.id(DR_SPACE);
            s.begin().await;
            let ok = s
                .exec("DELETE FROM dr WHERE id = ?", params![k], Touch::NONE)
                .await
                && s.exec(
                    "INSERT INTO dr (id, v) VALUES (?, ?)",
                    params![k, rng.value()],
                    Touch::NONE,
                )
                .await
                && s.commit().await;
            s.count("dr_reinsert_in_one", ok).await;
        }
        12 => {
            let k = rng.id(DR_SPACE);
            let ok = s
                .exec("DELETE FROM dr WHERE id = ?", params![k], Touch::NONE)
                .await
                && s.exec(
                    "INSERT INTO dr (id, v) VALUES (?, ?)",
                    params![k, rng.value()],
                    Touch::NONE,
                )
                .await;
            s.count("dr_reinsert_across", ok).await;
        }
        13 => {
            let ok = s
                .exec(
                    "REPLACE INTO dr (id, v) VALUES (?, ?)",
                    params![rng.id(DR_SPACE), rng.value()],
                    Touch::NONE,
                )
                .await;
            s.count("dr_replace", ok).await;
        }
        14 | 15 => {
            let ok = s
                .exec(
                    "INSERT INTO odku (id, k, n, last) VALUES (?, ?, 1, ?) \
                     ON DUPLICATE KEY UPDATE n = n + 1, last = VALUES(last), k = VALUES(k)",
                    params![rng.id(ODKU_SPACE), *rng.pick(ODKU_KEYS), unique],
                    Touch::NONE,
                )
                .await;
            s.count("odku", ok).await;
        }
        16 => {
            // Delete one spelling, insert another of the same family (its
            // unique key value is the same), in two transactions.
            let family = *rng.pick(CI_FAMILIES);
            let (old, new) = (*rng.pick(family), *rng.pick(family));
            let ok = s
                .exec(
                    "DELETE FROM ci WHERE name = ?",
                    params![old],
                    Touch::ci(&[old]),
                )
                .await
                && s.exec(
                    "INSERT INTO ci (id, name, v) VALUES (?, ?, ?)",
                    params![unique, new, rng.value()],
                    Touch::ci(&[new]),
                )
                .await;
            s.count("ci_reinsert_across", ok).await;
        }
        17 => {
            let family = *rng.pick(CI_FAMILIES);
            let (old, new) = (*rng.pick(family), *rng.pick(family));
            s.begin().await;
            let ok = s
                .exec(
                    "DELETE FROM ci WHERE name = ?",
                    params![old],
                    Touch::ci(&[old]),
                )
                .await
                && s.exec(
                    "INSERT INTO ci (id, name, v) VALUES (?, ?, ?)",
                    params![unique, new, rng.value()],
                    Touch::ci(&[new]),
                )
                .await
                && s.commit().await;
            s.count("ci_reinsert_in_one", ok).await;
        }
        18 => {
            // A new spelling of a row's name (same family or another).
            let (from, to) = (*rng.pick(CI_FAMILIES), *rng.pick(CI_FAMILIES));
            let (old, new) = (*rng.pick(from), *rng.pick(to));
            let ok = s
                .exec(
                    "UPDATE ci SET name = ? WHERE name = ?",
                    params![new, old],
                    Touch::ci(&[old, new]),
                )
                .await;
            s.count("ci_rename", ok).await;
        }
        19 => {
            let family = *rng.pick(CI_FAMILIES);
            let name = *rng.pick(family);
            let ok = s
                .exec(
                    "UPDATE ci SET v = ? WHERE name = ?",
                    params![rng.value(), name],
                    Touch::ci(&[name]),
                )
                .await;
            s.count("ci_touch", ok).await;
        }
        20 => {
            let ok = match rng.next_u64() % 3 {
                0 => {
                    s.exec(
                        "INSERT INTO parent (id, name) VALUES (?, ?)",
                        params![rng.id(PARENTS), format!("p{unique}")],
                        Touch::FK,
                    )
                    .await
                }
                1 => {
                    // Cascades to the children on the replica.
                    s.exec(
                        "DELETE FROM parent WHERE id = ?",
                        params![rng.id(PARENTS)],
                        Touch::FK,
                    )
                    .await
                }
                _ => {
                    let (a, b) = rng.two_ids(PARENTS);
                    s.exec(
                        "UPDATE parent SET id = ? WHERE id = ?",
                        params![b, a],
                        Touch::FK,
                    )
                    .await
                }
            };
            s.count("parent", ok).await;
        }
        21 => {
            let ok = match rng.next_u64() % 3 {
                0 => {
                    s.exec(
                        "INSERT INTO child (id, parent_id, v) VALUES (?, ?, ?)",
                        params![rng.id(CHILDREN), rng.id(PARENTS), rng.value()],
                        Touch::FK,
                    )
                    .await
                }
                1 => {
                    s.exec(
                        "UPDATE child SET parent_id = ?, v = ? WHERE id = ?",
                        params![rng.id(PARENTS), rng.value(), rng.id(CHILDREN)],
                        Touch::FK,
                    )
                    .await
                }
                _ => {
                    s.exec(
                        "DELETE FROM child WHERE id = ?",
                        params![rng.id(CHILDREN)],
                        Touch::FK,
                    )
                    .await
                }
            };
            s.count("child", ok).await;
        }
        22 => {
            let ok = match rng.next_u64() % 3 {
                0 => {
                    s.exec(
                        "INSERT INTO nokey (a, b) VALUES (?, ?)",
                        params![rng.id(NOKEY_A), *rng.pick(NOKEY_B)],
                        Touch::NOKEY,
                    )
                    .await
                }
                1 => {
                    s.exec(
                        "UPDATE nokey SET b = ? WHERE a = ? LIMIT 1",
                        params![*rng.pick(NOKEY_B), rng.id(NOKEY_A)],
                        Touch::NOKEY,
                    )
                    .await
                }
                _ => {
                    s.exec(
                        "DELETE FROM nokey WHERE a = ? AND b = ? LIMIT 1",
                        params![rng.id(NOKEY_A), *rng.pick(NOKEY_B)],
                        Touch::NOKEY,
                    )
                    .await
                }
            };
            s.count("nokey", ok).await;
        }
        23 | 24 => {
            // A hot row and a row of another table: chains of
            // dependencies across tables.
            s.begin().await;
            let ok = s
                .exec(
                    "UPDATE hot SET v = ? WHERE id = ?",
                    params![rng.value(), rng.id(HOT)],
                    Touch::NONE,
                )
                .await
                && match rng.next_u64() % 3 {
                    0 => {
                        s.exec(
                            "UPDATE pk SET v = ? WHERE id = ?",
                            params![rng.value(), rng.id(PK_SPACE)],
                            Touch::NONE,
                        )
                        .await
                    }
                    1 => {
                        s.exec(
                            "REPLACE INTO dr (id, v) VALUES (?, ?)",
                            params![rng.id(DR_SPACE), rng.value()],
                            Touch::NONE,
                        )
                        .await
                    }
                    _ => {
                        s.exec(
                            "INSERT INTO odku (id, k, n, last) VALUES (?, ?, 1, ?) \
                             ON DUPLICATE KEY UPDATE n = n + 1, last = VALUES(last)",
                            params![rng.id(ODKU_SPACE), *rng.pick(ODKU_KEYS), unique],
                            Touch::NONE,
                        )
                        .await
                    }
                }
                && s.commit().await;
            s.count("hot_and_other", ok).await;
        }
        25..=33 => {
            // After the DDL: the unique tag moves to another row; the two
            // transactions conflict only through uk_tag.
            let tag = *rng.pick(TAGS);
            let ok = s
                .exec(
                    "UPDATE dr SET tag = NULL WHERE tag = ?",
                    params![tag],
                    Touch::NONE,
                )
                .await
                && s.exec(
                    "UPDATE dr SET tag = ? WHERE id = ?",
                    params![tag, rng.id(DR_SPACE)],
                    Touch::NONE,
                )
                .await;
            s.count("tag_move_across", ok).await;
        }
        34..=38 => {
            let tag = *rng.pick(TAGS);
            s.begin().await;
            let ok = s
                .exec(
                    "UPDATE dr SET tag = NULL WHERE tag = ?",
                    params![tag],
                    Touch::NONE,
                )
                .await
                && s.exec(
                    "UPDATE dr SET tag = ? WHERE id = ?",
                    params![tag, rng.id(DR_SPACE)],
                    Touch::NONE,
                )
                .await
                && s.commit().await;
            s.count("tag_move_in_one", ok).await;
        }
        _ => {
            // REPLACE on two unique keys: removes the rows holding the id
            // and the tag.
            let ok = s
                .exec(
                    "REPLACE INTO dr (id, v, tag) VALUES (?, ?, ?)",
                    params![rng.id(DR_SPACE), rng.value(), *rng.pick(TAGS)],
                    Touch::NONE,
                )
                .await;
            s.count("tag_replace", ok).await;
        }
    }
}

/// Rows `x` and `y` of `swap` exchange their `(a, b)`: `x` takes
/// `(tmp, tmp)`, `y` takes `x`'s pair, `x` takes `y`'s. In the open
/// transaction (rows locked first), or as three transactions. Whether
/// every step went through.
async fn swap(s: &mut Session, x: i64, y: i64, tmp: i64) -> bool {
    let Some((xa, xb)) = s.swap_row(x).await else {
        return false;
    };
    let Some((ya, yb)) = s.swap_row(y).await else {
        return false;
    };
    s.exec(
        "UPDATE swap SET a = ?, b = ? WHERE id = ?",
        params![tmp, tmp, x],
        Touch::NONE,
    )
    .await
        && s.exec(
            "UPDATE swap SET a = ?, b = ? WHERE id = ?",
            params![xa, xb, y],
            Touch::NONE,
        )
        .await
        && s.exec(
            "UPDATE swap SET a = ?, b = ? WHERE id = ?",
            params![ya, yb, x],
            Touch::NONE,
        )
        .await
}

/// Every table of `schema` on `server`: name, `SHOW CREATE TABLE`, and its
/// rows as stored bytes (`SET NAMES binary`) ordered by every column.
pub async fn schema_contents(
    sb: &Sandbox,
    server: Server,
    schema: &str,
) -> Vec<(String, String, Vec<Vec<Value>>)> {
    let mut conn = sb.connect(server).await;
    let tables: Vec<String> = conn
        .exec(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? \
             ORDER BY TABLE_NAME",
            (schema,),
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    for table in tables {
        let name = format!("{}.{}", quote_ident(schema), quote_ident(&table));
        let (_, create): (String, String) = conn
            .query_first(format!("SHOW CREATE TABLE {name}"))
            .await
            .unwrap()
            .unwrap();
        let columns: Vec<String> = conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (schema, &table),
            )
            .await
            .unwrap();
        let order: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
        conn.query_drop("SET NAMES binary").await.unwrap();
        let rows: Vec<mysql_async::Row> = conn
            .query(format!(
                "SELECT * FROM {name} ORDER BY {}",
                order.join(", ")
            ))
            .await
            .unwrap();
        conn.query_drop("SET NAMES utf8mb4").await.unwrap();
        out.push((
            table,
            create,
            rows.into_iter().map(|r| r.unwrap()).collect(),
        ));
    }
    out
}

/// Asserts that `schema` has the same tables, definitions and rows
/// (every column, stored bytes) on the master and on `replica`; returns
/// the row count of each table.
pub async fn assert_schema_equal(
    sb: &Sandbox,
    replica: Server,
    schema: &str,
) -> Vec<(String, usize)> {
    let master = schema_contents(sb, Server::Master, schema).await;
    let other = schema_contents(sb, replica, schema).await;
    let names = |c: &[(String, String, Vec<Vec<Value>>)]| -> Vec<String> {
        c.iter().map(|t| t.0.clone()).collect()
    };
    assert_eq!(names(&other), names(&master), "tables of {schema}");
    for ((table, create, rows), (_, other_create, other_rows)) in master.iter().zip(&other) {
        assert_eq!(other_create, create, "definition of {schema}.{table}");
        assert_eq!(
            other_rows.len(),
            rows.len(),
            "{schema}.{table}: row counts differ between the master and {}",
            replica.name()
        );
        for (i, (m, r)) in rows.iter().zip(other_rows).enumerate() {
            assert_eq!(
                r,
                m,
                "{schema}.{table}: row {i} (ordered by every column) differs between the \
                 master and {}",
                replica.name()
            );
        }
    }
    master.iter().map(|t| (t.0.clone(), t.2.len())).collect()
}
