//! A host-owned shuffle's map output: the data file a map attempt writes
//! (and its spill files), the trailer that ends each partition's segment,
//! and the host's per-partition checksums.
//!
//! - `file`: the data-file layout (Spark's sort-shuffle layout: partition
//!   segments back to back, Sluice blocks inside), spills and their
//!   concatenation.
//! - `trailer`: the segment trailer and its check on the reduce side.
//! - `checksum`: Spark's per-partition checksum algorithms.

pub mod checksum;
pub mod file;
pub mod trailer;

pub use checksum::Algorithm;
pub use file::{write_output, OutputOptions, Spilled, Written};
pub use trailer::{fetch_end, segment_end, Counted, SegmentTrailer};
