package dev.sluice.spark.shuffle;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/**
 * The Spark line (major.minor) this jar was compiled against, and whether the running Spark is
 * on it. Sluice calls Spark's internal APIs (the map status, the shuffle reader and writer
 * plumbing, the physical plan classes its SQL rules rewrite), which change between lines: Spark
 * 4.1 added a row checksum to {@code MapStatus.apply}, so a jar built for 4.0 fails every map
 * task there with {@code NoSuchMethodError}. On another line than its own, Sluice plans every
 * shuffle on Spark's sort shuffle instead ({@link Coverage#settingsReason}), and its SQL rules
 * and offloaded operators stand aside. Patch releases of one line share those APIs. So does the
 * Scala version: a line published for two (Spark 3.5 for Scala 2.12 and 2.13) passes its plans'
 * children as another {@code Seq} type in each, so a jar compiled for one fails on the other.
 */
public final class SparkLine {
  /** The resource Maven fills in with the Spark version the jar is compiled against. */
  static final String BUILD_PROPERTIES = "/sluice-build.properties";

  private static final Properties BUILD = readBuild();

  private static final String BUILT_FOR = BUILD.getProperty("spark.version");

  private static final String BUILT_FOR_SCALA = BUILD.getProperty("scala.binary.version");

  private SparkLine() {}

  /** The Spark version this jar was compiled against, e.g. {@code 4.0.1}. */
  public static String builtFor() {
    return BUILT_FOR;
  }

  /** The Scala version this jar was compiled against, major and minor: {@code 2.13}. */
  public static String builtForScala() {
    return BUILT_FOR_SCALA;
  }

  /** The Spark version of this JVM. */
  public static String running() {
    return org.apache.spark.package$.MODULE$.SPARK_VERSION();
  }

  /** The Scala version of this JVM's Spark, e.g. {@code 2.13.16}. */
  static String runningScala() {
    return scala.util.Properties$.MODULE$.versionNumberString();
  }

  /** A version's line, its major and minor numbers: {@code 4.1} for {@code 4.1.3}. */
  static String line(String version) {
    String[] parts = version.split("[.-]", 3);
    return parts.length < 2 ? version : parts[0] + "." + parts[1];
  }

  /**
   * Why Sluice cannot run on Spark {@code running}, or null when it is on the line this jar was
   * built for.
   */
  static String mismatchReason(String running, String builtFor) {
    if (line(running).equals(line(builtFor))) {
      return null;
    }
    return "this Sluice jar is built for Spark "
        + line(builtFor)
        + " ("
        + builtFor
        + "), and this is Spark "
        + running;
  }

  /**
   * Why Sluice cannot run on Spark {@code running} with Scala {@code runningScala}, or null when
   * both are on the lines this jar was built for.
   */
  static String mismatchReason(
      String running, String builtFor, String runningScala, String builtForScala) {
    String spark = mismatchReason(running, builtFor);
    if (spark != null
        || runningScala == null
        || runningScala.isEmpty()
        || builtForScala == null
        || line(runningScala).equals(builtForScala)) {
      // A Scala version this JVM cannot tell (an assembly without Scala's library.properties)
      // is not taken for another.
      return spark;
    }
    return "this Sluice jar is built for Spark "
        + line(builtFor)
        + " on Scala "
        + builtForScala
        + ", and this Spark runs Scala "
        + runningScala;
  }

  /** Why Sluice cannot run on this JVM's Spark, or null. */
  public static String mismatchReason() {
    return mismatchReason(running(), builtFor(), runningScala(), builtForScala());
  }

  private static Properties readBuild() {
    Properties p = new Properties();
    try (InputStream in = SparkLine.class.getResourceAsStream(BUILD_PROPERTIES)) {
      if (in == null) {
        throw new IllegalStateException("Sluice: " + BUILD_PROPERTIES + " is not in the jar");
      }
      p.load(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return p;
  }
}
