//! Auto: picks a strategy from record size, partition count and threads.
//!
//! # Rule
//! Derived from `sluice bench partition --mib 64 --reps 3` on the reference
//! machine (2 vCPU Zen 5 guest, 2026-11-22, 16 KiB pages), after the
//! fixed-width direct-store path of `LocalPagesAndMerge` landed. Best three
//! strategies per point, M records/s:
//!
//! | record, threads | P = 2 | P = 8 | P = 32 | P = 1024 | P = 4096 |
//! |---|---|---|---|---|---|
//! | 4 B, 1 | lp 255 / lf 213 / smb 168 | lf 269 / lp 264 / smb 213 | lf 271 / smb 207 / lp 192 | lf 232 / lp 195 / smb 178 | lp 160 / lf 139 / smb 118 |
//! | 4 B, 2 | lp 497 / lf 408 / smb 325 | lp 499 / lf 438 / smb 302 | lp 560 / lf 385 / smb 317 | lf 340 / lp 285 / smb 284 | lf 230 / smb 217 / radix 180 |
//! | 16 B, 1 | lp 186 / lf 175 / radix 156 | lp 265 / radix 153 / lf 131 | lp 201 / radix 155 / lf 142 | lp 164 / lf 102 / radix 95 | radix 71 / lp 71 / lf 55 |
//! | 16 B, 2 | lp 423 / radix 349 / lf 257 | lp 519 / radix 290 / lf 274 | lf 221 / radix 218 / lp 210 | lp 211 / radix 166 / lf 153 | lp 117 / smb 94 / radix 86 |
//! | 100 B, 1 | cmp 58 / od 48 / lp 44 | cmp 40 / lp 38 / od 37 | lf 22 / cmp 21 / lp 21 | lp 17 / smb 17 / lf 16 | lp 16 / cmp 12 / smb 12 |
//! | 100 B, 2 | lp 60 / cmp 54 / hybrid 43 | lp 58 / cmp 56 / lf 42 | lf 40 / lp 38 / cmp 37 | lf 34 / lp 32 / smb 30 | lp 29 / cmp 23 / smb 21 |
//!
//! (lp: local_pages, lf: smb_lockfree, cmp: cmp_units, od: on_demand.)
//! The run before it (32 KiB pages) had lp ahead at 4 B / P = 32 / 1 thread
//! (224 vs 199) and cmp at 100 B / P = 2 (54 vs 50): points closer than about
//! 15 % swap between runs on this VM. Hence:
//!
//! - thread-local pages (direct stores into page tails, no sharing) by
//!   default, records of any size. (Until the partition function moved
//!   into the copy loop, records of at most 8 bytes into 1024 or more
//!   partitions went to lock-free SMB, as the table shows; with the fused
//!   mask, local pages won 3 of those 4 points in the next run: 4 B,
//!   P = 1024, 2 threads 314 vs 262 M/s; P = 4096, 144 vs 96 and 254 vs
//!   211; lock-free SMB kept P = 1024 on one thread, 221 vs 182.)
//! - records of at least [`AUTO_LARGE_RECORD_BYTES_MIN`] bytes on one
//!   thread into at most [`AUTO_CMP_UNITS_PARTITIONS_MAX`] partitions:
//!   processing units (cmp 58 vs lp 44 and 40 vs 38 above; 56 vs 38 and 45
//!   vs 39 in the run in `docs/benchmarks.md`);
//! - more than [`AUTO_LOCAL_PAGES_PARTITIONS_MAX`] partitions: SMB with
//!   lock-free reservations, because thread-local pages cost threads x
//!   partitions x page size of memory (65,536 partitions x 16 KiB = 1 GiB per
//!   thread), while shared pages cost partitions x page size.
//!
//! The thesis found thread-local pages best below 32 partitions and SMB
//! above; here direct stores into small pages win up to 4096 partitions for
//! records of 16 bytes and more, because this CPU merges consecutive stores
//! to a line by itself and its caches hold one line per partition tail (see
//! `fixed_writer` and the page size note in `page`).

use super::{CmpProcessingUnits, LocalPagesAndMerge, PartitionJob, PartitionStrategy, SmbLockFree};
use crate::partition::output::Partitioned;
use crate::partition::PartitionError;

/// Records of at least this many bytes on one thread go to processing
/// units up to [`AUTO_CMP_UNITS_PARTITIONS_MAX`] partitions.
pub const AUTO_LARGE_RECORD_BYTES_MIN: usize = 64;
/// See [`AUTO_LARGE_RECORD_BYTES_MIN`].
pub const AUTO_CMP_UNITS_PARTITIONS_MAX: usize = 8;
/// Most partitions for thread-local pages (memory: threads x partitions x
/// page size).
pub const AUTO_LOCAL_PAGES_PARTITIONS_MAX: usize = 4096;

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
        let large_few = record_bytes >= AUTO_LARGE_RECORD_BYTES_MIN
            && parts <= AUTO_CMP_UNITS_PARTITIONS_MAX
            && job.threads == 1;
        if parts > AUTO_LOCAL_PAGES_PARTITIONS_MAX {
            Box::new(SmbLockFree::default())
        } else if large_few {
            Box::new(CmpProcessingUnits::default())
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
        assert_eq!(pick(t100, 32, 2), "local_pages");
        assert_eq!(pick(t100, 8, 1), "cmp_units");
        assert_eq!(pick(t100, 8, 2), "local_pages");
        assert_eq!(pick(t100, 8192, 2), "smb_lockfree");
    }
}
