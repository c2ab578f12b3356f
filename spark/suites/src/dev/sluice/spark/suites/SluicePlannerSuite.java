package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code PlannerSuite} with Sluice as the shuffle manager and its SQL rules on.
 */
public class SluicePlannerSuite extends org.apache.spark.sql.execution.PlannerSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluicePlannerSuite() {
    Exclusions.check("PlannerSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("PlannerSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("PlannerSuite", true);
      SuiteChecks.checkRulesFired("PlannerSuite", nativeNodesBefore);
    }
  }
}
