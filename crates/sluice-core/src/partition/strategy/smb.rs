//! Smb: software-managed buffers (the thesis's optimised approach).
//!
//! # Algorithm
//! Each thread keeps a small buffer per partition (`smb_bytes`, a few cache
//! lines) in one flat thread-local array. Partition ids are computed for a
//! whole batch first (one tight loop); then each record is copied into its
//! partition's buffer, and a buffer that is full is flushed: the partition's
//! shared page chain is locked once and the buffered records are appended to
//! it in one copy.
//!
//! ```text
//! batch ─► pids ─► record ─► SMB[t][p] (thread-local, in cache) ──full──► lock p ─► shared pages of p
//! ```
//! Writes go to cache-resident buffers instead of P scattered page tails, and
//! locks are taken once per buffer, not once per record. Fixed-width records
//! of 4, 8, 16 and 100 bytes are copied with a compile-time width. Variable
//! records use the same scheme with a per-record length check; a record
//! larger than the buffer bypasses it (after flushing what is buffered).
//! At the end every thread flushes all its buffers.

use std::sync::Mutex;

use super::{
    copy_record, dispatch_width, for_each_raw, into_paged, shared_chains, PartitionJob,
    PartitionStrategy,
};
use crate::format::BatchView;
use crate::partition::output::Partitioned;
use crate::partition::page::PageChain;
use crate::partition::PartitionError;

/// Default bytes per software-managed buffer (16 cache lines). Measured with
/// `sluice bench partition --sizes 16 --strategies smb`, one thread, M records/s
/// at P = 32 / 1024: 64 B 35 (P = 1024 only), 256 B 69 / 64, 512 B 103 / 88,
/// 1024 B 112 / 112; fewer, larger flushes amortise the lock and the page write.
pub const SMB_BYTES_DEFAULT: usize = 1024;

/// Records whose partitions are computed in one go before they are scattered.
const SMB_CHUNK_RECORDS: usize = 512;

/// Thread-local software-managed buffers flushed to shared pages.
#[derive(Debug, Clone, Copy)]
pub struct Smb {
    /// Bytes per buffer; raised to hold at least one record.
    pub smb_bytes: usize,
}

impl Default for Smb {
    fn default() -> Self {
        Smb { smb_bytes: SMB_BYTES_DEFAULT }
    }
}

type Shared = [Mutex<PageChain>];

fn lock(shared: &Shared, p: usize) -> std::sync::MutexGuard<'_, PageChain> {
    shared[p].lock().unwrap_or_else(|e| e.into_inner())
}

/// One thread over fixed-width records of `width` bytes (`W` when known).
fn thread_fixed<const W: usize>(
    job: &PartitionJob<'_>,
    t: usize,
    width: usize,
    smb_bytes: usize,
    shared: &Shared,
) {
    let parts = job.partitions();
    let cap = (smb_bytes / width).max(1) * width;
    let mut data = vec![0u8; parts * cap];
    let mut fill = vec![0u32; parts];
    let mut pids = Vec::new();
    let chunk_bytes = SMB_CHUNK_RECORDS * width;
    for view in job.batches_of(t) {
        // Sub-chunks small enough that the records are still in L1 when the
        // scatter loop reads them right after their partitions were computed.
        for chunk in view.payload().chunks(chunk_bytes) {
            let sub = BatchView::new_unchecked(job.layout, (chunk.len() / width) as u32, chunk);
            pids.clear();
            job.partitioner.partition_batch(&sub, &mut pids);
            for (rec, &p) in chunk.chunks_exact(width).zip(&pids) {
                let p = p as usize;
                let at = p * cap + fill[p] as usize;
                copy_record::<W>(&mut data[at..at + width], rec);
                let f = fill[p] as usize + width;
                if f == cap {
                    lock(shared, p).push_fixed_run(&data[p * cap..p * cap + cap], width, job.pool);
                    fill[p] = 0;
                } else {
                    fill[p] = f as u32;
                }
            }
        }
    }
    for p in 0..parts {
        if fill[p] > 0 {
            let start = p * cap;
            lock(shared, p).push_fixed_run(&data[start..start + fill[p] as usize], width, job.pool);
        }
    }
    // Publish this thread's streaming stores before the scope joins it.
    crate::format::copy::streaming_fence();
}

/// One thread over variable-length records.
fn thread_variable(job: &PartitionJob<'_>, t: usize, cap: usize, shared: &Shared) {
    let parts = job.partitions();
    let mut data = vec![0u8; parts * cap];
    let mut fill = vec![0u32; parts];
    let mut count = vec![0u32; parts];
    let flush = |p: usize, data: &[u8], fill: &mut [u32], count: &mut [u32]| {
        if count[p] == 0 {
            return;
        }
        let start = p * cap;
        let view =
            BatchView::new_unchecked(job.layout, count[p], &data[start..start + fill[p] as usize]);
        let mut chain = lock(shared, p);
        for_each_raw(&view, |r| chain.push(r.bytes, job.pool));
        fill[p] = 0;
        count[p] = 0;
    };
    for view in job.batches_of(t) {
        for_each_raw(view, |r| {
            let p = job.partitioner.partition(r.key) as usize;
            let len = r.bytes.len();
            if fill[p] as usize + len > cap {
                flush(p, &data, &mut fill, &mut count);
                if len > cap {
                    lock(shared, p).push(r.bytes, job.pool);
                    return;
                }
            }
            let at = p * cap + fill[p] as usize;
            data[at..at + len].copy_from_slice(r.bytes);
            fill[p] += len as u32;
            count[p] += 1;
        });
    }
    for p in 0..parts {
        flush(p, &data, &mut fill, &mut count);
    }
}

impl PartitionStrategy for Smb {
    fn name(&self) -> &'static str {
        "smb"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let shared = shared_chains(job.partitions());
        let smb_bytes = self.smb_bytes.max(16);
        std::thread::scope(|s| {
            for t in 0..job.threads {
                let shared = &shared[..];
                s.spawn(move || match job.layout.fixed_record_bytes() {
                    Some(width) => {
                        dispatch_width!(width, thread_fixed(job, t, width, smb_bytes, shared))
                    }
                    None => thread_variable(job, t, smb_bytes, shared),
                });
            }
        });
        Ok(into_paged(job.layout, shared))
    }
}
