//! `scripts/install.sh` and the systemd unit it installs (the README's
//! Install section): into a staging root (`--dest-dir`) every file lands
//! where the README says with its mode, and a second run keeps an edited
//! configuration; bad options fail with one clear message; the installed
//! unit passes `systemd-analyze verify` without a single message (the test
//! says so and passes only where systemd-analyze is not installed; CI
//! installs it); the example configuration is valid, also as the README
//! copies it for another service, and keeps the queue and the control
//! socket inside the directories the unit lets the service write.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of the binaries this test run built (shardrep and
/// shardrepctl): what install.sh installs with `--binaries`.
fn built_binaries() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_shardrep"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fresh empty directory of this test's own under the temp dir.
fn tempdir(label: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shardrep-install-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs scripts/install.sh with `args`; returns its exit code, stdout and
/// stderr.
fn install(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("bash")
        .arg(root().join("scripts/install.sh"))
        .args(args)
        .output()
        .expect("run scripts/install.sh");
    texts(out)
}

fn texts(out: Output) -> (i32, String, String) {
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The repository's `file` as install.sh installs it with the default
/// prefix: /usr/local/bin and /usr/local/share/doc for /usr/bin and
/// /usr/share/doc.
fn with_usr_local(file: &str) -> String {
    read(&root().join(file))
        .replace("/usr/bin/", "/usr/local/bin/")
        .replace("/usr/share/doc/", "/usr/local/share/doc/")
}

/// Installs with `--prefix DIR/prefix --unit-dir DIR/units --config-dir
/// DIR/etc` (no staging root: the unit names the installed binary, which
/// exists) and no user; returns DIR.
fn install_into_own_paths() -> PathBuf {
    let dir = tempdir("paths");
    let (prefix, units, etc) = (dir.join("prefix"), dir.join("units"), dir.join("etc"));
    let binaries = built_binaries();
    let (code, stdout, stderr) = install(&[
        "--prefix",
        prefix.to_str().unwrap(),
        "--unit-dir",
        units.to_str().unwrap(),
        "--config-dir",
        etc.to_str().unwrap(),
        "--binaries",
        binaries.to_str().unwrap(),
        "--no-user",
    ]);
    assert_eq!(code, 0, "install.sh:\n{stdout}{stderr}");
    dir
}

#[test]
fn staged_install_puts_every_file_in_place_and_keeps_an_edited_configuration() {
    let stage = tempdir("stage");
    let s = stage.display();
    let binaries = built_binaries();
    let args = [
        "--dest-dir",
        stage.to_str().unwrap(),
        "--binaries",
        binaries.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = install(&args);
    assert_eq!(code, 0, "install.sh:\n{stdout}{stderr}");
    assert_eq!(stderr, "");
    let staged_note = format!(
        "staged under {s}: a package must also create the system user shardrep\n\
         (useradd --system --user-group --no-create-home shardrep) and give /etc/shardrep to group shardrep\n"
    );
    assert_eq!(
        stdout,
        format!(
            "installed {s}/usr/local/bin/shardrep\n\
             installed {s}/usr/local/bin/shardrepctl\n\
             installed {s}/etc/systemd/system/shardrep@.service\n\
             installed {s}/usr/local/share/doc/shardrep/README.md, shardrep.toml\n\
             installed {s}/etc/shardrep/example.toml\n\
             {staged_note}"
        )
    );
    for bin in ["shardrep", "shardrepctl"] {
        let installed = stage.join("usr/local/bin").join(bin);
        assert_eq!(mode(&installed), 0o755, "{}", installed.display());
        assert!(
            std::fs::read(&installed).unwrap() == std::fs::read(binaries.join(bin)).unwrap(),
            "{} is not the built {bin}",
            installed.display()
        );
    }
    // The unit and the example as in the repository (the Debian package's
    // paths), with /usr/local for /usr.
    let unit = stage.join("etc/systemd/system/shardrep@.service");
    assert_eq!(mode(&unit), 0o644);
    assert_eq!(read(&unit), with_usr_local("conf/shardrep@.service"));
    assert!(
        read(&unit)
            .lines()
            .any(|l| l == "ExecStart=/usr/local/bin/shardrep run --config /etc/shardrep/%i.toml"),
        "{}",
        read(&unit)
    );
    let config = stage.join("etc/shardrep/example.toml");
    assert_eq!(mode(&config), 0o640);
    assert_eq!(mode(config.parent().unwrap()), 0o750);
    assert_eq!(read(&config), with_usr_local("conf/example.toml"));
    let doc = stage.join("usr/local/share/doc/shardrep");
    assert_eq!(
        read(&doc.join("README.md")),
        read(&root().join("README.md"))
    );
    assert_eq!(
        read(&doc.join("shardrep.toml")),
        read(&root().join("conf/shardrep.toml"))
    );

    // Unchanged: said so.
    let (code, stdout, _) = install(&args);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!("\n{s}/etc/shardrep/example.toml is up to date\n")),
        "{stdout}"
    );
    // Edited: kept as it is, the binaries and unit installed again.
    let edited = format!("{}# edited by the DBA\n", read(&config));
    std::fs::write(&config, &edited).unwrap();
    std::fs::write(&unit, "stale").unwrap();
    let (code, stdout, stderr) = install(&args);
    assert_eq!(code, 0, "second run:\n{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "installed {s}/usr/local/bin/shardrep\n\
             installed {s}/usr/local/bin/shardrepctl\n\
             installed {s}/etc/systemd/system/shardrep@.service\n\
             installed {s}/usr/local/share/doc/shardrep/README.md, shardrep.toml\n\
             kept {s}/etc/shardrep/example.toml (it differs from conf/example.toml, which is not installed)\n\
             {staged_note}"
        )
    );
    assert_eq!(read(&config), edited);
    assert_eq!(read(&unit), with_usr_local("conf/shardrep@.service"));
    std::fs::remove_dir_all(&stage).unwrap();
}

