//! The small codes a host names a shuffle's engine operator by (Java's
//! `EngineOp`: a function code and a value-type code), turned into the
//! engine's [`StageSpec`]. Shared by the JNI bridge, which reads them from
//! the JVM, and the service daemon, which receives them in a read that
//! asks it to run the reduce side's operator (`ReadReduced`).

use sluice_core::reorg::aggregate::{AggFn, AggSpec, Lanes, SpillStrategy, ValueType};
use sluice_core::reorg::StageSpec;

use crate::error::{EngineError, EngineResult};

/// Function code of several aggregates over one record's values.
pub const FUNC_LANES: i32 = 5;

/// Operator code of a shuffle with no engine operator.
pub const OP_NONE: i32 = -1;

/// Operator code of a sorting shuffle (`sortByKey` with a natural key
/// order); codes 0 and up are aggregations ([`agg_spec`]), [`OP_NONE`] is
/// none.
pub const OP_SORT: i32 = -2;

/// The aggregation named by two small codes: `func` 0 sum, 1 count, 2 min,
/// 3 max, 4 exact sum (Spark SQL's ANSI `sum`: its result carries an
/// overflow flag), with `value` 0 i64, 1 i32, 2 f64; or [`FUNC_LANES`], a
/// Spark SQL aggregate of several functions, with `value` the lanes' code
/// ([`Lanes::from_code`]).
pub fn agg_spec(func: i32, value: i32) -> EngineResult<AggSpec> {
    let bad = |what: String| EngineError::Argument(what);
    if func == FUNC_LANES {
        let lanes = Lanes::from_code(value as u32)
            .ok_or_else(|| bad(format!("unknown aggregate lanes {value:#x}")))?;
        return Ok(AggSpec::new(AggFn::Lanes(lanes), ValueType::I64));
    }
    let f = match func {
        0 => AggFn::Sum,
        1 => AggFn::Count,
        2 => AggFn::Min,
        3 => AggFn::Max,
        4 => AggFn::SumExact,
        other => return Err(bad(format!("unknown aggregate function {other}"))),
    };
    let v = match value {
        0 => ValueType::I64,
        1 => ValueType::I32,
        2 => ValueType::F64,
        other => return Err(bad(format!("unknown value type {other}"))),
    };
    Ok(AggSpec::new(f, v))
}

/// The engine operator of codes (`func`, `value`): [`OP_NONE`],
/// [`OP_SORT`], or an aggregation whose map side spills by `spill`.
pub fn stage_spec(func: i32, value: i32, spill: SpillStrategy) -> EngineResult<StageSpec> {
    match func {
        OP_NONE => Ok(StageSpec::None),
        OP_SORT => Ok(StageSpec::Sort),
        _ => Ok(StageSpec::Aggregate(agg_spec(func, value)?, spill)),
    }
}

/// The operator a reduce side runs for codes (`func`, `value`): a sort or
/// an aggregation (its map-side spilling does not matter there); none is
/// an argument error.
pub fn reduce_spec(func: i32, value: i32) -> EngineResult<StageSpec> {
    if func == OP_NONE {
        return Err(EngineError::Argument("a reduce side needs an engine operator".into()));
    }
    stage_spec(func, value, SpillStrategy::State)
}
