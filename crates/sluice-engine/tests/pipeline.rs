//! The map pipeline end to end: partition, per-destination partial
//! operator, then the reduce-side final operator per destination, against a
//! reference computed from the raw input.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::partition::{FoldHash, PagePool, Partitioner};
use sluice_core::reorg::aggregate::{AggFn, AggSpec, FinalAggregate, SpillStrategy, ValueType};
use sluice_core::reorg::sort::SortMerge;
use sluice_core::reorg::StageSpec;
use sluice_core::reorg::{Emitter, SpillConfig};
use sluice_engine::MapPipeline;

fn input(n: usize, domain: u64) -> Vec<RecordBatch> {
    let layout = Layout::fixed(8, 4).expect("layout");
    let mut x = 99u64;
    let mut out = vec![RecordBatch::new(layout)];
    for _ in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let key = ((x >> 33) % domain).to_be_bytes();
        let value = (((x >> 12) % 100) as i32 - 50).to_le_bytes();
        if out.last().is_some_and(|b| b.len() == 3000) {
            out.push(RecordBatch::new(layout));
        }
        out.last_mut().expect("batch").push(&key, &value).expect("push");
    }
    out
}

#[test]
fn partial_aggregates_per_destination_merge_to_exact_sums() {
    let layout = Layout::fixed(8, 4).expect("layout");
    let batches = input(60_000, 5000);
    let f: Arc<dyn Partitioner> = Arc::new(FoldHash::new(8).expect("fold"));
    let pages = Arc::new(PagePool::new(4096));
    let memory = MemoryPool::new(1 << 20);
    let spec = AggSpec::new(AggFn::Sum, ValueType::I32);
    for strategy in [SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict] {
        let stage = StageSpec::Aggregate(spec, strategy);
        // Two map workers over alternate batches; 32 KiB of state each.
        let mut per_dest: Vec<Vec<RecordBatch>> = vec![Vec::new(); 8];
        let mut spills = 0;
        for w in 0..2 {
            let mut p =
                MapPipeline::new(layout, f.clone(), pages.clone(), &stage, 32 << 10, &memory);
            for b in batches.iter().skip(w).step_by(2) {
                p.push(&b.view()).expect("push");
            }
            spills += p.finish().expect("finish").spills;
            for (d, out) in per_dest.iter_mut().enumerate() {
                out.extend(p.take_output(d));
            }
        }
        assert!(spills > 0, "{strategy:?}: the map side never spilled");
        let mut got: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (d, partials) in per_dest.into_iter().enumerate() {
            let mut fin = FinalAggregate::new(spec, layout, &memory, SpillConfig::default());
            for b in &partials {
                for r in b.iter() {
                    assert_eq!(
                        f.partition(r.key) as usize,
                        d,
                        "a partial in the wrong destination"
                    );
                }
                fin.push(&b.view()).expect("final push");
            }
            let mut out = Emitter::new(fin.output_layout());
            fin.finish(&mut out).expect("final");
            for b in out.into_batches() {
                for r in b.iter() {
                    let v = i64::from_le_bytes(r.value.try_into().expect("8 bytes"));
                    assert!(got.insert(r.key.to_vec(), v).is_none(), "a key in two destinations");
                }
            }
        }
        let mut want: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for b in &batches {
            for r in b.iter() {
                *want.entry(r.key.to_vec()).or_default() +=
                    i64::from(i32::from_le_bytes(r.value.try_into().expect("4 bytes")));
            }
        }
        assert!(got == want, "{strategy:?}: {} keys out, {} expected", got.len(), want.len());
        assert_eq!(memory.used(), 0);
    }
}

