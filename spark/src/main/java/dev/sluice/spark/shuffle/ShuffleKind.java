package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.SpillStrategy;
import dev.sluice.spark.sort.SortKind;
import java.io.Serializable;

/**
 * What a Sluice shuffle computes, chosen once on the driver when the shuffle registers and carried
 * in its handle: it decides the map task's writer, the reduce task's reader and the operator the
 * engine registers the shuffle with ({@link #engineOp}).
 *
 * <ul>
 *   <li>{@link Plain}: partitioning only; Spark's serialized records (or Spark SQL rows) come out
 *       as they went in, read by Spark's fetch path or the row reader.
 *   <li>{@link Ordered}: the engine orders the records by key: a native sort ({@code sortByKey},
 *       a Spark SQL {@code ORDER BY}) or runs grouped by key hash for Spark's own combiner; read
 *       through the native reduce operator.
 *   <li>{@link Operator}: an offloaded operator the engine computes on both sides ({@code
 *       Sluice.reduceByKey}, Spark SQL aggregates), with its map side's spilling strategy.
 * </ul>
 */
public sealed interface ShuffleKind extends Serializable {
  /** The engine operator the shuffle registers and reduces with. */
  EngineOp engineOp();

  /** Whether the reduce side reads through the engine's native reduce operator. */
  default boolean nativeReduce() {
    return !(this instanceof Plain);
  }

  /** Partitioning only. */
  record Plain() implements ShuffleKind {
    @Override
    public EngineOp engineOp() {
      return EngineOp.NONE;
    }
  }

  /** Records the engine orders by key ({@code sort} is never {@link SortKind#NONE}). */
  record Ordered(SortKind sort) implements ShuffleKind {
    public Ordered {
      if (sort == SortKind.NONE) {
        throw new IllegalArgumentException("an ordered shuffle needs a sort kind, not NONE");
      }
    }

    @Override
    public EngineOp engineOp() {
      return EngineOp.SORT;
    }
  }

  /** An offloaded operator, whose map side spills by {@code spill}. */
  record Operator(EngineOperator op, SpillStrategy spill) implements ShuffleKind {
    @Override
    public EngineOp engineOp() {
      return EngineOp.aggregate(op.function(), op.engineValueType(), spill);
    }
  }

  /**
   * What the engine needs of an offloaded operator (implemented by {@code ops.OpSpec}, which the
   * operator's writer and reader read in full).
   */
  interface EngineOperator extends Serializable {
    /** The engine's function code ({@code Agg.code}, or the lanes' code). */
    int function();

    /** The engine value type of the operator's values. */
    int engineValueType();
  }
}
