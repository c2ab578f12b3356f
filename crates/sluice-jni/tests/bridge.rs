//! The bridge without a JVM: a real engine, map attempts fed buffers in the
//! layout the Java writer produces, output files in Spark's layout, and the
//! reduce side's block decoding, including corrupt and misplaced blocks.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::Codec;
use sluice_core::reorg::StageSpec;
use sluice_engine::output::checksum::Algorithm;
use sluice_jni::bridge::{open_engine, register_shuffle, HostMapTask};

mod common;
use common::{settings, walk_segment};
use sluice_engine::host_keys::check_buffer;
use sluice_engine::reduce::{decode_values, frame_info, BlockName};
use sluice_engine::EngineError;
use sluice_jni::error::BridgeError;

/// What the Java writer puts in its buffer for one record.
fn put(buf: &mut Vec<u8>, partition: u32, value: &[u8]) {
    buf.extend_from_slice(&4u32.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
    buf.extend_from_slice(&partition.to_le_bytes());
    buf.extend_from_slice(value);
}

/// Reads one partition's segment of a data file the way the Java reader
/// does: header, frame length, block, values; trailers checked.
fn read_segment(data: &[u8], partition: u32) -> Result<Vec<u8>, EngineError> {
    read_batch(data, partition as i32, partition as i32 + 1)
}

/// Runs one map attempt over `records` and returns each partition's bytes
/// in the output file.
fn run_map(
    dir: &Path,
    partitions: u32,
    records: &[(u32, Vec<u8>)],
    codec: Codec,
) -> (Vec<u8>, Vec<u64>) {
    run_map_spilling(dir, partitions, records, codec, None)
}

/// As `run_map`, spilling the output so far after every `spill_every`
/// buffers handed over (as the Java writer does when Spark's memory
/// manager refuses more).
fn run_map_spilling(
    dir: &Path,
    partitions: u32,
    records: &[(u32, Vec<u8>)],
    codec: Codec,
    spill_every: Option<usize>,
) -> (Vec<u8>, Vec<u64>) {
    open_engine(&settings()).expect("engine");
    let shuffle = register_shuffle(partitions, 1, StageSpec::None).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, partitions, false, false).expect("open");
    let mut buf = Vec::new();
    let mut count = 0;
    let mut buffers = 0;
    let mut spill_files = Vec::new();
    // Each spill's bytes and segment lengths, as read before the commit
    // removes the file (a service map task pushes them while it maps on).
    let mut spilled: Vec<(Vec<u8>, Vec<u64>)> = Vec::new();
    for (p, v) in records {
        put(&mut buf, *p, v);
        count += 1;
        if buf.len() > 16 << 10 {
            task.produce(&buf, count).expect("produce");
            buf.clear();
            count = 0;
            buffers += 1;
            if spill_every.is_some_and(|n| buffers % n == 0) {
                let path = dir.join(format!("spill_{buffers}"));
                let lengths = task.spill(&path, codec).expect("spill");
                let bytes = std::fs::read(&path).expect("read the spill");
                assert_eq!(lengths.len(), partitions as usize);
                assert_eq!(lengths.iter().sum::<u64>(), bytes.len() as u64);
                spilled.push((bytes, lengths));
                spill_files.push(path);
            }
        }
    }
    task.produce(&buf, count).expect("produce");
    assert_eq!(task.spills(), spill_files.len());
    let path = dir.join("shuffle_1_7_0.data");
    let written = task.commit_to_file(&path, codec, Some(Algorithm::Adler32)).expect("commit");
    for f in &spill_files {
        assert!(!f.exists(), "spill file {} left behind", f.display());
    }
    let data = std::fs::read(&path).expect("read back");
    // Spark's checksum of each partition is over that partition's segment
    // of the file exactly (Spark recomputes it from the file to diagnose).
    assert_eq!(written.checksums.len(), partitions as usize);
    let mut at = 0usize;
    for (len, sum) in written.lengths.iter().zip(&written.checksums) {
        let mut a = adler2::Adler32::new();
        a.write_slice(&data[at..at + *len as usize]);
        assert_eq!(u64::from(a.checksum()), *sum, "checksum of the segment at {at}");
        at += *len as usize;
    }
    // Each partition's segment starts with its segments of the spill files,
    // in spill order, byte for byte: what an early push sent of a
    // partition is a prefix of the data file's segment.
    let mut start = 0usize;
    for (p, len) in written.lengths.iter().enumerate() {
        let mut prefix = Vec::new();
        for (bytes, lengths) in &spilled {
            let from: u64 = lengths[..p].iter().sum();
            prefix.extend_from_slice(&bytes[from as usize..(from + lengths[p]) as usize]);
        }
        assert!(prefix.len() as u64 <= *len, "partition {p}: spills longer than its segment");
        assert_eq!(
            &data[start..start + prefix.len()],
            &prefix[..],
            "partition {p}'s spilled prefix"
        );
        start += *len as usize;
    }
    (data, written.lengths)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn every_record_lands_in_its_partition_in_order(
        partitions in 1u32..40,
        raw in proptest::collection::vec((any::<u32>(), proptest::collection::vec(any::<u8>(), 0..300)), 0..600),
        zstd in any::<bool>(),
        spill_every in proptest::option::of(1usize..4),
    ) {
        let dir = tempfile::tempdir().expect("tmp");
        // Each value carries its length, so a partition's values can be split again.
        let records: Vec<(u32, Vec<u8>)> = raw
            .into_iter()
            .map(|(p, v)| {
                let mut framed = (v.len() as u16).to_le_bytes().to_vec();
                framed.extend_from_slice(&v);
                (p % partitions, framed)
            })
            .collect();
        let codec = if zstd { Codec::Zstd { level: 1 } } else { Codec::Lz4 };
        let (data, lengths) = run_map_spilling(dir.path(), partitions, &records, codec, spill_every);
        prop_assert_eq!(lengths.len(), partitions as usize);
        prop_assert_eq!(lengths.iter().sum::<u64>(), data.len() as u64);
        let mut expected: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        for (p, v) in &records {
            expected.entry(*p).or_default().push(v[2..].to_vec());
        }
        let mut at = 0usize;
        for p in 0..partitions {
            let seg = &data[at..at + lengths[p as usize] as usize];
            at += seg.len();
            // Spark fetches only the segments its index says are non-empty.
            let got = if seg.is_empty() {
                Vec::new()
            } else {
                split(&read_segment(seg, p).expect("decode"))
            };
            // Segments of one attempt may finish in any order: compare as
            // multisets (Spark promises no order inside a map output).
            let mut want = expected.remove(&p).unwrap_or_default();
            want.sort();
            prop_assert!(got == want, "partition {} differs", p);
        }
    }
}

