//! A reduce partition's persisted output: blocks kept in memory while the
//! memory pool grants them, and beyond that written to disk.
//!
//! Blocks are appended in order, small ones gathered into blocks of about
//! [`BLOCK_BYTES`] (partition pages from the map side are 16-64 KiB; reduce
//! tasks read large blocks). While reservations succeed they stay in
//! memory; from the first refusal on, every further block goes to one
//! spill file per partition (the block format: header and payload CRCs;
//! writes gathered to at least 1 MiB), so the order of reading is memory
//! blocks, then disk blocks, exactly the order of appending. Reading a disk
//! block verifies its checksums and its index entry; a corrupt or
//! truncated file is a typed error naming the file and offset.

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::{MemoryPool, Reservation};
use sluice_core::reorg::SpillConfig;
use sluice_core::spill::{SpillFile, SpillWriter};

use crate::error::EngineError;

/// Payload bytes of the blocks a store keeps (1 MiB, the operators' output
/// batch size).
pub const BLOCK_BYTES: usize = sluice_core::reorg::EMIT_BATCH_BYTES;

/// What a store did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records appended.
    pub records: u64,
    /// Payload bytes appended.
    pub bytes: u64,
    /// Payload bytes that went to disk.
    pub disk_payload_bytes: u64,
    /// Bytes written to disk (block frames).
    pub disk_bytes_written: u64,
    /// `write` calls.
    pub disk_writes: u64,
    /// Blocks read back from disk.
    pub disk_blocks_read: u64,
}

#[derive(Debug)]
enum Disk {
    None,
    Writing(SpillWriter),
    Sealed(Arc<SpillFile>),
}

/// Ordered blocks of one partition, in memory then on disk.
#[derive(Debug)]
pub(crate) struct Store {
    layout: Layout,
    memory: VecDeque<RecordBatch>,
    /// Small blocks being gathered into one.
    gather: Option<RecordBatch>,
    reservation: Reservation,
    disk: Disk,
    disk_blocks: usize,
    next_disk: usize,
    spill: SpillConfig,
    stats: StoreStats,
}

impl Store {
    pub(crate) fn new(layout: Layout, pool: &MemoryPool, spill: SpillConfig) -> Self {
        Store {
            layout,
            memory: VecDeque::new(),
            gather: None,
            reservation: pool.reservation(),
            disk: Disk::None,
            disk_blocks: 0,
            next_disk: 0,
            spill,
            stats: StoreStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> StoreStats {
        self.stats
    }

    /// Appends one block (empty ones are skipped). Blocks under half of
    /// [`BLOCK_BYTES`] are gathered into one of about that size first, so
    /// reduce tasks read large blocks whatever the map side sent.
    pub(crate) fn append(&mut self, batch: RecordBatch) -> Result<(), EngineError> {
        if batch.is_empty() {
            return Ok(());
        }
        if batch.payload_len() >= BLOCK_BYTES / 2 {
            // What was gathered goes first: order is kept.
            if let Some(g) = self.gather.take() {
                self.keep(g)?;
            }
            return self.keep(batch);
        }
        let acc =
            self.gather.get_or_insert_with(|| RecordBatch::with_capacity(self.layout, BLOCK_BYTES));
        match self.layout {
            Layout::Fixed { .. } => acc.extend_fixed(batch.payload())?,
            Layout::Variable => {
                for r in batch.iter() {
                    acc.push(r.key, r.value)?;
                }
            }
        }
        if acc.payload_len() >= BLOCK_BYTES {
            if let Some(full) = self.gather.take() {
                self.keep(full)?;
            }
        }
        Ok(())
    }

    /// Keeps one block: in memory while the pool grants it, else on disk.
    fn keep(&mut self, batch: RecordBatch) -> Result<(), EngineError> {
        self.stats.records += batch.len() as u64;
        self.stats.bytes += batch.payload_len() as u64;
        if matches!(self.disk, Disk::None)
            && self.reservation.try_grow(batch.capacity().max(batch.payload_len())).is_ok()
        {
            self.memory.push_back(batch);
            return Ok(());
        }
        if matches!(self.disk, Disk::None) {
            let mut w = SpillWriter::create(&self.spill.dir, self.spill.codec)?;
            w.new_run();
            self.disk = Disk::Writing(w);
        }
        let Disk::Writing(w) = &mut self.disk else {
            return Err(EngineError::Invariant("a block appended to a sealed partition".into()));
        };
        w.append(0, batch.view())?;
        self.disk_blocks += 1;
        self.stats.disk_payload_bytes += batch.payload_len() as u64;
        Ok(())
    }

    /// Ends appending: the disk part, if any, is flushed and becomes
    /// readable.
    pub(crate) fn seal(&mut self) -> Result<(), EngineError> {
        if let Some(rest) = self.gather.take() {
            self.keep(rest)?;
        }
        if let Disk::Writing(w) = std::mem::replace(&mut self.disk, Disk::None) {
            let file = w.finish()?;
            let s = file.stats();
            self.stats.disk_bytes_written = s.bytes_written;
            self.stats.disk_writes = s.writes;
            self.disk = Disk::Sealed(file);
        }
        Ok(())
    }

    /// The next block in order, `None` after the last.
    pub(crate) fn next_block(&mut self) -> Result<Option<RecordBatch>, EngineError> {
        if let Some(b) = self.memory.pop_front() {
            self.reservation.shrink(b.capacity().max(b.payload_len()));
            return Ok(Some(b));
        }
        let Disk::Sealed(file) = &self.disk else { return Ok(None) };
        if self.next_disk >= self.disk_blocks {
            return Ok(None);
        }
        let mut reader = file.run_from(0, self.next_disk)?;
        let batch = reader.next_batch()?.map(|v| v.to_batch());
        self.next_disk += 1;
        self.stats.disk_blocks_read += 1;
        if let Some(b) = &batch {
            if b.layout() != self.layout {
                return Err(EngineError::Invariant(format!(
                    "persisted block layout {:?}, want {:?}",
                    b.layout(),
                    self.layout
                )));
            }
        }
        Ok(batch)
    }

    /// The spill file's path, if the partition went to disk (for tests and
    /// tools).
    pub(crate) fn disk_path(&self) -> Option<std::path::PathBuf> {
        match &self.disk {
            Disk::None => None,
            Disk::Writing(w) => Some(w.path().to_path_buf()),
            Disk::Sealed(f) => Some(f.path().to_path_buf()),
        }
    }
}
