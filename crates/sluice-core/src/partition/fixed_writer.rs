//! Direct writes of fixed-width records into per-partition pages, for one
//! writer thread.
//!
//! # Why no write-combining buffer
//! The thesis and the radix-partitioning literature gather records in a
//! cache-line sized buffer per partition and flush whole lines. Here the
//! plain store of each record to its partition's page tail measured about
//! twice as fast (`docs/benchmarks.md`, "Design measurements"): the
//! buffer's "full?" branch mispredicts once per flush, and the hardware
//! already merges consecutive stores to one line. So the hot loop
//! here is one bounds check, one `W`-byte store and one cursor update per
//! record.
//!
//! # Cursor and prefetch
//! Each partition's write state is one (next, end) pointer pair, so a
//! record touches one line of writer state beside the page line it is
//! stored into (separate base and offset arrays cost a third line).
//! Every store also prefetches the line [`TAIL_PREFETCH_BYTES`] ahead of
//! the cursor: a page comes back from the pool cold, and without the hint
//! each new line's fetch stalls the store buffer (both measured:
//! `docs/benchmarks.md`, "Design measurements"). (`prefetchw` would say
//! "for writing", but it needs a target feature the portable build does
//! not assume; `prefetcht0` is what is emitted.)
//!
//! # Room checked once per chunk, records written in pairs
//! With few partitions the room check leaves the per-record loop: a page's
//! cursor end is set [`CHUNK_BYTES`] (rounded down to whole records) short
//! of its capacity, [`FixedPageWriter::push_all`] writes a chunk of that
//! many records with no check (a chunk adds at most its own bytes to any
//! one page, which the reserve holds), and then retires every page whose
//! cursor passed its end. The sweep costs one compare per partition, so it
//! is used only while partitions are at most the records of a chunk; pages
//! then hold up to a chunk less than their capacity (about 6 % of a 16 KiB
//! page).
//!
//! Inside a chunk records go two at a time: both partitions' cursors are
//! loaded before either is stored back (the second record, when it goes to
//! the same partition, is placed one record further). One record at a
//! time, each cursor load comes after the previous record's cursor store to
//! an address only known once that record is hashed, and the core orders
//! the two; that chain, not memory, bounded the loop (the same speed
//! whether the destinations stream to memory or stay in L1), and pairs
//! break it (`docs/benchmarks.md`, "Design measurements"). Removing only
//! the room check gained nothing measurable.
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

