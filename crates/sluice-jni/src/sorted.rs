//! `sortByKey` in the engine: map tasks sort, reduce tasks merge.
//!
//! ```text
//!  map task:    (pid ++ order-preserving key, serialized record) ──► engine: partition
//!               + SortRuns per destination ──► Sluice blocks of sorted runs
//!  reduce task: fetched blocks ──► decode, verify ──► split into sorted runs
//!               ──► SortMerge (loser tree; runs beyond the task's grant on disk)
//!               ──► values in key order, merged 1 MiB at a time as the JVM's
//!                   deserializer reads them
//! ```
//! The host encodes each key so that comparing the bytes orders keys as
//! the host orders them (see the Java side's `SortKeys`), after the 4-byte
//! partition id, which is the same for every record of a partition. The
//! data file does not mark where one run ends: the reduce side cuts the
//! records it reads into maximal non-decreasing sequences, each of which
//! is a sorted run by definition. Every map-side run is one such sequence
//! or part of one (two runs join where the first's last key is not above
//! the second's first), so the merge sees at most as many runs as the map
//! side wrote, and an unsorted input would still come out sorted (with
//! more runs).
//!
//! Memory: each reduce task's merge has a pool of its own that starts
//! empty; the host grants it bytes as it fetches blocks ([`ReduceSort::grant`],
//! the bytes Spark's memory manager gave the task for them), and a run
//! the grant does not cover is written to the spill directory instead of
//! being kept. So the runs held in memory are accounted in Spark's
//! execution memory, and a task short of memory spills rather than fails.

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::sort::SortMerge;

use crate::error::{BridgeError, BridgeResult};
use crate::ops::{reduce_spill, with_checked_block, Drain, Phase};
use crate::partitioner::PARTITION_KEY_BYTES;
use crate::read::BlockName;

/// Bytes of a run's batch before a new one starts (1 MiB).
pub const RUN_BATCH_BYTES: usize = 1 << 20;

/// The reduce side of one task of a sorting shuffle.
#[derive(Debug)]
pub struct ReduceSort {
    /// The merger while blocks arrive (taken by `finish`).
    merge: Option<SortMerge>,
    /// Runs handed to the merger.
    runs: u64,
    /// Runs the grant did not cover, written to disk (known at finish).
    spilled_runs: u64,
    /// The task's memory, granted by the host.
    memory: MemoryPool,
    /// Payload bytes of every block fed so far.
    fed_bytes: usize,
    partitions: std::ops::Range<u32>,
    /// The run being read: full batches, the open batch, its last key.
    run: Vec<RecordBatch>,
    open: RecordBatch,
    last_key: Vec<u8>,
    phase: Phase,
}

impl ReduceSort {
    /// A merger for reduce partitions `partitions` with no memory granted
    /// yet, spilling runs to `spill_dir`.
    pub fn open(
        partitions: std::ops::Range<u32>,
        spill_dir: &std::path::Path,
    ) -> BridgeResult<Self> {
        let spill = reduce_spill(&partitions, spill_dir)?;
        let memory = MemoryPool::new(0);
        let mut merge = SortMerge::new(Layout::Variable, &memory, spill);
        if partitions.len() == 1 {
            // Every key starts with the one partition's id (each block is
            // checked for it), so the merge compares what follows first.
            merge.set_common_prefix(PARTITION_KEY_BYTES);
        }
        Ok(ReduceSort {
            merge: Some(merge),
            runs: 0,
            spilled_runs: 0,
            memory,
            fed_bytes: 0,
            partitions,
            run: Vec::new(),
            open: RecordBatch::with_capacity(Layout::Variable, RUN_BATCH_BYTES),
            last_key: Vec::new(),
            phase: Phase::Merging,
        })
    }

