package dev.sluice.spark.jni;

import dev.sluice.spark.api.Agg;

/**
 * The engine operator of a Sluice shuffle as it crosses JNI ({@link SluiceNative#registerShuffle},
 * {@link SluiceNative#reduceOpen}): one typed object the native side reads by field ({@code
 * sluice_jni::ops::HostOp::read}), not a tuple of ints. Made only here: none, a sort, or an
 * offloaded aggregation with its map side's spilling strategy ({@link #aggregate}).
 */
public final class EngineOp {
  /** The native function code of a plain shuffle ({@code sluice_engine::host_op::OP_NONE}). */
  static final int OP_NONE = -1;
  /** The native function code of a sorting shuffle ({@code sluice_engine::host_op::OP_SORT}). */
  static final int OP_SORT = -2;

  /** A plain shuffle: partitioning only. */
  public static final EngineOp NONE = new EngineOp(OP_NONE, 0, SpillStrategy.STATE);
  /** A sorting shuffle: sorted runs on the map side, a native merge on the reduce side. */
  public static final EngineOp SORT = new EngineOp(OP_SORT, 0, SpillStrategy.STATE);

  /**
   * {@link #OP_NONE}, {@link #OP_SORT}, or an aggregate function ({@link Agg#code}); read natively.
   */
  final int function;
  /** An aggregate's engine value type, else 0; read natively. */
  final int valueType;
  /**
   * An aggregation's map-side spilling strategy ({@link SpillStrategy#code}; a reduce task's
   * operator ignores it), else {@link SpillStrategy#STATE}'s; read natively.
   */
  final int spill;

  private EngineOp(int function, int valueType, SpillStrategy spill) {
    this.function = function;
    this.valueType = valueType;
    this.spill = spill.code;
  }

  /** Whether this is an aggregation (codes 0 and up), not a sort or none. */
  public boolean aggregates() {
    return function >= 0;
  }

  /**
   * The engine operator of an offloaded aggregation (its function code and engine value type) whose
   * map side spills by {@code spill}.
   */
  public static EngineOp aggregate(int function, int valueType, SpillStrategy spill) {
    return new EngineOp(function, valueType, spill);
  }
}
