"""Sluice under Spark settings it must follow or refuse: fallback to the sort
shuffle, Spark's codec, and a corrupt block that becomes a fetch failure."""

import collections
import contextlib
import pathlib
import time

import pytest
import workloads
from bench import LINE
from conftest import SLUICE, session, short_of_memory, sluice_metrics, stage_data
from clusters import settled


def test_default_serializer_still_uses_sluice(tmp_path, reference):
    # With Spark's default JavaSerializer, PySpark's shuffles (long keys, byte
    # array values) get Kryo from Spark's serializer manager and SQL's get its
    # row serializer: both relocatable, so both run through Sluice.
    s = session("local[2]", SLUICE, tmp_path, serializer="org.apache.spark.serializer.JavaSerializer")
    try:
        before = sluice_metrics(s)
        assert workloads.reduce_by_key(s) == reference["reduce_by_key"]
        assert workloads.sql_group_by(s) == reference["sql_group_by"]
        assert sluice_metrics(s)["map_outputs"] > before["map_outputs"]
    finally:
        s.stop()


def test_sql_rows_bypass_the_serializer_unless_turned_off(tmp_path, reference):
    # Spark SQL's rows are written into the engine buffer as the exact bytes
    # UnsafeRowSerializer would write, and read back by pointing each row at
    # its bytes in the decoded block (RowShuffleReader); with the setting off
    # they go through the serializer both ways. Both give Spark's answer.
    for direct in ("true", "false"):
        s = session("local[2]", SLUICE, tmp_path / direct, extra={"spark.sluice.sqlRowsDirect": direct})
        try:
            before = sluice_metrics(s)
            assert workloads.sql_group_by(s) == reference["sql_group_by"]
            assert workloads.sql_join(s) == reference["sql_join"]
            after = sluice_metrics(s)
            assert after["map_outputs"] > before["map_outputs"]
            rows = after["sql_rows_direct"] - before["sql_rows_direct"]
            assert (rows > 0) == (direct == "true"), (direct, rows)
            read = after["sql_rows_read"] - before["sql_rows_read"]
            assert (read > 0) == (direct == "true"), (direct, read)
        finally:
            s.stop()


def test_sql_rows_read_stay_put_across_has_next(tmp_path):
    # The row reader hands out one row object pointed at the decoded block;
    # an operator may ask hasNext() before it is done with the row, and that
    # may decode the segment's next block. Every row must keep its bytes
    # meanwhile, and every row must arrive: 300,000 rows from two map tasks
    # into three partitions, several blocks per segment.
    s = session("local[2]", SLUICE, tmp_path, extra={"spark.sql.adaptive.enabled": "false"})
    try:
        before = sluice_metrics(s)
        df = (s.range(0, 300000, numPartitions=2)
              .selectExpr("id", "id % 3 as k", "concat('row ', id) as t").repartition(3, "k"))
        changed, rows = s.sparkContext._jvm.dev.sluice.spark.examples.ReusedRows.changedByHasNext(df._jdf)
        after = sluice_metrics(s)
        assert rows == 300000, rows
        assert changed == 0, f"{changed} rows changed when hasNext() was asked"
        assert after["sql_rows_read"] - before["sql_rows_read"] == 300000
        blocks = after["blocks_decoded"] - before["blocks_decoded"]
        assert blocks > 2 * 3, f"{blocks} blocks: each segment should hold several"
        # And the rows themselves, collected through the same shuffle.
        got = sorted((r.id, r.k, r.t) for r in df.collect())
        assert got == [(i, i % 3, f"row {i}") for i in range(300000)]
    finally:
        s.stop()


def plan_of(df):
    """The physical plan Spark would run for a DataFrame, as text."""
    return df._jdf.queryExecution().executedPlan().toString()


def test_sql_order_by_is_sorted_by_the_engine_unless_turned_off(tmp_path, reference):
    # A global sort becomes SluiceSortExchange (map tasks sort runs, reduce
    # tasks merge them) with adaptive execution on (Spark's default) and off;
    # spark.sluice.sqlSort=false leaves Spark SQL's exchange and sort.
    # The rules read their settings from the session's SQL conf when they
    # plan, so one session goes through the three cases (as a user can).
    cases = [("true", "true"), ("true", "false"), ("false", "false")]
    s = session("local[2]", SLUICE, tmp_path)
    try:
        for native, aqe in cases:
            s.conf.set("spark.sluice.sqlSort", native)
            s.conf.set("spark.sql.adaptive.enabled", aqe)
            m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
            plan = plan_of(s.range(10).selectExpr("-id as x").orderBy("x"))
            assert ("SluiceSortExchange" in plan) == (native == "true"), plan
            sorted_before = m.sortedReads()
            if (native, aqe) == ("true", "true"):
                # Spark's defaults: test_1_local runs the whole workload so; here one order.
                df = s.range(3000, numPartitions=3).selectExpr("-id as x").orderBy("x")
                got = [r.x for r in df.collect()]
                assert got == list(range(-2999, 1)), got[:10]
                # More than 256 partitions, coalesced into a task or two: a
                # task reading partitions 255 and 256 orders by key alone
                # (the engine's partition ids are little-endian, and their
                # bytes once put 256 before 255).
                s.conf.set("spark.sql.shuffle.partitions", "600")
                df = s.range(200000, numPartitions=2).selectExpr("id * 7919 % 200000 as x")
                got = [r.x for r in df.orderBy("x").collect()]
                s.conf.unset("spark.sql.shuffle.partitions")
                assert got == list(range(200000)), [
                    (i, x) for i, x in enumerate(got) if x != i][:5]
            else:
                assert workloads.sql_order_by(s) == reference["sql_order_by"]
            assert (m.sortedReads() > sorted_before) == (native == "true")
            # Two columns are encoded; a key type Sluice does not encode stays Spark's.
            plan = plan_of(s.range(10).selectExpr("id", "-id as x").orderBy("x", "id"))
            assert ("SluiceSortExchange" in plan) == (native == "true"), plan
            plan = plan_of(s.range(10).selectExpr("cast(id as decimal(30, 2)) as x", "string(id) as y")
                           .orderBy("y", "x"))
            assert ("SluiceSortExchange" in plan) == (native == "true"), plan
            # Expressions are computed into columns below the node, dropped after the read.
            from pyspark.sql.functions import expr
            df = s.range(10).selectExpr("id", "string(id) as t")
            plan = plan_of(df.orderBy(expr("pmod(id, 3)").desc(), expr("upper(t)")))
            assert ("SluiceSortExchange" in plan) == (native == "true"), plan
            plan = plan_of(s.range(10).selectExpr("array(id) as x").orderBy("x"))
            assert "SluiceSortExchange" not in plan, "arrays are not encoded: " + plan
    finally:
        s.stop()


