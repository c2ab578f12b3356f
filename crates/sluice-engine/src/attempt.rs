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

use crate::pipeline::MapPipeline;
use sluice_core::format::BatchView;

use crate::error::EngineError;

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
        let mut st = self.lock();
        while st.outstanding > 0 {
            st = self.drained.wait(st).unwrap_or_else(|p| p.into_inner());
        }
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
        let mut st = self.lock();
        while st.outstanding > 0 {
            st = self.drained.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(e) = st.error.take() {
            st.void = true;
            st.idle.clear();
            return Err(e);
        }
        Ok(f(&mut st.idle))
    }

    /// Gives the attempt up: queued segments are skipped, pipelines dropped.
    pub(crate) fn void(&self) {
        let mut st = self.lock();
        st.void = true;
        st.idle.clear();
    }
}
