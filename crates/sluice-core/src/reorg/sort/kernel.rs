//! Sorting one buffer of records by byte-comparable key.
//!
//! # Algorithm (PSACS: sort small entries, then gather)
//! 1. One pass builds an entry per record: the key's first 8 bytes as a
//!    big-endian integer (zero padded), and the record's offset and length
//!    in the buffer (16 bytes per entry). The same pass finds which prefix
//!    bits vary (the radix sort's first step).
//! 2. Radix sort of the entries on that prefix, 11 bits per pass, least
//!    significant digit first, over the prefix bits that vary and of those
//!    only the top `log2(n) + 5` (see [`radix_sort`]), then a fix-up scan
//!    that sorts the few groups agreeing on all of those bits. The
//!    histograms of all digits are counted in one pass up front, and a pass
//!    whose digit is the same for every entry is skipped. Runs are sized to
//!    the spilling threshold, so entries are
//!    cache-resident and each pass scatters with plain stores. A
//!    write-combining buffer (four entries, one cache line, per bucket)
//!    measured slower here, as in the partition operator. Each scatter
//!    takes entries two at a time, loading both write positions before
//!    storing either back (see `partition::fixed_writer` for why). Figures
//!    of both: `docs/benchmarks.md`, "Design measurements".
//! 3. Tie-break: when keys can be longer than 8 bytes (or of varying
//!    length), each run of equal prefixes is sorted by the full key bytes.
//!    Fixed keys of at most 8 bytes are fully ordered by their prefix.
//! 4. Gather: the caller copies records out in entry order.
//!
//! LSD radix is stable, so records with equal keys keep their input order.

use crate::format::Layout;
use crate::reorg::cursor::record_at;

/// One record's sort entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SortEntry {
    /// First 8 key bytes, big-endian, zero padded.
    pub prefix: u64,
    /// Record offset in the buffer.
    pub off: u32,
    /// Record length in bytes.
    pub len: u32,
}

/// Largest buffer the kernel sorts (offsets are 32-bit).
pub const SORT_BUFFER_BYTES_MAX: usize = u32::MAX as usize;

/// The key's first 8 bytes as a big-endian integer, zero padded.
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    if let Some(k) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*k);
    }
    let mut b = [0u8; 8];
    b[..key.len()].copy_from_slice(key);
    u64::from_be_bytes(b)
}

/// Sorts the `count` records of `payload` (validated, in `layout`) and
/// leaves their order in `entries`; `scratch` is reused between calls.
pub fn sort_records(
    layout: Layout,
    payload: &[u8],
    count: usize,
    entries: &mut Vec<SortEntry>,
    scratch: &mut Vec<SortEntry>,
) {
    entries.clear();
    entries.reserve(count);
    // The entries are built in the same pass that finds which prefix bits
    // vary (the radix sort's first step).
    let mut varying = 0u64;
    let mut first = None;
    let mut add = |prefix: u64, off: usize, len: usize| {
        varying |= prefix ^ *first.get_or_insert(prefix);
        entries.push(SortEntry { prefix, off: off as u32, len: len as u32 });
    };
    match layout {
        Layout::Fixed { key_width, value_width } => {
            let kw = usize::from(key_width);
            let width = kw + value_width as usize;
            for (i, rec) in payload.chunks_exact(width).take(count).enumerate() {
                add(key_prefix(&rec[..kw]), i * width, width);
            }
        }
        Layout::Variable => {
            let mut off = 0usize;
            while let Some((r, n)) = record_at(layout, payload, off) {
                add(key_prefix(r.key), off, n);
                off += n;
            }
        }
    }
    radix_sort_varying(entries, scratch, varying);
    let exact = matches!(layout, Layout::Fixed { key_width, .. } if key_width <= 8);
    if !exact {
        tie_break(layout, payload, entries);
    }
}

