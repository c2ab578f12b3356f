//! Groups: the hash table plus per-group aggregate state, under a byte limit
//! and a memory reservation.
//!
//! Numeric states are `words` u64s per entry in one array; collect states
//! are the head and tail of a chain of values:
//! ```text
//!  states[e*2..e*2+2] = [head, tail]    links[i] = (next, start, len) into vals
//! ```
//! Before anything grows, the bytes it would allocate are checked against
//! the operator's limit (`threshold`, SmartShuffle's spilling threshold) and
//! reserved from the memory pool; a `false` from `admit` means "spill first".

use super::func::{read_state, write_state, AggFn, AggSpec, STATE_BYTES_MAX};
use super::lanes::STATE_WORDS_MAX;
use crate::format::Layout;
use crate::memory::{MemoryError, MemoryPool, Reservation};
use crate::reorg::emit::Emitter;
use crate::reorg::table::{grown_by_inserts, hash_key, KeyTable};
use crate::reorg::ReorgError;

/// End of a value chain.
const NIL: u32 = u32::MAX;

/// Bytes of one collect chain link.
const LINK_BYTES: usize = 12;

/// Aggregation state for many groups.
#[derive(Debug)]
pub(crate) struct Groups {
    pub(crate) spec: AggSpec,
    pub(crate) table: KeyTable,
    words: usize,
    states: Vec<u64>,
    links: Vec<(u32, u32, u32)>,
    vals: Vec<u8>,
    threshold: usize,
    reservation: Reservation,
    refused: Option<MemoryError>,
    scratch: Vec<u8>,
}

impl Groups {
    pub(crate) fn new(
        spec: AggSpec,
        key_width: Option<usize>,
        threshold: usize,
        pool: &MemoryPool,
    ) -> Self {
        Groups {
            spec,
            table: KeyTable::new(key_width),
            words: spec.state_words(),
            states: Vec::new(),
            links: Vec::new(),
            vals: Vec::new(),
            threshold,
            reservation: pool.reservation(),
            refused: None,
            scratch: Vec::new(),
        }
    }

    /// Bytes allocated for state.
    pub(crate) fn allocated(&self) -> usize {
        self.table.allocated()
            + self.states.capacity() * 8
            + self.links.capacity() * LINK_BYTES
            + self.vals.capacity()
    }

    /// Most bytes the state allocates while `more` new groups are added,
    /// with `more_key_bytes` of keys and, collecting, `more_value_bytes` of
    /// values: each array grown as an insert grows it ([`Groups::admit`]).
    pub(crate) fn peak_bytes_with(
        &self,
        more: usize,
        more_key_bytes: usize,
        more_value_bytes: usize,
    ) -> usize {
        // `reserve_exact(capacity.max(64))`: doubling, from 64.
        let doubled = |capacity: usize, need: usize| {
            let mut c = capacity;
            while need > c {
                c += c.max(64);
            }
            c
        };
        let states = doubled(self.states.capacity(), self.states.len() + more * self.words) * 8;
        let (links, vals) = if self.spec.func == AggFn::Collect {
            let links = doubled(self.links.capacity(), self.links.len() + more) * LINK_BYTES;
            let vals = grown_by_inserts(self.vals.capacity(), self.vals.len() + more_value_bytes);
            (links, vals)
        } else {
            (self.links.capacity() * LINK_BYTES, self.vals.capacity())
        };
        self.table.peak_bytes_with(more, more_key_bytes) + states + links + vals
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Makes room for a new group with a `key_len`-byte key plus `value_len`
    /// collected bytes: `false` when the threshold or the pool says no.
    pub(crate) fn admit(&mut self, key_len: usize, value_len: usize) -> bool {
        let Some(mut extra) = self.table.growth_for_insert(key_len) else { return false };
        if self.states.len() + self.words > self.states.capacity() {
            extra += (self.states.capacity().max(64)) * 8;
        }
        extra += self.collect_growth(value_len);
        self.fits(extra)
    }

    /// Room for `value_len` more collected bytes in an existing group.
    pub(crate) fn admit_value(&mut self, value_len: usize) -> bool {
        let extra = self.collect_growth(value_len);
        extra == 0 || self.fits(extra)
    }

    fn collect_growth(&self, value_len: usize) -> usize {
        if self.spec.func != AggFn::Collect {
            return 0;
        }
        let mut extra = 0;
        if self.links.len() == self.links.capacity() {
            extra += self.links.capacity().max(64) * LINK_BYTES;
        }
        if self.vals.len() + value_len > self.vals.capacity() {
            extra +=
                (self.vals.len() + value_len).max(self.vals.capacity() * 2) - self.vals.capacity();
        }
        extra
    }

    fn fits(&mut self, extra: usize) -> bool {
        if extra == 0 {
            return true;
        }
        match self.reservation.try_hold(self.allocated() + extra, self.threshold) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => {
                self.refused = Some(e);
                return false;
            }
        }
        // Grow the arrays now, within what was reserved.
        if self.states.len() + self.words > self.states.capacity() {
            self.states.reserve_exact(self.states.capacity().max(64));
        }
        if self.spec.func == AggFn::Collect && self.links.len() == self.links.capacity() {
            self.links.reserve_exact(self.links.capacity().max(64));
        }
        true
    }

