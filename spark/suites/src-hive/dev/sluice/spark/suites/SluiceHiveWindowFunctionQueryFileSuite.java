package dev.sluice.spark.suites;

/**
 * Spark's {@code HiveWindowFunctionQueryFileSuite}, Hive's windowing query files against Hive's
 * golden answers, run last of the Hive compatibility group ({@code run.sh HiveCompatibility}),
 * which runs unwrapped with Sluice and its SQL rules chosen through the JVM's Spark defaults:
 * after it, the checks that Sluice carried the group and that its rules planned native nodes.
 */
public class SluiceHiveWindowFunctionQueryFileSuite
    extends org.apache.spark.sql.hive.execution.HiveWindowFunctionQueryFileSuite {
  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkUnwrappedGroup("the Hive compatibility suites", true);
    }
  }
}
