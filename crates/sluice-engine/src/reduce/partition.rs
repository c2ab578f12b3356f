//! The reduce side of one partition: the second round of the shuffle's
//! operator over every committed map output, then the result persisted
//! for the reduce task.
//!
//! ```text
//!  commit of map m ──► deliver(runs for p) ──► second round ──► (map stage ends) finish ──► Store ──► buf_consume
//!                      (offload worker)        concat | final aggregate | merge sort | final distinct
//! ```
//! Deliveries run on offload workers as commits arrive, so the second round
//! overlaps the map stage; `finish` runs once every map task committed.
//! The final operator ([`FinalOp`], the same one a host's reduce task
//! drives) keeps its state in the engine's reduce-side memory pool and
//! spills sorted runs to disk when it refuses (see `sluice_core::reorg`);
//! the result goes to a [`Store`] (memory while granted, then disk), a
//! batch at a time as the operator's drain hands them out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::reorg::SpillConfig;
use sluice_core::reorg::StageSpec;

use crate::error::{panic_message, EngineError, ShuffleId};
use crate::reduce::final_op::FinalOp;
use crate::store::{Store, StoreStats};

/// The second-round operator of a partition.
#[derive(Debug)]
enum Second {
    /// Blocks kept as they come (partition only, filter).
    Concat(Box<Store>),
    /// A final aggregate, sorted merge or final distinct.
    Final(FinalOp),
}

#[derive(Debug)]
enum State {
    Collecting(Second),
    Ready(Box<Store>),
    Failed(String),
    /// Transient, while an operation owns the state.
    Busy,
}

/// What every reduce partition of a shuffle draws on.
#[derive(Debug)]
pub(crate) struct ReduceResources<'a> {
    /// Operator state.
    pub(crate) memory: &'a MemoryPool,
    /// Results held in memory.
    pub(crate) results: &'a MemoryPool,
    /// Where runs and results beyond memory go.
    pub(crate) spill: &'a SpillConfig,
    /// Most state of one partition's final operator, bytes.
    pub(crate) limit: usize,
}

/// One reduce partition.
#[derive(Debug)]
pub(crate) struct ReducePartition {
    shuffle: ShuffleId,
    reduce: u32,
    /// Where finished results are held in memory.
    results: MemoryPool,
    spill: SpillConfig,
    out_layout: Layout,
    /// Runs the final operator spilled to disk, and their bytes.
    spilled_runs: AtomicU64,
    spilled_bytes: AtomicU64,
    state: Mutex<State>,
    ready: Condvar,
}

