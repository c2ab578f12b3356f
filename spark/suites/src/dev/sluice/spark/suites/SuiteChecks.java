package dev.sluice.spark.suites;

/**
 * What every Sluice run of a Spark suite shares: the setting that switches Sluice on, and the
 * checks that it really ran (so a suite cannot pass on Spark's own shuffle by mistake).
 */
public final class SuiteChecks {
  public static final String MANAGER_KEY = "spark.shuffle.manager";
  public static final String SLUICE_MANAGER = "dev.sluice.spark.SluiceShuffleManager";

  private SuiteChecks() {}

  /**
   * Checks, after a suite, that Sluice really carried its shuffles in this JVM (some map outputs
   * written by Sluice, when the suite runs any in local mode) and that no native map attempt
   * outlived its task.
   */
  public static void checkAfterSuite(String suite, boolean localShuffles) {
    long outputs = dev.sluice.spark.SluiceMetrics.mapOutputs();
    if (localShuffles && outputs == 0) {
      throw new IllegalStateException(suite + " ran, but Sluice wrote no map output in this JVM");
    }
    long live = dev.sluice.spark.SluiceMetrics.liveMapAttempts();
    if (live != 0) {
      throw new IllegalStateException(suite + " left " + live + " native map attempts alive");
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
