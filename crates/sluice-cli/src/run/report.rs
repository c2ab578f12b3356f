//! The summary `sluice run` prints (and writes as JSON).

use std::time::Duration;

use serde::Serialize;
use sluice_engine::{Engine, MapSideStats, StoreStats};

use super::workload::Input;
use super::RunArgs;

/// A baseline measured in the same run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Baseline {
    pub(crate) what: &'static str,
    pub(crate) secs: Option<f64>,
}

/// How long the parts of a run took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    pub(crate) map_stage: Duration,
    pub(crate) total: Duration,
    pub(crate) baseline: Option<Baseline>,
    /// CPU time of the offload workers over the timed part.
    pub(crate) offload_cpu: Option<Duration>,
    /// CPU time of the rest of the process over the timed part.
    pub(crate) host_cpu: Option<Duration>,
}

/// What a run did.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    pub(crate) workload: String,
    /// The map side's spilling strategy (`--spill`).
    pub(crate) spill: String,
    pub(crate) input_bytes: u64,
    pub(crate) input_records: u64,
    pub(crate) maps: u32,
    pub(crate) reduces: u32,
    pub(crate) map_threads: usize,
    pub(crate) offload_threads: usize,
    pub(crate) device_speed: f64,
    pub(crate) liquid_offload: bool,
    pub(crate) seconds: f64,
    pub(crate) map_stage_seconds: f64,
    pub(crate) mb_per_s: f64,
    pub(crate) baseline: Option<String>,
    pub(crate) baseline_mb_per_s: Option<f64>,
    pub(crate) ratio_to_baseline: Option<f64>,
    pub(crate) shuffled_bytes: u64,
    pub(crate) shuffled_records: u64,
    pub(crate) map_side_spills: u64,
    /// Sorted runs the reduce side's final operators spilled to disk.
    pub(crate) reduce_side_spilled_runs: u64,
    pub(crate) reduce_side_spill_bytes: u64,
    pub(crate) aggregation_rate: Option<f64>,
    pub(crate) result_bytes: u64,
    pub(crate) result_bytes_on_disk: u64,
    pub(crate) disk_bytes_written: u64,
    pub(crate) disk_writes: u64,
    pub(crate) disk_blocks_read: u64,
    pub(crate) offload_cpu_seconds: Option<f64>,
    pub(crate) host_cpu_seconds: Option<f64>,
    pub(crate) offload_busy_seconds: f64,
    pub(crate) reduce_busy_seconds: f64,
    pub(crate) host_migrated_busy_seconds: f64,
    pub(crate) migrated_share: f64,
    /// Share of produced bytes idle host threads took from the offload
    /// workers' queue (part of `migrated_share`).
    pub(crate) stolen_share: f64,
    pub(crate) migration_decisions: usize,
    /// (ms since start, occupancy bytes, growth bytes, host share) per decision.
    pub(crate) migration_trace: Vec<(u64, usize, i64, f64)>,
    pub(crate) buffer_peak_bytes: usize,
    pub(crate) memory_peak_bytes: usize,
    pub(crate) memory_budget_bytes: usize,
    /// The process's peak resident set (Linux `VmHWM`), input included.
    pub(crate) peak_rss_bytes: Option<u64>,
    pub(crate) validated: bool,
}

/// The process's peak resident set size, from `/proc/self/status`.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

