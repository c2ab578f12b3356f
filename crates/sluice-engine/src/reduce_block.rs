//! A block of a finished reduce partition, as `buf_consume` hands it out.

use sluice_core::format::{BatchView, RecordBatch};

use crate::error::ShuffleId;

/// An output block of a reduce partition, handed to a reduce task.
#[derive(Debug)]
pub struct ReduceBlock {
    pub(crate) shuffle: ShuffleId,
    pub(crate) reduce: u32,
    pub(crate) batch: RecordBatch,
}

impl ReduceBlock {
    /// The records.
    pub fn view(&self) -> BatchView<'_> {
        self.batch.view()
    }

    /// The shuffle and reduce id it belongs to.
    pub fn source(&self) -> (ShuffleId, u32) {
        (self.shuffle, self.reduce)
    }

    /// Records in the block.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// True for a block without records (never handed out).
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}
