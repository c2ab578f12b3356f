package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import dev.sluice.spark.shuffle.SparkLine;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.SparkPlan;
import scala.runtime.BoxedUnit;

/**
 * Sluice's Spark SQL rules, found by Spark through {@code
 * META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider} in the jar: a session
 * built with the jar on its class path installs them without a setting. They change a plan only
 * when the shuffle manager is Sluice: {@link NativeSortRule} (ORDER BY), {@link
 * NativeAggregateRule} (aggregates), {@link RoundRobinRule} (round-robin repartitions without
 * Spark's defensive sort where their input is determinate), and adaptive execution's coalescing
 * of joins over a native aggregate ({@link JoinCoalesce}); adaptive execution counts the shuffles
 * of Sluice's nodes ({@link SluiceCostEvaluator}); a query's last repartition to a given count
 * marks the nodes whose count it fixes ({@link FixedPartitions}); each query's logical nodes are
 * numbered as it is planned, so that only one query's native nodes share a shuffle ({@link
 * QueryToken}).
 *
 * <p>On a Spark line the jar is not built for ({@link SparkLine}) it installs nothing: the rules
 * name Spark's plan classes by their signatures on the jar's line (Scala 2.12's collections on
 * 3.5, 2.13's from 4.0 on), which another line does not have.
 */
public final class SluiceSqlExtensions implements SparkSessionExtensionsProvider {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    if (SparkLine.mismatchReason() != null) {
      return BoxedUnit.UNIT;
    }
    List<Rule<SparkPlan>> rules =
        List.of(new NativeSortRule(), new NativeAggregateRule(), new RoundRobinRule());
    for (Rule<SparkPlan> rule : rules) {
      extensions.injectColumnar(session -> new Columnar(rule));
      extensions.injectQueryStagePrepRule(session -> rule);
    }
    extensions.injectPlannerStrategy(session -> new QueryToken());
    extensions.injectQueryStageOptimizerRule(session -> new JoinCoalesce(session));
    extensions.injectOptimizerRule(session -> new FixedPartitions());
    countNativeShuffles();
    return BoxedUnit.UNIT;
  }

  /**
   * Names {@link SluiceCostEvaluator} as adaptive execution's cost evaluator in the application's
   * settings, unless the application named one, when the shuffle manager is Sluice's. Extensions
   * are applied before the session's state reads those settings.
   */
  private static void countNativeShuffles() {
    SparkEnv env = SparkEnv.get();
    if (env != null && env.shuffleManager() instanceof SluiceShuffleManager) {
      env.conf().setIfMissing(SluiceCostEvaluator.SETTING, SluiceCostEvaluator.class.getName());
    }
  }

  /** The rule among the non-adaptive physical preparations (before columnar transitions). */
  private static final class Columnar extends ColumnarRule {
    private final Rule<SparkPlan> rule;

    Columnar(Rule<SparkPlan> rule) {
      this.rule = rule;
    }

    @Override
    public Rule<SparkPlan> preColumnarTransitions() {
      return rule;
    }
  }
}