impl Summary {
    pub(crate) fn new(
        args: &RunArgs,
        input: &Input,
        engine: &Engine,
        totals: (MapSideStats, &[StoreStats], (u64, u64)),
        times: Timings,
    ) -> Summary {
        let (map, store, reduce_spills) = totals;
        let Timings { map_stage: map_time, total, baseline, offload_cpu, host_cpu } = times;
        let m = engine.metrics();
        let secs = total.as_secs_f64();
        let mbps = |s: f64| input.bytes as f64 / 1e6 / s;
        let base_secs = baseline.and_then(|b| b.secs);
        let sum = |f: fn(&StoreStats) -> u64| store.iter().map(f).sum::<u64>();
        // SmartShuffle's aggregation rate needs the ideal output (one
        // partial per distinct key); the reference holds the keys.
        let aggregation_rate = match &input.reference {
            super::workload::Reference::Values(keys) if map.input_bytes > 0 => {
                let ideal = keys.len() as f64
                    * (map.output_bytes as f64 / map.output_records.max(1) as f64);
                let saved = map.input_bytes as f64 - map.output_bytes as f64;
                let best = map.input_bytes as f64 - ideal;
                (best > 0.0).then(|| saved / best)
            }
            _ => None,
        };
        Summary {
            workload: format!("{:?}", args.workload).to_lowercase(),
            spill: format!("{:?}", args.spill).to_lowercase(),
            input_bytes: input.bytes,
            input_records: map.input_records,
            maps: args.maps,
            reduces: args.reduces,
            map_threads: args.map_threads,
            offload_threads: args.offload_threads,
            device_speed: args.device_speed,
            liquid_offload: !args.no_liquid_offload,
            seconds: secs,
            map_stage_seconds: map_time.as_secs_f64(),
            mb_per_s: mbps(secs),
            baseline: baseline.map(|b| b.what.to_string()),
            baseline_mb_per_s: base_secs.map(mbps),
            ratio_to_baseline: base_secs.map(|b| b / secs),
            shuffled_bytes: map.output_bytes,
            shuffled_records: map.output_records,
            map_side_spills: map.spills,
            reduce_side_spilled_runs: reduce_spills.0,
            reduce_side_spill_bytes: reduce_spills.1,
            aggregation_rate,
            result_bytes: sum(|s| s.bytes),
            result_bytes_on_disk: sum(|s| s.disk_payload_bytes),
            disk_bytes_written: sum(|s| s.disk_bytes_written),
            disk_writes: sum(|s| s.disk_writes),
            disk_blocks_read: sum(|s| s.disk_blocks_read),
            offload_cpu_seconds: offload_cpu.map(|d| d.as_secs_f64()),
            host_cpu_seconds: host_cpu.map(|d| d.as_secs_f64()),
            offload_busy_seconds: m.offload_busy.as_secs_f64(),
            reduce_busy_seconds: m.reduce_busy.as_secs_f64(),
            host_migrated_busy_seconds: m.host_busy.as_secs_f64(),
            migrated_share: m.migrated_bytes as f64 / m.produced_bytes.max(1) as f64,
            stolen_share: m.stolen_bytes as f64 / m.produced_bytes.max(1) as f64,
            migration_decisions: m.decisions.len(),
            migration_trace: m
                .decisions
                .iter()
                .map(|d| (d.at_ms, d.occupancy, d.growth, d.host_share))
                .collect(),
            buffer_peak_bytes: m.buffer_peak,
            memory_peak_bytes: m.memory_peak + m.results_peak,
            memory_budget_bytes: args.memory_mib << 20,
            peak_rss_bytes: peak_rss(),
            validated: true,
        }
    }

    pub(crate) fn print(&self) {
        let mb = |b: u64| b as f64 / 1e6;
        println!(
            "sluice run {}: {:.1} MB, {} records, {} maps -> {} reduces, {} map threads, {} offload threads (speed {}), liquid offload {}",
            self.workload,
            mb(self.input_bytes),
            self.input_records,
            self.maps,
            self.reduces,
            self.map_threads,
            self.offload_threads,
            self.device_speed,
            if self.liquid_offload { "on" } else { "off" }
        );
        println!("  output validated        yes");
        println!(
            "  time                    {:.3} s (map stage {:.3} s)",
            self.seconds, self.map_stage_seconds
        );
        println!("  throughput              {:.1} MB/s", self.mb_per_s);
        if let (Some(what), Some(b), Some(r)) =
            (&self.baseline, self.baseline_mb_per_s, self.ratio_to_baseline)
        {
            println!("  baseline (same run)     {b:.1} MB/s ({what}); sluice/baseline = {r:.2}");
        }
        println!(
            "  shuffled                {:.1} MB, {} records, {} map-side spills",
            mb(self.shuffled_bytes),
            self.shuffled_records,
            self.map_side_spills
        );
        println!(
            "  reduce-side spills      {} runs, {:.1} MB written",
            self.reduce_side_spilled_runs,
            mb(self.reduce_side_spill_bytes)
        );
        if let Some(a) = self.aggregation_rate {
            println!("  aggregation rate        {a:.3}");
        }
        println!(
            "  results                 {:.1} MB, {:.1} MB on disk ({} writes, {:.1} MB written, {} blocks read back)",
            mb(self.result_bytes),
            mb(self.result_bytes_on_disk),
            self.disk_writes,
            mb(self.disk_bytes_written),
            self.disk_blocks_read
        );
        if let (Some(o), Some(h)) = (self.offload_cpu_seconds, self.host_cpu_seconds) {
            println!("  cpu                     offload threads {o:.2} s, host threads {h:.2} s");
        }
        println!(
            "  busy                    offload {:.3} s (map segments), reduce side {:.3} s, host (migrated) {:.3} s",
            self.offload_busy_seconds, self.reduce_busy_seconds, self.host_migrated_busy_seconds
        );
        println!(
            "  migrated                {:.1} % of produced bytes ({:.1} % taken by idle host threads), {} decisions",
            self.migrated_share * 100.0,
            self.stolen_share * 100.0,
            self.migration_decisions
        );
        println!(
            "  peak memory             {:.1} MB accounted of {:.1} MB budget; buffers {:.1} MB",
            mb(self.memory_peak_bytes as u64),
            mb(self.memory_budget_bytes as u64),
            mb(self.buffer_peak_bytes as u64)
        );
        if let Some(rss) = self.peak_rss_bytes {
            println!(
                "  process peak RSS        {:.1} MB (the generated input, {:.1} MB, included)",
                mb(rss),
                mb(self.input_bytes)
            );
        }
    }
}
