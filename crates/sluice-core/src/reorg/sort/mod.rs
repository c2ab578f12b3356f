//! Sort by byte-comparable key: sorted runs on the map side, a streaming
//! k-way merge on the reduce side.
//!
//! ```text
//!  records ──► SortRuns: buffer up to the threshold, sort (kernel), emit a run ──► runs
//!  runs    ──► SortMerge: runs in memory within the pool, beyond it on disk;
//!              loser-tree merge of all of them ──► records in key order
//!              (all at once, or a piece at a time through MergeStream)
//! ```
//! The map side sorts within memory it reserved (the buffered records plus
//! two 16-byte sort entries per record) and gathers each run straight into
//! the output batches; the reduce side never sorts again, it merges.

pub mod kernel;

use crate::format::{BatchView, Layout, RecordBatch};
use crate::memory::{MemoryPool, Reservation};
use crate::reorg::cursor::{record_at, AnyRun, MemRun, MemView, SpillRun};
use crate::reorg::emit::Emitter;
use crate::reorg::merge::LoserTree;
use crate::reorg::runs::{SpillConfig, SpilledRuns, MERGE_PASS_BLOCK_BYTES};
use crate::reorg::ReorgError;
use crate::spill::SpillWriter;
use kernel::{sort_records, SortEntry, SORT_BUFFER_BYTES_MAX};

/// Bytes of sort state per record besides the record itself: two sort
/// entries.
const ENTRY_BYTES_PER_RECORD: usize = 2 * std::mem::size_of::<SortEntry>();

/// Counters of the sort operators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SortStats {
    /// Records taken in.
    pub input_records: u64,
    /// Records emitted.
    pub emitted_records: u64,
    /// Sorted runs emitted (map side) or merged (reduce side).
    pub runs: u64,
    /// Runs written to disk (reduce side).
    pub spilled_runs: u64,
    /// Merge passes that brought the spilled runs within the fan-in
    /// (reduce side, known once the merge starts).
    pub merge_passes: u64,
    /// Bytes written to spill files.
    pub spill_bytes: u64,
    /// Payload bytes of the runs written to disk, as they were in memory
    /// (reduce side).
    pub spill_run_bytes: u64,
    /// Runs cut outside the reservation because the pool refused even one
    /// record (map side).
    pub bypass_runs: u64,
}

/// Map side: cuts input into sorted runs of at most `threshold` bytes of
/// state.
#[derive(Debug)]
pub struct SortRuns {
    layout: Layout,
    threshold: usize,
    buf: Vec<u8>,
    count: usize,
    entries: Vec<SortEntry>,
    scratch: Vec<SortEntry>,
    reservation: Reservation,
    stats: SortStats,
}

impl SortRuns {
    /// A run generator for records in `layout`.
    pub fn new(layout: Layout, threshold: usize, pool: &MemoryPool) -> Self {
        SortRuns {
            layout,
            threshold: threshold.min(SORT_BUFFER_BYTES_MAX),
            buf: Vec::new(),
            count: 0,
            entries: Vec::new(),
            scratch: Vec::new(),
            reservation: pool.reservation(),
            stats: SortStats::default(),
        }
    }

    /// What it has done so far.
    pub fn stats(&self) -> SortStats {
        self.stats
    }

    /// State bytes needed to hold `bytes` more payload in `records` more
    /// records.
    fn need(&self, bytes: usize, records: usize) -> usize {
        self.buf.len() + bytes + (self.count + records) * ENTRY_BYTES_PER_RECORD
    }

    /// Reserves room for `bytes` in `records`; `false` if over the threshold
    /// or refused.
    fn admit(&mut self, bytes: usize, records: usize) -> bool {
        self.reservation.try_hold(self.need(bytes, records), self.threshold).unwrap_or(false)
    }

    /// Buffers one batch, emitting sorted runs to `out` as the buffer fills.
    pub fn push(&mut self, view: &BatchView<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
        if view.layout() != self.layout {
            return Err(ReorgError::Layout { want: self.layout, got: view.layout() });
        }
        if let Some(width) = self.layout.fixed_record_bytes() {
            self.push_fixed(view.payload(), width, out)?;
        } else {
            let mut raw = view.raw();
            let mut at = 0;
            while let Some(r) = raw.next_raw() {
                match self.make_room(r.bytes.len(), 1, out) {
                    Ok(()) => {}
                    Err(ReorgError::Memory(_)) if self.count == 0 => {
                        let rest = view.payload().get(at..).unwrap_or_default();
                        let n = 1 + raw.len();
                        self.stats.input_records += view.len() as u64;
                        return self.bypass(rest, n, out);
                    }
                    Err(e) => return Err(e),
                }
                at += r.bytes.len();
                self.buf.extend_from_slice(r.bytes);
                self.count += 1;
            }
        }
        self.stats.input_records += view.len() as u64;
        Ok(())
    }

