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
//! the bytes enter the engine.
//!
//! The attempt's output file and its spills are written by `output`.

use sluice_core::format::{BatchView, Layout};

use crate::error::{BridgeError, BridgeResult};
use crate::partitioner::{key_partition, PARTITION_KEY_BYTES};

/// Validates a JVM-filled buffer: `count` records in the variable layout,
/// each keyed by a partition id below `partitions`, followed by the host's
/// key bytes if `host_keys` (an operator shuffle) and by nothing otherwise.
pub fn check_buffer(
    data: &[u8],
    count: u32,
    partitions: u32,
    host_keys: bool,
) -> BridgeResult<BatchView<'_>> {
    let view = BatchView::new(Layout::Variable, count, data)
        .map_err(|source| BridgeError::Corrupt { what: "a map task's buffer".into(), source })?;
    for (i, r) in view.iter().enumerate() {
        let key_ok = if host_keys {
            r.key.len() >= PARTITION_KEY_BYTES
        } else {
            r.key.len() == PARTITION_KEY_BYTES
        };
        if !key_ok {
            return Err(BridgeError::Argument(format!(
                "record {i} of a map buffer has a {}-byte key; the partition id takes {PARTITION_KEY_BYTES}",
                r.key.len()
            )));
        }
        let p = key_partition(r.key);
        if p >= partitions {
            return Err(BridgeError::Argument(format!(
                "record {i} of a map buffer names partition {p}; the shuffle has {partitions}"
            )));
        }
    }
    Ok(view)
}
