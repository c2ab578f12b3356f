//! The map-side aggregate's fast path: 8-byte keys and numeric functions,
//! with key and state stored together in the slot.
//!
//! # Layout
//! ```text
//!  ctrl:  [u8; cap + 8]          0 = empty, 0x80 | 7 hash bits = taken; 8 mirror bytes
//!  slots: [u8; cap * 8 (1 + w)]  key, then w state words (w = 1 or 2), little-endian
//! ```
//! A probe reads the control bytes eight at a time (`reorg::group`) from
//! the key's home slot, and on a tag match the slot, which holds the key
//! and the state side by side: a hit touches two cache lines (both
//! prefetched from the hash, [`PROBE_BATCH`] records ahead), an insert
//! writes the same two, and nothing else is allocated per group. Linear
//! probing up to a load factor of 3/4, where a miss would visit about 8.5
//! slots one by one but visits one or two groups; the miss's probe also
//! names the slot the insert takes. A slot's bytes are exactly the partial
//! record `(key, state)`, so a spill gathers slots straight into the output
//! batches. 17 bytes per slot with one state word
//! make about 23 bytes per group, against 48 in the general table, so a
//! threshold holds twice the groups and more records find their group.
//!
//! The probe loop is compiled once per (function, value type), so the
//! state update is a few inlined instructions rather than a call that
//! matches on the function for every record.

use super::func::{AggFn, AggSpec, ValueType};
use super::{check_value, AggregateStats, SpillStrategy};
use crate::memory::{MemoryPool, Reservation};
use crate::reorg::emit::Emitter;
use crate::reorg::group::{self, GROUP};
use crate::reorg::table::{hash_key, prefetch, PROBE_BATCH};
use crate::reorg::ReorgError;

/// Slots of a new table.
const SLOTS_MIN: usize = 64;

/// Largest load factor, as a fraction.
const LOAD_NUM: usize = 3;
/// See [`LOAD_NUM`].
const LOAD_DEN: usize = 4;

/// Key width this path handles.
pub(crate) const INLINE_KEY_BYTES: usize = 8;

/// Partial aggregation of 8-byte keys with numeric states.
#[derive(Debug)]
pub(crate) struct InlinePartial {
    spec: AggSpec,
    words: usize,
    /// Bytes per slot.
    stride: usize,
    ctrl: Vec<u8>,
    slots: Vec<u8>,
    cap: usize,
    len: usize,
    threshold: usize,
    strategy: SpillStrategy,
    reservation: Reservation,
    hashes: Vec<u64>,
    pub(crate) stats: AggregateStats,
}

/// Runs `$body` with `$u` bound to a state-update closure specialised for
/// the constant spec matching `$spec`, so each arm compiles its own loop.
macro_rules! with_update {
    ($spec:expr, $u:ident => $body:expr) => {{
        macro_rules! arm {
            ($f:ident, $v:ident) => {{
                const S: AggSpec = AggSpec { func: AggFn::$f, value: ValueType::$v };
                let $u = |st: &mut [u64], v: &[u8], first: bool| S.update(st, v, first);
                $body
            }};
        }
        match ($spec.func, $spec.value) {
            (AggFn::Count, _) => arm!(Count, I64),
            (AggFn::Sum, ValueType::I32) => arm!(Sum, I32),
            (AggFn::Sum, ValueType::I64) => arm!(Sum, I64),
            (AggFn::Sum, ValueType::F32) => arm!(Sum, F32),
            (AggFn::Sum, ValueType::F64) => arm!(Sum, F64),
            (AggFn::Min, ValueType::I32) => arm!(Min, I32),
            (AggFn::Min, ValueType::I64) => arm!(Min, I64),
            (AggFn::Min, ValueType::F32) => arm!(Min, F32),
            (AggFn::Min, ValueType::F64) => arm!(Min, F64),
            (AggFn::Max, ValueType::I32) => arm!(Max, I32),
            (AggFn::Max, ValueType::I64) => arm!(Max, I64),
            (AggFn::Max, ValueType::F32) => arm!(Max, F32),
            (AggFn::Max, ValueType::F64) => arm!(Max, F64),
            (AggFn::Avg, ValueType::I32) => arm!(Avg, I32),
            (AggFn::Avg, ValueType::I64) => arm!(Avg, I64),
            (AggFn::Avg, ValueType::F32) => arm!(Avg, F32),
            (AggFn::Avg, ValueType::F64) => arm!(Avg, F64),
            // Not taken: collect never uses this path.
            (AggFn::Collect, _) => {
                let spec = $spec;
                let $u = move |st: &mut [u64], v: &[u8], first: bool| spec.update(st, v, first);
                $body
            }
        }
    }};
}

