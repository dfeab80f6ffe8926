//! The configuration's tests: parsing, defaults, every problem reported at
//! once, passwords kept out of messages, the example `conf/shardrep.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::keys::{section_fields, sections};
use super::load::parse;
use super::*;

const MINIMAL: &str = r#"
[service]
name = "sjc"

[source]
kind = "live"
host = "127.0.0.1"
user = "shardrep"
password = "source-pass-1"
server_id = 4242

[replica]
host = "127.0.0.1"
user = "shardrep"
password = "replica-pass-2"

[queue]
dir = "/tmp/q"

[control]
socket = "/tmp/c.sock"
"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")
}

/// Parses with a fixed environment instead of the process's.
fn parse_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse(text, Path::new("cfg.toml"), &|name| {
        vars.get(name)
            .cloned()
            .ok_or(std::env::VarError::NotPresent)
    })
}

fn problems(result: Result<Config, ConfigError>) -> Vec<(String, String)> {
    match result {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.into_iter().map(|p| (p.key, p.message)).collect()
        }
        Err(other) => panic!("expected Invalid, got {other}"),
        Ok(cfg) => panic!("expected Invalid, got {cfg:?}"),
    }
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, m)| (k.to_string(), m.to_string()))
        .collect()
}

/// MINIMAL with `from` replaced by `to` (which must occur once).
fn edit(from: &str, to: &str) -> String {
    assert_eq!(MINIMAL.matches(from).count(), 1, "{from}");
    MINIMAL.replace(from, to)
}

#[test]
fn minimal_config_and_its_defaults() {
    let cfg = Config::from_toml_str(MINIMAL, "conf/minimal.toml").unwrap();
    let expected = Config {
        service: ServiceConfig {
            name: "sjc".into(),
            role: Role::Applier,
            stop_grace_ms: 60_000,
        },
        source: SourceConfig {
            endpoint: SourceEndpoint::Live(LiveSourceConfig {
                host: "127.0.0.1".into(),
                port: 3306,
                user: "shardrep".into(),
                password: Secret::new("source-pass-1"),
                server_id: 4242,
                heartbeat_period_ms: 1000,
                connect_timeout_ms: 10_000,
                reconnect_max_backoff_ms: 30_000,
            }),
            start: StartPosition::Takeover,
            origin_services: BTreeMap::new(),
        },
        replica: ReplicaConfig {
            host: "127.0.0.1".into(),
            port: 3306,
            socket: None,
            user: "shardrep".into(),
            password: Secret::new("replica-pass-2"),
            catalog_schema: None,
            sql_log_bin: true,
            binlog_gtids: crate::config::BinlogGtids::Auto,
            binlog_gtids_from_sql_log_bin: false,
            preserve_origin: false,
            connect_timeout_ms: 10_000,
            allow_native_replication: false,
        },
        queue: QueueConfig {
            dir: "/tmp/q".into(),
            max_size_bytes: 10_737_418_240,
            retention_seqnos: 0,
            segment_size_bytes: 67_108_864,
            flush_interval_ms: 100,
            flush_bytes: 4_194_304,
            fragment_bytes: 8_388_608,
        },
        apply: ApplyConfig {
            channels: 8,
            block_commit_txns: 100,
            block_commit_interval_ms: 0,
            sync_interval_seqnos: 1000,
            max_in_flight_bytes: 67_108_864,
            shard_list: None,
            retry_max_attempts: 10,
            retry_max_backoff_ms: 5000,
            parallelism: Parallelism::Row,
            commit_window_seqnos: 4096,
            compound_blocks: true,
            method: ApplyMethod::Binlog,
        },
        shard_filter: ShardFilterConfig {
            map_file: None,
            enforce_home: false,
            unknown_shard_policy: ShardPolicy::Error,
            unwanted_shard_policy: ShardPolicy::Drop,
            auto_create: false,
        },
        control: ControlConfig {
            socket: "/tmp/c.sock".into(),
        },
        metrics: MetricsConfig::default(),
        origin: "conf/minimal.toml".into(),
    };
    assert_eq!(cfg, expected);
    assert_eq!(cfg.apply, ApplyConfig::default());
    assert_eq!(cfg.shard_filter, ShardFilterConfig::default());
    assert_eq!(cfg.catalog_schema(), "shardrep_sjc");
    assert_eq!(cfg.source.kind(), SourceKind::Live);
    assert!(cfg.source.files().is_none());
    assert_eq!(
        cfg.source.live().unwrap().password.expose(),
        "source-pass-1"
    );
    cfg.validate().unwrap();
}

