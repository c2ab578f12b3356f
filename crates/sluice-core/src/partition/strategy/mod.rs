//! Partition strategies: the thesis's multithreaded ways of grouping records
//! by partition, and PSACS's sort-based grouping, behind one trait.
//!
//! | strategy | idea | output |
//! |---|---|---|
//! | [`Naive`] | one growable vector per partition, one thread (the baseline) | pages |
//! | [`OnDemand`] | every record appended to a shared per-partition page under its lock | pages |
//! | [`Smb`] | thread-local software-managed buffers per partition, flushed to shared pages under the lock | pages |
//! | [`SmbLockFree`] | the same buffers, flushed by reserving page space with one atomic add (lock only to install a page) | pages |
//! | [`Radix`] | per-thread histograms, prefix sums, exclusive write ranges in one buffer | buffer |
//! | [`Hybrid`] | small chunks grouped locally, appended to shared pages once per partition per chunk | pages |
//! | [`CmpProcessingUnits`] | threads in a unit split the partition range; each scans the unit's input | pages |
//! | [`LocalPagesAndMerge`] | thread-local pages, then a merge that gives each thread a group of partitions | pages |
//! | [`SortGroup`] | PSACS: sort (partition, record) pairs, then gather | buffer |
//! | [`Auto`] | picks one of the above from record size, partitions and threads | either |
//!
//! Input is a list of batches in one layout; thread `t` of `T` takes batches
//! `t, t + T, t + 2T, ...`. Every strategy is correct for any thread count,
//! partition count and record size; they differ in contention, memory and
//! passes over the data.

mod auto;
mod cmp_units;
mod hybrid;
mod local_pages;
mod naive;
mod on_demand;
mod radix;
mod smb;
mod smb_lockfree;
mod sort_group;

pub use auto::{Auto, AUTO_LOCAL_PAGES_PARTITIONS_MAX};
pub use cmp_units::{CmpProcessingUnits, UNIT_THREADS_DEFAULT};
pub use hybrid::{Hybrid, HYBRID_CHUNK_RECORDS_DEFAULT};
pub use local_pages::{LocalPagesAndMerge, MERGE_COPY_DIVISOR};
pub use naive::Naive;
pub use on_demand::OnDemand;
pub use radix::Radix;
pub use smb::{Smb, SMB_BYTES_DEFAULT};
pub use smb_lockfree::SmbLockFree;
pub use sort_group::SortGroup;

use crate::format::{BatchView, Layout, RawRecord, Records};
use crate::partition::function::Partitioner;
use crate::partition::output::Partitioned;
use crate::partition::page::PagePool;
use crate::partition::PartitionError;

/// Most threads a strategy runs.
pub const THREADS_MAX: usize = 256;

/// One partitioning job: input, function, threads and page pool.
#[derive(Debug, Clone, Copy)]
pub struct PartitionJob<'a> {
    /// Layout of every input batch.
    pub layout: Layout,
    /// The input.
    pub input: &'a [BatchView<'a>],
    /// The partition function.
    pub partitioner: &'a dyn Partitioner,
    /// Worker threads, 1 to [`THREADS_MAX`].
    pub threads: usize,
    /// Where pages come from.
    pub pool: &'a PagePool,
}

impl PartitionJob<'_> {
    pub(crate) fn check(&self) -> Result<(), PartitionError> {
        if self.threads == 0 || self.threads > THREADS_MAX {
            return Err(PartitionError::ThreadCount { got: self.threads, max: THREADS_MAX });
        }
        if self.input.iter().any(|v| v.layout() != self.layout) {
            return Err(PartitionError::MixedLayouts);
        }
        Ok(())
    }

    pub(crate) fn partitions(&self) -> usize {
        self.partitioner.partitions() as usize
    }

    /// The batches thread `t` handles.
    pub(crate) fn batches_of(&self, t: usize) -> impl Iterator<Item = &BatchView<'_>> + '_ {
        self.input.iter().skip(t).step_by(self.threads)
    }
}

/// Visits every raw record of `view`.
#[inline]
pub fn for_each_raw<'a>(view: &BatchView<'a>, mut f: impl FnMut(RawRecord<'a>)) {
    let mut it: Records<'a> = view.raw();
    while let Some(r) = it.next_raw() {
        f(r);
    }
}

/// Records per chunk when a strategy computes partition ids a chunk at a
/// time (64 KiB of ids: stays in L2 between computing and using them).
pub(crate) const PID_CHUNK_RECORDS: usize = 16 << 10;

