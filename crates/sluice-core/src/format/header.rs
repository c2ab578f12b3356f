//! The block header: 36 bytes in front of every block's stored payload.
//!
//! ```text
//! offset size field              notes
//!      0    4 magic              b"SLBK"
//!      4    1 version            1
//!      5    1 codec              0 none, 1 lz4, 2 zstd
//!      6    1 codec level        i8; zstd -7..=22 except 0; 0 for none and lz4
//!      7    1 flags              bit 0: variable-length layout; bits 1-7 reserved (0)
//!      8    2 key width          u16 LE; fixed layout 1..=1024, variable 0
//!     10    2 reserved           0
//!     12    4 value width        u32 LE; fixed layout 0..=1 MiB, variable 0
//!     16    4 record count       u32 LE
//!     20    4 uncompressed len   u32 LE, <= 768 MiB
//!     24    4 stored len         u32 LE, <= 768 MiB + 6 MiB + 4 KiB
//!     28    4 payload crc32c     CRC32C (Castagnoli) of the stored bytes
//!     32    4 header crc32c      CRC32C of bytes 0..32 of this header
//! ```
//!
//! # Checks, in order
//!
//! 1. at least 4 bytes, then the magic ([`FormatError::BadMagic`]);
//! 2. the version byte, because the rest of the layout depends on it
//!    ([`FormatError::UnsupportedVersion`]);
//! 3. 36 bytes present ([`FormatError::Truncated`]);
//! 4. the header CRC, so no field below is trusted before it is known intact
//!    ([`FormatError::HeaderChecksum`]);
//! 5. codec and level, flags, reserved bytes, layout widths;
//! 6. every length against its named maximum in [`crate::format::limits`], and
//!    the lengths against each other (a fixed layout's count times its width is
//!    the uncompressed length; an uncompressed block stores exactly its
//!    payload; a variable layout needs 8 bytes per record).
//!
//! A header that passes describes a block whose allocation needs are bounded
//! by the limits, whatever bytes follow it.

use crate::format::checksum::crc32c;
use crate::format::codec::Codec;
use crate::format::error::FormatError;
use crate::format::layout::Layout;
use crate::format::limits::{
    BLOCK_RECORDS_MAX, BLOCK_STORED_BYTES_MAX, BLOCK_UNCOMPRESSED_BYTES_MAX,
    VARIABLE_RECORD_PREFIX_BYTES,
};

/// The four magic bytes at the start of every block.
pub const BLOCK_MAGIC: [u8; 4] = *b"SLBK";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Size of the version-1 header, in bytes.
pub const HEADER_BYTES: usize = 36;
/// Where the header holds the stored payload's CRC32C (u32 LE).
pub const PAYLOAD_CRC_AT: usize = 28;
/// Flag bit: records use the variable-length layout.
pub const FLAG_VARIABLE: u8 = 0b0000_0001;
/// Bytes covered by the header CRC (everything before it).
const HEADER_CRC_OFFSET: usize = 32;

/// A decoded, validated block header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// How the stored payload is compressed.
    pub codec: Codec,
    /// How records are laid out in the uncompressed payload.
    pub layout: Layout,
    /// Number of records in the block.
    pub record_count: u32,
    /// Length of the uncompressed payload in bytes.
    pub uncompressed_len: u32,
    /// Length of the stored payload that follows the header, in bytes.
    pub stored_len: u32,
    /// CRC32C of the stored payload.
    pub payload_crc: u32,
}

impl BlockHeader {
    /// Total bytes of the block: header plus stored payload.
    pub fn frame_len(&self) -> usize {
        HEADER_BYTES + self.stored_len as usize
    }

