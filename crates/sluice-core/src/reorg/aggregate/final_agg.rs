//! Reduce-side final aggregation: partial records in, exact results out,
//! within a memory budget.
//!
//! # Algorithm
//! Partial states merge into one table. When the memory pool refuses a new
//! group, the table is written to a spill file as a run sorted by key and
//! freed. At the end, if nothing was spilled the table is emitted directly;
//! otherwise the table becomes one more run and all runs are merged with
//! the loser tree, equal keys combined as they meet, and each key's final
//! value emitted once, in key order, as the reader asks for it
//! (`group_stream`).

use super::groups::Groups;
use super::{final_layout, partial_layout, AggregateStats};
use crate::format::limits::VARIABLE_RECORD_PREFIX_BYTES;
use crate::format::{BatchView, Layout};
use crate::memory::MemoryPool;
use crate::reorg::emit::Emitter;
use crate::reorg::group_stream::{GroupFold, GroupStream};
use crate::reorg::runs::{SpillConfig, SpilledRuns};
use crate::reorg::table::PROBE_BATCH;
use crate::reorg::ReorgError;

use super::func::{AggFn, AggSpec};

/// Final aggregation of partial records.
#[derive(Debug)]
pub struct FinalAggregate {
    groups: Groups,
    /// Layout of the raw records the partials came from.
    layout: Layout,
    runs: SpilledRuns,
    stats: AggregateStats,
}

impl FinalAggregate {
    /// A final aggregate for partials of records in `layout`, keeping state
    /// within what `pool` grants and spilling sorted runs under `spill`.
    pub fn new(spec: AggSpec, layout: Layout, pool: &MemoryPool, spill: SpillConfig) -> Self {
        Self::with_limit(spec, layout, pool, spill, usize::MAX)
    }

    /// As [`FinalAggregate::new`], with at most `limit` bytes of state
    /// before it spills a run, whatever the pool would grant: operators
    /// sharing one pool then cannot starve each other.
    pub fn with_limit(
        spec: AggSpec,
        layout: Layout,
        pool: &MemoryPool,
        spill: SpillConfig,
        limit: usize,
    ) -> Self {
        let key_width = match layout {
            Layout::Fixed { key_width, .. } => Some(usize::from(key_width)),
            Layout::Variable => None,
        };
        FinalAggregate {
            groups: Groups::new(spec, key_width, limit, pool),
            layout,
            runs: SpilledRuns::new(spill),
            stats: AggregateStats::default(),
        }
    }

    /// Layout of the partial records it takes.
    pub fn input_layout(&self) -> Layout {
        partial_layout(self.groups.spec, self.layout)
    }

    /// Layout of the results.
    pub fn output_layout(&self) -> Layout {
        final_layout(self.groups.spec, self.layout)
    }

    /// What it has done so far.
    pub fn stats(&self) -> AggregateStats {
        let io = self.runs.stats();
        AggregateStats {
            state_bytes: self.groups.allocated(),
            spill_bytes: io.bytes_written,
            spill_run_bytes: self.runs.run_bytes(),
            spill_writes: io.writes,
            merge_passes: self.runs.passes(),
            ..self.stats
        }
    }

    /// Most bytes the state allocates while it merges a batch of `bytes`
    /// bytes of partial records, each taken as a new group: what a host
    /// granting memory ahead of each batch covers, so that a table that
    /// fits in the memory it could have does not spill. A record is at
    /// least its lengths (or its fixed key) and a state (any value,
    /// collecting).
    pub fn peak_bytes_with(&self, bytes: usize) -> usize {
        let spec = self.groups.spec;
        let state = if spec.func == AggFn::Collect { 0 } else { spec.partial_bytes() };
        let framing = match self.layout {
            Layout::Fixed { key_width, .. } => usize::from(key_width),
            Layout::Variable => VARIABLE_RECORD_PREFIX_BYTES,
        };
        self.groups.peak_bytes_with(bytes / (framing + state).max(1), bytes, bytes)
    }

