//! Errors of the reorganization operators.

use crate::format::FormatError;
use crate::memory::MemoryError;
use crate::spill::SpillError;

/// What went wrong in an operator.
#[derive(Debug, thiserror::Error)]
pub enum ReorgError {
    /// A record could not be written to an output batch (too large).
    #[error("cannot emit a record: {0}")]
    Format(#[from] FormatError),
    /// Partitioning a batch failed (a bad job).
    #[error(transparent)]
    Partition(#[from] crate::partition::PartitionError),
    /// Spilling to, or reading back from, disk failed.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// The memory pool refused even the operator's minimum working set.
    #[error("operator cannot make progress: {0}")]
    Memory(#[from] MemoryError),
    /// A value is not the width its declared type needs.
    #[error("record {record}: value of {got} bytes where {value_type} needs {want}")]
    ValueWidth {
        /// Index of the record within its batch.
        record: usize,
        /// The declared value type.
        value_type: &'static str,
        /// Bytes the type needs.
        want: usize,
        /// Bytes the record has.
        got: usize,
    },
    /// An input batch is not in the layout the operator was built for.
    #[error("input layout {got} where the operator expects {want}")]
    Layout {
        /// The operator's layout.
        want: crate::format::Layout,
        /// The batch's layout.
        got: crate::format::Layout,
    },
    /// A partial state record is malformed (wrong width).
    #[error("record {record}: partial state of {got} bytes where {want} are expected")]
    StateWidth {
        /// Index of the record within its batch.
        record: usize,
        /// Expected state bytes.
        want: usize,
        /// State bytes found.
        got: usize,
    },
}
