//! Sorted runs on the map side and their merge on the reduce side, against
//! a plain sort, with budgets that force several runs and spilled runs.

use proptest::prelude::*;
use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::sort::{SortMerge, SortRuns};
use sluice_core::reorg::{Emitter, SpillConfig};

/// Records as (key, value) pairs.
type Recs = Vec<(Vec<u8>, Vec<u8>)>;

fn records(seed: u64, n: usize, layout: Layout, key_domain: u64) -> Recs {
    let mut x = seed | 1;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 11
    };
    (0..n)
        .map(|i| match layout {
            Layout::Fixed { key_width, value_width } => {
                let mut k = (next() % key_domain).to_be_bytes().to_vec();
                k.resize(usize::from(key_width), (next() % 3) as u8);
                let mut v = (i as u64).to_le_bytes().to_vec();
                v.resize(value_width as usize, 0);
                (k, v)
            }
            Layout::Variable => {
                let len = (next() % 14) as usize;
                let k: Vec<u8> = (0..len).map(|_| (next() % 4) as u8).collect();
                (k, (i as u32).to_le_bytes().to_vec())
            }
        })
        .collect()
}

/// Sorts `recs` as three map tasks would (runs of `threshold` bytes) and
/// merges the runs within `budget`: all at once, or, with `piece`, through
/// the streaming merge `piece` payload bytes at a time, its runs in memory
/// sent to disk after the first piece. Returns the output, the runs and the
/// spilled runs.
fn run(
    recs: &[(Vec<u8>, Vec<u8>)],
    layout: Layout,
    threshold: usize,
    budget: usize,
    piece: Option<u64>,
) -> (Recs, u64, u64) {
    let pool = MemoryPool::new(budget);
    let spill = SpillConfig {
        dir: std::env::temp_dir(),
        codec: sluice_core::Codec::None,
        ..SpillConfig::default()
    };
    let mut merge = SortMerge::new(layout, &pool, spill);
    let mut runs_emitted = 0;
    // Three map tasks.
    for part in recs.chunks(recs.len().div_ceil(3).max(1)) {
        let map_pool = MemoryPool::unbounded();
        let mut s = SortRuns::new(layout, threshold, &map_pool);
        let mut out = Emitter::new(layout);
        for chunk in part.chunks(53) {
            let mut b = RecordBatch::new(layout);
            for (k, v) in chunk {
                b.push(k, v).expect("push");
            }
            s.push(&b.view(), &mut out).expect("sort push");
        }
        s.finish(&mut out).expect("sort finish");
        runs_emitted += s.stats().runs;
        for run in out.into_runs() {
            for b in &run {
                let keys: Vec<&[u8]> = b.iter().map(|r| r.key).collect();
                assert!(keys.windows(2).all(|w| w[0] <= w[1]), "a run is sorted");
            }
            merge.add_run(run).expect("add run");
        }
    }
    let mut out = Emitter::new(layout);
    let spilled = merge.stats().spilled_runs;
    let mut batches = Vec::new();
    match piece {
        None => merge.finish(&mut out).expect("merge"),
        Some(bytes) => {
            let mut stream = merge.into_stream().expect("stream");
            let mut pieces = 0u64;
            while stream.emit_some(&mut out, bytes).expect("merge piece") {
                batches.extend(out.take_batches());
                pieces += 1;
                if pieces == 1 {
                    // Another consumer wants the memory: the runs still in
                    // memory go to disk midway and the merge goes on.
                    let held = stream.memory_bytes();
                    let sent = stream.spill_memory_runs().expect("spill runs");
                    assert_eq!(sent.freed, held as u64, "{sent:?}");
                    assert!(sent.moved <= sent.freed, "{sent:?}");
                    assert_eq!(sent.moved > 0, sent.written > 0, "{sent:?}");
                    assert_eq!((stream.memory_bytes(), pool.used()), (0, 0), "memory kept");
                }
            }
            assert_eq!(stream.emitted(), recs.len() as u64, "every record emitted");
            let total: u64 = recs.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
            // A piece stops at the first record that reaches `bytes`, so it
            // holds less than `bytes` plus one record (and its two lengths).
            let largest = recs.iter().map(|(k, v)| (k.len() + v.len()) as u64 + 8).max();
            let most = bytes + largest.unwrap_or(0);
            assert!(pieces + 1 >= total / most.max(1), "{pieces} pieces for {total} bytes");
        }
    }
    batches.extend(out.into_batches());
    (pairs(&batches), runs_emitted, spilled)
}

