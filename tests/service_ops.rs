//! Fault and bad-input runs of a service (issue 14, section 7): a service
//! with `role = "extractor"` fills the queue and never touches the replica;
//! a replica lost for longer than the retries gives an error naming the
//! block's seqnos, binlog position and shard; a master that does not
//! answer is retried with waits doubling up to `reconnect_max_backoff_ms`,
//! one warning each; a first start that fails on the master creates no
//! catalog on the replica; a damaged queue record stops the service with
//! `pendingErrorSeqno` set and a clean message; a malformed restart row
//! stops the start and the handback naming its channel and text (issue
//! 15).

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use common::service::{
    master_position, status, stop_target_slave, wait_applied_to_master, wait_for_socket,
    ServiceSpec, ShardrepProcess, TARGET,
};
use common::{quote_ident, sandbox, unique_schema, Sandbox, Server};
use shardrep::position::Seqno;
use shardrep::queue::{QueueOptions, TransactionQueue};

/// Tests that use replica 2 ([`TARGET`]) or count its connections run one
/// at a time.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `text` with its first `from` replaced by `to` (which must be there).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in:\n{text}");
    text.replacen(from, to, 1)
}

/// Starts `shardrep run --config <path> args…` on a configuration written
/// by the test, its stderr in `dir/shardrep.log`.
fn spawn_config(spec: &ServiceSpec, text: &str, args: &[&str]) -> ShardrepProcess {
    let config = spec.dir.join("shardrep.toml");
    std::fs::write(&config, text).unwrap();
    let log = spec.dir.join("shardrep.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(args)
        .env("SHARDREP_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start shardrep");
    ShardrepProcess {
        child,
        log,
        out: "/dev/null".into(),
    }
}

async fn schemas(sb: &Sandbox, server: Server) -> Vec<String> {
    let mut conn = sb.connect(server).await;
    conn.query("SHOW DATABASES").await.unwrap()
}

async fn global_status(sb: &Sandbox, server: Server, name: &str) -> u64 {
    let mut conn = sb.connect(server).await;
    let row: Option<(String, u64)> = conn
        .exec_first(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = ?",
            (name.to_uppercase(),),
        )
        .await
        .unwrap();
    row.expect("status variable").1
}

/// An extractor-role service stores every master transaction in its queue
/// (exact count, positions and GTIDs) and never connects to the replica:
/// its user there does not exist, and the replica's access-denied count
/// does not move; no catalog schema appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractor_role_fills_the_queue_and_leaves_the_replica_alone() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let schema = unique_schema("xonly");
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY, v VARCHAR(20))",
            s = quote_ident(&schema)
        ))
        .await
        .unwrap();
    for i in 0..20 {
        master
            .exec_drop(
                format!("INSERT INTO {}.t VALUES (?, ?)", quote_ident(&schema)),
                (i, format!("v{i}")),
            )
            .await
            .unwrap();
    }
    let end = master_position(sb).await;
    // This session's last transaction's GTID (the master's binlog position
    // may hold other domains' GTIDs too).
    let gtid: String = master
        .query_first("SELECT @@last_gtid")
        .await
        .unwrap()
        .unwrap();

    let spec = ServiceSpec::new("xonly", std::slice::from_ref(&schema), &start);
    let text = extractor_role(&spec, &spec.toml(sb));
    // A replica user that does not exist: any connection is refused and
    // counted by the replica.
    let (source, replica) = text.split_once("[replica]").unwrap();
    let replica = edit(
        replica,
        &format!("user = \"{}\"", sb.user),
        "user = \"no_such_xonly\"",
    );
    let text = format!("{source}[replica]{replica}");
    let denied = global_status(sb, TARGET, "Access_denied_errors").await;
    let process = spawn_config(&spec, &text, &["--until-idle"]);
    let log = process.log.clone();
    assert!(
        process.wait(),
        "shardrep failed:\n{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_eq!(
        global_status(sb, TARGET, "Access_denied_errors").await,
        denied,
        "the extractor connected to the replica"
    );
    assert!(!schemas(sb, TARGET).await.contains(&spec.catalog()));

    let mut options = QueueOptions::new(spec.dir.join("queue"));
    options.read_only = true;
    let queue = TransactionQueue::open(options).unwrap();
    assert_eq!(queue.min_seqno(), Some(Seqno(0)));
    assert_eq!(queue.max_seqno(), Some(Seqno(21)), "2 DDL + 20 inserts");
    let last = queue.get(Seqno(21)).unwrap().unwrap();
    assert_eq!(last.end_position.to_string(), end);
    assert_eq!(last.gtid.map(|g| g.to_string()), Some(gtid));
    for s in 0..=21 {
        assert_eq!(queue.get(Seqno(s)).unwrap().unwrap().shard, schema);
    }
    drop(queue);
    let _ = std::fs::remove_dir_all(&spec.dir);
    master
        .query_drop(format!("DROP DATABASE {}", quote_ident(&schema)))
        .await
        .unwrap();
}

