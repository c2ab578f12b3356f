//! Map-side partial aggregation with a state threshold, SmartShuffle's two
//! spilling strategies and spilling by eviction.
//!
//! # Algorithm
//! Records are taken [`PROBE_BATCH`] at a time: hash every key, prefetch
//! every home slot, then probe in order. A key already in the table folds
//! its value into the group's state. A new key needs room; when the
//! threshold or the memory pool refuses it:
//!
//! - [`SpillStrategy::State`]: emit every group as a partial record, empty
//!   the table (keeping its memory for the next round), then insert the key;
//! - [`SpillStrategy::Input`]: keep the table; the record goes out as a
//!   one-record partial, and only keys already in the table aggregate from
//!   now on;
//! - [`SpillStrategy::Evict`] (Sluice's own): for the inline tables (8-byte
//!   and prefixed keys) with one or two state words, a set-associative
//!   table of one cache line per bucket where a new key in a full bucket
//!   evicts one of its groups (`evict`); wider states and the general
//!   table spill their state.
//!
//! Keys of 8 bytes with a numeric function, or lanes of up to eight state
//! words, take the `inline` fast path (key and state side by side in the
//! slot, about a third of the general table's bytes per group for a
//! decimal's average); everything else the general
//! table, except one common shape of variable-layout records: keys that
//! all share a short prefix and end in 8 bytes (an engine record of an
//! offloaded shuffle: `partition id ++ key tag ++ 8-byte key`). The first
//! such key names the prefix; runs of records with that prefix and one
//! value width go to an inline table that stores only the 8 bytes after
//! it ([`InlinePartial::set_prefix`]), every other record to the general
//! table. Stripping the prefix fits more groups into the threshold, so
//! fewer partials leave the map side, faster (`docs/benchmarks.md`,
//! "Design measurements"). In the rare mix of shapes each
//! table keeps to the threshold, so the operator may hold up to twice it;
//! the memory pool still bounds both.
//!
//! At the end of input the tables are emitted. The output is partial
//! records (key, state) that the final aggregate merges exactly, whatever
//! was spilled on the way.

use super::func::{AggFn, AggSpec, STATE_BYTES_MAX};
use super::groups::Groups;
use super::inline::{InlinePartial, Strided};
use super::key8::{INLINE_KEY_BYTES, PREFIX_BYTES_MAX};
use super::{check_value, partial_layout, AggregateStats, SpillStrategy};
use crate::format::limits::VARIABLE_RECORD_PREFIX_BYTES;
use crate::format::{BatchView, Layout};
use crate::memory::MemoryPool;
use crate::reorg::emit::Emitter;
use crate::reorg::table::PROBE_BATCH;
use crate::reorg::ReorgError;

/// Consecutive records of a variable-layout batch bound for one table.
struct Run {
    /// Byte range in the payload.
    start: usize,
    end: usize,
    /// Index in the batch of the first record, and the record count.
    first: usize,
    count: u32,
    /// The record width of a prefixed run (all its records alike); `None`
    /// for the general table.
    stride: Option<usize>,
}

/// Partial (pre-)aggregation.
#[derive(Debug)]
pub struct PartialAggregate {
    /// The fast path for 8-byte keys and numeric functions, when it applies.
    inline: Option<InlinePartial>,
    /// For variable-layout records: the inline table of keys `prefix ++ 8
    /// bytes` (its prefix named by the first such key).
    prefixed: Option<InlinePartial>,
    groups: Groups,
    layout: Layout,
    strategy: SpillStrategy,
    stats: AggregateStats,
    /// Hashes of the batch being applied (reused).
    hashes: Vec<u64>,
}

impl PartialAggregate {
    /// An operator over records in `layout`, with at most `threshold` bytes
    /// of state, reserving them from `pool`.
    pub fn new(
        spec: AggSpec,
        layout: Layout,
        threshold: usize,
        strategy: SpillStrategy,
        pool: &MemoryPool,
    ) -> Self {
        let key_width = match layout {
            Layout::Fixed { key_width, .. } => Some(usize::from(key_width)),
            Layout::Variable => None,
        };
        let inline = (key_width == Some(INLINE_KEY_BYTES) && spec.inline_ok())
            .then(|| InlinePartial::new(spec, threshold, strategy, pool));
        let prefixed = (layout == Layout::Variable && spec.inline_ok())
            .then(|| InlinePartial::new(spec, threshold, strategy, pool));
        PartialAggregate {
            inline,
            prefixed,
            groups: Groups::new(spec, key_width, threshold, pool),
            layout,
            strategy,
            stats: AggregateStats::default(),
            hashes: Vec::new(),
        }
    }

