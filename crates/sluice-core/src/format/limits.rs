//! Named maxima of the block format, with their units.
//!
//! Every length, width and count read from a block is checked against these
//! before anything is allocated or indexed. The encoder enforces the same
//! limits, so any block it writes is one the decoder accepts.

/// Largest uncompressed payload of one block, in bytes (768 MiB).
///
/// Blocks are the unit of checksumming and of decompression; engines cut
/// partitions into blocks of about 1 MiB, so this is a safety cap, not a
/// working size. A record is never split between blocks, so the cap is
/// also the largest record ([`RECORD_BYTES_MAX`]): large enough for the
/// records of hundreds of MiB that Spark jobs carry, below 1 GiB so that a
/// length stays under 2^30 where the bindings pack it beside flags. It
/// bounds the decoder's scratch buffer; a header claiming more than its
/// stored bytes can inflate to (`Codec::inflate_bound`: 255 bytes per lz4
/// byte, 32,768 per zstd byte) is refused before anything is allocated, and
/// a zstd frame's content size must match the claim.
pub const BLOCK_UNCOMPRESSED_BYTES_MAX: usize = 768 << 20;

/// Largest stored (possibly compressed) payload of one block, in bytes.
///
/// Incompressible data can grow slightly under a codec: lz4's worst case is
/// `n + n/255 + 16` and zstd's `n + n/128 + 512`; this cap covers both for
/// [`BLOCK_UNCOMPRESSED_BYTES_MAX`].
pub const BLOCK_STORED_BYTES_MAX: usize =
    BLOCK_UNCOMPRESSED_BYTES_MAX + BLOCK_UNCOMPRESSED_BYTES_MAX / 128 + 4096;

/// Widest fixed-width key, in bytes. The fast-path widths are 4, 8, 10 and 16.
pub const KEY_WIDTH_MAX_BYTES: usize = 1024;

/// Widest fixed-width value, in bytes (1 MiB).
pub const VALUE_WIDTH_MAX_BYTES: usize = 1 << 20;

/// Per-record length prefix of the variable-length layout, in bytes
/// (`key_len: u32`, `value_len: u32`, little endian).
pub const VARIABLE_RECORD_PREFIX_BYTES: usize = 8;

/// Largest record (key plus value plus prefix) one block can hold, in bytes.
pub const RECORD_BYTES_MAX: usize = BLOCK_UNCOMPRESSED_BYTES_MAX;

/// Largest number of records in one block. A record takes at least one byte in
/// the fixed layout and [`VARIABLE_RECORD_PREFIX_BYTES`] in the variable one,
/// so the count can never exceed the payload length; the cap makes that
/// explicit for the header check.
pub const BLOCK_RECORDS_MAX: usize = BLOCK_UNCOMPRESSED_BYTES_MAX;

/// Bytes a [`crate::BlockReader`] reserves up front for a stored payload
/// before the bytes have actually arrived (1 MiB). A forged header announcing
/// a large block on a short stream therefore costs at most this much memory
/// until real data shows up.
pub const READER_PREALLOC_BYTES_MAX: usize = 1 << 20;
