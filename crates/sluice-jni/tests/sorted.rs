//! `sortByKey` through the bridge without a JVM: map attempts of a sorting
//! shuffle (runs sorted by the engine, some spilled part way), their output
//! files read back block by block into each reduce partition's merge, the
//! values checked to come out in key order and each exactly once, with
//! the reduce task granted enough memory for its runs or none (every run
//! then on disk).

use proptest::prelude::*;
use sluice_core::format::Codec;
use sluice_core::reorg::StageSpec;
use sluice_jni::bridge::{open_engine, register_shuffle, HostMapTask};

mod common;
use common::{settings, walk_segment};
use sluice_engine::ReduceTask;

/// The writer's record: key = partition id ++ sort key, value = the sort
/// key again and the record's index (so order and identity can be checked
/// from the values alone).
fn put(buf: &mut Vec<u8>, partition: u32, key: &[u8], index: u32) {
    buf.extend_from_slice(&(4 + key.len() as u32).to_le_bytes());
    buf.extend_from_slice(&(key.len() as u32 + 6).to_le_bytes());
    buf.extend_from_slice(&partition.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(&(key.len() as u16).to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(&index.to_le_bytes());
}

/// A range partition of the key's first byte, as Spark's RangePartitioner.
fn partition_of(key: &[u8], partitions: u32) -> u32 {
    u32::from(key.first().copied().unwrap_or(0)) * partitions / 256
}

/// Every (sort key, index) a reduce partition emits, in emitted order,
/// read through a small buffer so values span several calls.
fn drain(op: &mut ReduceTask) -> Vec<(Vec<u8>, u32)> {
    op.finish().expect("finish");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8];
    loop {
        let (bytes, records) = op.next_records(&mut buf).expect("next");
        if records == 0 && bytes > 0 {
            buf.resize(bytes + 16, 0);
            continue;
        }
        if records == 0 {
            return out;
        }
        let mut at = 0;
        while at < bytes {
            let n = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
            let key = buf[at + 2..at + 2 + n].to_vec();
            let index = u32::from_le_bytes(buf[at + 2 + n..at + 6 + n].try_into().expect("4"));
            out.push((key, index));
            at += 6 + n;
        }
    }
}

/// Runs `maps` (each a list of keys) through a sorting shuffle into
/// `partitions` reduce partitions (each map spilling half way when
/// `spill`; each reduce task granted memory for its runs when `granted`,
/// none otherwise), one reduce task per partition, checks every task's
/// order and range and where its runs were kept, and returns every (key,
/// index) emitted and every one written, both sorted.
#[allow(clippy::type_complexity)]
fn sort_through_bridge(
    maps: &[Vec<Vec<u8>>],
    partitions: u32,
    spill: bool,
    granted: bool,
) -> (Vec<(Vec<u8>, u32)>, Vec<(Vec<u8>, u32)>) {
    let tasks: Vec<_> = (0..partitions).map(|p| p..p + 1).collect();
    let (got, all, _) = sort_into_tasks(maps, partitions, &tasks, spill, granted);
    (got, all)
}

/// [`sort_through_bridge`] with reduce tasks that each read a range of
/// partitions (`tasks`, as adaptive execution coalesces them), each fed
/// every segment of its range; also returns the runs the tasks merged.
#[allow(clippy::type_complexity)]
fn sort_into_tasks(
    maps: &[Vec<Vec<u8>>],
    partitions: u32,
    tasks: &[std::ops::Range<u32>],
    spill: bool,
    granted: bool,
) -> (Vec<(Vec<u8>, u32)>, Vec<(Vec<u8>, u32)>, u64) {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let shuffle =
        register_shuffle(partitions, maps.len() as u32, StageSpec::Sort).expect("register");
    let mut outputs = Vec::new();
    let mut index = 0u32;
    let mut all = Vec::new();
    for (m, keys) in maps.iter().enumerate() {
        let mut task =
            HostMapTask::open(shuffle, m as u32, 0, partitions, true, false).expect("open");
        for (half, part) in keys.chunks(keys.len().div_ceil(2).max(1)).enumerate() {
            let mut buf = Vec::new();
            for k in part {
                put(&mut buf, partition_of(k, partitions), k, index);
                all.push((k.clone(), index));
                index += 1;
            }
            task.produce(&buf, part.len() as u32).expect("produce");
            if spill && half == 0 {
                task.spill(&dir.path().join(format!("spill_{m}")), Codec::Lz4).expect("spill");
            }
        }
        let path = dir.path().join(format!("map_{m}.data"));
        let lengths = task.commit_to_file(&path, Codec::Lz4, None).expect("commit").lengths;
        outputs.push((std::fs::read(&path).expect("read"), lengths));
    }
    let mut got = Vec::new();
    let mut runs = 0;
    for range in tasks {
        let mut op = ReduceTask::open(&StageSpec::Sort, range.clone(), dir.path()).expect("open");
        if granted {
            op.grant(64 << 20);
        }
        for (data, lengths) in &outputs {
            for p in range.clone() {
                let start: u64 = lengths[..p as usize].iter().sum();
                let seg = &data[start as usize..(start + lengths[p as usize]) as usize];
                if seg.is_empty() {
                    continue;
                }
                walk_segment(seg, (9, 0, p as i32, p as i32 + 1), |frame, name| {
                    op.feed(frame, name)
                })
                .expect("feed");
            }
        }
        let out = drain(&mut op);
        let expect_spilled = if granted { 0 } else { op.runs() };
        // A partition no record went to (an empty map, keys all elsewhere)
        // is fed nothing and takes no run.
        let ours = |k: &[u8]| range.contains(&partition_of(k, partitions));
        let written = all.iter().filter(|(k, _)| ours(k)).count();
        assert_eq!(op.runs() > 0, written > 0, "partitions {range:?}: runs for {written} records");
        assert_eq!(op.spilled_runs(), expect_spilled, "partitions {range:?}: runs on disk");
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "partitions {range:?} out of order");
        assert!(out.iter().all(|(k, _)| ours(k)));
        runs += op.runs();
        got.extend(out);
    }
    got.sort();
    all.sort();
    (got, all, runs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn every_record_comes_out_once_in_key_order(
        maps in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..500),
            1..4),
        partitions in 1u32..6,
        spill in any::<bool>(),
        granted in any::<bool>(),
    ) {
        let (got, all) = sort_through_bridge(&maps, partitions, spill, granted);
        prop_assert_eq!(got, all);
    }
}

