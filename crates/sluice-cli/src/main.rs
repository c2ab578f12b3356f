//! `sluice`: run workloads and benchmarks on the embedded Sluice engine.
//!
//! ```text
//! sluice bench format [--mib N] [--block-kib N] [--reps N] [--codecs LIST] [--json PATH]
//! sluice run terasort|sort|wordcount|repartition|aggregate [--mib N] [--maps N] [--reduces N] ...
//! sluice daemon --host H --port P --dir D [--dir D2 ...] --memory M --secret-file F
//! sluice app-key --secret-file F --app APP
//! sluice stats --daemon ADDR --secret-file F
//! ```

mod bench;
mod daemon;
mod run;
mod stats;

use clap::{Parser, Subcommand};

/// Sluice: a native shuffle engine for data-intensive processing.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Micro benchmarks, each printed beside a baseline measured in the same run.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// A whole shuffle workload on the embedded engine, with its output checked.
    Run(run::RunArgs),
    /// The service daemon of one node (see docs/service.md).
    Daemon(daemon::DaemonArgs),
    /// Prints an application's key, derived from the node secret.
    AppKey(daemon::AppKeyArgs),
    /// Prints a running daemon's accounting and work so far, as JSON.
    Stats(stats::StatsArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench { what } => bench::run(what),
        Command::Run(args) => run::run(&args),
        Command::Daemon(args) => daemon::run(&args),
        Command::AppKey(args) => daemon::app_key_command(&args),
        Command::Stats(args) => stats::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
