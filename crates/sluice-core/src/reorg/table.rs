//! An open-addressing hash table from key bytes to dense entry numbers,
//! shared by aggregate and distinct.
//!
//! # Layout
//! ```text
//!  slots: [u64; 2^k]   0 = empty, else (hash >> 32) << 32 | (entry + 1)
//!  keys:  entry i's key bytes, back to back (fixed width: at i * width;
//!         variable: between ends[i-1] and ends[i])
//! ```
//! Linear probing over 8-byte slots: a probe compares the slot's 32-bit hash
//! tag first and touches the key arena only on a tag match, so a miss costs
//! one cache line. Tables of 8-byte keys keep the key in the slot as well
//! (16-byte slots), so a hit also costs one line, not a second miss into the
//! arena: aggregation into large tables is bound by memory latency. The load factor stays at most 1/2. Entries are dense, so
//! per-entry state lives in plain arrays indexed by entry number, and
//! iterating the table is a scan of the arena.
//!
//! # Batched probes
//! Aggregating into a table larger than the caches is bound by memory
//! latency. Callers hash a batch of [`PROBE_BATCH`] keys first and prefetch
//! each home slot, then probe in order, so the misses of a batch overlap
//! (measured in `docs/benchmarks.md`).
//!
//! # Memory
//! [`KeyTable::growth_for_insert`] says how many bytes the next insert would
//! allocate, so the owner can ask its memory reservation first and spill
//! instead when refused. Nothing grows without being asked for.

use xxhash_rust::xxh3::xxh3_64;

/// Keys hashed and prefetched ahead of probing.
pub const PROBE_BATCH: usize = 16;

/// Slots of a new table (small, so that a partial operator split across
/// many destinations with a small threshold still holds some groups).
const SLOTS_MIN: usize = 64;

/// Largest number of entries (entry numbers are stored in 32 bits).
pub const TABLE_ENTRIES_MAX: usize = (u32::MAX - 1) as usize;

pub(crate) use crate::hint::prefetch;

/// Hash of a key: a multiply-xorshift mix for 8-byte keys, xxh3 otherwise.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    if let Ok(k) = <[u8; 8]>::try_from(key) {
        hash_word(u64::from_le_bytes(k))
    } else {
        xxh3_64(key)
    }
}

