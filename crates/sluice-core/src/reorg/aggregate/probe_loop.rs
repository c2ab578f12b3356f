//! The inline table's hot loop over raw pointers.
//!
//! Per record: take its hint (home slot and tag, computed in one pass over
//! the payload before the loop: [`Hints`]), fetch the home slot of the
//! record [`PROBE_BATCH`] ahead, read the home group of eight control
//! bytes, confirm a tag match by the 8-byte key, and either fold the value
//! into the found slot's state or start a group in the first empty slot
//! (the same probe as `inline::probe_in`). Written with checked slices the
//! loop carried a bounds check for each of its accesses and, short of
//! registers, kept most of the table's fields on the stack; the checks are
//! hoisted here into one set of assertions at entry (a table of `cap`
//! slots, `cap + GROUP` control bytes, whole records, hints for this very
//! table), after which every access is in bounds by construction: record
//! `i < n`, slot and group positions `< cap` (`docs/benchmarks.md`,
//! "Design measurements").

use super::key8::{home, tag, Records, INLINE_KEY_BYTES};
use crate::reorg::control_bytes::{self, GROUP};
use crate::reorg::table::{hash_word, prefetch, PROBE_BATCH};

/// How far ahead of the record it hashes the hint pass fetches the payload
/// (1 KiB, 16 cache lines). The payload is a stage page written by the
/// partitioner up to a stage earlier and mostly out of the caches by now;
/// measured with `sluice bench operators --ops aggregate` (8-byte keys, 1M
/// keys, one worker), seven interleaved pairs: 4.59-5.02 Gbit/s without,
/// 4.68-5.31 with (higher in five pairs), unchanged at 10K keys.
pub(super) const READ_AHEAD_BYTES: usize = 1 << 10;

/// Per record, where its probe starts: the home slot in the table of `cap`
/// slots they were computed for, shifted up 8 bits, and the control tag in
/// the low byte. Computed in one pass over a payload ahead of the loop,
/// which then needs neither the hash's multiply (twice: for the prefetch
/// and for the probe) nor the tag's bit twiddling; recomputed for the
/// records not yet applied when the table grows (a handful of times in a
/// table's life).
#[derive(Debug, Default)]
pub(super) struct Hints {
    words: Vec<u64>,
    /// Slots of the table the hints from `valid_from` on are for.
    cap: usize,
    valid_from: usize,
}

impl Hints {
    /// Hints for records `from..` of `r` in a table of `cap` slots
    /// (`cap > 0`); `from == 0` starts a new payload.
    pub(super) fn compute(&mut self, r: Records<'_>, cap: usize, from: usize) {
        let width = r.width.max(1);
        let n = r.payload.len() / width;
        self.words.resize(n, 0);
        self.cap = cap;
        self.valid_from = from.min(n);
        let key_end = r.key_at + INLINE_KEY_BYTES;
        let records = r.payload.chunks_exact(width).skip(from);
        for (w, rec) in self.words[from.min(n)..].iter_mut().zip(records) {
            prefetch(rec.as_ptr().wrapping_add(READ_AHEAD_BYTES));
            let key = rec.get(r.key_at..key_end).and_then(|k| k.first_chunk::<8>());
            let h = hash_word(u64::from_le_bytes(key.copied().unwrap_or_default()));
            *w = ((home(h, cap) as u64) << 8) | u64::from(tag(h));
        }
    }

    /// Makes room for `n` records without hints (no table yet).
    pub(super) fn clear(&mut self, n: usize) {
        self.words.clear();
        self.words.resize(n, 0);
        self.cap = 0;
        self.valid_from = n;
    }

    /// Table size the hints are for.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// Fetches the home slots of records `from..from + PROBE_BATCH` in the
    /// table of `ctrl` and `slots` (`stride` bytes per slot).
    pub(super) fn prefetch(&self, ctrl: &[u8], slots: &[u8], stride: usize, from: usize) {
        for &w in self.words.iter().skip(from.max(self.valid_from)).take(PROBE_BATCH) {
            let at = (w >> 8) as usize;
            prefetch(ctrl.as_ptr().wrapping_add(at));
            prefetch(slots.as_ptr().wrapping_add(at * stride));
        }
    }
}

/// One table's parts as the loop sees them.
pub(super) struct Table<'a> {
    pub(super) ctrl: &'a mut [u8],
    pub(super) slots: &'a mut [u8],
    pub(super) cap: usize,
    /// Taken slots; the loop stops before it would exceed `len_max`.
    pub(super) len: usize,
    pub(super) len_max: usize,
}

