//! Sluice core: the pieces of the shuffle engine that every deployment shares.
//!
//! The crate is organised along the data path of a shuffle. Today it holds the
//! first stage every later part writes and reads:
//!
//! - [`format`](mod@format): records (key bytes plus value bytes, fixed width or variable
//!   length), batches that writers append to without per-record allocation, and
//!   framed, checksummed, optionally compressed blocks. Everything read back is
//!   treated as untrusted.
//! - [`datagen`]: deterministic generators for the workloads' input (TeraGen
//!   records, fixed-width tuples, HiBench-style text), used by benchmarks, tests
//!   and golden fixtures.
//!
//! # Example: a block round trip
//!
//! ```
//! use sluice_core::{BlockDecoder, BlockEncoder, Codec, Layout, RecordBatch};
//!
//! let mut batch = RecordBatch::new(Layout::fixed(8, 4)?);
//! batch.push(&42u64.to_be_bytes(), b"four")?;
//! batch.push(&7u64.to_be_bytes(), b"more")?;
//!
//! let mut stream = Vec::new();
//! BlockEncoder::new(Codec::Lz4)?.encode(&batch, &mut stream)?;
//!
//! let mut decoder = BlockDecoder::new();
//! let block = decoder.decode(&stream)?;
//! let values: Vec<&[u8]> = block.records.iter().map(|r| r.value).collect();
//! assert_eq!(values, [b"four", b"more"]);
//!
//! // One flipped bit anywhere is a typed error, not a wrong answer.
//! stream[40] ^= 1;
//! assert!(decoder.decode(&stream).is_err());
//! # Ok::<(), sluice_core::FormatError>(())
//! ```
//!
//! See `docs/architecture.md` for where the later parts (partition operator,
//! reorganisation operators, engine, daemon) attach.

pub mod datagen;
pub mod format;
mod hint;
pub mod memory;
pub mod mix;
pub mod partition;
pub mod reorg;
pub mod spill;

pub use format::{
    BatchView, BlockDecoder, BlockEncoder, BlockHeader, BlockReader, Codec, FormatError, Layout,
    Record, RecordBatch,
};
