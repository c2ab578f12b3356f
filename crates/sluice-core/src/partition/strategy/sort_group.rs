//! SortGroup: PSACS's grouping by sorting (partition id, record) pairs.
//!
//! # Algorithm
//! Bucketing needs a growable bucket per partition, so its memory grows with
//! the partition count. PSACS instead sorts small (partition id, record
//! pointer) pairs and then gathers the records in that order:
//!
//! ```text
//! records ─► pairs (pid, view, offset, len) ─► counting sort by pid ─► gather ─► | p0 | p1 | ... |
//! ```
//! Per thread the working memory is 16 bytes per record plus one counter per
//! partition, whatever the partition count; the gather writes the output
//! strictly sequentially. With several threads each one groups its own
//! batches, then partitions are dealt out to threads, which concatenate the
//! per-thread segments of their partitions into the final buffer.

use super::{for_each_raw, PartitionJob, PartitionStrategy};
use crate::partition::output::{Partitioned, PartitionedBuffer};
use crate::partition::PartitionError;

/// Sort (partition, record) pairs, then gather.
#[derive(Debug, Clone, Copy, Default)]
pub struct SortGroup;

/// A record reference: partition, batch index within the job, byte range.
#[derive(Clone, Copy)]
struct Pair {
    pid: u32,
    view: u32,
    offset: u32,
    len: u32,
}

/// One thread's grouped output.
struct Grouped {
    data: Vec<u8>,
    offsets: Vec<usize>,
    counts: Vec<u32>,
}

fn group(job: &PartitionJob<'_>, t: usize, parts: usize) -> Grouped {
    let mut pairs = Vec::new();
    for (vi, view) in job.input.iter().enumerate().skip(t).step_by(job.threads) {
        let base = view.payload().as_ptr() as usize;
        for_each_raw(view, |r| {
            pairs.push(Pair {
                pid: job.partitioner.partition(r.key),
                view: vi as u32,
                offset: (r.bytes.as_ptr() as usize - base) as u32,
                len: r.bytes.len() as u32,
            });
        });
    }
    // Counting sort by pid (one stable pass over P buckets).
    let mut counts = vec![0u32; parts];
    let mut bytes = vec![0usize; parts + 1];
    for pr in &pairs {
        counts[pr.pid as usize] += 1;
        bytes[pr.pid as usize + 1] += pr.len as usize;
    }
    for p in 0..parts {
        bytes[p + 1] += bytes[p];
    }
    let mut slot = vec![0usize; parts];
    let mut acc = 0usize;
    for p in 0..parts {
        slot[p] = acc;
        acc += counts[p] as usize;
    }
    let mut sorted = vec![Pair { pid: 0, view: 0, offset: 0, len: 0 }; pairs.len()];
    for pr in pairs {
        let s = &mut slot[pr.pid as usize];
        sorted[*s] = pr;
        *s += 1;
    }
    // Gather, writing the output sequentially.
    let mut data = Vec::with_capacity(bytes[parts]);
    for pr in &sorted {
        let payload = job.input[pr.view as usize].payload();
        let at = pr.offset as usize;
        data.extend_from_slice(&payload[at..at + pr.len as usize]);
    }
    Grouped { data, offsets: bytes, counts }
}

impl PartitionStrategy for SortGroup {
    fn name(&self) -> &'static str {
        "sort_group"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let parts = job.partitions();
        let mut groups: Vec<Grouped> = std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..job.threads).map(|t| s.spawn(move || group(job, t, parts))).collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        if groups.len() == 1 {
            let g = groups.remove(0);
            return Ok(Partitioned::Buffer(PartitionedBuffer {
                layout: job.layout,
                data: g.data,
                offsets: g.offsets,
                counts: g.counts,
            }));
        }
        // Concatenate per-thread segments partition by partition.
        let mut offsets = Vec::with_capacity(parts + 1);
        let mut counts = vec![0u32; parts];
        let mut at = 0usize;
        for (p, count) in counts.iter_mut().enumerate() {
            offsets.push(at);
            for g in &groups {
                at += g.offsets[p + 1] - g.offsets[p];
                *count += g.counts[p];
            }
        }
        offsets.push(at);
        let mut data = vec![0u8; at];
        let mut slices: Vec<Vec<(usize, &mut [u8])>> =
            (0..job.threads).map(|_| Vec::new()).collect();
        let mut rest: &mut [u8] = &mut data;
        for p in 0..parts {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(offsets[p + 1] - offsets[p]);
            slices[p % job.threads].push((p, head));
            rest = tail;
        }
        let groups = &groups;
        std::thread::scope(|s| {
            for mine in slices {
                s.spawn(move || {
                    for (p, out) in mine {
                        let mut c = 0;
                        for g in groups {
                            let seg = &g.data[g.offsets[p]..g.offsets[p + 1]];
                            out[c..c + seg.len()].copy_from_slice(seg);
                            c += seg.len();
                        }
                    }
                });
            }
        });
        Ok(Partitioned::Buffer(PartitionedBuffer { layout: job.layout, data, offsets, counts }))
    }
}
