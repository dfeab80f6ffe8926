//! Unit and property tests of the position types.

use super::*;
use proptest::prelude::*;

fn bp(text: &str) -> BinlogPosition {
    text.parse().unwrap()
}

fn err<T: FromStr<Err = PositionError> + fmt::Debug>(text: &str) -> String {
    text.parse::<T>().unwrap_err().to_string()
}

// ---- Seqno / Epoch -------------------------------------------------

#[test]
fn seqno_basics() {
    assert_eq!(Seqno(0).next(), Seqno(1));
    assert_eq!(Seqno(41).next().get(), 42);
    assert_eq!(Seqno(u64::MAX).checked_next(), None);
    assert_eq!(Seqno(7).checked_next(), Some(Seqno(8)));
    assert!(Seqno(9) < Seqno(10));
    assert_eq!(Seqno::ZERO, Seqno::default());
    assert_eq!(Seqno(1234).to_string(), "1234");
    assert_eq!(format!("{:>6}", Seqno(12)), "    12");
    assert_eq!("0".parse::<Seqno>().unwrap(), Seqno(0));
    assert_eq!("007".parse::<Seqno>().unwrap(), Seqno(7));
    assert_eq!(
        "18446744073709551615".parse::<Seqno>().unwrap(),
        Seqno(u64::MAX)
    );
}

#[test]
#[should_panic(expected = "seqno overflow")]
fn seqno_next_overflow_panics() {
    let _ = Seqno(u64::MAX).next();
}

#[test]
fn seqno_and_epoch_errors() {
    for bad in [
        "",
        "abc",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1.5",
        "18446744073709551616",
    ] {
        assert_eq!(
            err::<Seqno>(bad),
            format!("invalid seqno {bad:?}: expected a decimal integer 0..=18446744073709551615")
        );
    }
    assert_eq!(
        err::<Seqno>("x1"),
        "invalid seqno \"x1\": expected a decimal integer 0..=18446744073709551615"
    );
    assert_eq!(
        err::<Epoch>("e"),
        "invalid epoch \"e\": expected a decimal integer 0..=18446744073709551615"
    );
}

#[test]
fn epoch_basics() {
    let e = Epoch::starting_at(Seqno(500));
    assert_eq!(e, Epoch(500));
    assert_eq!(e.start_seqno(), Seqno(500));
    assert_eq!(Epoch::from(Seqno(3)), Epoch::new(3));
    assert_eq!(e.to_string(), "500");
    assert_eq!("500".parse::<Epoch>().unwrap(), e);
    assert!(Epoch(1) < Epoch(2));
}

#[test]
fn seqno_epoch_serde_as_numbers() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Row {
        seqno: Seqno,
        epoch: Epoch,
        channel: ChannelId,
    }
    let row = Row {
        seqno: Seqno(42),
        epoch: Epoch(40),
        channel: ChannelId::new(3, 4).unwrap(),
    };
    let text = toml::to_string(&row).unwrap();
    assert_eq!(text, "seqno = 42\nepoch = 40\nchannel = 3\n");
    assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
}

// ---- ChannelId -----------------------------------------------------

#[test]
fn channel_id() {
    let c = ChannelId::new(3, 4).unwrap();
    assert_eq!(c.get(), 3);
    assert_eq!(c.index(), 3usize);
    assert_eq!(c.to_string(), "3");
    assert_eq!(
        ChannelId::new(4, 4).unwrap_err().to_string(),
        "invalid channel 4: expected a channel number below the channel count 4"
    );
    assert_eq!(
        ChannelId::new(0, 0).unwrap_err(),
        PositionError::ChannelOutOfRange {
            channel: 0,
            channel_count: 0
        }
    );
    assert_eq!(
        ChannelId::parse("2", 4).unwrap(),
        ChannelId::new(2, 4).unwrap()
    );
    assert_eq!(
        ChannelId::parse("9", 4).unwrap_err().to_string(),
        "invalid channel 9: expected a channel number below the channel count 4"
    );
    assert_eq!(
        ChannelId::parse("x", 4).unwrap_err().to_string(),
        "invalid channel \"x\": expected a channel number below the channel count 4"
    );
    assert_eq!(
        ChannelId::parse("65536", 4).unwrap_err().to_string(),
        "invalid channel \"65536\": expected a channel number below the channel count 4"
    );
    let all: Vec<u16> = ChannelId::all(3).map(ChannelId::get).collect();
    assert_eq!(all, vec![0, 1, 2]);
    assert_eq!(ChannelId::all(0).count(), 0);
}

