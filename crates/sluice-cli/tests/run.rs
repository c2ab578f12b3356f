//! Runs the real `sluice run` on every workload at small sizes: the command
//! checks its own output (order, checksums, reference counts) and fails if
//! anything is off; these tests also read its JSON summary to see that
//! spilling and migration really happened when forced.

use std::process::Command;

fn run(name: &str, workload: &str, extra: &[&str]) -> serde_json::Value {
    // Removed with its contents when the test ends, passed or not.
    let tmp = tempfile::Builder::new().prefix(&format!("sluice-run-{name}-")).tempdir();
    let tmp = tmp.expect("temp dir");
    let dir = tmp.path();
    let json = dir.join("summary.json");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", workload, "--mib", "2", "--maps", "6", "--reduces", "3"])
        .args(["--map-threads", "2", "--buffer-kib", "64"])
        .args(extra)
        .arg("--spill-dir")
        .arg(dir)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("output validated        yes"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("valid json");
    assert_eq!(summary["validated"], true);
    assert!(summary["input_records"].as_u64().unwrap_or(0) > 0, "{summary}");
    assert!(summary["mb_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{summary}");
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|n| n != "summary.json")
        .collect();
    assert!(
        leftovers.is_empty(),
        "{workload}: spill files outlived the run: {leftovers:?}\n{summary}"
    );
    summary
}

#[test]
fn every_workload_runs_and_validates() {
    for w in ["terasort", "sort", "wordcount", "repartition", "aggregate"] {
        let s = run(w, w, &[]);
        assert_eq!(s["workload"], w);
        assert!(s["baseline_mb_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
    }
}

#[test]
fn every_map_side_spilling_strategy_validates() {
    for spill in ["state", "input", "evict"] {
        for w in ["aggregate", "wordcount"] {
            let s = run(&format!("{w}-{spill}"), w, &["--spill", spill, "--no-baseline"]);
            assert_eq!(s["spill"], spill, "{s}");
            if (w, spill) == ("aggregate", "evict") {
                // Mostly distinct 8-byte keys: the set-associative tables
                // evict on bucket conflicts (spilling state never fills
                // them here).
                assert!(s["map_side_spills"].as_u64().unwrap_or(0) > 0, "{s}");
            }
        }
    }
}

#[test]
fn a_small_memory_budget_spills_to_disk_and_stays_exact() {
    // 1 MiB in all: results beyond half of it go to disk.
    for w in ["aggregate", "terasort"] {
        let s = run(&format!("spill-{w}"), w, &["--memory-mib", "1"]);
        assert!(s["result_bytes_on_disk"].as_u64().unwrap_or(0) > 0, "{s}");
        assert!(s["disk_writes"].as_u64().unwrap_or(0) > 0, "{s}");
        assert!(s["disk_blocks_read"].as_u64().unwrap_or(0) > 0, "{s}");
    }
    // The final aggregate under that budget spills sorted runs too.
    let s = run("spill-runs", "aggregate", &["--memory-mib", "1", "--no-baseline"]);
    assert!(s["reduce_side_spilled_runs"].as_u64().unwrap_or(0) > 0, "{s}");
    assert!(s["reduce_side_spill_bytes"].as_u64().unwrap_or(0) > 0, "{s}");
}

#[test]
fn a_slow_device_migrates_work_and_stays_exact() {
    // With 1 MiB of memory the results go to disk, and the reduce tasks
    // finish their partitions while the slow worker still has the finish
    // jobs queued: the engine must still remove its files when dropped.
    let s = run(
        "slow",
        "aggregate",
        &["--device-speed", "0.02", "--offload-threads", "1", "--memory-mib", "1", "--no-baseline"],
    );
    assert!(s["migrated_share"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
    assert!(s["migration_decisions"].as_u64().unwrap_or(0) > 0, "{s}");
    let off = run(
        "slow-off",
        "aggregate",
        &[
            "--device-speed",
            "0.05",
            "--offload-threads",
            "1",
            "--no-liquid-offload",
            "--no-baseline",
        ],
    );
    assert_eq!(off["migrated_share"].as_f64(), Some(0.0), "{off}");
}
