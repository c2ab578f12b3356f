package dev.sluice.spark.suites;

/**
 * Apache Spark's {@code ShuffleSuite} with Sluice as the shuffle manager, as Spark's own {@code
 * SortShuffleSuite} runs it with {@code sort}. Tests on {@link Exclusions} are left out.
 */
public class SluiceShuffleSuite extends org.apache.spark.ShuffleSuite {
  public SluiceShuffleSuite() {
    Exclusions.check("ShuffleSuite", testNames());
    conf().set(SuiteChecks.MANAGER_KEY, SuiteChecks.SLUICE_MANAGER);
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    if (Exclusions.skips("ShuffleSuite", testName)) {
      return org.scalatest.SucceededStatus$.MODULE$;
    }
    return super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite("ShuffleSuite", true);
    }
  }
}
