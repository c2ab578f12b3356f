//! Reading a stream of blocks (a spill file, a shuffle data file segment, a
//! network stream) one block at a time.
//!
//! The reader trusts nothing in the stream: it reads the fixed-size header,
//! validates it, and only then reads the stored payload, growing its buffer
//! as bytes actually arrive. It reserves at most
//! [`READER_PREALLOC_BYTES_MAX`] ahead of real data, so a forged header that
//! announces a 64 MiB block on a 100-byte stream costs 1 MiB, not 64. Every
//! error carries the stream offset of the block it concerns.

use std::io::Read;

use crate::format::block::{BlockDecoder, DecodedBlock};
use crate::format::error::FormatError;
use crate::format::header::{BlockHeader, HEADER_BYTES};
use crate::format::limits::READER_PREALLOC_BYTES_MAX;

/// Reads consecutive blocks from a byte stream.
#[derive(Debug)]
pub struct BlockReader<R> {
    inner: R,
    offset: u64,
    frame: Vec<u8>,
    decoder: BlockDecoder,
}

impl<R: Read> BlockReader<R> {
    /// A reader at offset 0 of `inner`.
    pub fn new(inner: R) -> Self {
        BlockReader { inner, offset: 0, frame: Vec::new(), decoder: BlockDecoder::new() }
    }

    /// Stream offset of the next block's first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads and decodes the next block. `Ok(None)` at a clean end of stream
    /// (no byte of a further block); a stream that ends inside a block gives a
    /// truncation error.
    pub fn next_block(&mut self) -> Result<Option<DecodedBlock<'_>>, FormatError> {
        let at = self.offset;
        let located = |e: FormatError| FormatError::AtOffset { offset: at, source: Box::new(e) };
        self.frame.clear();
        self.frame.resize(HEADER_BYTES, 0);
        let got = read_full(&mut self.inner, &mut self.frame)?;
        if got == 0 {
            return Ok(None);
        }
        self.frame.truncate(got);
        let header = BlockHeader::parse(&self.frame).map_err(located)?;
        let stored = header.stored_len as usize;
        self.frame.reserve(stored.min(READER_PREALLOC_BYTES_MAX));
        let read = (&mut self.inner).take(stored as u64).read_to_end(&mut self.frame)?;
        if read < stored {
            return Err(located(FormatError::Truncated {
                needed: header.frame_len(),
                available: HEADER_BYTES + read,
            }));
        }
        let block = self.decoder.decode(&self.frame).map_err(located)?;
        self.offset += block.frame_len as u64;
        Ok(Some(block))
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, std::io::Error> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BlockEncoder, Codec, Layout, RecordBatch};

    #[test]
    fn reads_a_stream_and_locates_errors() {
        let mut enc = BlockEncoder::new(Codec::Lz4).expect("encoder");
        let mut stream = Vec::new();
        let mut b = RecordBatch::new(Layout::TUPLE16);
        for i in 0..3u8 {
            b.clear();
            b.push(&[i; 4], &[i; 12]).expect("push");
            enc.encode(&b, &mut stream).expect("encode");
        }
        let second = {
            let mut r = BlockReader::new(&stream[..]);
            let mut n = 0;
            while let Some(block) = r.next_block().expect("block") {
                assert_eq!(block.records.iter().next().map(|r| r.key[0]), Some(n));
                n += 1;
            }
            assert_eq!(n, 3);
            stream.len() / 3
        };
        let mut corrupt = stream.clone();
        corrupt[second + 40] ^= 1;
        let mut r = BlockReader::new(&corrupt[..]);
        assert!(r.next_block().is_ok());
        let err = r.next_block().expect_err("corrupt second block");
        assert!(
            matches!(err, FormatError::AtOffset { offset, .. } if offset == second as u64),
            "{err}"
        );

        let mut r = BlockReader::new(&stream[..stream.len() - 1]);
        assert!(r.next_block().is_ok());
        assert!(r.next_block().is_ok());
        assert!(r.next_block().expect_err("truncated").is_truncated());
    }

    #[test]
    fn a_forged_length_costs_at_most_the_prealloc_cap() {
        use crate::format::header::BlockHeader;
        use crate::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX;
        // A header with valid CRCs announcing a 60 MiB lz4 payload, followed
        // by 100 bytes.
        let header = BlockHeader {
            codec: Codec::Lz4,
            layout: Layout::fixed(16, 0).expect("layout"),
            record_count: (BLOCK_UNCOMPRESSED_BYTES_MAX / 16) as u32,
            uncompressed_len: BLOCK_UNCOMPRESSED_BYTES_MAX as u32,
            stored_len: 60 << 20,
            payload_crc: 0,
        };
        let mut stream = header.to_bytes().to_vec();
        stream.extend_from_slice(&[0u8; 100]);
        let mut r = BlockReader::new(&stream[..]);
        let err = r.next_block().expect_err("forged length on a short stream");
        assert!(err.is_truncated(), "{err}");
        assert!(
            r.frame.capacity() <= READER_PREALLOC_BYTES_MAX + 2 * HEADER_BYTES,
            "reader reserved {} bytes for a 136-byte stream",
            r.frame.capacity()
        );
    }
}
