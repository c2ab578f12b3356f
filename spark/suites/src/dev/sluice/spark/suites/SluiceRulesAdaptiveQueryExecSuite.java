package dev.sluice.spark.suites;

import org.apache.spark.SparkConf;

/**
 * Apache Spark SQL's {@code AdaptiveQueryExecSuite} with Sluice as the shuffle manager and its SQL
 * rules on: adaptive execution's own tests over the native nodes. The exclusions of the plain run
 * ({@code AdaptiveQueryExecSuite}) apply, and those under {@link #SUITE} for the plan shapes the
 * rules change.
 */
public class SluiceRulesAdaptiveQueryExecSuite
    extends org.apache.spark.sql.execution.adaptive.AdaptiveQueryExecSuite {
  /** The name of this run's own exclusions. */
  static final String SUITE = "AdaptiveQueryExecSuite, rules on";

  private static final String PLAIN = "AdaptiveQueryExecSuite";
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceRulesAdaptiveQueryExecSuite() {
    Exclusions.check(PLAIN, testNames());
    Exclusions.check(SUITE, testNames());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    if (Exclusions.skips(PLAIN, testName) || Exclusions.skips(SUITE, testName)) {
      return org.scalatest.SucceededStatus$.MODULE$;
    }
    return TimingRaces.run(PLAIN, testName, args, a -> super.runTest(testName, a));
  }

  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkAfterSuite(SUITE, true);
      SuiteChecks.checkRulesFired(SUITE, nativeNodesBefore);
    }
  }
}