    /// Admits `bytes` in `records`, sorting and emitting the buffer first if
    /// they do not fit; an error if they do not fit an empty buffer either.
    fn make_room(
        &mut self,
        bytes: usize,
        records: usize,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        if self.admit(bytes, records) {
            return Ok(());
        }
        self.flush(out)?;
        if self.admit(bytes, records) {
            return Ok(());
        }
        Err(ReorgError::Memory(crate::memory::MemoryError {
            requested: self.need(bytes, records),
            used: self.reservation.bytes(),
            budget: self.threshold,
        }))
    }

    /// Appends fixed-width records in as few copies as the threshold allows.
    fn push_fixed(
        &mut self,
        mut rest: &[u8],
        width: usize,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let per_record = width + ENTRY_BYTES_PER_RECORD;
        while !rest.is_empty() {
            let room = self.threshold.saturating_sub(self.need(0, 0)) / per_record;
            let mut take = room.min(rest.len() / width);
            if take == 0 || !self.admit(take * width, take) {
                // Full, or the pool refused the chunk: one record at a time.
                match self.make_room(width, 1, out) {
                    Ok(()) => take = 1,
                    Err(ReorgError::Memory(_)) if self.count == 0 => {
                        return self.bypass(rest, rest.len() / width, out);
                    }
                    Err(e) => return Err(e),
                }
            }
            let (head, tail) = rest.split_at(take * width);
            self.buf.extend_from_slice(head);
            self.count += take;
            rest = tail;
        }
        Ok(())
    }

    /// The pool refused even one record with nothing held: the rest of
    /// the batch (`records` records) becomes a sorted run of its own,
    /// outside the reservation (at most one input batch), so a partial
    /// sort always makes progress (its runs are just shorter).
    fn bypass(&mut self, rest: &[u8], records: usize, out: &mut Emitter) -> Result<(), ReorgError> {
        self.buf.extend_from_slice(rest);
        self.count += records;
        self.stats.bypass_runs += 1;
        self.flush(out)
    }

    /// Sorts the buffer and emits it as one run.
    fn flush(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        if self.count == 0 {
            return Ok(());
        }
        if out.layout() != self.layout {
            return Err(ReorgError::Layout { want: self.layout, got: out.layout() });
        }
        sort_records(self.layout, &self.buf, self.count, &mut self.entries, &mut self.scratch);
        out.start_run();
        match self.layout {
            Layout::Fixed { .. } => {
                // Gather straight into the output batches.
                let buf = &self.buf;
                let records =
                    self.entries.iter().map(|e| buf.get(e.off as usize..).unwrap_or_default());
                out.gather_fixed(records, self.entries.len())?;
            }
            Layout::Variable => {
                for e in &self.entries {
                    if let Some((r, _)) = record_at(self.layout, &self.buf, e.off as usize) {
                        out.emit(r.key, r.value)?;
                    }
                }
            }
        }
        self.stats.emitted_records += self.count as u64;
        self.stats.runs += 1;
        self.buf.clear();
        self.count = 0;
        Ok(())
    }

    /// End of input: emits the last run and frees the buffers.
    pub fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        self.flush(out)?;
        self.buf = Vec::new();
        self.entries = Vec::new();
        self.scratch = Vec::new();
        self.reservation.free();
        Ok(())
    }
}

/// Reduce side: collects sorted runs and merges them.
#[derive(Debug)]
pub struct SortMerge {
    layout: Layout,
    mem: Vec<Vec<RecordBatch>>,
    reservation: Reservation,
    spilled: SpilledRuns,
    stats: SortStats,
    /// Leading key bytes the order ignores ([`SortMerge::order_keys_after`]).
    skip: usize,
}

impl SortMerge {
    /// A merger of runs of records in `layout`.
    pub fn new(layout: Layout, pool: &MemoryPool, spill: SpillConfig) -> Self {
        SortMerge {
            layout,
            mem: Vec::new(),
            reservation: pool.reservation(),
            spilled: SpilledRuns::new(spill),
            stats: SortStats::default(),
            skip: 0,
        }
    }

