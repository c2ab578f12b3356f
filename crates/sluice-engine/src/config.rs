//! Engine settings, with the defaults a single machine wants.

use std::path::PathBuf;

/// Bytes of a scheduling segment (SmartShuffle cuts large buffers into
/// about 100 KB so that workers stay balanced and a straggler holds little).
pub const SEGMENT_BYTES_DEFAULT: usize = 100_000;

/// Bytes the buffer pool holds by default (64 MiB).
pub const BUFFER_POOL_BYTES_DEFAULT: usize = 64 << 20;

/// Memory budget for operator state and reduce-side results by default
/// (1 GiB).
pub const MEMORY_BUDGET_DEFAULT: usize = 1 << 30;

/// Share of the memory budget that reduce-side results may hold in
/// memory, in percent; the rest is for operator state, so results kept in
/// memory never starve the operators that produce them.
pub const RESULTS_SHARE_PERCENT: usize = 50;

/// Map-side operator state per map attempt pipeline by default (16 MB,
/// SmartShuffle's spilling threshold).
pub const OPERATOR_STATE_BYTES_DEFAULT: usize = 16 << 20;

/// What `buf_acquire` does when the buffer pool is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backpressure {
    /// Block until enough buffers are returned.
    Wait,
    /// Return [`EngineError::WouldBlock`](crate::EngineError::WouldBlock).
    WouldBlock,
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Offload worker threads (the engine's own core budget).
    pub offload_threads: usize,
    /// Pin offload worker `i` to core `i` (modulo the cores there are).
    pub pin_offload_threads: bool,
    /// Bytes of map buffers handed out at once.
    pub buffer_pool_bytes: usize,
    /// Scheduling segment size in bytes.
    pub segment_bytes: usize,
    /// Budget for operator state and reduce-side results held in memory;
    /// reduce partitions beyond it are persisted to disk.
    pub memory_budget: usize,
    /// Map-side operator state per pipeline (the spilling threshold).
    pub operator_state_bytes: usize,
    /// Where spilled state and persisted partitions go.
    pub spill_dir: PathBuf,
    /// Speed of the offload workers relative to this machine's cores, in
    /// (0, 1]: a worker that took `t` for a segment then idles
    /// `t (1 / speed - 1)`, emulating a weaker device.
    pub device_speed: f64,
    /// Liquid offloading: move work to host threads when the offload
    /// workers fall behind.
    pub liquid_offload: bool,
    /// Extra host threads for migrated segments; 0: the producing map
    /// tasks run their migrated share themselves.
    pub host_threads: usize,
    /// Whether an extra host thread with no migrated segment to run takes
    /// the next map segment queued for the offload workers (work
    /// conserving: a host core never idles while segments wait).
    pub host_steal: bool,
    /// What a full buffer pool does to `buf_acquire`.
    pub backpressure: Backpressure,
    /// Run every map segment and delivery on the producing thread while at
    /// least this many map tasks are open: their threads already keep that
    /// many cores busy, so an offload worker would only take time from
    /// them (and make each task wait for it at commit). 0: never (the
    /// offload workers and liquid offloading decide).
    pub inline_at_tasks: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            offload_threads: 1,
            pin_offload_threads: false,
            buffer_pool_bytes: BUFFER_POOL_BYTES_DEFAULT,
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            memory_budget: MEMORY_BUDGET_DEFAULT,
            operator_state_bytes: OPERATOR_STATE_BYTES_DEFAULT,
            spill_dir: std::env::temp_dir(),
            device_speed: 1.0,
            liquid_offload: true,
            host_threads: 0,
            host_steal: true,
            backpressure: Backpressure::Wait,
            inline_at_tasks: 0,
        }
    }
}
