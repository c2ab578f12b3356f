//! Sluice's embedded shuffle engine: map tasks hand filled buffers to a
//! pool of offload workers with their own thread budget, which partition
//! them and run the shuffle's data-reorganization operator; reduce tasks
//! read the finished partitions. SmartShuffle's agent, traffic scheduler,
//! workers and liquid offloading, and DShuffle's pipelined engine, in one
//! process; what the Spark plugin and the daemon embed.
//!
//! - [`Engine`]: `register_shuffle`, `map_task` ([`MapTask::buf_acquire`],
//!   [`MapTask::buf_produce`], [`MapTask::commit`]), `end_map_stage`,
//!   `buf_consume`, `buf_release`.
//! - `buffer`: the bounded, reused map buffer pool with back-pressure.
//! - `scheduler`: one FCFS queue per shuffle, served round-robin.
//! - `attempt`: per map attempt pipelines, discardable until commit.
//! - `liquid`: the controller that moves work to host threads.
//! - `node`: two-level partitioning (map side by node, reduce side by
//!   reduce id).
//! - `reduce`: the reduce side, engine- or host-owned (the shuffle's
//!   [`ReduceOwner`]), one final operator for both; `store`: an
//!   engine-owned partition's persisted result (memory within the budget,
//!   then checksummed disk).
//! - `host_keys`, `file_task`, `output`: a host-owned shuffle's map side:
//!   buffers keyed by the host's partition ids, checked once, and each map
//!   attempt's data file (Spark's layout) with its spills and checksums.
//!
//! # Failures
//! Misuse is a typed [`EngineError`] that leaves other shuffles alone. An
//! operator that panics on some input voids the attempt (its commit
//! returns [`EngineError::Panicked`] inside [`EngineError::Attempt`]) or
//! fails the partition it worked for; workers survive. Unregistering a
//! shuffle wakes reduce tasks waiting on its unfinished partitions with an
//! error. Persisted partitions are checksummed; a corrupt block is an error
//! naming the file and offset.
//!
//! # Memory
//! The budget is split in three [`MemoryPool`](sluice_core::memory::MemoryPool)s:
//! reduce-side results held in memory ([`RESULTS_SHARE_PERCENT`] of the
//! budget), and the rest in halves for map-side and reduce-side operator
//! state, so no side starves the other; a refused operator spills, a
//! refused result block goes to disk. Each reduce partition's final
//! operator is capped at its share of the reduce-side pool. Bounded separately: map buffers (the buffer pool).
//! Not accounted: partition staging pages of each pipeline (destinations x
//! (twice the stage + one page): 256 KiB stages of 16-64 KiB pages, up to
//! 1 MiB for an aggregate's), free partition pages kept for reuse (up to
//! [`PAGE_POOL_FREE_BYTES`] per page size), and the output of an attempt's
//! pipelines until it commits (at most the attempt's input after its
//! operator).

mod attempt;
mod buffer;
mod config;
pub mod cpu;
mod engine;
mod error;
pub mod file_task;
pub mod host_keys;
pub mod host_op;
pub mod liquid;
mod map_task;
mod metrics;
mod node;
pub mod output;
mod pages;
mod pipeline;
pub mod reduce;
mod reduce_block;
mod scheduler;
mod segment;
mod shuffle;
mod store;
pub mod waits;
mod worker;

pub use buffer::{BufferPool, MapBuffer, POOL_FREE_BUFFERS_MAX};
pub use config::{
    Backpressure, EngineConfig, BUFFER_POOL_BYTES_DEFAULT, MEMORY_BUDGET_DEFAULT,
    OPERATOR_STATE_BYTES_DEFAULT, RESULTS_SHARE_PERCENT, SEGMENT_BYTES_DEFAULT,
};
pub use engine::Engine;
pub use error::{EngineError, EngineResult, ShuffleId};
pub use file_task::FileMapTask;
pub use liquid::Decision;
pub use map_task::{DestinationRuns, MapTask};
pub use metrics::{EngineHeld, EngineMetrics};
pub use node::{node_of, reduce_ids};
pub use pages::PAGE_POOL_FREE_BYTES;
pub use pipeline::{
    MapPipeline, PipelineStats, AGGREGATE_STAGE_BYTES_MAX, STAGE_BYTES, THRESHOLD_SPLIT_MAX,
};
pub use reduce::{ReduceTask, REDUCE_STATE_FLOOR_BYTES};
pub use reduce_block::ReduceBlock;
pub use shuffle::{
    page_bytes_for, Commit, MapSideStats, ReduceOwner, ShuffleSpec, OPEN_PAGES_BYTES,
    PAGE_BYTES_MAX, REDUCE_STATE_MIN_BYTES,
};
pub use store::{StoreStats, BLOCK_BYTES};
pub use worker::{HOST_IDLE_POLL, HOST_THREAD_NAME, OFFLOAD_THREAD_NAME, STEAL_BACKLOG_SEGMENTS};
