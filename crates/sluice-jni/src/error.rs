//! Errors of the bridge and the Java exception each one becomes.
//!
//! Every JNI entry point runs its body under `catch_unwind` and turns an
//! error (or a panic) into a pending Java exception before it returns, so
//! no Rust panic crosses into the JVM. Corrupt or truncated shuffle bytes
//! and failed file writes are `java.io.IOException`s: Spark's fetch
//! iterator turns an `IOException` from a fetched block's stream into a
//! fetch failure, so the map output is recomputed rather than read wrong.

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
    /// The engine refused or failed (an unknown shuffle, corrupt or
    /// misplaced bytes, a failed write, an operator's error...).
    #[error(transparent)]
    Engine(#[from] EngineError),
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
    /// A call named a native object that is closed or was never opened
    /// (see `handles`): a reader on another thread after the task closed it.
    #[error("{kind} handle {handle} is not open (closed, or never opened)")]
    StaleHandle {
        /// What the handle names ("map attempt", "reduce operator").
        kind: &'static str,
        /// The handle the Java side passed.
        handle: i64,
    },
    /// A JNI call itself failed.
    #[error("JNI: {0}")]
    Jni(#[from] jni::errors::Error),
    /// The native code panicked; the message is the panic's.
    #[error("native panic: {0}")]
    Panic(String),
}

impl BridgeError {
    /// The Java exception class this error is thrown as: the engine's data
    /// faults ([`EngineError::is_data_fault`]) are `IOException`s, its
    /// argument errors and the bridge's `IllegalArgumentException`s, the
    /// rest `SluiceException`s.
    pub fn java_class(&self) -> &'static str {
        match self {
            BridgeError::Engine(e) if e.is_data_fault() => IO_EXCEPTION,
            BridgeError::Engine(EngineError::Argument(_))
            | BridgeError::Argument(_)
            | BridgeError::SettingsChanged(_) => ILLEGAL_ARGUMENT,
            BridgeError::Engine(_)
            | BridgeError::StaleHandle { .. }
            | BridgeError::Jni(_)
            | BridgeError::Panic(_) => SLUICE_EXCEPTION,
        }
    }
}

/// Result of a bridge call.
pub type BridgeResult<T> = Result<T, BridgeError>;
