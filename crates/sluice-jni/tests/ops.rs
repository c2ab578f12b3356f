//! Offloaded aggregation through the bridge without a JVM: several map
//! attempts of an operator shuffle (partial aggregation in the engine),
//! their output files read back block by block into each reduce
//! partition's final aggregate, the results compared with a plain fold;
//! and a forged block refused.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::Codec;
use sluice_core::reorg::aggregate::{AggSpec, SpillStrategy};
use sluice_core::reorg::StageSpec;
use sluice_jni::bridge::{open_engine, register_shuffle, HostMapTask};

mod common;
use common::{settings, walk_segment};
use sluice_engine::EngineError;
use sluice_engine::ReduceTask;
use sluice_jni::ops::{agg_spec, spill_strategy, HostOp, OP_SORT};

/// The writer's record: key = partition id ++ key bytes, value = i64 LE.
fn put(buf: &mut Vec<u8>, partition: u32, key: &[u8], value: i64) {
    buf.extend_from_slice(&(4 + key.len() as u32).to_le_bytes());
    buf.extend_from_slice(&8u32.to_le_bytes());
    buf.extend_from_slice(&partition.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// One map attempt's output file and its partition lengths.
fn map_output(
    dir: &Path,
    shuffle: u32,
    map: u32,
    partitions: u32,
    records: &[(Vec<u8>, i64)],
) -> (Vec<u8>, Vec<u64>) {
    let mut task = HostMapTask::open(shuffle, map, 0, partitions, true, false).expect("open");
    // Two halves with a spill between them when the map id is odd: partial
    // states of one key then reach the reduce side from both.
    let half = records.len() / 2;
    for (i, part) in [&records[..half], &records[half..]].into_iter().enumerate() {
        let mut buf = Vec::new();
        for (k, v) in part {
            put(&mut buf, partition_of(k, partitions), k, *v);
        }
        task.produce(&buf, part.len() as u32).expect("produce");
        if i == 0 && map % 2 == 1 {
            task.spill(&dir.join(format!("spill_{map}")), Codec::Lz4).expect("spill");
        }
    }
    let path = dir.join(format!("map_{map}.data"));
    let lengths = task.commit_to_file(&path, Codec::Lz4, None).expect("commit").lengths;
    (std::fs::read(&path).expect("read back"), lengths)
}

fn partition_of(key: &[u8], partitions: u32) -> u32 {
    key.iter().fold(7u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % partitions
}

/// A reduce task's final aggregate of `spec` (what `reduceOpen` opens for
/// an aggregation).
fn open_aggregate(
    spec: AggSpec,
    partitions: std::ops::Range<u32>,
    dir: &Path,
) -> Result<ReduceTask, EngineError> {
    ReduceTask::open(&StageSpec::Aggregate(spec, SpillStrategy::State), partitions, dir)
}

/// Feeds one segment to a reduce aggregate the way the Java stream does.
fn feed_segment(agg: &mut ReduceTask, seg: &[u8], reduce: u32) -> Result<(), EngineError> {
    // Spark fetches only the segments its index says are non-empty.
    if seg.is_empty() {
        return Ok(());
    }
    walk_segment(seg, (3, 0, reduce as i32, reduce as i32 + 1), |frame, name| agg.feed(frame, name))
}

/// Every (key, 8-byte result) a reduce aggregate emits, read through a
/// small buffer so that results span several calls.
fn drain(agg: &mut ReduceTask) -> Vec<(Vec<u8>, [u8; 8])> {
    agg.finish().expect("finish");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16];
    loop {
        let (bytes, records) = agg.next_records(&mut buf).expect("next");
        if records == 0 && bytes > 0 {
            // The next result needs a larger buffer.
            assert!(bytes > buf.len());
            buf.resize(bytes + 64, 0);
            continue;
        }
        if records == 0 {
            break;
        }
        let mut at = 0;
        while at < bytes {
            let k = u32::from_le_bytes(buf[at..at + 4].try_into().expect("4")) as usize;
            let v = u32::from_le_bytes(buf[at + 4..at + 8].try_into().expect("4")) as usize;
            assert_eq!(v, 8);
            let key = buf[at + 8 + 4..at + 8 + k].to_vec();
            let value: [u8; 8] = buf[at + 8 + k..at + 16 + k].try_into().expect("8");
            out.push((key, value));
            at += 8 + k + v;
        }
    }
    out
}

/// Runs `func` (sum 0, count 1, min 2, max 3) over i64 values through the
/// whole path, the map side spilling by host code `spill` (0 state, 1
/// input, 2 evict); returns each key's result.
fn run(
    func: i32,
    spill: i32,
    maps: &[Vec<(Vec<u8>, i64)>],
    partitions: u32,
) -> BTreeMap<Vec<u8>, i64> {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let op = HostOp { function: func, value_type: 0, spill }.stage_spec().expect("op");
    let StageSpec::Aggregate(spec, _) = op else { panic!("{op:?} is no aggregation") };
    let shuffle = register_shuffle(partitions, maps.len() as u32, op).expect("register");
    let outputs: Vec<_> = maps
        .iter()
        .enumerate()
        .map(|(m, records)| map_output(dir.path(), shuffle, m as u32, partitions, records))
        .collect();
    let mut results = BTreeMap::new();
    for p in 0..partitions {
        let mut agg = open_aggregate(spec, p..p + 1, dir.path()).expect("open reduce");
        for (data, lengths) in &outputs {
            let start: u64 = lengths[..p as usize].iter().sum();
            let seg = &data[start as usize..(start + lengths[p as usize]) as usize];
            feed_segment(&mut agg, seg, p).expect("feed");
        }
        for (k, v) in drain(&mut agg) {
            assert_eq!(partition_of(&k, partitions), p, "key {k:?} in partition {p}");
            assert!(results.insert(k, i64::from_le_bytes(v)).is_none(), "key emitted twice");
        }
    }
    results
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn sum_count_min_max_match_a_plain_fold(
        maps in proptest::collection::vec(
            proptest::collection::vec(
                // Keys of 8 bytes (the engine's prefixed inline table) among others.
                (proptest::collection::vec(0u8..6, 0..9), -1000i64..1000), 0..400),
            1..4),
        partitions in 1u32..9,
        func in 0i32..4,
        spill in 0i32..3,
    ) {
        let got = run(func, spill, &maps, partitions);
        let mut want: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (k, v) in maps.iter().flatten() {
            want.entry(k.clone())
                .and_modify(|a| {
                    *a = match func {
                        0 => a.wrapping_add(*v),
                        1 => *a + 1,
                        2 => (*a).min(*v),
                        _ => (*a).max(*v),
                    }
                })
                .or_insert(if func == 1 { 1 } else { *v });
        }
        prop_assert_eq!(got, want);
    }
}

#[test]
fn an_engine_op_carries_its_spill_strategy_to_the_map_side_only() {
    let sum = |spill| HostOp { function: 0, value_type: 0, spill };
    let StageSpec::Aggregate(_, strategy) = sum(1).stage_spec().expect("map op") else {
        panic!("no aggregation")
    };
    assert_eq!(strategy, SpillStrategy::Input);
    assert!(
        matches!(sum(7).stage_spec(), Err(sluice_jni::error::BridgeError::Argument(_))),
        "an unknown strategy is refused at registration"
    );
    let sort = HostOp { function: OP_SORT, value_type: 0, spill: 7 };
    assert!(sort.stage_spec().is_err(), "whatever the operator");
    // A reduce task's operator does not spill map-side: the code is not read.
    assert!(matches!(sum(7).reduce_spec(), Ok(StageSpec::Aggregate(..))));
}

#[test]
fn spill_strategy_codes_are_the_hosts() {
    assert_eq!(spill_strategy(0).expect("state"), SpillStrategy::State);
    assert_eq!(spill_strategy(1).expect("input"), SpillStrategy::Input);
    assert_eq!(spill_strategy(2).expect("evict"), SpillStrategy::Evict);
    for bad in [-1, 3] {
        assert!(
            matches!(spill_strategy(bad), Err(sluice_jni::error::BridgeError::Argument(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_block_of_another_partition_is_refused() {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let spec = agg_spec(0, 0).expect("spec");
    let shuffle =
        register_shuffle(2, 1, StageSpec::Aggregate(spec, SpillStrategy::State)).expect("register");
    let records: Vec<(Vec<u8>, i64)> = (0..50u8).map(|i| (vec![i], i64::from(i))).collect();
    let (data, lengths) = map_output(dir.path(), shuffle, 0, 2, &records);
    let seg0 = &data[..lengths[0] as usize];
    let mut agg = open_aggregate(spec, 1..2, &std::env::temp_dir()).expect("open reduce");
    let err = feed_segment(&mut agg, seg0, 1).expect_err("partition 0's block fed to 1");
    assert!(matches!(err, EngineError::Misplaced { .. }), "{err}");
}

#[test]
fn a_flipped_byte_is_corruption_naming_the_block() {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let spec = agg_spec(1, 0).expect("spec");
    let shuffle =
        register_shuffle(1, 1, StageSpec::Aggregate(spec, SpillStrategy::State)).expect("register");
    let records: Vec<(Vec<u8>, i64)> = (0..500u32).map(|i| (i.to_le_bytes().to_vec(), 1)).collect();
    let (mut data, _) = map_output(dir.path(), shuffle, 0, 1, &records);
    let mid = HEADER_BYTES + (data.len() - HEADER_BYTES) / 2;
    data[mid] ^= 0x40;
    let mut agg = open_aggregate(spec, 0..1, &std::env::temp_dir()).expect("open reduce");
    let err = feed_segment(&mut agg, &data, 0).expect_err("corrupt block");
    assert!(matches!(err, EngineError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("shuffle_3_0_0 at byte 0"), "{err}");
}

#[test]
fn a_value_of_the_wrong_width_is_a_typed_error() {
    open_engine(&settings()).expect("engine");
    let spec = agg_spec(0, 1).expect("spec"); // i32 values
    let shuffle =
        register_shuffle(1, 1, StageSpec::Aggregate(spec, SpillStrategy::State)).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, 1, true, false).expect("open");
    let mut buf = Vec::new();
    put(&mut buf, 0, b"k", 5); // 8-byte value
    let dir = tempfile::tempdir().expect("tmp");
    let outcome = task
        .produce(&buf, 1)
        .and_then(|()| task.commit_to_file(&dir.path().join("x.data"), Codec::Lz4, None));
    let err = outcome.expect_err("8-byte value for i32");
    assert!(err.to_string().contains("i32"), "{err}");
}

/// A host that grants each block's shortfall before feeding it, as Spark's
/// reduce task does (`ReduceMemory`), never sends the table down the spill
/// path, even when every record opens a group and the first block comes
/// before any grant. (The shortfall once asked for the block's bytes only:
/// a block of new keys outgrew the 1 MiB floor, the task spilled its first
/// run and ended with a sort and a merge of every group.)
#[test]
fn a_reduce_aggregate_granted_each_shortfall_does_not_spill() {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let spec = agg_spec(0, 0).expect("sum of i64");
    let shuffle =
        register_shuffle(1, 1, StageSpec::Aggregate(spec, SpillStrategy::State)).expect("register");
    let keys = 300_000u64;
    let records: Vec<(Vec<u8>, i64)> =
        (0..keys).map(|k| (k.to_le_bytes().to_vec(), k as i64)).collect();
    let (data, _) = map_output(dir.path(), shuffle, 0, 1, &records);
    let mut agg = open_aggregate(spec, 0..1, dir.path()).expect("open");
    let (mut blocks, mut granted) = (0, 0usize);
    walk_segment(&data, (3, 0, 0, 1), |frame, name| {
        let info = sluice_engine::reduce::frame_info(frame, name)?;
        let short = agg.shortfall(info.uncompressed_len);
        agg.grant(short);
        granted += short;
        blocks += 1;
        agg.feed(frame, name)
    })
    .expect("feed");
    assert!(blocks > 2, "{blocks} blocks: the test needs several");
    assert!(agg.state_bytes() > sluice_engine::REDUCE_STATE_FLOOR_BYTES);
    assert!(granted > 0);
    let results = drain(&mut agg);
    assert_eq!(agg.spilled_runs(), 0, "granted {granted} bytes over {blocks} blocks");
    assert_eq!(results.len() as u64, keys);
    for (k, v) in results {
        let k = u64::from_le_bytes(k.try_into().expect("8-byte key"));
        assert_eq!(i64::from_le_bytes(v), k as i64, "key {k}");
    }
}

/// A reduce aggregate's state lives in memory of its own task: what the
/// host grants it (Spark's execution memory) holds the whole table, while
/// a task granted nothing beyond its floor spills sorted runs, and both
/// give every key's exact result. (Before, every task drew on the engine's
/// one reduce pool and ignored grants, so one task could take what another
/// needed.)
#[test]
fn reduce_aggregates_hold_what_they_are_granted_and_spill_beyond_it() {
    open_engine(&settings()).expect("engine");
    let dir = tempfile::tempdir().expect("tmp");
    let spec = agg_spec(0, 0).expect("sum of i64");
    let shuffle =
        register_shuffle(1, 2, StageSpec::Aggregate(spec, SpillStrategy::State)).expect("register");
    // More groups than the engine's reduce pool (a quarter of 64 MiB) holds.
    let keys = 400_000u64;
    let records: Vec<(Vec<u8>, i64)> =
        (0..keys).map(|k| (k.to_le_bytes().to_vec(), k as i64)).collect();
    let outputs: Vec<_> = (0..2).map(|m| map_output(dir.path(), shuffle, m, 1, &records)).collect();
    let mut granted = open_aggregate(spec, 0..1, dir.path()).expect("open granted");
    let mut floor_only = open_aggregate(spec, 0..1, dir.path()).expect("open floor only");
    let first = outputs[0].0.len();
    assert!(granted.shortfall(first) > 0, "the floor does not cover a whole segment");
    granted.grant(256 << 20);
    assert_eq!(granted.shortfall(first), 0);
    // Fed in turns, as two concurrent tasks would be.
    for (data, _) in &outputs {
        feed_segment(&mut granted, data, 0).expect("feed granted");
        feed_segment(&mut floor_only, data, 0).expect("feed floor only");
    }
    assert!(granted.state_bytes() > 16 << 20, "{} bytes of state", granted.state_bytes());
    assert!(floor_only.state_bytes() <= sluice_engine::REDUCE_STATE_FLOOR_BYTES);
    for (agg, spills) in [(&mut granted, false), (&mut floor_only, true)] {
        let results = drain(agg);
        assert_eq!(agg.spilled_runs() > 0, spills, "spilled {} runs", agg.spilled_runs());
        assert_eq!(results.len() as u64, keys);
        for (k, v) in results {
            let k = u64::from_le_bytes(k.try_into().expect("8-byte key"));
            assert_eq!(i64::from_le_bytes(v), 2 * k as i64, "key {k}");
        }
    }
}
