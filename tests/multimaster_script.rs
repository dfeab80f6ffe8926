//! `scripts/multimaster.sh stop`, `down` and `destroy` end the services
//! that `start` launched: the pid file names the shardrep process itself
//! (not a `setsid` that forked), and stop finds every shardrep running a
//! service's configuration, so a stale pid file leaves none behind.
//! Uses `MM_DIR` and the `MM_*` ports of the environment, as the script.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn mm_dir() -> PathBuf {
    PathBuf::from(std::env::var("MM_DIR").unwrap_or_else(|_| "/tmp/shardrep-mm".into()))
}

fn script(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(root().join("scripts/multimaster.sh"))
        .args(args)
        .env("SHARDREP_BIN", env!("CARGO_BIN_EXE_shardrep"))
        .output()
        .expect("run scripts/multimaster.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "multimaster.sh {args:?}:\n{text}");
    text
}

/// Pids of processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

fn service_processes(dir: &Path) -> Vec<u32> {
    let mut all = Vec::new();
    for name in ["sjc", "nyc"] {
        let config = dir.join(format!("service-{name}/shardrep.toml"));
        all.extend(processes_naming(&format!(
            "shardrep run --config {}",
            config.display()
        )));
    }
    all
}

/// The pid each service recorded: a running shardrep on its config.
fn recorded_pids(dir: &Path) -> Vec<u32> {
    ["sjc", "nyc"]
        .iter()
        .map(|name| {
            let file = dir.join(format!("service-{name}/shardrep.pid"));
            let pid: u32 = std::fs::read_to_string(&file)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(
                cmdline.contains(&format!("shardrep run --config {}", dir.display())),
                "{} names pid {pid}, which runs {cmdline:?}",
                file.display()
            );
            pid
        })
        .collect()
}

fn wait_gone(dir: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !service_processes(dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{what}: still running: {:?}",
            service_processes(dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `pid` has exited: gone from /proc, or a zombie that its new
/// parent (init, after the starting shell exited) has not reaped yet.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn stop_down_and_destroy_leave_no_service_running() {
    let dir = mm_dir();
    script(&["up"]);
    script(&["start"]);
    let pids = recorded_pids(&dir);
    let mut running = service_processes(&dir);
    running.sort_unstable();
    let mut recorded = pids.clone();
    recorded.sort_unstable();
    assert_eq!(running, recorded, "exactly the recorded services run");
    script(&["stop"]);
    // `stop` returns once they are gone.
    assert!(service_processes(&dir).is_empty());
    for pid in pids {
        assert!(exited(pid), "pid {pid} still runs");
    }

    // A pid file that names another process (stale, or a setsid's pid):
    // `down` still stops the services.
    script(&["start"]);
    assert_eq!(recorded_pids(&dir).len(), 2);
    for name in ["sjc", "nyc"] {
        std::fs::write(dir.join(format!("service-{name}/shardrep.pid")), "999999\n").unwrap();
    }
    script(&["down"]);
    wait_gone(&dir, "down");

    script(&["up"]);
    script(&["start"]);
    assert_eq!(service_processes(&dir).len(), 2);
    script(&["destroy"]);
    wait_gone(&dir, "destroy");
    assert!(!dir.exists());
}
