//! CPU hints shared by the hot loops (partition page writers, hash tables).

/// Hints the CPU to bring the cache line at `at` into L1 (`prefetcht0`);
/// used ahead of a load or store that will touch it. Any address is
/// allowed, including one past the end of an allocation (compute it with
/// `wrapping_add`).
#[inline(always)]
pub(crate) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