#[test]
fn every_key_set_explicitly() {
    let text = r#"
[service]
name = "nyc_2"
role = "extractor"

[source]
kind = "files"
binlog_dir = "/var/lib/mysql"
binlog_index = "mysql-bin.index"
start = "mysql-bin.000042:1234"

[source.origin_services]
1 = "sjc"
2 = "nyc_2"

[replica]
host = "db2.example.com"
port = 3307
socket = "/run/mysqld/mysqld.sock"
user = "applier"
password_env = "REPLICA_PW"
catalog_schema = "tungsten_nyc"
sql_log_bin = false
preserve_origin = true
connect_timeout_ms = 2000

[queue]
dir = "q"
max_size_bytes = 1000000
retention_seqnos = 50
segment_size_bytes = 1000
flush_interval_ms = 7
flush_bytes = 99
fragment_bytes = 4096

[apply]
channels = 256
block_commit_txns = 1
block_commit_interval_ms = 20
sync_interval_seqnos = 10
shard_list = "conf/shard.list"
retry_max_attempts = 0
retry_max_backoff_ms = 100
parallelism = "row"
commit_window_seqnos = 500
compound_blocks = false
method = "sql"

[shard_filter]
map_file = "shard.map"
enforce_home = true
unknown_shard_policy = "warn"
unwanted_shard_policy = "accept"
auto_create = true

[control]
socket = "ctl.sock"
"#;
    let cfg = parse_with_env(text, &[("REPLICA_PW", "pw")]).unwrap();
    assert_eq!(cfg.service.role, Role::Extractor);
    assert_eq!(
        cfg.source.endpoint,
        SourceEndpoint::Files(FilesSourceConfig {
            binlog_dir: "/var/lib/mysql".into(),
            binlog_index: Some("mysql-bin.index".into()),
        })
    );
    assert_eq!(
        cfg.source.start,
        StartPosition::File {
            file: "mysql-bin.000042".into(),
            offset: 1234
        }
    );
    assert_eq!(
        cfg.source.origin_services,
        BTreeMap::from([(1, "sjc".to_string()), (2, "nyc_2".to_string())])
    );
    assert_eq!(cfg.replica.port, 3307);
    assert_eq!(cfg.replica.password.expose(), "pw");
    assert!(!cfg.replica.sql_log_bin);
    assert!(cfg.replica.preserve_origin);
    assert_eq!(
        cfg.replica.socket.as_deref(),
        Some(std::path::Path::new("/run/mysqld/mysqld.sock"))
    );
    assert_eq!(cfg.replica.connect_timeout_ms, 2000);
    assert_eq!(cfg.catalog_schema(), "tungsten_nyc");
    assert_eq!(
        cfg.queue,
        QueueConfig {
            dir: "q".into(),
            max_size_bytes: 1_000_000,
            retention_seqnos: 50,
            segment_size_bytes: 1000,
            flush_interval_ms: 7,
            flush_bytes: 99,
            fragment_bytes: 4096,
        }
    );
    assert_eq!(
        cfg.apply,
        ApplyConfig {
            channels: 256,
            block_commit_txns: 1,
            block_commit_interval_ms: 20,
            sync_interval_seqnos: 10,
            max_in_flight_bytes: 67_108_864,
            shard_list: Some("conf/shard.list".into()),
            retry_max_attempts: 0,
            retry_max_backoff_ms: 100,
            parallelism: Parallelism::Row,
            commit_window_seqnos: 500,
            compound_blocks: false,
            method: ApplyMethod::Sql,
        }
    );
    assert_eq!(
        cfg.shard_filter,
        ShardFilterConfig {
            map_file: Some("shard.map".into()),
            enforce_home: true,
            unknown_shard_policy: ShardPolicy::Warn,
            unwanted_shard_policy: ShardPolicy::Accept,
            auto_create: true,
        }
    );
    assert_eq!(cfg.control.socket, PathBuf::from("ctl.sock"));
}

