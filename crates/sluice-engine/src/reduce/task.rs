//! A host-owned reduce task: the reduce side of a shuffle whose map outputs
//! the host stores and fetches (Spark's data files), run by the engine's
//! final operator ([`FinalOp`]) on the blocks the host hands over.
//!
//! ```text
//!  fetched blocks ──► decode, verify (CRC, lengths, every key carries one
//!  of the task's partitions) ──► FinalOp: final aggregate (spills sorted
//!  runs) | sort-merge of the map side's runs | final distinct
//!  ──► results, a buffer at a time ──► host
//! ```
//! The records of an operator shuffle are keyed `partition id (u32 LE) ++
//! the host's key bytes` (see `host_keys`); grouping, ordering or
//! deduplicating by the whole key is the same as by the host's key, since
//! the id is a function of it.
//!
//! Memory: each task's operator has a pool of its own. An aggregate or a
//! distinct may always use [`REDUCE_STATE_FLOOR_BYTES`] (so it always makes
//! progress, as Spark's own spillable collections start with an initial
//! threshold they never ask for); a sort starts with nothing. Everything
//! beyond that the host grants ([`ReduceTask::grant`]; under Spark,
//! execution memory the task's memory manager gave it), asked for before
//! each block by [`ReduceTask::shortfall`]. A group or run the pool refuses
//! goes to the task's spill directory as a sorted run, so a task short of
//! memory spills and its neighbours keep theirs.

use std::ops::Range;
use std::path::Path;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::{SpillConfig, StageSpec};

use crate::error::{EngineError, EngineResult};
use crate::host_keys::PARTITION_KEY_BYTES;
use crate::reduce::block::{with_checked_block, BlockName};
use crate::reduce::drain::Drain;
use crate::reduce::final_op::FinalOp;

/// Bytes of aggregation state a reduce task may hold without a grant
/// (1 MiB); see the module doc.
pub const REDUCE_STATE_FLOOR_BYTES: usize = 1 << 20;

/// What a task hands the host for each result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Results {
    /// Whole records (`klen:u32le vlen:u32le key value`): an aggregate's
    /// (key, result), a distinct's records.
    Records,
    /// The records' values back to back: a sort's, in key order.
    Values,
}

#[derive(Debug)]
enum Phase {
    /// Taking fetched blocks.
    Taking(FinalOp),
    /// Results emitted, being copied out.
    Draining(Box<Drain>),
    /// Transient, while `finish` owns the operator.
    Finishing,
}

/// The reduce side of one task (one or several adjacent partitions) of a
/// host-owned shuffle.
#[derive(Debug)]
pub struct ReduceTask {
    phase: Phase,
    results: Results,
    /// The task's memory: the floor plus what the host granted.
    memory: MemoryPool,
    /// The task's reduce partitions, `start..end` (Spark may give a task
    /// several adjacent partitions).
    partitions: Range<u32>,
    /// Records fed so far.
    records_in: u64,
    /// Payload bytes of every block fed so far.
    fed_bytes: usize,
    /// Runs taken and runs written to disk for want of memory, once
    /// finished.
    finished_runs: (u64, u64),
    /// Bytes written to spill files and what they held in memory, once
    /// finished (results spilled on the host's request later included).
    finished_spill: (u64, u64),
    /// Where results go when the host asks for their memory.
    spill: SpillConfig,
}

