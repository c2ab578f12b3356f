//! The partition operator's output, in its two forms.
//!
//! ```text
//! PartitionedPages    partition p -> [page, page, ...]          (pool pages)
//! PartitionedBuffer   data: | p0 records | p1 records | ... |   offsets[p]..offsets[p+1]
//! ```
//! Page output lets a partition grow without knowing its size and hands full
//! pages on as blocks; the contiguous buffer is what histogram- and sort-based
//! strategies produce naturally and what later engine stages read per
//! partition in one slice.

use crate::format::{BatchView, Layout, Records};
use crate::partition::page::Page;

/// Records grouped by partition, in pages.
#[derive(Debug)]
pub struct PartitionedPages {
    pub(crate) layout: Layout,
    pub(crate) pages: Vec<Vec<Page>>,
}

impl PartitionedPages {
    /// The pages of partition `p`.
    pub fn pages(&self, p: usize) -> &[Page] {
        &self.pages[p]
    }

    /// The pages of every partition, in partition order.
    pub fn into_partitions(self) -> Vec<Vec<Page>> {
        self.pages
    }

    /// Takes every page out (to recycle them).
    pub fn into_pages(self) -> impl Iterator<Item = Page> {
        self.pages.into_iter().flatten()
    }
}

/// Records grouped by partition in one contiguous buffer.
#[derive(Debug)]
pub struct PartitionedBuffer {
    pub(crate) layout: Layout,
    pub(crate) data: Vec<u8>,
    /// `partitions + 1` byte offsets.
    pub(crate) offsets: Vec<usize>,
    /// Records per partition.
    pub(crate) counts: Vec<u32>,
}

impl PartitionedBuffer {
    /// The records of partition `p`.
    pub fn partition(&self, p: usize) -> BatchView<'_> {
        BatchView::new_unchecked(
            self.layout,
            self.counts[p],
            &self.data[self.offsets[p]..self.offsets[p + 1]],
        )
    }

    /// The whole buffer.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The buffer, for returning it to a pool.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// Byte offsets of the partitions (`partitions + 1` entries).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
}

/// The output of a partition strategy.
#[derive(Debug)]
pub enum Partitioned {
    /// Per-partition pages.
    Pages(PartitionedPages),
    /// One contiguous buffer with offsets.
    Buffer(PartitionedBuffer),
}

impl Partitioned {
    /// The records' layout.
    pub fn layout(&self) -> Layout {
        match self {
            Partitioned::Pages(p) => p.layout,
            Partitioned::Buffer(b) => b.layout,
        }
    }

    /// Returns the output's memory to `pool`.
    pub fn recycle(self, pool: &crate::partition::PagePool) {
        match self {
            Partitioned::Pages(p) => pool.recycle_all(p.into_pages()),
            Partitioned::Buffer(b) => pool.recycle_buffer(b.into_data()),
        }
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        match self {
            Partitioned::Pages(p) => p.pages.len(),
            Partitioned::Buffer(b) => b.counts.len(),
        }
    }

    /// Number of records in partition `p`.
    pub fn count(&self, p: usize) -> usize {
        match self {
            Partitioned::Pages(x) => x.pages[p].iter().map(Page::len).sum(),
            Partitioned::Buffer(b) => b.counts[p] as usize,
        }
    }

    /// Number of records in all partitions.
    pub fn total(&self) -> usize {
        (0..self.partitions()).map(|p| self.count(p)).sum()
    }

    /// The records of partition `p`, as one or more views.
    pub fn views(&self, p: usize) -> Vec<BatchView<'_>> {
        match self {
            Partitioned::Pages(x) => x.pages[p].iter().map(|pg| pg.view(x.layout)).collect(),
            Partitioned::Buffer(b) => vec![b.partition(p)],
        }
    }

    /// Iterates the records of partition `p`.
    pub fn records(&self, p: usize) -> impl Iterator<Item = crate::format::Record<'_>> {
        self.views(p).into_iter().flat_map(|v| v.iter())
    }

    /// Iterates the records of partition `p` with their raw bytes.
    pub fn raw_records(&self, p: usize) -> impl Iterator<Item = crate::format::RawRecord<'_>> {
        self.views(p).into_iter().flat_map(|v| {
            let mut it: Records<'_> = v.raw();
            std::iter::from_fn(move || it.next_raw())
        })
    }
}