#[test]
fn another_prefix_and_configuration_directory_are_written_into_the_unit() {
    let dir = install_into_own_paths();
    let unit = read(&dir.join("units/shardrep@.service"));
    let d = dir.display();
    let exec: Vec<&str> = unit
        .lines()
        .filter(|l| l.starts_with("ExecStart="))
        .collect();
    assert_eq!(
        exec,
        [format!(
            "ExecStart={d}/prefix/bin/shardrep run --config {d}/etc/%i.toml"
        )]
    );
    assert!(
        unit.contains(&format!(
            "\nDocumentation=file://{d}/prefix/share/doc/shardrep/README.md\n"
        )),
        "{unit}"
    );
    assert!(!unit.contains("/usr/bin/"), "{unit}");
    assert!(!unit.contains("/usr/share/doc/"), "{unit}");
    let example = read(&dir.join("etc/example.toml"));
    assert!(
        example.contains(&format!("{d}/prefix/share/doc/shardrep/shardrep.toml")),
        "{example}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_options_fail_with_one_clear_message() {
    let stage = tempdir("bad");
    let dest = stage.to_str().unwrap();
    let cases: [(&[&str], String); 6] = [
        (
            &["--prefix", "usr/local", "--dest-dir", dest],
            "install.sh: --prefix usr/local: must be an absolute path\n".into(),
        ),
        (
            &["--config-dir", "/etc/shard rep", "--dest-dir", dest],
            "install.sh: --config-dir /etc/shard rep: spaces, quotes and the characters % \\ # & are not allowed\n".into(),
        ),
        (
            &["--prefix"],
            "install.sh: --prefix needs a value (see --help)\n".into(),
        ),
        (
            &["--destdir", dest],
            "install.sh: unknown option '--destdir' (see --help)\n".into(),
        ),
        (
            &["--dest-dir", dest, "--binaries", "/nonexistent/bin"],
            "install.sh: /nonexistent/bin/shardrep: no such executable\n".into(),
        ),
        (
            &["--dest-dir", dest, "--config-dir", "/"],
            "install.sh: --config-dir /: give a directory of its own\n".into(),
        ),
    ];
    for (args, message) in cases {
        let (code, stdout, stderr) = install(args);
        assert_eq!(
            (code, stdout.as_str(), stderr),
            (1, "", message),
            "{args:?}"
        );
    }
    // Nothing was installed by the refused runs.
    assert_eq!(std::fs::read_dir(&stage).unwrap().count(), 0);
    let (code, stdout, _) = install(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("Usage: scripts/install.sh [OPTIONS]\n"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&stage).unwrap();
}

/// `systemd-analyze verify` of `unit`: exit code and everything it printed.
fn verify(unit: &Path) -> (i32, String) {
    let (code, stdout, stderr) = texts(
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(unit)
            .output()
            .expect("run systemd-analyze"),
    );
    (code, format!("{stdout}{stderr}"))
}

#[test]
fn installed_unit_passes_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        println!(
            "SKIPPED: systemd-analyze is not installed (Debian package systemd); \
             the unit is not verified"
        );
        return;
    }
    let dir = install_into_own_paths();
    let unit = dir.join("units/shardrep@.service");
    // The template is verified as instance `i` (shardrep@i.service).
    assert_eq!(verify(&unit), (0, String::new()));

    // The check sees a mistake: a misspelt key is reported.
    let broken = dir.join("broken/shardrep@.service");
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(
        &broken,
        read(&unit).replace("NoNewPrivileges=yes", "NoNewPrivilege=yes"),
    )
    .unwrap();
    let (_, printed) = verify(&broken);
    assert!(
        printed.contains("Unknown key 'NoNewPrivilege' in section [Service], ignoring."),
        "{printed}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `shardrep check-config` of `config`: exit code and output.
fn check_config(config: &Path) -> (i32, String) {
    let (code, stdout, stderr) = texts(
        Command::new(env!("CARGO_BIN_EXE_shardrep"))
            .args(["check-config", "--config"])
            .arg(config)
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run shardrep check-config"),
    );
    (code, format!("{stdout}{stderr}"))
}

#[test]
fn example_configuration_is_valid_and_writes_only_inside_the_units_directories() {
    let dir = install_into_own_paths();
    let etc = dir.join("etc");
    let unit = read(&dir.join("units/shardrep@.service"));
    for line in [
        "StateDirectory=shardrep/%i",
        "RuntimeDirectory=shardrep/%i",
        "User=shardrep",
    ] {
        assert!(unit.lines().any(|l| l == line), "no {line} in the unit");
    }
    std::fs::write(etc.join("example.password"), "secret\n").unwrap();
    let example = etc.join("example.toml");
    assert_eq!(
        check_config(&example),
        (
            0,
            format!(
                "{}: configuration of service 'example' is valid\n",
                example.display()
            )
        )
    );

    // The README's copy for service sjc: `sed 's/example/sjc/g'`.
    let sjc = etc.join("sjc.toml");
    std::fs::write(&sjc, read(&example).replace("example", "sjc")).unwrap();
    std::fs::write(etc.join("sjc.password"), "secret\n").unwrap();
    assert_eq!(
        check_config(&sjc),
        (
            0,
            format!(
                "{}: configuration of service 'sjc' is valid\n",
                sjc.display()
            )
        )
    );
    for (instance, file) in [("example", &example), ("sjc", &sjc)] {
        let config = shardrep::config::Config::load(file).unwrap();
        assert_eq!(config.service.name, instance);
        // StateDirectory and RuntimeDirectory of instance `instance`.
        assert_eq!(
            config.queue.dir,
            Path::new("/var/lib/shardrep").join(instance).join("queue")
        );
        assert_eq!(
            config.control.socket,
            Path::new("/run/shardrep")
                .join(instance)
                .join("control.sock")
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