impl ReduceTask {
    /// The reduce side of `op` (an aggregate, a sort or a distinct) for
    /// partitions `partitions`, spilling to `spill_dir` (under Spark, a
    /// directory of the task's own in Spark's local directories, readable
    /// by the executor's user only, removed when the task ends).
    pub fn open(op: &StageSpec, partitions: Range<u32>, spill_dir: &Path) -> EngineResult<Self> {
        if partitions.is_empty() {
            return Err(EngineError::Argument(format!(
                "empty reduce partition range {partitions:?}"
            )));
        }
        if !spill_dir.is_dir() {
            return Err(EngineError::Argument(format!(
                "spill directory {} is not a directory",
                spill_dir.display()
            )));
        }
        let spill = SpillConfig { dir: spill_dir.to_owned(), ..SpillConfig::default() };
        let (floor, results) = match op {
            StageSpec::Sort => (0, Results::Values),
            _ => (REDUCE_STATE_FLOOR_BYTES, Results::Records),
        };
        let memory = MemoryPool::new(floor);
        let mut final_op = FinalOp::new(op, Layout::Variable, &memory, spill.clone(), None)
            .ok_or_else(|| EngineError::Argument(format!("{op:?} has no reduce-side operator")))?;
        // Every key starts with its partition's id (each block is checked
        // for one in the range), which a sort's order ignores: a task that
        // reads several partitions (adaptive execution's coalesced ranges)
        // orders their records by key alone, as Spark's reader does, and
        // under range partitioning the partitions' order agrees. The id's
        // bytes are little-endian, so ordering by them put partition 256
        // before 255.
        final_op.order_keys_after(PARTITION_KEY_BYTES);
        Ok(ReduceTask {
            phase: Phase::Taking(final_op),
            results,
            memory,
            partitions,
            records_in: 0,
            fed_bytes: 0,
            finished_runs: (0, 0),
            finished_spill: (0, 0),
            spill,
        })
    }

    /// Decodes and verifies one fetched block (`frame`, exactly one block)
    /// and hands its records to the operator. Returns the records taken.
    pub fn feed(&mut self, frame: &[u8], what: &BlockName) -> EngineResult<usize> {
        let Phase::Taking(op) = &mut self.phase else {
            return Err(EngineError::Argument(format!("block {what} fed after finish")));
        };
        let n = with_checked_block(frame, what, &self.partitions, |records| {
            self.fed_bytes = self.fed_bytes.saturating_add(records.payload().len());
            op.push(records)?;
            Ok(records.len())
        })?;
        self.records_in += n as u64;
        Ok(n)
    }

    /// Adds `bytes` the host granted to the memory the operator may use
    /// (a sort keeps runs in it, an aggregate its table).
    pub fn grant(&mut self, bytes: usize) {
        self.memory.grant(bytes);
    }

    /// Bytes beyond the pool's budget the operator may need before it
    /// takes a block of `upcoming` decoded bytes (0 if they fit).
    ///
    /// An aggregate counts its table's allocation at the peak of merging
    /// them, every record taken as a new group, its arrays grown as inserts
    /// grow them and the old slots held while they move
    /// (`FinalAggregate::peak_bytes_with`): a refusal sends the whole table
    /// down the spill path (a sorted run now, another at the end, then a
    /// merge), and asking for twice what it held, as Spark's spillable
    /// collections do, let TPC-H Q18's first block at sf 10 and 16
    /// partitions outgrow the 1 MiB floor before any grant. A sort or a
    /// distinct counts every byte fed: the run being cut is not in the pool
    /// until it ends, so the grant stays ahead of the runs it will hold.
    pub fn shortfall(&self, upcoming: usize) -> usize {
        let peak = match &self.phase {
            Phase::Taking(op) => op.peak_state_bytes_with(upcoming),
            _ => None,
        };
        let need = match peak {
            Some(peak) => self.memory.used().max(peak),
            None => self.fed_bytes.saturating_add(upcoming),
        };
        need.saturating_sub(self.memory.budget())
    }

    /// Bytes of state held now, within the pool.
    pub fn state_bytes(&self) -> usize {
        self.memory.used()
    }

    /// Most bytes of state the operator held at once (the pool's peak: its
    /// floor and its grants together): the host's peak execution memory.
    pub fn peak_state_bytes(&self) -> usize {
        self.memory.peak()
    }

    /// Sorted runs the operator wrote to disk for want of granted memory
    /// (a sort's runs, an aggregate's spilled tables; final once finished).
    pub fn spilled_runs(&self) -> u64 {
        match &self.phase {
            Phase::Taking(op) => op.spilled_runs(),
            _ => self.finished_runs.1,
        }
    }

    /// Bytes the operator wrote to spill files (merge passes included) and
    /// the payload bytes they held in memory: Spark's disk and memory bytes
    /// spilled. Known once finished (0 before).
    pub fn spilled_bytes(&self) -> (u64, u64) {
        self.finished_spill
    }

    /// Sorted runs a sort took so far (0 for the other operators).
    pub fn runs(&self) -> u64 {
        match &self.phase {
            Phase::Taking(op) => op.runs(),
            _ => self.finished_runs.0,
        }
    }

