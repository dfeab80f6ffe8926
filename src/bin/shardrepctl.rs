//! `shardrepctl`: controls a running shardrep service over its Unix socket.
use clap::Parser;

/// shardrepctl: control a running shardrep service (status, online, offline,
/// shard edits, wait) over its control socket.
///
/// The subcommands arrive with the control socket; today only `--help` and
/// `--version` are available.
#[derive(Parser, Debug)]
#[command(name = "shardrepctl", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    eprintln!(
        "shardrepctl: no subcommands yet; the control socket is not implemented in this version"
    );
    std::process::exit(2);
}
