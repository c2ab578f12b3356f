//! Partial then final aggregation against a BTreeMap reference, with
//! budgets small enough that both sides spill.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::aggregate::{
    AggFn, AggSpec, FinalAggregate, PartialAggregate, SpillStrategy, ValueType,
};
use sluice_core::reorg::{Emitter, ReorgError, SpillConfig};

/// Records with 8-byte keys from `0..domain` and i32 values.
fn input(seed: u64, records: usize, domain: u64) -> Vec<(u64, i32)> {
    let mut x = seed | 1;
    (0..records)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % domain, ((x >> 8) as i32) % 1000)
        })
        .collect()
}

/// How keys are laid out.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Fixed-width keys of this many bytes: 8 takes the operators' inline
    /// fast path, other widths the general table.
    Fixed(usize),
    /// Variable-layout keys of mixed shapes, as an offloaded shuffle's
    /// engine records look and then some: most are a 5-byte prefix and 8
    /// bytes (the prefixed inline table), some another prefix of the same
    /// length, some 3 or 20 bytes (the general table).
    Mixed,
}

impl Shape {
    fn layout(self, value: ValueType) -> Layout {
        match self {
            Shape::Fixed(kw) => Layout::fixed(kw, value.width()).expect("layout"),
            Shape::Mixed => Layout::Variable,
        }
    }
}

/// A key as stored: big-endian, zero padded to the fixed width, or one of
/// the mixed shapes.
fn key_of(k: u64, shape: Shape) -> Vec<u8> {
    let be = k.to_be_bytes();
    match shape {
        Shape::Fixed(kw) => {
            let mut v = be.to_vec();
            v.resize(kw, 0);
            v
        }
        Shape::Mixed => match k % 10 {
            0 => [&[b'Q', 1, 1, 1, 0][..], &be].concat(),
            1 => be[5..].to_vec(),
            2 => [&be[..], &[7; 12]].concat(),
            _ => [&[b'P', 0, 0, 0, 0][..], &be].concat(),
        },
    }
}

fn batches(
    records: &[(u64, i32)],
    per_batch: usize,
    value: ValueType,
    shape: Shape,
) -> Vec<RecordBatch> {
    records
        .chunks(per_batch.max(1))
        .map(|c| {
            let mut b = RecordBatch::new(shape.layout(value));
            for (k, v) in c {
                b.push(&key_of(*k, shape), &encode(*v, value)).expect("push");
            }
            b
        })
        .collect()
}

/// A value as the record stores it.
fn encode(v: i32, value: ValueType) -> Vec<u8> {
    match value {
        ValueType::I32 => v.to_le_bytes().to_vec(),
        ValueType::I64 => i64::from(v).to_le_bytes().to_vec(),
        ValueType::F32 => (v as f32).to_le_bytes().to_vec(),
        ValueType::F64 => f64::from(v).to_le_bytes().to_vec(),
    }
}

/// The exact answer, as the final operator encodes it.
fn reference(records: &[(u64, i32)], spec: AggSpec, shape: Shape) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut groups: BTreeMap<u64, Vec<i32>> = BTreeMap::new();
    for (k, v) in records {
        groups.entry(*k).or_default().push(*v);
    }
    let float = matches!(spec.value, ValueType::F32 | ValueType::F64);
    groups
        .into_iter()
        .map(|(k, vs)| {
            let sum: i64 = vs.iter().map(|&v| i64::from(v)).sum();
            let out: Vec<u8> = match (spec.func, float) {
                (AggFn::Count, _) => (vs.len() as u64).to_le_bytes().to_vec(),
                (AggFn::Sum, false) => sum.to_le_bytes().to_vec(),
                (AggFn::Sum, true) => (sum as f64).to_le_bytes().to_vec(),
                // i32 inputs never overflow an i64: the flag stays 0.
                (AggFn::SumExact, false) => [sum.to_le_bytes(), [0; 8]].concat(),
                (AggFn::SumExact, true) => [(sum as f64).to_le_bytes(), [0; 8]].concat(),
                (AggFn::Min, false) => {
                    i64::from(*vs.iter().min().expect("min")).to_le_bytes().to_vec()
                }
                (AggFn::Min, true) => {
                    f64::from(*vs.iter().min().expect("min")).to_le_bytes().to_vec()
                }
                (AggFn::Max, false) => {
                    i64::from(*vs.iter().max().expect("max")).to_le_bytes().to_vec()
                }
                (AggFn::Max, true) => {
                    f64::from(*vs.iter().max().expect("max")).to_le_bytes().to_vec()
                }
                (AggFn::Avg, _) => (sum as f64 / vs.len() as f64).to_le_bytes().to_vec(),
                (AggFn::Collect, _) => {
                    let mut vals: Vec<Vec<u8>> =
                        vs.iter().map(|&v| encode(v, spec.value)).collect();
                    vals.sort();
                    vals.concat()
                }
                // Lanes have a test of their own (aggregate_lanes.rs).
                (AggFn::Lanes(_), _) => unreachable!("not among FUNCS"),
            };
            (key_of(k, shape), out)
        })
        .collect()
}

