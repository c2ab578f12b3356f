//! The engine: SmartShuffle's agent, traffic scheduler, offload workers
//! and liquid offload controller in one process.
//!
//! ```text
//!  map task ── buf_acquire ─► MapBuffer ── push records ── buf_produce ─┐
//!                                                                       │ segments (~100 KB)
//!           ┌── host share (liquid) runs in place ◄────────────────────┤
//!           │                                      FCFS queue per shuffle (scheduler)
//!           │                                                           ▼
//!           └──────────► attempt pipelines: partition + map-side op ◄── offload workers
//!  commit ─► finish pipelines ─► deliver per node (offload workers) ─► split per reduce id ─► second round
//!  end_map_stage ─► finish partitions ─► Store (memory, then disk) ─► buf_consume / buf_release
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_core::memory::MemoryPool;
use sluice_core::reorg::SpillConfig;

use crate::attempt::Attempt;
use crate::buffer::{BufferOwner, BufferPool};
use crate::error::{EngineError, ShuffleId};
use crate::liquid::{HostCredit, Liquid};
use crate::map_task::{DestinationRuns, MapTask};
use crate::metrics::Counters;
use crate::pages::PagePools;
use crate::reduce_block::ReduceBlock;
use crate::scheduler::{Job, Scheduler, Side};
use crate::shuffle::{MapSideStats, ShuffleSpec, ShuffleState};
use crate::store::StoreStats;
use crate::worker::{host_worker, worker, HOST_THREAD_NAME, OFFLOAD_THREAD_NAME};
use crate::{EngineConfig, RESULTS_SHARE_PERCENT};

pub(crate) struct Inner {
    pub(crate) config: EngineConfig,
    pub(crate) buffers: BufferPool,
    pub(crate) memory: MemoryPool,
    pub(crate) reduce_memory: MemoryPool,
    pub(crate) results: MemoryPool,
    pub(crate) spill: SpillConfig,
    pub(crate) scheduler: Scheduler,
    /// Migrated segments waiting for an extra host thread.
    pub(crate) host_queue: Scheduler,
    pub(crate) shuffles: RwLock<std::collections::HashMap<ShuffleId, Arc<ShuffleState>>>,
    /// Partition pages, shared by the shuffles of one page size.
    pub(crate) pages: PagePools,
    pub(crate) liquid: Arc<Liquid>,
    pub(crate) counters: Counters,
    /// Map tasks started and not yet dropped (see `inline_at_tasks`).
    pub(crate) open_map_tasks: AtomicUsize,
    /// `EngineConfig::inline_at_tasks` as it is now
    /// ([`Engine::set_inline_at_tasks`]).
    pub(crate) inline_at_tasks: AtomicUsize,
}

/// The embedded shuffle engine.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("config", &self.inner.config).finish()
    }
}

