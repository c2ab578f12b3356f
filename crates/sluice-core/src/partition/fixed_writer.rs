//! Direct writes of fixed-width records into per-partition pages, for one
//! writer thread.
//!
//! # Why no write-combining buffer
//! The thesis and the radix-partitioning literature gather records in a
//! cache-line sized buffer per partition and flush whole lines. On this
//! machine (an AMD EPYC guest) a stand-alone comparison
//! at 16-byte records and 1024 partitions measured the plain store of each
//! record to its partition's page tail at 180-300 M records/s, against
//! 80-160 M/s for 64 B to 1 KiB buffers flushed with streaming or ordinary
//! stores: the buffer's "full?" branch mispredicts once per flush, and the
//! hardware already merges consecutive stores to one line. So the hot loop
//! here is one bounds check, one `W`-byte store and one cursor update per
//! record.
//!
//! # Cursor and prefetch
//! Each partition's write state is one (next, end) pointer pair, so a
//! record touches one line of writer state beside the page line it is
//! stored into (separate base and offset arrays cost a third line; merging
//! them took 16 B / 1024 partitions / 1 thread from 0.34-0.41 to 0.44-0.51
//! of a memory copy). Every store also prefetches the line
//! [`TAIL_PREFETCH_BYTES`] ahead of the cursor: a page comes back from the
//! pool cold, and without the hint each new line's fetch stalls the store
//! buffer. Three interleaved runs against the same code without it, M
//! records/s, one thread: 16 B into 32 partitions 191-200 -> 245-258, 100 B
//! into 32 partitions 47 -> 49-58, 100 B into 1024 partitions 33-36 ->
//! 39-43, 16 B into 1024 and into 8 partitions unchanged. 128 and 512 bytes
//! ahead were no better. (`prefetchw` would say "for writing", but it needs
//! a target feature the portable build does not assume; `prefetcht0` is
//! what is emitted.)
//!
//! # Pages
//! Each partition's current page is a pool buffer with room for a whole
//! number of records; records are appended to it (the capacity check is a
//! branch that is almost never taken). When the next record would not fit,
//! the buffer becomes a [`Page`] and a fresh one comes from the pool; a
//! record wider than a page gets a buffer sized to it.

use crate::hint::prefetch;
use crate::partition::page::{Page, PagePool};

/// How far ahead of a partition's cursor its page is prefetched, in bytes
/// (4 lines; see the module docs for the measurement).
pub(crate) const TAIL_PREFETCH_BYTES: usize = 256;

/// Where the next record of a partition goes, and where its page ends.
///
/// The two pointers sit side by side so that a record touches one line of
/// writer state (16 bytes per partition; 16 KiB at 1024 partitions) next to
/// the line of the page it is stored into.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    at: *mut u8,
    end: *mut u8,
}

impl Cursor {
    /// No tail yet: no room, so the first record installs one.
    const EMPTY: Cursor = Cursor { at: std::ptr::null_mut(), end: std::ptr::null_mut() };

    /// Bytes left before the end of the page.
    #[inline(always)]
    fn room(&self) -> usize {
        self.end.addr() - self.at.addr()
    }
}

/// Per-partition page tails for one writer.
///
/// The hot loop writes through a raw cursor per partition rather than
/// `Vec::extend_from_slice`: one load of the partition's cursor, one
/// compare of the room left against the width, one `W`-byte copy, one store
/// of the cursor. A tail's `Vec` keeps length 0 while it is written and gets
/// its length when it is retired (see the safety notes).
#[derive(Debug)]
pub(crate) struct FixedPageWriter<'p> {
    pool: &'p PagePool,
    width: usize,
    /// Bytes of a page's capacity used for records (whole records).
    cap: usize,
    /// Current page buffer per partition; capacity 0 until the partition's
    /// first record, then at least `cap`. Length 0 while being written.
    tails: Vec<Vec<u8>>,
    /// Per partition: the next write into `tails[p]` and
    /// `tails[p].as_mut_ptr() + cap`; [`Cursor::EMPTY`] for a partition
    /// without a tail.
    cursors: Vec<Cursor>,
    /// Finished pages per partition.
    full: Vec<Vec<Page>>,
}