#[test]
fn sorted_runs_per_destination_merge_in_order() {
    let layout = Layout::fixed(8, 4).expect("layout");
    let batches = input(40_000, 1 << 40);
    let f: Arc<dyn Partitioner> = Arc::new(FoldHash::new(4).expect("fold"));
    let pages = Arc::new(PagePool::new(4096));
    let memory = MemoryPool::unbounded();
    let mut p = MapPipeline::new(layout, f.clone(), pages, &StageSpec::Sort, 64 << 10, &memory);
    for b in &batches {
        p.push(&b.view()).expect("push");
    }
    let stats = p.finish().expect("finish");
    assert_eq!(stats.output_records, 40_000);
    let mut total = 0;
    for d in 0..4 {
        // Each run the pipeline marked is sorted on its own.
        let runs = p.take_runs(d);
        assert!(runs.len() > 1, "64 KiB of state over 40,000 records spills");
        let mut merge = SortMerge::new(layout, &memory, SpillConfig::default());
        for run in runs {
            let keys: Vec<Vec<u8>> =
                run.iter().flat_map(|b| b.iter().map(|r| r.key.to_vec())).collect();
            assert!(keys.windows(2).all(|w| w[0] <= w[1]), "a run out of order");
            merge.add_run(run).expect("run");
        }
        let mut out = Emitter::new(layout);
        merge.finish(&mut out).expect("merge");
        let keys: Vec<Vec<u8>> = out
            .into_batches()
            .iter()
            .flat_map(|b| b.iter().map(|r| r.key.to_vec()).collect::<Vec<_>>())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        assert!(keys.iter().all(|k| f.partition(k) as usize == d));
        total += keys.len();
    }
    assert_eq!(total, 40_000);
}

/// A partitioner that answers one partition too many for key 0xff.
#[derive(Debug)]
struct Overshoot;

impl Partitioner for Overshoot {
    fn name(&self) -> &'static str {
        "overshoot"
    }
    fn partitions(&self) -> u32 {
        4
    }
    fn partition(&self, key: &[u8]) -> u32 {
        if key.first() == Some(&0xff) {
            4
        } else {
            u32::from(key.first().copied().unwrap_or(0)) % 4
        }
    }
}

#[test]
fn partition_only_pages_fill_across_batches_and_keep_every_record_in_order() {
    // Many small variable-width batches: each holds only ~100 records per
    // destination, yet the output pages come out full (the open page of a
    // destination carries over from batch to batch) and a flush part way
    // (a host spilling) hands the partial pages on without losing order.
    let page = 16 << 10;
    let pages = Arc::new(PagePool::new(page));
    let memory = MemoryPool::new(1 << 20);
    let f: Arc<dyn Partitioner> = Arc::new(FoldHash::new(2).expect("fold"));
    let mut p =
        MapPipeline::new(Layout::Variable, f.clone(), pages, &StageSpec::None, 1 << 20, &memory);
    let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    let mut batches_out = [0usize; 4];
    let mut collect = |p: &mut MapPipeline, got: &mut Vec<Vec<Vec<u8>>>| {
        for d in 0..4 {
            for b in p.take_output(d) {
                assert!(b.payload_len() <= page, "a {}-byte page", b.payload_len());
                batches_out[d] += 1;
                got[d].extend(b.view().iter().map(|r| r.value.to_vec()));
            }
        }
    };
    for i in 0..400u32 {
        let mut b = RecordBatch::new(Layout::Variable);
        for j in 0..400u32 {
            let key = u64::from(i * 400 + j).to_le_bytes();
            let value = format!("record {i}/{j} {}", "v".repeat((j % 40) as usize)).into_bytes();
            want[f.partition(&key) as usize].push(value.clone());
            b.push(&key, &value).expect("push");
        }
        p.push(&b.view()).expect("push");
        if i == 150 {
            p.flush_stages().expect("flush");
        }
        collect(&mut p, &mut got);
    }
    p.finish().expect("finish");
    collect(&mut p, &mut got);
    for d in 0..4 {
        assert_eq!(got[d], want[d], "destination {d}");
        let bytes: usize = want[d].iter().map(|v| v.len() + 16).sum();
        // Full pages but for the flush and the end: within two pages of
        // the fewest that could hold the bytes.
        assert!(batches_out[d] <= bytes / page + 3, "{} batches for {bytes} bytes", batches_out[d]);
    }
    let mut bad = MapPipeline::new(
        Layout::Variable,
        Arc::new(Overshoot),
        Arc::new(PagePool::new(page)),
        &StageSpec::None,
        1 << 20,
        &memory,
    );
    let mut b = RecordBatch::new(Layout::Variable);
    b.push(&[0xff], b"lost?").expect("push");
    let err = bad.push(&b.view()).expect_err("partition 4 of 4");
    assert!(err.to_string().contains("partition 4 of 4"), "{err}");
}
