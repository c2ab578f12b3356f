package dev.sluice.spark.suites;

/**
 * Spark's {@code HashAggregationQuerySuite} over Hive tables, run last of the Hive suites
 * ({@code run.sh Hive}), which run unwrapped with Sluice and its SQL rules chosen through the
 * JVM's Spark defaults: after it, the checks that this JVM's Spark defaults selected Sluice, that
 * Sluice wrote the group's map outputs, and that its SQL rules planned native nodes in the
 * group's plans.
 */
public class SluiceHashAggregationQuerySuite
    extends org.apache.spark.sql.hive.execution.HashAggregationQuerySuite {
  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkUnwrappedGroup("the Hive suites", true);
    }
  }
}
