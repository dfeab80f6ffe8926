//! The bad `shard.map` and `shard.list` files of `tests/fixtures/shard/`:
//! each is rejected as a whole with the exact error, every bad line listed
//! by number (issue 5).

use shardrep::shard::{ChannelAssignment, ShardMap};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/shard/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The error of loading fixture `name`, with the file path replaced by
/// the file name.
fn map_error(name: &str) -> String {
    let path = fixture(name);
    let e = ShardMap::load(&path).expect_err(name).to_string();
    e.replacen(&path, name, 1)
}

fn master(m: &str) -> String {
    format!(
        "master {m:?} is not #LOCAL or a service name (1 to 48 characters of A-Z, a-z, 0-9 and _)"
    )
}

#[test]
fn duplicate_ids() {
    assert_eq!(
        map_error("duplicate_ids.map"),
        "duplicate_ids.map: invalid shard map:\n  \
         line 5: duplicate shard id \"acme\" (first on line 3)\n  \
         line 7: duplicate shard id \"acme\" (first on line 3)"
    );
}

#[test]
fn bad_booleans() {
    assert_eq!(
        map_error("bad_booleans.map"),
        "bad_booleans.map: invalid shard map:\n  \
         line 2: critical \"yes\" is not true or false\n  \
         line 3: critical \"0\" is not true or false\n  \
         line 5: missing critical"
    );
}

#[test]
fn bad_masters() {
    assert_eq!(
        map_error("bad_masters.map"),
        format!(
            "bad_masters.map: invalid shard map:\n  \
             line 2: {}\n  \
             line 3: {}\n  \
             line 4: {}\n  \
             line 5: {}",
            master("sjc-east"),
            master("#local"),
            master("new york"),
            master("")
        )
    );
}

#[test]
fn missing_fields() {
    assert_eq!(
        map_error("missing_fields.map"),
        "missing_fields.map: invalid shard map:\n  \
         line 2: missing shard_id\n  \
         line 3: missing shard_id, master\n  \
         line 5: 5 fields, but the header names 4 columns"
    );
}

#[test]
fn no_header() {
    assert_eq!(
        map_error("no_header.map"),
        "no_header.map: invalid shard map:\n  \
         line 2: expected a header naming shard_id, master and critical, found \"acme sjc false\""
    );
}

#[test]
fn bad_header() {
    assert_eq!(
        map_error("bad_header.map"),
        "bad_header.map: invalid shard map:\n  line 1: column master named twice in the header"
    );
}

#[test]
fn bad_quotes() {
    assert_eq!(
        map_error("bad_quotes.map"),
        "bad_quotes.map: invalid shard map:\n  \
         line 2: unterminated double quote in field 1\n  \
         line 3: double quote inside unquoted field 1\n  \
         line 4: text after the closing quote of field 1"
    );
}

#[test]
fn bad_ids() {
    assert_eq!(
        map_error("bad_ids.map"),
        "bad_ids.map: invalid shard map:\n  \
         line 2: shard id \"#acme\" starts with '#' (only #UNKNOWN may)\n  \
         line 3: shard id \"acme \" ends with a space\n  \
         line 4: empty shard id\n  \
         line 5: shard id \"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm\" is longer than 64 characters"
    );
}

#[test]
fn everything_wrong() {
    assert_eq!(
        map_error("everything_wrong.map"),
        format!(
            "everything_wrong.map: invalid shard map:\n  \
             line 3: critical \"maybe\" is not true or false\n  \
             line 4: {}\n  \
             line 4: duplicate shard id \"acme\" (first on line 3)\n  \
             line 5: missing master, critical\n  \
             line 6: 4 fields, but the header names 3 columns\n  \
             line 6: critical \"c\" is not true or false",
            master("bad-name")
        )
    );
}

#[test]
fn missing_file() {
    let e = ShardMap::load(fixture("absent.map"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "{}: cannot read shard map: No such file or directory (os error 2)",
            fixture("absent.map")
        )
    );
}

#[test]
fn bad_channels() {
    let path = fixture("bad_channels.list");
    let e = ChannelAssignment::load(&path, 4).unwrap_err().to_string();
    assert_eq!(
        e.replacen(&path, "bad_channels.list", 1),
        "bad_channels.list: invalid shard list:\n  \
         line 3: channel 4 is out of range: 4 channels are numbered 0 to 3\n  \
         line 4: channel \"one\" is not a number\n  \
         line 5: shard \"acme\" assigned twice (first on line 2)\n  \
         line 6: channel 99 is out of range: 4 channels are numbered 0 to 3\n  \
         line 7: empty shard name in the (critical) list\n  \
         line 8: unknown directive (everything) (expected (*) or (critical))"
    );
}

#[test]
fn repo_files_load() {
    let root = env!("CARGO_MANIFEST_DIR");
    let map = ShardMap::load(format!("{root}/shard.map")).unwrap();
    assert_eq!(map.len(), 4);
    let list = ChannelAssignment::load(format!("{root}/conf/shard.list"), 8).unwrap();
    assert!(list.is_critical("billing", &map));
}
