package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code ExchangeSuite} with Sluice as the shuffle manager and its SQL rules on.
 */
public class SluiceExchangeSuite extends org.apache.spark.sql.execution.ExchangeSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceExchangeSuite() {
    Exclusions.check("ExchangeSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("ExchangeSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("ExchangeSuite", true);
      SuiteChecks.checkRulesFired("ExchangeSuite", nativeNodesBefore);
    }
  }
}
