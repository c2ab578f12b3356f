//! A reduce side's results on their way out: batches emitted up front, or
//! pulled from a streaming merge (a sort's runs, or the spilled runs of an
//! aggregate or a distinct) a batch at a time so that only about one batch
//! is ever held. The engine's reduce partitions take whole batches
//! ([`Drain::next_batch`]) into their store; a host's reduce task copies
//! records out a buffer at a time ([`Drain::copy_out`]), each batch dropped
//! (or reused) once copied out.
//!
//! What a drain holds in memory can be sent to disk when the host needs
//! that memory for something else ([`Drain::spill_pending`], under Spark
//! another consumer of the same task asking for execution memory): of
//! results emitted up front (an aggregate's or a distinct's that did not
//! spill), every batch but the one being copied out is written to a spill
//! file as one run, and read back a batch at a time as copying goes on; of
//! a sort's merge, the runs still in memory go to disk and the merge reads
//! them from there (`MergeStream::spill_memory_runs`).

use std::collections::VecDeque;
use std::path::Path;

use sluice_core::format::{Codec, Layout, RecordBatch};
use sluice_core::reorg::sort::{MergeStream, SentToDisk};
use sluice_core::reorg::{Emitter, GroupStream, ReorgError, EMIT_BATCH_BYTES};
use sluice_core::spill::{SpillRunReader, SpillWriter};

use crate::error::{EngineError, EngineResult};

/// Payload bytes a streaming drain asks its merge for at a time (one
/// emitted batch).
const REFILL_BYTES: u64 = EMIT_BATCH_BYTES as u64;

/// A merge that produces results as they are asked for.
#[derive(Debug)]
pub enum Stream {
    /// A sort's runs, record by record in key order.
    Sorted(MergeStream),
    /// An aggregate's or a distinct's spilled runs, a result per key.
    Grouped(GroupStream),
}

impl Stream {
    fn emit_some(&mut self, out: &mut Emitter, bytes: u64) -> Result<bool, ReorgError> {
        match self {
            Stream::Sorted(s) => s.emit_some(out, bytes),
            Stream::Grouped(g) => g.emit_some(out, bytes),
        }
    }
}

/// Result batches on their way out: all emitted up front, or pulled from a
/// streaming merge a batch at a time.
#[derive(Debug)]
pub struct Drain {
    batches: VecDeque<RecordBatch>,
    /// Offset of the next record in the first batch.
    at: usize,
    /// The merge still producing batches, with the emitter it fills.
    source: Option<(Stream, Emitter)>,
    /// Results sent to disk by [`Drain::spill_pending`], read back after
    /// `batches`.
    spilled: Option<SpillRunReader>,
}

impl Drain {
    /// A drain of batches emitted up front.
    pub fn new(batches: Vec<RecordBatch>) -> Self {
        Drain { batches: batches.into(), at: 0, source: None, spilled: None }
    }

    /// A drain that pulls records in `layout` from `stream` as it goes.
    pub fn streaming(stream: Stream, layout: Layout) -> Self {
        Drain {
            batches: VecDeque::new(),
            at: 0,
            source: Some((stream, Emitter::new(layout))),
            spilled: None,
        }
    }

