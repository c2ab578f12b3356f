//! What a running engine counts, and the snapshot [`Engine::metrics`]
//! takes of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::engine::Engine;
use crate::liquid::Decision;
use crate::worker::OFFLOAD_THREAD_NAME;

/// Counters of a running engine.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) offload_nanos: AtomicU64,
    pub(crate) host_nanos: AtomicU64,
    pub(crate) reduce_nanos: AtomicU64,
}

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

/// Bytes the engine holds now, by what holds them. Between tasks (no map
/// attempt or reduce operator open) every field but `free_page_bytes` is
/// 0, and `free_page_bytes` is at most `free_page_limit`: anything else is
/// memory a finished task left behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineHeld {
    /// Map buffers charged to the buffer pool (produced, not yet consumed).
    pub buffer_bytes: usize,
    /// Operator state charged to the map-side and reduce-side memory pools.
    pub operator_bytes: usize,
    /// Reduce-side results charged to the results pool.
    pub results_bytes: usize,
    /// Free partition pages kept for reuse.
    pub free_page_bytes: usize,
    /// The most free pages the engine keeps: [`PAGE_POOL_FREE_BYTES`] per
    /// page size in use.
    ///
    /// [`PAGE_POOL_FREE_BYTES`]: crate::PAGE_POOL_FREE_BYTES
    pub free_page_limit: usize,
}

impl Engine {
    /// What the engine holds now ([`EngineHeld`]).
    pub fn held(&self) -> EngineHeld {
        let i = &self.inner;
        EngineHeld {
            buffer_bytes: i.buffers.used(),
            operator_bytes: i.memory.used() + i.reduce_memory.used(),
            results_bytes: i.results.used(),
            free_page_bytes: i.pages.free_bytes(),
            free_page_limit: i.pages.free_limit(),
        }
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
