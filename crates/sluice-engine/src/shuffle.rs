//! A registered shuffle: what it is (its [`ShuffleSpec`]) and where its map
//! outputs stand.
//!
//! Each map id counts once: the first attempt to commit wins, later
//! commits of the same map id are dropped (reported as
//! [`Commit::Duplicate`]), and an attempt given up before committing
//! leaves nothing behind. The map stage ends when every map id has a
//! committed attempt; only then do reduce partitions finish.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::partition::{PagePool, Partitioner, PAGE_BYTES_DEFAULT};
use sluice_core::reorg::{SpillConfig, StageSpec};

use crate::error::{EngineError, ShuffleId};
use crate::node::{reduce_ids, split_runs, NodePartitioner};
use crate::pages::PagePools;
use crate::pipeline::{MapPipeline, PipelineStats};
use crate::reduce::partition::{ReducePartition, ReduceResources};

/// Least state a reduce partition's final operator may hold before it
/// spills (4 KiB), however many partitions share the budget; partitions
/// beyond what the pool then holds fail with a typed memory error.
pub const REDUCE_STATE_MIN_BYTES: usize = 4 << 10;

/// Bytes of open partition pages a map pipeline aims for in all (4 MiB):
/// with few destinations each gets a page larger than the default.
pub const OPEN_PAGES_BYTES: usize = 4 << 20;

/// Largest partition page (64 KiB): enough for the host writer to take a
/// page as a block of its own, and below glibc's 128 KiB `mmap` threshold,
/// so pages come from the allocator's heap instead of fresh zeroed
/// mappings.
pub const PAGE_BYTES_MAX: usize = 64 << 10;

/// The partition page size of a shuffle with `destinations` destinations:
/// [`OPEN_PAGES_BYTES`] shared by them, rounded down to a power of two,
/// within [`PAGE_BYTES_DEFAULT`]..=[`PAGE_BYTES_MAX`] (16-64 KiB).
///
/// A partition-only shuffle's pages are its output batches, so larger pages
/// mean fewer page allocations and let a host writer compress each page as
/// a block of its own instead of first copying small pages together (lz4's
/// window is 64 KiB, so a 64 KiB block compresses nearly as well as 1 MiB:
/// 12.7 against 13.0 on Spark SQL rows here).
/// Many destinations keep the default: their page tails would no longer fit
/// the caches (see `PAGE_BYTES_DEFAULT`). `sluice bench partition --sizes
/// 100 --partitions 24,200 --threads 1 --strategies local_pages --page-kib
/// K` measured no difference between 16 KiB and 1 MiB pages at 24 and 200
/// partitions (35-43 and 27-32 M records/s, the machine's noise).
pub fn page_bytes_for(destinations: u32) -> usize {
    let share = OPEN_PAGES_BYTES / (destinations.max(1) as usize);
    let pow2 = if share == 0 { 0 } else { 1usize << share.ilog2() };
    pow2.clamp(PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX)
}

/// What `register_shuffle` takes (SmartShuffle's `registerShuffle`).
#[derive(Debug, Clone)]
pub struct ShuffleSpec {
    /// The shuffle's id, unique among registered shuffles.
    pub id: ShuffleId,
    /// Number of map tasks (map ids `0..maps`).
    pub maps: u32,
    /// Layout of the records map tasks write.
    pub layout: Layout,
    /// Reduce partition of a key; its partition count is the number of
    /// reduce tasks.
    pub partitioner: Arc<dyn Partitioner>,
    /// The data-reorganization operator and its spilling strategy
    /// ([`StageSpec::None`] for partitioning only).
    pub op: StageSpec,
    /// Two-level partitioning: the map side partitions into this many
    /// destination nodes, each node's chunks are repartitioned into its
    /// reduce partitions on the reduce side (see `node`). `None`: one level,
    /// a destination per reduce partition.
    pub nodes: Option<u32>,
    /// Who runs the reduce side: the engine (map outputs committed to it,
    /// read with `buf_consume`) or the host (map outputs handed back with
    /// [`MapTask::finish_output`](crate::MapTask::finish_output), reduce
    /// tasks run as [`ReduceTask`](crate::ReduceTask)s on what the host
    /// fetched). Nothing is allocated for the side that is not used.
    pub reduce: ReduceOwner,
}

/// Who runs a shuffle's reduce side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOwner {
    /// The engine: commits deliver to its reduce partitions, which finish
    /// when the map stage ends.
    Engine,
    /// The host: it stores each map attempt's output (a data file written
    /// with `output`) and feeds the blocks its reduce tasks fetch to
    /// [`ReduceTask`](crate::ReduceTask)s; the engine holds no reduce
    /// partitions.
    Host,
}