#[test]
fn unknown_keys_in_two_sections_are_reported_together() {
    let text = edit("[queue]\n", "[queue]\nmax_size = 5\n")
        + "\n[apply]\nchanels = 4\nchannels = 2\n\n[aply]\nx = 1\n";
    let text = text.replace("[replica]\n", "[replica]\npasword = \"oops\"\n");
    let err = parse_with_env(&text, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cfg.toml: invalid configuration:\n  \
         replica.pasword: unknown key (did you mean `password`?)\n  \
         queue.max_size: unknown key\n  \
         apply.chanels: unknown key (did you mean `channels`?)\n  \
         aply: unknown key (did you mean `apply`?)"
    );
    assert!(!err.to_string().contains("oops"));
}

#[test]
fn missing_password_names_the_key() {
    let text = edit("password = \"replica-pass-2\"\n", "");
    assert_eq!(
        problems(parse_with_env(&text, &[])),
        pairs(&[(
            "replica.password",
            "missing: set one of password, password_file, password_env"
        )])
    );
}

#[test]
fn every_problem_is_listed_at_once() {
    let text = edit("password = \"source-pass-1\"\n", "") + "\n[apply]\nchannels = 0\n";
    let err = parse_with_env(&text, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cfg.toml: invalid configuration:\n  \
         source.password: missing: set one of password, password_file, password_env\n  \
         apply.channels: must be between 1 and 256, got 0"
    );
}

#[test]
fn an_empty_file_reports_every_required_key() {
    assert_eq!(
        problems(parse_with_env("", &[])),
        pairs(&[
            ("service.name", "missing"),
            ("source.kind", "missing: set \"live\" or \"files\""),
            ("replica.host", "missing"),
            (
                "replica.password",
                "missing: set one of password, password_file, password_env"
            ),
            ("replica.user", "missing"),
            ("queue.dir", "missing"),
            ("control.socket", "missing"),
        ])
    );
}

#[test]
fn values_out_of_range_are_problems() {
    let text = edit("name = \"sjc\"", "name = \"sjc-east\"\nrole = \"both\"")
        .replace("server_id = 4242", "server_id = 0\nport = 70000")
        .replace(
            "[replica]\n",
            "[replica]\nport = 0\ncatalog_schema = \"bad name\"\n",
        )
        .replace(
            "[queue]\n",
            "[queue]\nmax_size_bytes = 10\nsegment_size_bytes = 11\nretention_seqnos = -1\n",
        )
        + "\n[apply]\nchannels = 257\nblock_commit_txns = 0\ncommit_window_seqnos = 5000\n\
           \n[shard_filter]\nunknown_shard_policy = \"ignore\"\n";
    assert_eq!(
        problems(parse_with_env(&text, &[])),
        pairs(&[
            (
                "service.name",
                "must be 1 to 48 characters of A-Z, a-z, 0-9 and _, got \"sjc-east\""
            ),
            (
                "service.role",
                "must be one of \"applier\", \"extractor\", got \"both\""
            ),
            ("source.port", "must be between 1 and 65535, got 70000"),
            (
                "source.server_id",
                "must be between 1 and 4294967295, got 0"
            ),
            (
                "replica.catalog_schema",
                "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and $, got \"bad name\""
            ),
            ("replica.port", "must be between 1 and 65535, got 0"),
            ("queue.retention_seqnos", "must be at least 0, got -1"),
            (
                "queue.segment_size_bytes",
                "must not exceed queue.max_size_bytes (10), got 11"
            ),
            (
                "apply.block_commit_txns",
                "must be between 1 and 4294967295, got 0"
            ),
            ("apply.channels", "must be between 1 and 256, got 257"),
            (
                "apply.commit_window_seqnos",
                "must be between 1 and 4096, got 5000"
            ),
            (
                "shard_filter.unknown_shard_policy",
                "must be one of \"accept\", \"drop\", \"warn\", \"error\", got \"ignore\""
            ),
        ])
    );
}

#[test]
fn service_name_limits() {
    let name48 = "a".repeat(48);
    let ok = edit("name = \"sjc\"", &format!("name = \"{name48}\""));
    let cfg = parse_with_env(&ok, &[]).unwrap();
    assert_eq!(cfg.catalog_schema(), format!("shardrep_{name48}"));
    let long = edit("name = \"sjc\"", &format!("name = \"{name48}b\""));
    assert_eq!(problems(parse_with_env(&long, &[]))[0].0, "service.name");
    let empty = edit("name = \"sjc\"", "name = \"\"");
    assert_eq!(problems(parse_with_env(&empty, &[]))[0].0, "service.name");
}

