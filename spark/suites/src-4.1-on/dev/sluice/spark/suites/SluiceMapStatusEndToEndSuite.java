package dev.sluice.spark.suites;

/**
 * Apache Spark SQL's {@code MapStatusEndToEndSuite} (Spark 4.1 and later) with Sluice as the
 * shuffle manager and its SQL rules on: every map status of a SQL shuffle carries the row
 * checksum Spark's writers compute (not 0), whichever of the order-independent check and the
 * full retry on a checksum mismatch asks for it. The suite builds its own session; Sluice's
 * settings come from this JVM's system properties ({@code run.sh}) and the rules' extension.
 */
public class SluiceMapStatusEndToEndSuite extends org.apache.spark.sql.MapStatusEndToEndSuite {
  private final long outputsBefore = dev.sluice.spark.metrics.SluiceMetrics.mapOutputs();

  public SluiceMapStatusEndToEndSuite() {
    Exclusions.check("MapStatusEndToEndSuite", testNames());
    SuiteChecks.requireSystemManager();
  }

  @Override
  public void beforeAll() {
    // For this suite's session only (cleared after it): the suite's own builder reads them.
    System.setProperty(SuiteChecks.EXTENSIONS_KEY, SuiteChecks.SLUICE_EXTENSIONS);
    System.setProperty(SuiteChecks.SQL_AGGREGATE_KEY, "true");
    super.beforeAll();
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips("MapStatusEndToEndSuite", testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      System.clearProperty(SuiteChecks.EXTENSIONS_KEY);
      System.clearProperty(SuiteChecks.SQL_AGGREGATE_KEY);
      SuiteChecks.checkAfterSuite("MapStatusEndToEndSuite", true);
      if (dev.sluice.spark.metrics.SluiceMetrics.mapOutputs() <= outputsBefore) {
        throw new IllegalStateException("MapStatusEndToEndSuite wrote no map output with Sluice");
      }
    }
  }
}
