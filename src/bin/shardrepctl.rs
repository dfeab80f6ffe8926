//! `shardrepctl`: controls a running shardrep service over its Unix socket.
//!
//! Exit codes: 0 done; 1 the service refused or failed the request, or a
//! `wait` timed out; 2 usage errors, bad input and connection errors (no
//! service listening). Errors go to stderr, prefixed `shardrepctl: `; with
//! `--json`, as one JSON line (`error`, `kind`, `exitCode`).
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use shardrep::control::{Client, ClientError, Request, ShardRow, StatusName, WaitFor};
use shardrep::replicator::state::{SkipSeqnos, State};
use shardrep::shard::map::{parse_entries, ShardEntry, ShardMap};

/// shardrepctl: control a running shardrep service (status, online,
/// offline, wait, shard map edits, queue inspection, handback, reset) over its
/// control socket, like Tungsten's trepctl.
///
/// The socket is found with --socket PATH or with --config FILE (its
/// `[control] socket`; nothing else of the file is read). Exit codes: 0
/// done; 1 the request was refused or failed, or `wait` timed out; 2 usage
/// or input errors, or no service listening.
#[derive(Parser, Debug)]
#[command(name = "shardrepctl", version, about, long_about)]
struct Cli {
    /// The service's configuration file (conf/shardrep.toml); only its
    /// `[control] socket` is read. Default: $SHARDREP_CONFIG, else the one
    /// configuration in /etc/shardrep when there is exactly one (as
    /// `scripts/install.sh` and the package install services).
    #[arg(long, short = 'c', global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The control socket path (instead of --config).
    #[arg(long, global = true, value_name = "PATH", conflicts_with = "config")]
    socket: Option<PathBuf>,
    /// Print the service's answer as JSON (one line) instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the service's status: one `name : value` line per field
    /// (trepctl names: state, appliedLastSeqno, appliedLatency, ...), or a
    /// detail view with --name.
    Status {
        /// Detail view: channels (one block per channel), shards (one
        /// block per shard), queue, or check (the last consistency check).
        #[arg(long, value_enum, conflicts_with = "watch")]
        name: Option<StatusNameArg>,
        /// Follow the catch-up: applied and stored seqnos, bytes and
        /// transactions behind the master, apply rate and time left; a
        /// progress bar on a terminal, a line every --interval-secs
        /// otherwise (with --json, the status every interval). Until
        /// interrupted, or with --until-caught-up until nothing is behind
        /// (exit 0; exit 1 on OFFLINE:ERROR or after --timeout-secs).
        #[arg(long)]
        watch: bool,
        /// Seconds between two looks (with --watch).
        #[arg(long, value_name = "S", default_value_t = 2, requires = "watch",
              value_parser = clap::value_parser!(u64).range(1..))]
        interval_secs: u64,
        /// End --watch once the service is ONLINE with nothing behind the
        /// master.
        #[arg(long, requires = "watch")]
        until_caught_up: bool,
        /// Seconds --watch --until-caught-up waits at most.
        #[arg(
            long,
            value_name = "T",
            default_value_t = 86_400,
            requires = "until_caught_up"
        )]
        timeout_secs: u64,
    },
    /// List the services of the process (name, role, state).
    Services,
    /// Go online (from OFFLINE:NORMAL, or retry from OFFLINE:ERROR).
    /// Returns once going online; use `wait --state ONLINE` to wait.
    Online {
        /// Skip these seqnos instead of applying them: N[,M-K...], e.g.
        /// 812 or 812,815-820. Each skip is logged by the service.
        #[arg(long, value_name = "LIST")]
        skip_seqno: Option<SkipSeqnos>,
        /// Go offline cleanly once every channel has applied this seqno.
        #[arg(long, value_name = "N")]
        until_seqno: Option<u64>,
    },
    /// Go offline: cleanly (every channel stops at the same seqno, the
    /// condition of a handback) unless --immediate. Waits until this
    /// offline has completed (OFFLINE:NORMAL; `stateNow` names the state
    /// when another request changed it since), except with --at-seqno
    /// (deferred) and no --handback.
    Offline {
        /// Stop each channel after its current block (faster; restart
        /// rows may differ, so no handback afterwards).
        #[arg(long, conflicts_with = "at_seqno")]
        immediate: bool,
        /// Go offline cleanly once every channel has applied this seqno;
        /// returns at once unless --handback.
        #[arg(long, value_name = "N")]
        at_seqno: Option<u64>,
        /// Once offline, hand the replica back to native replication (as
        /// the `handback` command).
        #[arg(long)]
        handback: bool,
        /// With --handback: run START SLAVE afterwards.
        #[arg(long, requires = "handback")]
        start_slave: bool,
        /// Seconds to wait for OFFLINE:NORMAL (exit 1 after that).
        #[arg(long, value_name = "T", default_value_t = 300)]
        timeout_secs: u64,
    },
    /// Wait until the service is in a state or has applied a seqno; exit
    /// 1 on time-out, or at once if the service goes OFFLINE:ERROR. A
    /// service that is not listening yet (just started) is waited for
    /// within the same time-out (exit 2 if it never listens).
    Wait {
        /// The state to wait for (OFFLINE:NORMAL, GOING-ONLINE:SYNCHRONIZING,
        /// ONLINE, GOING-OFFLINE, OFFLINE:ERROR).
        #[arg(
            long,
            value_name = "S",
            required_unless_present = "applied",
            conflicts_with = "applied"
        )]
        state: Option<State>,
        /// Wait until appliedLastSeqno (every seqno up to it committed) is at
        /// least N.
        #[arg(long, value_name = "N")]
        applied: Option<u64>,
        /// Seconds to wait at most.
        #[arg(long, value_name = "T", default_value_t = 300)]
        timeout_secs: u64,
    },
    /// Show or edit the shard map.
    Shard {
        #[command(subcommand)]
        command: ShardCommand,
    },
    /// Inspect the service's transaction queue, like Tungsten's `thl`.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Hand the replica back to native replication at the position after
    /// the last applied transaction (CHANGE MASTER TO ...). Refused unless
    /// the service is offline (OFFLINE:NORMAL after a clean offline, or
    /// OFFLINE:ERROR) with every channel at one seqno.
    Handback {
        /// Run START SLAVE afterwards.
        #[arg(long)]
        start_slave: bool,
    },
    /// Forget the service's replication state: remove its queue, its
    /// restart rows and its recorded skips (the shard map stays; native
    /// replication is not touched), so that the next `online` takes the
    /// replica over afresh or starts at `source.start`. The way out when
    /// the source cannot continue (e.g. its binlog is purged: re-seed the
    /// replica). Refused while online, and unless --confirm names the
    /// service.
    Reset {
        /// The service's name (`[service] name`), to confirm.
        #[arg(long, value_name = "SERVICE_NAME")]
        confirm: String,
        /// Also drop the service's catalog schema on the replica (without
        /// binary logging): with the queue gone too, no trace of the
        /// service is left on the replica. Refused while its restart rows
        /// hold a takeover in force: hand back first.
        #[arg(long)]
        drop_catalog: bool,
    },
    /// The service's source master (master failover).
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// Compare the replica with the master, online: the service takes
    /// each table's two read views at one point of the stream and
    /// compares the table in key chunks (nothing is written on either
    /// server). Progress goes to stderr; then each difference (table, key,
    /// what differs). Exit 0: identical; 1: differences; 2: the check
    /// could not run or finish (why is printed). Default: every table of
    /// the service's shards. Interrupting shardrepctl leaves the check
    /// running in the service; `check --cancel` stops it.
    Check {
        /// Stop the running check instead (after its chunk in hand).
        #[arg(long, conflicts_with_all = ["tables", "schemas", "chunk_rows", "chunk_time_ms", "pause_ms"])]
        cancel: bool,
        /// A table to compare, `schema.table` (repeatable).
        #[arg(long = "table", value_name = "SCHEMA.TABLE")]
        tables: Vec<String>,
        /// Every table of this schema (repeatable).
        #[arg(long = "schema", value_name = "SCHEMA")]
        schemas: Vec<String>,
        /// Rows per chunk (default 1000).
        #[arg(long, value_name = "N", conflicts_with = "chunk_time_ms")]
        chunk_rows: Option<u64>,
        /// Target milliseconds per chunk: the chunk size adapts.
        #[arg(long, value_name = "MS")]
        chunk_time_ms: Option<u64>,
        /// Pause after each chunk, milliseconds.
        #[arg(long, value_name = "MS")]
        pause_ms: Option<u64>,
    },
}

