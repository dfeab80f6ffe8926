//! `shardrep`: runs one replication service in the foreground.
use clap::Parser;

/// shardrep: parallel, sharded replication applier for MySQL-family databases.
///
/// Runs one replication service in the foreground, logging to stderr. The
/// extract, run and log subcommands arrive with the extractor, queue and
/// applier; today only configuration checking is available.
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
        config: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { config } => {
            let cfg = shardrep::config::Config::load(&config)?;
            println!(
                "{}: configuration of service '{}' is valid",
                config.display(),
                cfg.service.name
            );
            Ok(())
        }
    }
}
