//! Runs the real `sluice bench format` binary on a small input and checks its
//! JSON report: every requested row is present, figures are positive and the
//! ratios agree with the figures they are computed from.

use std::process::Command;

#[test]
fn bench_format_writes_a_consistent_report() {
    let dir = std::env::temp_dir().join(format!("sluice-bench-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let json = dir.join("format.json");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "format", "--mib", "2", "--block-kib", "256", "--reps", "1"])
        .args(["--codecs", "none,lz4,zstd-1", "--json"])
        .arg(&json)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sluice failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("memcpy GB/s"), "no baseline column: {stdout}");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json written")).expect("valid json");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 9, "3 data sets x 3 codecs");
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {row}"));
        for k in ["encode_gbps", "decode_gbps", "memcpy_gbps", "compression_ratio"] {
            assert!(f(k) > 0.0, "{k} not positive in {row}");
        }
        assert!((f("encode_vs_memcpy") - f("encode_gbps") / f("memcpy_gbps")).abs() < 1e-9);
        assert!(f("input_bytes") >= 2.0 * 1024.0 * 1024.0);
        if row["codec"] == "none" {
            // Uncompressed blocks add exactly one 36-byte header per block.
            let blocks = (f("stored_bytes") - f("input_bytes")) / 36.0;
            assert!(blocks >= 8.0 && blocks.fract() == 0.0, "{row}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_format_rejects_an_unknown_codec() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "format", "--mib", "1", "--codecs", "gzip"])
        .output()
        .expect("run sluice");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown codec"));
}
