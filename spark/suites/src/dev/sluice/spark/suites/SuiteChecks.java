package dev.sluice.spark.suites;

/**
 * What every Sluice run of a Spark suite shares: the setting that switches Sluice on, and the
 * checks that it really ran (so a suite cannot pass on Spark's own shuffle by mistake).
 */
public final class SuiteChecks {
  public static final String MANAGER_KEY = "spark.shuffle.manager";
  public static final String SLUICE_MANAGER = "dev.sluice.spark.SluiceShuffleManager";

  /**
   * Sluice's SQL rules, named in {@code spark.sql.extensions}: Spark SQL's suites build their
   * session as a {@code TestSparkSession} over a context, which applies the extensions that
   * setting names but not those a jar declares to Java's service loader (only {@code
   * SparkSession.builder()} loads those), so without it the rules would not be in the suites'
   * plans.
   */
  public static final String EXTENSIONS_KEY = "spark.sql.extensions";

  public static final String SLUICE_EXTENSIONS = "dev.sluice.spark.sql.SluiceSqlExtensions";

  /** Sluice's setting of which aggregates its rule takes ({@code SluiceSetting.SQL_AGGREGATE}). */
  public static final String SQL_AGGREGATE_KEY = "spark.sluice.sqlAggregate";

  /**
   * {@code conf} with Sluice as the shuffle manager and its SQL rules in the session, the aggregate
   * rule taking every aggregate the engine computes ({@code true}), not only those its default
   * ({@code auto}) finds faster: the suites test every native shape a user can switch on.
   */
  public static org.apache.spark.SparkConf sluiceSql(org.apache.spark.SparkConf conf) {
    return conf.set(MANAGER_KEY, SLUICE_MANAGER)
        .set(EXTENSIONS_KEY, SLUICE_EXTENSIONS)
        .set(SQL_AGGREGATE_KEY, "true");
  }

  private SuiteChecks() {}

  /**
   * Checks, after a suite, that Sluice really carried its shuffles in this JVM (some map outputs
   * written by Sluice, when the suite runs any in local mode) and that no native map attempt
   * outlived its task.
   */
  public static void checkAfterSuite(String suite, boolean localShuffles) {
    long outputs = dev.sluice.spark.metrics.SluiceMetrics.mapOutputs();
    if (localShuffles && outputs == 0) {
      throw new IllegalStateException(suite + " ran, but Sluice wrote no map output in this JVM");
    }
    long live = dev.sluice.spark.metrics.SluiceMetrics.liveMapAttempts();
    if (live != 0) {
      throw new IllegalStateException(suite + " left " + live + " native map attempts alive");
    }
  }

  /**
   * Checks, after one of Spark SQL's suites, that Sluice's SQL rules put native nodes in some of
   * its plans (so the suite tested the rules, not only the shuffle manager under Spark's plans).
   */
  public static void checkRulesFired(String suite, long nativeNodesBefore) {
    if (dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes() <= nativeNodesBefore) {
      throw new IllegalStateException(suite + " ran, but Sluice's SQL rules planned no native node");
    }
  }

  /**
   * Checks, after one of Spark SQL's suites whose plans hold no shape the rules take (so {@link
   * #checkRulesFired} cannot apply), that Sluice's SQL row path wrote some of the suite's rows
   * without the serializer.
   */
  public static void checkRowPath(String suite, long rowsDirectBefore) {
    if (dev.sluice.spark.metrics.SluiceMetrics.sqlRowsDirect() <= rowsDirectBefore) {
      throw new IllegalStateException(suite + " ran, but Sluice's SQL row path wrote no row");
    }
  }

  /**
   * Checks, after the last suite of a group run unwrapped in a JVM of its own ({@code run.sh
   * GraphX}, {@code MLlib}), that the JVM's Spark defaults selected Sluice, that Sluice wrote the
   * group's map outputs and, where {@code rulesPlanned}, that its SQL rules planned native nodes;
   * it prints both counts.
   */
  public static void checkUnwrappedGroup(String group, boolean rulesPlanned) {
    requireSystemManager();
    System.out.println(
        "Sluice: "
            + group
            + " wrote "
            + dev.sluice.spark.metrics.SluiceMetrics.mapOutputs()
            + " map outputs through Sluice; its SQL rules planned "
            + dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes()
            + " native nodes");
    checkAfterSuite(group, true);
    if (rulesPlanned) {
      checkRulesFired(group, 0);
    }
  }

  /** Fails unless this JVM's Spark defaults select Sluice. */
  public static void requireSystemManager() {
    String set = System.getProperty(MANAGER_KEY);
    if (!SLUICE_MANAGER.equals(set)) {
      throw new IllegalStateException(
          MANAGER_KEY + " system property is " + set + ", expected " + SLUICE_MANAGER);
    }
  }
}