#[test]
fn validate_checks_a_config_changed_in_code() {
    let mut cfg = parse_with_env(MINIMAL, &[]).unwrap();
    cfg.apply.channels = 300;
    cfg.control.socket = PathBuf::from(format!("/tmp/{}", "s".repeat(120)));
    let err = cfg.validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "cfg.toml: invalid configuration:\n  \
         apply.channels: must be between 1 and 256, got 300\n  \
         control.socket: must be at most 107 bytes (Unix socket path limit), got 125"
    );
}

#[test]
fn debug_and_display_never_show_passwords() {
    let cfg = parse_with_env(MINIMAL, &[]).unwrap();
    let debug = format!("{cfg:?}");
    let pretty = format!("{cfg:#?}");
    for text in [&debug, &pretty] {
        assert!(!text.contains("source-pass-1"), "{text}");
        assert!(!text.contains("replica-pass-2"), "{text}");
        assert!(text.contains("password: ***"), "{text}");
    }
    let secret = &cfg.replica.password;
    assert_eq!(format!("{secret}"), "***");
    assert_eq!(format!("{secret:?}"), "***");
    assert_eq!(secret.expose(), "replica-pass-2");
}

#[test]
fn problems_never_show_passwords() {
    let text = edit(
        "password = \"replica-pass-2\"\n",
        "password = \"replica-pass-2\"\npassword_env = \"PW\"\n",
    );
    let err = parse_with_env(&text, &[("PW", "env-pass-3")]).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("replica-pass-2") && !shown.contains("env-pass-3"));
    assert_eq!(
        problems(Err(err)),
        pairs(&[(
            "replica.password",
            "set only one of password, password_file, password_env (found password, password_env)"
        )])
    );
}

#[test]
fn password_env_resolution() {
    let text = edit(
        "password = \"replica-pass-2\"\n",
        "password_env = \"REPLICA_PW\"\n",
    );
    let cfg = parse_with_env(&text, &[("REPLICA_PW", "from-env")]).unwrap();
    assert_eq!(cfg.replica.password.expose(), "from-env");

    assert_eq!(
        problems(parse_with_env(&text, &[])),
        pairs(&[(
            "replica.password_env",
            "environment variable REPLICA_PW is not set in shardrep's environment: export it \
             before starting shardrep (under systemd: Environment= or EnvironmentFile= in the \
             unit), or name another variable"
        )])
    );
    assert_eq!(
        problems(parse_with_env(&text, &[("REPLICA_PW", "")])),
        pairs(&[(
            "replica.password_env",
            "environment variable REPLICA_PW is empty"
        )])
    );
}

#[test]
fn password_env_reads_the_process_environment() {
    let var = "SHARDREP_CONFIG_TEST_PW_7731";
    std::env::set_var(var, "process-env-pw");
    let text = edit(
        "password = \"replica-pass-2\"\n",
        &format!("password_env = \"{var}\"\n"),
    );
    let cfg = Config::from_toml_str(&text, "cfg.toml").unwrap();
    assert_eq!(cfg.replica.password.expose(), "process-env-pw");
    std::env::remove_var(var);
}

#[test]
fn password_file_resolution_relative_to_the_config_file() {
    let cfg = Config::load(fixtures().join("password_file.toml")).unwrap();
    // One trailing newline is removed; a file without one is used as is.
    assert_eq!(cfg.replica.password.expose(), "replica-secret");
    assert_eq!(
        cfg.source.live().unwrap().password.expose(),
        "source-secret"
    );

    let text = edit(
        "password = \"replica-pass-2\"\n",
        "password_file = \"no-such.password\"\n",
    );
    let origin = fixtures().join("inline.toml");
    let got = problems(Config::from_toml_str(&text, &origin));
    let missing = fixtures().join("no-such.password");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "replica.password_file");
    assert!(
        got[0]
            .1
            .starts_with(&format!("cannot read {}: ", missing.display())),
        "{}",
        got[0].1
    );
}

