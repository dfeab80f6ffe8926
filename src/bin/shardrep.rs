//! `shardrep`: runs one replication service in the foreground, and offers
//! offline tools (configuration check, binlog inspection, filling and
//! inspecting a transaction queue).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;

use shardrep::config::{Config, FilesSourceConfig, SourceEndpoint, StartPosition};
use shardrep::extractor::reader::{resolve_start, ExtractStart, Extractor};
use shardrep::inspect::{transaction_json, transaction_text};
use shardrep::position::Seqno;
use shardrep::queue::{QueueOptions, TransactionQueue};
use shardrep::replicator::extract::{extract_to_queue, ExtractEnd, ExtractPlan, FirstStart};

/// shardrep: parallel, sharded replication applier for MySQL-family databases.
#[derive(Parser, Debug)]
#[command(name = "shardrep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Run the service in the foreground: listen on the control socket
    /// (`[control] socket`, for shardrepctl), go online (take over the
    /// replica's native replication when `source.start = "takeover"` and
    /// the service has no position yet), extract the source into the queue
    /// and apply it with N channels to the replica, until SIGTERM or SIGINT
    /// (then every channel stops at the same seqno).
    Run {
        /// Path of the TOML configuration.
        #[arg(long, short = 'c')]
        config: PathBuf,
        /// Stop by itself once the source has nothing more (binlog files
        /// read to their end, or a live master's non-blocking dump done)
        /// and everything is applied.
        #[arg(long)]
        until_idle: bool,
        /// Never apply these seqnos: a comma-separated list of seqnos and
        /// ranges (`12`, `12,15-17`). Each skipped transaction is logged
        /// as a warning. Only for a transaction the replica must not get
        /// (e.g. one that stopped the service with a definite error after
        /// the DBA fixed the replica by hand).
        #[arg(long, value_name = "LIST")]
        skip_seqno: Option<shardrep::replicator::state::SkipSeqnos>,
        /// Start OFFLINE:NORMAL and wait for `shardrepctl online`.
        #[arg(long, conflicts_with = "until_idle")]
        offline: bool,
    },
    /// Load and validate a configuration file, and the shard map and shard
    /// list files it names; print every problem found.
    CheckConfig {
        /// Path of the TOML configuration (e.g. conf/shardrep.toml).
        #[arg(long, short = 'c')]
        config: PathBuf,
        /// Also print the GRANT statements the configuration needs on the
        /// master and on the replica, each with the reason.
        #[arg(long)]
        grants: bool,
        /// The host part of the accounts in the printed GRANTs (default:
        /// the server's address when it is on this host, else '%').
        #[arg(long, requires = "grants")]
        from_host: Option<String>,
    },
    /// Print the transactions of a binlog as shardrep decodes them (seqno,
    /// GTID, end position, shard, each change with its values), like
    /// Tungsten's `thl list`. Reads the configured source (a live master or
    /// a binlog directory), or the directory given with --binlog-dir.
    Extract {
        /// Path of the TOML configuration whose [source] is read.
        #[arg(long, short = 'c', required_unless_present = "binlog_dir")]
        config: Option<PathBuf>,
        /// Read binlog files from this directory instead of the configured
        /// source (no configuration needed).
        #[arg(long, conflicts_with = "config")]
        binlog_dir: Option<PathBuf>,
        /// Where to start: FILE:POS (e.g. mariadb-bin.000003:4), or
        /// gtid:D-S-N[,D-S-N...] for a live MariaDB master. Default: the
        /// configuration's source.start.
        #[arg(long)]
        from: Option<String>,
        /// Stop after this many transactions.
        #[arg(long)]
        limit: Option<u64>,
        /// Print one JSON object per transaction per line.
        #[arg(long)]
        json: bool,
        /// Keep reading at the end of the binlog (tail the last file, or a
        /// blocking dump from a live master) until interrupted.
        #[arg(long)]
        follow: bool,
        /// Store the transactions in the transaction queue in DIR (created
        /// if missing) instead of printing them. When the queue already
        /// holds transactions, extraction resumes right after the last
        /// stored one, at the binlog position stored with it, and --from
        /// (or source.start) is ignored. With --config, the other [queue]
        /// settings come from the configuration.
        #[arg(long, value_name = "DIR", conflicts_with = "json")]
        to_queue: Option<PathBuf>,
        /// Segment size of the queue given with --to-queue, bytes
        /// (default: queue.segment_size_bytes of --config, else 67108864).
        #[arg(long, value_name = "BYTES", requires = "to_queue")]
        queue_segment_size_bytes: Option<u64>,
    },
    /// Inspect a transaction queue offline (the service must not be
    /// running on it), like Tungsten's `thl`.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
}

