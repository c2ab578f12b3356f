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

use sluice_core::reorg::aggregate::{AggFn, AggSpec, Lanes, SpillStrategy, ValueType};
use sluice_core::reorg::StageSpec;

use crate::error::{BridgeError, BridgeResult};
use crate::fields;

/// The aggregation a JVM names by two small codes: `func` 0 sum, 1 count,
/// 2 min, 3 max, 4 exact sum (Spark SQL's ANSI `sum`: its result carries an
/// overflow flag), with `value` 0 i64, 1 i32, 2 f64; or [`FUNC_LANES`], a
/// Spark SQL aggregate of several functions, with `value` the lanes' code
/// ([`Lanes::from_code`]).
pub fn agg_spec(func: i32, value: i32) -> BridgeResult<AggSpec> {
    if func == FUNC_LANES {
        let lanes = Lanes::from_code(value as u32)
            .ok_or_else(|| BridgeError::Argument(format!("unknown aggregate lanes {value:#x}")))?;
        return Ok(AggSpec::new(AggFn::Lanes(lanes), ValueType::I64));
    }
    let f = match func {
        0 => AggFn::Sum,
        1 => AggFn::Count,
        2 => AggFn::Min,
        3 => AggFn::Max,
        4 => AggFn::SumExact,
        other => return Err(BridgeError::Argument(format!("unknown aggregate function {other}"))),
    };
    let v = match value {
        0 => ValueType::I64,
        1 => ValueType::I32,
        2 => ValueType::F64,
        other => return Err(BridgeError::Argument(format!("unknown value type {other}"))),
    };
    Ok(AggSpec::new(f, v))
}

/// Function code of several aggregates over one record's values.
pub const FUNC_LANES: i32 = 5;

/// Operator code of a shuffle with no engine operator.
pub const OP_NONE: i32 = -1;

/// Operator code of a sorting shuffle (`sortByKey` with a natural key
/// order); codes 0 and up are aggregations ([`agg_spec`]), [`OP_NONE`] is
/// none.
pub const OP_SORT: i32 = -2;

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
    match func {
        OP_NONE => Ok(StageSpec::None),
        OP_SORT => Ok(StageSpec::Sort),
        _ => Ok(StageSpec::Aggregate(agg_spec(func, value)?, spill)),
    }
}
