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
use std::sync::{Arc, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_core::format::{BatchView, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::SpillConfig;

use crate::attempt::Attempt;
use crate::buffer::{BufferOwner, BufferPool, MapBuffer};
use crate::error::{EngineError, ShuffleId};
use crate::liquid::{Decision, HostCredit, Liquid};
use crate::pages::PagePools;
use crate::scheduler::{Job, Scheduler, Side, Wait};
use crate::segment::{cut, SegmentTask};
use crate::shuffle::{Commit, MapSideStats, ShuffleSpec, ShuffleState};
use crate::store::StoreStats;
use crate::{EngineConfig, RESULTS_SHARE_PERCENT};

/// Name prefix of the offload worker threads (15 bytes: what Linux keeps
/// of a thread name).
pub const OFFLOAD_THREAD_NAME: &str = "sluice-offload";

/// Name prefix of the extra host threads.
pub const HOST_THREAD_NAME: &str = "sluice-host";

/// Counters of a running engine.
#[derive(Debug, Default)]
struct Counters {
    offload_nanos: std::sync::atomic::AtomicU64,
    host_nanos: std::sync::atomic::AtomicU64,
    reduce_nanos: std::sync::atomic::AtomicU64,
}

struct Inner {
    config: EngineConfig,
    buffers: BufferPool,
    memory: MemoryPool,
    reduce_memory: MemoryPool,
    results: MemoryPool,
    spill: SpillConfig,
    scheduler: Scheduler,
    /// Migrated segments waiting for an extra host thread.
    host_queue: Scheduler,
    shuffles: RwLock<std::collections::HashMap<ShuffleId, Arc<ShuffleState>>>,
    /// Partition pages, shared by the shuffles of one page size.
    pages: PagePools,
    liquid: Arc<Liquid>,
    counters: Counters,
    /// Map tasks started and not yet dropped (see `inline_at_tasks`).
    open_map_tasks: AtomicUsize,
}

/// A snapshot of what the engine did.
#[derive(Debug, Clone, Default)]
pub struct EngineMetrics {
    /// Map payload bytes produced.
    pub produced_bytes: u64,
    /// Map payload bytes the offload workers processed.
    pub offload_bytes: u64,
    /// Map payload bytes host threads processed (migrated by liquid
    /// offloading).
    pub migrated_bytes: u64,
    /// Of `migrated_bytes`, what idle extra host threads took from the
    /// offload workers' queue (`host_steal`).
    pub stolen_bytes: u64,
    /// Time offload workers spent in map segments (excluding the
    /// device-speed idling).
    pub offload_busy: Duration,
    /// Time offload workers spent on reduce-side work.
    pub reduce_busy: Duration,
    /// Time host threads spent in migrated segments.
    pub host_busy: Duration,
    /// The host share now.
    pub host_share: f64,
    /// Every change of the host share.
    pub decisions: Vec<Decision>,
    /// CPU time of the offload workers so far (Linux; `None` elsewhere).
    pub offload_cpu: Option<Duration>,
    /// Most bytes of map buffers out at once.
    pub buffer_peak: usize,
    /// Most bytes of operator state at once (map side plus reduce side).
    pub memory_peak: usize,
    /// Most bytes of reduce-side results in memory at once.
    pub results_peak: usize,
    /// Bytes of free partition pages kept for reuse now (see
    /// [`Engine::recycle_output`]).
    pub free_page_bytes: usize,
}

/// The embedded shuffle engine.
pub struct Engine {
    inner: Arc<Inner>,
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
            liquid: Arc::new(Liquid::new(config.migration)),
            counters: Counters::default(),
            open_map_tasks: AtomicUsize::new(0),
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
            if engine.inner.config.migration { engine.inner.config.host_threads } else { 0 };
        for i in 0..host_threads {
            let inner = engine.inner.clone();
            let t = std::thread::Builder::new()
                .name(format!("{HOST_THREAD_NAME}-{i}"))
                .spawn(move || host_worker(&inner))
                .map_err(EngineError::Thread)?;
            engine.threads.push(t);
        }
        if engine.inner.config.migration {
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

    /// The engine's settings.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
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
            self.inner.config.spill_threshold,
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

    /// A snapshot of the engine's counters.
    pub fn metrics(&self) -> EngineMetrics {
        let i = &self.inner;
        let c = &i.counters;
        EngineMetrics {
            produced_bytes: i.buffers.inner().produced_bytes.load(Ordering::Relaxed),
            offload_bytes: i.liquid.consumed.load(Ordering::Relaxed),
            migrated_bytes: i.liquid.migrated.load(Ordering::Relaxed),
            stolen_bytes: i.liquid.stolen.load(Ordering::Relaxed),
            offload_busy: Duration::from_nanos(c.offload_nanos.load(Ordering::Relaxed)),
            reduce_busy: Duration::from_nanos(c.reduce_nanos.load(Ordering::Relaxed)),
            host_busy: Duration::from_nanos(c.host_nanos.load(Ordering::Relaxed)),
            host_share: i.liquid.host_share(),
            decisions: i.liquid.decisions(),
            offload_cpu: crate::cpu::threads_cpu(OFFLOAD_THREAD_NAME),
            buffer_peak: i.buffers.peak(),
            memory_peak: i.memory.peak() + i.reduce_memory.peak(),
            results_peak: i.results.peak(),
            free_page_bytes: i.pages.free_bytes(),
        }
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
    fn reduce_time(&self, d: Duration) {
        self.counters.reduce_nanos.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Idles after `busy` of work as a device of `device_speed` would.
    fn emulate_device(&self, busy: Duration) {
        let speed = self.config.device_speed;
        if speed > 0.0 && speed < 1.0 {
            // Interrupted when the engine shuts down.
            self.scheduler.pause(busy.mul_f64(1.0 / speed - 1.0));
        }
    }
}

/// An extra host thread: runs migrated segments at host speed until the
/// engine shuts down; with `host_steal`, when none is waiting, the next
/// map segment queued for the offload workers.
fn host_worker(inner: &Inner) {
    let backlog = inner.config.segment_bytes.saturating_mul(STEAL_BACKLOG_SEGMENTS);
    loop {
        let (job, stolen) = if !inner.config.host_steal {
            match inner.host_queue.pop() {
                Some(job) => (job, false),
                None => return,
            }
        } else {
            // Migrated segments first; else wait on the offload workers'
            // queue (every push there wakes this thread) for a backlog of
            // segments, bounded so that migrated segments pushed alone are
            // not left waiting.
            match inner.host_queue.pop_within(Duration::ZERO, None) {
                Wait::Job(job) => (job, false),
                Wait::Closed => return,
                Wait::Idle => match inner.scheduler.pop_within(HOST_IDLE_POLL, Some(backlog)) {
                    Wait::Job(job) => (job, true),
                    Wait::Closed => return,
                    Wait::Idle => continue,
                },
            }
        };
        let t = Instant::now();
        let bytes = job.bytes as u64;
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
        if ran.unwrap_or(true) {
            inner.counters.host_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            inner.liquid.migrated.fetch_add(bytes, Ordering::Relaxed);
            if stolen {
                inner.liquid.stolen.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }
}

/// An idle extra host thread takes a segment queued for the offload
/// workers only while at least this many segments' bytes are queued there:
/// a device that keeps up has a short queue, and taking from it would put
/// a third thread on its core.
pub const STEAL_BACKLOG_SEGMENTS: usize = 4;

/// How long an idle extra host thread waits on the offload workers' queue
/// before it looks for migrated segments again.
pub const HOST_IDLE_POLL: Duration = Duration::from_millis(1);

/// An offload worker: runs jobs until the scheduler closes.
fn worker(inner: &Inner) {
    while let Some(job) = inner.scheduler.pop() {
        let t = Instant::now();
        let (side, bytes) = (job.side, job.bytes);
        // Jobs contain their operators' panics; this keeps the worker
        // alive should bookkeeping around them panic too.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
        if !ran.unwrap_or(true) {
            // A host thread ran it first.
            continue;
        }
        let busy = t.elapsed();
        if side == Side::Map {
            inner.counters.offload_nanos.fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
            inner.liquid.consumed.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        inner.emulate_device(busy);
    }
}

/// One map attempt's handle: acquire buffers, fill, produce, then commit.
/// Dropping it without committing gives the attempt up; nothing of it
/// reaches the reduce side.
pub struct MapTask<'e> {
    engine: &'e Engine,
    owner: BufferOwner,
    state: Arc<ShuffleState>,
    attempt: Arc<Attempt>,
    credit: HostCredit,
    /// Queued segments, for helping at commit (weak: a finished segment
    /// frees its buffer share at once).
    pending: Vec<Weak<SegmentTask>>,
    started: Instant,
    done: bool,
}

impl std::fmt::Debug for MapTask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapTask").field("owner", &self.owner).finish()
    }
}

impl MapTask<'_> {
    /// A buffer of `size` bytes from the pool (SmartShuffle's
    /// `bufAcquire`); waits or fails when the pool is full, by the
    /// engine's back-pressure setting.
    pub fn buf_acquire(&self, size: usize) -> Result<MapBuffer, EngineError> {
        let i = &self.engine.inner;
        i.buffers.acquire(size, i.config.backpressure, self.owner)
    }

    /// Hands a filled buffer to the engine (SmartShuffle's `bufProduce`):
    /// it is cut into segments queued for the offload workers, except the
    /// host share of liquid offloading, which runs here before returning.
    pub fn buf_produce(&mut self, buf: MapBuffer) -> Result<(), EngineError> {
        if !buf.is_from(&self.engine.inner.buffers) || buf.owner() != self.owner {
            return Err(EngineError::UnknownBuffer { buffer: buf.id() });
        }
        if self.state.map_stage_ended() {
            return Err(EngineError::MapStageEnded(self.owner.shuffle));
        }
        let produced = Arc::new(buf.into_produced());
        let Some(batch) = produced.batch() else { return Ok(()) };
        let segments = cut(batch, self.engine.inner.config.segment_bytes);
        let inner = &self.engine.inner;
        let share = self.host_share();
        let mut host = Vec::new();
        let mut jobs = Vec::new();
        self.attempt.add_segments(segments.len());
        for s in segments {
            let task = Arc::new(SegmentTask::new(
                self.state.clone(),
                self.attempt.clone(),
                produced.clone(),
                s,
            ));
            if self.credit.take(share) {
                host.push(task);
                continue;
            }
            self.pending.push(Arc::downgrade(&task));
            jobs.push(Job {
                bytes: task.bytes(),
                side: Side::Map,
                run: Box::new(move || task.run()),
            });
        }
        // If the shuffle is gone the jobs are dropped unrun, and each counts
        // as a failed segment of the attempt (see `SegmentTask`'s drop).
        inner.scheduler.push(self.owner.shuffle, jobs);
        if inner.config.host_threads > 0 {
            // The extra host threads take the migrated share; the commit
            // still runs whatever of it is left.
            let jobs = host
                .into_iter()
                .map(|task| {
                    self.pending.push(Arc::downgrade(&task));
                    Job { bytes: task.bytes(), side: Side::Map, run: Box::new(move || task.run()) }
                })
                .collect();
            inner.host_queue.push(self.owner.shuffle, jobs);
        } else {
            for task in host {
                self.run_here(&task);
            }
        }
        Ok(())
    }

    /// The share of this task's segments and deliveries its own thread
    /// runs: all of them while the open map tasks fill the cores
    /// (`inline_at_tasks`), else liquid offloading's share.
    fn host_share(&self) -> f64 {
        let inner = &self.engine.inner;
        let at = inner.config.inline_at_tasks;
        if at > 0 && inner.open_map_tasks.load(Ordering::Relaxed) >= at {
            1.0
        } else if inner.liquid.enabled {
            inner.liquid.host_share()
        } else {
            0.0
        }
    }

    /// Runs a segment on this (host) thread, if no worker took it.
    fn run_here(&self, task: &SegmentTask) {
        let inner = &self.engine.inner;
        let t = Instant::now();
        if task.run() {
            inner.counters.host_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            inner.liquid.migrated.fetch_add(task.bytes() as u64, Ordering::Relaxed);
        }
    }

    /// With liquid offloading on, runs this attempt's segments that still
    /// wait for a worker on this thread (the workers are behind).
    fn help(&mut self) {
        for weak in std::mem::take(&mut self.pending) {
            if let Some(task) = weak.upgrade() {
                self.run_here(&task);
            }
        }
    }

    /// Waits for the attempt's segments, flushes its pipelines and, if no
    /// other attempt of the map id committed first, sends the output to
    /// the reduce side.
    pub fn commit(mut self) -> Result<Commit, EngineError> {
        let (shuffle, map, attempt) = (self.owner.shuffle, self.owner.map, self.owner.attempt);
        let (per_dest, stats) = self.collect_output()?;
        let deliveries: Vec<(usize, Vec<Vec<RecordBatch>>)> =
            per_dest.into_iter().enumerate().filter(|(_, r)| !r.is_empty()).collect();
        let outcome = self.state.claim(map, attempt, deliveries.len(), stats)?;
        if outcome == Commit::Duplicate {
            return Ok(outcome);
        }
        let inner = &self.engine.inner;
        inner.liquid.task_done(self.started.elapsed());
        let share = self.host_share();
        let (host, offload): (Vec<_>, Vec<_>) =
            deliveries.into_iter().partition(|_| self.credit.take(share));
        let t = Instant::now();
        for (d, runs) in host {
            self.state.deliver(d as u32, runs);
            self.state.delivered();
        }
        inner.counters.host_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let jobs: Vec<Job> = offload
            .into_iter()
            .map(|(d, runs)| {
                let bytes = runs.iter().flatten().map(RecordBatch::payload_len).sum();
                let (state, inner) = (self.state.clone(), self.engine.inner.clone());
                Job {
                    bytes,
                    side: Side::Reduce,
                    run: Box::new(move || {
                        let t = Instant::now();
                        state.deliver(d as u32, runs);
                        inner.reduce_time(t.elapsed());
                        state.delivered();
                        true
                    }),
                }
            })
            .collect();
        let n = jobs.len();
        if !self.engine.inner.scheduler.push(shuffle, jobs) {
            for _ in 0..n {
                self.state.delivered();
            }
            return Err(EngineError::UnknownShuffle(shuffle));
        }
        Ok(outcome)
    }

    /// Waits for the attempt's segments and flushes its pipelines: per
    /// destination, its runs (each a sequence of batches), and the
    /// attempt's totals. Marks the attempt done.
    fn collect_output(&mut self) -> Result<(DestinationRuns, MapSideStats), EngineError> {
        let (shuffle, map, attempt) = (self.owner.shuffle, self.owner.map, self.owner.attempt);
        let wrap =
            |e: EngineError| EngineError::Attempt { shuffle, map, attempt, source: Box::new(e) };
        if self.done {
            return Err(wrap(EngineError::Invariant("attempt already ended or given up".into())));
        }
        self.done = true;
        if self.engine.inner.liquid.enabled {
            self.help();
        }
        let pipelines = self.attempt.drain().map_err(|e| {
            self.state.void_attempt();
            wrap(e)
        })?;
        let parts = self.state.destinations as usize;
        let mut per_dest: Vec<Vec<Vec<RecordBatch>>> = (0..parts).map(|_| Vec::new()).collect();
        let mut stats = MapSideStats::default();
        for mut p in pipelines {
            let s = p.finish().map_err(|e| wrap(e.into()))?;
            stats.add(&s);
            for (d, runs) in per_dest.iter_mut().enumerate() {
                runs.extend(p.take_runs(d).into_iter().filter(|r| !r.is_empty()));
            }
        }
        Ok((per_dest, stats))
    }

    /// The output the attempt's pipelines emitted so far, per destination
    /// (one run each), for a host that spills map output to its own
    /// storage when its memory runs short: waits for the segments queued
    /// so far and runs every destination's staged records through its
    /// operator. The attempt stays open; operator state (a partial
    /// aggregate's table) stays in the pipelines. A failure gives the
    /// attempt up.
    pub fn take_output_so_far(&mut self) -> Result<DestinationRuns, EngineError> {
        let (shuffle, map, attempt) = (self.owner.shuffle, self.owner.map, self.owner.attempt);
        let wrap =
            |e: EngineError| EngineError::Attempt { shuffle, map, attempt, source: Box::new(e) };
        if self.done {
            return Err(wrap(EngineError::Invariant("output taken from an ended attempt".into())));
        }
        if self.engine.inner.liquid.enabled {
            self.help();
        }
        let parts = self.state.destinations as usize;
        let taken = self.attempt.quiesce(|pipes| {
            let mut per_dest: DestinationRuns = (0..parts).map(|_| Vec::new()).collect();
            for p in pipes.iter_mut() {
                p.flush_stages()?;
                for (d, runs) in per_dest.iter_mut().enumerate() {
                    let out = p.take_output(d);
                    if !out.is_empty() {
                        runs.push(out);
                    }
                }
            }
            Ok::<_, sluice_core::reorg::ReorgError>(per_dest)
        });
        match taken {
            Ok(Ok(per_dest)) => Ok(per_dest),
            Ok(Err(e)) => {
                self.give_up();
                Err(wrap(e.into()))
            }
            Err(e) => {
                self.give_up();
                Err(wrap(e))
            }
        }
    }

    /// Ends the attempt for an external reduce side (a host engine such as
    /// Spark, which stores and serves map outputs itself): waits for the
    /// segments, flushes the pipelines and returns, per destination, its
    /// runs (each a sequence of batches; one run per destination when the
    /// shuffle's operator does not sort) and the attempt's totals. Nothing
    /// is claimed or delivered to this engine's reduce side; the host
    /// decides which attempt's output counts.
    pub fn finish_output(mut self) -> Result<(DestinationRuns, MapSideStats), EngineError> {
        let out = self.collect_output()?;
        self.engine.inner.liquid.task_done(self.started.elapsed());
        Ok(out)
    }

    /// Gives the attempt up (as dropping it does).
    pub fn abort(mut self) {
        self.give_up();
    }

    fn give_up(&mut self) {
        if !self.done {
            self.done = true;
            self.attempt.void();
            self.state.void_attempt();
        }
    }
}

impl Drop for MapTask<'_> {
    fn drop(&mut self) {
        self.give_up();
        self.engine.inner.open_map_tasks.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A map attempt's output: per destination, its runs, each a sequence of
/// batches.
pub type DestinationRuns = Vec<Vec<Vec<RecordBatch>>>;

/// An output block of a reduce partition, handed to a reduce task.
#[derive(Debug)]
pub struct ReduceBlock {
    shuffle: ShuffleId,
    reduce: u32,
    batch: RecordBatch,
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