#[derive(clap::Subcommand, Debug)]
enum LogCommand {
    /// Print stored transactions in seqno order (default: all of them), in
    /// the format of `extract`.
    List {
        /// The queue directory.
        #[arg(long, value_name = "DIR")]
        queue: PathBuf,
        /// Only this seqno.
        #[arg(long, conflicts_with_all = ["low", "high"])]
        seqno: Option<u64>,
        /// From this seqno (default: the lowest stored).
        #[arg(long)]
        low: Option<u64>,
        /// Up to this seqno, inclusive (default: the highest stored).
        #[arg(long)]
        high: Option<u64>,
        /// Print one JSON object per transaction per line.
        #[arg(long)]
        json: bool,
    },
    /// Print the lowest and highest stored seqno, the count, the durable
    /// seqno, the bytes on disk, the segments and the extractor progress
    /// stored with the last transaction.
    Info {
        /// The queue directory.
        #[arg(long, value_name = "DIR")]
        queue: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// How log lines are written: `SHARDREP_LOG_FORMAT`, `text` (default) or
/// `json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    /// One human-readable line per event (tracing-subscriber's `fmt`
    /// format: time, level, target, message, fields).
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format with the
    /// event's fields at the top level: `timestamp`, `level`, `target`,
    /// `message` and the event's own fields).
    Json,
}

/// `SHARDREP_LOG_FORMAT` (unset or empty: text).
///
/// # Errors
/// A value other than `text` or `json`, named.
fn log_format() -> anyhow::Result<LogFormat> {
    match std::env::var("SHARDREP_LOG_FORMAT") {
        Err(std::env::VarError::NotPresent) => Ok(LogFormat::Text),
        Ok(v) if v.is_empty() || v == "text" => Ok(LogFormat::Text),
        Ok(v) if v == "json" => Ok(LogFormat::Json),
        Ok(v) => bail!("SHARDREP_LOG_FORMAT={v:?}: expected \"text\" or \"json\""),
        Err(std::env::VarError::NotUnicode(_)) => {
            bail!("SHARDREP_LOG_FORMAT is not UTF-8: expected \"text\" or \"json\"")
        }
    }
}

/// Logs to stderr, filtered by `SHARDREP_LOG` (default `info`), in the
/// format of `SHARDREP_LOG_FORMAT`; colours only for text on a terminal.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHARDREP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

fn main() -> ExitCode {
    // Before any thread: see shardrep::memory.
    shardrep::memory::cap_client_buffer_pool();
    let cli = Cli::parse();
    let format = match log_format() {
        Ok(format) => format,
        Err(e) => {
            report(&e, LogFormat::Text);
            return ExitCode::FAILURE;
        }
    };
    init_logging(format);
    match run_command(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e, format);
            ExitCode::FAILURE
        }
    }
}

/// A `run --until-idle` that ended on its run's error: the service has
/// logged it (its `OFFLINE:ERROR` event, with what to do).
#[derive(Debug)]
struct RunFailed(shardrep::replicator::service::RunFailure);

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for RunFailed {}

/// Prints why a command failed on stderr: `shardrep: ` and the message
/// (with the context it was given: anyhow's alternate form, each error of
/// the chain once, as the crate's error types never repeat their cause),
/// then `hint: ` and what to do when the error says. Never a backtrace,
/// whatever `RUST_BACKTRACE` says (anyhow's `Debug` form would print one):
/// a user error is not a bug. A panic, a bug, keeps the standard panic
/// message and backtrace.
///
/// With `SHARDREP_LOG_FORMAT=json` the error is one JSON log event
/// instead (`level` ERROR, `message`, `hint`), so that stderr stays one
/// JSON object per line, and a run's error, already logged as its
/// `OFFLINE:ERROR` event, is not written again.
fn report(e: &anyhow::Error, format: LogFormat) {
    let hint = hint(e);
    match format {
        LogFormat::Text => {
            eprintln!("shardrep: {e:#}");
            if let Some(hint) = hint {
                eprintln!("hint: {hint}");
            }
        }
        LogFormat::Json if e.downcast_ref::<RunFailed>().is_some() => {}
        LogFormat::Json => match hint {
            Some(hint) => tracing::error!(hint, "{e:#}"),
            None => tracing::error!("{e:#}"),
        },
    }
}

