//! Errors of the bridge and the Java exception each one becomes.
//!
//! Every JNI entry point runs its body under `catch_unwind` and turns an
//! error (or a panic) into a pending Java exception before it returns, so
//! no Rust panic crosses into the JVM. Corrupt or truncated shuffle bytes
//! and failed file writes are `java.io.IOException`s: Spark's fetch
//! iterator turns an `IOException` from a fetched block's stream into a
//! fetch failure, so the map output is recomputed rather than read wrong.

use sluice_core::reorg::ReorgError;
use sluice_engine::EngineError;
use sluice_service::protocol::ErrorCode;

/// Java class of engine misuse and internal failures.
pub const SLUICE_EXCEPTION: &str = "dev/sluice/spark/api/SluiceException";
/// Java class of corrupt data and I/O failures.
pub const IO_EXCEPTION: &str = "java/io/IOException";
/// Java class of a daemon's answer refusing a request (an `IOException`):
/// the daemon is alive and the connection still usable, unlike a failed
/// connection, which stays a plain `IOException`.
pub const DAEMON_REFUSED: &str = "dev/sluice/spark/service/DaemonRefusedException";
/// Java class of a daemon's refusal of an older generation of a shuffle
/// than it holds (a `DaemonRefusedException`): the driver assigned the
/// shuffle anew meanwhile, and the daemon is not to be left out of pushes.
pub const STALE_GENERATION: &str = "dev/sluice/spark/service/StaleGenerationException";
/// Java class of a daemon that answered busy past the caller's wait (a
/// `DaemonRefusedException`): alive, with its data, serving its limit of
/// connections; a read fails its task, not the map stage.
pub const DAEMON_BUSY: &str = "dev/sluice/spark/service/DaemonBusyException";
/// Java class of a daemon's refusal of one request for what it names (a
/// `DaemonRefusedException`; [`ErrorCode::is_about_the_request`]): a commit
/// that does not match what it staged, a read of an attempt that never
/// committed there, a shuffle it does not hold, an argument out of range.
/// The daemon serves other requests and is not left out of pushes.
pub const REQUEST_REFUSED: &str = "dev/sluice/spark/service/RequestRefusedException";
/// Java class of a connection that ended under a read (an `IOException`;
/// `ClientError::connection_ended`): a daemon closes a stream its reader
/// left waiting past the daemon's stall limit, and the reader resumes the
/// read on a new connection; a dead daemon then cannot be reached.
pub const CONNECTION_ENDED: &str = "dev/sluice/spark/service/ConnectionEndedException";
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
    /// A service daemon refused a request, or its connection failed.
    #[error(transparent)]
    Service(#[from] sluice_service::ClientError),
    /// This process's own file could not be read (a map output's data file
    /// being pushed): the task's fault, not a daemon's.
    #[error("{0}")]
    LocalFile(String),
    /// The native code panicked; the message is the panic's.
    #[error("native panic: {0}")]
    Panic(String),
    /// Fetched bytes that passed their CRCs did not make sense to the code
    /// reading them (a record of the wrong width for its operator, a
    /// partition number out of range, a panic while decoding): see
    /// [`BridgeError::reading`].
    #[error("{what}: {detail}")]
    Fetched {
        /// The segment and offset being read.
        what: String,
        /// What went wrong.
        detail: String,
    },
}

impl BridgeError {
    /// The Java exception class this error is thrown as: the engine's data
    /// faults ([`EngineError::is_data_fault`]) and the service's failures are
    /// `IOException`s (a daemon's refusal, and among them a stale
    /// generation, subclasses of their own), its argument
    /// errors and the bridge's `IllegalArgumentException`s, the rest
    /// `SluiceException`s.
    pub fn java_class(&self) -> &'static str {
        match self {
            BridgeError::Service(e) => match e.code() {
                Some(ErrorCode::StaleGeneration) => STALE_GENERATION,
                Some(ErrorCode::Busy) => DAEMON_BUSY,
                Some(c) if c.is_about_the_request() => REQUEST_REFUSED,
                Some(_) => DAEMON_REFUSED,
                None if e.connection_ended() => CONNECTION_ENDED,
                None => IO_EXCEPTION,
            },
            BridgeError::Engine(e) if e.is_data_fault() => IO_EXCEPTION,
            BridgeError::Fetched { .. } => IO_EXCEPTION,
            BridgeError::Engine(EngineError::Argument(_))
            | BridgeError::Argument(_)
            | BridgeError::SettingsChanged(_) => ILLEGAL_ARGUMENT,
            BridgeError::Engine(_)
            | BridgeError::StaleHandle { .. }
            | BridgeError::Jni(_)
            | BridgeError::LocalFile(_)
            | BridgeError::Panic(_) => SLUICE_EXCEPTION,
        }
    }
}

