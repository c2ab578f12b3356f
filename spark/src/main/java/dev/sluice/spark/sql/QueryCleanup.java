package dev.sluice.spark.sql;

import dev.sluice.spark.shim.ShuffleCleanup;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlan;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A native node's shuffle handed to its query's shuffle cleanup mode ({@link ShuffleCleanup} says
 * how each Spark line applies it): nodes call {@link #track} as they make a shuffle.
 */
final class QueryCleanup {
  private static final Logger LOG = LoggerFactory.getLogger(QueryCleanup.class);

  private QueryCleanup() {}

  /**
   * Hands {@code shuffleId}, made by {@code node} in the current SQL execution, to its query. Best
   * effort: a failure here is logged and leaves the shuffle to the context cleaner, never fails
   * the query.
   */
  static void track(SparkPlan node, int shuffleId) {
    try {
      SparkContext sc = node.sparkContext();
      String id = sc.getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
      if (id == null) {
        return;
      }
      // Null for an execution that ended: register finds no query for it.
      Runnable atEnd = ShuffleCleanup.register(sc, node, Long.parseLong(id), shuffleId);
      if (atEnd != null) {
        ExecutionEnds.at(
            sc,
            id,
            () -> {
              if (!sc.isStopped()) {
                atEnd.run();
              }
            });
      }
    } catch (Exception e) { // Scala code may throw a checked exception undeclared
      LOG.warn("Sluice: shuffle {} left to the context cleaner", shuffleId, e);
    }
  }
}
