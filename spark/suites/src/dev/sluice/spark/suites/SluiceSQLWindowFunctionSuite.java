package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code SQLWindowFunctionSuite} with Sluice as the shuffle manager and its SQL
 * rules on.
 */
public class SluiceSQLWindowFunctionSuite extends org.apache.spark.sql.execution.SQLWindowFunctionSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceSQLWindowFunctionSuite() {
    Exclusions.check("SQLWindowFunctionSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("SQLWindowFunctionSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("SQLWindowFunctionSuite", true);
      SuiteChecks.checkRulesFired("SQLWindowFunctionSuite", nativeNodesBefore);
    }
  }
}
