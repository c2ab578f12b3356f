//! `sluice`: run workloads and benchmarks on the embedded Sluice engine.
//!
//! ```text
//! sluice bench format [--mib N] [--block-kib N] [--reps N] [--codecs LIST] [--json PATH]
//! sluice run terasort|sort|wordcount|repartition|aggregate [--mib N] [--maps N] [--reduces N] ...
//! ```
//! Later issues add `sluice daemon` and `sluice gen`.

mod bench;
mod run;

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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench { what } => bench::run(what),
        Command::Run(args) => run::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
