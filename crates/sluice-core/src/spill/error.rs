//! Spill errors: each names the file, and the offset where it applies.

use std::path::PathBuf;

use crate::format::FormatError;

/// What went wrong with a spill file.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    /// Creating, writing or reading the file failed (a full disk included).
    #[error("spill file {path}: {op} failed: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A block read back failed verification.
    #[error("spill file {path}: corrupt block at offset {offset}: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Offset of the block in the file.
        offset: u64,
        /// What the decoder found.
        #[source]
        source: FormatError,
    },
    /// A block decoded cleanly but is not the one the index names.
    #[error(
        "spill file {path}: block at offset {offset} holds {found} records in {found_layout}, \
         the index says {expected} in {expected_layout}"
    )]
    IndexMismatch {
        /// The file.
        path: PathBuf,
        /// Offset of the block.
        offset: u64,
        /// Records the index recorded.
        expected: u32,
        /// Records the block holds.
        found: u32,
        /// Layout the index recorded.
        expected_layout: crate::format::Layout,
        /// Layout the block declares.
        found_layout: crate::format::Layout,
    },
    /// Encoding a batch failed (a batch over the block size limit).
    #[error("spill file {path}: cannot encode a block: {source}")]
    Encode {
        /// The file.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: FormatError,
    },
    /// A run that the file does not have was asked for.
    #[error("spill file {path}: no run {run} (the file has {runs})")]
    NoSuchRun {
        /// The file.
        path: PathBuf,
        /// The run asked for.
        run: usize,
        /// Runs in the file.
        runs: usize,
    },
}
