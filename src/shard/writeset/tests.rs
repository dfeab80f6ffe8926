//! The rules of the module doc, one test each, on hand-built metadata and
//! transactions; a proptest of the collation fold.

use proptest::prelude::*;

use super::*;
use crate::event::{
    ColumnInfo, RowImage, RowKind, RowPair, RowsChange, Statement, TableInfo, Value,
};
use crate::position::{BinlogPosition, Seqno};

const S: &str = "app";

fn info(schema: &str, table: &str) -> TableInfo {
    TableInfo {
        table_id: 1,
        schema: schema.into(),
        table: table.into(),
        // The writeset reads the replica's metadata, not the binlog's.
        columns: Vec::<ColumnInfo>::new(),
        primary_key: None,
    }
}

/// A FULL image: every column, in order.
fn full(values: Vec<Value>) -> RowImage {
    RowImage {
        columns: (0..values.len() as u16).collect(),
        values,
    }
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn text(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}

/// One rows event on `txn.tables[table]`.
fn rows(table: u32, kind: RowKind, pairs: Vec<(Option<RowImage>, Option<RowImage>)>) -> Change {
    Change::Rows(RowsChange {
        table,
        kind,
        flags: 1,
        rows: pairs
            .into_iter()
            .map(|(before, after)| RowPair { before, after })
            .collect(),
    })
}

fn insert(table: u32, after: RowImage) -> Change {
    rows(table, RowKind::Insert, vec![(None, Some(after))])
}

fn update(table: u32, before: RowImage, after: RowImage) -> Change {
    rows(table, RowKind::Update, vec![(Some(before), Some(after))])
}

fn delete(table: u32, before: RowImage) -> Change {
    rows(table, RowKind::Delete, vec![(Some(before), None)])
}

fn statement(sql: &str) -> Change {
    Change::Statement(Statement {
        sql: sql.as_bytes().to_vec(),
        default_schema: Some(S.into()),
        context: Default::default(),
        error_code: 0,
        thread_id: None,
    })
}

fn txn(shard: &str, tables: Vec<TableInfo>, changes: Vec<Change>) -> Transaction {
    Transaction {
        seqno: Seqno(7),
        server_id: 1,
        gtid: None,
        commit_id: None,
        start_position: BinlogPosition::new("mariadb-bin.000001", 4).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000001", 400).unwrap(),
        commit_timestamp: 0,
        shard: shard.into(),
        tables,
        changes,
        row_events: None,
        fragment: None,
    }
}

/// A transaction of shard [`S`] on `S.table` only.
fn on(table: &str, changes: Vec<Change>) -> Transaction {
    txn(S, vec![info(S, table)], changes)
}

fn ws(w: &Writesets, t: &Transaction) -> Writeset {
    let mut out = Writeset::default();
    w.writeset(t, &mut out);
    out
}

fn row_keys(w: &Writeset) -> Vec<u64> {
    w.keys
        .iter()
        .filter_map(|k| match k {
            Key::Row(h) => Some(*h),
            _ => None,
        })
        .collect()
}

/// The one row key of a single-key table's single-row insert of `values`.
fn key_of(w: &Writesets, table: &str, values: Vec<Value>) -> u64 {
    let keys = row_keys(&ws(w, &on(table, vec![insert(0, full(values))])));
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0]
}

fn table_key(table: &str, exclusive: bool) -> Key {
    Key::Table {
        id: table_key_id(S, table),
        exclusive,
    }
}

fn shard_key(shard: &str, exclusive: bool) -> Key {
    Key::Shard {
        id: shard_key_id(shard),
        exclusive,
    }
}

/// `users(id INT UNSIGNED PK, email VARCHAR ci NULL UNIQUE, code CHAR bin
/// UNIQUE, note VARCHAR)`.
fn users() -> TableKeys {
    TableKeys::new(
        S,
        "users",
        vec![
            ColumnDef::new("id", "int").unsigned(),
            ColumnDef::new("email", "varchar")
                .collation("utf8mb4_general_ci")
                .nullable(),
            ColumnDef::new("code", "char").collation("utf8mb4_bin"),
            ColumnDef::new("note", "varchar").collation("utf8mb4_general_ci"),
        ],
    )
    .with_key(UniqueKey::new("uk_email", &[1]))
    .with_key(UniqueKey::new("PRIMARY", &[0]))
    .with_key(UniqueKey::new("uk_code", &[2]))
}

fn user(id: i64, email: Option<&str>, code: &str, note: &str) -> RowImage {
    full(vec![
        int(id),
        email.map_or(Value::Null, text),
        text(code),
        text(note),
    ])
}

/// A table of one key column `k` of `data_type` (and `collation`), its
/// primary key.
fn one_key(table: &str, column: ColumnDef) -> TableKeys {
    TableKeys::new(S, table, vec![column]).with_key(UniqueKey::new("PRIMARY", &[0]))
}

