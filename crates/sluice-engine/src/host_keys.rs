//! Host keys: a host-partitioned shuffle's records carry the partition the
//! host engine (Spark's `Partitioner`) already chose, in the first 4 bytes
//! of the key.
//!
//! Records reach the engine as `key = partition id (u32, little endian)`
//! (an operator shuffle appends the host's key bytes after it), `value =
//! the record as the host serialized it`. The engine's partition operator
//! then groups by that id like by any other function
//! ([`PartitionIdPartitioner`]).
//!
//! # Buffers
//! A map task serializes records into a buffer in the variable-length
//! layout (`klen:u32le vlen:u32le key value`). Nothing the host wrote is
//! trusted: [`check_buffer`] validates the payload as `count` records
//! (every length in bounds), checks that every key starts with a partition
//! id below the shuffle's count (and is exactly that id unless the shuffle
//! carries host keys), and cuts the buffer into the engine's segments, all
//! in one walk (`sluice_core::format::check_variable`); the checked payload
//! travels as a type of its own, so the engine neither validates nor cuts
//! it again and the partition function never sees an out-of-range id.

use sluice_core::format::{check_variable, CheckError, CheckedPayload};
use sluice_core::partition::Partitioner;

use crate::error::EngineError;

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
/// [`check_buffer`] rejects before any partitioning).
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

/// Validates a JVM-filled buffer: `count` records in the variable layout,
/// each keyed by a partition id below `partitions`, followed by the host's
/// key bytes if `host_keys` (an operator shuffle) and by nothing otherwise;
/// in the same walk, cuts it into spans of `segment_bytes` (the engine's
/// segments), so nothing walks the records again before they are
/// partitioned.
pub fn check_buffer(
    data: &[u8],
    count: u32,
    partitions: u32,
    host_keys: bool,
    segment_bytes: usize,
) -> Result<CheckedPayload<'_>, EngineError> {
    let checked = check_variable(count, data, segment_bytes, |i, key| {
        let key_ok = if host_keys {
            key.len() >= PARTITION_KEY_BYTES
        } else {
            key.len() == PARTITION_KEY_BYTES
        };
        if !key_ok {
            return Err(format!(
                "record {i} of a map buffer has a {}-byte key; the partition id takes {PARTITION_KEY_BYTES}",
                key.len()
            ));
        }
        let p = key_partition(key);
        if p >= partitions {
            return Err(format!(
                "record {i} of a map buffer names partition {p}; the shuffle has {partitions}"
            ));
        }
        Ok(())
    });
    checked.map_err(|e| match e {
        CheckError::Format(source) => {
            EngineError::Corrupt { what: "a map task's buffer".into(), source }
        }
        CheckError::Record(detail) => EngineError::Argument(detail),
    })
}