// ---- BinlogPosition --------------------------------------------------

#[test]
fn binlog_parse_and_accessors() {
    let p = bp("mariadb-bin.000012:4567");
    assert_eq!(p.file(), "mariadb-bin.000012");
    assert_eq!(p.offset(), 4567);
    assert_eq!(p.base_name(), "mariadb-bin");
    assert_eq!(p.file_index(), 12);
    assert_eq!(p.to_string(), "mariadb-bin.000012:4567");
    assert_eq!(
        format!("{p:?}"),
        "BinlogPosition(\"mariadb-bin.000012:4567\")"
    );

    // Base names may contain dots and colons; the split is at the last one.
    let p = bp("host.example-bin.7:4");
    assert_eq!(p.base_name(), "host.example-bin");
    assert_eq!(p.file_index(), 7);
    let p = bp("a:b.000001:4");
    assert_eq!(p.file(), "a:b.000001");
    assert_eq!(p.offset(), 4);

    let p = bp("bin.18446744073709551615:18446744073709551615");
    assert_eq!(p.file_index(), u64::MAX);
    assert_eq!(p.offset(), u64::MAX);

    let q = BinlogPosition::new("mariadb-bin.000012", 4567).unwrap();
    assert_eq!(q, bp("mariadb-bin.000012:4567"));
    assert_eq!(q.with_offset(4).to_string(), "mariadb-bin.000012:4");
}

#[test]
fn binlog_round_trip_keeps_padding() {
    for text in [
        "mariadb-bin.000012:4567",
        "mysql-bin.000001:4",
        "bin.1:0",
        "bin.0000000001:120",
        "bin.1000000:4",
        "log.with.dots.000003:99",
    ] {
        assert_eq!(bp(text).to_string(), text);
    }
    // Padding is part of the file name: different spellings are different
    // files for Eq, but sort next to each other.
    assert_ne!(bp("bin.1:4"), bp("bin.000001:4"));
    assert_eq!(bp("bin.1:4").file_index(), bp("bin.000001:4").file_index());
    assert!(bp("bin.000001:4") < bp("bin.1:4"));
    assert!(bp("bin.1:4") < bp("bin.000001:5"));
}

#[test]
fn binlog_order() {
    assert!(bp("bin.000001:100") < bp("bin.000001:200"));
    assert!(bp("bin.000001:999999") < bp("bin.000002:4"));
    assert!(bp("bin.000009:500") < bp("bin.000010:4"));
    assert!(bp("bin.999999:500") < bp("bin.1000000:4"));
    assert!(bp("bin.9:4") < bp("bin.10:4"));
    assert_eq!(bp("bin.000003:4").cmp(&bp("bin.000003:4")), Ordering::Equal);
    let mut v = [
        bp("bin.1000000:4"),
        bp("bin.000010:4"),
        bp("bin.999999:7"),
        bp("bin.000009:4"),
        bp("bin.000009:3"),
    ];
    v.sort();
    let sorted: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert_eq!(
        sorted,
        [
            "bin.000009:3",
            "bin.000009:4",
            "bin.000010:4",
            "bin.999999:7",
            "bin.1000000:4"
        ]
    );

    // Different families: total order by base name first, but flagged.
    let a = bp("alpha.000009:4");
    let b = bp("beta.000001:4");
    assert!(a < b);
    assert!(!a.same_log_family(&b));
    assert!(a.same_log_family(&bp("alpha.1:0")));
}

