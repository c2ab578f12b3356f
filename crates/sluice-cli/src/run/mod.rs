//! `sluice run <workload>`: a whole shuffle on the embedded engine.
//!
//! The input is generated first (see `workload`), then the clock starts:
//! map tasks on `--map-threads` host threads copy their records into
//! engine buffers and commit; the offload workers partition and run the
//! workload's operator; when every map task has committed the map stage
//! ends and reduce tasks on the same host threads read every partition.
//! The clock stops there; then every partition is checked. The summary prints the throughput beside a
//! baseline measured in the same run (for sorts: one in-memory radix sort
//! of all records on one thread; otherwise a memory copy of the input).

mod report;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::sort::SortRuns;
use sluice_core::reorg::Emitter;
use sluice_engine::{cpu, Engine, EngineConfig, ReduceBlock, ReduceOwner, ShuffleSpec};

use workload::{check_all, generate, Input, PartitionCheck};
pub(crate) use workload::{Kind, Spill};

/// Options of `sluice run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The workload.
    #[arg(value_enum)]
    pub(crate) workload: Kind,
    /// Input size in MiB.
    #[arg(long, default_value_t = 128)]
    pub(crate) mib: u64,
    /// Map tasks.
    #[arg(long, default_value_t = 16)]
    pub(crate) maps: u32,
    /// Reduce partitions.
    #[arg(long, default_value_t = 8)]
    pub(crate) reduces: u32,
    /// Destination nodes of the map side (two-level partitioning); 0: one
    /// level, a destination per reduce partition.
    #[arg(long, default_value_t = 0)]
    pub(crate) nodes: u32,
    /// Host threads running map and reduce tasks.
    #[arg(long, default_value_t = 1)]
    pub(crate) map_threads: usize,
    /// Offload worker threads.
    #[arg(long, default_value_t = 1)]
    pub(crate) offload_threads: usize,
    /// Memory budget for operator state and results held in memory, MiB.
    #[arg(long, default_value_t = 1024)]
    pub(crate) memory_mib: usize,
    /// Buffer pool, MiB.
    #[arg(long, default_value_t = 64)]
    pub(crate) buffer_mib: usize,
    /// Map buffer size, KiB.
    #[arg(long, default_value_t = 1024)]
    pub(crate) buffer_kib: usize,
    /// Offload worker speed relative to a host core, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    pub(crate) device_speed: f64,
    /// Turn liquid offloading off.
    #[arg(long)]
    pub(crate) no_liquid_offload: bool,
    /// Extra host threads for migrated work (0: the map threads run it).
    #[arg(long, default_value_t = 0)]
    pub(crate) host_threads: usize,
    /// Extra host threads take only migrated work, never segments queued
    /// for the offload workers.
    #[arg(long)]
    pub(crate) no_steal: bool,
    /// Directory for spilled state and persisted partitions.
    #[arg(long)]
    pub(crate) spill_dir: Option<PathBuf>,
    /// Data set seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Map-side spilling of the aggregating workloads (wordcount,
    /// aggregate): evict (the default, as under Spark), state or input.
    #[arg(long, value_enum, default_value_t = Spill::Evict)]
    pub(crate) spill: Spill,
    /// Skip the same-run baseline.
    #[arg(long)]
    pub(crate) no_baseline: bool,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

/// Runs one workload and prints its summary.
pub(crate) fn run(args: &RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    let summary = execute(args)?;
    summary.print();
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&summary)?)?;
    }
    Ok(())
}

/// Runs one workload and returns its checked summary.
pub(crate) fn execute(args: &RunArgs) -> Result<report::Summary, String> {
    let input =
        generate(args.workload, args.mib << 20, args.maps, args.reduces, args.seed, args.spill)?;
    let baseline = (!args.no_baseline).then(|| baseline(&input));
    let config = EngineConfig {
        offload_threads: args.offload_threads,
        buffer_pool_bytes: args.buffer_mib << 20,
        memory_budget: args.memory_mib << 20,
        device_speed: args.device_speed,
        liquid_offload: !args.no_liquid_offload,
        host_threads: args.host_threads,
        host_steal: !args.no_steal,
        spill_dir: args.spill_dir.clone().unwrap_or_else(std::env::temp_dir),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config).map_err(|e| e.to_string())?;
    let spec = ShuffleSpec {
        id: 1,
        maps: args.maps,
        layout: input.layout,
        partitioner: input.partitioner.clone(),
        op: input.op.clone(),
        nodes: (args.nodes > 0).then_some(args.nodes),
        reduce: ReduceOwner::Engine,
    };
    engine.register_shuffle(spec).map_err(|e| e.to_string())?;
    let bar = ProgressBar::new(u64::from(args.maps) + u64::from(args.reduces));
    bar.set_style(
        ProgressStyle::with_template("{msg:>8} [{bar:40}] {pos}/{len} tasks {elapsed}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    bar.set_message("map");
    let cpu_before = (cpu::process_cpu(), engine.metrics().offload_cpu);
    let started = Instant::now();
    let map_time = run_maps(&engine, &input, args, &bar)?;
    let map_stats = engine.end_map_stage(1).map_err(|e| e.to_string())?;
    bar.set_message("reduce");
    let blocks = run_reduces(&engine, args, &bar)?;
    let total = started.elapsed();
    let cpu_after = (cpu::process_cpu(), engine.metrics().offload_cpu);
    bar.finish_and_clear();
    let checks = (0..args.reduces)
        .zip(blocks)
        .map(|(r, b)| check_partition(&engine, &input, r, b))
        .collect::<Result<Vec<_>, _>>()?;
    check_all(&checks, &input.reference)?;
    let store: Vec<_> = (0..args.reduces)
        .map(|r| engine.partition_store_stats(1, r).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut reduce_spills = (0, 0);
    for r in 0..args.reduces {
        let (runs, bytes) = engine.partition_operator_spills(1, r).map_err(|e| e.to_string())?;
        reduce_spills = (reduce_spills.0 + runs, reduce_spills.1 + bytes);
    }
    // CPU over the timed part: the offload workers', and the rest of the
    // process's (host threads: map and reduce tasks, the controller).
    let delta = |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?));
    let offload_cpu = delta(cpu_before.1, cpu_after.1);
    let host_cpu =
        delta(cpu_before.0, cpu_after.0).zip(offload_cpu).map(|(all, off)| all.saturating_sub(off));
    let times = report::Timings { map_stage: map_time, total, baseline, offload_cpu, host_cpu };
    Ok(report::Summary::new(args, &input, &engine, (map_stats, &store, reduce_spills), times))
}

/// Map tasks on host threads, each taking the next map id.
fn run_maps(
    engine: &Engine,
    input: &Input,
    args: &RunArgs,
    bar: &ProgressBar,
) -> Result<Duration, String> {
    let next = AtomicU32::new(0);
    let error = Mutex::new(None);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..args.map_threads.max(1) {
            s.spawn(|| loop {
                let m = next.fetch_add(1, Ordering::Relaxed);
                if m >= args.maps {
                    return;
                }
                if let Err(e) = map_task(engine, input, m, args.buffer_kib << 10) {
                    error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    return;
                }
                bar.inc(1);
            });
        }
    });
    match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(t.elapsed()),
    }
}

