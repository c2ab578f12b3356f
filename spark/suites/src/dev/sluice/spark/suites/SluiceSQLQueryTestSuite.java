package dev.sluice.spark.suites;

import java.io.File;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkConf;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Apache Spark SQL's {@code SQLQueryTestSuite} (its golden-file tests: each input file's queries
 * run and their schemas and answers compared with the file's recorded output) over the aggregate
 * and window files, with Sluice as the shuffle manager and its SQL rules on.
 *
 * <p>The suite finds its files under {@code spark.test.home}'s source tree ({@code
 * sql/core/src/test/resources/sql-tests}), which a runtime-only Spark does not have; {@code
 * spark/suites/run.sh} unpacks the same files from Spark's {@code spark-sql} test jar and names
 * the folder in the {@value #DIR_PROPERTY} system property. Only the files in {@link #FILES} (and
 * {@link #EXTENDED_FILES} in the extended tier) become tests.
 *
 * <p>A file may ask for its queries to run once per configuration of a dimension ({@code
 * --CONFIG_DIM}); the codegen dimension runs each query three times: with whole-stage code
 * generation (Spark's default), with it off but expressions compiled ({@code
 * factoryMode=CODEGEN_ONLY}), and interpreted ({@code NO_CODEGEN}). Sluice's nodes build their
 * projections with {@code UnsafeProjection.create}, which compiles them under the first two alike
 * and interprets them under the third, so the second differs from the first only in Spark's own
 * operators. CI leaves it out (a third of these files' time), and the configurations that set
 * {@link CiTier#BROADCAST_ONLY_KEY} (see there); with the {@value #EXTENDED_PROPERTY} system
 * property set to {@code true} (the extended tier), every configuration runs.
 */
public class SluiceSQLQueryTestSuite extends org.apache.spark.sql.SQLQueryTestSuite {
  /** The system property naming the folder that holds {@code inputs/} and {@code results/}. */
  static final String DIR_PROPERTY = "sluice.suites.sqlTests";

  /**
   * The input files run in CI (paths under {@code inputs/}): every Spark file whose queries are
   * mainly aggregates (grouping, grouping sets, rollups and cubes, filters and ordinals, counts,
   * having, pivots, statistical and ordered-set aggregates) or windows; the PostgreSQL ports of
   * both are {@link #EXTENDED_FILES}. Files whose functions are Python UDFs ({@code udf/}, {@code
   * udaf/}) are left out: they run the same queries again through a Python worker per UDF kind
   * (the pandas ones need pandas and pyarrow), and the aggregate around the UDF is the same plan.
   */
  static final Set<String> FILES =
      Set.of(
          "group-by.sql",
          "group-by-alias.sql",
          "group-by-all.sql",
          "group-by-all-duckdb.sql",
          "group-by-all-mosha.sql",
          "group-by-filter.sql",
          "group-by-ordinal.sql",
          "group-analytics.sql",
          "grouping_set.sql",
          "column-resolution-aggregate.sql",
          "count.sql",
          "having.sql",
          "pivot.sql",
          "unpivot.sql",
          "linear-regression.sql",
          "percentiles.sql",
          "mode.sql",
          "try_aggregates.sql",
          "listagg.sql",
          "window.sql",
          "window-with-aggregates.sql",
          "typeCoercion/native/windowFrameCoercion.sql");

  /**
   * The files of {@link #FILES} that Spark added after 4.0, the oldest line this suite runs on
   * (3.5's wrapper is not built), by the first line that has each ({@link SuiteLines}).
   */
  static final Map<String, String> FILES_SINCE = Map.of("window-with-aggregates.sql", "4.1");

  /**
   * The PostgreSQL ports of aggregates, grouping sets and windows: run with {@value
   * #EXTENDED_PROPERTY} set (the extended tier), for CI's time.
   */
  static final Set<String> EXTENDED_FILES =
      Set.of(
          "postgreSQL/aggregates_part1.sql",
          "postgreSQL/aggregates_part2.sql",
          "postgreSQL/aggregates_part3.sql",
          "postgreSQL/aggregates_part4.sql",
          "postgreSQL/groupingsets.sql",
          "postgreSQL/select_distinct.sql",
          "postgreSQL/select_having.sql",
          "postgreSQL/window_part1.sql",
          "postgreSQL/window_part2.sql",
          "postgreSQL/window_part3.sql",
          "postgreSQL/window_part4.sql");

  /**
   * The system property of a run over other files ({@code spark/suites/run.sh --sql-files
   * REGEX}): every input file whose path under {@code inputs/} matches the regular expression, in
   * place of {@link #FILES} (a look at what CI does not run, outside CI for time).
   */
  static final String FILES_PROPERTY = "sluice.suites.sqlFiles";

  /** {@link CiTier#EXTENDED_PROPERTY}, which also runs {@link #EXTENDED_FILES}. */
  static final String EXTENDED_PROPERTY = CiTier.EXTENDED_PROPERTY;

  /** The codegen configuration CI leaves out: compiled expressions without whole-stage code. */
  private static final String CODEGEN_ONLY_KEY = "spark.sql.codegen.factoryMode";

  private static final String CODEGEN_ONLY = "CODEGEN_ONLY";
  private static final String SUITE = "SQLQueryTestSuite";
  private final long nativeNodesBefore = dev.sluice.spark.metrics.SluiceMetrics.sqlNativeNodes();

  public SluiceSQLQueryTestSuite() {
    Exclusions.check(SUITE, testNames());
    if (System.getProperty(FILES_PROPERTY) != null) {
      return;
    }
    SuiteLines.Missing missing = new SuiteLines.Missing(SUITE, testNames());
    for (String file : selected()) {
      missing.look(SUITE, file, FILES_SINCE.getOrDefault(file, SuiteLines.OLDEST));
    }
    missing.fail();
  }

  /** The files this run takes: {@link #FILES}, and {@link #EXTENDED_FILES} in the extended tier. */
  private static Set<String> selected() {
    if (!Boolean.getBoolean(EXTENDED_PROPERTY)) {
      return FILES;
    }
    Set<String> all = new java.util.HashSet<>(FILES);
    all.addAll(EXTENDED_FILES);
    return all;
  }

  /** The unpacked {@code sql-tests} folder (called from the superclass's constructor). */
  @Override
  public File baseResourcePath() {
    String dir = System.getProperty(DIR_PROPERTY);
    if (dir == null || !new File(dir, "inputs").isDirectory()) {
      throw new IllegalStateException(
          DIR_PROPERTY + " must name the sql-tests folder of Spark's spark-sql test jar, not " + dir);
    }
    return new File(dir);
  }

  /**
   * Registers only the files in {@link #FILES}, or those {@value #FILES_PROPERTY} matches (called
   * from the superclass's constructor).
   */
  @Override
  public void createScalaTestCase(org.apache.spark.sql.SQLQueryTestHelper.TestCase testCase) {
    String pattern = System.getProperty(FILES_PROPERTY);
    if (pattern != null ? testCase.name().matches(pattern) : selected().contains(testCase.name())) {
      super.createScalaTestCase(testCase);
    }
  }

  /**
   * Runs the configurations of the file's dimensions, less the {@code CODEGEN_ONLY} one and those
   * that set {@link CiTier#BROADCAST_ONLY_KEY} unless {@value #EXTENDED_PROPERTY} or {@value
   * #FILES_PROPERTY} is set (see the class comment).
   */
  @Override
  public void runQueriesWithSparkConfigDimensions(
      Seq<String> queries,
      org.apache.spark.sql.SQLQueryTestHelper.TestCase testCase,
      Tuple2<String, String>[] settings,
      Seq<Seq<Tuple2<String, String>>> dims) {
    if (Boolean.getBoolean(EXTENDED_PROPERTY) || System.getProperty(FILES_PROPERTY) != null) {
      super.runQueriesWithSparkConfigDimensions(queries, testCase, settings, dims);
      return;
    }
    List<Seq<Tuple2<String, String>>> kept =
        CollectionConverters.asJava(dims).stream()
            .filter(
                dim ->
                    CollectionConverters.asJava(dim).stream()
                        .noneMatch(
                            kv ->
                                kv._1().equals(CODEGEN_ONLY_KEY) && kv._2().equals(CODEGEN_ONLY)
                                    || kv._1().equals(CiTier.BROADCAST_ONLY_KEY)))
            .toList();
    if (kept.isEmpty()) {
      throw new IllegalStateException(
          testCase.name() + ": every configuration is CODEGEN_ONLY or chooses a broadcast join");
    }
    super.runQueriesWithSparkConfigDimensions(
        queries, testCase, settings, CollectionConverters.asScala(kept).toList());
  }

  @Override
  public SparkConf sparkConf() {
    return SuiteChecks.sluiceSql(super.sparkConf());
  }

  @Override
  public org.scalatest.Status runTest(String testName, org.scalatest.Args args) {
    return Exclusions.skips(SUITE, testName)
        ? org.scalatest.SucceededStatus$.MODULE$
        : super.runTest(testName, args);
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