def test_sql_order_by_reads_one_task_per_range_with_coalescing_off(tmp_path):
    # Adaptive execution's coalescing off: a native global sort reads one
    # task per range its sample gave, as many as asked for when the keys are
    # many, fewer (never a range that does not exist) when they are few.
    s = session("local[2]", SLUICE, tmp_path,
                extra={"spark.sql.adaptive.coalescePartitions.enabled": "false",
                       "spark.sql.shuffle.partitions": "7"})
    tracker = s.sparkContext.statusTracker()

    def read_tasks(group):
        last = tracker.getJobInfo(max(tracker.getJobIdsForGroup(group)))
        return tracker.getStageInfo(max(last.stageIds)).numTasks

    try:
        many = s.range(30000, numPartitions=3).selectExpr("-id as x").orderBy("x")
        assert "SluiceSortExchange" in plan_of(many), plan_of(many)
        s.sparkContext.setJobGroup("many", "many")
        assert [r.x for r in many.collect()] == list(range(-29999, 1))
        assert read_tasks("many") == 7
        few = s.range(30000, numPartitions=3).selectExpr("id % 3 as k", "id").orderBy("k")
        s.sparkContext.setJobGroup("few", "few")
        assert [r.k for r in few.collect()] == [0] * 10000 + [1] * 10000 + [2] * 10000
        # Three keys: the sample's bounds are among them, so at most four ranges.
        assert 1 < read_tasks("few") <= 4
    finally:
        s.stop()


def test_sql_aggregate_runs_in_the_engine_unless_turned_off(tmp_path, reference):
    # With spark.sluice.sqlAggregate=true every aggregate the engine computes
    # as Spark does becomes SluiceAggregate (the engine aggregates map side
    # and reduce side), with adaptive execution on and off; false leaves
    # Spark SQL's plan; auto (the default) takes only a sum or average whose
    # Spark buffer is a decimal wider than a long.
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import ArithmeticException
    from pyspark.sql import functions as F

    # Spark 4 raises a task's overflow itself; Spark 3.5 (the sort shuffle as
    # well) reports it as the job's failure, a Py4JJavaError naming it.
    overflow = Py4JJavaError if LINE == "3.5" else ArithmeticException

    # One session through the three cases (the settings are read when a
    # query is planned).
    cases = [("true", "true"), ("true", "false"), ("false", "false")]
    s = session("local[2]", SLUICE, tmp_path)
    # The overflow checks below need ANSI arithmetic: Spark 4's default, not
    # Spark 3.5's.
    s.conf.set("spark.sql.ansi.enabled", "true")
    try:
        for native, aqe in cases:
            s.conf.set("spark.sluice.sqlAggregate", native)
            s.conf.set("spark.sql.adaptive.enabled", aqe)
            df = s.range(100).selectExpr(
                "id % 7 as k", "id as v", "id / 3 as d", "id % 2 as j",
                "cast(id % 7 as int) as ki", "cast(id as int) as vi")
            plan = plan_of(df.groupBy("k").count())
            assert ("SluiceAggregate" in plan) == (native == "true"), plan
            for q in [
                df.groupBy(F.col("k") + 1).count(),
                df.groupBy("k").agg(F.min("v")),
                df.groupBy("ki").agg(F.max("vi")),
                df.groupBy(F.col("k").cast("string")).agg(F.sum("v")),
                df.groupBy("k").agg(F.max(F.col("v") + 1)),
                # Several functions, several keys, a decimal key: lanes.
                df.groupBy("k").agg(F.sum("v"), F.count("*")),
                df.groupBy("k", "j").count(),
                df.groupBy(F.col("k").cast("decimal(10,2)")).count(),
                df.groupBy("k", "j").agg(F.avg(F.col("v").cast("decimal(12,2)")), F.min("vi")),
            ]:
                plan = plan_of(q)
                assert ("SluiceAggregate" in plan) == (native == "true"), plan
            s.conf.set("spark.sluice.sqlAggregate", "auto" if native == "true" else native)
            for q, wide in [
                (df.groupBy("k").count(), False),
                (df.groupBy("k", "j").agg(F.sum("v"), F.avg("vi")), False),
                (df.groupBy("k").agg(F.sum(F.col("v").cast("decimal(7,2)"))), False),
                (df.groupBy("k").agg(F.sum(F.col("v").cast("decimal(9,2)"))), True),
                (df.groupBy("k", "j").agg(F.count("*"), F.avg(F.col("v").cast("decimal(15,2)"))),
                 True),
                # An expand below (ROLLUP): many groups, Spark's.
                (df.rollup("k", "j").agg(F.sum(F.col("v").cast("decimal(15,2)"))), False),
            ]:
                plan = plan_of(q)
                assert ("SluiceAggregate" in plan) == (wide and native == "true"), plan
            s.conf.set("spark.sluice.sqlAggregate", native)
            assert workloads.sql_aggregate(s) == reference["sql_aggregate"]
            assert workloads.sql_aggregate_lanes(s) == reference["sql_aggregate_lanes"]
            # What the engine does not compute as Spark does stays Spark's:
            # a double sum or average, try_sum, a distinct count, a double
            # key, a double expression, collect_list.
            for q in [
                df.groupBy("k").agg(F.sum("d")),
                df.groupBy("k", "j").agg(F.sum("d"), F.count("*")),
                df.groupBy("k", "j").agg(F.avg("d")),
                df.groupBy("k").agg(F.expr("try_sum(v)")),
                df.groupBy("k").agg(F.countDistinct("v")),
                df.groupBy("d", "k").count(),
                df.groupBy("k").agg(F.max(F.col("d") * 2)),
                df.groupBy("k", "j").agg(F.collect_list("v")),
                # rand() in a result: Spark seeds it per partition (it ran
                # natively once, unseeded: a NullPointerException, Spark's
                # SubquerySuite "COUNT bug with non-foldable expression").
                df.groupBy("k").agg((F.count("*") + F.rand(7)).alias("r")),
            ]:
                assert "SluiceAggregate" not in plan_of(q), plan_of(q)
                assert len(q.collect()) > 0
            # An ANSI sum (Spark 4's default) that overflows fails, as Spark's
            # does, with Spark's error (on Spark 4 PySpark's ArithmeticException,
            # which callers catch): folded on the task thread (few keys), and in the engine
            # (in each of two map tasks 3,000 keys fill the task thread's
            # table first, so the two large values of key -1 pass through
            # to the engine, whose exact sum flags the overflow).
            near = s.range(0, 8, numPartitions=2).selectExpr(
                "id % 2 as k", "id + 9223372036854775800 as v")
            with pytest.raises(overflow, match="ARITHMETIC_OVERFLOW"):
                near.groupBy("k").sum("v").collect()
            late = s.range(0, 6004, numPartitions=2).selectExpr(
                "if(id % 3002 < 3000, id, -1) as k",
                "if(id % 3002 < 3000, 1, 4611686018427387904) as v")
            with pytest.raises(overflow, match="ARITHMETIC_OVERFLOW") as error:
                late.groupBy("k").sum("v").collect()
            if native == "true":
                assert "the engine's exact sum" in str(error.value), str(error.value)
            # The same by two keys (lanes): a long sum flags its overflow in
            # the engine, a decimal sum beyond 38 digits fails as Spark's.
            late2 = late.selectExpr("k", "k % 2 as j", "v")
            with pytest.raises(overflow, match="ARITHMETIC_OVERFLOW") as error:
                late2.groupBy("k", "j").sum("v").collect()
            if native == "true":
                assert "the engine's sum of a group" in str(error.value), str(error.value)
            wide = late.selectExpr(
                "k", "k % 2 as j",
                "cast(99999999999999999999999999999999999999 as decimal(38,0)) as w")
            with pytest.raises(overflow, match="ARITHMETIC_OVERFLOW"):
                wide.groupBy("k", "j").agg(F.sum("w"), F.count("*")).collect()
    finally:
        s.stop()


