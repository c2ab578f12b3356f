//! Sorted runs spilled to one spill file, and merging them back.
//!
//! The final (reduce-side) operators keep exact state in memory; when the
//! memory pool refuses more, they write their state as a run sorted by key
//! to a spill file and start over. At the end every run is merged with the
//! loser tree, and records with equal keys arrive next to each other, so
//! the operator combines them in one pass.

use std::path::PathBuf;
use std::sync::Arc;

use super::cursor::{AnyRun, SpillRun};
use super::merge::LoserTree;
use super::ReorgError;
use crate::format::{Codec, Record, RecordBatch};
use crate::spill::{SpillFile, SpillStats, SpillWriter};

/// Where spilled runs go and how they are compressed.
#[derive(Debug, Clone)]
pub struct SpillConfig {
    /// Directory for spill files (created files are removed when dropped).
    pub dir: PathBuf,
    /// Codec of spilled blocks.
    pub codec: Codec,
}

impl Default for SpillConfig {
    fn default() -> Self {
        SpillConfig { dir: std::env::temp_dir(), codec: Codec::Lz4 }
    }
}

/// Runs written so far.
#[derive(Debug)]
pub(crate) struct SpilledRuns {
    config: SpillConfig,
    writer: Option<SpillWriter>,
    file: Option<Arc<SpillFile>>,
    runs: usize,
}

impl SpilledRuns {
    pub(crate) fn new(config: SpillConfig) -> Self {
        SpilledRuns { config, writer: None, file: None, runs: 0 }
    }

    /// Runs written.
    pub(crate) fn runs(&self) -> usize {
        self.runs
    }

    /// Writes one sorted run.
    pub(crate) fn write_run(&mut self, batches: Vec<RecordBatch>) -> Result<(), ReorgError> {
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(SpillWriter::create(&self.config.dir, self.config.codec)?),
        };
        let run = writer.new_run();
        for b in &batches {
            writer.append(run, b.view())?;
        }
        self.runs += 1;
        Ok(())
    }

    /// Finishes writing; the runs can then be merged.
    pub(crate) fn seal(&mut self) -> Result<(), ReorgError> {
        if let Some(w) = self.writer.take() {
            self.file = Some(w.finish()?);
        }
        Ok(())
    }

    /// I/O statistics of the file.
    pub(crate) fn stats(&self) -> SpillStats {
        self.file.as_ref().map(|f| f.stats()).unwrap_or_default()
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

    /// Merges every run by key, calling `group` once per distinct key with
    /// all its records (in run order).
    pub(crate) fn merge_groups(
        &self,
        mut group: impl FnMut(&[u8], &mut dyn Iterator<Item = &[u8]>) -> Result<(), ReorgError>,
    ) -> Result<(), ReorgError> {
        let mut tree = LoserTree::new(self.cursors()?);
        let mut key = Vec::new();
        let mut values: Vec<Vec<u8>> = Vec::new();
        let mut n = 0usize;
        while let Some(Record { key: k, value }) = tree.peek() {
            if n > 0 && k != key.as_slice() {
                group(&key, &mut values[..n].iter().map(Vec::as_slice))?;
                n = 0;
            }
            if n == 0 {
                key.clear();
                key.extend_from_slice(k);
            }
            if values.len() == n {
                values.push(Vec::new());
            }
            values[n].clear();
            values[n].extend_from_slice(value);
            n += 1;
            tree.advance()?;
        }
        if n > 0 {
            group(&key, &mut values[..n].iter().map(Vec::as_slice))?;
        }
        Ok(())
    }
}
