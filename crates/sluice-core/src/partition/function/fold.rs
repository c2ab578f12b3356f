//! PSACS's fold hash: evenness rather than collision resistance.
//!
//! # Algorithm
//! The key is read as a bit string and cut into rows of `w` bits; every other
//! row is bit-reversed ("zig-zag") and all rows are XORed together:
//!
//! ```text
//! b00 b01 ... b09        row 0, as is
//! b19 b18 ... b10        row 1, reversed
//! b20 b21 ... b29        row 2, as is
//! ----------------- XOR
//! n00 n01 ... n09        the fold
//! ```
//!
//! For `P = 2^k` partitions the fold is `k` bits wide and is the partition:
//! every key bit influences the result, sequential keys cycle through all
//! partitions evenly, and nothing is multiplied. For other `P` the key is
//! folded to 64 bits (words of 8 bytes, alternate words reversed), mixed once,
//! and reduced by multiply-shift.
//!
//! Implementation: the key is first folded to one 64-bit word (8-byte words,
//! odd words bit-reversed; a zero-padded tail), which is the same bit string
//! fold at row width 64; that word is then folded down to `k` bits with the
//! same zig-zag rule by halving shifts ([`fold_to`]). Keys of at most 8
//! bytes therefore cost one load and `ceil(log2(64 / 2k))` shift steps,
//! constants for every `k` up to 16.

use super::{check_partitions, reduce, FastPartition, Partitioner};
use crate::format::{BatchView, Layout};
use crate::partition::PartitionError;

/// PSACS-style zig-zag fold hash.
#[derive(Clone, Debug)]
pub struct FoldHash {
    partitions: u32,
    /// `k` when `partitions == 2^k`, else `None`.
    bits: Option<u32>,
}

impl FoldHash {
    /// A fold hash over `partitions` partitions.
    pub fn new(partitions: u32) -> Result<Self, PartitionError> {
        let partitions = check_partitions(partitions)?;
        let bits = partitions.is_power_of_two().then(|| partitions.trailing_zeros());
        Ok(FoldHash { partitions, bits })
    }
}

/// The key folded to 64 bits: 8-byte little-endian words, every other one
/// bit-reversed, XORed.
#[inline(always)]
fn fold64(key: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = key.chunks_exact(8);
    let mut odd = false;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        acc ^= if odd { w.reverse_bits() } else { w };
        odd = !odd;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        let w = u64::from_le_bytes(w);
        acc ^= if odd { w.reverse_bits() } else { w };
    }
    acc
}

/// `x` folded to `k` bits (1 <= k <= 63) with alternate rows reversed.
///
/// Rows of one parity lie `2k` bits apart, so XOR-folding the word onto
/// itself by shifts of `2k`, `4k`, `8k`, ... (while below 64) gathers, in
/// bits `0..2k`, the XOR of every even row (low `k` bits) and of every odd
/// row (next `k` bits): after shifts by `2k * 2^i` for `i < m`, bit `b` is
/// the XOR of bits `b + 2kj` for `j < 2^m`, and `2^m * 2k >= 64` covers the
/// word (bits past 63 are the zero padding of the last row). Reversal
/// distributes over XOR, so only the folded odd row is reversed. With `k`
/// a constant the shifts unroll: `ceil(log2(64 / 2k))` steps.
#[inline(always)]
fn fold_to(x: u64, k: u32) -> u64 {
    if k == 0 || k >= 64 {
        // One partition (and no row width beyond the word).
        return 0;
    }
    let mask = (1u64 << k) - 1;
    let v = fold_rows(x, k);
    let e = v & mask;
    let o = (v >> k) & mask;
    e ^ reverse_low(o, k)
}

/// `x` XOR-folded onto itself by shifts of `2k`, `4k`, ... below 64: bits
/// `0..k` then hold the XOR of every even row, bits `k..2k` of every odd
/// row (see [`fold_to`]).
#[inline(always)]
fn fold_rows(x: u64, k: u32) -> u64 {
    let mut v = x;
    let mut s = 2 * k;
    while s < 64 {
        v ^= v >> s;
        s *= 2;
    }
    v
}

/// The low `k` bits of `o` reversed (a table lookup for `k <= 8`).
#[inline(always)]
fn reverse_low(o: u64, k: u32) -> u64 {
    if k <= 8 {
        u64::from(REVERSED_BYTES[(o & 0xFF) as usize]) >> (8 - k)
    } else {
        o.reverse_bits() >> (64 - k)
    }
}