/// Splits the test's self-delimiting values (u16 length, bytes) and sorts them.
/// Uncompressed payload bytes of each block of a segment.
fn block_sizes(seg: &[u8], partition: u32) -> Vec<usize> {
    let mut sizes = Vec::new();
    walk_segment(seg, (1, 7, partition as i32, partition as i32 + 1), |frame, name| {
        let info = frame_info(frame, name)?;
        sizes.push(info.uncompressed_len);
        let mut values = vec![0u8; info.uncompressed_len];
        Ok(decode_values(frame, name, &mut values)?.1)
    })
    .expect("segment");
    sizes
}

#[test]
fn big_pages_are_blocks_of_their_own_and_small_ones_are_gathered() {
    // Two partitions (64 KiB pages): partition 0 gets 3 MiB, so full pages
    // that are encoded as they are; partition 1 gets 100-byte records only
    // every 500th time, so its pages stay small and are gathered.
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> = (0..31_000u32)
        .map(|i| {
            let p = u32::from(i % 500 == 0);
            let mut v = (98u16).to_le_bytes().to_vec();
            v.extend(std::iter::repeat_n((i % 251) as u8, 98));
            (p, v)
        })
        .collect();
    let (data, lengths) = run_map_spilling(dir.path(), 2, &records, Codec::Lz4, Some(40));
    let seg0 = &data[..lengths[0] as usize];
    let seg1 = &data[lengths[0] as usize..];
    let big = block_sizes(seg0, 0);
    assert!(big.len() >= 10, "3 MiB in {} blocks", big.len());
    assert!(
        big.iter().filter(|&&b| b >= sluice_engine::output::file::DIRECT_BLOCK_MIN_BYTES).count()
            >= 10,
        "{big:?}"
    );
    assert!(big.iter().all(|&b| b <= sluice_engine::output::file::BLOCK_TARGET_BYTES));
    let small = block_sizes(seg1, 1);
    assert!(
        small.iter().all(|&b| b < sluice_engine::output::file::DIRECT_BLOCK_MIN_BYTES),
        "{small:?}"
    );
    for (p, seg) in [(0u32, seg0), (1, seg1)] {
        let mut want: Vec<Vec<u8>> =
            records.iter().filter(|(q, _)| *q == p).map(|(_, v)| v[2..].to_vec()).collect();
        want.sort();
        let mut got = split(&read_segment(seg, p).expect("decode"));
        got.sort();
        assert!(got == want, "partition {p} differs");
    }
}

