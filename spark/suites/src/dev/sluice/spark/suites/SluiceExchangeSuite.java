package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code ExchangeSuite} with Sluice as the shuffle manager and its SQL rules on.
 * Its tests plan exchanges directly, global aggregates, joins and broadcasts, no shape the rules
 * take (its one repartition of a DataFrame is excluded), so the rules must leave every plan as
 * Spark made it; after the suite, the check is that Sluice's SQL row path carried its rows.
 */
public class SluiceExchangeSuite extends org.apache.spark.sql.execution.ExchangeSuite {
  private final long rowsDirectBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlRowsDirect();

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
      SuiteChecks.checkRowPath("ExchangeSuite", rowsDirectBefore);
    }
  }
}
