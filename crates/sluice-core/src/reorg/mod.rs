//! Reorganization operators: what SmartShuffle and DShuffle run inside the
//! shuffle besides partitioning (aggregate, sort, filter, distinct), each
//! with a bounded-memory partial mode for the map side and an exact final
//! mode for the reduce side.
//!
//! ```text
//!  map side (partial, bounded)          reduce side (final, exact)
//!  PartialAggregate ── partials ──────► FinalAggregate
//!  SortRuns         ── sorted runs ───► SortMerge (loser tree)
//!  PartialDistinct  ── candidates ────► FinalDistinct
//!  Filter (stateless, either side)
//! ```
//! Every operator takes [`BatchView`](crate::format::BatchView)s and writes
//! to an [`Emitter`]. State is accounted in a [`MemoryPool`](crate::memory::MemoryPool);
//! partial operators spill downstream (emit) at their threshold, final ones
//! spill sorted runs to disk ([`crate::spill`]) when the pool refuses and
//! merge them at the end.

pub mod aggregate;
mod control_bytes;
pub mod cursor;
pub mod distinct;
mod emit;
mod error;
pub mod filter;
mod group_stream;
pub mod merge;
mod runs;
pub mod sort;
mod spec;
pub mod table;

pub use emit::{Emitter, EMIT_BATCH_BYTES};
pub use error::ReorgError;
pub use group_stream::GroupStream;
pub use runs::{
    SpillConfig, MERGE_FAN_IN_MAX, MERGE_FAN_IN_MIN, MERGE_PASS_BLOCK_BYTES, MERGE_RUN_READ_BYTES,
};
pub use spec::StageSpec;
