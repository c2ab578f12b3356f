//! Gives the memory a daemon freed back to the kernel.
//!
//! The daemon's blocks are buffers of about a megabyte (a push chunk's
//! sections, a block read back from disk). glibc's allocator serves the
//! first of that size with mmap and returns it to the kernel on free, but
//! then raises its mmap threshold to the size it saw, so later ones come
//! from its heaps (one per thread that allocates, and `block_in_place`
//! brings threads), where a freed buffer between live ones is kept, not
//! returned: measured on the loopback cluster, a 64 MiB daemon's resident
//! memory peaked at 200-260 MB while it held at most 64 MiB. So the daemon
//! counts the bytes of the buffers it lets go (push frames once staged,
//! blocks spilled, blocks read back from disk and sent) and, every
//! [`TRIM_EVERY_BYTES`] of them and after each deletion, asks the
//! allocator to give back its free pages (`malloc_trim`, which since glibc
//! 2.8 releases whole free pages inside the heaps too), outside the
//! store's lock. A trim walks the heaps' free lists, so it is not done per
//! buffer; and it may take milliseconds on large heaps, so inside the
//! runtime it runs on a blocking thread, not on the worker that serves a
//! connection, one at a time (a trim asked for while one runs is that
//! one's).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of buffers let go between two trims.
pub(crate) const TRIM_EVERY_BYTES: u64 = 32 << 20;

/// Bytes of buffers let go since the last trim.
static FREED: AtomicU64 = AtomicU64::new(0);

/// Counts `bytes` of buffers let go; trims once [`TRIM_EVERY_BYTES`] have
/// gathered.
pub(crate) fn freed(bytes: u64) {
    if FREED.fetch_add(bytes, Ordering::Relaxed) + bytes >= TRIM_EVERY_BYTES {
        FREED.store(0, Ordering::Relaxed);
        give_back();
    }
}

/// Whether a trim is running.
static TRIMMING: AtomicBool = AtomicBool::new(false);

/// Returns the allocator's free pages to the kernel (glibc only; other
/// allocators return memory by themselves): on a blocking thread inside
/// the runtime, here outside it.
pub(crate) fn give_back() {
    if TRIMMING.swap(true, Ordering::AcqRel) {
        return;
    }
    let running = Running;
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            // Dropped unrun by a runtime shutting down, it still ends the trim.
            rt.spawn_blocking(move || trim_now(running));
        }
        Err(_) => trim_now(running),
    }
}

/// The trim under way; ends it when dropped.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        TRIMMING.store(false, Ordering::Release);
    }
}

fn trim_now(_running: Running) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it walks the allocator's own
    // free lists under the allocator's locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