#[derive(Subcommand, Debug)]
enum ShardCommand {
    /// Print the shard map in shard.map format (header `shard_id master
    /// critical`, one row per shard), ready for `shard insert`.
    List,
    /// Add shards: reads shard.map-format rows (with their header line)
    /// from stdin; all rows or none.
    Insert,
    /// Replace existing shards: reads shard.map-format rows (with their
    /// header line) from stdin; all rows or none.
    Update,
    /// Remove shards named as arguments, or one id per line on stdin when
    /// none is given; all or none.
    Delete {
        /// Shard ids.
        ids: Vec<String>,
    },
    /// Remove every shard.
    DeleteAll,
}

#[derive(Subcommand, Debug)]
enum SourceCommand {
    /// Switch the service to another master of the same replication
    /// topology (after a master failover: a promoted replica), resuming
    /// there by GTID. Refused, naming the GTIDs, when the replica applied
    /// transactions the new master lacks; queued transactions the new
    /// master lacks are discarded (never applied). A running service goes
    /// offline cleanly first and online again after; returns once done.
    /// The new master is stored in the replica's catalog: later starts
    /// read from it, whatever [source] says.
    Set {
        /// The new master's host name or address.
        #[arg(long)]
        host: String,
        /// The new master's port.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
        /// The user to read its binlog as (default: the current source's;
        /// the password is the configuration's).
        #[arg(long)]
        user: Option<String>,
        /// The server id shardrep announces to it (default: the current
        /// source's).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        server_id: Option<u32>,
        /// Seconds a running service may take to go offline.
        #[arg(long, value_name = "T", default_value_t = 300)]
        timeout_secs: u64,
    },
}

