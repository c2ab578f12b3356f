//! Liquid offloading (SmartShuffle 4.3): move a share of the map buffers
//! to host workers when the offload workers fall behind, and back when
//! they catch up.
//!
//! The controller samples, once per window, the buffer pool's occupancy,
//! the bytes map tasks produced and the bytes the offload workers consumed
//! since the last sample. A fixed occupancy threshold would fire on every
//! burst of finishing map tasks; what matters is whether occupancy *grows*
//! over a window, so:
//!
//! - growth > 0: the offload workers are the bottleneck. With `P` bytes
//!   produced and `C` consumed by them, `R = P / C - 1` and the host takes
//!   the share `R / (1 + R) = 1 - C / P` of what is produced, which is
//!   what makes growth zero if the workers keep consuming `C`.
//! - growth <= 0 but the pool is saturated (at least [`SATURATED_PERCENT`]
//!   of it charged) with segments waiting: occupancy cannot grow any more
//!   because producers wait for buffers, so `P` only mirrors what is
//!   consumed and the rate says nothing; the host share steps up by
//!   [`SHARE_STEP`] per window until the backlog drains.
//! - growth <= 0 and no backlog queued: the workers keep up, and the host
//!   share halves every such window (work moves back; below 1 % it is 0).
//!
//! The window is half the mean duration of the map tasks committed so far
//! ([`WINDOWS_PER_TASK`]; SmartShuffle sizes it from the map tasks),
//! within [`WINDOW_MIN`] and [`WINDOW_MAX`], and [`WINDOW_DEFAULT`] before
//! any commits. The host workers are the producing map tasks' own threads
//! (`buf_produce` runs its share of segments in place), or the engine's
//! `host_threads` extra threads when configured; either runs the same
//! pipeline code the offload workers run. An extra host thread with no
//! migrated segment waiting also takes the next map segment queued for the
//! offload workers (`host_steal`, on by default): the share decides where
//! segments are queued, stealing keeps a host core from idling while a
//! slow device's queue holds work. Stolen segments count as migrated, not
//! as consumed by the workers, so the controller sees the workers' real
//! rate. Every change of the share is
//! recorded as a [`Decision`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Window before any map task has committed.
pub const WINDOW_DEFAULT: Duration = Duration::from_millis(25);
/// Windows per mean map-task duration: a burst of finishing tasks spans
/// about two windows, and the controller reacts within half a task.
pub const WINDOWS_PER_TASK: u32 = 2;
/// Shortest window.
pub const WINDOW_MIN: Duration = Duration::from_millis(10);
/// Longest window.
pub const WINDOW_MAX: Duration = Duration::from_secs(1);
/// Largest host share (the offload workers always keep some work).
pub const HOST_SHARE_MAX: f64 = 0.95;
/// Occupancy, in percent of the pool, from which the pool counts as
/// saturated.
pub const SATURATED_PERCENT: usize = 85;
/// Host share added per window while the pool is saturated.
pub const SHARE_STEP: f64 = 0.1;
/// A host share below this is rounded to zero when moving work back.
pub const HOST_SHARE_MIN: f64 = 0.01;

/// One change of the host share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Milliseconds since the engine started.
    pub at_ms: u64,
    /// Buffer pool occupancy at the sample, bytes.
    pub occupancy: usize,
    /// Occupancy change over the window, bytes.
    pub growth: i64,
    /// Bytes produced over the window.
    pub produced: u64,
    /// Bytes the offload workers consumed over the window.
    pub consumed: u64,
    /// The host share decided.
    pub host_share: f64,
}

/// Counters and the current decision, shared by the controller, the map
/// tasks and the workers.
#[derive(Debug)]
pub(crate) struct Liquid {
    pub(crate) enabled: bool,
    share_bits: AtomicU64,
    /// Bytes of map segments the offload workers finished.
    pub(crate) consumed: AtomicU64,
    /// Bytes of map segments run on host threads.
    pub(crate) migrated: AtomicU64,
    /// Of `migrated`, bytes an idle extra host thread took from the
    /// offload workers' queue.
    pub(crate) stolen: AtomicU64,
    task_nanos: AtomicU64,
    tasks: AtomicU64,
    decisions: Mutex<Vec<Decision>>,
    stop: Mutex<bool>,
    wake: Condvar,
    started: Instant,
}

