//! The Sluice record and block format (DShuffle's dedicated serialization format).
//!
//! Records travel as bytes laid out for the engine: no per-record objects and
//! no general-purpose serializer on the hot path. A [`RecordBatch`] is the
//! exact payload of a block, so encoding an uncompressed block is one copy plus
//! a CRC32C, and decoding one is a checksum pass plus a borrowed view.
//!
//! ```text
//!  writer                      block (docs/wire-format.md)             reader
//!  push(key, value) ─► RecordBatch ─► BlockEncoder ─► [header|stored] ─► BlockDecoder ─► BatchView ─► Record
//!                      (payload)      (codec, crc)                      (verify, inflate) (borrowed)
//! ```
//!
//! Every length in a block is untrusted when read: see [`header`] and
//! [`block`] for the checks and [`limits`] for the named maxima.

pub mod batch;
pub mod block;
pub mod checksum;
pub mod codec;
pub mod copy;
pub mod error;
pub mod header;
pub mod layout;
pub mod limits;
pub mod reader;
pub mod span;

pub use batch::{BatchView, RawRecord, Record, RecordBatch, Records};
pub use block::{BlockDecoder, BlockEncoder};
pub use codec::Codec;
pub use error::FormatError;
pub use header::BlockHeader;
pub use layout::Layout;
pub use reader::BlockReader;
pub use span::{check_variable, CheckError, CheckedPayload, Span};
