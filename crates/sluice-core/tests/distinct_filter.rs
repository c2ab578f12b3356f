//! Distinct against a set reference (both spill strategies, with spilling
//! forced on both sides) and filter against direct evaluation.

use std::collections::BTreeSet;

use proptest::prelude::*;
use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::aggregate::SpillStrategy;
use sluice_core::reorg::distinct::{DistinctBy, FinalDistinct, PartialDistinct};
use sluice_core::reorg::filter::{CmpOp, Constant, Field, FieldType, Filter, Part, Predicate};
use sluice_core::reorg::{Emitter, SpillConfig};

fn batch(layout: Layout, seed: u64, n: usize, domain: u64) -> Vec<RecordBatch> {
    let mut x = seed | 1;
    let mut out = Vec::new();
    let mut b = RecordBatch::new(layout);
    for _ in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let k = (x >> 33) % domain;
        let v = ((x >> 13) % 4) as i32 - 1;
        match layout {
            Layout::Variable => b.push(&k.to_be_bytes()[(k % 4) as usize..], &v.to_le_bytes()),
            _ => b.push(&k.to_be_bytes(), &v.to_le_bytes()),
        }
        .expect("push");
        if b.len() == 101 {
            out.push(std::mem::replace(&mut b, RecordBatch::new(layout)));
        }
    }
    out.push(b);
    out
}

/// Distinct (key, value) pairs.
type Set = BTreeSet<(Vec<u8>, Vec<u8>)>;

fn distinct(
    input: &[RecordBatch],
    layout: Layout,
    by: DistinctBy,
    strategy: SpillStrategy,
    threshold: usize,
    budget: usize,
) -> (Set, u64, u64, usize) {
    let pool = MemoryPool::new(budget);
    let map_pool = MemoryPool::unbounded();
    let mut p = PartialDistinct::new(by, layout, threshold, strategy, &map_pool);
    let mut mid = Emitter::new(p.output_layout());
    for b in input {
        p.push(&b.view(), &mut mid).expect("partial");
    }
    p.finish();
    let spill = SpillConfig {
        dir: std::env::temp_dir(),
        codec: sluice_core::Codec::Lz4,
        ..SpillConfig::default()
    };
    let mut f = FinalDistinct::new(by, p.output_layout(), &pool, spill);
    for b in mid.into_batches() {
        f.push(&b.view()).expect("final");
    }
    let mut out = Emitter::new(f.output_layout());
    // Items merged from spilled runs are pulled one or two at a time,
    // while the set holds nothing.
    if let Some(mut stream) = f.finish_streaming(&mut out).expect("finish") {
        assert_eq!(pool.used(), 0, "state held while the items stream");
        while stream.emit_some(&mut out, 1).expect("stream") {}
    }
    let mut got = BTreeSet::new();
    let mut n = 0;
    for b in out.into_batches() {
        for r in b.iter() {
            got.insert((r.key.to_vec(), r.value.to_vec()));
            n += 1;
        }
    }
    (got, p.stats().spill_count(), f.stats().state_spills, n)
}

fn reference(input: &[RecordBatch], by: DistinctBy) -> Set {
    input
        .iter()
        .flat_map(|b| {
            b.iter()
                .map(|r| match by {
                    DistinctBy::Key => (r.key.to_vec(), Vec::new()),
                    DistinctBy::Record => (r.key.to_vec(), r.value.to_vec()),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn distinct_spills_on_both_sides_and_stays_exact() {
    for layout in [Layout::fixed(8, 4).expect("l"), Layout::Variable] {
        let input = batch(layout, 9, 30_000, 4000);
        for by in [DistinctBy::Key, DistinctBy::Record] {
            for strategy in [SpillStrategy::State, SpillStrategy::Input, SpillStrategy::Evict] {
                let (got, partial_spills, final_spills, n) =
                    distinct(&input, layout, by, strategy, 16 << 10, 64 << 10);
                let want = reference(&input, by);
                assert!(partial_spills > 0, "{layout} {by:?} {strategy:?}");
                assert!(final_spills > 0, "{layout} {by:?} {strategy:?}");
                assert_eq!(n, want.len(), "no duplicates out");
                assert_eq!(got, want, "{layout} {by:?} {strategy:?}");
            }
        }
    }
}

fn value_i32(v: &[u8]) -> i32 {
    i32::from_le_bytes(v.try_into().expect("4 bytes"))
}

#[test]
fn filter_matches_direct_evaluation() {
    let layout = Layout::fixed(8, 4).expect("l");
    let input = batch(layout, 3, 5000, 1000);
    let v = |op, c| Predicate::Cmp {
        field: Field { part: Part::Value, offset: 0, ty: FieldType::I32 },
        op,
        value: Constant::Int(c),
    };
    let k = |op, c: u64| Predicate::Cmp {
        field: Field { part: Part::Key, offset: 0, ty: FieldType::Bytes(8) },
        op,
        value: Constant::Bytes(c.to_be_bytes().to_vec()),
    };
    type Check = fn(&[u8], &[u8]) -> bool;
    let cases: Vec<(Predicate, Check)> = vec![
        (v(CmpOp::Gt, 0), |_, val| value_i32(val) > 0),
        (v(CmpOp::Eq, -1).or(v(CmpOp::Ge, 2)), |_, val| {
            let x = value_i32(val);
            x == -1 || x >= 2
        }),
        (k(CmpOp::Lt, 500).and(v(CmpOp::Ne, 0).negate()), |key, val| {
            key < &500u64.to_be_bytes()[..] && value_i32(val) == 0
        }),
        (Predicate::KeyPrefix(vec![0, 0, 0, 0, 0, 0, 1]), |key, _| {
            key.starts_with(&[0, 0, 0, 0, 0, 0, 1])
        }),
        (
            Predicate::Cmp {
                field: Field { part: Part::Value, offset: 2, ty: FieldType::I32 },
                op: CmpOp::Eq,
                value: Constant::Int(0),
            },
            |_, _| false,
        ),
        (Predicate::True, |_, _| true),
    ];
    for (pred, check) in cases {
        let mut f = Filter::new(pred.clone());
        let mut out = Emitter::new(layout);
        for b in &input {
            f.push(&b.view(), &mut out).expect("filter");
        }
        let got: Vec<(Vec<u8>, Vec<u8>)> = out
            .into_batches()
            .iter()
            .flat_map(|b| b.iter().map(|r| (r.key.to_vec(), r.value.to_vec())).collect::<Vec<_>>())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = input
            .iter()
            .flat_map(|b| {
                b.iter()
                    .filter(|r| check(r.key, r.value))
                    .map(|r| (r.key.to_vec(), r.value.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(got, want, "{pred:?}");
        assert_eq!(f.emitted_records, want.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_distincts_match_a_set(
        seed in any::<u64>(),
        n in 0usize..8000,
        domain in 1u64..5000,
        variable in any::<bool>(),
        by_record in any::<bool>(),
        input_strategy in any::<bool>(),
        threshold in (4usize << 10)..(64 << 10),
        budget in (16usize << 10)..(256 << 10),
    ) {
        let layout = if variable { Layout::Variable } else { Layout::fixed(8, 4).expect("l") };
        let by = if by_record { DistinctBy::Record } else { DistinctBy::Key };
        let strategy = if input_strategy { SpillStrategy::Input } else { SpillStrategy::State };
        let input = batch(layout, seed, n, domain);
        let (got, _, _, count) = distinct(&input, layout, by, strategy, threshold, budget);
        let want = reference(&input, by);
        prop_assert_eq!(count, want.len());
        prop_assert_eq!(got, want);
    }
}
