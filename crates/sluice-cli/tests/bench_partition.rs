//! Runs the real `sluice bench partition` on a small grid and checks its
//! reports: every strategy at every point, consistent ratios, the targets
//! summary, and the plot.

use std::process::Command;

#[test]
fn bench_partition_writes_json_csv_and_svg() {
    let dir = std::env::temp_dir().join(format!("sluice-bench-partition-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (json, csv, svg) = (dir.join("p.json"), dir.join("p.csv"), dir.join("p.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "partition", "--mib", "2", "--reps", "1", "--sizes", "16,100"])
        .args(["--partitions", "8,32", "--threads", "1,2", "--page-kib", "16"])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("valid json");
    let rows = report["rows"].as_array().expect("rows");
    // 2 sizes x 2 partition counts x (10 strategies at 1 thread + 9 at 2, naive once).
    assert_eq!(rows.len(), 2 * 2 * (10 + 9));
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {row}"));
        assert!(f("gbps") > 0.0 && f("naive_gbps") > 0.0 && f("memcpy_gbps") > 0.0, "{row}");
        assert!((f("vs_naive") - f("gbps") / f("naive_gbps")).abs() < 1e-9, "{row}");
        assert!((f("vs_memcpy") - f("gbps") / f("memcpy_gbps")).abs() < 1e-9, "{row}");
    }
    // The run ends with the targets computed from these rows.
    for size in ["16 B", "100 B"] {
        assert!(stdout.contains(&format!("{size}  P=32 2 thr / 1 thr: ")), "{stdout}");
    }
    // Beside each scaling figure, the memory copy's own scaling.
    assert!(stdout.contains("memcpy itself "), "{stdout}");
    assert!(stdout.contains("auto's pick within 10 % of the best at "), "{stdout}");
    let csv = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(csv.lines().count(), rows.len() + 1);
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains("smb") && svg.contains("partitions"));
    std::fs::remove_dir_all(&dir).ok();
}