/// A fixed-width batch cut into views of at most [`PID_CHUNK_RECORDS`]
/// records each.
pub(crate) fn fixed_chunks<'a>(
    view: &BatchView<'a>,
    width: usize,
) -> impl Iterator<Item = BatchView<'a>> + 'a {
    let layout = view.layout();
    view.payload()
        .chunks(PID_CHUNK_RECORDS * width.max(1))
        .map(move |c| BatchView::new_unchecked(layout, (c.len() / width.max(1)) as u32, c))
}

/// A way of grouping records by partition.
pub trait PartitionStrategy: Send + Sync + std::fmt::Debug {
    /// Short name for reports.
    fn name(&self) -> &'static str;

    /// Groups the job's input by partition.
    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError>;
}

/// Every strategy, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    /// [`Naive`].
    Naive,
    /// [`OnDemand`].
    OnDemand,
    /// [`Smb`].
    Smb,
    /// [`SmbLockFree`].
    SmbLockFree,
    /// [`Radix`].
    Radix,
    /// [`Hybrid`].
    Hybrid,
    /// [`CmpProcessingUnits`].
    CmpProcessingUnits,
    /// [`LocalPagesAndMerge`].
    LocalPagesAndMerge,
    /// [`SortGroup`].
    SortGroup,
    /// [`Auto`]: picks one of the others per job.
    Auto,
}

impl StrategyKind {
    /// All strategies, `Auto` last.
    pub const ALL: [StrategyKind; 10] = [
        StrategyKind::Naive,
        StrategyKind::OnDemand,
        StrategyKind::Smb,
        StrategyKind::SmbLockFree,
        StrategyKind::Radix,
        StrategyKind::Hybrid,
        StrategyKind::CmpProcessingUnits,
        StrategyKind::LocalPagesAndMerge,
        StrategyKind::SortGroup,
        StrategyKind::Auto,
    ];

    /// The strategy, with default settings.
    pub fn build(self) -> Box<dyn PartitionStrategy> {
        match self {
            StrategyKind::Naive => Box::new(Naive),
            StrategyKind::OnDemand => Box::new(OnDemand),
            StrategyKind::Smb => Box::new(Smb::default()),
            StrategyKind::SmbLockFree => Box::new(SmbLockFree::default()),
            StrategyKind::Radix => Box::new(Radix),
            StrategyKind::Hybrid => Box::new(Hybrid::default()),
            StrategyKind::CmpProcessingUnits => Box::new(CmpProcessingUnits::default()),
            StrategyKind::LocalPagesAndMerge => Box::new(LocalPagesAndMerge),
            StrategyKind::SortGroup => Box::new(SortGroup),
            StrategyKind::Auto => Box::new(Auto),
        }
    }

    /// Parses a strategy name as printed by [`PartitionStrategy::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.build().name() == s)
    }
}

/// One locked page chain per partition, for strategies that share pages.
pub(crate) fn shared_chains(
    parts: usize,
) -> Vec<std::sync::Mutex<crate::partition::page::PageChain>> {
    (0..parts).map(|_| std::sync::Mutex::new(Default::default())).collect()
}

/// The pages of shared chains, once every writer has joined.
pub(crate) fn into_paged(
    layout: Layout,
    shared: Vec<std::sync::Mutex<crate::partition::page::PageChain>>,
) -> Partitioned {
    let pages = shared
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).into_pages())
        .collect();
    Partitioned::Pages(crate::partition::output::PartitionedPages { layout, pages })
}

/// Copies one fixed-width record; `W` is the width when known at compile
/// time (0: use the slices' length).
#[inline(always)]
pub(crate) fn copy_record<const W: usize>(dst: &mut [u8], src: &[u8]) {
    if W > 0 {
        dst[..W].copy_from_slice(&src[..W]);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Calls `$f::<W>($args)` with `W` the record width for the widths the
/// benchmarks and TeraSort use (4, 8, 12 and 36: 8- and 32-byte keys with a
/// 4-byte value, 16, 100), and `W = 0` otherwise.
macro_rules! dispatch_width {
    ($width:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $width {
            4 => $f::<4>($($arg),*),
            8 => $f::<8>($($arg),*),
            12 => $f::<12>($($arg),*),
            16 => $f::<16>($($arg),*),
            36 => $f::<36>($($arg),*),
            100 => $f::<100>($($arg),*),
            _ => $f::<0>($($arg),*),
        }
    };
}
pub(crate) use dispatch_width;