impl<'p> FixedPageWriter<'p> {
    /// A writer for `parts` partitions of `width`-byte records.
    pub(crate) fn new(pool: &'p PagePool, parts: usize, width: usize) -> Self {
        let width = width.max(1);
        let cap = (pool.page_bytes() / width).max(1) * width;
        FixedPageWriter {
            pool,
            width,
            cap,
            tails: (0..parts).map(|_| Vec::new()).collect(),
            cursors: vec![Cursor::EMPTY; parts],
            full: (0..parts).map(|_| Vec::new()).collect(),
        }
    }

    /// Appends one record (`rec.len()` is the width) to partition `p`;
    /// `W` is the width when known at compile time, else 0.
    #[inline(always)]
    pub(crate) fn push<const W: usize>(&mut self, p: usize, rec: &[u8]) {
        let width = if W > 0 { W } else { self.width };
        let rec = &rec[..width];
        let mut c = self.cursors[p];
        if c.room() < width {
            c = self.next_page(p);
        }
        // SAFETY: `c.at..c.end` lies inside `tails[p]`'s allocation (at most
        // `cap` bytes from its start), a buffer nothing else references and
        // that is not reallocated while it is the tail (only `next_page`
        // and `into_pages` replace or take it, resetting the cursor);
        // `room() >= width` was just checked, and `rec` has exactly `width`
        // bytes in a different allocation (an input batch).
        unsafe {
            std::ptr::copy_nonoverlapping(rec.as_ptr(), c.at, width);
            self.cursors[p].at = c.at.add(width);
        }
        prefetch(c.at.wrapping_add(TAIL_PREFETCH_BYTES));
    }

    /// Bytes written into partition `p`'s tail.
    fn used(&self, p: usize) -> usize {
        match self.cursors[p].at.is_null() {
            true => 0,
            false => self.cursors[p].at.addr() - self.tails[p].as_ptr().addr(),
        }
    }

    /// Retires partition `p`'s tail (if any), installs a fresh one and
    /// returns its cursor.
    #[cold]
    #[inline(never)]
    fn next_page(&mut self, p: usize) -> Cursor {
        let used = self.used(p);
        let mut fresh = self.pool.page_buffer();
        fresh.clear();
        fresh.reserve_exact(self.cap);
        let at = fresh.as_mut_ptr();
        // SAFETY: the buffer has capacity for at least `cap` bytes.
        let cursor = Cursor { at, end: unsafe { at.add(self.cap) } };
        self.cursors[p] = cursor;
        let old = std::mem::replace(&mut self.tails[p], fresh);
        if old.capacity() > 0 {
            let page = self.retire(old, used);
            self.full[p].push(page);
        }
        cursor
    }

    /// Gives a written tail its length and turns it into a page.
    fn retire(&self, mut buf: Vec<u8>, used: usize) -> Page {
        debug_assert!(used <= buf.capacity() && used % self.width == 0);
        // SAFETY: `used <= cap <= capacity`, and the first `used` bytes were
        // written by `push` (whole records, contiguous from offset 0).
        unsafe { buf.set_len(used.min(buf.capacity())) };
        let count = (buf.len() / self.width) as u32;
        Page::from_records(buf, count)
    }

    /// Every partition's pages, full ones first, the partial tail last.
    pub(crate) fn into_pages(mut self) -> Vec<Vec<Page>> {
        let used: Vec<usize> = (0..self.tails.len()).map(|p| self.used(p)).collect();
        let tails = std::mem::take(&mut self.tails);
        let mut out = std::mem::take(&mut self.full);
        for ((p, buf), used) in tails.into_iter().enumerate().zip(used) {
            if buf.capacity() == 0 {
                continue;
            }
            match used {
                0 => self.pool.recycle(Page::from_buffer(buf)),
                used => {
                    let page = self.retire(buf, used);
                    out[p].push(page);
                }
            }
        }
        out
    }
}
