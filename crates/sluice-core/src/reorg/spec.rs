//! The operator a shuffle runs on its map side after partitioning, as a
//! shuffle's spec names it (the engine's map pipeline builds one per
//! destination from it).

use crate::reorg::aggregate::{AggSpec, SpillStrategy};
use crate::reorg::distinct::DistinctBy;
use crate::reorg::filter::Predicate;

/// Which operator runs after partitioning.
#[derive(Debug, Clone, PartialEq)]
pub enum StageSpec {
    /// Partition only.
    None,
    /// Partial aggregation.
    Aggregate(AggSpec, SpillStrategy),
    /// Sorted runs.
    Sort,
    /// Partial distinct.
    Distinct(DistinctBy, SpillStrategy),
    /// Filter.
    Filter(Predicate),
}
