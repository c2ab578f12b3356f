//! Offloaded operators (SmartShuffle's `registerShuffle` operator): an
//! aggregation Spark hands to the engine whole, map side and reduce side
//! (and, in `sorted`, the sort of a `sortByKey`).
//!
//! ```text
//!  map task:    (pid key, value) records ──► engine: partition + PartialAggregate
//!                                            per destination ──► Sluice blocks of partials
//!  reduce task: fetched blocks ──► decode, verify ──► FinalAggregate (spills sorted runs)
//!                                            ──► (key, result) records ──► JVM
//! ```
//! The records of an operator shuffle are keyed `partition id (u32 LE) ++
//! the host's key bytes`: the engine's partitioner reads the id, and the
//! aggregation groups by the whole key, which is the same grouping since
//! the id is a function of the key. Values are little-endian numbers of the
//! shuffle's value type (see [`agg_spec`]); a value of another width is a
//! typed error naming the record.
//!
//! On the reduce side a [`ReduceAggregate`] belongs to one reduce task: each
//! block Spark fetched is decoded and verified (CRC, lengths, and every key
//! must carry the task's partition id), and its partial records merge into
//! one [`FinalAggregate`]. Its state lives in a memory pool of the task's
//! own: [`REDUCE_STATE_FLOOR_BYTES`] it may always use, plus what the host
//! grants ([`ReduceOp::grant`]; under Spark, execution memory the task's
//! memory manager gave it, asked for before each block by the shortfall
//! [`ReduceOp::shortfall`] reports). When the pool refuses a new group the
//! table is written to the task's spill directory as a sorted run, so a
//! task short of memory spills and its neighbours keep theirs.
//! [`ReduceAggregate::finish`] then emits every key's result once, and
//! [`ReduceAggregate::next_records`] copies them out a buffer at a time.

use std::collections::VecDeque;

use sluice_core::format::{BatchView, Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::aggregate::{
    AggFn, AggSpec, FinalAggregate, Lanes, SpillStrategy, ValueType,
};
use sluice_core::reorg::sort::MergeStream;
use sluice_core::reorg::StageSpec;
use sluice_core::reorg::{Emitter, SpillConfig, EMIT_BATCH_BYTES};

use crate::bridge::engine;
use crate::error::{BridgeError, BridgeResult};
use crate::partitioner::{key_partition, PARTITION_KEY_BYTES};
use crate::read::{with_decoded_block, BlockName};

/// Bytes of aggregation state a reduce task may hold without a grant
/// (1 MiB), so that it always makes progress (one group at least), as
/// Spark's own spillable collections start with an initial threshold they
/// never ask for. Everything beyond it is granted by the host.
pub const REDUCE_STATE_FLOOR_BYTES: usize = 1 << 20;

/// The aggregation a JVM names by two small codes: `func` 0 sum, 1 count,
/// 2 min, 3 max, 4 exact sum (Spark SQL's ANSI `sum`: its result carries an
/// overflow flag), with `value` 0 i64, 1 i32, 2 f64; or [`FUNC_LANES`], a
/// Spark SQL aggregate of several functions, with `value` the lanes' code
/// ([`Lanes::from_code`]).
pub fn agg_spec(func: i32, value: i32) -> BridgeResult<AggSpec> {
    if func == FUNC_LANES {
        let lanes = Lanes::from_code(value as u32)
            .ok_or_else(|| BridgeError::Argument(format!("unknown aggregate lanes {value:#x}")))?;
        return Ok(AggSpec::new(AggFn::Lanes(lanes), ValueType::I64));
    }
    let f = match func {
        0 => AggFn::Sum,
        1 => AggFn::Count,
        2 => AggFn::Min,
        3 => AggFn::Max,
        4 => AggFn::SumExact,
        other => return Err(BridgeError::Argument(format!("unknown aggregate function {other}"))),
    };
    let v = match value {
        0 => ValueType::I64,
        1 => ValueType::I32,
        2 => ValueType::F64,
        other => return Err(BridgeError::Argument(format!("unknown value type {other}"))),
    };
    Ok(AggSpec::new(f, v))
}

/// Function code of several aggregates over one record's values.
pub const FUNC_LANES: i32 = 5;

/// Operator code of a shuffle with no engine operator.
pub const OP_NONE: i32 = -1;

/// Operator code of a sorting shuffle (`sortByKey` with a natural key
/// order); codes 0 and up are aggregations ([`agg_spec`]), [`OP_NONE`] is
/// none.
pub const OP_SORT: i32 = -2;

/// The map-side spilling strategy of host code `code`
/// (`SpillStrategy.java`): 0 state, 1 input, 2 evict.
pub fn spill_strategy(code: i32) -> BridgeResult<SpillStrategy> {
    match code {
        0 => Ok(SpillStrategy::State),
        1 => Ok(SpillStrategy::Input),
        2 => Ok(SpillStrategy::Evict),
        other => Err(BridgeError::Argument(format!("unknown spill strategy {other}"))),
    }
}

/// The engine operator a host names for a shuffle: Java's `EngineOp`,
/// read by field, so the two sides share one typed spec rather than a
/// tuple of ints in some order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOp {
    /// [`OP_NONE`], [`OP_SORT`], or an aggregate function code
    /// ([`agg_spec`]); Java's `EngineOp.function`.
    pub function: i32,
    /// An aggregate's value type code, else 0; Java's `EngineOp.valueType`.
    pub value_type: i32,
}