#[test]
fn every_unique_key_of_both_images_and_the_table_and_shard_keys() {
    let w = Writesets::from_tables(vec![users()]);
    assert_eq!(
        w.tables()[0].unique_keys[0].name,
        "PRIMARY",
        "PRIMARY first"
    );
    let t = on(
        "users",
        vec![update(
            0,
            user(1, Some("a@x"), "c1", "n"),
            user(1, Some("b@x"), "c1", "m"),
        )],
    );
    let out = ws(&w, &t);
    // PK 1 (both images), email a@x and b@x, code c1 (both images).
    assert_eq!(row_keys(&out).len(), 4, "{out:?}");
    assert_eq!(out.keys.len(), 6);
    assert!(out.keys.contains(&table_key("users", false)));
    assert!(out.keys.contains(&shard_key(S, false)));
    assert!(out.fallbacks.is_empty());
    let mut sorted = out.keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, out.keys, "sorted, no duplicates");

    // Another row whose email takes the old value: conflicts (before image).
    let old_email = on("users", vec![insert(0, user(2, Some("A@X"), "c2", "n"))]);
    assert!(ws(&w, &old_email).conflicts(&out));
    // ... or the new one (after image).
    let new_email = on("users", vec![insert(0, user(3, Some("b@x "), "c3", "n"))]);
    assert!(ws(&w, &new_email).conflicts(&out));
    // The same primary key, through a delete.
    let same_id = on("users", vec![delete(0, user(1, Some("z@x"), "c9", "n"))]);
    assert!(ws(&w, &same_id).conflicts(&out));
    // Other rows, other values: independent, even with the same note.
    let other = on("users", vec![insert(0, user(4, Some("c@x"), "c4", "m"))]);
    assert!(!ws(&w, &other).conflicts(&out));
}

#[test]
fn index_identity_is_part_of_the_hash() {
    let pair = TableKeys::new(
        S,
        "pair",
        vec![
            ColumnDef::new("id", "int"),
            ColumnDef::new("a", "int"),
            ColumnDef::new("b", "int"),
        ],
    )
    .with_key(UniqueKey::new("PRIMARY", &[0]))
    .with_key(UniqueKey::new("ua", &[1]))
    .with_key(UniqueKey::new("ub", &[2]));
    let w = Writesets::from_tables(vec![pair]);
    let a = ws(
        &w,
        &on("pair", vec![insert(0, full(vec![int(1), int(5), int(7)]))]),
    );
    let swapped = ws(
        &w,
        &on("pair", vec![insert(0, full(vec![int(2), int(7), int(5)]))]),
    );
    assert_eq!(row_keys(&a).len(), 3);
    assert!(!swapped.conflicts(&a), "a=7 is not b=7");
    let same_a = ws(
        &w,
        &on("pair", vec![insert(0, full(vec![int(3), int(5), int(9)]))]),
    );
    assert!(same_a.conflicts(&a));
    // The unique-key swap a=1,b=2 -> a=2,b=1 holds both values of both
    // keys: it conflicts with a row taking a=2 and one taking b=1.
    let swap = ws(
        &w,
        &on(
            "pair",
            vec![update(
                0,
                full(vec![int(10), int(1), int(2)]),
                full(vec![int(10), int(2), int(1)]),
            )],
        ),
    );
    assert_eq!(row_keys(&swap).len(), 5);
    for (a, b) in [(2, 100), (100, 1)] {
        let other = ws(
            &w,
            &on("pair", vec![insert(0, full(vec![int(11), int(a), int(b)]))]),
        );
        assert!(other.conflicts(&swap), "a={a} b={b}");
    }
    // The same values in another table: other keys.
    let twin = TableKeys {
        table: "twin".into(),
        ..w.tables()[0].clone()
    };
    let w2 = Writesets::from_tables(vec![w.tables()[0].clone(), twin]);
    let in_twin = ws(
        &w2,
        &on("twin", vec![insert(0, full(vec![int(1), int(5), int(7)]))]),
    );
    assert!(!in_twin.conflicts(&ws(
        &w2,
        &on("pair", vec![insert(0, full(vec![int(1), int(5), int(7)]))])
    )));
}

#[test]
fn a_unique_key_with_a_null_part_gives_no_key() {
    let w = Writesets::from_tables(vec![users()]);
    let a = ws(&w, &on("users", vec![insert(0, user(1, None, "c1", ""))]));
    let b = ws(&w, &on("users", vec![insert(0, user(2, None, "c2", ""))]));
    assert_eq!(row_keys(&a).len(), 2, "PRIMARY and uk_code only");
    assert!(!a.conflicts(&b), "NULLs never collide");
    assert!(a.fallbacks.is_empty());
}

