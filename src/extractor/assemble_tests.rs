//! Unit tests of [`super`] (`extractor/assemble.rs`).

use super::*;
use crate::event::{ColumnInfo, RowImage, RowKind, RowPair, TableInfo, Value};
use crate::extractor::EventHeader;

fn pos(offset: u64) -> BinlogPosition {
    BinlogPosition::new("mariadb-bin.000001", offset).unwrap()
}

fn event(offset: u64, body: EventBody) -> BinlogEvent {
    BinlogEvent {
        header: EventHeader {
            timestamp: 1_700_000_000 + offset as u32,
            type_code: 0,
            server_id: 7,
            event_size: 10,
            log_pos: (offset + 10) as u32,
            flags: 0,
        },
        position: pos(offset),
        body,
    }
}

/// The TABLE_MAP event of `t`, as the decoder hands it out.
fn mapped(t: TableInfo) -> EventBody {
    EventBody::TableMap(std::sync::Arc::new(t))
}

fn table(id: u64, schema: &str) -> TableInfo {
    TableInfo {
        table_id: id,
        schema: schema.into(),
        table: "t".into(),
        columns: vec![ColumnInfo {
            column_type: crate::event::column_type::LONG,
            meta: 0,
            nullable: false,
            name: Some("id".into()),
            unsigned: Some(false),
            charset: None,
        }],
        primary_key: Some(vec![0]),
    }
}

fn insert(id: u64, v: i64) -> EventBody {
    EventBody::Rows {
        table_id: id,
        kind: RowKind::Insert,
        flags: 1,
        rows: vec![RowPair {
            before: None,
            after: Some(RowImage {
                columns: vec![0],
                values: vec![Value::Int(v)],
            }),
        }],
    }
}

fn gtid(seq: u64, flags: u8) -> EventBody {
    EventBody::MariadbGtid {
        gtid: Gtid::new(0, 7, seq),
        commit_id: None,
        flags,
    }
}

fn statement(sql: &str, db: Option<&str>) -> EventBody {
    EventBody::Query(Statement {
        sql: sql.as_bytes().to_vec(),
        default_schema: db.map(str::to_string),
        context: SessionContext::default(),
        error_code: 0,
        thread_id: None,
    })
}

/// Feeds events at offsets 100, 110, ... and collects transactions.
fn run(a: &mut Assembler, bodies: Vec<EventBody>) -> Result<Vec<Transaction>, ExtractError> {
    let mut out = Vec::new();
    for (i, body) in bodies.into_iter().enumerate() {
        let offset = 100 + 10 * i as u64;
        if let Some(t) = a.push(event(offset, body), &pos(offset + 10))? {
            out.push(t);
        }
    }
    Ok(out)
}

fn xa_prepare(one_phase: bool) -> EventBody {
    EventBody::XaPrepare {
        one_phase,
        xid: crate::xa::Xid {
            format_id: 1,
            gtrid: b"g".to_vec(),
            bqual: Vec::new(),
        },
    }
}