fn split(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some((len, rest)) = bytes.split_first_chunk::<2>() {
        let n = u16::from_le_bytes(*len) as usize;
        out.push(rest[..n].to_vec());
        bytes = &rest[n..];
    }
    out.sort();
    out
}

#[test]
fn a_flipped_byte_is_an_io_error_naming_block_and_offset() {
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> =
        (0..5000u32).map(|i| (i % 3, format!("value-{i}").into_bytes())).collect();
    let (mut data, lengths) = run_map(dir.path(), 3, &records, Codec::Lz4);
    let first = lengths[0] as usize;
    data[first / 2 + HEADER_BYTES / 2] ^= 0x40;
    let err = read_segment(&data[..first], 0).expect_err("corruption detected");
    let msg = err.to_string();
    assert_eq!(BridgeError::from(err).java_class(), "java/io/IOException");
    assert!(msg.contains("shuffle_1_7_0 at byte"), "{msg}");
}

#[test]
fn a_truncated_segment_is_detected() {
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> = (0..100u32).map(|i| (0, vec![i as u8; 50])).collect();
    let (data, _) = run_map(dir.path(), 1, &records, Codec::None);
    let name = BlockName::single(1, 7, 0, 0);
    let info = frame_info(&data[..HEADER_BYTES], &name).expect("header");
    let mut out = vec![0u8; info.uncompressed_len];
    let err = decode_values(&data[..info.frame_len - 1], &name, &mut out).expect_err("truncated");
    assert_eq!(BridgeError::from(err).java_class(), "java/io/IOException");
}

#[test]
fn a_block_read_for_the_wrong_partition_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> = (0..10u32).map(|i| (1, vec![i as u8; 8])).collect();
    let (data, lengths) = run_map(dir.path(), 2, &records, Codec::Lz4);
    assert_eq!(lengths[0], 0);
    let err = read_segment(&data, 0).expect_err("partition 1's block read as partition 0");
    assert!(matches!(err, EngineError::Misplaced { .. }), "{err}");
}

#[test]
fn buffers_with_bad_partition_ids_or_lengths_are_refused() {
    let mut buf = Vec::new();
    put(&mut buf, 5, b"abc");
    assert!(matches!(check_buffer(&buf, 1, 5, false, 64), Err(EngineError::Argument(_))));
    assert!(check_buffer(&buf, 1, 6, false, 64).is_ok());
    // A count that disagrees with the bytes.
    assert!(matches!(check_buffer(&buf, 2, 6, false, 64), Err(EngineError::Corrupt { .. })));
    // A length that runs past the buffer.
    let mut forged = buf.clone();
    forged[4..8].copy_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(check_buffer(&forged, 1, 6, false, 64), Err(EngineError::Corrupt { .. })));
    // A key that is not 4 bytes.
    let mut odd = Vec::new();
    odd.extend_from_slice(&2u32.to_le_bytes());
    odd.extend_from_slice(&0u32.to_le_bytes());
    odd.extend_from_slice(&[0, 0]);
    assert!(matches!(check_buffer(&odd, 1, 6, false, 64), Err(EngineError::Argument(_))));
}

/// Bytes said to hold no records are refused, not dropped unchecked; an
/// empty buffer of no records is nothing.
#[test]
fn a_buffer_of_bytes_and_no_records_is_refused() {
    open_engine(&settings()).expect("engine");
    let shuffle = register_shuffle(2, 1, StageSpec::None).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, 2, false, false).expect("open");
    let mut buf = Vec::new();
    put(&mut buf, 1, b"x");
    let err = task.produce(&buf, 0).expect_err("bytes of no records");
    assert!(matches!(err, BridgeError::Engine(EngineError::Argument(_))), "{err}");
    task.produce(&[], 0).expect("nothing");
}

