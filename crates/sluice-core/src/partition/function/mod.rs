//! Partition functions: which destination partition a key goes to.
//!
//! | function | use | cost |
//! |---|---|---|
//! | [`FoldHash`] | PSACS's choice: even spread, not collision resistance | a few XORs and a bit reversal per 8 key bytes |
//! | [`Xxh3Hash`] | a strong general-purpose hash, robust to adversarial keys | about 1 ns for short keys |
//! | [`MaskPartitioner`] | the thesis: `key & (P - 1)` (else `key % P`) on the key's first 8 bytes | one AND |
//! | [`RangePartitioner`] | TeraSort: sorted split points from a sample, for ordered output | a table lookup on a 2-byte prefix, then a short search |
//!
//! Hashes are reduced to `0..P` by multiply-shift (`(h * P) >> 64`), which
//! keeps the high bits' quality and needs no division; the mask partitioner
//! uses the low bits as the thesis does.

use crate::format::{BatchView, Layout};

pub(crate) mod fold;
mod mask;
mod range;
mod xxh3;

pub use fold::FoldHash;
pub use mask::MaskPartitioner;
pub use range::{RangePartitioner, RANGE_PREFIX_TABLE_ENTRIES};
pub use xxh3::Xxh3Hash;

/// Largest number of partitions a partitioner accepts (2^24).
///
/// Real shuffles use up to some 10^5 partitions; the cap bounds the per-
/// partition arrays every strategy allocates.
pub const PARTITIONS_MAX: u32 = 1 << 24;

/// Maps keys to partitions `0..partitions()`.
pub trait Partitioner: Send + Sync + std::fmt::Debug {
    /// Number of partitions.
    fn partitions(&self) -> u32;

    /// The partition of `key`, in `0..partitions()`.
    fn partition(&self, key: &[u8]) -> u32;

    /// Short name for reports.
    fn name(&self) -> &'static str;

    /// A closed form of this function that writers can compute inline in
    /// their copy loop instead of in a separate pass, if it has one.
    fn fast_path(&self) -> Option<FastPartition> {
        None
    }

    /// Appends the partition of every record of `view` to `out`.
    ///
    /// One dynamic call per batch: the loop is compiled for each
    /// implementation, so `partition` is inlined into it, and fixed-width
    /// records are walked with a constant stride.
    fn partition_batch(&self, view: &BatchView<'_>, out: &mut Vec<u32>) {
        out.reserve(view.len());
        match view.layout() {
            Layout::Fixed { key_width, value_width } => {
                let kw = usize::from(key_width);
                let width = kw + value_width as usize;
                for rec in view.payload().chunks_exact(width) {
                    out.push(self.partition(&rec[..kw]));
                }
            }
            Layout::Variable => out.extend(view.iter().map(|r| self.partition(r.key))),
        }
    }
}

/// Closed forms of the built-in functions for fixed-width keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastPartition {
    /// The first 4 key bytes as a little-endian `u32`, AND this mask (keys
    /// of at least 4 bytes): the thesis's mask function.
    Mask(u32),
    /// PSACS's fold of an 8-byte key (little-endian word) into `bits` bits,
    /// `bits` in 1..=16.
    Fold8 {
        /// log2 of the partition count.
        bits: u32,
    },
}

/// `h` reduced to `0..n` by multiply-shift (Lemire's fast range).
#[inline]
pub(crate) fn reduce(h: u64, n: u32) -> u32 {
    ((u128::from(h) * u128::from(n)) >> 64) as u32
}

/// The key's first 8 bytes as a little-endian integer, zero padded.
#[inline]
pub(crate) fn key_prefix_u64(key: &[u8]) -> u64 {
    if let Some(head) = key.first_chunk::<8>() {
        return u64::from_le_bytes(*head);
    }
    // Short keys without a variable-length memcpy: a 4-byte load where
    // possible, then the remaining bytes one by one.
    let (mut w, start) = match key.first_chunk::<4>() {
        Some(head) => (u64::from(u32::from_le_bytes(*head)), 4),
        None => (0, 0),
    };
    for (i, &b) in key.iter().enumerate().skip(start) {
        w |= u64::from(b) << (8 * i);
    }
    w
}

/// Checks a partition count.
pub(crate) fn check_partitions(n: u32) -> Result<u32, crate::partition::PartitionError> {
    if n == 0 || n > PARTITIONS_MAX {
        return Err(crate::partition::PartitionError::PartitionCount {
            got: n,
            max: PARTITIONS_MAX,
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_prefix_pads_with_zeros() {
        for len in 0..=10usize {
            let key: Vec<u8> = (1..=len as u8).collect();
            let mut w = [0u8; 8];
            let n = len.min(8);
            w[..n].copy_from_slice(&key[..n]);
            assert_eq!(key_prefix_u64(&key), u64::from_le_bytes(w), "len {len}");
        }
    }
}
