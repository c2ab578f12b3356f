//! The map-side aggregate's fast path: 8-byte keys and numeric functions,
//! with key and state stored together in the slot.
//!
//! # Layout
//! ```text
//!  ctrl:  [u8; cap + 8]          0 = empty, 0x80 | 7 hash bits = taken; 8 mirror bytes
//!  slots: [u8; cap * 8 (1 + w)]  key, then w state words, little-endian
//! ```
//! `w` is 1 or 2 for the single functions, up to [`INLINE_WORDS_MAX`] for
//! [lanes](super::lanes) (an average of a decimal: a 128-bit sum with its
//! flags and a count, four words), which would otherwise take the general
//! table at about three times the bytes per group.
//! A probe reads the control bytes eight at a time (`reorg::control_bytes`) from
//! the key's home slot, and on a tag match the slot, which holds the key
//! and the state side by side: a hit touches two cache lines (both
//! prefetched [`PROBE_BATCH`](crate::reorg::table::PROBE_BATCH) records
//! ahead), an insert writes the same two, and nothing else is allocated
//! per group. Linear
//! probing up to a load factor of 3/4, where a miss would visit about 8.5
//! slots one by one but visits one or two groups; the miss's probe also
//! names the slot the insert takes. A slot's bytes are exactly the partial
//! record `(key, state)`, so a spill gathers slots straight into the output
//! batches. 17 bytes per slot with one state word
//! make about 23 bytes per group, against 48 in the general table, so a
//! threshold holds twice the groups and more records find their group.
//!
//! # Prefixed keys
//! The same table serves keys that all begin with one prefix of up to
//! [`PREFIX_BYTES_MAX`] bytes and end in the 8 bytes it groups by (an
//! offloaded shuffle's engine records: `partition id ++ key tag ++ Long`),
//! read from variable-layout records through [`Strided`]: the slot holds
//! the 8 bytes, and each partial gets the prefix back when it is emitted
//! (one `emit` per partial instead of the bulk gather). Which records
//! qualify is decided by `partial`.
//!
//! # Size
//! The table doubles while that fits the threshold, then grows once more
//! to the largest size that does: its home slot is the hash's high bits
//! scaled to the slot count by a multiply, so the count need not be a power
//! of two, and the control byte's 7 hash bits are the low ones. Limited to
//! powers of two, a 1 MiB threshold would hold 32,768 slots (557 KB), a
//! little over half of it. Filling the threshold aggregates more for a
//! little less throughput, the trade the threshold itself sets, so the
//! threshold means what it says (figures: `docs/benchmarks.md`, "Design
//! measurements").
//!
//! The probe loop ([`probe_loop`]: raw pointers behind one set of
//! assertions, over per-record hints of home slot and tag computed in a
//! pass before it) is compiled once per (function, value type) and state
//! width, so the state update is a few inlined instructions rather than a
//! call that matches on the function for every record. It leaves only for
//! a record that needs a new group when the table is at its load limit
//! (grow, spill or pass through: [`InlinePartial::one`]); a new group's
//! state is written, never read.
//!
//! # Spilling input
//! Once the table has its largest size for the threshold (not merely a
//! reservation the pool refused, which may be granted later), a record of
//! a new key passes through where the fast loop stops for it, and the loop
//! goes on after it: its partial is staged
//! (fixed-width output, [`PASS_STAGE_BYTES`] at a time) or emitted (prefixed
//! keys) there. Leaving the loop for each such record (a second probe, an
//! attempt to grow, one emit) made spilling input slower than spilling
//! state, the opposite of SmartShuffle's Figure 12a (figures:
//! `docs/benchmarks.md`, "Design measurements").

use super::evict::EvictTable;
use super::func::{write_state, AggFn, AggSpec, ValueType};
use super::key8::{self, home, join_key, tag, INLINE_KEY_BYTES, PREFIX_BYTES_MAX};
use super::probe_loop;
use super::{check_value, AggregateStats, SpillStrategy};
use crate::memory::{MemoryPool, Reservation};
use crate::reorg::control_bytes::{self, GROUP};
use crate::reorg::emit::Emitter;
use crate::reorg::table::hash_key;
use crate::reorg::ReorgError;