#[test]
fn binlog_next_file_name() {
    assert_eq!(bp("bin.000009:4").next_file_name().unwrap(), "bin.000010");
    assert_eq!(bp("bin.000012:4").next_file_name().unwrap(), "bin.000013");
    assert_eq!(bp("bin.999999:4").next_file_name().unwrap(), "bin.1000000");
    assert_eq!(bp("bin.9:4").next_file_name().unwrap(), "bin.10");
    assert_eq!(bp("bin.1:4").next_file_name().unwrap(), "bin.2");
    assert_eq!(bp("a.b.099:4").next_file_name().unwrap(), "a.b.100");
    assert_eq!(
        bp("bin.18446744073709551615:4").next_file_name().unwrap_err().to_string(),
        "cannot rotate binlog file \"bin.18446744073709551615\": file index 18446744073709551615 is the largest possible"
    );
}

#[test]
fn binlog_errors() {
    let cases = [
        ("foo", "expected FILE:OFFSET"),
        ("", "expected FILE:OFFSET"),
        (":4", "expected FILE:OFFSET, found an empty file name"),
        (
            "bin.000001:",
            "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"\"",
        ),
        (
            "bin.000001:x12",
            "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"x12\"",
        ),
        (
            "bin.000001:-1",
            "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"-1\"",
        ),
        (
            "bin.000001:18446744073709551616",
            "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
        ),
        (
            "bin:4",
            "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin\"",
        ),
        (
            "bin.:4",
            "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.\"",
        ),
        (
            "bin.log:4",
            "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.log\"",
        ),
        (
            "bin.00a1:4",
            "expected a file name BASENAME.NNNNNN with a numeric extension, found \"bin.00a1\"",
        ),
        (
            ".000001:4",
            "expected a file name BASENAME.NNNNNN with a non-empty base name, found \".000001\"",
        ),
        (
            "bin.18446744073709551616:4",
            "expected the file index as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
        ),
        (
            " bin.000001:4",
            "expected a file name without whitespace or control characters, found \" bin.000001\"",
        ),
        (
            "bin.000001:4 ",
            "expected OFFSET as a decimal integer 0..=18446744073709551615, found \"4 \"",
        ),
    ];
    for (text, reason) in cases {
        assert_eq!(
            err::<BinlogPosition>(text),
            format!("invalid binlog position {text:?}: {reason}"),
            "input {text:?}"
        );
    }
    assert_eq!(
        err::<BinlogPosition>("foo"),
        "invalid binlog position \"foo\": expected FILE:OFFSET"
    );
    assert_eq!(
        BinlogPosition::new("binlog", 4).unwrap_err().to_string(),
        "invalid binlog file name \"binlog\": expected a file name BASENAME.NNNNNN with a numeric extension, found \"binlog\""
    );
    assert_eq!(
        BinlogPosition::new("", 4).unwrap_err().to_string(),
        "invalid binlog file name \"\": expected a file name BASENAME.NNNNNN, found an empty file name"
    );
}

#[test]
fn binlog_serde_as_text() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Row {
        event_id: BinlogPosition,
    }
    let row = Row {
        event_id: bp("mariadb-bin.000012:4567"),
    };
    let text = toml::to_string(&row).unwrap();
    assert_eq!(text, "event_id = \"mariadb-bin.000012:4567\"\n");
    assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
    let bad = toml::from_str::<Row>("event_id = \"foo\"\n").unwrap_err();
    assert!(
        bad.to_string()
            .contains("invalid binlog position \"foo\": expected FILE:OFFSET"),
        "{bad}"
    );
}

// ---- Gtid ----------------------------------------------------------

#[test]
fn gtid_parse_print() {
    let g: Gtid = "0-1-100".parse().unwrap();
    assert_eq!(g, Gtid::new(0, 1, 100));
    assert_eq!(g.to_string(), "0-1-100");
    let g: Gtid = "4294967295-4294967295-18446744073709551615"
        .parse()
        .unwrap();
    assert_eq!(g, Gtid::new(u32::MAX, u32::MAX, u64::MAX));
    assert_eq!(g.to_string(), "4294967295-4294967295-18446744073709551615");
    // Leading zeros accepted, printed canonically.
    assert_eq!("00-01-0100".parse::<Gtid>().unwrap().to_string(), "0-1-100");
}

