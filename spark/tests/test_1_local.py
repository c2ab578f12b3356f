"""Every workload through Sluice in local[2], record for record against
Spark's sort shuffle."""

import contextlib

import pytest

import workloads
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
