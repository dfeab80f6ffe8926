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
                 hint: fix {shown} (every key is explained in shardrep.toml: conf/ of \
                 shardrep's sources, or share/doc/shardrep/ where it is installed), then \
                 `shardrep check-config --config {shown}` checks it without starting \
                 anything\n"
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
// then prints the message and the hint; in JSON every line is one object
// and the run's error is its OFFLINE:ERROR event only.
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
    let config = path.display();
    assert_eq!(
        message_lines(&text),
        [
            format!("shardrep: {error}"),
            format!(
                "hint: start the replica, then `shardrepctl online` retries; or fix its \
                 address ([replica] in {config}), then start shardrep again (it reads \
                 {config} only at start)"
            )
        ],
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

mod sandboxed {
    //! The same against the sandbox: a refused login, a purged binlog, a
    //! transaction of a shard the map does not know.

    use mysql_async::prelude::Queryable;
    use serde_json::Value;

    use super::{assert_no_backtrace, message_lines};
    use crate::common::service::{
        ctl, ctl_ok, flush_and_purge_binlogs, master_position, status, stop_target_slave,
        wait_applied_to_master, wait_for_socket, ServiceSpec, TARGET,
    };
    use crate::common::{quote_ident, sandbox, unique_schema, Sandbox, Server};

    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    async fn schema_exists(sb: &Sandbox, schema: &str) -> bool {
        let n: Option<i64> = sb
            .connect(TARGET)
            .await
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (schema,),
            )
            .await
            .unwrap();
        n == Some(1)
    }

    /// `shardrep run --until-idle` of `spec` with `RUST_BACKTRACE=1`, to
    /// its exit (which must be 1); returns its stderr.
    fn run_until_idle_fails(sb: &Sandbox, spec: &mut ServiceSpec) -> String {
        spec.env = vec![("RUST_BACKTRACE".into(), "1".into())];
        let process = spec.spawn_with(sb, &["--until-idle"]);
        let log = process.log.clone();
        let code = { process }.child.wait().expect("wait for shardrep").code();
        let text = std::fs::read_to_string(log).unwrap();
        assert_eq!(code, Some(1), "{text}");
        assert_no_backtrace(&text);
        text
    }

    // The replica refuses the service's password: one message naming the
    // replica and the server's refusal, one hint naming the keys and the
    // file; the OFFLINE:ERROR logged once, with the same hint; nothing
    // created on the replica, the password nowhere.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_login_prints_one_message_and_a_hint() {
        let sb = sandbox();
        let _lock = LOCK.lock().await;
        let start = master_position(sb).await;
        let mut spec = ServiceSpec::new("badlogin", &[unique_schema("badlogin")], &start);
        let wrong = "wrong-replica-password-5521";
        spec.replica_password = Some(wrong.into());
        let text = run_until_idle_fails(sb, &mut spec);
        let config = spec.dir.join("shardrep.toml");
        let config = config.display();
        let message = format!(
            "cannot connect to the replica {}:{}: Server error: `ERROR 1045 (28000): Access \
             denied for user '{}'@'{}' (using password: YES)'",
            sb.host,
            sb.port(TARGET),
            sb.user,
            sb.host
        );
        let hint = format!(
            "the replica refused shardrep's user or a privilege: fix `user` and the password \
             (`password`, `password_file` or `password_env`) of [replica] in {config}, or the \
             user's grants there, then start shardrep again (it reads {config} only at start)"
        );
        assert_eq!(
            message_lines(&text),
            [format!("shardrep: {message}"), format!("hint: {hint}")],
            "{text}"
        );
        let logged: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("OFFLINE:ERROR"))
            .collect();
        assert_eq!(logged.len(), 1, "{text}");
        assert!(
            logged[0].ends_with(&format!("OFFLINE:ERROR error={message} next=\"{hint}\"")),
            "{text}"
        );
        assert!(!text.contains(wrong), "the password is shown: {text}");
        assert!(!schema_exists(sb, &spec.catalog()).await);
        spec.remove(sb).await;
    }

    // The master no longer has the binlog the service starts from: one
    // message with the master's refusal (1236), one hint (re-seed, then
    // reset).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_purged_binlog_prints_one_message_and_a_hint() {
        let sb = sandbox();
        let _lock = LOCK.lock().await;
        stop_target_slave(sb).await;
        let current = flush_and_purge_binlogs(sb).await;
        let (base, number) = current.rsplit_once('.').unwrap();
        let purged = format!("{base}.{:06}", number.parse::<u32>().unwrap() - 1);
        let mut spec = ServiceSpec::new(
            "purgedstart",
            &[unique_schema("purgedstart")],
            &format!("{purged}:4"),
        );
        let text = run_until_idle_fails(sb, &mut spec);
        let message = format!(
            "extractor: master {}:{}: binlog dump from {purged}:4: server error 1236 (HY000): \
             Could not find first log file name in binary log index file",
            sb.host,
            sb.port(Server::Master)
        );
        let hint = format!(
            "the master no longer has the binlog this service needs. Re-seed the replica from \
             the master, then `shardrepctl reset --confirm {}` removes the queue, the restart \
             rows and the recorded skips, so that the service can start again with a fresh \
             takeover or at source.start",
            spec.service
        );
        assert_eq!(
            message_lines(&text),
            [format!("shardrep: {message}"), format!("hint: {hint}")],
            "{text}"
        );
        assert_eq!(
            text.lines().filter(|l| l.contains("OFFLINE:ERROR")).count(),
            1,
            "{text}"
        );
        spec.remove(sb).await;
    }

    // `unknown_shard_policy = "error"` and a schema the map does not know:
    // OFFLINE:ERROR whose way out is the `shard insert` line that admits
    // it (and the skip); that line, run as written, admits it, and
    // `online` applies it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_shard_names_the_shard_insert_line_that_admits_it() {
        let sb = sandbox();
        let _lock = LOCK.lock().await;
        stop_target_slave(sb).await;
        let known = unique_schema("known");
        let mystery = unique_schema("mystery");
        let start = master_position(sb).await;
        let mut spec = ServiceSpec::new("unknown", std::slice::from_ref(&known), &start);
        spec.unknown_shard_policy = "error";
        spec.env = vec![("SHARDREP_LOG_FORMAT".into(), "json".into())];
        let mut process = spec.spawn(sb, false);
        wait_for_socket(&spec, &mut process);
        let q = quote_ident(&mystery);
        sb.connect(Server::Master)
            .await
            .query_drop(format!(
                "CREATE DATABASE {q}; CREATE TABLE {q}.t (id INT PRIMARY KEY); \
                 INSERT INTO {q}.t VALUES (1)"
            ))
            .await
            .unwrap();
        ctl_ok(
            &spec,
            &["wait", "--state", "OFFLINE:ERROR", "--timeout-secs", "120"],
        );
        let s = status(&spec);
        let line = format!(
            "printf '%s\\n' 'shard_id master critical' '{mystery} {} false' | shardrepctl \
             shard insert",
            spec.service
        );
        let next = format!(
            "admit the shard with `{line}`, then `shardrepctl online`; or `shardrepctl online \
             --skip-seqno 0` if this transaction must never be applied"
        );
        assert_eq!(
            s["pendingError"],
            format!(
                "rejected transaction from unknown shard: seqno=0 shard={mystery}. Way out: \
                 {next}"
            ),
            "{s}"
        );
        // The log's OFFLINE:ERROR event carries the same way out.
        let events: Vec<Value> = process
            .log_text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &Value| e["message"] == "OFFLINE:ERROR")
            .collect();
        assert_eq!(events.len(), 1, "{}", process.log_text());
        assert_eq!(events[0]["next"], next.as_str());

        // The line as written, with this test's shardrepctl and config.
        let ctl_bin = env!("CARGO_BIN_EXE_shardrepctl");
        let config = spec.dir.join("shardrep.toml");
        let run = line.replace(
            "shardrepctl shard insert",
            &format!("'{ctl_bin}' --config '{}' shard insert", config.display()),
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&run)
            .output()
            .unwrap();
        assert!(out.status.success(), "{run}: {out:?}");
        ctl_ok(&spec, &["online"]);
        let s = wait_applied_to_master(sb, &spec).await;
        assert_eq!(s["state"], "ONLINE", "{s}");
        let ids: Vec<i32> = sb
            .connect(TARGET)
            .await
            .query(format!("SELECT id FROM {q}.t"))
            .await
            .unwrap();
        assert_eq!(ids, [1]);
        let (code, _, err) = ctl(&spec, &["offline"]);
        assert_eq!(code, 0, "{err}");
        assert!(process.terminate());
        crate::common::service::drop_everywhere(sb, &[mystery]).await;
        spec.remove(sb).await;
    }
}
