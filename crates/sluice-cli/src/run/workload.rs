//! The workloads of `sluice run`: how each one's input is generated, which
//! shuffle it registers, and how its output is checked.
//!
//! | workload | records | partitioner | operator | check |
//! |---|---|---|---|---|
//! | terasort | TeraGen, 10 + 90 bytes | range (sampled) | sort | global order, checksum |
//! | sort | HiBench text: 5-9 word keys, 10-99 word values | range (sampled) | sort | global order, checksum |
//! | wordcount | (word, nothing) per word of HiBench text | fold hash | count | counts = reference |
//! | repartition | 8-byte random keys, 4-byte values | fold hash | none | checksum |
//! | aggregate | 8-byte keys from a key set, i32 values | fold hash | sum | sums = reference |
//!
//! Inputs are pure functions of (seed, map id), generated before the clock
//! starts. The checksum is valsort's idea: a sum over records of a hash of
//! the record, so any lost, duplicated or altered record changes it, and
//! the order of records does not.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_core::datagen::{teragen, words::TextGen, SplitMix64};
use sluice_core::format::{Layout, RecordBatch};
use sluice_core::partition::{FoldHash, Partitioner, RangePartitioner};
use sluice_core::reorg::aggregate::{AggFn, AggSpec, SpillStrategy, ValueType};
use sluice_core::reorg::StageSpec;
use xxhash_rust::xxh3::xxh3_64;

/// How the map side's aggregate spills (`SpillStrategy`): wordcount and
/// aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Spill {
    /// Emit the whole state and start empty (SmartShuffle).
    State,
    /// Keep the state, pass new keys through (SmartShuffle).
    Input,
    /// A new key evicts one group of its full bucket (8-byte keys; other
    /// keys spill their state).
    Evict,
}

impl From<Spill> for SpillStrategy {
    fn from(s: Spill) -> Self {
        match s {
            Spill::State => SpillStrategy::State,
            Spill::Input => SpillStrategy::Input,
            Spill::Evict => SpillStrategy::Evict,
        }
    }
}

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// TeraGen records, range partitioned and sorted.
    Terasort,
    /// HiBench random text records, range partitioned and sorted.
    Sort,
    /// Words of HiBench random text, counted.
    Wordcount,
    /// Random fixed records, hash partitioned.
    Repartition,
    /// Sum of i32 values by 8-byte key.
    Aggregate,
}

/// Distinct keys of the aggregate workload.
pub(crate) const AGGREGATE_KEYS: u64 = 1_000_000;

/// Keys sampled per map task for range partitioning.
const SAMPLE_PER_MAP: usize = 1_000;

/// Order-independent fingerprint of a multiset of records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Checksum {
    pub(crate) records: u64,
    pub(crate) sum: u64,
}

impl Checksum {
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        self.records += 1;
        let h = xxh3_64(key) ^ xxh3_64(value).rotate_left(17);
        self.sum = self.sum.wrapping_add(h);
    }

    pub(crate) fn merge(&mut self, o: Checksum) {
        self.records += o.records;
        self.sum = self.sum.wrapping_add(o.sum);
    }
}

/// What the output must match.
#[derive(Debug)]
pub(crate) enum Reference {
    /// The same records (in key order when `sorted`).
    Records { checksum: Checksum, sorted: bool },
    /// One record per key with this 8-byte little-endian value.
    Values(HashMap<Vec<u8>, i64>),
}

/// A workload's generated input.
#[derive(Debug)]
pub(crate) struct Input {
    pub(crate) layout: Layout,
    pub(crate) op: StageSpec,
    pub(crate) partitioner: Arc<dyn Partitioner>,
    /// One batch list per map task.
    pub(crate) maps: Vec<Vec<RecordBatch>>,
    pub(crate) reference: Reference,
    pub(crate) bytes: u64,
}