/// Applies records `from..` (with `hints` computed for them and this table)
/// while each finds its group or a free slot within `len_max`; returns the
/// index of the first record that needs a new group when the table has no
/// room for it, or the record count. `WORDS` state words per slot.
///
/// # Panics
/// When the table or the records are not shaped as described (a bug in
/// the caller, never data): the assertions are what make the loop's
/// unchecked accesses sound.
#[inline(always)]
pub(super) fn run<U, const WORDS: usize>(
    t: &mut Table<'_>,
    r: Records<'_>,
    hints: &Hints,
    from: usize,
    update: U,
) -> usize
where
    U: Fn(&mut [u64], &[u8], bool) + Copy,
{
    let stride = 8 * (1 + WORDS);
    let cap = t.cap;
    assert!(cap >= GROUP, "table of {cap} slots");
    assert!(t.ctrl.len() >= cap + GROUP && t.slots.len() >= cap * stride);
    assert!(t.len_max < cap, "load limit {} of {cap} slots", t.len_max);
    assert!(r.width >= r.key_at + INLINE_KEY_BYTES);
    // Hints before `valid_from` may be for another table size.
    assert!(hints.cap == cap && from >= hints.valid_from, "hints for another table");
    let hints = &hints.words[..];
    let n = hints.len().min(r.payload.len() / r.width);
    let ahead_end = n.saturating_sub(PROBE_BATCH);
    let ctrl = t.ctrl.as_mut_ptr();
    let slots = t.slots.as_mut_ptr();
    let mut len = t.len;
    let mut i = from;
    // Two copies of one body: with the record `PROBE_BATCH` ahead fetched,
    // then the last `PROBE_BATCH` records without.
    while i < ahead_end {
        // SAFETY: i + PROBE_BATCH < n <= hints.len().
        let at = (unsafe { *hints.get_unchecked(i + PROBE_BATCH) } >> 8) as usize;
        prefetch(ctrl.wrapping_add(at));
        prefetch(slots.wrapping_add(at * stride));
        // SAFETY: i < n, and the assertions above.
        if !unsafe { one::<U, WORDS>(ctrl, slots, cap, &mut len, t.len_max, r, hints, i, update) } {
            t.len = len;
            return i;
        }
        i += 1;
    }
    while i < n {
        // SAFETY: i < n, and the assertions above.
        if !unsafe { one::<U, WORDS>(ctrl, slots, cap, &mut len, t.len_max, r, hints, i, update) } {
            t.len = len;
            return i;
        }
        i += 1;
    }
    t.len = len;
    n
}

/// Applies record `i`; false (and nothing changed) when it needs a new
/// group and `len` is at `len_max`.
///
/// # Safety
/// `i < min(hints.len(), payload.len() / width)`, and `hints[i]` was
/// computed for a table of `cap` slots (its home is below `cap`); `ctrl`
/// points to at least `cap + GROUP` bytes and `slots` to `cap * 8 (1 +
/// WORDS)`, both exclusively ours; `cap >= GROUP`; `len <= len_max < cap`,
/// so the table always has an empty slot and a probe ends; `width >=
/// key_at + 8`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn one<U, const WORDS: usize>(
    ctrl: *mut u8,
    slots: *mut u8,
    cap: usize,
    len: &mut usize,
    len_max: usize,
    r: Records<'_>,
    hints: &[u64],
    i: usize,
    update: U,
) -> bool
where
    U: Fn(&mut [u64], &[u8], bool),
{
    let stride = 8 * (1 + WORDS);
    // SAFETY: i < hints.len().
    let hint = unsafe { *hints.get_unchecked(i) };
    let rec = i * r.width;
    // SAFETY: the record's bytes lie within the payload (i < payload.len() / width).
    let key = unsafe { r.payload.as_ptr().add(rec + r.key_at).cast::<u64>().read_unaligned() };
    // SAFETY: as above; the value runs from the key's end to the record's end.
    let value =
        unsafe { r.payload.get_unchecked(rec + r.key_at + INLINE_KEY_BYTES..rec + r.width) };
    let tg = hint as u8;
    let mut pos = (hint >> 8) as usize;
    let (slot, found) = 'probe: loop {
        // SAFETY: pos < cap and ctrl holds cap + GROUP bytes.
        let g = u64::from_le(unsafe { ctrl.add(pos).cast::<u64>().read_unaligned() });
        let mut m = control_bytes::match_tag(g, tg);
        while m != 0 {
            let s = wrap(pos + control_bytes::lowest(m), cap);
            // SAFETY: s < cap, so slot s's bytes lie within slots.
            if unsafe { slots.add(s * stride).cast::<u64>().read_unaligned() } == key {
                break 'probe (s, true);
            }
            m &= m - 1;
        }
        let e = control_bytes::match_empty(g);
        if e != 0 {
            break 'probe (wrap(pos + control_bytes::lowest(e), cap), false);
        }
        pos = wrap(pos + GROUP, cap);
    };
    // SAFETY: slot < cap.
    let at = unsafe { slots.add(slot * stride) };
    let mut st = [0u64; WORDS];
    if found {
        for (w, s) in st.iter_mut().enumerate() {
            // SAFETY: word w of the state lies within the slot.
            *s = u64::from_le(unsafe { at.add(8 * (1 + w)).cast::<u64>().read_unaligned() });
        }
    } else {
        if *len >= len_max {
            return false;
        }
        *len += 1;
        // SAFETY: slot < cap; a slot below GROUP has a mirror byte at cap + slot.
        unsafe {
            *ctrl.add(slot) = tg;
            if slot < GROUP {
                *ctrl.add(cap + slot) = tg;
            }
            at.cast::<u64>().write_unaligned(key);
        }
    }
    update(&mut st, value, !found);
    for (w, s) in st.iter().enumerate() {
        // SAFETY: word w of the state lies within the slot.
        unsafe { at.add(8 * (1 + w)).cast::<u64>().write_unaligned(s.to_le()) };
    }
    true
}

