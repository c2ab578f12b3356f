package dev.sluice.spark.suites;

import java.util.List;

/**
 * The one list of Spark tests that Sluice does not run, each with the assertion it makes and why
 * that assertion cannot hold for a shuffle format other than the sort shuffle's. Only tests that
 * assert the sort shuffle's exact byte sizes belong here.
 */
public final class Exclusions {
  /** One excluded test: its suite, its exact name, the assertion, and why it cannot hold. */
  public record Excluded(String suite, String test, String asserts, String why) {}

  public static final List<Excluded> LIST =
      List.of(
          new Excluded(
              "AdaptiveQueryExecSuite",
              "SPARK-35725: Support optimize skewed partitions in RebalancePartitions",
              "with an advisory partition size of 150 bytes, REBALANCE(c1) over 10 rows reads"
                  + " as 4 partition specs (2 of them split skewed partitions): the sort"
                  + " shuffle's segments of partitions 2-4 are 72 bytes each, so two of them"
                  + " coalesce under 150 bytes",
              "the split is computed from the map outputs' exact byte sizes; Sluice's segments"
                  + " of the same rows are Sluice blocks (a 36-byte header per block), 80 bytes"
                  + " each here, so no two coalesce under 150 and the read has 5 specs. The"
                  + " answer is the same (runAdaptiveAndVerifyResult checks it before the count"
                  + " assertion fails)"));

  private Exclusions() {}

  /**
   * Checks that every exclusion of {@code suite} names one of its tests, so a renamed test cannot
   * leave a stale entry behind.
   */
  public static void check(String suite, scala.collection.immutable.Set<String> names) {
    for (Excluded e : LIST) {
      if (e.suite().equals(suite) && !names.contains(e.test())) {
        throw new IllegalStateException(suite + " has no test \"" + e.test() + "\" to exclude");
      }
    }
  }

  /**
   * Whether {@code test} of {@code suite} is excluded; if so, prints that it is left out and why
   * (the suites' subclasses then skip it without running it).
   */
  public static boolean skips(String suite, String test) {
    for (Excluded e : LIST) {
      if (e.suite().equals(suite) && e.test().equals(test)) {
        System.out.println("- " + test + " EXCLUDED (asserts " + e.asserts() + "; " + e.why() + ")");
        return true;
      }
    }
    return false;
  }
}