    /// Merges one batch of partial records.
    pub fn push(&mut self, view: &BatchView<'_>) -> Result<(), ReorgError> {
        let want = self.input_layout();
        if view.layout() != want {
            return Err(ReorgError::Layout { want, got: view.layout() });
        }
        let spec = self.groups.spec;
        let state_bytes = spec.partial_bytes();
        let mut keys: [&[u8]; PROBE_BATCH] = [&[]; PROBE_BATCH];
        let mut vals: [&[u8]; PROBE_BATCH] = [&[]; PROBE_BATCH];
        let mut hashes = [0u64; PROBE_BATCH];
        let mut records = view.iter().enumerate();
        loop {
            let mut n = 0;
            for (i, r) in records.by_ref().take(PROBE_BATCH) {
                if spec.func != AggFn::Collect && r.value.len() != state_bytes {
                    return Err(ReorgError::StateWidth {
                        record: i,
                        want: state_bytes,
                        got: r.value.len(),
                    });
                }
                keys[n] = r.key;
                vals[n] = r.value;
                hashes[n] = Groups::hash(r.key);
                self.groups.table.prefetch(hashes[n]);
                n += 1;
            }
            if n == 0 {
                break;
            }
            for j in 0..n {
                self.one(keys[j], vals[j], hashes[j])?;
            }
            self.stats.input_records += n as u64;
        }
        self.stats.input_bytes += view.payload().len() as u64;
        Ok(())
    }

    fn one(&mut self, key: &[u8], state: &[u8], hash: u64) -> Result<(), ReorgError> {
        let existing = self.groups.find(key, hash);
        let fits = match existing {
            Some(_) => self.groups.admit_value(state.len()),
            None => self.groups.admit(key.len(), state.len()),
        };
        if !fits {
            self.spill()?;
            if !self.groups.admit(key.len(), state.len()) {
                // Not even one group fits: the budget is below the minimum.
                return Err(ReorgError::Memory(self.groups.refusal()));
            }
            let (e, _) = self.groups.upsert(key, hash);
            return self.groups.merge_partial(e, state, true);
        }
        match existing {
            Some(e) => self.groups.merge_partial(e, state, false),
            None => {
                let (e, _) = self.groups.upsert(key, hash);
                self.groups.merge_partial(e, state, true)
            }
        }
    }

    /// Writes the table as a sorted run, a batch at a time (beside the
    /// table it needs its sorted order, 4 bytes a group, and one batch),
    /// and frees it.
    fn spill(&mut self) -> Result<(), ReorgError> {
        let layout = self.input_layout();
        let groups = &mut self.groups;
        self.runs
            .write_run_from(layout, |run| groups.emit_partials_sorted(|k, v| run.emit(k, v)))?;
        self.groups.reset();
        self.stats.state_spills += 1;
        Ok(())
    }

    /// Emits every key's final value.
    pub fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let before = out.records();
        let stream = self.finish_streaming(out)?;
        GroupStream::emit_all(stream, out)?;
        self.stats.emitted_records += out.records() - before;
        Ok(())
    }

    /// Ends the input. With nothing spilled, emits every key's final value
    /// into `out` and returns `None`; otherwise spills the table as one
    /// more run and returns the merge of the runs, which yields the results
    /// in key order as they are asked for (see `group_stream`) while the
    /// operator holds no state.
    pub fn finish_streaming(
        &mut self,
        out: &mut Emitter,
    ) -> Result<Option<GroupStream>, ReorgError> {
        if self.runs.runs() == 0 {
            self.groups.emit_finals(out)?;
            self.groups.reset();
            return Ok(None);
        }
        if self.groups.len() > 0 {
            self.spill()?;
        }
        self.runs.seal()?;
        let fold =
            GroupFold::Aggregate { spec: self.groups.spec, acc: Vec::new(), value: Vec::new() };
        Ok(Some(GroupStream::new(self.runs.cursors()?, fold)))
    }
}