/// Slots of a new table.
const SLOTS_MIN: usize = 64;

/// Most state words of a group in this table (lanes; the single functions
/// have one or two). Wider lanes take the general table.
pub(crate) const INLINE_WORDS_MAX: usize = 8;

/// Most bytes of a group's state in this table.
const INLINE_STATE_BYTES_MAX: usize = 8 * INLINE_WORDS_MAX;

/// Most state words of a group in the evicting table
/// ([`EvictTable`]: a key and two words per slot); wider states spill
/// their state instead.
const EVICT_WORDS_MAX: usize = 2;

/// Bytes of passed-through partials the fast loop stages before handing
/// them to the emitter.
const PASS_STAGE_BYTES: usize = 4 << 10;

/// Largest load factor, as a fraction.
const LOAD_NUM: usize = 3;
/// See [`LOAD_NUM`].
const LOAD_DEN: usize = 4;

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
    hints: probe_loop::Hints,
    /// Bytes every key carries in front of its 8 table bytes, for keys of
    /// variable-layout records (partials are then emitted one by one in
    /// that layout); `None` for fixed-width 8-byte keys. See [`Strided`].
    prefix: Option<Vec<u8>>,
    /// Spilling input with the table at its largest size: a record of a
    /// new key passes through inside the fast loop instead of leaving it.
    passing: bool,
    /// With [`SpillStrategy::Evict`]: the table that takes every record
    /// instead of this one's control bytes and slots.
    evict: Option<Box<EvictTable>>,
    pub(crate) stats: AggregateStats,
}