/// A map task opened for more partitions than its shuffle has would let
/// partition ids past the shuffle's in (the engine clamps them into its
/// last partition); it is refused at the open.
#[test]
fn a_map_task_for_another_partition_count_is_refused() {
    open_engine(&settings()).expect("engine");
    let shuffle = register_shuffle(2, 1, StageSpec::None).expect("register");
    for wrong in [1, 3, u32::MAX] {
        let err = HostMapTask::open(shuffle, 0, 0, wrong, false, true).expect_err("wrong count");
        assert!(matches!(err, BridgeError::Engine(EngineError::Argument(_))), "{err}");
        assert!(err.to_string().contains("the shuffle has 2"), "{err}");
    }
    HostMapTask::open(shuffle, 0, 0, 2, false, true).expect("open");
}

#[test]
fn a_write_into_a_missing_directory_is_a_typed_io_error() {
    open_engine(&settings()).expect("engine");
    let shuffle = register_shuffle(2, 1, StageSpec::None).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, 2, false, false).expect("open");
    let mut buf = Vec::new();
    put(&mut buf, 1, b"x");
    task.produce(&buf, 1).expect("produce");
    let err = task
        .commit_to_file(Path::new("/nonexistent-sluice-dir/shuffle.data"), Codec::Lz4, None)
        .expect_err("no such directory");
    assert!(matches!(err, BridgeError::Engine(EngineError::Io { .. })), "{err}");
    assert!(err.to_string().contains("/nonexistent-sluice-dir/shuffle.data"));
}

/// A spill that cannot be written has lost the records it took: the
/// attempt must fail, naming the file, and never commit a short output.
#[test]
fn a_failed_spill_fails_the_attempt_instead_of_losing_records() {
    let dir = tempfile::tempdir().expect("tmp");
    open_engine(&settings()).expect("engine");
    let shuffle = register_shuffle(2, 1, StageSpec::None).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, 2, false, false).expect("open");
    let mut buf = Vec::new();
    for i in 0..1000u32 {
        put(&mut buf, i % 2, b"record");
    }
    task.produce(&buf, 1000).expect("produce");
    let bad = Path::new("/nonexistent-sluice-dir/spill_1");
    let err = task.spill(bad, Codec::Lz4).expect_err("spill into a missing directory");
    assert!(matches!(err, BridgeError::Engine(EngineError::AttemptFailed(_))), "{err}");
    assert!(err.to_string().contains("/nonexistent-sluice-dir/spill_1"), "{err}");
    assert_eq!(err.java_class(), "java/io/IOException");
    // Every later call fails the same way; nothing is committed.
    buf.clear();
    for _ in 0..10 {
        put(&mut buf, 1, b"late");
    }
    let again = task.produce(&buf, 10).expect_err("produce after a failed spill");
    assert!(again.to_string().contains("spill_1"), "{again}");
    let path = dir.path().join("shuffle.data");
    let commit = task.commit_to_file(&path, Codec::Lz4, None).expect_err("no commit");
    assert!(matches!(commit, BridgeError::Engine(EngineError::AttemptFailed(_))), "{commit}");
    assert!(!path.exists(), "a data file was written for a failed attempt");
}

/// Reads a batch segment (contiguous partitions `start..end`, as Spark's
/// batch fetch reads them) block by block, trailers checked.
fn read_batch(data: &[u8], start: i32, end: i32) -> Result<Vec<u8>, EngineError> {
    let mut out = Vec::new();
    walk_segment(data, (1, 7, start, end), |frame, name| {
        let mut values = vec![0u8; frame_info(frame, name)?.uncompressed_len];
        let (n, records) = decode_values(frame, name, &mut values)?;
        out.extend_from_slice(&values[..n]);
        Ok(records)
    })?;
    Ok(out)
}

#[test]
fn a_batch_of_contiguous_partitions_reads_as_one_segment() {
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> = (0..4000u32)
        .map(|i| {
            let mut v = 6u16.to_le_bytes().to_vec();
            v.extend_from_slice(format!("{:06}", i).as_bytes());
            (i % 4, v)
        })
        .collect();
    let (data, lengths) = run_map(dir.path(), 4, &records, Codec::Lz4);
    let start = lengths[0] as usize;
    let end = start + (lengths[1] + lengths[2]) as usize;
    let batch = &data[start..end];
    let got = split(&read_batch(batch, 1, 3).expect("batch 1..3"));
    let mut want: Vec<Vec<u8>> =
        records.iter().filter(|(p, _)| (1..3).contains(p)).map(|(_, v)| v[2..].to_vec()).collect();
    want.sort();
    assert!(got == want, "batch 1..3 differs");
    // The same bytes claimed for a range that leaves out partition 1 are refused.
    let err = read_batch(batch, 2, 4).expect_err("partition 1 outside 2..4");
    assert!(matches!(err, EngineError::Misplaced { .. }), "{err}");
    assert!(err.to_string().contains("shuffle_1_7_2_4"), "{err}");
}

