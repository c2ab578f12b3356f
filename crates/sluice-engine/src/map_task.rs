//! A map attempt's handle: buffers in, segments out to the workers (or
//! run in place, liquid offloading's host share), then commit (deliver to
//! the engine's reduce side) or finish (hand the output to a host that
//! stores map output itself).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use sluice_core::format::RecordBatch;

use crate::attempt::Attempt;
use crate::buffer::{BufferOwner, MapBuffer};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::liquid::HostCredit;
use crate::scheduler::{Job, Side};
use crate::segment::SegmentTask;
use crate::shuffle::{Commit, MapSideStats, ReduceOwner, ShuffleState};

/// One map attempt's handle: acquire buffers, fill, produce, then commit.
/// Dropping it without committing gives the attempt up; nothing of it
/// reaches the reduce side.
pub struct MapTask<'e> {
    pub(crate) engine: &'e Engine,
    pub(crate) owner: BufferOwner,
    pub(crate) state: Arc<ShuffleState>,
    pub(crate) attempt: Arc<Attempt>,
    pub(crate) credit: HostCredit,
    /// Queued segments, for helping at commit (weak: a finished segment
    /// frees its buffer share at once).
    pub(crate) pending: Vec<Weak<SegmentTask>>,
    pub(crate) started: Instant,
    pub(crate) done: bool,
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
        if batch.is_empty() {
            return Ok(());
        }
        let segments = produced.segments(self.engine.inner.config.segment_bytes);
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
        // With every segment on this thread there is nothing to queue, and
        // no worker to wake.
        if !jobs.is_empty() {
            inner.scheduler.push(self.owner.shuffle, jobs);
        }
        if inner.config.host_threads > 0 {
            // The extra host threads take the migrated share; the commit
            // still runs whatever of it is left.
            let jobs = host
                .into_iter()
                .map(|task| {
                    self.pending.push(Arc::downgrade(&task));
                    Job { bytes: task.bytes(), side: Side::Map, run: Box::new(move || task.run()) }
                })
                .collect::<Vec<_>>();
            if !jobs.is_empty() {
                inner.host_queue.push(self.owner.shuffle, jobs);
            }
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
        let at = inner.inline_at_tasks.load(Ordering::Relaxed);
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
        self.state.owned_by(ReduceOwner::Engine)?;
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
        self.state.owned_by(ReduceOwner::Host)?;
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
        self.state.owned_by(ReduceOwner::Host)?;
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
