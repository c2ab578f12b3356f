//! Where operators put their output: batches of at most
//! [`EMIT_BATCH_BYTES`], split into runs when the operator emits sorted runs.

use crate::format::limits::VARIABLE_RECORD_PREFIX_BYTES;
use crate::format::{FormatError, Layout, RawRecord, RecordBatch};

/// Payload bytes per output batch (1 MiB).
pub const EMIT_BATCH_BYTES: usize = 1 << 20;

/// Size past which a batch filled by [`Emitter::emit_fixed_records`] grows
/// straight to [`EMIT_BATCH_BYTES`] instead of doubling (64 KiB): a small
/// output keeps a small batch, a large one skips the reallocations (each a
/// copy into memory not yet touched) between 64 KiB and 1 MiB.
const GROW_STRAIGHT_BYTES: usize = 64 << 10;

/// Collects an operator's output records.
#[derive(Debug)]
pub struct Emitter {
    layout: Layout,
    current: RecordBatch,
    done: Vec<RecordBatch>,
    /// Emptied batches handed back for reuse.
    spare: Vec<RecordBatch>,
    /// Index into `done` where each run starts (sorted operators).
    run_starts: Vec<usize>,
    records: u64,
    bytes: u64,
}

impl Emitter {
    /// An emitter of records in `layout`.
    pub fn new(layout: Layout) -> Self {
        Emitter {
            layout,
            current: RecordBatch::new(layout),
            done: Vec::new(),
            spare: Vec::new(),
            run_starts: Vec::new(),
            records: 0,
            bytes: 0,
        }
    }

    /// The output layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Appends one record.
    #[inline(always)]
    pub fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<(), FormatError> {
        let bytes = self.layout.record_bytes(key.len(), value.len());
        if self.current.payload_len() + bytes > EMIT_BATCH_BYTES && !self.current.is_empty() {
            self.seal();
        }
        self.current.push(key, value)?;
        self.records += 1;
        self.bytes += bytes as u64;
        Ok(())
    }

    /// Appends a whole batch as it is (no copy): the partly filled batch is
    /// sealed first, so order is kept.
    pub fn push_batch(&mut self, batch: RecordBatch) {
        if batch.is_empty() {
            return;
        }
        if !self.current.is_empty() {
            self.seal();
        }
        self.records += batch.len() as u64;
        self.bytes += batch.payload_len() as u64;
        self.done.push(batch);
    }

    /// Appends one raw record of a payload in the emitter's layout.
    #[inline]
    pub fn emit_raw(&mut self, raw: RawRecord<'_>) -> Result<(), FormatError> {
        match self.layout {
            Layout::Fixed { .. } => {
                if self.current.payload_len() + raw.bytes.len() > EMIT_BATCH_BYTES
                    && !self.current.is_empty()
                {
                    self.seal();
                }
                self.current.extend_fixed(raw.bytes)?;
                self.records += 1;
                self.bytes += raw.bytes.len() as u64;
                Ok(())
            }
            Layout::Variable => {
                let value =
                    raw.bytes.get(VARIABLE_RECORD_PREFIX_BYTES + raw.key.len()..).unwrap_or(&[]);
                self.emit(raw.key, value)
            }
        }
    }

    /// Appends whole fixed-width records laid out back to back, in batches
    /// of at most [`EMIT_BATCH_BYTES`].
    pub fn emit_fixed_records(&mut self, mut records: &[u8]) -> Result<(), FormatError> {
        let width = self.layout.fixed_record_bytes().unwrap_or(0).max(1);
        while !records.is_empty() {
            let mut room =
                EMIT_BATCH_BYTES.saturating_sub(self.current.payload_len()) / width * width;
            if room == 0 {
                if !self.current.is_empty() {
                    self.seal();
                    continue;
                }
                // A record wider than a batch gets a batch of its own.
                room = width;
            }
            let (head, tail) = records.split_at(room.min(records.len()));
            let len = self.current.payload_len();
            if len + head.len() > self.current.capacity().max(GROW_STRAIGHT_BYTES) {
                self.current.reserve(EMIT_BATCH_BYTES.max(len + head.len()) - len);
            }
            self.current.extend_fixed(head)?;
            self.records += (head.len() / width) as u64;
            self.bytes += head.len() as u64;
            records = tail;
        }
        Ok(())
    }

