"""Every workload through Sluice in local[2], record for record against
Spark's sort shuffle."""

import contextlib

import pytest
from pyspark.sql import functions as F

import workloads
from bench import DEFAULT_LINE, LINE
from conftest import SLUICE, session, sluice_metrics


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    s = session("local[2]", SLUICE, tmp_path_factory.mktemp("sluice-local"))
    yield s
    s.stop()


@contextlib.contextmanager
def session_conf(spark, settings):
    """The session's SQL settings changed for the block, then put back."""
    was = {k: spark.conf.get(k) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in was.items():
            spark.conf.set(k, v)


@pytest.mark.parametrize("name", list(workloads.ALL))
def test_local_matches_sort_shuffle(local, reference, name):
    if name == "sql_variant" and local.version.startswith("3."):
        pytest.skip("Spark 3.5 has no VARIANT type")
    before = sluice_metrics(local)
    got = workloads.ALL[name](local)
    after = sluice_metrics(local)
    assert got == reference[name]
    # The shuffle really went through Sluice: map outputs written, blocks decoded.
    assert after["map_outputs"] > before["map_outputs"]
    assert after["blocks_decoded"] > before["blocks_decoded"]


def test_a_union_of_native_aggregates_reads_the_partitions_they_declare(local):
    # From Spark 4.1 a union whose children declare one hash partitioning
    # keeps it (spark.sql.unionOutputPartitioning, on by default): it reads
    # partition i of every child as its partition i, and the aggregate above
    # it needs no exchange. Two native aggregates of different sizes each
    # coalesced their own reads to fewer partitions than they declared, and
    # the union failed (ArrayIndexOutOfBoundsException, TPC-DS q14 and q23);
    # below such a union they keep their declared count. Before 4.1 a union's
    # partitions are its children's one after another, and they coalesce.
    settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "true"}
    with session_conf(local, settings):
        big = local.range(0, 200000, numPartitions=2).selectExpr("id % 1000 as k", "id as v")
        small = local.range(0, 2000, numPartitions=2).selectExpr("id % 10 as k", "id as v")
        union = (big.groupBy("k").sum("v").toDF("k", "s")
                 .unionAll(small.groupBy("k").sum("v").toDF("k", "s")))
        df = union.groupBy("k").sum("s")
        want = {k: sum(range(k, 200000, 1000)) for k in range(1000)}
        for k in range(10):
            want[k] += sum(range(k, 2000, 10))
        assert sorted((r[0], r[1]) for r in df.collect()) == sorted(want.items())
        final = df._jdf.queryExecution().executedPlan().toString().split("Initial Plan")[0]
        # The two below the union (before 4.1 the one above it too: a union
        # there has no partitioning, so the aggregate over it shuffles).
        assert final.count("SluiceAggregate") >= 2, final


def test_a_union_of_unlike_children_lets_native_aggregates_coalesce(local):
    # A union whose children declare different partitionings (a native
    # aggregate by k, Spark's own aggregate by k whose read adaptive execution
    # coalesces, a global aggregate in one partition) has no partitioning of
    # its own on any line and concatenates its children's partitions, so the
    # native aggregate below it coalesces its 200 small partitions as adaptive
    # execution would. Pinned to 200, as below a union that zips, its stage
    # ran 200 tasks for a few kilobytes (TPC-DS q36 on Spark 4.1: 0.54x).
    settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "true"}
    with session_conf(local, settings):
        rows = local.range(0, 20000, numPartitions=2).selectExpr("id % 100 as k", "id as v")
        native = rows.groupBy("k").sum("v").toDF("k", "s")
        spark_own = rows.groupBy("k").agg(F.max(F.col("v").cast("string")).cast("long").alias("s"))
        single = rows.agg(F.sum("v").alias("s")).selectExpr("-1L as k", "s")
        union = native.unionAll(spark_own).unionAll(single)
        local.sparkContext.setJobGroup("unlike-union", "unlike-union")
        try:
            got = sorted((r[0], r[1]) for r in union.collect())
        finally:
            local.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        want = sorted([(k, sum(range(k, 20000, 100))) for k in range(100)]
                      + [(k, max(range(k, 20000, 100), key=str)) for k in range(100)]
                      + [(-1, sum(range(20000)))])
        assert got == want
        final = union._jdf.queryExecution().executedPlan().toString().split("Initial Plan")[0]
        assert final.count("SluiceAggregate") == 1, final
        t = local.sparkContext.statusTracker()
        jobs = t.getJobIdsForGroup("unlike-union")
        stages = {st for j in jobs for st in t.getJobInfo(j).stageIds}
        tasks = [t.getStageInfo(st).numTasks for st in stages if t.getStageInfo(st) is not None]
        # The union's stage reads a few coalesced ranges of each child, not 200.
        assert max(tasks) < 100, tasks