#[derive(Subcommand, Debug)]
enum LogCommand {
    /// Print stored transactions (default: all stored), as `shardrep log
    /// list` does.
    List {
        /// Only this seqno.
        #[arg(long, value_name = "N", conflicts_with_all = ["low", "high"])]
        seqno: Option<u64>,
        /// From this seqno (default: the lowest stored).
        #[arg(long, value_name = "A")]
        low: Option<u64>,
        /// Up to this seqno, inclusive (default: the highest stored).
        #[arg(long, value_name = "B")]
        high: Option<u64>,
    },
    /// Print the queue's summary (lowest and highest stored seqno, count,
    /// size, extractor progress).
    Info,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum StatusNameArg {
    Channels,
    Shards,
    Queue,
    Check,
}

impl From<StatusNameArg> for StatusName {
    fn from(n: StatusNameArg) -> Self {
        match n {
            StatusNameArg::Channels => StatusName::Channels,
            StatusNameArg::Shards => StatusName::Shards,
            StatusNameArg::Queue => StatusName::Queue,
            StatusNameArg::Check => StatusName::Check,
        }
    }
}

/// Why a command ended without success: the exit code, a kind for a
/// program (`--json`) and the message.
struct Failure {
    /// 1: the service refused or failed the request, or what it answered
    /// is a failure (OFFLINE:ERROR, differences, a time-out); 2: usage,
    /// input or connection problem.
    exit: u8,
    /// camelCase: the service's error kind (`illegalState`, `notFound`,
    /// `timeout`, ...; [`shardrep::control::protocol::ErrorKind`]), or one
    /// of this client's: `usage`, `unreachable`, `offlineError`,
    /// `notCaughtUp`, `differences`, `cancelled`, `checkFailed`.
    kind: String,
    /// One line.
    message: String,
}

impl Failure {
    /// A failure the answer shows (exit 1).
    fn request(kind: &str, message: String) -> Self {
        Failure {
            exit: 1,
            kind: kind.into(),
            message,
        }
    }

