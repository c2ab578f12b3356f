//! LocalPagesAndMerge: thread-local pages, then a merge.
//!
//! # Algorithm
//! Phase 1: every thread fills its own page chain per partition; no
//! synchronisation at all. Phase 2: partitions are dealt out to threads
//! (`p mod T`); for each of its partitions a thread moves every full page
//! from every thread's chain into the output (no copy) and merges the
//! partially filled last pages, copying the smaller ones into the first
//! until it is full.
//!
//! ```text
//! thread 0: p0 [##][#.]  p1 [#.]        merge p0: [##] [##] [#.]+[#.] -> [##][##][##]
//! thread 1: p0 [##][#.]  p1 [##][..]    merge p1: ...
//! ```
//! Only partial pages of at most 1/[`MERGE_COPY_DIVISOR`] of a page are
//! copied; larger ones are moved as they are, so the merge copies at most
//! that share of a page per thread and partition instead of half the data
//! when partitions are smaller than a page.
//!
//! Fixed-width records take a direct-store path (partition ids computed a
//! chunk at a time, each record stored straight to its page tail; see
//! `fixed_writer`), which makes this the fastest single-thread strategy for
//! small records here. Memory grows with threads x partitions x page size,
//! since each thread starts a page for each partition it sees.

use super::{dispatch_width, fixed_chunks, for_each_raw, PartitionJob, PartitionStrategy};
use crate::format::BatchView;
use crate::partition::fixed_writer::FixedPageWriter;
use crate::partition::function::fold::{dispatch_fold_bits, fold_const};
use crate::partition::function::FastPartition;
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::{Page, PageChain};
use crate::partition::PartitionError;

/// A partial page is copied into another in the merge only when it holds at
/// most `1 / MERGE_COPY_DIVISOR` of a page.
pub const MERGE_COPY_DIVISOR: usize = 8;

/// Thread-local pages merged per partition group.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalPagesAndMerge;

impl PartitionStrategy for LocalPagesAndMerge {
    fn name(&self) -> &'static str {
        "local_pages"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let parts = job.partitions();
        // Phase 1: local pages (on the caller's thread when there is one).
        let locals: Vec<Vec<PageChain>> = if job.threads == 1 {
            vec![local(job, 0)]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> =
                    (0..job.threads).map(|t| s.spawn(move || local(job, t))).collect();
                handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
            })
        };
        // Transpose [thread][partition] into [partition][thread].
        let mut per_part: Vec<Vec<PageChain>> = (0..parts).map(|_| Vec::new()).collect();
        for chains in locals {
            for (p, c) in chains.into_iter().enumerate() {
                per_part[p].push(c);
            }
        }
        // Phase 2: merge, partitions dealt out to threads.
        let mut pages: Vec<Vec<Page>> = (0..parts).map(|_| Vec::new()).collect();
        let page_bytes = job.pool.page_bytes();
        if job.threads == 1 {
            for (out, chains) in pages.iter_mut().zip(per_part) {
                merge(out, chains, page_bytes, job);
            }
            return Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }));
        }
        std::thread::scope(|s| {
            let mut work: Vec<Vec<(&mut Vec<Page>, Vec<PageChain>)>> =
                (0..job.threads).map(|_| Vec::new()).collect();
            for (p, (out, chains)) in pages.iter_mut().zip(per_part).enumerate() {
                work[p % job.threads].push((out, chains));
            }
            for group in work {
                s.spawn(move || {
                    for (out, chains) in group {
                        merge(out, chains, page_bytes, job);
                    }
                });
            }
        });
        Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }))
    }
}

/// Phase 1 for thread `t`: its chains, one per partition.
fn local(job: &PartitionJob<'_>, t: usize) -> Vec<PageChain> {
    if let Some(width) = job.layout.fixed_record_bytes() {
        return dispatch_width!(width, local_fixed(job, t, width));
    }
    let mut chains: Vec<PageChain> = (0..job.partitions()).map(|_| PageChain::default()).collect();
    for view in job.batches_of(t) {
        for_each_raw(view, |r| {
            let p = job.partitioner.partition(r.key) as usize;
            chains[p].push(r.bytes, job.pool);
        });
    }
    chains
}

