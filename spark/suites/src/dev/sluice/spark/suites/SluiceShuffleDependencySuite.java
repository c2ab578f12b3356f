package dev.sluice.spark.suites;

/** Apache Spark's {@code ShuffleDependencySuite} with Sluice as the shuffle manager. */
public class SluiceShuffleDependencySuite extends org.apache.spark.shuffle.ShuffleDependencySuite {
  public SluiceShuffleDependencySuite() {
    Exclusions.check("ShuffleDependencySuite", testNames());
    conf().set(SuiteChecks.MANAGER_KEY, SuiteChecks.SLUICE_MANAGER);
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    if (Exclusions.skips("ShuffleDependencySuite", testName)) {
      return org.scalatest.SucceededStatus$.MODULE$;
    }
    return super.runTest(testName, args);
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      // Its tests build shuffle dependencies and run no job, so no map output is looked for
      // (run after ShuffleSuite in one JVM, as in CI, the count was ShuffleSuite's).
      SuiteChecks.checkAfterSuite("ShuffleDependencySuite", false);
    }
  }
}