/// [`hash_key`] of an 8-byte key read as a little-endian word.
#[inline(always)]
pub fn hash_word(k: u64) -> u64 {
    let mut h = k ^ 0x9E37_79B9_7F4A_7C15;
    h = (h ^ (h >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h = (h ^ (h >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 32)
}

/// Key bytes to dense entry numbers.
#[derive(Debug)]
pub struct KeyTable {
    /// `stride` words per slot: the meta word, then the key for 8-byte keys.
    slots: Vec<u64>,
    stride: usize,
    /// Slots (a power of two, or 0 before the first insert).
    cap: usize,
    fixed: Option<usize>,
    keys: Vec<u8>,
    ends: Vec<u32>,
    len: usize,
}

impl KeyTable {
    /// A table of keys of `fixed` bytes each, or of any length (`None`).
    pub fn new(fixed: Option<usize>) -> Self {
        let stride = if fixed == Some(8) { 2 } else { 1 };
        KeyTable {
            slots: Vec::new(),
            stride,
            cap: 0,
            fixed,
            keys: Vec::new(),
            ends: Vec::new(),
            len: 0,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (what the owner has reserved for).
    pub fn allocated(&self) -> usize {
        self.slots.capacity() * 8 + self.keys.capacity() + self.ends.capacity() * 4
    }

    /// Most bytes the table allocates while `more` new keys of
    /// `more_key_bytes` bytes in all are inserted: its arrays grown as
    /// inserts grow them, and the old slot array of the last grow still
    /// held while the slots move.
    pub fn peak_bytes_with(&self, more: usize, more_key_bytes: usize) -> usize {
        let len = self.len.saturating_add(more);
        let (mut cap, mut moving) = (self.cap, 0);
        while len.saturating_mul(2) > cap {
            moving = cap * self.stride * 8;
            cap = (cap * 2).max(SLOTS_MIN);
        }
        let slots = (cap * self.stride * 8).max(self.slots.capacity() * 8);
        let keys = grown_by_inserts(self.keys.capacity(), self.keys.len() + more_key_bytes);
        let ends = match self.fixed {
            Some(_) => self.ends.capacity(),
            None => grown_by_inserts(self.ends.capacity(), self.ends.len() + more),
        };
        slots + moving + keys + ends * 4
    }

    /// Key of entry `i`.
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        match self.fixed {
            Some(w) => &self.keys[i * w..(i + 1) * w],
            None => {
                let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
                &self.keys[start..self.ends[i] as usize]
            }
        }
    }

    /// Bytes the next insert of a `key_len`-byte key would allocate (0 if it
    /// fits in what is allocated); `None` if the table cannot take another
    /// key at all (entry numbers or offsets would overflow).
    pub fn growth_for_insert(&self, key_len: usize) -> Option<usize> {
        if self.len >= TABLE_ENTRIES_MAX || self.keys.len() + key_len > u32::MAX as usize {
            return None;
        }
        let mut extra = 0;
        if self.slots.is_empty() {
            extra += SLOTS_MIN * self.stride * 8;
        } else if (self.len + 1) * 2 > self.capacity() {
            extra += self.slots.len() * 8 * 2;
        }
        if self.keys.len() + key_len > self.keys.capacity() {
            extra += grown(self.keys.capacity(), self.keys.len() + key_len) - self.keys.capacity();
        }
        if self.fixed.is_none() && self.ends.len() == self.ends.capacity() {
            extra += (grown(self.ends.capacity(), self.ends.len() + 1) - self.ends.capacity()) * 4;
        }
        Some(extra)
    }

    /// Number of slots.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.cap
    }

    /// The key word of an 8-byte key.
    #[inline(always)]
    fn word(key: &[u8]) -> u64 {
        key.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b))
    }

    /// Hints the CPU to fetch the home slot of `hash`.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if self.slots.is_empty() {
            return;
        }
        let i = hash as usize & (self.capacity() - 1);
        prefetch(self.slots.as_ptr().wrapping_add(i * self.stride));
    }

    /// Whether entry `e` holds `key` (8-byte keys compare as one word).
    #[inline(always)]
    fn key_is(&self, e: usize, key: &[u8]) -> bool {
        if self.fixed == Some(8) {
            if let (Some(a), Some(b)) = (self.keys.get(e * 8..e * 8 + 8), key.first_chunk::<8>()) {
                return a == b.as_slice();
            }
        }
        self.key(e) == key
    }

    /// Entry of `key`, if present.
    #[inline(always)]
    pub fn find(&self, key: &[u8], hash: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.capacity() - 1;
        let tag = hash >> 32;
        let mut i = hash as usize & mask;
        if self.stride == 2 {
            let w = Self::word(key);
            loop {
                let s = self.slots[2 * i];
                if s == 0 {
                    return None;
                }
                if s >> 32 == tag && self.slots[2 * i + 1] == w {
                    return Some((s as u32 - 1) as usize);
                }
                i = (i + 1) & mask;
            }
        }
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> 32 == tag {
                let e = (s as u32 - 1) as usize;
                if self.key_is(e, key) {
                    return Some(e);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Entry of `key` and whether it was inserted now. The caller must have
    /// made room (see [`KeyTable::growth_for_insert`]); the table grows as
    /// needed otherwise.
    #[inline]
    pub fn find_or_insert(&mut self, key: &[u8], hash: u64) -> (usize, bool) {
        if (self.len + 1) * 2 > self.capacity() {
            self.grow();
        }
        let mask = self.capacity() - 1;
        let tag = hash >> 32;
        let stride = self.stride;
        let w = Self::word(key);
        let mut i = hash as usize & mask;
        loop {
            let s = self.slots[i * stride];
            if s == 0 {
                let e = self.len;
                self.push_key(key);
                self.slots[i * stride] = (tag << 32) | (e as u64 + 1);
                if stride == 2 {
                    self.slots[i * 2 + 1] = w;
                }
                self.len += 1;
                return (e, true);
            }
            if s >> 32 == tag {
                let same = if stride == 2 {
                    self.slots[i * 2 + 1] == w
                } else {
                    self.key_is((s as u32 - 1) as usize, key)
                };
                if same {
                    return ((s as u32 - 1) as usize, false);
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn push_key(&mut self, key: &[u8]) {
        if self.keys.len() + key.len() > self.keys.capacity() {
            let want = grown(self.keys.capacity(), self.keys.len() + key.len());
            self.keys.reserve_exact(want - self.keys.len());
        }
        self.keys.extend_from_slice(key);
        if self.fixed.is_none() {
            if self.ends.len() == self.ends.capacity() {
                let want = grown(self.ends.capacity(), self.ends.len() + 1);
                self.ends.reserve_exact(want - self.ends.len());
            }
            self.ends.push(self.keys.len() as u32);
        }
    }

    fn grow(&mut self) {
        let stride = self.stride;
        let n = (self.capacity() * 2).max(SLOTS_MIN);
        let old = std::mem::replace(&mut self.slots, vec![0; n * stride]);
        self.cap = n;
        let mask = n - 1;
        for slot in old.chunks_exact(stride).filter(|s| s[0] != 0) {
            let e = (slot[0] as u32 - 1) as usize;
            let h = hash_key(self.key(e));
            let mut i = h as usize & mask;
            while self.slots[i * stride] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i * stride..i * stride + stride].copy_from_slice(slot);
        }
    }

    /// Removes every key, keeping the allocations.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.keys.clear();
        self.ends.clear();
        self.len = 0;
    }

    /// Removes every key and frees the allocations.
    pub fn reset(&mut self) {
        *self = KeyTable::new(self.fixed);
    }

    /// Entry numbers ordered by key bytes.
    pub fn sorted_entries(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len as u32).collect();
        order.sort_unstable_by(|&a, &b| self.key(a as usize).cmp(self.key(b as usize)));
        order
    }
}

/// Capacity after growing a vector of capacity `cap` to hold `need`.
fn grown(cap: usize, need: usize) -> usize {
    need.max(cap * 2).max(64)
}

/// A bound on the capacity an array of `capacity` reaches as inserts fill
/// it to `need`, each that overflows it growing it by [`grown`]: the last
/// growth starts below `need` and at most doubles, or jumps to exactly what
/// one insert needs, so never beyond twice `need`.
pub(crate) fn grown_by_inserts(capacity: usize, need: usize) -> usize {
    if need > capacity {
        need.saturating_mul(2).max(64)
    } else {
        capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_bytes_bound_what_inserts_allocate() {
        for fixed in [Some(8), None] {
            // Distinct keys: 8 bytes, or 1 to 37 bytes of filler and the number.
            let key = |i: u64| -> Vec<u8> {
                match fixed {
                    Some(_) => i.to_le_bytes().to_vec(),
                    None => [vec![b'k'; (i % 37) as usize + 1], i.to_le_bytes().to_vec()].concat(),
                }
            };
            for start in [0u64, 1, 100, 3000] {
                let mut t = KeyTable::new(fixed);
                for i in 0..start {
                    t.find_or_insert(&key(i), hash_key(&key(i)));
                }
                let more: Vec<Vec<u8>> = (start..start + 5000).map(key).collect();
                let bound = t.peak_bytes_with(more.len(), more.iter().map(Vec::len).sum());
                for k in &more {
                    t.find_or_insert(k, hash_key(k));
                    let now = t.allocated();
                    assert!(now <= bound, "{fixed:?} from {start}: {now} > {bound}");
                }
            }
        }
    }

    #[test]
    fn finds_what_it_inserted() {
        for fixed in [Some(8), None] {
            let mut t = KeyTable::new(fixed);
            for i in 0..5000u64 {
                let k = if fixed.is_some() {
                    i.to_be_bytes().to_vec()
                } else {
                    vec![b'k'; (i % 40) as usize]
                };
                let key = [k.as_slice(), &i.to_le_bytes()[..fixed.map_or(8, |_| 0)]].concat();
                let (e, new) = t.find_or_insert(&key, hash_key(&key));
                assert!(new);
                assert_eq!(t.key(e), key.as_slice());
                assert_eq!(t.find(&key, hash_key(&key)), Some(e));
                assert_eq!(t.find_or_insert(&key, hash_key(&key)), (e, false));
            }
            assert_eq!(t.len(), 5000);
            let sorted = t.sorted_entries();
            assert!(sorted.windows(2).all(|w| t.key(w[0] as usize) < t.key(w[1] as usize)));
            t.clear();
            assert!(t.find(b"anything", hash_key(b"anything")).is_none());
        }
    }
}