    /// A usage or input problem (exit 2).
    fn usage(message: String) -> Self {
        Failure {
            exit: 2,
            kind: "usage".into(),
            message,
        }
    }

    /// Printed on stderr: `shardrepctl: MESSAGE`, or with `--json` one
    /// line `{"error":MESSAGE,"kind":KIND,"exitCode":N}`.
    fn print(&self, json: bool) {
        if json {
            eprintln!(
                "{}",
                serde_json::json!({
                    "error": self.message,
                    "kind": self.kind,
                    "exitCode": self.exit,
                })
            );
        } else {
            eprintln!("shardrepctl: {}", self.message);
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Remote(e) => Failure {
                exit: 1,
                kind: serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "other".into()),
                message: e.message,
            },
            // The configuration names no usable socket: a usage problem.
            e @ ClientError::Config { .. } => Failure::usage(e.to_string()),
            other => Failure {
                exit: 2,
                kind: "unreachable".into(),
                message: other.to_string(),
            },
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    let mut out = Output::new(json);
    // What was answered before a failure (e.g. offline done, handback
    // refused) is printed too.
    let result = run(cli, &mut out).and(out.finish());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            failure.print(json);
            ExitCode::from(failure.exit)
        }
    }
}

/// The configuration to use when neither --config nor --socket is given:
/// `$SHARDREP_CONFIG`, else the only `*.toml` in /etc/shardrep.
fn default_config() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SHARDREP_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let mut found = std::fs::read_dir("/etc/shardrep")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"));
    let only = found.next()?;
    found.next().is_none().then_some(only)
}

fn run(cli: Cli, out: &mut Output) -> Result<(), Failure> {
    let client = match (&cli.socket, &cli.config) {
        (Some(socket), _) => Client::new(socket),
        (None, Some(config)) => Client::from_config(config)?,
        (None, None) => match default_config() {
            Some(config) => Client::from_config(&config)?,
            None => {
                return Err(Failure::usage(
                    "no service given: use --config FILE or --socket PATH, or set \
                     SHARDREP_CONFIG (/etc/shardrep holds no single configuration)"
                        .into(),
                ))
            }
        },
    };
    let json = cli.json;
    match cli.command {
        Command::Status {
            watch: true,
            interval_secs,
            until_caught_up,
            timeout_secs,
            ..
        } => watch(
            &client,
            std::time::Duration::from_secs(interval_secs),
            until_caught_up.then(|| std::time::Duration::from_secs(timeout_secs)),
            json,
        )?,
        Command::Status { name, .. } => {
            let name = name.map(StatusName::from);
            let v = client.request(&Request::Status { name })?;
            if v.is_null() && name == Some(StatusName::Check) && !json {
                out.line("no consistency check has run since the service started");
            } else {
                out.value(&v);
            }
        }
        Command::Services => out.value(&client.request(&Request::Services)?),
        Command::Online {
            skip_seqno,
            until_seqno,
        } => out.value(&client.request(&Request::Online {
            skip_seqnos: skip_seqno,
            until_seqno,
        })?),
        Command::Offline {
            immediate,
            at_seqno,
            handback,
            start_slave,
            timeout_secs,
        } => {
            let mut v = client.request(&Request::Offline {
                immediate,
                at_seqno,
            })?;
            // The number of this offline among the service's: waited for
            // by number, so that an `online` of another client right
            // after it completed does not hold this one until its
            // time-out (a service without numbers: wait for the state).
            let number = v
                .as_object_mut()
                .and_then(|o| o.remove("offlineNumber"))
                .and_then(|n| n.as_u64());
            if at_seqno.is_some() && !handback {
                out.value(&v);
            } else {
                let w = client.request(&Request::Wait {
                    until: number.map_or(WaitFor::State(State::OfflineNormal), WaitFor::Offline),
                    timeout_secs,
                })?;
                out.value(&w);
                if handback {
                    out.value(&client.request(&Request::Handback { start_slave })?);
                }
            }
        }
        Command::Wait {
            state,
            applied,
            timeout_secs,
        } => {
            let until = match (state, applied) {
                (Some(s), _) => WaitFor::State(s),
                (None, Some(n)) => WaitFor::Applied(n),
                (None, None) => unreachable!("clap requires --state or --applied"),
            };
            out.value(&wait(&client, until, timeout_secs)?);
        }
        Command::Shard { command } => shard(&client, command, out)?,
        Command::Log { command } => log(&client, command, json, out)?,
        Command::Handback { start_slave } => {
            out.value(&client.request(&Request::Handback { start_slave })?)
        }
        Command::Reset {
            confirm,
            drop_catalog,
        } => out.value(&client.request(&Request::Reset {
            confirm,
            drop_catalog,
        })?),
        Command::Source {
            command:
                SourceCommand::Set {
                    host,
                    port,
                    user,
                    server_id,
                    timeout_secs,
                },
        } => {
            // A usage error (exit 2), before anything is asked of the
            // service: an empty host, or one with blanks (a pasted name).
            if host.trim().is_empty() || host.chars().any(char::is_whitespace) {
                return Err(Failure::usage(format!(
                    "source set: --host {host:?} is {}",
                    if host.trim().is_empty() {
                        "empty"
                    } else {
                        "not a host name (it holds blanks)"
                    }
                )));
            }
            out.value(&client.request(&Request::SourceSet {
                host,
                port,
                user,
                server_id,
                timeout_secs,
            })?)
        }
        // As for `check`, exit 1 means differences only: a refusal is 2.
        Command::Check { cancel: true, .. } => out.value(
            &client
                .request(&Request::CheckCancel)
                .map_err(|e| Failure::usage(e.to_string()))?,
        ),
        Command::Check {
            tables,
            schemas,
            chunk_rows,
            chunk_time_ms,
            pause_ms,
            ..
        } => check(
            &client,
            Request::Check {
                tables,
                schemas,
                chunk_rows,
                chunk_time_ms,
                pause_ms,
            },
            out,
        )?,
    }
    Ok(())
}

