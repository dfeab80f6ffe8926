//! Unit and property tests of the row decoders, on hand-built events and the
//! fixtures under `tests/fixtures/binlog/cases/`.

use super::*;
use crate::extractor::decimal::DIG2BYTES;
use std::collections::HashMap;

// -- fixture walker ---------------------------------------------------

/// One rows event of a fixture, with the table map it used.
struct RowsEv {
    table: TableInfo,
    type_code: u8,
    decoded: Result<DecodedRows, String>,
    body: Vec<u8>,
    phl: u8,
}

/// Raw events of a binlog file: (type code, body without checksum).
/// Also returns the post-header lengths of the FORMAT_DESCRIPTION.
fn raw_events(bytes: &[u8]) -> (Vec<(u8, Vec<u8>)>, Vec<u8>) {
    assert_eq!(&bytes[..4], &[0xfe, b'b', b'i', b'n'], "binlog magic");
    let mut pos = 4;
    let mut crc = false;
    let mut phls = Vec::new();
    let mut out = Vec::new();
    while pos < bytes.len() {
        let h = &bytes[pos..pos + 19];
        let t = h[4];
        let size = u32::from_le_bytes([h[9], h[10], h[11], h[12]]) as usize;
        let mut body = &bytes[pos + 19..pos + size];
        if t == 15 {
            // FORMAT_DESCRIPTION: the checksum algorithm is the byte
            // before its own 4-byte CRC; the post-header lengths run
            // from byte 57 to the algorithm byte.
            crc = body[body.len() - 5] == 1;
            let end = if crc { body.len() - 5 } else { body.len() };
            phls = body[57..end].to_vec();
        } else if crc {
            body = &body[..body.len() - 4];
        }
        out.push((t, body.to_vec()));
        pos += size;
    }
    (out, phls)
}