impl InlinePartial {
    pub(crate) fn new(
        spec: AggSpec,
        threshold: usize,
        strategy: SpillStrategy,
        pool: &MemoryPool,
    ) -> Self {
        let words = spec.state_words();
        InlinePartial {
            spec,
            words,
            stride: 8 * (1 + words),
            ctrl: Vec::new(),
            slots: Vec::new(),
            cap: 0,
            len: 0,
            threshold,
            strategy,
            reservation: pool.reservation(),
            hashes: Vec::new(),
            stats: AggregateStats::default(),
        }
    }

    /// Bytes allocated for state.
    pub(crate) fn allocated(&self) -> usize {
        self.ctrl.capacity() + self.slots.capacity()
    }

    fn bytes_for(&self, cap: usize) -> usize {
        cap + GROUP + cap * self.stride
    }

    #[inline(always)]
    fn key_word(key: &[u8]) -> u64 {
        key.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b))
    }

    /// The key of the slot starting at byte `s`.
    #[inline(always)]
    fn key_at(&self, s: usize) -> u64 {
        Self::key_word(self.slots.get(s..).unwrap_or_default())
    }

    /// Folds `value` into the state of the slot starting at byte `s`.
    #[inline(always)]
    fn update_at<U>(&mut self, s: usize, value: &[u8], first: bool, update: U)
    where
        U: Fn(&mut [u64], &[u8], bool),
    {
        let words = self.words;
        let bytes = &mut self.slots[s + INLINE_KEY_BYTES..s + INLINE_KEY_BYTES + 8 * words];
        let mut st = [0u64; 2];
        for (w, b) in st.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = Self::key_word(b);
        }
        update(&mut st[..words], value, first);
        for (w, b) in st.iter().zip(bytes.chunks_exact_mut(8)) {
            b.copy_from_slice(&w.to_le_bytes());
        }
    }

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        if self.cap == 0 {
            return;
        }
        let i = hash as usize & (self.cap - 1);
        prefetch(self.ctrl.as_ptr().wrapping_add(i));
        prefetch(self.slots.as_ptr().wrapping_add(i * self.stride));
    }

    /// The slot holding `key`, or the empty slot where it would go; the
    /// table is not empty (`cap > 0`) and never full (load <= 3/4).
    #[inline(always)]
    fn probe(&self, key: u64, hash: u64) -> (usize, bool) {
        let mask = self.cap - 1;
        let tag = group::tag(hash);
        let mut pos = hash as usize & mask;
        loop {
            let g = group::load(&self.ctrl, pos);
            let mut m = group::match_tag(g, tag);
            while m != 0 {
                let i = (pos + group::lowest(m)) & mask;
                if self.key_at(i * self.stride) == key {
                    return (i, true);
                }
                m &= m - 1;
            }
            let e = group::match_empty(g);
            if e != 0 {
                return ((pos + group::lowest(e)) & mask, false);
            }
            pos = (pos + GROUP) & mask;
        }
    }

    /// Whether one more group fits without growing.
    #[inline(always)]
    fn has_room(&self) -> bool {
        self.cap > 0 && (self.len + 1) * LOAD_DEN <= self.cap * LOAD_NUM
    }

    /// Room for one more group: grows the table if needed and allowed.
    fn admit(&mut self) -> bool {
        if self.has_room() {
            return true;
        }
        let new_cap = (self.cap * 2).max(SLOTS_MIN);
        let steady = self.bytes_for(new_cap);
        if steady > self.threshold {
            return false;
        }
        // Old and new tables coexist while rehashing.
        let peak = steady + self.allocated();
        if peak > self.reservation.bytes() && self.reservation.try_resize(peak).is_err() {
            return false;
        }
        self.grow(new_cap);
        self.reservation.shrink(self.reservation.bytes().saturating_sub(self.allocated()));
        true
    }

    fn grow(&mut self, new_cap: usize) {
        let old_ctrl = std::mem::replace(&mut self.ctrl, vec![0; new_cap + GROUP]);
        let old_slots = std::mem::replace(&mut self.slots, vec![0; new_cap * self.stride]);
        let old_cap = self.cap;
        self.cap = new_cap;
        let stride = self.stride;
        for (c, slot) in old_ctrl[..old_cap].iter().zip(old_slots.chunks_exact(stride)) {
            if *c == 0 {
                continue;
            }
            let key = Self::key_word(slot);
            let (i, _) = self.probe(key, hash_key(&slot[..INLINE_KEY_BYTES]));
            group::set(&mut self.ctrl, new_cap, i, *c);
            self.slots[i * stride..i * stride + stride].copy_from_slice(slot);
        }
    }

    /// Aggregates fixed-width records (8-byte key, then the value).
    pub(crate) fn push(
        &mut self,
        payload: &[u8],
        width: usize,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let spec = self.spec;
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let records = payload.chunks_exact(width);
        let mut checked = Ok(());
        for (i, r) in records.clone().enumerate() {
            if let Err(e) = check_value(spec, &r[INLINE_KEY_BYTES..], i) {
                checked = Err(e);
                break;
            }
            hashes.push(hash_key(&r[..INLINE_KEY_BYTES]));
        }
        let result = checked.and_then(|()| {
            with_update!(spec, update => self.apply(payload, width, &hashes, out, update))?;
            self.stats.input_records += hashes.len() as u64;
            self.stats.input_bytes += payload.len() as u64;
            Ok(())
        });
        self.hashes = hashes;
        result
    }

    /// The probe loop over hashed records, software-pipelined: while record
    /// `i` is applied the home slot of record `i + PROBE_BATCH` is fetched.
    #[inline(always)]
    fn apply<U>(
        &mut self,
        payload: &[u8],
        width: usize,
        hashes: &[u64],
        out: &mut Emitter,
        update: U,
    ) -> Result<(), ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy,
    {
        for &h in hashes.iter().take(PROBE_BATCH) {
            self.prefetch(h);
        }
        for (i, (r, &h)) in payload.chunks_exact(width).zip(hashes).enumerate() {
            if let Some(&ahead) = hashes.get(i + PROBE_BATCH) {
                self.prefetch(ahead);
            }
            let (key, value) = r.split_at(INLINE_KEY_BYTES);
            self.one(key, value, h, out, update)?;
        }
        Ok(())
    }

    #[inline(always)]
    fn one<U>(
        &mut self,
        key: &[u8],
        value: &[u8],
        hash: u64,
        out: &mut Emitter,
        update: U,
    ) -> Result<(), ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool),
    {
        let k = Self::key_word(key);
        let mut at = None;
        if self.cap > 0 {
            let (i, found) = self.probe(k, hash);
            if found {
                self.update_at(i * self.stride, value, false, update);
                return Ok(());
            }
            at = Some(i);
        }
        let i = match at {
            Some(i) if self.has_room() => i,
            _ => {
                if !self.admit() {
                    match self.strategy {
                        SpillStrategy::Input => return self.pass_through(key, value, out),
                        SpillStrategy::State => {
                            self.spill_state(out)?;
                            if !self.admit() {
                                return self.pass_through(key, value, out);
                            }
                        }
                    }
                }
                // The table grew or was emptied: find the slot again.
                self.probe(k, hash).0
            }
        };
        group::set(&mut self.ctrl, self.cap, i, group::tag(hash));
        let s = i * self.stride;
        self.slots[s..s + INLINE_KEY_BYTES].copy_from_slice(key);
        self.update_at(s, value, true, update);
        self.len += 1;
        Ok(())
    }

    fn pass_through(
        &mut self,
        key: &[u8],
        value: &[u8],
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let mut buf = [0u8; 16];
        let n = self.spec.single_partial(value, &mut buf);
        out.emit(key, &buf[..n])?;
        self.stats.passed_through += 1;
        self.stats.emitted_records += 1;
        Ok(())
    }

    /// Emits every group: the taken slots, found eight control bytes at a
    /// time, gathered straight into the output batches.
    fn emit_all(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let stride = self.stride;
        let ctrl = &self.ctrl[..self.cap];
        let taken = (0..self.cap).step_by(GROUP).flat_map(move |pos| {
            let mut full = group::match_full(group::load(ctrl, pos));
            std::iter::from_fn(move || {
                (full != 0).then(|| {
                    let j = group::lowest(full);
                    full &= full - 1;
                    (pos + j) * stride
                })
            })
        });
        let slots = &self.slots;
        out.gather_fixed(taken.map(|at| slots.get(at..).unwrap_or_default()), self.len)?;
        self.stats.emitted_records += self.len as u64;
        Ok(())
    }

    fn spill_state(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        self.emit_all(out)?;
        self.ctrl.fill(0);
        self.len = 0;
        self.stats.state_spills += 1;
        Ok(())
    }

    /// End of input: emits the table and frees it.
    pub(crate) fn finish(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        self.emit_all(out)?;
        self.ctrl = Vec::new();
        self.slots = Vec::new();
        self.cap = 0;
        self.len = 0;
        self.reservation.free();
        Ok(())
    }
}