    /// Decodes and verifies one fetched block and appends its records to
    /// the run being read, starting a new run where a key is below the one
    /// before. Returns the block's records.
    pub fn feed(&mut self, frame: &[u8], what: &BlockName) -> BridgeResult<usize> {
        if !matches!(self.phase, Phase::Merging) {
            return Err(BridgeError::Argument(format!("block {what} fed after finish")));
        }
        let partitions = self.partitions.clone();
        with_checked_block(frame, what, &partitions, |records| {
            self.fed_bytes = self.fed_bytes.saturating_add(records.payload().len());
            for r in records.iter() {
                let in_run = !self.open.is_empty() || !self.run.is_empty();
                if in_run && r.key < self.last_key.as_slice() {
                    self.end_run()?;
                }
                if !self.open.is_empty() && self.open.payload_len() >= RUN_BATCH_BYTES {
                    let full = std::mem::replace(
                        &mut self.open,
                        RecordBatch::with_capacity(Layout::Variable, RUN_BATCH_BYTES),
                    );
                    self.run.push(full);
                }
                self.open.push(r.key, r.value).map_err(BridgeError::Encode)?;
                self.last_key.clear();
                self.last_key.extend_from_slice(r.key);
            }
            Ok(records.len())
        })
    }

    /// Hands the run being read to the merger.
    fn end_run(&mut self) -> BridgeResult<()> {
        let mut run = std::mem::take(&mut self.run);
        if !self.open.is_empty() {
            run.push(std::mem::replace(
                &mut self.open,
                RecordBatch::with_capacity(Layout::Variable, RUN_BATCH_BYTES),
            ));
        }
        if !run.is_empty() {
            let merge = self
                .merge
                .as_mut()
                .ok_or_else(|| BridgeError::Argument("reduce sort fed after finish".into()))?;
            merge.add_run(run)?;
            self.runs += 1;
        }
        Ok(())
    }

    /// Ends the input and starts the merge of every run; returns the
    /// record count. The merged records are produced as the host reads
    /// them ([`ReduceSort::next_values`]), never all in memory at once.
    pub fn finish(&mut self) -> BridgeResult<u64> {
        if !matches!(self.phase, Phase::Merging) {
            return Err(BridgeError::Argument("reduce sort finished twice".into()));
        }
        self.end_run()?;
        let merge = self
            .merge
            .take()
            .ok_or_else(|| BridgeError::Argument("reduce sort finished twice".into()))?;
        let records = merge.stats().input_records;
        self.spilled_runs = merge.stats().spilled_runs;
        let stream = merge.into_stream()?;
        self.phase = Phase::Draining(Box::new(Drain::streaming(stream, Layout::Variable)));
        Ok(records)
    }

    /// Runs merged so far (for tests and metrics).
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// Runs written to disk because the grant did not cover them (known
    /// once finished).
    pub fn spilled_runs(&self) -> u64 {
        self.spilled_runs
    }

    /// Adds `bytes` the host granted to the memory runs may be kept in.
    pub fn grant(&mut self, bytes: usize) {
        self.memory.grant(bytes);
    }

    /// Bytes beyond what was granted that `upcoming` more bytes of fetched
    /// records would need. The run being read is not in the pool until it
    /// ends, so this counts every byte fed since the last grant covered
    /// them: the grant stays ahead of the runs it will have to hold.
    pub fn shortfall(&self, upcoming: usize) -> usize {
        self.fed_bytes.saturating_add(upcoming).saturating_sub(self.memory.budget())
    }

    /// Copies the next records' values, in key order and back to back,
    /// into `out`. Returns (bytes, records); (0, 0) at the end, and (bytes
    /// the next value needs, 0) when it does not fit `out`.
    pub fn next_values(&mut self, out: &mut [u8]) -> BridgeResult<(usize, usize)> {
        let Phase::Draining(drain) = &mut self.phase else {
            return Err(BridgeError::Argument("results read before finish".into()));
        };
        drain.copy_out(out, |record, klen| &record[8 + klen..])
    }
}
