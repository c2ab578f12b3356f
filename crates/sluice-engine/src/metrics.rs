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

impl Engine {
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