impl HostOp {
    /// Reads a Java `EngineOp`; a null object is an argument error.
    pub fn read(env: &mut jni::JNIEnv<'_>, op: &jni::objects::JObject<'_>) -> BridgeResult<Self> {
        if op.is_null() {
            return Err(BridgeError::Argument("no engine operator (null EngineOp)".into()));
        }
        let function = env.get_field(op, "function", "I")?.i()?;
        let value_type = env.get_field(op, "valueType", "I")?.i()?;
        Ok(HostOp { function, value_type })
    }

    /// The map-side operator, an aggregation spilling by `spill`.
    pub fn stage_spec(self, spill: SpillStrategy) -> BridgeResult<StageSpec> {
        stage_spec(self.function, self.value_type, spill)
    }
}

/// The engine operator of a shuffle the host registers with codes
/// (`func`, `value`): [`OP_NONE`], [`OP_SORT`], or an aggregation spilling by
/// `spill`.
pub fn stage_spec(func: i32, value: i32, spill: SpillStrategy) -> BridgeResult<StageSpec> {
    match func {
        OP_NONE => Ok(StageSpec::None),
        OP_SORT => Ok(StageSpec::Sort),
        _ => Ok(StageSpec::Aggregate(agg_spec(func, value)?, spill)),
    }
}

/// The reduce side of one task of an operator shuffle.
#[derive(Debug)]
pub enum ReduceOp {
    /// Final aggregation (results are whole records).
    Aggregate(ReduceAggregate),
    /// Sort-merge of sorted runs (results are the records' values).
    Sort(crate::sorted::ReduceSort),
}

impl ReduceOp {
    /// The reduce side of operator codes (`func`, `value`) for partitions
    /// `partitions`, spilling to `spill_dir`.
    pub fn open(
        func: i32,
        value: i32,
        partitions: std::ops::Range<u32>,
        spill_dir: &std::path::Path,
    ) -> BridgeResult<Self> {
        if func == OP_SORT {
            return Ok(ReduceOp::Sort(crate::sorted::ReduceSort::open(partitions, spill_dir)?));
        }
        let spec = agg_spec(func, value)?;
        Ok(ReduceOp::Aggregate(ReduceAggregate::open(spec, partitions, spill_dir)?))
    }

    /// Decodes, verifies and takes in one fetched block.
    pub fn feed(&mut self, frame: &[u8], what: &BlockName) -> BridgeResult<usize> {
        match self {
            ReduceOp::Aggregate(a) => a.feed(frame, what),
            ReduceOp::Sort(s) => s.feed(frame, what),
        }
    }