/// Collect lists come back in any order: sort the values for comparison.
fn normalize_collect(list: &[u8]) -> Vec<u8> {
    let mut vals = Vec::new();
    let mut rest = list;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let n = u32::from_le_bytes(*len) as usize;
        vals.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    vals.sort();
    vals.concat()
}

/// Payload bytes asked of a result stream at a time: a few results.
const STREAM_STEP_BYTES: u64 = 100;

struct Outcome {
    result: BTreeMap<Vec<u8>, Vec<u8>>,
    partial_spills: u64,
    final_spills: u64,
    partial_bytes: u64,
}

fn run(
    records: &[(u64, i32)],
    spec: AggSpec,
    strategy: SpillStrategy,
    threshold: usize,
    budget: usize,
    shape: Shape,
) -> Result<Outcome, ReorgError> {
    let layout = shape.layout(spec.value);
    let pool = MemoryPool::new(budget);
    let dir = tempdir();
    // A fan-in of three: a final aggregate with more spilled runs merges
    // them in passes first.
    let spill =
        SpillConfig { dir: dir.path().to_path_buf(), codec: sluice_core::Codec::Lz4, fan_in: 3 };
    // Two map tasks, each with its own partial operator.
    let mut partial_out = Vec::new();
    let mut partial_spills = 0;
    let mut partial_bytes = 0;
    for half in records.chunks(records.len().div_ceil(2).max(1)) {
        let mut p = PartialAggregate::new(spec, layout, threshold, strategy, &pool);
        let mut out = Emitter::new(p.output_layout());
        for b in batches(half, 97, spec.value, shape) {
            p.push(&b.view(), &mut out)?;
        }
        p.finish(&mut out)?;
        partial_spills += p.stats().spill_count();
        partial_bytes += out.bytes();
        partial_out.extend(out.into_batches());
    }
    let mut f = FinalAggregate::new(spec, layout, &pool, spill);
    for b in &partial_out {
        f.push(&b.view())?;
    }
    let mut out = Emitter::new(f.output_layout());
    // Results merged from spilled runs are pulled a few at a time, while
    // the operator holds no state: what a reduce task's reader does.
    if let Some(mut stream) = f.finish_streaming(&mut out)? {
        assert_eq!(pool.used(), 0, "state held while the results stream");
        while stream.emit_some(&mut out, STREAM_STEP_BYTES)? {}
    }
    let final_spills = f.stats().state_spills;
    assert_eq!(f.stats().merge_passes > 0, final_spills > 3, "{:?}", f.stats());
    drop(f);
    assert_eq!(pool.used(), 0, "every reservation is returned");
    assert!(
        std::fs::read_dir(dir.path()).map(|d| d.count()).unwrap_or(0) == 0,
        "spill files removed"
    );
    let mut result = BTreeMap::new();
    for b in out.into_batches() {
        for r in b.iter() {
            let v = if spec.func == AggFn::Collect {
                normalize_collect(r.value)
            } else {
                r.value.to_vec()
            };
            assert!(result.insert(r.key.to_vec(), v).is_none(), "one result per key");
        }
    }
    Ok(Outcome { result, partial_spills, final_spills, partial_bytes })
}

/// A spill directory of its own, removed when the run ends, passed or not.
fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("sluice-agg-test-").tempdir().expect("temp dir")
}

const FUNCS: [AggFn; 7] =
    [AggFn::Sum, AggFn::Count, AggFn::Min, AggFn::Max, AggFn::Avg, AggFn::SumExact, AggFn::Collect];
const TYPES: [ValueType; 4] = [ValueType::I32, ValueType::I64, ValueType::F32, ValueType::F64];

#[test]
fn every_function_and_type_spills_and_stays_exact() {
    every_function_and_type(Shape::Fixed(8));
}

#[test]
fn every_function_and_type_on_the_general_table() {
    every_function_and_type(Shape::Fixed(12));
}

#[test]
fn every_function_and_type_on_mixed_variable_keys() {
    every_function_and_type(Shape::Mixed);
}

fn every_function_and_type(shape: Shape) {
    let records = input(7, 20_000, 3000);
    for func in FUNCS {
        for value in TYPES {
            for strategy in [SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict] {
                let spec = AggSpec::new(func, value);
                let got =
                    run(&records, spec, strategy, 24 << 10, 96 << 10, shape).expect("aggregate");
                assert!(got.partial_spills > 0, "{spec:?} {strategy:?}: partial never spilled");
                assert!(got.final_spills > 0, "{spec:?} {strategy:?}: final never spilled");
                assert_eq!(got.result, reference(&records, spec, shape), "{spec:?} {strategy:?}");
            }
        }
    }
}

#[test]
fn without_pressure_nothing_spills_and_partials_are_fully_aggregated() {
    let records = input(3, 10_000, 100);
    let spec = AggSpec::new(AggFn::Sum, ValueType::I64);
    let got = run(&records, spec, SpillStrategy::State, 1 << 30, 1 << 30, Shape::Fixed(8))
        .expect("aggregate");
    assert_eq!(got.partial_spills, 0);
    assert_eq!(got.final_spills, 0);
    // Two map tasks, at most 100 keys each: at most 200 partials of 16 bytes.
    assert!(got.partial_bytes <= 200 * 16, "{} partial bytes", got.partial_bytes);
    assert_eq!(got.result, reference(&records, spec, Shape::Fixed(8)));
}

