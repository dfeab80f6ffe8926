//! What a user sees when `shardrep` stops on a user error: one message
//! (`shardrep: …`) and what to do (`hint: …`) on stderr, exit 1, never a
//! backtrace, even with `RUST_BACKTRACE=1` in the environment; and with
//! `SHARDREP_LOG_FORMAT=json`, stderr holds one JSON object per line.
//!
//! The tests of this file without a server (a bad configuration, a closed
//! replica port) run the real binary on a configuration they write; those
//! with one use the sandbox's replica 2 and take one lock.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use common::service::tempdir;

/// A complete configuration (live source, replica on `replica_port`,
/// queue and socket in `dir`) whose `[apply]` section gets `apply_extra`.
fn config_text(dir: &Path, replica_port: u16, apply_extra: &str) -> String {
    format!(
        r#"[service]
name = "usererr"
[source]
kind = "live"
host = "127.0.0.1"
port = 1
user = "shardrep"
password = "not-shown"
server_id = 4243
start = "mariadb-bin.000001:4"
[replica]
host = "127.0.0.1"
port = {replica_port}
user = "shardrep"
password = "not-shown"
[queue]
dir = "{queue}"
[apply]
channels = 2
{apply_extra}
[shard_filter]
unknown_shard_policy = "accept"
[control]
socket = "{socket}"
"#,
        queue = dir.join("queue").display(),
        socket = dir.join("control.sock").display(),
    )
}

/// Writes `text` as `dir/shardrep.toml`; returns its path.
fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("shardrep.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `shardrep ARGS` with `RUST_BACKTRACE=1` and `env`.
fn shardrep(args: &[&str], config: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env("RUST_BACKTRACE", "1")
        .env_remove("SHARDREP_LOG_FORMAT")
        .env_remove("SHARDREP_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("run shardrep")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// No backtrace in `text`, in any of the forms Rust and anyhow print.
fn assert_no_backtrace(text: &str) {
    assert!(
        !text.to_lowercase().contains("stack backtrace"),
        "a backtrace: {text}"
    );
}

/// Whether `line` is a log line of the text format (it starts with the
/// event's RFC 3339 time, e.g. `2026-01-02T03:04:05.123456Z`).
fn is_log_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// The lines of `text` that are not log lines.
fn message_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !is_log_line(l))
        .map(str::to_string)
        .collect()
}

/// A free TCP port on 127.0.0.1 that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

// A misspelt key: the configuration's problems and the way to check the
// file, as `run` and `check-config` print them; exit 1, no backtrace. The
// file that is not there says so, with its OS error once.
#[test]
fn a_bad_configuration_prints_its_problems_and_a_hint() {
    let dir = tempdir("usererr-config");
    let path = write_config(&dir, &config_text(&dir, closed_port(), "chanels = 2"));
    let shown = path.display();
    for command in [&["run"][..], &["run", "--until-idle"], &["check-config"]] {
        let out = shardrep(command, &path, &[]);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "shardrep: {shown}: invalid configuration:\n  \
                 apply.chanels: unknown key (did you mean `channels`?)\n\
                 hint: fix {shown} (every key is explained in conf/shardrep.toml of \
                 shardrep's sources), then `shardrep check-config --config {shown}` checks it \
                 without starting anything\n"
            ),
            "{command:?}"
        );
        assert!(out.stdout.is_empty(), "{command:?}");
    }

    let missing = dir.join("no-such.toml");
    let out = shardrep(&["run"], &missing, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "shardrep: {m}: cannot read configuration file: No such file or directory (os \
             error 2)\nhint: check the path given to --config ({m}) and that this user may \
             read the file\n",
            m = missing.display()
        )
    );

    // A log format shardrep does not know is refused before anything runs.
    let out = shardrep(&["run"], &path, &[("SHARDREP_LOG_FORMAT", "yaml")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "shardrep: SHARDREP_LOG_FORMAT=\"yaml\": expected \"text\" or \"json\"\n"
    );

    // In JSON, the error is one JSON object: level, message and hint.
    let out = shardrep(&["run"], &path, &[("SHARDREP_LOG_FORMAT", "json")]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let event: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(event["level"], "ERROR", "{event}");
    assert_eq!(
        event["message"],
        format!(
            "{shown}: invalid configuration:\n  apply.chanels: unknown key (did you mean \
             `channels`?)"
        ),
        "{event}"
    );
    assert!(
        event["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with(&format!("fix {shown} "))),
        "{event}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// A replica that refuses the connection: `run --until-idle` logs the
// control socket once and the OFFLINE:ERROR once, with mysql_async's I/O
// error named once (not `Input/output error: Input/output error: …`),
// then prints the message; in JSON every line is one object and the
// run's error is its OFFLINE:ERROR event only.
#[test]
fn a_refused_connection_is_one_event_and_one_message() {
    let dir = tempdir("usererr-refused");
    let port = closed_port();
    let path = write_config(&dir, &config_text(&dir, port, ""));
    let error = format!(
        "cannot connect to the replica 127.0.0.1:{port}: Input/output error: Connection \
         refused (os error 111)"
    );

    let out = shardrep(&["run", "--until-idle"], &path, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stderr(&out);
    assert_no_backtrace(&text);
    assert_eq!(
        message_lines(&text),
        [format!("shardrep: {error}")],
        "{text}"
    );
    let logged = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(logged("control socket listening"), 1, "{text}");
    assert_eq!(logged(&format!("OFFLINE:ERROR error={error}")), 1, "{text}");
    assert_eq!(
        logged("Input/output error: Input/output error"),
        0,
        "{text}"
    );

    let out = shardrep(
        &["run", "--until-idle"],
        &path,
        &[("SHARDREP_LOG_FORMAT", "json")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events: Vec<Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = events
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        messages,
        ["control socket listening", "OFFLINE:ERROR"],
        "{events:?}"
    );
    assert_eq!(
        events[0]["socket"],
        dir.join("control.sock").display().to_string()
    );
    assert_eq!(events[1]["level"], "ERROR");
    assert_eq!(events[1]["error"], error.as_str(), "{}", events[1]);
    assert_eq!(
        events[1]["target"], "shardrep::replicator::service",
        "{}",
        events[1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
