package dev.sluice.spark.ops;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.combine.FoldTable;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;

/**
 * The map task thread's first level of an offloaded operator over integers ({@link
 * Sluice#reduceByKey} with {@link OpSpec#firstLevel}): a {@link FoldTable} of the operator's
 * function, so that hot keys are folded before they cross into the engine, and many keys are
 * left to the engine once the table switches itself off. The engine merges the partial states
 * with single records because a count runs there as a sum of counts and a sum of ints as a sum
 * of longs ({@link OpSpec#engineValueType}). Doubles have no first level: the engine's min and
 * max order them totally (-0.0 below 0.0), Java's {@code Math.min} does not.
 */
public final class OpPreAggregator {
  private final FoldTable table;
  private boolean offCounted;

  OpPreAggregator(OpSpec op) {
    if (!op.firstLevel) {
      throw new IllegalArgumentException("no first level for " + op.agg + " over doubles");
    }
    table = new FoldTable(fold(op.agg), k -> k);
  }

  /** {@code agg} over a partial state and a value (a count's values are 1). */
  private static java.util.function.LongBinaryOperator fold(Agg agg) {
    switch (agg) {
      case MIN:
        return Math::min;
      case MAX:
        return Math::max;
      default:
        return Long::sum; // a sum (wrapping, as the engine's), or a count of counts
    }
  }

  /** Folds one record (an {@link OpSpec#engineValue}); false if it goes to the engine as it is. */
  boolean offer(Object key, long v) {
    if (table.absorb(key, v)) {
      return true;
    }
    if (table.off() && !offCounted) {
      offCounted = true;
      SluiceMetrics.OP_FIRST_LEVELS_OFF.incrementAndGet();
    }
    return false;
  }

  /** Writes every partial state to {@code out}. */
  void drain(FoldTable.Sink<IOException> out) throws IOException {
    table.drain(out);
  }
}