/// An XA PREPARE group ends at XA_PREPARE, which must follow the XA END
/// of its xid inside a transaction; ONE PHASE is refused; the
/// resume position moves past it.
#[test]
fn xa_prepare_groups() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            gtid(1, 64 | 4 | 8),
            mapped(table(3, "s")),
            insert(3, 1),
            statement("XA END X'67',X'',1", Some("s")),
            xa_prepare(false),
        ],
    )
    .unwrap();
    assert_eq!(txns.len(), 1);
    assert_eq!(txns[0].shard, UNKNOWN_SHARD);
    assert_eq!(a.resume_position(), &pos(150));
    assert!(matches!(
        crate::xa::xa_role(&txns[0]),
        Some(crate::xa::XaRole::Prepare(_))
    ));
    for (bodies, want) in [
        (vec![xa_prepare(false)], "XA_PREPARE outside a transaction"),
        (
            vec![gtid(2, 64 | 4), insert(3, 1), xa_prepare(false)],
            "not preceded by XA END",
        ),
        (
            vec![
                gtid(2, 64 | 4),
                statement("XA END X'68'", None),
                xa_prepare(false),
            ],
            "not preceded by XA END",
        ),
        (
            vec![
                gtid(2, 64 | 4),
                statement("XA END X'67'", None),
                xa_prepare(true),
            ],
            "one_phase",
        ),
    ] {
        let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
        let mut bodies = bodies;
        if bodies.len() == 3 && matches!(bodies[1], EventBody::Rows { .. }) {
            bodies.insert(1, mapped(table(3, "s")));
        }
        let err = run(&mut a, bodies).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn mariadb_row_transaction_ends_at_xid_with_its_position_and_shard() {
    let mut a = Assembler::new(Seqno(5), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            gtid(42, 0),
            EventBody::AnnotateRows(b"insert into t values (1)".to_vec()),
            mapped(table(70, "acme")),
            insert(70, 1),
            EventBody::Xid(9),
        ],
    )
    .unwrap();
    assert_eq!(txns.len(), 1);
    let t = &txns[0];
    assert_eq!(t.seqno, Seqno(5));
    assert_eq!(t.gtid, Some(Gtid::new(0, 7, 42)));
    assert_eq!(t.server_id, 7);
    assert_eq!(t.start_position, pos(100));
    assert_eq!(t.end_position, pos(150));
    assert_eq!(t.commit_timestamp, 1_700_000_140);
    assert_eq!(t.shard, "acme");
    assert_eq!(t.changes.len(), 2);
    assert_eq!(a.resume_position(), &pos(150));
    assert_eq!(a.gtid_position().to_string(), "0-7-42");
    assert_eq!(a.next_seqno(), Seqno(6));
}

#[test]
fn standalone_ddl_is_one_transaction_of_its_schema() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            gtid(1, GTID_FL_STANDALONE),
            statement("CREATE TABLE t (id INT)", Some("acme")),
            gtid(2, GTID_FL_STANDALONE),
            statement("CREATE DATABASE `we``ird`", None),
            gtid(3, GTID_FL_STANDALONE),
            statement("CREATE TABLE t (id INT)", None),
        ],
    )
    .unwrap();
    assert_eq!(txns.len(), 3);
    // Unqualified DDL belongs to its default schema; without one it
    // cannot be attributed and is critical.
    assert_eq!(txns[0].shard, "acme");
    assert_eq!(txns[2].shard, UNKNOWN_SHARD);
    assert_eq!(txns[0].end_position, pos(120));
    assert_eq!(txns[1].shard, "we`ird");
    assert_eq!(txns[1].seqno, Seqno(1));
}

#[test]
fn two_schemas_give_unknown_shard() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            EventBody::Begin,
            mapped(table(1, "a")),
            mapped(table(2, "b")),
            insert(1, 1),
            insert(2, 2),
            EventBody::Commit,
        ],
    )
    .unwrap();
    assert_eq!(txns[0].shard, UNKNOWN_SHARD);
    assert_eq!(txns[0].gtid, None);
}

#[test]
fn another_services_restart_rows_do_not_count_for_the_shard() {
    let restart = |id: u64, schema: &str| TableInfo {
        table: "restart_position".into(),
        ..table(id, schema)
    };
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            // Data applied by service nyc, with its restart row.
            EventBody::Begin,
            mapped(table(1, "pinnacle")),
            mapped(restart(2, "shardrep_nyc")),
            insert(1, 1),
            insert(2, 2),
            EventBody::Commit,
            // A sync of nyc's restart row alone.
            EventBody::Begin,
            mapped(restart(2, "shardrep_nyc")),
            insert(2, 3),
            EventBody::Commit,
            // A user table in a schema named like a catalog is a shard.
            EventBody::Begin,
            mapped(table(3, "shardrep_data")),
            mapped(table(1, "pinnacle")),
            insert(3, 4),
            insert(1, 5),
            EventBody::Commit,
        ],
    )
    .unwrap();
    let shards: Vec<&str> = txns.iter().map(|t| t.shard.as_str()).collect();
    assert_eq!(shards, ["pinnacle", "shardrep_nyc", UNKNOWN_SHARD]);
}

#[test]
fn session_events_attach_to_the_next_statement() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            gtid(1, 0),
            EventBody::Intvar { kind: 2, value: 77 },
            EventBody::Rand { seed1: 1, seed2: 2 },
            statement("INSERT INTO t VALUES (NULL, RAND())", Some("acme")),
            EventBody::Commit,
        ],
    )
    .unwrap();
    let Change::Statement(s) = &txns[0].changes[0] else {
        panic!("expected a statement")
    };
    assert_eq!(s.context.insert_id, Some(77));
    assert_eq!(s.context.rand_seeds, Some((1, 2)));
}

