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

/// A transaction of ten single-row inserts in one statement (the TABLE_MAP
/// once, before the first), as events at offsets 100, 110, ...
fn large_transaction() -> Vec<EventBody> {
    let mut bodies = vec![gtid(1, 0), mapped(table(5, "db"))];
    for v in 0..10 {
        let mut rows = insert(5, v);
        if let EventBody::Rows { flags, .. } = &mut rows {
            // STMT_END only on the last rows event of the statement.
            *flags = u16::from(v == 9);
        }
        bodies.push(rows);
    }
    bodies.push(EventBody::Xid(1));
    bodies
}

/// Feeds `bodies` (offsets as [`run`]) with raw bytes: a TABLE_MAP's raw
/// event is `b"MAP"`, a rows event's `b"ROW<n>"`.
fn run_raw(a: &mut Assembler, bodies: Vec<EventBody>) -> Result<Vec<Transaction>, ExtractError> {
    let mut out = Vec::new();
    a.push_raw(
        event(
            4,
            EventBody::FormatDescription(crate::extractor::FormatDescription {
                binlog_version: 4,
                server_version: "10.11".into(),
                post_header_lengths: Vec::new(),
                checksum: crate::extractor::ChecksumAlg::None,
            }),
        ),
        &pos(4),
        Some(b"FDE".to_vec()),
    )?;
    for (i, body) in bodies.into_iter().enumerate() {
        let offset = 100 + 10 * i as u64;
        let raw = match &body {
            EventBody::TableMap(_) => Some(b"MAP".to_vec()),
            EventBody::Rows { rows, .. } => match rows[0].after.as_ref().map(|r| &r.values[0]) {
                Some(Value::Int(v)) => Some(format!("ROW{v}").into_bytes()),
                _ => Some(b"ROW".to_vec()),
            },
            _ => None,
        };
        if let Some(t) = a.push_raw(event(offset, body), &pos(offset + 10), raw)? {
            out.push(t);
        }
    }
    Ok(out)
}

fn inserted(txns: &[Transaction]) -> Vec<i64> {
    txns.iter()
        .flat_map(|t| &t.changes)
        .filter_map(|c| match c {
            Change::Rows(r) => match r.rows[0].after.as_ref().map(|i| &i.values[0]) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Past `fragment_bytes` a transaction comes out as fragments: dense
/// seqnos, indexes from 0, only the last marked last and ending at the
/// XID; positions chained; every change once, in order; each fragment with
/// the table definitions it uses and, mid-statement, the statement's
/// TABLE_MAP in front of its first rows event (the server skips a rows
/// event whose table id is not mapped).
#[test]
fn a_large_transaction_is_cut_into_fragments() {
    let mut a = Assembler::new(Seqno(3), pos(4), GtidPos::new());
    a.set_fragment_bytes(Some(60));
    let txns = run_raw(&mut a, large_transaction()).unwrap();
    assert!(txns.len() >= 3, "{} fragments", txns.len());
    for (i, t) in txns.iter().enumerate() {
        assert_eq!(t.seqno, Seqno(3 + i as u64));
        let f = t.fragment.expect("a fragment");
        assert_eq!(f.index, i as u32);
        assert_eq!(f.last, i == txns.len() - 1);
        assert_eq!(t.gtid, Some(Gtid::new(0, 7, 1)));
        assert_eq!(
            t.shard,
            if t.changes.is_empty() {
                UNKNOWN_SHARD
            } else {
                "db"
            }
        );
        assert_eq!(t.tables.len(), 1);
        if i > 0 {
            assert_eq!(t.start_position, txns[i - 1].end_position);
        }
        if let Some(events) = &t.row_events {
            assert_eq!(events.format, b"FDE");
            assert!(
                events.rows[0].0.starts_with(b"MAP"),
                "fragment {i} starts without its map: {:?}",
                String::from_utf8_lossy(&events.rows[0].0)
            );
            assert_eq!(events.rows.len(), t.changes.len());
        }
    }
    assert_eq!(txns[0].start_position, pos(100));
    assert_eq!(txns.last().unwrap().end_position, pos(230));
    assert_eq!(inserted(&txns), (0..10).collect::<Vec<_>>());
    assert_eq!(a.resume_position(), &pos(230));
    assert_eq!(a.next_seqno(), Seqno(3 + txns.len() as u64));
    // Without a bound, one whole transaction.
    let mut whole = Assembler::new(Seqno(3), pos(4), GtidPos::new());
    let one = run_raw(&mut whole, large_transaction()).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].fragment, None);
}

/// An extraction that resumes at the transaction's start after its first
/// fragments were stored ([`Assembler::resume_inside`]) gives exactly the
/// fragments that were missing; so does one that reconnects
/// ([`Assembler::discard_partial`]) after some fragments came out.
#[test]
fn fragments_continue_where_the_stored_ones_end() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    a.set_fragment_bytes(Some(60));
    let all = run_raw(&mut a, large_transaction()).unwrap();
    for stored in 1..all.len() {
        let through = &all[stored - 1];
        let mut b = Assembler::new(through.seqno.next(), pos(4), GtidPos::new());
        b.set_fragment_bytes(Some(60));
        b.resume_inside(through.end_position.clone(), stored as u32);
        let rest = run_raw(&mut b, large_transaction()).unwrap();
        assert_eq!(rest, all[stored..].to_vec(), "after {stored} stored");
    }
    // A reconnect after two fragments: the events again from the start.
    let mut c = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    c.set_fragment_bytes(Some(60));
    let mut out = Vec::new();
    let bodies = large_transaction();
    let mut fed = 0;
    for (i, body) in bodies.clone().into_iter().enumerate() {
        let offset = 100 + 10 * i as u64;
        if let Some(t) = c.push(event(offset, body), &pos(offset + 10)).unwrap() {
            out.push(t);
        }
        fed += 1;
        if out.len() == 2 {
            break;
        }
    }
    assert!(fed < bodies.len());
    c.discard_partial();
    assert_eq!(c.resume_position(), &pos(4), "never inside the transaction");
    out.extend(run(&mut c, bodies).unwrap());
    let indexes: Vec<u32> = out.iter().map(|t| t.fragment.unwrap().index).collect();
    assert_eq!(indexes, (0..out.len() as u32).collect::<Vec<_>>());
    assert_eq!(inserted(&out), (0..10).collect::<Vec<_>>());
}

/// XA transactions and standalone statements are never cut.
#[test]
fn xa_transactions_are_not_cut() {
    let mut a = Assembler::new(Seqno(0), pos(4), GtidPos::new());
    a.set_fragment_bytes(Some(1));
    let mut bodies = large_transaction();
    bodies[0] = gtid(1, GTID_FL_PREPARED_XA);
    let txns = run(&mut a, bodies).unwrap();
    assert_eq!(txns.len(), 1);
    assert_eq!(txns[0].fragment, None);
}