fn map_task(engine: &Engine, input: &Input, m: u32, buf_bytes: usize) -> Result<(), String> {
    let err = |e: sluice_engine::EngineError| e.to_string();
    let mut task = engine.map_task(1, m, 0).map_err(err)?;
    let mut buf = task.buf_acquire(buf_bytes).map_err(err)?;
    for batch in &input.maps[m as usize] {
        for r in batch.iter() {
            if buf.push(r.key, r.value).is_err() {
                task.buf_produce(buf).map_err(err)?;
                buf = task.buf_acquire(buf_bytes).map_err(err)?;
                buf.push(r.key, r.value).map_err(err)?;
            }
        }
    }
    task.buf_produce(buf).map_err(err)?;
    task.commit().map_err(err)?;
    Ok(())
}

/// One reduce task's blocks, or why it could not read them.
type PartitionRead = Result<Vec<ReduceBlock>, String>;

/// Reduce tasks on host threads: every partition read in full. The
/// blocks are kept and checked after the clock stops, so the check's cost
/// (hashing every record) is not counted as shuffle time.
fn run_reduces(
    engine: &Engine,
    args: &RunArgs,
    bar: &ProgressBar,
) -> Result<Vec<Vec<ReduceBlock>>, String> {
    let next = AtomicU32::new(0);
    let results: Mutex<Vec<(u32, PartitionRead)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.map_threads.max(1) {
            s.spawn(|| loop {
                let r = next.fetch_add(1, Ordering::Relaxed);
                if r >= args.reduces {
                    return;
                }
                let mut blocks = Vec::new();
                let read = loop {
                    match engine.buf_consume(1, r) {
                        Ok(Some(b)) => blocks.push(b),
                        Ok(None) => break Ok(blocks),
                        Err(e) => break Err(e.to_string()),
                    }
                };
                results.lock().unwrap_or_else(|p| p.into_inner()).push((r, read));
                bar.inc(1);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(r, _)| *r);
    results.into_iter().map(|(_, c)| c).collect()
}

/// Checks partition `r`'s blocks and hands them back to the engine.
fn check_partition(
    engine: &Engine,
    input: &Input,
    r: u32,
    blocks: Vec<ReduceBlock>,
) -> Result<PartitionCheck, String> {
    let mut check = PartitionCheck::default();
    for block in blocks {
        for rec in block.view().iter() {
            let p = input.partitioner.partition(rec.key);
            if p != r {
                return Err(format!("a record of partition {p} in partition {r}"));
            }
            check.record(rec.key, rec.value, &input.reference)?;
        }
        engine.buf_release(block);
    }
    Ok(check)
}

/// The same-run baseline: for sorting workloads one in-memory radix sort
/// of every record (one thread); otherwise a copy of the input.
fn baseline(input: &Input) -> report::Baseline {
    let batches: Vec<_> = input.maps.iter().flatten().collect();
    if matches!(input.op, sluice_core::reorg::StageSpec::Sort) {
        let memory = MemoryPool::unbounded();
        let mut sort = SortRuns::new(input.layout, usize::MAX, &memory);
        let mut out = Emitter::new(input.layout);
        let t = Instant::now();
        let ok = batches.iter().all(|b| sort.push(&b.view(), &mut out).is_ok())
            && sort.finish(&mut out).is_ok();
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(out.records());
        report::Baseline { what: "in-memory radix sort, 1 thread", secs: ok.then_some(secs) }
    } else {
        let mut dst = vec![0u8; input.bytes as usize];
        let t = Instant::now();
        let mut at = 0;
        for b in &batches {
            let p = b.payload();
            dst[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        std::hint::black_box(&dst);
        report::Baseline { what: "memory copy of the input", secs: Some(t.elapsed().as_secs_f64()) }
    }
}
