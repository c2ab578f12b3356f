package dev.sluice.spark.suites;

import java.util.List;

/**
 * The one list of Spark tests that Sluice does not run, each with the assertion it makes and why
 * that assertion cannot hold under Sluice. Only tests that assert the sort shuffle's exact byte
 * sizes, or (in Spark SQL's suites, run with Sluice's SQL rules on) the presence of a Spark plan
 * node that a rule replaces, after the test has checked its answer, belong here.
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
                  + " assertion fails)"),
          new Excluded(
              "AdaptiveQueryExecSuite",
              "metrics of the shuffle read",
              "the skew join over 100 shuffle partitions with an advisory size of 1000 bytes"
                  + " splits the skewed partitions into exactly 11 and 9 reads",
              "the split count is each skewed partition's bytes divided by the advisory size;"
                  + " a Sluice segment carries a 36-byte header per block and a 36-byte"
                  + " trailer, so the same rows split into 15 reads here. The answer is checked"
                  + " first and is the same"),
          new Excluded(
              "AdaptiveQueryExecSuite",
              "SPARK-35264: Support AQE side shuffled hash join formula",
              "a shuffled hash join is planned because every partition of the build side is"
                  + " under spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold, set just"
                  + " above the sort shuffle's partition sizes",
              "the threshold is compared with the map outputs' exact bytes, which are larger"
                  + " in Sluice's blocks (headers and the segment trailer), so a sort-merge join"
                  + " is kept; the answer is the same (Apache Gluten's columnar shuffle"
                  + " overrides this test for the same reason)"),
          new Excluded(
              "AdaptiveQueryExecSuite",
              "SPARK-37357: Add small partition factor for rebalance partitions",
              "REBALANCE(c1) of 8 rows with an advisory size of 200 bytes and a small"
                  + " partition factor of 0.5 reads without an AQE shuffle read: the sort"
                  + " shuffle's partitions are 88, 97 and 97 bytes",
              "whether a partition counts as small is decided on its exact bytes, which are"
                  + " larger in Sluice's blocks (headers and the segment trailer); the answer is"
                  + " the same"),
          new Excluded(
              "DataFrameAggregateSuite",
              "SPARK-19471: AggregationIterator does not initialize the generated result"
                  + " projection before using it",
              "after checking the answer of groupBy(a).agg(..), that the executed plan holds a"
                  + " HashAggregateExec inside a WholeStageCodegenExec",
              "Sluice's aggregate rule replaces that partial and final HashAggregateExec (and"
                  + " their exchange) with one SluiceAggregate, so there is no such node to find;"
                  + " the answer, checked first, is the same"));

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
