//! Distinct over keys or whole records: partial with a bounded hash set on
//! the map side, exact on the reduce side.
//!
//! # Partial
//! A record whose item (its key, or its whole encoded bytes) is not in the
//! set is emitted and remembered; a repeat is dropped. When the set reaches
//! its threshold: [`SpillStrategy::State`] empties the set (keeping its
//! memory) and starts over (later repeats of forgotten items go out again, the reduce side removes
//! them); [`SpillStrategy::Input`] keeps the set and lets unseen items pass
//! without remembering them; [`SpillStrategy::Evict`] does what `State`
//! does (a set holds no state to evict as a partial).
//!
//! # Final
//! Items go into a set within what the memory pool grants; nothing is
//! emitted until the end, because a spilled item may repeat later. When the
//! pool refuses, the set is written to disk as a sorted run and cleared. At
//! the end the in-memory set is emitted directly if nothing was spilled, or
//! else spilled as one more run, and the runs are merged with the loser tree,
//! each item emitted once, as the reader asks for it (`group_stream`).

use crate::format::{BatchView, Layout, RawRecord};
use crate::memory::{MemoryError, MemoryPool, Reservation};
use crate::reorg::aggregate::SpillStrategy;
use crate::reorg::cursor::record_at;
use crate::reorg::emit::Emitter;
use crate::reorg::group_stream::{GroupFold, GroupStream};
use crate::reorg::runs::{SpillConfig, SpilledRuns};
use crate::reorg::table::{hash_key, KeyTable, PROBE_BATCH};
use crate::reorg::ReorgError;

/// What makes two records the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DistinctBy {
    /// The key bytes (one record per key survives, the first seen).
    Key,
    /// The whole record (key and value).
    Record,
}

/// Counters of the distinct operators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DistinctStats {
    /// Records taken in.
    pub input_records: u64,
    /// Records emitted.
    pub emitted_records: u64,
    /// Times the set was forgotten (partial) or written as a run (final).
    pub state_spills: u64,
    /// Unseen records passed through without being remembered.
    pub passed_through: u64,
    /// Bytes written to spill files.
    pub spill_bytes: u64,
    /// Payload bytes of the keys written to disk, as they were in memory.
    pub spill_run_bytes: u64,
}

impl DistinctStats {
    /// Spills of any kind.
    pub fn spill_count(&self) -> u64 {
        self.state_spills + self.passed_through
    }
}

/// A set of items within a byte limit and a reservation.
#[derive(Debug)]
struct ItemSet {
    by: DistinctBy,
    layout: Layout,
    table: KeyTable,
    threshold: usize,
    reservation: Reservation,
    refused: Option<MemoryError>,
}

impl ItemSet {
    fn new(by: DistinctBy, layout: Layout, threshold: usize, pool: &MemoryPool) -> Self {
        let fixed = match (by, layout) {
            (DistinctBy::Key, Layout::Fixed { key_width, .. }) => Some(usize::from(key_width)),
            (DistinctBy::Record, Layout::Fixed { .. }) => layout.fixed_record_bytes(),
            _ => None,
        };
        ItemSet {
            by,
            layout,
            table: KeyTable::new(fixed),
            threshold,
            reservation: pool.reservation(),
            refused: None,
        }
    }

    #[inline]
    fn item<'a>(&self, r: &RawRecord<'a>) -> &'a [u8] {
        match self.by {
            DistinctBy::Key => r.key,
            DistinctBy::Record => r.bytes,
        }
    }

    /// Room for one more item of `len` bytes?
    fn admit(&mut self, len: usize) -> bool {
        let Some(extra) = self.table.growth_for_insert(len) else { return false };
        if extra == 0 {
            return true;
        }
        match self.reservation.try_hold(self.table.allocated() + extra, self.threshold) {
            Ok(held) => held,
            Err(e) => {
                self.refused = Some(e);
                false
            }
        }
    }

    fn reset(&mut self) {
        self.table.reset();
        self.reservation.free();
    }

    /// Forgets every item, keeping the memory for the next round.
    fn clear(&mut self) {
        self.table.clear();
    }

    /// Emits item `e` as a record.
    fn emit(&self, e: usize, out: &mut Emitter) -> Result<(), ReorgError> {
        let item = self.table.key(e);
        match self.by {
            DistinctBy::Key => out.emit(item, &[])?,
            DistinctBy::Record => {
                if let Some((r, _)) = record_at(self.layout, item, 0) {
                    out.emit(r.key, r.value)?;
                }
            }
        }
        Ok(())
    }
}

