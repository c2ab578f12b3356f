//! Auto: picks a strategy from record size, partition count and threads.
//!
//! # Rule
//! Derived from `sluice bench partition --mib 64 --reps 5` on the reference
//! machine (2 vCPU AMD EPYC guest, 2026-11-24, 16 KiB pages), after the
//! fixed-width page writer moved to one (next, end) cursor per partition.
//! Best three strategies per point, M records/s:
//!
//! | record, threads | P = 2 | P = 8 | P = 32 | P = 1024 | P = 4096 |
//! |---|---|---|---|---|---|
//! | 4 B, 1 | lp 343 / lf 151 / smb 132 | lp 334 / lf 165 / smb 141 | lp 295 / lf 167 / smb 140 | lp 246 / lf 178 / smb 129 | lp 171 / lf 150 / smb 118 |
//! | 4 B, 2 | lp 678 / lf 282 / smb 253 | lp 661 / lf 312 / smb 261 | lp 573 / lf 326 / smb 269 | lp 473 / lf 351 / smb 260 | lp 320 / lf 292 / smb 233 |
//! | 16 B, 1 | lp 310 / lf 128 / radix 126 | lp 293 / radix 127 / lf 120 | lp 210 / radix 123 / lf 116 | lp 293 / radix 120 / lf 114 | lp 121 / radix 108 / lf 95 |
//! | 16 B, 2 | lp 563 / radix 248 / lf 197 | lp 544 / radix 244 / lf 213 | lp 404 / radix 243 / lf 219 | lp 498 / radix 237 / lf 216 | lp 210 / radix 201 / lf 177 |
//! | 100 B, 1 | lp 74 / cmp 62 / od 55 | lp 73 / cmp 63 / od 52 | lp 56 / cmp 40 / lf 35 | lp 43 / lf 29 / cmp 26 | lp 36 / lf 23 / cmp 21 |
//! | 100 B, 2 | lp 127 / cmp 73 / hybrid 66 | lp 120 / cmp 74 / lf 56 | lp 97 / cmp 59 / lf 58 | lp 71 / lf 51 / cmp 40 | lp 58 / lf 42 / smb 36 |
//!
//! (lp: local_pages, lf: smb_lockfree, cmp: cmp_units, od: on_demand.)
//! Thread-local pages win every point, by at least 10 % (4 B, P = 4096, 2
//! threads) and mostly by 1.5-2.5x. Hence:
//!
//! - thread-local pages (direct stores into page tails, no sharing) for
//!   records of any size up to [`AUTO_LOCAL_PAGES_PARTITIONS_MAX`]
//!   partitions. (Before the cursor change, processing units won 100 B on
//!   one thread into 2 and 8 partitions, 58 vs 44 and 40 vs 38 M/s, and the
//!   rule sent them there; in this run that pick came to 0.84 and 0.86 of
//!   local pages.)
//! - more than [`AUTO_LOCAL_PAGES_PARTITIONS_MAX`] partitions: SMB with
//!   lock-free reservations, because thread-local pages cost threads x
//!   partitions x page size of memory (65,536 partitions x 16 KiB = 1 GiB per
//!   thread), while shared pages cost partitions x page size.
//!
//! The thesis found thread-local pages best below 32 partitions and SMB
//! above; here direct stores into small pages win up to 4096 partitions,
//! because this CPU merges consecutive stores to a line by itself and its
//! caches hold one line per partition tail plus the 16-byte cursor (see
//! `fixed_writer` and the page size note in `page`).

use super::{LocalPagesAndMerge, PartitionJob, PartitionStrategy, SmbLockFree};
use crate::partition::output::Partitioned;
use crate::partition::PartitionError;

/// Most partitions for thread-local pages (memory: threads x partitions x
/// page size).
pub const AUTO_LOCAL_PAGES_PARTITIONS_MAX: usize = 4096;

/// Chooses a strategy per job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Auto;

impl Auto {
    /// The strategy the rule picks for a job.
    pub fn choose(job: &PartitionJob<'_>) -> Box<dyn PartitionStrategy> {
        if job.partitions() > AUTO_LOCAL_PAGES_PARTITIONS_MAX {
            Box::new(SmbLockFree::default())
        } else {
            Box::new(LocalPagesAndMerge)
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
        assert_eq!(pick(t4, 2, 1), "local_pages");
        assert_eq!(pick(t4, 1024, 1), "local_pages");
        assert_eq!(pick(t4, 4096, 2), "local_pages");
        assert_eq!(pick(Layout::TUPLE16, 2, 2), "local_pages");
        assert_eq!(pick(Layout::TUPLE16, 1024, 1), "local_pages");
        assert_eq!(pick(Layout::TUPLE16, 4096, 2), "local_pages");
        assert_eq!(pick(Layout::TUPLE16, 65_536, 1), "smb_lockfree");
        assert_eq!(pick(Layout::Variable, 4096, 1), "local_pages");
        assert_eq!(pick(Layout::Variable, 4097, 2), "smb_lockfree");
        assert_eq!(pick(t100, 32, 2), "local_pages");
        assert_eq!(pick(t100, 8, 1), "local_pages");
        assert_eq!(pick(t100, 8, 2), "local_pages");
        assert_eq!(pick(t100, 8192, 2), "smb_lockfree");
    }
}
