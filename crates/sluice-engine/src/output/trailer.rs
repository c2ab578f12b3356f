//! The end-to-end check of a partition segment in a Spark data file.
//!
//! Every block carries its own CRCs, but a segment cut at a block boundary
//! (a truncated file, a short read) or with blocks swapped or dropped is
//! made of intact blocks. So each non-empty partition segment of a map
//! output ends with a 36-byte **trailer** that sums up what precedes it:
//!
//! ```text
//! offset size field            notes
//!      0    4 magic            b"SLSE" (not a block's b"SLBK")
//!      4    1 version          SEGMENT_VERSION (2; 1 was the segment without a trailer)
//!      5    3 reserved         0
//!      8    4 partition        u32 LE, the segment's reduce partition
//!     12    4 next partition   u32 LE, the next non-empty partition of the map output,
//!                              or the partition count when there is none
//!     16    8 records          u64 LE, records in the segment's blocks
//!     24    4 blocks           u32 LE, blocks before the trailer
//!     28    4 blocks CRC       CRC32C of the segment's bytes before the trailer
//!     32    4 trailer CRC      CRC32C of bytes 0..32
//! ```
//!
//! A reader keeps a running count of records and blocks and a CRC32C of
//! the block bytes; at a trailer it checks all three ([`segment_end`]) and
//! starts over. At the end of a fetched segment the last thing read must
//! be a trailer, and for a batch of contiguous partitions (Spark's batch
//! fetch) the last trailer's next partition must lie past the batch, so a
//! cut at a partition boundary is found too. Spark fetches only segments
//! its index says are non-empty, so an empty read is a cut as well.

use sluice_core::format::checksum::crc32c;
use sluice_core::format::header::HEADER_BYTES;

use crate::error::{EngineError, EngineResult};
use crate::reduce::block::BlockName;

/// The four magic bytes of a segment trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"SLSE";
/// The segment layout's version: 2 ends each segment with a trailer.
pub const SEGMENT_VERSION: u8 = 2;
/// Bytes of a trailer: a block header's size, so a reader reads the same
/// 36 bytes first and then learns which of the two it has.
pub const TRAILER_BYTES: usize = HEADER_BYTES;
/// The bit `frameInfo` sets in its answer for a trailer (a block's answer
/// is two lengths below 2^32 each, so it never has it); the Java side
/// declares the same value, checked by a test.
pub const FRAME_TRAILER_FLAG: i64 = 1 << 62;
/// Bytes covered by the trailer's own CRC.
const TRAILER_CRC_OFFSET: usize = 32;

/// What a segment's trailer records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentTrailer {
    /// The segment's reduce partition.
    pub partition: u32,
    /// The next non-empty partition of the map output, or the partition
    /// count when there is none.
    pub next_partition: u32,
    /// Records in the segment's blocks.
    pub records: u64,
    /// Blocks in the segment.
    pub blocks: u32,
    /// CRC32C of the segment's bytes before the trailer.
    pub crc: u32,
}

impl SegmentTrailer {
    /// The trailer's bytes, its own CRC included.
    pub fn to_bytes(&self) -> [u8; TRAILER_BYTES] {
        let mut b = [0u8; TRAILER_BYTES];
        b[0..4].copy_from_slice(&TRAILER_MAGIC);
        b[4] = SEGMENT_VERSION;
        b[8..12].copy_from_slice(&self.partition.to_le_bytes());
        b[12..16].copy_from_slice(&self.next_partition.to_le_bytes());
        b[16..24].copy_from_slice(&self.records.to_le_bytes());
        b[24..28].copy_from_slice(&self.blocks.to_le_bytes());
        b[28..32].copy_from_slice(&self.crc.to_le_bytes());
        let own = crc32c(&b[..TRAILER_CRC_OFFSET]);
        b[TRAILER_CRC_OFFSET..].copy_from_slice(&own.to_le_bytes());
        b
    }

    /// Whether these 36 (or more) bytes start with a trailer's magic
    /// rather than a block's.
    pub fn is_trailer(bytes: &[u8]) -> bool {
        bytes.starts_with(&TRAILER_MAGIC)
    }