/// A reduce partition of several MiB: the merge streams its output a batch
/// at a time while the host reads, and still yields every record in order.
#[test]
fn a_partition_larger_than_one_merge_batch_streams_in_order() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let maps: Vec<Vec<Vec<u8>>> = (0..3)
        .map(|_| {
            (0..40_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x.to_be_bytes()[..6].iter().chain(&x.to_le_bytes()[..4]).copied().collect()
                })
                .collect()
        })
        .collect();
    for granted in [true, false] {
        let (got, all) = sort_through_bridge(&maps, 1, true, granted);
        assert_eq!(got.len(), 120_000);
        assert!(got == all, "every record once");
    }
}

/// One reduce task reading a range of partitions (adaptive execution's
/// coalesced ranges) across partition 256, whose id's little-endian bytes
/// (`00 01`) order below 255's (`ff 00`): the task orders its records by
/// key alone, as Spark's reader does, in memory and with every run on disk.
#[test]
fn a_task_reading_many_partitions_orders_by_key_alone() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let maps: Vec<Vec<Vec<u8>>> = (0..3)
        .map(|_| {
            (0..3_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x.to_be_bytes()[..5].to_vec()
                })
                .collect()
        })
        .collect();
    for granted in [true, false] {
        let (got, all, _) = sort_into_tasks(&maps, 600, &[0..250, 250..600], true, granted);
        assert_eq!(got.len(), 9_000);
        assert!(got == all, "every record once");
        let whole = 0..600;
        let (got, all, _) =
            sort_into_tasks(&maps, 600, std::slice::from_ref(&whole), false, granted);
        assert!(got == all, "every record once");
    }
}