/// Where the records of a payload lie: every `bytes` bytes one record, its
/// 8 table key bytes at `key_at`, its value right after them up to the
/// record's end. Fixed-width records of an 8-byte key are `{ width, 0 }`;
/// variable-layout records whose keys are all `prefix ++ 8 bytes` with
/// values of one width are `{ 8 + prefix + 8 + value, 8 + prefix }` (two
/// lengths, then the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Strided {
    pub(crate) bytes: usize,
    pub(crate) key_at: usize,
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
            (AggFn::SumExact, ValueType::I32) => arm!(SumExact, I32),
            (AggFn::SumExact, ValueType::I64) => arm!(SumExact, I64),
            (AggFn::SumExact, ValueType::F32) => arm!(SumExact, F32),
            (AggFn::SumExact, ValueType::F64) => arm!(SumExact, F64),
            // Lanes come here for the evicting table (one or two words),
            // one loop for every lanes code; collect never comes here.
            (AggFn::Collect | AggFn::Lanes(_), _) => {
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
            hints: probe_loop::Hints::default(),
            prefix: None,
            passing: false,
            evict: (strategy == SpillStrategy::Evict && words <= EVICT_WORDS_MAX)
                .then(|| Box::new(EvictTable::new(spec, threshold, pool))),
            stats: AggregateStats::default(),
        }
    }

    /// Makes this a table for keys that all start with `prefix` (at most
    /// [`PREFIX_BYTES_MAX`] bytes) followed by the 8 bytes it groups by; its
    /// partials carry the whole key again. Called before the first record.
    pub(crate) fn set_prefix(&mut self, prefix: &[u8]) {
        debug_assert!(self.len == 0 && prefix.len() <= PREFIX_BYTES_MAX);
        self.prefix = Some(prefix[..prefix.len().min(PREFIX_BYTES_MAX)].to_vec());
    }

    /// The shared key prefix, once [`InlinePartial::set_prefix`] named it.
    pub(crate) fn prefix(&self) -> Option<&[u8]> {
        self.prefix.as_deref()
    }

    /// Bytes allocated for state.
    pub(crate) fn allocated(&self) -> usize {
        self.ctrl.capacity()
            + self.slots.capacity()
            + self.evict.as_ref().map_or(0, |e| e.allocated())
    }

    fn bytes_for(&self, cap: usize) -> usize {
        cap + GROUP + cap * self.stride
    }

    #[inline(always)]
    fn key_word(key: &[u8]) -> u64 {
        key.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b))
    }

    /// Folds `value` into the state of the slot starting at byte `s`.
    #[inline(always)]
    fn update_at<U>(&mut self, s: usize, value: &[u8], first: bool, update: U)
    where
        U: Fn(&mut [u64], &[u8], bool),
    {
        match self.words {
            1 => update_state::<U, 1>(&mut self.slots, s, value, first, update),
            2 => update_state::<U, 2>(&mut self.slots, s, value, first, update),
            w => update_wide(&mut self.slots, s, w, value, first, update),
        }
    }

    /// The slot holding `key`, or the empty slot where it would go; the
    /// table is not empty (`cap > 0`) and never full (load <= 3/4).
    #[inline(always)]
    fn probe(&self, key: u64, hash: u64) -> (usize, bool) {
        probe_in(&self.ctrl, &self.slots, self.cap, self.stride, key, hash)
    }

    /// Whether one more group fits without growing.
    #[inline(always)]
    fn has_room(&self) -> bool {
        self.cap > 0 && (self.len + 1) * LOAD_DEN <= self.cap * LOAD_NUM
    }

    /// The slot count the table would grow to, if the threshold lets it
    /// grow: double while that fits the threshold, then the largest table
    /// that does (a power of two would leave up to half of the threshold
    /// unused).
    fn next_cap(&self) -> Option<usize> {
        let doubled = (self.cap * 2).max(SLOTS_MIN);
        let new_cap = if self.bytes_for(doubled) <= self.threshold {
            doubled
        } else {
            let fit = self.threshold.saturating_sub(GROUP) / (1 + self.stride);
            fit / GROUP * GROUP
        };
        (new_cap > self.cap && new_cap >= SLOTS_MIN).then_some(new_cap)
    }

    /// Room for one more group: grows the table if needed and allowed.
    fn admit(&mut self) -> bool {
        if self.has_room() {
            return true;
        }
        let Some(new_cap) = self.next_cap() else {
            return false;
        };
        let steady = self.bytes_for(new_cap);
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
            control_bytes::set(&mut self.ctrl, new_cap, i, *c);
            self.slots[i * stride..i * stride + stride].copy_from_slice(slot);
        }
    }

    /// Aggregates the records of `payload` laid out as `at` says (for
    /// fixed-width records: `{ width, 0 }`, an 8-byte key then the value).
    pub(crate) fn push(
        &mut self,
        payload: &[u8],
        at: Strided,
        out: &mut Emitter,
    ) -> Result<(), ReorgError> {
        let spec = self.spec;
        let width = at.bytes.max(1);
        let n = payload.len() / width;
        // Every record has the same value width: one check says it for all.
        let key_end = at.key_at + INLINE_KEY_BYTES;
        if let Some(r) = payload.chunks_exact(width).next() {
            check_value(spec, r.get(key_end..).unwrap_or_default(), 0)?;
        }
        let r = key8::Records { payload, width, key_at: at.key_at };
        if let Some(table) = self.evict.as_mut() {
            let (prefix, stats) = (self.prefix.as_deref(), &mut self.stats);
            with_update!(spec, update => table.push(r, prefix, out, stats, update))?;
            self.stats.input_records += n as u64;
            self.stats.input_bytes += payload.len() as u64;
            return Ok(());
        }
        let mut hints = std::mem::take(&mut self.hints);
        if self.cap > 0 {
            hints.compute(r, self.cap, 0);
        } else {
            hints.clear(n);
        }
        let result = if let AggFn::Lanes(_) = spec.func {
            // One loop per state width instead of one per function.
            let update = move |st: &mut [u64], v: &[u8], first: bool| spec.update(st, v, first);
            self.apply::<_, Wide>(r, &mut hints, out, update)
        } else {
            with_update!(spec, update => self.apply::<_, Narrow>(r, &mut hints, out, update))
        };
        self.hints = hints;
        result?;
        self.stats.input_records += n as u64;
        self.stats.input_bytes += payload.len() as u64;
        Ok(())
    }

    /// The probe loop over the records' hints ([`probe_loop`]),
    /// software-pipelined: while record `i` is applied the home slot of
    /// record `i + PROBE_BATCH` is fetched. Records run through the fast
    /// loop until one needs a new group and the table has no room for it;
    /// that record takes the slow path ([`InlinePartial::one`]: grow, spill
    /// or pass through), and the fast loop goes on after it, with the
    /// hints of the records left recomputed if the table grew.
    #[inline(always)]
    fn apply<U, W: Widths>(
        &mut self,
        r: key8::Records<'_>,
        hints: &mut probe_loop::Hints,
        out: &mut Emitter,
        update: U,
    ) -> Result<(), ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy,
    {
        let n = r.payload.len() / r.width;
        self.prefetch_hints(hints, 0);
        let mut i = 0;
        while i < n {
            if self.cap > 0 && hints.cap() == self.cap {
                i = W::run_fast(self, r, hints, i, out, update)?;
            }
            let Some(rec) = r.payload.get(i * r.width..(i + 1) * r.width) else {
                break;
            };
            let (key, value) = rec[r.key_at..].split_at(INLINE_KEY_BYTES);
            self.one(key, value, hash_key(key), out, update)?;
            i += 1;
            if self.cap != hints.cap() && i < n {
                hints.compute(r, self.cap, i);
                self.prefetch_hints(hints, i);
            }
        }
        Ok(())
    }

    /// Fetches the home slots of the
    /// [`PROBE_BATCH`](crate::reorg::table::PROBE_BATCH) records from `from`.
    fn prefetch_hints(&self, hints: &probe_loop::Hints, from: usize) {
        if self.cap > 0 && hints.cap() == self.cap {
            hints.prefetch(&self.ctrl, &self.slots, self.stride, from);
        }
    }

    /// Applies records `from..` while each finds its group or a free slot
    /// within the load limit (or, when the table passes input through, is
    /// passed through); returns the index of the first record that needs
    /// the slow path, or the record count. `WORDS` is the state's word
    /// count.
    #[inline(always)]
    fn run_fast<U, const WORDS: usize>(
        &mut self,
        r: key8::Records<'_>,
        hints: &probe_loop::Hints,
        from: usize,
        out: &mut Emitter,
        update: U,
    ) -> Result<usize, ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy,
    {
        let cap = self.cap;
        let n = r.payload.len() / r.width;
        let mut t = probe_loop::Table {
            ctrl: &mut self.ctrl,
            slots: &mut self.slots,
            cap,
            len: self.len,
            // `has_room`: (len + 1) * LOAD_DEN <= cap * LOAD_NUM.
            len_max: cap * LOAD_NUM / LOAD_DEN,
        };
        if !self.passing {
            let stopped = probe_loop::run::<U, WORDS>(&mut t, r, hints, from, update);
            self.len = t.len;
            return Ok(stopped);
        }
        // Full for good: each record the loop stops at passes through, and
        // the loop goes on after it.
        let prefix = self.prefix.as_deref();
        let mut passed = 0u64;
        // Passed-through partials of fixed-width output are staged here and
        // handed to the emitter a few KiB at a time.
        let record = INLINE_KEY_BYTES + 8 * WORDS;
        let staging = prefix.is_none() && out.layout().fixed_record_bytes() == Some(record);
        let mut stage = [0u8; PASS_STAGE_BYTES];
        let mut staged = 0usize;
        let mut i = from;
        let result = loop {
            i = probe_loop::run::<U, WORDS>(&mut t, r, hints, i, update);
            let Some(rec) = r.payload.get(i * r.width..(i + 1) * r.width) else {
                break Ok(n);
            };
            let (key, value) = rec[r.key_at..].split_at(INLINE_KEY_BYTES);
            if staging {
                if staged + record > PASS_STAGE_BYTES {
                    if let Err(e) = out.emit_fixed_records(&stage[..staged]) {
                        break Err(e.into());
                    }
                    staged = 0;
                }
                let (state, n) = first_state::<U, WORDS>(value, update);
                stage[staged..staged + INLINE_KEY_BYTES].copy_from_slice(key);
                stage[staged + INLINE_KEY_BYTES..staged + record].copy_from_slice(&state[..n]);
                staged += record;
            } else if let Err(e) = pass_through::<U, WORDS>(prefix, key, value, out, update) {
                break Err(e);
            }
            passed += 1;
            i += 1;
        };
        self.len = t.len;
        if staged > 0 {
            out.emit_fixed_records(&stage[..staged])?;
        }
        self.stats.passed_through += passed;
        self.stats.emitted_records += passed;
        result
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
                        SpillStrategy::Input => {
                            // Full for good (not refused by the pool, which
                            // may grant later): the fast loop passes the
                            // next new keys through itself.
                            self.passing = self.next_cap().is_none();
                            return self.pass_through(key, value, out);
                        }
                        // Evict never comes here: its table takes the records.
                        SpillStrategy::State | SpillStrategy::Evict => {
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
        control_bytes::set(&mut self.ctrl, self.cap, i, tag(hash));
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
        let mut buf = [0u8; INLINE_STATE_BYTES_MAX];
        let n = self.spec.single_partial(value, &mut buf);
        let mut whole = [0u8; PREFIX_BYTES_MAX + INLINE_KEY_BYTES];
        let k = join_key(&mut whole, self.prefix().unwrap_or_default(), key);
        out.emit(k, &buf[..n])?;
        self.stats.passed_through += 1;
        self.stats.emitted_records += 1;
        Ok(())
    }

    /// The taken slots, in slot order.
    fn taken(&self) -> TakenSlots<'_> {
        TakenSlots {
            ctrl: &self.ctrl[..self.cap],
            slots: &self.slots,
            stride: self.stride,
            next_group: 0,
            base: 0,
            full: 0,
        }
    }

    /// Emits every group: the taken slots, found eight control bytes at a
    /// time, gathered straight into the output batches.
    fn emit_all(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        if self.prefix.is_some() {
            return self.emit_all_prefixed(out);
        }
        let taken = self.taken();
        out.gather_fixed(taken, self.len)?;
        self.stats.emitted_records += self.len as u64;
        Ok(())
    }

    /// [`InlinePartial::emit_all`] for variable-layout output (prefixed
    /// keys): each partial is the prefix and the slot's key, then its state.
    fn emit_all_prefixed(&mut self, out: &mut Emitter) -> Result<(), ReorgError> {
        let taken = self.taken();
        let mut whole = [0u8; PREFIX_BYTES_MAX + INLINE_KEY_BYTES];
        for slot in taken {
            let (key, state) = slot.split_at(INLINE_KEY_BYTES.min(slot.len()));
            let k = join_key(&mut whole, self.prefix().unwrap_or_default(), key);
            out.emit(k, state.get(..8 * self.words).unwrap_or_default())?;
        }
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
        if let Some(table) = self.evict.as_mut() {
            return table.finish(self.prefix.as_deref(), out, &mut self.stats);
        }
        self.emit_all(out)?;
        self.ctrl = Vec::new();
        self.slots = Vec::new();
        self.cap = 0;
        self.len = 0;
        self.passing = false;
        self.reservation.free();
        Ok(())
    }
}

