//! A fetched block of a host-owned shuffle: where it was read, its checks,
//! and its records.
//!
//! The host reads a block's 36-byte header from the fetched stream, asks
//! [`frame_info`] how long the block is (the header is validated first:
//! magic, version, header CRC, every length against its limit), reads the
//! rest, and either calls [`decode_values`] (a plain shuffle: the values,
//! which the map side's serializer wrote and which a relocatable
//! serializer can read back to back, are copied out in order) or feeds it
//! to its reduce task (an operator shuffle, `task`). Either way the payload
//! CRC is checked, the payload inflated and validated, and each record's
//! key must name a partition the block was fetched for.

use std::cell::RefCell;

use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::{BatchView, BlockDecoder, BlockHeader};

use crate::error::{EngineError, EngineResult};
use crate::host_keys::{key_partition, PARTITION_KEY_BYTES};

thread_local! {
    /// One decoder per reading thread, so its inflate buffer is reused.
    static DECODER: RefCell<BlockDecoder> = RefCell::new(BlockDecoder::new());
}

/// Where a block was read: Spark's block name and the block's byte offset
/// in the fetched segment, for error messages.
#[derive(Debug, Clone, Copy)]
pub struct BlockName {
    /// Spark shuffle id.
    pub shuffle: i32,
    /// Map task id.
    pub map: i64,
    /// Reduce partition (the first of a batch).
    pub reduce: i32,
    /// One past the last reduce partition: `reduce + 1` for one
    /// partition's segment, more for a batch of contiguous partitions
    /// fetched as one segment (Spark's `ShuffleBlockBatchId`).
    pub reduce_end: i32,
    /// Offset of the block in the segment, in bytes.
    pub offset: i64,
}

impl BlockName {
    /// One partition's segment.
    pub fn single(shuffle: i32, map: i64, reduce: i32, offset: i64) -> BlockName {
        BlockName { shuffle, map, reduce, reduce_end: reduce.saturating_add(1), offset }
    }

    /// Whether records of `partition` belong in this segment.
    pub fn holds(&self, partition: u32) -> bool {
        i64::from(partition) >= i64::from(self.reduce)
            && i64::from(partition) < i64::from(self.reduce_end)
    }
}

impl std::fmt::Display for BlockName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.reduce_end == self.reduce.saturating_add(1) {
            write!(
                f,
                "shuffle_{}_{}_{} at byte {}",
                self.shuffle, self.map, self.reduce, self.offset
            )
        } else {
            write!(
                f,
                "shuffle_{}_{}_{}_{} at byte {}",
                self.shuffle, self.map, self.reduce, self.reduce_end, self.offset
            )
        }
    }
}

/// What a validated header says about its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    /// Bytes of the whole block, header included.
    pub frame_len: usize,
    /// Bytes of its uncompressed payload (a bound on its values' bytes).
    pub uncompressed_len: usize,
}

/// Validates the header at the start of `header` (at least
/// [`HEADER_BYTES`]) of a block of `what`.
pub fn frame_info(header: &[u8], what: &BlockName) -> EngineResult<FrameInfo> {
    let h = BlockHeader::parse(header)
        .map_err(|source| EngineError::Corrupt { what: what.to_string(), source })?;
    Ok(FrameInfo { frame_len: h.frame_len(), uncompressed_len: h.uncompressed_len as usize })
}

/// Decodes the one block `frame` holds with this thread's decoder (CRC,
/// lengths, layout; the frame must be exactly the block) and hands its
/// records to `f`. Shared by every reduce-side reader.
pub(crate) fn with_decoded_block<T>(
    frame: &[u8],
    what: &BlockName,
    f: impl FnOnce(&BatchView<'_>) -> EngineResult<T>,
) -> EngineResult<T> {
    DECODER.with(|d| {
        let mut decoder = d.borrow_mut();
        let block = decoder
            .decode(frame)
            .map_err(|source| EngineError::Corrupt { what: what.to_string(), source })?;
        if block.frame_len != frame.len() {
            return Err(EngineError::Misplaced {
                what: what.to_string(),
                detail: format!(
                    "block is {} bytes, frame read was {}",
                    block.frame_len,
                    frame.len()
                ),
            });
        }
        f(&block.records)
    })
}

/// Decodes the block `frame` of the segment `what` (one reduce partition,
/// or a batch of contiguous ones) and copies its records' values into
/// `out`, back to back. Every record must belong to the segment's
/// partitions. Returns (bytes written, records).
pub fn decode_values(
    frame: &[u8],
    what: &BlockName,
    out: &mut [u8],
) -> EngineResult<(usize, usize)> {
    debug_assert!(frame.len() >= HEADER_BYTES);
    with_decoded_block(frame, what, |records| {
        let mut at = 0usize;
        for (i, r) in records.iter().enumerate() {
            if r.key.len() != PARTITION_KEY_BYTES || !what.holds(key_partition(r.key)) {
                return Err(EngineError::Misplaced {
                    what: what.to_string(),
                    detail: format!(
                        "record {i} is keyed {:?}, not a partition of {}..{}",
                        r.key, what.reduce, what.reduce_end
                    ),
                });
            }
            let room = out.len();
            let dst = out.get_mut(at..at + r.value.len()).ok_or_else(|| {
                EngineError::Argument(format!(
                    "output buffer of {room} bytes too small for block of {what}"
                ))
            })?;
            dst.copy_from_slice(r.value);
            at += r.value.len();
        }
        Ok((at, records.len()))
    })
}

/// Decodes one fetched block (`frame`, exactly one block) with this
/// thread's decoder, checks that every record carries the block's reduce
/// partition (`what.reduce`, within the task's `partitions`) in its first
/// four key bytes, and hands the records to `f`.
pub(crate) fn with_checked_block<T>(
    frame: &[u8],
    what: &BlockName,
    partitions: &std::ops::Range<u32>,
    f: impl FnOnce(&BatchView<'_>) -> EngineResult<T>,
) -> EngineResult<T> {
    with_decoded_block(frame, what, |records| {
        for (i, r) in records.iter().enumerate() {
            if r.key.len() < PARTITION_KEY_BYTES
                || !partitions.contains(&key_partition(r.key))
                || !what.holds(key_partition(r.key))
            {
                return Err(EngineError::Misplaced {
                    what: what.to_string(),
                    detail: format!(
                        "record {i} does not carry partition {} of the task's {partitions:?}",
                        what.reduce
                    ),
                });
            }
        }
        f(records)
    })
}