    /// Ends the input; returns the result count.
    pub fn finish(&mut self) -> BridgeResult<u64> {
        match self {
            ReduceOp::Aggregate(a) => a.finish(),
            ReduceOp::Sort(s) => s.finish(),
        }
    }

    /// Memory the host granted the task: the sort keeps runs in it, the
    /// aggregate its table. Returns whether the operator took it (always).
    pub fn grant(&mut self, bytes: usize) -> bool {
        match self {
            ReduceOp::Aggregate(a) => a.grant(bytes),
            ReduceOp::Sort(s) => s.grant(bytes),
        }
        true
    }

    /// Bytes the host would have to grant before the operator takes a
    /// block of `upcoming` decoded bytes (0 if it has room): a sort counts
    /// every byte fed (it may keep each run), an aggregate what its table
    /// holds now and may grow to, not everything it was fed.
    pub fn shortfall(&self, upcoming: usize) -> usize {
        match self {
            ReduceOp::Aggregate(a) => a.shortfall(upcoming),
            ReduceOp::Sort(s) => s.shortfall(upcoming),
        }
    }

    /// Sorted runs the operator wrote to disk for want of granted memory
    /// (a sort's runs, an aggregate's spilled tables; final once finished).
    pub fn spilled_runs(&self) -> u64 {
        match self {
            ReduceOp::Aggregate(a) => a.spilled_runs(),
            ReduceOp::Sort(s) => s.spilled_runs(),
        }
    }

    /// Copies results into `out`: (bytes, records), see the operators.
    pub fn next_records(&mut self, out: &mut [u8]) -> BridgeResult<(usize, usize)> {
        match self {
            ReduceOp::Aggregate(a) => a.next_records(out),
            ReduceOp::Sort(s) => s.next_values(out),
        }
    }
}

/// The reduce side of one operator shuffle's partitions, for one task.
#[derive(Debug)]
pub struct ReduceAggregate {
    agg: FinalAggregate,
    /// The task's memory: the floor plus what the host granted.
    memory: MemoryPool,
    /// The task's reduce partitions, `start..end` (Spark may give a task
    /// several adjacent partitions).
    partitions: std::ops::Range<u32>,
    phase: Phase,
    /// Partial records merged.
    records_in: u64,
}

impl ReduceAggregate {
    /// A final aggregate of `spec` for reduce partitions `partitions`.
    pub fn open(
        spec: AggSpec,
        partitions: std::ops::Range<u32>,
        spill_dir: &std::path::Path,
    ) -> BridgeResult<Self> {
        let spill = reduce_spill(&partitions, spill_dir)?;
        let memory = MemoryPool::new(REDUCE_STATE_FLOOR_BYTES);
        let agg = FinalAggregate::new(spec, Layout::Variable, &memory, spill);
        Ok(ReduceAggregate { agg, memory, partitions, phase: Phase::Merging, records_in: 0 })
    }

    /// Adds `bytes` the host granted to the memory the state may use.
    pub fn grant(&mut self, bytes: usize) {
        self.memory.grant(bytes);
    }

    /// Bytes beyond the pool's budget that the table may need before it
    /// takes a block of `upcoming` decoded bytes (0 if they fit): its
    /// allocation at the peak of merging them, every record taken as a new
    /// group, its arrays grown as inserts grow them and the old slots held
    /// while they move (`FinalAggregate::peak_bytes_with`). A refusal sends
    /// the whole table down the spill path (a sorted run now, another at
    /// the end, then a merge): asking for twice what it held, as Spark's
    /// spillable collections do, let TPC-H Q18's first block at sf 10 and
    /// 16 partitions outgrow the 1 MiB floor before any grant, and its
    /// reduce tasks spent twice the CPU of Spark's hash aggregate.
    pub fn shortfall(&self, upcoming: usize) -> usize {
        let need = self.memory.used().max(self.agg.peak_bytes_with(upcoming));
        need.saturating_sub(self.memory.budget())
    }