impl ReducePartition {
    /// A partition receiving the map-side output of `op` over records in
    /// `layout`.
    pub(crate) fn new(
        shuffle: ShuffleId,
        reduce: u32,
        layout: Layout,
        op: &StageSpec,
        with: &ReduceResources<'_>,
    ) -> Self {
        let (memory, results, limit) = (with.memory, with.results, with.limit);
        let spill = with.spill.clone();
        let (second, out_layout) =
            match FinalOp::new(op, layout, memory, spill.clone(), Some(limit)) {
                Some(f) => {
                    let l = f.output_layout();
                    (Second::Final(f), l)
                }
                None => {
                    (Second::Concat(Box::new(Store::new(layout, results, spill.clone()))), layout)
                }
            };
        ReducePartition {
            shuffle,
            reduce,
            results: results.clone(),
            spill,
            out_layout,
            spilled_runs: AtomicU64::new(0),
            spilled_bytes: AtomicU64::new(0),
            state: Mutex::new(State::Collecting(second)),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wrap(&self, e: EngineError) -> EngineError {
        EngineError::Reduce { shuffle: self.shuffle, reduce: self.reduce, source: Box::new(e) }
    }

    /// Takes one committed map output: its sorted runs (or plain blocks)
    /// for this partition.
    pub(crate) fn deliver(&self, runs: Vec<Vec<RecordBatch>>) {
        self.contained(|| self.deliver_inner(runs));
    }

    /// Runs `f`; a panic in it fails the partition instead of the thread.
    fn contained(&self, f: impl FnOnce()) {
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let e = EngineError::Panicked(panic_message(&*payload));
            self.fail(&self.wrap(e).to_string());
        }
    }

    fn deliver_inner(&self, runs: Vec<Vec<RecordBatch>>) {
        let mut st = self.lock();
        let State::Collecting(second) = &mut *st else { return };
        let result = match second {
            Second::Concat(store) => runs.into_iter().flatten().try_for_each(|b| store.append(b)),
            Second::Final(f) => runs.into_iter().try_for_each(|r| f.add_run(r)),
        };
        if let Err(e) = result {
            *st = State::Failed(self.wrap(e).to_string());
            self.ready.notify_all();
        }
    }

    /// Marks the partition failed (its input could not be delivered).
    pub(crate) fn fail(&self, message: &str) {
        *self.lock() = State::Failed(message.to_string());
        self.ready.notify_all();
    }

    /// Fails the partition if it is still collecting (its shuffle is being
    /// unregistered): whoever waits for it wakes with an error.
    pub(crate) fn abandon(&self, message: &str) {
        let mut st = self.lock();
        if matches!(*st, State::Collecting(_)) {
            *st = State::Failed(message.to_string());
            drop(st);
            self.ready.notify_all();
        }
    }

    /// Runs the second round's final step and persists the result.
    pub(crate) fn finish(&self) {
        self.contained(|| self.finish_inner());
    }

    fn finish_inner(&self) {
        let mut st = self.lock();
        if !matches!(*st, State::Collecting(_)) {
            // Failed already, or finished: nothing to do.
            return;
        }
        let State::Collecting(second) = std::mem::replace(&mut *st, State::Busy) else {
            return;
        };
        let result = self.complete(second);
        *st = match result {
            Ok(store) => State::Ready(store),
            Err(e) => State::Failed(self.wrap(e).to_string()),
        };
        drop(st);
        self.ready.notify_all();
    }

    fn record_spills(&self, runs: u64, bytes: u64) {
        self.spilled_runs.store(runs, Ordering::Relaxed);
        self.spilled_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Sorted runs the final operator wrote to disk, and their bytes
    /// (known once the partition finished).
    pub(crate) fn operator_spills(&self) -> (u64, u64) {
        (self.spilled_runs.load(Ordering::Relaxed), self.spilled_bytes.load(Ordering::Relaxed))
    }

    fn complete(&self, second: Second) -> Result<Box<Store>, EngineError> {
        let f = match second {
            Second::Concat(mut store) => {
                store.seal()?;
                return Ok(store);
            }
            Second::Final(f) => f.finish()?,
        };
        self.record_spills(f.spilled_runs, f.spill_bytes);
        let mut drain = f.drain;
        let mut store = Store::new(self.out_layout, &self.results, self.spill.clone());
        while let Some(b) = drain.next_batch()? {
            store.append(b)?;
        }
        store.seal()?;
        Ok(Box::new(store))
    }

    /// The next output block, waiting until the partition is finished;
    /// with `help`, a partition nobody has started finishing is finished
    /// on the caller's thread (a host worker taking over device work).
    pub(crate) fn next_block(&self, help: bool) -> Result<Option<RecordBatch>, EngineError> {
        if help {
            self.finish();
        }
        let mut st = self.lock();
        loop {
            match &mut *st {
                State::Ready(store) => return store.next_block().map_err(|e| self.wrap(e)),
                State::Failed(message) => {
                    return Err(EngineError::PartitionFailed {
                        shuffle: self.shuffle,
                        reduce: self.reduce,
                        message: message.clone(),
                    })
                }
                State::Collecting(_) | State::Busy => {
                    st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// What the partition's store did (after finishing).
    pub(crate) fn store_stats(&self) -> StoreStats {
        match &*self.lock() {
            State::Ready(s) => s.stats(),
            State::Collecting(Second::Concat(s)) => s.stats(),
            _ => StoreStats::default(),
        }
    }

    /// The partition's spill file, if its result went to disk.
    pub(crate) fn disk_path(&self) -> Option<std::path::PathBuf> {
        match &*self.lock() {
            State::Ready(s) => s.disk_path(),
            _ => None,
        }
    }
}
