//! The partition function of a host-partitioned shuffle: the host engine
//! (Spark's `Partitioner`) already chose each record's partition, and the
//! record's 4-byte key carries it.
//!
//! Records reach the engine as `key = partition id (u32, little endian)`,
//! `value = the record as the host serialized it`. The engine's partition
//! operator then groups by that id like by any other function; the ids were
//! checked against the partition count when the buffer came in
//! ([`crate::map::check_buffer`]), so the function itself never sees an
//! out-of-range id.

use sluice_core::partition::Partitioner;

/// Bytes of the key that carries a record's partition id.
pub const PARTITION_KEY_BYTES: usize = 4;

/// Reads the partition id the host wrote into each key.
#[derive(Debug, Clone, Copy)]
pub struct PartitionIdPartitioner {
    partitions: u32,
}

impl PartitionIdPartitioner {
    /// A function over `partitions` ids (at least 1).
    pub fn new(partitions: u32) -> Self {
        PartitionIdPartitioner { partitions: partitions.max(1) }
    }
}

/// The id a 4-byte key carries (0 for a shorter key, which
/// [`crate::map::check_buffer`] rejects before any partitioning).
#[inline]
pub fn key_partition(key: &[u8]) -> u32 {
    match key.first_chunk::<PARTITION_KEY_BYTES>() {
        Some(b) => u32::from_le_bytes(*b),
        None => 0,
    }
}

impl Partitioner for PartitionIdPartitioner {
    fn partitions(&self) -> u32 {
        self.partitions
    }

    #[inline]
    fn partition(&self, key: &[u8]) -> u32 {
        // Checked on entry; the clamp keeps an impossible id in range
        // rather than indexing out of bounds.
        key_partition(key).min(self.partitions - 1)
    }

    fn name(&self) -> &'static str {
        "host-id"
    }
}