#[test]
fn integers_by_the_replica_columns_width_and_signedness() {
    let w = Writesets::from_tables(vec![
        one_key("tiny_u", ColumnDef::new("k", "tinyint").unsigned()),
        one_key("tiny_s", ColumnDef::new("k", "tinyint")),
        one_key("medium_u", ColumnDef::new("k", "mediumint").unsigned()),
        one_key("big_u", ColumnDef::new("k", "bigint").unsigned()),
        one_key("big_s", ColumnDef::new("k", "bigint")),
    ]);
    // NO_LOG gives an unsigned column's value as the signed number of the
    // same bits; FULL gives it unsigned.
    assert_eq!(
        key_of(&w, "tiny_u", vec![int(-56)]),
        key_of(&w, "tiny_u", vec![Value::UInt(200)])
    );
    assert_eq!(
        key_of(&w, "medium_u", vec![int(-1)]),
        key_of(&w, "medium_u", vec![Value::UInt(16_777_215)])
    );
    assert_eq!(
        key_of(&w, "big_u", vec![int(-1)]),
        key_of(&w, "big_u", vec![Value::UInt(u64::MAX)])
    );
    assert_ne!(
        key_of(&w, "tiny_s", vec![int(-56)]),
        key_of(&w, "tiny_s", vec![int(200)])
    );
    assert_eq!(
        key_of(&w, "big_s", vec![int(42)]),
        key_of(&w, "big_s", vec![Value::UInt(42)])
    );
    assert_ne!(
        key_of(&w, "big_s", vec![int(-1)]),
        key_of(&w, "big_u", vec![int(-1)]),
        "another table"
    );
}

#[test]
fn decimals_by_their_number() {
    let w = Writesets::from_tables(vec![one_key("d", ColumnDef::new("k", "decimal"))]);
    let k = |s: &str| key_of(&w, "d", vec![Value::Decimal(s.into())]);
    assert_eq!(k("-0.00"), k("0.00"));
    assert_eq!(k("0.00"), k("0"));
    assert_eq!(k("1.50"), k("1.5"));
    assert_eq!(k("007.10"), k("7.1"));
    assert_ne!(k("-1.50"), k("1.50"));
    assert_ne!(k("1.05"), k("1.5"));
    assert_ne!(k("10"), k("1"));
}

#[test]
fn temporal_values_by_their_fields_enum_and_set_by_their_integer() {
    let w = Writesets::from_tables(vec![
        one_key("dt", ColumnDef::new("k", "datetime")),
        one_key("tm", ColumnDef::new("k", "time")),
        one_key(
            "en",
            ColumnDef::new("k", "enum").collation("utf8mb4_general_ci"),
        ),
        one_key(
            "st",
            ColumnDef::new("k", "set").collation("utf8mb4_general_ci"),
        ),
        one_key("ts", ColumnDef::new("k", "timestamp")),
    ]);
    let dt = |second, micros| Value::DateTime {
        year: 2024,
        month: 2,
        day: 29,
        hour: 23,
        minute: 59,
        second,
        micros,
    };
    assert_eq!(
        key_of(&w, "dt", vec![dt(1, 5)]),
        key_of(&w, "dt", vec![dt(1, 5)])
    );
    assert_ne!(
        key_of(&w, "dt", vec![dt(1, 5)]),
        key_of(&w, "dt", vec![dt(1, 6)])
    );
    assert_ne!(
        key_of(&w, "dt", vec![dt(1, 0)]),
        key_of(&w, "dt", vec![dt(2, 0)])
    );
    let time = |negative, seconds| Value::Time {
        negative,
        hours: 0,
        minutes: 0,
        seconds,
        micros: 0,
    };
    assert_eq!(
        key_of(&w, "tm", vec![time(true, 0)]),
        key_of(&w, "tm", vec![time(false, 0)]),
        "-00:00:00 is 00:00:00"
    );
    assert_ne!(
        key_of(&w, "tm", vec![time(true, 1)]),
        key_of(&w, "tm", vec![time(false, 1)])
    );
    assert_eq!(
        key_of(&w, "en", vec![Value::Enum(2)]),
        key_of(&w, "en", vec![Value::Int(2)]),
        "the stored index"
    );
    assert_ne!(
        key_of(&w, "en", vec![Value::Enum(2)]),
        key_of(&w, "en", vec![Value::Enum(3)])
    );
    assert_eq!(
        key_of(&w, "st", vec![Value::Set(5)]),
        key_of(&w, "st", vec![Value::UInt(5)])
    );
    let ts = |seconds, micros| Value::Timestamp { seconds, micros };
    assert_eq!(
        key_of(&w, "ts", vec![ts(9, 1)]),
        key_of(&w, "ts", vec![ts(9, 1)])
    );
    assert_ne!(
        key_of(&w, "ts", vec![ts(9, 1)]),
        key_of(&w, "ts", vec![ts(9, 2)])
    );
}