/// Keys `prefix ++ 8 bytes` in the variable layout (an offloaded
/// shuffle's engine records: partition id, key tag, the key) are held 8
/// bytes each in the inline table: 1 MiB holds 20,000 groups without a
/// spill, where the general table (keys in an arena, entries, index) spills.
#[test]
fn prefixed_variable_keys_use_the_compact_table() {
    let pool = MemoryPool::unbounded();
    let spec = AggSpec::new(AggFn::Sum, ValueType::I64);
    let mut p = PartialAggregate::new(spec, Layout::Variable, 1 << 20, SpillStrategy::State, &pool);
    let mut out = Emitter::new(p.output_layout());
    let groups = 20_000u64;
    for _ in 0..2 {
        let mut b = RecordBatch::new(Layout::Variable);
        for k in 0..groups {
            let key = [&[3, 0, 0, 0, 0][..], &k.wrapping_mul(0x9E37_79B9).to_le_bytes()].concat();
            b.push(&key, &1i64.to_le_bytes()).expect("push");
        }
        p.push(&b.view(), &mut out).expect("push");
    }
    assert_eq!(p.stats().state_spills, 0, "spilled: {:?}", p.stats());
    p.finish(&mut out).expect("finish");
    let mut partials = 0u64;
    for b in out.into_batches() {
        for r in b.iter() {
            assert_eq!(r.key.len(), 13);
            assert_eq!(&r.key[..5], &[3, 0, 0, 0, 0]);
            assert_eq!(r.value, 2i64.to_le_bytes());
            partials += 1;
        }
    }
    assert_eq!(partials, groups);
}

#[test]
fn a_value_of_the_wrong_width_is_a_typed_error() {
    let pool = MemoryPool::unbounded();
    let layout = Layout::fixed(8, 4).expect("layout");
    let spec = AggSpec::new(AggFn::Sum, ValueType::I64);
    let mut p = PartialAggregate::new(spec, layout, 1 << 20, SpillStrategy::State, &pool);
    let mut b = RecordBatch::new(layout);
    b.push(&1u64.to_be_bytes(), &5i32.to_le_bytes()).expect("push");
    let mut out = Emitter::new(p.output_layout());
    match p.push(&b.view(), &mut out) {
        Err(ReorgError::ValueWidth { record: 0, want: 8, got: 4, .. }) => {}
        other => panic!("expected a value width error, got {other:?}"),
    }
}

#[test]
fn a_wrong_width_among_prefixed_keys_names_its_record_in_the_batch() {
    let pool = MemoryPool::unbounded();
    let spec = AggSpec::new(AggFn::Sum, ValueType::I64);
    let mut p = PartialAggregate::new(spec, Layout::Variable, 1 << 20, SpillStrategy::State, &pool);
    let mut b = RecordBatch::new(Layout::Variable);
    for k in 0..5u64 {
        let key = [&[9, 0, 0, 0, 0][..], &k.to_le_bytes()].concat();
        let value: &[u8] = if k == 3 { &[1, 2, 3, 4] } else { &[1, 0, 0, 0, 0, 0, 0, 0] };
        b.push(&key, value).expect("push");
    }
    let mut out = Emitter::new(p.output_layout());
    match p.push(&b.view(), &mut out) {
        Err(ReorgError::ValueWidth { record: 3, want: 8, got: 4, .. }) => {}
        other => panic!("expected a value width error at record 3, got {other:?}"),
    }
}

#[test]
fn a_budget_below_one_group_is_refused_with_a_typed_error() {
    let records = input(5, 1000, 500);
    let spec = AggSpec::new(AggFn::Sum, ValueType::I32);
    match run(&records, spec, SpillStrategy::State, 1 << 20, 100, Shape::Fixed(8)) {
        Err(ReorgError::Memory(e)) => assert_eq!(e.budget, 100),
        other => panic!("expected a memory error, got {:?}", other.map(|o| o.result.len())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_jobs_match_the_reference(
        seed in any::<u64>(),
        records in 0usize..6000,
        domain in 1u64..4000,
        func in prop::sample::select(FUNCS.to_vec()),
        value in prop::sample::select(TYPES.to_vec()),
        strategy in prop::sample::select(
            vec![SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict]
        ),
        shape in prop::sample::select(vec![Shape::Fixed(8), Shape::Fixed(12), Shape::Mixed]),
        threshold in (9usize << 10)..(64 << 10),
        budget in (40usize << 10)..(256 << 10),
    ) {
        let recs = input(seed, records, domain);
        let spec = AggSpec::new(func, value);
        let got = run(&recs, spec, strategy, threshold, budget, shape).expect("aggregate");
        prop_assert_eq!(got.result, reference(&recs, spec, shape));
    }
}