    /// The runs are sorted by their keys' bytes after the first `bytes`,
    /// and the merge (merge passes of spilled runs included) orders by
    /// them too ([`LoserTree::ordered_after`]).
    pub fn order_keys_after(&mut self, bytes: usize) {
        self.skip = bytes;
        self.spilled.order_keys_after(bytes);
    }

    /// What it has done so far.
    pub fn stats(&self) -> SortStats {
        SortStats {
            spill_bytes: self.spilled.stats().bytes_written,
            spill_run_bytes: self.spilled.run_bytes(),
            merge_passes: self.spilled.passes(),
            ..self.stats
        }
    }

    /// Adds one sorted run: kept in memory if the pool grants its bytes,
    /// written to disk otherwise.
    pub fn add_run(&mut self, run: Vec<RecordBatch>) -> Result<(), ReorgError> {
        if let Some(b) = run.iter().find(|b| b.layout() != self.layout) {
            return Err(ReorgError::Layout { want: self.layout, got: b.layout() });
        }
        let bytes: usize = run.iter().map(|b| b.payload_len()).sum();
        self.stats.input_records += run.iter().map(|b| b.len() as u64).sum::<u64>();
        self.stats.runs += 1;
        if self.reservation.try_grow(bytes).is_ok() {
            self.mem.push(run);
        } else {
            self.spilled.write_run(run)?;
            self.stats.spilled_runs += 1;
        }
        Ok(())
    }

    /// Merges every run into `out` in key order.
    pub fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let mut tree = LoserTree::ordered_after(self.cursors()?, self.skip);
        let before = out.records();
        while let Some(r) = tree.peek() {
            out.emit(r.key, r.value)?;
            tree.advance()?;
        }
        self.stats.emitted_records += out.records() - before;
        self.reservation.free();
        Ok(())
    }

    /// The merge of every run, to be read a piece at a time
    /// ([`MergeStream::emit_some`]), so that a reduce task's output never
    /// has to be in memory whole. The in-memory runs stay accounted until
    /// the stream is dropped or sends them to disk
    /// ([`MergeStream::spill_memory_runs`]); spilled runs are read back a
    /// block at a time.
    pub fn into_stream(mut self) -> Result<MergeStream, ReorgError> {
        let tree = LoserTree::ordered_after(self.cursors()?, self.skip);
        // After `cursors` sealed the spill file, so its bytes count.
        let sealed = self.stats();
        Ok(MergeStream {
            tree,
            reservation: self.reservation,
            layout: self.layout,
            spill: self.spilled.config().clone(),
            emitted: 0,
            sealed,
        })
    }

    /// A cursor per run, in memory and on disk (the spill file sealed).
    fn cursors(&mut self) -> Result<Vec<AnyRun>, ReorgError> {
        self.spilled.seal()?;
        let mut cursors: Vec<AnyRun> = std::mem::take(&mut self.mem)
            .into_iter()
            .map(|r| AnyRun::Mem(MemRun::new(r)))
            .collect();
        cursors.extend(self.spilled.cursors()?);
        Ok(cursors)
    }
}

/// [`SortMerge`]'s merge in progress: the loser tree over its runs, which
/// own what they read (the spill file lives as long as a cursor needs it
/// and is removed after).
#[derive(Debug)]
pub struct MergeStream {
    tree: LoserTree<AnyRun>,
    /// The bytes of the runs still in memory.
    reservation: Reservation,
    layout: Layout,
    /// Where [`MergeStream::spill_memory_runs`] writes.
    spill: SpillConfig,
    emitted: u64,
    /// The merger's statistics once its runs were sealed.
    sealed: SortStats,
}

impl MergeStream {
    /// What the merger did before the merge began: runs taken and
    /// spilled, spill bytes written (merge passes included).
    pub fn sort_stats(&self) -> SortStats {
        self.sealed
    }

    /// Emits the next records in key order into `out` until `bytes` more
    /// payload bytes were emitted or the runs end. Returns whether records
    /// remain.
    pub fn emit_some(&mut self, out: &mut Emitter, bytes: u64) -> Result<bool, ReorgError> {
        let start = out.bytes();
        while let Some(r) = self.tree.peek() {
            out.emit(r.key, r.value)?;
            self.tree.advance()?;
            self.emitted += 1;
            if out.bytes() - start >= bytes {
                return Ok(self.tree.peek().is_some());
            }
        }
        Ok(false)
    }

