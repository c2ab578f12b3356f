package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code DataFrameAggregateSuite} with Sluice as the shuffle manager and its SQL
 * rules on.
 */
public class SluiceDataFrameAggregateSuite extends org.apache.spark.sql.DataFrameAggregateSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceDataFrameAggregateSuite() {
    Exclusions.check("DataFrameAggregateSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("DataFrameAggregateSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("DataFrameAggregateSuite", true);
      SuiteChecks.checkRulesFired("DataFrameAggregateSuite", nativeNodesBefore);
    }
  }
}
