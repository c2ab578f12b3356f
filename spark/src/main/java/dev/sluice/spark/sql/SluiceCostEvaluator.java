package dev.sluice.spark.sql;

import dev.sluice.spark.shim.LineShim;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.Cost;
import org.apache.spark.sql.execution.adaptive.CostEvaluator;
import org.apache.spark.sql.internal.SQLConf;

/**
 * Adaptive execution's cost of a plan with Sluice's native nodes: Spark's own measure (the
 * shuffle exchanges not yet run, {@code SimpleCostEvaluator}) plus one shuffle for each of
 * Sluice's nodes that holds one ({@link SluiceSortExchangeExec}, {@link SluiceAggregateExec},
 * {@link RoundRobinExchangeExec}).
 *
 * <p>Adaptive execution re-plans the rest of a query after each stage and adopts the new plan when
 * it costs less, or as much but differs. Spark's measure counts only {@code
 * ShuffleExchangeLike} nodes, and Sluice's nodes are not (adaptive execution does not split them
 * into stages), so a re-planned query whose new shuffle Sluice's rules took in looked free: a
 * {@code ORDER BY ... LIMIT 100} over an aggregate of five groups, whose limit adaptive execution
 * drops once it knows the row count, became a 200-partition range shuffle in Sluice's sorted
 * exchange where Spark keeps its one-task {@code TakeOrderedAndProject} (TPC-DS q41, q43, q45,
 * q66). Counted as Spark counts its own exchanges, Sluice's plans win or lose adaptive
 * execution's comparisons as Spark's would.
 *
 * <p>{@link SluiceSqlExtensions} names this class in {@code
 * spark.sql.adaptive.customCostEvaluatorClass} when the application has not named one.
 */
public final class SluiceCostEvaluator implements CostEvaluator {
  /** The setting of adaptive execution that names a cost evaluator class. */
  public static final String SETTING = "spark.sql.adaptive.customCostEvaluatorClass";

  private static final String FORCE_SKEW_JOIN = "spark.sql.adaptive.forceOptimizeSkewedJoin";

  @Override
  public Cost evaluateCost(SparkPlan plan) {
    boolean force = Boolean.parseBoolean(SQLConf.get().getConfString(FORCE_SKEW_JOIN, "false"));
    return LineShim.costWithShuffles(plan, force, nativeShuffles(plan));
  }

  /** Sluice's nodes in {@code plan} that shuffle, outside query stages already planned. */
  static long nativeShuffles(SparkPlan plan) {
    long n =
        plan instanceof SluiceSortExchangeExec
                || plan instanceof SluiceAggregateExec
                || plan instanceof RoundRobinExchangeExec
            ? 1
            : 0;
    scala.collection.Iterator<SparkPlan> children = plan.children().iterator();
    while (children.hasNext()) {
      n += nativeShuffles(children.next());
    }
    return n;
  }
}