#[test]
fn rows_outside_a_transaction_and_unmapped_tables_are_errors() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let err = run(&mut a, vec![insert(1, 1)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "binlog mariadb-bin.000001:100: rows event outside a transaction"
    );
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let err = run(&mut a, vec![gtid(1, 0), insert(9, 1)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "binlog mariadb-bin.000001:110: rows event for table id 9 without a TABLE_MAP in its transaction"
    );
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let err = run(&mut a, vec![gtid(1, 0), gtid(2, 0)]).unwrap_err();
    assert!(err.to_string().contains("previous transaction never ended"));
}

#[test]
fn discard_partial_keeps_the_last_complete_position() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    run(
        &mut a,
        vec![
            gtid(1, 0),
            mapped(table(1, "a")),
            insert(1, 1),
            EventBody::Xid(1),
            gtid(2, 0),
            mapped(table(1, "a")),
        ],
    )
    .unwrap();
    assert!(a.in_transaction());
    a.discard_partial();
    assert!(!a.in_transaction());
    assert_eq!(a.resume_position(), &pos(140));
    assert_eq!(a.gtid_position().to_string(), "0-7-1");
    assert_eq!(a.next_seqno(), Seqno(1));
}

#[test]
fn rollback_is_kept_as_the_last_statement() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            EventBody::Begin,
            mapped(table(1, "a")),
            insert(1, 1),
            EventBody::Rollback,
        ],
    )
    .unwrap();
    let Change::Statement(s) = txns[0].changes.last().unwrap() else {
        panic!("expected ROLLBACK")
    };
    assert_eq!(s.sql, b"ROLLBACK");
    assert_eq!(txns[0].shard, "a");
}

#[test]
fn statements_are_attributed_by_the_statement_rule() {
    let txn = |changes: Vec<EventBody>| {
        let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
        let mut bodies = vec![gtid(1, 0)];
        bodies.extend(changes);
        bodies.push(EventBody::Commit);
        run(&mut a, bodies).unwrap().remove(0)
    };
    // Statement-format DML in its default schema, with row changes of
    // the same schema and a savepoint.
    let t = txn(vec![
        statement("INSERT INTO a VALUES (1)", Some("shard_q1")),
        statement("SAVEPOINT s1", Some("shard_q1")),
        mapped(table(1, "shard_q1")),
        insert(1, 1),
        statement("ROLLBACK TO SAVEPOINT s1", Some("shard_q1")),
    ]);
    assert_eq!(t.shard, "shard_q1");
    // B18: the default schema is not the changed schema.
    let t = txn(vec![statement(
        "UPDATE shard_q2.b SET v = v + 5 WHERE id = 1",
        Some("shard_q1"),
    )]);
    assert_eq!(t.shard, UNKNOWN_SHARD);
    // A statement of one schema with rows of another.
    let t = txn(vec![
        statement("INSERT INTO a VALUES (1)", Some("shard_q1")),
        mapped(table(1, "shard_q2")),
        insert(1, 1),
    ]);
    assert_eq!(t.shard, UNKNOWN_SHARD);
    // An unparseable statement.
    let t = txn(vec![statement(
        "LOAD DATA INFILE 'x' INTO TABLE a",
        Some("q"),
    )]);
    assert_eq!(t.shard, UNKNOWN_SHARD);
}

#[test]
fn database_statements_give_their_database() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    let txns = run(
        &mut a,
        vec![
            gtid(1, GTID_FL_STANDALONE),
            statement("create database if not exists foo", Some("bar")),
            gtid(2, GTID_FL_STANDALONE),
            statement("DROP SCHEMA IF EXISTS `a``b`", None),
            gtid(3, GTID_FL_STANDALONE),
            statement("DROP TABLE x", None),
        ],
    )
    .unwrap();
    let shards: Vec<&str> = txns.iter().map(|t| t.shard.as_str()).collect();
    assert_eq!(shards, ["foo", "a`b", UNKNOWN_SHARD]);
}
