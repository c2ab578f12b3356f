package dev.sluice.spark.suites;

/**
 * Spark ML's {@code ALSSuite}, run last of the MLlib suites ({@code run.sh MLlib}), which run
 * unwrapped with Sluice and its SQL rules chosen through the JVM's Spark defaults: after it, the
 * checks that this JVM's Spark defaults selected Sluice, that Sluice wrote the group's map
 * outputs, and that its SQL rules planned native nodes in the group's DataFrame plans.
 */
public class SluiceALSSuite extends org.apache.spark.ml.recommendation.ALSSuite {
  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkUnwrappedGroup("the MLlib suites", true);
    }
  }
}
