//! A host-owned shuffle through the engine's own API, with no binding in
//! between: map attempts write data files (`FileMapTask`), reduce tasks
//! read them back block by block through the same final operator the
//! engine's own reduce side runs (`ReduceTask`), and every call meant for
//! the other owner is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::{Codec, Layout};
use sluice_core::reorg::aggregate::{AggFn, AggSpec, SpillStrategy, ValueType};
use sluice_core::reorg::StageSpec;
use sluice_engine::host_keys::PartitionIdPartitioner;
use sluice_engine::output::trailer::{SegmentTrailer, TRAILER_BYTES};
use sluice_engine::reduce::{frame_info, BlockName};
use sluice_engine::{Engine, EngineError, FileMapTask, ReduceOwner, ReduceTask, ShuffleSpec};

mod common;
use common::small_config as config;

const PARTITIONS: u32 = 4;
const MAPS: u32 = 3;

fn spec(id: u32, op: StageSpec, reduce: ReduceOwner) -> ShuffleSpec {
    ShuffleSpec {
        id,
        maps: MAPS,
        layout: Layout::Variable,
        partitioner: Arc::new(PartitionIdPartitioner::new(PARTITIONS)),
        op,
        nodes: None,
        reduce,
    }
}

/// Host key of record `i` of map `map` (a key space the maps share).
fn key(map: u32, i: u32) -> u64 {
    u64::from((i * 7 + map * 13) % 1_000)
}

fn partition_of(key: u64) -> u32 {
    (key % u64::from(PARTITIONS)) as u32
}

/// The value of record `i` of map `map`: an i64 LE for the aggregate; the
/// sort's tests read the host key back from it.
fn value(map: u32, i: u32) -> [u8; 8] {
    (((key(map, i) << 32) | u64::from(i + map)) as i64).to_le_bytes()
}

/// Map `map`'s buffer: `klen vlen (pid ++ key) value` records.
fn map_buffer(map: u32, records: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..records {
        let k = key(map, i);
        let mut full_key = partition_of(k).to_le_bytes().to_vec();
        full_key.extend_from_slice(&k.to_be_bytes());
        out.extend_from_slice(&(full_key.len() as u32).to_le_bytes());
        out.extend_from_slice(&8u32.to_le_bytes());
        out.extend_from_slice(&full_key);
        out.extend_from_slice(&value(map, i));
    }
    out
}

/// Runs every map attempt of shuffle `id`; returns each data file and its
/// partition lengths.
fn write_maps(e: &Engine, id: u32, dir: &Path, records: u32) -> Vec<(PathBuf, Vec<u64>)> {
    (0..MAPS)
        .map(|m| {
            let mut t = FileMapTask::open(e, id, m, 0, PARTITIONS, true).expect("open");
            let buf = map_buffer(m, records);
            // Two buffers, so the operator sees the attempt's input in pieces.
            let half = records / 2;
            let cut = map_buffer(m, half).len();
            t.produce(&buf[..cut], half).expect("produce first half");
            let rest = map_buffer(m, records)[cut..].to_vec();
            t.produce(&rest, records - half).expect("produce second half");
            let path = dir.join(format!("map-{id}-{m}.data"));
            let written = t.commit_to_file(&path, Codec::Lz4, None).expect("commit");
            (path, written.lengths)
        })
        .collect()
}

/// Feeds partition `p` of every data file to `task`, block by block, as a
/// host's fetch would.
fn feed_partition(task: &mut ReduceTask, files: &[(PathBuf, Vec<u64>)], p: u32) {
    for (m, (path, lengths)) in files.iter().enumerate() {
        let data = std::fs::read(path).expect("read data file");
        let start: u64 = lengths[..p as usize].iter().sum();
        let seg = &data[start as usize..(start + lengths[p as usize]) as usize];
        let mut at = 0;
        while at < seg.len() {
            let name = BlockName::single(1, m as i64, p as i32, at as i64);
            if SegmentTrailer::is_trailer(&seg[at..]) {
                at += TRAILER_BYTES;
                continue;
            }
            let info = frame_info(&seg[at..at + HEADER_BYTES], &name).expect("header");
            task.grant(task.shortfall(info.uncompressed_len));
            task.feed(&seg[at..at + info.frame_len], &name).expect("feed");
            at += info.frame_len;
        }
    }
}

/// Every result of `task` as (bytes, records) chunks copied out.
fn drain(task: &mut ReduceTask) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4 << 10];
    loop {
        let (bytes, records) = task.next_records(&mut buf).expect("next");
        if bytes == 0 && records == 0 {
            return out;
        }
        assert!(records > 0, "a result of {bytes} bytes does not fit 4 KiB");
        out.extend_from_slice(&buf[..bytes]);
    }
}

