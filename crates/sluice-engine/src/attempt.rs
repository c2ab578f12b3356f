//! One map attempt's engine-side state: the pipelines its segments run
//! through, how many segments are still out, and whether it failed or was
//! given up.
//!
//! Segments of one attempt may run on several workers at once; each takes
//! an idle pipeline of the attempt (or makes one) and returns it, so an
//! attempt has at most as many pipelines as segments ran concurrently, and
//! no pipeline ever sees two attempts' records. That is what makes a
//! failed attempt discardable: its pipelines, and everything they hold,
//! are dropped; nothing of it has reached the reduce side, which only
//! takes the output of a commit.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::pipeline::MapPipeline;
use sluice_core::format::BatchView;

use crate::error::EngineError;
use crate::waits::{self, HOST_WAIT_MAX, WAIT_SLICE};

#[derive(Debug, Default)]
struct State {
    /// Segments queued or running.
    outstanding: usize,
    idle: Vec<MapPipeline>,
    /// The first failure of a segment.
    error: Option<EngineError>,
    /// Given up: remaining segments are skipped.
    void: bool,
}

/// Engine-side state of one map attempt.
#[derive(Debug, Default)]
pub(crate) struct Attempt {
    state: Mutex<State>,
    drained: Condvar,
}

impl Attempt {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `n` more segments out.
    pub(crate) fn add_segments(&self, n: usize) {
        self.lock().outstanding += n;
    }

    /// Runs one segment: takes an idle pipeline (or makes one with
    /// `make`), pushes the records, and gives the pipeline back.
    pub(crate) fn run_segment(&self, view: &BatchView<'_>, make: impl FnOnce() -> MapPipeline) {
        let pipe = {
            let mut st = self.lock();
            if st.void || st.error.is_some() {
                None
            } else {
                Some(st.idle.pop())
            }
        };
        let Some(pipe) = pipe else {
            self.segment_done(None, Ok(()));
            return;
        };
        let mut pipe = pipe.unwrap_or_else(make);
        let result = pipe.push(view).map_err(EngineError::from);
        self.segment_done(Some(pipe), result);
    }

    /// Records a segment the engine could not run.
    pub(crate) fn segment_failed(&self, error: EngineError) {
        self.segment_done(None, Err(error));
    }

    fn segment_done(&self, pipe: Option<MapPipeline>, result: Result<(), EngineError>) {
        let mut st = self.lock();
        st.outstanding -= 1;
        if let Some(p) = pipe {
            if !st.void {
                st.idle.push(p);
            }
        }
        if let Err(e) = result {
            st.error.get_or_insert(e);
        }
        let done = st.outstanding == 0;
        drop(st);
        if done {
            self.drained.notify_all();
        }
    }

    /// Waits for every segment, then hands over the pipelines, or the
    /// first failure.
    pub(crate) fn drain(&self) -> Result<Vec<MapPipeline>, EngineError> {
        let mut st = self.wait_drained(HOST_WAIT_MAX)?;
        match st.error.take() {
            Some(e) => {
                st.void = true;
                st.idle.clear();
                Err(e)
            }
            None => Ok(std::mem::take(&mut st.idle)),
        }
    }

    /// Waits for every segment queued so far, then lends the idle
    /// pipelines to `f`; the attempt stays open. The first failure of a
    /// segment is returned instead (and the attempt is void).
    pub(crate) fn quiesce<T>(
        &self,
        f: impl FnOnce(&mut [MapPipeline]) -> T,
    ) -> Result<T, EngineError> {
        let mut st = self.wait_drained(HOST_WAIT_MAX)?;
        if let Some(e) = st.error.take() {
            st.void = true;
            st.idle.clear();
            return Err(e);
        }
        Ok(f(&mut st.idle))
    }

    /// Waits, in slices of [`WAIT_SLICE`], until no segment is out. A wait
    /// the host stops ([`waits::stop_requested`], a killed task) or one
    /// longer than `wait_max` gives the attempt up and fails: the segments
    /// still out are skipped or dropped as they finish, on the worker
    /// that runs them.
    fn wait_drained(&self, wait_max: Duration) -> Result<MutexGuard<'_, State>, EngineError> {
        let start = Instant::now();
        let mut st = self.lock();
        while st.outstanding > 0 {
            st = self.drained.wait_timeout(st, WAIT_SLICE).unwrap_or_else(|p| p.into_inner()).0;
            if st.outstanding == 0 {
                break;
            }
            let what = || format!("{} segments of a map attempt to finish", st.outstanding);
            let waited = start.elapsed();
            let give_up = if waited > wait_max {
                Some(EngineError::WaitTimedOut { what: what(), waited, bound: wait_max })
            } else {
                let what = what();
                // Asked without the lock: the host's check may call into it.
                drop(st);
                let stop = waits::stop_requested();
                st = self.lock();
                stop.then_some(EngineError::Interrupted { what })
            };
            if let Some(e) = give_up {
                st.void = true;
                st.idle.clear();
                return Err(e);
            }
        }
        Ok(st)
    }

    /// Gives the attempt up: queued segments are skipped, pipelines dropped.
    pub(crate) fn void(&self) {
        let mut st = self.lock();
        st.void = true;
        st.idle.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::thread;

    use super::*;
    use crate::waits::testing::stop_with;

    #[test]
    fn a_drain_waits_for_the_last_segment() {
        let attempt = Arc::new(Attempt::default());
        attempt.add_segments(2);
        attempt.segment_done(None, Ok(()));
        let other = attempt.clone();
        let finisher = thread::spawn(move || {
            thread::sleep(WAIT_SLICE * 3);
            other.segment_done(None, Ok(()));
        });
        let pipes = attempt.drain().expect("drained");
        assert!(pipes.is_empty());
        assert_eq!(attempt.lock().outstanding, 0);
        finisher.join().expect("no panic");
    }

    #[test]
    fn a_stopped_drain_gives_the_attempt_up_with_a_typed_error() {
        let attempt = Arc::new(Attempt::default());
        attempt.add_segments(1);
        let stop = Arc::new(AtomicBool::new(false));
        let (waiter, flag) = (attempt.clone(), stop.clone());
        let drain = thread::spawn(move || {
            stop_with(flag);
            waiter.drain().map(|p| p.len())
        });
        thread::sleep(WAIT_SLICE * 2);
        assert!(!drain.is_finished(), "a drain with a segment out returned");
        stop.store(true, Ordering::SeqCst);
        let e = drain.join().expect("no panic").expect_err("interrupted");
        assert!(matches!(e, EngineError::Interrupted { .. }), "{e}");
        assert!(e.to_string().contains("1 segments of a map attempt"), "{e}");
        assert!(attempt.lock().void);
        // The segment still out finishes later on its worker and is dropped.
        attempt.segment_done(None, Ok(()));
        assert_eq!(attempt.lock().outstanding, 0);
    }

    #[test]
    fn a_drain_past_its_bound_fails_naming_it() {
        let attempt = Attempt::default();
        attempt.add_segments(3);
        let bound = WAIT_SLICE * 4;
        let start = Instant::now();
        let e = attempt.wait_drained(bound).map(|_| ()).expect_err("bounded");
        assert!(start.elapsed() >= bound);
        assert!(matches!(e, EngineError::WaitTimedOut { .. }), "{e}");
        assert!(e.to_string().contains("3 segments of a map attempt"), "{e}");
        assert!(attempt.lock().void);
    }
}
