package dev.sluice.spark.sql;

import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.CollectMetrics;
import org.apache.spark.sql.catalyst.plans.logical.DeserializeToObject;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.catalyst.plans.logical.Sort;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * The partition count a user's {@code repartition(n, keys)} at the end of a query fixes, kept for
 * Sluice's native nodes after Spark's planner drops the repartition.
 *
 * <p>When a query ends in a repartition by keys to {@code n} partitions (through projections,
 * filters, partition-local sorts, observed metrics and a deserialization to objects, as Spark's
 * adaptive execution looks for it: {@code AQEUtils.getRequiredDistribution}) and the plan
 * below already places those keys in {@code n} partitions (an aggregate by them at {@code n}
 * shuffle partitions), Spark's {@code EnsureRequirements} removes the repartition's exchange and
 * adaptive execution keeps that count in the final stage (its {@code requiredDistribution}). The
 * native aggregate that then ends the query would read its shuffle in coalesced ranges, and the
 * query would give fewer partitions than asked for (and other {@code spark_partition_id()}
 * values). This optimizer rule marks the logical nodes below such a repartition, down to and
 * including the first aggregate; {@link SluiceRule} pins a physical node of the final stage (above
 * every exchange) whose logical link is marked ({@link #fixed}). A node below an exchange is not:
 * where Spark keeps the repartition's exchange (another count, other keys), or below the
 * aggregate's own exchange, the mark fixes nothing.
 */
final class FixedPartitions extends Rule<LogicalPlan> {
  /** The mark on a logical node below a repartition that fixes its partition count. */
  static final TreeNodeTag<Object> TAG = new TreeNodeTag<>("sluice.fixedPartitionCount");

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    LogicalPlan p = plan;
    while (true) {
      if (p instanceof RepartitionByExpression r && r.optNumPartitions().isDefined()) {
        mark(r.child());
        return plan;
      }
      if (p instanceof Project
          || p instanceof Filter
          || (p instanceof Sort s && !s.global())
          || p instanceof CollectMetrics
          || p instanceof DeserializeToObject) {
        p = p.children().head();
      } else {
        return plan;
      }
    }
  }

  /** Marks {@code p} and the single-child nodes below it, down to the first aggregate. */
  private static void mark(LogicalPlan p) {
    while (true) {
      p.setTagValue(TAG, Boolean.TRUE);
      if (p instanceof Aggregate || p.children().size() != 1) {
        return;
      }
      p = p.children().head();
    }
  }

  /** Whether {@code node} was planned from a logical node {@link #apply} marked. */
  static boolean fixed(SparkPlan node) {
    return node.logicalLink().isDefined() && node.logicalLink().get().getTagValue(TAG).isDefined();
  }
}
