//! SmbLockFree: software-managed buffers flushed into shared pages without a
//! lock per flush (the thesis's "SmbLockFreeBatched").
//!
//! # Algorithm
//! Like [`super::Smb`], each thread fills a small buffer per partition. A full
//! buffer (a batch of whole records) is flushed into the partition's current
//! shared page by *reserving* its bytes with one atomic `fetch_add` on the
//! page's fill counter and copying into the reserved range; many threads copy
//! into the same page at once, into disjoint ranges. Only when a reservation
//! runs past the end of the page does the flushing thread take the
//! partition's lock, to install a fresh page (unless another thread already
//! did) and retry:
//!
//! ```text
//! flush n bytes ─► off = page.reserved.fetch_add(n)
//!                  ├─ off + n <= cap: copy to page[off..off+n]; page.written += n
//!                  └─ otherwise: lock p; install a new page if still current; retry
//! ```
//! Reservations that fit are exactly the ones below the first that does not
//! (the counter only grows), so a page's valid bytes are the prefix
//! `[0, written)` and hold whole records. Fixed-width records only (a
//! variable-length record could straddle the page end); other layouts run
//! [`super::Smb`].
//!
//! # Safety
//! Page memory is a leaked `Box<[u8]>` reached through a raw pointer while
//! threads run; `fetch_add` hands out disjoint ranges, so no two threads write
//! the same byte and nobody reads until the threads have joined. Pages are
//! owned by their partition's list and freed (or turned into [`Page`]s) after
//! the join, or in `Drop` on an early exit.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{copy_record, dispatch_width, PartitionJob, PartitionStrategy, Smb};
use crate::partition::output::{Partitioned, PartitionedPages};
use crate::partition::page::{Page, PagePool};
use crate::partition::PartitionError;

/// A page that several threads append to through reservations.
struct SharedPage {
    /// The page's memory: the buffer of a pool page (a `Vec<u8>` taken
    /// apart), `alloc_len` bytes of capacity, none of it assumed initialised.
    ptr: NonNull<u8>,
    alloc_len: usize,
    /// Usable bytes: whole records only.
    cap: usize,
    reserved: AtomicUsize,
    written: AtomicUsize,
}

// SAFETY: the memory behind `ptr` is only written through disjoint ranges
// handed out by `reserved.fetch_add`, and only read after all writers joined.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

impl SharedPage {
    fn new(pool: &PagePool, cap: usize) -> Box<Self> {
        let mut buf = pool.page().into_buffer();
        buf.clear();
        buf.reserve(cap);
        // Take the Vec apart; it is put back together in `into_buffer` or
        // `drop`. No byte is zeroed: only written bytes are ever exposed.
        let mut buf = std::mem::ManuallyDrop::new(buf);
        let alloc_len = buf.capacity();
        let ptr = NonNull::new(buf.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Box::new(SharedPage {
            ptr,
            alloc_len,
            cap: cap.min(alloc_len),
            reserved: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
        })
    }

    /// Copies `bytes` into the page if they fit; false if the page is full.
    fn try_append(&self, bytes: &[u8]) -> bool {
        let off = self.reserved.fetch_add(bytes.len(), Ordering::Relaxed);
        if off + bytes.len() > self.cap {
            return false;
        }
        // SAFETY: `[off, off + len)` lies within the `cap <= alloc_len` bytes
        // of the allocation (checked above) and was handed to this thread
        // alone by `fetch_add`; `bytes` is another allocation (a thread's
        // buffer). Writing to uninitialised bytes through a raw pointer is
        // allowed.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(off), bytes.len());
        }
        self.written.fetch_add(bytes.len(), Ordering::Relaxed);
        true
    }

    /// Takes the buffer back, holding the written prefix. Only called after
    /// every writer has joined.
    fn into_buffer(self) -> Vec<u8> {
        let written = self.written.load(Ordering::Acquire);
        let page = std::mem::ManuallyDrop::new(self);
        // SAFETY: `ptr` and `alloc_len` are the pointer and capacity of the
        // Vec taken apart in `new`, put back together exactly once
        // (`ManuallyDrop` keeps `Drop` from doing it again). The successful
        // reservations tile `[0, written)` without gaps (the counter only
        // grows, so every reservation that fits precedes the first that does
        // not), and each was copied into before its thread joined, so the
        // first `written <= cap <= alloc_len` bytes are initialised.
        unsafe { Vec::from_raw_parts(page.ptr.as_ptr(), written, page.alloc_len) }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: as in `into_buffer`, with length 0 (nothing is read);
        // `drop` runs only for pages not taken back by `into_buffer`.
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.alloc_len) });
    }
}