/// Every byte with its bits reversed.
const REVERSED_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u8).reverse_bits();
        i += 1;
    }
    t
};

/// [`fold_to`] with the row width a constant: the partition of an 8-byte
/// key read as a little-endian word, for `2^K` partitions.
///
/// For `K <= FOLD_TABLE_MAX_BITS` the last step (split the `2K` folded
/// bits into the even and odd row, reverse the odd one, XOR) is one lookup
/// in [`FOLD_TABLES`]: two instructions in the partitioner's hot loop
/// instead of seven.
#[inline(always)]
pub(crate) fn fold_const<const K: u32>(x: u64) -> u64 {
    if K == 0 || K > FOLD_TABLE_MAX_BITS {
        return fold_to(x, K);
    }
    let rows = (fold_rows(x, K) & ((1 << (2 * K)) - 1)) as usize;
    u64::from(FOLD_TABLES[K as usize][rows])
}

/// Largest `k` whose last fold step is a table lookup (tables of `2^(2k)`
/// bytes: 1 KiB at 5).
const FOLD_TABLE_MAX_BITS: u32 = 5;

/// `FOLD_TABLES[k][r]`: the fold of the `2k`-bit value `r` to `k` bits
/// (even row XOR the reversed odd row), for `k` in `1..=5`.
static FOLD_TABLES: [[u8; 1 << (2 * FOLD_TABLE_MAX_BITS)]; FOLD_TABLE_MAX_BITS as usize + 1] = {
    let mut t = [[0u8; 1 << (2 * FOLD_TABLE_MAX_BITS)]; FOLD_TABLE_MAX_BITS as usize + 1];
    let mut k = 1;
    while k <= FOLD_TABLE_MAX_BITS as usize {
        let mask = (1usize << k) - 1;
        let mut r = 0;
        while r < 1 << (2 * k) {
            let odd = ((r >> k) & mask) as u8;
            t[k][r] = ((r & mask) as u8) ^ (odd.reverse_bits() >> (8 - k));
            r += 1;
        }
        k += 1;
    }
    t
};

/// Calls `$f::<K, G..>($args)` with `K = $bits` a constant for 1..=16
/// (the partition counts 2 to 65,536), `$f::<0, G..>` otherwise; further
/// generic arguments go in brackets: `dispatch_fold_bits!(k, f[W](x))`.
macro_rules! dispatch_fold_bits {
    ($bits:expr, $f:ident $([$($g:tt),*])? ( $($arg:expr),* $(,)? )) => {
        dispatch_fold_bits!(@ $bits, $f, [$($($g),*)?], ($($arg),*))
    };
    (@ $bits:expr, $f:ident, [$($g:tt),*], ($($arg:expr),*)) => {
        match $bits {
            1 => $f::<1 $(, $g)*>($($arg),*),
            2 => $f::<2 $(, $g)*>($($arg),*),
            3 => $f::<3 $(, $g)*>($($arg),*),
            4 => $f::<4 $(, $g)*>($($arg),*),
            5 => $f::<5 $(, $g)*>($($arg),*),
            6 => $f::<6 $(, $g)*>($($arg),*),
            7 => $f::<7 $(, $g)*>($($arg),*),
            8 => $f::<8 $(, $g)*>($($arg),*),
            9 => $f::<9 $(, $g)*>($($arg),*),
            10 => $f::<10 $(, $g)*>($($arg),*),
            11 => $f::<11 $(, $g)*>($($arg),*),
            12 => $f::<12 $(, $g)*>($($arg),*),
            13 => $f::<13 $(, $g)*>($($arg),*),
            14 => $f::<14 $(, $g)*>($($arg),*),
            15 => $f::<15 $(, $g)*>($($arg),*),
            16 => $f::<16 $(, $g)*>($($arg),*),
            _ => $f::<0 $(, $g)*>($($arg),*),
        }
    };
}
pub(crate) use dispatch_fold_bits;

/// Partitions of 8-byte keys (records `recs`) into `2^k` partitions, with
/// `K = k` a constant (`K = 0`: `k` at run time).
fn fold_batch<const K: u32>(recs: std::slice::ChunksExact<'_, u8>, k: u32, out: &mut Vec<u32>) {
    let key8 = |r: &[u8]| r.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b));
    if K == 0 {
        out.extend(recs.map(|r| fold_to(key8(r), k) as u32));
    } else {
        out.extend(recs.map(|r| fold_const::<K>(key8(r)) as u32));
    }
}

