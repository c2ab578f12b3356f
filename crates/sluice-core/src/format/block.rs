//! Encoding and decoding of single blocks.
//!
//! # Algorithm
//!
//! Encode (appends one block to an output buffer that the caller reuses):
//! ```text
//! reserve 36 header bytes ─► stored payload ─► CRC32C(stored) ─► write header
//!                            none: 32 KiB chunks, each checksummed, then
//!                                  copied from L1 with streaming stores
//!                                  (one read, one write of memory per byte)
//!                            lz4 / zstd: compress (reused codec state)
//! ```
//!
//! Decode (never panics, whatever the input):
//! ```text
//! parse + validate header ─► stored bytes present? ─► CRC32C(stored) matches?
//!   ─► none: view the stored bytes in place (zero copy)
//!      lz4 / zstd: inflate into a reused scratch buffer of exactly
//!                  uncompressed_len (capped) bytes
//!   ─► validate the payload for its layout ─► BatchView
//! ```
//! The checksum is verified before the codec sees a byte, so decompressors
//! only ever run on bytes the writer produced, and a corrupt block is reported
//! as a checksum mismatch rather than as whatever the codec makes of it.

use crate::format::batch::{validate_payload, BatchView, RecordBatch};
use crate::format::checksum::{crc32c, Crc32c};
use crate::format::codec::{Codec, Compressor, Decompressor};
use crate::format::copy::{append_streaming, streaming_fence, STREAMING_COPY_MIN_BYTES};
use crate::format::error::FormatError;
use crate::format::header::{BlockHeader, HEADER_BYTES};
use crate::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX;

/// Bytes per step of the uncompressed encoder's checksum-and-copy loop: small
/// enough that the copy finds the chunk the checksum just read still in L1 or
/// L2 (32 KiB and 1 MiB per core here), large enough to amortise the loop. Measured on the
/// reference machine (`sluice bench format`, 256 MiB, streaming stores):
/// 4 KiB 0.83-0.90x memcpy, 16 KiB 1.14-1.37x, 32 KiB 1.13-1.38x.
const COPY_CHUNK_BYTES: usize = 32 << 10;

/// Encodes batches into blocks with one codec, reusing its state.
#[derive(Debug)]
pub struct BlockEncoder {
    compressor: Compressor,
}

impl BlockEncoder {
    /// An encoder for `codec`.
    pub fn new(codec: Codec) -> Result<Self, FormatError> {
        Ok(BlockEncoder { compressor: Compressor::new(codec)? })
    }

    /// The codec this encoder writes.
    pub fn codec(&self) -> Codec {
        self.compressor.codec()
    }

    /// Appends the block for `batch` to `out` and returns its header.
    pub fn encode(
        &mut self,
        batch: &RecordBatch,
        out: &mut Vec<u8>,
    ) -> Result<BlockHeader, FormatError> {
        self.encode_view(batch.view(), out)
    }

    /// Appends the block for a validated view to `out` and returns its header.
    ///
    /// On error `out` is left as it was.
    pub fn encode_view(
        &mut self,
        view: BatchView<'_>,
        out: &mut Vec<u8>,
    ) -> Result<BlockHeader, FormatError> {
        let payload = view.payload();
        if payload.len() > BLOCK_UNCOMPRESSED_BYTES_MAX {
            return Err(FormatError::BatchFull {
                needed: payload.len() as u64,
                max: BLOCK_UNCOMPRESSED_BYTES_MAX as u64,
            });
        }
        let start = out.len();
        out.extend_from_slice(&[0u8; HEADER_BYTES]);
        let body = start + HEADER_BYTES;
        let codec = self.codec();
        let result = if codec == Codec::None || payload.is_empty() {
            Ok(copy_with_crc(payload, out))
        } else {
            self.compressor.compress_append(payload, out).map(|()| crc32c(&out[body..]))
        };
        let payload_crc = match result {
            Ok(crc) => crc,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        };
        let stored_len = out.len() - body;
        let header = BlockHeader {
            // An empty payload is stored as zero bytes whatever the codec.
            codec,
            layout: view.layout(),
            record_count: u32::try_from(view.len()).map_err(|_| FormatError::LengthExceedsMax {
                field: "record count",
                value: view.len() as u64,
                max: u32::MAX.into(),
            })?,
            uncompressed_len: payload.len() as u32,
            stored_len: u32::try_from(stored_len).map_err(|_| FormatError::LengthExceedsMax {
                field: "stored length",
                value: stored_len as u64,
                max: u32::MAX.into(),
            })?,
            payload_crc,
        };
        if let Err(e) = header.check_lengths() {
            out.truncate(start);
            return Err(e);
        }
        out[start..body].copy_from_slice(&header.to_bytes());
        Ok(header)
    }
}

/// Appends `payload` to `out` and returns its CRC32C, in one pass over memory:
/// each chunk is checksummed from the source (which brings it into L1) and
/// then copied from L1, with streaming stores for large payloads.
fn copy_with_crc(payload: &[u8], out: &mut Vec<u8>) -> u32 {
    out.reserve(payload.len());
    let mut crc = Crc32c::new();
    if payload.len() < STREAMING_COPY_MIN_BYTES {
        crc.update(payload);
        out.extend_from_slice(payload);
        return crc.value();
    }
    for chunk in payload.chunks(COPY_CHUNK_BYTES) {
        crc.update(chunk);
        append_streaming(out, chunk);
    }
    streaming_fence();
    crc.value()
}

