package dev.sluice.spark.suites;

import java.util.List;

/**
 * The one list of Spark tests that Sluice does not run, each with the assertion it makes and why
 * that assertion cannot hold under Sluice. Only tests that assert the sort shuffle's exact byte
 * sizes, or (in Spark SQL's suites, run with Sluice's SQL rules on) the presence or count of a
 * Spark plan node that a rule replaces, belong here. Most check their answer before the plan, and
 * the entry says so; where a test asserts the plan first, its query's answer goes unchecked under
 * Sluice, and the entry says that too. One test asserts a property of Spark's defensive sort before
 * a round robin that Sluice leaves out where it proves the sort unneeded; its entry says why each
 * answer is still correct. The one other kind is a real defect of Sluice's that an open issue
 * tracks ("KNOWN DEFECT, issue N"), listed until the issue fixes it.
 */
public final class Exclusions {
  /**
   * One excluded test: its suite, its exact name, the assertion, why it cannot hold, and the first
   * Spark line whose suite has the test ({@link SuiteLines}).
   */
  public record Excluded(String suite, String test, String asserts, String why, String since) {
    /** An excluded test that every line Sluice builds for has. */
    public Excluded(String suite, String test, String asserts, String why) {
      this(suite, test, asserts, why, SuiteLines.OLDEST);
    }
  }

  /**
   * Why adaptive execution's coalescing tests cannot hold over a native node: the node is not a
   * query stage, it coalesces its own reads.
   */
  private static final String NOT_A_STAGE =
      "the aggregate is a SluiceAggregate: its shuffle is inside the node, not a query stage"
          + " that AQEShuffleReadExec reads, and the node coalesces its own reads from the map"
          + " outputs' sizes (AdaptiveCoalesce), so no AQEShuffleReadExec is found";

  /**
   * Why adaptive execution's empty-relation tests cannot hold over a native node: it is no query
   * stage whose row count adaptive execution knows.
   */
  private static final String EMPTY =
      "the sort or aggregate is a SluiceSortExchange or SluiceAggregate, not a query stage, so"
          + " adaptive execution knows no row count of 0 for it and runs it (empty) instead of"
          + " replacing it";

  /** What ObjectHashAggregateSuite's randomized tests of a max grouped by {@code id % 10} assert. */
  private static final String OBJECT_HASH_ASSERTS =
      "that with the object hash aggregate off, a groupBy($\"id\" % 10) of max over a column of"
          + " a random fixed-length type plans a HashAggregateExec, before it collects the answer"
          + " (so the answer goes unchecked under Sluice)";

