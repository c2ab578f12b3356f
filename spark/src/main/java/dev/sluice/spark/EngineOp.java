package dev.sluice.spark;

/**
 * The engine operator of a Sluice shuffle as it crosses JNI ({@link SluiceNative#registerShuffle},
 * {@link SluiceNative#reduceOpen}): one typed object the native side reads by field ({@code
 * sluice_jni::ops::HostOp::read}), not a tuple of ints. Made only here: none, a sort, or an
 * offloaded aggregation ({@link #aggregate}).
 */
final class EngineOp {
  /** The native side's function code of a plain shuffle ({@code sluice_jni::ops::OP_NONE}). */
  static final int OP_NONE = -1;
  /** The native side's function code of a sorting shuffle ({@code sluice_jni::ops::OP_SORT}). */
  static final int OP_SORT = -2;

  /** A plain shuffle: partitioning only. */
  static final EngineOp NONE = new EngineOp(OP_NONE, 0);
  /** A sorting shuffle: sorted runs on the map side, a native merge on the reduce side. */
  static final EngineOp SORT = new EngineOp(OP_SORT, 0);

  /** {@link #OP_NONE}, {@link #OP_SORT}, or an aggregate function ({@link Agg#code}); read natively. */
  final int function;
  /** An aggregate's engine value type ({@link OpSpec#engineValueType}), else 0; read natively. */
  final int valueType;

  private EngineOp(int function, int valueType) {
    this.function = function;
    this.valueType = valueType;
  }

  /** The engine operator of an offloaded aggregation. */
  static EngineOp aggregate(OpSpec op) {
    return new EngineOp(op.code(), op.engineValueType());
  }
}