/// A partition's pages: the current one (lock-free appends) and all of them
/// (changed under the lock only).
struct Stream {
    current: AtomicPtr<SharedPage>,
    // Boxed so that page addresses stay put while the Vec grows: `current`
    // points into these boxes.
    #[allow(clippy::vec_box)]
    pages: Mutex<Vec<Box<SharedPage>>>,
}

impl Stream {
    fn new() -> Self {
        Stream { current: AtomicPtr::new(std::ptr::null_mut()), pages: Mutex::new(Vec::new()) }
    }

    /// Appends whole records (`bytes.len() <= cap`), installing pages as needed.
    fn append(&self, bytes: &[u8], pool: &PagePool, cap: usize) {
        loop {
            let cur = self.current.load(Ordering::Acquire);
            // SAFETY: a non-null `current` points into a `Box<SharedPage>`
            // owned by `pages`, which only grows while threads run; boxes are
            // not moved or freed before the join.
            if let Some(page) = unsafe { cur.as_ref() } {
                if page.try_append(bytes) {
                    return;
                }
            }
            let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
            // Another thread may have installed a page meanwhile.
            if self.current.load(Ordering::Acquire) == cur {
                let mut fresh = SharedPage::new(pool, cap);
                let raw: *mut SharedPage = &mut *fresh;
                pages.push(fresh);
                self.current.store(raw, Ordering::Release);
            }
        }
    }
}

/// SMB with lock-free, batched reservations in shared pages.
#[derive(Debug, Clone, Copy, Default)]
pub struct SmbLockFree {
    /// The buffer settings (and the fallback for variable-length records).
    pub smb: Smb,
}

fn thread_fixed<const W: usize>(
    job: &PartitionJob<'_>,
    t: usize,
    width: usize,
    smb_bytes: usize,
    page_cap: usize,
    streams: &[Stream],
) {
    let parts = job.partitions();
    let cap = (smb_bytes / width).max(1).min((page_cap / width).max(1)) * width;
    let mut data = vec![0u8; parts * cap];
    let mut fill = vec![0usize; parts];
    let mut pids = Vec::new();
    for view in job.batches_of(t) {
        pids.clear();
        job.partitioner.partition_batch(view, &mut pids);
        for (rec, &p) in view.payload().chunks_exact(width).zip(&pids) {
            let p = p as usize;
            let at = p * cap + fill[p];
            copy_record::<W>(&mut data[at..at + width], rec);
            fill[p] += width;
            if fill[p] == cap {
                streams[p].append(&data[p * cap..p * cap + cap], job.pool, page_cap);
                fill[p] = 0;
            }
        }
    }
    for p in 0..parts {
        if fill[p] > 0 {
            streams[p].append(&data[p * cap..p * cap + fill[p]], job.pool, page_cap);
        }
    }
}

impl PartitionStrategy for SmbLockFree {
    fn name(&self) -> &'static str {
        "smb_lockfree"
    }

    fn run(&self, job: &PartitionJob<'_>) -> Result<Partitioned, PartitionError> {
        job.check()?;
        let Some(width) = job.layout.fixed_record_bytes() else {
            return self.smb.run(job);
        };
        // Pages hold whole records; a record wider than a page gets a page
        // of its own width.
        let page_cap = (job.pool.page_bytes() / width).max(1) * width;
        let streams: Vec<Stream> = (0..job.partitions()).map(|_| Stream::new()).collect();
        let smb_bytes = self.smb.smb_bytes.max(16);
        std::thread::scope(|s| {
            for t in 0..job.threads {
                let streams = &streams[..];
                s.spawn(move || {
                    dispatch_width!(
                        width,
                        thread_fixed(job, t, width, smb_bytes, page_cap, streams)
                    )
                });
            }
        });
        let pages = streams
            .into_iter()
            .map(|st| {
                let list = st.pages.into_inner().unwrap_or_else(|e| e.into_inner());
                list.into_iter()
                    .filter_map(|sp| {
                        let buf = (*sp).into_buffer();
                        let records = (buf.len() / width) as u32;
                        if records == 0 {
                            job.pool.recycle(Page::from_buffer(buf));
                            return None;
                        }
                        Some(Page::from_records(buf, records))
                    })
                    .collect()
            })
            .collect();
        Ok(Partitioned::Pages(PartitionedPages { layout: job.layout, pages }))
    }
}
