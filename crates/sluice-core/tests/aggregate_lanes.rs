//! Several aggregates per group (lanes) through partial then final
//! aggregation, with nulls, 128-bit sums and budgets small enough that both
//! sides spill, against a reference computed row by row.

use std::collections::BTreeMap;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::aggregate::lanes::{OVERFLOW, SEEN};
use sluice_core::reorg::aggregate::{
    AggFn, AggSpec, FinalAggregate, LaneKind, Lanes, PartialAggregate, SpillStrategy, ValueType,
};
use sluice_core::reorg::{Emitter, ReorgError, SpillConfig};

const KINDS: [LaneKind; 5] =
    [LaneKind::Count, LaneKind::Sum64, LaneKind::Sum128, LaneKind::Min64, LaneKind::Max64];

/// A row: its key, and one value per lane (`None`: SQL's null).
type Row = (Vec<u8>, [Option<i128>; 5]);

/// Rows over `domain` keys: an engine record's key (`partition ++ tag ++
/// 8 bytes`, or a longer one for every third key: several grouping
/// columns), values with nulls and 128-bit magnitudes.
fn rows(seed: u64, n: usize, domain: u64) -> Vec<Row> {
    let mut x = seed | 1;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x
    };
    (0..n)
        .map(|_| {
            let k = (next() >> 33) % domain;
            let mut key = vec![(k % 7) as u8, 0, 0, 0, 2];
            key.extend_from_slice(&k.to_le_bytes());
            if k % 3 == 0 {
                key.extend_from_slice(b"and a second column");
            }
            let r = next();
            let small = i128::from((r >> 8) as i32 % 100_000);
            let valid = |bit: u64| (r >> bit) & 3 != 0;
            let big = small * (1i128 << 80);
            let vals = [
                valid(40).then_some(1),
                valid(42).then_some(small),
                valid(44).then_some(big + small),
                valid(48).then_some(small),
                valid(50).then_some(-small),
            ];
            (key, vals)
        })
        .collect()
}

/// Every lane, in `KINDS` order.
const ALL: [usize; 5] = [0, 1, 2, 3, 4];

/// The state words of each lane of `KINDS` in the reference's words.
const WORDS: [std::ops::Range<usize>; 5] = [0..1, 1..3, 3..6, 6..8, 8..10];

fn encode(vals: &[Option<i128>; 5]) -> Vec<u8> {
    encode_lanes(vals, &ALL)
}

/// The input of the lanes `sel` (indices into `KINDS`, in that order).
fn encode_lanes(vals: &[Option<i128>; 5], sel: &[usize]) -> Vec<u8> {
    let mut v = Vec::new();
    for (k, x) in sel.iter().map(|&i| (KINDS[i], vals[i])) {
        match k {
            LaneKind::Count => v.extend_from_slice(&u64::from(x.is_some()).to_le_bytes()),
            LaneKind::Sum64 | LaneKind::Min64 | LaneKind::Max64 => {
                v.push(u8::from(x.is_some()));
                v.extend_from_slice(&(x.unwrap_or(0) as i64).to_le_bytes());
            }
            LaneKind::Sum128 => {
                v.push(u8::from(x.is_some()));
                v.extend_from_slice(&x.unwrap_or(0).to_le_bytes());
            }
        }
    }
    v
}

/// The final state words each key must end with, of the lanes `sel`.
fn reference(rows: &[Row], sel: &[usize]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut by_key: BTreeMap<Vec<u8>, Vec<[Option<i128>; 5]>> = BTreeMap::new();
    for (k, v) in rows {
        by_key.entry(k.clone()).or_default().push(*v);
    }
    by_key
        .into_iter()
        .map(|(k, vs)| {
            let lane = |i: usize| vs.iter().filter_map(move |v| v[i]);
            let seen = |i: usize| if lane(i).next().is_some() { SEEN } else { 0 };
            let sum: i128 = lane(2).sum();
            let words: Vec<u64> = vec![
                lane(0).count() as u64,
                lane(1).map(|x| x as i64).fold(0i64, i64::wrapping_add) as u64,
                seen(1),
                sum as u64,
                (sum >> 64) as u64,
                seen(2),
                lane(3).map(|x| x as i64).min().unwrap_or(0) as u64,
                seen(3),
                lane(4).map(|x| x as i64).max().unwrap_or(0) as u64,
                seen(4),
            ];
            let words = sel.iter().flat_map(|&i| words[WORDS[i].clone()].to_vec());
            (k, words.flat_map(|w| w.to_le_bytes()).collect())
        })
        .collect()
}

