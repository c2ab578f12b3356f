//! Sorted runs spilled to one spill file, and merging them back.
//!
//! The final (reduce-side) operators keep exact state in memory; when the
//! memory pool refuses more, they write their state as a run sorted by key
//! to a spill file and start over. At the end every run is merged with the
//! loser tree, and records with equal keys arrive next to each other, so
//! the operator combines them in one pass.
//!
//! # Bounded fan-in
//! A cursor over a spilled run holds one block at a time: the stored
//! frame, its decoded payload and the batch it reads records from, about
//! three times the block size (runs are written in blocks of about 1 MiB,
//! so about 3 MiB a run). One merge of thousands of runs would need
//! gigabytes of such buffers. So when the file is sealed with more than
//! [`SpillConfig::fan_in`] runs, consecutive groups of `fan_in` runs are
//! merged into one longer run each, written to a new spill file that
//! replaces the old one (removed as soon as its last cursor is gone), and
//! again until `fan_in` runs or fewer are left. Each pass reads and writes
//! every spilled byte once; the merge that follows then opens at most
//! `fan_in` cursors. Consecutive runs are merged in order and the loser
//! tree breaks ties by run, so records of equal keys keep their run order.

use std::path::PathBuf;
use std::sync::Arc;

use super::cursor::{AnyRun, SpillRun};
use super::emit::Emitter;
use super::merge::LoserTree;
use super::ReorgError;
use crate::format::{Codec, Layout, Record, RecordBatch};
use crate::spill::{SpillFile, SpillStats, SpillWriter};

/// Default most spilled runs one merge reads at once (16 runs, about
/// 48 MiB of read buffers at 1 MiB blocks); see the module doc.
pub const MERGE_FAN_IN_MAX: usize = 16;

/// Least fan-in a merge pass can have (two runs into one).
pub const MERGE_FAN_IN_MIN: usize = 2;

/// Payload bytes of the blocks a merge pass writes (1 MiB, the size runs
/// are first written in).
pub const MERGE_PASS_BLOCK_BYTES: usize = 1 << 20;

/// Bytes a cursor over a spilled run holds at most while runs are written
/// in blocks of [`MERGE_PASS_BLOCK_BYTES`]: the stored frame, its decoded
/// payload and the batch it reads records from.
pub const MERGE_RUN_READ_BYTES: usize = 3 * MERGE_PASS_BLOCK_BYTES;

/// Where spilled runs go, how they are compressed, and how many one merge
/// reads at once.
#[derive(Debug, Clone)]
pub struct SpillConfig {
    /// Directory for spill files (created files are removed when dropped).
    pub dir: PathBuf,
    /// Codec of spilled blocks.
    pub codec: Codec,
    /// Most spilled runs one merge reads at once (at least
    /// [`MERGE_FAN_IN_MIN`]); more are first merged in passes.
    pub fan_in: usize,
}

impl Default for SpillConfig {
    fn default() -> Self {
        SpillConfig { dir: std::env::temp_dir(), codec: Codec::Lz4, fan_in: MERGE_FAN_IN_MAX }
    }
}

/// Where [`SpilledRuns::write_run_from`]'s records go: a batch, written to
/// the run each time it fills.
pub(crate) struct RunSink<'a> {
    out: Emitter,
    writer: &'a mut SpillWriter,
    run: usize,
    /// Payload bytes written.
    bytes: u64,
}

impl RunSink<'_> {
    /// Appends one record to the run.
    pub(crate) fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<(), ReorgError> {
        self.out.emit(key, value)?;
        if self.out.has_sealed() {
            self.write_sealed()?;
        }
        Ok(())
    }

    /// Writes the batches that filled, and keeps them for reuse.
    fn write_sealed(&mut self) -> Result<(), ReorgError> {
        let sealed = self.out.take_batches();
        for b in &sealed {
            self.writer.append(self.run, b.view())?;
            self.bytes += b.payload_len() as u64;
        }
        self.out.recycle(sealed);
        Ok(())
    }
}

/// Runs written so far.
#[derive(Debug)]
pub(crate) struct SpilledRuns {
    config: SpillConfig,
    writer: Option<SpillWriter>,
    file: Option<Arc<SpillFile>>,
    runs: usize,
    /// Layout of the runs' records (known from the first run written).
    layout: Option<Layout>,
    /// Merge passes run to bring the runs within the fan-in.
    passes: u64,
    /// What the files replaced by merge passes wrote.
    replaced: SpillStats,
    /// Payload bytes of the runs written (what they held in memory; merge
    /// passes not counted).
    run_bytes: u64,
    /// Bytes at the start of every key that the runs' order ignores
    /// ([`LoserTree::ordered_after`]), so that merge passes keep it.
    key_skip: usize,
}

impl SpilledRuns {
    pub(crate) fn new(config: SpillConfig) -> Self {
        SpilledRuns {
            config,
            writer: None,
            file: None,
            runs: 0,
            layout: None,
            passes: 0,
            replaced: SpillStats::default(),
            run_bytes: 0,
            key_skip: 0,
        }
    }

    /// The runs are sorted by their keys' bytes after the first `bytes`
    /// (a sort's runs; aggregates' and distinct's are sorted by whole keys).
    pub(crate) fn order_keys_after(&mut self, bytes: usize) {
        self.key_skip = bytes;
    }

    /// Where the runs go.
    pub(crate) fn config(&self) -> &SpillConfig {
        &self.config
    }

    /// Merge passes run so far (0 while the runs fit one merge).
    pub(crate) fn passes(&self) -> u64 {
        self.passes
    }

    /// Runs written.
    pub(crate) fn runs(&self) -> usize {
        self.runs
    }