/// How long `status --watch` waits for a service that is not listening
/// yet (its socket appears once its configuration is read).
const WATCH_SOCKET_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `status --watch`: the catch-up's progress every `interval` (see the
/// command's help); `until`: end when caught up, failing after that long.
fn watch(
    client: &Client,
    interval: std::time::Duration,
    until: Option<std::time::Duration>,
    json: bool,
) -> Result<(), Failure> {
    use shardrep::control::progress;
    use std::io::IsTerminal;
    let started = std::time::Instant::now();
    let bar = (std::io::stderr().is_terminal() && !json).then(|| {
        // 0 of 1 until the first bytes behind are known (0 of 0 draws
        // as 100%).
        let bar = indicatif::ProgressBar::new(1);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30.cyan/blue} {percent:>3}% {msg}")
                .expect("a valid template"),
        );
        bar
    });
    // The bytes behind at the first look: the bar's whole.
    let mut first_behind: Option<u64> = None;
    let look = || client.request(&Request::Status { name: None });
    // A service started a moment ago is not listening yet: its first
    // answer is waited for, as `wait` does.
    let mut first = Some(when_listening(WATCH_SOCKET_WAIT, |_| look())?);
    loop {
        let v = match first.take() {
            Some(v) => v,
            None => look()?,
        };
        let status: shardrep::control::Status =
            serde_json::from_value(v.clone()).map_err(|_| bad_answer("a status"))?;
        let line = progress::line(&status);
        match &bar {
            Some(bar) => {
                // The message first: setting the position redraws.
                bar.set_message(line.clone());
                if let Some(behind) = status.bytes_behind {
                    let whole = *first_behind.get_or_insert(behind);
                    let whole = whole.max(behind).max(1);
                    first_behind = Some(whole);
                    bar.set_length(whole);
                    bar.set_position(whole - behind);
                }
            }
            None if json => println!("{v}"),
            None => println!("{line}"),
        }
        if status.state == State::OfflineError {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            let why = status
                .pending_error
                .as_ref()
                .map_or("-", |e| e.message.as_str());
            return Err(Failure::request(
                "offlineError",
                format!("the service is OFFLINE:ERROR: {why}"),
            ));
        }
        if let Some(timeout) = until {
            if progress::caught_up(&status) {
                if let Some(bar) = &bar {
                    bar.finish();
                }
                return Ok(());
            }
            if started.elapsed() >= timeout {
                if let Some(bar) = &bar {
                    bar.abandon();
                }
                return Err(Failure::request(
                    "notCaughtUp",
                    format!("not caught up within {} s: {line}", timeout.as_secs()),
                ));
            }
        }
        std::thread::sleep(interval);
    }
}

