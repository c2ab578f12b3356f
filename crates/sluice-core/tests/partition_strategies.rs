//! Every partition strategy against a trivial reference: every input record
//! comes out exactly once, in the partition its function names, for 1 to 4
//! threads, 1 to 65,536 partitions, fixed and variable layouts, empty input
//! and a record larger than a page.

use proptest::prelude::*;
use sluice_core::datagen::SplitMix64;
use sluice_core::partition::{
    FoldHash, MaskPartitioner, PagePool, PartitionJob, Partitioned, Partitioner, StrategyKind,
    Xxh3Hash,
};
use sluice_core::{BatchView, Layout, RecordBatch};

/// Per partition, the sorted raw bytes of its records.
type Expected = Vec<Vec<Vec<u8>>>;

fn raw_of(view: &BatchView<'_>) -> Vec<Vec<u8>> {
    let mut it = view.raw();
    std::iter::from_fn(|| it.next_raw().map(|r| r.bytes.to_vec())).collect()
}

fn reference(input: &[RecordBatch], f: &dyn Partitioner) -> Expected {
    let mut out: Expected = vec![Vec::new(); f.partitions() as usize];
    for b in input {
        let view = b.view();
        let mut it = view.raw();
        while let Some(r) = it.next_raw() {
            out[f.partition(r.key) as usize].push(r.bytes.to_vec());
        }
    }
    for p in &mut out {
        p.sort();
    }
    out
}

fn actual(out: &Partitioned) -> Expected {
    (0..out.partitions())
        .map(|p| {
            let mut recs: Vec<Vec<u8>> = out.views(p).iter().flat_map(raw_of).collect();
            recs.sort();
            recs
        })
        .collect()
}

fn run(
    kind: StrategyKind,
    input: &[RecordBatch],
    layout: Layout,
    f: &dyn Partitioner,
    threads: usize,
    pool: &PagePool,
) -> Partitioned {
    let views: Vec<BatchView<'_>> = input.iter().map(RecordBatch::view).collect();
    let job = PartitionJob { layout, input: &views, partitioner: f, threads, pool };
    let out = kind.build().run(&job).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    assert_eq!(out.partitions(), f.partitions() as usize, "{kind:?}");
    // Pages never exceed the page size unless they hold one oversized record.
    if let Partitioned::Pages(pages) = &out {
        for p in 0..out.partitions() {
            for page in pages.pages(p) {
                assert!(!page.is_empty(), "{kind:?}: empty page in partition {p}");
                if kind != StrategyKind::Naive {
                    assert!(
                        page.bytes() <= pool.page_bytes() || page.len() == 1,
                        "{kind:?}: page of {} bytes",
                        page.bytes()
                    );
                }
            }
        }
    }
    out
}

fn batches(layout: Layout, records: usize, seed: u64) -> Vec<RecordBatch> {
    let mut rng = SplitMix64::new(seed);
    // Uneven batch sizes, one of them empty.
    let sizes = [records / 3, 0, records / 5, records / 7, 1, records / 11];
    let mut left = records;
    let mut out = Vec::new();
    for (i, &n) in sizes.iter().chain(std::iter::once(&usize::MAX)).enumerate() {
        let n = n.min(left);
        let mut b = RecordBatch::new(layout);
        for _ in 0..n {
            let (k, v) = match layout {
                Layout::Fixed { key_width, value_width } => {
                    (usize::from(key_width), value_width as usize)
                }
                Layout::Variable => (rng.below(24) as usize, rng.below(200) as usize),
            };
            let mut key = vec![0u8; k];
            let mut value = vec![0u8; v];
            rng.fill(&mut key);
            rng.fill(&mut value);
            b.push(&key, &value).expect("record");
        }
        left -= n;
        out.push(b);
        if left == 0 && i >= sizes.len() {
            break;
        }
    }
    out
}

#[test]
fn every_strategy_matches_the_reference_on_the_grid() {
    let layouts = [
        Layout::fixed(4, 0).expect("4 B"),
        Layout::TUPLE16,
        Layout::fixed(4, 96).expect("100 B"),
        Layout::Variable,
    ];
    let pool = PagePool::new(4096);
    for (li, layout) in layouts.into_iter().enumerate() {
        let input = batches(layout, 2500, li as u64);
        for parts in [1u32, 2, 7, 32, 1024, 65_536] {
            let fold = FoldHash::new(parts).expect("fold");
            let xxh = Xxh3Hash::new(parts).expect("xxh3");
            let f: &dyn Partitioner = if parts % 2 == 0 { &fold } else { &xxh };
            let expected = reference(&input, f);
            for threads in 1..=4 {
                for kind in StrategyKind::ALL {
                    let out = run(kind, &input, layout, f, threads, &pool);
                    assert!(
                        actual(&out) == expected,
                        "{kind:?}, {layout}, {parts} partitions, {threads} threads"
                    );
                    if let Partitioned::Pages(pages) = out {
                        pool.recycle_all(pages.into_pages());
                    }
                }
            }
        }
    }
}