/// `text` as an extractor-role configuration (the replica untouched).
fn extractor_role(spec: &ServiceSpec, text: &str) -> String {
    edit(
        text,
        &format!("name = \"{}\"\n", spec.service),
        &format!("name = \"{}\"\nrole = \"extractor\"\n", spec.service),
    )
}

/// A port on 127.0.0.1 nobody listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The `key=value` of a log line, as logged by tracing.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split_whitespace().next()
}

/// A master that does not answer is retried with waits of 100, 200, 400
/// ms ... doubling up to `reconnect_max_backoff_ms`, one warning per
/// attempt (numbered), over a window of 4.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_reconnect_waits_double_up_to_the_cap_one_warning_each() {
    let sb = sandbox();
    let spec = ServiceSpec::new("backoff", &[], "mariadb-bin.000001:4");
    let text = extractor_role(&spec, &spec.toml(sb));
    let text = edit(
        &text,
        &format!("port = {}\n", sb.port(Server::Master)),
        &format!("port = {}\n", closed_port()),
    );
    let text = edit(
        &text,
        "start = ",
        "reconnect_max_backoff_ms = 800\nstart = ",
    );
    let started = Instant::now();
    let process = spawn_config(&spec, &text, &[]);
    std::thread::sleep(Duration::from_millis(4500));
    let log = process.log_text();
    assert!(process.terminate(), "{log}");
    let elapsed = started.elapsed();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    assert!(
        warnings
            .iter()
            .all(|l| l.contains("lost the master; reconnecting")),
        "{log}"
    );
    let waits: Vec<u64> = warnings
        .iter()
        .map(|l| field(l, "backoff_ms").unwrap().parse().unwrap())
        .collect();
    let attempts: Vec<u32> = warnings
        .iter()
        .map(|l| field(l, "attempt").unwrap().parse().unwrap())
        .collect();
    // Waits 100+200+400+800+800+800 = 3.1 s, +800 = 3.9 s, +800 = 4.7 s.
    assert!(
        waits.len() >= 6 && waits.len() <= 8,
        "{elapsed:?}: {waits:?}"
    );
    assert_eq!(waits[..5], [100, 200, 400, 800, 800], "{log}");
    assert!(waits[5..].iter().all(|&w| w == 800), "{waits:?}");
    assert_eq!(
        attempts,
        (1..=waits.len() as u32).collect::<Vec<_>>(),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&spec.dir);
}

