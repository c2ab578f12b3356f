//! `sluice bench partition`: the thesis experiment on this machine.
//!
//! # What is measured
//! For each record size (4-, 16- and 100-byte tuples with 4-byte uniform
//! keys, as in the thesis) the input is generated once in 1 MiB batches.
//! For each partition count the thesis's function `key & (P - 1)` is used.
//! Then for each thread count: one warm-up round (fills the page pool, faults
//! buffers in) and `--reps` timed rounds, each round running every strategy
//! once in turn, so that the machine's slow spells hit all strategies of a
//! point alike; the median per strategy is shown.
//! Output pages go back to the pool after every run, as an engine would do
//! once a partition is handed on.
//!
//! Baselines from the same run: a memory copy of the same bytes on the
//! point's thread count (one per round, interleaved with the strategies,
//! median per point) and the naive
//! single-threaded partitioner (one growable vector per partition), per
//! partition count. The run ends with the targets computed from the
//! rows (`partition_targets`).
//! Every run's output is checked: the record count per partition must equal
//! that of the first strategy run at that partition count (the naive one by
//! default).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use sluice_core::datagen::tuples;
use sluice_core::partition::{
    strategy::Auto, MaskPartitioner, PagePool, PartitionJob, StrategyKind, PAGE_BYTES_DEFAULT,
};
use sluice_core::{BatchView, Layout, RecordBatch};

use indicatif::{ProgressBar, ProgressStyle};

use super::measure::{copy_all, copy_all_threads, gbps, median_of, time};
use super::plot::{write_svg, Point};
use super::report::{write_json, Table};

