//! Waits a host's thread makes inside the engine, and how a host ends them.
//!
//! A host thread (a Spark task's) can wait in the engine for the map buffer
//! pool to have room, and for its map attempt's queued segments to be run
//! (at commit, or when it spills the output so far). Such a wait must end
//! when the host kills the task,
//! and must not last for ever when something upstream is stuck, so it is
//! taken in slices of [`WAIT_SLICE`]: after each, the host's stop check
//! ([`set_stop_check`], a Spark task's kill flag or thread interrupt) is
//! asked, and after [`HOST_WAIT_MAX`] in all the wait fails with a typed
//! error naming what it waited for. Engine threads (offload workers) have
//! no host task; the check answers false for them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a host thread waits before it asks its stop check again.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Longest a host thread waits for the buffer pool in all (10 minutes):
/// the pool drains as the offload workers finish the segments in it, in
/// well under a second per MiB, so a wait this long means the engine is
/// stuck, and the task fails naming the wait instead of hanging.
pub const HOST_WAIT_MAX: Duration = Duration::from_secs(600);

static STOP_CHECK: OnceLock<fn() -> bool> = OnceLock::new();
/// Waits the stop check ended, in this process.
static STOPPED_WAITS: AtomicU64 = AtomicU64::new(0);

/// Sets the process's stop check, asked by a waiting host thread after
/// each slice; true ends the wait with [`EngineError::Interrupted`]. The
/// first call wins (a host sets it once).
///
/// [`EngineError::Interrupted`]: crate::EngineError::Interrupted
pub fn set_stop_check(check: fn() -> bool) {
    let _ = STOP_CHECK.set(check);
}

/// Whether the host asked the calling thread to stop waiting (a wait that
/// asks ends when it answers true, so each true answer counts one wait
/// ended, in [`stopped_waits`]).
pub(crate) fn stop_requested() -> bool {
    let stop = STOP_CHECK.get().is_some_and(|check| check());
    if stop {
        STOPPED_WAITS.fetch_add(1, Ordering::Relaxed);
    }
    stop
}

/// Waits of host threads that the host's stop check ended in this process
/// (a killed task's, for one): how a host's test sees that its kills reach
/// the engine's waits.
pub fn stopped_waits() -> u64 {
    STOPPED_WAITS.load(Ordering::Relaxed)
}

/// A stop check for the engine's tests: each thread reads the flag it was
/// given with [`testing::stop_with`] (none: never stopped).
#[cfg(test)]
pub(crate) mod testing {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    thread_local! {
        static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
    }

    fn check() -> bool {
        STOP.with(|s| s.borrow().as_ref().is_some_and(|f| f.load(Ordering::SeqCst)))
    }

    /// Installs the test check (once per process) and makes `flag` the
    /// calling thread's: setting it asks the thread's waits to stop.
    pub(crate) fn stop_with(flag: Arc<AtomicBool>) {
        super::set_stop_check(check);
        STOP.with(|s| *s.borrow_mut() = Some(flag));
    }
}
