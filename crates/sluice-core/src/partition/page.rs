//! Pages: the per-partition output units of the partition operator, and the
//! pool they come from.
//!
//! A page holds records of one partition back to back in the block payload
//! layout (see `docs/wire-format.md`), so a full page becomes a block with no
//! transformation. For the variable layout the per-record length prefix plays
//! the role of a slotted page's slot directory (records are found by walking
//! it); fixed-width records need none.
//!
//! Pages come from a [`PagePool`] and go back to it: memory faults in at
//! 0.4-2.5 GB/s on first touch here but is reused at 27-29 GB/s
//! (`shared/design/facts.md`), so strategies never allocate a page per batch.
//! A record larger than the page size gets a page of its own, sized to fit.

use std::sync::Mutex;

use crate::format::{BatchView, Layout, RecordBatch};

/// Default page size in bytes (16 KiB).
///
/// The thesis used 5 MiB pages; at 1024 partitions that is 5 GiB of pages
/// touched up front per thread, which this machine pays for in page faults.
/// Large pages are also slow to fill: with uniform keys all partitions' page
/// tails advance in step, and when pages are large and aligned alike the
/// tails fall into few cache sets. Measured with `sluice bench partition
/// --sizes 16 --partitions 1024 --threads 1 --strategies local_pages
/// --page-kib K` (direct page writes, M records/s, two runs each):
/// 4 KiB 173/123, 8 KiB 181/142, 16 KiB 170/197, 32 KiB 68-115,
/// 256 KiB 86. Pages are not the I/O unit (spills and the engine write many
/// pages at once), so small pages cost only a 36-byte block header each
/// (0.2 % at 16 KiB).
pub const PAGE_BYTES_DEFAULT: usize = 16 << 10;

/// Bytes of free pages a pool keeps for reuse; pages returned beyond this
/// are freed (256 MiB: a 64 MiB job into 1024 partitions on two threads
/// recycles all its pages).
pub const POOL_FREE_BYTES_MAX: usize = 256 << 20;

/// Records of one partition, in the payload layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    data: Vec<u8>,
    count: u32,
}

impl Page {
    /// An empty page over a buffer (cleared).
    pub fn from_buffer(mut data: Vec<u8>) -> Self {
        data.clear();
        Page { data, count: 0 }
    }

    /// A page over a buffer that already holds `count` whole records in the
    /// layout it will be viewed in.
    pub(crate) fn from_records(data: Vec<u8>, count: u32) -> Self {
        Page { data, count }
    }

    /// Appends one record's raw bytes if they fit within `page_bytes`.
    #[inline]
    pub fn try_push(&mut self, raw: &[u8], page_bytes: usize) -> bool {
        if self.data.len() + raw.len() > page_bytes && self.count > 0 {
            return false;
        }
        self.data.extend_from_slice(raw);
        self.count += 1;
        true
    }

    /// Appends several whole records (their raw bytes and their count).
    pub fn push_many(&mut self, raw: &[u8], records: u32) {
        self.data.extend_from_slice(raw);
        self.count += records;
    }

    /// Appends several whole records with streaming stores (see
    /// [`crate::format::copy`]); the caller issues the fence before the page
    /// is handed to another thread.
    pub fn push_many_streaming(&mut self, raw: &[u8], records: u32) {
        crate::format::copy::append_streaming(&mut self.data, raw);
        self.count += records;
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the page holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Payload bytes used.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The raw payload.
    pub fn payload(&self) -> &[u8] {
        &self.data
    }

    /// The records, viewed in `layout` (the layout the page was filled in).
    pub fn view(&self, layout: Layout) -> BatchView<'_> {
        BatchView::new_unchecked(layout, self.count, &self.data)
    }

    /// The buffer, for returning it to a pool.
    pub fn into_buffer(self) -> Vec<u8> {
        self.data
    }

    /// The page as a record batch in `layout` (the layout it was filled
    /// in), without copying.
    pub fn into_batch(self, layout: Layout) -> RecordBatch {
        RecordBatch::from_valid(layout, self.data, self.count)
    }
}

/// A pool of page buffers of one size, plus a few large contiguous buffers
/// for strategies that write one partitioned buffer.
#[derive(Debug)]
pub struct PagePool {
    page_bytes: usize,
    /// Bytes of free pages kept for reuse at most.
    free_max: usize,
    free: Mutex<Vec<Vec<u8>>>,
    buffers: Mutex<Vec<Vec<u8>>>,
}

/// Large buffers a pool keeps for reuse.
pub const POOL_FREE_BUFFERS_MAX: usize = 8;

impl PagePool {
    /// A pool of `page_bytes`-byte pages (at least 64 bytes).
    pub fn new(page_bytes: usize) -> Self {
        Self::with_free_limit(page_bytes, POOL_FREE_BYTES_MAX)
    }