def joined_aggregates_native(spark):
    """Whether a native aggregate a join zips is planned on this Spark: one
    with `CoalescedHashPartitioning` (3.5.1 and 4.0 on, SPARK-45592), so that
    it can report reading coalesced ranges of its partitions. On 3.5.0 such
    an aggregate stays Spark's."""
    try:
        spark._jvm.org.apache.spark.util.Utils.classForName(
            "org.apache.spark.sql.catalyst.plans.physical.CoalescedHashPartitioning", False, False)
        return True
    except Exception:  # noqa: BLE001 - py4j's error for a class this Spark lacks
        return False


def final_nodes(df, name):
    """The nodes named `name` of `df`'s executed plan, through adaptive
    execution's final plan and its query stages."""
    todo, found = [df._jdf.queryExecution().executedPlan()], []
    while todo:
        n = todo.pop()
        kind = n.nodeName()
        if kind == name:
            found.append(n)
        if kind == "AdaptiveSparkPlan":
            todo.append(n.executedPlan())
        elif "QueryStage" in kind:
            todo.append(n.plan())
        children = n.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return found


def test_joined_native_aggregates_show_their_shuffles_in_the_sql_tab(local):
    # Two native aggregates joined by their key, adaptive execution on: the
    # join's coalescing runs each one's map stage on a copy of the node, and
    # the node left in the plan shows that shuffle's writes, and its reads,
    # as the exchange it stands for would.
    settings = {"spark.sql.shuffle.partitions": "50", "spark.sluice.sqlAggregate": "true",
                "spark.sql.autoBroadcastJoinThreshold": "-1"}
    with session_conf(local, settings):
        rows = local.range(0, 20000, numPartitions=4)
        left = rows.selectExpr("id % 100 as k", "id as v").groupBy("k").agg(F.sum("v").alias("a"))
        right = rows.selectExpr("id % 50 as k", "id as v").groupBy("k").agg(F.sum("v").alias("b"))
        joined = left.join(right, "k")
        assert len(joined.collect()) == 50
        nodes = final_nodes(joined, "SluiceAggregate")
        native = 2 if joined_aggregates_native(local) else 0
        assert len(nodes) == native, joined._jdf.queryExecution().executedPlan().toString()
        for n in nodes:
            m = n.metrics()
            written, read = (m.apply(k).value() for k in ("shuffleRecordsWritten", "recordsRead"))
            assert written > 0 and read == written, (n.toString(), written, read)


def test_joined_native_aggregates_of_empty_inputs(local):
    # Two native aggregates whose inputs have no partitions at all, joined by
    # their key (a sort-merge join: an empty RDD's size is unknown, so large):
    # no map task ran, and Spark's coalescing of shuffles read together gives
    # such shuffles one empty range; the aggregates cannot read that, and the
    # join stays on their declared partitions. An empty answer, as under the
    # sort shuffle, inner and full outer.
    settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "true",
                "spark.sql.autoBroadcastJoinThreshold": "-1"}
    with session_conf(local, settings):
        empty = local.createDataFrame(local.sparkContext.emptyRDD(), "k long, v long")
        left = empty.groupBy("k").agg(F.sum("v").alias("a"))
        right = empty.groupBy("k").agg(F.sum("v").alias("b"))
        for how in ("inner", "full_outer"):
            joined = left.join(right, "k", how)
            assert joined.collect() == [], how
            final = joined._jdf.queryExecution().executedPlan().toString()
            if joined_aggregates_native(local):
                assert final.count("SluiceAggregate") >= 2, final
            else:
                assert "SluiceAggregate" not in final, final