#[test]
fn binary_strings_compare_exactly_and_binary_n_is_padded() {
    let w = Writesets::from_tables(vec![
        one_key("vb", ColumnDef::new("k", "varbinary")),
        one_key("bn", ColumnDef::new("k", "binary")),
        one_key("uu", ColumnDef::new("k", "uuid")),
    ]);
    let k = |t: &str, b: &[u8]| key_of(&w, t, vec![Value::Bytes(b.to_vec())]);
    assert_ne!(k("vb", b"a"), k("vb", b"A"));
    assert_ne!(k("vb", b"a"), k("vb", b"a "));
    assert_ne!(k("vb", b"a"), k("vb", b"a\0"));
    // BINARY(4) stores 'ab' as 'ab\0\0'; the binlog may drop the zeros.
    assert_eq!(k("bn", b"ab"), k("bn", b"ab\0\0"));
    assert_ne!(k("bn", b"ab"), k("bn", b"ab "));
    assert_eq!(
        k("uu", &[1; 15]),
        k("uu", &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0])
    );
}

#[test]
fn bin_collations_trim_trailing_spaces_nopad_bin_keeps_them_except_in_char() {
    let w = Writesets::from_tables(vec![
        one_key(
            "bin",
            ColumnDef::new("k", "varchar").collation("utf8mb4_bin"),
        ),
        one_key(
            "latin",
            ColumnDef::new("k", "varchar").collation("latin1_bin"),
        ),
        one_key(
            "nopad",
            ColumnDef::new("k", "varchar").collation("utf8mb4_nopad_bin"),
        ),
        one_key(
            "nopad_char",
            ColumnDef::new("k", "char").collation("utf8mb4_nopad_bin"),
        ),
    ]);
    let k = |t: &str, s: &str| key_of(&w, t, vec![text(s)]);
    assert_eq!(k("bin", "a"), k("bin", "a   "));
    assert_ne!(k("bin", "a"), k("bin", "A"));
    assert_ne!(k("bin", "a"), k("bin", "a\t"));
    assert_ne!(k("bin", "a"), k("bin", " a"));
    assert_eq!(k("latin", "é "), k("latin", "é"), "any byte under _bin");
    assert_ne!(k("nopad", "a"), k("nopad", "a "));
    // A CHAR column stores its value padded with spaces.
    assert_eq!(k("nopad_char", "a"), k("nopad_char", "a "));
    assert!(ws(&w, &on("bin", vec![insert(0, full(vec![text("ü")]))]))
        .fallbacks
        .is_empty());
}

#[test]
fn whitelisted_ci_collations_fold_case_spaces_and_punctuation() {
    let w = Writesets::from_tables(vec![one_key(
        "ci",
        ColumnDef::new("k", "varchar").collation("utf8mb4_unicode_ci"),
    )]);
    let k = |s: &str| key_of(&w, "ci", vec![text(s)]);
    assert_eq!(k("Abc"), k("abc"));
    assert_eq!(k("abc"), k("ABC  "));
    assert_eq!(k("a-b c"), k("abc"), "over-merging is allowed");
    assert_eq!(k(""), k("   "));
    assert_ne!(k("abc"), k("abd"));
    assert_ne!(k("ab"), k("abc"));
    assert_ne!(k("1"), k("l"));
    // Longer than one fold chunk.
    let long: String = "Xy0-".repeat(50);
    assert_eq!(k(&long), k(&long.to_lowercase().replace('-', " ")));
    assert_ne!(k(&long), k(&long[1..]));
}

#[test]
fn a_non_ascii_value_under_a_ci_collation_falls_back_to_the_table() {
    let w = Writesets::from_tables(vec![one_key(
        "ci",
        ColumnDef::new("k", "varchar").collation("latin1_swedish_ci"),
    )]);
    let t = on(
        "ci",
        vec![
            insert(0, full(vec![text("plain")])),
            insert(0, full(vec![Value::Bytes(vec![b'Y', 0xdc])])),
        ],
    );
    let out = ws(&w, &t);
    assert_eq!(out.fallbacks, [Fallback::Collation]);
    assert!(out.keys.contains(&table_key("ci", true)));
    // 'Ü' may equal 'Y' in latin1_swedish_ci: any row of the table conflicts.
    let ascii = ws(&w, &on("ci", vec![insert(0, full(vec![text("yy")]))]));
    assert!(ascii.conflicts(&out));
    assert!(ascii.fallbacks.is_empty());
}