    /// Records fed so far.
    pub fn records_in(&self) -> u64 {
        self.records_in
    }

    /// Ends the input: an aggregate that kept its table in memory emits
    /// every key's result; one that spilled, and a sort, start the merge of
    /// their runs, produced as the host reads them. Returns the result
    /// count where it is known now (`None` for results merged from an
    /// aggregate's or a distinct's spilled runs).
    pub fn finish(&mut self) -> EngineResult<Option<u64>> {
        let Phase::Taking(op) = std::mem::replace(&mut self.phase, Phase::Finishing) else {
            return Err(EngineError::Argument("reduce task finished twice".into()));
        };
        let finished = op.finish()?;
        self.finished_runs = (finished.runs, finished.spilled_runs);
        self.finished_spill = (finished.spill_bytes, finished.spill_run_bytes);
        self.phase = Phase::Draining(Box::new(finished.drain));
        Ok(finished.records)
    }

    /// Payload bytes the finished results hold in memory: an aggregate's or
    /// a distinct's emitted whole and not yet copied out, a sort's runs
    /// kept in memory; 0 for results merged from spilled runs as they are
    /// read (what they hold is read buffers, not state). Before finish, the
    /// state held.
    pub fn held_bytes(&self) -> usize {
        match &self.phase {
            Phase::Draining(drain) => drain.held_bytes(),
            _ => self.memory.used(),
        }
    }

    /// Bytes of read buffers the finished results' merge of spilled runs
    /// holds at most (see [`Drain::read_buffer_bytes`]); 0 before finish.
    /// Under Spark they are in the executor's stated overhead; the daemon
    /// keeps them reserved from its budget.
    pub fn read_buffer_bytes(&self) -> usize {
        match &self.phase {
            Phase::Draining(drain) => drain.read_buffer_bytes(),
            _ => 0,
        }
    }

    /// Sends what the finished results hold in memory to disk, for a host
    /// that needs that memory (under Spark, another consumer of the task
    /// asked for execution memory): an aggregate's or a distinct's results,
    /// emitted whole at [`ReduceTask::finish`], go to a spill file in the
    /// task's spill directory and are read back a batch at a time; a sort's
    /// runs still in memory go to a spill file and its merge reads them
    /// from there (a sort's runs already read to their end are just let
    /// go). Returns the bytes of memory given up; 0 before finish, for
    /// results merged from spilled runs, or with about one batch left.
    pub fn spill_results(&mut self) -> EngineResult<u64> {
        let Phase::Draining(drain) = &mut self.phase else { return Ok(0) };
        let sent = drain.spill_pending(&self.spill.dir, self.spill.codec)?;
        if sent.written > 0 {
            self.finished_runs.1 += 1;
            self.finished_spill.0 += sent.written;
            self.finished_spill.1 += sent.moved;
        }
        Ok(sent.freed)
    }

    /// The next results as a whole batch of records (variable layout, each
    /// key the partition id and the host's key bytes, each value as the
    /// map side encodes it: an aggregate's state, a sort's record value),
    /// for a reader that encodes them again as blocks (the service daemon,
    /// when it runs the reduce side's operator); `None` at the end. Not to
    /// be mixed with [`ReduceTask::next_records`].
    pub fn next_batch(&mut self) -> EngineResult<Option<RecordBatch>> {
        let Phase::Draining(drain) = &mut self.phase else {
            return Err(EngineError::Argument("results read before finish".into()));
        };
        drain.next_batch()
    }

    /// Copies the next results into `out`: whole records
    /// (`klen:u32le vlen:u32le key value`, key = partition id ++ the host's
    /// key bytes) of an aggregate or a distinct, the values of a sort in key
    /// order. Returns (bytes, records); (0, 0) when every result was copied,
    /// and (bytes the next result needs, 0) when it does not fit `out`, so
    /// the caller can retry with a larger buffer.
    pub fn next_records(&mut self, out: &mut [u8]) -> EngineResult<(usize, usize)> {
        let Phase::Draining(drain) = &mut self.phase else {
            return Err(EngineError::Argument("results read before finish".into()));
        };
        match self.results {
            Results::Records => drain.copy_out(out, |record, _| record),
            Results::Values => drain.copy_out(out, |record, klen| &record[8 + klen..]),
        }
    }
}