    /// Entry of `key` if present.
    #[inline]
    pub(crate) fn find(&self, key: &[u8], hash: u64) -> Option<usize> {
        self.table.find(key, hash)
    }

    /// Entry of `key`, inserted (with a fresh state) if absent; the caller
    /// has called [`Groups::admit`] when the key may be new.
    #[inline]
    pub(crate) fn upsert(&mut self, key: &[u8], hash: u64) -> (usize, bool) {
        let (e, new) = self.table.find_or_insert(key, hash);
        if new {
            if self.spec.func == AggFn::Collect {
                self.states.extend_from_slice(&[NIL as u64, NIL as u64]);
            } else {
                self.states.resize(self.states.len() + self.words, 0);
            }
        }
        (e, new)
    }

    /// Folds a raw value into entry `e`.
    #[inline]
    pub(crate) fn update(&mut self, e: usize, value: &[u8], first: bool) {
        if self.spec.func == AggFn::Collect {
            self.append_value(e, value);
        } else {
            let w = self.words;
            self.spec.update(&mut self.states[e * w..e * w + w], value, first);
        }
    }

    /// Merges a partial state record's value into entry `e`.
    pub(crate) fn merge_partial(
        &mut self,
        e: usize,
        state: &[u8],
        first: bool,
    ) -> Result<(), ReorgError> {
        if self.spec.func == AggFn::Collect {
            for v in ValueList::new(state) {
                let v = v?;
                self.append_value(e, v);
            }
            return Ok(());
        }
        let w = self.words;
        let mut other = [0u64; STATE_WORDS_MAX];
        read_state(state, &mut other[..w]);
        let st = &mut self.states[e * w..e * w + w];
        if first {
            st.copy_from_slice(&other[..w]);
        } else {
            self.spec.merge(st, &other[..w]);
        }
        Ok(())
    }

    fn append_value(&mut self, e: usize, value: &[u8]) {
        let link = self.links.len() as u32;
        self.links.push((NIL, self.vals.len() as u32, value.len() as u32));
        self.vals.extend_from_slice(value);
        let tail = self.states[e * 2 + 1] as u32;
        if tail == NIL {
            self.states[e * 2] = u64::from(link);
        } else {
            self.links[tail as usize].0 = link;
        }
        self.states[e * 2 + 1] = u64::from(link);
    }

    /// The partial-state value of entry `e` (numeric: state words; collect:
    /// the encoded value list), in `self.scratch`.
    fn encode_partial(&mut self, e: usize) -> &[u8] {
        self.scratch.clear();
        if self.spec.func == AggFn::Collect {
            self.encode_list(e);
        } else {
            let w = self.words;
            let mut buf = [0u8; STATE_BYTES_MAX];
            let n = write_state(&self.states[e * w..e * w + w], &mut buf);
            self.scratch.extend_from_slice(&buf[..n]);
        }
        &self.scratch
    }