def test_native_aggregates_coalesce_as_adaptive_execution_does(local):
    # A native aggregate cuts its reads by the same settings as Spark's own
    # coalescing: with a minimum partition count set, that count is the
    # floor whatever parallelismFirst says, and the minimum partition size
    # (1 MiB) still merges small partitions, so a few kilobytes read in as
    # many partitions as Spark's own aggregate of them reads.
    minimum = "spark.sql.adaptive.coalescePartitions.minPartitionNum"
    for first in ("true", "false"):
        settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "true",
                    "spark.sql.adaptive.coalescePartitions.parallelismFirst": first}
        counts = {}
        with session_conf(local, settings):
            local.conf.set(minimum, "7")
            try:
                for native in ("true", "false"):
                    local.conf.set("spark.sluice.sqlAggregate", native)
                    df = (local.range(0, 20000, numPartitions=4)
                          .selectExpr("id % 500 as k", "cast(id as decimal(20, 2)) as v")
                          .groupBy("k").sum("v"))
                    assert df.count() == 500
                    counts[native] = df.rdd.getNumPartitions()
                    plan = df._jdf.queryExecution().executedPlan().toString()
                    assert ("SluiceAggregate" in plan) == (native == "true"), plan
            finally:
                local.conf.unset(minimum)
        assert counts["true"] == counts["false"], (first, counts)


def test_a_native_aggregate_below_a_nested_loop_join_reads_as_spark_s(local):
    # From Spark 4.0, adaptive execution cuts the shuffles below a
    # broadcast nested loop join or a cartesian product (each streamed row
    # meets every row of the other side) to the minimum partition size, not
    # the advisory size, for more tasks; a native aggregate there would cut
    # its reads to the advisory size. It leaves such an aggregate to Spark on
    # those lines, and the join runs in as many tasks as under Spark's own.
    # With parallelism not first, a few megabytes under the 64 MiB advisory
    # size read as one partition on 3.5 under either manager (Spark's and
    # the engine's shuffles differ in size, so only that case compares
    # exactly), as several of 1 MiB from 4.0.
    # A sort-merge join above such a join cuts both its sides' shuffles so:
    # the aggregate joined to the band join's output stays Spark's too.
    settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "true",
                "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
                "spark.sql.autoBroadcastJoinThreshold": "-1"}
    bands = local.range(0, 10).selectExpr("cast(id * 4000 as decimal(20, 2)) as lo",
                                          "cast(id * 4000 + 4000 as decimal(20, 2)) as hi")
    shrinks = (LINE or DEFAULT_LINE) != "3.5"

    def summed(v):
        return (local.range(0, 400000, numPartitions=4)
                .selectExpr("id % 100000 as k", f"cast({v} as decimal(20, 2)) as v")
                .groupBy("k").agg(F.sum("v").alias("s")))

    counts = {}
    with session_conf(local, settings):
        for native in ("true", "false"):
            local.conf.set("spark.sluice.sqlAggregate", native)
            agg = summed("id % 10000")
            joined = agg.join(F.broadcast(bands), (agg.s >= bands.lo) & (agg.s < bands.hi))
            both = joined.join(summed("id % 7").withColumnRenamed("s", "t"), "k")
            for name, df, aggregates in (("band", joined, 1), ("merged", both, 2)):
                assert df.count() == 100000
                counts[native, name] = df.rdd.getNumPartitions()
                plan = df._jdf.queryExecution().executedPlan().toString()
                final = plan.split("== Initial Plan ==")[0]
                assert "BroadcastNestedLoopJoin" in final, plan
                native_ones = aggregates if native == "true" and not shrinks else 0
                if name == "merged" and not joined_aggregates_native(local):
                    native_ones = 0
                assert final.count("SluiceAggregate ") == native_ones, plan
            assert "SortMergeJoin" in final, plan
    for name in ("band", "merged"):
        assert counts["true", name] == counts["false", name], counts
        assert (counts["false", name] > 1) == shrinks, counts


