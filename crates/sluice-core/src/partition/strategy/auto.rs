//! Auto: picks a strategy from record size, partition count and threads.
//!
//! # Rule
//! Derived from `sluice bench partition --mib 64 --reps 3` on the reference
//! machine (2 vCPU Zen 5 guest, 2026-11-22). Best strategies per point, in
//! M records/s (runner-up after the slash):
//!
//! | record, threads | P = 2 | P = 8 | P = 32 | P = 1024 | P = 4096 |
//! |---|---|---|---|---|---|
//! | 4 B, 1 | smb 193 / lp 128 | smb 204 / cmp 106 | smb 172 / lp 96 | smb 184 / naive 66 | smb 131 / naive 70 |
//! | 4 B, 2 | smb 268 / lp 210 | smb 317 / lp 169 | smb 354 / lp 178 | smb 303 / lp 86 | smb 207 / radix 82 |
//! | 16 B, 1 | lp 117 / cmp 115 | lp 125 / cmp 124 | smb 100 / cmp 57 | smb 83 / naive 38 | smb 54 / naive 45 |
//! | 16 B, 2 | lp 177 / smb 175 | smb 176 / lp 158 | smb 193 / lp 105 | smb 156 / lp 59 | smb 109 / radix 66 |
//! | 100 B, 1 | cmp 90 / lp 89 | od 54 / cmp 46 | cmp 35 / hybrid 25 | cmp 21 / smb 21 | cmp 19 / naive 13 |
//! | 100 B, 2 | lp 91 / cmp 61 | lp 94 / cmp 62 | cmp 52 / lp 42 | smb 37 / hybrid 28 | cmp 22 / smb 20 |
//!
//! (lp: local_pages, cmp: cmp_units, od: on_demand.) Hence:
//!
//! - records of at most [`AUTO_SMALL_RECORD_BYTES_MAX`] bytes: SMB, except
//!   one thread with at most [`AUTO_LOCAL_PAGES_PARTITIONS_MAX`] partitions
//!   and records over 8 bytes, where thread-local pages win;
//! - larger records: thread-local pages up to
//!   [`AUTO_LOCAL_PAGES_PARTITIONS_MAX`] partitions; SMB from
//!   [`AUTO_LARGE_SMB_PARTITIONS_MIN`] partitions on two or more threads;
//!   processing units otherwise.
//!
//! Small records gain most from software-managed buffers: one record is a
//! fraction of a cache line, so buffering turns P scattered page tails into
//! a few hot lines. Large records are already cache-line sized; copying them
//! twice (into a buffer, then to a page) costs more than it saves, and
//! writing straight to thread-local pages (few partitions) or to the pages
//! of an exclusive partition range (more) wins. This matches the thesis
//! (thread-local pages below 32 partitions, SMB above) for 16-byte tuples
//! and departs from it for 4-byte ones, where SMB wins everywhere here.
//! Differences under about 10 % are within this machine's run-to-run noise.

use super::{CmpProcessingUnits, LocalPagesAndMerge, PartitionJob, PartitionStrategy, Smb};
use crate::partition::output::Partitioned;
use crate::partition::PartitionError;

/// Records up to this many bytes take the SMB path.
pub const AUTO_SMALL_RECORD_BYTES_MAX: usize = 32;
/// Up to this many partitions, thread-local pages (see the rule).
pub const AUTO_LOCAL_PAGES_PARTITIONS_MAX: usize = 8;
/// Large records with more partitions than this, on 2+ threads, take SMB.
pub const AUTO_LARGE_SMB_PARTITIONS_MIN: usize = 512;

/// Chooses a strategy per job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Auto;

impl Auto {
    /// The strategy the rule picks for a job.
    pub fn choose(job: &PartitionJob<'_>) -> Box<dyn PartitionStrategy> {
        let parts = job.partitions();
        // Variable-length records: judge by the average record size.
        let record_bytes = job.layout.fixed_record_bytes().unwrap_or_else(|| {
            let (bytes, records) = job
                .input
                .iter()
                .fold((0usize, 0usize), |(b, r), v| (b + v.payload().len(), r + v.len()));
            bytes.checked_div(records).unwrap_or(0)
        });
        let few = parts <= AUTO_LOCAL_PAGES_PARTITIONS_MAX;
        if record_bytes <= AUTO_SMALL_RECORD_BYTES_MAX {
            if few && job.threads == 1 && record_bytes > 8 {
                Box::new(LocalPagesAndMerge)
            } else {
                Box::new(Smb::default())
            }
        } else if few {
            Box::new(LocalPagesAndMerge)
        } else if parts >= AUTO_LARGE_SMB_PARTITIONS_MIN && job.threads >= 2 {
            Box::new(Smb::default())
        } else {
            Box::new(CmpProcessingUnits::default())
        }
    }
}

impl PartitionStrategy for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        Self::choose(job).run(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Layout, RecordBatch};
    use crate::partition::{PagePool, Xxh3Hash};

    fn pick(layout: Layout, parts: u32, threads: usize) -> &'static str {
        let b = RecordBatch::new(layout);
        let views = [b.view()];
        let f = Xxh3Hash::new(parts).expect("partitions");
        let pool = PagePool::new(4096);
        let job = PartitionJob { layout, input: &views, partitioner: &f, threads, pool: &pool };
        Auto::choose(&job).name()
    }

    #[test]
    fn follows_the_measured_rule() {
        let t100 = Layout::fixed(4, 96).expect("100 B");
        let t4 = Layout::fixed(4, 0).expect("4 B");
        assert_eq!(pick(t4, 2, 1), "smb");
        assert_eq!(pick(Layout::TUPLE16, 2, 1), "local_pages");
        assert_eq!(pick(Layout::TUPLE16, 8, 2), "smb");
        assert_eq!(pick(Layout::TUPLE16, 1024, 1), "smb");
        assert_eq!(pick(t100, 8, 2), "local_pages");
        assert_eq!(pick(t100, 32, 2), "cmp_units");
        assert_eq!(pick(t100, 1024, 2), "smb");
        assert_eq!(pick(t100, 1024, 1), "cmp_units");
    }
}
