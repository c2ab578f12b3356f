//! Appending large payloads with non-temporal (streaming) stores.
//!
//! A plain copy into memory that is not in cache first reads each destination
//! line (read for ownership), then writes it back: three bytes of memory
//! traffic per byte copied. Streaming stores write whole lines without reading
//! them, two bytes per byte, and do not evict the working set from the cache.
//! A block's stored bytes are not read again soon by the encoding thread (they
//! go to a spill file, a socket or a reduce task), so the encoder uses them for
//! payloads of at least [`STREAMING_COPY_MIN_BYTES`].
//!
//! On x86-64 this uses SSE2's `movntdq` (part of the x86-64 baseline, so no
//! run-time detection is needed) for whole 64-byte lines only; the partial
//! lines at either end use ordinary stores. Elsewhere it is a plain copy.

/// Payloads shorter than this (bytes) are copied with ordinary stores: they
/// fit in L2 and may well be read again while still cached.
pub const STREAMING_COPY_MIN_BYTES: usize = 256 << 10;

/// Appends `src` to `dst`, with streaming stores where supported.
pub fn append_streaming(dst: &mut Vec<u8>, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        x86::append_streaming(dst, src);
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        dst.extend_from_slice(src);
    }
}

/// Makes preceding streaming stores globally visible before later stores.
pub fn streaming_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};

    const LANE: usize = 16;
    /// Streaming stores only ever write whole cache lines: a partial line
    /// written with streaming stores costs a separate partial memory write,
    /// so the head and tail of a copy that are not whole lines use ordinary
    /// stores (and stay in cache for the next append, which completes them).
    const LINE: usize = 64;

    pub(super) fn append_streaming(dst: &mut Vec<u8>, src: &[u8]) {
        dst.reserve(src.len());
        let start = dst.len();
        let base = dst.as_mut_ptr();
        // Bytes until the destination is cache-line aligned, copied normally.
        let misalign = (base as usize + start) % LINE;
        let head = if misalign == 0 { 0 } else { (LINE - misalign).min(src.len()) };
        let lines = (src.len() - head) / LINE;
        let body = lines * LINE;
        let lanes = body / LANE;
        // SAFETY: `reserve` guaranteed capacity for `start + src.len()` bytes,
        // so every write below (head, `lanes` 16-byte lanes making up whole
        // aligned cache lines, tail) is
        // inside the allocation; `src` and `dst` cannot overlap (one is
        // borrowed shared, the other mutably). Loads are unaligned loads of
        // in-bounds 16-byte ranges of `src`. The destination of each streaming
        // store is 64-byte (so 16-byte) aligned by construction of `head`. All
        // `src.len()` bytes are initialised before `set_len`.
        unsafe {
            let d = base.add(start);
            std::ptr::copy_nonoverlapping(src.as_ptr(), d, head);
            let s = src.as_ptr().add(head);
            let dd = d.add(head);
            for i in 0..lanes {
                let v = _mm_loadu_si128(s.add(i * LANE).cast::<__m128i>());
                _mm_stream_si128(dd.add(i * LANE).cast::<__m128i>(), v);
            }
            std::ptr::copy_nonoverlapping(s.add(body), dd.add(body), src.len() - head - body);
            dst.set_len(start + src.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_exactly_at_every_alignment() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for pre in 0..70 {
            for len in [0, 1, 15, 16, 17, 33, 63, 64, 65, 127, 128, 999, 1000] {
                let mut dst = vec![0xAAu8; pre];
                append_streaming(&mut dst, &src[..len]);
                streaming_fence();
                assert_eq!(dst.len(), pre + len);
                assert!(dst[..pre].iter().all(|&b| b == 0xAA));
                assert_eq!(&dst[pre..], &src[..len]);
            }
        }
    }
}