/// `wait`: the service's answer to a wait of `timeout_secs` seconds. A
/// service that is not listening yet (started a moment ago: its socket
/// appears once its configuration is read) is waited for, within the same
/// time-out; every 100 ms a new connection is tried.
fn wait(client: &Client, until: WaitFor, timeout_secs: u64) -> Result<Value, Failure> {
    when_listening(std::time::Duration::from_secs(timeout_secs), |left| {
        // What is left of the time-out, in whole seconds rounded up.
        let left_secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        client.request(&Request::Wait {
            until,
            timeout_secs: left_secs,
        })
    })
}

/// `request`'s answer, asked again every 100 ms while no service listens
/// on the socket, for at most `patience`; `request` is given what is left
/// of it.
///
/// # Errors
/// An `unreachable` failure (exit 2) when no service listened within `patience` (saying
/// how long it waited); any other error of `request`.
fn when_listening<T>(
    patience: std::time::Duration,
    mut request: impl FnMut(std::time::Duration) -> Result<T, ClientError>,
) -> Result<T, Failure> {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + patience;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match request(left) {
            Err(e @ ClientError::NotRunning { .. }) => {
                if Instant::now() >= deadline {
                    return Err(Failure {
                        message: format!("{e} (waited {} s for it to listen)", patience.as_secs()),
                        ..e.into()
                    });
                }
                std::thread::sleep(Duration::from_millis(100).min(left));
            }
            other => return Ok(other?),
        }
    }
}

/// `check`: starts the check, follows `status --name check` (progress on
/// stderr: a line rewritten in place on a terminal, a line every 5 s
/// otherwise) and prints the differences and the summary.
fn check(client: &Client, request: Request, out: &mut Output) -> Result<(), Failure> {
    use std::io::IsTerminal;
    // A refused check could not run: exit 2, as for usage.
    let could_not = |e: ClientError| Failure {
        exit: 2,
        ..e.into()
    };
    client.request(&request).map_err(could_not)?;
    let tty = std::io::stderr().is_terminal();
    let mut last_line = std::time::Instant::now();
    let status = loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let v = client
            .request(&Request::Status {
                name: Some(StatusName::Check),
            })
            .map_err(could_not)?;
        let running = v["state"] == "running";
        let progress = format!(
            "check: {}/{} tables, {} chunks, {} rows ({:.0} rows/s), {}{}{}",
            v["tablesDone"],
            v["tables"],
            v["chunks"],
            v["rows"],
            v["rowsPerSecond"].as_f64().unwrap_or(0.0),
            plural(&v["differences"], "difference", "differences"),
            v["currentTable"]
                .as_str()
                .map(|t| format!(", at {t}"))
                .unwrap_or_default(),
            v["waitingFor"]
                .as_str()
                .map(|w| format!(", waiting for {w}"))
                .unwrap_or_default()
        );
        // A check refused before its first table: no progress to show.
        let nothing = !running && v["tables"] == 0 && v["state"] == "failed";
        if nothing {
        } else if tty {
            eprint!("\r\x1b[K{progress}");
        } else if last_line.elapsed() >= std::time::Duration::from_secs(5) || !running {
            eprintln!("{progress}");
            last_line = std::time::Instant::now();
        }
        if !running {
            if tty && !nothing {
                eprintln!();
            }
            break v;
        }
    };
    if out.json {
        out.value(&status);
    } else {
        for skipped in status["skipped"].as_array().into_iter().flatten() {
            out.line(&format!(
                "skipped: {}",
                skipped.as_str().unwrap_or_default()
            ));
        }
        for found in status["found"].as_array().into_iter().flatten() {
            out.line(found.as_str().unwrap_or_default());
        }
        let listed = status["found"].as_array().map_or(0, Vec::len) as u64;
        let total = status["differences"].as_u64().unwrap_or(0);
        if total > listed {
            out.line(&format!("... and {} more", total - listed));
        }
        if status["state"] == "identical" {
            out.line(&format!(
                "identical: {}, {} compared",
                plural(&status["tablesDone"], "table", "tables"),
                plural(&status["rows"], "row", "rows")
            ));
        }
    }
    match status["state"].as_str() {
        Some("identical") => Ok(()),
        Some("cancelled") => Err(Failure {
            kind: "cancelled".into(),
            ..Failure::usage("the check was cancelled".into())
        }),
        Some("differences") => Err(Failure::request(
            "differences",
            format!(
                "{} found in {} ({} compared)",
                plural(&status["differences"], "difference", "differences"),
                plural(&status["tablesDone"], "table", "tables"),
                plural(&status["rows"], "row", "rows")
            ),
        )),
        _ => Err(Failure {
            kind: "checkFailed".into(),
            ..Failure::usage(format!(
                "the check could not finish: {}",
                status["error"].as_str().unwrap_or("unknown reason")
            ))
        }),
    }
}

