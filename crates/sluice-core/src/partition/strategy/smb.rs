//! Smb: software-managed buffers (the thesis's optimised approach).
//!
//! # Algorithm
//! Each thread keeps a small buffer per partition (`smb_bytes`, a few cache
//! lines) in one flat thread-local array. A record is copied into its
//! partition's buffer; when the buffer cannot take the next record it is
//! flushed: the partition's shared page chain is locked once and the
//! buffered records are appended to it.
//!
//! ```text
//! record ─► SMB[t][p] (thread-local, cache resident) ──full──► lock p ─► shared pages of p
//! ```
//! Writes go to cache-resident buffers instead of P scattered page tails, and
//! locks are taken once per buffer, not once per record. A record larger than
//! the buffer bypasses it (after flushing what is buffered, to keep order
//! simple). At the end every thread flushes all its buffers.

use std::sync::Mutex;

use super::{for_each_raw, PartitionJob, PartitionStrategy};
use crate::format::BatchView;
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::{PageChain, PagePool};
use crate::partition::PartitionError;

/// Default bytes per software-managed buffer (four 64-byte cache lines).
pub const SMB_BYTES_DEFAULT: usize = 256;

/// Thread-local software-managed buffers flushed to shared pages.
#[derive(Debug, Clone, Copy)]
pub struct Smb {
    /// Bytes per buffer; raised to hold at least two fixed-width records.
    pub smb_bytes: usize,
}

impl Default for Smb {
    fn default() -> Self {
        Smb { smb_bytes: SMB_BYTES_DEFAULT }
    }
}

/// One thread's buffers.
struct Buffers {
    cap: usize,
    data: Vec<u8>,
    fill: Vec<u32>,
    count: Vec<u32>,
}

impl Buffers {
    fn flush(
        &mut self,
        p: usize,
        job: &PartitionJob<'_>,
        shared: &[Mutex<PageChain>],
        pool: &PagePool,
    ) {
        let n = self.count[p];
        if n == 0 {
            return;
        }
        let start = p * self.cap;
        let bytes = &self.data[start..start + self.fill[p] as usize];
        let view = BatchView::new_unchecked(job.layout, n, bytes);
        let mut chain = shared[p].lock().unwrap_or_else(|e| e.into_inner());
        for_each_raw(&view, |r| chain.push(r.bytes, pool));
        drop(chain);
        self.fill[p] = 0;
        self.count[p] = 0;
    }
}

impl PartitionStrategy for Smb {
    fn name(&self) -> &'static str {
        "smb"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let parts = job.partitions();
        let cap = self.smb_bytes.max(2 * job.layout.fixed_record_bytes().unwrap_or(0)).max(16);
        let shared: Vec<Mutex<PageChain>> =
            (0..parts).map(|_| Mutex::new(PageChain::default())).collect();
        std::thread::scope(|s| {
            for t in 0..job.threads {
                let shared = &shared;
                s.spawn(move || {
                    let mut b = Buffers {
                        cap,
                        data: vec![0u8; parts * cap],
                        fill: vec![0; parts],
                        count: vec![0; parts],
                    };
                    for view in job.batches_of(t) {
                        for_each_raw(view, |r| {
                            let p = job.partitioner.partition(r.key) as usize;
                            let len = r.bytes.len();
                            if b.fill[p] as usize + len > cap {
                                b.flush(p, job, shared, job.pool);
                                if len > cap {
                                    let mut chain =
                                        shared[p].lock().unwrap_or_else(|e| e.into_inner());
                                    chain.push(r.bytes, job.pool);
                                    return;
                                }
                            }
                            let at = p * cap + b.fill[p] as usize;
                            b.data[at..at + len].copy_from_slice(r.bytes);
                            b.fill[p] += len as u32;
                            b.count[p] += 1;
                        });
                    }
                    for p in 0..parts {
                        b.flush(p, job, shared, job.pool);
                    }
                });
            }
        });
        let pages = shared
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).into_pages())
            .collect();
        Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }))
    }
}