/// The layout of distinct's output for input in `layout`.
pub fn distinct_layout(by: DistinctBy, layout: Layout) -> Layout {
    match (by, layout) {
        (DistinctBy::Key, Layout::Fixed { key_width, .. }) => {
            Layout::Fixed { key_width, value_width: 0 }
        }
        (DistinctBy::Key, Layout::Variable) => Layout::Variable,
        (DistinctBy::Record, l) => l,
    }
}

/// Map-side distinct with a bounded set.
#[derive(Debug)]
pub struct PartialDistinct {
    set: ItemSet,
    strategy: SpillStrategy,
    stats: DistinctStats,
    /// Hashes of the batch being filtered (reused).
    hashes: Vec<u64>,
}

impl PartialDistinct {
    /// A partial distinct over records in `layout`.
    pub fn new(
        by: DistinctBy,
        layout: Layout,
        threshold: usize,
        strategy: SpillStrategy,
        pool: &MemoryPool,
    ) -> Self {
        PartialDistinct {
            set: ItemSet::new(by, layout, threshold, pool),
            strategy,
            stats: DistinctStats::default(),
            hashes: Vec::new(),
        }
    }

    /// Layout of what it emits (keys only for [`DistinctBy::Key`], with the
    /// value dropped; whole records otherwise).
    pub fn output_layout(&self) -> Layout {
        distinct_layout(self.set.by, self.set.layout)
    }

    /// What it has done so far.
    pub fn stats(&self) -> DistinctStats {
        self.stats
    }

    /// Filters one batch, emitting first occurrences.
    pub fn push(&mut self, view: &BatchView<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
        if view.layout() != self.set.layout {
            return Err(ReorgError::Layout { want: self.set.layout, got: view.layout() });
        }
        let key_only = self.set.by == DistinctBy::Key;
        // Hash everything first, then prefetch PROBE_BATCH items ahead of
        // the lookups (as in the partial aggregate).
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let mut raw = view.raw();
        while let Some(r) = raw.next_raw() {
            hashes.push(hash_key(self.set.item(&r)));
        }
        for &h in hashes.iter().take(PROBE_BATCH) {
            self.set.table.prefetch(h);
        }
        let mut raw = view.raw();
        let mut i = 0;
        while let Some(r) = raw.next_raw() {
            if let Some(&ahead) = hashes.get(i + PROBE_BATCH) {
                self.set.table.prefetch(ahead);
            }
            let item = self.set.item(&r);
            let h = hashes[i];
            i += 1;
            if self.set.table.find(item, h).is_some() {
                continue;
            }
            if !self.set.admit(item.len()) {
                match self.strategy {
                    // A set of keys has no state to evict: Evict empties it.
                    SpillStrategy::State | SpillStrategy::Evict => {
                        self.set.clear();
                        self.stats.state_spills += 1;
                    }
                    SpillStrategy::Input => self.stats.passed_through += 1,
                }
                if self.strategy == SpillStrategy::Input || !self.set.admit(item.len()) {
                    emit_item(key_only, &r, out)?;
                    self.stats.emitted_records += 1;
                    continue;
                }
            }
            self.set.table.find_or_insert(item, h);
            emit_item(key_only, &r, out)?;
            self.stats.emitted_records += 1;
        }
        self.hashes = hashes;
        self.stats.input_records += view.len() as u64;
        Ok(())
    }

    /// End of input: forgets the set.
    pub fn finish(&mut self) {
        self.set.reset();
    }
}

#[inline(always)]
fn emit_item(key_only: bool, r: &RawRecord<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
    if key_only {
        out.emit(r.key, &[])?;
    } else {
        out.emit_raw(*r)?;
    }
    Ok(())
}