@pytest.mark.skipif(LINE == "3.5", reason="collations came with Spark 4.0")
def test_collated_strings_are_grouped_and_ordered_by_spark(local):
    # A string of a collation other than UTF-8 binary groups and orders by
    # that collation ('a' and 'A' one group under UTF8_LCASE), not by bytes:
    # the native aggregate and sort, which key by bytes, leave it to Spark.
    rows = local.createDataFrame([("a", 1), ("A", 2), ("b", 3), ("B", 4), ("a ", 5)],
                                 "s string, v long")
    c = rows.selectExpr("collate(s, 'UTF8_LCASE') as s", "cast(v as decimal(20, 2)) as v")
    with session_conf(local, {"spark.sql.shuffle.partitions": "5"}):
        agg = c.groupBy("s").agg(F.sum("v").alias("t"))
        got = sorted((r.s.lower(), int(r.t)) for r in agg.collect())
        assert got == [("a", 3), ("a ", 5), ("b", 7)], got
        assert "SluiceAggregate" not in agg._jdf.queryExecution().executedPlan().toString()
        ordered = c.orderBy("s", "v")
        assert [r.v for r in ordered.collect()] == [1, 2, 5, 3, 4]
        assert "SluiceSortExchange" not in ordered._jdf.queryExecution().executedPlan().toString()


def test_a_sort_keeps_the_partition_count_a_user_asked_for(local):
    # repartitionByRange(10, ...) under an ORDER BY of the same columns is one
    # exchange, which Sluice's native sort runs: adaptive execution never
    # coalesces a count the user gave (REPARTITION_BY_NUM), and neither does
    # the native sort (it read all of it as one partition: the rows right,
    # the partitions, and so the files a write makes, not).
    settings = {"spark.sql.shuffle.partitions": "200"}
    with session_conf(local, settings):
        df = local.range(0, 20000, numPartitions=4).repartitionByRange(10, "id").orderBy("id")
        sizes = df.rdd.glom().map(len).collect()
        assert len(sizes) == 10 and sum(sizes) == 20000, sizes
        assert [r.id for r in df.collect()] == list(range(20000))
        final = df._jdf.queryExecution().executedPlan().toString()
        assert "SluiceSortExchange" in final, final


def test_a_global_sort_of_rows_with_no_columns_stays_spark_s(local):
    # Ordered by a scalar subquery, under a count and an OFFSET: every column
    # is pruned, the range exchange carries rows of no columns, and the sort
    # stays Spark's (the native node failed to plan: "an output of 0 of the
    # child's 1 columns"). A sort that keeps a column is still native.
    local.range(0, 2000, numPartitions=3).selectExpr("id", "cast(id % 10 as int) v") \
        .createOrReplaceTempView("zero_t")
    local.range(0, 50, numPartitions=2).selectExpr("cast(id as int) v") \
        .createOrReplaceTempView("zero_t2")
    with session_conf(local, {"spark.sql.shuffle.partitions": "4"}):
        for q, want in [
            ("SELECT count(*) FROM (SELECT * FROM zero_t ORDER BY (SELECT max(v) FROM zero_t2)"
             " OFFSET 5)", 1995),
            ("SELECT count(*) FROM (SELECT id FROM zero_t ORDER BY (SELECT max(v) FROM zero_t2)"
             " OFFSET 5)", 1995),
        ]:
            df = local.sql(q)
            assert df.collect()[0][0] == want, q
            assert "SluiceSortExchange" not in df._jdf.queryExecution().executedPlan().toString()
        kept = local.sql("SELECT id FROM zero_t ORDER BY v DESC, id OFFSET 5")
        assert [r.id for r in kept.collect()] == sorted(range(2000), key=lambda i: (-(i % 10), i))[5:]
        assert "SluiceSortExchange" in kept._jdf.queryExecution().executedPlan().toString()


