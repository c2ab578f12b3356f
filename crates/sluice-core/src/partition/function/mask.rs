//! The thesis's partition function: `key & (P - 1)` for a power-of-two `P`,
//! else `key % P`, on the key's first 8 bytes read as a little-endian integer.
//!
//! It is the cheapest function and perfectly even on uniform or sequential
//! integer keys, and poor on keys whose low bits are structured (for example
//! multiples of P). Use it where the thesis experiments need it, and a hash
//! otherwise.

use super::{check_partitions, key_prefix_u64, FastPartition, Partitioner};
use crate::partition::PartitionError;

/// `key & (P - 1)` or `key % P`.
#[derive(Clone, Debug)]
pub struct MaskPartitioner {
    partitions: u32,
    mask: Option<u64>,
}

impl MaskPartitioner {
    /// A mask (power of two) or modulo partitioner.
    pub fn new(partitions: u32) -> Result<Self, PartitionError> {
        let partitions = check_partitions(partitions)?;
        let mask = partitions.is_power_of_two().then(|| u64::from(partitions) - 1);
        Ok(MaskPartitioner { partitions, mask })
    }
}

impl Partitioner for MaskPartitioner {
    fn partitions(&self) -> u32 {
        self.partitions
    }

    #[inline]
    fn partition(&self, key: &[u8]) -> u32 {
        let k = key_prefix_u64(key);
        match self.mask {
            Some(m) => (k & m) as u32,
            None => (k % u64::from(self.partitions)) as u32,
        }
    }

    fn name(&self) -> &'static str {
        "mask"
    }

    fn fast_path(&self) -> Option<FastPartition> {
        // Partition counts are at most 2^16, so the mask fits the low bytes
        // and the first 4 key bytes decide it.
        self.mask.and_then(|m| u32::try_from(m).ok()).map(FastPartition::Mask)
    }
}