impl ReduceOwner {
    /// The owner's name in errors.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOwner::Engine => "engine",
            ReduceOwner::Host => "host",
        }
    }
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// The attempt's output is the map id's output.
    Accepted,
    /// Another attempt of the map id committed first; this one is dropped.
    Duplicate,
}

/// Totals of a shuffle's map side (committed attempts' pipelines; output
/// is what was sent to the reduce side).
pub type MapSideStats = PipelineStats;

#[derive(Debug)]
struct Maps {
    committed: Vec<Option<u32>>,
    ended: bool,
    /// Ended, and every delivery done: partitions may finish.
    sealed: bool,
    /// Reduce-side deliveries queued or running.
    deliveries: usize,
    stats: MapSideStats,
}

/// Engine-side state of one shuffle.
#[derive(Debug)]
pub(crate) struct ShuffleState {
    pub(crate) spec: ShuffleSpec,
    /// Destinations of the map side (nodes, or reduce partitions).
    pub(crate) destinations: u32,
    map_partitioner: Arc<dyn Partitioner>,
    pub(crate) pages: Arc<PagePool>,
    pub(crate) memory: MemoryPool,
    pub(crate) threshold: usize,
    pub(crate) reduce: Vec<Arc<ReducePartition>>,
    maps: Mutex<Maps>,
    delivered: Condvar,
    /// Attempts given up or failed.
    pub(crate) voided: AtomicU64,
}

