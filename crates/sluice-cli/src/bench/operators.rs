//! `sluice bench operators`: SmartShuffle's Table 5 and Figure 12 on this
//! machine.
//!
//! # What is measured
//! Input: records of an 8- or 32-byte key and a 4-byte i32 value, keys drawn
//! uniformly from a dictionary of `--distinct` random keys, in 1 MiB
//! batches. Each worker thread runs a map pipeline (`sluice_engine::MapPipeline`) on
//! its share of the batches: partition into `--partitions` destinations
//! with the PSACS fold hash, then the operator per destination (partial
//! aggregate sum with spill-state, the same spilling by eviction, sorted
//! runs, or partial distinct over keys), with the spilling threshold split
//! across destinations. Output is
//! taken from the pipeline after every batch, as a sender would, and its
//! buffers reused. Throughput is input bits over wall time.
//!
//! Per configuration: one warm-up run and `--reps` timed runs, median.
//! Baselines in the same run: a memory copy of the input, and SmartShuffle's
//! published per-worker figures (`shared/design/facts.md`) with the ratio.
//! The aggregation rate is SmartShuffle's: the reduction of shuffled bytes
//! achieved over the ideal one (one partial per distinct key).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use sluice_core::datagen::rng::{mix, SplitMix64};
use sluice_core::memory::MemoryPool;
use sluice_core::partition::{FoldHash, PagePool, Partitioner};
use sluice_core::reorg::aggregate::{aggregation_rate, AggFn, AggSpec, SpillStrategy, ValueType};
use sluice_core::reorg::distinct::DistinctBy;
use sluice_core::reorg::StageSpec;
use sluice_core::{Layout, RecordBatch};
use sluice_engine::{MapPipeline, PipelineStats};

use super::measure::{copy_all, gbps, median_of, time};
use super::report::{write_json, Table};
use super::sweep_plot::{write_sweep_svg, SweepPoint};

/// Options of `sluice bench operators`.
#[derive(Debug, Args)]
pub(crate) struct OperatorsArgs {
    /// Input size per configuration, in MiB.
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Worker thread counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Key sizes in bytes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "8,32")]
    key_bytes: Vec<usize>,
    /// Operators, comma separated (partition, aggregate, aggregate/evict,
    /// aggregate/evict-avg, sort, distinct).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "partition,aggregate,aggregate/evict,sort,distinct"
    )]
    ops: Vec<String>,
    /// Distinct keys in the input.
    #[arg(long, default_value_t = 1_000_000)]
    distinct: u64,
    /// Destinations each worker partitions into.
    #[arg(long, default_value_t = 16)]
    partitions: u32,
    /// Spilling threshold per worker, in KiB (SmartShuffle: 16 MB).
    #[arg(long, default_value_t = 16 << 10)]
    threshold_kib: usize,
    /// Skip the threshold sweep (Figure 12).
    #[arg(long)]
    no_sweep: bool,
    /// Reduced sizes (32 MiB, 1 rep, 8-byte keys, a short sweep), under a minute.
    #[arg(long)]
    quick: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also plot the sweep to this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

const BATCH_BYTES: usize = 1 << 20;
const VALUE_BYTES: usize = 4;

/// SmartShuffle Table 5, one worker, Gbit/s: (partition, aggregate, sort)
/// for 8- and 32-byte keys.
fn smartshuffle_gbps(op: &str, key_bytes: usize) -> Option<f64> {
    match (op, key_bytes) {
        ("partition", 8) => Some(11.96),
        ("partition", 32) => Some(10.8),
        ("aggregate" | "aggregate/evict" | "aggregate/evict-avg", 8) => Some(1.46),
        ("aggregate" | "aggregate/evict" | "aggregate/evict-avg", 32) => Some(1.82),
        ("sort", 8) => Some(0.47),
        ("sort", 32) => Some(0.38),
        _ => None,
    }
}

