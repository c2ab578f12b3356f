package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/** Apache Spark SQL's {@code JoinSuite} with Sluice as the shuffle manager and its SQL rules on. */
public class SluiceJoinSuite extends org.apache.spark.sql.JoinSuite {
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceJoinSuite() {
    Exclusions.check("JoinSuite", testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("JoinSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("JoinSuite", true);
      SuiteChecks.checkRulesFired("JoinSuite", nativeNodesBefore);
    }
  }
}
