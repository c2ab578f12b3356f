//! `sluice bench <what>`: micro benchmarks with same-run baselines.

mod format;
mod measure;
mod operators;
mod partition;
mod partition_targets;
mod plot;
mod report;
mod sweep_plot;

use clap::Subcommand;

/// Which benchmark to run.
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Block encode and decode throughput per codec, beside a memory copy.
    Format(format::FormatArgs),
    /// The thesis experiment: partition strategies x record sizes x partitions x threads.
    Partition(partition::PartitionArgs),
    /// SmartShuffle's operator experiment: partition, + aggregate, + sort, + distinct; threshold sweep.
    Operators(operators::OperatorsArgs),
}

/// Runs one benchmark.
pub(crate) fn run(what: BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    match what {
        BenchCommand::Format(args) => format::run(&args),
        BenchCommand::Partition(args) => partition::run(&args),
        BenchCommand::Operators(args) => operators::run(&args),
    }
}
