package dev.sluice.spark.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The Spark line the jar is built for, against the Spark it runs on. */
class SparkLineTest {
  @Test
  void theJarNamesTheSparkItIsCompiledAgainst() {
    // Maven filled the resource from pom.xml's spark.version: the Spark on this class path.
    assertEquals(org.apache.spark.package$.MODULE$.SPARK_VERSION(), SparkLine.builtFor());
    assertEquals(SparkLine.line(SparkLine.runningScala()), SparkLine.builtForScala());
    assertNull(SparkLine.mismatchReason(), "the tests run on the jar's own line");
  }

  @Test
  void aSparkOfAnotherScalaFallsBack() {
    // Spark 3.5 is published for Scala 2.12 and 2.13; the jar runs only on its own.
    assertNull(SparkLine.mismatchReason("3.5.7", "3.5.7", "2.12.18", "2.12"));
    String why = SparkLine.mismatchReason("3.5.7", "3.5.7", "2.13.8", "2.12");
    assertNotNull(why);
    assertTrue(why.contains("built for Spark 3.5 on Scala 2.12"), why);
    assertTrue(why.endsWith("this Spark runs Scala 2.13.8"), why);
    // A Scala version the JVM cannot tell is not another one.
    assertNull(SparkLine.mismatchReason("3.5.7", "3.5.7", "", "2.12"));
    // Another Spark line is the reason first.
    assertTrue(
        SparkLine.mismatchReason("4.1.1", "3.5.7", "2.13.16", "2.12").endsWith("Spark 4.1.1"));
  }

  @Test
  void patchReleasesOfTheLineRunAndOtherLinesFallBack() {
    assertNull(SparkLine.mismatchReason("4.0.1", "4.0.1"));
    assertNull(SparkLine.mismatchReason("4.0.2", "4.0.1"));
    assertNull(SparkLine.mismatchReason("4.0.0-preview2", "4.0.1"));
    for (String other : new String[] {"4.1.3", "4.2.0", "3.5.7", "5.0.0"}) {
      String why = SparkLine.mismatchReason(other, "4.0.1");
      assertNotNull(why, other);
      assertTrue(why.contains("built for Spark 4.0 (4.0.1)"), why);
      assertTrue(why.endsWith("this is Spark " + other), why);
    }
  }

  @Test
  void aLineIsMajorAndMinor() {
    assertEquals("4.1", SparkLine.line("4.1.3"));
    assertEquals("4.1", SparkLine.line("4.1.0-preview1"));
    assertEquals("3.5", SparkLine.line("3.5"));
    assertEquals("4", SparkLine.line("4"));
  }
}