#[test]
fn password_file_trims_exactly_one_newline() {
    let dir = std::env::temp_dir().join(format!("shardrep-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = edit(
        "password = \"replica-pass-2\"\n",
        "password_file = \"pw.txt\"\n",
    );
    for (content, expected) in [("a\r\n", "a"), ("b\n\n", "b\n"), (" c ", " c ")] {
        std::fs::write(dir.join("pw.txt"), content).unwrap();
        let cfg = Config::from_toml_str(&text, dir.join("c.toml")).unwrap();
        assert_eq!(cfg.replica.password.expose(), expected);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn start_positions() {
    let parse = |s: &str| s.parse::<StartPosition>();
    assert_eq!(parse("takeover"), Ok(StartPosition::Takeover));
    assert_eq!(parse("current"), Ok(StartPosition::Current));
    assert_eq!(
        parse("mysql-bin.000001:4"),
        Ok(StartPosition::File {
            file: "mysql-bin.000001".into(),
            offset: 4
        })
    );
    assert_eq!(
        parse("gtid:0-1-100,1-2-5"),
        Ok(StartPosition::Gtid("0-1-100,1-2-5".into()))
    );
    let err = |s: &str| parse(s).unwrap_err().to_string();
    assert_eq!(
        err("yesterday"),
        "expected takeover, current, FILE:POS or gtid:D-S-N[,D-S-N...], got \"yesterday\""
    );
    assert_eq!(
        err("mysql-bin.000001:abc"),
        "expected FILE:POS with digits after ':', got \"mysql-bin.000001:abc\""
    );
    assert_eq!(
        err("mysql-bin.000001:"),
        "expected FILE:POS with digits after ':', got \"mysql-bin.000001:\""
    );
    assert_eq!(
        err(":4"),
        "expected FILE:POS with a binlog file name before ':', got \":4\""
    );
    assert_eq!(
        err("f:99999999999999999999"),
        "binlog position 99999999999999999999 is too large in \"f:99999999999999999999\""
    );
    assert_eq!(
        err("gtid:"),
        "expected gtid:D-S-N[,D-S-N...], got nothing after \"gtid:\""
    );
    assert_eq!(
        err("gtid:0-1"),
        "GTID \"0-1\" is not D-S-N (three unsigned integers joined by '-')"
    );
    assert_eq!(
        err("gtid:0-1-2, 1-1-3"),
        "GTID \" 1-1-3\" is not D-S-N (three unsigned integers joined by '-')"
    );
    assert_eq!(
        err("gtid:0--1-2"),
        "GTID \"0--1-2\" is not D-S-N (three unsigned integers joined by '-')"
    );
    assert_eq!(
        err("gtid:4294967296-1-2"),
        "GTID \"4294967296-1-2\" is out of range (domain and server id are 32-bit, sequence 64-bit)"
    );
    assert_eq!(
        err("gtid:0-1-2,0-2-3"),
        "GTID domain 0 appears more than once"
    );
}

#[test]
fn bad_start_position_is_a_problem_of_source_start() {
    let text = edit(
        "server_id = 4242",
        "server_id = 4242\nstart = \"bin.1:xyz\"",
    );
    assert_eq!(
        problems(parse_with_env(&text, &[])),
        pairs(&[(
            "source.start",
            "expected FILE:POS with digits after ':', got \"bin.1:xyz\""
        )])
    );
}

#[test]
fn metrics_listen_is_an_address() {
    let ok = format!("{MINIMAL}\n[metrics]\nlisten = \"127.0.0.1:9104\"\n");
    let cfg = Config::from_toml_str(&ok, "m.toml").unwrap();
    assert_eq!(cfg.metrics.listen, Some("127.0.0.1:9104".parse().unwrap()));
    let bad = format!("{MINIMAL}\n[metrics]\nlisten = \"localhost\"\n");
    assert_eq!(
        problems(parse_with_env(&bad, &[])),
        pairs(&[(
            "metrics.listen",
            "\"localhost\" is not a numeric IP address and port (e.g. \"127.0.0.1:9104\"; a \
             host name is not resolved)"
        )])
    );
}

proptest! {
    #[test]
    fn start_position_display_parses_back(
        file in "[a-z][a-z0-9._-]{0,20}".prop_filter("not gtid", |f| f != "gtid"),
        offset in any::<u64>(),
        gtids in proptest::collection::btree_map(any::<u32>(), (any::<u32>(), any::<u64>()), 1..5),
    ) {
        let list: Vec<String> = gtids.iter().map(|(d, (s, n))| format!("{d}-{s}-{n}")).collect();
        for pos in [
            StartPosition::File { file: file.clone(), offset },
            StartPosition::Gtid(list.join(",")),
            StartPosition::Takeover,
            StartPosition::Current,
        ] {
            prop_assert_eq!(pos.to_string().parse::<StartPosition>(), Ok(pos.clone()));
        }
    }
}

#[test]
fn source_keys_must_match_the_kind() {
    let files = edit("kind = \"live\"", "kind = \"files\"\nbinlog_dir = \"/b\"");
    assert_eq!(
        problems(parse_with_env(&files, &[])),
        pairs(&[
            ("source.host", "not used with kind = \"files\""),
            ("source.password", "not used with kind = \"files\""),
            ("source.server_id", "not used with kind = \"files\""),
            ("source.user", "not used with kind = \"files\""),
        ])
    );
    let live = edit(
        "kind = \"live\"",
        "kind = \"live\"\nbinlog_index = \"x.index\"",
    );
    assert_eq!(
        problems(parse_with_env(&live, &[])),
        pairs(&[("source.binlog_index", "not used with kind = \"live\"")])
    );
    let unknown = edit("kind = \"live\"", "kind = \"network\"");
    assert_eq!(
        problems(parse_with_env(&unknown, &[])),
        pairs(&[(
            "source.kind",
            "must be one of \"live\", \"files\", got \"network\""
        )])
    );
    let files_without_dir = "[source]\nkind = \"files\"\n";
    let got = problems(parse_with_env(files_without_dir, &[]));
    assert!(got.contains(&("source.binlog_dir".into(), "missing".into())));
}

#[test]
fn origin_services_keys_are_server_ids() {
    let text = MINIMAL.to_string()
        + "\n[source.origin_services]\n1 = \"sjc\"\n2 = \"bad-name\"\nx = \"nyc\"\n01 = \"nyc\"\n";
    assert_eq!(
        problems(parse_with_env(&text, &[])),
        pairs(&[
            (
                "source.origin_services.01",
                "key must be a master server id (1 to 4294967295, no leading zeros)"
            ),
            (
                "source.origin_services.2",
                "must be 1 to 48 characters of A-Z, a-z, 0-9 and _, got \"bad-name\""
            ),
            (
                "source.origin_services.x",
                "key must be a master server id (1 to 4294967295, no leading zeros)"
            ),
        ])
    );
}

#[test]
fn type_error_names_the_file_and_line() {
    let text = edit("[replica]\n", "[replica]\nport = \"abc\"\n");
    let err = Config::from_toml_str(&text, "conf/bad.toml").unwrap_err();
    let ConfigError::Parse { file, message } = &err else {
        panic!("expected Parse, got {err}");
    };
    assert_eq!(file, Path::new("conf/bad.toml"));
    let line = text.lines().position(|l| l == "port = \"abc\"").unwrap() + 1;
    assert!(
        message.starts_with(&format!("TOML parse error at line {line}, column 8")),
        "{message}"
    );
    assert!(
        message.contains("invalid type: string \"abc\", expected an integer"),
        "{message}"
    );
    assert!(err
        .to_string()
        .starts_with("conf/bad.toml: TOML parse error"));
}

#[test]
fn type_error_with_unknown_keys_names_the_key_and_lists_them() {
    let text = edit("[replica]\n", "[replica]\nport = \"abc\"\nprot = 1\n");
    let err = Config::from_toml_str(&text, "conf/bad.toml").unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with("conf/bad.toml: invalid type: string \"abc\""),
        "{shown}"
    );
    assert!(shown.contains("replica.port"), "{shown}");
    assert!(
        shown.ends_with("\nalso: replica.prot: unknown key (did you mean `port`?)"),
        "{shown}"
    );
}

#[test]
fn syntax_error_names_the_file() {
    let err = Config::from_toml_str("[service\nname = 1\n", "x/y.toml").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }));
    assert!(
        err.to_string()
            .starts_with("x/y.toml: TOML parse error at line 1"),
        "{err}"
    );
}

