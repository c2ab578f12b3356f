package dev.sluice.spark.suites;

/**
 * Apache Spark's {@code HostLocalShuffleReadingSuite} with Sluice as the shuffle manager. Its
 * tests build their {@code SparkConf} with defaults, so the manager comes from the JVM's {@code
 * spark.shuffle.manager} system property, which {@code spark/suites/run.sh} sets; the constructor
 * checks that it did.
 */
public class SluiceHostLocalShuffleReadingSuite
    extends org.apache.spark.shuffle.HostLocalShuffleReadingSuite {
  public SluiceHostLocalShuffleReadingSuite() {
    Exclusions.check("HostLocalShuffleReadingSuite", testNames());
    SuiteChecks.requireSystemManager();
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    if (Exclusions.skips("HostLocalShuffleReadingSuite", testName)) {
      return org.scalatest.SucceededStatus$.MODULE$;
    }
    return super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("HostLocalShuffleReadingSuite", false);
    }
  }
}
