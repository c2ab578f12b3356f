package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code DataFrameSetOperationsSuite} with Sluice as the shuffle manager and its
 * SQL rules on.
 */
public class SluiceDataFrameSetOperationsSuite extends org.apache.spark.sql.DataFrameSetOperationsSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceDataFrameSetOperationsSuite() {
    Exclusions.check("DataFrameSetOperationsSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("DataFrameSetOperationsSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("DataFrameSetOperationsSuite", true);
      SuiteChecks.checkRulesFired("DataFrameSetOperationsSuite", nativeNodesBefore);
    }
  }
}
