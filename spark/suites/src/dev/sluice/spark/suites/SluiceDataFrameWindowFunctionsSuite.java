package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code DataFrameWindowFunctionsSuite} with Sluice as the shuffle manager and
 * its SQL rules on.
 */
public class SluiceDataFrameWindowFunctionsSuite extends org.apache.spark.sql.DataFrameWindowFunctionsSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceDataFrameWindowFunctionsSuite() {
    Exclusions.check("DataFrameWindowFunctionsSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("DataFrameWindowFunctionsSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("DataFrameWindowFunctionsSuite", true);
      SuiteChecks.checkRulesFired("DataFrameWindowFunctionsSuite", nativeNodesBefore);
    }
  }
}
