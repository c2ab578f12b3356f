package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code SubquerySuite} with Sluice as the shuffle manager and its SQL rules on.
 */
public class SluiceSubquerySuite extends org.apache.spark.sql.SubquerySuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceSubquerySuite() {
    Exclusions.check("SubquerySuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("SubquerySuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("SubquerySuite", true);
      SuiteChecks.checkRulesFired("SubquerySuite", nativeNodesBefore);
    }
  }
}