struct Outcome {
    result: BTreeMap<Vec<u8>, Vec<u8>>,
    partial_spills: u64,
    final_spills: u64,
}

fn run(
    rows: &[Row],
    sel: &[usize],
    spec: AggSpec,
    strategy: SpillStrategy,
) -> Result<Outcome, ReorgError> {
    let pool = MemoryPool::new(256 << 10);
    let dir = tempfile::Builder::new().prefix("sluice-lanes-test-").tempdir().expect("temp dir");
    let spill =
        SpillConfig { dir: dir.path().to_path_buf(), codec: sluice_core::Codec::Lz4, fan_in: 3 };
    let mut partials = Vec::new();
    let mut partial_spills = 0;
    for half in rows.chunks(rows.len().div_ceil(2)) {
        let mut p = PartialAggregate::new(spec, Layout::Variable, 32 << 10, strategy, &pool);
        let mut out = Emitter::new(p.output_layout());
        for chunk in half.chunks(89) {
            let mut b = RecordBatch::new(Layout::Variable);
            for (k, v) in chunk {
                b.push(k, &encode_lanes(v, sel)).expect("push");
            }
            p.push(&b.view(), &mut out)?;
        }
        p.finish(&mut out)?;
        partial_spills += p.stats().spill_count();
        partials.extend(out.into_batches());
    }
    let mut f = FinalAggregate::new(spec, Layout::Variable, &pool, spill);
    for b in &partials {
        f.push(&b.view())?;
    }
    let mut out = Emitter::new(f.output_layout());
    f.finish(&mut out)?;
    let final_spills = f.stats().state_spills;
    drop(f);
    assert_eq!(pool.used(), 0, "every reservation is returned");
    let mut result = BTreeMap::new();
    for b in out.into_batches() {
        for r in b.iter() {
            assert!(result.insert(r.key.to_vec(), r.value.to_vec()).is_none(), "one per key");
        }
    }
    Ok(Outcome { result, partial_spills, final_spills })
}

fn spec() -> AggSpec {
    spec_of(&ALL)
}

/// The lanes `sel` of `KINDS`.
fn spec_of(sel: &[usize]) -> AggSpec {
    let kinds: Vec<LaneKind> = sel.iter().map(|&i| KINDS[i]).collect();
    AggSpec::new(AggFn::Lanes(Lanes::new(&kinds).expect("lanes")), ValueType::I64)
}

#[test]
fn every_lane_with_nulls_spills_and_stays_exact() {
    let rows = rows(11, 30_000, 4000);
    let want = reference(&rows, &ALL);
    for strategy in [SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict] {
        let got = run(&rows, &ALL, spec(), strategy).expect("aggregate");
        assert!(got.partial_spills > 0, "{strategy:?}: partial never spilled");
        assert!(got.final_spills > 0, "{strategy:?}: final never spilled");
        assert_eq!(got.result.len(), want.len());
        assert!(got.result == want, "{strategy:?}: results differ from the reference");
    }
}