/// A TCP forwarder on 127.0.0.1 to a sandbox server that the test can
/// cut: every connection through it is closed and new ones are refused
/// from then on (a replica that became unreachable).
struct Cuttable {
    port: u16,
    cut: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Cuttable {
    fn start(target: u16) -> Cuttable {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (flag, open) = (cut.clone(), streams.clone());
        std::thread::spawn(move || loop {
            if flag.load(Ordering::Acquire) {
                return; // drops the listener: connections are refused
            }
            let Ok((client, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            let mut open = open.lock().unwrap();
            open.push(client.try_clone().unwrap());
            open.push(upstream.try_clone().unwrap());
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                (upstream, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Cuttable { port, cut, streams }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for s in self.streams.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The replica becomes unreachable (connections cut, reconnects refused)
/// for longer than `retry_max_attempts`: the service goes OFFLINE:ERROR
/// naming the block's seqno, its binlog position and shard (the failure
/// comes at `START TRANSACTION`, before any transaction of the block), and
/// why the reconnects failed; there is no server code, and none is shown.
/// Every retry warning names the seqno too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_lost_beyond_the_retries_is_an_error_naming_the_block() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let schema = unique_schema("lost");
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    let s = quote_ident(&schema);
    master
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY); \
             INSERT INTO {s}.t VALUES (1)"
        ))
        .await
        .unwrap();
    let proxy = Cuttable::start(sb.port(TARGET));
    let mut spec = ServiceSpec::new("lost", std::slice::from_ref(&schema), &start);
    spec.channels = 1;
    spec.retry_max_attempts = 3;
    let text = spec.toml(sb);
    let (source, replica) = text.split_once("[replica]").unwrap();
    let replica = edit(
        replica,
        &format!("port = {}\n", sb.port(TARGET)),
        &format!("port = {}\n", proxy.port),
    );
    let mut process = spawn_config(&spec, &format!("{source}[replica]{replica}"), &[]);
    wait_for_socket(&spec, &mut process);
    wait_applied_to_master(sb, &spec).await;

    proxy.cut();
    master
        .query_drop(format!("INSERT INTO {s}.t VALUES (2)"))
        .await
        .unwrap();
    let end = master_position(sb).await;
    let failed = common::wait_until("OFFLINE:ERROR", Duration::from_secs(60), || async {
        let st = status(&spec);
        (st["state"] == "OFFLINE:ERROR").then_some(st)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", process.log_text()));
    // Seqnos: 0 CREATE DATABASE, 1 CREATE TABLE, 2 and 3 the inserts.
    assert_eq!(failed["pendingErrorSeqno"], 3, "{failed}");
    assert_eq!(failed["pendingErrorEventId"], end.as_str(), "{failed}");
    assert_eq!(failed["pendingErrorShard"], schema.as_str(), "{failed}");
    assert_eq!(failed["pendingErrorChannel"], 0, "{failed}");
    assert!(failed["pendingErrorCode"].is_null(), "{failed}");
    let message = failed["pendingError"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "channel 0 failed at seqno 3 (event {end}, shard {schema}): "
        )),
        "{message}"
    );
    assert!(message.contains("(block of seqno 3)"), "{message}");
    assert!(
        message.contains("the last reconnect to the replica failed")
            && message.contains("Connection refused"),
        "{message}"
    );
    assert!(!message.contains("error 0"), "{message}");
    let log = process.log_text();
    let retries: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("transient error"))
        .collect();
    assert_eq!(retries.len(), 3, "{log}");
    for line in retries {
        assert_eq!(field(line, "seqno"), Some("3"), "{line}");
        assert_eq!(field(line, "shard"), Some(schema.as_str()), "{line}");
        assert_eq!(field(line, "event"), Some(end.as_str()), "{line}");
    }
    assert!(process.terminate());
    spec.remove(sb).await;
    master
        .query_drop(format!("DROP DATABASE {s}"))
        .await
        .unwrap();
}

/// A first start whose master refuses the service's password fails with
/// the master's code (1045) and creates nothing on the replica: no
/// catalog schema. With the right password the next start creates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_failing_on_the_master_creates_no_catalog() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    let start = master_position(sb).await;
    let spec = ServiceSpec::new("nocat", &[], &start);
    let good = spec.toml(sb);
    let (source, replica) = good.split_once("[replica]").unwrap();
    let source = edit(
        source,
        &format!("password = \"{}\"", sb.password),
        "password = \"wrong-master-pw\"",
    );
    let bad = format!("{source}[replica]{replica}");
    let run = |text: String| {
        let config = shardrep::config::Config::from_toml_str(&text, spec.dir.join("x.toml"))
            .expect("valid config");
        std::thread::spawn(move || {
            shardrep::replicator::run(
                &config,
                Arc::new(AtomicBool::new(false)),
                &shardrep::replicator::RunOptions {
                    stop_when_idle: true,
                    ..Default::default()
                },
            )
        })
        .join()
        .expect("run thread")
    };
    let err = run(bad).expect_err("a wrong master password");
    let text = err.to_string();
    assert!(
        matches!(
            err,
            shardrep::replicator::RunError::Setup {
                code: Some(1045),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        text.contains(&format!("cannot connect to the master {}:", sb.host)),
        "{text}"
    );
    assert!(!text.contains("wrong-master-pw"), "{text}");
    assert!(!schemas(sb, TARGET).await.contains(&spec.catalog()));

    stop_target_slave(sb).await;
    let report = run(good).expect("the right password");
    assert_eq!(report.restart_rows.len(), usize::from(spec.channels));
    assert!(schemas(sb, TARGET).await.contains(&spec.catalog()));
    spec.remove(sb).await;
}

/// A queued transaction whose record is damaged (a byte of its own record
/// file flipped) stops the service with OFFLINE:ERROR, `pendingErrorSeqno`
/// set to it and a worded message (no debug dump); what precedes it is
/// applied, nothing after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_queue_record_names_its_seqno_in_status() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let schema = unique_schema("qread");
    let s = quote_ident(&schema);
    let start = master_position(sb).await;
    let mut master = sb.connect(Server::Master).await;
    // Seqnos 0 and 1: the DDL; 2, 3 (about 400 KB: a record file of its
    // own) and 4: the inserts.
    master
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY, b LONGBLOB); \
             INSERT INTO {s}.t VALUES (2, 'small'); \
             INSERT INTO {s}.t VALUES (3, REPEAT('x', 400000)); \
             INSERT INTO {s}.t VALUES (4, 'after')"
        ))
        .await
        .unwrap();
    let spec = ServiceSpec::new("qread", std::slice::from_ref(&schema), &start);
    // Fill the queue with the extractor role, then damage seqno 3.
    let filler = spawn_config(
        &spec,
        &extractor_role(&spec, &spec.toml(sb)),
        &["--until-idle"],
    );
    assert!(filler.wait());
    let mut records: Vec<PathBuf> = Vec::new();
    for segment in std::fs::read_dir(spec.dir.join("queue")).unwrap() {
        let segment = segment.unwrap().path();
        if segment.is_dir() {
            for f in std::fs::read_dir(&segment).unwrap() {
                let f = f.unwrap().path();
                if f.file_name().unwrap().to_string_lossy().starts_with("rec-") {
                    records.push(f);
                }
            }
        }
    }
    assert_eq!(records.len(), 1, "{records:?}");
    let mut bytes = std::fs::read(&records[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&records[0], bytes).unwrap();

    let mut process = spec.spawn(sb, false);
    wait_for_socket(&spec, &mut process);
    let failed = common::wait_until("OFFLINE:ERROR", Duration::from_secs(60), || async {
        let st = status(&spec);
        (st["state"] == "OFFLINE:ERROR").then_some(st)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", process.log_text()));
    assert_eq!(failed["pendingErrorSeqno"], 3, "{failed}");
    let message = failed["pendingError"].as_str().unwrap();
    assert!(
        message.starts_with("cannot read seqno 3 from the queue: queue segment "),
        "{message}"
    );
    assert!(
        message.contains("record of seqno 3 is corrupt"),
        "{message}"
    );
    for dump in ["Some(", "backtrace", "Inline("] {
        assert!(!message.contains(dump), "{message}");
    }
    let mut replica = sb.connect(TARGET).await;
    let ids: Vec<i32> = replica
        .query(format!("SELECT id FROM {s}.t ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(ids, [2]);
    assert!(process.terminate());
    spec.remove(sb).await;
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS {s}"
        ))
        .await
        .unwrap();
    master
        .query_drop(format!("DROP DATABASE {s}"))
        .await
        .unwrap();
}

/// Every column of every restart row in `table`, by channel.
async fn restart_rows(
    conn: &mut mysql_async::Conn,
    table: &str,
) -> Vec<(u16, i64, u64, String, String, String, i64)> {
    conn.query(format!(
        "SELECT channel, seqno, epoch, event_id, gtid, shard_id, ddl_seqno FROM {table} \
         ORDER BY channel"
    ))
    .await
    .unwrap()
}

/// Applies `edit` to the restart rows (unbinlogged), then checks that a
/// start fails with exactly `expected` and leaves the rows as edited;
/// returns them.
async fn refused_start(
    sb: &common::Sandbox,
    spec: &ServiceSpec,
    replica: &mut mysql_async::Conn,
    table: &str,
    edit: &str,
    expected: String,
) -> Vec<(u16, i64, u64, String, String, String, i64)> {
    replica
        .query_drop(format!("SET SESSION sql_log_bin = 0; {edit}"))
        .await
        .unwrap();
    let edited = restart_rows(replica, table).await;
    let error = spec.run_until_idle(sb).unwrap_err();
    assert_eq!(error.to_string(), expected);
    assert_eq!(restart_rows(replica, table).await, edited);
    edited
}

/// A restart row whose stored text is malformed (here its GTID position,
/// then its binlog position) stops the start, and a handback, with an error
/// naming the channel and the text (issue 15: the row is parsed once where
/// it is read; a malformed GTID was silently dropped before), and the
/// restart table is left exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_restart_row_is_an_error_naming_its_channel_and_text() {
    let sb = sandbox();
    let _lock = LOCK.lock().await;
    stop_target_slave(sb).await;
    let schema = unique_schema("badrow");
    let start = master_position(sb).await;
    let s = quote_ident(&schema);
    let mut master = sb.connect(Server::Master).await;
    master
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {s}.t (id INT PRIMARY KEY); \
             INSERT INTO {s}.t VALUES (1)"
        ))
        .await
        .unwrap();
    let mut spec = ServiceSpec::new("badrow", std::slice::from_ref(&schema), &start);
    spec.channels = 2;
    spec.run_until_idle(sb).expect("first run");
    let catalog = spec.catalog();
    let table = format!("{}.restart_position", quote_ident(&catalog));
    let mut replica = sb.connect(TARGET).await;
    let good = restart_rows(&mut replica, &table).await;
    // Seqnos 0 CREATE DATABASE, 1 CREATE TABLE, 2 the insert: both
    // channels end at the last one handled (STOP marker).
    assert_eq!(good.len(), 2);
    assert!(good[0].1 >= 2 && good[0].1 == good[1].1, "{good:?}");

