//! The partition operator: records in, records grouped by destination
//! partition out (the thesis's multithreaded shuffle operator and PSACS).
//!
//! - [`function`]: which partition a key goes to (fold hash, xxh3, mask, range).

pub mod error;
pub mod function;

pub use error::PartitionError;
pub use function::{FoldHash, MaskPartitioner, Partitioner, RangePartitioner, Xxh3Hash};
pub mod output;
pub mod page;

pub use output::{Partitioned, PartitionedBuffer, PartitionedPages};
pub use page::{Page, PagePool, PAGE_BYTES_DEFAULT};
pub mod strategy;

pub use strategy::{PartitionJob, PartitionStrategy, StrategyKind};
