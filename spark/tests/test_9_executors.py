"""Executors that come and go under Sluice, each a real event in real
processes: dynamic allocation removing idle executors while Spark's external
shuffle service keeps serving their map output, an executor decommissioned
with its shuffle blocks migrated to another, an executor killed in the
middle of a map output's commit, and a speculative copy of a SQL map task.
Every answer is checked exactly, and where Spark promises that no map task
reruns (the shuffle service, migration), that none did."""

import os
import signal
import time

import pytest

import workloads
from clusters import settled, stage_attempts
from standalone import executor_pids, free_port, standalone_cluster
from conftest import SLUICE, SPECULATION, session, slow_first_attempt

pytestmark = pytest.mark.extended

# How long an executor may take to go away once asked to (idle timeout,
# decommissioning with its migration, a kill).
GONE_TIMEOUT_S = 120

_AGGREGATE = ("SELECT k, count(*) n, sum(v) s, sum(CAST(v AS DECIMAL(20, 2))) d "
              "FROM (SELECT id % 997 k, id v FROM range(0, 200000, 1, 4)) GROUP BY k")


def _aggregate_expected():
    out = {}
    for v in range(200000):
        n, s = out.get(v % 997, (0, 0))
        out[v % 997] = (n + 1, s + v)
    return sorted((k, n, s, s) for k, (n, s) in out.items())


def _aggregate_rows(df):
    return sorted((r.k, r.n, r.s, int(r.d)) for r in df.collect())


def _executors(sc):
    """The live executors' ids (the driver left out)."""
    ids = sc._jsc.sc().getExecutorIds()
    return [ids.apply(i) for i in range(ids.size())]


def _wait(what, done):
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen in {GONE_TIMEOUT_S} s"
        time.sleep(0.25)


def _map_tasks_run(sc, group):
    """Tasks the jobs of `group` ran outside their result stages (a map stage
    whose output was found runs none), and the result stages' tasks."""
    tracker = settled(sc, group)
    mapped = results = 0
    for job in tracker.getJobIdsForGroup(group):
        stages = sorted(tracker.getJobInfo(job).stageIds)
        for stage in stages:
            info = tracker.getStageInfo(stage)
            done = info.numCompletedTasks if info is not None else 0
            if stage == stages[-1]:
                results += done
            else:
                mapped += done
    return mapped, results


def test_dynamic_allocation_reads_through_the_external_shuffle_service(tmp_path, reference):
    # Spark's external shuffle service runs in the worker; dynamic allocation
    # removes the executors once idle. The next job reads the shuffles their
    # map tasks wrote (an RDD reduceByKey and a SQL native aggregate) through
    # the service, from Sluice's files, and reruns no map task.
    port = str(free_port())
    service = {"spark.shuffle.service.enabled": "true", "spark.shuffle.service.port": port}
    settings = {
        **service,
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "0",
        "spark.dynamicAllocation.initialExecutors": "2",
        "spark.dynamicAllocation.executorIdleTimeout": "2s",
        "spark.executor.cores": "1",
        "spark.executor.memory": "768m",
        "spark.sql.adaptive.enabled": "false",
    }
    with standalone_cluster(tmp_path, hosts=("127.0.0.1",), cores=2, memory="2g",
                            worker_conf=service) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=settings)
        try:
            sc = s.sparkContext
            sums = workloads.pairs(sc, 50000, 1000, 4).reduceByKey(lambda a, b: a + b, 8)
            assert sorted(sums.collect()) == reference["reduce_by_key"]
            agg = s.sql(_AGGREGATE)
            assert _aggregate_rows(agg) == _aggregate_expected()
            plan = agg._jdf.queryExecution().executedPlan().toString()
            assert "SluiceAggregate" in plan, plan
            pids = executor_pids(sc.applicationId)
            assert pids, "no executor process found"
            _wait("the idle executors' removal", lambda: not _executors(sc))
            _wait("the removed executors' exit", lambda: not any(_alive(p) for p in pids))

            sc.setJobGroup("after-removal", "read what removed executors wrote")
            assert sorted(sums.collect()) == reference["reduce_by_key"]
            assert _aggregate_rows(agg) == _aggregate_expected()
            mapped, results = _map_tasks_run(sc, "after-removal")
            assert (mapped, results > 0) == (0, True), (mapped, results)
            assert max(stage_attempts(sc, "after-removal").values()) == 0
        finally:
            s.stop()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_decommissioned_executor_migrates_its_map_output(tmp_path, reference):
    # Two workers; the map stages run on both executors. One executor gets
    # SIGPWR (as a cloud's node-loss notice sends it), migrates its shuffle
    # blocks (Sluice's data, index and checksum files) to the other and
    # exits. The next job reads the migrated blocks and reruns no map task.
    settings = {
        "spark.decommission.enabled": "true",
        "spark.storage.decommission.enabled": "true",
        "spark.storage.decommission.shuffleBlocks.enabled": "true",
        "spark.storage.decommission.rddBlocks.enabled": "false",
        "spark.executor.memory": "768m",
        "spark.sql.adaptive.enabled": "false",
    }
    with standalone_cluster(tmp_path) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=settings)
        try:
            sc = s.sparkContext
            _wait("both executors' start", lambda: len(_executors(sc)) == 2)
            sums = workloads.pairs(sc, 50000, 1000, 4).reduceByKey(lambda a, b: a + b, 8)
            assert sorted(sums.collect()) == reference["reduce_by_key"]
            agg = s.sql(_AGGREGATE)
            assert _aggregate_rows(agg) == _aggregate_expected()
            pids = executor_pids(sc.applicationId)
            assert len(pids) == 2, pids
            os.kill(pids[0], signal.SIGPWR)
            _wait("the decommissioned executor's exit", lambda: not _alive(pids[0]))

            sc.setJobGroup("after-decommission", "read the migrated map output")
            assert sorted(sums.collect()) == reference["reduce_by_key"]
            assert _aggregate_rows(agg) == _aggregate_expected()
            mapped, results = _map_tasks_run(sc, "after-decommission")
            assert (mapped, results > 0) == (0, True), (mapped, results)
            assert max(stage_attempts(sc, "after-decommission").values()) == 0
        finally:
            s.stop()


