//! `sluice bench <what>`: micro benchmarks with same-run baselines.

mod format;
mod measure;
mod report;

use clap::Subcommand;

/// Which benchmark to run.
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Block encode and decode throughput per codec, beside a memory copy.
    Format(format::FormatArgs),
}

/// Runs one benchmark.
pub(crate) fn run(what: BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    match what {
        BenchCommand::Format(args) => format::run(&args),
    }
}