/// What to do about `e`, when the error's kind says.
fn hint(e: &anyhow::Error) -> Option<String> {
    use shardrep::config::ConfigError;
    use shardrep::shard::{ShardListError, ShardMapError};
    if let Some(RunFailed(failure)) = e.downcast_ref::<RunFailed>() {
        return failure.way_out.clone();
    }
    if let Some(ConfigError::Read { file, .. }) = e.downcast_ref::<ConfigError>() {
        return Some(format!(
            "check the path given to --config ({}) and that this user may read the file",
            file.display()
        ));
    }
    if let Some(ShardMapError::Read { file, .. }) = e.downcast_ref::<ShardMapError>() {
        return Some(format!(
            "check shard_filter.map_file ({}) and that this user may read the file",
            file.display()
        ));
    }
    if let Some(ShardListError::Read { file, .. }) = e.downcast_ref::<ShardListError>() {
        return Some(format!(
            "check apply.shard_list ({}) and that this user may read the file",
            file.display()
        ));
    }
    if let Some(ShardMapError::Invalid { .. }) = e.downcast_ref::<ShardMapError>() {
        return Some(
            "fix the lines named in the shard map: a header naming shard_id, master and \
             critical, then one shard a line (its schema, the service that masters it or \
             #LOCAL, true or false), as the comments of shard.map in shardrep's sources say; \
             `shardrep check-config` checks it without starting anything"
                .into(),
        );
    }
    if let Some(ShardListError::Invalid { .. }) = e.downcast_ref::<ShardListError>() {
        return Some(
            "fix the lines named in the shard list: `shard=channel` with a channel below \
             [apply] channels, `(*)=channel`, `(critical)=a,b`, as the comments of \
             conf/shard.list in shardrep's sources say; `shardrep check-config` checks it \
             without starting anything"
                .into(),
        );
    }
    if let Some(config) = e.downcast_ref::<ConfigError>() {
        let file = config.file().display();
        return Some(format!(
            "fix {file} (every key is explained in shardrep.toml: conf/ of shardrep's \
             sources, or share/doc/shardrep/ where it is installed), then `shardrep \
             check-config --config {file}` checks it without starting anything"
        ));
    }
    None
}

/// Runs the command `cli` asks for.
fn run_command(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run {
            config,
            until_idle,
            skip_seqno,
            offline,
        } => run_service(config, until_idle, skip_seqno, offline),
        Command::CheckConfig {
            config,
            grants,
            from_host,
        } => {
            let cfg = Config::load(&config)?;
            // The files the service reads at start, parsed as it will.
            if let Some(map) = &cfg.shard_filter.map_file {
                shardrep::shard::ShardMap::load(map)
                    .with_context(|| format!("{}: shard_filter.map_file", config.display()))?;
            }
            shardrep::shard::ChannelAssignment::from_config(&cfg.apply)
                .with_context(|| format!("{}: apply.shard_list", config.display()))?;
            println!(
                "{}: configuration of service '{}' is valid",
                config.display(),
                cfg.service.name
            );
            if grants {
                println!();
                print!(
                    "{}",
                    shardrep::grants::render(&shardrep::grants::needed(&cfg, from_host.as_deref()))
                );
            }
            Ok(())
        }
        Command::Extract {
            config,
            binlog_dir,
            from,
            limit,
            json,
            follow,
            to_queue,
            queue_segment_size_bytes,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the async runtime")?;
            match to_queue {
                Some(dir) => runtime.block_on(extract_into_queue_dir(
                    config,
                    binlog_dir,
                    from,
                    limit,
                    follow,
                    dir,
                    queue_segment_size_bytes,
                )),
                None => runtime.block_on(extract(config, binlog_dir, from, limit, json, follow)),
            }
        }
        Command::Log { command } => match command {
            LogCommand::List {
                queue,
                seqno,
                low,
                high,
                json,
            } => log_list(queue, seqno, low, high, json),
            LogCommand::Info { queue, json } => log_info(queue, json),
        },
    }
}