impl Engine {
    /// Starts the offload workers and the liquid offload controller.
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let inner = Arc::new(Inner {
            buffers: BufferPool::new(config.buffer_pool_bytes),
            memory: MemoryPool::new(operators(config.memory_budget) / 2),
            reduce_memory: MemoryPool::new(
                operators(config.memory_budget) - operators(config.memory_budget) / 2,
            ),
            results: MemoryPool::new(config.memory_budget - operators(config.memory_budget)),
            spill: SpillConfig { dir: config.spill_dir.clone(), ..SpillConfig::default() },
            scheduler: Scheduler::default(),
            host_queue: Scheduler::default(),
            shuffles: RwLock::new(std::collections::HashMap::new()),
            pages: PagePools::default(),
            liquid: Arc::new(Liquid::new(config.liquid_offload)),
            counters: Counters::default(),
            open_map_tasks: AtomicUsize::new(0),
            inline_at_tasks: AtomicUsize::new(config.inline_at_tasks),
            config,
        });
        let mut engine = Engine { inner, threads: Vec::new() };
        let cores = if engine.inner.config.pin_offload_threads {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        for i in 0..engine.inner.config.offload_threads.max(1) {
            let inner = engine.inner.clone();
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let t = std::thread::Builder::new()
                .name(format!("{OFFLOAD_THREAD_NAME}-{i}"))
                .spawn(move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    worker(&inner);
                })
                .map_err(EngineError::Thread)?;
            engine.threads.push(t);
        }
        let host_threads =
            if engine.inner.config.liquid_offload { engine.inner.config.host_threads } else { 0 };
        for i in 0..host_threads {
            let inner = engine.inner.clone();
            let t = std::thread::Builder::new()
                .name(format!("{HOST_THREAD_NAME}-{i}"))
                .spawn(move || host_worker(&inner))
                .map_err(EngineError::Thread)?;
            engine.threads.push(t);
        }
        if engine.inner.config.liquid_offload {
            let inner = engine.inner.clone();
            let t = std::thread::Builder::new()
                .name("sluice-liquid".into())
                .spawn(move || {
                    let liquid = inner.liquid.clone();
                    liquid.run(
                        inner.buffers.capacity(),
                        || inner.buffers.used(),
                        || inner.scheduler.queued_map_bytes(),
                        || inner.buffers.inner().produced_bytes.load(Ordering::Relaxed),
                    );
                })
                .map_err(EngineError::Thread)?;
            engine.threads.push(t);
        }
        Ok(engine)
    }

    /// The engine's settings as it was started with them
    /// ([`Engine::inline_at_tasks`] may have changed since).
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Runs map work on the producing threads while at least `tasks` map
    /// tasks are open (0: never), from the next segment on: the one setting
    /// a host may change while the engine runs (a later host context with
    /// another task slot count).
    pub fn set_inline_at_tasks(&self, tasks: usize) {
        self.inner.inline_at_tasks.store(tasks, Ordering::Relaxed);
    }

    /// See [`Engine::set_inline_at_tasks`].
    pub fn inline_at_tasks(&self) -> usize {
        self.inner.inline_at_tasks.load(Ordering::Relaxed)
    }

    /// The map buffer pool.
    pub fn buffers(&self) -> &BufferPool {
        &self.inner.buffers
    }

    /// The memory pool of map-side operator state.
    pub fn memory(&self) -> &MemoryPool {
        &self.inner.memory
    }

    /// The memory pool of reduce-side operator state.
    pub fn reduce_memory(&self) -> &MemoryPool {
        &self.inner.reduce_memory
    }

    /// The memory pool of reduce-side results held in memory.
    pub fn results_memory(&self) -> &MemoryPool {
        &self.inner.results
    }

    fn shuffle(&self, id: ShuffleId) -> Result<Arc<ShuffleState>, EngineError> {
        let map = self.inner.shuffles.read().unwrap_or_else(|p| p.into_inner());
        map.get(&id).cloned().ok_or(EngineError::UnknownShuffle(id))
    }

    /// Registers a shuffle and opens its scheduling group.
    pub fn register_shuffle(&self, spec: ShuffleSpec) -> Result<(), EngineError> {
        let id = spec.id;
        let state = ShuffleState::new(
            spec,
            &self.inner.memory,
            &self.inner.reduce_memory,
            &self.inner.results,
            self.inner.config.operator_state_bytes,
            &self.inner.spill,
            &self.inner.pages,
        )?;
        let mut map = self.inner.shuffles.write().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(&id) {
            return Err(EngineError::ShuffleExists(id));
        }
        map.insert(id, Arc::new(state));
        self.inner.scheduler.add_group(id);
        self.inner.host_queue.add_group(id);
        Ok(())
    }

    /// Takes back a map attempt's output once the host is done with it
    /// (after [`MapTask::finish_output`] or
    /// [`MapTask::take_output_so_far`], when the host has written the
    /// batches): buffers of a partition page's size become free pages for
    /// later attempts of any shuffle (see `pages`), the rest is freed.
    pub fn recycle_output(&self, runs: DestinationRuns) {
        self.inner.pages.recycle(runs.into_iter().flatten().flatten());
    }

    /// Forgets a shuffle: queued work is dropped and its results (and
    /// their files) are freed once no caller holds them.
    pub fn unregister_shuffle(&self, id: ShuffleId) -> Result<(), EngineError> {
        let removed = {
            let mut map = self.inner.shuffles.write().unwrap_or_else(|p| p.into_inner());
            map.remove(&id)
        };
        let state = removed.ok_or(EngineError::UnknownShuffle(id))?;
        self.inner.scheduler.remove_group(id);
        self.inner.host_queue.remove_group(id);
        // Reduce tasks still waiting on a partition wake with an error.
        for p in &state.reduce {
            p.abandon(&format!("shuffle {id} was unregistered"));
        }
        Ok(())
    }

    /// Starts map attempt `attempt` of map id `map`.
    pub fn map_task(
        &self,
        shuffle: ShuffleId,
        map: u32,
        attempt: u32,
    ) -> Result<MapTask<'_>, EngineError> {
        let state = self.shuffle(shuffle)?;
        state.check_map(map)?;
        self.inner.open_map_tasks.fetch_add(1, Ordering::Relaxed);
        Ok(MapTask {
            engine: self,
            owner: BufferOwner { shuffle, map, attempt, layout: state.spec.layout },
            state,
            attempt: Arc::new(Attempt::default()),
            credit: HostCredit::default(),
            pending: Vec::new(),
            started: Instant::now(),
            done: false,
        })
    }

    /// Ends the map stage of `shuffle` (every map id must have committed):
    /// waits for the deliveries in flight, then finishes every reduce
    /// partition on the offload workers. Returns the map side's totals.
    pub fn end_map_stage(&self, shuffle: ShuffleId) -> Result<MapSideStats, EngineError> {
        let state = self.shuffle(shuffle)?;
        let stats = state.end_map_stage()?;
        let jobs = state
            .reduce
            .iter()
            .map(|p| {
                let (p, inner) = (p.clone(), self.inner.clone());
                Job {
                    bytes: 0,
                    side: Side::Reduce,
                    run: Box::new(move || {
                        let t = Instant::now();
                        p.finish();
                        inner.reduce_time(t.elapsed());
                        true
                    }),
                }
            })
            .collect();
        if !self.inner.scheduler.push(shuffle, jobs) {
            return Err(EngineError::Closed);
        }
        Ok(stats)
    }

    /// The next output block of reduce partition `reduce` (SmartShuffle's
    /// `bufConsume`), waiting for the partition to finish; `None` after the
    /// last block.
    pub fn buf_consume(
        &self,
        shuffle: ShuffleId,
        reduce: u32,
    ) -> Result<Option<ReduceBlock>, EngineError> {
        let state = self.shuffle(shuffle)?;
        let part = state.check_reduce(reduce)?;
        if !state.sealed() {
            return Err(EngineError::MapStageRunning(shuffle));
        }
        // With liquid offloading on, a reduce task that finds its partition
        // not yet started (the workers are behind) finishes it itself.
        let help = self.inner.liquid.enabled;
        let t = Instant::now();
        let block = part.next_block(help)?;
        if help {
            self.inner
                .counters
                .host_nanos
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        Ok(block.map(|batch| ReduceBlock { shuffle, reduce, batch }))
    }

    /// Returns a consumed block (SmartShuffle's `bufRelease`); its memory
    /// was already released from the partition's reservation when it was
    /// handed out.
    pub fn buf_release(&self, block: ReduceBlock) {
        drop(block);
    }

    /// What the persisted result of a partition did (after it finished).
    pub fn partition_store_stats(
        &self,
        shuffle: ShuffleId,
        reduce: u32,
    ) -> Result<StoreStats, EngineError> {
        let state = self.shuffle(shuffle)?;
        Ok(state.check_reduce(reduce)?.store_stats())
    }

    /// Sorted runs a partition's final operator spilled to disk, and their
    /// bytes (after it finished).
    pub fn partition_operator_spills(
        &self,
        shuffle: ShuffleId,
        reduce: u32,
    ) -> Result<(u64, u64), EngineError> {
        let state = self.shuffle(shuffle)?;
        Ok(state.check_reduce(reduce)?.operator_spills())
    }

    /// The spill file of a partition whose result went to disk.
    pub fn partition_disk_path(
        &self,
        shuffle: ShuffleId,
        reduce: u32,
    ) -> Result<Option<std::path::PathBuf>, EngineError> {
        let state = self.shuffle(shuffle)?;
        Ok(state.check_reduce(reduce)?.disk_path())
    }

    /// The map side's totals of a shuffle so far, and the attempts voided.
    pub fn map_side_stats(&self, shuffle: ShuffleId) -> Result<(MapSideStats, u64), EngineError> {
        let state = self.shuffle(shuffle)?;
        Ok((state.map_stats(), state.voided.load(Ordering::Relaxed)))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.inner.scheduler.close();
        self.inner.host_queue.close();
        self.inner.liquid.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Bytes of a budget left to operator state once results have their share.
fn operators(budget: usize) -> usize {
    budget - budget / 100 * RESULTS_SHARE_PERCENT
}

impl Inner {
    pub(crate) fn reduce_time(&self, d: Duration) {
        self.counters.reduce_nanos.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Idles after `busy` of work as a device of `device_speed` would.
    pub(crate) fn emulate_device(&self, busy: Duration) {
        let speed = self.config.device_speed;
        if speed > 0.0 && speed < 1.0 {
            // Interrupted when the engine shuts down.
            self.scheduler.pause(busy.mul_f64(1.0 / speed - 1.0));
        }
    }
}