#[test]
fn gtid_errors() {
    let cases = [
        ("", "expected DOMAIN-SERVER-SEQ, found an empty string"),
        (
            "0-1",
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 2 parts",
        ),
        (
            "100",
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 1 part",
        ),
        (
            "0-1-2-3",
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 4 parts",
        ),
        (
            "-1-1-1",
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 4 parts",
        ),
        (
            "0--1",
            "expected server_id as a decimal integer 0..=4294967295, found \"\"",
        ),
        (
            "x-1-1",
            "expected domain_id as a decimal integer 0..=4294967295, found \"x\"",
        ),
        (
            "0-1-1a",
            "expected seq_no as a decimal integer 0..=18446744073709551615, found \"1a\"",
        ),
        (
            "4294967296-1-1",
            "expected domain_id as a decimal integer 0..=4294967295, found \"4294967296\"",
        ),
        (
            "0-4294967296-1",
            "expected server_id as a decimal integer 0..=4294967295, found \"4294967296\"",
        ),
        (
            "0-1-18446744073709551616",
            "expected seq_no as a decimal integer 0..=18446744073709551615, found \"18446744073709551616\"",
        ),
        ("0-1-100 ", "expected DOMAIN-SERVER-SEQ without whitespace"),
        (" 0-1-100", "expected DOMAIN-SERVER-SEQ without whitespace"),
        ("0 -1-100", "expected DOMAIN-SERVER-SEQ without whitespace"),
        (
            "0-+1-100",
            "expected server_id as a decimal integer 0..=4294967295, found \"+1\"",
        ),
    ];
    for (text, reason) in cases {
        assert_eq!(
            err::<Gtid>(text),
            format!("invalid GTID {text:?}: {reason}"),
            "input {text:?}"
        );
    }
    assert_eq!(
        err::<Gtid>("0-1"),
        "invalid GTID \"0-1\": expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 2 parts"
    );
}

// ---- GtidPos -------------------------------------------------------

fn gp(text: &str) -> GtidPos {
    text.parse().unwrap()
}

#[test]
fn gtid_pos_parse_print() {
    let p = gp("0-1-100,1-2-7");
    assert_eq!(p.len(), 2);
    assert_eq!(p.get(0), Some(&Gtid::new(0, 1, 100)));
    assert_eq!(p.get(1), Some(&Gtid::new(1, 2, 7)));
    assert_eq!(p.get(2), None);
    assert_eq!(p.to_string(), "0-1-100,1-2-7");

    // Canonical print: sorted by domain, no spaces.
    let p = gp(" 5-1-9 , 1-2-7,\n0-1-100 ");
    assert_eq!(p.to_string(), "0-1-100,1-2-7,5-1-9");
    let domains: Vec<u32> = p.iter().map(|g| g.domain_id).collect();
    assert_eq!(domains, vec![0, 1, 5]);
    let seqs: Vec<u64> = (&p).into_iter().map(|g| g.seq_no).collect();
    assert_eq!(seqs, vec![100, 7, 9]);

    for empty in ["", "   ", "\n"] {
        let p = gp(empty);
        assert!(p.is_empty());
        assert_eq!(p.len(), 0);
        assert_eq!(p.to_string(), "");
    }
    assert_eq!(GtidPos::new(), gp(""));
}

