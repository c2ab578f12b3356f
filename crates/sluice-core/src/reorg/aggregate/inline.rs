//! The map-side aggregate's fast path: 8-byte keys and numeric functions,
//! with key and state stored together in the slot.
//!
//! # Layout
//! ```text
//!  ctrl:  [u8; cap]              0 = empty, 0x80 | 7 hash bits = taken
//!  slots: [u64; cap * (1 + w)]   key word, then w state words (w = 1 or 2)
//! ```
//! A probe reads the control byte, and on a tag match the slot, which holds
//! the key and the state side by side: a hit touches two cache lines (both
//! prefetched from the hash, [`PROBE_BATCH`] records ahead), an insert
//! writes the same two, and nothing else is allocated per group. Linear
//! probing up to a load factor of 3/4; 17 bytes per slot with one state word
//! make about 23 bytes per group, against 48 in the general table, so a
//! threshold holds twice the groups and more records find their group.

use super::func::AggSpec;
use super::{check_value, AggregateStats, SpillStrategy};
use crate::memory::{MemoryPool, Reservation};
use crate::reorg::emit::Emitter;
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
    stride: usize,
    ctrl: Vec<u8>,
    slots: Vec<u64>,
    cap: usize,
    len: usize,
    threshold: usize,
    strategy: SpillStrategy,
    reservation: Reservation,
    hashes: Vec<u64>,
    scratch: Vec<u8>,
    pub(crate) stats: AggregateStats,
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
            stride: 1 + words,
            ctrl: Vec::new(),
            slots: Vec::new(),
            cap: 0,
            len: 0,
            threshold,
            strategy,
            reservation: pool.reservation(),
            hashes: Vec::new(),
            scratch: Vec::new(),
            stats: AggregateStats::default(),
        }
    }

    /// Bytes allocated for state.
    pub(crate) fn allocated(&self) -> usize {
        self.ctrl.capacity() + self.slots.capacity() * 8
    }

    fn bytes_for(&self, cap: usize) -> usize {
        cap * (1 + self.stride * 8)
    }

    #[inline(always)]
    fn key_word(key: &[u8]) -> u64 {
        key.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b))
    }

    #[inline(always)]
    fn tag(hash: u64) -> u8 {
        0x80 | (hash >> 57) as u8
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

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn probe(&self, key: u64, hash: u64) -> (usize, bool) {
        let mask = self.cap - 1;
        let tag = Self::tag(hash);
        let mut i = hash as usize & mask;
        loop {
            let c = self.ctrl[i];
            if c == 0 {
                return (i, false);
            }
            if c == tag && self.slots[i * self.stride] == key {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// Room for one more group: grows the table if needed and allowed.
    fn admit(&mut self) -> bool {
        if self.cap > 0 && (self.len + 1) * LOAD_DEN <= self.cap * LOAD_NUM {
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
        let old_ctrl = std::mem::replace(&mut self.ctrl, vec![0; new_cap]);
        let old_slots = std::mem::replace(&mut self.slots, vec![0; new_cap * self.stride]);
        self.cap = new_cap;
        let stride = self.stride;
        for (c, slot) in old_ctrl.iter().zip(old_slots.chunks_exact(stride)) {
            if *c == 0 {
                continue;
            }
            let hash = hash_key(&slot[0].to_le_bytes());
            let (i, _) = self.probe(slot[0], hash);
            self.ctrl[i] = *c;
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
            for &h in hashes.iter().take(PROBE_BATCH) {
                self.prefetch(h);
            }
            for (i, r) in records.enumerate() {
                if let Some(&ahead) = hashes.get(i + PROBE_BATCH) {
                    self.prefetch(ahead);
                }
                self.one(&r[..INLINE_KEY_BYTES], &r[INLINE_KEY_BYTES..], hashes[i], out)?;
            }
            self.stats.input_records += hashes.len() as u64;
            self.stats.input_bytes += payload.len() as u64;
            Ok(())
        });
        self.hashes = hashes;
        result
    }

    #[inline(always)]
    fn one(
        &mut self,
        key: &[u8],
        value: &[u8],
        hash: u64,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let k = Self::key_word(key);
        if self.cap > 0 {
            let (i, found) = self.probe(k, hash);
            if found {
                let s = i * self.stride + 1;
                self.spec.update(&mut self.slots[s..s + self.words], value, false);
                return Ok(());
            }
        }
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
        let (i, _) = self.probe(k, hash);
        self.ctrl[i] = Self::tag(hash);
        let s = i * self.stride;
        self.slots[s] = k;
        self.spec.update(&mut self.slots[s + 1..s + 1 + self.words], value, true);
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

    /// Emits every group (key, state words) in bulk.
    fn emit_all(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.reserve(self.len * self.stride * 8);
        for (c, slot) in self.ctrl.iter().zip(self.slots.chunks_exact(self.stride)) {
            if *c != 0 {
                for w in slot {
                    buf.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        let done = out.emit_fixed_records(&buf);
        self.stats.emitted_records += self.len as u64;
        self.scratch = buf;
        Ok(done?)
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
        self.scratch = Vec::new();
        self.reservation.free();
        Ok(())
    }
}
