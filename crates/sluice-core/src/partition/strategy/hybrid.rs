//! Hybrid: small materialised chunks, grouped locally, appended to shared
//! pages once per partition per chunk (the thesis's hybrid of Radix and
//! on-demand page allocation).
//!
//! # Algorithm
//! Each thread cuts its input into chunks of `chunk_records` records. For a
//! chunk it computes every record's partition, groups the chunk's record
//! references by partition (a sort of small pairs that stays in cache), and
//! then, for every partition present in the chunk, takes that partition's lock
//! once and appends the chunk's records to its shared page chain, which takes
//! new pages from the pool as needed.
//!
//! Locks are taken at most once per partition per chunk instead of once per
//! record (OnDemand); no global histogram or pre-allocation (Radix).

use super::{for_each_raw, into_paged, shared_chains, PartitionJob, PartitionStrategy};
use crate::partition::output::Partitioned;
use crate::partition::PartitionError;

/// Default records per chunk.
pub const HYBRID_CHUNK_RECORDS_DEFAULT: usize = 4096;

/// Chunk-local grouping, shared pages.
#[derive(Debug, Clone, Copy)]
pub struct Hybrid {
    /// Records per chunk.
    pub chunk_records: usize,
}

impl Default for Hybrid {
    fn default() -> Self {
        Hybrid { chunk_records: HYBRID_CHUNK_RECORDS_DEFAULT }
    }
}

impl PartitionStrategy for Hybrid {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let chunk = self.chunk_records.max(1);
        let shared = shared_chains(job.partitions());
        std::thread::scope(|s| {
            for t in 0..job.threads {
                let shared = &shared;
                s.spawn(move || {
                    let mut items: Vec<(u32, &[u8])> = Vec::with_capacity(chunk);
                    let flush = |items: &mut Vec<(u32, &[u8])>| {
                        items.sort_unstable_by_key(|&(p, _)| p);
                        for run in items.chunk_by(|a, b| a.0 == b.0) {
                            let mut c =
                                shared[run[0].0 as usize].lock().unwrap_or_else(|e| e.into_inner());
                            for (_, bytes) in run {
                                c.push(bytes, job.pool);
                            }
                        }
                        items.clear();
                    };
                    for view in job.batches_of(t) {
                        for_each_raw(view, |r| {
                            items.push((job.partitioner.partition(r.key), r.bytes));
                            if items.len() == chunk {
                                flush(&mut items);
                            }
                        });
                    }
                    flush(&mut items);
                });
            }
        });
        Ok(into_paged(job.layout, shared))
    }
}
