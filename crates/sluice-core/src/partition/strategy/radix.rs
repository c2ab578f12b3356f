//! Radix: histogram, prefix sums, exclusive write ranges (the thesis's
//! histogram-based approach) into one contiguous output buffer.
//!
//! # Algorithm
//! 1. Each thread walks its batches once, computing every record's partition
//!    (kept, 4 bytes per record) and a histogram of bytes and records per
//!    partition.
//! 2. Prefix sums over (partition, thread) give every thread an exclusive
//!    range of the output for every partition, partition-major:
//!    ```text
//!    | p0: t0 t1 | p1: t0 t1 | ... |
//!    ```
//! 3. Each thread walks its batches again and copies every record into its
//!    range for the record's partition. Ranges are disjoint slices of one
//!    buffer (split safely up front), so no writes are shared and no lock is
//!    taken. Fixed-width records go through software write-combining: a
//!    1 KiB cache-resident buffer per partition, copied to the range a whole
//!    buffer at a time, with the record width known at compile time for 4, 8,
//!    16 and 100 bytes.
//!
//! Two passes over the input (partitions are computed once, in batch, and
//! kept); the output buffer comes from the pool and is reused across jobs.
//! Memory is input plus output plus 4 bytes per record.

use super::{copy_record, dispatch_width, for_each_raw, PartitionJob, PartitionStrategy};
use crate::partition::output::{Partitioned, PartitionedBuffer};
use crate::partition::PartitionError;

/// Histogram + prefix sums + exclusive scatter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Radix;

/// One thread's first-pass results.
struct Histogram {
    pids: Vec<u32>,
    bytes: Vec<usize>,
    counts: Vec<u32>,
}

impl PartitionStrategy for Radix {
    fn name(&self) -> &'static str {
        "radix"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let parts = job.partitions();
        let hists: Vec<Histogram> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..job.threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut h = Histogram {
                            pids: Vec::new(),
                            bytes: vec![0; parts],
                            counts: vec![0; parts],
                        };
                        for view in job.batches_of(t) {
                            match job.layout.fixed_record_bytes() {
                                Some(_) => {
                                    let from = h.pids.len();
                                    job.partitioner.partition_batch(view, &mut h.pids);
                                    for &p in &h.pids[from..] {
                                        h.counts[p as usize] += 1;
                                    }
                                }
                                None => {
                                    h.pids.reserve(view.len());
                                    for_each_raw(view, |r| {
                                        let p = job.partitioner.partition(r.key);
                                        h.pids.push(p);
                                        h.bytes[p as usize] += r.bytes.len();
                                        h.counts[p as usize] += 1;
                                    });
                                }
                            }
                        }
                        if let Some(width) = job.layout.fixed_record_bytes() {
                            for (b, &c) in h.bytes.iter_mut().zip(&h.counts) {
                                *b = c as usize * width;
                            }
                        }
                        h
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let total: usize = hists.iter().flat_map(|h| h.bytes.iter()).sum();
        let mut offsets = Vec::with_capacity(parts + 1);
        let mut counts = vec![0u32; parts];
        let mut at = 0usize;
        for (p, count) in counts.iter_mut().enumerate() {
            offsets.push(at);
            for h in &hists {
                at += h.bytes[p];
                *count += h.counts[p];
            }
        }
        offsets.push(at);
        let mut data = job.pool.buffer(total);
        // Exclusive ranges: ranges[t][p].
        let mut ranges: Vec<Vec<&mut [u8]>> =
            (0..job.threads).map(|_| Vec::with_capacity(parts)).collect();
        let mut rest: &mut [u8] = &mut data;
        for p in 0..parts {
            for (t, h) in hists.iter().enumerate() {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(h.bytes[p]);
                ranges[t].push(head);
                rest = tail;
            }
        }
        std::thread::scope(|s| {
            for (t, (mut mine, h)) in ranges.into_iter().zip(&hists).enumerate() {
                s.spawn(move || {
                    if let Some(width) = job.layout.fixed_record_bytes() {
                        dispatch_width!(width, scatter_fixed(job, t, width, &h.pids, &mut mine));
                        return;
                    }
                    let mut cursor = vec![0usize; parts];
                    let mut i = 0usize;
                    for view in job.batches_of(t) {
                        for_each_raw(view, |r| {
                            let p = h.pids[i] as usize;
                            i += 1;
                            let c = cursor[p];
                            mine[p][c..c + r.bytes.len()].copy_from_slice(r.bytes);
                            cursor[p] = c + r.bytes.len();
                        });
                    }
                });
            }
        });
        Ok(Partitioned::Buffer(PartitionedBuffer { layout: job.layout, data, offsets, counts }))
    }
}

/// Bytes of the per-partition write-combining buffer of the fixed-width
/// scatter (rounded down to whole records).
const SCATTER_BUFFER_BYTES: usize = 1024;

/// Phase 3 for fixed-width records: software write-combining. Records are
/// gathered per partition in a small cache-resident buffer and copied to the
/// thread's exclusive output range a whole buffer at a time.
fn scatter_fixed<const W: usize>(
    job: &PartitionJob<'_>,
    t: usize,
    width: usize,
    pids: &[u32],
    mine: &mut [&mut [u8]],
) {
    let parts = job.partitions();
    let cap = (SCATTER_BUFFER_BYTES / width).max(1) * width;
    let mut buf = vec![0u8; parts * cap];
    let mut fill = vec![0usize; parts];
    let mut cursor = vec![0usize; parts];
    let mut i = 0usize;
    for view in job.batches_of(t) {
        let n = view.len();
        let recs = view.payload().chunks_exact(width);
        for (rec, &p) in recs.zip(&pids[i..i + n]) {
            let p = p as usize;
            let at = p * cap + fill[p];
            copy_record::<W>(&mut buf[at..at + width], rec);
            fill[p] += width;
            if fill[p] == cap {
                let c = cursor[p];
                mine[p][c..c + cap].copy_from_slice(&buf[p * cap..p * cap + cap]);
                cursor[p] = c + cap;
                fill[p] = 0;
            }
        }
        i += n;
    }
    for p in 0..parts {
        let (c, f) = (cursor[p], fill[p]);
        mine[p][c..c + f].copy_from_slice(&buf[p * cap..p * cap + f]);
    }
}