/// Most bits per radix digit (2048 buckets, whose counters and write
/// positions stay in L1). The passes a sort needs are counted with digits
/// this wide, and then each digit is made as narrow as that many passes
/// allow (see [`radix_sort`]).
const DIGIT_BITS: u32 = 11;

/// Most buckets per pass.
const BUCKETS: usize = 1 << DIGIT_BITS;

/// Bits beyond log2(entries) that the radix passes cover before the
/// fix-up takes over: with `b` bits sorted, an entry shares its sorted
/// bits with another with probability about n / 2^b when the bits are
/// uniform, 1/32 here.
const SURPLUS_BITS: u32 = 5;

/// Groups up to this many entries are fixed up by insertion sort.
const INSERTION_MAX: usize = 16;

/// Radix sort of entries by prefix, stable.
///
/// Only the bits that vary between entries are sorted (the window from
/// the lowest to the highest bit that is not the same in every prefix),
/// and of those at most the top `log2(n) + SURPLUS_BITS`, in as few passes
/// of at most `DIGIT_BITS` (11) as cover them, each digit as narrow as that
/// many passes allow (runs of 23,800 entries, the operator benchmark's 1
/// MiB per destination: two 10-bit passes instead of two 11-bit ones, 5 %
/// faster): LSD passes over the window's top digits order the
/// entries by those bits, then one scan finds the groups that agree on
/// all of them and sorts each group by the whole prefix (insertion sort
/// for small groups, a stable merge sort for larger ones). Random 8-byte
/// keys in runs of 100,000 take two passes instead of six; keys from a
/// small domain take as few passes as their varying bits need; a skewed
/// distribution makes larger groups, sorted in O(g log g).
pub fn radix_sort(entries: &mut Vec<SortEntry>, scratch: &mut Vec<SortEntry>) {
    let first = entries.first().map_or(0, |e| e.prefix);
    let varying = entries.iter().fold(0u64, |acc, e| acc | (e.prefix ^ first));
    radix_sort_varying(entries, scratch, varying);
}

/// [`radix_sort`] given the OR of every prefix XOR the first one (the bits
/// that vary), found while the entries were built.
fn radix_sort_varying(entries: &mut Vec<SortEntry>, scratch: &mut Vec<SortEntry>, varying: u64) {
    let n = entries.len();
    if n < 2 || varying == 0 {
        return;
    }
    let top = 64 - varying.leading_zeros();
    let low = varying.trailing_zeros();
    let wanted = usize::BITS - (n - 1).leading_zeros() + SURPLUS_BITS;
    let width = top - low;
    let sorted_bits = width.min(wanted);
    let passes = sorted_bits.div_ceil(DIGIT_BITS);
    // As narrow as the passes allow: fewer buckets are fewer lines being
    // written at once in each scatter.
    let digit = sorted_bits.div_ceil(passes);
    let covered = passes * digit;
    // Lowest bit the passes sort: the window's bottom when the passes
    // cover it all (an exact sort), else the digits end at its top and
    // the fix-up orders the bits below.
    let base = if covered >= width { low } else { top - covered };
    let mask = (1u64 << digit) - 1;
    let mut hist = vec![[0u32; BUCKETS]; passes as usize];
    for e in entries.iter() {
        let mut p = e.prefix >> base;
        for h in hist.iter_mut() {
            h[(p & mask) as usize] += 1;
            p >>= digit;
        }
    }
    scratch.clear();
    scratch.resize(n, SortEntry::default());
    for (d, h) in hist.iter().enumerate() {
        if h.contains(&(n as u32)) {
            continue;
        }
        let mut offsets = [0u32; BUCKETS];
        let mut at = 0u32;
        for (o, &c) in offsets.iter_mut().zip(h.iter()) {
            *o = at;
            at += c;
        }
        let shift = base + digit * d as u32;
        let bucket = |e: &SortEntry| ((e.prefix >> shift) & mask) as usize;
        // Two entries at a time, both write positions loaded before either
        // is stored back (the second one step further when both share a
        // bucket), as the partition writer does: one at a time, each
        // position's load waits on the previous entry's store.
        let mut pairs = entries.chunks_exact(2);
        for two in &mut pairs {
            let (e0, e1) = (two[0], two[1]);
            let (b0, b1) = (bucket(&e0), bucket(&e1));
            let o0 = offsets[b0];
            let o1 = offsets[b1] + u32::from(b0 == b1);
            scratch[o0 as usize] = e0;
            scratch[o1 as usize] = e1;
            offsets[b0] = o0 + 1;
            offsets[b1] = o1 + 1;
        }
        for e in pairs.remainder() {
            let b = bucket(e);
            scratch[offsets[b] as usize] = *e;
            offsets[b] += 1;
        }
        std::mem::swap(entries, scratch);
    }
    if base > low {
        fix_up(entries, base);
    }
}