#[test]
fn a_collation_not_on_the_whitelist_falls_back_for_its_table() {
    for (collation, data_type) in [
        ("utf8mb4_danish_ci", "varchar"),
        ("utf8mb4_0900_ai_ci", "varchar"),
        ("utf16_bin", "varchar"),
        ("utf16_general_ci", "char"),
    ] {
        let w = Writesets::from_tables(vec![one_key(
            "x",
            ColumnDef::new("k", data_type).collation(collation),
        )]);
        assert_eq!(w.table_fallbacks(S, "x"), Some(&[Fallback::Collation][..]));
        let out = ws(&w, &on("x", vec![insert(0, full(vec![text("a")]))]));
        assert_eq!(out.fallbacks, [Fallback::Collation], "{collation}");
        assert_eq!(
            out.keys,
            sorted(vec![
                table_key("x", false),
                table_key("x", true),
                shard_key(S, false)
            ])
        );
    }
    assert_eq!(string_rule("varchar", None), Err(Fallback::Collation));
    // A collation only on non-key columns is no reason.
    let w = Writesets::from_tables(vec![users()]);
    assert_eq!(w.table_fallbacks(S, "users"), Some(&[][..]));
}

fn sorted(mut keys: Vec<Key>) -> Vec<Key> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[test]
fn float_keys_fall_back_to_the_table() {
    let w = Writesets::from_tables(vec![
        one_key("f", ColumnDef::new("k", "double")),
        TableKeys::new(
            S,
            "g",
            vec![ColumnDef::new("id", "int"), ColumnDef::new("x", "float")],
        )
        .with_key(UniqueKey::new("PRIMARY", &[0]))
        .with_key(UniqueKey::new("ux", &[1, 0])),
    ]);
    for table in ["f", "g"] {
        let out = ws(
            &w,
            &on(
                table,
                vec![insert(
                    0,
                    full(vec![Value::Double(-0.0), Value::Float(0.0)]),
                )],
            ),
        );
        assert_eq!(out.fallbacks, [Fallback::FloatKey]);
        assert!(out.keys.contains(&table_key(table, true)));
        assert!(row_keys(&out).is_empty());
    }
}

#[test]
fn tables_without_a_not_null_unique_key_fall_back() {
    let w = Writesets::from_tables(vec![
        TableKeys::new(S, "bare", vec![ColumnDef::new("a", "int")]),
        TableKeys::new(
            S,
            "nullable_uk",
            vec![ColumnDef::new("a", "int").nullable()],
        )
        .with_key(UniqueKey::new("ua", &[0])),
        TableKeys::new(S, "not_null_uk", vec![ColumnDef::new("a", "int")])
            .with_key(UniqueKey::new("ua", &[0])),
    ]);
    for table in ["bare", "nullable_uk"] {
        assert_eq!(
            w.table_fallbacks(S, table),
            Some(&[Fallback::NoUniqueKey][..])
        );
        let a = ws(&w, &on(table, vec![insert(0, full(vec![int(1)]))]));
        let b = ws(&w, &on(table, vec![insert(0, full(vec![int(2)]))]));
        assert_eq!(a.fallbacks, [Fallback::NoUniqueKey]);
        assert!(a.keys.contains(&table_key(table, true)));
        assert!(a.conflicts(&b), "{table}: every change serialized");
    }
    let a = ws(&w, &on("not_null_uk", vec![insert(0, full(vec![int(1)]))]));
    let b = ws(&w, &on("not_null_uk", vec![insert(0, full(vec![int(2)]))]));
    assert!(a.fallbacks.is_empty());
    assert!(!a.conflicts(&b), "a NOT NULL unique key identifies rows");
}

#[test]
fn prefix_unique_keys_fall_back() {
    let mut t = TableKeys::new(
        S,
        "pre",
        vec![
            ColumnDef::new("id", "int"),
            ColumnDef::new("t", "varchar").collation("utf8mb4_bin"),
        ],
    )
    .with_key(UniqueKey::new("PRIMARY", &[0]))
    .with_key(UniqueKey::new("ut", &[1]));
    t.unique_keys[1].parts[0].prefix = Some(10);
    let w = Writesets::from_tables(vec![t]);
    assert_eq!(
        w.table_fallbacks(S, "pre"),
        Some(&[Fallback::PrefixKey][..])
    );
    let a = ws(
        &w,
        &on(
            "pre",
            vec![insert(0, full(vec![int(1), text("0123456789a")]))],
        ),
    );
    let b = ws(
        &w,
        &on(
            "pre",
            vec![insert(0, full(vec![int(2), text("0123456789b")]))],
        ),
    );
    assert!(a.conflicts(&b), "equal prefixes are duplicates");
}