/// The input and the number of distinct keys it really holds.
fn input(
    key_bytes: usize,
    distinct: u64,
    total: usize,
) -> Result<(Layout, Vec<RecordBatch>, u64), String> {
    let layout = Layout::fixed(key_bytes, VALUE_BYTES).map_err(|e| e.to_string())?;
    let width = key_bytes + VALUE_BYTES;
    let per_batch = BATCH_BYTES / width;
    let mut rng = SplitMix64::new(0x5eed);
    let mut seen = HashSet::new();
    let mut key = vec![0u8; key_bytes];
    let mut batches = Vec::new();
    let mut left = total / width;
    while left > 0 {
        let n = left.min(per_batch);
        let mut b = RecordBatch::with_capacity(layout, n * width);
        for _ in 0..n {
            let id = rng.below(distinct.max(1));
            seen.insert(id);
            for (j, c) in key.chunks_mut(8).enumerate() {
                let w = mix(id ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
                c.copy_from_slice(&w[..c.len()]);
            }
            let v = (rng.next_u64() as i32 % 1000).to_le_bytes();
            b.push(&key, &v).map_err(|e| e.to_string())?;
        }
        batches.push(b);
        left -= n;
    }
    Ok((layout, batches, seen.len() as u64))
}

/// What every run over one input shares.
#[derive(Clone, Copy)]
struct Setup<'a> {
    layout: Layout,
    batches: &'a [RecordBatch],
    partitions: u32,
    pages: &'a Arc<PagePool>,
}

/// Runs `workers` pipelines over the batches; returns wall time and totals.
fn run_once(
    setup: Setup<'_>,
    workers: usize,
    spec: &StageSpec,
    threshold: usize,
) -> Result<(Duration, PipelineStats), String> {
    let Setup { layout, batches, partitions, pages } = setup;
    let f: Arc<dyn Partitioner> = Arc::new(FoldHash::new(partitions).map_err(|e| e.to_string())?);
    let memory = MemoryPool::unbounded();
    let mut results: Vec<Result<PipelineStats, String>> = Vec::new();
    let t = time(|| {
        results = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let (f, memory) = (&f, &memory);
                    s.spawn(move || -> Result<PipelineStats, String> {
                        let mut p = MapPipeline::new(
                            layout,
                            f.clone(),
                            pages.clone(),
                            spec,
                            threshold,
                            memory,
                        );
                        for b in batches.iter().skip(w).step_by(workers) {
                            p.push(&b.view()).map_err(|e| e.to_string())?;
                            for d in 0..p.destinations() {
                                let shipped = p.take_output(d);
                                p.recycle_output(d, shipped);
                            }
                        }
                        p.finish().map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into())))
                .collect()
        });
    });
    let mut total = PipelineStats::default();
    for r in results {
        let s = r?;
        total.add(&s);
    }
    Ok((t, total))
}

/// Median time over `reps` runs of operator `op` after one warm-up, with
/// the last run's totals, which must pass [`check`].
fn measure(
    setup: Setup<'_>,
    op: &str,
    workers: usize,
    spec: &StageSpec,
    threshold: usize,
    reps: usize,
) -> Result<(f64, PipelineStats), String> {
    run_once(setup, workers, spec, threshold)?;
    let mut secs = Vec::new();
    let mut stats = PipelineStats::default();
    for _ in 0..reps.max(1) {
        let (t, s) = run_once(setup, workers, spec, threshold)?;
        secs.push(t.as_secs_f64());
        stats = s;
    }
    check(op, &stats)?;
    Ok((median_of(secs), stats))
}

/// Refuses a run whose output cannot be right: partitioning and sorting
/// keep every record; aggregate and distinct never emit more records than
/// they took in (both pass a record through at most once).
fn check(op: &str, s: &PipelineStats) -> Result<(), String> {
    let ok = match op {
        "partition" | "sort" => s.output_records == s.input_records,
        _ => s.output_records <= s.input_records,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{op}: {} records in, {} out", s.input_records, s.output_records))
    }
}

