package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import dev.sluice.spark.api.SluiceSetting;
import org.apache.spark.sql.catalyst.plans.physical.RoundRobinPartitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.REPARTITION_BY_NUM$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;

/**
 * Plans the round-robin exchange of a {@code repartition(n)} as {@link RoundRobinExchangeExec},
 * which skips Spark's local sort before dealing the rows when every attempt reads its input in
 * the same order. Only the user's own partition count ({@code REPARTITION_BY_NUM}): a rebalance
 * is left to adaptive execution, which splits and coalesces its stages. Inert when Spark would
 * not sort anyway ({@code spark.sql.execution.sortBeforeRepartition=false}, one partition);
 * {@code spark.sluice.sqlRepartitionWithoutSort=false} turns it off.
 */
public final class RoundRobinRule extends SluiceRule {
  @Override
  SluiceSetting setting() {
    return SluiceSetting.SQL_REPARTITION_WITHOUT_SORT;
  }

  @Override
  SparkPlan replace(SparkPlan node, boolean pinned) {
    if (node instanceof ShuffleExchangeExec e
        && e.shuffleOrigin() == REPARTITION_BY_NUM$.MODULE$
        && e.outputPartitioning() instanceof RoundRobinPartitioning rr
        && rr.numPartitions() > 1
        && rr.numPartitions() <= SluiceShuffleManager.PARTITIONS_MAX
        && conf().sortBeforeRepartition()) {
      return new RoundRobinExchangeExec(rr.numPartitions(), e.child());
    }
    return node;
  }
}
