//! The targets of the partition benchmark, computed from its rows.
//!
//! Each row is one (record size, partitions, threads, strategy) point with
//! its median rate and the memory copy measured in the same rounds. For
//! every record size the summary prints:
//! - at 1024 partitions on one thread: the best strategy's rate over the
//!   memory copy of the same rounds (target 0.40 at 16 B);
//! - at 32 and 1024 partitions: the best 2-thread rate over the best
//!   1-thread rate (target 1.8), beside the memory copy's own 2-thread over
//!   1-thread bandwidth in the same rounds (the partition moves the same
//!   bytes, so where one thread already runs near the copy's bandwidth the
//!   copy's scaling bounds the partition's);
//! - at 1024 partitions: the best rate over the naive partitioner's (target
//!   3), per thread count;
//! - over all points: how often the strategy `auto` picks is within 10 % of
//!   the best column of the same rounds, and the worst such ratio.
//!
//! `naive` and the separate `auto` run are baselines, not candidates for
//! "best".

use serde_json::Value;

/// Target: best strategy over memory copy, 16 B, P = 1024, 1 thread.
const MEMCPY_SHARE_TARGET: f64 = 0.40;
/// Target: 2 threads over 1 thread at P = 32 and 1024.
const SCALING_TARGET: f64 = 1.8;
/// Target: best over naive at P = 1024.
const NAIVE_TARGET: f64 = 3.0;
/// `auto`'s pick counts as good within this share of the best.
const AUTO_SLACK: f64 = 0.90;

fn num(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

fn int(row: &Value, key: &str) -> u64 {
    row[key].as_u64().unwrap_or(0)
}

fn name(row: &Value) -> &str {
    row["strategy"].as_str().unwrap_or("")
}

/// The rows of one point (every strategy and the baselines).
fn point(rows: &[Value], size: u64, p: u64, threads: u64) -> Vec<&Value> {
    rows.iter()
        .filter(|r| {
            int(r, "record_bytes") == size
                && int(r, "partitions") == p
                && int(r, "threads") == threads
        })
        .collect()
}

/// The best candidate row of a point (not `naive`, not `auto`).
fn best<'a>(rows: &[&'a Value]) -> Option<&'a Value> {
    rows.iter()
        .copied()
        .filter(|r| !matches!(name(r), "naive" | "auto"))
        .max_by(|a, b| num(a, "mrecords_per_s").total_cmp(&num(b, "mrecords_per_s")))
}

fn verdict(value: f64, target: f64) -> &'static str {
    if value >= target {
        "met"
    } else {
        "NOT met"
    }
}

/// Prints the summary of the targets for the rows of one run.
pub(crate) fn print(rows: &[Value]) {
    let mut sizes: Vec<u64> = rows.iter().map(|r| int(r, "record_bytes")).collect();
    sizes.sort_unstable();
    sizes.dedup();
    println!("targets (best = fastest strategy of the point, naive and auto excluded):");
    for &size in &sizes {
        if let Some(b) = best(&point(rows, size, 1024, 1)) {
            let share = num(b, "vs_memcpy");
            let tag = if size == 16 { verdict(share, MEMCPY_SHARE_TARGET) } else { "-" };
            println!(
                "  {size:>3} B  P=1024 1 thr: {} {:.1} M/s = {share:.2} of memcpy ({:.2} GB/s) [{tag}]",
                name(b),
                num(b, "mrecords_per_s"),
                num(b, "memcpy_gbps"),
            );
        }
        for p in [32, 1024] {
            let one = best(&point(rows, size, p, 1));
            let two = best(&point(rows, size, p, 2));
            if let (Some(one), Some(two)) = (one, two) {
                let x = num(two, "mrecords_per_s") / num(one, "mrecords_per_s");
                let copy = num(two, "memcpy_gbps") / num(one, "memcpy_gbps");
                println!(
                    "  {size:>3} B  P={p} 2 thr / 1 thr: {x:.2}x ({} {:.1} vs {} {:.1} M/s) [{}]; \
                     memcpy itself {copy:.2}x, so 2 threads at {:.2} of their memcpy",
                    name(two),
                    num(two, "mrecords_per_s"),
                    name(one),
                    num(one, "mrecords_per_s"),
                    verdict(x, SCALING_TARGET),
                    num(two, "vs_memcpy"),
                );
            }
        }
        for threads in [1, 2] {
            if let Some(b) = best(&point(rows, size, 1024, threads)) {
                let x = num(b, "vs_naive");
                if x.is_finite() {
                    println!(
                        "  {size:>3} B  P=1024 {threads} thr vs naive: {x:.2}x [{}]",
                        verdict(x, NAIVE_TARGET)
                    );
                }
            }
        }
    }
    let mut points: Vec<(u64, u64, u64)> = rows
        .iter()
        .map(|r| (int(r, "record_bytes"), int(r, "partitions"), int(r, "threads")))
        .collect();
    points.sort_unstable();
    points.dedup();
    let (mut good, mut total, mut worst) = (0usize, 0usize, f64::INFINITY);
    for &(size, p, threads) in &points {
        let rs = point(rows, size, p, threads);
        let (Some(b), Some(pick)) = (best(&rs), rs.first().and_then(|r| r["auto_choice"].as_str()))
        else {
            continue;
        };
        let Some(picked) = rs.iter().find(|r| name(r) == pick) else { continue };
        let ratio = num(picked, "mrecords_per_s") / num(b, "mrecords_per_s");
        total += 1;
        if ratio >= AUTO_SLACK {
            good += 1;
        }
        worst = worst.min(ratio);
    }
    if total > 0 {
        println!(
            "  auto's pick within 10 % of the best at {good} of {total} points (worst {worst:.2}) [{}]",
            if good == total { "met" } else { "NOT met" }
        );
    }
}