/// The source to read: `--binlog-dir`, or the configuration's `[source]`
/// (with its `[queue]` settings).
struct SourceChoice {
    endpoint: SourceEndpoint,
    configured_start: Option<StartPosition>,
    queue: Option<shardrep::config::QueueConfig>,
}

fn choose_source(
    config: Option<PathBuf>,
    binlog_dir: Option<PathBuf>,
) -> anyhow::Result<SourceChoice> {
    match (config, binlog_dir) {
        (_, Some(dir)) => Ok(SourceChoice {
            endpoint: SourceEndpoint::Files(FilesSourceConfig {
                binlog_dir: dir,
                binlog_index: None,
            }),
            configured_start: None,
            queue: None,
        }),
        (Some(path), None) => {
            let cfg = Config::load(&path)?;
            Ok(SourceChoice {
                endpoint: cfg.source.endpoint,
                configured_start: Some(cfg.source.start),
                queue: Some(cfg.queue),
            })
        }
        (None, None) => bail!("give --config or --binlog-dir"),
    }
}

async fn start_of(
    endpoint: &SourceEndpoint,
    from: Option<String>,
    configured_start: Option<StartPosition>,
) -> anyhow::Result<ExtractStart> {
    let start: StartPosition = match (from, configured_start) {
        (Some(text), _) => text
            .parse()
            .with_context(|| format!("--from {text:?}: expected FILE:POS or gtid:D-S-N"))?,
        (None, Some(start)) => start,
        (None, None) => bail!("--binlog-dir needs --from FILE:POS (e.g. mariadb-bin.000001:4)"),
    };
    Ok(resolve_start(endpoint, &start).await?)
}

async fn extract(
    config: Option<PathBuf>,
    binlog_dir: Option<PathBuf>,
    from: Option<String>,
    limit: Option<u64>,
    json: bool,
    follow: bool,
) -> anyhow::Result<()> {
    let SourceChoice {
        endpoint,
        configured_start,
        ..
    } = choose_source(config, binlog_dir)?;
    let start = start_of(&endpoint, from, configured_start).await?;
    let mut extractor = Extractor::open(&endpoint, start, Seqno(0), follow)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut count = 0u64;
    while limit.is_none_or(|l| count < l) {
        let Some(txn) = extractor.next_transaction().await? else {
            break;
        };
        if json {
            writeln!(out, "{}", transaction_json(&txn))?;
        } else {
            writeln!(out, "{}", transaction_text(&txn))?;
        }
        if follow {
            out.flush()?;
        }
        count += 1;
    }
    out.flush()?;
    let a = extractor.assembler();
    eprintln!(
        "extracted {count} transactions; next position {} gtid {}",
        a.resume_position(),
        if a.gtid_position().is_empty() {
            "-".to_string()
        } else {
            a.gtid_position().to_string()
        }
    );
    Ok(())
}