/// Bytes of an aggregate's partial state (8 where the operator is none).
fn state_bytes(spec: &StageSpec) -> usize {
    match spec {
        StageSpec::Aggregate(a, _) => 8 * a.state_words(),
        _ => 8,
    }
}

fn ops() -> Vec<(&'static str, StageSpec)> {
    vec![
        ("partition", StageSpec::None),
        (
            "aggregate",
            StageSpec::Aggregate(AggSpec::new(AggFn::Sum, ValueType::I32), SpillStrategy::State),
        ),
        (
            "aggregate/evict",
            StageSpec::Aggregate(AggSpec::new(AggFn::Sum, ValueType::I32), SpillStrategy::Evict),
        ),
        (
            "aggregate/evict-avg",
            StageSpec::Aggregate(AggSpec::new(AggFn::Avg, ValueType::I32), SpillStrategy::Evict),
        ),
        ("sort", StageSpec::Sort),
        ("distinct", StageSpec::Distinct(DistinctBy::Key, SpillStrategy::State)),
    ]
}

/// Runs the benchmark and prints its tables.
pub(crate) fn run(args: &OperatorsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (mib, reps, keys) =
        if args.quick { (32, 1, vec![8]) } else { (args.mib, args.reps, args.key_bytes.clone()) };
    let threshold = args.threshold_kib << 10;
    let pages = Arc::new(PagePool::new(sluice_core::partition::PAGE_BYTES_DEFAULT));
    let sweep: Vec<usize> = if args.no_sweep {
        Vec::new()
    } else if args.quick {
        vec![64 << 10, 1 << 20, 16 << 20]
    } else {
        vec![64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 32 << 20]
    };
    let total_runs = keys.len() * args.workers.len() * ops().len() + sweep.len() * 4;
    let progress = ProgressBar::new(total_runs as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    println!(
        "sluice bench operators: {mib} MiB per run, {} distinct keys, {} destinations, threshold {} KiB per worker, {} reps (median)",
        args.distinct, args.partitions, args.threshold_kib, reps
    );
    let table = progress.suspend(|| {
        Table::start(&[
            ("op", 15),
            ("key B", 5),
            ("workers", 7),
            ("Gbit/s", 7),
            ("per worker", 10),
            ("SmartShuffle", 12),
            ("x SmartSh.", 10),
            ("agg rate", 8),
            ("spills", 8),
            ("memcpy GB/s", 11),
        ])
    });
    let mut rows = Vec::new();
    for &kb in &keys {
        progress.set_message(format!("generating {kb}-byte keys"));
        let (layout, batches, distinct) = input(kb, args.distinct, mib << 20)?;
        let setup = Setup { layout, batches: &batches, partitions: args.partitions, pages: &pages };
        let bytes: usize = batches.iter().map(RecordBatch::payload_len).sum();
        let mut dst = vec![0u8; bytes];
        let chunks: Vec<&[u8]> = batches.iter().map(RecordBatch::payload).collect();
        copy_all(&chunks, &mut dst);
        let memcpy = median_of(
            (0..reps.max(1)).map(|_| gbps(bytes, time(|| copy_all(&chunks, &mut dst)))).collect(),
        );
        for &workers in &args.workers {
            for (name, spec) in ops().into_iter().filter(|(n, _)| args.ops.iter().any(|o| o == n)) {
                progress.set_message(format!("{name}, {kb} B keys, {workers} workers"));
                let ideal = distinct * (kb + state_bytes(&spec)) as u64;
                let (secs, stats) = measure(setup, name, workers, &spec, threshold, reps)?;
                let gbit = stats.input_bytes as f64 * 8.0 / secs / 1e9;
                let per = gbit / workers as f64;
                let theirs = smartshuffle_gbps(name, kb);
                let rate = name
                    .starts_with("aggregate")
                    .then(|| aggregation_rate(stats.input_bytes, stats.output_bytes, ideal));
                progress.suspend(|| {
                    table.row(&[
                        name.to_string(),
                        kb.to_string(),
                        workers.to_string(),
                        format!("{gbit:.2}"),
                        format!("{per:.2}"),
                        theirs.map_or("-".into(), |t| format!("{t:.2}")),
                        theirs.map_or("-".into(), |t| format!("{:.1}", per / t)),
                        rate.map_or("-".into(), |r| format!("{:.2}", r)),
                        stats.spills.to_string(),
                        format!("{memcpy:.2}"),
                    ])
                });
                rows.push(json!({
                    "op": name, "key_bytes": kb, "workers": workers, "gbit_per_s": gbit, "gbit_per_s_per_worker": per,
                    "smartshuffle_gbit_per_s_per_worker": theirs, "ratio_per_worker": theirs.map(|t| per / t),
                    "aggregation_rate": rate, "spills": stats.spills, "input_bytes": stats.input_bytes,
                    "output_bytes": stats.output_bytes, "distinct_keys": distinct, "memcpy_gbps": memcpy,
                    "threshold_bytes": threshold, "partitions": args.partitions,
                }));
                progress.inc(1);
            }
        }
    }
    let mut sweep_rows = Vec::new();
    let mut points = Vec::new();
    if !sweep.is_empty() {
        let kb = keys.first().copied().unwrap_or(8);
        let (layout, batches, distinct) = input(kb, args.distinct, mib << 20)?;
        let setup = Setup { layout, batches: &batches, partitions: args.partitions, pages: &pages };
        let ideal = distinct * (kb as u64 + 8);
        progress.suspend(|| {
            println!("\nthreshold sweep (Figure 12), {kb}-byte keys, 1 worker:");
        });
        let st = progress.suspend(|| {
            Table::start(&[
                ("op", 16),
                ("threshold KiB", 13),
                ("Gbit/s", 7),
                ("agg rate", 8),
                ("spills", 8),
            ])
        });
        let agg = AggSpec::new(AggFn::Sum, ValueType::I32);
        let variants = [
            ("aggregate/state", StageSpec::Aggregate(agg, SpillStrategy::State)),
            ("aggregate/input", StageSpec::Aggregate(agg, SpillStrategy::Input)),
            ("aggregate/evict", StageSpec::Aggregate(agg, SpillStrategy::Evict)),
            ("sort/state", StageSpec::Sort),
        ];
        for (name, spec) in &variants {
            for &th in &sweep {
                progress.set_message(format!("sweep {name} {} KiB", th >> 10));
                let (secs, stats) =
                    measure(setup, name.split('/').next().unwrap_or(name), 1, spec, th, reps)?;
                let gbit = stats.input_bytes as f64 * 8.0 / secs / 1e9;
                let rate = name
                    .starts_with("aggregate")
                    .then(|| aggregation_rate(stats.input_bytes, stats.output_bytes, ideal));
                progress.suspend(|| {
                    st.row(&[
                        name.to_string(),
                        (th >> 10).to_string(),
                        format!("{gbit:.2}"),
                        rate.map_or("-".into(), |r| format!("{r:.2}")),
                        stats.spills.to_string(),
                    ])
                });
                points.push(SweepPoint {
                    series: name.to_string(),
                    threshold_kib: th >> 10,
                    gbit_per_s: gbit,
                    aggregation_rate: rate,
                });
                sweep_rows.push(json!({ "op": name, "threshold_bytes": th, "gbit_per_s": gbit, "aggregation_rate": rate, "spills": stats.spills }));
                progress.inc(1);
            }
        }
    }
    progress.finish_and_clear();
    if let Some(path) = &args.svg {
        write_sweep_svg(path, &points)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.json {
        write_json(
            path,
            &json!({ "bench": "operators", "mib": mib, "reps": reps, "rows": rows, "sweep": sweep_rows }),
        )?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
