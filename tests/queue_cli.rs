//! `shardrep extract --to-queue` (resuming from the stored progress,
//! ignoring `--from`), `shardrep log list` and `shardrep log info` on a
//! binlog fixture.

mod queue_support;

use std::path::Path;
use std::process::{Command, Output};

use queue_support::{cut_closing_rotate, TempDir};

/// Runs the binary and returns what it printed, whatever its exit status.
fn shardrep_status(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run shardrep")
}

/// Runs the binary; it must succeed.
fn shardrep(args: &[&str]) -> Output {
    let out = shardrep_status(args);
    assert!(
        out.status.success(),
        "shardrep {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn extract_to_queue_resumes_and_log_commands_print_it() {
    let work = TempDir::new("cli");
    let binlog = work.path().join("binlog");
    std::fs::create_dir_all(&binlog).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/binlog/cases/B12.bin");
    let bytes = cut_closing_rotate(&std::fs::read(fixture).unwrap());
    std::fs::write(binlog.join("mariadb-bin.000001"), bytes).unwrap();
    let dir = binlog.to_str().unwrap();
    let queue = work.path().join("queue");
    let q = queue.to_str().unwrap();

    let printed = text(&shardrep(&[
        "extract",
        "--binlog-dir",
        dir,
        "--from",
        "mariadb-bin.000001:4",
        "--json",
    ]));
    let expected: Vec<&str> = printed.lines().collect();
    assert!(expected.len() > 5, "{printed}");

    // Five, then the rest: the second run resumes after seqno 4 although
    // --from names the start again.
    shardrep(&[
        "extract",
        "--binlog-dir",
        dir,
        "--from",
        "mariadb-bin.000001:4",
        "--to-queue",
        q,
        "--limit",
        "5",
    ]);
    let out = shardrep(&[
        "extract",
        "--binlog-dir",
        dir,
        "--from",
        "mariadb-bin.000001:4",
        "--to-queue",
        q,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--from is ignored"), "{stderr}");
    assert!(
        stderr.contains(&format!("stored {} transactions", expected.len() - 5)),
        "{stderr}"
    );

    let listed = text(&shardrep(&["log", "list", "--queue", q, "--json"]));
    assert_eq!(listed.lines().collect::<Vec<_>>(), expected);
    let one = text(&shardrep(&[
        "log", "list", "--queue", q, "--seqno", "3", "--json",
    ]));
    assert_eq!(one.lines().collect::<Vec<_>>(), vec![expected[3]]);
    let range = text(&shardrep(&[
        "log", "list", "--queue", q, "--low", "2", "--high", "4",
    ]));
    assert_eq!(range.matches("SEQ# = ").count(), 3, "{range}");
    assert!(range.starts_with("SEQ# = 2\n"), "{range}");
    // A seqno the queue does not hold is an error naming what it holds; a
    // range past the end prints nothing and says so.
    let last = expected.len() - 1;
    let past = (last + 1).to_string();
    let missing = shardrep_status(&["log", "list", "--queue", q, "--seqno", &past]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains(&format!(
            "seqno {past} is not in queue {q}: it holds seqnos 0 to {last}"
        )),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    let beyond = shardrep(&["log", "list", "--queue", q, "--low", &past]);
    assert_eq!(beyond.status.code(), Some(0));
    assert!(beyond.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&beyond.stderr).contains(&format!(
            "holds no transaction from {past} to {past}: it holds seqnos 0 to {last}"
        )),
        "{}",
        String::from_utf8_lossy(&beyond.stderr)
    );

    let info: serde_json::Value =
        serde_json::from_str(&text(&shardrep(&["log", "info", "--queue", q, "--json"]))).unwrap();
    let last = expected.len() as u64 - 1;
    assert_eq!(info["minimumStoredSeqNo"], 0);
    assert_eq!(info["maximumStoredSeqNo"], last);
    assert_eq!(info["count"], last + 1);
    assert_eq!(info["durableSeqNo"], last);
    assert_eq!(info["progress"]["seqno"], last);
    assert_eq!(info["progress"]["epoch"], 5);
    let last_txn: serde_json::Value = serde_json::from_str(expected[last as usize]).unwrap();
    let end = info["progress"]["position"].as_str().unwrap().to_owned();
    assert!(
        last_txn.to_string().contains(&end),
        "{end} not in {last_txn}"
    );
    assert!(info["sizeBytes"].as_u64().unwrap() > 0);
    let plain = text(&shardrep(&["log", "info", "--queue", q]));
    assert!(
        plain.contains(&format!("maximumStoredSeqNo: {last}")),
        "{plain}"
    );
}
