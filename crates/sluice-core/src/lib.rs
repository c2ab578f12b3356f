//! Sluice core: the pieces of the shuffle engine that every deployment shares.
//!
//! The crate is organised along the data path of a shuffle. Today it holds the
//! first stage every later part writes and reads:
//!
//! - [`format`]: records (key bytes plus value bytes, fixed width or variable
//!   length), batches that writers append to without per-record allocation, and
//!   framed, checksummed, optionally compressed blocks. Everything read back is
//!   treated as untrusted.
//! - [`datagen`]: deterministic generators for the workloads' input (TeraGen
//!   records, fixed-width tuples, HiBench-style text), used by benchmarks, tests
//!   and golden fixtures.
//!
//! See `docs/architecture.md` for where the later parts (partition operator,
//! reorganisation operators, engine, daemon) attach.

pub mod datagen;
pub mod format;

pub use format::{
    BatchView, BlockDecoder, BlockEncoder, BlockHeader, BlockReader, Codec, FormatError, Layout,
    Record, RecordBatch,
};