#[test]
fn a_host_owned_aggregate_writes_files_and_reduces_them_exactly() {
    let dir = tempfile::tempdir().expect("tmp");
    let e = Engine::new(config(dir.path())).expect("engine");
    let agg = AggSpec::new(AggFn::Sum, ValueType::I64);
    let op = StageSpec::Aggregate(agg, SpillStrategy::State);
    e.register_shuffle(spec(1, op.clone(), ReduceOwner::Host)).expect("register");
    let records = 5_000;
    let files = write_maps(&e, 1, dir.path(), records);
    let mut want: BTreeMap<u64, i64> = BTreeMap::new();
    for m in 0..MAPS {
        for i in 0..records {
            let v = i64::from_le_bytes(value(m, i));
            let sum = want.entry(key(m, i)).or_insert(0);
            *sum = sum.wrapping_add(v);
        }
    }
    let mut got: BTreeMap<u64, i64> = BTreeMap::new();
    for p in 0..PARTITIONS {
        let mut task = ReduceTask::open(&op, p..p + 1, dir.path()).expect("open reduce");
        feed_partition(&mut task, &files, p);
        let results = task.finish().expect("finish").expect("no spill: counted up front");
        let out = drain(&mut task);
        let mut at = 0;
        let mut n = 0;
        while at < out.len() {
            let klen = u32::from_le_bytes(out[at..at + 4].try_into().expect("4")) as usize;
            let vlen = u32::from_le_bytes(out[at + 4..at + 8].try_into().expect("4")) as usize;
            let k = &out[at + 8..at + 8 + klen];
            assert_eq!(u32::from_le_bytes(k[..4].try_into().expect("4")), p, "misplaced key");
            let host = u64::from_be_bytes(k[4..].try_into().expect("8"));
            let v =
                i64::from_le_bytes(out[at + 8 + klen..at + 8 + klen + vlen].try_into().expect("8"));
            assert!(got.insert(host, v).is_none(), "key {host} twice");
            at += 8 + klen + vlen;
            n += 1;
        }
        assert_eq!(n, results, "partition {p}: finish counted {results}, drained {n}");
    }
    assert_eq!(got, want);
}

#[test]
fn a_host_owned_sort_returns_values_in_key_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let e = Engine::new(config(dir.path())).expect("engine");
    e.register_shuffle(spec(2, StageSpec::Sort, ReduceOwner::Host)).expect("register");
    let records = 3_000;
    let files = write_maps(&e, 2, dir.path(), records);
    let mut total = 0;
    for p in 0..PARTITIONS {
        let mut task = ReduceTask::open(&StageSpec::Sort, p..p + 1, dir.path()).expect("open");
        feed_partition(&mut task, &files, p);
        let n = task.finish().expect("finish").expect("a sort counts its records");
        assert!(task.runs() >= 1, "partition {p}: no run");
        let values = drain(&mut task);
        assert_eq!(values.len() as u64, n * 8, "partition {p}: a value per record");
        let keys: Vec<u64> = values
            .chunks_exact(8)
            .map(|v| u64::from_le_bytes(v.try_into().expect("8")) >> 32)
            .collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "partition {p} out of key order");
        assert!(keys.iter().all(|&k| partition_of(k) == p), "partition {p}: a misplaced key");
        total += n;
    }
    assert_eq!(total, u64::from(records * MAPS));
}

#[test]
fn calls_for_the_other_owner_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let e = Engine::new(config(dir.path())).expect("engine");
    e.register_shuffle(spec(1, StageSpec::None, ReduceOwner::Host)).expect("host-owned");
    e.register_shuffle(spec(2, StageSpec::None, ReduceOwner::Engine)).expect("engine-owned");
    let wrong = |r: Result<(), EngineError>, owner: &str| match r {
        Err(EngineError::WrongOwner { owner: o, .. }) => assert_eq!(o, owner),
        other => panic!("expected the {owner} to own it, got {other:?}"),
    };
    // A host-owned shuffle has no engine reduce partitions to read...
    wrong(e.buf_consume(1, 0).map(|_| ()), "host");
    wrong(e.partition_store_stats(1, 0).map(|_| ()), "host");
    wrong(e.end_map_stage(1).map(|_| ()), "host");
    // ...nor does it take commits into them.
    let t = e.map_task(1, 0, 0).expect("map task");
    wrong(t.commit().map(|_| ()), "host");
    // An engine-owned shuffle's output goes to its reduce side, not back
    // to a host.
    let t = e.map_task(2, 0, 0).expect("map task");
    wrong(t.finish_output().map(|_| ()), "engine");
    let mut t = e.map_task(2, 1, 0).expect("map task");
    wrong(t.take_output_so_far().map(|_| ()), "engine");
}