  /** Why those tests cannot hold under the rules. */
  private static final String OBJECT_HASH_WHY =
      "where the random type is one the engine groups and aggregates, the rules plan the"
          + " aggregate as a SluiceAggregate, which replaces the HashAggregateExec; the suite"
          + " draws its column types from the clock, so the test fails in the runs that draw such"
          + " a type. Maxima grouped by expressions are compared with the sort shuffle's"
          + " answers in spark/sqldiff.py (test_7_sqldiff)";

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
                  + " the answer, checked first, is the same"),
          new Excluded(
              "JoinSuite",
              "SPARK-34593: Preserve broadcast nested loop join partitioning and ordering",
              "that GROUP BY k over a broadcast nested loop join plans exactly one (or no)"
                  + " ShuffleExchangeExec, counting Spark's exchanges to tell whether the join"
                  + " kept its child's partitioning",
              "Sluice's aggregate rule replaces the partial and final HashAggregateExec and the"
                  + " exchange between them with one SluiceAggregate, whose shuffle is not a"
                  + " ShuffleExchangeExec, so the count is 0 where the test expects 1 (the test"
                  + " checks no answer of these queries)"),
          new Excluded(
              "JoinSuite",
              "SPARK-45882: BroadcastHashJoinExec propagate partitioning should respect"
                  + " CoalescedHashPartitioning",
              "before checking the answer, that groupBy(key).count() over a cached broadcast"
                  + " hash join plans one ShuffleExchangeLike (removed by adaptive execution"
                  + " once the cached plan's coalesced partitioning is known)",
              "the aggregate and its exchange are one SluiceAggregate in the initial plan,"
                  + " which is not a ShuffleExchangeLike, so none is found and the answer check"
                  + " after it is not reached"),
          new Excluded(
              "SubquerySuite",
              "SPARK-36280: Remove redundant aliases after RewritePredicateSubquery",
              "after running an IN subquery over GROUP BY x and a window, that the plan holds"
                  + " exactly one ShuffleExchangeExec",
              "the GROUP BY x is one SluiceAggregate, whose shuffle is not a"
                  + " ShuffleExchangeExec, so 0 are found (the test checks no answer)"),
          new Excluded(
              "PlannerSuite",
              "SPARK-24556: always rewrite output partitioning in ReusedExchangeExec and"
                  + " InMemoryTableScanExec",
              "that a self-join of a grouped DataFrame plans one ReusedExchangeExec whose"
                  + " output partitioning is rewritten to its own attributes",
              "the grouped side is a SluiceAggregate; two equal ones share one engine shuffle"
                  + " (ShuffleReuse) inside the node, with no ReusedExchangeExec to find (the"
                  + " test checks no answer)"),
          new Excluded(
              "PlannerSuite",
              "aliases in the aggregate expressions should not introduce extra shuffle",
              "that a join of two aggregates plans HashAggregateExecs and exactly two"
                  + " ShuffleExchangeExecs",
              "both aggregates are SluiceAggregates, so no HashAggregateExec is found (the"
                  + " test checks no answer)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "Empty stage coalesced to 1-partition RDD",
              "that the aggregate over an empty left outer join reads three coalesced AQEShuffleReadExecs",
              NOT_A_STAGE + " (the answer, empty, is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "multiple joins with aggregate",
              "that every ShuffleQueryStageExec of the three-join plan is read locally or counted as not: 5",
              "the aggregate below the joins is a SluiceAggregate, whose shuffle is inside the node, so"
                  + " the plan has one ShuffleQueryStageExec fewer (4); the answer is checked first"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "multiple joins with aggregate 2",
              "the same count for the plan with a second aggregate: 7",
              "as in \"multiple joins with aggregate\": 6 query stages; the answer is checked first"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-35585: Support propagate empty relation through project/filter",
              "that ORDER BY over a filter matching nothing becomes an EmptyRelationExec",
              EMPTY + " (the answer, empty, is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-35442: Support propagate empty relation through aggregate",
              "that GROUP BY over a filter matching nothing becomes an EmptyRelationExec",
              EMPTY + " (the answer, empty, is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-35442: Support propagate empty relation through union",
              "that a UNION branch aggregating nothing is pruned, leaving a given number of UnionExecs",
              EMPTY + " (the answer is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-34091: Batch shuffle fetch in AQE partition coalescing",
              "that a node of the plan carries the shuffle read metric localBlocksFetched, smaller with"
                  + " batch fetch on",
              "the aggregate is a SluiceAggregate, which reads its shuffle through the engine and has no"
                  + " such metric (its blocks are read one segment per map output either way); the"
                  + " answer is checked first"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-33933: Materialize BroadcastQueryStage first in AQE",
              "that the first stage materialized is named BroadcastQueryStageExec-1 (stage 0 being"
                  + " the aggregate's shuffle)",
              "the aggregate is a SluiceAggregate, not a query stage, so the broadcast is stage 0; it is"
                  + " still materialized first. The answer (26 rows) is checked first"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-34899: Use origin plan if we can not coalesce shuffle partition",
              "that df.sort(key) plans one ShuffleExchangeExec with 2 partitions and reads it without an"
                  + " AQEShuffleReadExec",
              "the sort's exchange is a SluiceSortExchange, so no ShuffleExchangeExec is found (the"
                  + " assertion comes before that query's answer check; the repartition case before"
                  + " it passes, answer included)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-34980: Support coalesce partition through union",
              "the number of AQEShuffleReadExecs and partitions of unions of aggregates",
              NOT_A_STAGE + " (the answers are collected first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-35239: Coalesce shuffle partition should handle empty input RDD",
              "that GROUP BY over an empty table reads one coalesced AQEShuffleReadExec",
              NOT_A_STAGE + " (the answer is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-35968: AQE coalescing should not produce too small partitions by default",
              "that sum(id) GROUP BY id % 3 over RANGE(10) reads one coalesced AQEShuffleReadExec",
              NOT_A_STAGE + " (the answer is checked first)"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-36424: Support eliminate limits in AQE Optimizer",
              "that AQE's optimizer drops a LIMIT 5 over an aggregate whose stage returned 2 rows",
              "the aggregate is a SluiceAggregate, not a query stage, so AQE knows no row count for it"
                  + " and keeps the limit, which returns the same rows; the answer is checked first"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-47247: coalesce differently for BNLJ",
              "that the aggregate below a broadcast nested loop join is read through a coalesced"
                  + " AQEShuffleReadExec when the minimum partition size is 64MB",
              NOT_A_STAGE + " (the answer is checked first)",
              "4.0"),
          new Excluded(
              SluiceRulesAdaptiveQueryExecSuite.SUITE,
              "SPARK-52921: Specify outputPartitioning for UnionExec for same output partitoning",
              "that a union of a join, an aggregate and a scan reads 3 AQEShuffleReadExecs and has"
                  + " 4 partitions, with and without spark.sql.unionOutputPartitioning",
              NOT_A_STAGE
                  + " (2 are found; the test compares the answers of its two settings only after"
                  + " the counts, so it checks none under Sluice)",
              "4.1"),
          new Excluded(
              "ExchangeSuite",
              "SPARK-23207: Make repartition() generate consistent output",
              "that repartition(111) deals the rows of a cached range and those of the same"
                  + " cached range shuffled by a mapPartitions into the same partitions: both"
                  + " are sorted by Spark before the deal, so the input's order cannot matter",
              "a property of Spark's sort, not of a rerun: Sluice leaves the sort out where the"
                  + " input's order is proven the same in every attempt (StableOrder: here the"
                  + " cached range), so its partitions follow the range's order and differ from"
                  + " the shuffled copy's (which keeps the sort, mapPartitions not being on the"
                  + " allow-list). Each answer is a correct round robin, and a rerun of either"
                  + " deals every row as before (test_4_faults"
                  + " test_sql_repartition_of_an_unstable_input_deals_a_rerun_alike)"),
          new Excluded(
              "ObjectHashAggregateSuite",
              "randomized aggregation test - [with partial + unsafe] - with grouping keys - with"
                  + " empty input",
              OBJECT_HASH_ASSERTS,
              OBJECT_HASH_WHY),
          new Excluded(
              "ObjectHashAggregateSuite",
              "randomized aggregation test - [with partial + unsafe] - with grouping keys - with"
                  + " non-empty input",
              OBJECT_HASH_ASSERTS,
              OBJECT_HASH_WHY),
          new Excluded(
              "HiveSQLInsertTestSuite",
              "SPARK-48817: test multi inserts",
              "that a multi-table insert (FROM (SELECT /*+ REPARTITION(3) */ ...) INSERT INTO t2"
                  + " ... INSERT INTO t3 ...) plans one ReusedExchangeExec: the second insert's"
                  + " round-robin exchange reuses the first's. Its answers are checked first",
              "the round robin is a SluiceRoundRobinExchange, which is no exchange Spark reuses;"
                  + " the two equal nodes share one shuffle through ShuffleReuse instead (dealt"
                  + " once: test_2_settings"
                  + " test_sql_repartition_skips_spark_s_sort_only_for_a_determinate_input), so"
                  + " the plan holds no ReusedExchangeExec",
              "4.0"));


  private Exclusions() {}

  /**
   * Checks that every exclusion of {@code suite}, and every test of it that CI leaves to the
   * extended tier, names one of its tests, so a renamed test cannot leave a stale entry behind; a
   * test newer than the running Spark line is not looked for.
   */
  public static void check(String suite, scala.collection.immutable.Set<String> names) {
    SuiteLines.Missing missing = new SuiteLines.Missing(suite, names);
    for (CiTier.Slow s : CiTier.SLOW) {
      missing.look(s.suite(), s.test(), s.since());
    }
    for (Excluded e : LIST) {
      missing.look(e.suite(), e.test(), e.since());
    }
    TimingRaces.look(missing);
    missing.fail();
  }

  /**
   * Whether {@code test} of {@code suite} is excluded, or left to the extended tier ({@link
   * CiTier}); if so, prints that it is left out and why (the suites' subclasses then skip it
   * without running it).
   */
  public static boolean skips(String suite, String test) {
    for (Excluded e : LIST) {
      if (e.suite().equals(suite) && e.test().equals(test)) {
        System.out.println("- " + test + " EXCLUDED (asserts " + e.asserts() + "; " + e.why() + ")");
        return true;
      }
    }
    return CiTier.skips(suite, test);
  }
}
