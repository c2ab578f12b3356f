//! Timing helpers for benchmarks that measure a baseline and a candidate in
//! the same rounds.
//!
//! Callers run one untimed warm-up round first, so buffers are faulted in and
//! no timed run pays for first-touch page faults (about 10 us per 4 KiB page
//! on this machine's VM, see `shared/design/facts.md`).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Time of one call of `f`.
pub(crate) fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// Time of one call of a fallible `f`.
pub(crate) fn try_time<E>(f: impl FnOnce() -> Result<(), E>) -> Result<Duration, E> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

/// The median of `values` (the upper one of the middle two for an even count;
/// 0 for none).
pub(crate) fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// GB/s (10^9 bytes per second) for `bytes` moved in `t`.
pub(crate) fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-12) / 1e9
}

/// The memory-copy baseline: copies each chunk back to back into `dst`,
/// which is at least as long as all chunks together.
pub(crate) fn copy_all(chunks: &[&[u8]], dst: &mut [u8]) {
    let mut at = 0;
    for c in chunks {
        dst[at..at + c.len()].copy_from_slice(c);
        at += c.len();
    }
    black_box(dst);
}

/// [`copy_all`] on `threads` threads: each thread copies a contiguous run
/// of the chunks into its own part of `dst`. With one thread this is [`copy_all`] on
/// the caller's thread.
pub(crate) fn copy_all_threads(chunks: &[&[u8]], dst: &mut [u8], threads: usize) {
    let threads = threads.clamp(1, chunks.len().max(1));
    if threads == 1 {
        return copy_all(chunks, dst);
    }
    let per = chunks.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut rest: &mut [u8] = dst;
        for run in chunks.chunks(per) {
            let len: usize = run.iter().map(|c| c.len()).sum();
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            s.spawn(move || copy_all(run, mine));
        }
    });
}
