//! The baseline: one thread, one growable vector per partition.
//!
//! This is what a straightforward implementation does, and what the
//! benchmarks compare every other strategy against. Each partition's vector
//! grows by doubling, so memory is reallocated and copied `log n` times and
//! freshly faulted in; it ignores the thread count and the page pool.

use super::{for_each_raw, PartitionJob, PartitionStrategy};
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::Page;
use crate::partition::PartitionError;

/// One growable vector per partition, single-threaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Naive;

impl PartitionStrategy for Naive {
    fn name(&self) -> &'static str {
        "naive"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let p = job.partitions();
        let mut parts: Vec<(Vec<u8>, u32)> = (0..p).map(|_| (Vec::new(), 0)).collect();
        for view in job.input {
            for_each_raw(view, |r| {
                let part = &mut parts[job.partitioner.partition(r.key) as usize];
                part.0.extend_from_slice(r.bytes);
                part.1 += 1;
            });
        }
        let pages = parts
            .into_iter()
            .map(|(data, count)| {
                if count == 0 {
                    return Vec::new();
                }
                let mut page = Page::from_buffer(Vec::new());
                page.push_many(&data, count);
                vec![page]
            })
            .collect();
        Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }))
    }
}