fn fixture_path(name: &str) -> String {
    format!(
        "{}/tests/fixtures/binlog/cases/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The rows events of a fixture file, decoded against its table maps.
fn fixture(name: &str) -> Vec<RowsEv> {
    let bytes = std::fs::read(fixture_path(name)).expect("fixture file");
    walk(&bytes)
}

fn walk(bytes: &[u8]) -> Vec<RowsEv> {
    let (events, phls) = raw_events(bytes);
    let phl = |t: u8| phls.get(usize::from(t) - 1).copied().unwrap_or(0);
    let mut tables: HashMap<u64, TableInfo> = HashMap::new();
    let mut out = Vec::new();
    for (t, body) in events {
        match t {
            19 => {
                let info = parse_table_map(&body, phl(19)).expect("table map");
                tables.insert(info.table_id, info);
            }
            23..=25 | 30..=32 | 166..=168 => {
                let decoded = decode_rows(&body, t, phl(t), |id| tables.get(&id));
                let id = u64::from_le_bytes([
                    body[0], body[1], body[2], body[3], body[4], body[5], 0, 0,
                ]);
                out.push(RowsEv {
                    table: tables[&id].clone(),
                    type_code: t,
                    decoded,
                    body: body.clone(),
                    phl: phl(t),
                });
            }
            _ => {}
        }
    }
    out
}

/// The decoded rows of the fixture's events on `table`, in order, each
/// event's kind with its rows; panics on a decode error.
fn rows_of(evs: &[RowsEv], table: &str) -> Vec<(RowKind, Vec<RowPair>)> {
    evs.iter()
        .filter(|e| e.table.table == table)
        .map(|e| {
            let d = e.decoded.as_ref().unwrap_or_else(|err| panic!("{err}"));
            (d.kind, d.rows.clone())
        })
        .collect()
}

/// All the images of one kind, in order, flattened.
fn inserts(evs: &[RowsEv], table: &str) -> Vec<Vec<Value>> {
    rows_of(evs, table)
        .into_iter()
        .filter(|(k, _)| *k == RowKind::Insert)
        .flat_map(|(_, rows)| rows)
        .map(|r| r.after.expect("after image").values)
        .collect()
}

// -- value helpers ------------------------------------------------------

const N: Value = Value::Null;

fn i(v: i64) -> Value {
    Value::Int(v)
}
fn u(v: u64) -> Value {
    Value::UInt(v)
}
fn d(s: &str) -> Value {
    Value::Decimal(s.into())
}
fn s(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}
fn b(b: &[u8]) -> Value {
    Value::Bytes(b.to_vec())
}
fn time(negative: bool, hours: u32, minutes: u8, seconds: u8, micros: u32) -> Value {
    Value::Time {
        negative,
        hours,
        minutes,
        seconds,
        micros,
    }
}
fn date(year: u16, month: u8, day: u8) -> Value {
    Value::Date { year, month, day }
}
fn dt(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8, micros: u32) -> Value {
    Value::DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        micros,
    }
}
fn ts(seconds: u32, micros: u32) -> Value {
    Value::Timestamp { seconds, micros }
}
fn image(columns: &[u16], values: Vec<Value>) -> Option<RowImage> {
    Some(RowImage {
        columns: columns.to_vec(),
        values,
    })
}
fn all(n: u16) -> Vec<u16> {
    (0..n).collect()
}

// -- case fixtures --------------------------------------------------------

// B01: DECIMAL keeps every digit and the sign; zero is never "-0";
// exactly `scale` fraction digits.
#[test]
fn decimal_values_are_exact_text_b01() {
    let evs = fixture("B01");
    assert_eq!(
        inserts(&evs, "d"),
        vec![
            vec![
                i(1),
                d("99999999999999999999999999999999999999"),
                d("9999999999999999999.9999999999999999999"),
                d("0.99999999999999999999999999999999999999"),
                d("500.00"),
                d("0.000000756500000000"),
                d("12345678901234567890123456789012345.123456789012345678901234567890"),
            ],
            vec![
                i(2),
                d("-99999999999999999999999999999999999999"),
                d("-9999999999999999999.9999999999999999999"),
                d("-0.99999999999999999999999999999999999999"),
                d("-0.05"),
                d("100000.000000000000000001"),
                d("-0.000000000000000000000000000001"),
            ],
            vec![
                i(3),
                d("0"),
                d("0.0000000000000000000"),
                d("0.00000000000000000000000000000000000000"),
                d("0.00"),
                d("0.000000000000000000"),
                d("0.000000000000000000000000000000"),
            ],
            vec![
                i(4),
                d("-1"),
                d("-0.5000000000000000000"),
                d("-0.00000000000000000000000000000000000001"),
                d("-12345678.99"),
                d("1.000000000000000000"),
                d("1.000000000000000000000000000000"),
            ],
        ]
    );
    let t = &evs[0].table;
    assert_eq!(t.columns[5].name.as_deref(), Some("f"));
    assert_eq!(t.columns[5].unsigned, Some(true));
    assert_eq!(t.columns[6].unsigned, Some(false));
    assert_eq!(t.columns[3].meta, 38 << 8 | 38);
}

// B02: negative and fractional TIME2, every sign and limit.
#[test]
fn negative_fractional_time_b02() {
    let evs = fixture("B02");
    assert_eq!(
        inserts(&evs, "t"),
        vec![
            vec![
                i(1),
                time(true, 838, 59, 59, 0),
                time(true, 0, 0, 0, 10_000),
                time(true, 838, 59, 59, 0),
            ],
            vec![
                i(2),
                time(true, 0, 0, 1, 0),
                time(true, 12, 34, 56, 780_000),
                time(true, 0, 0, 0, 1),
            ],
            vec![
                i(3),
                time(false, 838, 59, 59, 0),
                time(false, 0, 0, 0, 0),
                time(false, 16, 8, 4, 10_123),
            ],
            vec![
                i(4),
                time(true, 16, 8, 4, 0),
                time(true, 16, 8, 4, 10_000),
                time(true, 16, 8, 4, 10_123),
            ],
        ]
    );
}

// B04: zero and partial-zero dates kept as their fields, in inserts and
// in the UPDATE's before image.
#[test]
fn zero_and_partial_zero_dates_b04() {
    let evs = fixture("B04");
    let rows = rows_of(&evs, "z");
    let row3 = vec![
        i(3),
        date(2023, 5, 0),
        dt(0, 0, 0, 0, 0, 1, 0),
        dt(0, 0, 0, 0, 0, 0, 1),
        ts(0, 0),
    ];
    assert_eq!(
        inserts(&evs, "z"),
        vec![
            vec![
                i(1),
                date(0, 0, 0),
                dt(0, 0, 0, 0, 0, 0, 0),
                dt(0, 0, 0, 0, 0, 0, 0),
                ts(0, 0),
            ],
            vec![
                i(2),
                date(2023, 0, 15),
                dt(2023, 0, 15, 10, 0, 0, 0),
                dt(2023, 5, 0, 10, 0, 0, 1),
                ts(1, 0),
            ],
            row3.clone(),
        ]
    );
    let mut after = row3.clone();
    after[1] = date(2020, 2, 2);
    assert_eq!(
        rows[1],
        (
            RowKind::Update,
            vec![RowPair {
                before: image(&all(5), row3),
                after: image(&all(5), after),
            }]
        )
    );
}

// B05: YEAR 0 is 0000 (not 1900); YEAR takes a bit of SIGNEDNESS, so the
// INT after it stays signed.
#[test]
fn year_zero_and_signedness_after_year_b05() {
    let evs = fixture("B05");
    assert_eq!(
        inserts(&evs, "y"),
        vec![
            vec![i(1), Value::Year(0), i(8_489_734)],
            vec![i(2), Value::Year(1901), i(-1)],
            vec![i(3), Value::Year(2155), i(0)],
            vec![i(4), Value::Year(1999), N],
            vec![i(5), N, i(7)],
        ]
    );
    let t = &evs[0].table;
    assert_eq!(
        t.columns[1].unsigned,
        Some(true),
        "YEAR is an unsigned field"
    );
    assert_eq!(
        t.columns[2].unsigned,
        Some(false),
        "n after YEAR stays signed"
    );
}

fn b07_rows() -> (Vec<Vec<Value>>, Vec<Value>, Vec<Value>) {
    let j1_ess = vec![
        s("j1"),
        Value::Enum(2),
        Value::Enum(3),
        Value::Set(261),
        s("x"),
    ];
    let j1_rfs = vec![
        s("j1"),
        Value::Enum(1),
        Value::Enum(1),
        Value::Set(0),
        s("y"),
    ];
    let inserts = vec![
        j1_ess.clone(),
        j1_rfs.clone(),
        vec![
            s("j2"),
            Value::Enum(2),
            Value::Enum(0),
            Value::Set(2),
            s("z"),
        ],
        vec![s("j3"), Value::Enum(2), N, N, N],
    ];
    (inserts, j1_ess, j1_rfs)
}

fn assert_b07(evs: &[RowsEv]) {
    let (ins, j1_ess, j1_rfs) = b07_rows();
    assert_eq!(inserts(evs, "e"), ins);
    let rows = rows_of(evs, "e");
    let mut upd = j1_ess.clone();
    upd[4] = s("upd");
    assert_eq!(rows[1].1[0].before, image(&all(5), j1_ess));
    assert_eq!(rows[1].1[0].after, image(&all(5), upd));
    assert_eq!(rows[2].0, RowKind::Delete);
    assert_eq!(
        rows[2].1,
        vec![RowPair {
            before: image(&all(5), j1_rfs),
            after: None
        }]
    );
}

// B07: ENUM/SET as their stored numbers, index 0 included; ENUM inside
// the primary key.
#[test]
fn enum_and_set_numbers_b07() {
    let evs = fixture("B07");
    assert_b07(&evs);
    let t = &evs[0].table;
    assert_eq!(t.primary_key, Some(vec![0, 1]));
    assert_eq!(real_type(&t.columns[1]), ct::ENUM);
    assert_eq!(real_type(&t.columns[3]), ct::SET);
    let charsets: Vec<_> = t.columns.iter().map(|c| c.charset).collect();
    assert_eq!(charsets, vec![Some(45); 5]);
    let names: Vec<_> = t.columns.iter().map(|c| c.name.clone().unwrap()).collect();
    assert_eq!(names, ["job_id", "kind", "size", "flags", "note"]);
}

// B07 with binlog_row_metadata=MINIMAL: no names, no primary key, the
// values unchanged.
#[test]
fn enum_and_set_with_minimal_metadata_b07() {
    let evs = fixture("B07-minimal");
    assert_b07(&evs);
    let t = &evs[0].table;
    assert_eq!(t.primary_key, None);
    assert!(t.columns.iter().all(|c| c.name.is_none()));
    assert_eq!(t.columns[0].charset, Some(45));
    assert_eq!(t.columns[1].charset, None, "ENUM charsets are FULL-only");
}

// B08: MariaDB JSON is LONGTEXT: the bytes exactly as stored.
#[test]
fn mariadb_json_is_exact_text_b08() {
    let evs = fixture("B08");
    let doc1 =
        r#"{"a":true,"c":"d","ab":"t\"q","bc":["x","y"],"n":18446744073709551615,"f":-1.5e-7}"#;
    let doc2 = r#"{"k":"\u00e9\ud83d\ude00","nested":{"deep":[1,{"x":null}]}}"#;
    let doc1_upd = r#"{"a": true, "c": "e", "ab": "t\"q", "bc": ["x", "y"], "n": 18446744073709551615, "f": -1.5e-7, "new": 42}"#;
    assert_eq!(doc2.len(), 59);
    assert_eq!(doc1_upd.len(), 105);
    assert_eq!(
        inserts(&evs, "j"),
        vec![vec![i(1), s(doc1), s("[]")], vec![i(2), s(doc2), N]]
    );
    let rows = rows_of(&evs, "j");
    assert_eq!(
        rows[1].1[0].before,
        image(&all(3), vec![i(1), s(doc1), s("[]")])
    );
    assert_eq!(
        rows[1].1[0].after,
        image(&all(3), vec![i(1), s(doc1_upd), s("[]")])
    );
    assert_eq!(evs[0].table.columns[1].column_type, ct::BLOB);
    assert_eq!(evs[0].table.columns[1].charset, Some(46));
}

// B09: unsigned integers from the SIGNEDNESS metadata.
#[test]
fn unsigned_integers_from_metadata_b09() {
    let evs = fixture("B09");
    let r41002 = vec![
        u(41002),
        u(255),
        u(65535),
        u(16_777_215),
        u(4_294_967_295),
        u(u64::MAX),
        i(i64::MIN),
        Value::Float(3.5),
        Value::Double(-0.1),
    ];
    assert_eq!(
        inserts(&evs, "u"),
        vec![
            r41002.clone(),
            vec![
                u(1),
                u(200),
                u(33000),
                u(8_888_607),
                u(2_247_483_647),
                u(9_323_372_036_854_775_807),
                i(i64::MAX),
                Value::Float(0.0),
                Value::Double(1.797_693_134_862_315_7e308),
            ],
            vec![
                u(2),
                u(128),
                u(32768),
                u(8_388_608),
                u(2_147_483_648),
                u(9_223_372_036_854_775_808),
                i(-1),
                N,
                Value::Double(f64::from_bits(1)),
            ],
        ]
    );
    let rows = rows_of(&evs, "u");
    let mut after = r41002.clone();
    after[1] = u(254);
    assert_eq!(rows[1].1[0].before, image(&all(9), r41002));
    assert_eq!(rows[1].1[0].after, image(&all(9), after));
}

// B09 with binlog_row_metadata=NO_LOG: signedness unknown, so the
// signed reading (the applier reinterprets it with the replica's
// definition); MEDIUMINT sign extended.
#[test]
fn unknown_signedness_gives_signed_reading_b09() {
    let evs = fixture("B09-nolog");
    let t = &evs[0].table;
    assert!(t
        .columns
        .iter()
        .all(|c| c.unsigned.is_none() && c.name.is_none()));
    let got = inserts(&evs, "u");
    assert_eq!(
        got[0],
        vec![
            i(41002 - 65536),
            i(-1),
            i(-1),
            i(-1),
            i(-1),
            i(-1),
            i(i64::MIN),
            Value::Float(3.5),
            Value::Double(-0.1),
        ]
    );
    assert_eq!(
        got[1][..6],
        [
            i(1),
            i(200 - 256),
            i(33000 - 65536),
            i(8_888_607 - 16_777_216),
            i(2_247_483_647 - 4_294_967_296),
            i(9_323_372_036_854_775_807_u64 as i64),
        ]
    );
    assert_eq!(
        got[2][..6],
        [
            i(2),
            i(-128),
            i(-32768),
            i(-8_388_608),
            i(-2_147_483_648),
            i(i64::MIN)
        ]
    );
}

// B12: MINIMAL and NOBLOB images: only the logged columns, "absent"
// distinct from NULL, null bitmap as wide as the present columns.
#[test]
fn minimal_and_noblob_images_b12() {
    let evs = fixture("B12");
    let m = rows_of(&evs, "m");
    let upd = |before: Option<RowImage>, after: Option<RowImage>| RowPair { before, after };
    let mut full1 = vec![i(1)];
    full1.extend((1..=9).map(i));
    full1.extend([s("ten"), i(11)]);
    let mut full2 = vec![i(2)];
    full2.extend(std::iter::repeat_n(N, 10));
    full2.push(i(0));
    assert_eq!(
        m,
        vec![
            (
                RowKind::Insert,
                vec![
                    upd(None, image(&all(12), full1)),
                    upd(None, image(&all(12), full2)),
                ]
            ),
            (
                RowKind::Update,
                vec![upd(image(&[0], vec![i(1)]), image(&[9], vec![N]))]
            ),
            (
                RowKind::Update,
                vec![upd(
                    image(&[0], vec![i(2)]),
                    image(&[2, 10], vec![i(22), s("x")])
                )]
            ),
            (
                RowKind::Insert,
                vec![upd(None, image(&[0, 5], vec![i(3), i(55)]))]
            ),
            (
                RowKind::Update,
                vec![upd(image(&[0], vec![i(3)]), image(&[0], vec![i(30)]))]
            ),
            (RowKind::Delete, vec![upd(image(&[0], vec![i(2)]), None)]),
        ]
    );
    let nb = rows_of(&evs, "nb");
    let body = "a".repeat(1000);
    assert_eq!(
        nb,
        vec![
            (
                RowKind::Insert,
                vec![
                    upd(
                        None,
                        image(
                            &all(5),
                            vec![i(1), s(&body), b(&[0xde, 0xad, 0xbe, 0xef]), i(0), N]
                        )
                    ),
                    upd(None, image(&all(5), vec![i(2), s("b"), N, i(0), s("n")])),
                ]
            ),
            (
                RowKind::Update,
                vec![
                    upd(
                        image(&[0, 3], vec![i(1), i(0)]),
                        image(&[0, 3], vec![i(1), i(1)])
                    ),
                    upd(
                        image(&[0, 3], vec![i(2), i(0)]),
                        image(&[0, 3], vec![i(2), i(1)])
                    ),
                ]
            ),
            (
                RowKind::Update,
                vec![upd(
                    image(&[0, 3], vec![i(2), i(1)]),
                    image(&[0, 2, 3], vec![i(2), b(&[0xca, 0xfe]), i(1)])
                )]
            ),
            (
                RowKind::Delete,
                vec![upd(image(&[0, 3], vec![i(2), i(1)]), None)]
            ),
            (
                RowKind::Insert,
                vec![upd(None, image(&[0, 3], vec![i(3), i(7)]))]
            ),
        ]
    );
}

// B14: 260 columns: packed column count and metadata length.
#[test]
fn wide_table_with_packed_column_count_b14() {
    let evs = fixture("B14");
    let t = &evs[0].table;
    assert_eq!(t.columns.len(), 260);
    assert_eq!(t.columns[259].name.as_deref(), Some("c259"));
    assert_eq!(t.primary_key, Some(vec![0]));
    // id = 1, then c1..c259 = 1..259.
    let row: Vec<Value> = (0..260).map(|k| i(k.max(1))).collect();
    assert_eq!(inserts(&evs, "w"), vec![row.clone()]);
    let rows = rows_of(&evs, "w");
    let mut after = row.clone();
    after[1] = N;
    after[259] = i(-259);
    assert_eq!(rows[1].1[0].before, image(&all(260), row));
    assert_eq!(rows[1].1[0].after, image(&all(260), after));
}

// B11: events over 16 MiB. The real fixture is ~170 MB, so it is not in
// the repository: `scripts/fixtures-cases.sh --with-b11` writes it to
// target/fixtures/B11.bin and this test checks it when present. The
// decoder itself is checked on a synthetic 37 MiB event below either way.
#[test]
fn events_over_16_mib_b11() {
    let path = format!("{}/target/fixtures/B11.bin", env!("CARGO_MANIFEST_DIR"));
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("{path} absent (scripts/fixtures-cases.sh --with-b11): real B11 skipped");
        return;
    };
    let evs = walk(&bytes);
    let lens = |v: &Value| match v {
        Value::Bytes(b) => b.len(),
        other => panic!("not bytes: {other:?}"),
    };
    let ins = inserts(&evs, "big");
    assert_eq!(ins.len(), 4);
    let expect = [
        (1, 20_971_520, 17_825_792, "a"),
        (2, 16_777_175, 5, "b"),
        (3, 16_777_161, 1, "f"),
        (4, 16_777_165, 1, "f"),
    ];
    for (row, (id, plen, tlen, small)) in ins.iter().zip(expect) {
        assert_eq!(row[0], i(id));
        assert_eq!(lens(&row[1]), plen);
        assert_eq!(lens(&row[2]), tlen);
        assert_eq!(row[3], s(small));
    }
    let Value::Bytes(p) = &ins[0][1] else {
        unreachable!()
    };
    assert!(p.chunks(2).all(|c| c == [0x00, 0xff]));
    let upd = rows_of(&evs, "big")
        .into_iter()
        .find(|(k, _)| *k == RowKind::Update)
        .unwrap();
    let after = upd.1[0].after.as_ref().unwrap();
    assert_eq!(after.values[3], s("c"));
    assert_eq!(lens(&after.values[1]), 20_971_520);
}

