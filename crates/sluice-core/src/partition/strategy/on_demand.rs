//! OnDemand (the thesis's naive multithreaded approach): every record is
//! written straight to its partition's shared page chain under that
//! partition's lock.
//!
//! One lock acquisition per record: correct and simple, and it shows the cost
//! of contention the other strategies avoid (the thesis measured it falling
//! from 18 M tuples/s on one thread to 14 M on twenty).

use super::{for_each_raw, into_paged, shared_chains, PartitionJob, PartitionStrategy};
use crate::partition::output::Partitioned;
use crate::partition::PartitionError;

/// Shared pages, one lock per record.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnDemand;

impl PartitionStrategy for OnDemand {
    fn name(&self) -> &'static str {
        "on_demand"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let shared = shared_chains(job.partitions());
        std::thread::scope(|s| {
            for t in 0..job.threads {
                let shared = &shared;
                s.spawn(move || {
                    for view in job.batches_of(t) {
                        for_each_raw(view, |r| {
                            let p = job.partitioner.partition(r.key) as usize;
                            let mut chain = shared[p].lock().unwrap_or_else(|e| e.into_inner());
                            chain.push(r.bytes, job.pool);
                        });
                    }
                });
            }
        });
        Ok(into_paged(job.layout, shared))
    }
}
