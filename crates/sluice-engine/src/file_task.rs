//! A map attempt of a host-owned shuffle: host buffers in, the attempt's
//! output out to a data file in the partitioned layout (`output`), with
//! spill files when the host's memory manager asks for memory back.
//!
//! ```text
//!  host buffer ──► check_buffer (one walk: lengths, partition ids, segments)
//!             ──► engine buffer ──► offload workers (partition, operator)
//!  spill       ──► output so far ──► spill file (segments, no trailers)
//!  commit      ──► per partition: its spilled segments, then the rest ──► data file + lengths
//! ```
//! A spill that fails has lost the output it took (its pages are
//! recycled), so the attempt fails for good: that call and every later one
//! return [`EngineError::AttemptFailed`] naming the spill file, and the
//! attempt never commits.

use std::path::Path;

use sluice_core::format::Codec;

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult, ShuffleId};
use crate::host_keys::check_buffer;
use crate::map_task::MapTask;
use crate::output::checksum::Algorithm;
use crate::output::file::{write_output, OutputOptions, Spilled, Written};

/// One map attempt writing a data file for the host.
#[derive(Debug)]
pub struct FileMapTask<'e> {
    engine: &'e Engine,
    task: MapTask<'e>,
    partitions: u32,
    host_keys: bool,
    /// Output spilled so far, in spill order (files removed on drop).
    spilled: Vec<Spilled>,
    /// Why the attempt can no longer commit.
    failed: Option<String>,
}

impl<'e> FileMapTask<'e> {
    /// Starts attempt `attempt` of map `map` of the host-owned shuffle
    /// `shuffle` with `partitions` reduce partitions; `host_keys` for an
    /// operator shuffle (keys are the partition id and the host's key
    /// bytes).
    pub fn open(
        engine: &'e Engine,
        shuffle: ShuffleId,
        map: u32,
        attempt: u32,
        partitions: u32,
        host_keys: bool,
    ) -> EngineResult<Self> {
        let task = engine.map_task(shuffle, map, attempt)?;
        // The host's partition ids are checked against this count: one
        // larger than the shuffle's would let ids past its partitions in.
        let registered = task.state.spec.partitioner.partitions();
        if partitions != registered {
            return Err(EngineError::Argument(format!(
                "map {map} of shuffle {shuffle} opened for {partitions} partitions; the shuffle has {registered}"
            )));
        }
        Ok(FileMapTask { engine, task, partitions, host_keys, spilled: Vec::new(), failed: None })
    }

    /// Checks a buffer of `count` records the host filled and hands it to
    /// the offload workers (one copy into an engine buffer; returns once
    /// it is queued, waiting while the buffer pool is full).
    pub fn produce(&mut self, data: &[u8], count: u32) -> EngineResult<()> {
        self.check_alive()?;
        if count == 0 {
            // Records without a count would be dropped here, not checked.
            if !data.is_empty() {
                return Err(EngineError::Argument(format!(
                    "a map buffer of {} bytes said to hold no records",
                    data.len()
                )));
            }
            return Ok(());
        }
        let segment_bytes = self.engine.config().segment_bytes;
        let checked = check_buffer(data, count, self.partitions, self.host_keys, segment_bytes)?;
        let mut buf = self.task.buf_acquire(data.len())?;
        buf.extend_checked(&checked)?;
        self.task.buf_produce(buf)?;
        Ok(())
    }

    /// Writes the output emitted so far to the spill file `path` and frees
    /// it (the host's memory manager refused more); the attempt goes on.
    /// Returns the bytes of each partition's segment in the spill file: the
    /// data file starts each partition with its segments of the spill
    /// files, in spill order, copied byte for byte.
    pub fn spill(&mut self, path: &Path, codec: Codec) -> EngineResult<Vec<u64>> {
        self.check_alive()?;
        let taken = self.task.take_output_so_far();
        let per_partition = taken.map_err(|e| self.fail(e))?;
        let written = Spilled::write(path, &per_partition, self.partitions as usize, codec);
        self.engine.recycle_output(per_partition);
        let s = written.map_err(|e| self.fail(e))?;
        let lengths = s.lengths().to_vec();
        self.spilled.push(s);
        Ok(lengths)
    }

    /// Marks the attempt failed by `cause`; returns the error to report.
    fn fail(&mut self, cause: EngineError) -> EngineError {
        let reason = format!("a map-side spill failed, its records are lost: {cause}");
        self.failed = Some(reason.clone());
        EngineError::AttemptFailed(reason)
    }

    fn check_alive(&self) -> EngineResult<()> {
        match &self.failed {
            Some(reason) => Err(EngineError::AttemptFailed(reason.clone())),
            None => Ok(()),
        }
    }

    /// Spills so far.
    pub fn spills(&self) -> usize {
        self.spilled.len()
    }

    /// Waits for the offload workers, writes the output (spilled segments
    /// first, per partition) to `path` in the data-file layout and returns
    /// each partition's bytes and, with `checksum`, the host's checksum of
    /// each. The spill files are removed. An attempt whose spill failed
    /// does not commit.
    pub fn commit_to_file(
        self,
        path: &Path,
        codec: Codec,
        checksum: Option<Algorithm>,
    ) -> EngineResult<Written> {
        self.check_alive()?;
        let partitions = self.partitions as usize;
        let (per_partition, _stats) = self.task.finish_output()?;
        let options = OutputOptions { codec, checksum, trailers: true };
        let lengths = write_output(path, &per_partition, partitions, options, &self.spilled);
        // The pages go back for the next attempt's records (see
        // `Engine::recycle_output`).
        self.engine.recycle_output(per_partition);
        lengths
    }
}