/// `extract --to-queue`: appends every transaction with the extractor's
/// progress after it ([`extract_to_queue`], the service's extract loop);
/// resumes from the queue's stored progress when there is one.
async fn extract_into_queue_dir(
    config: Option<PathBuf>,
    binlog_dir: Option<PathBuf>,
    from: Option<String>,
    limit: Option<u64>,
    follow: bool,
    dir: PathBuf,
    segment_size_bytes: Option<u64>,
) -> anyhow::Result<()> {
    let SourceChoice {
        endpoint,
        configured_start,
        queue: queue_config,
    } = choose_source(config, binlog_dir)?;
    let mut options = match &queue_config {
        Some(q) => QueueOptions::from_config(q),
        None => QueueOptions::new(&dir),
    };
    options.config.dir = dir.clone();
    if let Some(n) = segment_size_bytes {
        options.config.segment_size_bytes = n;
    }
    let queue = TransactionQueue::open(options).map_err(|e| {
        let hint = if e.to_string().contains("could not acquire lock") {
            " (is another process using this queue?)"
        } else {
            ""
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    let plan = match queue.last_progress() {
        Some(p) => {
            tracing::info!(
                queue = %dir.display(),
                last_seqno = %p.seqno,
                position = %p.position,
                gtid = %p.gtid_position,
                "resuming after the last stored transaction{}",
                if from.is_some() { "; --from is ignored" } else { "" }
            );
            ExtractPlan::resume(&endpoint, &p)
        }
        None => {
            let start = start_of(&endpoint, from, configured_start).await?;
            ExtractPlan::first(&endpoint, FirstStart::At(start)).await?
        }
    }
    .with_fragment_bytes(Some(
        shardrep::config::defaults::QUEUE_FRAGMENT_BYTES.default,
    ));
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let extracted =
        extract_to_queue(&endpoint, &queue, plan, follow, limit, interrupt, None).await?;
    match extracted.end {
        ExtractEnd::Stopped => tracing::info!("interrupted; flushing the queue"),
        ExtractEnd::StoppedWhileFull => {
            tracing::info!("interrupted while the queue is full; flushing the queue")
        }
        ExtractEnd::SourceEnd | ExtractEnd::Limit => {}
    }
    let count = extracted.stored;
    let progress = queue.last_progress();
    let min = queue.min_seqno();
    queue.close()?;
    match progress {
        Some(p) => eprintln!(
            "stored {count} transactions in {}; the queue holds seqnos {}..={}; next position {} gtid {}",
            dir.display(),
            min.map_or("-".to_string(), |s| s.to_string()),
            p.seqno,
            p.position,
            if p.gtid_position.is_empty() {
                "-".to_string()
            } else {
                p.gtid_position.to_string()
            }
        ),
        None => eprintln!("stored no transaction in {}", dir.display()),
    }
    Ok(())
}

fn open_queue_read_only(dir: &std::path::Path) -> anyhow::Result<TransactionQueue> {
    let mut options = QueueOptions::new(dir);
    options.read_only = true;
    TransactionQueue::open(options).map_err(|e| {
        let hint = if e.to_string().contains("could not acquire lock") {
            " (the queue is in use; log commands work on a stopped service only)"
        } else {
            ""
        };
        anyhow::anyhow!("{e}{hint}")
    })
}

/// `log list`: the stored transactions of a seqno range.
fn log_list(
    dir: PathBuf,
    seqno: Option<u64>,
    low: Option<u64>,
    high: Option<u64>,
    json: bool,
) -> anyhow::Result<()> {
    let queue = open_queue_read_only(&dir)?;
    let (Some(min), Some(max)) = (queue.min_seqno(), queue.max_seqno()) else {
        eprintln!("queue {} holds no transaction", dir.display());
        return Ok(());
    };
    let (low, high) = match seqno {
        Some(n) if n < min.get() || n > max.get() => bail!(
            "seqno {n} is not in queue {}: it holds seqnos {min} to {max}",
            dir.display()
        ),
        Some(n) => (n, n),
        None => {
            let low = low.unwrap_or(min.get());
            (low, high.unwrap_or(max.get().max(low)))
        }
    };
    if low > high {
        bail!("--low {low} is above --high {high}");
    }
    if high < min.get() || low > max.get() {
        eprintln!(
            "queue {} holds no transaction from {low} to {high}: it holds seqnos {min} to {max}",
            dir.display()
        );
        return Ok(());
    }
    // Purged seqnos below the lowest stored one are not listed.
    let low = low.max(min.get());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if low <= max.get() {
        let mut reader = queue.reader_from(Seqno(low))?;
        while reader.next_seqno().get() <= high {
            let Some(txn) = reader.try_next()? else {
                break;
            };
            if json {
                writeln!(out, "{}", transaction_json(&txn))?;
            } else {
                writeln!(out, "{}", transaction_text(&txn))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// `log info`: the queue's summary.
fn log_info(dir: PathBuf, json: bool) -> anyhow::Result<()> {
    let queue = open_queue_read_only(&dir)?;
    let info = queue.info()?;
    let seqno = |s: Option<Seqno>| s.map(|s| s.get());
    if json {
        let progress = info.progress.as_ref().map(|p| {
            serde_json::json!({
                "seqno": p.seqno.get(),
                "epoch": p.epoch.get(),
                "position": p.position.to_string(),
                "gtidPosition": p.gtid_position.to_string(),
            })
        });
        let segments: Vec<_> = info
            .segments
            .iter()
            .map(|s| {
                serde_json::json!({
                    "start": s.start.get(),
                    "dir": s.dir.display().to_string(),
                    "sizeBytes": s.size_bytes,
                })
            })
            .collect();
        let value = serde_json::json!({
            "dir": info.dir.display().to_string(),
            "minimumStoredSeqNo": seqno(info.min_seqno),
            "maximumStoredSeqNo": seqno(info.max_seqno),
            "count": info.count,
            "durableSeqNo": seqno(info.durable_seqno),
            "sizeBytes": info.size_bytes,
            "segments": segments,
            "progress": progress,
        });
        println!("{value}");
        return Ok(());
    }
    let opt = |s: Option<Seqno>| s.map_or("-".to_string(), |s| s.to_string());
    println!("queue: {}", info.dir.display());
    println!("minimumStoredSeqNo: {}", opt(info.min_seqno));
    println!("maximumStoredSeqNo: {}", opt(info.max_seqno));
    println!("count: {}", info.count);
    println!("durableSeqNo: {}", opt(info.durable_seqno));
    println!("sizeBytes: {}", info.size_bytes);
    println!("segments: {}", info.segments.len());
    for s in &info.segments {
        println!(
            "  {} (from seqno {}): {} bytes",
            s.dir.display(),
            s.start,
            s.size_bytes
        );
    }
    match &info.progress {
        Some(p) => println!(
            "progress: seqno {} epoch {} position {} gtid {}",
            p.seqno,
            p.epoch,
            p.position,
            if p.gtid_position.is_empty() {
                "-".to_string()
            } else {
                p.gtid_position.to_string()
            }
        ),
        None => println!("progress: -"),
    }
    Ok(())
}

/// `shardrep run`: the foreground service with its control socket;
/// SIGTERM/SIGINT stop it cleanly.
fn run_service(
    config: PathBuf,
    until_idle: bool,
    skip: Option<shardrep::replicator::state::SkipSeqnos>,
    offline: bool,
) -> anyhow::Result<()> {
    use shardrep::control::{ControlServer, ServiceHandler};
    use shardrep::replicator::service::Service;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let cfg = Config::load(&config)?;
    // Signals received (SIGTERM, SIGINT): the first asks for a clean
    // stop, the second for an immediate one.
    let stop = Arc::new(AtomicU32::new(0));
    {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("shardrep-signals".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("signal runtime");
                runtime.block_on(async {
                    let mut term =
                        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                            .expect("SIGTERM handler");
                    loop {
                        tokio::select! {
                            _ = term.recv() => {}
                            _ = tokio::signal::ctrl_c() => {}
                        }
                        if stop.fetch_add(1, Ordering::AcqRel) == 0 {
                            tracing::info!("stop requested: stopping every channel at one seqno");
                        } else {
                            tracing::warn!(
                                "second stop request: stopping at once (as offline --immediate)"
                            );
                        }
                    }
                });
            })
            .context("start the signal thread")?;
    }
    let service = Service::new(cfg.clone(), until_idle);
    let handler = Arc::new(ServiceHandler::new(service.clone()));
    // The control socket first: a second copy of a running service is
    // refused for that, not for the metrics port the first one holds.
    let server = ControlServer::start(&cfg.control.socket, handler)
        .with_context(|| format!("control socket {}", cfg.control.socket.display()))?;
    // Before going online: an address in use stops the start here.
    let metrics = match cfg.metrics.listen {
        Some(addr) => match shardrep::control::metrics::MetricsServer::start(addr, service.clone())
        {
            Ok(metrics) => {
                tracing::info!(listen = %metrics.addr(), "metrics: serving GET /metrics");
                Some(metrics)
            }
            Err(e) => {
                server.shutdown();
                return Err(e.into());
            }
        },
        None => None,
    };
    // A `source set` that a stop of shardrep interrupted is finished
    // first; if it cannot be, the service stays offline (the queue after
    // the channels' position may be what the new master lacks).
    let mut online = !offline;
    if online {
        match service.finish_interrupted_switch(std::time::Duration::from_secs(300)) {
            Ok(Some(done)) => tracing::warn!(
                previous = %done.previous,
                source = %done.source,
                "the interrupted switch of the source is finished"
            ),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "the interrupted switch of the source did not finish: the service stays \
                     offline (status: sourceSwitchUnfinished; online is refused). Run \
                     `shardrepctl source set` to that master again: it goes online when it \
                     succeeds"
                );
                online = false;
            }
        }
    }
    if online {
        service
            .go_online(skip, None)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    // Until a signal, or (with --until-idle) the end of the run.
    let mut stopping = SignalStop::new(std::time::Duration::from_millis(cfg.service.stop_grace_ms));
    loop {
        let signals = stop.load(Ordering::Acquire);
        if signals > 0 && stopping.step(&service, signals) {
            service.wait_until_stopped();
            break;
        }
        if until_idle && !offline && service.state().is_offline() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = service.status();
    server.shutdown();
    if let Some(metrics) = metrics {
        metrics.shutdown();
    }
    // With --until-idle the run's own end is the outcome; a stop asked
    // for by a signal is a clean exit (the error is in the log and was in
    // status).
    if until_idle && stop.load(Ordering::Acquire) == 0 {
        if let Some(error) = service.last_error() {
            return Err(RunFailed(error).into());
        }
    }
    println!("{}", summary(&status, service.last_handback().as_ref()));
    Ok(())
}

/// How `shardrep run` stops on SIGTERM/SIGINT: a clean offline; while
/// open temporary tables of master sessions refuse it, tried again until
/// `grace` has passed since the first signal, then an immediate offline
/// (losing them, as the log says); a second signal goes immediate at once.
struct SignalStop {
    grace: std::time::Duration,
    /// When the first refused clean stop was met.
    refused_since: Option<std::time::Instant>,
    /// When the clean stop was last tried.
    last_try: Option<std::time::Instant>,
    immediate: bool,
}

impl SignalStop {
    fn new(grace: std::time::Duration) -> SignalStop {
        SignalStop {
            grace,
            refused_since: None,
            last_try: None,
            immediate: false,
        }
    }

    /// One step after `signals` signals; true once the service has
    /// stopped (or was not running).
    fn step(&mut self, service: &shardrep::replicator::service::Service, signals: u32) -> bool {
        use shardrep::replicator::state::State;
        let state = service.state();
        if state.is_offline() {
            return true;
        }
        let now = std::time::Instant::now();
        let out_of_grace = self
            .refused_since
            .is_some_and(|since| now.duration_since(since) >= self.grace);
        if !self.immediate && (signals > 1 || out_of_grace) {
            self.immediate = true;
            if out_of_grace && signals == 1 {
                tracing::warn!(
                    grace_ms = self.grace.as_millis() as u64,
                    "the clean stop was refused for the whole grace period ([service] \
                     stop_grace_ms): stopping at once; the temporary tables named above are lost"
                );
            }
            let _ = service.go_offline(true, None);
            return false;
        }
        if self.immediate || !matches!(state, State::Online | State::GoingOnlineSynchronizing) {
            return false; // under way (GOING-OFFLINE)
        }
        // A clean stop, tried again every second while refused.
        if self
            .last_try
            .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
        {
            return false;
        }
        self.last_try = Some(now);
        if let Err(e) = service.go_offline(false, None) {
            if self.refused_since.is_none() {
                self.refused_since = Some(now);
                tracing::warn!(
                    error = %e,
                    grace_ms = self.grace.as_millis() as u64,
                    "the clean stop is refused; trying again until the grace period ([service] \
                     stop_grace_ms) ends, then stopping at once, losing the temporary tables \
                     named; a second SIGTERM stops at once"
                );
            }
        }
        false
    }
}

/// The line `shardrep run` prints when it ends: the state, the applied
/// seqno and the counters. After a handback (the restart rows are gone,
/// status shows no applied seqno) the seqno handed back after and where
/// native replication starts.
fn summary(
    status: &shardrep::replicator::service::StatusSnapshot,
    handed_back: Option<&shardrep::replicator::service::HandedBack>,
) -> String {
    let seqno = |s: Option<Seqno>| s.map_or("-".to_string(), |s| s.to_string());
    let at = match (status.applied_last_seqno, handed_back) {
        (None, Some(h)) => format!(
            "{} (handed back to native replication at {}:{})",
            seqno(h.seqno),
            h.point.file,
            h.point.pos
        ),
        (applied, _) => seqno(applied),
    };
    format!(
        "{}: {} at seqno {at}, {} dropped by the shard filter, {} barriers, {} skipped by request",
        status.service_name,
        status.state,
        status.dropped_count,
        status.serialization_count,
        status.skipped_count,
    )
}
