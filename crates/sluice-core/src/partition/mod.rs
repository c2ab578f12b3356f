//! The partition operator: records in, records grouped by destination
//! partition out (the thesis's multithreaded shuffle operator and PSACS).
//!
//! ```text
//!  batches (one layout) ──► PartitionStrategy ──► Partitioned
//!                            │   uses                 ├─ Pages:  partition -> [Page]  (from a PagePool)
//!                            │   Partitioner          └─ Buffer: | p0 | p1 | ... | + offsets
//!                            └── threads
//! ```
//!
//! - [`function`]: which partition a key goes to (fold hash, xxh3, mask,
//!   range with a prefix table).
//! - [`page`]: pages in the block payload layout and the pool they are
//!   recycled through.
//! - [`output`]: the two output forms.
//! - [`strategy`]: eight ways of doing the grouping plus [`strategy::Auto`],
//!   which picks one from the record size, partition count and thread count
//!   by a rule measured on the reference machine (see its module docs).
//!
//! # Invariants
//! Every strategy emits every input record exactly once, byte for byte, in
//! the partition its function names (order within a partition is not
//! specified); pages never exceed the page size except to hold a single
//! record larger than a page. `tests/partition_strategies.rs` checks both
//! against a trivial reference for 1-4 threads and 1 to 65,536 partitions.

pub mod error;
mod fixed_writer;
pub mod function;
pub mod output;
pub mod page;
pub mod strategy;

pub use error::PartitionError;
pub use function::{FoldHash, MaskPartitioner, Partitioner, RangePartitioner, Xxh3Hash};
pub use output::{Partitioned, PartitionedBuffer, PartitionedPages};
pub use page::{Page, PagePool, PAGE_BYTES_DEFAULT};
pub use strategy::{PartitionJob, PartitionStrategy, StrategyKind};
