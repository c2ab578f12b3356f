//! xxh3 (64-bit) reduced by multiply-shift: a strong, fast general hash.

use super::{check_partitions, reduce, Partitioner};
use crate::partition::PartitionError;

/// xxh3-64 of the key bytes, reduced to the partition count.
#[derive(Clone, Debug)]
pub struct Xxh3Hash {
    partitions: u32,
    seed: u64,
}

impl Xxh3Hash {
    /// An xxh3 partitioner with seed 0.
    pub fn new(partitions: u32) -> Result<Self, PartitionError> {
        Self::with_seed(partitions, 0)
    }

    /// An xxh3 partitioner with a seed (different shuffles of the same keys
    /// can use different seeds to avoid correlated skew).
    pub fn with_seed(partitions: u32, seed: u64) -> Result<Self, PartitionError> {
        Ok(Xxh3Hash { partitions: check_partitions(partitions)?, seed })
    }
}

impl Partitioner for Xxh3Hash {
    fn partitions(&self) -> u32 {
        self.partitions
    }

    #[inline]
    fn partition(&self, key: &[u8]) -> u32 {
        reduce(xxhash_rust::xxh3::xxh3_64_with_seed(key, self.seed), self.partitions)
    }

    fn name(&self) -> &'static str {
        "xxh3"
    }
}
