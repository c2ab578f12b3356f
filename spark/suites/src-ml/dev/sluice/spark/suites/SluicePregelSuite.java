package dev.sluice.spark.suites;

/**
 * GraphX's {@code PregelSuite}, run last of the GraphX suites ({@code run.sh GraphX}), which run
 * unwrapped with Sluice chosen through the JVM's Spark defaults: after it, the checks that this
 * JVM's Spark defaults selected Sluice and that Sluice wrote the group's map outputs.
 */
public class SluicePregelSuite extends org.apache.spark.graphx.PregelSuite {
  @Override
  public void afterAll() {
    try {
      super.afterAll();
    } finally {
      SuiteChecks.checkUnwrappedGroup("the GraphX suites", false);
    }
  }
}
