package dev.sluice.spark.shim;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ColumnarRule;
import scala.collection.immutable.Seq;

/**
 * What Sluice reads from a Spark session, Spark 3.5's side: the session holds its state itself
 * (on 4.x, {@code org.apache.spark.sql.classic.SparkSession} does).
 */
public final class Sessions {
  private Sessions() {}

  /** The session's columnar rules, as adaptive execution applies them to a stage's plan. */
  public static Seq<ColumnarRule> columnarRules(SparkSession session) {
    return Scala.seq(session.sessionState().columnarRules());
  }
}
