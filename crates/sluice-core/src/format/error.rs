//! Typed errors of the record and block format.
//!
//! Two families matter to callers:
//! - [`FormatError::Truncated`] means "need more bytes": the input ended before
//!   the frame did. A streaming reader can wait for more data; a file reader
//!   reports a truncated file.
//! - Every other decode variant means "bad bytes": the data is corrupt, forged
//!   or from an incompatible writer, and retrying will not help.
//!
//! Writer-side variants ([`FormatError::KeyWidthMismatch`] and friends) are
//! misuse of the batch API by a caller and leave the batch unchanged.

use crate::format::codec::Codec;

/// Everything that can go wrong while building, encoding or decoding blocks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input ended before the frame did.
    #[error("truncated block: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the frame needs from its start.
        needed: usize,
        /// Bytes that were available.
        available: usize,
    },
    /// The first four bytes are not the block magic.
    #[error("bad block magic {found:02x?} (expected {expected:02x?})")]
    BadMagic {
        /// Bytes found.
        found: [u8; 4],
        /// The magic this version writes.
        expected: [u8; 4],
    },
    /// A format version this build does not read.
    #[error("unsupported block format version {found} (this build reads {supported})")]
    UnsupportedVersion {
        /// Version byte found.
        found: u8,
        /// Version this build reads.
        supported: u8,
    },
    /// The header's own checksum does not match its bytes.
    #[error("block header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    HeaderChecksum {
        /// CRC32C stored in the header.
        stored: u32,
        /// CRC32C computed over the header bytes.
        computed: u32,
    },
    /// A codec id this build does not know.
    #[error("unknown codec id {id}")]
    UnknownCodec {
        /// Codec byte found.
        id: u8,
    },
    /// A codec level outside the codec's range (or non-zero for a codec without levels).
    #[error("invalid level {level} for codec {codec}")]
    BadCodecLevel {
        /// The codec.
        codec: &'static str,
        /// The level found or requested.
        level: i32,
    },
    /// Reserved bits or bytes are set.
    #[error("reserved {field} is {value:#x}, must be 0")]
    ReservedBits {
        /// Which header field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A fixed-width layout with a key or value width out of range.
    #[error("invalid fixed layout: key width {key_width}, value width {value_width}")]
    InvalidLayout {
        /// Key width in bytes.
        key_width: u64,
        /// Value width in bytes.
        value_width: u64,
    },
    /// A length or count larger than its named maximum.
    #[error("{field} is {value}, above the maximum {max}")]
    LengthExceedsMax {
        /// Which length.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The named maximum it exceeds.
        max: u64,
    },
    /// Lengths that cannot all be true at once (for example a fixed-width
    /// record count that does not match the payload length).
    #[error("inconsistent block lengths: {detail}")]
    InconsistentLengths {
        /// What disagrees with what.
        detail: String,
    },
    /// The stored payload does not match its checksum.
    #[error("block payload checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    PayloadChecksum {
        /// CRC32C stored in the header.
        stored: u32,
        /// CRC32C computed over the stored bytes.
        computed: u32,
    },
    /// The codec rejected the stored bytes.
    #[error("{codec} decompression failed: {reason}")]
    Decompress {
        /// The codec.
        codec: &'static str,
        /// The codec's own message.
        reason: String,
    },
    /// The codec failed while compressing.
    #[error("{codec} compression failed: {reason}")]
    Compress {
        /// The codec.
        codec: &'static str,
        /// The codec's own message.
        reason: String,
    },
    /// A variable-length payload whose record prefixes do not tile it exactly.
    #[error("malformed record {record} at payload offset {offset}: {reason}")]
    MalformedRecord {
        /// Index of the record in the block.
        record: u64,
        /// Byte offset of its prefix in the uncompressed payload.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A key whose width does not match a fixed-width batch.
    #[error("key is {got} bytes, the batch's fixed key width is {expected}")]
    KeyWidthMismatch {
        /// The layout's key width.
        expected: usize,
        /// The key's length.
        got: usize,
    },
    /// A value whose width does not match a fixed-width batch.
    #[error("value is {got} bytes, the batch's fixed value width is {expected}")]
    ValueWidthMismatch {
        /// The layout's value width.
        expected: usize,
        /// The value's length.
        got: usize,
    },
    /// Appending would take the batch past what one block can hold.
    #[error("batch full: {needed} bytes needed, a block holds at most {max}")]
    BatchFull {
        /// Payload bytes the batch would need.
        needed: u64,
        /// [`crate::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX`].
        max: u64,
    },
    /// An I/O error while reading a block stream.
    #[error("I/O error reading blocks: {0}")]
    Io(#[from] std::io::Error),
    /// A decode error located in a stream of blocks.
    #[error("block at stream offset {offset}: {source}")]
    AtOffset {
        /// Byte offset of the block's first header byte in the stream.
        offset: u64,
        /// What went wrong there.
        #[source]
        source: Box<FormatError>,
    },
}

impl FormatError {
    /// True when the error only says that more input bytes are needed.
    pub fn is_truncated(&self) -> bool {
        match self {
            FormatError::Truncated { .. } => true,
            FormatError::AtOffset { source, .. } => source.is_truncated(),
            _ => false,
        }
    }

    pub(crate) fn decompress(codec: Codec, reason: impl ToString) -> Self {
        FormatError::Decompress { codec: codec.name(), reason: reason.to_string() }
    }
}