impl ShuffleState {
    pub(crate) fn new(
        spec: ShuffleSpec,
        memory: &MemoryPool,
        reduce_memory: &MemoryPool,
        results: &MemoryPool,
        threshold: usize,
        spill: &SpillConfig,
        pools: &PagePools,
    ) -> Result<Self, EngineError> {
        let parts = spec.partitioner.partitions();
        let most = sluice_core::partition::function::PARTITIONS_MAX;
        if parts == 0 || parts > most || spec.maps == 0 {
            return Err(EngineError::BadShuffle {
                shuffle: spec.id,
                reason: format!(
                    "{parts} reduce partitions (1 to {most}) and {} map tasks",
                    spec.maps
                ),
            });
        }
        let destinations = spec.nodes.unwrap_or(parts);
        if destinations == 0 || destinations > parts {
            return Err(EngineError::BadShuffle {
                shuffle: spec.id,
                reason: format!("{destinations} nodes for {parts} reduce partitions"),
            });
        }
        let map_partitioner: Arc<dyn Partitioner> = if destinations == parts {
            spec.partitioner.clone()
        } else {
            Arc::new(NodePartitioner::new(spec.partitioner.clone(), destinations))
        };
        // The reduce-side pool shared evenly by the partitions (they all
        // collect at once during the map stage), halved for the moment a
        // growing table and its successor coexist.
        let limit = (reduce_memory.budget() / 2 / parts as usize).max(REDUCE_STATE_MIN_BYTES);
        let with = ReduceResources { memory: reduce_memory, results, spill, limit };
        let reduce = match spec.reduce {
            ReduceOwner::Engine => (0..parts)
                .map(|r| Arc::new(ReducePartition::new(spec.id, r, spec.layout, &spec.op, &with)))
                .collect(),
            ReduceOwner::Host => Vec::new(),
        };
        // Partition-only pipelines hand full pages on as output (see
        // `MapPipeline`); an operator's pages are staged per input batch, so
        // they keep the default size.
        let page_bytes = if matches!(spec.op, StageSpec::None) {
            page_bytes_for(destinations)
        } else {
            PAGE_BYTES_DEFAULT
        };
        Ok(ShuffleState {
            maps: Mutex::new(Maps {
                committed: vec![None; spec.maps as usize],
                ended: false,
                sealed: false,
                deliveries: 0,
                stats: MapSideStats::default(),
            }),
            spec,
            destinations,
            map_partitioner,
            pages: pools.get(page_bytes),
            memory: memory.clone(),
            threshold,
            reduce,
            delivered: Condvar::new(),
            voided: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh map-side pipeline of this shuffle.
    pub(crate) fn pipeline(&self) -> MapPipeline {
        MapPipeline::new(
            self.spec.layout,
            self.map_partitioner.clone(),
            self.pages.clone(),
            &self.spec.op,
            self.threshold,
            &self.memory,
        )
    }

    pub(crate) fn check_map(&self, map: u32) -> Result<(), EngineError> {
        if map >= self.spec.maps {
            return Err(EngineError::UnknownMap {
                shuffle: self.spec.id,
                map,
                maps: self.spec.maps,
            });
        }
        if self.lock().ended {
            return Err(EngineError::MapStageEnded(self.spec.id));
        }
        Ok(())
    }

    pub(crate) fn check_reduce(&self, reduce: u32) -> Result<&Arc<ReducePartition>, EngineError> {
        self.owned_by(ReduceOwner::Engine)?;
        self.reduce.get(reduce as usize).ok_or(EngineError::UnknownReduce {
            shuffle: self.spec.id,
            reduce,
            partitions: self.reduce.len() as u32,
        })
    }

    /// Refuses a call for the reduce side's other owner.
    pub(crate) fn owned_by(&self, owner: ReduceOwner) -> Result<(), EngineError> {
        if self.spec.reduce == owner {
            return Ok(());
        }
        Err(EngineError::WrongOwner { shuffle: self.spec.id, owner: self.spec.reduce.name() })
    }

    /// Claims map id `map` for `attempt`; on success the caller must queue
    /// `deliveries` deliveries and call [`ShuffleState::delivered`] for each.
    pub(crate) fn claim(
        &self,
        map: u32,
        attempt: u32,
        deliveries: usize,
        stats: MapSideStats,
    ) -> Result<Commit, EngineError> {
        let mut m = self.lock();
        if m.ended {
            return Err(EngineError::MapStageEnded(self.spec.id));
        }
        let slot = m.committed.get_mut(map as usize).ok_or(EngineError::UnknownMap {
            shuffle: self.spec.id,
            map,
            maps: self.spec.maps,
        })?;
        if slot.is_some() {
            return Ok(Commit::Duplicate);
        }
        *slot = Some(attempt);
        m.deliveries += deliveries;
        m.stats.add(&stats);
        Ok(Commit::Accepted)
    }

    /// Hands destination `d`'s runs of one committed attempt to the reduce
    /// side: straight to the partition, or split per reduce id of node `d`.
    pub(crate) fn deliver(&self, d: u32, runs: Vec<Vec<RecordBatch>>) {
        let parts = self.reduce.len() as u32;
        if self.destinations == parts {
            if let Some(p) = self.reduce.get(d as usize) {
                p.deliver(runs);
            }
            return;
        }
        let ids = reduce_ids(d, parts, self.destinations);
        match split_runs(runs, &*self.spec.partitioner, ids.clone()) {
            Ok(per_reduce) => {
                for (r, runs) in ids.zip(per_reduce) {
                    if !runs.is_empty() {
                        self.reduce[r as usize].deliver(runs);
                    }
                }
            }
            Err(e) => {
                let message = e.to_string();
                for r in ids {
                    self.reduce[r as usize].fail(&message);
                }
            }
        }
    }

    /// One delivery is done.
    pub(crate) fn delivered(&self) {
        let mut m = self.lock();
        m.deliveries -= 1;
        if m.deliveries == 0 {
            drop(m);
            self.delivered.notify_all();
        }
    }

    /// Ends the map stage once every map id committed, and waits for the
    /// deliveries in flight; returns the map side's totals.
    pub(crate) fn end_map_stage(&self) -> Result<MapSideStats, EngineError> {
        self.owned_by(ReduceOwner::Engine)?;
        let mut m = self.lock();
        if m.ended {
            return Err(EngineError::MapStageEnded(self.spec.id));
        }
        let missing: Vec<u32> = m
            .committed
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_none())
            .map(|(i, _)| i as u32)
            .take(8)
            .collect();
        if !missing.is_empty() {
            return Err(EngineError::MissingMapOutput { shuffle: self.spec.id, missing });
        }
        m.ended = true;
        while m.deliveries > 0 {
            m = self.delivered.wait(m).unwrap_or_else(|p| p.into_inner());
        }
        m.sealed = true;
        Ok(m.stats)
    }

    pub(crate) fn map_stage_ended(&self) -> bool {
        self.lock().ended
    }

    /// The map stage ended and every delivery is in: partitions may finish.
    pub(crate) fn sealed(&self) -> bool {
        self.lock().sealed
    }

    pub(crate) fn map_stats(&self) -> MapSideStats {
        self.lock().stats
    }

    pub(crate) fn void_attempt(&self) {
        self.voided.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_grow_as_destinations_shrink_within_bounds() {
        assert_eq!(page_bytes_for(0), PAGE_BYTES_MAX);
        assert_eq!(page_bytes_for(1), PAGE_BYTES_MAX);
        assert_eq!(page_bytes_for(64), PAGE_BYTES_MAX);
        // 4 MiB / 100 = 41 KiB, rounded down to a power of two.
        assert_eq!(page_bytes_for(100), 32 << 10);
        assert_eq!(page_bytes_for(200), PAGE_BYTES_DEFAULT);
        assert_eq!(page_bytes_for(100_000), PAGE_BYTES_DEFAULT);
        for d in 1..2_000 {
            let b = page_bytes_for(d);
            assert!(b.is_power_of_two() && (PAGE_BYTES_DEFAULT..=PAGE_BYTES_MAX).contains(&b));
            assert!(page_bytes_for(d + 1) <= b, "page size grows with destinations at {d}");
        }
    }
}