/// Reduce-side exact distinct.
#[derive(Debug)]
pub struct FinalDistinct {
    set: ItemSet,
    runs: SpilledRuns,
    stats: DistinctStats,
}

impl FinalDistinct {
    /// An exact distinct over records in `layout` (for [`DistinctBy::Key`]
    /// the input is usually a partial distinct's key-only output).
    pub fn new(by: DistinctBy, layout: Layout, pool: &MemoryPool, spill: SpillConfig) -> Self {
        Self::with_limit(by, layout, pool, spill, usize::MAX)
    }

    /// As [`FinalDistinct::new`], with at most `limit` bytes of state before
    /// it spills a run, whatever the pool would grant.
    pub fn with_limit(
        by: DistinctBy,
        layout: Layout,
        pool: &MemoryPool,
        spill: SpillConfig,
        limit: usize,
    ) -> Self {
        FinalDistinct {
            set: ItemSet::new(by, layout, limit, pool),
            runs: SpilledRuns::new(spill),
            stats: DistinctStats::default(),
        }
    }

    /// What it has done so far.
    pub fn stats(&self) -> DistinctStats {
        DistinctStats {
            spill_bytes: self.runs.stats().bytes_written,
            spill_run_bytes: self.runs.run_bytes(),
            ..self.stats
        }
    }

    /// Layout of what it emits.
    pub fn output_layout(&self) -> Layout {
        distinct_layout(self.set.by, self.set.layout)
    }

    /// Adds one batch to the set.
    pub fn push(&mut self, view: &BatchView<'_>) -> Result<(), ReorgError> {
        if view.layout() != self.set.layout {
            return Err(ReorgError::Layout { want: self.set.layout, got: view.layout() });
        }
        let mut raw = view.raw();
        while let Some(r) = raw.next_raw() {
            let item = self.set.item(&r);
            let h = hash_key(item);
            if self.set.table.find(item, h).is_some() {
                continue;
            }
            if !self.set.admit(item.len()) {
                self.spill()?;
                if !self.set.admit(item.len()) {
                    let err = self.set.refused.take().unwrap_or(MemoryError {
                        requested: item.len(),
                        used: self.set.reservation.bytes(),
                        budget: self.set.threshold,
                    });
                    return Err(ReorgError::Memory(err));
                }
            }
            self.set.table.find_or_insert(item, h);
        }
        self.stats.input_records += view.len() as u64;
        Ok(())
    }

    /// Writes the set as a sorted run (items as records) and clears it.
    fn spill(&mut self) -> Result<(), ReorgError> {
        let table = &self.set.table;
        self.runs.write_run_from(crate::format::Layout::Variable, |run| {
            table
                .sorted_entries()
                .into_iter()
                .try_for_each(|e| run.emit(table.key(e as usize), &[]))
        })?;
        self.set.reset();
        self.stats.state_spills += 1;
        Ok(())
    }

    /// Emits every distinct item once.
    pub fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let before = out.records();
        let stream = self.finish_streaming(out)?;
        GroupStream::emit_all(stream, out)?;
        self.stats.emitted_records += out.records() - before;
        Ok(())
    }

    /// Ends the input. With nothing spilled, emits every item into `out`
    /// and returns `None`; otherwise spills the set as one more run and
    /// returns the merge of the runs, which yields each item once, in
    /// order, as it is asked for (see `group_stream`).
    pub fn finish_streaming(
        &mut self,
        out: &mut Emitter,
    ) -> Result<Option<GroupStream>, ReorgError> {
        if self.runs.runs() == 0 {
            for e in 0..self.set.table.len() {
                self.set.emit(e, out)?;
            }
            self.set.reset();
            return Ok(None);
        }
        if !self.set.table.is_empty() {
            self.spill()?;
        }
        self.runs.seal()?;
        let fold = GroupFold::Distinct { by: self.set.by, layout: self.set.layout };
        Ok(Some(GroupStream::new(self.runs.cursors()?, fold)))
    }
}