impl BridgeError {
    /// This error, met while reading the fetched bytes of `what`, as the
    /// host must see it. Bytes that passed their CRCs can still be forged or
    /// written by a faulty writer, and whatever they make the reader fail
    /// with (a panic, a record whose shape the operator refuses) is a fault
    /// of those bytes: an `IOException`, which Spark's fetch iterator turns
    /// into a fetch failure so the map output is recomputed, rather than a
    /// task failure retried on the same bytes. Misuse by the Java side (a
    /// stale handle, a bad argument) and errors that are data faults
    /// already stay as they are.
    pub fn reading(self, what: &impl std::fmt::Display) -> BridgeError {
        let fetched = |detail: String| BridgeError::Fetched { what: what.to_string(), detail };
        match self {
            BridgeError::Panic(msg) => fetched(format!("native panic while reading it: {msg}")),
            BridgeError::Engine(
                e @ (EngineError::Format(_)
                | EngineError::Reorg(
                    ReorgError::ValueWidth { .. }
                    | ReorgError::StateWidth { .. }
                    | ReorgError::Layout { .. }
                    | ReorgError::Format(_),
                )),
            ) => fetched(e.to_string()),
            other => other,
        }
    }
}

/// Result of a bridge call.
pub type BridgeResult<T> = Result<T, BridgeError>;

#[cfg(test)]
mod tests {
    use super::*;

    const WHAT: &str = "shuffle_1_2_3 at byte 40";

    #[test]
    fn faults_of_fetched_bytes_are_io_exceptions_naming_the_block() {
        let refused = [
            BridgeError::Panic("index out of bounds".into()),
            BridgeError::Engine(EngineError::Reorg(ReorgError::ValueWidth {
                record: 3,
                value_type: "i64",
                want: 8,
                got: 5,
            })),
            BridgeError::Engine(EngineError::Reorg(ReorgError::StateWidth {
                record: 0,
                want: 16,
                got: 7,
            })),
        ];
        for e in refused {
            // Before `reading`, each of these failed the task as a SluiceException.
            assert_eq!(e.java_class(), SLUICE_EXCEPTION, "{e}");
            let r = e.reading(&WHAT);
            assert_eq!(r.java_class(), IO_EXCEPTION, "{r}");
            assert!(r.to_string().starts_with(WHAT), "{r}");
        }
    }

    #[test]
    fn misuse_and_data_faults_keep_their_class() {
        let stale = BridgeError::StaleHandle { kind: "reduce operator", handle: 9 };
        assert_eq!(stale.reading(&WHAT).java_class(), SLUICE_EXCEPTION);
        let arg = BridgeError::Argument("frame of 9 bytes in a 4-byte array".into());
        assert_eq!(arg.reading(&WHAT).java_class(), ILLEGAL_ARGUMENT);
        let cut = BridgeError::Engine(EngineError::Misplaced {
            what: WHAT.into(),
            detail: "cut short".into(),
        });
        let r = cut.reading(&WHAT);
        assert_eq!(r.java_class(), IO_EXCEPTION);
        assert!(matches!(r, BridgeError::Engine(EngineError::Misplaced { .. })), "{r}");
    }

    #[test]
    fn a_stale_generation_a_busy_daemon_and_a_refused_request_are_their_own_io_exceptions() {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 7340));
        let refused = |code| {
            BridgeError::Service(sluice_service::ClientError::Refused {
                addr,
                code,
                message: "shuffle 3 generation 7: generation 8 is registered".into(),
            })
        };
        assert_eq!(refused(ErrorCode::StaleGeneration).java_class(), STALE_GENERATION);
        assert_eq!(refused(ErrorCode::Busy).java_class(), DAEMON_BUSY);
        assert_eq!(refused(ErrorCode::UnknownShuffle).java_class(), REQUEST_REFUSED);
        assert_eq!(refused(ErrorCode::CommitMismatch).java_class(), REQUEST_REFUSED);
        assert_eq!(refused(ErrorCode::MissingCommit).java_class(), REQUEST_REFUSED);
        assert_eq!(refused(ErrorCode::BadRequest).java_class(), REQUEST_REFUSED);
        // What says the daemon cannot take pushes stays a plain refusal.
        for code in [
            ErrorCode::Storage,
            ErrorCode::ShuttingDown,
            ErrorCode::Unauthenticated,
            ErrorCode::Malformed,
            ErrorCode::Corrupt,
        ] {
            assert_eq!(refused(code).java_class(), DAEMON_REFUSED, "{code:?}");
        }
        let closed = BridgeError::Service(sluice_service::ClientError::Closed {
            addr,
            what: "reading an answer",
        });
        assert_eq!(closed.java_class(), CONNECTION_ENDED);
        let cut = BridgeError::Service(sluice_service::ClientError::Protocol {
            addr,
            source: sluice_service::protocol::ProtocolError::Truncated {
                frame: 9,
                read: 100,
                needed: 4096,
            },
        });
        assert_eq!(cut.java_class(), CONNECTION_ENDED);
        let late = BridgeError::Service(sluice_service::ClientError::Protocol {
            addr,
            source: sluice_service::protocol::ProtocolError::Timeout {
                what: "reading",
                after_ms: 120_000,
            },
        });
        assert_eq!(late.java_class(), IO_EXCEPTION);
    }
}