#[test]
fn unreadable_file_is_a_read_error() {
    let path = fixtures().join("does-not-exist.toml");
    let err = Config::load(&path).unwrap_err();
    assert!(matches!(&err, ConfigError::Read { cause, .. }
        if cause.kind() == std::io::ErrorKind::NotFound));
    // The cause's text in the message, and no source() to print it again.
    assert_eq!(
        err.to_string(),
        format!(
            "{}: cannot read configuration file: No such file or directory (os error 2)",
            path.display()
        )
    );
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn example_configuration_validates() {
    std::env::set_var("SHARDREP_PASSWORD", "example-pw");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/shardrep.toml");
    let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    cfg.validate().unwrap();
    assert_eq!(cfg.service.name, "sjc");
    assert_eq!(cfg.service.role, Role::Applier);
    let live = cfg.source.live().expect("live source");
    assert_eq!((live.host.as_str(), live.port), ("127.0.0.1", 13306));
    assert_eq!(live.user, "shardrep");
    assert_eq!(live.password.expose(), "example-pw");
    assert_eq!(cfg.source.start, StartPosition::Takeover);
    assert_eq!(
        (cfg.replica.host.as_str(), cfg.replica.port),
        ("127.0.0.1", 13307)
    );
    assert_eq!(cfg.replica.user, "shardrep");
    assert_eq!(cfg.replica.password.expose(), "example-pw");
    assert_eq!(cfg.catalog_schema(), "shardrep_sjc");
    assert_eq!(cfg.queue.dir, PathBuf::from("/tmp/shardrep/sjc/queue"));
    assert_eq!(
        cfg.control.socket,
        PathBuf::from("/tmp/shardrep/sjc/control.sock")
    );
    assert_eq!(cfg.shard_filter.map_file, Some(PathBuf::from("shard.map")));
    assert_eq!(cfg.apply.shard_list, Some(PathBuf::from("conf/shard.list")));
}

#[test]
fn unknown_key_check_knows_every_section() {
    let top = sections();
    assert_eq!(
        top,
        [
            "service",
            "source",
            "replica",
            "queue",
            "apply",
            "shard_filter",
            "control",
            "metrics"
        ]
    );
    for section in top {
        let fields = section_fields(section).unwrap();
        assert!(!fields.is_empty(), "{section}");
    }
    assert!(section_fields("source")
        .unwrap()
        .contains(&"origin_services"));
}

#[test]
fn duration_and_size_keys_name_their_unit() {
    const UNITS: &[&str] = &["_ms", "_secs", "_bytes", "_seqnos", "_txns"];
    const MEASURES: &[&str] = &[
        "timeout",
        "interval",
        "period",
        "backoff",
        "size",
        "retention",
        "flush",
    ];
    for section in sections() {
        for key in section_fields(section).unwrap() {
            if MEASURES.iter().any(|m| key.contains(m)) {
                assert!(
                    UNITS.iter().any(|u| key.ends_with(u)),
                    "{section}.{key} does not name its unit"
                );
            }
        }
    }
}

/// `conf/shardrep.toml` names every key (set, commented out, or quoted in
/// its comments), and every key it sets holds the default, except the
/// sandbox's ports and the example's paths, origin and files.
#[test]
fn example_configuration_shows_every_key_with_its_default() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/shardrep.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for section in sections() {
        for key in section_fields(section).unwrap() {
            let shown = text.contains(&format!("`{key}`"))
                || text.contains(&format!("[{section}.{key}]"))
                || text.lines().any(|line| {
                    let line = line.trim_start_matches('#').trim_start();
                    line.starts_with(&format!("{key} ="))
                });
            assert!(shown, "conf/shardrep.toml does not show {section}.{key}");
        }
    }

    let cfg = parse(&text, &path, &|_| Ok("example-pw".into())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.service.role, Role::default());
    assert_eq!(cfg.source.start, StartPosition::default());
    let live = cfg.source.live().expect("live source");
    assert_eq!(
        (
            live.heartbeat_period_ms,
            live.connect_timeout_ms,
            live.reconnect_max_backoff_ms
        ),
        (
            defaults::SOURCE_HEARTBEAT_PERIOD_MS.default,
            defaults::SOURCE_CONNECT_TIMEOUT_MS.default,
            defaults::SOURCE_RECONNECT_MAX_BACKOFF_MS.default
        )
    );
    let r = &cfg.replica;
    assert_eq!(
        (
            r.socket.as_deref(),
            r.catalog_schema.as_deref(),
            r.binlog_gtids,
            r.preserve_origin,
            r.connect_timeout_ms,
            r.allow_native_replication
        ),
        (
            None,
            None,
            defaults::REPLICA_BINLOG_GTIDS,
            defaults::REPLICA_PRESERVE_ORIGIN,
            defaults::REPLICA_CONNECT_TIMEOUT_MS.default,
            defaults::REPLICA_ALLOW_NATIVE_REPLICATION
        )
    );
    assert_eq!(cfg.queue, QueueConfig::with_defaults(&cfg.queue.dir));
    assert_eq!(
        cfg.apply,
        ApplyConfig {
            shard_list: cfg.apply.shard_list.clone(),
            ..ApplyConfig::default()
        }
    );
    assert_eq!(
        cfg.shard_filter,
        ShardFilterConfig {
            map_file: cfg.shard_filter.map_file.clone(),
            ..ShardFilterConfig::default()
        }
    );
}