/// Options of `sluice bench partition`.
#[derive(Debug, Args)]
pub(crate) struct PartitionArgs {
    /// Input size per record size, in MiB.
    #[arg(long, default_value_t = 128)]
    mib: usize,
    /// Timed repetitions per point (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Record sizes in bytes (4-byte key plus payload), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4,16,100")]
    sizes: Vec<usize>,
    /// Partition counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "2,8,32,1024,4096")]
    partitions: Vec<u32>,
    /// Thread counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Strategies, comma separated (default: all).
    #[arg(long, value_delimiter = ',')]
    strategies: Vec<String>,
    /// Page size in KiB.
    #[arg(long, default_value_t = PAGE_BYTES_DEFAULT >> 10)]
    page_kib: usize,
    /// Reduced grid (16 and 100 B, 32 and 1024 partitions, 32 MiB), under a minute.
    #[arg(long)]
    quick: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the rows as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also plot M records/s against partitions to this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

const BATCH_BYTES: usize = 1 << 20;

fn input(record_bytes: usize, total: usize) -> Result<(Layout, Vec<RecordBatch>), String> {
    let layout = Layout::fixed(4, record_bytes.saturating_sub(4)).map_err(|e| e.to_string())?;
    let per_batch = (BATCH_BYTES / record_bytes).max(1) as u64;
    let mut out = Vec::new();
    let mut row = 0u64;
    let mut bytes = Vec::new();
    while (row as usize) * record_bytes < total {
        bytes.clear();
        tuples::fill(9, 4, record_bytes - 4, row, per_batch, &mut bytes);
        let mut b = RecordBatch::new(layout);
        b.extend_fixed(&bytes).map_err(|e| e.to_string())?;
        out.push(b);
        row += per_batch;
    }
    Ok((layout, out))
}

/// Runs the benchmark and prints its table.
pub(crate) fn run(args: &PartitionArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (mib, sizes, partitions, reps) = if args.quick {
        (32, vec![16, 100], vec![32, 1024], 1)
    } else {
        (args.mib, args.sizes.clone(), args.partitions.clone(), args.reps)
    };
    let kinds: Vec<StrategyKind> = if args.strategies.is_empty() {
        StrategyKind::ALL.to_vec()
    } else {
        args.strategies
            .iter()
            .map(|s| StrategyKind::parse(s).ok_or_else(|| format!("unknown strategy {s:?}")))
            .collect::<Result<_, _>>()?
    };
    let pool = PagePool::new(args.page_kib.max(1) << 10);
    println!(
        "sluice bench partition: {mib} MiB per record size, mask partitioner, {} KiB pages, median of {reps}",
        args.page_kib
    );
    let table = Table::start(&[
        ("bytes", 5),
        ("P", 5),
        ("thr", 3),
        ("strategy", 11),
        ("M rec/s", 8),
        ("GB/s", 6),
        ("x naive", 7),
        ("x memcpy", 8),
        ("memcpy GB/s", 11),
    ]);
    let mut rows = Vec::new();
    let mut points = Vec::new();
    let mut csv = String::from(
        "record_bytes,partitions,threads,strategy,mrecords_per_s,gbps,vs_naive,vs_memcpy,memcpy_gbps\n",
    );
    let total_points = sizes.len()
        * partitions.len()
        * args
            .threads
            .iter()
            .map(|&t| kinds.iter().filter(|&&k| k != StrategyKind::Naive || t == 1).count())
            .sum::<usize>();
    let progress = ProgressBar::new(total_points as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} elapsed, ~{eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for &size in &sizes {
        let (layout, batches) = input(size, mib << 20)?;
        let views: Vec<BatchView<'_>> = batches.iter().map(RecordBatch::view).collect();
        let records: usize = batches.iter().map(RecordBatch::len).sum();
        let bytes: usize = batches.iter().map(RecordBatch::payload_len).sum();
        let chunks: Vec<&[u8]> = batches.iter().map(RecordBatch::payload).collect();
        let mut dst = vec![0u8; bytes];
        copy_all(&chunks, &mut dst);
        let mut size_memcpy = Vec::new();
        for &p in &partitions {
            let f = MaskPartitioner::new(p)?;
            let mut reference_counts: Option<Vec<usize>> = None;
            let mut naive_gbps = 0.0;
            for &threads in &args.threads {
                // The naive baseline runs single-threaded only.
                let active: Vec<StrategyKind> = kinds
                    .iter()
                    .copied()
                    .filter(|&k| k != StrategyKind::Naive || threads == 1)
                    .collect();
                let job =
                    PartitionJob { layout, input: &views, partitioner: &f, threads, pool: &pool };
                // Rounds interleave the strategies and the memory copy, so a
                // slow spell of the machine slows every strategy of the point
                // and its baseline alike.
                let mut times: Vec<Vec<Duration>> = vec![Vec::new(); active.len()];
                let mut copies = Vec::new();
                for round in 0..=reps.max(1) {
                    let copy = time(|| copy_all_threads(&chunks, &mut dst, threads));
                    if round > 0 {
                        copies.push(gbps(bytes, copy));
                    }
                    for (i, &kind) in active.iter().enumerate() {
                        let strategy = kind.build();
                        let t = std::time::Instant::now();
                        let out = strategy.run(&job)?;
                        let elapsed = t.elapsed();
                        let counts: Vec<usize> =
                            (0..out.partitions()).map(|i| out.count(i)).collect();
                        match &reference_counts {
                            Some(c) if *c != counts => {
                                return Err(format!(
                                    "{} disagrees with the reference at P={p}",
                                    strategy.name()
                                )
                                .into())
                            }
                            None => reference_counts = Some(counts),
                            _ => {}
                        }
                        out.recycle(&pool);
                        if round > 0 {
                            times[i].push(elapsed);
                        }
                    }
                }
                let memcpy = median_of(copies);
                size_memcpy.push(memcpy);
                let auto_choice = Auto::choose(&job).name();
                for (&kind, times) in active.iter().zip(&times) {
                    let strategy = kind.build();
                    let g = median_of(times.iter().map(|t| gbps(bytes, *t)).collect());
                    let mrec = g * 1e9 / size as f64 / 1e6;
                    if kind == StrategyKind::Naive {
                        naive_gbps = g;
                    }
                    let vs_naive = if naive_gbps > 0.0 { g / naive_gbps } else { f64::NAN };
                    progress.inc(1);
                    csv.push_str(&format!(
                        "{size},{p},{threads},{},{mrec:.3},{g:.4},{vs_naive:.4},{:.4},{memcpy:.4}\n",
                        strategy.name(),
                        g / memcpy
                    ));
                    points.push(Point {
                        record_bytes: size,
                        threads,
                        strategy: strategy.name().to_string(),
                        partitions: p,
                        mrecords_per_s: mrec,
                    });
                    progress.suspend(|| {
                        table.row(&[
                            size.to_string(),
                            p.to_string(),
                            threads.to_string(),
                            strategy.name().to_string(),
                            format!("{mrec:.1}"),
                            format!("{g:.2}"),
                            format!("{vs_naive:.2}"),
                            format!("{:.2}", g / memcpy),
                            format!("{memcpy:.2}"),
                        ])
                    });
                    rows.push(json!({
                        "record_bytes": size, "partitions": p, "threads": threads,
                        "strategy": strategy.name(), "records": records, "bytes": bytes,
                        "mrecords_per_s": mrec, "gbps": g, "naive_gbps": naive_gbps,
                        "memcpy_gbps": memcpy, "vs_naive": vs_naive, "vs_memcpy": g / memcpy,
                        "auto_choice": auto_choice,
                    }));
                }
            }
        }
        let (lo, hi) =
            size_memcpy.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &g| (lo.min(g), hi.max(g)));
        progress.suspend(|| {
            println!("  (memcpy of the {size}-byte input, per point: {lo:.2}-{hi:.2} GB/s)")
        });
    }
    progress.finish_and_clear();
    super::partition_targets::print(&rows);
    if let Some(path) = &args.csv {
        std::fs::write(path, &csv)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        write_svg(path, &points)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.json {
        write_json(path, &json!({ "bench": "partition", "mib": mib, "reps": reps, "rows": rows }))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
