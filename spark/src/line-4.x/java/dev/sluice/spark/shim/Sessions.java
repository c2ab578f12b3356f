package dev.sluice.spark.shim;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ColumnarRule;
import scala.collection.immutable.Seq;

/**
 * What Sluice reads from a Spark session, the 4.x side: the session state lives on Spark Connect's
 * counterpart, {@code org.apache.spark.sql.classic.SparkSession} (Spark 3.5's session has it
 * itself).
 */
public final class Sessions {
  private Sessions() {}

  /** The session's columnar rules, as adaptive execution applies them to a stage's plan. */
  public static Seq<ColumnarRule> columnarRules(SparkSession session) {
    return ((org.apache.spark.sql.classic.SparkSession) session).sessionState().columnarRules();
  }
}
