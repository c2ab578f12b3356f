//! The final operator of a reduce side: one interface over the final
//! aggregate, the sorted merge and the final distinct, driven the same way
//! by the engine's own reduce partitions (`partition`) and by a host's
//! reduce tasks (`task`).
//!
//! ```text
//!  push(records) ──► aggregate: merge partials into the table
//!                    distinct:  keep first occurrences
//!                    sort:      cut into maximal non-decreasing runs ──► SortMerge
//!  add_run(run)  ──► sort: one run as it is; others: push each batch
//!  finish        ──► Finished { drain, records, spills }: results emitted
//!                    whole, or merged from runs as the drain is read
//! ```
//! A sort's input either arrives as runs (the engine's deliveries are the
//! map side's sorted runs) or as records in the order a host fetched them
//! (blocks of several map outputs, back to back). The data file does not
//! mark where one run ends, so pushed records are cut into maximal
//! non-decreasing sequences, each of which is a sorted run by definition.
//! Every map-side run is one such sequence or part of one (two runs join
//! where the first's last key is not above the second's first), so the
//! merge sees at most as many runs as the map side wrote, and an unsorted
//! input would still come out sorted (with more runs).
//!
//! State lives in the memory pool the owner passes: a refused group or run
//! goes to the spill directory as a sorted run (see `sluice_core::reorg`).