/// Generates `bytes` of input for `maps` map tasks and `reduces` reduce
/// partitions.
pub(crate) fn generate(
    kind: Kind,
    bytes: u64,
    maps: u32,
    reduces: u32,
    seed: u64,
    spill: Spill,
) -> Result<Input, String> {
    let per_map = bytes / u64::from(maps.max(1));
    let layout = match kind {
        Kind::Terasort => Layout::TERAGEN,
        Kind::Sort | Kind::Wordcount => Layout::Variable,
        Kind::Repartition | Kind::Aggregate => Layout::fixed(8, 4).map_err(|e| e.to_string())?,
    };
    let mut batches = Vec::new();
    let mut checksum = Checksum::default();
    let mut values: HashMap<Vec<u8>, i64> = HashMap::new();
    for m in 0..maps {
        let mut out = Vec::new();
        let mut b = RecordBatch::with_capacity(layout, 1 << 20);
        let mut add = |k: &[u8], v: &[u8], b: &mut RecordBatch| -> Result<(), String> {
            if b.payload_len() + layout.record_bytes(k.len(), v.len()) > 1 << 20 {
                out.push(std::mem::replace(b, RecordBatch::with_capacity(layout, 1 << 20)));
            }
            b.push(k, v).map_err(|e| e.to_string())
        };
        let mut rng = SplitMix64::new(seed ^ u64::from(m).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut made = 0u64;
        match kind {
            Kind::Terasort => {
                let rows = per_map / teragen::RECORD_BYTES as u64;
                let mut rec = [0u8; teragen::RECORD_BYTES];
                for r in 0..rows {
                    teragen::record(seed, u64::from(m) * rows + r, &mut rec);
                    let (k, v) = rec.split_at(teragen::KEY_BYTES);
                    checksum.add(k, v);
                    add(k, v, &mut b)?;
                }
            }
            Kind::Sort | Kind::Wordcount => {
                let mut text = TextGen::new(rng.next_u64());
                let (mut k, mut v) = (Vec::new(), Vec::new());
                while made < per_map {
                    text.next_record(&mut k, &mut v);
                    made += (k.len() + v.len()) as u64;
                    if kind == Kind::Sort {
                        checksum.add(&k, &v);
                        add(&k, &v, &mut b)?;
                    } else {
                        for w in k.split(|c| *c == b' ').chain(v.split(|c| *c == b' ')) {
                            *values.entry(w.to_vec()).or_insert(0) += 1;
                            add(w, &[], &mut b)?;
                        }
                    }
                }
            }
            Kind::Repartition | Kind::Aggregate => {
                let rows = per_map / 12;
                for _ in 0..rows {
                    let key = if kind == Kind::Aggregate {
                        sluice_core::datagen::rng::mix(rng.below(AGGREGATE_KEYS)).to_be_bytes()
                    } else {
                        rng.next_u64().to_be_bytes()
                    };
                    let v = (rng.next_u64() % 2001) as i32 - 1000;
                    let vb = v.to_le_bytes();
                    if kind == Kind::Aggregate {
                        *values.entry(key.to_vec()).or_insert(0) += i64::from(v);
                    } else {
                        checksum.add(&key, &vb);
                    }
                    add(&key, &vb, &mut b)?;
                }
            }
        }
        if !b.is_empty() {
            out.push(b);
        }
        batches.push(out);
    }
    let total: u64 = batches.iter().flatten().map(|b: &RecordBatch| b.payload_len() as u64).sum();
    let (partitioner, op, reference): (Arc<dyn Partitioner>, StageSpec, Reference) = match kind {
        Kind::Terasort | Kind::Sort => {
            let mut sample: Vec<&[u8]> = batches
                .iter()
                .flat_map(|m| {
                    let n: usize = m.iter().map(RecordBatch::len).sum();
                    let step = (n / SAMPLE_PER_MAP).max(1);
                    m.iter().flat_map(|b| b.iter().map(|r| r.key)).step_by(step)
                })
                .collect();
            let range =
                RangePartitioner::from_sample(&mut sample, reduces).map_err(|e| e.to_string())?;
            (Arc::new(range), StageSpec::Sort, Reference::Records { checksum, sorted: true })
        }
        Kind::Wordcount => (
            fold(reduces)?,
            StageSpec::Aggregate(AggSpec::new(AggFn::Count, ValueType::I64), spill.into()),
            Reference::Values(values),
        ),
        Kind::Repartition => {
            (fold(reduces)?, StageSpec::None, Reference::Records { checksum, sorted: false })
        }
        Kind::Aggregate => (
            fold(reduces)?,
            StageSpec::Aggregate(AggSpec::new(AggFn::Sum, ValueType::I32), spill.into()),
            Reference::Values(values),
        ),
    };
    Ok(Input { layout, op, partitioner, maps: batches, reference, bytes: total })
}

fn fold(reduces: u32) -> Result<Arc<dyn Partitioner>, String> {
    Ok(Arc::new(FoldHash::new(reduces).map_err(|e| e.to_string())?))
}

/// Checks one reduce partition's output as it is read: keys in order
/// where sorted, every key in this partition, values against the
/// reference; the records' checksum is returned for the global check.
#[derive(Debug, Default)]
pub(crate) struct PartitionCheck {
    pub(crate) checksum: Checksum,
    pub(crate) first: Option<Vec<u8>>,
    pub(crate) last: Option<Vec<u8>>,
    pub(crate) keys: u64,
    seen: std::collections::HashSet<Vec<u8>>,
}

impl PartitionCheck {
    pub(crate) fn record(
        &mut self,
        key: &[u8],
        value: &[u8],
        reference: &Reference,
    ) -> Result<(), String> {
        match reference {
            Reference::Records { sorted, .. } => {
                if *sorted && self.last.as_deref().is_some_and(|l| l > key) {
                    return Err("output out of key order within a partition".into());
                }
                self.checksum.add(key, value);
            }
            Reference::Values(want) => {
                let got = value
                    .first_chunk::<8>()
                    .map(|b| i64::from_le_bytes(*b))
                    .ok_or("a result value shorter than 8 bytes")?;
                match want.get(key) {
                    Some(w) if *w == got => {}
                    Some(w) => return Err(format!("key {key:?}: result {got}, reference {w}")),
                    None => return Err(format!("key {key:?} is not in the input")),
                }
                if !self.seen.insert(key.to_vec()) {
                    return Err(format!("key {key:?} came out twice"));
                }
                self.keys += 1;
            }
        }
        if self.first.is_none() {
            self.first = Some(key.to_vec());
        }
        if matches!(reference, Reference::Records { sorted: true, .. }) {
            self.last = Some(key.to_vec());
        }
        Ok(())
    }
}

/// The global check over every partition's check, in reduce id order.
pub(crate) fn check_all(parts: &[PartitionCheck], reference: &Reference) -> Result<(), String> {
    match reference {
        Reference::Records { checksum, sorted } => {
            let mut got = Checksum::default();
            for p in parts {
                got.merge(p.checksum);
            }
            if got != *checksum {
                return Err(format!(
                    "checksum mismatch: {} records / {:#x} out, {} / {:#x} in",
                    got.records, got.sum, checksum.records, checksum.sum
                ));
            }
            if *sorted {
                let mut prev: Option<&[u8]> = None;
                for p in parts {
                    if let (Some(a), Some(b)) = (prev, p.first.as_deref()) {
                        if a > b {
                            return Err("partitions overlap in key order".into());
                        }
                    }
                    prev = p.last.as_deref().or(prev);
                }
            }
        }
        Reference::Values(want) => {
            let keys: u64 = parts.iter().map(|p| p.keys).sum();
            if keys != want.len() as u64 {
                return Err(format!("{keys} keys out, {} distinct keys in", want.len()));
            }
        }
    }
    Ok(())
}
