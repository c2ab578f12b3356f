"""Sluice in local-cluster[2,1,1024]: executors in their own JVMs, fetches
over the network, and an executor killed during the map stage."""

import os

import pytest

import workloads
from conftest import SLUICE, session


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    s = session("local-cluster[2,1,1024]", SLUICE, tmp_path_factory.mktemp("sluice-cluster"))
    yield s
    s.stop()


# Python RDD jobs whose shuffle path the others already take across JVMs run
# in the extended tier (CI runs them in local mode, test_1_local).
EXTENDED = pytest.mark.extended


@pytest.mark.parametrize(
    "name",
    ["terasort", pytest.param("wordcount", marks=EXTENDED), "reduce_by_key",
     pytest.param("join", marks=EXTENDED), "sql_join", "sql_order_by", "sql_aggregate",
     "sql_aggregate_lanes", pytest.param("streaming", marks=EXTENDED)],
)
def test_local_cluster_matches_sort_shuffle(cluster, reference, name):
    assert workloads.ALL[name](cluster) == reference[name]


def test_executor_killed_in_map_stage(cluster, reference, tmp_path):
    marker = str(tmp_path / "killed")

    def _kill_own_executor(index, it):
        """The first attempt of map task 0 kills its executor JVM (nested, so
        that cloudpickle ships it by value to the executors)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        # Once per test: the marker file says an executor was already killed.
        if index == 0 and ctx.attemptNumber() == 0 and not os.path.exists(marker):
            pid = os.getpid()
            while pid > 1:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        with open(marker, "w") as m:
                            m.write(str(pid))
                        os.kill(pid, 9)
                        break
        return it

    sc = cluster.sparkContext
    rdd = workloads.pairs(sc, 50000, 1000, 4).mapPartitionsWithIndex(_kill_own_executor)
    got = sorted(rdd.reduceByKey(lambda a, b: a + b, 8).collect())
    assert os.path.exists(marker), "no executor was killed"
    assert got == reference["reduce_by_key"]


def test_offloaded_reduce_by_key_across_executors(cluster):
    """Sluice.reduceByKey (map and reduce side in each executor's engine,
    blocks fetched over the network) gives Spark's reduceByKey's answer."""
    sc = cluster.sparkContext
    job = sc._jvm.dev.sluice.spark.examples.ReduceByKeyJob
    spark_way = list(job.checksum(sc._jsc, 300_000, 5_000, 4, 6, False))
    sluice_way = list(job.checksum(sc._jsc, 300_000, 5_000, 4, 6, True))
    assert spark_way[0] == 5_000
    assert sluice_way == spark_way


def test_spark_aggregations_grouped_by_hash_across_executors(cluster):
    """Spark's own reduceByKey on Sluice's hash-grouped path across two
    executor JVMs: 300K records per map task over 500K keys (the map-side
    table switches itself off) agree with the offloaded operator; enum keys,
    whose hash codes differ in each JVM, still meet in one record each."""
    sc = cluster.sparkContext
    job = sc._jvm.dev.sluice.spark.examples.ReduceByKeyJob
    spark_way = list(job.checksum(sc._jsc, 1_200_000, 500_000, 4, 6, False))
    sluice_way = list(job.checksum(sc._jsc, 1_200_000, 500_000, 4, 6, True))
    assert spark_way == sluice_way
    assert spark_way[0] > 400_000
    counts = list(sc._jvm.dev.sluice.spark.examples.EnumKeysJob.counts(sc._jsc, 100_000, 4, 3))
    assert counts == [5] + [20_000] * 5


def test_native_sort_by_key_across_executors(cluster):
    """Scala's sortByKey, sorted by the engine: every output partition in
    order, partitions in key order, no record lost."""
    sc = cluster.sparkContext
    flat = list(sc._jvm.dev.sluice.spark.examples.SortByKeyJob.partitionStats(
        sc._jsc, 200_000, 4, 5))
    parts = [flat[i:i + 4] for i in range(0, len(flat), 4)]
    assert len(parts) == 5
    assert sum(p[0] for p in parts) == 200_000
    assert all(p[3] == 1 for p in parts), parts
    filled = [p for p in parts if p[0] > 0]
    assert all(a[2] <= b[1] for a, b in zip(filled, filled[1:])), parts


def test_rdd_terasort_across_executors(cluster):
    """HiBench's RDD TeraSort (byte[] keys in unsigned order, sorted by the
    engine): keys in order within and across partitions, and the records'
    checksum equal to the input's."""
    sc = cluster.sparkContext
    job = sc._jvm.dev.sluice.spark.examples.TeraSortJob
    records, unordered, checksum = list(job.run(sc._jsc, 100_000, 4, 5))
    assert (records, unordered) == (100_000, 0)
    assert checksum == job.inputChecksum(sc._jsc, 100_000, 4)