    // A GTID position that is not one.
    let corrupt = refused_start(
        sb,
        &spec,
        &mut replica,
        &table,
        &format!("UPDATE {table} SET gtid = '0-1-x' WHERE channel = 1"),
        format!(
            "restart row of channel 1 ({catalog}.restart_position): gtid \"0-1-x\" is not a \
             MariaDB GTID position: invalid GTID position \"0-1-x\": item \"0-1-x\": expected \
             seq_no as a decimal integer 0..=18446744073709551615, found \"x\""
        ),
    )
    .await;
    // The handback reads the same row: the same error, nothing changed.
    let mut process = spec.spawn_with(sb, &["--offline"]);
    wait_for_socket(&spec, &mut process);
    let (code, out, err) = common::service::ctl(&spec, &["handback"]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains(&format!(
            "restart row of channel 1 ({catalog}.restart_position): gtid \"0-1-x\" is not a \
             MariaDB GTID position"
        )),
        "{err}"
    );
    assert!(process.terminate());
    assert_eq!(restart_rows(&mut replica, &table).await, corrupt);

    // A binlog position that is not one.
    refused_start(
        sb,
        &spec,
        &mut replica,
        &table,
        &format!(
            "UPDATE {table} SET gtid = '{}' WHERE channel = 1; \
             UPDATE {table} SET event_id = 'mariadb-bin:4' WHERE channel = 0",
            good[1].4
        ),
        format!(
            "restart row of channel 0 ({catalog}.restart_position): event_id \"mariadb-bin:4\" \
             is not a binlog position: invalid binlog position \"mariadb-bin:4\": expected a \
             file name BASENAME.NNNNNN with a numeric extension, found \"mariadb-bin\""
        ),
    )
    .await;