    /// Layout of the partial records this operator emits.
    pub fn output_layout(&self) -> Layout {
        partial_layout(self.groups.spec, self.layout)
    }

    /// What it has done so far.
    pub fn stats(&self) -> AggregateStats {
        if let Some(fast) = &self.inline {
            return AggregateStats { state_bytes: fast.allocated(), ..fast.stats };
        }
        let mut s = AggregateStats { state_bytes: self.groups.allocated(), ..self.stats };
        if let Some(p) = &self.prefixed {
            let q = &p.stats;
            s.input_records += q.input_records;
            s.input_bytes += q.input_bytes;
            s.emitted_records += q.emitted_records;
            s.state_spills += q.state_spills;
            s.passed_through += q.passed_through;
            s.evicted += q.evicted;
            s.state_bytes += p.allocated();
        }
        s
    }

    /// Aggregates one batch; spilled partials go to `out`.
    pub fn push(&mut self, view: &BatchView<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
        if view.layout() != self.layout {
            return Err(ReorgError::Layout { want: self.layout, got: view.layout() });
        }
        if let (Some(fast), Some(width)) = (self.inline.as_mut(), self.layout.fixed_record_bytes())
        {
            return fast.push(view.payload(), Strided { bytes: width, key_at: 0 }, out);
        }
        if self.prefixed.is_some() {
            return self.push_prefixed(view, out);
        }
        match self.layout {
            Layout::Fixed { key_width, value_width } => {
                let kw = usize::from(key_width);
                let width = kw + value_width as usize;
                let records = view.payload().chunks_exact(width).map(|r| r.split_at(kw));
                self.push_records(records, out)?;
            }
            Layout::Variable => self.push_records(view.iter().map(|r| (r.key, r.value)), out)?,
        }
        self.stats.input_bytes += view.payload().len() as u64;
        Ok(())
    }

    /// Variable-layout records: runs of records whose keys are the prefix
    /// and 8 bytes, with one value width, go to the prefixed inline table
    /// as strided payloads; the others to the general table, in order.
    fn push_prefixed(&mut self, view: &BatchView<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
        let payload = view.payload();
        let base = payload.as_ptr().addr();
        let mut runs: Vec<Run> = Vec::new();
        let mut records = view.raw();
        let mut index = 0;
        while let Some(r) = records.next_raw() {
            let start = r.bytes.as_ptr().addr() - base;
            let end = start + r.bytes.len();
            let stride = self.fits_prefixed(r.key).then_some(r.bytes.len());
            match runs.last_mut() {
                Some(last) if last.end == start && last.stride == stride => {
                    last.end = end;
                    last.count += 1;
                }
                _ => runs.push(Run { start, end, first: index, count: 1, stride }),
            }
            index += 1;
        }
        let key_at = VARIABLE_RECORD_PREFIX_BYTES
            + self.prefixed.as_ref().and_then(InlinePartial::prefix).map_or(0, <[u8]>::len);
        for run in runs {
            let bytes = &payload[run.start..run.end];
            let done = match (run.stride, self.prefixed.as_mut()) {
                (Some(stride), Some(t)) => t.push(bytes, Strided { bytes: stride, key_at }, out),
                _ => BatchView::new(Layout::Variable, run.count, bytes)
                    .map_err(ReorgError::from)
                    .and_then(|v| self.push_records(v.iter().map(|r| (r.key, r.value)), out))
                    .map(|()| self.stats.input_bytes += bytes.len() as u64),
            };
            // A record's index in an error is its index in the batch.
            done.map_err(|e| match e {
                ReorgError::ValueWidth { record, value_type, want, got } => {
                    ReorgError::ValueWidth { record: record + run.first, value_type, want, got }
                }
                other => other,
            })?;
        }
        Ok(())
    }

    /// Whether `key` belongs in the prefixed table; the first key of a
    /// usable length (8 to 8 + [`PREFIX_BYTES_MAX`] bytes) names its prefix.
    #[inline]
    fn fits_prefixed(&mut self, key: &[u8]) -> bool {
        let Some(t) = self.prefixed.as_mut() else { return false };
        match t.prefix() {
            Some(prefix) => key.len() == prefix.len() + INLINE_KEY_BYTES && key.starts_with(prefix),
            None => match key.len().checked_sub(INLINE_KEY_BYTES) {
                Some(p) if p <= PREFIX_BYTES_MAX => {
                    t.set_prefix(&key[..p]);
                    true
                }
                _ => false,
            },
        }
    }

