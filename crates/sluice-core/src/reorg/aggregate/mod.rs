//! Aggregation: group by key bytes, fold values (sum, count, min, max, avg
//! over i32/i64/f32/f64, several of them over nullable integers and
//! decimals at once ([`lanes`]), or collect every value), partially on the
//! map side and exactly on the reduce side.
//!
//! ```text
//!  map side:    records ──► PartialAggregate (threshold, spill state | input | evict) ──► partials
//!  reduce side: partials ──► FinalAggregate (memory pool; sorted runs on disk) ──► results
//! ```
//! - [`func`]: the functions and their mergeable states.
//! - `groups`: the hash table (see `reorg::table`) plus states, under a byte
//!   limit and a memory reservation.
//! - [`PartialAggregate`], [`FinalAggregate`]: the two modes.
//!
//! Values are the record's whole value, little-endian, exactly the type's
//! width (a different width is a typed error naming the record). Partial
//! records are `(key, state)`; results are `(key, value)` with an 8-byte
//! little-endian value (i64, u64 or f64) or, for collect, a list
//! `[len:u32le bytes]*`.

mod evict;
mod final_agg;
pub mod func;
mod groups;
mod inline;
mod key8;
pub mod lanes;
mod lines;
mod partial;
mod probe_loop;

pub use final_agg::FinalAggregate;
pub use func::{AggFn, AggSpec, ValueType};
pub use lanes::{LaneKind, Lanes};
pub use partial::PartialAggregate;

use crate::format::Layout;
use crate::reorg::ReorgError;

/// What a partial operator does when its state is full (SmartShuffle 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpillStrategy {
    /// Emit the whole state and start empty.
    State,
    /// Keep the state; pass records with new keys through unaggregated.
    Input,
    /// Sluice's own, not SmartShuffle's: keep the groups that recur now.
    /// For 8-byte keys with a numeric function of one or two state words
    /// the table is a set-associative cache of groups (one cache line per
    /// bucket), and a new key in a full bucket evicts one of its groups as
    /// a partial (`evict`); wider states (lanes), other keys (the general
    /// table) and collect spill their state as with
    /// [`SpillStrategy::State`], and so does a partial distinct.
    Evict,
}

/// Counters of an aggregate operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggregateStats {
    /// Records taken in.
    pub input_records: u64,
    /// Payload bytes taken in.
    pub input_bytes: u64,
    /// Records emitted (partials or results).
    pub emitted_records: u64,
    /// Times the whole state was spilled (emitted, or written as a run).
    pub state_spills: u64,
    /// Records passed through unaggregated (spill input).
    pub passed_through: u64,
    /// Groups evicted as partials before the end (spill by eviction).
    pub evicted: u64,
    /// Bytes of state allocated now.
    pub state_bytes: usize,
    /// Bytes written to spill files.
    pub spill_bytes: u64,
    /// Payload bytes of the state written to disk, as it was in memory
    /// (reduce side).
    pub spill_run_bytes: u64,
    /// Write calls to spill files.
    pub spill_writes: u64,
    /// Merge passes that brought the spilled runs within the fan-in.
    pub merge_passes: u64,
}

impl AggregateStats {
    /// Spills of any kind (state spills, pass-throughs and evictions).
    pub fn spill_count(&self) -> u64 {
        self.state_spills + self.passed_through + self.evicted
    }
}

/// SmartShuffle's aggregation rate: the data reduction achieved over the
/// ideal one, `(map output - reduce input) / (map output - ideal reduce
/// input)`, where the ideal reduce input is one partial per distinct key.
/// 1.0 when nothing could be reduced. Negative when the partials are larger
/// than the raw records they replace (an 8-byte state for a 4-byte value,
/// with few repeats per key while a group is held).
pub fn aggregation_rate(map_output_bytes: u64, reduce_input_bytes: u64, ideal_bytes: u64) -> f64 {
    let ideal = map_output_bytes as f64 - ideal_bytes as f64;
    if ideal <= 0.0 {
        return 1.0;
    }
    (map_output_bytes as f64 - reduce_input_bytes as f64) / ideal
}

/// Layout of partial records for records in `layout`.
pub fn partial_layout(spec: AggSpec, layout: Layout) -> Layout {
    match (layout, spec.func) {
        (Layout::Fixed { key_width, .. }, f) if f != AggFn::Collect => {
            Layout::Fixed { key_width, value_width: spec.partial_bytes() as u32 }
        }
        _ => Layout::Variable,
    }
}

/// Layout of final results for records in `layout`.
pub fn final_layout(spec: AggSpec, layout: Layout) -> Layout {
    match (layout, spec.func) {
        (Layout::Fixed { key_width, .. }, f) if f != AggFn::Collect => {
            Layout::Fixed { key_width, value_width: spec.result_bytes() as u32 }
        }
        _ => Layout::Variable,
    }
}

/// Checks a raw value's width against the spec.
#[inline]
pub(crate) fn check_value(spec: AggSpec, value: &[u8], record: usize) -> Result<(), ReorgError> {
    let Some(want) = spec.value_bytes() else { return Ok(()) };
    if value.len() == want {
        return Ok(());
    }
    let value_type = if let AggFn::Lanes(_) = spec.func { "lanes" } else { spec.value.name() };
    Err(ReorgError::ValueWidth { record, value_type, want, got: value.len() })
}