/// The taken slots of a table, in slot order, as the slots' bytes: the
/// control bytes are read a group at a time and each group's taken slots
/// found from its bit mask.
struct TakenSlots<'a> {
    ctrl: &'a [u8],
    slots: &'a [u8],
    stride: usize,
    /// The next group's first slot.
    next_group: usize,
    /// The current group's first slot, and its taken slots not yet given.
    base: usize,
    full: u64,
}

impl<'a> Iterator for TakenSlots<'a> {
    type Item = &'a [u8];

    #[inline(always)]
    fn next(&mut self) -> Option<&'a [u8]> {
        while self.full == 0 {
            if self.next_group >= self.ctrl.len() {
                return None;
            }
            self.base = self.next_group;
            self.full = control_bytes::match_full(control_bytes::load(self.ctrl, self.base));
            self.next_group += GROUP;
        }
        let j = control_bytes::lowest(self.full);
        self.full &= self.full - 1;
        Some(self.slots.get((self.base + j) * self.stride..).unwrap_or_default())
    }
}

/// The slot holding `key` in a table of `cap` slots of `stride` bytes, or
/// the empty slot where it would go, and whether it was found; the table
/// has at least [`GROUP`] slots and is never full (load <= 3/4).
#[inline(always)]
fn probe_in(
    ctrl: &[u8],
    slots: &[u8],
    cap: usize,
    stride: usize,
    key: u64,
    hash: u64,
) -> (usize, bool) {
    let wrap = |i: usize| if i >= cap { i - cap } else { i };
    let tag = tag(hash);
    let mut pos = home(hash, cap);
    loop {
        let g = control_bytes::load(ctrl, pos);
        let mut m = control_bytes::match_tag(g, tag);
        while m != 0 {
            let i = wrap(pos + control_bytes::lowest(m));
            if InlinePartial::key_word(slots.get(i * stride..).unwrap_or_default()) == key {
                return (i, true);
            }
            m &= m - 1;
        }
        let e = control_bytes::match_empty(g);
        if e != 0 {
            return (wrap(pos + control_bytes::lowest(e)), false);
        }
        pos = wrap(pos + GROUP);
    }
}