    /// Serialises the header, computing its own CRC.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        let (codec_id, level) = self.codec.to_header();
        let (flags, key_width, value_width) = match self.layout {
            Layout::Fixed { key_width, value_width } => (0, key_width, value_width),
            Layout::Variable => (FLAG_VARIABLE, 0, 0),
        };
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4] = FORMAT_VERSION;
        b[5] = codec_id;
        b[6] = level.to_le_bytes()[0];
        b[7] = flags;
        b[8..10].copy_from_slice(&key_width.to_le_bytes());
        b[12..16].copy_from_slice(&value_width.to_le_bytes());
        b[16..20].copy_from_slice(&self.record_count.to_le_bytes());
        b[20..24].copy_from_slice(&self.uncompressed_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.stored_len.to_le_bytes());
        b[PAYLOAD_CRC_AT..PAYLOAD_CRC_AT + 4].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c(&b[..HEADER_CRC_OFFSET]);
        b[HEADER_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates the header at the start of `input`.
    ///
    /// Returns [`FormatError::Truncated`] when `input` is a prefix of a
    /// plausible header, any other error when the bytes are bad.
    pub fn parse(input: &[u8]) -> Result<Self, FormatError> {
        if input.len() < BLOCK_MAGIC.len() {
            // A short prefix of the magic is "need more"; anything else is bad.
            if BLOCK_MAGIC.starts_with(input) {
                return Err(FormatError::Truncated {
                    needed: HEADER_BYTES,
                    available: input.len(),
                });
            }
            let mut found = [0u8; 4];
            found[..input.len()].copy_from_slice(input);
            return Err(FormatError::BadMagic { found, expected: BLOCK_MAGIC });
        }
        let found = [input[0], input[1], input[2], input[3]];
        if found != BLOCK_MAGIC {
            return Err(FormatError::BadMagic { found, expected: BLOCK_MAGIC });
        }
        if let Some(&version) = input.get(4) {
            if version != FORMAT_VERSION {
                return Err(FormatError::UnsupportedVersion {
                    found: version,
                    supported: FORMAT_VERSION,
                });
            }
        }
        let Some(h) = input.get(..HEADER_BYTES) else {
            return Err(FormatError::Truncated { needed: HEADER_BYTES, available: input.len() });
        };
        let stored_crc = read_u32(h, HEADER_CRC_OFFSET);
        let computed = crc32c(&h[..HEADER_CRC_OFFSET]);
        if stored_crc != computed {
            return Err(FormatError::HeaderChecksum { stored: stored_crc, computed });
        }

        let codec = Codec::from_header(h[5], i8::from_le_bytes([h[6]]))?;
        let flags = h[7];
        if flags & !FLAG_VARIABLE != 0 {
            return Err(FormatError::ReservedBits { field: "flags", value: flags.into() });
        }
        let reserved = u16::from_le_bytes([h[10], h[11]]);
        if reserved != 0 {
            return Err(FormatError::ReservedBits { field: "bytes 10-11", value: reserved.into() });
        }
        let key_width = u16::from_le_bytes([h[8], h[9]]);
        let value_width = read_u32(h, 12);
        let layout = if flags & FLAG_VARIABLE != 0 {
            if key_width != 0 || value_width != 0 {
                return Err(FormatError::InvalidLayout {
                    key_width: key_width.into(),
                    value_width: value_width.into(),
                });
            }
            Layout::Variable
        } else {
            Layout::fixed(usize::from(key_width), value_width as usize)?
        };

        let header = BlockHeader {
            codec,
            layout,
            record_count: read_u32(h, 16),
            uncompressed_len: read_u32(h, 20),
            stored_len: read_u32(h, 24),
            payload_crc: read_u32(h, PAYLOAD_CRC_AT),
        };
        header.check_lengths()?;
        Ok(header)
    }

    /// Checks the lengths against the limits and against each other.
    pub(crate) fn check_lengths(&self) -> Result<(), FormatError> {
        let count = self.record_count as usize;
        let uncompressed = self.uncompressed_len as usize;
        let stored = self.stored_len as usize;
        exceeds("record count", count, BLOCK_RECORDS_MAX)?;
        exceeds("uncompressed length", uncompressed, BLOCK_UNCOMPRESSED_BYTES_MAX)?;
        exceeds("stored length", stored, BLOCK_STORED_BYTES_MAX)?;
        if self.codec == Codec::None && stored != uncompressed {
            return Err(FormatError::InconsistentLengths {
                detail: format!(
                    "uncompressed block stores {stored} bytes of a {uncompressed}-byte payload"
                ),
            });
        }
        if self.codec != Codec::None && (stored == 0) != (uncompressed == 0) {
            return Err(FormatError::InconsistentLengths {
                detail: format!("compressed block stores {stored} bytes for {uncompressed}"),
            });
        }
        if uncompressed > self.codec.inflate_bound(stored) {
            return Err(FormatError::InconsistentLengths {
                detail: format!(
                    "{stored} {} bytes cannot inflate to the {uncompressed} bytes the header claims",
                    self.codec.name()
                ),
            });
        }
        match self.layout.fixed_record_bytes() {
            Some(width) => {
                let expected =
                    count.checked_mul(width).ok_or(FormatError::InconsistentLengths {
                        detail: format!("{count} records of {width} bytes overflow"),
                    })?;
                if expected != uncompressed {
                    return Err(FormatError::InconsistentLengths {
                        detail: format!(
                            "{count} records of {width} bytes need {expected} bytes, header says {uncompressed}"
                        ),
                    });
                }
            }
            None => {
                let min = count.saturating_mul(VARIABLE_RECORD_PREFIX_BYTES);
                if min > uncompressed {
                    return Err(FormatError::InconsistentLengths {
                        detail: format!(
                            "{count} variable records need at least {min} bytes, header says {uncompressed}"
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

fn exceeds(field: &'static str, value: usize, max: usize) -> Result<(), FormatError> {
    if value > max {
        return Err(FormatError::LengthExceedsMax { field, value: value as u64, max: max as u64 });
    }
    Ok(())
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BlockHeader {
        BlockHeader {
            codec: Codec::Zstd { level: 3 },
            layout: Layout::TERAGEN,
            record_count: 3,
            uncompressed_len: 300,
            stored_len: 120,
            payload_crc: 0xdead_beef,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(BlockHeader::parse(&h.to_bytes()).ok(), Some(h));
    }

    #[test]
    fn prefixes_are_truncated_not_bad() {
        let b = sample().to_bytes();
        for n in 0..HEADER_BYTES {
            let err = BlockHeader::parse(&b[..n]).expect_err("prefix");
            assert!(err.is_truncated(), "prefix of {n} bytes gave {err}");
        }
    }

    #[test]
    fn garbage_short_input_is_bad_magic() {
        assert!(matches!(BlockHeader::parse(b"XY"), Err(FormatError::BadMagic { .. })));
    }

    #[test]
    fn lengths_are_checked_even_with_a_valid_crc() {
        let mut h = sample();
        h.uncompressed_len = u32::MAX;
        h.record_count = u32::MAX / 100;
        let err = BlockHeader::parse(&h.to_bytes()).expect_err("too long");
        assert!(matches!(err, FormatError::LengthExceedsMax { .. }), "{err}");
        let mut h = sample();
        h.record_count = 4;
        let err = BlockHeader::parse(&h.to_bytes()).expect_err("inconsistent");
        assert!(matches!(err, FormatError::InconsistentLengths { .. }), "{err}");
    }

    #[test]
    fn a_claim_the_stored_bytes_cannot_inflate_to_is_refused() {
        // A header whose CRC is valid (a forger can make the payload's valid
        // too) claiming more than its stored bytes can hold under its codec:
        // refused at the header, before a reader allocates the claim.
        for (codec, stored) in [(Codec::Lz4, 4096u32), (Codec::Zstd { level: 3 }, 4096)] {
            let mut h = sample();
            h.codec = codec;
            h.layout = Layout::Variable;
            h.record_count = 1;
            h.stored_len = stored;
            let bound = codec.inflate_bound(stored as usize) as u32;
            h.uncompressed_len = bound;
            assert_eq!(BlockHeader::parse(&h.to_bytes()).ok(), Some(h), "{codec} at its bound");
            h.uncompressed_len = bound + 1;
            let err = BlockHeader::parse(&h.to_bytes()).expect_err("past the bound");
            assert!(matches!(err, FormatError::InconsistentLengths { .. }), "{err}");
            assert!(err.to_string().contains("cannot inflate"), "{err}");
        }
    }
}
