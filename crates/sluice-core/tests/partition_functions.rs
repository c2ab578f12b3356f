//! Evenness of every hash partition function on uniform, sequential and
//! Zipf(1.1) keys: the largest partition is bounded relative to the mean
//! (and, for skewed keys, to the heaviest single key, which no function can
//! split).

use std::collections::HashMap;

use sluice_core::datagen::{zipf::Zipf, SplitMix64};
use sluice_core::partition::{FoldHash, MaskPartitioner, Partitioner, Xxh3Hash};

const RECORDS_PER_PARTITION: usize = 256;

fn functions(p: u32) -> Vec<Box<dyn Partitioner>> {
    vec![
        Box::new(FoldHash::new(p).expect("fold")),
        Box::new(Xxh3Hash::new(p).expect("xxh3")),
        Box::new(MaskPartitioner::new(p).expect("mask")),
    ]
}

fn keys(kind: &str, n: usize) -> Vec<u64> {
    let mut rng = SplitMix64::new(11);
    match kind {
        "uniform" => (0..n).map(|_| rng.next_u64()).collect(),
        "sequential" => (0..n as u64).collect(),
        "zipf" => {
            let z = Zipf::new(100_000, 1.1);
            (0..n).map(|_| z.sample(&mut rng)).collect()
        }
        _ => unreachable!(),
    }
}

/// (largest partition, mean partition, heaviest key's count)
fn spread(f: &dyn Partitioner, keys: &[u64]) -> (f64, f64, f64) {
    let mut counts = vec![0usize; f.partitions() as usize];
    let mut per_key: HashMap<u64, usize> = HashMap::new();
    for k in keys {
        counts[f.partition(&k.to_le_bytes()) as usize] += 1;
        *per_key.entry(*k).or_default() += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    let mean = keys.len() as f64 / counts.len() as f64;
    let heaviest = per_key.values().copied().max().unwrap_or(0) as f64;
    (max, mean, heaviest)
}

#[test]
fn hashes_spread_keys_evenly() {
    for p in [7u32, 32, 1024] {
        let n = p as usize * RECORDS_PER_PARTITION;
        for kind in ["uniform", "sequential", "zipf"] {
            let ks = keys(kind, n);
            for f in functions(p) {
                let (max, mean, heaviest) = spread(f.as_ref(), &ks);
                // Poisson(256) stays below mean + 6 sigma with room to spare.
                let bound = match kind {
                    "zipf" => heaviest + 1.5 * mean,
                    _ => 1.4 * mean,
                };
                assert!(
                    max <= bound,
                    "{} on {kind} keys, P = {p}: largest partition {max}, mean {mean:.1}, \
                     heaviest key {heaviest}, bound {bound:.1}",
                    f.name()
                );
            }
        }
    }
}

#[test]
fn the_mask_is_exactly_even_on_sequential_keys() {
    let f = MaskPartitioner::new(64).expect("mask");
    let (max, mean, _) = spread(&f, &keys("sequential", 64 * 100));
    assert_eq!(max, mean);
}
