//! Cursors over sorted runs, in memory or in a spill file, for the k-way
//! merge.

use super::ReorgError;
use crate::format::limits::VARIABLE_RECORD_PREFIX_BYTES;
use crate::format::{Layout, Record, RecordBatch};
use crate::spill::SpillRunReader;

/// A position in a sorted run of records.
pub trait RunCursor {
    /// The record under the cursor, `None` once the run is exhausted.
    fn current(&self) -> Option<Record<'_>>;
    /// Moves to the next record.
    fn advance(&mut self) -> Result<(), ReorgError>;
}

/// The record starting at byte `off` of a validated payload, and its size.
#[inline]
pub(crate) fn record_at(layout: Layout, payload: &[u8], off: usize) -> Option<(Record<'_>, usize)> {
    match layout {
        Layout::Fixed { key_width, value_width } => {
            let kw = usize::from(key_width);
            let n = kw + value_width as usize;
            let rec = payload.get(off..off.checked_add(n)?)?;
            Some((Record { key: &rec[..kw], value: &rec[kw..] }, n))
        }
        Layout::Variable => {
            let rest = payload.get(off..)?;
            let (klen, rest) = rest.split_first_chunk::<4>()?;
            let (vlen, rest) = rest.split_first_chunk::<4>()?;
            let (k, v) = (u32::from_le_bytes(*klen) as usize, u32::from_le_bytes(*vlen) as usize);
            let key = rest.get(..k)?;
            let value = rest.get(k..k.checked_add(v)?)?;
            Some((Record { key, value }, VARIABLE_RECORD_PREFIX_BYTES + k + v))
        }
    }
}

/// A run held in memory as a list of batches.
#[derive(Debug)]
pub struct MemRun {
    batches: Vec<RecordBatch>,
    batch: usize,
    off: usize,
}

impl MemRun {
    /// A cursor at the first record of `batches`.
    pub fn new(batches: Vec<RecordBatch>) -> Self {
        let mut run = MemRun { batches, batch: 0, off: 0 };
        skip_empty(&run.batches, &mut run.batch, &mut run.off);
        run
    }

    /// A second cursor over the same run, standing where this one does;
    /// it borrows the batches, so reading it leaves this one unmoved.
    pub fn view(&self) -> MemView<'_> {
        MemView { batches: &self.batches, batch: self.batch, off: self.off }
    }
}

/// The record under a cursor at `off` of batch `batch` of `batches`.
#[inline]
fn mem_current(batches: &[RecordBatch], batch: usize, off: usize) -> Option<Record<'_>> {
    let b = batches.get(batch)?;
    record_at(b.layout(), b.payload(), off).map(|(r, _)| r)
}

/// Moves a cursor over `batches` past its record.
fn mem_advance(batches: &[RecordBatch], batch: &mut usize, off: &mut usize) {
    if let Some(b) = batches.get(*batch) {
        if let Some((_, n)) = record_at(b.layout(), b.payload(), *off) {
            *off += n;
        }
        skip_empty(batches, batch, off);
    }
}

/// Moves a cursor past the ends of batches to the next record.
fn skip_empty(batches: &[RecordBatch], batch: &mut usize, off: &mut usize) {
    while *batch < batches.len() && *off >= batches[*batch].payload_len() {
        *batch += 1;
        *off = 0;
    }
}

impl RunCursor for MemRun {
    #[inline]
    fn current(&self) -> Option<Record<'_>> {
        mem_current(&self.batches, self.batch, self.off)
    }

    fn advance(&mut self) -> Result<(), ReorgError> {
        mem_advance(&self.batches, &mut self.batch, &mut self.off);
        Ok(())
    }
}

/// A cursor over a [`MemRun`]'s batches that borrows them
/// ([`MemRun::view`]).
#[derive(Debug)]
pub struct MemView<'a> {
    batches: &'a [RecordBatch],
    batch: usize,
    off: usize,
}

impl RunCursor for MemView<'_> {
    #[inline]
    fn current(&self) -> Option<Record<'_>> {
        mem_current(self.batches, self.batch, self.off)
    }

    fn advance(&mut self) -> Result<(), ReorgError> {
        mem_advance(self.batches, &mut self.batch, &mut self.off);
        Ok(())
    }
}

/// A run read back from a spill file, one verified block at a time.
#[derive(Debug)]
pub struct SpillRun {
    reader: SpillRunReader,
    block: Option<RecordBatch>,
    off: usize,
}

impl SpillRun {
    /// A cursor at the first record of the run (reads its first block).
    pub fn new(reader: SpillRunReader) -> Result<Self, ReorgError> {
        let mut run = SpillRun { reader, block: None, off: 0 };
        run.load()?;
        Ok(run)
    }

    fn load(&mut self) -> Result<(), ReorgError> {
        self.off = 0;
        self.block = loop {
            match self.reader.next_batch()? {
                Some(v) if v.is_empty() => continue,
                Some(v) => break Some(v.to_batch()),
                None => break None,
            }
        };
        Ok(())
    }
}

impl RunCursor for SpillRun {
    #[inline]
    fn current(&self) -> Option<Record<'_>> {
        let b = self.block.as_ref()?;
        record_at(b.layout(), b.payload(), self.off).map(|(r, _)| r)
    }

    fn advance(&mut self) -> Result<(), ReorgError> {
        let Some(b) = self.block.as_ref() else { return Ok(()) };
        if let Some((_, n)) = record_at(b.layout(), b.payload(), self.off) {
            self.off += n;
        }
        if self.off >= b.payload_len() {
            self.load()?;
        }
        Ok(())
    }
}

/// Either kind of run, so one merge can take both.
#[derive(Debug)]
pub enum AnyRun {
    /// In memory.
    Mem(MemRun),
    /// On disk.
    Spill(SpillRun),
}

impl AnyRun {
    /// Bytes of read buffers the runs among `runs` read from disk hold at
    /// most ([`crate::reorg::runs::MERGE_RUN_READ_BYTES`] each): memory a
    /// merge uses beside its state while its results are read.
    pub(crate) fn read_buffer_bytes(runs: &[AnyRun]) -> usize {
        let on_disk = runs.iter().filter(|r| matches!(r, AnyRun::Spill(_))).count();
        on_disk * crate::reorg::runs::MERGE_RUN_READ_BYTES
    }
}

impl RunCursor for AnyRun {
    #[inline]
    fn current(&self) -> Option<Record<'_>> {
        match self {
            AnyRun::Mem(r) => r.current(),
            AnyRun::Spill(r) => r.current(),
        }
    }

    fn advance(&mut self) -> Result<(), ReorgError> {
        match self {
            AnyRun::Mem(r) => r.advance(),
            AnyRun::Spill(r) => r.advance(),
        }
    }
}
