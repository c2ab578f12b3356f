"""bench/spark: each workload under Spark's sort shuffle and under Sluice, in
the same run, on real Spark (local[N]); prints job time, executor CPU time and
shuffle bytes side by side with the ratios, and writes --json PATH.

The jobs are DataFrame jobs, so that the time is the JVM's (Python workers
would dominate an RDD job): TeraSort (10-byte random keys, 90-byte values,
a global sort by key), WordCount (HiBench text, split and count), an
aggregate by key (reduceByKey's SQL form) and a repartition. Executor CPU
time and shuffle bytes come from Spark's own status REST API (stage totals
of the job). Results are checked by the tests (spark/tests), not here: each
job ends in Spark's noop sink so that the optimizer keeps every shuffle.
CPU per GB divides both managers' CPU time by the GB the sort
shuffle wrote, so a better-compressing manager is not penalised. Each manager gets its own SparkSession, created fresh; a warm-up
job runs first in each."""

import argparse
import json
import os
import pathlib
import sys
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
JAR = HERE / "target" / "sluice-spark.jar"
MANAGERS = {"sort": "sort", "sluice": "dev.sluice.spark.SluiceShuffleManager"}


def session(manager, cores, tmp):
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(f"sluice-bench-{manager}")
        .config("spark.jars", str(JAR))
        .config("spark.shuffle.manager", MANAGERS[manager])
        .config("spark.driver.memory", "6g")
        .config("spark.local.dir", str(tmp))
        .config("spark.sql.shuffle.partitions", "16")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


def stage_totals(spark):
    """Sums of executor CPU time (ns) and shuffle bytes over completed stages
    (the listener bus is asynchronous: polled until two reads agree)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    last = None
    for _ in range(20):
        time.sleep(1.0)
        with urllib.request.urlopen(url, timeout=30) as r:
            stages = json.load(r)
        key = sorted((s["stageId"], s.get("shuffleWriteBytes", 0)) for s in stages)
        if key == last:
            break
        last = key
    return {
        "cpu_ns": sum(s.get("executorCpuTime", 0) for s in stages),
        "shuffle_write": sum(s.get("shuffleWriteBytes", 0) for s in stages),
        "shuffle_read": sum(s.get("shuffleReadBytes", 0) for s in stages),
    }


def noop(df):
    """Runs the query to the end and drops its rows (Spark's noop sink): an
    action that the optimizer cannot shorten (a count after a sort would
    lose the sort)."""
    df.write.format("noop").mode("overwrite").save()


def terasort(spark, gb):
    n = int(gb * 1e9 / 100)
    df = spark.range(0, n, numPartitions=16).selectExpr(
        "substr(unhex(sha2(cast(id as string), 256)), 1, 10) as k",
        # TeraGen's value: a row id and filler; hex digests keep it from
        # compressing to nothing.
        "concat(lpad(cast(id as string), 12, '0'), "
        "substr(concat(sha2(cast(id as string), 512), sha2(cast(id as string), 384)), 1, 78)) as v",
    )
    noop(df.orderBy("k"))


def wordcount(spark, gb):
    """Words of HiBench's 1000-word list (w000..w999), counted."""
    n = int(gb * 1e9 / 50)
    df = spark.range(0, n, numPartitions=16).selectExpr(
        "concat('w', lpad(cast(pmod(xxhash64(id), 1000) as string), 3, '0'), "
        "repeat('.', 40)) as w")
    noop(df.groupBy("w").count())


def aggregate(spark, gb):
    n = int(gb * 1e9 / 16)
    df = spark.range(0, n, numPartitions=16).selectExpr("xxhash64(id) % 1000000 as k", "id as v")
    noop(df.groupBy("k").sum("v"))


def repartition(spark, gb):
    n = int(gb * 1e9 / 100)
    df = spark.range(0, n, numPartitions=16).selectExpr(
        "id", "concat(cast(id as string), repeat('y', 80)) as v")
    noop(df.repartition(24))


WORKLOADS = {"terasort": terasort, "wordcount": wordcount, "aggregate": aggregate,
             "repartition": repartition}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--terasort-gb", type=float, default=2.0, help="TeraSort input (GB)")
    ap.add_argument("--gb", type=float, default=1.0, help="input of the other workloads (GB)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/sluice-bench-spark"))
    a = ap.parse_args()
    if a.quick:
        a.terasort_gb, a.gb = 0.05, 0.02
    if not JAR.exists():
        sys.exit(f"{JAR} is missing: run spark/build.sh")
    results = {}
    for manager in MANAGERS:
        spark = session(manager, a.cores, a.tmp / manager)
        try:
            aggregate(spark, 0.01)  # warm-up: JIT, native library, engine
            for name, job in WORKLOADS.items():
                gb = a.terasort_gb if name == "terasort" else a.gb
                before = stage_totals(spark)
                t = time.perf_counter()
                job(spark, gb)
                wall = time.perf_counter() - t
                after = stage_totals(spark)
                results.setdefault(name, {})[manager] = {
                    "seconds": wall,
                    "cpu_s": (after["cpu_ns"] - before["cpu_ns"]) / 1e9,
                    "shuffle_bytes": after["shuffle_write"] - before["shuffle_write"],
                }
                print(f"  {manager:6} {name:12} {wall:7.2f} s", flush=True)
        finally:
            spark.stop()
    print()
    print(f"{'workload':12} {'sort s':>8} {'sluice s':>8} {'speedup':>8} "
          f"{'sort cpu s/GB':>13} {'sluice cpu s/GB':>15} {'shuffle GB sort':>15} "
          f"{'shuffle GB sluice':>17}")
    for name, r in results.items():
        s, l = r["sort"], r["sluice"]
        gb_s, gb_l = s["shuffle_bytes"] / 1e9, l["shuffle_bytes"] / 1e9
        print(f"{name:12} {s['seconds']:8.2f} {l['seconds']:8.2f} {s['seconds'] / l['seconds']:7.2f}x "
              f"{s['cpu_s'] / max(gb_s, 1e-9):13.2f} {l['cpu_s'] / max(gb_s, 1e-9):15.2f} "
              f"{gb_s:15.3f} {gb_l:17.3f}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