// -- extra fixtures ------------------------------------------------------

// X01: edge values of the other column types, and the charset metadata.
#[test]
fn integer_bit_float_and_decimal_edges_x01() {
    let evs = fixture("X01-types");
    let nines65 = format!("-{}", "9".repeat(65));
    let one65 = format!("1{}", "0".repeat(64));
    assert_eq!(
        inserts(&evs, "n"),
        vec![
            vec![
                i(1),
                i(-128),
                i(-32768),
                i(-8_388_608),
                i(i64::MIN),
                u(16_777_215),
                Value::Year(0),
                u(4_294_967_295),
                Value::Bit(1),
                Value::Bit(0b10_0000_0001),
                Value::Bit(u64::MAX),
                Value::Float(-3.40282e38),
                Value::Double(-2.225_073_858_507_201_4e-308),
                d("-9"),
                d("-0.00001"),
                d("-123456789.987654321"),
                d("123456789012345678.9"),
                d("999999999"),
                d(&nines65),
            ],
            vec![
                i(2),
                i(127),
                i(32767),
                i(8_388_607),
                i(i64::MAX),
                u(0),
                Value::Year(2155),
                u(0),
                Value::Bit(0),
                Value::Bit(0),
                Value::Bit(0),
                Value::Float(1.5),
                Value::Double(0.1),
                d("0"),
                d("0.12345"),
                d("0.000000001"),
                d("-0.1"),
                d("0"),
                d(&one65),
            ],
            {
                let mut r = vec![
                    i(3),
                    i(-1),
                    i(-1),
                    i(-1),
                    i(-1),
                    u(1),
                    Value::Year(1901),
                    u(1),
                ];
                r.extend(std::iter::repeat_n(N, 11));
                r
            },
        ]
    );
    let t = &evs[0].table;
    let unsigned: Vec<_> = t.columns.iter().map(|c| c.unsigned).collect();
    let (f, tr) = (Some(false), Some(true));
    assert_eq!(
        unsigned,
        [f, f, f, f, f, tr, tr, tr, None, None, None, f, f, f, f, f, f, tr, f]
    );
    assert_eq!(column_type_name(&t.columns[9]), "BIT(10)");
    assert_eq!(t.columns[9].meta, 0x0102);
}

#[test]
fn temporal_types_every_precision_x01() {
    let evs = fixture("X01-types");
    let fr = [0, 900_000, 990_000, 999_000, 999_900, 999_990, 999_999];
    let mut r1 = vec![i(1)];
    r1.extend(fr.iter().map(|&us| dt(9999, 12, 31, 23, 59, 59, us)));
    r1.extend(fr.iter().map(|&us| ts(2_147_483_647, us)));
    r1.extend([
        time(true, 838, 59, 59, 900_000),
        time(true, 838, 59, 59, 999_000),
        time(true, 0, 0, 0, 100),
        time(true, 0, 0, 0, 10),
        date(9999, 12, 31),
    ]);
    let fr2 = [100_000, 120_000, 123_000, 123_400, 123_450, 123_456];
    let mut r2 = vec![i(2), dt(1000, 1, 1, 0, 0, 0, 0)];
    r2.extend(fr2.iter().map(|&us| dt(2024, 2, 29, 12, 34, 56, us)));
    r2.push(ts(1, 0));
    r2.extend(
        [100_000, 10_000, 1_000, 100, 10, 1]
            .iter()
            .map(|&us| ts(1, us)),
    );
    r2.extend([
        time(false, 838, 59, 59, 900_000),
        time(true, 12, 34, 56, 123_000),
        time(false, 0, 0, 0, 100),
        time(true, 1, 0, 0, 10),
        date(1000, 1, 1),
    ]);
    let mut r3 = vec![i(3)];
    r3.extend(std::iter::repeat_n(N, 19));
    assert_eq!(inserts(&evs, "t"), vec![r1, r2, r3]);
}