#[test]
fn fused_partition_functions_match_the_reference_on_every_strategy() {
    // Local pages fuse the mask (keys of 4 bytes and more) and the fold hash
    // (8-byte keys, 2^k partitions with k in {1, 2, 4, 8, 16}) into their
    // copy loop; other keys and counts take the general path.
    let layouts = [
        Layout::fixed(4, 0).expect("4 B"),
        Layout::TUPLE16,
        Layout::fixed(8, 8).expect("16 B"),
        Layout::fixed(8, 4).expect("12 B"),
        Layout::fixed(2, 6).expect("short key"),
    ];
    let pool = PagePool::new(4096);
    for (li, layout) in layouts.into_iter().enumerate() {
        let input = batches(layout, 3000, 40 + li as u64);
        for (parts, fold) in
            [1u32, 2, 16, 256, 1024, 65_536, 7].into_iter().flat_map(|p| [(p, false), (p, true)])
        {
            let mask = MaskPartitioner::new(parts).expect("mask");
            let hash = FoldHash::new(parts).expect("fold");
            let f: &dyn Partitioner = if fold { &hash } else { &mask };
            let expected = reference(&input, f);
            for threads in [1, 3] {
                for kind in StrategyKind::ALL {
                    let out = run(kind, &input, layout, f, threads, &pool);
                    assert!(
                        actual(&out) == expected,
                        "{kind:?}, {layout}, {parts} partitions, fold {fold}, {threads} threads"
                    );
                    out.recycle(&pool);
                }
            }
        }
    }
}

#[test]
fn empty_input_gives_empty_partitions() {
    let pool = PagePool::new(4096);
    let f = Xxh3Hash::new(32).expect("xxh3");
    for kind in StrategyKind::ALL {
        for input in [vec![], vec![RecordBatch::new(Layout::TUPLE16)]] {
            let out = run(kind, &input, Layout::TUPLE16, &f, 3, &pool);
            assert_eq!(out.total(), 0, "{kind:?}");
        }
    }
}

#[test]
fn a_record_larger_than_a_page_comes_through() {
    let pool = PagePool::new(4096);
    let f = Xxh3Hash::new(8).expect("xxh3");
    let mut b = RecordBatch::new(Layout::Variable);
    for i in 0..50u32 {
        b.push(&i.to_le_bytes(), b"small").expect("small");
    }
    b.push(b"huge", &vec![0xAB; 1 << 20]).expect("huge");
    for i in 50..100u32 {
        b.push(&i.to_le_bytes(), b"small").expect("small");
    }
    let input = vec![b];
    let expected = reference(&input, &f);
    for kind in StrategyKind::ALL {
        for threads in 1..=2 {
            let out = run(kind, &input, Layout::Variable, &f, threads, &pool);
            assert!(actual(&out) == expected, "{kind:?} with {threads} threads");
        }
    }
}

#[test]
fn fixed_records_wider_than_a_page_come_through() {
    // 8,004-byte records into 4 KiB pages: every record gets a page of its
    // own, on every strategy's fixed-width path.
    let pool = PagePool::new(4096);
    let layout = Layout::fixed(4, 8000).expect("wide");
    let input = batches(layout, 40, 5);
    let f = Xxh3Hash::new(3).expect("xxh3");
    let expected = reference(&input, &f);
    for kind in StrategyKind::ALL {
        for threads in 1..=2 {
            let out = run(kind, &input, layout, &f, threads, &pool);
            assert!(actual(&out) == expected, "{kind:?} with {threads} threads");
            out.recycle(&pool);
        }
    }
}

#[test]
fn bad_jobs_are_refused() {
    let pool = PagePool::new(4096);
    let f = Xxh3Hash::new(8).expect("xxh3");
    let a = RecordBatch::new(Layout::TUPLE16);
    let b = RecordBatch::new(Layout::Variable);
    let views = [a.view(), b.view()];
    for kind in StrategyKind::ALL {
        let job = PartitionJob {
            layout: Layout::TUPLE16,
            input: &views,
            partitioner: &f,
            threads: 2,
            pool: &pool,
        };
        assert!(kind.build().run(&job).is_err(), "{kind:?} accepted mixed layouts");
        let job = PartitionJob { threads: 0, input: &views[..1], ..job };
        assert!(kind.build().run(&job).is_err(), "{kind:?} accepted 0 threads");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_jobs_match_the_reference(
        seed in any::<u64>(),
        records in 0usize..600,
        parts in 1u32..300,
        threads in 1usize..=4,
        page_bytes in 64usize..8192,
        variable in any::<bool>(),
        kind in prop::sample::select(StrategyKind::ALL.to_vec()),
    ) {
        let layout = if variable { Layout::Variable } else { Layout::fixed(8, 8).expect("16 B") };
        let input = batches(layout, records, seed);
        let f = FoldHash::new(parts).expect("fold");
        let pool = PagePool::new(page_bytes);
        let out = run(kind, &input, layout, &f, threads, &pool);
        prop_assert!(actual(&out) == reference(&input, &f));
    }
}

#[test]
fn lock_free_reservations_under_contention() {
    // Tiny pages and few partitions: threads race for the same page and
    // install new pages constantly.
    let layout = Layout::fixed(8, 8).expect("16 B");
    let input = batches(layout, 40_000, 77);
    let f = FoldHash::new(2).expect("fold");
    let expected = reference(&input, &f);
    for page_bytes in [64usize, 256, 1000] {
        let pool = PagePool::new(page_bytes);
        for _ in 0..5 {
            let out = run(StrategyKind::SmbLockFree, &input, layout, &f, 4, &pool);
            assert!(actual(&out) == expected, "page {page_bytes}");
            out.recycle(&pool);
        }
    }
}