use sluice_core::format::{BatchView, Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::aggregate::FinalAggregate;
use sluice_core::reorg::distinct::{distinct_layout, FinalDistinct};
use sluice_core::reorg::sort::SortMerge;
use sluice_core::reorg::{Emitter, GroupStream, SpillConfig, StageSpec};

use crate::error::{EngineError, EngineResult};
use crate::reduce::drain::{Drain, Stream};

/// Bytes of a sort run's batch before a new one starts (1 MiB).
pub const RUN_BATCH_BYTES: usize = 1 << 20;

/// Payload bytes at which a sort ends the run it is cutting from its input
/// even where the input goes on in order (16 MiB; a prefix of a sorted
/// sequence is a sorted run). A run meets the task's grant, and goes to
/// disk if the grant does not cover it, only when it ends, so input that
/// arrives sorted would otherwise be held whole before any of it could
/// spill; this is the most a sort holds beyond its grant.
pub const SORT_CUT_RUN_BYTES: usize = 16 << 20;

/// A shuffle's final operator over one reduce side's input.
#[derive(Debug)]
pub struct FinalOp {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Aggregate(Box<FinalAggregate>),
    Sort(Box<SortRuns>),
    Distinct(Box<FinalDistinct>),
}

/// What a finished operator hands on.
#[derive(Debug)]
pub struct Finished {
    /// Its results, in order, to be read a batch or a buffer at a time.
    pub drain: Drain,
    /// Result records when known as the input ends: a sort's (every record
    /// it took), an aggregate's or a distinct's that did not spill; `None`
    /// for results merged from spilled runs as they are read.
    pub records: Option<u64>,
    /// Sorted runs a sort took (0 for the other operators).
    pub runs: u64,
    /// Sorted runs it wrote to disk for want of memory.
    pub spilled_runs: u64,
    /// Bytes it wrote to disk.
    pub spill_bytes: u64,
    /// Payload bytes of what it wrote to disk, as they were in memory.
    pub spill_run_bytes: u64,
}

impl Finished {
    /// The results of an aggregate or a distinct: emitted whole into `out`,
    /// or, if it spilled, `stream`ed from its runs; it spilled
    /// `spilled_runs` runs of `spill_bytes` bytes on disk, `spill_run_bytes`
    /// in memory.
    fn grouped(
        out: Emitter,
        stream: Option<GroupStream>,
        spilled_runs: u64,
        spill_bytes: u64,
        spill_run_bytes: u64,
    ) -> Self {
        let (drain, records) = match stream {
            Some(g) => (Drain::streaming(Stream::Grouped(g), out.layout()), None),
            None => {
                let records = out.records();
                (Drain::new(out.into_batches()), Some(records))
            }
        };
        Finished { drain, records, runs: 0, spilled_runs, spill_bytes, spill_run_bytes }
    }
}

impl FinalOp {
    /// The final operator of `op` over records in `layout`, its state in
    /// `memory` and its spills under `spill`; an aggregate's table is
    /// capped at `aggregate_limit` bytes when given. `None` for an
    /// operator with no final step (partitioning, a filter): the blocks
    /// are the result.
    pub fn new(
        op: &StageSpec,
        layout: Layout,
        memory: &MemoryPool,
        spill: SpillConfig,
        aggregate_limit: Option<usize>,
    ) -> Option<FinalOp> {
        let kind = match op {
            StageSpec::None | StageSpec::Filter(_) => return None,
            StageSpec::Aggregate(spec, _) => Kind::Aggregate(Box::new(match aggregate_limit {
                Some(limit) => FinalAggregate::with_limit(*spec, layout, memory, spill, limit),
                None => FinalAggregate::new(*spec, layout, memory, spill),
            })),
            StageSpec::Sort => Kind::Sort(Box::new(SortRuns::new(layout, memory, spill))),
            StageSpec::Distinct(by, _) => Kind::Distinct(Box::new(FinalDistinct::new(
                *by,
                distinct_layout(*by, layout),
                memory,
                spill,
            ))),
        };
        Some(FinalOp { kind })
    }

    /// Layout of the results.
    pub fn output_layout(&self) -> Layout {
        match &self.kind {
            Kind::Aggregate(a) => a.output_layout(),
            Kind::Sort(s) => s.layout,
            Kind::Distinct(d) => d.output_layout(),
        }
    }

    /// A sort orders keys by their bytes after the first `bytes` (a reduce
    /// task's partition id); other operators ignore it.
    pub fn order_keys_after(&mut self, bytes: usize) {
        if let Kind::Sort(s) = &mut self.kind {
            s.skip = bytes;
            s.merge.order_keys_after(bytes);
        }
    }

    /// Takes records in the order they arrived.
    pub fn push(&mut self, records: &BatchView<'_>) -> EngineResult<()> {
        match &mut self.kind {
            Kind::Aggregate(a) => a.push(records)?,
            Kind::Sort(s) => s.push(records)?,
            Kind::Distinct(d) => d.push(records)?,
        }
        Ok(())
    }

    /// Takes one sorted run (a sort keeps it as a run; other operators
    /// take its records).
    pub fn add_run(&mut self, run: Vec<RecordBatch>) -> EngineResult<()> {
        match &mut self.kind {
            Kind::Sort(s) => s.add_run(run),
            _ => run.iter().try_for_each(|b| self.push(&b.view())),
        }
    }

    /// An aggregate's table allocation at the peak of taking `upcoming`
    /// more bytes of records, every one a new group
    /// (`FinalAggregate::peak_bytes_with`); `None` for the other operators,
    /// whose state grows by at most the bytes they take.
    pub fn peak_state_bytes_with(&self, upcoming: usize) -> Option<usize> {
        match &self.kind {
            Kind::Aggregate(a) => Some(a.peak_bytes_with(upcoming)),
            _ => None,
        }
    }

    /// Sorted runs a sort took so far (0 for the other operators).
    pub fn runs(&self) -> u64 {
        match &self.kind {
            Kind::Sort(s) => s.merge.stats().runs,
            _ => 0,
        }
    }

    /// Sorted runs written to disk so far for want of memory.
    pub fn spilled_runs(&self) -> u64 {
        match &self.kind {
            Kind::Aggregate(a) => a.stats().state_spills,
            Kind::Sort(s) => s.merge.stats().spilled_runs,
            Kind::Distinct(d) => d.stats().state_spills,
        }
    }

    /// Ends the input. An aggregate or distinct that kept its state in
    /// memory emits every result now; one that spilled, and a sort, start
    /// the merge of their runs, which the drain pulls a batch at a time, so
    /// their output is never in memory whole.
    pub fn finish(self) -> EngineResult<Finished> {
        let layout = self.output_layout();
        let mut out = Emitter::new(layout);
        match self.kind {
            Kind::Aggregate(mut a) => {
                let stream = a.finish_streaming(&mut out)?;
                let s = a.stats();
                Ok(Finished::grouped(out, stream, s.state_spills, s.spill_bytes, s.spill_run_bytes))
            }
            Kind::Distinct(mut d) => {
                let stream = d.finish_streaming(&mut out)?;
                let s = d.stats();
                Ok(Finished::grouped(out, stream, s.state_spills, s.spill_bytes, s.spill_run_bytes))
            }
            Kind::Sort(mut s) => {
                s.end_run()?;
                let stream = s.merge.into_stream()?;
                let stats = stream.sort_stats();
                Ok(Finished {
                    drain: Drain::streaming(Stream::Sorted(stream), layout),
                    records: Some(stats.input_records),
                    runs: stats.runs,
                    spilled_runs: stats.spilled_runs,
                    spill_bytes: stats.spill_bytes,
                    spill_run_bytes: stats.spill_run_bytes,
                })
            }
        }
    }
}

/// The bytes of `key` a sort orders by: those after the first `skip`.
fn ordered(key: &[u8], skip: usize) -> &[u8] {
    key.get(skip..).unwrap_or(&[])
}

/// A sort's merge and the run being cut from pushed records.
#[derive(Debug)]
struct SortRuns {
    layout: Layout,
    merge: SortMerge,
    /// The run being read: full batches (`run_bytes` of payload), the
    /// open batch, its last key.
    run: Vec<RecordBatch>,
    run_bytes: usize,
    open: RecordBatch,
    last_key: Vec<u8>,
    /// Bytes at the start of every key that the order ignores.
    skip: usize,
}

impl SortRuns {
    fn new(layout: Layout, memory: &MemoryPool, spill: SpillConfig) -> Self {
        SortRuns {
            layout,
            merge: SortMerge::new(layout, memory, spill),
            run: Vec::new(),
            run_bytes: 0,
            open: RecordBatch::with_capacity(layout, RUN_BATCH_BYTES),
            last_key: Vec::new(),
            skip: 0,
        }
    }

    /// Appends records to the run being cut, starting a new run where a
    /// key is below the one before (both from byte `skip`) or the run
    /// reached [`SORT_CUT_RUN_BYTES`].
    fn push(&mut self, records: &BatchView<'_>) -> EngineResult<()> {
        for r in records.iter() {
            let in_run = !self.open.is_empty() || !self.run.is_empty();
            if in_run
                && (ordered(r.key, self.skip) < ordered(&self.last_key, self.skip)
                    || self.run_bytes + self.open.payload_len() >= SORT_CUT_RUN_BYTES)
            {
                self.end_run()?;
            }
            if !self.open.is_empty() && self.open.payload_len() >= RUN_BATCH_BYTES {
                let fresh = self.fresh_batch();
                let full = std::mem::replace(&mut self.open, fresh);
                self.run_bytes += full.payload_len();
                self.run.push(full);
            }
            self.open.push(r.key, r.value).map_err(EngineError::Encode)?;
            self.last_key.clear();
            self.last_key.extend_from_slice(r.key);
        }
        Ok(())
    }

    fn fresh_batch(&self) -> RecordBatch {
        RecordBatch::with_capacity(self.layout, RUN_BATCH_BYTES)
    }

    /// A run that arrives whole: the run being cut ends first.
    fn add_run(&mut self, run: Vec<RecordBatch>) -> EngineResult<()> {
        self.end_run()?;
        if !run.is_empty() {
            self.merge.add_run(run)?;
        }
        Ok(())
    }

    /// Hands the run being cut to the merge.
    fn end_run(&mut self) -> EngineResult<()> {
        let run = self.take_run();
        if !run.is_empty() {
            self.merge.add_run(run)?;
        }
        Ok(())
    }

    /// The run being cut, each batch cut to its payload: the merge
    /// accounts a run it keeps by its payload, and a reduce task's runs
    /// (one per map output it read) can be far smaller than the batch they
    /// were cut in.
    fn take_run(&mut self) -> Vec<RecordBatch> {
        self.run_bytes = 0;
        let mut run = std::mem::take(&mut self.run);
        if !self.open.is_empty() {
            let fresh = self.fresh_batch();
            run.push(std::mem::replace(&mut self.open, fresh));
        }
        run.iter_mut().for_each(RecordBatch::shrink_to_fit);
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::format::Codec;
    use sluice_core::reorg::sort::SentToDisk;

    /// A run cut from pushed records holds no more memory than its
    /// payload, which is what the merge accounts it by: a short run does
    /// not keep the whole batch it was cut in.
    #[test]
    fn a_short_run_is_cut_to_its_payload() {
        let dir = tempfile::tempdir().expect("tmp");
        let memory = MemoryPool::new(1 << 30);
        let spill = SpillConfig { dir: dir.path().to_owned(), ..SpillConfig::default() };
        let mut runs = SortRuns::new(Layout::Variable, &memory, spill);
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..1_000u32 {
            batch.push(&i.to_be_bytes(), &[1u8; 100]).expect("push");
        }
        runs.push(&batch.view()).expect("push");
        let run = runs.take_run();
        assert_eq!(run.iter().map(RecordBatch::payload_len).sum::<usize>(), batch.payload_len());
        let held: usize = run.iter().map(RecordBatch::capacity).sum();
        assert!(
            held < batch.payload_len() + 64,
            "{held} bytes held for a run of {}",
            batch.payload_len()
        );
    }

    /// Input that arrives in order is cut into runs of at most
    /// [`SORT_CUT_RUN_BYTES`] (and one batch), so that a task granted
    /// nothing holds no more than that before its runs go to disk; the
    /// merge still gives every record once, in order.
    #[test]
    fn sorted_input_is_cut_into_runs_of_bounded_size() {
        let dir = tempfile::tempdir().expect("tmp");
        let memory = MemoryPool::new(0);
        let spill = SpillConfig { dir: dir.path().to_owned(), ..SpillConfig::default() };
        let mut op =
            FinalOp::new(&StageSpec::Sort, Layout::Variable, &memory, spill, None).expect("a sort");
        op.order_keys_after(4);
        let records = 1_500_000u64;
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..records {
            let mut key = 7u32.to_le_bytes().to_vec();
            key.extend_from_slice(&i.to_be_bytes());
            batch.push(&key, &[0u8; 16]).expect("push");
            if batch.payload_len() >= RUN_BATCH_BYTES {
                op.push(&batch.view()).expect("push");
                batch = RecordBatch::new(Layout::Variable);
            }
        }
        op.push(&batch.view()).expect("push");
        let payload = records as usize * (8 + 12 + 16);
        let mut done = op.finish().expect("finish");
        // One run in order, without the cut.
        assert!(done.runs > 1, "{payload} bytes in one run");
        assert_eq!(done.runs as usize, payload.div_ceil(SORT_CUT_RUN_BYTES), "{payload} bytes");
        assert_eq!(done.spilled_runs, done.runs, "nothing granted: every run on disk");
        let mut next = 0u64;
        while let Some(b) = done.drain.next_batch().expect("batch") {
            for r in b.view().iter() {
                assert_eq!(r.key[4..], next.to_be_bytes(), "in order, once");
                next += 1;
            }
        }
        assert_eq!(next, records);
    }

    /// An aggregate that spilled hands back a drain that merges its runs as
    /// it is read: the operator's memory is all free before the first
    /// result is read, and every key comes out once, in order, complete.
    #[test]
    fn an_aggregate_that_spilled_streams_its_results_holding_no_state() {
        use sluice_core::reorg::aggregate::{AggFn, AggSpec, SpillStrategy, ValueType};
        let dir = tempfile::tempdir().expect("tmp");
        let memory = MemoryPool::new(64 << 10);
        let spill = SpillConfig { dir: dir.path().to_owned(), ..SpillConfig::default() };
        let sum =
            StageSpec::Aggregate(AggSpec::new(AggFn::Sum, ValueType::I64), SpillStrategy::State);
        let mut op =
            FinalOp::new(&sum, Layout::Variable, &memory, spill, None).expect("an aggregate");
        let (keys, each) = (50_000u64, 4u64);
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..keys * each {
            let k = (i * 7_919) % keys;
            batch.push(&k.to_be_bytes(), &(k as i64).to_le_bytes()).expect("push");
            if batch.payload_len() >= RUN_BATCH_BYTES {
                op.push(&batch.view()).expect("push");
                batch = RecordBatch::new(Layout::Variable);
            }
        }
        op.push(&batch.view()).expect("push");
        let mut done = op.finish().expect("finish");
        assert!(done.spilled_runs > 1, "{} runs spilled", done.spilled_runs);
        assert_eq!(done.records, None, "counted only as read");
        assert_eq!((done.drain.held_bytes(), memory.used()), (0, 0), "state held while streaming");
        let mut next = 0u64;
        while let Some(b) = done.drain.next_batch().expect("batch") {
            for r in b.view().iter() {
                assert_eq!(r.key, next.to_be_bytes(), "each key once, in order");
                let total = i64::from_le_bytes(r.value.try_into().expect("an i64 sum"));
                assert_eq!(total, (next * each) as i64, "key {next}");
                next += 1;
            }
        }
        assert_eq!(next, keys);
    }

    /// A sort's runs kept in memory go to disk when the host asks for their
    /// memory midway through the read; the merge goes on from disk and
    /// every record still comes out once, in order.
    #[test]
    fn a_sorts_runs_in_memory_go_to_disk_midway_when_asked() {
        let dir = tempfile::tempdir().expect("tmp");
        let memory = MemoryPool::new(64 << 20);
        let spill = SpillConfig { dir: dir.path().to_owned(), ..SpillConfig::default() };
        let mut op =
            FinalOp::new(&StageSpec::Sort, Layout::Variable, &memory, spill, None).expect("a sort");
        op.order_keys_after(4);
        let records = 300_000u64;
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..records {
            let mut key = 3u32.to_le_bytes().to_vec();
            key.extend_from_slice(&((i * 7_919) % records).to_be_bytes());
            batch.push(&key, &i.to_le_bytes()).expect("push");
            if batch.payload_len() >= RUN_BATCH_BYTES {
                op.push(&batch.view()).expect("push");
                batch = RecordBatch::new(Layout::Variable);
            }
        }
        op.push(&batch.view()).expect("push");
        let mut done = op.finish().expect("finish");
        assert_eq!((done.spilled_runs, done.records), (0, Some(records)), "all runs in memory");
        let held = done.drain.held_bytes();
        assert!(held > 0 && held == memory.used(), "{held} held, {} in the pool", memory.used());
        let mut next = 0u64;
        let mut check = |b: RecordBatch| {
            for r in b.view().iter() {
                assert_eq!(r.key[4..], next.to_be_bytes(), "in order, once");
                next += 1;
            }
        };
        check(done.drain.next_batch().expect("batch").expect("a first batch"));
        let sent = done.drain.spill_pending(dir.path(), Codec::Lz4).expect("spill");
        assert_eq!(sent.freed, held as u64, "the runs' memory given back");
        assert!(sent.moved > 0 && sent.moved < held as u64 && sent.written > 0, "{sent:?}");
        assert_eq!((done.drain.held_bytes(), memory.used()), (0, 0), "memory kept after the spill");
        let again = done.drain.spill_pending(dir.path(), Codec::Lz4).expect("again");
        assert_eq!(again, SentToDisk::default());
        while let Some(b) = done.drain.next_batch().expect("batch") {
            check(b);
        }
        assert_eq!(next, records);
    }
}
