package dev.sluice.spark.sql;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.ExpandExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.aggregate.HashAggregateExec;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;

/**
 * Whether an aggregate runs faster in the engine than in Spark's generated code: the decision of
 * {@code spark.sluice.sqlAggregate=auto}, made at planning time from the aggregate's types.
 *
 * <p>Spark's partial {@code HashAggregateExec} is compiled into the map stage's generated code: a
 * row's key is hashed and its buffer updated in place without the row ever being copied, so a
 * count, a sum of integers or a sum of a decimal whose buffer fits a long (at most {@link
 * Decimal#MAX_LONG_DIGITS} digits: {@code sum} of a {@code decimal(p, s)} has {@code p + 10}) costs
 * a few instructions per row. The engine's map side first copies each row's key and values out of
 * the generated code into its buffers; that copy alone costs more than Spark's whole update, so
 * such aggregates stay Spark's. A buffer of more than 18 digits is different: Spark adds every row
 * into it as a {@code java.math.BigDecimal}, allocating, where the engine adds 128-bit integers in
 * its lanes; there the engine wins by up to 2.5x while the task thread's first level holds the
 * groups (up to 2,048) and runs level with Spark or ahead with more ({@code docs/benchmarks.md},
 * "A native aggregate of many groups").
 *
 * <p>The measurements behind this (20 M rows from {@code range}, 16 and 200 partitions, one
 * session switching the setting between runs; {@code docs/benchmarks.md}, "Which aggregates pay in
 * the engine"): counts and sums of longs and ints, of {@code decimal(7, 2)} (TPC-DS's money) and
 * averages of ints ran at 0.38x-0.98x of Spark by 100 to 1 M long, short-string or 40-character
 * keys; sums and averages of {@code decimal(15, 2)} (TPC-H's money) at 1.3x-2.2x by 100 to 400
 * keys. With thousands of groups and more those lose too (0.44x-0.89x), but the number of groups
 * is not in a plan's statistics unless the tables were analysed, so it is not tested here: {@code
 * false} hands those back by hand.
 *
 * <p>One shape is known to have many groups: an aggregate over an {@code ExpandExec} ({@code
 * ROLLUP}, {@code CUBE}, {@code GROUPING SETS}, several distinct aggregates). The expand repeats
 * each row once per grouping set, and its finest set holds about as many groups as there are
 * rows; TPC-DS q67 (a sum of 28 digits by a rollup of eight columns) ran at 0.77x-0.85x in the
 * engine. Such aggregates stay Spark's.
 */
final class AggregateCost {
  /** Why an aggregate {@link #paysNatively} refuses stays Spark's, for the planner's debug log. */
  static final String WHY_SPARK =
      "every buffer is compact or the input is an expand: Spark's generated code is faster";

  private AggregateCost() {}

  /**
   * Whether {@code partial}'s functions keep a decimal buffer wider than a long in Spark and its
   * input is not an {@code ExpandExec} (the class comment says why these decide).
   */
  static boolean paysNatively(HashAggregateExec partial) {
    SparkPlan in = partial.child();
    while (in instanceof ProjectExec || in instanceof FilterExec) {
      in = in.children().apply(0);
    }
    if (in instanceof ExpandExec) {
      return false;
    }
    return partial
        .aggregateExpressions()
        .exists(
            e ->
                e.aggregateFunction()
                    .aggBufferAttributes()
                    .exists(AggregateCost::wideDecimal));
  }

  private static boolean wideDecimal(Attribute a) {
    return a.dataType() instanceof DecimalType d && d.precision() > Decimal.MAX_LONG_DIGITS();
  }
}
