//! The engine's partition page pools: one per page size, shared by every
//! shuffle whose pages have that size, so that the pages a host took as
//! one map attempt's output come back for the next attempt's records.
//!
//! Memory the allocator hands out for the first time costs a page fault
//! and a zero fill per 4 KiB. A map attempt's output pages are freed after
//! the host wrote them (Spark's data file), and glibc returns a freed run
//! of that size to the kernel, so without reuse every attempt faults all
//! its pages in again: measured under Spark (`spark/bench.py`'s page fault
//! column, aggregate workload) as the offload thread's largest kernel
//! cost. A host that is done with an attempt's output hands the batches
//! back ([`crate::Engine::recycle_output`]); a batch whose buffer has a
//! pool's page size is kept, up to [`PAGE_POOL_FREE_BYTES`] of free pages
//! per size, and the rest is freed.
//!
//! Page sizes are powers of two from 16 to 64 KiB (`page_bytes_for`), so
//! the engine holds at most three pools.

use std::sync::{Arc, Mutex};

use sluice_core::format::RecordBatch;
use sluice_core::partition::{Page, PagePool};

/// Free partition pages the engine keeps for reuse per page size at most
/// (64 MiB): two map attempts of 1M small records each (Spark SQL's
/// partial aggregates, 36 bytes each as engine records) come back whole.
/// Free pages are not accounted in any memory pool.
pub const PAGE_POOL_FREE_BYTES: usize = 64 << 20;

/// The pools, by page size.
#[derive(Debug, Default)]
pub(crate) struct PagePools {
    pools: Mutex<Vec<Arc<PagePool>>>,
}

impl PagePools {
    /// The pool of `page_bytes`-byte pages, made on first use.
    pub(crate) fn get(&self, page_bytes: usize) -> Arc<PagePool> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = pools.iter().find(|p| p.page_bytes() == page_bytes) {
            return p.clone();
        }
        let pool = Arc::new(PagePool::with_free_limit(page_bytes, PAGE_POOL_FREE_BYTES));
        pools.push(pool.clone());
        pool
    }

    /// The most free page bytes the pools made so far keep.
    pub(crate) fn free_limit(&self) -> usize {
        self.pools.lock().unwrap_or_else(|p| p.into_inner()).len() * PAGE_POOL_FREE_BYTES
    }

    /// Bytes of free pages held, in all pools.
    pub(crate) fn free_bytes(&self) -> usize {
        let pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools.iter().map(|p| p.free_pages() * p.page_bytes()).sum()
    }

    /// Keeps the buffers of `batches` that have a pool's page size (as
    /// free pages of that pool, within its limit); frees the others.
    pub(crate) fn recycle(&self, batches: impl IntoIterator<Item = RecordBatch>) {
        let pools = self.pools.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for b in batches {
            let cap = b.capacity();
            if let Some(pool) = pools.iter().find(|p| p.page_bytes() == cap) {
                pool.recycle(Page::from_buffer(b.into_buffer()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::format::Layout;

    #[test]
    fn page_sized_buffers_come_back_and_others_do_not() {
        let pools = PagePools::default();
        let pool = pools.get(16 << 10);
        assert!(Arc::ptr_eq(&pool, &pools.get(16 << 10)), "one pool per size");
        let layout = Layout::fixed(8, 4).expect("layout");
        let page = RecordBatch::with_capacity(layout, 16 << 10);
        let other = RecordBatch::with_capacity(layout, 100 << 10);
        let (page_cap, other_cap) = (page.capacity(), other.capacity());
        assert_eq!(page_cap, 16 << 10);
        assert_ne!(other_cap, 16 << 10);
        pools.recycle([page, other]);
        assert_eq!(pool.free_pages(), 1);
        assert_eq!(pool.page().payload().len(), 0, "a recycled page comes back empty");
        assert_eq!(pool.free_pages(), 0);
    }
}