    /// Bytes of state held now, within the pool.
    pub fn state_bytes(&self) -> usize {
        self.memory.used()
    }

    /// Tables written to disk as sorted runs because the pool refused a
    /// group.
    pub fn spilled_runs(&self) -> u64 {
        self.agg.stats().state_spills
    }

    /// Decodes and verifies one fetched block (`frame`, exactly one block)
    /// and merges its partial records. Returns the records merged.
    pub fn feed(&mut self, frame: &[u8], what: &BlockName) -> BridgeResult<usize> {
        if !matches!(self.phase, Phase::Merging) {
            return Err(BridgeError::Argument(format!("block {what} fed after finish")));
        }
        let agg = &mut self.agg;
        let n = with_checked_block(frame, what, &self.partitions, |records| {
            agg.push(records)?;
            Ok(records.len())
        })?;
        self.records_in += n as u64;
        Ok(n)
    }

    /// Ends the merge: every key's result is emitted (merging spilled runs
    /// if there are any). Returns the result count.
    pub fn finish(&mut self) -> BridgeResult<u64> {
        if !matches!(self.phase, Phase::Merging) {
            return Err(BridgeError::Argument("reduce aggregate finished twice".into()));
        }
        let mut out = Emitter::new(self.agg.output_layout());
        self.agg.finish(&mut out)?;
        let records = out.records();
        self.phase = Phase::Draining(Box::new(Drain::new(out.into_batches())));
        Ok(records)
    }

    /// Copies whole result records (`klen:u32le vlen:u32le key value`,
    /// key = partition id ++ the host's key bytes) into `out`. Returns
    /// (bytes, records); (0, 0) when every result was copied, and
    /// (bytes the next record needs, 0) when it does not fit `out`, so the
    /// caller can retry with a larger buffer.
    pub fn next_records(&mut self, out: &mut [u8]) -> BridgeResult<(usize, usize)> {
        let Phase::Draining(drain) = &mut self.phase else {
            return Err(BridgeError::Argument("results read before finish".into()));
        };
        drain.copy_out(out, |record, _| record)
    }

    /// Partial records merged so far.
    pub fn records_in(&self) -> u64 {
        self.records_in
    }
}

/// Decodes one fetched block (`frame`, exactly one block) with this
/// thread's decoder, checks that every record carries the block's reduce
/// partition (`what.reduce`, within the task's `partitions`) in its first
/// four key bytes, and hands the records to `f`.
pub(crate) fn with_checked_block<T>(
    frame: &[u8],
    what: &BlockName,
    partitions: &std::ops::Range<u32>,
    f: impl FnOnce(&BatchView<'_>) -> BridgeResult<T>,
) -> BridgeResult<T> {
    with_decoded_block(frame, what, |records| {
        for (i, r) in records.iter().enumerate() {
            if r.key.len() < PARTITION_KEY_BYTES
                || !partitions.contains(&key_partition(r.key))
                || !what.holds(key_partition(r.key))
            {
                return Err(BridgeError::Misplaced {
                    what: what.to_string(),
                    detail: format!(
                        "record {i} does not carry partition {} of the task's {partitions:?}",
                        what.reduce
                    ),
                });
            }
        }
        f(records)
    })
}

/// A reduce task's spill settings: its spill files go to `dir` (under
/// Spark, a directory of the task's own in Spark's local directories,
/// readable by the executor's user only, removed when the task ends),
/// after checking the partition range and the directory.
pub(crate) fn reduce_spill(
    partitions: &std::ops::Range<u32>,
    dir: &std::path::Path,
) -> BridgeResult<SpillConfig> {
    if partitions.is_empty() {
        return Err(BridgeError::Argument(format!("empty reduce partition range {partitions:?}")));
    }
    if !dir.is_dir() {
        return Err(BridgeError::Argument(format!(
            "spill directory {} is not a directory",
            dir.display()
        )));
    }
    engine()?;
    Ok(SpillConfig { dir: dir.to_owned(), ..SpillConfig::default() })
}

/// Where a reduce-side operator is in its life: taking blocks, or handing
/// out its results.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Taking fetched blocks.
    Merging,
    /// Results emitted, being copied out.
    Draining(Box<Drain>),
}

