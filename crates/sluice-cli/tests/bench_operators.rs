//! Runs the real `sluice bench operators` on a small input and checks its
//! report: every operator at every worker count, the SmartShuffle ratios,
//! the sweep and its plot.

use std::process::Command;

#[test]
fn bench_operators_writes_json_and_svg() {
    let dir = std::env::temp_dir().join(format!("sluice-bench-operators-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (json, svg) = (dir.join("o.json"), dir.join("o.svg"));
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
    assert_eq!(rows.len(), 2 * 2 * 4, "key sizes x workers x operators");
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
        if row["op"] == "aggregate" {
            // 4 MiB of 12- or 36-byte records over 2,000 keys in 256 KiB of
            // state: the map side must have combined something.
            assert!(f("aggregation_rate") > 0.0, "{row}");
        }
    }
    let sweep = report["sweep"].as_array().expect("sweep");
    assert_eq!(sweep.len(), 6 * 3);
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("aggregate/state") && svg.contains("threshold")
    );
    std::fs::remove_dir_all(&dir).ok();
}
