//! Named limits of the service protocol. Every length read from a peer is
//! checked against one of these before anything is allocated for it.

/// Bytes of a frame header: magic (4), version (1), kind (1), flags (2),
/// payload length (4), CRC32C (4).
pub const FRAME_HEADER_BYTES: usize = 16;

/// The largest payload a frame may carry, in bytes. A pushed chunk is
/// about [`PUSH_CHUNK_BYTES`]; the rest is headroom for section headers.
pub const MAX_FRAME_PAYLOAD_BYTES: u32 = 4 << 20;

/// The size a map task aims its pushed chunks at, in bytes (SmartShuffle
/// and Celeborn push chunks of about this size while the map still runs).
pub const PUSH_CHUNK_BYTES: usize = 1 << 20;

/// The longest application id, in bytes of UTF-8.
pub const MAX_APP_ID_BYTES: usize = 256;

/// The longest error message a daemon sends, in bytes of UTF-8.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// Reduce partitions of one shuffle, at most (Spark's own limit for a
/// shuffle with map-side sorting is 2^24).
pub const MAX_PARTITIONS: u32 = 1 << 24;

/// Sections (one per reduce partition) in one pushed chunk, at most.
pub const MAX_SECTIONS_PER_PUSH: u32 = 1 << 16;

/// Map outputs one read names as its winners, at most.
pub const MAX_WINNERS_PER_READ: u32 = 1 << 18;

/// Bytes of a challenge's nonce (the daemon's, and the client's in `Auth`).
pub const NONCE_BYTES: usize = 32;

/// Bytes of an HMAC-SHA256 proof or key.
pub const MAC_BYTES: usize = 32;

/// The largest payload a daemon reads before a connection authenticated:
/// an `Auth` (application id length, the id, lease, proof, the client's
/// challenge, the lease-only flag) and no more.
pub const MAX_AUTH_PAYLOAD_BYTES: u32 =
    (2 + MAX_APP_ID_BYTES + 8 + MAC_BYTES + NONCE_BYTES + 1) as u32;
