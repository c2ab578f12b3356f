//! Segments: the scheduler's unit of map-side work, a ~100 KB range of a
//! produced buffer, run once by whichever thread takes it first.
//!
//! A segment is queued for the offload workers, but a host thread may take
//! it first: liquid offloading's share at produce time, or the committing
//! map task itself, which would otherwise idle while its segments wait for
//! a worker. An atomic flag makes the first taker the only runner; the
//! other finds nothing to do.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice_core::format::Span;

use crate::attempt::Attempt;
use crate::buffer::ProducedBuffer;
use crate::error::{panic_message, EngineError};
use crate::shuffle::ShuffleState;

/// One segment and what running it needs.
#[derive(Debug)]
pub(crate) struct SegmentTask {
    state: Arc<ShuffleState>,
    attempt: Arc<Attempt>,
    produced: Arc<ProducedBuffer>,
    segment: Span,
    taken: AtomicBool,
}

impl SegmentTask {
    pub(crate) fn new(
        state: Arc<ShuffleState>,
        attempt: Arc<Attempt>,
        produced: Arc<ProducedBuffer>,
        segment: Span,
    ) -> Self {
        SegmentTask { state, attempt, produced, segment, taken: AtomicBool::new(false) }
    }

    /// Payload bytes of the segment.
    pub(crate) fn bytes(&self) -> usize {
        self.segment.bytes()
    }

    /// Runs the segment through the attempt's pipelines unless another
    /// thread took it; true if this call ran it.
    pub(crate) fn run(&self) -> bool {
        if self.taken.swap(true, Ordering::AcqRel) {
            return false;
        }
        let s = self.segment;
        let Some(batch) = self.produced.batch() else {
            self.attempt
                .segment_failed(EngineError::Invariant("segment of an empty buffer".into()));
            return true;
        };
        // The segment is a span of this very batch (from the records'
        // checks or cut from the batch): viewed without another walk.
        match batch.span_view(s) {
            Ok(view) => {
                let run = || self.attempt.run_segment(&view, || self.state.pipeline());
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
                    // The pipeline it held unwound with it; the attempt is void.
                    self.attempt.segment_failed(EngineError::Panicked(panic_message(&*p)));
                }
            }
            Err(e) => self.attempt.segment_failed(e.into()),
        }
        true
    }
}

impl Drop for SegmentTask {
    fn drop(&mut self) {
        // Dropped unrun (its shuffle was unregistered): the attempt must
        // not wait for it.
        if !*self.taken.get_mut() {
            self.attempt.segment_failed(EngineError::UnregisteredWhileRunning);
        }
    }
}