# Started by a map task once its records are written, apart from its executor
# (a session of its own, so the kill does not take it along): waits until the
# executor's commit has created its temporary data file and written bytes to
# it, notes what it saw, and kills the executor JVM.
_KILL_MID_COMMIT = r"""
import os, sys, time
pid, dirs, marker = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.startswith("shuffle_") and ".data." in f:
                    p = os.path.join(root, f)
                    try:
                        size = os.path.getsize(p)
                    except OSError:
                        continue
                    if size > 0:
                        os.kill(pid, 9)
                        with open(marker, "w") as m:
                            m.write(f"{f} {size}")
                        sys.exit(0)
    time.sleep(0.001)
"""


def test_executor_killed_in_the_middle_of_a_commit(tmp_path):
    # Map task 0's first attempt writes about 60 MB; while the engine writes
    # its data file (before Spark's index names it), the executor is killed.
    # Spark reruns the lost map tasks on the other executor; every record
    # arrives once.
    import hashlib

    marker = str(tmp_path / "killed")
    per_task = 600_000

    def _rows_then_kill_in_commit(index, _):
        import subprocess
        import sys

        from pyspark import TaskContext

        for i in range(index * per_task, (index + 1) * per_task):
            yield i, hashlib.sha512(str(i).encode()).digest()
        if index == 0 and TaskContext.get().attemptNumber() == 0 and not os.path.exists(marker):
            pid = os.getpid()
            while pid > 1:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        break
            subprocess.Popen([sys.executable, "-c", _KILL_MID_COMMIT, str(pid),
                              os.environ["SPARK_LOCAL_DIRS"], marker], start_new_session=True)

    s = session("local-cluster[2,1,1024]", SLUICE, tmp_path / "local")
    try:
        sc = s.sparkContext
        rdd = sc.parallelize(range(2), 2).mapPartitionsWithIndex(_rows_then_kill_in_commit)
        keys = rdd.partitionBy(8).keys()
        n, total, low, high = keys.map(lambda k: (1, k, k, k)).reduce(
            lambda a, b: (a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3])))
        assert os.path.exists(marker), "the executor was not killed during a commit"
        seen = open(marker).read()
        assert ".data." in seen and int(seen.split()[1]) > 0, seen
        count = 2 * per_task
        assert (n, total, low, high) == (count, count * (count - 1) // 2, 0, count - 1)
        assert keys.distinct().count() == count
    finally:
        s.stop()


def test_speculative_sql_map_attempts_give_each_row_once(tmp_path):
    # The SQL row path: map task 0's first attempt of a DataFrame's
    # repartition and native aggregate is slow, so Spark launches a copy on
    # the other worker; whichever commits first wins, and every row counts
    # once.
    marker = tmp_path / "speculated"
    settings = {**SPECULATION, "spark.executor.memory": "768m",
                "spark.sql.adaptive.enabled": "false"}
    with standalone_cluster(tmp_path) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=settings)
        try:
            sc = s.sparkContext
            rows = sc.parallelize(range(200000), 4).mapPartitionsWithIndex(
                slow_first_attempt(marker))
            s.createDataFrame(rows.map(lambda v: (v % 997, v)), "k long, v long") \
                .createOrReplaceTempView("slow")
            agg = s.sql(_AGGREGATE.replace("range(0, 200000, 1, 4)", "slow")
                        .replace("SELECT id % 997 k, id v FROM", "SELECT k, v FROM"))
            got = _aggregate_rows(agg)
            plan = agg._jdf.queryExecution().executedPlan().toString()
            assert marker.exists(), "no speculative attempt ran"
            assert got == _aggregate_expected()
            assert "SluiceAggregate" in plan, plan
            marker.unlink()
            spread = s.table("slow").repartition(7, "k").groupBy("k").count()
            assert sorted((r.k, r["count"]) for r in spread.collect()) == sorted(
                (k, n) for k, n, _, _ in _aggregate_expected())
            assert marker.exists(), "no speculative attempt ran in the second query"
        finally:
            s.stop()