/// The records of `batches` as (key, value) pairs, in order.
fn pairs(batches: &[RecordBatch]) -> Recs {
    batches.iter().flat_map(|b| b.iter().map(|r| (r.key.to_vec(), r.value.to_vec()))).collect()
}

/// Adds `recs` (variable layout) to `merge` as runs of `per` records each,
/// each sorted.
fn add_sorted_runs(merge: &mut SortMerge, recs: &[(Vec<u8>, Vec<u8>)], per: usize) {
    for chunk in recs.chunks(per) {
        let mut sorted = chunk.to_vec();
        sorted.sort();
        let mut b = RecordBatch::new(Layout::Variable);
        for (k, v) in &sorted {
            b.push(k, v).expect("push");
        }
        merge.add_run(vec![b]).expect("add run");
    }
}

fn check(recs: &[(Vec<u8>, Vec<u8>)], got: &[(Vec<u8>, Vec<u8>)]) {
    assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "output is in key order");
    let mut a = recs.to_vec();
    let mut b = got.to_vec();
    a.sort();
    b.sort();
    assert!(a == b, "every record comes out exactly once");
}

#[test]
fn many_runs_some_on_disk() {
    for layout in [
        Layout::fixed(8, 4).expect("l"),
        Layout::fixed(10, 90).expect("l"),
        Layout::fixed(32, 4).expect("l"),
        Layout::Variable,
    ] {
        let recs = records(11, 20_000, layout, 5000);
        for piece in [None, Some(1000), Some(1 << 20)] {
            let (got, runs, spilled) = run(&recs, layout, 64 << 10, 128 << 10, piece);
            assert!(runs > 3, "{layout}: {runs} runs");
            assert!(spilled > 0, "{layout}: no run spilled");
            check(&recs, &got);
        }
    }
}

