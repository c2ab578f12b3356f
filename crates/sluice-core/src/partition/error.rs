//! Typed errors of the partition operator.

use crate::format::FormatError;

/// What can go wrong while partitioning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionError {
    /// A partition count of 0 or above the cap.
    #[error("partition count {got} is out of range 1..={max}")]
    PartitionCount {
        /// Requested count.
        got: u32,
        /// [`crate::partition::function::PARTITIONS_MAX`].
        max: u32,
    },
    /// Range split points that are not sorted.
    #[error("range split points must be sorted")]
    UnsortedSplits,
    /// A range partitioner asked to sample no keys.
    #[error("cannot derive range split points from an empty sample")]
    EmptySample,
    /// A record larger than a page.
    #[error("record of {record_bytes} bytes does not fit a {page_bytes}-byte page")]
    RecordTooLarge {
        /// Bytes the record needs in a page.
        record_bytes: usize,
        /// The page size.
        page_bytes: usize,
    },
    /// A thread count of 0 or above the cap.
    #[error("thread count {got} is out of range 1..={max}")]
    ThreadCount {
        /// Requested count.
        got: usize,
        /// The cap.
        max: usize,
    },
    /// A partitioner named a partition it does not have.
    #[error("partitioner answered partition {got} of {partitions}")]
    PartitionOutOfRange {
        /// The answer.
        got: u32,
        /// The partitioner's count.
        partitions: u32,
    },
    /// Input batches with different layouts.
    #[error("input batches have different layouts")]
    MixedLayouts,
    /// A format error while building output.
    #[error(transparent)]
    Format(#[from] FormatError),
}