/// Offsets of the blocks (and trailer) of a segment, in order.
fn frame_starts(seg: &[u8], partition: u32) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0usize;
    while at < seg.len() {
        starts.push(at);
        let head = &seg[at..at + HEADER_BYTES];
        at += if sluice_engine::output::trailer::SegmentTrailer::is_trailer(head) {
            sluice_engine::output::trailer::TRAILER_BYTES
        } else {
            let name = BlockName::single(1, 7, partition as i32, at as i64);
            frame_info(head, &name).expect("header").frame_len
        };
    }
    starts
}

/// A segment cut at any block boundary, with a block dropped, or with two
/// blocks swapped is made of intact blocks; the trailer finds every case.
#[test]
fn a_segment_cut_or_rearranged_at_block_boundaries_is_detected() {
    let dir = tempfile::tempdir().expect("tmp");
    // Incompressible-ish values, enough for several 1 MiB blocks.
    let records: Vec<(u32, Vec<u8>)> = (0..40_000u32)
        .map(|i| {
            let v: Vec<u8> =
                (0..100u32).map(|j| (i.wrapping_mul(2_654_435_761) >> (j % 24)) as u8).collect();
            (0, v)
        })
        .collect();
    let (data, lengths) = run_map(dir.path(), 1, &records, Codec::None);
    assert_eq!(lengths[0] as usize, data.len());
    let starts = frame_starts(&data, 0);
    assert!(starts.len() >= 4, "{} frames", starts.len());
    assert!(read_segment(&data, 0).is_ok());
    for &cut in &starts {
        let err = read_segment(&data[..cut], 0).expect_err("cut at a block boundary");
        assert!(err.to_string().contains("cut short"), "{err}");
        assert_eq!(BridgeError::from(err).java_class(), "java/io/IOException");
    }
    // The second block dropped.
    let mut dropped = data[..starts[1]].to_vec();
    dropped.extend_from_slice(&data[starts[2]..]);
    let err = read_segment(&dropped, 0).expect_err("a block missing");
    assert!(err.to_string().contains("blocks are missing"), "{err}");
    // The first two blocks swapped.
    let mut swapped = data[starts[1]..starts[2]].to_vec();
    swapped.extend_from_slice(&data[..starts[1]]);
    swapped.extend_from_slice(&data[starts[2]..]);
    let err = read_segment(&swapped, 0).expect_err("blocks swapped");
    assert!(err.to_string().contains("out of place"), "{err}");
}

/// A batch of contiguous partitions cut at a partition boundary ends on a
/// good trailer, but one that says a later partition of the batch is not
/// empty.
#[test]
fn a_batch_cut_at_a_partition_boundary_is_detected() {
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(u32, Vec<u8>)> =
        (0..3000u32).map(|i| (i % 3, format!("value-{i}").into_bytes())).collect();
    let (data, lengths) = run_map(dir.path(), 3, &records, Codec::Lz4);
    let all = read_batch(&data, 0, 3).expect("whole batch");
    assert!(!all.is_empty());
    let cut = (lengths[0] + lengths[1]) as usize;
    let err = read_batch(&data[..cut], 0, 3).expect_err("partition 2 cut off");
    assert!(err.to_string().contains("before partition 2"), "{err}");
    // A batch that really ends there is fine.
    assert!(read_batch(&data[..cut], 0, 2).is_ok());
}

