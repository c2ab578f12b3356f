//! The host's names for an offloaded operator (SmartShuffle's
//! `registerShuffle` operator): an aggregation Spark hands to the engine
//! whole, map side and reduce side, or the sort of a `sortByKey`. Java's
//! `EngineOp` carries small codes, read by field ([`HostOp::read`]) and
//! checked here into the engine's [`StageSpec`]; the map side runs in the
//! engine's pipelines, the reduce side in `sluice_engine::ReduceTask`.
//!
//! The records of an operator shuffle are keyed `partition id (u32 LE) ++
//! the host's key bytes`; values are little-endian numbers of the
//! shuffle's value type (see [`agg_spec`]).

use sluice_core::reorg::aggregate::{AggSpec, SpillStrategy};
use sluice_core::reorg::StageSpec;
use sluice_engine::host_op;

use crate::error::{BridgeError, BridgeResult};
use crate::fields;

/// The aggregation a JVM names by two small codes (see
/// [`sluice_engine::host_op::agg_spec`], where the codes are declared).
pub fn agg_spec(func: i32, value: i32) -> BridgeResult<AggSpec> {
    host_op::agg_spec(func, value).map_err(argument)
}

pub use sluice_engine::host_op::{FUNC_LANES, OP_NONE, OP_SORT};

/// The map-side spilling strategy of host code `code`
/// (`jni/SpillStrategy.java`): 0 state, 1 input, 2 evict.
pub fn spill_strategy(code: i32) -> BridgeResult<SpillStrategy> {
    match code {
        0 => Ok(SpillStrategy::State),
        1 => Ok(SpillStrategy::Input),
        2 => Ok(SpillStrategy::Evict),
        other => Err(BridgeError::Argument(format!("unknown spill strategy {other}"))),
    }
}

/// The engine operator a host names for a shuffle: Java's `EngineOp`,
/// read by field, so the two sides share one typed spec rather than a
/// tuple of ints in some order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOp {
    /// [`OP_NONE`], [`OP_SORT`], or an aggregate function code
    /// ([`agg_spec`]); Java's `EngineOp.function`.
    pub function: i32,
    /// An aggregate's value type code, else 0; Java's `EngineOp.valueType`.
    pub value_type: i32,
    /// An aggregation's map-side spilling strategy ([`spill_strategy`]'s
    /// codes); Java's `EngineOp.spill`.
    pub spill: i32,
}

impl HostOp {
    /// Reads a Java `EngineOp`; a null object is an argument error.
    pub fn read(env: &mut jni::JNIEnv<'_>, op: &jni::objects::JObject<'_>) -> BridgeResult<Self> {
        let [function, value_type, spill] =
            fields::ints(env, op, "EngineOp", ["function", "valueType", "spill"])?;
        Ok(HostOp { function, value_type, spill })
    }

    /// The operator of a reduce task: a sort or an aggregation (its
    /// map-side spilling strategy does not matter there); none is an
    /// argument error.
    pub fn reduce_spec(self) -> BridgeResult<StageSpec> {
        if self.function == OP_NONE {
            return Err(BridgeError::Argument("a reduce task needs an engine operator".into()));
        }
        stage_spec(self.function, self.value_type, SpillStrategy::State)
    }

    /// The map-side operator: an aggregation spills by its strategy (an
    /// unknown code is an argument error whatever the operator).
    pub fn stage_spec(self) -> BridgeResult<StageSpec> {
        stage_spec(self.function, self.value_type, spill_strategy(self.spill)?)
    }
}

/// The engine operator of a shuffle the host registers with codes
/// (`func`, `value`): [`OP_NONE`], [`OP_SORT`], or an aggregation spilling by
/// `spill`.
pub fn stage_spec(func: i32, value: i32, spill: SpillStrategy) -> BridgeResult<StageSpec> {
    host_op::stage_spec(func, value, spill).map_err(argument)
}

/// An engine's refusal of a host's codes, as the bridge's argument error.
fn argument(e: sluice_engine::EngineError) -> BridgeError {
    match e {
        sluice_engine::EngineError::Argument(s) => BridgeError::Argument(s),
        other => BridgeError::Engine(other),
    }
}
