//! The map side of a host-partitioned shuffle: check a buffer the JVM
//! filled.
//!
//! # Buffers
//! A map task serializes records into a direct `ByteBuffer` in the engine's
//! variable-length layout (`klen:u32le vlen:u32le key value`, key = the
//! partition id as u32 LE; an offloaded operator's shuffle appends the host's
//! key bytes to it, see `ops`). Nothing the JVM wrote is trusted: the
//! payload is validated as `count` records (every length in bounds) and
//! every key must start with a partition id below the shuffle's count
//! (and be exactly that id unless the shuffle carries host keys) before
//! the bytes enter the engine, in one walk that also cuts the buffer into
//! the engine's segments (`sluice_core::format::check_variable`); the
//! checked payload travels as a type of its own, so the engine neither
//! validates nor cuts it again.
//!
//! The attempt's output file and its spills are written by `output`.

use sluice_core::format::{check_variable, CheckError, CheckedPayload};

use crate::error::{BridgeError, BridgeResult};
use crate::partitioner::{key_partition, PARTITION_KEY_BYTES};

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
) -> BridgeResult<CheckedPayload<'_>> {
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
            BridgeError::Corrupt { what: "a map task's buffer".into(), source }
        }
        CheckError::Record(detail) => BridgeError::Argument(detail),
    })
}