#[test]
fn a_key_column_missing_from_the_image_falls_back() {
    let w = Writesets::from_tables(vec![users()]);
    // MINIMAL: the before image holds the primary key only.
    let before = RowImage {
        columns: vec![0],
        values: vec![int(1)],
    };
    let after = RowImage {
        columns: vec![3],
        values: vec![text("new note")],
    };
    let out = ws(&w, &on("users", vec![update(0, before, after)]));
    assert_eq!(out.fallbacks, [Fallback::PartialImage]);
    assert!(out.keys.contains(&table_key("users", true)));
    let other = ws(
        &w,
        &on("users", vec![insert(0, user(9, Some("q"), "q", ""))]),
    );
    assert!(other.conflicts(&out));
    // A sparse image holding every key column is enough (binary search).
    let sparse = RowImage {
        columns: vec![0, 1, 2],
        values: vec![int(9), text("Q "), text("q")],
    };
    let out = ws(&w, &on("users", vec![delete(0, sparse)]));
    assert!(out.fallbacks.is_empty());
    assert_eq!(row_keys(&out).len(), 3);
    assert!(out.conflicts(&ws(
        &w,
        &on("users", vec![insert(0, user(10, Some("q"), "x", ""))])
    )));
}

#[test]
fn a_table_not_in_the_metadata_falls_back() {
    let w = Writesets::from_tables(vec![users()]);
    assert_eq!(w.table_fallbacks(S, "ghost"), None);
    let out = ws(&w, &on("ghost", vec![insert(0, full(vec![int(1)]))]));
    assert_eq!(out.fallbacks, [Fallback::UnknownTable]);
    assert_eq!(
        out.keys,
        sorted(vec![table_key("ghost", true), shard_key(S, false)])
    );
    let out = ws(
        &w,
        &txn(
            "other",
            vec![info("other", "users")],
            vec![insert(0, full(vec![int(1)]))],
        ),
    );
    assert_eq!(
        out.fallbacks,
        [Fallback::UnknownTable],
        "another schema's table"
    );
    assert!(out.keys.contains(&shard_key("other", false)));
}

#[test]
fn foreign_keys_join_tables_into_groups_transitively_and_across_schemas() {
    let id = || {
        vec![
            ColumnDef::new("id", "int"),
            ColumnDef::new("ref", "int").nullable(),
        ]
    };
    let table = |schema: &str, name: &str| {
        TableKeys::new(schema, name, id()).with_key(UniqueKey::new("PRIMARY", &[0]))
    };
    let w = Writesets::from_tables(vec![
        table(S, "parent"),
        table(S, "child").referencing(S, "parent"),
        table("b", "grandchild").referencing(S, "child"),
        table("c", "other_child").referencing("b", "grandchild"),
        table(S, "tree").referencing(S, "tree"),
        table(S, "free"),
        // Its parent is in a schema not loaded.
        table(S, "orphan").referencing("gone", "p"),
    ]);
    let group = w.foreign_key_group(S, "parent").expect("parent in a group");
    for (schema, name) in [(S, "child"), ("b", "grandchild"), ("c", "other_child")] {
        assert_eq!(
            w.foreign_key_group(schema, name),
            Some(group),
            "{schema}.{name}"
        );
        assert_eq!(
            w.table_fallbacks(schema, name),
            Some(&[Fallback::ForeignKey][..])
        );
    }
    let tree = w
        .foreign_key_group(S, "tree")
        .expect("a self reference is a group");
    assert_ne!(tree, group);
    assert_eq!(w.foreign_key_group(S, "free"), None);
    assert_eq!(w.table_fallbacks(S, "free"), Some(&[][..]));
    // A table known only from a foreign key: table level, in its group.
    let orphan = w.foreign_key_group(S, "orphan").unwrap();
    assert_eq!(w.foreign_key_group("gone", "p"), Some(orphan));
    assert_eq!(
        w.table_fallbacks("gone", "p"),
        Some(&[Fallback::ForeignKey, Fallback::UnknownTable][..])
    );

    let parent_delete = ws(
        &w,
        &on("parent", vec![delete(0, full(vec![int(1), Value::Null]))]),
    );
    assert_eq!(parent_delete.fallbacks, [Fallback::ForeignKey]);
    assert!(parent_delete.keys.contains(&Key::Table {
        id: group,
        exclusive: true
    }));
    // A cascade may reach any row of the group: a child row with another
    // key, in another schema, conflicts.
    let far = txn(
        "c",
        vec![info("c", "other_child")],
        vec![insert(0, full(vec![int(99), int(5)]))],
    );
    assert!(ws(&w, &far).conflicts(&parent_delete));
    let free = ws(
        &w,
        &on("free", vec![insert(0, full(vec![int(1), Value::Null]))]),
    );
    assert!(!free.conflicts(&parent_delete));
}

#[test]
fn a_table_with_triggers_conflicts_with_everything() {
    let w = Writesets::from_tables(vec![
        TableKeys::new(S, "audited", vec![ColumnDef::new("id", "int")])
            .with_key(UniqueKey::new("PRIMARY", &[0]))
            .with_triggers(),
        users(),
    ]);
    assert_eq!(
        w.table_fallbacks(S, "audited"),
        Some(&[Fallback::Triggers][..])
    );
    let out = ws(&w, &on("audited", vec![insert(0, full(vec![int(1)]))]));
    assert_eq!(out.fallbacks, [Fallback::Triggers]);
    assert!(out.keys.contains(&Key::Global));
    let elsewhere = txn(
        "other",
        vec![info("other", "t")],
        vec![insert(0, full(vec![int(1)]))],
    );
    assert!(ws(&w, &elsewhere).conflicts(&out));
}

