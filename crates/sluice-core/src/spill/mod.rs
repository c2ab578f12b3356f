//! Spill files: operator state or input written to local disk in the block
//! format, read back with every checksum verified, removed when dropped.
//!
//! ```text
//!  SpillWriter ── append(run, batch) ──► write buffer ──(>= 1 MiB)──► file
//!       │ finish                                   index: run -> [(offset, frame, records)]
//!       ▼
//!  SpillFile ── run(r) ──► SpillRunReader ── next_batch ──► BatchView (decoded, verified)
//! ```
//! A file holds *runs* (a sorted run, a reduce partition, a spilled chunk):
//! each appended batch becomes one block, recorded in the run's index, and
//! blocks are buffered into writes of at least [`SPILL_WRITE_BYTES`]. The
//! index stays in memory with the operator that owns the file.
//!
//! Reading back trusts nothing on disk: each block is read at its indexed
//! offset, its header and payload checksums are verified by the block
//! decoder, and its record count and layout must match the index. Any
//! mismatch is a [`SpillError::Corrupt`] naming the file and the offset.
//!
//! The file is deleted when the [`SpillWriter`] or [`SpillFile`] is dropped,
//! on success and on error alike.

mod error;
mod file;

pub use error::SpillError;
pub use file::{SpillFile, SpillRunReader, SpillStats, SpillWriter, SPILL_WRITE_BYTES};
