//! Runs the real `sluice bench operators` on a small input and checks its
//! report: every operator at every worker count, the SmartShuffle ratios,
//! the sweep and its plot.

use std::process::Command;

#[test]
fn bench_operators_writes_json_and_svg() {
    let dir =
        tempfile::Builder::new().prefix("sluice-bench-operators-").tempdir().expect("temp dir");
    let (json, svg) = (dir.path().join("o.json"), dir.path().join("o.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "operators", "--mib", "4", "--reps", "1", "--key-bytes", "8,32"])
        .args(["--workers", "1,2", "--distinct", "2000", "--threshold-kib", "256"])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("valid json");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2 * 2 * 5, "key sizes x workers x operators");
    let ops: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r["op"].as_str()).collect();
    assert_eq!(
        ops.into_iter().collect::<Vec<_>>(),
        ["aggregate", "aggregate/evict", "distinct", "partition", "sort"]
    );
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {row}"));
        assert!(f("gbit_per_s") > 0.0 && f("memcpy_gbps") > 0.0, "{row}");
        assert_eq!(
            f("input_bytes"),
            (4u64 << 20) as f64 - ((4u64 << 20) % (f("key_bytes") as u64 + 4)) as f64,
            "{row}"
        );
        if let Some(theirs) = row["smartshuffle_gbit_per_s_per_worker"].as_f64() {
            let per = f("gbit_per_s_per_worker");
            assert!((f("ratio_per_worker") - per / theirs).abs() < 1e-9, "{row}");
        }
        if row["op"] == "aggregate" || row["op"] == "aggregate/evict" {
            // 4 MiB of 12- or 36-byte records over 2,000 keys in 256 KiB of
            // state: the map side must have combined something, spilling
            // state or evicting.
            assert!(f("aggregation_rate") > 0.0, "{row}");
        }
    }
    let sweep = report["sweep"].as_array().expect("sweep");
    assert_eq!(sweep.len(), 6 * 4, "thresholds x (state, input, evict, sort)");
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        svg.starts_with("<svg")
            && svg.contains("aggregate/state")
            && svg.contains("aggregate/evict")
            && svg.contains("threshold")
    );
}