    // A seqno below -1: read as "nothing applied", it would replay the
    // queue from its start.
    refused_start(
        sb,
        &spec,
        &mut replica,
        &table,
        &format!(
            "UPDATE {table} SET event_id = '{}' WHERE channel = 0; \
             UPDATE {table} SET seqno = -5 WHERE channel = 1",
            good[0].3
        ),
        format!(
            "restart row of channel 1 ({catalog}.restart_position): seqno -5 is neither -1 \
             (nothing applied yet) nor a seqno (0 or more)"
        ),
    )
    .await;

    // As many rows as channels, but one renumbered: channel 1 would find
    // no row of its own.
    refused_start(
        sb,
        &spec,
        &mut replica,
        &table,
        &format!(
            "UPDATE {table} SET seqno = {}, channel = 99 WHERE channel = 1",
            good[1].1
        ),
        format!(
            "restart table {catalog}.restart_position holds rows of channels 0,99, not of \
             channels 0 to 1: restore the rows of the 2 configured channels (or `shardrepctl \
             reset --confirm SERVICE` after a re-seed)"
        ),
    )
    .await;

    // A seqno beyond the queue's last is what a crash leaves when the
    // queue lost its unflushed tail: the start goes on, and when the
    // queue holds that seqno again its binlog position must be the row's.
    // Here the row was edited (another position): refused once the next
    // transaction is extracted as that seqno.
    master
        .query_drop(format!("INSERT INTO {s}.t VALUES (2)"))
        .await
        .unwrap();
    let beyond = good[1].1 + 1;
    let file = good[1].3.rsplit_once(':').unwrap().0.to_string();
    let edited_position = format!("{file}:4");
    let error = {
        replica
            .query_drop(format!(
                "SET SESSION sql_log_bin = 0; UPDATE {table} SET channel = 1, seqno = {beyond}, \
                 event_id = '{edited_position}' WHERE channel = 99"
            ))
            .await
            .unwrap();
        let edited = restart_rows(&mut replica, &table).await;
        let error = spec.run_until_idle(sb).unwrap_err().to_string();
        assert_eq!(restart_rows(&mut replica, &table).await, edited);
        error
    };
    let head = format!(
        "restart row of channel 1 records seqno {beyond} ending at binlog position \
         {edited_position}, but the queue's seqno {beyond} ends at {file}:"
    );
    let tail = ": the row was edited, or the queue is an older copy or another service's. \
                Restore the row or the queue directory, or re-seed the replica and \
                `shardrepctl reset --confirm SERVICE`";
    assert!(error.starts_with(&head) && error.ends_with(tail), "{error}");
    let queued_pos: u64 = error[head.len()..error.len() - tail.len()].parse().unwrap();
    assert!(queued_pos > 4, "{error}");

    // Repaired, the service starts and resumes where the rows say.
    replica
        .query_drop(format!(
            "SET SESSION sql_log_bin = 0; UPDATE {table} SET seqno = {}, event_id = '{}' \
             WHERE channel = 1",
            good[1].1, good[1].3
        ))
        .await
        .unwrap();
    assert_eq!(restart_rows(&mut replica, &table).await, good);
    spec.run_until_idle(sb).expect("run after the repair");
    let after = restart_rows(&mut replica, &table).await;
    assert!(after.iter().all(|r| r.1 >= good[0].1), "{after:?}");
    common::service::drop_everywhere(sb, std::slice::from_ref(&schema)).await;
    spec.remove(sb).await;
}
