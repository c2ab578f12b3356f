"""Sluice's soak test: several jobs at once in one application, for a bounded
time, every answer checked.

`bash spark/soak.sh [--minutes 5]` starts one Spark application in
local-cluster[2,2,2048] (two executor JVMs of two cores each) with Sluice as
the shuffle manager and every native SQL path on, and runs three threads of
jobs side by side until the time is up:

- RDD: Python `reduceByKey` over generated pairs, and `sortByKey`;
- SQL aggregates in the engine: a decimal sum and a count per key, ordered
  by the key (the native sort);
- SQL partitioning: `repartition(n)` and `repartition(n, col)` counted, and
  a string `ORDER BY` checked for order.

Each job's answer is compared with what its input must give (closed
formulas, no second run). Every 10 seconds the executors' resident memory
is read from /proc; from the second minute on it must stay flat (a leak
shows as growth): the largest figure of the last minute at most 15 % and
64 MiB above the largest of the second minute. After the last job every
executor must hold no native map attempt and no native reduce operator, and
its engine no map buffer, operator state or result bytes and free pages
within their limit (`ExecutorProbe`). The last line is `N passed, N failed`; the exit status is
0 only when nothing failed.
"""

import argparse
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from operator import add

HERE = pathlib.Path(__file__).resolve().parent
JAR = HERE / "target" / "sluice-spark.jar"
EXAMPLES_JAR = HERE / "target" / "sluice-spark-examples.jar"
SLUICE = "dev.sluice.spark.SluiceShuffleManager"

# RSS may grow this much from the second minute's peak to the last minute's.
RSS_GROWTH_MAX = 1.15
RSS_SLACK_BYTES = 64 << 20
RSS_SAMPLE_S = 10


def session(tmp):
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local-cluster[2,2,2048]")
        .appName("sluice-soak")
        .config("spark.jars", f"{JAR},{EXAMPLES_JAR}")
        .config("spark.shuffle.manager", SLUICE)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(tmp))
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "16")
        .config("spark.default.parallelism", "8")
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.sluice.sqlAggregate", "true")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


def rdd_jobs(spark, i):
    sc = spark.sparkContext
    n, keys = 200_000 + 1000 * (i % 7), 1000 + i % 13
    got = dict(sc.range(0, n, numSlices=8).map(lambda x: (x % keys, 1)).reduceByKey(add, 12).collect())
    want = {k: n // keys + (1 if k < n % keys else 0) for k in range(keys)}
    yield "rdd reduceByKey", got == want
    m = 50_000 + i % 11
    got = sc.range(0, m, numSlices=6).map(lambda x: ((x * 7919) % m, x)).sortByKey(True, 9).keys().collect()
    yield "rdd sortByKey", got == list(range(m))


def sql_aggregate_jobs(spark, i):
    n, keys = 300_000 + 1000 * (i % 5), 997
    rows = (
        spark.range(0, n, 1, 8)
        .selectExpr(f"id % {keys} as k", "cast(id as decimal(22, 2)) / 100 as v")
        .groupBy("k").agg({"v": "sum", "*": "count"})
        .orderBy("k").collect()
    )
    ok = len(rows) == keys
    for r in rows:
        ids = range(r["k"], n, keys)
        ok = ok and r["count(1)"] == len(ids) and r["sum(v)"] == Decimal(sum(ids)) / 100
    yield "sql decimal aggregate, ordered", ok


def sql_partition_jobs(spark, i):
    n = 400_000 + 1000 * (i % 3)
    df = spark.range(0, n, 1, 8).selectExpr("id", "cast(id * 31 % 100003 as string) as s")
    yield "sql repartition(n)", df.repartition(37).count() == n
    yield "sql repartition(n, col)", df.repartition(23, "s").count() == n
    got = [r.s for r in df.where("id < 60000").orderBy("s").select("s").collect()]
    want = sorted(str(x * 31 % 100003) for x in range(60000))
    yield "sql string order by", got == want


def executor_rss():
    """Each executor JVM's resident bytes, by pid."""
    out = {}
    pids = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"],
                          capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[int(pid)] = int(line.split()[1]) * 1024
        except OSError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    a = ap.parse_args()
    for jar in (JAR, EXAMPLES_JAR):
        if not jar.exists():
            sys.exit(f"{jar} is missing: run spark/build.sh first")
    results, lock = [], threading.Lock()

    def record(name, ok, detail=""):
        with lock:
            results.append((name, ok))
        if not ok:
            print(f"FAILED {name} {detail}", flush=True)

    with tempfile.TemporaryDirectory(prefix="sluice-soak-") as tmp:
        spark = session(tmp)
        start = time.monotonic()
        deadline = start + a.minutes * 60
        rss = []  # (seconds since start, {pid: bytes})

        def worker(jobs, pool):
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
            i = 0
            while time.monotonic() < deadline:
                try:
                    for name, ok in jobs(spark, i):
                        record(name, ok)
                except Exception as e:  # a failed job is a failed check, and the soak goes on
                    record(jobs.__name__, False, repr(e)[:500])
                i += 1

        def sampler():
            while time.monotonic() < deadline:
                rss.append((time.monotonic() - start, executor_rss()))
                time.sleep(RSS_SAMPLE_S)

        threads = [threading.Thread(target=worker, args=(j, j.__name__))
                   for j in (rdd_jobs, sql_aggregate_jobs, sql_partition_jobs)]
        threads.append(threading.Thread(target=sampler))
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        probe = spark.sparkContext._jvm.dev.sluice.spark.examples.ExecutorProbe.run(
            spark.sparkContext._jsc, 32)
        live = {k: [int(x) for x in probe.get(k).split(",")] for k in probe.keySet().toArray()}
        record("no native attempt or operator left open", len(live) == 2
               and all(v[:2] == [0, 0] for v in live.values()), str(live))
        # The engine's own bytes: buffers, operator state and results back to
        # 0, free pages within their limit.
        record("engine bytes back to their floor", len(live) == 2
               and all(v[2:5] == [0, 0, 0] and v[5] <= v[6] for v in live.values()), str(live))
        for executor, v in sorted(live.items()):
            print(f"executor {executor}: engine holds {v[2]} B of buffers, {v[3]} B of operator "
                  f"state, {v[4]} B of results, {v[5] >> 20} MiB of free pages (limit "
                  f"{v[6] >> 20} MiB)", flush=True)

        second = [r for t, r in rss if 60 <= t < 120]
        last = [r for t, r in rss if t >= a.minutes * 60 - 60]
        if a.minutes >= 3 and second and last:
            for pid in sorted({p for r in second for p in r}):
                was = max(r.get(pid, 0) for r in second)
                now = max(r.get(pid, 0) for r in last)
                record(f"executor {pid} RSS flat", now <= was * RSS_GROWTH_MAX + RSS_SLACK_BYTES,
                       f"second minute {was >> 20} MiB, last minute {now >> 20} MiB")
                print(f"executor {pid}: RSS peak {was >> 20} MiB in the second minute, "
                      f"{now >> 20} MiB in the last", flush=True)
        spark.stop()

    by_name = {}
    for name, ok in results:
        p, f = by_name.get(name, (0, 0))
        by_name[name] = (p + ok, f + (not ok))
    for name, (p, f) in sorted(by_name.items()):
        print(f"  {name}: {p} passed, {f} failed")
    passed = sum(ok for _, ok in results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