#[test]
fn strings_binary_padding_enum_set_and_charsets_x01() {
    let evs = fixture("X01-types");
    let mut c100 = "é".repeat(99);
    c100.push('z');
    let mut point = vec![0, 0, 0, 0, 1, 1, 0, 0, 0];
    point.extend(1.0f64.to_le_bytes());
    point.extend(2.0f64.to_le_bytes());
    let mut uuid = vec![
        0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40,
        0x00,
    ];
    let mut ip6 = vec![0; 16];
    ip6[15] = 1;
    let rows = inserts(&evs, "s");
    assert_eq!(
        rows[0],
        vec![
            i(1),
            s("ab"),          // CHAR: trailing spaces stripped by the server
            s(&c100),         // CHAR(100) utf8mb4: 400 bytes, 2-byte length
            b(&[1, 0, 0, 0]), // BINARY(4): trailing zeros padded back
            b(&[0; 16]),
            s("ü "), // VARCHAR keeps its trailing space
            s(&"q".repeat(300)),
            b(&[0, 0xff, 0]),
            s("text"),
            b(&[]),
            b(&[0]),
            b(&[0xde, 0xad, 0xbe, 0xef, 0]),
            Value::Enum(2),
            Value::Set(3),
            b(&point),
            b(&uuid), // UUID: BINARY(16), zero byte padded back
            b(&ip6),
            s(r#"{"k": [1, 2]}"#),
            Value::Enum(300),
            Value::Set(1 | 1 << 63),
        ]
    );
    uuid.clear();
    let mut mapped = vec![0; 10];
    mapped.extend([0xff, 0xff, 1, 2, 3, 4]);
    let mut ff = vec![0; 16];
    ff[0] = 0xff;
    assert_eq!(
        rows[1],
        vec![
            i(2),
            s(""),
            s(""),
            b(&[0, 0, 0, 1]),
            b(&ff),
            s(""),
            s(""),
            b(&[]),
            s(""),
            N,
            N,
            N,
            Value::Enum(0),
            Value::Set(0),
            N,
            N,
            b(&mapped),
            N,
            Value::Enum(1),
            Value::Set(0),
        ]
    );
    let t = &evs.iter().find(|e| e.table.table == "s").unwrap().table;
    let charsets: Vec<_> = t.columns.iter().map(|c| c.charset).collect();
    let cs = Some;
    assert_eq!(
        charsets,
        [
            None,
            cs(8),
            cs(45),
            cs(63),
            cs(63),
            cs(46),
            cs(8),
            cs(63),
            cs(33),
            cs(63),
            cs(63),
            cs(63),
            cs(8),
            cs(45),
            cs(63),
            cs(63),
            cs(63),
            cs(46),
            cs(45),
            cs(45),
        ]
    );
    assert_eq!(string_meta(t.columns[2].meta), (ct::STRING, 400));
    assert_eq!(column_type_name(&t.columns[3]), "BINARY(4)");
    assert_eq!(column_type_name(&t.columns[18]), "ENUM(2 bytes)");
    // DEFAULT_CHARSET with exceptions, and ENUM_AND_SET charsets.
    let t2 = &evs.iter().find(|e| e.table.table == "s2").unwrap().table;
    let charsets: Vec<_> = t2.columns.iter().map(|c| c.charset).collect();
    assert_eq!(
        charsets,
        [
            None,
            cs(45),
            cs(45),
            cs(45),
            cs(8),
            cs(63),
            cs(45),
            cs(45),
            cs(8)
        ]
    );
    assert_eq!(
        inserts(&evs, "s2"),
        vec![vec![
            i(1),
            s("a"),
            s("b"),
            s("c"),
            s("d"),
            b(&[0x0e]),
            Value::Enum(2),
            Value::Set(3),
            Value::Enum(1)
        ]]
    );
}

// MariaDB column compression (VARCHAR/BLOB ... COMPRESSED, types 141 and
// 140): values decompressed to the stored bytes.
#[test]
fn compressed_columns_x01() {
    let evs = fixture("X01-types");
    assert_eq!(
        inserts(&evs, "c"),
        vec![
            vec![i(1), s(&"abc".repeat(300)), s(&"xyz".repeat(400)), s("hi")],
            vec![i(2), s(""), s(""), N],
            vec![i(3), s("short"), s("a"), s(&"q".repeat(100))],
        ]
    );
    let t = &evs.iter().find(|e| e.table.table == "c").unwrap().table;
    let charsets: Vec<_> = t.columns.iter().map(|c| c.charset).collect();
    assert_eq!(charsets, [None, Some(45), Some(63), Some(8)]);
}

// X02: the old TIME/DATETIME/TIMESTAMP encodings; MariaDB's old
// fractional DATETIME(6) is refused, never misread.
#[test]
fn old_temporal_encodings_x02() {
    let evs = fixture("X02-oldtemporal");
    assert_eq!(
        inserts(&evs, "o"),
        vec![
            vec![
                i(1),
                time(true, 838, 59, 59, 0),
                dt(0, 0, 0, 0, 0, 0, 0),
                ts(0, 0),
                date(0, 0, 0)
            ],
            vec![
                i(2),
                time(true, 0, 0, 1, 0),
                dt(2023, 0, 15, 10, 0, 0, 0),
                ts(1, 0),
                date(2023, 5, 0)
            ],
            vec![
                i(3),
                time(false, 838, 59, 59, 0),
                dt(9999, 12, 31, 23, 59, 59, 0),
                ts(2_147_483_647, 0),
                date(9999, 12, 31)
            ],
            vec![
                i(4),
                time(true, 16, 8, 4, 0),
                dt(1000, 1, 1, 0, 0, 0, 0),
                N,
                N
            ],
        ]
    );
    let types: Vec<_> = evs[0].table.columns.iter().map(|c| c.column_type).collect();
    assert_eq!(
        types,
        [ct::LONG, ct::TIME, ct::DATETIME, ct::TIMESTAMP, ct::DATE]
    );
    let h = evs.iter().find(|e| e.table.table == "h").unwrap();
    let err = h.decoded.as_ref().unwrap_err();
    assert!(
        err.starts_with("row 1 column 1 (dt6) DATETIME(old): old-format DATETIME value"),
        "{err}"
    );
}

// X03: MariaDB compressed rows events (log_bin_compress=ON).
#[test]
fn compressed_rows_events_x03() {
    let evs = fixture("X03-compressed");
    let types: Vec<_> = evs.iter().map(|e| e.type_code).collect();
    assert_eq!(types, [166, 167, 168, 23]);
    let abc = s(&"abc".repeat(300));
    let rows = rows_of(&evs, "c");
    assert_eq!(
        rows[0]
            .1
            .iter()
            .map(|r| r.after.clone().unwrap().values)
            .collect::<Vec<_>>(),
        vec![
            vec![i(1), abc.clone(), s(&"t".repeat(500))],
            vec![i(2), s("two"), s("small")],
            vec![i(3), N, N],
        ]
    );
    assert_eq!(rows[1].0, RowKind::Update);
    assert_eq!(
        rows[1].1[0].before,
        image(&all(3), vec![i(2), s("two"), s("small")])
    );
    assert_eq!(
        rows[1].1[0].after,
        image(&all(3), vec![i(2), s("two"), s(&"u".repeat(600))])
    );
    assert_eq!(rows[2].0, RowKind::Delete);
    assert_eq!(
        rows[2].1[0].before,
        image(&all(3), vec![i(1), abc, s(&"t".repeat(500))])
    );
    assert_eq!(
        rows[3].1[0].after,
        image(&all(3), vec![i(4), s("tiny"), s("x")])
    );
}

// -- hand-built events -----------------------------------------------------

fn packed(v: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => v.push(n as u8),
        251..=0xffff => {
            v.push(252);
            v.extend(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            v.push(253);
            v.extend(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            v.push(254);
            v.extend(&n.to_le_bytes());
        }
    }
}

/// A TABLE_MAP body for table id 42 `db`.`t`, all columns nullable.
fn table_map(types: &[u8], meta: &[u8], opt: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(&42u64.to_le_bytes()[..6]);
    v.extend([1, 0]);
    v.extend([2, b'd', b'b', 0, 1, b't', 0]);
    packed(&mut v, types.len() as u64);
    v.extend(types);
    packed(&mut v, meta.len() as u64);
    v.extend(meta);
    v.extend(vec![0xff; types.len().div_ceil(8)]);
    v.extend(opt);
    v
}

/// An optional-metadata TLV field.
fn opt_field(t: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![t];
    packed(&mut v, value.len() as u64);
    v.extend(value);
    v
}

/// A v1 rows event body on table 42 (post-header length 8).
fn rows_v1(width: usize, bitmaps: &[&[u8]], data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(&42u64.to_le_bytes()[..6]);
    v.extend([1, 0]);
    packed(&mut v, width as u64);
    for b in bitmaps {
        v.extend(*b);
    }
    v.extend(data);
    v
}

/// Decodes the rows of a one-column table whose first row holds `data`
/// (non-NULL).
fn decode_col(t: u8, meta: &[u8], opt: &[u8], data: &[u8]) -> Result<DecodedRows, String> {
    let info = parse_table_map(&table_map(&[t], meta, opt), 8)?;
    let mut row = vec![0];
    row.extend(data);
    let ev = rows_v1(1, &[&[1]], &row);
    decode_rows(&ev, 23, 8, |_| Some(&info))
}

/// Decodes one non-NULL value of a one-column table.
fn decode_one(t: u8, meta: &[u8], opt: &[u8], data: &[u8]) -> Result<Value, String> {
    let d = decode_col(t, meta, opt, data)?;
    assert_eq!(d.rows.len(), 1, "one row");
    Ok(d.rows[0].after.clone().unwrap().values[0].clone())
}

#[test]
fn mediumint_is_sign_extended_and_unsigned_when_known() {
    let signed = opt_field(optional_meta::SIGNEDNESS, &[0x00]);
    let unsigned = opt_field(optional_meta::SIGNEDNESS, &[0x80]);
    assert_eq!(
        decode_one(ct::INT24, &[], &[], &[0xff, 0xff, 0xff]),
        Ok(i(-1))
    );
    assert_eq!(
        decode_one(ct::INT24, &[], &signed, &[0, 0, 0x80]),
        Ok(i(-8_388_608))
    );
    assert_eq!(
        decode_one(ct::INT24, &[], &unsigned, &[0xff, 0xff, 0xff]),
        Ok(u(16_777_215))
    );
    assert_eq!(decode_one(ct::TINY, &[], &unsigned, &[0xff]), Ok(u(255)));
    assert_eq!(
        decode_one(ct::SHORT, &[], &[], &[0x00, 0x80]),
        Ok(i(-32768))
    );
    assert_eq!(
        decode_one(ct::LONG, &[], &unsigned, &[0xff; 4]),
        Ok(u(4_294_967_295))
    );
    assert_eq!(
        decode_one(ct::LONGLONG, &[], &unsigned, &[0xff; 8]),
        Ok(u(u64::MAX))
    );
    assert_eq!(decode_one(ct::YEAR, &[], &[], &[0]), Ok(Value::Year(0)));
    assert_eq!(
        decode_one(ct::YEAR, &[], &[], &[255]),
        Ok(Value::Year(2155))
    );
    let nan = f64::NAN.to_bits() | 1;
    match decode_one(ct::DOUBLE, &[8], &[], &nan.to_le_bytes()) {
        Ok(Value::Double(f)) => assert_eq!(f.to_bits(), nan, "bit exact"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn string_meta_real_type_and_long_char_length() {
    assert_eq!(string_meta(0xfe0a), (ct::STRING, 10));
    assert_eq!(string_meta(0xee90), (ct::STRING, 400)); // CHAR(100) utf8mb4
    assert_eq!(string_meta(0xce00), (ct::STRING, 768)); // 0x300
    assert_eq!(string_meta(0xf701), (ct::ENUM, 1));
    assert_eq!(string_meta(0xf808), (ct::SET, 8));
    assert_eq!(string_meta(10), (ct::STRING, 10));
}

#[test]
fn binary_padding_only_for_binary_collation() {
    let charset = |c: u8| opt_field(optional_meta::DEFAULT_CHARSET, &[c]);
    let meta = [0xfe, 4];
    assert_eq!(
        decode_one(ct::STRING, &meta, &charset(63), &[1, 7]),
        Ok(b(&[7, 0, 0, 0]))
    );
    assert_eq!(
        decode_one(ct::STRING, &meta, &charset(8), &[1, 7]),
        Ok(b(&[7]))
    );
    assert_eq!(decode_one(ct::STRING, &meta, &[], &[1, 7]), Ok(b(&[7])));
    assert_eq!(
        decode_one(ct::STRING, &meta, &charset(63), &[4, 1, 2, 3, 4]),
        Ok(b(&[1, 2, 3, 4]))
    );
    // CHAR over 255 bytes: 2-byte length.
    assert_eq!(
        decode_one(ct::STRING, &[0xee, 0x90], &[], &[2, 0, b'h', b'i']),
        Ok(s("hi"))
    );
    // VARCHAR(300): 2-byte length; VARCHAR(255): 1 byte.
    assert_eq!(
        decode_one(ct::VARCHAR, &[0x2c, 0x01], &[], &[1, 0, b'x']),
        Ok(s("x"))
    );
    assert_eq!(
        decode_one(ct::VARCHAR, &[0xff, 0x00], &[], &[1, b'x']),
        Ok(s("x"))
    );
}

#[test]
fn decimal_from_mysql_documentation_bytes() {
    // decimal.c: 1234567890.1234 as DECIMAL(14,4).
    let pos = [0x81, 0x0d, 0xfb, 0x38, 0xd2, 0x04, 0xd2];
    let neg = [0x7e, 0xf2, 0x04, 0xc7, 0x2d, 0xfb, 0x2d];
    assert_eq!(
        decode_one(ct::NEWDECIMAL, &[14, 4], &[], &pos),
        Ok(d("1234567890.1234"))
    );
    assert_eq!(
        decode_one(ct::NEWDECIMAL, &[14, 4], &[], &neg),
        Ok(d("-1234567890.1234"))
    );
    // Negative zero (all digits zero, sign bit clear) prints as zero.
    let negzero = decimal_bin(true, "0", "00", 5, 2);
    assert_eq!(
        decode_one(ct::NEWDECIMAL, &[5, 2], &[], &negzero),
        Ok(d("0.00"))
    );
    // A group with more than 9 digits is corrupt.
    let err = decode_one(ct::NEWDECIMAL, &[9, 0], &[], &[0xff, 0xff, 0xff, 0xff]).unwrap_err();
    assert!(err.contains("more than 9 digits"), "{err}");
    assert_eq!(
        decode_one(ct::DECIMAL, &[], &[], &[1]).unwrap_err(),
        "row 1 column 0 DECIMAL(old): old DECIMAL not supported"
    );
}

#[test]
fn error_names_row_column_type_and_sizes() {
    let mut names = Vec::new();
    for n in ["id", "x", "amount"] {
        packed(&mut names, n.len() as u64);
        names.extend(n.as_bytes());
    }
    let opt = opt_field(optional_meta::COLUMN_NAME, &names);
    let info = parse_table_map(
        &table_map(&[ct::LONG, ct::LONG, ct::NEWDECIMAL], &[20, 6], &opt),
        8,
    )
    .unwrap();
    let dec = decimal_bin(false, "12345678901234", "000001", 20, 6);
    assert_eq!(dec.len(), 10);
    let mut data = Vec::new();
    for _ in 0..2 {
        data.push(0);
        data.extend([1, 0, 0, 0, 2, 0, 0, 0]);
        data.extend(&dec);
    }
    data.push(0);
    data.extend([1, 0, 0, 0, 2, 0, 0, 0]);
    data.extend(&dec[..4]);
    let ev = rows_v1(3, &[&[7]], &data);
    let err = decode_rows(&ev, 23, 8, |_| Some(&info)).unwrap_err();
    assert_eq!(
        err,
        "row 3 column 2 (amount) NEWDECIMAL(20,6): need 10 bytes, 4 left"
    );
    // Update events say which image.
    let ev = rows_v1(3, &[&[7], &[7]], &data[..data.len() - 4]);
    let err = decode_rows(&ev, 24, 8, |_| Some(&info)).unwrap_err();
    assert_eq!(
        err,
        "row 2 (before image) column 2 (amount) NEWDECIMAL(20,6): need 10 bytes, 0 left"
    );
    let three_images = [&data[..38], &data[..19]].concat();
    let ev = rows_v1(3, &[&[7], &[7]], &three_images);
    let err = decode_rows(&ev, 24, 8, |_| Some(&info)).unwrap_err();
    assert_eq!(err, "row 2 (after image) null bitmap: need 1 bytes, 0 left");
}

#[test]
fn null_bitmap_counts_present_columns_only() {
    // 10 columns, only columns 1 and 9 present: a 1-byte null bitmap.
    let info = parse_table_map(&table_map(&[ct::TINY; 10], &[], &[]), 8).unwrap();
    let ev = rows_v1(10, &[&[0b10, 0b10]], &[0b01, 5, 0b10, 6]);
    let d = decode_rows(&ev, 23, 8, |_| Some(&info)).unwrap();
    assert_eq!(d.rows.len(), 2);
    assert_eq!(d.rows[0].after, image(&[1, 9], vec![N, i(5)]));
    assert_eq!(d.rows[1].after, image(&[1, 9], vec![i(6), N]));
    assert_eq!(d.rows[0].after.as_ref().unwrap().get(9), Some(&i(5)));
    assert_eq!(d.rows[0].after.as_ref().unwrap().get(2), None);
}

#[test]
fn v2_rows_events_skip_extra_data() {
    let info = parse_table_map(&table_map(&[ct::LONG], &[], &[]), 8).unwrap();
    let mk = |extra: &[u8], bitmaps: usize, data: &[u8]| {
        let mut v = Vec::new();
        v.extend(&42u64.to_le_bytes()[..6]);
        v.extend([0x05, 0]);
        v.extend(&((extra.len() + 2) as u16).to_le_bytes());
        v.extend(extra);
        v.push(1);
        v.extend(std::iter::repeat_n(1u8, bitmaps));
        v.extend(data);
        v
    };
    let row = [0, 7, 0, 0, 0];
    let d = decode_rows(&mk(&[9, 9, 9], 1, &row), 30, 10, |_| Some(&info)).unwrap();
    assert_eq!((d.kind, d.flags, d.table_id), (RowKind::Insert, 5, 42));
    assert_eq!(d.rows[0].after, image(&[0], vec![i(7)]));
    let mut both = row.to_vec();
    both.extend([0, 8, 0, 0, 0]);
    let d = decode_rows(&mk(&[], 2, &both), 31, 10, |_| Some(&info)).unwrap();
    assert_eq!(d.rows[0].before, image(&[0], vec![i(7)]));
    assert_eq!(d.rows[0].after, image(&[0], vec![i(8)]));
    let d = decode_rows(&mk(&[], 1, &row), 32, 10, |_| Some(&info)).unwrap();
    assert_eq!((d.kind, d.rows[0].after.is_none()), (RowKind::Delete, true));
    let mut bad = mk(&[], 1, &row);
    bad[8] = 1; // extra-data length below 2
    let err = decode_rows(&bad, 30, 10, |_| Some(&info)).unwrap_err();
    assert!(err.contains("extra-data length 1"), "{err}");
}

#[test]
fn table_ids_dummy_events_and_width_mismatch() {
    let info = parse_table_map(&table_map(&[ct::LONG], &[], &[]), 8).unwrap();
    assert_eq!(info.table_id, 42);
    // 4-byte table id (post-header length 6).
    let mut short = table_map(&[ct::LONG], &[], &[]);
    short.drain(4..6);
    let t = parse_table_map(&short, 6).unwrap();
    assert_eq!(
        (t.table_id, t.schema.as_str(), t.table.as_str()),
        (42, "db", "t")
    );
    // A rows event with no rows and no table map: empty.
    let ev = rows_v1(1, &[&[1]], &[]);
    let d = decode_rows(&ev, 23, 8, |_| None).unwrap();
    assert!(d.rows.is_empty());
    let ev = rows_v1(1, &[&[1]], &[0, 1, 0, 0, 0]);
    assert_eq!(
        decode_rows(&ev, 23, 8, |_| None).unwrap_err(),
        "rows event for table id 42: no TABLE_MAP for that id"
    );
    let ev = rows_v1(2, &[&[3]], &[0, 1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(
        decode_rows(&ev, 23, 8, |_| Some(&info)).unwrap_err(),
        "rows event for `db`.`t`: 2 columns, its TABLE_MAP has 1"
    );
    assert_eq!(
        decode_rows(&ev, 19, 8, |_| Some(&info)).unwrap_err(),
        "event type 19 is not a rows event"
    );
}

#[test]
fn table_map_errors_name_what_and_where() {
    let err = parse_table_map(&table_map(&[ct::LONG, 99], &[], &[]), 8).unwrap_err();
    assert_eq!(
        err,
        "TABLE_MAP `db`.`t` column 1: unknown column type 99 (its metadata length is unknown)"
    );
    let err = parse_table_map(&table_map(&[ct::LONG], &[4], &[]), 8).unwrap_err();
    assert_eq!(
        err,
        "TABLE_MAP `db`.`t`: metadata block has 1 bytes, the column types use 0"
    );
    let err = parse_table_map(&table_map(&[ct::VARCHAR], &[4], &[]), 8).unwrap_err();
    assert!(err.contains("metadata needs 2 bytes, 1 left"), "{err}");
    let body = table_map(&[ct::LONG], &[], &[]);
    let err = parse_table_map(&body[..14], 8).unwrap_err();
    assert_eq!(err, "TABLE_MAP table name: need 2 bytes, 1 left");
    let err = parse_table_map(&table_map(&[ct::LONG; 9], &[], &opt_field(1, &[0])), 8).unwrap_err();
    assert!(err.contains("SIGNEDNESS has 8 bits"), "{err}");
    // Unknown optional metadata is skipped by its length.
    let mut opt = opt_field(99, &[1, 2, 3]);
    opt.extend(opt_field(optional_meta::SIMPLE_PRIMARY_KEY, &[0]));
    let t = parse_table_map(&table_map(&[ct::LONG], &[], &opt), 8).unwrap();
    assert_eq!(t.primary_key, Some(vec![0]));
    let opt = opt_field(optional_meta::PRIMARY_KEY_WITH_PREFIX, &[1, 10, 0, 0]);
    let t = parse_table_map(&table_map(&[ct::LONG; 2], &[], &opt), 8).unwrap();
    assert_eq!(t.primary_key, Some(vec![1, 0]));
}

#[test]
fn geometry_charset_rules_of_mariadb_and_mysql() {
    // (VARCHAR, GEOMETRY, BLOB): MariaDB counts GEOMETRY as a character
    // column, MySQL does not.
    let types = [ct::VARCHAR, ct::GEOMETRY, ct::BLOB];
    let meta = [10, 0, 4, 2];
    let tm = |opt: &[u8]| table_map(&types, &meta, opt);
    let charsets = |t: TableInfo| t.columns.iter().map(|c| c.charset).collect::<Vec<_>>();
    // DEFAULT_CHARSET 45 with character column 2 at 63.
    let def = opt_field(optional_meta::DEFAULT_CHARSET, &[45, 2, 63]);
    let maria = parse_table_map_with(&tm(&def), 8, Flavor::MariaDb).unwrap();
    assert_eq!(charsets(maria), [Some(45), Some(45), Some(63)]);
    let err = parse_table_map_with(&tm(&def), 8, Flavor::MySql).unwrap_err();
    assert!(err.contains("character column 2, the table has 2"), "{err}");
    let def = opt_field(optional_meta::DEFAULT_CHARSET, &[45, 1, 63]);
    let mysql = parse_table_map_with(&tm(&def), 8, Flavor::MySql).unwrap();
    assert_eq!(charsets(mysql), [Some(45), None, Some(63)]);
    // COLUMN_CHARSET: the entry count tells the rule.
    let col3 = opt_field(optional_meta::COLUMN_CHARSET, &[8, 63, 33]);
    let col2 = opt_field(optional_meta::COLUMN_CHARSET, &[8, 33]);
    for flavor in [Flavor::MariaDb, Flavor::MySql] {
        let t = parse_table_map_with(&tm(&col3), 8, flavor).unwrap();
        assert_eq!(charsets(t), [Some(8), Some(63), Some(33)]);
        let t = parse_table_map_with(&tm(&col2), 8, flavor).unwrap();
        assert_eq!(charsets(t), [Some(8), None, Some(33)]);
    }
    let col1 = opt_field(optional_meta::COLUMN_CHARSET, &[8]);
    let err = parse_table_map(&tm(&col1), 8).unwrap_err();
    assert!(
        err.contains("COLUMN_CHARSET has 1 collations, the table has 3"),
        "{err}"
    );
    assert_eq!(
        Flavor::from_server_version("10.11.19-MariaDB-log"),
        Flavor::MariaDb
    );
    assert_eq!(Flavor::from_server_version("8.0.36"), Flavor::MySql);
}

#[test]
fn compressed_column_errors() {
    assert_eq!(uncompress_column(&[]), Ok(Vec::new()));
    assert_eq!(uncompress_column(&[0, b'a']), Ok(b"a".to_vec()));
    assert!(uncompress_column(&[0x90, 1, 2])
        .unwrap_err()
        .contains("unknown compression"));
    assert!(uncompress_column(&[0x89])
        .unwrap_err()
        .contains("header 0x89"));
    let err = uncompress_column(&[0x89, 5, 1, 2, 3]).unwrap_err();
    assert!(
        err.contains("cannot inflate") || err.contains("inflates to"),
        "{err}"
    );
}

// -- TIME2 against MySQL's encoder ------------------------------------------

/// MySQL `my_time_packed_to_binary` of a packed TIME
/// (`(hms << 24) + micros`, negated for negative times).
fn time2_bin(negative: bool, h: u32, m: u8, s: u8, us: u32, fsp: u8) -> Vec<u8> {
    let hms = (i64::from(h) << 12) | (i64::from(m) << 6) | i64::from(s);
    // The server truncates the fraction to the precision first.
    let keep = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1][usize::from(fsp)];
    let magnitude = (hms << 24) + i64::from(us) - i64::from(us) % keep;
    let nr = if negative { -magnitude } else { magnitude };
    let int = nr >> 24;
    let frac = nr % (1 << 24);
    let int3 = |v: i64| ((v + 0x80_0000) as u32).to_be_bytes()[1..].to_vec();
    match fsp {
        0 => int3(int),
        1 | 2 => {
            let mut v = int3(int);
            v.push((frac / 10_000) as i8 as u8);
            v
        }
        3 | 4 => {
            let mut v = int3(int);
            v.extend(&((frac / 100) as i16 as u16).to_be_bytes());
            v
        }
        _ => ((nr + 0x8000_0000_0000) as u64).to_be_bytes()[2..].to_vec(),
    }
}

#[test]
fn time2_every_precision_and_sign() {
    let cases = [
        (true, 0, 0, 0, 10_000),
        (true, 0, 0, 0, 1),
        (true, 838, 59, 59, 0),
        (true, 838, 59, 59, 999_999),
        (false, 838, 59, 59, 999_999),
        (true, 16, 8, 4, 10_123),
        (true, 0, 0, 1, 0),
        (true, 0, 0, 1, 500_000),
        (false, 0, 0, 0, 0),
        (true, 12, 34, 56, 780_000),
    ];
    for fsp in 0..=6u8 {
        let keep = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1][usize::from(fsp)];
        for &(neg, h, m, sec, us) in &cases {
            let us_t = us - us % keep;
            let bytes = time2_bin(neg, h, m, sec, us, fsp);
            assert_eq!(bytes.len(), 3 + usize::from(fsp).div_ceil(2));
            let got = decode_one(ct::TIME2, &[fsp], &[], &bytes).unwrap();
            let zero = h == 0 && m == 0 && sec == 0 && us_t == 0;
            assert_eq!(
                got,
                time(neg && !zero, h, m, sec, us_t),
                "fsp {fsp} {neg} {h}:{m}:{sec}.{us}"
            );
        }
    }
}

// -- DECIMAL against MySQL's encoder -----------------------------------------

/// MySQL `decimal2bin` of `[-]int.frac` as DECIMAL(precision, scale);
/// `frac` has exactly `scale` digits.
fn decimal_bin(negative: bool, int: &str, frac: &str, precision: u8, scale: u8) -> Vec<u8> {
    let intg = usize::from(precision - scale);
    let int = format!("{int:0>intg$}");
    assert_eq!(int.len(), intg);
    assert_eq!(frac.len(), usize::from(scale));
    let mut out = Vec::new();
    let mut put = |digits: &str, nbytes: usize| {
        let v: u32 = if digits.is_empty() {
            0
        } else {
            digits.parse().unwrap()
        };
        out.extend(&v.to_be_bytes()[4 - nbytes..]);
    };
    let lead = intg % 9;
    put(&int[..lead], DIG2BYTES[lead]);
    for k in 0..intg / 9 {
        put(&int[lead + 9 * k..lead + 9 * k + 9], 4);
    }
    let fscale = usize::from(scale);
    for k in 0..fscale / 9 {
        put(&frac[9 * k..9 * k + 9], 4);
    }
    let tail = fscale % 9;
    put(&frac[fscale - tail..], DIG2BYTES[tail]);
    if let Some(first) = out.first_mut() {
        *first ^= 0x80;
    }
    if negative {
        for x in &mut out {
            *x ^= 0xff;
        }
    }
    out
}

/// The text MySQL prints for `[-]int.frac`.
fn decimal_text(negative: bool, int: &str, frac: &str) -> String {
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let zero = int == "0" && frac.bytes().all(|c| c == b'0');
    let mut t = String::new();
    if negative && !zero {
        t.push('-');
    }
    t.push_str(int);
    if !frac.is_empty() {
        t.push('.');
        t.push_str(frac);
    }
    t
}

// -- MySQL binary JSON ---------------------------------------------------------

/// MySQL `json_binary` serialization of a serde_json value (objects
/// keep their map order), small or large format throughout.
fn jsonb(v: &serde_json::Value, large: bool) -> Vec<u8> {
    let (t, data) = jsonb_value(v, large);
    let mut out = vec![t];
    out.extend(data);
    out
}

fn jsonb_varlen(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn jsonb_value(v: &serde_json::Value, large: bool) -> (u8, Vec<u8>) {
    use serde_json::Value as J;
    match v {
        J::Null => (4, vec![0]),
        J::Bool(true) => (4, vec![1]),
        J::Bool(false) => (4, vec![2]),
        J::Number(n) => {
            if let Some(x) = n.as_i64() {
                if let Ok(x) = i16::try_from(x) {
                    (5, x.to_le_bytes().to_vec())
                } else if let Ok(x) = i32::try_from(x) {
                    (7, x.to_le_bytes().to_vec())
                } else {
                    (9, x.to_le_bytes().to_vec())
                }
            } else if let Some(x) = n.as_u64() {
                (10, x.to_le_bytes().to_vec())
            } else {
                (11, n.as_f64().unwrap().to_le_bytes().to_vec())
            }
        }
        J::String(s) => {
            let mut out = Vec::new();
            jsonb_varlen(s.len(), &mut out);
            out.extend(s.as_bytes());
            (12, out)
        }
        J::Array(a) => {
            let items: Vec<_> = a.iter().map(|x| (None, x)).collect();
            (
                if large { 3 } else { 2 },
                jsonb_container(&items, large, false),
            )
        }
        J::Object(o) => {
            let items: Vec<_> = o.iter().map(|(k, x)| (Some(k.as_str()), x)).collect();
            (
                if large { 1 } else { 0 },
                jsonb_container(&items, large, true),
            )
        }
    }
}

fn jsonb_container(
    items: &[(Option<&str>, &serde_json::Value)],
    large: bool,
    object: bool,
) -> Vec<u8> {
    let w = if large { 4 } else { 2 };
    let n = items.len();
    let header = 2 * w + if object { n * (w + 2) } else { 0 } + n * (1 + w);
    let mut tail = Vec::new();
    let mut keys = Vec::new();
    let mut values = Vec::new();
    let put = |v: &mut Vec<u8>, x: usize| v.extend(&(x as u32).to_le_bytes()[..w]);
    for (k, _) in items {
        if let Some(k) = k {
            put(&mut keys, header + tail.len());
            keys.extend(&(k.len() as u16).to_le_bytes());
            tail.extend(k.as_bytes());
        }
    }
    for (_, x) in items {
        let (t, data) = jsonb_value(x, large);
        values.push(t);
        let inline = matches!(t, 4..=6) || (large && matches!(t, 7 | 8));
        if inline {
            let mut slot = data.clone();
            slot.resize(w, 0);
            values.extend(slot);
        } else {
            put(&mut values, header + tail.len());
            tail.extend(data);
        }
    }
    let mut out = Vec::new();
    put(&mut out, n);
    put(&mut out, header + tail.len());
    out.extend(keys);
    out.extend(values);
    out.extend(tail);
    out
}

#[test]
fn binary_json_to_text() {
    let doc: serde_json::Value = serde_json::from_str(
        r#"{"a": 1, "b": [true, false, null, "x\"y\n"], "c": 1.5, "n": 18446744073709551615,
            "m": -9223372036854775808, "i": 70000, "e": {}, "é": [[], -2, 1e300]}"#,
    )
    .unwrap();
    for large in [false, true] {
        let bin = jsonb(&doc, large);
        let text = jsonb_to_text(&bin).unwrap();
        assert_eq!(
            text,
            r#"{"a": 1, "b": [true, false, null, "x\"y\n"], "c": 1.5, "e": {}, "i": 70000, "m": -9223372036854775808, "n": 18446744073709551615, "é": [[], -2, 1e300]}"#
        );
        // The text reads back to the same document, and mysql_common's
        // own decoder agrees with our encoder.
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
        let theirs: mysql_common::binlog::jsonb::Value<'_> =
            mysql_common::io::ParseBuf(&bin).parse(()).unwrap();
        assert_eq!(serde_json::Value::try_from(theirs).unwrap(), doc);
    }
    assert_eq!(jsonb_to_text(&[]).unwrap(), "null");
    // Doubles print as the shortest text that reads back exactly
    // (found by the round-trip property: serde_json's parser is off by
    // an ulp on these, Rust's is exact).
    for f in [
        3.933_881_507_686_662e-261,
        1.430_504_919_217_98e-309,
        5e-324,
    ] {
        let text = jsonb_to_text(&[&[0x0b][..], &f64::to_le_bytes(f)].concat()).unwrap();
        assert_eq!(text.parse::<f64>().unwrap().to_bits(), f64::to_bits(f));
    }
    assert_eq!(
        jsonb_to_text(&[0x0b, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]).unwrap(),
        "1.0"
    );
    // Opaque DECIMAL(4,2) 12.34, DATE and TIME, and a BLOB.
    let mut op = vec![0x0f, ct::NEWDECIMAL, 4, 4, 2, 0x8c, 0x22];
    assert_eq!(jsonb_to_text(&op).unwrap(), "12.34");
    let ymd: i64 = ((2015 * 13 + 1) << 5) | 15;
    let packed = (ymd << 17) << 24;
    op = vec![0x0f, ct::DATE, 8];
    op.extend(packed.to_le_bytes());
    assert_eq!(jsonb_to_text(&op).unwrap(), r#""2015-01-15""#);
    let hms: i64 = (23 << 12) | (24 << 6) | 25;
    op = vec![0x0f, ct::TIME, 8];
    op.extend((-((hms << 24) + 5)).to_le_bytes());
    assert_eq!(jsonb_to_text(&op).unwrap(), r#""-23:24:25.000005""#);
    op = vec![0x0f, ct::BLOB, 3, b'a', b'b', b'c'];
    assert_eq!(jsonb_to_text(&op).unwrap(), r#""base64:type252:YWJj""#);
    // As a column value (MySQL type 245, 4-byte length).
    let bin = jsonb(&serde_json::json!([1, "two"]), false);
    let mut data = (bin.len() as u32).to_le_bytes().to_vec();
    data.extend(&bin);
    assert_eq!(
        decode_one(ct::JSON, &[4], &[], &data),
        Ok(Value::Json(r#"[1, "two"]"#.into()))
    );
    // Corrupt input is an error, deep nesting too.
    assert!(jsonb_to_text(&[0x02, 5, 0, 100, 0]).is_err());
    assert!(jsonb_to_text(&[0x0c, 0x85, 0x80]).is_err());
    let mut deep = serde_json::json!(1);
    for _ in 0..150 {
        deep = serde_json::json!([deep]);
    }
    let err = jsonb_to_text(&jsonb(&deep, false)).unwrap_err();
    assert!(err.contains("nesting deeper than 100"), "{err}");
}

#[test]
fn partial_json_updates_are_refused() {
    let info = parse_table_map(&table_map(&[ct::LONG, ct::JSON], &[4], &[]), 8).unwrap();
    let bin = jsonb(&serde_json::json!({"k": 1}), false);
    let mut row = vec![0, 1, 0, 0, 0];
    row.extend((bin.len() as u32).to_le_bytes());
    row.extend(&bin);
    let mk = |options: &[u8]| {
        let mut data = row.clone();
        data.extend(options);
        data.extend(&row);
        let mut v = Vec::new();
        v.extend(&42u64.to_le_bytes()[..6]);
        v.extend([1, 0, 2, 0, 2, 3, 3]);
        v.extend(data);
        v
    };
    let d = decode_rows(&mk(&[0]), 39, 10, |_| Some(&info)).unwrap();
    assert_eq!(d.kind, RowKind::Update);
    assert_eq!(
        d.rows[0].after,
        image(&[0, 1], vec![i(1), Value::Json(r#"{"k": 1}"#.into())])
    );
    // value options PARTIAL_JSON, but this column's partial bit clear.
    let d = decode_rows(&mk(&[1, 0]), 39, 10, |_| Some(&info)).unwrap();
    assert_eq!(
        d.rows[0].after.as_ref().unwrap().values[1],
        Value::Json(r#"{"k": 1}"#.into())
    );
    let err = decode_rows(&mk(&[1, 1]), 39, 10, |_| Some(&info)).unwrap_err();
    assert!(
        err.starts_with("row 1 (after image) column 1 JSON: partial JSON update"),
        "{err}"
    );
}

/// A rows event of a 37 MiB row (LONGBLOB 20 MiB, LONGTEXT 17 MiB), the
/// shape of case B11 without the server.
#[test]
fn synthetic_row_over_16_mib_b11() {
    let info = parse_table_map(
        &table_map(
            &[ct::LONG, ct::BLOB, ct::BLOB, ct::VARCHAR],
            &[4, 4, 40, 0],
            &[],
        ),
        8,
    )
    .unwrap();
    let payload: Vec<u8> = [0x00u8, 0xff].repeat(10 * 1024 * 1024);
    let txt = vec![b'x'; 17 * 1024 * 1024];
    let mut data = vec![0, 1, 0, 0, 0];
    data.extend((payload.len() as u32).to_le_bytes());
    data.extend(&payload);
    data.extend((txt.len() as u32).to_le_bytes());
    data.extend(&txt);
    data.extend([1, b'a']);
    let ev = rows_v1(4, &[&[0x0f]], &data);
    assert!(ev.len() > 38_000_000);
    let d = decode_rows(&ev, 23, 8, |_| Some(&info)).unwrap();
    let vals = &d.rows[0].after.as_ref().unwrap().values;
    assert_eq!(vals[1], Value::Bytes(payload));
    assert_eq!(vals[2], Value::Bytes(txt));
    assert_eq!(vals[3], s("a"));
    // Truncated in the middle of the blob: an error, not a panic.
    let err = decode_rows(&ev[..30_000_000], 23, 8, |_| Some(&info)).unwrap_err();
    assert!(
        err.starts_with("row 1 column 2 LONGBLOB: need 17825796 bytes"),
        "{err}"
    );
}

// -- property tests: no panic, round trips ---------------------------------------

/// Every rows event of every fixture, with its table.
fn all_fixture_events() -> Vec<RowsEv> {
    [
        "B01",
        "B02",
        "B04",
        "B05",
        "B07",
        "B07-minimal",
        "B08",
        "B09",
        "B09-nolog",
        "B12",
        "B14",
        "X01-types",
        "X02-oldtemporal",
        "X03-compressed",
    ]
    .iter()
    .flat_map(|n| fixture(n))
    .collect()
}

fn fixture_tables() -> Vec<TableInfo> {
    let mut v: Vec<TableInfo> = all_fixture_events().into_iter().map(|e| e.table).collect();
    v.dedup_by(|a, b| a.table == b.table && a.schema == b.schema);
    v
}

proptest::proptest! {
    // No regression files in the repository: cases found once are
    // pinned as unit tests instead (e.g. the doubles in
    // `binary_json_to_text`).
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn random_table_maps_never_panic(
        body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        phl in proptest::sample::select(vec![6u8, 8, 10]),
    ) {
        let _ = parse_table_map(&body, phl);
        let _ = parse_table_map_with(&body, phl, Flavor::MySql);
    }

    #[test]
    fn mutated_table_maps_never_panic(
        pick in 0usize..1000,
        edits in proptest::collection::vec((0usize..4000, proptest::prelude::any::<u8>()), 0..8),
        cut in 0usize..4000,
    ) {
        let bodies = fixture_table_map_bodies();
        let mut body = bodies[pick % bodies.len()].clone();
        for (at, byte) in edits {
            if !body.is_empty() {
                let k = at % body.len();
                body[k] = byte;
            }
        }
        body.truncate(cut.max(body.len() / 2));
        let _ = parse_table_map(&body, 8);
    }

    #[test]
    fn random_rows_bodies_never_panic(
        body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        type_code in proptest::sample::select(vec![23u8, 24, 25, 30, 31, 32, 39, 166, 167, 168]),
        table in 0usize..100,
    ) {
        let tables = fixture_tables();
        let t = &tables[table % tables.len()];
        // Make the random body name a width that matches often.
        let mut body = body;
        if body.len() > 8 && t.columns.len() < 251 {
            body[8] = t.columns.len() as u8;
        }
        let _ = decode_rows(&body, type_code, 8, |_| Some(t));
    }

    #[test]
    fn mutated_fixture_rows_never_panic(
        pick in 0usize..1000,
        edits in proptest::collection::vec((0usize..1_000_000, proptest::prelude::any::<u8>()), 0..6),
        cut in proptest::option::of(0usize..1_000_000),
    ) {
        let evs = all_fixture_events();
        let e = &evs[pick % evs.len()];
        let mut body = e.body.clone();
        for (at, byte) in edits {
            let k = at % body.len();
            body[k] = byte;
        }
        if let Some(cut) = cut {
            body.truncate(cut % (body.len() + 1));
        }
        let _ = decode_rows(&body, e.type_code, e.phl, |_| Some(&e.table));
    }

    #[test]
    fn random_values_of_every_type_never_panic(
        t in proptest::sample::select(vec![
            0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 245, 246,
            247, 248, 249, 250, 251, 252, 253, 254, 255, 140, 141, 242,
        ]),
        meta in proptest::collection::vec(proptest::prelude::any::<u8>(), 2),
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let n = meta_len_of(t).unwrap_or(0);
        let _ = decode_col(t, &meta[..n], &[], &data);
        let _ = jsonb_to_text(&data);
        let _ = uncompress_column(&data);
    }

    #[test]
    fn decimal_round_trips(
        precision in 1u8..=65,
        scale_pick in 0u8..=65,
        digits in "[0-9]{65}",
        negative in proptest::prelude::any::<bool>(),
    ) {
        let scale = scale_pick % (precision.min(38) + 1);
        let intg = usize::from(precision - scale);
        let int = &digits[..intg];
        let frac = &digits[intg..intg + usize::from(scale)];
        let bin = decimal_bin(negative, int, frac, precision, scale);
        proptest::prop_assert_eq!(bin.len(), decimal_size(precision, scale));
        proptest::prop_assert_eq!(
            decode_decimal(precision, scale, &bin),
            Ok(decimal_text(negative, int, frac))
        );
    }

    #[test]
    fn time2_round_trips(
        negative in proptest::prelude::any::<bool>(),
        h in 0u32..=838, m in 0u8..60, sec in 0u8..60, us in 0u32..1_000_000,
        fsp in 0u8..=6,
    ) {
        let keep = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1][usize::from(fsp)];
        let us_t = us - us % keep;
        let zero = h == 0 && m == 0 && sec == 0 && us_t == 0;
        let bin = time2_bin(negative, h, m, sec, us, fsp);
        let mut r = Reader::new(&bin);
        let got = decode_time2(&mut r, fsp).ok();
        proptest::prop_assert_eq!(got, Some(time(negative && !zero, h, m, sec, us_t)));
    }

    #[test]
    fn json_double_text_reads_back_exactly(bits in proptest::prelude::any::<u64>()) {
        let f = f64::from_bits(bits);
        proptest::prop_assume!(f.is_finite());
        let text = jsonb_to_text(&[&[0x0b][..], &bits.to_le_bytes()].concat()).unwrap();
        proptest::prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), bits);
        proptest::prop_assert!(text.contains('.') || text.contains('e'), "{}", text);
    }

    #[test]
    fn binary_json_round_trips(
        doc in json_strategy(),
        large in proptest::prelude::any::<bool>(),
    ) {
        let text = jsonb_to_text(&jsonb(&doc, large)).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        proptest::prop_assert!(json_eq(&back, &doc), "{} != {}", text, doc);
    }
}

/// Equality of JSON documents where doubles may differ by serde_json's
/// parsing error (its default parser is not correctly rounded; the text
/// we write is Rust's shortest round-trip form, which `str::parse`
/// reads back exactly: `json_double_text_reads_back_exactly`).
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            // Same sign, at most a few units in the last place apart.
            x == y
                || (x.is_sign_negative() == y.is_sign_negative()
                    && x.to_bits().abs_diff(y.to_bits()) <= 64)
        }
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn json_strategy() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|x| serde_json::json!(x)),
        any::<u64>().prop_map(|x| serde_json::json!(x)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|x| serde_json::json!(x)),
        "\\PC{0,12}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map("[a-z]{0,6}", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn fixture_table_map_bodies() -> &'static [Vec<u8>] {
    static BODIES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    BODIES.get_or_init(|| {
        let mut out = Vec::new();
        for name in ["B07", "B14", "X01-types"] {
            let bytes = std::fs::read(fixture_path(name)).unwrap();
            let (events, _) = raw_events(&bytes);
            out.extend(events.into_iter().filter(|(t, _)| *t == 19).map(|(_, b)| b));
        }
        out
    })
}

// -- throughput ----------------------------------------------------------------

/// Decoding speed on sysbench-shaped rows (INT id, INT k, CHAR(120) c,
/// CHAR(60) pad). Run: cargo test --release --lib
/// extractor::rows::tests::throughput -- --ignored --nocapture
#[test]
#[ignore]
fn throughput() {
    let opt = opt_field(optional_meta::DEFAULT_CHARSET, &[45]);
    let info = parse_table_map(
        &table_map(
            &[ct::LONG, ct::LONG, ct::STRING, ct::STRING],
            &[0xfe, 0xf0, 0xfe, 0xf0],
            &opt,
        ),
        8,
    )
    .unwrap();
    let mut data = Vec::new();
    for k in 0..2000u32 {
        data.push(0);
        data.extend(k.to_le_bytes());
        data.extend((k * 7).to_le_bytes());
        data.push(119);
        data.extend(std::iter::repeat_n(b'c', 119));
        data.push(59);
        data.extend(std::iter::repeat_n(b'p', 59));
    }
    let insert = rows_v1(4, &[&[0x0f]], &data);
    let mut both = Vec::new();
    for chunk in data.chunks(data.len() / 2000) {
        both.extend(chunk);
        both.extend(chunk);
    }
    let update = rows_v1(4, &[&[0x0f], &[0x0f]], &both);
    for (name, ev, t) in [("insert", &insert, 23u8), ("update", &update, 24)] {
        let start = std::time::Instant::now();
        let mut bytes = 0usize;
        let mut rows = 0usize;
        while start.elapsed().as_secs_f64() < 2.0 {
            let d = decode_rows(ev, t, 8, |_| Some(&info)).unwrap();
            rows += d.rows.len();
            bytes += ev.len();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{name}: {:.0} MB/s, {:.0} rows/s",
            bytes as f64 / secs / 1e6,
            rows as f64 / secs
        );
    }
}

/// Prints every decoded fixture event (a debugging aid): cargo test --lib
/// extractor::rows::tests::dump_fixtures -- --ignored --nocapture
#[test]
#[ignore]
fn dump_fixtures() {
    for name in [
        "B01",
        "B02",
        "B04",
        "B05",
        "B07",
        "B07-minimal",
        "B08",
        "B09",
        "B09-nolog",
        "B12",
        "B14",
        "X01-types",
        "X02-oldtemporal",
        "X03-compressed",
    ] {
        println!("=== {name}");
        for e in fixture(name) {
            println!("{}.{} type {}", e.table.schema, e.table.table, e.type_code);
            match &e.decoded {
                Ok(d) => {
                    for r in &d.rows {
                        println!("  before {:?}", r.before);
                        println!("  after  {:?}", r.after);
                    }
                }
                Err(err) => println!("  ERROR {err}"),
            }
        }
    }
}
