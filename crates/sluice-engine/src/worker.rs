//! The engine's threads: offload workers, which run the queued map
//! segments and reduce-side jobs, and the extra host threads of liquid
//! offloading, which run migrated segments (and, with `host_steal`, take
//! from the workers' backlog).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::Inner;
use crate::scheduler::{Side, Wait};

/// Name prefix of the offload worker threads (15 bytes: what Linux keeps
/// of a thread name).
pub const OFFLOAD_THREAD_NAME: &str = "sluice-offload";

/// Name prefix of the extra host threads.
pub const HOST_THREAD_NAME: &str = "sluice-host";

/// An extra host thread: runs migrated segments at host speed until the
/// engine shuts down; with `host_steal`, when none is waiting, the next
/// map segment queued for the offload workers.
pub(crate) fn host_worker(inner: &Inner) {
    let backlog = inner.config.segment_bytes.saturating_mul(STEAL_BACKLOG_SEGMENTS);
    loop {
        let (job, stolen) = if !inner.config.host_steal {
            match inner.host_queue.pop() {
                Some(job) => (job, false),
                None => return,
            }
        } else {
            // Migrated segments first; else wait on the offload workers'
            // queue (every push there wakes this thread) for a backlog of
            // segments, bounded so that migrated segments pushed alone are
            // not left waiting.
            match inner.host_queue.pop_within(Duration::ZERO, None) {
                Wait::Job(job) => (job, false),
                Wait::Closed => return,
                Wait::Idle => match inner.scheduler.pop_within(HOST_IDLE_POLL, Some(backlog)) {
                    Wait::Job(job) => (job, true),
                    Wait::Closed => return,
                    Wait::Idle => continue,
                },
            }
        };
        let t = Instant::now();
        let bytes = job.bytes as u64;
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
        if ran.unwrap_or(true) {
            inner.counters.host_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            inner.liquid.migrated.fetch_add(bytes, Ordering::Relaxed);
            if stolen {
                inner.liquid.stolen.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }
}

/// An idle extra host thread takes a segment queued for the offload
/// workers only while at least this many segments' bytes are queued there:
/// a device that keeps up has a short queue, and taking from it would put
/// a third thread on its core.
pub const STEAL_BACKLOG_SEGMENTS: usize = 4;

/// How long an idle extra host thread waits on the offload workers' queue
/// before it looks for migrated segments again.
pub const HOST_IDLE_POLL: Duration = Duration::from_millis(1);

/// An offload worker: runs jobs until the scheduler closes.
pub(crate) fn worker(inner: &Inner) {
    while let Some(job) = inner.scheduler.pop() {
        let t = Instant::now();
        let (side, bytes) = (job.side, job.bytes);
        // Jobs contain their operators' panics; this keeps the worker
        // alive should bookkeeping around them panic too.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
        if !ran.unwrap_or(true) {
            // A host thread ran it first.
            continue;
        }
        let busy = t.elapsed();
        if side == Side::Map {
            inner.counters.offload_nanos.fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
            inner.liquid.consumed.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        inner.emulate_device(busy);
    }
}