/// The definition, one row at a time (kept to test [`fold_to`] against).
#[cfg(test)]
fn fold_to_by_rows(mut x: u64, k: u32) -> u64 {
    let mask = (1u64 << k) - 1;
    let mut out = 0u64;
    let mut odd = false;
    while x != 0 {
        let row = x & mask;
        out ^= if odd { row.reverse_bits() >> (64 - k) } else { row };
        x >>= k;
        odd = !odd;
    }
    out
}

impl Partitioner for FoldHash {
    fn partitions(&self) -> u32 {
        self.partitions
    }

    #[inline]
    fn partition(&self, key: &[u8]) -> u32 {
        let f = fold64(key);
        match self.bits {
            Some(0) => 0,
            Some(k) => fold_to(f, k) as u32,
            // Not a power of two: the fold alone has no low-bit structure to
            // reduce evenly, so mix once (SplitMix64's finaliser) and reduce.
            None => reduce(crate::mix::mix(f), self.partitions),
        }
    }

    fn name(&self) -> &'static str {
        "fold"
    }

    fn fast_path(&self) -> Option<FastPartition> {
        match self.bits {
            Some(bits @ 1..=16) => Some(FastPartition::Fold8 { bits }),
            _ => None,
        }
    }

    fn partition_batch(&self, view: &BatchView<'_>, out: &mut Vec<u32>) {
        let Layout::Fixed { key_width, value_width } = view.layout() else {
            out.extend(view.iter().map(|r| self.partition(r.key)));
            return;
        };
        let kw = usize::from(key_width);
        let width = kw + value_width as usize;
        out.reserve(view.len());
        let recs = view.payload().chunks_exact(width);
        // The common case, an 8-byte key into 2^k partitions, with `k`
        // known at compile time so the folding shifts are constants.
        match (self.bits, kw) {
            (Some(k), 8) if k > 0 => dispatch_fold_bits!(k, fold_batch(recs, k, out)),
            _ => out.extend(recs.map(|r| self.partition(&r[..kw]))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_rows_with_zig_zag() {
        // 0b10_00 | 0b01 << 2 ... rows of 2 bits: x = 0b_11_10_01
        // row0 = 01, row1 = 10 reversed = 01, row2 = 11 -> 01 ^ 01 ^ 11 = 11
        assert_eq!(fold_to(0b11_10_01, 2), 0b11);
        assert_eq!(fold_to(0, 5), 0);
    }

    #[test]
    fn fast_fold_equals_the_row_by_row_definition() {
        let mut x = 0x0123_4567_89AB_CDEFu64;
        for _ in 0..20_000 {
            x = crate::mix::mix(x);
            for k in 1..64 {
                assert_eq!(fold_to(x, k), fold_to_by_rows(x, k), "x = {x:#x}, k = {k}");
            }
        }
    }

    #[test]
    fn the_table_fold_equals_the_shift_fold() {
        fn check<const K: u32>(x: u64) {
            assert_eq!(fold_const::<K>(x), fold_to(x, K), "x = {x:#x}, k = {K}");
        }
        let mut x = 0x0123_4567_89AB_CDEFu64;
        for _ in 0..20_000 {
            x = crate::mix::mix(x);
            check::<1>(x);
            check::<2>(x);
            check::<3>(x);
            check::<4>(x);
            check::<5>(x);
            check::<6>(x);
            check::<16>(x);
        }
    }

    #[test]
    fn sequential_keys_are_perfectly_even_for_powers_of_two() {
        for p in [2u32, 8, 32, 1024] {
            let f = FoldHash::new(p).expect("partitions");
            let mut counts = vec![0u32; p as usize];
            for k in 0..(p as u64 * 64) {
                counts[f.partition(&k.to_le_bytes()) as usize] += 1;
            }
            assert!(counts.iter().all(|&c| c == 64), "P = {p}: {counts:?}");
        }
    }

    #[test]
    fn stays_in_range() {
        for p in [1u32, 3, 7, 1000, 65_536] {
            let f = FoldHash::new(p).expect("partitions");
            for k in 0..10_000u64 {
                assert!(f.partition(&k.to_be_bytes()[..(k % 9) as usize]) < p);
            }
        }
    }
}