/// `log list` and `log info`, through the control socket.
fn log(client: &Client, command: LogCommand, json: bool, out: &mut Output) -> Result<(), Failure> {
    match command {
        LogCommand::List { seqno, low, high } => {
            let (low, high) = match seqno {
                Some(n) => (Some(n), Some(n)),
                None => (low, high),
            };
            if let (Some(l), Some(h)) = (low, high) {
                if l > h {
                    return Err(Failure::usage(format!("--low {l} is above --high {h}")));
                }
            }
            let v = log_request(client, &Request::LogList { low, high })?;
            let entries = v.as_array().ok_or_else(|| bad_answer("a list"))?;
            if entries.is_empty() {
                // Say why nothing is listed, as `shardrep log list` does:
                // a seqno asked for by number is an error, a range a note.
                let info = log_request(client, &Request::LogInfo)?;
                let (min, max) = (info["minSeqno"].as_u64(), info["maxSeqno"].as_u64());
                let held = match (min, max) {
                    (Some(min), Some(max)) => format!("it holds seqnos {min} to {max}"),
                    _ => "it holds no transaction".to_string(),
                };
                // Below what is stored: purged; above: not extracted yet.
                let asked = seqno.or(low).unwrap_or(0);
                let why = if max.is_some_and(|max| asked > max) {
                    format!("{held} (later seqnos are not stored yet)")
                } else {
                    format!(
                        "{held} (applied transactions are purged unless [queue] \
                         retention_seqnos keeps them)"
                    )
                };
                match seqno {
                    Some(n) => {
                        return Err(Failure::request(
                            "notFound",
                            format!("seqno {n} is not in the queue: {why}"),
                        ))
                    }
                    // With --json, stdout (no line) says it all.
                    None if json => {}
                    None => eprintln!("shardrepctl: no transaction in that range: {why}"),
                }
            }
            for entry in entries {
                if json {
                    out.line(&entry["transaction"].to_string());
                } else {
                    let text = entry["text"].as_str().ok_or_else(|| bad_answer("text"))?;
                    out.line(text);
                }
            }
        }
        LogCommand::Info => out.value(&log_request(client, &Request::LogInfo)?),
    }
    Ok(())
}

/// A `log` request; with no service listening, the error points at the
/// offline tool that reads a stopped service's queue.
fn log_request(client: &Client, request: &Request) -> Result<Value, Failure> {
    client.request(request).map_err(|e| match e {
        e @ ClientError::NotRunning { .. } => Failure {
            message: format!(
                "{e} (the queue of a stopped service: shardrep log info|list --queue DIR)"
            ),
            ..e.into()
        },
        other => other.into(),
    })
}

/// `N one` or `N many`, by the count in `n`.
fn plural(n: &Value, one: &str, many: &str) -> String {
    format!("{n} {}", if n.as_u64() == Some(1) { one } else { many })
}

