//! Spill files: round trip, large writes, removal, and typed errors for
//! corrupt, truncated and unwritable files.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use sluice_core::format::{FormatError, Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::sort::SortMerge;
use sluice_core::reorg::{Emitter, ReorgError, SpillConfig};
use sluice_core::spill::{SpillError, SpillWriter, SPILL_WRITE_BYTES};
use sluice_core::Codec;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-spill-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn files_in(d: &PathBuf) -> usize {
    std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0)
}

fn batch(seed: u32, n: u32) -> RecordBatch {
    let mut b = RecordBatch::new(Layout::fixed(8, 8).expect("layout"));
    for i in 0..n {
        b.push(&u64::from(seed * 1_000_000 + i).to_be_bytes(), &u64::from(i).to_le_bytes())
            .expect("push");
    }
    b
}

#[test]
fn runs_round_trip_with_large_writes_and_the_file_is_removed() {
    let d = dir("roundtrip");
    for codec in [Codec::None, Codec::Lz4, Codec::Zstd { level: 1 }] {
        let mut w = SpillWriter::create(&d, codec).expect("create");
        let path = w.path().to_path_buf();
        let runs: Vec<Vec<RecordBatch>> =
            (0..3).map(|r| (0..20).map(|i| batch(r * 100 + i, 5000)).collect()).collect();
        // Interleave the runs' blocks in the file.
        for i in 0..20 {
            for (r, run) in runs.iter().enumerate() {
                w.append(r, run[i].view()).expect("append");
            }
        }
        let f = w.finish().expect("finish");
        let stats = f.stats();
        assert_eq!(stats.blocks, 60);
        assert!(stats.writes > 0);
        if codec == Codec::None {
            // 60 blocks of 80 KB: each write call carries at least 1 MiB but the last.
            assert!(
                stats.bytes_written / stats.writes >= (SPILL_WRITE_BYTES as u64) / 2,
                "{stats:?}"
            );
        }
        for (r, run) in runs.iter().enumerate() {
            let mut reader = f.run(r).expect("run");
            let mut i = 0;
            while let Some(v) = reader.next_batch().expect("read") {
                assert_eq!(v.to_batch(), run[i], "{codec} run {r} block {i}");
                i += 1;
            }
            assert_eq!(i, run.len());
        }
        assert!(path.exists());
        drop(f);
        assert!(!path.exists(), "removed on drop");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_flipped_byte_names_the_file_and_block_offset() {
    let d = dir("corrupt");
    let mut w = SpillWriter::create(&d, Codec::Lz4).expect("create");
    for i in 0..6 {
        w.append(0, batch(i, 3000).view()).expect("append");
    }
    let f = w.finish().expect("finish");
    let offsets = f.block_offsets(0);
    let victim = offsets[3];
    let file = std::fs::OpenOptions::new().read(true).write(true).open(f.path()).expect("open");
    // Flip one byte inside the fourth block's payload.
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, victim + 50).expect("read");
    file.write_all_at(&[byte[0] ^ 0x10], victim + 50).expect("write");
    let mut reader = f.run(0).expect("run");
    for _ in 0..3 {
        reader.next_batch().expect("intact blocks read fine");
    }
    match reader.next_batch() {
        Err(SpillError::Corrupt { path, offset, source }) => {
            assert_eq!(path, f.path());
            assert_eq!(offset, victim);
            assert!(matches!(source, FormatError::PayloadChecksum { .. }), "{source:?}");
            let msg = SpillError::Corrupt { path, offset, source }.to_string();
            assert!(msg.contains(&format!("offset {victim}")), "{msg}");
        }
        other => panic!("expected a corrupt block error, got {other:?}"),
    }
    drop(reader);
    drop(f);
    assert_eq!(files_in(&d), 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_truncated_file_is_reported_not_misread() {
    let d = dir("truncated");
    let mut w = SpillWriter::create(&d, Codec::None).expect("create");
    for i in 0..4 {
        w.append(0, batch(i, 1000).view()).expect("append");
    }
    let f = w.finish().expect("finish");
    let last = *f.block_offsets(0).last().expect("blocks");
    let file = std::fs::OpenOptions::new().write(true).open(f.path()).expect("open");
    file.set_len(last + 100).expect("truncate");
    let mut reader = f.run(0).expect("run");
    for _ in 0..3 {
        reader.next_batch().expect("intact");
    }
    match reader.next_batch() {
        Err(SpillError::Corrupt { offset, source, .. }) => {
            assert_eq!(offset, last);
            assert!(source.is_truncated(), "{source:?}");
        }
        other => panic!("expected truncation, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_unwritable_spill_directory_is_a_typed_error() {
    let missing = std::env::temp_dir().join("sluice-no-such-dir/deeper");
    match SpillWriter::create(&missing, Codec::None) {
        Err(SpillError::Io { op: "create", path, .. }) => assert!(path.starts_with(&missing)),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // Through an operator: the merge that must spill reports it.
    let pool = MemoryPool::new(0);
    let mut m = SortMerge::new(
        Layout::fixed(8, 8).expect("l"),
        &pool,
        SpillConfig { dir: missing, codec: Codec::None, ..SpillConfig::default() },
    );
    match m.add_run(vec![batch(1, 10)]) {
        Err(ReorgError::Spill(SpillError::Io { .. })) => {}
        other => panic!("expected a spill error, got {other:?}"),
    }
}

#[test]
fn a_dropped_operator_removes_its_spill_files() {
    let d = dir("dropped");
    let pool = MemoryPool::new(0);
    let mut m = SortMerge::new(
        Layout::fixed(8, 8).expect("l"),
        &pool,
        SpillConfig { dir: d.clone(), codec: Codec::Lz4, ..SpillConfig::default() },
    );
    for i in 0..3 {
        m.add_run(vec![batch(i, 1000)]).expect("spilled run");
    }
    assert_eq!(files_in(&d), 1, "runs share one file");
    assert_eq!(m.stats().spilled_runs, 3);
    drop(m);
    assert_eq!(files_in(&d), 0, "removed when the operator is dropped, unfinished");
    // And after a finished merge.
    let mut m = SortMerge::new(
        Layout::fixed(8, 8).expect("l"),
        &pool,
        SpillConfig { dir: d.clone(), codec: Codec::Lz4, ..SpillConfig::default() },
    );
    m.add_run(vec![batch(1, 1000)]).expect("run");
    let mut out = Emitter::new(Layout::fixed(8, 8).expect("l"));
    m.finish(&mut out).expect("merge");
    assert_eq!(out.records(), 1000);
    drop(m);
    assert_eq!(files_in(&d), 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn spill_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let w = SpillWriter::create(dir.path(), Codec::Lz4).expect("create");
    let mode = std::fs::metadata(w.path()).expect("metadata").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "spill file mode {mode:o}");
}