#[test]
fn statements_hold_their_shard_exclusively() {
    let w = Writesets::from_tables(vec![
        users(),
        TableKeys::new("trig", "t", vec![ColumnDef::new("id", "int")])
            .with_key(UniqueKey::new("PRIMARY", &[0]))
            .with_triggers(),
        TableKeys::new("fk", "p", vec![ColumnDef::new("id", "int")])
            .with_key(UniqueKey::new("PRIMARY", &[0])),
        TableKeys::new("fk2", "c", vec![ColumnDef::new("id", "int")])
            .with_key(UniqueKey::new("PRIMARY", &[0]))
            .referencing("fk", "p"),
    ]);
    let ddl = ws(
        &w,
        &txn(S, vec![], vec![statement("ALTER TABLE users ADD x INT")]),
    );
    assert_eq!(ddl.fallbacks, [Fallback::Statement]);
    assert_eq!(ddl.keys, [shard_key(S, true)]);
    let row = ws(&w, &on("users", vec![insert(0, user(1, None, "c", ""))]));
    assert!(
        row.conflicts(&ddl),
        "every row change holds its shard's key"
    );
    let other_shard = ws(
        &w,
        &txn(
            "x",
            vec![info("x", "t")],
            vec![insert(0, full(vec![int(1)]))],
        ),
    );
    assert!(!other_shard.conflicts(&ddl));
    // A schema never loaded.
    let unknown_schema = ws(
        &w,
        &txn("new", vec![], vec![statement("CREATE TABLE t (a INT)")]),
    );
    assert_eq!(unknown_schema.keys, [shard_key("new", true)]);
    // #UNKNOWN: anything.
    let anything = ws(
        &w,
        &txn(
            UNKNOWN_SHARD,
            vec![],
            vec![statement("DROP TABLE a.t, b.t")],
        ),
    );
    assert_eq!(anything.keys, [Key::Global]);
    // A schema with a trigger table: statement DML fires it.
    let trig = ws(&w, &txn("trig", vec![], vec![statement("DELETE FROM t")]));
    assert_eq!(trig.fallbacks, [Fallback::Statement, Fallback::Triggers]);
    assert!(trig.keys.contains(&Key::Global));
    // A schema with a table in a foreign-key group: the group's key too
    // (a statement on fk.p cascades into fk2.c).
    let fk = ws(&w, &txn("fk", vec![], vec![statement("DELETE FROM p")]));
    assert_eq!(fk.fallbacks, [Fallback::Statement, Fallback::ForeignKey]);
    let child_row = ws(
        &w,
        &txn(
            "fk2",
            vec![info("fk2", "c")],
            vec![insert(0, full(vec![int(1)]))],
        ),
    );
    assert!(child_row.conflicts(&fk));
}

#[test]
fn annotations_and_restart_rows_hold_nothing() {
    let w = Writesets::from_tables(vec![users()]);
    let restart = txn(
        S,
        vec![info("shardrep_other", "restart_position"), info(S, "users")],
        vec![
            Change::Annotation(b"UPDATE users SET note = 'x'".to_vec()),
            update(0, full(vec![int(0), int(5)]), full(vec![int(0), int(6)])),
        ],
    );
    let out = ws(&w, &restart);
    assert!(out.keys.is_empty(), "{out:?}");
    assert!(out.fallbacks.is_empty());
    assert!(!out.conflicts(&ws(
        &w,
        &txn(UNKNOWN_SHARD, vec![], vec![statement("DROP DATABASE x")])
    )));
}

#[test]
fn row_changes_of_two_tables_of_a_shard_are_independent() {
    let w = Writesets::from_tables(vec![users(), one_key("other", ColumnDef::new("k", "int"))]);
    let a = ws(&w, &on("users", vec![insert(0, user(1, None, "c", ""))]));
    let b = ws(&w, &on("other", vec![insert(0, full(vec![int(1)]))]));
    assert!(!a.conflicts(&b));
    let c = ws(&w, &on("other", vec![delete(0, full(vec![int(1)]))]));
    assert!(b.conflicts(&c));
}