impl Liquid {
    pub(crate) fn new(enabled: bool) -> Self {
        Liquid {
            enabled,
            share_bits: AtomicU64::new(0f64.to_bits()),
            consumed: AtomicU64::new(0),
            migrated: AtomicU64::new(0),
            stolen: AtomicU64::new(0),
            task_nanos: AtomicU64::new(0),
            tasks: AtomicU64::new(0),
            decisions: Mutex::new(Vec::new()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            started: Instant::now(),
        }
    }

    /// The share of produced segments host threads run now.
    pub(crate) fn host_share(&self) -> f64 {
        f64::from_bits(self.share_bits.load(Ordering::Relaxed))
    }

    fn set_share(&self, s: f64) {
        self.share_bits.store(s.to_bits(), Ordering::Relaxed);
    }

    /// A committed map task took `d`.
    pub(crate) fn task_done(&self, d: Duration) {
        self.task_nanos.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        self.tasks.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn window(&self) -> Duration {
        let n = self.tasks.load(Ordering::Relaxed);
        if n == 0 {
            return WINDOW_DEFAULT;
        }
        let mean = Duration::from_nanos(self.task_nanos.load(Ordering::Relaxed) / n);
        (mean / WINDOWS_PER_TASK).clamp(WINDOW_MIN, WINDOW_MAX)
    }

    pub(crate) fn decisions(&self) -> Vec<Decision> {
        self.lock_decisions().clone()
    }

    fn lock_decisions(&self) -> MutexGuard<'_, Vec<Decision>> {
        self.decisions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks the controller to return.
    pub(crate) fn stop(&self) {
        *self.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }

    /// The controller loop: sample, decide, sleep a window; returns when
    /// stopped. `occupancy` and `backlog` read the buffer pool and the
    /// scheduler; `produced` the bytes produced so far.
    pub(crate) fn run(
        self: &Arc<Self>,
        capacity: usize,
        occupancy: impl Fn() -> usize,
        backlog: impl Fn() -> usize,
        produced: impl Fn() -> u64,
    ) {
        let mut last = (occupancy(), produced(), self.consumed.load(Ordering::Relaxed));
        loop {
            let window = self.window();
            {
                let stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
                let (stop, _) =
                    self.wake.wait_timeout(stop, window).unwrap_or_else(|p| p.into_inner());
                if *stop {
                    return;
                }
            }
            let now = (occupancy(), produced(), self.consumed.load(Ordering::Relaxed));
            let growth = now.0 as i64 - last.0 as i64;
            let (p, c) = (now.1 - last.1, now.2 - last.2);
            last = now;
            let old = self.host_share();
            let waiting = backlog();
            let saturated = now.0 * 100 >= capacity * SATURATED_PERCENT;
            let new = if growth > 0 && p > 0 {
                (1.0 - c as f64 / p as f64).clamp(old, HOST_SHARE_MAX)
            } else if saturated && waiting > 0 {
                (old + SHARE_STEP).min(HOST_SHARE_MAX)
            } else if waiting == 0 {
                let half = old / 2.0;
                if half < HOST_SHARE_MIN {
                    0.0
                } else {
                    half
                }
            } else {
                old
            };
            if new != old {
                self.set_share(new);
                self.lock_decisions().push(Decision {
                    at_ms: self.started.elapsed().as_millis() as u64,
                    occupancy: now.0,
                    growth,
                    produced: p,
                    consumed: c,
                    host_share: new,
                });
            }
        }
    }
}

/// Per map task: which of its segments run on its own thread. A credit
/// accumulates the host share per segment, so over many segments the host
/// runs that share of them, without randomness.
#[derive(Debug, Default)]
pub(crate) struct HostCredit(f64);

impl HostCredit {
    /// Whether the next segment runs on the host.
    pub(crate) fn take(&mut self, share: f64) -> bool {
        self.0 += share;
        if self.0 >= 1.0 {
            self.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_gives_the_host_its_share_of_segments() {
        let mut c = HostCredit::default();
        let host = (0..1000).filter(|_| c.take(0.3)).count();
        assert!((299..=301).contains(&host), "{host}");
        let mut c = HostCredit::default();
        assert_eq!((0..100).filter(|_| c.take(0.0)).count(), 0);
    }

    #[test]
    fn growth_moves_work_to_the_host_and_catching_up_moves_it_back() {
        let l = Arc::new(Liquid::new(true));
        let occ = Arc::new(AtomicU64::new(0));
        let produced = Arc::new(AtomicU64::new(0));
        let backlog = Arc::new(AtomicU64::new(1));
        let handle = {
            let (l, occ, produced, backlog) =
                (l.clone(), occ.clone(), produced.clone(), backlog.clone());
            std::thread::spawn(move || {
                l.run(
                    usize::MAX / 100,
                    || occ.load(Ordering::Relaxed) as usize,
                    || backlog.load(Ordering::Relaxed) as usize,
                    || produced.load(Ordering::Relaxed),
                )
            })
        };
        // Producers make 4 MB per step, the workers take 1 MB, occupancy
        // grows: the host share goes to 1 - 1/4.
        for step in 1..=20u64 {
            produced.fetch_add(4_000_000, Ordering::Relaxed);
            l.consumed.fetch_add(1_000_000, Ordering::Relaxed);
            occ.store(step * 3_000_000, Ordering::Relaxed);
            std::thread::sleep(WINDOW_DEFAULT / 4);
        }
        let high = l.host_share();
        assert!((0.7..=0.8).contains(&high), "share {high}");
        // The workers catch up: nothing queued, occupancy falls.
        backlog.store(0, Ordering::Relaxed);
        occ.store(0, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while l.host_share() > 0.0 && Instant::now() < deadline {
            std::thread::sleep(WINDOW_DEFAULT);
        }
        l.stop();
        handle.join().expect("controller");
        assert_eq!(l.host_share(), 0.0);
        let d = l.decisions();
        assert!(d.iter().any(|d| d.growth > 0 && d.host_share > 0.5));
        assert_eq!(d.last().map(|d| d.host_share), Some(0.0));
    }
}
