//! Constants the Java side and the native side share, checked against the
//! Java sources so that a change on one side alone fails here.

use std::path::PathBuf;

use sluice_jni::checksum::{CHECKSUM_ADLER32, CHECKSUM_CRC32, CHECKSUM_CRC32C, CHECKSUM_NONE};

fn java_source(class: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../spark/src/main/java/dev/sluice/spark")
        .join(format!("{class}.java"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `NAME(code)` constants of a Java enum with explicit codes.
fn enum_codes(source: &str) -> Vec<(String, i32)> {
    source
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let (name, rest) = line.split_once('(')?;
            let code = rest.strip_suffix("),").or_else(|| rest.strip_suffix(");"))?;
            let name_ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            Some((name.to_owned(), code.parse().ok()?)).filter(|_| name_ok)
        })
        .collect()
}

#[test]
fn checksum_algorithm_codes_agree_with_java() {
    let codes = enum_codes(&java_source("ChecksumAlgorithm"));
    let want = vec![
        ("NONE".to_owned(), CHECKSUM_NONE),
        ("ADLER32".to_owned(), CHECKSUM_ADLER32),
        ("CRC32".to_owned(), CHECKSUM_CRC32),
        ("CRC32C".to_owned(), CHECKSUM_CRC32C),
    ];
    assert_eq!(codes, want);
}

#[test]
fn the_trailer_flag_agrees_with_java() {
    let source = java_source("SluiceBlockInputStream");
    let line = source
        .lines()
        .find(|l| l.contains("static final long FRAME_TRAILER_FLAG"))
        .expect("FRAME_TRAILER_FLAG declared");
    let shift: u32 = line
        .split("1L <<")
        .nth(1)
        .and_then(|r| r.trim().trim_end_matches(';').parse().ok())
        .expect("1L << N");
    assert_eq!(1i64 << shift, sluice_jni::segment::FRAME_TRAILER_FLAG);
    // The bit is clear in every block's answer: the frame length below 2^32,
    // the uncompressed length (shifted up 32) at most the block limit.
    let max_answer = (sluice_core::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX as i64) << 32
        | i64::from(u32::MAX);
    assert_eq!(max_answer & sluice_jni::segment::FRAME_TRAILER_FLAG, 0);
}

#[test]
fn the_record_limit_agrees_with_java() {
    let source = java_source("NativeMapOutput");
    let line = source
        .lines()
        .find(|l| l.contains("static final long RECORD_BYTES_MAX"))
        .expect("RECORD_BYTES_MAX declared");
    // "= NL << S;"
    let value = line.split('=').nth(1).expect("= value").trim().trim_end_matches(';');
    let (n, shift) = value.split_once("L <<").expect("NL << S");
    let bytes = n.trim().parse::<usize>().expect("N") << shift.trim().parse::<u32>().expect("S");
    assert_eq!(bytes, sluice_core::format::limits::RECORD_BYTES_MAX);
}