#[test]
fn gtid_pos_errors() {
    assert_eq!(
        err::<GtidPos>("0-1-100,0-2-5"),
        "invalid GTID position \"0-1-100,0-2-5\": domain 0 appears more than once, expected at most one GTID per domain"
    );
    assert_eq!(
        "1-1-1,0-1-1,1-1-1".parse::<GtidPos>().unwrap_err(),
        PositionError::DuplicateGtidDomain {
            text: "1-1-1,0-1-1,1-1-1".to_owned(),
            domain_id: 1
        }
    );
    assert_eq!(
        err::<GtidPos>("0-1-1,,1-1-1"),
        "invalid GTID position \"0-1-1,,1-1-1\": expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position 2"
    );
    assert_eq!(
        err::<GtidPos>("0-1-1,"),
        "invalid GTID position \"0-1-1,\": expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position 2"
    );
    assert_eq!(
        err::<GtidPos>("0-1-1,0-x-1"),
        "invalid GTID position \"0-1-1,0-x-1\": item \"0-x-1\": expected server_id as a decimal integer 0..=4294967295, found \"x\""
    );
    assert_eq!(
        err::<GtidPos>("0-1-1;1-1-1"),
        "invalid GTID position \"0-1-1;1-1-1\": item \"0-1-1;1-1-1\": expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found 5 parts"
    );
    assert_eq!(
        err::<GtidPos>("0-1-1 1-1-1"),
        "invalid GTID position \"0-1-1 1-1-1\": item \"0-1-1 1-1-1\": expected DOMAIN-SERVER-SEQ without whitespace"
    );
}

#[test]
fn gtid_pos_update_contains() {
    let mut p = gp("0-1-100");
    assert!(p.contains(&Gtid::new(0, 1, 100)));
    assert!(p.contains(&Gtid::new(0, 1, 99)));
    // Same domain, other server: seq_no alone decides (MariaDB semantics).
    assert!(p.contains(&Gtid::new(0, 7, 50)));
    assert!(!p.contains(&Gtid::new(0, 1, 101)));
    assert!(!p.contains(&Gtid::new(1, 1, 1)));

    assert_eq!(p.update(Gtid::new(1, 2, 7)), None);
    assert_eq!(p.update(Gtid::new(0, 3, 150)), Some(Gtid::new(0, 1, 100)));
    assert_eq!(p.to_string(), "0-3-150,1-2-7");
    // update replaces even when going backwards.
    assert_eq!(p.update(Gtid::new(0, 3, 10)), Some(Gtid::new(0, 3, 150)));
    assert_eq!(p.to_string(), "0-3-10,1-2-7");
}

#[test]
fn gtid_pos_compare() {
    let a = gp("0-1-100,1-2-7");
    assert_eq!(a.compare(&a), Some(Ordering::Equal));
    // Equal seq_nos, different server ids: equal progress, not ==.
    let a2 = gp("0-9-100,1-2-7");
    assert_eq!(a.compare(&a2), Some(Ordering::Equal));
    assert_ne!(a, a2);

    assert_eq!(a.compare(&gp("0-1-101,1-2-7")), Some(Ordering::Less));
    assert_eq!(a.compare(&gp("0-1-100,1-2-6")), Some(Ordering::Greater));
    assert_eq!(a.compare(&gp("0-1-101,1-2-8")), Some(Ordering::Less));
    // Missing domain counts as behind.
    assert_eq!(a.compare(&gp("0-1-100")), Some(Ordering::Greater));
    assert_eq!(a.compare(&gp("0-1-100,1-2-7,2-1-1")), Some(Ordering::Less));
    assert_eq!(GtidPos::new().compare(&a), Some(Ordering::Less));
    assert_eq!(
        GtidPos::new().compare(&GtidPos::new()),
        Some(Ordering::Equal)
    );
    // Diverged.
    assert_eq!(a.compare(&gp("0-1-101,1-2-6")), None);
    assert_eq!(a.compare(&gp("0-1-100,2-1-1")), None);
    assert_eq!(gp("0-1-100,2-1-1").compare(&a), None);
}

#[test]
fn gtid_serde_as_text() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Row {
        gtid: Gtid,
        pos: GtidPos,
    }
    let row = Row {
        gtid: Gtid::new(0, 1, 100),
        pos: gp("1-2-7,0-1-100"),
    };
    let text = toml::to_string(&row).unwrap();
    assert_eq!(text, "gtid = \"0-1-100\"\npos = \"0-1-100,1-2-7\"\n");
    assert_eq!(toml::from_str::<Row>(&text).unwrap(), row);
}

// ---- Property tests --------------------------------------------------