class SpillWatch:
    """Watches a directory tree while a job runs for the engine's spill
    files (`sluice-spill-*`): whether any appeared and the modes of the
    directories holding them."""

    def __init__(self, root):
        import threading

        self.root, self.seen, self.modes = pathlib.Path(root), False, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.wait(0.01):
            # Spark deletes its temporary directories while a walk is in them:
            # that walk ends and the next one starts (the thread died once).
            with contextlib.suppress(FileNotFoundError):
                for f in self.root.rglob("sluice-spill-*"):
                    with contextlib.suppress(FileNotFoundError):
                        self.modes.add(f.parent.stat().st_mode & 0o777)
                        self.seen = True

    def left(self):
        return [str(f) for f in self.root.rglob("sluice-spill-*")]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# Spark's memory manager cut to 32 MiB (about 9 MiB of execution memory per
# task), two reduce tasks, no adaptive coalescing.
SHORT_OF_MEMORY = short_of_memory(32, 2, adaptive=False)


def stage_spills(spark):
    """(memory, disk) bytes spilled that Spark's status store reports for
    each stage of the session, in stage order: what its UI shows as Spill
    (Memory) and Spill (Disk)."""
    return [(st.memoryBytesSpilled(), st.diskBytesSpilled()) for st in stage_data(spark)]


def test_sql_order_by_reduce_side_spills_when_spark_grants_too_little(tmp_path):
    # Spark's memory manager cut to 32 MiB (about 9 MiB of execution memory
    # per task) and two reduce tasks of about 25 MiB of rows each: the reduce
    # tasks are granted less than their runs need, write the rest to disk,
    # and still merge every row into order.
    s = session("local[2]", SLUICE, tmp_path, extra=SHORT_OF_MEMORY)
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        short, spilled = m.reduceShortGrants(), m.reduceSpilledRuns()
        n = 300000
        df = s.range(0, n, numPartitions=4).selectExpr(
            "id",
            "substr(unhex(sha2(cast(id as string), 256)), 1, 10) as b",
            "concat(repeat('x', 120), cast(id as string)) as pad",
        )
        # (The pad is used after the sort, so the optimizer keeps it in the shuffle.)
        with SpillWatch(tmp_path) as watch:
            rows = df.orderBy("b").selectExpr("b", "length(pad) - 120 as p", "id").collect()
        # The runs spilled into Spark's local directories, in task directories
        # only the executor's user can enter, all removed at the task's end.
        assert watch.seen, "no spill file appeared under spark.local.dir"
        assert watch.modes == {0o700}, watch.modes
        assert watch.left() == [], watch.left()
        assert all(r.p == len(str(r.id)) for r in rows)
        got = [bytes(r.b) for r in rows]
        assert len(got) == n
        assert got == sorted(got)
        assert len(set(got)) == n, "every row once"
        assert m.reduceShortGrants() > short
        assert m.reduceSpilledRuns() > spilled
        # Spark's spill metrics of the reduce stage: the runs as they were in
        # memory (their rows' bytes, at least the 25 MiB or so the tasks could
        # not keep), and what went to disk.
        memory, disk = stage_spills(s)[-1]
        assert memory > 4 << 20 and disk > 4 << 20, (memory, disk)
    finally:
        s.stop()


def test_sql_aggregate_reduce_side_spills_when_spark_grants_too_little(tmp_path):
    # The engine's final aggregate keeps its table in memory Spark's memory
    # manager grants the reduce task (32 MiB in all here, about 9 MiB of
    # execution memory per task): two reduce tasks of 400,000 groups each
    # are granted less than their tables need, write sorted runs into a
    # task directory under spark.local.dir, and still give every group's
    # exact count. (Before, the state came from the engine's shared reduce
    # pool, whatever Spark granted.)
    from pyspark.sql import functions as F

    s = session("local[2]", SLUICE, tmp_path, extra=SHORT_OF_MEMORY)
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        short, spilled = m.reduceShortGrants(), m.reduceSpilledRuns()
        n, keys = 1_600_000, 800_000
        grouped = s.range(0, n, numPartitions=4).selectExpr(f"id % {keys} as k").groupBy("k").count()
        assert "SluiceAggregate" in plan_of(grouped), plan_of(grouped)
        with SpillWatch(tmp_path) as watch:
            got = grouped.agg(
                F.count("*").alias("groups"), F.min("count").alias("lo"),
                F.max("count").alias("hi"), F.sum("k").alias("ks")).collect()[0]
        assert (got.groups, got.lo, got.hi) == (keys, 2, 2), got
        assert got.ks == keys * (keys - 1) // 2, got
        assert watch.seen, "no spill file appeared under spark.local.dir"
        assert watch.modes == {0o700}, watch.modes
        assert watch.left() == [], watch.left()
        assert m.reduceShortGrants() > short
        assert m.reduceSpilledRuns() > spilled
        # The stage of the aggregate's reduce side reports its spilled tables.
        spills = stage_spills(s)
        assert any(memory > 0 and disk > 0 for memory, disk in spills), spills
    finally:
        s.stop()


def test_a_native_aggregate_gives_its_memory_to_a_sort_above_it(tmp_path):
    # A native aggregate's reduce task holds as much execution memory as
    # Spark grants it (its table, then its results, all in memory once the
    # input ends); a window's sort above it in the same task (the groups are
    # already partitioned by the window's key, so no exchange between) then
    # asks for its first page. The aggregate's results must go to disk and
    # give the grant back, as Spark's own consumers spill for each other;
    # before, the sort failed with UNABLE_TO_ACQUIRE_MEMORY where Spark's
    # sort shuffle runs the query.
    s = session("local[2]", SLUICE, tmp_path, extra={
        **short_of_memory(64, 4), "spark.sluice.sqlAggregate": "auto"})
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        spilled = m.reduceSpilledRuns()
        n, groups = 3_000_000, 1_000_000
        ranked = s.sql(f"""
            SELECT k, t, rank() OVER (PARTITION BY k ORDER BY t) AS r FROM
              (SELECT id % {groups} AS k, sum(cast(id AS decimal(18,4))) AS t
               FROM range({n}) GROUP BY id % {groups})""")
        # sum of a decimal(18,4): a native aggregate under the default (auto).
        assert "SluiceAggregate" in plan_of(ranked), plan_of(ranked)
        got = ranked.selectExpr("count(*) AS c", "sum(r) AS r", "sum(t) AS t").collect()[0]
        assert (got.c, got.r) == (groups, groups), got
        assert got.t == n * (n - 1) // 2, got
        assert m.reduceSpilledRuns() > spilled, "the aggregate's results never went to disk"
        assert m.liveReduceOperators() == 0
    finally:
        s.stop()