    /// The probe loop, software-pipelined: all keys of the batch are hashed
    /// first, and while record `i` is applied the home slot of record
    /// `i + PROBE_BATCH` is prefetched, so each slot's cache miss has
    /// [`PROBE_BATCH`] records' worth of work to hide behind.
    fn push_records<'r, I>(&mut self, records: I, out: &mut Emitter) -> Result<(), ReorgError>
    where
        I: Iterator<Item = (&'r [u8], &'r [u8])> + Clone,
    {
        let spec = self.groups.spec;
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let mut checked = Ok(());
        for (i, (key, value)) in records.clone().enumerate() {
            if let Err(e) = check_value(spec, value, i) {
                checked = Err(e);
                break;
            }
            hashes.push(Groups::hash(key));
        }
        let result = checked.and_then(|()| {
            for &h in hashes.iter().take(PROBE_BATCH) {
                self.groups.table.prefetch(h);
            }
            for (i, (key, value)) in records.enumerate() {
                if let Some(&ahead) = hashes.get(i + PROBE_BATCH) {
                    self.groups.table.prefetch(ahead);
                }
                let hash = hashes[i];
                match self.groups.find(key, hash) {
                    Some(e) => self.hit(e, key, value, out)?,
                    None => self.miss(key, value, hash, out)?,
                }
            }
            self.stats.input_records += hashes.len() as u64;
            Ok(())
        });
        self.hashes = hashes;
        result
    }

    /// A record whose key is in the table.
    #[inline]
    fn hit(
        &mut self,
        e: usize,
        key: &[u8],
        value: &[u8],
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        if spec_is_collect(&self.groups) && !self.groups.admit_value(value.len()) {
            return self.pass_through(key, value, out);
        }
        self.groups.update(e, value, false);
        Ok(())
    }

    /// A record whose key is not in the table: insert, or spill.
    fn miss(
        &mut self,
        key: &[u8],
        value: &[u8],
        hash: u64,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        if !self.groups.admit(key.len(), value.len()) {
            match self.strategy {
                SpillStrategy::Input => return self.pass_through(key, value, out),
                // The general table has no eviction: it spills its state.
                SpillStrategy::State | SpillStrategy::Evict => {
                    self.spill_state(out)?;
                    if !self.groups.admit(key.len(), value.len()) {
                        return self.pass_through(key, value, out);
                    }
                }
            }
        }
        // `miss` is only called for a key that is absent, but `upsert` says
        // so again rather than trusting it.
        let (e, new) = self.groups.upsert(key, hash);
        self.groups.update(e, value, new);
        Ok(())
    }

    fn spill_state(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let before = out.records();
        self.groups.emit_partials(out)?;
        self.stats.emitted_records += out.records() - before;
        self.groups.clear();
        self.stats.state_spills += 1;
        Ok(())
    }

    /// Emits one record as a partial of its own.
    fn pass_through(
        &mut self,
        key: &[u8],
        value: &[u8],
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let spec = self.groups.spec;
        if spec.func == AggFn::Collect {
            let mut list = Vec::with_capacity(4 + value.len());
            list.extend_from_slice(&(value.len() as u32).to_le_bytes());
            list.extend_from_slice(value);
            out.emit(key, &list)?;
        } else {
            let mut buf = [0u8; STATE_BYTES_MAX];
            let n = spec.single_partial(value, &mut buf);
            out.emit(key, &buf[..n])?;
        }
        self.stats.passed_through += 1;
        self.stats.emitted_records += 1;
        Ok(())
    }

    /// End of input: emits the table.
    pub fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        if let Some(fast) = self.inline.as_mut() {
            return fast.finish(out);
        }
        if let Some(p) = self.prefixed.as_mut() {
            p.finish(out)?;
        }
        let before = out.records();
        self.groups.emit_partials(out)?;
        self.stats.emitted_records += out.records() - before;
        self.groups.reset();
        Ok(())
    }
}

#[inline]
fn spec_is_collect(g: &Groups) -> bool {
    g.spec.func == AggFn::Collect
}
