//! What can be wrong with bytes a peer sent, and where.

/// A frame or a message that cannot be decoded. `frame` is the frame's
/// index on its connection (0 for the first), so an error says where.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame {frame}: bad magic {found:02x?} (not a Sluice service connection)")]
    BadMagic { frame: u64, found: [u8; 4] },
    #[error("frame {frame}: protocol version {found}, this side speaks {supported}")]
    UnsupportedVersion { frame: u64, found: u8, supported: u8 },
    #[error("frame {frame}: unknown message kind {kind}")]
    UnknownKind { frame: u64, kind: u8 },
    #[error("frame {frame}: reserved flags {flags:#06x} are not zero")]
    ReservedFlags { frame: u64, flags: u16 },
    #[error("frame {frame}: {what} of {len} exceeds the limit of {limit}")]
    TooLong { frame: u64, what: &'static str, len: u64, limit: u64 },
    #[error("frame {frame}: CRC32C {actual:#010x} does not match the header's {expected:#010x}")]
    Checksum { frame: u64, expected: u32, actual: u32 },
    #[error("frame {frame}: the connection ended after {read} of {needed} bytes of the frame")]
    Truncated { frame: u64, read: usize, needed: usize },
    #[error("frame {frame} ({kind}): the payload ends at byte {at}, {needed} more bytes needed for {what}")]
    ShortPayload { frame: u64, kind: &'static str, what: &'static str, at: usize, needed: usize },
    #[error("frame {frame} ({kind}): {extra} bytes after the message")]
    TrailingBytes { frame: u64, kind: &'static str, extra: usize },
    #[error("frame {frame} ({kind}): {what} is not UTF-8")]
    NotUtf8 { frame: u64, kind: &'static str, what: &'static str },
    #[error("frame {frame} ({kind}): {what} {value} is out of range")]
    OutOfRange { frame: u64, kind: &'static str, what: &'static str, value: u64 },
    #[error("no frame within {after_ms} ms while waiting for {what}")]
    Timeout { what: &'static str, after_ms: u64 },
    #[error("connection I/O: {0}")]
    Io(#[from] std::io::Error),
}
