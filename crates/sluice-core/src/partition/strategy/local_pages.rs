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
//! Fast for few partitions (the thesis's winner below 32); memory grows with
//! threads x partitions x page size, since each thread starts a page for each
//! partition it sees.

use super::{for_each_raw, PartitionJob, PartitionStrategy};
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::{Page, PageChain};
use crate::partition::PartitionError;

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
        // Phase 1: local pages.
        let locals: Vec<Vec<PageChain>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..job.threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut chains: Vec<PageChain> =
                            (0..parts).map(|_| PageChain::default()).collect();
                        for view in job.batches_of(t) {
                            for_each_raw(view, |r| {
                                let p = job.partitioner.partition(r.key) as usize;
                                chains[p].push(r.bytes, job.pool);
                            });
                        }
                        chains
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
        });
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
            Some(t) if t.bytes() + page.bytes() <= page_bytes => {
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
