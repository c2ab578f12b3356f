package dev.sluice.spark.shim;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * A native node's shuffle under its query's shuffle cleanup mode, Spark 3.5's side: 3.5 has no
 * such mode (4.0 added it), so a query's shuffles are removed by the context cleaner only, as
 * Spark's own.
 */
public final class ShuffleCleanup {
  private ShuffleCleanup() {}

  /** Nothing to do on 3.5: returns null (no work for the execution's end). */
  public static Runnable register(
      SparkContext sc, SparkPlan node, long executionId, int shuffleId) {
    return null;
  }
}