    /// Parses and checks a trailer (magic, version, reserved bytes, CRC).
    pub fn parse(bytes: &[u8], what: &BlockName) -> EngineResult<SegmentTrailer> {
        let bad = |detail: String| EngineError::Misplaced { what: what.to_string(), detail };
        let b = bytes
            .get(..TRAILER_BYTES)
            .ok_or_else(|| bad(format!("segment trailer cut at {} bytes", bytes.len())))?;
        if b[0..4] != TRAILER_MAGIC {
            return Err(bad(format!("segment trailer magic is {:?}", &b[0..4])));
        }
        if b[4] != SEGMENT_VERSION {
            return Err(bad(format!(
                "segment trailer version {} (this build reads {SEGMENT_VERSION})",
                b[4]
            )));
        }
        let stored = u32_at(b, TRAILER_CRC_OFFSET);
        let computed = crc32c(&b[..TRAILER_CRC_OFFSET]);
        if stored != computed {
            return Err(bad(format!(
                "segment trailer CRC is {stored:#010x}, its bytes give {computed:#010x}"
            )));
        }
        if b[5..8] != [0, 0, 0] {
            return Err(bad("segment trailer reserved bytes are not 0".into()));
        }
        Ok(SegmentTrailer {
            partition: u32_at(b, 8),
            next_partition: u32_at(b, 12),
            records: u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()),
            blocks: u32_at(b, 24),
            crc: u32_at(b, 28),
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What a reader counted since the segment started (or since the last
/// trailer of a batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Records decoded.
    pub records: u64,
    /// Blocks read.
    pub blocks: u32,
    /// CRC32C of the blocks' bytes, headers included.
    pub crc: u32,
    /// The partition this trailer must name: the segment's first partition
    /// (Spark starts a batch at a partition its map status says is not
    /// empty) or, after a trailer, that trailer's next partition; `None`
    /// accepts any partition of the range.
    pub expected: Option<u32>,
}

/// Checks the trailer `bytes` that ends a segment of `what` against what
/// the reader counted; returns the trailer's next partition.
pub fn segment_end(bytes: &[u8], what: &BlockName, counted: &Counted) -> EngineResult<u32> {
    let t = SegmentTrailer::parse(bytes, what)?;
    let bad = |detail: String| EngineError::Misplaced { what: what.to_string(), detail };
    if !what.holds(t.partition) {
        return Err(bad(format!(
            "segment trailer names partition {}, the segment holds {}..{}",
            t.partition, what.reduce, what.reduce_end
        )));
    }
    if let Some(p) = counted.expected {
        if t.partition != p {
            return Err(bad(format!(
                "segment trailer names partition {}, partition {p} was due: a segment is missing",
                t.partition
            )));
        }
    }
    if t.next_partition <= t.partition {
        return Err(bad(format!(
            "segment trailer's next partition {} is not after its partition {}",
            t.next_partition, t.partition
        )));
    }
    if (t.records, t.blocks, t.crc) != (counted.records, counted.blocks, counted.crc) {
        return Err(bad(format!(
            "segment of partition {} holds {} records in {} blocks (CRC {:#010x}) by its trailer, \
             {} records in {} blocks (CRC {:#010x}) were read: blocks are missing or out of place",
            t.partition, t.records, t.blocks, t.crc, counted.records, counted.blocks, counted.crc
        )));
    }
    Ok(t.next_partition)
}

/// Checks the end of a fetched segment of `what`: the last thing read
/// must have been a trailer (`last_next` is its next partition, `None` if
/// no trailer ended the bytes read) with no block after it, and the
/// trailer's next partition must lie past the segment's partitions.
pub fn fetch_end(what: &BlockName, last_next: Option<u32>, blocks_after: u32) -> EngineResult<()> {
    let bad = |detail: String| EngineError::Misplaced { what: what.to_string(), detail };
    match last_next {
        None if blocks_after == 0 => Err(bad(
            "the segment is empty, but Spark's index says it is not: the data file was cut short"
                .into(),
        )),
        None => Err(bad(format!(
            "the segment ends after {blocks_after} blocks without its trailer: it was cut short"
        ))),
        Some(_) if blocks_after > 0 => Err(bad(format!(
            "the segment ends after {blocks_after} blocks without their trailer: it was cut short"
        ))),
        Some(next) if i64::from(next) < i64::from(what.reduce_end) => Err(bad(format!(
            "the segment ends before partition {next}, which its last trailer says is not empty: \
             it was cut short"
        ))),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> BlockName {
        BlockName { shuffle: 1, map: 2, reduce: 3, reduce_end: 5, offset: 0 }
    }

    fn sample() -> SegmentTrailer {
        SegmentTrailer { partition: 3, next_partition: 4, records: 10, blocks: 2, crc: 0xabcd }
    }

    #[test]
    fn round_trip_and_every_flipped_bit_is_caught() {
        let t = sample();
        let b = t.to_bytes();
        assert_eq!(SegmentTrailer::parse(&b, &name()).ok(), Some(t));
        for i in 0..TRAILER_BYTES * 8 {
            let mut c = b;
            c[i / 8] ^= 1 << (i % 8);
            assert!(SegmentTrailer::parse(&c, &name()).is_err(), "bit {i} flipped went unseen");
        }
        assert!(SegmentTrailer::parse(&b[..20], &name()).is_err());
    }

    #[test]
    fn counts_partitions_and_ends_are_checked() {
        let b = sample().to_bytes();
        let good = Counted { records: 10, blocks: 2, crc: 0xabcd, expected: Some(3) };
        assert_eq!(segment_end(&b, &name(), &good).ok(), Some(4));
        for bad in [
            Counted { records: 9, ..good },
            Counted { blocks: 1, ..good },
            Counted { crc: 1, ..good },
            Counted { expected: Some(4), ..good },
        ] {
            assert!(segment_end(&b, &name(), &bad).is_err(), "{bad:?}");
        }
        let outside = BlockName { reduce: 4, reduce_end: 5, ..name() };
        assert!(segment_end(&b, &outside, &good).is_err());
        assert!(fetch_end(&name(), Some(5), 0).is_ok());
        assert!(fetch_end(&name(), Some(4), 0).is_err(), "partition 4 of 3..5 missing");
        assert!(fetch_end(&name(), None, 0).is_err(), "empty read");
        assert!(fetch_end(&name(), None, 3).is_err(), "no trailer");
        assert!(fetch_end(&name(), Some(5), 1).is_err(), "blocks after the trailer");
    }
}
