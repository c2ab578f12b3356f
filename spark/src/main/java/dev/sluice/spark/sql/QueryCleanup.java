package dev.sluice.spark.sql;

import dev.sluice.spark.shim.ShuffleCleanup;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * A native node's shuffle handed to its query's shuffle cleanup mode ({@link ShuffleCleanup} says
 * how each Spark line applies it): nodes call {@link #track} as they make a shuffle.
 */
final class QueryCleanup {
  private QueryCleanup() {}

  /** Hands {@code shuffleId}, made by {@code node} in the current SQL execution, to its query. */
  static void track(SparkPlan node, int shuffleId) {
    SparkContext sc = node.sparkContext();
    String id = sc.getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
    if (id == null) {
      return;
    }
    Runnable atEnd = ShuffleCleanup.register(sc, node, Long.parseLong(id), shuffleId);
    if (atEnd != null) {
      ExecutionEnds.at(sc, id, atEnd);
    }
  }
}