/// The state `value` alone makes, as the partial's bytes (and their count).
#[inline(always)]
fn first_state<U, const WORDS: usize>(
    value: &[u8],
    update: U,
) -> ([u8; INLINE_STATE_BYTES_MAX], usize)
where
    U: Fn(&mut [u64], &[u8], bool),
{
    let mut st = [0u64; WORDS];
    update(&mut st, value, true);
    let mut bytes = [0u8; INLINE_STATE_BYTES_MAX];
    let n = write_state(&st, &mut bytes);
    (bytes, n)
}

/// Emits the partial of one record whose key has no group: `prefix ++ key`
/// and the state its value alone makes.
#[inline(always)]
fn pass_through<U, const WORDS: usize>(
    prefix: Option<&[u8]>,
    key: &[u8],
    value: &[u8],
    out: &mut Emitter,
    update: U,
) -> Result<(), ReorgError>
where
    U: Fn(&mut [u64], &[u8], bool),
{
    let (bytes, n) = first_state::<U, WORDS>(value, update);
    let state = &bytes[..n];
    match prefix {
        None => out.emit(key, state)?,
        Some(p) => {
            let mut whole = [0u8; PREFIX_BYTES_MAX + INLINE_KEY_BYTES];
            out.emit(join_key(&mut whole, p, key), state)?;
        }
    }
    Ok(())
}