/// Sorts, by whole prefix, each group of entries whose prefixes agree on
/// every bit from `base` up (the entries are ordered by those bits).
fn fix_up(entries: &mut [SortEntry], base: u32) {
    let mut i = 0;
    while i < entries.len() {
        let high = entries[i].prefix >> base;
        let mut j = i + 1;
        while j < entries.len() && entries[j].prefix >> base == high {
            j += 1;
        }
        let group = &mut entries[i..j];
        if group.len() <= INSERTION_MAX {
            insertion_sort(group);
        } else {
            group.sort_by_key(|e| e.prefix);
        }
        i = j;
    }
}

/// Stable insertion sort by prefix (groups of a few entries).
fn insertion_sort(group: &mut [SortEntry]) {
    for k in 1..group.len() {
        let e = group[k];
        let mut at = k;
        while at > 0 && group[at - 1].prefix > e.prefix {
            group[at] = group[at - 1];
            at -= 1;
        }
        group[at] = e;
    }
}

/// Sorts each run of equal prefixes by the full key.
fn tie_break(layout: Layout, payload: &[u8], entries: &mut [SortEntry]) {
    let key = |e: &SortEntry| -> &[u8] {
        record_at(layout, payload, e.off as usize).map_or(&[][..], |(r, _)| r.key)
    };
    let mut i = 0;
    while i < entries.len() {
        let p = entries[i].prefix;
        let mut j = i + 1;
        while j < entries.len() && entries[j].prefix == p {
            j += 1;
        }
        if j - i > 1 {
            entries[i..j].sort_by(|a, b| key(a).cmp(key(b)));
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::RecordBatch;

    #[test]
    fn sorts_fixed_and_variable_keys() {
        let mut x = 12345u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 20
        };
        for layout in
            [Layout::fixed(8, 4).expect("l"), Layout::fixed(12, 0).expect("l"), Layout::Variable]
        {
            let mut b = RecordBatch::new(layout);
            let mut keys = Vec::new();
            for i in 0..3000u32 {
                let k: Vec<u8> = match layout {
                    Layout::Fixed { key_width, .. } => {
                        let v = next() % 500;
                        let mut k = v.to_be_bytes().to_vec();
                        k.resize(usize::from(key_width), (v % 3) as u8);
                        k
                    }
                    Layout::Variable => {
                        let len = (next() % 12) as usize;
                        (0..len).map(|_| (next() % 3) as u8).collect()
                    }
                };
                let v = if layout.is_variable() {
                    i.to_le_bytes().to_vec()
                } else {
                    vec![0; layout.fixed_record_bytes().unwrap_or(0) - k.len()]
                };
                b.push(&k, &v).expect("push");
                keys.push(k);
            }
            let (mut e, mut s) = (Vec::new(), Vec::new());
            sort_records(layout, b.payload(), b.len(), &mut e, &mut s);
            let got: Vec<Vec<u8>> = e
                .iter()
                .map(|e| {
                    record_at(layout, b.payload(), e.off as usize)
                        .map(|(r, _)| r.key.to_vec())
                        .unwrap_or_default()
                })
                .collect();
            keys.sort();
            assert_eq!(got, keys, "{layout}");
        }
    }
}