#[test]
fn binlog_gtids_is_read_or_derived_from_sql_log_bin() {
    let mode = |extra: &str| {
        Config::from_toml_str(
            &edit(
                "password = \"replica-pass-2\"\n",
                &format!("password = \"replica-pass-2\"\n{extra}\n"),
            ),
            "cfg.toml",
        )
        .map(|c| (c.replica.binlog_gtids, c.replica.sql_log_bin))
    };
    assert_eq!(mode("").unwrap(), (BinlogGtids::Auto, true));
    assert_eq!(
        mode("binlog_gtids = \"master\"").unwrap(),
        (BinlogGtids::Master, true)
    );
    assert_eq!(
        mode("binlog_gtids = \"own\"").unwrap(),
        (BinlogGtids::Own, true)
    );
    assert_eq!(
        mode("binlog_gtids = \"off\"").unwrap(),
        (BinlogGtids::Off, false)
    );
    assert_eq!(
        mode("sql_log_bin = true").unwrap(),
        (BinlogGtids::Own, true)
    );
    assert_eq!(
        mode("sql_log_bin = false").unwrap(),
        (BinlogGtids::Off, false)
    );
    assert_eq!(
        mode("sql_log_bin = true\nbinlog_gtids = \"own\"").unwrap(),
        (BinlogGtids::Own, true)
    );
    assert!(mode("sql_log_bin = true\nbinlog_gtids = \"master\"").is_err());
    assert!(mode("sql_log_bin = true\nbinlog_gtids = \"auto\"").is_err());
    // A refusal names the key written (gtid_topology::check_binlog_gtids).
    let from = |extra: &str| {
        Config::from_toml_str(
            &edit(
                "password = \"replica-pass-2\"\n",
                &format!("password = \"replica-pass-2\"\n{extra}\n"),
            ),
            "cfg.toml",
        )
        .unwrap()
        .replica
        .binlog_gtids_from_sql_log_bin
    };
    assert!(from("sql_log_bin = true"));
    assert!(!from("sql_log_bin = true\nbinlog_gtids = \"own\""));
    assert!(!from(""));
    let refused = problems(Config::from_toml_str(
        &edit(
            "password = \"replica-pass-2\"\n",
            "password = \"replica-pass-2\"\nsql_log_bin = false\nbinlog_gtids = \"master\"\n",
        ),
        "cfg.toml",
    ));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "replica.sql_log_bin");
    assert!(
        refused[0].1.contains("binlog_gtids replaces it"),
        "{refused:?}"
    );
    let refused = problems(Config::from_toml_str(
        &edit(
            "password = \"replica-pass-2\"\n",
            "password = \"replica-pass-2\"\nbinlog_gtids = \"mine\"\n",
        ),
        "cfg.toml",
    ));
    assert_eq!(
        refused,
        pairs(&[(
            "replica.binlog_gtids",
            "must be one of \"auto\", \"master\", \"own\", \"off\", got \"mine\""
        )])
    );
}

#[test]
fn a_bare_word_value_names_its_key() {
    let text = edit("[replica]\n", "[replica]\nport = eight\n");
    let err = Config::from_toml_str(&text, "conf/bad.toml").unwrap_err();
    let line = text.lines().position(|l| l == "port = eight").unwrap() + 1;
    assert!(
        err.to_string().contains(&format!(
            "`replica.port` (line {line}): its value is not valid TOML"
        )),
        "{err}"
    );
}