    /// Payload bytes of the runs written, as they were in memory (merge
    /// passes rewrite them on disk and do not count).
    pub(crate) fn run_bytes(&self) -> u64 {
        self.run_bytes
    }

    /// Writes one sorted run.
    pub(crate) fn write_run(&mut self, batches: Vec<RecordBatch>) -> Result<(), ReorgError> {
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(SpillWriter::create(&self.config.dir, self.config.codec)?),
        };
        let run = writer.new_run();
        for b in &batches {
            self.layout.get_or_insert(b.layout());
            writer.append(run, b.view())?;
            self.run_bytes += b.payload_len() as u64;
        }
        self.runs += 1;
        Ok(())
    }

    /// Writes one sorted run of the records `fill` emits (in order), a
    /// batch at a time as each fills: an operator spilling its table needs
    /// one batch beside it, not a copy of all of it.
    pub(crate) fn write_run_from(
        &mut self,
        layout: Layout,
        fill: impl FnOnce(&mut RunSink<'_>) -> Result<(), ReorgError>,
    ) -> Result<(), ReorgError> {
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(SpillWriter::create(&self.config.dir, self.config.codec)?),
        };
        self.layout.get_or_insert(layout);
        let run = writer.new_run();
        let mut sink = RunSink { out: Emitter::new(layout), writer, run, bytes: 0 };
        fill(&mut sink)?;
        sink.out.flush();
        sink.write_sealed()?;
        self.run_bytes += sink.bytes;
        self.runs += 1;
        Ok(())
    }

    /// Finishes writing; the runs can then be merged, at most
    /// [`SpillConfig::fan_in`] at once (merge passes run here if needed).
    pub(crate) fn seal(&mut self) -> Result<(), ReorgError> {
        if let Some(w) = self.writer.take() {
            self.file = Some(w.finish()?);
        }
        let fan_in = self.config.fan_in.max(MERGE_FAN_IN_MIN);
        while let Some(file) = self.file.clone().filter(|f| f.runs() > fan_in) {
            let merged = self.merge_pass(&file, fan_in)?;
            self.replaced = self.replaced + file.stats();
            drop(file);
            self.file = Some(merged);
            self.passes += 1;
        }
        Ok(())
    }

    /// Merges each `fan_in` consecutive runs of `file` into one run of a
    /// new spill file.
    fn merge_pass(
        &self,
        file: &Arc<SpillFile>,
        fan_in: usize,
    ) -> Result<Arc<SpillFile>, ReorgError> {
        let layout = self.layout.unwrap_or(Layout::Variable);
        let mut writer = SpillWriter::create(&self.config.dir, self.config.codec)?;
        let mut batch = RecordBatch::with_capacity(layout, MERGE_PASS_BLOCK_BYTES);
        let mut first = 0;
        while first < file.runs() {
            let last = (first + fan_in).min(file.runs());
            let mut cursors = Vec::with_capacity(last - first);
            for r in first..last {
                cursors.push(AnyRun::Spill(SpillRun::new(file.run(r)?)?));
            }
            let mut tree = LoserTree::ordered_after(cursors, self.key_skip);
            let run = writer.new_run();
            while let Some(Record { key, value }) = tree.peek() {
                batch.push(key, value)?;
                tree.advance()?;
                if batch.payload_len() >= MERGE_PASS_BLOCK_BYTES {
                    writer.append(run, batch.view())?;
                    batch.clear();
                }
            }
            writer.append(run, batch.view())?;
            batch.clear();
            first = last;
        }
        Ok(writer.finish()?)
    }

    /// I/O statistics of the spill files, merge passes included.
    pub(crate) fn stats(&self) -> SpillStats {
        self.replaced + self.file.as_ref().map(|f| f.stats()).unwrap_or_default()
    }

    /// A cursor per spilled run (after [`SpilledRuns::seal`]).
    pub(crate) fn cursors(&self) -> Result<Vec<AnyRun>, ReorgError> {
        let Some(file) = &self.file else { return Ok(Vec::new()) };
        let mut cursors = Vec::with_capacity(file.runs());
        for r in 0..file.runs() {
            cursors.push(AnyRun::Spill(SpillRun::new(file.run(r)?)?));
        }
        Ok(cursors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reorg::cursor::RunCursor;
    use crate::reorg::emit::EMIT_BATCH_BYTES;

    /// A run written from a source a record at a time holds at most one
    /// batch in memory while it is written, and reads back whole, in order.
    #[test]
    fn a_run_written_from_a_source_holds_one_batch_at_a_time() {
        let dir = tempfile::tempdir().expect("tmp");
        let config = SpillConfig { dir: dir.path().to_path_buf(), ..SpillConfig::default() };
        let mut runs = SpilledRuns::new(config);
        let value = [9u8; 1000];
        let n = 10_000u32;
        let mut most = 0;
        runs.write_run_from(Layout::Variable, |run| {
            for i in 0..n {
                run.emit(&i.to_be_bytes(), &value)?;
                most = most.max(run.out.bytes() as usize - run.bytes as usize);
            }
            Ok(())
        })
        .expect("write");
        assert!(most <= EMIT_BATCH_BYTES, "{most} bytes held while writing");
        assert_eq!((runs.runs(), runs.run_bytes()), (1, u64::from(n) * 1012));
        runs.seal().expect("seal");
        let mut cursors = runs.cursors().expect("cursors");
        assert_eq!(cursors.len(), 1);
        let c = &mut cursors[0];
        for i in 0..n {
            let r = c.current().expect("a record");
            assert_eq!((r.key, r.value.len()), (&i.to_be_bytes()[..], value.len()));
            c.advance().expect("advance");
        }
        assert!(c.current().is_none());
    }
}
