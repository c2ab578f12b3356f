package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/** Apache Spark SQL's {@code AdaptiveQueryExecSuite} with Sluice as the shuffle manager. */
public class SluiceAdaptiveQueryExecSuite
    extends org.apache.spark.sql.execution.adaptive.AdaptiveQueryExecSuite {
  public SluiceAdaptiveQueryExecSuite() {
    Exclusions.check("AdaptiveQueryExecSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return super.sparkConf().set(SuiteChecks.MANAGER_KEY, SuiteChecks.SLUICE_MANAGER);
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    if (Exclusions.skips("AdaptiveQueryExecSuite", testName)) {
      return org.scalatest.SucceededStatus$.MODULE$;
    }
    return TimingRaces.run(
        "AdaptiveQueryExecSuite", testName, args, a -> super.runTest(testName, a));
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("AdaptiveQueryExecSuite", true);
    }
  }
}
