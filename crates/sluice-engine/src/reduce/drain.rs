//! A reduce side's results on their way out: batches emitted up front, or
//! pulled from a streaming merge a batch at a time so that only about one
//! batch is ever held. The engine's reduce partitions take whole batches
//! ([`Drain::next_batch`]) into their store; a host's reduce task copies
//! records out a buffer at a time ([`Drain::copy_out`]), each batch dropped
//! (or reused) once copied out.

use std::collections::VecDeque;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::reorg::sort::MergeStream;
use sluice_core::reorg::{Emitter, EMIT_BATCH_BYTES};

use crate::error::{EngineError, EngineResult};

/// Payload bytes a streaming drain asks its merge for at a time (one
/// emitted batch).
const REFILL_BYTES: u64 = EMIT_BATCH_BYTES as u64;

/// Result batches on their way out: all emitted up front, or pulled from a
/// streaming merge a batch at a time.
#[derive(Debug)]
pub struct Drain {
    batches: VecDeque<RecordBatch>,
    /// Offset of the next record in the first batch.
    at: usize,
    /// The merge still producing batches, with the emitter it fills.
    source: Option<(MergeStream, Emitter)>,
}

impl Drain {
    /// A drain of batches emitted up front.
    pub fn new(batches: Vec<RecordBatch>) -> Self {
        Drain { batches: batches.into(), at: 0, source: None }
    }

    /// A drain that pulls records in `layout` from `stream` as it goes.
    pub fn streaming(stream: MergeStream, layout: Layout) -> Self {
        Drain { batches: VecDeque::new(), at: 0, source: Some((stream, Emitter::new(layout))) }
    }

    /// Makes sure a batch is waiting unless every record was copied out;
    /// returns whether one is.
    fn refill(&mut self) -> EngineResult<bool> {
        while self.batches.is_empty() {
            let Some((stream, out)) = &mut self.source else { return Ok(false) };
            let more = stream.emit_some(out, REFILL_BYTES)?;
            if !more {
                out.flush();
            }
            self.batches.extend(out.take_batches());
            if !more {
                self.source = None;
            }
        }
        Ok(true)
    }

    /// The next batch of results, whole; `None` when every one was
    /// handed out.
    pub fn next_batch(&mut self) -> EngineResult<Option<RecordBatch>> {
        if self.at != 0 {
            return Err(EngineError::Invariant(
                "a drain read by whole batches after records were copied out".into(),
            ));
        }
        if !self.refill()? {
            return Ok(None);
        }
        self.at = 0;
        Ok(self.batches.pop_front())
    }

    /// Copies, for each next record (variable layout), the bytes `pick`
    /// chooses from it (given the record and its key length) into `out`,
    /// while whole ones fit. Returns (bytes, records); (0, 0) when every
    /// record was copied, and (bytes the next one needs, 0) when it does not
    /// fit `out`, so the caller can retry with a larger buffer.
    pub fn copy_out(
        &mut self,
        out: &mut [u8],
        pick: impl Fn(&[u8], usize) -> &[u8],
    ) -> EngineResult<(usize, usize)> {
        let (mut written, mut records) = (0usize, 0usize);
        while self.refill()? {
            let payload = self.batches[0].payload();
            while self.at < payload.len() {
                let len = variable_record_len(payload, self.at).ok_or_else(|| {
                    EngineError::Argument("result batch is not in the variable layout".into())
                })?;
                let record = &payload[self.at..self.at + len];
                let klen = u32::from_le_bytes([record[0], record[1], record[2], record[3]]);
                let bytes = pick(record, klen as usize);
                if bytes.len() > out.len() - written {
                    if records == 0 {
                        return Ok((bytes.len(), 0));
                    }
                    return Ok((written, records));
                }
                out[written..written + bytes.len()].copy_from_slice(bytes);
                written += bytes.len();
                records += 1;
                self.at += len;
            }
            let done = self.batches.pop_front();
            self.at = 0;
            if let (Some((_, emitter)), Some(b)) = (&mut self.source, done) {
                emitter.recycle([b]);
            }
        }
        Ok((written, records))
    }
}

/// Bytes of the variable-layout record at `at` of `payload` (its two
/// lengths included), if it lies wholly inside.
fn variable_record_len(payload: &[u8], at: usize) -> Option<usize> {
    let head = payload.get(at..at + 8)?;
    let k = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let v = u32::from_le_bytes(head[4..].try_into().ok()?) as usize;
    let len = 8usize.checked_add(k)?.checked_add(v)?;
    (at + len <= payload.len()).then_some(len)
}