fn gtid_strategy() -> impl Strategy<Value = Gtid> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(d, s, n)| Gtid::new(d, s, n))
}

proptest! {
    #[test]
    fn prop_seqno_round_trip(n in any::<u64>()) {
        prop_assert_eq!(Seqno(n).to_string().parse::<Seqno>().unwrap(), Seqno(n));
        prop_assert_eq!(Epoch(n).to_string().parse::<Epoch>().unwrap(), Epoch(n));
    }

    #[test]
    fn prop_gtid_round_trip(g in gtid_strategy()) {
        let text = g.to_string();
        prop_assert_eq!(text.parse::<Gtid>().unwrap(), g);
        prop_assert_eq!(
            text,
            format!("{}-{}-{}", g.domain_id, g.server_id, g.seq_no)
        );
    }

    #[test]
    fn prop_gtid_pos_round_trip(gtids in prop::collection::vec(gtid_strategy(), 0..8)) {
        let mut pos = GtidPos::new();
        for g in &gtids {
            pos.update(*g);
        }
        let text = pos.to_string();
        let parsed: GtidPos = text.parse().unwrap();
        prop_assert_eq!(&parsed, &pos);
        prop_assert_eq!(parsed.to_string(), text.clone());
        // Whitespace around items is tolerated and dropped.
        let spaced = text.replace(',', " ,\n ");
        prop_assert_eq!(format!(" {spaced} ").parse::<GtidPos>().unwrap(), pos.clone());
        prop_assert_eq!(pos.compare(&pos), Some(Ordering::Equal));
    }

    #[test]
    fn prop_gtid_pos_compare_antisymmetric(
        a in prop::collection::btree_map(0u32..4, 0u64..4, 0..4),
        b in prop::collection::btree_map(0u32..4, 0u64..4, 0..4),
    ) {
        let build = |m: &BTreeMap<u32, u64>| {
            let mut p = GtidPos::new();
            for (&d, &n) in m {
                p.update(Gtid::new(d, 1, n));
            }
            p
        };
        let (pa, pb) = (build(&a), build(&b));
        prop_assert_eq!(pa.compare(&pb), pb.compare(&pa).map(Ordering::reverse));
        if pa.compare(&pb) == Some(Ordering::Less) {
            for g in &pa {
                prop_assert!(pb.contains(g));
            }
        }
    }

    #[test]
    fn prop_binlog_round_trip(
        base in "[A-Za-z0-9_][A-Za-z0-9_.:-]{0,15}",
        digits in "[0-9]{1,19}",
        offset in any::<u64>(),
    ) {
        let text = format!("{base}.{digits}:{offset}");
        let p: BinlogPosition = text.parse().unwrap();
        prop_assert_eq!(p.to_string(), text.clone());
        prop_assert_eq!(p.base_name(), base.as_str());
        prop_assert_eq!(p.file_index(), digits.parse::<u64>().unwrap());
        prop_assert_eq!(p.offset(), offset);
        prop_assert_eq!(p.to_string().parse::<BinlogPosition>().unwrap(), p.clone());
        let q = BinlogPosition::new(p.file(), offset).unwrap();
        prop_assert_eq!(q, p);
    }

    #[test]
    fn prop_binlog_order_and_rotation(
        i in 0u64..2_000_000, j in 0u64..2_000_000,
        wi in 1usize..8, wj in 1usize..8,
        oi in any::<u64>(), oj in any::<u64>(),
    ) {
        let a = bp(&format!("bin.{i:0wi$}:{oi}"));
        let b = bp(&format!("bin.{j:0wj$}:{oj}"));
        if (i, oi) != (j, oj) {
            prop_assert_eq!(a.cmp(&b), (i, oi).cmp(&(j, oj)));
        }
        let next = a.next_file_name().unwrap();
        let n = bp(&format!("{next}:4"));
        prop_assert_eq!(n.file_index(), i + 1);
        prop_assert!(next.len() >= a.file().len());
        prop_assert!(a.with_offset(u64::MAX) < n);
    }
}