#[test]
fn native_memory_outside_the_host_is_the_pools_the_budget_and_each_reduce_tasks_floor_and_merge() {
    let s = sluice_jni::bridge::HostSettings {
        offload_threads: 1,
        buffer_pool_bytes: 64 << 20,
        memory_budget: 256 << 20,
        operator_state_bytes: 0,
        spill_dir: std::env::temp_dir(),
        inline_at_tasks: 0,
        pin_offload_threads: false,
        segment_bytes: 100_000,
        liquid_offload: true,
    };
    // 64 MiB of buffers, three page sizes (16, 32, 64 KiB) of 64 MiB of
    // free pages each, the 256 MiB budget.
    assert_eq!(sluice_jni::bridge::unaccounted_bytes(&s), (64 + 3 * 64 + 256) << 20);
    // Per reduce task: the aggregate's 1 MiB floor, 17 spilled runs' read
    // buffers of 3 MiB each (16 and a sort's runs in memory sent to disk
    // midway), the thread's two kept block buffers of at
    // most 4 MiB each, and a sort's 16 MiB run being cut.
    assert_eq!(sluice_jni::bridge::unaccounted_task_bytes(), (1 + 17 * 3 + 2 * 4 + 16) << 20);
    // Per task in service mode (docs/reliability.md's table): a read's 4 MiB
    // frame and its block's copy; a push's 1 MiB of gathered records, four
    // unacknowledged frames of at most 4 MiB and its 1 MiB file buffer.
    assert_eq!(sluice_jni::calls::service::task_buffer_bytes(), (2 * 4 + 1 + 4 * 4 + 1) << 20);
}

/// Spark SQL's rows as the Java writer hands them over (the value is the
/// row's big-endian size and its bytes): an attempt opened with row
/// checksums keeps each partition's XOR and SUM of the rows' XXH64, the
/// same whether the rows cross in one buffer or several, and still writes
/// them all; a buffer whose records are not rows fails the hand-over.
#[test]
fn an_attempt_keeps_spark_s_row_checksums_of_the_rows_it_is_handed() {
    let dir = tempfile::tempdir().expect("tmp");
    open_engine(&settings()).expect("engine");
    let rows: Vec<(u32, Vec<u8>)> = (0..300u32)
        .map(|i| {
            let row = vec![(i % 251) as u8; 8 * (1 + i as usize % 4)];
            let mut framed = (row.len() as u32).to_be_bytes().to_vec();
            framed.extend_from_slice(&row);
            (i % 3, framed)
        })
        .collect();
    let mut values = Vec::new();
    for buffers in [1usize, 7] {
        let shuffle = register_shuffle(3, 1, StageSpec::None).expect("register");
        let mut task = HostMapTask::open(shuffle, 0, 0, 3, false, true).expect("open");
        for chunk in rows.chunks(rows.len().div_ceil(buffers)) {
            let mut buf = Vec::new();
            for (p, v) in chunk {
                put(&mut buf, *p, v);
            }
            task.produce(&buf, chunk.len() as u32).expect("produce");
        }
        let sums = task.row_checksums().expect("kept");
        assert_eq!(sums.len(), 6);
        assert!(sums.iter().all(|&v| v != 0), "{sums:?}");
        values.push(sums);
        let written = task
            .commit_to_file(&dir.path().join(format!("rows_{buffers}")), Codec::Lz4, None)
            .expect("commit");
        assert_eq!(written.records.iter().sum::<u64>(), 300);
    }
    assert_eq!(values[0], values[1]);

    let shuffle = register_shuffle(2, 1, StageSpec::None).expect("register");
    let plain = HostMapTask::open(shuffle, 0, 0, 2, false, false).expect("open");
    assert_eq!(plain.row_checksums(), None);
    let mut task = HostMapTask::open(shuffle, 0, 0, 2, false, true).expect("open");
    let mut buf = Vec::new();
    put(&mut buf, 1, b"not a framed row");
    let err = task.produce(&buf, 1).expect_err("not a row");
    assert!(err.to_string().contains("row checksum: record 0 of 1"), "{err}");
}

/// A shuffle of more partitions than the engine partitions is refused at
/// registration, before any map task sizes its tables by the count (a
/// partition table of 2^31 entries would abort the process, not fail).
#[test]
fn a_shuffle_of_too_many_partitions_is_refused() {
    open_engine(&settings()).expect("engine");
    let most = sluice_core::partition::function::PARTITIONS_MAX;
    assert!(register_shuffle(most, 1, StageSpec::None).is_ok());
    for partitions in [most + 1, i32::MAX as u32] {
        let e = register_shuffle(partitions, 1, StageSpec::None).expect_err("too many partitions");
        assert!(e.to_string().contains("reduce partitions"), "{e}");
    }
}
