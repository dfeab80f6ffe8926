//! `shardrep`: runs one replication service in the foreground, and offers
//! offline tools (configuration check, binlog inspection).
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;

use shardrep::config::{Config, FilesSourceConfig, SourceEndpoint, StartPosition};
use shardrep::extractor::reader::{resolve_start, Extractor};
use shardrep::inspect::{transaction_json, transaction_text};
use shardrep::position::Seqno;

/// shardrep: parallel, sharded replication applier for MySQL-family databases.
#[derive(Parser, Debug)]
#[command(name = "shardrep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Load and validate a configuration file; print every problem found.
    CheckConfig {
        /// Path of the TOML configuration (e.g. conf/shardrep.toml).
        #[arg(long, short = 'c')]
        config: PathBuf,
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
    },
}

fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHARDREP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::CheckConfig { config } => {
            let cfg = Config::load(&config)?;
            println!(
                "{}: configuration of service '{}' is valid",
                config.display(),
                cfg.service.name
            );
            Ok(())
        }
        Command::Extract {
            config,
            binlog_dir,
            from,
            limit,
            json,
            follow,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the async runtime")?;
            runtime.block_on(extract(config, binlog_dir, from, limit, json, follow))
        }
    }
}

async fn extract(
    config: Option<PathBuf>,
    binlog_dir: Option<PathBuf>,
    from: Option<String>,
    limit: Option<u64>,
    json: bool,
    follow: bool,
) -> anyhow::Result<()> {
    let (endpoint, configured_start) = match (config, binlog_dir) {
        (_, Some(dir)) => (
            SourceEndpoint::Files(FilesSourceConfig {
                binlog_dir: dir,
                binlog_index: None,
            }),
            None,
        ),
        (Some(path), None) => {
            let cfg = Config::load(&path)?;
            (cfg.source.endpoint, Some(cfg.source.start))
        }
        (None, None) => bail!("give --config or --binlog-dir"),
    };
    let start: StartPosition = match (from, configured_start) {
        (Some(text), _) => text
            .parse()
            .with_context(|| format!("--from {text:?}: expected FILE:POS or gtid:D-S-N"))?,
        (None, Some(start)) => start,
        (None, None) => bail!("--binlog-dir needs --from FILE:POS (e.g. mariadb-bin.000001:4)"),
    };
    let start = resolve_start(&endpoint, &start).await?;
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
