//! Errors of the bridge and the Java exception each one becomes.
//!
//! Every JNI entry point runs its body under `catch_unwind` and turns an
//! error (or a panic) into a pending Java exception before it returns, so
//! no Rust panic crosses into the JVM. Corrupt or truncated shuffle bytes
//! and failed file writes are `java.io.IOException`s: Spark's fetch
//! iterator turns an `IOException` from a fetched block's stream into a
//! fetch failure, so the map output is recomputed rather than read wrong.

use std::path::PathBuf;

use sluice_core::format::FormatError;
use sluice_engine::EngineError;

/// Java class of engine misuse and internal failures.
pub const SLUICE_EXCEPTION: &str = "dev/sluice/spark/SluiceException";
/// Java class of corrupt data and I/O failures.
pub const IO_EXCEPTION: &str = "java/io/IOException";
/// Java class of bad arguments from the Java side.
pub const ILLEGAL_ARGUMENT: &str = "java/lang/IllegalArgumentException";

/// What a bridge call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The engine refused (unknown shuffle, closed, a record too large...).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A block did not decode: corrupt, truncated or forged bytes.
    #[error("corrupt Sluice block in {what}: {source}")]
    Corrupt {
        /// Which shuffle block (Spark's block name) or buffer.
        what: String,
        /// What the decoder found.
        source: FormatError,
    },
    /// A well-formed block whose records do not belong where it was found.
    #[error("Sluice block in {what}: {detail}")]
    Misplaced {
        /// Which shuffle block.
        what: String,
        /// What did not match.
        detail: String,
    },
    /// Encoding a block failed (a batch beyond the block limits).
    #[error("encoding a block: {0}")]
    Encode(FormatError),
    /// Writing a map output file failed (a full disk, a removed directory).
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An offloaded operator failed (a value of the wrong width, a spill
    /// that could not be written or read back).
    #[error("offloaded operator: {0}")]
    Operator(#[from] sluice_core::reorg::ReorgError),
    /// A map attempt that lost output (a spill that could not be written)
    /// and can no longer commit; the text names the cause and the file.
    #[error("map attempt failed: {0}")]
    AttemptFailed(String),
    /// A later host context asked the process's engine for other settings
    /// than it was opened with; the text names each one, the engine's value
    /// and the one asked for.
    #[error(
        "the executor's Sluice engine was opened with other settings (one engine per JVM; \
         restart the JVM to change them): {0}"
    )]
    SettingsChanged(String),
    /// An argument the Java side passed is out of range.
    #[error("{0}")]
    Argument(String),
    /// A JNI call itself failed.
    #[error("JNI: {0}")]
    Jni(#[from] jni::errors::Error),
    /// The native code panicked; the message is the panic's.
    #[error("native panic: {0}")]
    Panic(String),
}

impl BridgeError {
    /// The Java exception class this error is thrown as.
    pub fn java_class(&self) -> &'static str {
        match self {
            BridgeError::Corrupt { .. }
            | BridgeError::Misplaced { .. }
            | BridgeError::Io { .. }
            | BridgeError::AttemptFailed(_) => IO_EXCEPTION,
            BridgeError::Argument(_) | BridgeError::SettingsChanged(_) => ILLEGAL_ARGUMENT,
            BridgeError::Engine(_)
            | BridgeError::Encode(_)
            | BridgeError::Operator(_)
            | BridgeError::Jni(_)
            | BridgeError::Panic(_) => SLUICE_EXCEPTION,
        }
    }
}

/// Result of a bridge call.
pub type BridgeResult<T> = Result<T, BridgeError>;