    /// Makes sure a batch is waiting unless every record was copied out;
    /// returns whether one is.
    fn refill(&mut self) -> EngineResult<bool> {
        while self.batches.is_empty() {
            if let Some(reader) = &mut self.spilled {
                match reader.next_batch()? {
                    Some(view) => self.batches.push_back(view.to_batch()),
                    None => self.spilled = None,
                }
                continue;
            }
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

    /// Payload bytes the drain holds in memory now: results emitted up
    /// front and not yet handed out (the batch being copied out included),
    /// or the runs a sort's merge holds in memory (an aggregate's or a
    /// distinct's merge holds only read buffers: 0).
    pub fn held_bytes(&self) -> usize {
        match &self.source {
            Some((Stream::Sorted(m), _)) => m.memory_bytes(),
            Some((Stream::Grouped(_), _)) => 0,
            None => self.batches.iter().map(RecordBatch::payload_len).sum(),
        }
    }

    /// Bytes of read buffers a merge's runs on disk hold at most while its
    /// results are read (beside [`Drain::held_bytes`]); 0 for results held
    /// up front.
    pub fn read_buffer_bytes(&self) -> usize {
        match &self.source {
            Some((Stream::Sorted(m), _)) => m.read_buffer_bytes(),
            Some((Stream::Grouped(g), _)) => g.read_buffer_bytes(),
            None => 0,
        }
    }

    /// Sends what the drain holds in memory to disk (see the module doc):
    /// results emitted up front and not yet handed out, but for the batch
    /// being copied out, to one run of a spill file in `dir`; a sort's runs
    /// still in memory, to a spill file of the merge's own. Nothing is
    /// given up until the file is whole, so an error leaves the drain as it
    /// was. Nothing is done (all zero) when nothing is worth it: one batch
    /// left, a merge holding no run in memory.
    pub fn spill_pending(&mut self, dir: &Path, codec: Codec) -> EngineResult<SentToDisk> {
        match &mut self.source {
            Some((Stream::Sorted(m), _)) => return Ok(m.spill_memory_runs()?),
            Some((Stream::Grouped(_), _)) => return Ok(SentToDisk::default()),
            None => {}
        }
        if self.spilled.is_some() || self.batches.len() <= 1 {
            return Ok(SentToDisk::default());
        }
        let mut writer = SpillWriter::create(dir, codec)?;
        let run = writer.new_run();
        let mut moved = 0u64;
        for b in self.batches.iter().skip(1) {
            writer.append(run, b.view())?;
            moved += b.payload_len() as u64;
        }
        let file = writer.finish()?;
        self.spilled = Some(file.run(run)?);
        self.batches.truncate(1);
        Ok(SentToDisk { freed: moved, moved, written: file.stats().bytes_written })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `batches` batches of `per` records each, keys and values numbered.
    fn batches(batches: u32, per: u32) -> Vec<RecordBatch> {
        (0..batches)
            .map(|b| {
                let mut batch = RecordBatch::new(Layout::Variable);
                for i in 0..per {
                    let n = b * per + i;
                    batch.push(&n.to_be_bytes(), &u64::from(n).to_le_bytes()).expect("fits");
                }
                batch
            })
            .collect()
    }

    /// Copies out every record left, through a buffer of `room` bytes.
    fn copy_all(d: &mut Drain, room: usize) -> Vec<u8> {
        let (mut out, mut buf) = (Vec::new(), vec![0u8; room]);
        loop {
            let (bytes, records) = d.copy_out(&mut buf, |r, _| r).expect("copy");
            if records == 0 {
                assert_eq!(bytes, 0, "a record larger than the buffer");
                return out;
            }
            out.extend_from_slice(&buf[..bytes]);
        }
    }

    fn spill_files(dir: &Path) -> usize {
        std::fs::read_dir(dir).expect("dir").count()
    }

    #[test]
    fn results_sent_to_disk_midway_come_back_whole_and_in_order() {
        let dir = tempfile::tempdir().expect("tmp");
        let want = copy_all(&mut Drain::new(batches(4, 1_000)), 1 << 20);
        let mut d = Drain::new(batches(4, 1_000));
        // Part of the first batch is copied out before the host asks.
        let mut head = vec![0u8; 20 * 10];
        let (bytes, records) = d.copy_out(&mut head, |r, _| r).expect("copy");
        assert_eq!((bytes, records), (200, 10));
        let sent = d.spill_pending(dir.path(), Codec::Lz4).expect("spill");
        assert_eq!(sent.moved, 3 * 1_000 * 20, "the three batches after the first");
        assert_eq!(sent.freed, sent.moved);
        assert!(sent.written > 0);
        assert_eq!(d.batches.len(), 1);
        assert_eq!(spill_files(dir.path()), 1);
        // A second request finds nothing more to move.
        assert_eq!(d.spill_pending(dir.path(), Codec::Lz4).expect("again"), SentToDisk::default());
        let mut got = head[..bytes].to_vec();
        got.extend(copy_all(&mut d, 333));
        assert_eq!(got, want);
        drop(d);
        assert_eq!(spill_files(dir.path()), 0, "the spill file outlived its drain");
    }

    #[test]
    fn a_last_batch_stays_in_memory() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut d = Drain::new(batches(1, 100));
        assert_eq!(d.spill_pending(dir.path(), Codec::Lz4).expect("spill"), SentToDisk::default());
        assert_eq!(spill_files(dir.path()), 0);
        assert_eq!(copy_all(&mut d, 64).len(), 100 * 20);
    }
}
