//! CmpProcessingUnits: threads grouped into processing units whose members
//! own exclusive partition ranges.
//!
//! # Algorithm
//! Threads form units of `unit_threads`. The input is dealt out to units;
//! inside a unit, thread `r` owns partitions `[r P / U, (r + 1) P / U)` and
//! scans the unit's whole input, keeping only the records of its own
//! partitions, in page chains nobody else touches. The output of partition
//! `p` is the pages of its owner in every unit.
//!
//! ```text
//! unit 0: t0 owns p0..p511, t1 owns p512..p1023; both read unit 0's input
//! unit 1: t2 owns p0..p511, t3 owns p512..p1023; both read unit 1's input
//! ```
//! No locks and no merge, at the price of every record being read (and its
//! partition computed) by every thread of its unit.

use super::{for_each_raw, PartitionJob, PartitionStrategy};
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::{Page, PageChain};
use crate::partition::PartitionError;

/// Default threads per processing unit.
pub const UNIT_THREADS_DEFAULT: usize = 2;

/// Processing units with exclusive partition ranges.
#[derive(Debug, Clone, Copy)]
pub struct CmpProcessingUnits {
    /// Threads per unit (capped at the job's thread count).
    pub unit_threads: usize,
}

impl Default for CmpProcessingUnits {
    fn default() -> Self {
        CmpProcessingUnits { unit_threads: UNIT_THREADS_DEFAULT }
    }
}

impl PartitionStrategy for CmpProcessingUnits {
    fn name(&self) -> &'static str {
        "cmp_units"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let parts = job.partitions();
        let unit = self.unit_threads.clamp(1, job.threads);
        let units = job.threads.div_ceil(unit);
        // (first partition, chains) per thread.
        let owned: Vec<(usize, Vec<PageChain>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..job.threads)
                .map(|t| {
                    let (u, r) = (t / unit, t % unit);
                    // The last unit may be smaller.
                    let members = unit.min(job.threads - u * unit);
                    let lo = r * parts / members;
                    let hi = (r + 1) * parts / members;
                    s.spawn(move || {
                        let mut chains: Vec<PageChain> =
                            (lo..hi).map(|_| PageChain::default()).collect();
                        for view in job.input.iter().skip(u).step_by(units) {
                            for_each_raw(view, |rec| {
                                let p = job.partitioner.partition(rec.key) as usize;
                                if (lo..hi).contains(&p) {
                                    chains[p - lo].push(rec.bytes, job.pool);
                                }
                            });
                        }
                        (lo, chains)
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let mut pages: Vec<Vec<Page>> = (0..parts).map(|_| Vec::new()).collect();
        for (lo, chains) in owned {
            for (i, c) in chains.into_iter().enumerate() {
                pages[lo + i].extend(c.into_pages());
            }
        }
        Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }))
    }
}