    /// A pool that keeps at most `free_max` bytes of free pages (an engine
    /// with many shuffles bounds what idle pools hold this way).
    pub fn with_free_limit(page_bytes: usize, free_max: usize) -> Self {
        PagePool {
            page_bytes: page_bytes.max(64),
            free_max,
            free: Mutex::new(Vec::new()),
            buffers: Mutex::new(Vec::new()),
        }
    }

    /// The page size in bytes.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// An empty page, reused if one is free.
    pub fn page(&self) -> Page {
        let reused = self.free.lock().ok().and_then(|mut f| f.pop());
        Page::from_buffer(reused.unwrap_or_else(|| Vec::with_capacity(self.page_bytes)))
    }

    /// A page buffer (contents unspecified) with room for a page.
    pub(crate) fn page_buffer(&self) -> Vec<u8> {
        let reused = self.free.lock().ok().and_then(|mut f| f.pop());
        reused.unwrap_or_else(|| Vec::with_capacity(self.page_bytes))
    }

    /// An empty page with room for `bytes` (a record larger than a page).
    pub fn oversized_page(&self, bytes: usize) -> Page {
        Page::from_buffer(Vec::with_capacity(bytes))
    }

    /// Returns a page's buffer to the pool.
    pub fn recycle(&self, page: Page) {
        let buf = page.into_buffer();
        if buf.capacity() != self.page_bytes {
            return;
        }
        if let Ok(mut f) = self.free.lock() {
            if (f.len() + 1) * self.page_bytes <= self.free_max {
                f.push(buf);
            }
        }
    }

    /// Returns every page of an output to the pool.
    pub fn recycle_all(&self, pages: impl IntoIterator<Item = Page>) {
        for p in pages {
            self.recycle(p);
        }
    }

    /// A buffer of exactly `len` initialised bytes (contents unspecified),
    /// reusing a returned buffer when one is large enough.
    pub fn buffer(&self, len: usize) -> Vec<u8> {
        let reused = self.buffers.lock().ok().and_then(|mut b| {
            let i = b.iter().position(|v| v.capacity() >= len)?;
            Some(b.swap_remove(i))
        });
        let mut v = reused.unwrap_or_default();
        // Stale bytes are initialised; only growth writes zeros.
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0);
        }
        v
    }

    /// Returns a large buffer for reuse.
    pub fn recycle_buffer(&self, buf: Vec<u8>) {
        if let Ok(mut b) = self.buffers.lock() {
            if b.len() < POOL_FREE_BUFFERS_MAX {
                b.push(buf);
            }
        }
    }

    /// Number of free pages held.
    pub fn free_pages(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }
}

/// A partition's current page plus its full ones, filled by one writer.
#[derive(Debug, Default)]
pub struct PageChain {
    pub(crate) full: Vec<Page>,
    pub(crate) current: Option<Page>,
}

impl PageChain {
    /// Takes the pages that filled (the current one stays open).
    pub fn drain_full(&mut self) -> std::vec::Drain<'_, Page> {
        self.full.drain(..)
    }

    /// Appends one record, taking a new page from `pool` when the current one
    /// is full.
    #[inline]
    pub fn push(&mut self, raw: &[u8], pool: &PagePool) {
        let page_bytes = pool.page_bytes();
        if let Some(page) = self.current.as_mut() {
            if page.try_push(raw, page_bytes) {
                return;
            }
        }
        let mut fresh =
            if raw.len() > page_bytes { pool.oversized_page(raw.len()) } else { pool.page() };
        fresh.try_push(raw, page_bytes.max(raw.len()));
        if let Some(old) = self.current.replace(fresh) {
            self.full.push(old);
        }
    }

    /// Appends whole fixed-width records (`bytes.len()` a multiple of
    /// `width`), filling pages up to the page size, with streaming stores.
    ///
    /// The caller must call [`crate::format::copy::streaming_fence`] before
    /// the pages are read by another thread (once per thread at the end is
    /// enough: writers sharing a page only append, they never read it).
    pub fn push_fixed_run(&mut self, mut bytes: &[u8], width: usize, pool: &PagePool) {
        let page_bytes = pool.page_bytes();
        while !bytes.is_empty() {
            let room = self.current.as_ref().map_or(0, |p| page_bytes.saturating_sub(p.bytes()));
            let n = (room / width * width).min(bytes.len());
            if n == 0 {
                if width > page_bytes {
                    let mut big = pool.oversized_page(width);
                    big.push_many(&bytes[..width], 1);
                    if let Some(old) = self.current.replace(big) {
                        self.full.push(old);
                    }
                    bytes = &bytes[width..];
                    continue;
                }
                if let Some(old) = self.current.replace(pool.page()) {
                    self.full.push(old);
                }
                continue;
            }
            if let Some(page) = self.current.as_mut() {
                page.push_many_streaming(&bytes[..n], (n / width) as u32);
            }
            bytes = &bytes[n..];
        }
    }

    /// All pages, full ones first, the current one last.
    pub fn into_pages(self) -> Vec<Page> {
        let mut pages = self.full;
        pages.extend(self.current.filter(|p| !p.is_empty()));
        pages
    }
}