    /// Records emitted so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Payload bytes of the runs held in memory (as they were taken; what
    /// was already read out of them included).
    pub fn memory_bytes(&self) -> usize {
        self.reservation.bytes()
    }

    /// Bytes of read buffers its runs on disk hold at most.
    pub fn read_buffer_bytes(&self) -> usize {
        AnyRun::read_buffer_bytes(self.tree.runs())
    }

    /// Writes what is left of the runs held in memory, merged, to a spill
    /// file as one run, and reads it from there on; the memory goes back to
    /// the pool. The runs are merged from where their cursors stand, so
    /// every record of the new run sorts at or after the last one emitted,
    /// and the merged run takes the place of the first run in memory, so
    /// equal keys keep their order. One run, not one per run in memory: a
    /// cursor over a spilled run holds up to [`MERGE_RUN_READ_BYTES`] of
    /// read buffers, so a reduce task holding thousands of small map runs
    /// would otherwise need more memory after the spill than before. Runs
    /// read to their end are just dropped. The runs are read, not consumed,
    /// while they are written, and the tree changes only once the file is
    /// whole and its run opened, so an error (a full disk) leaves the merge
    /// as it was, the memory still held.
    ///
    /// [`MERGE_RUN_READ_BYTES`]: crate::reorg::runs::MERGE_RUN_READ_BYTES
    pub fn spill_memory_runs(&mut self) -> Result<SentToDisk, ReorgError> {
        if !self.tree.runs().iter().any(|r| matches!(r, AnyRun::Mem(_))) {
            return Ok(SentToDisk::default());
        }
        // The merged run takes the first run in memory's place, which keeps
        // equal keys in run order because every run in memory comes before
        // every run on disk (`SortMerge::cursors`).
        debug_assert!(
            self.tree
                .runs()
                .windows(2)
                .all(|w| { !(matches!(w[0], AnyRun::Spill(_)) && matches!(w[1], AnyRun::Mem(_))) }),
            "a run in memory after one on disk"
        );
        let freed = self.reservation.bytes() as u64;
        let (merged, moved, written) = self.write_memory_runs()?;
        let skip = self.tree.skip();
        let old = std::mem::replace(&mut self.tree, LoserTree::new(Vec::new())).into_runs();
        let mut runs = Vec::with_capacity(old.len());
        let mut merged = merged.map(AnyRun::Spill);
        for run in old {
            match run {
                AnyRun::Mem(_) => runs.extend(merged.take()),
                spilled => runs.push(spilled),
            }
        }
        self.tree = LoserTree::ordered_after(runs, skip);
        self.reservation.free();
        Ok(SentToDisk { freed, moved, written })
    }

    /// Merges what is left of the runs in memory into one run of a new
    /// spill file: a cursor over it (none if nothing was left), the payload
    /// bytes written and the file's bytes.
    fn write_memory_runs(&self) -> Result<(Option<SpillRun>, u64, u64), ReorgError> {
        let views: Vec<MemView<'_>> = self
            .tree
            .runs()
            .iter()
            .filter_map(|r| match r {
                AnyRun::Mem(m) => Some(m.view()),
                AnyRun::Spill(_) => None,
            })
            .collect();
        let mut merge = LoserTree::ordered_after(views, self.tree.skip());
        if merge.peek().is_none() {
            return Ok((None, 0, 0));
        }
        let mut writer = SpillWriter::create(&self.spill.dir, self.spill.codec)?;
        let run = writer.new_run();
        let mut batch = RecordBatch::with_capacity(self.layout, MERGE_PASS_BLOCK_BYTES);
        let mut moved = 0u64;
        while let Some(r) = merge.peek() {
            batch.push(r.key, r.value)?;
            merge.advance()?;
            if batch.payload_len() >= MERGE_PASS_BLOCK_BYTES {
                moved += batch.payload_len() as u64;
                writer.append(run, batch.view())?;
                batch.clear();
            }
        }
        moved += batch.payload_len() as u64;
        writer.append(run, batch.view())?;
        let file = writer.finish()?;
        let written = file.stats().bytes_written;
        Ok((Some(SpillRun::new(file.run(run)?)?), moved, written))
    }
}

/// What sending results held in memory to disk did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SentToDisk {
    /// Bytes of memory given back (a sort's runs: all their bytes, what was
    /// already read out of them included).
    pub freed: u64,
    /// Payload bytes written, as they were in memory (what was left to
    /// read).
    pub moved: u64,
    /// Bytes written to the spill file.
    pub written: u64,
}
