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

/// Most bytes a reading thread's buffers keep between blocks (4 MiB): a
/// block of a huge record (up to 768 MiB) is inflated into a buffer of its
/// own size, which is freed once the block is read instead of staying with
/// the thread (a Spark executor's task threads live as long as it does).
/// Blocks are written at about 1 MiB, so ordinary ones reuse the buffer.
pub const THREAD_BUFFER_KEEP_BYTES: usize = 4 << 20;

/// Bytes the calling thread's decoder holds on to between blocks.
pub fn thread_decoder_bytes() -> usize {
    DECODER.with(|d| d.borrow().scratch_capacity())
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
    let result = DECODER.with(|d| {
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
    });
    DECODER.with(|d| d.borrow_mut().trim(THREAD_BUFFER_KEEP_BYTES));
    result
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
    let room = out.len();
    let mut at = 0usize;
    let records = decode_values_with(frame, what, |value| {
        let dst = out.get_mut(at..at + value.len()).ok_or_else(|| {
            EngineError::Argument(format!(
                "output buffer of {room} bytes too small for block of {what}"
            ))
        })?;
        dst.copy_from_slice(value);
        at += value.len();
        Ok(())
    })?;
    Ok((at, records))
}

/// [`decode_values`] handing each value to `f` in order, for a caller that
/// writes them elsewhere; returns the records.
pub fn decode_values_with(
    frame: &[u8],
    what: &BlockName,
    mut f: impl FnMut(&[u8]) -> EngineResult<()>,
) -> EngineResult<usize> {
    debug_assert!(frame.len() >= HEADER_BYTES);
    with_decoded_block(frame, what, |records| {
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
            f(r.value)?;
        }
        Ok(records.len())
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

#[cfg(test)]
mod tests {
    use sluice_core::format::{BlockEncoder, Codec, Layout, RecordBatch};

    use super::*;

    /// An lz4 block of one record of partition 0 with a `value_bytes` value.
    fn block(value_bytes: usize) -> Vec<u8> {
        let mut batch = RecordBatch::new(Layout::Variable);
        batch.push(&0u32.to_le_bytes(), &vec![7u8; value_bytes]).expect("push");
        let mut out = Vec::new();
        BlockEncoder::new(Codec::Lz4).expect("encoder").encode(&batch, &mut out).expect("encode");
        out
    }

    #[test]
    fn a_thread_keeps_no_huge_inflate_buffer_after_a_huge_block() {
        std::thread::spawn(|| {
            let name = BlockName::single(0, 0, 0, 0);
            let small = block(100 << 10);
            let mut out = vec![0u8; 200 << 10];
            decode_values(&small, &name, &mut out).expect("small block");
            let kept = thread_decoder_bytes();
            assert!((100 << 10..=THREAD_BUFFER_KEEP_BYTES).contains(&kept), "{kept}");
            // A 64 MiB record: inflated into a buffer of its size, freed after.
            let huge = block(64 << 20);
            let mut out = vec![0u8; (64 << 20) + 64];
            let (bytes, records) = decode_values(&huge, &name, &mut out).expect("huge block");
            assert_eq!((bytes, records), (64 << 20, 1));
            assert!(
                thread_decoder_bytes() <= THREAD_BUFFER_KEEP_BYTES,
                "{}",
                thread_decoder_bytes()
            );
        })
        .join()
        .expect("no panic");
    }
}