/// One decoded block: its header, its records, and how many input bytes it took.
#[derive(Clone, Copy, Debug)]
pub struct DecodedBlock<'a> {
    /// The validated header.
    pub header: BlockHeader,
    /// The records, borrowed from the input (uncompressed) or the decoder's scratch.
    pub records: BatchView<'a>,
    /// Bytes of input the block occupied (header plus stored payload).
    pub frame_len: usize,
}

/// Decodes blocks, reusing one scratch buffer for inflated payloads.
#[derive(Debug)]
pub struct BlockDecoder {
    scratch: Vec<u8>,
    decompressor: Decompressor,
}

impl Default for BlockDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockDecoder {
    /// A decoder with an empty scratch buffer.
    pub fn new() -> Self {
        BlockDecoder { scratch: Vec::new(), decompressor: Decompressor::new() }
    }

    /// Decodes the block at the start of `input`.
    ///
    /// Trailing bytes after the block are left alone; `frame_len` says where
    /// the next block starts. [`FormatError::Truncated`] means `input` ends
    /// inside the block.
    pub fn decode<'a>(&'a mut self, input: &'a [u8]) -> Result<DecodedBlock<'a>, FormatError> {
        let header = BlockHeader::parse(input)?;
        let frame_len = header.frame_len();
        let stored = input
            .get(HEADER_BYTES..frame_len)
            .ok_or(FormatError::Truncated { needed: frame_len, available: input.len() })?;
        let computed = crc32c(stored);
        if computed != header.payload_crc {
            return Err(FormatError::PayloadChecksum { stored: header.payload_crc, computed });
        }
        let payload: &'a [u8] = if header.codec == Codec::None || stored.is_empty() {
            stored
        } else {
            self.decompressor.decompress(
                header.codec,
                stored,
                header.uncompressed_len as usize,
                &mut self.scratch,
            )?;
            &self.scratch
        };
        validate_payload(header.layout, header.record_count, payload)?;
        let records = BatchView::new_unchecked(header.layout, header.record_count, payload);
        Ok(DecodedBlock { header, records, frame_len })
    }

    /// Bytes the decoder's inflate buffer holds on to.
    pub fn scratch_capacity(&self) -> usize {
        self.scratch.capacity()
    }

    /// Frees the inflate buffer if it holds more than `keep` bytes (it grew
    /// for one large block), so a long-lived decoder keeps no more than that
    /// between blocks.
    pub fn trim(&mut self, keep: usize) {
        if self.scratch.capacity() > keep {
            self.scratch = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::layout::Layout;

    fn batch() -> RecordBatch {
        let mut b = RecordBatch::new(Layout::Variable);
        for i in 0..100u32 {
            b.push(&i.to_be_bytes(), &vec![b'v'; (i % 17) as usize]).expect("push");
        }
        b
    }

    #[test]
    fn round_trip_every_codec() {
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd { level: 3 }] {
            let b = batch();
            let mut enc = BlockEncoder::new(codec).expect("encoder");
            let mut out = b"prefix".to_vec();
            let h = enc.encode(&b, &mut out).expect("encode");
            assert_eq!(out.len(), 6 + h.frame_len());
            let mut dec = BlockDecoder::new();
            let d = dec.decode(&out[6..]).expect("decode");
            assert_eq!(d.records.to_batch(), b, "{codec}");
            assert_eq!(d.frame_len, out.len() - 6);
        }
    }

    #[test]
    fn large_payloads_take_the_streaming_path_intact() {
        // Above STREAMING_COPY_MIN_BYTES, and not a multiple of the chunk or
        // of 16, behind an odd prefix so the destination starts unaligned.
        let mut b = RecordBatch::new(Layout::fixed(10, 3).expect("layout"));
        let mut rec = [0u8; 13];
        for i in 0..40_001u32 {
            rec[..4].copy_from_slice(&i.to_le_bytes());
            rec[9] = (i % 251) as u8;
            b.push(&rec[..10], &rec[10..]).expect("push");
        }
        assert!(b.payload_len() > STREAMING_COPY_MIN_BYTES);
        let mut out = vec![1u8, 2, 3];
        let h =
            BlockEncoder::new(Codec::None).expect("encoder").encode(&b, &mut out).expect("encode");
        assert_eq!(h.payload_crc, crc32c(b.payload()));
        assert_eq!(&out[3 + HEADER_BYTES..], b.payload());
        let mut dec = BlockDecoder::new();
        assert_eq!(dec.decode(&out[3..]).expect("decode").records.to_batch(), b);
    }

    #[test]
    fn empty_batch_stores_nothing() {
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd { level: 1 }] {
            let mut enc = BlockEncoder::new(codec).expect("encoder");
            let mut out = Vec::new();
            let h = enc.encode(&RecordBatch::new(Layout::TERAGEN), &mut out).expect("encode");
            assert_eq!(h.stored_len, 0);
            let mut dec = BlockDecoder::new();
            assert!(dec.decode(&out).expect("decode").records.is_empty());
        }
    }
}
