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

use sluice_core::format::{BatchView, Layout, RecordBatch};

use crate::attempt::Attempt;
use crate::buffer::ProducedBuffer;
use crate::error::{panic_message, EngineError};
use crate::shuffle::ShuffleState;

/// A range of a produced buffer at record boundaries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    start: usize,
    end: usize,
    records: u32,
}

/// One segment and what running it needs.
#[derive(Debug)]
pub(crate) struct SegmentTask {
    state: Arc<ShuffleState>,
    attempt: Arc<Attempt>,
    produced: Arc<ProducedBuffer>,
    segment: Segment,
    taken: AtomicBool,
}

impl SegmentTask {
    pub(crate) fn new(
        state: Arc<ShuffleState>,
        attempt: Arc<Attempt>,
        produced: Arc<ProducedBuffer>,
        segment: Segment,
    ) -> Self {
        SegmentTask { state, attempt, produced, segment, taken: AtomicBool::new(false) }
    }

    /// Payload bytes of the segment.
    pub(crate) fn bytes(&self) -> usize {
        self.segment.end - self.segment.start
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
        let bytes = batch.payload().get(s.start..s.end).unwrap_or_default();
        match BatchView::new(batch.layout(), s.records, bytes) {
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
            self.attempt.segment_failed(EngineError::Invariant(
                "a segment was dropped before it ran (shuffle unregistered?)".into(),
            ));
        }
    }
}

/// Cuts a batch into segments of about `target` bytes at record
/// boundaries (one record at least per segment).
pub(crate) fn cut(batch: &RecordBatch, target: usize) -> Vec<Segment> {
    let target = target.max(1);
    let total = batch.payload_len();
    let mut out = Vec::new();
    match batch.layout() {
        Layout::Fixed { .. } => {
            let width = batch.layout().fixed_record_bytes().unwrap_or(1).max(1);
            let per = (target / width).max(1);
            let mut start = 0;
            while start < total {
                let n = per.min((total - start) / width);
                out.push(Segment { start, end: start + n * width, records: n as u32 });
                start += n * width;
            }
        }
        Layout::Variable => {
            let (mut start, mut end, mut n) = (0, 0, 0u32);
            let mut raw = batch.view().raw();
            while let Some(r) = raw.next_raw() {
                end += r.bytes.len();
                n += 1;
                if end - start >= target {
                    out.push(Segment { start, end, records: n });
                    (start, n) = (end, 0);
                }
            }
            if n > 0 {
                out.push(Segment { start, end, records: n });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_batch_at_record_boundaries() {
        let fixed = Layout::fixed(8, 4).expect("layout");
        let mut b = RecordBatch::new(fixed);
        for i in 0u64..1000 {
            b.push(&i.to_le_bytes(), &[1; 4]).expect("push");
        }
        let segs = cut(&b, 1000);
        assert_eq!(segs.iter().map(|s| s.records).sum::<u32>(), 1000);
        assert!(segs.iter().all(|s| (s.end - s.start) % 12 == 0 && s.end - s.start <= 1000));
        assert!(segs.windows(2).all(|w| w[0].end == w[1].start));
        let mut v = RecordBatch::new(Layout::Variable);
        for i in 0..300usize {
            v.push(&vec![7; i % 50], &vec![9; i % 7]).expect("push");
        }
        let segs = cut(&v, 500);
        assert_eq!(segs.iter().map(|s| s.records).sum::<u32>(), 300);
        assert_eq!(segs.last().map(|s| s.end), Some(v.payload_len()));
        for s in &segs {
            let view = BatchView::new(Layout::Variable, s.records, &v.payload()[s.start..s.end]);
            assert!(view.is_ok(), "a segment is a valid payload on its own");
        }
    }
}