    fn encode_final(&mut self, e: usize) -> &[u8] {
        self.scratch.clear();
        if self.spec.func == AggFn::Collect {
            self.encode_list(e);
        } else {
            let w = self.words;
            self.spec.finalize_into(&self.states[e * w..e * w + w], &mut self.scratch);
        }
        &self.scratch
    }

    fn encode_list(&mut self, e: usize) {
        let mut at = self.states[e * 2] as u32;
        while at != NIL {
            let (next, start, len) = self.links[at as usize];
            self.scratch.extend_from_slice(&len.to_le_bytes());
            self.scratch.extend_from_slice(&self.vals[start as usize..(start + len) as usize]);
            at = next;
        }
    }

    /// Emits every group as a partial-state record, in entry order.
    pub(crate) fn emit_partials(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        if let (Layout::Fixed { key_width, .. }, false) =
            (out.layout(), self.spec.func == AggFn::Collect)
        {
            // Fixed keys and numeric states: lay the records out back to
            // back and hand them over in bulk.
            let kw = usize::from(key_width);
            let w = self.words;
            let mut buf = std::mem::take(&mut self.scratch);
            buf.clear();
            buf.reserve(self.table.len() * (kw + w * 8));
            for e in 0..self.table.len() {
                buf.extend_from_slice(self.table.key(e));
                for word in &self.states[e * w..e * w + w] {
                    buf.extend_from_slice(&word.to_le_bytes());
                }
            }
            let done = out.emit_fixed_records(&buf);
            self.scratch = buf;
            return Ok(done?);
        }
        for e in 0..self.table.len() {
            self.encode_partial(e);
            out.emit(self.table.key(e), &self.scratch)?;
        }
        Ok(())
    }

    /// Emits every group as a partial-state record in key order (a sorted
    /// run).
    pub(crate) fn emit_partials_sorted(
        &mut self,
        mut emit: impl FnMut(&[u8], &[u8]) -> Result<(), ReorgError>,
    ) -> Result<(), ReorgError> {
        for e in self.table.sorted_entries() {
            self.encode_partial(e as usize);
            emit(self.table.key(e as usize), &self.scratch)?;
        }
        Ok(())
    }

    /// Emits every group's final value, in entry order.
    pub(crate) fn emit_finals(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        for e in 0..self.table.len() {
            self.encode_final(e);
            out.emit(self.table.key(e), &self.scratch)?;
        }
        Ok(())
    }

    /// Forgets every group but keeps the allocations (and their
    /// reservation) for the next round: SmartShuffle destroys and rebuilds
    /// its hashmap on every spill, which here costs a rehash per doubling and
    /// fresh page faults.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
        self.states.clear();
        self.links.clear();
        self.vals.clear();
    }

    /// Forgets every group and returns the memory.
    pub(crate) fn reset(&mut self) {
        self.table.reset();
        self.states = Vec::new();
        self.links = Vec::new();
        self.vals = Vec::new();
        self.reservation.free();
    }

    /// The last refusal by the pool (for an error when even an empty
    /// operator cannot take one group).
    pub(crate) fn refusal(&mut self) -> MemoryError {
        self.refused.take().unwrap_or(MemoryError {
            requested: self.allocated(),
            used: self.reservation.bytes(),
            budget: self.threshold,
        })
    }

    pub(crate) fn hash(key: &[u8]) -> u64 {
        hash_key(key)
    }
}

/// Iterates an encoded collect list `[len:u32le bytes]*`, checking every
/// length against what is left.
pub(crate) struct ValueList<'a> {
    rest: &'a [u8],
}

impl<'a> ValueList<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        ValueList { rest: bytes }
    }
}

impl<'a> Iterator for ValueList<'a> {
    type Item = Result<&'a [u8], ReorgError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let bad = |got| ReorgError::StateWidth { record: 0, want: 4, got };
        let Some((len, tail)) = self.rest.split_first_chunk::<4>() else {
            let got = self.rest.len();
            self.rest = &[];
            return Some(Err(bad(got)));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > tail.len() {
            self.rest = &[];
            return Some(Err(bad(tail.len())));
        }
        let (v, rest) = tail.split_at(len);
        self.rest = rest;
        Some(Ok(v))
    }
}