def test_adaptive_execution_counts_the_shuffles_of_sluices_nodes(local):
    # ORDER BY ... LIMIT over an aggregate of five groups: once the
    # aggregate's exchange has run, adaptive execution knows the limit
    # keeps every row and re-plans without it, a global sort (a range
    # shuffle) in place of Spark's one-task TakeOrderedAndProject. Spark
    # keeps the plan it has because the new one costs a shuffle more; Sluice's
    # sorted exchange must cost that shuffle too (SluiceCostEvaluator), or
    # the extra shuffle looks free and is taken (TPC-DS q66).
    settings = {"spark.sql.shuffle.partitions": "200", "spark.sluice.sqlAggregate": "false"}
    with session_conf(local, settings):
        df = (local.range(0, 20000, numPartitions=2).selectExpr("id % 5 as k", "id as v")
              .groupBy("k").sum("v").orderBy("k").limit(100))
        rows = [(r[0], r[1]) for r in df.collect()]
        assert rows == [(k, sum(range(k, 20000, 5))) for k in range(5)]
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "TakeOrderedAndProject" in plan, plan
        assert "SluiceSortExchange" not in plan, plan


def test_a_query_and_its_subquery_share_a_native_aggregate(local):
    # The same native aggregate in a query and in its scalar subquery, which
    # Spark plans after the query from a copy of the plan in its expression
    # (adaptive execution as it prepares the query, PlanSubqueries without
    # it): one map stage, as Spark reuses an exchange between a query and its
    # subqueries. Sluice finds the subquery's planning by Spark's class that
    # asked for it (QueryToken), on each Spark line; each class it looks for
    # is one this Spark has.
    sc = local.sparkContext
    utils = sc._jvm.org.apache.spark.util.Utils
    sites = utils.classForName("dev.sluice.spark.sql.QueryToken", False, False)
    field = sites.getDeclaredField("SITES")
    field.setAccessible(True)
    names = list(field.get(None).keySet().toArray())
    assert names, "QueryToken.SITES is empty"
    for name in names:
        utils.classForName(name, False, False)  # raises for a class this Spark lacks
    for adaptive in ("true", "false"):
        settings = {"spark.sql.shuffle.partitions": "8", "spark.sluice.sqlAggregate": "true",
                    "spark.sql.adaptive.enabled": adaptive}
        with session_conf(local, settings):
            counts = local.range(0, 20000, numPartitions=4).selectExpr("id % 97 as k")
            counts.groupBy("k").count().createOrReplaceTempView("per_key")
            above = local.sql(
                "SELECT k FROM per_key WHERE count > (SELECT avg(count) FROM per_key)")
            plan = above._jdf.queryExecution().executedPlan().toString()
            assert plan.count("SluiceAggregate") == 2, plan
            group = "subquery-" + adaptive
            sc.setJobGroup(group, group)
            try:
                # 20000 rows over 97 keys: keys 0 to 17 have one row more.
                assert sorted(r["k"] for r in above.collect()) == list(range(18))
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)
            t = sc.statusTracker()
            stages = {s for j in t.getJobIdsForGroup(group) for s in t.getJobInfo(j).stageIds}
            infos = [t.getStageInfo(s) for s in stages]
            ran = [i for i in infos if i is not None and i.numTasks == 4 and i.numCompletedTasks]
            assert len(ran) == 1, (adaptive, [(i.numTasks, i.numCompletedTasks) for i in infos])
