//! Range partitioning for ordered output (TeraSort): `P - 1` sorted split
//! points, partition `p` receives the keys `k` with `split[p-1] <= k < split[p]`
//! (byte-wise lexicographic order).
//!
//! # Algorithm
//! A binary search over the split points costs 2.4-5x a hash on this machine
//! (`shared/design/facts.md`), mostly in unpredictable branches and cache
//! misses. So the lookup goes through a table indexed by the key's first two
//! bytes (zero padded):
//!
//! ```text
//! v = key[0] << 8 | key[1]
//! first[v] .. first[v + 1]   = the split points whose 2-byte prefix is v
//! partition = first[v] + #{ those split points <= key }
//! ```
//! Every split point with a smaller prefix is smaller than the key and every
//! one with a larger prefix is larger (zero padding keeps prefixes monotone),
//! so only the split points sharing the key's prefix are compared, usually
//! none or one. The table has [`RANGE_PREFIX_TABLE_ENTRIES`] + 1 `u32`
//! entries (256 KiB), built once per shuffle.

use super::{check_partitions, Partitioner};
use crate::partition::PartitionError;

/// Entries of the prefix table (one per 2-byte prefix).
pub const RANGE_PREFIX_TABLE_ENTRIES: usize = 1 << 16;

/// A range partitioner over sorted split points.
#[derive(Clone)]
pub struct RangePartitioner {
    /// Split points, concatenated.
    bytes: Vec<u8>,
    /// `ends[i]` is the end of split point `i` in `bytes`.
    ends: Vec<usize>,
    /// `first[v]`: number of split points whose prefix is below `v`.
    first: Vec<u32>,
}

impl std::fmt::Debug for RangePartitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangePartitioner").field("partitions", &self.partitions()).finish()
    }
}

#[inline]
fn prefix16(key: &[u8]) -> usize {
    let a = key.first().copied().unwrap_or(0);
    let b = key.get(1).copied().unwrap_or(0);
    (usize::from(a) << 8) | usize::from(b)
}

impl RangePartitioner {
    /// A partitioner over explicit split points, which must be sorted
    /// (non-decreasing); `splits.len() + 1` partitions.
    pub fn new<K: AsRef<[u8]>>(splits: &[K]) -> Result<Self, PartitionError> {
        let partitions = u32::try_from(splits.len() + 1).unwrap_or(u32::MAX);
        check_partitions(partitions)?;
        if splits.windows(2).any(|w| w[0].as_ref() > w[1].as_ref()) {
            return Err(PartitionError::UnsortedSplits);
        }
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(splits.len());
        for s in splits {
            bytes.extend_from_slice(s.as_ref());
            ends.push(bytes.len());
        }
        let mut first = vec![0u32; RANGE_PREFIX_TABLE_ENTRIES + 1];
        let mut i = 0usize;
        for (v, slot) in first.iter_mut().enumerate() {
            while i < splits.len() && prefix16(splits[i].as_ref()) < v {
                i += 1;
            }
            *slot = i as u32;
        }
        Ok(RangePartitioner { bytes, ends, first })
    }

    /// Split points at the `partitions`-quantiles of a sample of keys
    /// (TeraSort's sampling). The sample is sorted in place.
    pub fn from_sample(sample: &mut [&[u8]], partitions: u32) -> Result<Self, PartitionError> {
        check_partitions(partitions)?;
        if partitions > 1 && sample.is_empty() {
            return Err(PartitionError::EmptySample);
        }
        sample.sort_unstable();
        let n = sample.len() as u64;
        let splits: Vec<&[u8]> = (1..u64::from(partitions))
            .map(|i| sample[((i * n) / u64::from(partitions)) as usize])
            .collect();
        Self::new(&splits)
    }

    fn split(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// The partition by plain binary search over all split points (the
    /// reference the table lookup is tested against).
    pub fn partition_by_search(&self, key: &[u8]) -> u32 {
        self.upper_bound(key, 0, self.ends.len())
    }

    /// Number of split points in `lo..hi` that are `<= key`, plus `lo`.
    #[inline]
    fn upper_bound(&self, key: &[u8], mut lo: usize, mut hi: usize) -> u32 {
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.split(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo as u32
    }
}

impl Partitioner for RangePartitioner {
    fn partitions(&self) -> u32 {
        self.ends.len() as u32 + 1
    }

    #[inline]
    fn partition(&self, key: &[u8]) -> u32 {
        let v = prefix16(key);
        self.upper_bound(key, self.first[v] as usize, self.first[v + 1] as usize)
    }

    fn name(&self) -> &'static str {
        "range"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_points_bound_partitions() {
        let r = RangePartitioner::new(&[&b"b"[..], b"d", b"d\x00", b"f"]).expect("splits");
        assert_eq!(r.partitions(), 5);
        assert_eq!(r.partition(b""), 0);
        assert_eq!(r.partition(b"a"), 0);
        assert_eq!(r.partition(b"b"), 1);
        assert_eq!(r.partition(b"c\xff"), 1);
        assert_eq!(r.partition(b"d"), 2);
        assert_eq!(r.partition(b"d\x00"), 3);
        assert_eq!(r.partition(b"zz"), 4);
    }

    #[test]
    fn unsorted_splits_are_refused() {
        assert!(matches!(
            RangePartitioner::new(&[&b"b"[..], b"a"]),
            Err(PartitionError::UnsortedSplits)
        ));
    }

    #[test]
    fn table_lookup_matches_binary_search() {
        let mut rng = crate::datagen::SplitMix64::new(3);
        let keys: Vec<Vec<u8>> = (0..5000)
            .map(|i| {
                let mut k = vec![0u8; (i % 5) as usize];
                rng.fill(&mut k);
                if i % 3 == 0 && !k.is_empty() {
                    k[0] = b'x'; // many keys sharing a prefix
                }
                k
            })
            .collect();
        let mut sample: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let r = RangePartitioner::from_sample(&mut sample, 300).expect("sample");
        for k in &keys {
            assert_eq!(r.partition(k), r.partition_by_search(k), "{k:?}");
        }
    }
}
