//! What the engine's calls can fail with.
//!
//! Misuse of one shuffle (an unknown id, a reduce id out of range, a
//! buffer the engine did not hand out) is reported to the caller and
//! changes nothing in any other shuffle; failures inside the operators
//! (corrupt spill files, a full disk) carry the operator's typed error.

use sluice_core::format::FormatError;
use sluice_core::reorg::ReorgError;
use sluice_core::spill::SpillError;

/// Identifier of a registered shuffle.
pub type ShuffleId = u32;

/// Result of an engine call.
pub type EngineResult<T> = Result<T, EngineError>;

/// An engine call that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No shuffle is registered under this id.
    #[error("shuffle {0} is not registered")]
    UnknownShuffle(ShuffleId),
    /// The shuffle was unregistered while a map attempt of it ran: the
    /// attempt's queued segments were dropped, so it cannot commit.
    #[error(
        "the shuffle was unregistered while this map attempt ran (its queued records were dropped)"
    )]
    UnregisteredWhileRunning,
    /// A shuffle with this id is already registered.
    #[error("shuffle {0} is already registered")]
    ShuffleExists(ShuffleId),
    /// The shuffle's description is unusable.
    #[error("shuffle {shuffle}: {reason}")]
    BadShuffle {
        /// The shuffle.
        shuffle: ShuffleId,
        /// What is wrong.
        reason: String,
    },
    /// A reduce id at or beyond the shuffle's partition count.
    #[error("shuffle {shuffle}: reduce id {reduce} out of range (partitions: {partitions})")]
    UnknownReduce {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The reduce id asked for.
        reduce: u32,
        /// Its number of reduce partitions.
        partitions: u32,
    },
    /// A map id at or beyond the shuffle's map task count.
    #[error("shuffle {shuffle}: map id {map} out of range (map tasks: {maps})")]
    UnknownMap {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The map id.
        map: u32,
        /// Its number of map tasks.
        maps: u32,
    },
    /// A buffer this engine did not hand out, or one already produced.
    #[error("buffer {buffer} was not acquired from this engine or was already produced")]
    UnknownBuffer {
        /// The buffer's id.
        buffer: u64,
    },
    /// A record that does not fit the buffer it is written to.
    #[error(
        "a record of {record} bytes does not fit a buffer with {room} of {capacity} bytes free"
    )]
    RecordTooLarge {
        /// The record's encoded size.
        record: usize,
        /// Bytes still free in the buffer.
        room: usize,
        /// The buffer's size.
        capacity: usize,
    },
    /// The buffer pool is full and the caller asked not to wait.
    #[error("the buffer pool is full ({used} of {capacity} bytes in use)")]
    WouldBlock {
        /// Bytes in use.
        used: usize,
        /// The pool's capacity.
        capacity: usize,
    },
    /// The host asked a waiting thread to stop (a Spark task was killed).
    #[error("interrupted while waiting for {what}")]
    Interrupted {
        /// What the thread waited for.
        what: String,
    },
    /// A host thread waited longer than the engine's bound.
    #[error("waited {waited:?} for {what}, longer than the bound of {bound:?}")]
    WaitTimedOut {
        /// What the thread waited for.
        what: String,
        /// How long it waited.
        waited: std::time::Duration,
        /// The bound ([`crate::waits::HOST_WAIT_MAX`]).
        bound: std::time::Duration,
    },
    /// The map stage of the shuffle has ended; no more map output is taken.
    #[error("shuffle {0}: the map stage has ended")]
    MapStageEnded(ShuffleId),
    /// The map stage cannot end: some map tasks have no committed output.
    #[error("shuffle {shuffle}: map tasks without committed output: {missing:?}")]
    MissingMapOutput {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The first few map ids without output.
        missing: Vec<u32>,
    },
    /// Reduce output was asked for before the map stage ended.
    #[error("shuffle {0}: the map stage has not ended")]
    MapStageRunning(ShuffleId),
    /// The engine is shutting down.
    #[error("the engine is shut down")]
    Closed,
    /// A map attempt's processing failed; the attempt is void.
    #[error("shuffle {shuffle}, map {map} attempt {attempt}: {source}")]
    Attempt {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The map id.
        map: u32,
        /// The attempt number.
        attempt: u32,
        /// Why.
        #[source]
        source: Box<EngineError>,
    },
    /// A reduce partition's second-round operator failed.
    #[error("shuffle {shuffle}, reduce {reduce}: {source}")]
    Reduce {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The reduce id.
        reduce: u32,
        /// Why.
        #[source]
        source: Box<EngineError>,
    },
    /// A reduce partition failed earlier (the first call was told why).
    #[error("shuffle {shuffle}, reduce {reduce} failed earlier: {message}")]
    PartitionFailed {
        /// The shuffle.
        shuffle: ShuffleId,
        /// The reduce id.
        reduce: u32,
        /// The first error's message.
        message: String,
    },
    /// A block did not decode: corrupt, truncated or forged bytes.
    #[error("corrupt Sluice block in {what}: {source}")]
    Corrupt {
        /// Which shuffle block (the host's block name) or buffer.
        what: String,
        /// What the decoder found.
        source: FormatError,
    },
    /// A well-formed block whose records do not belong where it was found,
    /// or a segment whose blocks do not add up to its trailer.
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
    /// Writing or reading a map output or spill file failed (a full disk,
    /// a removed directory).
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A map attempt that lost output (a spill that could not be written)
    /// and can no longer commit; the text names the cause and the file.
    #[error("map attempt failed: {0}")]
    AttemptFailed(String),
    /// A value the host passed is out of range, or a call came out of
    /// order (results read before the input ended).
    #[error("{0}")]
    Argument(String),
    /// The shuffle's reduce side belongs to the other owner (a host-owned
    /// shuffle read through the engine, or the reverse).
    #[error("shuffle {shuffle}: its reduce side is owned by the {owner}")]
    WrongOwner {
        /// The shuffle.
        shuffle: ShuffleId,
        /// Who owns it (`"host"` or `"engine"`).
        owner: &'static str,
    },
    /// An operator failed.
    #[error(transparent)]
    Reorg(#[from] ReorgError),
    /// A record or block was malformed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Persisting or reading back a partition failed.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// An operator panicked on some input; the attempt or partition it
    /// worked for is void, the engine and every other shuffle go on.
    #[error("an operator panicked: {0}")]
    Panicked(String),
    /// An internal invariant did not hold (a bug, reported rather than
    /// answered wrongly).
    #[error("engine invariant broken: {0}")]
    Invariant(String),
    /// Starting a thread failed.
    #[error("starting an engine thread failed: {0}")]
    Thread(#[source] std::io::Error),
}

impl EngineError {
    /// Whether the error is about the shuffle's bytes or files (corrupt,
    /// misplaced or cut data, a failed write, an attempt that lost
    /// output), which a host treats as an I/O fault: Spark turns one from
    /// a fetched block into a fetch failure, so the map output is
    /// recomputed rather than read wrong.
    pub fn is_data_fault(&self) -> bool {
        matches!(
            self,
            EngineError::Corrupt { .. }
                | EngineError::Misplaced { .. }
                | EngineError::Io { .. }
                | EngineError::AttemptFailed(_)
        )
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
