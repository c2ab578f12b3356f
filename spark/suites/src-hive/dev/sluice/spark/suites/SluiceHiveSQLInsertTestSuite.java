package dev.sluice.spark.suites;

/**
 * Spark's {@code HiveSQLInsertTestSuite} over Hive tables, run unwrapped with the other Hive
 * suites ({@code run.sh Hive}), less its tests on the exclusion list ({@link Exclusions}).
 */
public class SluiceHiveSQLInsertTestSuite
    extends org.apache.spark.sql.hive.HiveSQLInsertTestSuite {
  public SluiceHiveSQLInsertTestSuite() {
    Exclusions.check("HiveSQLInsertTestSuite", testNames());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("HiveSQLInsertTestSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }
}