/// Folds `value` into the `WORDS`-word state of the slot starting at byte
/// `s` (`first`: the group's first value).
#[inline(always)]
fn update_state<U, const WORDS: usize>(
    slots: &mut [u8],
    s: usize,
    value: &[u8],
    first: bool,
    update: U,
) where
    U: Fn(&mut [u64], &[u8], bool),
{
    let at = s + INLINE_KEY_BYTES;
    let bytes = &mut slots[at..at + 8 * WORDS];
    let mut st = [0u64; WORDS];
    // A new group's state is not read: its slot may be a line the probe
    // did not touch, and the first value overwrites the state anyway.
    if !first {
        for (w, b) in st.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = InlinePartial::key_word(b);
        }
    }
    update(&mut st, value, first);
    for (w, b) in st.iter().zip(bytes.chunks_exact_mut(8)) {
        b.copy_from_slice(&w.to_le_bytes());
    }
}

/// [`update_state`] for a state of `words` words, more than two (lanes,
/// whose update is not specialised by width anyway).
fn update_wide<U>(slots: &mut [u8], s: usize, words: usize, value: &[u8], first: bool, update: U)
where
    U: Fn(&mut [u64], &[u8], bool),
{
    let at = s + INLINE_KEY_BYTES;
    let bytes = &mut slots[at..at + 8 * words];
    let mut buf = [0u64; INLINE_WORDS_MAX];
    let st = &mut buf[..words];
    if !first {
        for (w, b) in st.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = InlinePartial::key_word(b);
        }
    }
    update(st, value, first);
    for (w, b) in st.iter().zip(bytes.chunks_exact_mut(8)) {
        b.copy_from_slice(&w.to_le_bytes());
    }
}