    /// Appends `count` fixed-width records, the leading record-width bytes
    /// of each slice `records` yields (slices of validated payloads in this
    /// emitter's layout), in order: a gather straight into the output
    /// batches, with no staging copy. A slice shorter than a record is an
    /// error.
    pub(crate) fn gather_fixed<'a>(
        &mut self,
        mut records: impl Iterator<Item = &'a [u8]>,
        count: usize,
    ) -> Result<(), FormatError> {
        let width = self.layout.fixed_record_bytes().unwrap_or(0).max(1);
        let mut left = count;
        while left > 0 {
            let mut room = EMIT_BATCH_BYTES.saturating_sub(self.current.payload_len()) / width;
            if room == 0 {
                if !self.current.is_empty() {
                    self.seal();
                    self.current.reserve(EMIT_BATCH_BYTES);
                    continue;
                }
                // A record wider than a batch gets a batch of its own.
                room = 1;
            }
            let want = room.min(left);
            let n = self.current.gather_fixed(&mut records, want)?;
            self.records += n as u64;
            self.bytes += (n * width) as u64;
            if n < want {
                break;
            }
            left -= n;
        }
        Ok(())
    }

    fn seal(&mut self) {
        let fresh = self.spare.pop().unwrap_or_else(|| RecordBatch::new(self.layout));
        let full = std::mem::replace(&mut self.current, fresh);
        self.done.push(full);
    }

    /// Seals the partly filled batch, so [`Emitter::take_batches`] returns
    /// everything emitted so far (at the end of input).
    pub fn flush(&mut self) {
        if !self.current.is_empty() {
            self.seal();
        }
    }

    /// Whether a batch filled since the last [`Emitter::take_batches`].
    pub fn has_sealed(&self) -> bool {
        !self.done.is_empty()
    }

    /// Takes the finished batches out (the partly filled one stays), for a
    /// consumer that ships output while the operator runs. Counters keep
    /// counting everything ever emitted; run marks are dropped.
    pub fn take_batches(&mut self) -> Vec<RecordBatch> {
        self.run_starts.clear();
        std::mem::take(&mut self.done)
    }

    /// Hands consumed batches back for reuse (their memory is already
    /// faulted in).
    pub fn recycle(&mut self, batches: impl IntoIterator<Item = RecordBatch>) {
        for mut b in batches {
            if b.layout() == self.layout {
                b.clear();
                self.spare.push(b);
            }
        }
    }

    /// Marks the start of a new sorted run: records emitted from here on
    /// belong to it.
    pub fn start_run(&mut self) {
        if !self.current.is_empty() {
            self.seal();
        }
        self.run_starts.push(self.done.len());
    }

    /// Records emitted so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Payload bytes emitted so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every output batch, in order.
    pub fn into_batches(mut self) -> Vec<RecordBatch> {
        if !self.current.is_empty() {
            self.seal();
        }
        self.done
    }

    /// Takes the finished batches out grouped into the sorted runs marked
    /// by [`Emitter::start_run`] (the partly filled batch is sealed first;
    /// records emitted before the first mark form a run of their own).
    pub fn take_runs(&mut self) -> Vec<Vec<RecordBatch>> {
        if !self.current.is_empty() {
            self.seal();
        }
        let mut starts = std::mem::take(&mut self.run_starts);
        if starts.first() != Some(&0) {
            starts.insert(0, 0);
        }
        let mut runs = Vec::with_capacity(starts.len());
        let mut batches = std::mem::take(&mut self.done).into_iter();
        for (i, &s) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(usize::MAX);
            let run: Vec<RecordBatch> = batches.by_ref().take(end.saturating_sub(s)).collect();
            if !run.is_empty() {
                runs.push(run);
            }
        }
        runs
    }

    /// The output grouped into the sorted runs marked by
    /// [`Emitter::start_run`] (records emitted before the first mark form a
    /// run of their own).
    pub fn into_runs(mut self) -> Vec<Vec<RecordBatch>> {
        self.take_runs()
    }
}