#[test]
fn empty_input_gives_empty_output() {
    let layout = Layout::fixed(8, 4).expect("l");
    for piece in [None, Some(1)] {
        let (got, runs, _) = run(&[], layout, 1 << 20, 1 << 20, piece);
        assert!(got.is_empty());
        assert_eq!(runs, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn random_sorts_match_a_plain_sort(
        seed in any::<u64>(),
        n in 0usize..5000,
        domain in 1u64..10_000,
        which in 0usize..4,
        threshold in (4usize << 10)..(128 << 10),
        budget in 0usize..(512 << 10),
        piece in proptest::option::of(1u64..8192),
    ) {
        let layout = [Layout::fixed(8, 4).expect("l"), Layout::fixed(4, 0).expect("l"), Layout::fixed(16, 8).expect("l"), Layout::Variable][which];
        let recs = records(seed, n, layout, domain);
        let (got, _, _) = run(&recs, layout, threshold, budget, piece);
        check(&recs, &got);
    }
}

#[test]
fn a_pool_that_refuses_everything_still_gives_sorted_runs_of_all_input() {
    for layout in [Layout::fixed(8, 4).expect("layout"), Layout::Variable] {
        let recs = records(21, 3_000, layout, 1 << 30);
        let memory = MemoryPool::new(0);
        let mut runs = SortRuns::new(layout, 1 << 20, &memory);
        let mut out = Emitter::new(layout);
        for chunk in recs.chunks(500) {
            let mut b = RecordBatch::new(layout);
            for (k, v) in chunk {
                b.push(k, v).expect("push");
            }
            runs.push(&b.view(), &mut out).expect("a refused pool still makes progress");
        }
        runs.finish(&mut out).expect("finish");
        assert_eq!(runs.stats().bypass_runs, 6, "{layout:?}: one bypass run per batch");
        assert_eq!(memory.peak(), 0);
        let mut got = Vec::new();
        for run in out.into_runs() {
            let keys: Vec<(Vec<u8>, Vec<u8>)> = run
                .iter()
                .flat_map(|b| b.iter().map(|r| (r.key.to_vec(), r.value.to_vec())))
                .collect();
            assert!(keys.windows(2).all(|w| w[0].0 <= w[1].0), "{layout:?}: a run out of order");
            got.extend(keys);
        }
        let mut want = recs.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{layout:?}: every record once");
    }
}

/// Prefixes drawn from one of several distributions: uniform 64-bit (the
/// passes cover only the top bits, the fix-up the rest), a small domain
/// (an exact sort of few bits), a shared high part with varying low bits,
/// clusters (large groups for the fix-up), and all equal.
fn prefixes(kind: u8, seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed | 1;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x ^ (x >> 29)
    };
    (0..n)
        .map(|_| match kind % 5 {
            0 => next(),
            1 => next() % 97,
            2 => 0xdead_beef_0000_0000 | (next() & 0xffff_ffff),
            3 => ((next() % 3) << 60) | (next() & 0xffff),
            _ => 42,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The kernel's radix sort (top-bits passes, then the fix-up) gives the
    /// order of a stable sort by prefix, ties in input order.
    #[test]
    fn radix_sort_is_a_stable_sort_by_prefix(kind in 0u8..5, seed: u64, n in 0usize..20_000) {
        use sluice_core::reorg::sort::kernel::{radix_sort, SortEntry};
        let mut entries: Vec<SortEntry> = prefixes(kind, seed, n)
            .into_iter()
            .enumerate()
            .map(|(i, prefix)| SortEntry { prefix, off: i as u32, len: 1 })
            .collect();
        let mut want = entries.clone();
        want.sort_by_key(|e| e.prefix);
        radix_sort(&mut entries, &mut Vec::new());
        prop_assert_eq!(entries, want);
    }
}

/// Two hundred runs, every one spilled, merge with at most four read at
/// once: passes first merge them four at a time (200 -> 50 -> 13 -> 4),
/// and the output is every record once, in key order, with no spill file
/// left behind.
#[test]
fn spilled_runs_beyond_the_fan_in_merge_in_passes() {
    let layout = Layout::Variable;
    let recs = records(5, 20_000, layout, 5000);
    let dir = tempfile::tempdir().expect("tmp");
    let pool = MemoryPool::new(0);
    let spill =
        SpillConfig { dir: dir.path().to_path_buf(), codec: sluice_core::Codec::Lz4, fan_in: 4 };
    let mut merge = SortMerge::new(layout, &pool, spill);
    add_sorted_runs(&mut merge, &recs, 100);
    assert_eq!(merge.stats().spilled_runs, 200);
    let mut out = Emitter::new(layout);
    merge.finish(&mut out).expect("merge");
    assert_eq!(merge.stats().merge_passes, 3);
    check(&recs, &pairs(&out.into_batches()));
    drop(merge);
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
    assert!(left.is_empty(), "spill files left: {left:?}");
}

/// A merge whose runs cannot go to disk (the spill directory is gone)
/// reports the error and is left as it was: its runs still in memory and
/// accounted, every record still coming out once, in key order.
#[test]
fn a_failed_spill_of_the_runs_in_memory_leaves_the_merge_whole() {
    let layout = Layout::Variable;
    let recs = records(9, 20_000, layout, 5000);
    let dir = tempfile::tempdir().expect("tmp");
    let pool = MemoryPool::new(64 << 20);
    let spill = SpillConfig { dir: dir.path().join("gone"), ..SpillConfig::default() };
    let mut merge = SortMerge::new(layout, &pool, spill);
    add_sorted_runs(&mut merge, &recs, 1_000);
    assert_eq!(merge.stats().spilled_runs, 0, "every run in memory");
    let mut stream = merge.into_stream().expect("stream");
    let mut out = Emitter::new(layout);
    assert!(stream.emit_some(&mut out, 10_000).expect("a piece"));
    let held = stream.memory_bytes();
    assert!(held > 0);
    assert!(stream.spill_memory_runs().is_err(), "a spill into a missing directory");
    assert_eq!((stream.memory_bytes(), pool.used()), (held, held), "memory given up");
    while stream.emit_some(&mut out, 10_000).expect("merge piece") {}
    check(&recs, &pairs(&out.into_batches()));
}

/// Runs in memory that were read to their end are let go when asked:
/// their memory comes back though nothing is left to write.
#[test]
fn runs_read_to_their_end_give_their_memory_back() {
    let layout = Layout::Variable;
    let dir = tempfile::tempdir().expect("tmp");
    let pool = MemoryPool::new(1 << 20);
    let spill = SpillConfig { dir: dir.path().to_path_buf(), ..SpillConfig::default() };
    let mut merge = SortMerge::new(layout, &pool, spill);
    // A small run of low keys in memory, then a large one of high keys the
    // pool refuses, which goes to disk.
    let run = |from: u32, n: u32| {
        let mut b = RecordBatch::new(layout);
        for i in from..from + n {
            b.push(&i.to_be_bytes(), &[7; 100]).expect("push");
        }
        vec![b]
    };
    merge.add_run(run(0, 1_000)).expect("low keys");
    merge.add_run(run(1_000, 20_000)).expect("high keys");
    assert_eq!(merge.stats().spilled_runs, 1);
    let mut stream = merge.into_stream().expect("stream");
    let mut out = Emitter::new(layout);
    // Past every low key: the run in memory is read to its end.
    assert!(stream.emit_some(&mut out, 200_000).expect("a piece"));
    assert!(stream.emitted() > 1_000);
    let held = stream.memory_bytes();
    let sent = stream.spill_memory_runs().expect("spill");
    assert_eq!((sent.freed, sent.moved, sent.written), (held as u64, 0, 0));
    assert!(held > 0);
    assert_eq!(pool.used(), 0);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        1,
        "only the refused run's file"
    );
    while stream.emit_some(&mut out, 1 << 20).expect("merge piece") {}
    assert_eq!(stream.emitted(), 21_000);
}

/// Thousands of small runs in memory (a reduce task's runs, one per map
/// task and partition) sent to disk midway become one run on disk: the
/// merge's read buffers after the spill are one run's, not one per run
/// (which would hold more memory than the runs did), and records of equal
/// keys still come out in run order.
#[test]
fn many_small_runs_in_memory_go_to_disk_as_one_run() {
    let layout = Layout::Variable;
    let dir = tempfile::tempdir().expect("tmp");
    let pool = MemoryPool::new(64 << 20);
    let spill = SpillConfig { dir: dir.path().to_path_buf(), ..SpillConfig::default() };
    let mut merge = SortMerge::new(layout, &pool, spill);
    let (runs, per_run, keys) = (2_000u32, 25u32, 500u32);
    for run in 0..runs {
        let mut own: Vec<u32> = (0..per_run).map(|i| (run * 7 + i * 13) % keys).collect();
        own.sort_unstable();
        let mut b = RecordBatch::new(layout);
        for k in own {
            b.push(&k.to_be_bytes(), &run.to_be_bytes()).expect("push");
        }
        merge.add_run(vec![b]).expect("add run");
    }
    assert_eq!(merge.stats().spilled_runs, 0, "every run in memory");
    let mut stream = merge.into_stream().expect("stream");
    let mut out = Emitter::new(layout);
    assert!(stream.emit_some(&mut out, 20_000).expect("a piece"));
    let held = stream.memory_bytes();
    let sent = stream.spill_memory_runs().expect("spill");
    assert_eq!(sent.freed, held as u64);
    assert_eq!(pool.used(), 0);
    assert_eq!(
        stream.read_buffer_bytes(),
        sluice_core::reorg::MERGE_RUN_READ_BYTES,
        "one run on disk, not {runs}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1, "one spill file");
    while stream.emit_some(&mut out, 20_000).expect("merge piece") {}
    let got = pairs(&out.into_batches());
    assert_eq!(got.len(), (runs * per_run) as usize, "every record once");
    assert!(got.windows(2).all(|w| w[0] <= w[1]), "key order, equal keys in run order");
}