/// Phase 1 for fixed-width records: direct stores into page tails.
fn local_fixed<const W: usize>(job: &PartitionJob<'_>, t: usize, width: usize) -> Vec<PageChain> {
    let mut writer = FixedPageWriter::new(job.pool, job.partitions(), width);
    let key_width = match job.layout {
        crate::format::Layout::Fixed { key_width, .. } => usize::from(key_width),
        crate::format::Layout::Variable => 0,
    };
    match (job.partitioner.fast_path(), key_width) {
        // The built-in functions, fused into the copy loop.
        (Some(FastPartition::Mask(mask)), 4..) => {
            fused::<W>(job, t, width, &mut writer, |rec| {
                let k = rec.first_chunk::<4>().map_or(0, |b| u32::from_le_bytes(*b));
                (k & mask) as usize
            });
            return chains_of(writer);
        }
        (Some(FastPartition::Fold8 { bits }), 8) if (1..=16).contains(&bits) => {
            dispatch_fold_bits!(bits, fused_fold[W](job, t, width, &mut writer));
            return chains_of(writer);
        }
        _ => {}
    }
    let mut pids = Vec::new();
    for view in job.batches_of(t) {
        for chunk in fixed_chunks(view, width) {
            pids.clear();
            job.partitioner.partition_batch(&chunk, &mut pids);
            write_chunk::<W>(&mut writer, &chunk, width, &pids);
        }
    }
    chains_of(writer)
}

/// [`fused`] with the fold hash into `2^K` partitions (`K` in 1..=16;
/// never called with 0, which the dispatch's fallback arm names).
fn fused_fold<const K: u32, const W: usize>(
    job: &PartitionJob<'_>,
    t: usize,
    width: usize,
    writer: &mut FixedPageWriter<'_>,
) {
    let key8 = |rec: &[u8]| rec.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b));
    fused::<W>(job, t, width, writer, |r| fold_const::<K>(key8(r)) as usize);
}

/// Phase 1 with the partition computed in the copy loop by `pid`.
#[inline(always)]
fn fused<const W: usize>(
    job: &PartitionJob<'_>,
    t: usize,
    width: usize,
    writer: &mut FixedPageWriter<'_>,
    pid: impl Fn(&[u8]) -> usize,
) {
    for view in job.batches_of(t) {
        debug_assert_eq!(view.payload().len() % width, 0);
        writer.push_all::<W>(view.payload(), &pid);
    }
}

/// A writer's pages as chains (full pages, then the partial tail).
fn chains_of(writer: FixedPageWriter<'_>) -> Vec<PageChain> {
    writer
        .into_pages()
        .into_iter()
        .map(|mut pages| {
            let current = pages.pop();
            PageChain { full: pages, current }
        })
        .collect()
}

#[inline(always)]
fn write_chunk<const W: usize>(
    writer: &mut FixedPageWriter<'_>,
    chunk: &BatchView<'_>,
    width: usize,
    pids: &[u32],
) {
    for (rec, &p) in chunk.payload().chunks_exact(width).zip(pids) {
        writer.push::<W>(p as usize, rec);
    }
}

/// Moves full pages and merges the partial last pages of one partition.
fn merge(out: &mut Vec<Page>, chains: Vec<PageChain>, page_bytes: usize, job: &PartitionJob<'_>) {
    let mut partial: Vec<Page> = Vec::new();
    for c in chains {
        out.extend(c.full);
        partial.extend(c.current.filter(|p| !p.is_empty()));
    }
    // Fullest first: copy the small ones into the big ones.
    partial.sort_by_key(|p| std::cmp::Reverse(p.bytes()));
    let mut target: Option<Page> = None;
    for page in partial {
        match target.as_mut() {
            Some(t)
                if page.bytes() <= page_bytes / MERGE_COPY_DIVISOR
                    && t.bytes() + page.bytes() <= page_bytes =>
            {
                t.push_many(page.payload(), page.len() as u32);
                job.pool.recycle(page);
            }
            _ => {
                if let Some(done) = target.replace(page) {
                    out.push(done);
                }
            }
        }
    }
    out.extend(target);
}
