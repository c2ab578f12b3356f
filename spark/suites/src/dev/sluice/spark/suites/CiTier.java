package dev.sluice.spark.suites;

import java.util.List;

/**
 * What CI's run of Spark's suites leaves to the extended tier ({@code bash spark/test.sh
 * --extended}, or {@code spark/suites/run.sh --extended}) for its 30 minutes on two cores: tests
 * that take 20 s or more under plain Spark as under Sluice, with nothing in them that a quicker
 * test of the same suite does not ask of Sluice. Unlike {@link Exclusions}, each of these
 * passes under Sluice; the extended tier runs them.
 */
public final class CiTier {
  /**
   * One test CI leaves out: its suite, its exact name, its time, why it adds nothing, and the first
   * Spark line whose suite has the test ({@link SuiteLines}).
   */
  public record Slow(
      String suite, String test, String timeUnderPlainSpark, String why, String since) {
    /** A slow test that every line Sluice builds for has. */
    public Slow(String suite, String test, String timeUnderPlainSpark, String why) {
      this(suite, test, timeUnderPlainSpark, why, SuiteLines.OLDEST);
    }
  }

  public static final List<Slow> SLOW =
      List.of(
          new Slow(
              "DataFrameAggregateSuite",
              "SPARK-47430 Support GROUP BY MapType",
              "90 s alone (95 s with Sluice)",
              "its time is Spark's interpreted map comparisons; the engine takes no map key, so"
                  + " its aggregates are Spark's, over a shuffle the suite's other grouping tests"
                  + " already carry",
              "4.0"),
          new Slow(
              "DataFrameAggregateSuite",
              "aggregating with various distinct expressions",
              "34 s alone (38 s with Sluice)",
              "DISTINCT aggregates stay Spark's (the engine computes none), and the suite's"
                  + " quicker distinct tests (SPARK-17616, SPARK-32344, SPARK-43876) plan the same"
                  + " expand-and-aggregate shapes over Sluice's shuffle"),
          new Slow(
              "DataFrameWindowFunctionsSuite",
              "SPARK-37099: Insert window group limit node for top-k computation",
              "57 s alone (62 s with Sluice)",
              "the same window and limit shapes over ever larger inputs; SQLQueryTestSuite's"
                  + " window.sql runs the group-limit settings on both sides"),
          new Slow(
              "AdaptiveQueryExecSuite",
              "SPARK-29544: adaptive skew join with different join types",
              "30 s alone (18 s with Sluice beside pytest)",
              "its skewed partitions are read in map ranges as in the suite's quicker skew tests"
                  + " (SPARK-30524, SPARK-35725, SPARK-37063, SPARK-37328, SPARK-37652); the join"
                  + " types it adds are Spark's operators over the same reads"),
          new Slow(
              "AdaptiveQueryExecSuite",
              "SPARK-33832: Support optimize skew join even if introduce extra shuffle",
              "20 s alone (20 s with Sluice beside pytest)",
              "the extra shuffle it allows is planned by Spark; its skewed reads are those of the"
                  + " suite's quicker skew tests (SPARK-37328: a skew join over three tables)"));

  /**
   * A {@code SQLQueryTestSuite} setting whose configurations CI leaves out: it chooses between two
   * broadcast joins for {@code NOT IN} (neither shuffles), and each file that names it runs the
   * same queries under Spark's default in another configuration.
   */
  static final String BROADCAST_ONLY_KEY = "spark.sql.optimizeNullAwareAntiJoin";

  /**
   * The system property of the extended tier: the tests {@link #SLOW} names, and in {@code
   * SluiceSQLQueryTestSuite} its extended files and every codegen configuration.
   */
  static final String EXTENDED_PROPERTY = "sluice.suites.extended";

  private CiTier() {}

  /** Whether this run is CI's (not the extended tier). */
  static boolean ci() {
    return !Boolean.getBoolean(EXTENDED_PROPERTY);
  }

  /** Whether CI leaves {@code test} of {@code suite} out; if so, prints that and why. */
  static boolean skips(String suite, String test) {
    if (!ci()) {
      return false;
    }
    for (Slow s : SLOW) {
      if (s.suite().equals(suite) && s.test().equals(test)) {
        System.out.println(
            "- " + test + " LEFT TO THE EXTENDED TIER (" + s.timeUnderPlainSpark() + "; " + s.why()
                + ")");
        return true;
      }
    }
    return false;
  }
}