/// Payload bytes a streaming drain asks its merge for at a time (one
/// emitted batch).
const REFILL_BYTES: u64 = EMIT_BATCH_BYTES as u64;

/// Result batches being copied out to the host a buffer at a time: either
/// all emitted up front, or pulled from a streaming merge a batch at a
/// time, so that only about one batch is ever held. Each batch is dropped
/// (or reused) once copied out.
#[derive(Debug)]
pub(crate) struct Drain {
    batches: VecDeque<RecordBatch>,
    /// Offset of the next record in the first batch.
    at: usize,
    /// The merge still producing batches, with the emitter it fills.
    source: Option<(MergeStream, Emitter)>,
}

impl Drain {
    pub(crate) fn new(batches: Vec<RecordBatch>) -> Self {
        Drain { batches: batches.into(), at: 0, source: None }
    }

    /// A drain that pulls records in `layout` from `stream` as it goes.
    pub(crate) fn streaming(stream: MergeStream, layout: Layout) -> Self {
        Drain { batches: VecDeque::new(), at: 0, source: Some((stream, Emitter::new(layout))) }
    }

    /// Makes sure a batch is waiting unless every record was copied out;
    /// returns whether one is.
    fn refill(&mut self) -> BridgeResult<bool> {
        while self.batches.is_empty() {
            let Some((stream, out)) = &mut self.source else { return Ok(false) };
            let more = stream.emit_some(out, REFILL_BYTES)?;
            if !more {
                out.flush();
            }
            self.batches.extend(out.take_batches());
            if !more {
                self.source = None;
            }
        }
        Ok(true)
    }

    /// Copies, for each next record (variable layout), the bytes `pick`
    /// chooses from it (given the record and its key length) into `out`,
    /// while whole ones fit. Returns (bytes, records); (0, 0) when every
    /// record was copied, and (bytes the next one needs, 0) when it does not
    /// fit `out`, so the caller can retry with a larger buffer.
    pub(crate) fn copy_out(
        &mut self,
        out: &mut [u8],
        pick: impl Fn(&[u8], usize) -> &[u8],
    ) -> BridgeResult<(usize, usize)> {
        let (mut written, mut records) = (0usize, 0usize);
        while self.refill()? {
            let payload = self.batches[0].payload();
            while self.at < payload.len() {
                let len = variable_record_len(payload, self.at).ok_or_else(|| {
                    BridgeError::Argument("result batch is not in the variable layout".into())
                })?;
                let record = &payload[self.at..self.at + len];
                let klen = u32::from_le_bytes([record[0], record[1], record[2], record[3]]);
                let bytes = pick(record, klen as usize);
                if bytes.len() > out.len() - written {
                    if records == 0 {
                        return Ok((bytes.len(), 0));
                    }
                    return Ok((written, records));
                }
                out[written..written + bytes.len()].copy_from_slice(bytes);
                written += bytes.len();
                records += 1;
                self.at += len;
            }
            let done = self.batches.pop_front();
            self.at = 0;
            if let (Some((_, emitter)), Some(b)) = (&mut self.source, done) {
                emitter.recycle([b]);
            }
        }
        Ok((written, records))
    }
}

/// Bytes of the variable-layout record at `at` of `payload` (its two
/// lengths included), if it lies wholly inside.
fn variable_record_len(payload: &[u8], at: usize) -> Option<usize> {
    let head = payload.get(at..at + 8)?;
    let k = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let v = u32::from_le_bytes(head[4..].try_into().ok()?) as usize;
    let len = 8usize.checked_add(k)?.checked_add(v)?;
    (at + len <= payload.len()).then_some(len)
}