def test_a_native_sort_gives_its_memory_to_a_sort_above_it(tmp_path):
    # A native ORDER BY's reduce task (one, so that it is granted all of
    # Spark's execution memory) keeps its runs in that memory; a window
    # above it (partitioned by the ORDER BY's key, which its range
    # partitioning already satisfies, so no exchange between) has Spark
    # sort the rows again in the same task, and that sort asks for memory
    # for its pages. The native sort's runs still in
    # memory must go to disk and the grant back to Spark, its merge going
    # on from disk, as Spark's own consumers spill for each other. Before,
    # the sort above failed with UNABLE_TO_ACQUIRE_MEMORY.
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    s = session("local[2]", SLUICE, tmp_path, extra=short_of_memory(64, 1, adaptive=False))
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        given = m.reduceGivenBack()
        n = 600000
        df = s.range(0, n, numPartitions=4).selectExpr(
            "id", "substr(unhex(sha2(cast(id as string), 256)), 1, 10) as b",
            "concat(repeat('x', 60), cast(id as string)) as pad")
        ranked = df.orderBy("b").withColumn(
            "r", F.row_number().over(Window.partitionBy("b").orderBy("id")))
        plan = plan_of(ranked)
        assert "SluiceSortExchange" in plan and "Window" in plan, plan
        rows = ranked.selectExpr("b", "length(pad) - 60 as p", "id", "r").collect()
        assert all(r.p == len(str(r.id)) and r.r == 1 for r in rows)
        got = [bytes(r.b) for r in rows]
        assert got == sorted(got), "rows out of order"
        assert sorted(r.id for r in rows) == list(range(n)), "every row once"
        assert m.reduceGivenBack() > given, "the native sort's runs never went to disk"
        assert m.liveReduceOperators() == 0
    finally:
        s.stop()


def test_encryption_falls_back_to_sort_shuffle(tmp_path, reference):
    s = session("local[2]", SLUICE, tmp_path, extra={"spark.io.encryption.enabled": "true"})
    try:
        before = sluice_metrics(s)
        assert workloads.reduce_by_key(s) == reference["reduce_by_key"]
        assert workloads.sql_join(s) == reference["sql_join"]
        # The native ORDER BY needs a Sluice shuffle: Spark SQL sorts (its
        # answers are the reference's own code path, so only the plan is checked).
        assert "SluiceSortExchange" not in plan_of(s.range(10).selectExpr("-id as x").orderBy("x"))
        # Nor does an aggregate run in the engine.
        assert "SluiceAggregate" not in plan_of(s.range(10).selectExpr("id % 3 as k").groupBy("k").count())
        assert workloads.sql_aggregate(s) == reference["sql_aggregate"]
        # Sluice does not encrypt: every shuffle ran on Spark's sort shuffle.
        after = sluice_metrics(s)
        assert after["map_outputs"] == before["map_outputs"]
        assert after["blocks_decoded"] == before["blocks_decoded"]
    finally:
        s.stop()


def test_zstd_codec_follows_spark_setting(tmp_path, reference):
    s = session("local[2]", SLUICE, tmp_path, extra={"spark.io.compression.codec": "zstd"})
    try:
        assert workloads.wordcount(s) == reference["wordcount"]
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert data, "no shuffle data files written"
        head = data[-1].read_bytes()[:6]
        assert head[:4] == b"SLBK" and head[5] == 2, head  # codec byte 2: zstd
    finally:
        s.stop()