fn bad_answer(what: &str) -> Failure {
    Failure::usage(format!(
        "unexpected answer from the service: expected {what}"
    ))
}

fn read_stdin() -> Result<String, Failure> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
    Ok(text)
}

/// Shard map rows from stdin, checked with the shard.map parser.
fn rows_from_stdin() -> Result<Vec<ShardRow>, Failure> {
    let text = read_stdin()?;
    let rows = parse_entries(&text, "stdin").map_err(|e| Failure::usage(e.to_string()))?;
    if rows.is_empty() {
        return Err(Failure::usage(
            "stdin holds no shard rows (expected a `shard_id master critical` header and rows)"
                .into(),
        ));
    }
    Ok(rows.iter().map(|r| ShardRow::from(&r.entry)).collect())
}

fn shard(client: &Client, command: ShardCommand, out: &mut Output) -> Result<(), Failure> {
    match command {
        ShardCommand::List => {
            let v = client.request(&Request::ShardList)?;
            if out.json {
                out.value(&v);
                return Ok(());
            }
            let rows: Vec<ShardRow> =
                serde_json::from_value(v).map_err(|_| bad_answer("shard rows"))?;
            let mut map = ShardMap::new();
            for row in &rows {
                let entry = ShardEntry::try_from(row).map_err(|e| Failure::usage(e.message))?;
                map.insert(entry)
                    .map_err(|e| Failure::usage(e.to_string()))?;
            }
            out.text(&map.to_text());
        }
        ShardCommand::Insert => {
            let rows = rows_from_stdin()?;
            out.value(&client.request(&Request::ShardInsert { rows })?);
        }
        ShardCommand::Update => {
            let rows = rows_from_stdin()?;
            out.value(&client.request(&Request::ShardUpdate { rows })?);
        }
        ShardCommand::Delete { ids } => {
            let ids = if ids.is_empty() {
                read_stdin()?
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            } else {
                ids
            };
            if ids.is_empty() {
                return Err(Failure::usage(
                    "no shard ids given (as arguments or one per line on stdin)".into(),
                ));
            }
            out.value(&client.request(&Request::ShardDelete { ids })?);
        }
        ShardCommand::DeleteAll => out.value(&client.request(&Request::ShardDeleteAll)?),
    }
    Ok(())
}

/// Buffered stdout; text or JSON rendering of answers.
struct Output {
    json: bool,
    buf: String,
}

impl Output {
    fn new(json: bool) -> Self {
        Output {
            json,
            buf: String::new(),
        }
    }

    fn line(&mut self, text: &str) {
        self.buf.push_str(text);
        self.buf.push('\n');
    }

    fn text(&mut self, text: &str) {
        self.buf.push_str(text);
    }

    /// JSON: the value on one line. Text: an object as aligned
    /// `name : value` lines (names sorted, as trepctl); a list of objects
    /// as such blocks separated by a blank line; a list of scalars one per
    /// line; a scalar as itself; null prints nothing.
    fn value(&mut self, v: &Value) {
        if self.json {
            self.line(&v.to_string());
            return;
        }
        match v {
            Value::Null => {}
            Value::Object(map) => self.fields(map),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::Object(map) => {
                            if i > 0 {
                                self.line("");
                            }
                            self.fields(map);
                        }
                        other => self.line(&scalar(other)),
                    }
                }
            }
            other => self.line(&scalar(other)),
        }
    }

    fn fields(&mut self, map: &serde_json::Map<String, Value>) {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        let width = keys.iter().map(|k| k.chars().count()).max().unwrap_or(0);
        for key in keys {
            self.line(&format!("{key:<width$} : {}", scalar(&map[key])));
        }
    }

    fn finish(&mut self) -> Result<(), Failure> {
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(std::mem::take(&mut self.buf).as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => Ok(()),
            // A closed pipe (`| head`) is not an error of the request.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(Failure::usage(format!("cannot write to stdout: {e}"))),
        }
    }
}

/// A value on one line: `NONE` for null, strings unquoted, fractional
/// numbers with 3 decimals, lists and objects as compact JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "NONE".to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(f64::NAN)),
        other => other.to_string(),
    }
}