/// States of one to eight words take the inline table for their 8-byte
/// keys (the evicting one for one or two words), wider ones the general
/// table: every width and strategy, beside the longer keys of the general
/// table in the same input, ends exact.
#[test]
fn lanes_of_every_width_spill_and_stay_exact() {
    let rows = rows(23, 20_000, 3000);
    // Words: 1, 2, 3 (count, sum64), 4 (a decimal's average), 6, 8, 10.
    let selections: [&[usize]; 7] = [&[0], &[1], &[0, 1], &[2, 0], &[2, 2], &[2, 0, 1, 3], &ALL];
    for sel in selections {
        let want = reference(&rows, sel);
        for strategy in [SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict] {
            let got = run(&rows, sel, spec_of(sel), strategy).expect("aggregate");
            assert!(got.partial_spills > 0, "{sel:?} {strategy:?}: partial never spilled");
            assert!(got.result == want, "{sel:?} {strategy:?}: results differ");
        }
    }
}

#[test]
fn a_sum_beyond_its_width_is_flagged_in_the_result() {
    let kinds = [LaneKind::Sum128];
    let spec = AggSpec::new(AggFn::Lanes(Lanes::new(&kinds).expect("lanes")), ValueType::I64);
    let pool = MemoryPool::new(1 << 20);
    let mut p = PartialAggregate::new(spec, Layout::Variable, 1 << 20, SpillStrategy::State, &pool);
    let mut out = Emitter::new(p.output_layout());
    let mut b = RecordBatch::new(Layout::Variable);
    for _ in 0..3 {
        let mut v = vec![1u8];
        v.extend_from_slice(&(i128::MAX / 2).to_le_bytes());
        b.push(b"k", &v).expect("push");
    }
    p.push(&b.view(), &mut out).expect("push");
    p.finish(&mut out).expect("finish");
    let batches = out.into_batches();
    let r = batches[0].iter().next().expect("one group");
    assert_eq!(r.value.len(), 24);
    let flags = u64::from_le_bytes(r.value[16..24].try_into().expect("8 bytes"));
    assert_eq!(flags, SEEN | OVERFLOW);
}

#[test]
fn a_value_of_the_wrong_width_is_a_typed_error() {
    let pool = MemoryPool::new(1 << 20);
    let mut p =
        PartialAggregate::new(spec(), Layout::Variable, 1 << 20, SpillStrategy::State, &pool);
    let mut out = Emitter::new(p.output_layout());
    let mut b = RecordBatch::new(Layout::Variable);
    b.push(b"k", &encode(&[Some(1); 5])).expect("push");
    b.push(b"k", &[0u8; 7]).expect("push");
    let err = p.push(&b.view(), &mut out).expect_err("a short value");
    assert!(matches!(err, ReorgError::ValueWidth { record: 1, want: 52, got: 7, .. }), "{err:?}");
}

/// A decimal's average (a 128-bit sum and a count: four words) by a
/// Spark SQL key row of one long (the engine's key: a 4-byte partition id,
/// the row's null bits, the long) keeps its groups beside the 8 bytes of
/// the long, about 55 bytes each at the table's load limit: 4,000 groups
/// fit in 256 KiB without a spill, where the general table (key bytes,
/// index and states apart) spilled its state five times.
#[test]
fn an_average_by_a_long_key_keeps_its_groups_inline() {
    let sel = [2, 0];
    let spec = spec_of(&sel);
    let pool = MemoryPool::unbounded();
    let mut p =
        PartialAggregate::new(spec, Layout::Variable, 256 << 10, SpillStrategy::Evict, &pool);
    let mut out = Emitter::new(p.output_layout());
    let groups = 4_000u64;
    for round in 0..3 {
        let mut b = RecordBatch::new(Layout::Variable);
        for k in 0..groups {
            let mut key = vec![3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            key.extend_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
            b.push(
                &key,
                &encode_lanes(&[Some(1), None, Some(i128::from(round)), None, None], &sel),
            )
            .expect("push");
        }
        p.push(&b.view(), &mut out).expect("push");
    }
    let s = p.stats();
    assert_eq!(s.spill_count(), 0, "{s:?}");
    assert!(s.state_bytes <= 256 << 10, "{s:?}");
    p.finish(&mut out).expect("finish");
    assert_eq!(p.stats().emitted_records, groups, "one partial per group");
}