/// `i` reduced below `cap`, for `i < 2 cap`.
#[inline(always)]
fn wrap(i: usize, cap: usize) -> usize {
    if i >= cap {
        i - cap
    } else {
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed-width records of an 8-byte key and a 4-byte i32 value.
    fn records(keys: &[u64]) -> Vec<u8> {
        let mut p = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            p.extend_from_slice(&k.to_le_bytes());
            p.extend_from_slice(&(i as i32).to_le_bytes());
        }
        p
    }

    fn sum(st: &mut [u64], v: &[u8], first: bool) {
        let x = i64::from(i32::from_le_bytes(v.try_into().unwrap_or_default())) as u64;
        st[0] = if first { x } else { st[0].wrapping_add(x) };
    }

    /// Hints computed for a smaller table would index past the control
    /// bytes of nothing: the loop refuses them rather than trust them.
    #[test]
    #[should_panic(expected = "hints for another table")]
    fn hints_for_another_table_are_refused() {
        let payload = records(&[1, 2, 3]);
        let r = Records { payload: &payload, width: 12, key_at: 0 };
        let mut hints = Hints::default();
        hints.compute(r, 64, 0);
        let (mut ctrl, mut slots) = (vec![0u8; 128 + GROUP], vec![0u8; 128 * 16]);
        let mut t = Table { ctrl: &mut ctrl, slots: &mut slots, cap: 128, len: 0, len_max: 96 };
        run::<_, 1>(&mut t, r, &hints, 0, sum);
    }

    /// Recomputed hints are trusted only from where they were recomputed.
    #[test]
    #[should_panic(expected = "hints for another table")]
    fn stale_hints_before_a_recompute_are_refused() {
        let payload = records(&[1, 2, 3, 4]);
        let r = Records { payload: &payload, width: 12, key_at: 0 };
        let mut hints = Hints::default();
        hints.compute(r, 64, 0);
        hints.compute(r, 128, 2);
        let (mut ctrl, mut slots) = (vec![0u8; 128 + GROUP], vec![0u8; 128 * 16]);
        let mut t = Table { ctrl: &mut ctrl, slots: &mut slots, cap: 128, len: 0, len_max: 96 };
        run::<_, 1>(&mut t, r, &hints, 1, sum);
    }

    /// Every record lands in its key's group with the right sum, the loop
    /// stops at the first new key once `len_max` groups exist, and going
    /// on after that record (as the caller does when passing input through)
    /// still finds the kept keys. Keys repeat across more than
    /// `PROBE_BATCH` records so both loop copies see hits.
    #[test]
    fn groups_records_and_stops_at_the_load_limit() {
        let keys: Vec<u64> =
            (0..200u64).map(|i| (i % 40).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let payload = records(&keys);
        let r = Records { payload: &payload, width: 12, key_at: 0 };
        let cap = 64;
        let mut hints = Hints::default();
        hints.compute(r, cap, 0);
        let (mut ctrl, mut slots) = (vec![0u8; cap + GROUP], vec![0u8; cap * 16]);
        let mut t = Table { ctrl: &mut ctrl, slots: &mut slots, cap, len: 0, len_max: 48 };
        assert_eq!(run::<_, 1>(&mut t, r, &hints, 0, sum), keys.len());
        assert_eq!(t.len, 40);
        let mut want = std::collections::HashMap::<u64, i64>::new();
        for (i, k) in keys.iter().enumerate() {
            *want.entry(*k).or_default() += i as i64;
        }
        let mut got = std::collections::HashMap::<u64, i64>::new();
        for (c, slot) in t.ctrl[..cap].iter().zip(t.slots.chunks_exact(16)) {
            if *c != 0 {
                let k = u64::from_le_bytes(slot[..8].try_into().unwrap_or_default());
                let v = i64::from_le_bytes(slot[8..].try_into().unwrap_or_default());
                assert!(got.insert(k, v).is_none(), "key {k:#x} in two slots");
            }
        }
        assert_eq!(got, want);
        // At a load limit of 40 groups the loop stops at the new key 41
        // (record 1) of a second payload, and goes on from record 2.
        let more: Vec<u64> =
            [5u64, 41, 6].iter().map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let payload = records(&more);
        let r = Records { payload: &payload, width: 12, key_at: 0 };
        hints.compute(r, cap, 0);
        t.len_max = 40;
        assert_eq!(run::<_, 1>(&mut t, r, &hints, 0, sum), 1);
        assert_eq!(run::<_, 1>(&mut t, r, &hints, 2, sum), 3);
        assert_eq!(t.len, 40);
    }
}