def test_corrupt_block_is_a_fetch_failure_and_recomputed(tmp_path, reference):
    s = session("local[2]", SLUICE, tmp_path)
    try:
        sc = s.sparkContext
        shuffled = workloads.pairs(sc, 20000, 500, 4).partitionBy(6)
        assert shuffled.count() == 20000  # map stage done, outputs on disk
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert data
        for f in data:  # flip a byte in the middle of every map output
            b = bytearray(f.read_bytes())
            if len(b) > 100:
                b[len(b) // 2] ^= 0xFF
                f.write_bytes(bytes(b))
        # The next job reuses the map outputs, finds them corrupt, fails the
        # fetch, reruns the map stage and still returns the right records.
        assert workloads.per_partition_sorted(shuffled) == reference["partition_by_key"]
    finally:
        s.stop()


_OPERATOR_STATE_JOB = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import SLUICE, session
s = session("local[2]", SLUICE, sys.argv[2], extra={
    "spark.sluice.operatorStateBytes": sys.argv[3], "spark.sluice.operatorSpill": sys.argv[4]})
job = s.sparkContext._jvm.dev.sluice.spark.examples.ReduceByKeyJob
m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
jsc = s.sparkContext._jsc
spark_way = list(job.checksum(jsc, 300000, 5000, 4, 6, False))
before = m.bytesWritten()
sluice_way = list(job.checksum(jsc, 300000, 5000, 4, 6, True))
print(json.dumps({"spark": spark_way, "sluice": sluice_way, "bytes": m.bytesWritten() - before}))
s.stop()
"""


def test_operator_state_setting_reaches_the_engine(tmp_path):
    # The engine is opened once per JVM with the settings of its first
    # shuffle, so each setting gets a JVM of its own (a child process).
    # 5,000 keys fit the default 16 MB of map-side state, so each map task
    # emits one partial per key; 64 KiB holds a few hundred groups per
    # partition, so the map side spills its state and writes more partials.
    # Spilling by eviction at 64 KiB writes a different number of partials
    # than spilling state (the setting reached the engine). Every answer is
    # Spark's.
    import json
    import subprocess
    import sys

    out = {}
    for state, spill in (("16m", "state"), ("64k", "state"), ("64k", "evict")):
        p = subprocess.run(
            [sys.executable, "-c", _OPERATOR_STATE_JOB, str(pathlib.Path(__file__).parent),
             str(tmp_path / f"{state}-{spill}"), state, spill],
            capture_output=True, text=True, timeout=300,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
        assert got["spark"][0] == 5000
        assert got["sluice"] == got["spark"], (state, spill, got)
        out[(state, spill)] = got
    assert out[("64k", "state")]["bytes"] > 1.5 * out[("16m", "state")]["bytes"], out
    assert out[("64k", "evict")]["bytes"] != out[("64k", "state")]["bytes"], out


def stage_tasks(s, group):
    """Task counts of the stages the jobs of a job group ran."""
    t = s.sparkContext.statusTracker()
    stages = {st for j in t.getJobIdsForGroup(group) for st in t.getJobInfo(j).stageIds}
    infos = [t.getStageInfo(st) for st in sorted(stages)]
    return [i.numTasks for i in infos if i is not None]


def test_native_sql_nodes_coalesce_small_partitions_as_adaptive_execution_does(tmp_path):
    # At 200 shuffle partitions (Spark's default) of a few kilobytes each,
    # adaptive execution reads the sort shuffle's partitions in one task;
    # Sluice's native aggregate and sort run their shuffles inside a stage,
    # so they take the same statistics and cut their reads the same way.
    # Below a sort-merge join the aggregate and the join's other side are
    # read in the same coalesced ranges (the join zips their partitions).
    from pyspark.sql import functions as F

    extra = {"spark.sql.shuffle.partitions": "200", "spark.sql.autoBroadcastJoinThreshold": "-1"}
    s = session("local[2]", SLUICE, tmp_path, extra=extra)
    try:
        sc = s.sparkContext
        keys = s.range(0, 20000, numPartitions=2).selectExpr("id % 97 as k")
        grouped = keys.groupBy("k").count()
        assert "SluiceAggregate" in plan_of(grouped), plan_of(grouped)
        sc.setJobGroup("aggregate", "aggregate")
        counts = {r["k"]: r["count"] for r in grouped.collect()}
        assert counts == {k: len(range(k, 20000, 97)) for k in range(97)}
        assert max(stage_tasks(s, "aggregate")) <= 4, stage_tasks(s, "aggregate")

        ordered = s.range(0, 20000, numPartitions=2).selectExpr("-id as x").orderBy("x")
        assert "SluiceSortExchange" in plan_of(ordered), plan_of(ordered)
        sc.setJobGroup("sort", "sort")
        assert [r["x"] for r in ordered.collect()] == list(range(-19999, 1))
        assert max(stage_tasks(s, "sort")) <= 4, stage_tasks(s, "sort")

        other = s.range(0, 97).selectExpr("id as k", "id * 2 as w")
        joined = grouped.join(other, "k")
        assert "SluiceAggregate" in plan_of(joined) and "SortMergeJoin" in plan_of(joined)
        sc.setJobGroup("join", "join")
        rows = {r["k"]: (r["count"], r["w"]) for r in joined.collect()}
        assert rows == {k: (counts[k], 2 * k) for k in range(97)}
        assert max(stage_tasks(s, "join")) <= 4, stage_tasks(s, "join")
        # An aggregate of an aggregate joined to it (TPC-DS q01's shape): the
        # native aggregate keeps its count for the join, but its input, a
        # shuffle it aggregates again by its own key, is read coalesced.
        pairs = s.range(0, 20000, numPartitions=2).selectExpr("id % 97 as k", "id % 13 as j")
        inner = pairs.groupBy("k", "j").agg(F.sum(F.col("j").cast("double")).alias("t"))
        outer = inner.groupBy("k").count().withColumnRenamed("count", "n")
        nested = inner.join(outer, "k")
        assert "SluiceAggregate" in plan_of(nested) and "SortMergeJoin" in plan_of(nested)
        sc.setJobGroup("nested", "nested")
        sums = collections.Counter()
        for x in range(20000):
            sums[(x % 97, x % 13)] += x % 13
        per_k = collections.Counter(k for k, _ in sums)
        got = sorted((r["k"], r["j"], r["t"], r["n"]) for r in nested.collect())
        assert got == sorted((k, j, float(t), per_k[k]) for (k, j), t in sums.items())
        assert max(stage_tasks(s, "nested")) <= 4, stage_tasks(s, "nested")
        # With coalescing off the join reads all 200 partitions.
        s.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
        sc.setJobGroup("join-200", "join-200")
        again = grouped.join(other, "k")
        assert {r["k"]: (r["count"], r["w"]) for r in again.collect()} == rows
        assert 200 in stage_tasks(s, "join-200"), stage_tasks(s, "join-200")
        s.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "true")

        # The same aggregate twice in one query (TPC-H Q18's shape; a
        # self-join gives the copies new expression ids): one map stage,
        # read by both, as Spark's ReusedExchange; the query's shuffles are
        # let go when it ends.
        twice = grouped.join(grouped.withColumnRenamed("count", "again"), "k")
        assert plan_of(twice).count("SluiceAggregate") == 2, plan_of(twice)
        sc.setJobGroup("twice", "twice")
        rows = {r["k"]: (r["count"], r["again"]) for r in twice.collect()}
        assert rows == {k: (counts[k], counts[k]) for k in range(97)}
        assert map_stages_run(s, "twice") == 1, stage_infos(s, "twice")
        assert max(stage_tasks(s, "twice")) <= 4, stage_tasks(s, "twice")
        # The same aggregate in a query and in its scalar subquery, planned
        # after the query from a copy of its plan: one map stage, as Spark
        # reuses an exchange between a query and its subqueries.
        grouped.createOrReplaceTempView("grouped")
        sc.setJobGroup("subquery", "subquery")
        above = s.sql("SELECT k FROM grouped WHERE count > (SELECT avg(count) FROM grouped)")
        assert plan_of(above).count("SluiceAggregate") == 2, plan_of(above)
        mean = sum(counts.values()) / len(counts)
        assert sorted(r["k"] for r in above.collect()) == [k for k in range(97) if counts[k] > mean]
        assert map_stages_run(s, "subquery") == 1, stage_infos(s, "subquery")
        # Queries that inherit one execution id (PySpark's `df.rdd` jobs
        # inside `foreachBatch`) over a file rewritten between them (to the
        # same length: the text RDD keeps its splits): each reads its own
        # shuffle, never an earlier query's of an equal aggregate. Two equal
        # aggregates; then a view's aggregate in a scalar subquery (Spark
        # plans it from the view's own plan nodes) and the view alone.
        data = tmp_path / "numbers.txt"
        data.write_text("\n".join("%04d" % i for i in range(100)))
        base = s.createDataFrame(
            sc.textFile(str(data)).map(lambda x: (int(x) % 5, int(x))), "k long, v long")
        stream_dir = tmp_path / "stream"
        stream_dir.mkdir()
        (stream_dir / "one.json").write_text('{"x": 1}\n')
        seen = {}

        def each(batch, batch_id):
            seen["first"] = sorted(tuple(r) for r in base.groupBy("k").sum("v").rdd.collect())
            data.write_text("\n".join("%04d" % (3 * i) for i in range(100)))
            seen["second"] = sorted(tuple(r) for r in base.groupBy("k").sum("v").rdd.collect())
            sub = s.sql("SELECT (SELECT max(t + k) FROM sums) AS m FROM range(1)")
            seen["plans"] = (plan_of(sub), plan_of(s.table("sums")))
            seen["subquery"] = [r["m"] for r in sub.rdd.collect()]
            data.write_text("\n".join("%04d" % (7 * i) for i in range(100)))
            seen["view"] = sorted(tuple(r) for r in s.table("sums").rdd.collect())
            # A query planned, not yet run, holds its subquery's plan; a
            # query equal to that plan (the subquery's DataFrame alone) is a
            # query of its own, not that subquery: the first query's
            # aggregate, equal to the second's, reads its own shuffle.
            above = text_sums().filter(F.col("t") >= largest.scalar())
            above._jdf.queryExecution().sparkPlan()
            seen["largest"] = [r["m"] for r in largest.alias("alone").rdd.collect()]
            data.write_text("\n".join("%04d" % (11 * i) for i in range(100)))
            seen["above"] = sorted(tuple(r) for r in above.rdd.collect())
            seen["execution"] = sc.getLocalProperty("spark.sql.execution.id")

        def text_sums():
            rows = s.read.text(str(data)).selectExpr(
                "cast(value as long) % 5 as k", "cast(value as long) as v")
            return rows.groupBy("k").agg(F.sum("v").alias("t"))

        largest = text_sums().select(F.max("t").alias("m"))
        assert "SluiceAggregate" in plan_of(largest), plan_of(largest)

        assert "SluiceAggregate" in plan_of(base.groupBy("k").sum("v"))
        base.groupBy("k").agg(F.sum("v").alias("t")).createOrReplaceTempView("sums")
        q = (s.readStream.schema("x long").json(str(stream_dir)).writeStream.foreachBatch(each)
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
             .start())
        q.awaitTermination()
        assert seen["execution"] is not None, seen

        def sums_by_key(m):
            return [(k, sum(m * i for i in range(100) if m * i % 5 == k)) for k in range(5)]

        assert seen["first"] == sums_by_key(1), seen
        assert seen["second"] == sums_by_key(3), seen
        assert all("SluiceAggregate" in p for p in seen["plans"]), seen["plans"]
        assert seen["subquery"] == [max(t + k for k, t in sums_by_key(3))], seen
        assert seen["view"] == sums_by_key(7), seen
        assert seen["largest"] == [max(t for _, t in sums_by_key(7))], seen
        top = max(t for _, t in sums_by_key(11))
        assert seen["above"] == [(k, t) for k, t in sums_by_key(11) if t == top], seen
        reuse = sc._jvm.dev.sluice.spark.sql.ShuffleReuse
        deadline = time.monotonic() + 30
        while reuse.executionsHeld() > 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert reuse.executionsHeld() == 0
    finally:
        s.stop()


def test_native_nodes_leave_subqueries_and_escaping_partitionings_to_spark(tmp_path):
    # Shapes a review found failing under the native nodes, each against
    # its answer computed here. A subquery in an aggregate's argument or a
    # sort key: Spark runs it for its own nodes' expressions only, so the
    # native form would find it not run. A cached or checkpointed aggregate,
    # and an aggregate joined with a cached table: a later join relies on
    # the partitioning they report, so they may not read in fewer ranges
    # than they declare (it zipped 1 partition with 6); nor may an aggregate
    # whose count a repartition ending the query fixes.
    from decimal import Decimal

    from pyspark.sql import functions as F

    extra = {"spark.sql.autoBroadcastJoinThreshold": "-1"}
    s = session("local[2]", SLUICE, tmp_path, extra=extra)
    try:
        money = s.range(0, 100).selectExpr("id % 5 as k", "cast(id as decimal(12,2)) as d")
        money.createOrReplaceTempView("money")
        q = s.sql("SELECT k, sum(d - (SELECT avg(d) FROM money)) AS dev FROM money GROUP BY k")
        assert "SluiceAggregate" not in plan_of(q), plan_of(q)
        assert sorted((r["k"], r["dev"]) for r in q.collect()) == [
            (k, Decimal(20 * k - 40)) for k in range(5)]
        # A native sort computes such a key in Spark's own projection below it.
        ordered = s.sql("SELECT id FROM range(50) ORDER BY id % 7 + (SELECT max(id) FROM range(3)),"
                        " id")
        assert [r["id"] for r in ordered.collect()] == sorted(range(50), key=lambda i: (i % 7, i))

        sums = {k: Decimal(sum(range(k, 1000, 50))) for k in range(50)}
        expected = sorted((k, sums[k], 2 * k) for k in range(50))
        other = s.range(0, 100).selectExpr("id as k", "id * 2 as w")

        def native_aggregate():
            agg = s.range(0, 1000).selectExpr("id % 50 as k", "cast(id as decimal(12,2)) as d")
            agg = agg.groupBy("k").agg(F.sum("d").alias("s"))
            assert "SluiceAggregate" in plan_of(agg), plan_of(agg)
            return agg

        cached = native_aggregate().cache()
        try:
            cached.count()
            rows = cached.join(other, "k").collect()
            assert sorted((r["k"], r["s"], r["w"]) for r in rows) == expected
        finally:
            cached.unpersist()
        s.conf.set("spark.sql.adaptive.enabled", "false")
        try:
            rows = native_aggregate().localCheckpoint().join(other, "k").collect()
            assert sorted((r["k"], r["s"], r["w"]) for r in rows) == expected
        finally:
            s.conf.set("spark.sql.adaptive.enabled", "true")
        table = s.range(0, 1000).selectExpr("id % 50 as k", "id as w").repartition("k").cache()
        try:
            table.count()
            rows = native_aggregate().join(table, "k").collect()
            assert sorted((r["k"], r["s"], r["w"]) for r in rows) == sorted(
                (w % 50, sums[w % 50], w) for w in range(1000))
        finally:
            table.unpersist()
        # A query that ends in a repartition to the count its aggregate
        # already has: Spark drops the repartition's exchange and keeps that
        # count, with and without adaptive execution; so does the native
        # aggregate (it read all in one range).
        for adaptive in ("true", "false"):
            s.conf.set("spark.sql.adaptive.enabled", adaptive)
            out = native_aggregate().repartition(6, "k").select(
                "k", "s", F.spark_partition_id().alias("p"), F.expr("pmod(hash(k), 6)").alias("h"))
            assert "SluiceAggregate" in plan_of(out), plan_of(out)
            assert out.rdd.getNumPartitions() == 6
            rows = out.collect()
            assert sorted((r["k"], r["s"]) for r in rows) == sorted(sums.items())
            assert all(r["p"] == r["h"] for r in rows), rows
            # The same over a join of two native aggregates, whose reads
            # JoinCoalesce would cut in the final stage.
            both = native_aggregate().join(native_aggregate().withColumnRenamed("s", "t"), "k")
            out = both.repartition(6, "k").select(
                "k", "s", "t", F.spark_partition_id().alias("p"),
                F.expr("pmod(hash(k), 6)").alias("h"))
            assert out.rdd.getNumPartitions() == 6
            rows = out.collect()
            assert sorted((r["k"], r["s"], r["t"]) for r in rows) == sorted(
                (k, v, v) for k, v in sums.items())
            assert all(r["p"] == r["h"] for r in rows), rows
        s.conf.set("spark.sql.adaptive.enabled", "true")
    finally:
        s.stop()


def stage_infos(s, group):
    """(tasks, completed tasks) of the stages the jobs of a job group ran."""
    t = settled(s.sparkContext, group)
    stages = {st for j in t.getJobIdsForGroup(group) for st in t.getJobInfo(j).stageIds}
    infos = [t.getStageInfo(st) for st in sorted(stages)]
    return [(i.numTasks, i.numCompletedTasks) for i in infos if i is not None]


def map_stages_run(s, group):
    """Stages of a job group that ran the range's two map tasks."""
    return sum(1 for tasks, done in stage_infos(s, group) if done == 2 and tasks == 2)


def test_an_exchange_above_two_copies_of_a_native_aggregate_runs_once(tmp_path):
    # TPC-DS q23's shape: a CTE whose native aggregate (a sum of a wide
    # decimal, which the engine takes under `auto`) a query uses twice, each
    # copy below an exchange of Spark's own (an aggregate of Spark's by
    # another key). Spark reuses an exchange whose subtree is equal to
    # another's by their canonical plans; the copies of the native aggregate
    # compare equal there, so the exchange's map stage runs once, as under
    # the sort shuffle: three stages (the native aggregate's map stage, the
    # exchange's, the join's), where a second run of the exchange's map
    # stage made four and, at TPC-DS sf 10, cost q23 8 s.
    extra = {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sluice.sqlAggregate": "auto",
    }
    s = session("local[2]", SLUICE, tmp_path, extra=extra)
    try:
        sc = s.sparkContext
        s.range(0, 20000, numPartitions=2).selectExpr(
            "id % 97 as k", "cast(id % 1000 as decimal(28, 2)) as v").createOrReplaceTempView("t")
        df = s.sql("""
            with a as (select k, sum(v) as total from t group by k),
                 b as (select k % 5 as m, count(*) as n, sum(k) as ks from a where total > 0
                       group by k % 5)
            select x.m, x.n, x.ks, y.n, y.ks from b x join b y on x.m = y.m""")
        assert plan_of(df).count("SluiceAggregate") == 2, plan_of(df)
        sc.setJobGroup("twice", "twice")
        got = sorted(tuple(r) for r in df.collect())
        want = [(m, len(range(m, 97, 5)), sum(range(m, 97, 5))) for m in range(5)]
        assert got == [w + w[1:] for w in want]
        ran = [done for _, done in stage_infos(s, "twice") if done > 0]
        assert len(ran) == 3, stage_infos(s, "twice")
        # The same aggregate written out twice instead of named once: each
        # copy has result ids of its own, which the native aggregate's
        # canonical plan binds by position, as Spark's aggregate binds its
        # own; unbound, the copies differed and the exchange ran twice.
        copy = """(select k % 5 as m, count(*) as n, sum(k) as ks
                   from (select k, sum(v) as total from t group by k)
                   where total > 0 group by k % 5)"""
        written = s.sql(f"select x.m, x.n, x.ks, y.n, y.ks from {copy} x join {copy} y on x.m = y.m")
        sc.setJobGroup("written twice", "written twice")
        assert sorted(tuple(r) for r in written.collect()) == got
        assert "ReusedExchange" in plan_of(written), plan_of(written)
        ran = [done for _, done in stage_infos(s, "written twice") if done > 0]
        assert len(ran) == 3, stage_infos(s, "written twice")
        # The one-key form (a count, taken when every shape is asked for),
        # written twice and joined on its result.
        s.conf.set("spark.sluice.sqlAggregate", "true")
        copy = "(select k, count(*) as n from t group by k)"
        one_key = s.sql(f"select x.k, y.k from {copy} x join {copy} y on x.n = y.n")
        assert "SluiceAggregate" in plan_of(one_key) and "lanes" not in plan_of(one_key)
        counts = collections.Counter(i % 97 for i in range(20000))
        assert sorted(tuple(r) for r in one_key.collect()) == sorted(
            (a, b) for a in counts for b in counts if counts[a] == counts[b])
        assert "ReusedExchange" in plan_of(one_key), plan_of(one_key)
    finally:
        s.stop()


def test_equal_round_robin_and_sort_nodes_compare_equal_and_share_their_shuffles(tmp_path):
    # Sluice's round-robin and global-sort nodes compare as Spark's
    # case-class nodes do (equal constructor arguments), so a CTE a query
    # reads twice plans as under the sort shuffle: an exchange of Spark's
    # above a repartitioned CTE is reused (its map stage runs once), and a
    # sorted CTE samples its ranges and shuffles once. With Java's identity
    # for equality, each ran twice: 3 map stages and 4 sampling and map stages.
    extra = {"spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sluice.sqlAggregate": "false"}
    for aqe in ("false", "true"):
        s = session("local[2]", SLUICE, tmp_path / aqe,
                    extra={**extra, "spark.sql.adaptive.enabled": aqe})
        try:
            sc = s.sparkContext
            s.range(0, 20000, 1, 2).selectExpr("id % 97 as k", "id").createOrReplaceTempView("t")
            two = [s.sql("select /*+ REPARTITION(5) */ * from t")._jdf.queryExecution()
                   .executedPlan() for _ in range(2)]
            if aqe == "false":
                assert "SluiceRoundRobinExchange" in two[0].toString(), two[0].toString()
            assert two[0].sameResult(two[1])
            grouped = s.sql("""with r as (select /*+ REPARTITION(5) */ k from t)
                select k, count(*) as n from r group by k
                union all select k, count(*) as n from r group by k""")
            assert "SluiceRoundRobinExchange" in plan_of(grouped), plan_of(grouped)
            sc.setJobGroup("grouped", "grouped")
            counts = collections.Counter(i % 97 for i in range(20000))
            assert sorted(tuple(r) for r in grouped.collect()) == sorted(list(counts.items()) * 2)
            # The round robin's map stage (2 tasks) and the aggregate
            # exchange's (5) ran once each before the result stage (the last).
            ran = [tasks for tasks, done in stage_infos(s, "grouped") if done > 0]
            assert sorted(ran[:-1]) == [2, 5], stage_infos(s, "grouped")

            ordered = s.sql("""with o as (select k, id from t order by k, id)
                select * from o union all select * from o""")
            assert plan_of(ordered).count("SluiceSortExchange") == 2, plan_of(ordered)
            sc.setJobGroup("ordered", "ordered")
            got = ordered.collect()
            assert sorted(tuple(r) for r in got) == sorted([(i % 97, i) for i in range(20000)] * 2)
            # One sampling job and one map stage, each of the range's 2 tasks.
            assert map_stages_run(s, "ordered") == 2, stage_infos(s, "ordered")
            # Each read is sorted within and across its ranges. The two reads
            # share a partitioner, so Spark's union zips them (partition i
            # holds range i of each copy, one after the other), as it zips
            # the reads of a reused exchange of its own.
            parts = [[tuple(r) for r in p] for p in ordered.rdd.glom().collect()]
            assert all(len(p) % 2 == 0 and p[:len(p) // 2] == p[len(p) // 2:] for p in parts), \
                [len(p) for p in parts]
            one_copy = [r for p in parts for r in p[:len(p) // 2]]
            assert one_copy == sorted((i % 97, i) for i in range(20000))
        finally:
            s.stop()


def test_sql_repartition_skips_spark_s_sort_only_for_a_determinate_input(tmp_path):
    # df.repartition(n) deals rows round robin. Spark SQL sorts each map
    # task's rows first so that a retried task deals them the same way; Sluice
    # leaves the sort out where the input's order is proven stable (a range, a
    # file, a cached table of those) and keeps it after a shuffle read, with
    # adaptive execution on and off; the setting turns it off.
    cases = [("true", "true"), ("true", "false"), ("false", "true")]
    for native, aqe in cases:
        extra = {"spark.sluice.sqlRepartitionWithoutSort": native,
                 "spark.sql.adaptive.enabled": aqe}
        s = session("local[2]", SLUICE, tmp_path / f"{native}-{aqe}", extra=extra)
        try:
            rr = s.sparkContext._jvm.dev.sluice.spark.sql.RoundRobinExchangeExec
            unsorted, sorted_ = rr.unsortedShuffles(), rr.sortedShuffles()
            df = s.range(0, 20000, 1, 4).selectExpr("id", "string(id % 7) as s")
            out = df.repartition(5)
            plan = plan_of(out)
            assert ("SluiceRoundRobinExchange" in plan) == (native == "true"), plan
            assert ("RoundRobinPartitioning(5)" in plan) == (native == "false"), plan
            parts = out.rdd.glom().collect()
            # Round robin's own balance: 4 map tasks of 5,000 rows into 5 partitions.
            assert [len(p) for p in parts] == [4000] * 5, [len(p) for p in parts]
            assert sorted(r for p in parts for r in p) == sorted(df.collect())
            # An aggregate's output is read from a shuffle: Spark's sort stays.
            counts = df.groupBy("s").count().repartition(3)
            assert sorted(counts.collect()) == sorted(df.groupBy("s").count().collect())
            if native == "true":
                assert rr.unsortedShuffles() == unsorted + 1, "the determinate input was sorted"
                assert rr.sortedShuffles() == sorted_ + 1, "the shuffle read was not sorted"
                # A cached table of a range (its plan adaptive execution's own
                # with it on) passes as the range does.
                cached = df.cache()
                assert cached.count() == 20000
                before = rr.unsortedShuffles()
                assert sorted(cached.repartition(4).collect()) == sorted(df.collect())
                assert rr.unsortedShuffles() == before + 1, "the cached range was sorted"
                cached.unpersist(True)
                # Read twice in one query, the repartitioned rows are dealt once,
                # as Spark reuses its own equal exchanges.
                before = rr.unsortedShuffles()
                assert sorted(out.union(out).collect()) == sorted(df.collect() * 2)
                assert rr.unsortedShuffles() == before + 1, "the equal exchanges dealt twice"
            else:
                assert (rr.unsortedShuffles(), rr.sortedShuffles()) == (unsorted, sorted_)
            if native == "true" and LINE not in ("3.5", "4.0"):
                shuffles_go_as_a_query_ends(s, aqe == "true")
        finally:
            s.stop()


def stored_shuffles(s):
    """The ids of the shuffles whose files this (local) block manager holds."""
    env = s.sparkContext._jvm.org.apache.spark.SparkEnv.get()
    it = env.blockManager().migratableResolver().getStoredShuffles().iterator()
    ids = set()
    while it.hasNext():
        ids.add(it.next().shuffleId())
    return ids


def shuffles_go_as_a_query_ends(s, adaptive):
    from pyspark.sql import DataFrame

    # Spark 4.1's per-query cleanup (a setting; Spark Connect has its own):
    # the query's shuffle files are removed as it ends. Spark finds its own
    # exchanges' shuffles; a native node's are handed to it (adaptive
    # execution), or the rules leave the plan to Spark (without it).
    key = "spark.sql.classic.shuffleDependency.fileCleanup.enabled"

    def query():
        df = s.range(0, 20000, 1, 4).selectExpr("id", "id % 7 as k").repartition(5)
        return df.groupBy("k").count().orderBy("k")

    answer = [(k, sum(1 for i in range(20000) if i % 7 == k)) for k in range(7)]
    # The check sees a query's shuffles when nothing cleans them (while the
    # query is referenced: else the context cleaner may remove them).
    s.conf.set(key, "false")
    before = stored_shuffles(s)
    first = query()
    assert [tuple(r) for r in first.collect()] == answer
    kept = stored_shuffles(s) - before
    assert len(kept) >= 3, (before, kept)
    s.conf.set(key, "true")
    try:
        q = query()
        plan = plan_of(q)
        for node in ("SluiceRoundRobinExchange", "SluiceAggregate", "SluiceSortExchange"):
            assert (node in plan) == adaptive, plan
        before = stored_shuffles(s)
        assert [tuple(r) for r in q.collect()] == answer
        # Spark removes the files without waiting (outside its own tests).
        deadline = time.monotonic() + 30
        while stored_shuffles(s) - before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not stored_shuffles(s) - before, (before, stored_shuffles(s))
        assert kept <= stored_shuffles(s), ("a query without cleanup lost its shuffles", first)
    finally:
        s.conf.set(key, "false")
    if not adaptive:
        # The mode given through Spark's internal API with no setting (as
        # Spark's own tests do): the rules run, and the native shuffles go
        # as Spark reports the query's end (just after the action returns).
        jvm = s.sparkContext._jvm
        mode = getattr(getattr(jvm.org.apache.spark.sql.execution, "RemoveShuffleFiles$"),
                       "MODULE$")
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(
            s._jsparkSession, query()._jdf.logicalPlan(), mode)
        plan = jdf.queryExecution().executedPlan().toString()
        for node in ("SluiceRoundRobinExchange", "SluiceAggregate", "SluiceSortExchange"):
            assert node in plan, plan
        before = stored_shuffles(s)
        assert [tuple(r) for r in DataFrame(jdf, s).collect()] == answer
        deadline = time.monotonic() + 30
        while stored_shuffles(s) - before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not stored_shuffles(s) - before, (before, stored_shuffles(s))
        assert kept <= stored_shuffles(s), ("a query without cleanup lost its shuffles", first)


def test_a_streaming_checkpoint_continues_when_sluice_is_switched_on_and_off(tmp_path, reference):
    # A streaming query's state lives in its checkpoint, partitioned by Spark's
    # hash of the stateful operators' keys; turning Sluice on for a running
    # query, or off again, must find each key's state where the other manager
    # left it. One file a run: the sort shuffle, then Sluice, then the sort
    # shuffle again, on one checkpoint, give what one run of all three files
    # gave under the sort shuffle (a key's state looked up in the wrong
    # partition would be missing: wrong totals, windows and joins).
    assert workloads.STREAM_FILES == 3
    windows = []
    for i, manager in enumerate(("sort", SLUICE, "sort")):
        s = session("local[2]", manager, tmp_path / f"run-{i}")
        try:
            before = sluice_metrics(s)
            got = workloads.streaming(s, root=tmp_path / "stream", files=[i])
            if manager == SLUICE:
                assert sluice_metrics(s)["map_outputs"] > before["map_outputs"]
        finally:
            s.stop()
        windows += got["windows"]
    assert got["totals"] == reference["streaming"]["totals"]
    assert sorted(windows) == reference["streaming"]["windows"]
