package dev.sluice.spark.suites;

import dev.sluice.spark.shuffle.SparkLine;
import java.util.ArrayList;
import java.util.List;

/**
 * Which Spark line a test of Spark's suites is in. The exclusion list and the extended tier name
 * tests of the default line's suites (4.1); the same suites run from the test jars of every line
 * Sluice builds for ({@code run.sh --line L}), and a test added to Spark after 3.5 is not in the
 * older lines' suites. Each entry names the first line that has its test: an entry whose test is
 * missing on that line or a later one is stale and fails the suite; on an older line the test is
 * not there to run, and nothing is left out.
 */
final class SuiteLines {
  /** The oldest Spark line Sluice builds for. */
  static final String OLDEST = "3.5";

  private SuiteLines() {}

  /** Whether Spark {@code version} (e.g. {@code 3.5.7}) is of a line older than {@code line}. */
  static boolean older(String version, String line) {
    int[] v = majorMinor(version);
    int[] l = majorMinor(line);
    return v[0] != l[0] ? v[0] < l[0] : v[1] < l[1];
  }

  private static int[] majorMinor(String version) {
    String[] parts = version.split("[.-]", 3);
    if (parts.length < 2) {
      throw new IllegalArgumentException("not a Spark version: " + version);
    }
    return new int[] {Integer.parseInt(parts[0]), Integer.parseInt(parts[1])};
  }

  /** The entries of one suite whose tests it lacks, on the running Spark. */
  static final class Missing {
    private final String suite;
    private final scala.collection.immutable.Set<String> names;
    private final String running = SparkLine.running();
    private final List<String> stale = new ArrayList<>();

    Missing(String suite, scala.collection.immutable.Set<String> names) {
      this.suite = suite;
      this.names = names;
    }

    /** Looks for the test of one entry, if the entry is of this suite. */
    void look(String entrySuite, String test, String since) {
      if (!entrySuite.equals(suite) || names.contains(test)) {
        return;
      }
      if (older(running, since)) {
        System.out.println(
            "- " + test + " (Spark " + since + " on) is not in Spark " + running + "'s " + suite);
      } else {
        stale.add(test);
      }
    }

    /** Fails if an entry names a test that this suite should have and has not. */
    void fail() {
      if (!stale.isEmpty()) {
        throw new IllegalStateException(
            suite + " on Spark " + running + " has no test " + String.join(", ", quoted()));
      }
    }

    private List<String> quoted() {
      List<String> q = new ArrayList<>();
      for (String t : stale) {
        q.add("\"" + t + "\"");
      }
      return q;
    }
  }
}