/// Bytes of records written between two room checks in the chunked path
/// (1 KiB: 85 records of 12 bytes); also what a page keeps in reserve.
pub(crate) const CHUNK_BYTES: usize = 1 << 10;

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
    /// Records per chunk of [`FixedPageWriter::push_all`], 0 when the
    /// room is checked per record (too many partitions for the sweep).
    chunk: usize,
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
        let per_chunk = CHUNK_BYTES / width;
        // Chunked only where the sweep costs at most a compare per record
        // and the reserve is a small share of a page.
        let chunk = if parts <= per_chunk && per_chunk * width * 4 <= cap { per_chunk } else { 0 };
        FixedPageWriter {
            pool,
            width,
            cap,
            chunk,
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

    /// Appends every record of `recs` (whole `W`-byte records; `W` as in
    /// [`FixedPageWriter::push`]) to partition `pid(record)`.
    ///
    /// Where the writer is chunked (see the module docs) the room is
    /// checked once per chunk, else per record.
    #[inline(always)]
    pub(crate) fn push_all<const W: usize>(&mut self, recs: &[u8], pid: impl Fn(&[u8]) -> usize) {
        let width = if W > 0 { W } else { self.width };
        if self.chunk == 0 {
            for rec in recs.chunks_exact(width) {
                self.push::<W>(pid(rec), rec);
            }
            return;
        }
        for p in 0..self.cursors.len() {
            if self.cursors[p].at.is_null() {
                self.next_page(p);
            }
        }
        for chunk in recs.chunks(self.chunk * width) {
            // A local slice: its pointer and length stay in registers
            // (through `self` they would be reloaded after every store).
            let cursors: &mut [Cursor] = &mut self.cursors;
            let mut pairs = chunk.chunks_exact(2 * width);
            for two in &mut pairs {
                let (r0, r1) = two.split_at(width);
                let (p0, p1) = (pid(r0), pid(r1));
                // Both cursors are read before either is written back, so
                // the second load never waits on the first record's
                // store; a second record for the same partition goes one
                // record further.
                let a0 = cursors[p0].at;
                let a1 = cursors[p1].at.wrapping_add(if p0 == p1 { width } else { 0 });
                // SAFETY: every cursor had `room() >= 0` before this chunk
                // (installed above, or swept below), and its page buffer
                // has `chunk * width` bytes past `end` within
                // `cap`; this chunk adds at most `chunk` records to it, so
                // both stores stay inside the allocation (`a1` is `a0`'s
                // next record when both go to one partition). The records
                // lie in a different allocation (an input batch).
                unsafe {
                    std::ptr::copy_nonoverlapping(r0.as_ptr(), a0, width);
                    std::ptr::copy_nonoverlapping(r1.as_ptr(), a1, width);
                }
                cursors[p0].at = a0.wrapping_add(width);
                cursors[p1].at = a1.wrapping_add(width);
                prefetch(a0.wrapping_add(TAIL_PREFETCH_BYTES));
                prefetch(a1.wrapping_add(TAIL_PREFETCH_BYTES));
            }
            for rec in pairs.remainder().chunks_exact(width) {
                let c = &mut cursors[pid(rec)];
                let at = c.at;
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(rec.as_ptr(), at, width) };
                c.at = at.wrapping_add(width);
            }
            for p in 0..self.cursors.len() {
                let c = self.cursors[p];
                if c.at.addr() >= c.end.addr() {
                    self.next_page(p);
                }
            }
        }
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
        // A chunked writer's cursors end a chunk's bytes short of `cap`
        // (the reserve the module docs describe).
        let reserve = self.chunk * self.width;
        // SAFETY: the buffer has capacity for at least `cap` bytes, and
        // `reserve <= cap / 4`.
        let cursor = Cursor { at, end: unsafe { at.add(self.cap - reserve) } };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagen::rng::SplitMix64;

    /// Writes `n` 12-byte records (record `i` holds `i`) to `parts`
    /// partitions through [`FixedPageWriter::push_all`], with runs of equal
    /// partitions mixed in, and checks every partition's pages against the
    /// input order.
    fn check(parts: usize, n: usize, page_bytes: usize) {
        const W: usize = 12;
        let pool = PagePool::new(page_bytes);
        let mut rng = SplitMix64::new(parts as u64);
        let mut input = Vec::with_capacity(n * W);
        let mut expected: Vec<Vec<u64>> = vec![Vec::new(); parts];
        let mut p = 0;
        for i in 0..n as u64 {
            // Half the time the previous partition again (pairs of one
            // partition), else a random one.
            if rng.below(2) == 0 {
                p = rng.below(parts as u64) as usize;
            }
            input.extend_from_slice(&i.to_le_bytes());
            input.extend_from_slice(&(p as u32).to_le_bytes());
            expected[p].push(i);
        }
        let mut writer = FixedPageWriter::new(&pool, parts, W);
        // Two calls, the first ending on an odd record, as batches do.
        let split = (n / 3) | 1;
        let pid = |r: &[u8]| r[8..12].iter().rev().fold(0usize, |a, &b| a << 8 | usize::from(b));
        writer.push_all::<W>(&input[..split * W], pid);
        writer.push_all::<W>(&input[split * W..], pid);
        let cap = page_bytes / W * W;
        for (p, pages) in writer.into_pages().into_iter().enumerate() {
            let mut got = Vec::new();
            for page in &pages {
                assert!(page.bytes() <= cap && page.bytes() % W == 0, "page of {} B", page.bytes());
                assert_eq!(page.len() * W, page.bytes());
                for rec in page.payload().chunks_exact(W) {
                    let (id, part) = rec.split_at(8);
                    assert_eq!(part, (p as u32).to_le_bytes(), "record in partition {p}");
                    got.push(u64::from_le_bytes(id.try_into().expect("8 bytes")));
                }
            }
            assert_eq!(got, expected[p], "partition {p} of {parts}");
        }
    }

    #[test]
    fn chunked_writes_keep_every_record_in_order_and_pages_within_capacity() {
        // 16 partitions: chunked (85 records per room check), many pages
        // each; 1 and 2 partitions fill pages fastest.
        let pool = PagePool::new(4096);
        for parts in [1, 2, 16, 85] {
            let w = FixedPageWriter::new(&pool, parts, 12);
            assert!(w.chunk > 0, "{parts} partitions should take the chunked path");
            check(parts, 40_001, 4096);
        }
    }

    #[test]
    fn many_partitions_check_room_per_record() {
        let pool = PagePool::new(4096);
        let w = FixedPageWriter::new(&pool, 200, 12);
        assert_eq!(w.chunk, 0);
        check(200, 40_001, 4096);
        // Pages too small for a chunk's reserve also check per record.
        let small = PagePool::new(1024);
        let w = FixedPageWriter::new(&small, 4, 12);
        assert_eq!(w.chunk, 0);
        check(4, 10_001, 1024);
    }
}