/// The state widths a table's probe loop is compiled for: each width is a
/// loop of its own, so the single functions (one loop per function) take
/// only theirs, and lanes (one update for every lanes code) every width.
trait Widths {
    /// [`InlinePartial::run_fast`] at the table's width.
    fn run_fast<U>(
        t: &mut InlinePartial,
        r: key8::Records<'_>,
        hints: &probe_loop::Hints,
        from: usize,
        out: &mut Emitter,
        update: U,
    ) -> Result<usize, ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy;
}

/// One or two words: the single functions.
struct Narrow;

/// One to [`INLINE_WORDS_MAX`] words: lanes.
struct Wide;

impl Widths for Narrow {
    #[inline(always)]
    fn run_fast<U>(
        t: &mut InlinePartial,
        r: key8::Records<'_>,
        hints: &probe_loop::Hints,
        from: usize,
        out: &mut Emitter,
        update: U,
    ) -> Result<usize, ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy,
    {
        match t.words {
            1 => t.run_fast::<U, 1>(r, hints, from, out, update),
            _ => t.run_fast::<U, 2>(r, hints, from, out, update),
        }
    }
}

impl Widths for Wide {
    fn run_fast<U>(
        t: &mut InlinePartial,
        r: key8::Records<'_>,
        hints: &probe_loop::Hints,
        from: usize,
        out: &mut Emitter,
        update: U,
    ) -> Result<usize, ReorgError>
    where
        U: Fn(&mut [u64], &[u8], bool) + Copy,
    {
        match t.words {
            1 => t.run_fast::<U, 1>(r, hints, from, out, update),
            2 => t.run_fast::<U, 2>(r, hints, from, out, update),
            3 => t.run_fast::<U, 3>(r, hints, from, out, update),
            4 => t.run_fast::<U, 4>(r, hints, from, out, update),
            5 => t.run_fast::<U, 5>(r, hints, from, out, update),
            6 => t.run_fast::<U, 6>(r, hints, from, out, update),
            7 => t.run_fast::<U, 7>(r, hints, from, out, update),
            _ => t.run_fast::<U, INLINE_WORDS_MAX>(r, hints, from, out, update),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Layout;

    /// Fixed-width records of an 8-byte key and a 4-byte value.
    const FIXED12: Strided = Strided { bytes: 12, key_at: 0 };

    /// The table grows to the largest size the threshold allows, not only
    /// to a power of two: 100,000 bytes hold 5,880 slots of 17 bytes (4,410
    /// groups at load 3/4), where the largest power of two, 4,096 slots,
    /// holds 3,072.
    #[test]
    fn the_table_fills_its_threshold() {
        let pool = MemoryPool::unbounded();
        let spec = AggSpec::new(AggFn::Sum, ValueType::I32);
        let threshold = 100_000;
        let mut t = InlinePartial::new(spec, threshold, SpillStrategy::State, &pool);
        let out_layout = Layout::fixed(8, 8).expect("layout");
        let mut out = Emitter::new(out_layout);
        let groups = 4_300u64;
        let mut payload = Vec::new();
        for k in 0..groups {
            payload.extend_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
            payload.extend_from_slice(&1i32.to_le_bytes());
        }
        t.push(&payload, FIXED12, &mut out).expect("push");
        assert_eq!(t.stats.state_spills, 0, "spilled below the threshold's capacity");
        assert_eq!(t.len, groups as usize);
        assert!(t.bytes_for(t.cap) <= threshold, "{} slots overrun the threshold", t.cap);
        // Each key again: every record finds its group.
        t.push(&payload, FIXED12, &mut out).expect("push");
        assert_eq!(t.len, groups as usize);
        // Past the load limit of the largest table: a spill, and all sums exact.
        let mut more = Vec::new();
        for k in groups..groups + 200 {
            more.extend_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
            more.extend_from_slice(&1i32.to_le_bytes());
        }
        t.push(&more, FIXED12, &mut out).expect("push");
        assert_eq!(t.stats.state_spills, 1);
        t.finish(&mut out).expect("finish");
        out.flush();
        let mut total = 0i64;
        let mut records = 0u64;
        for b in out.take_batches() {
            for r in b.iter() {
                let v = r.value.first_chunk::<8>().map_or(0, |v| i64::from_le_bytes(*v));
                total += v;
                records += 1;
            }
        }
        assert_eq!(total, 2 * groups as i64 + 200);
        assert!(records >= groups + 200, "{records} partials");
    }

    /// Spilling input: once the table is at its largest, records of new
    /// keys pass through inside the fast loop (staged for fixed-width
    /// output, one by one for prefixed keys), records of kept keys still
    /// aggregate, and every key's sum comes out exact.
    #[test]
    fn a_full_table_passes_new_keys_through_in_the_fast_loop() {
        for prefix in [None, Some(&b"\x07\x00\x00\x00\x2a"[..])] {
            let pool = MemoryPool::unbounded();
            let spec = AggSpec::new(AggFn::Sum, ValueType::I32);
            let mut t = InlinePartial::new(spec, 100_000, SpillStrategy::Input, &pool);
            let (at, out_layout) = match prefix {
                None => (FIXED12, Layout::fixed(8, 8).expect("layout")),
                Some(p) => {
                    t.set_prefix(p);
                    (Strided { bytes: 8 + p.len() + 12, key_at: 8 + p.len() }, Layout::Variable)
                }
            };
            let mut out = Emitter::new(out_layout);
            // 20,000 keys, far more than the 4,410 groups the table holds;
            // each key three times, in three passes.
            let keys = 20_000u64;
            let mut payload = Vec::new();
            for k in 0..keys {
                let key = k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
                if let Some(p) = prefix {
                    payload.extend_from_slice(&((p.len() + 8) as u32).to_le_bytes());
                    payload.extend_from_slice(&4u32.to_le_bytes());
                    payload.extend_from_slice(p);
                }
                payload.extend_from_slice(&key);
                payload.extend_from_slice(&((k % 7) as i32 + 1).to_le_bytes());
            }
            for _ in 0..3 {
                t.push(&payload, at, &mut out).expect("push");
            }
            assert!(t.passing, "the full table did not switch to passing input through");
            assert!(t.stats.passed_through > 2 * (keys - 4_410), "{:?}", t.stats);
            t.finish(&mut out).expect("finish");
            out.flush();
            let mut sums = std::collections::HashMap::<Vec<u8>, i64>::new();
            let mut records = 0u64;
            for b in out.take_batches() {
                for r in b.iter() {
                    let v = r.value.first_chunk::<8>().map_or(0, |v| i64::from_le_bytes(*v));
                    *sums.entry(r.key.to_vec()).or_default() += v;
                    records += 1;
                }
            }
            assert_eq!(records, t.stats.emitted_records);
            assert_eq!(sums.len() as u64, keys);
            for k in 0..keys {
                let mut key = prefix.unwrap_or_default().to_vec();
                key.extend_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
                assert_eq!(sums.get(&key), Some(&(3 * ((k % 7) as i64 + 1))), "key {k}");
            }
        }
    }
}
