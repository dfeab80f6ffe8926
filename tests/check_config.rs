//! `shardrep check-config`: besides the TOML itself, the shard map and the
//! shard list the configuration names are read and parsed as `shardrep run`
//! will, so a missing file or a bad line is found before the service starts.
//! No server is needed.

#[path = "queue_support/mod.rs"]
mod queue_support;

use std::path::Path;
use std::process::{Command, Output};

use queue_support::TempDir;

/// A complete configuration whose `[apply]` and `[shard_filter]` sections
/// get `apply_extra` and `filter_extra`.
fn config_text(dir: &Path, apply_extra: &str, filter_extra: &str) -> String {
    format!(
        r#"[service]
name = "checkcfg"
[source]
kind = "live"
host = "127.0.0.1"
port = 3306
user = "shardrep"
password = "not-shown"
server_id = 4242
start = "mariadb-bin.000001:4"
[replica]
host = "127.0.0.1"
port = 3307
user = "shardrep"
password = "not-shown"
[queue]
dir = "{queue}"
[apply]
channels = 4
{apply_extra}
[shard_filter]
unknown_shard_policy = "accept"
{filter_extra}
[control]
socket = "{socket}"
"#,
        queue = dir.join("queue").display(),
        socket = dir.join("control.sock").display(),
    )
}

fn check(dir: &Path, text: &str) -> Output {
    let path = dir.join("shardrep.toml");
    std::fs::write(&path, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .expect("run shardrep")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn valid_files_pass_and_missing_or_bad_ones_are_named() {
    let tmp = TempDir::new("check-config");
    let dir = tmp.path();
    std::fs::create_dir_all(dir).unwrap();
    let map = dir.join("shard.map");
    let list = dir.join("shard.list");
    std::fs::write(&map, "shard_id master critical\nacme checkcfg false\n").unwrap();
    std::fs::write(&list, "acme=1\n(*)=2\n").unwrap();
    let apply = format!("shard_list = \"{}\"", list.display());
    let filter = format!("map_file = \"{}\"", map.display());

    let out = check(dir, &config_text(dir, &apply, &filter));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("configuration of service 'checkcfg' is valid"));

    // A shard map that is not there.
    let missing = dir.join("no-such.map");
    let out = check(
        dir,
        &config_text(
            dir,
            &apply,
            &format!("map_file = \"{}\"", missing.display()),
        ),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("shard_filter.map_file"), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(
        err.contains(&format!(
            "\nhint: check shard_filter.map_file ({}) and that this user may read the file\n",
            missing.display()
        )),
        "{err}"
    );

    // A shard map line that is not a shard.
    std::fs::write(&map, "shard_id master critical\nacme checkcfg yes\n").unwrap();
    let out = check(dir, &config_text(dir, &apply, &filter));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("line 2"), "{err}");
    assert!(
        err.contains("\nhint: fix the lines named in the shard map: "),
        "{err}"
    );
    std::fs::write(&map, "shard_id master critical\nacme checkcfg false\n").unwrap();

    // A shard list naming a channel the configuration does not have.
    std::fs::write(&list, "acme=1\nbeta=9\n").unwrap();
    let out = check(dir, &config_text(dir, &apply, &filter));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("apply.shard_list"), "{err}");
    assert!(err.contains(&list.display().to_string()), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(
        err.contains("\nhint: fix the lines named in the shard list: "),
        "{err}"
    );
    assert!(!err.contains("not-shown"), "the password stays out: {err}");
}

/// A password the TOML cannot hold (a bad escape, no quotes, a number)
/// fails `check-config` and `run` with the line and key named and no part
/// of the password shown, in the error's Display as on stderr.
#[test]
fn a_bad_password_value_is_never_echoed() {
    let tmp = TempDir::new("check-config-secret");
    let dir = tmp.path();
    std::fs::create_dir_all(dir).unwrap();
    let good = config_text(dir, "", "");
    for (value, secret, expect) in [
        (
            r#""Pa\qss-Wd7x""#,
            r"Pa\qss-Wd7x",
            "TOML parse error at line 15, column",
        ),
        (
            "Pa55-wOrdQz",
            "Pa55-wOrdQz",
            "TOML parse error at line 15, column",
        ),
        (
            "918273645",
            "918273645",
            "replica.password: must be a TOML string",
        ),
    ] {
        // The replica's password is on line 15 (after `[replica]`).
        let text = good.replacen(
            "password = \"not-shown\"\n[queue]",
            &format!("password = {value}\n[queue]"),
            1,
        );
        assert_eq!(
            text.lines().nth(14),
            Some(format!("password = {value}").as_str())
        );
        let path = dir.join("shardrep.toml");
        std::fs::write(&path, &text).unwrap();
        let display = shardrep::config::Config::load(&path)
            .expect_err("a bad password value")
            .to_string();
        let check_err = stderr(&check(dir, &text));
        let run = Command::new(env!("CARGO_BIN_EXE_shardrep"))
            .args(["run", "--config"])
            .arg(&path)
            .output()
            .expect("run shardrep");
        assert_ne!(run.status.code(), Some(0));
        let run_err = stderr(&run);
        for shown in [&display, &check_err, &run_err] {
            assert!(shown.contains(expect), "{value}: {shown}");
            assert!(!shown.contains(secret), "{value}: {shown}");
            for part in secret.split(|c: char| !c.is_ascii_alphanumeric()) {
                if part.len() >= 3 {
                    assert!(!shown.contains(part), "{value}: {part:?} shown: {shown}");
                }
            }
        }
        assert!(display.contains("password"), "{display}");
    }
}
