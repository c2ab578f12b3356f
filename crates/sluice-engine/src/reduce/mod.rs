//! The reduce side of a shuffle, owned by the engine or by the host (the
//! shuffle's [`ReduceOwner`](crate::ReduceOwner)), driving one final
//! operator either way.
//!
//! ```text
//!  engine-owned (sluice run): commit ──► deliver runs ──► ReducePartition ──► FinalOp ──► Store ──► buf_consume
//!  host-owned (Spark):        map output file ──► host fetches blocks ──► ReduceTask ──► FinalOp ──► host buffers
//! ```
//! - `final_op`: [`FinalOp`], the final aggregate, sorted merge or final
//!   distinct behind one interface (push records or runs, finish, drain).
//! - `drain`: [`Drain`], results handed out a batch or a buffer at a time.
//! - `partition`: an engine-owned reduce partition, fed by the offload
//!   workers as map tasks commit, its result persisted in a store.
//! - `task`: [`ReduceTask`], a host-owned reduce task fed the blocks the
//!   host fetched, its memory granted by the host.
//! - `block`: a fetched block's name, header, checks and values.
//! - `segments`: a map's segment fed a piece at a time, and results
//!   written back out as a segment (the service daemon's reduce side).

pub mod block;
pub mod drain;
pub mod final_op;
pub(crate) mod partition;
pub mod segments;
pub mod task;

pub use block::{
    decode_values, decode_values_with, frame_info, thread_decoder_bytes, BlockName, FrameInfo,
    THREAD_BUFFER_KEEP_BYTES,
};
pub use drain::Drain;
pub use final_op::{FinalOp, Finished, RUN_BATCH_BYTES, SORT_CUT_RUN_BYTES};
pub use segments::{SegmentEncoder, SegmentFeed};
pub use task::{ReduceTask, REDUCE_STATE_FLOOR_BYTES};