#[test]
fn a_transaction_over_several_tables_and_the_output_is_reused() {
    let w = Writesets::from_tables(vec![users(), one_key("other", ColumnDef::new("k", "int"))]);
    let t = txn(
        S,
        vec![info(S, "users"), info(S, "other")],
        vec![
            insert(0, user(1, None, "c", "")),
            insert(1, full(vec![int(1)])),
            insert(0, user(2, None, "d", "")),
            rows(
                1,
                RowKind::Delete,
                vec![
                    (Some(full(vec![int(2)])), None),
                    (Some(full(vec![int(3)])), None),
                ],
            ),
        ],
    );
    let mut out = Writeset::default();
    w.writeset(&t, &mut out);
    assert_eq!(row_keys(&out).len(), 4 + 3);
    assert_eq!(out.keys.len(), 7 + 3, "two table keys, one shard key");
    let first = out.keys.clone();
    w.writeset(&on("ghost", vec![]), &mut out);
    assert!(out.keys.is_empty(), "cleared");
    w.writeset(&t, &mut out);
    assert_eq!(out.keys, first);
}

#[test]
fn key_conflict_rules() {
    let t = |id, exclusive| Key::Table { id, exclusive };
    let s = |id, exclusive| Key::Shard { id, exclusive };
    let cases = [
        (Key::Row(1), Key::Row(1), true),
        (Key::Row(1), Key::Row(2), false),
        (t(1, false), t(1, false), false),
        (t(1, false), t(1, true), true),
        (t(1, true), t(1, true), true),
        (t(1, true), t(2, true), false),
        (s(1, false), s(1, false), false),
        (s(1, true), s(1, false), true),
        (t(1, true), s(1, true), false),
        (Key::Row(1), t(1, true), false),
        (Key::Global, Key::Row(5), true),
        (Key::Global, s(3, false), true),
        (Key::Global, Key::Global, true),
    ];
    for (a, b, expected) in cases {
        assert_eq!(a.conflicts(b), expected, "{a:?} {b:?}");
        assert_eq!(b.conflicts(a), expected, "{b:?} {a:?}");
    }
}

#[test]
fn fallback_names_are_distinct_snake_case() {
    let names: Vec<&str> = Fallback::ALL.iter().map(|f| f.as_str()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), Fallback::ALL.len());
    for n in names {
        assert!(
            n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{n}"
        );
    }
    assert_eq!(Fallback::PartialImage.to_string(), "partial_image");
}

#[test]
fn unknown_key_types_and_broken_key_parts_fall_back() {
    let w = Writesets::from_tables(vec![
        one_key("geo", ColumnDef::new("k", "point")),
        TableKeys::new(S, "expr", vec![ColumnDef::new("id", "int")])
            .with_key(UniqueKey::new("PRIMARY", &[0]))
            .with_key(UniqueKey::new("fx", &[u16::MAX])),
    ]);
    assert_eq!(w.table_fallbacks(S, "geo"), Some(&[Fallback::KeyType][..]));
    assert_eq!(w.table_fallbacks(S, "expr"), Some(&[Fallback::KeyType][..]));
}

#[test]
fn a_later_definition_replaces_an_earlier_one() {
    let w = Writesets::from_tables(vec![
        TableKeys::new(S, "t", vec![ColumnDef::new("a", "int")]),
        one_key("t", ColumnDef::new("a", "int")),
    ]);
    assert_eq!(w.tables().len(), 1);
    assert_eq!(w.table_fallbacks(S, "t"), Some(&[][..]));
    assert_eq!(w.table(S, "t").unwrap().unique_keys.len(), 1);
}

/// Random case and trailing spaces of an ASCII string.
fn variant(s: &str, flips: &[bool], spaces: usize) -> String {
    let mut v: String = s
        .chars()
        .zip(flips.iter().cycle())
        .map(|(c, &f)| {
            if f {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    v.extend(std::iter::repeat_n(' ', spaces));
    v
}

proptest! {
    #[test]
    fn equal_by_the_fold_gives_equal_row_keys(
        s in "[ -~]{0,80}",
        flips in proptest::collection::vec(any::<bool>(), 1..16),
        spaces in 0usize..5,
        id in any::<u32>(),
        collation in proptest::sample::select(CI_COLLATIONS),
    ) {
        let table = TableKeys::new(
            S,
            "ci",
            vec![
                ColumnDef::new("id", "int").unsigned(),
                ColumnDef::new("k", "varchar").collation(collation),
            ],
        )
        .with_key(UniqueKey::new("PRIMARY", &[0]))
        .with_key(UniqueKey::new("uk", &[1]));
        let w = Writesets::from_tables(vec![table]);
        let v = variant(&s, &flips, spaces);
        prop_assert_eq!(fold_ascii(s.as_bytes()), fold_ascii(v.as_bytes()));
        // The id as FULL metadata gives it, and as NO_LOG does.
        let a = ws(&w, &on("ci", vec![insert(0, full(vec![Value::UInt(u64::from(id)), text(&s)]))]));
        let b = ws(&w, &on("ci", vec![insert(0, full(vec![int(i64::from(id as i32)), text(&v)]))]));
        prop_assert!(a.fallbacks.is_empty());
        prop_assert_eq!(row_keys(&a), row_keys(&b));
    }
}
