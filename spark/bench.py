"""bench/spark: each workload under Spark's sort shuffle and under Sluice, in
the same run, on real Spark (local[N]); prints job time, executor CPU time and
shuffle bytes side by side with the ratios, and writes --json PATH.

The jobs run in the JVM, so that the time is the shuffle's (Python workers
would dominate a PySpark RDD job): DataFrame jobs TeraSort (10-byte random
keys, 90-byte values, a global sort by key), WordCount (HiBench's word
list, counted), an aggregate by key (reduceByKey's SQL form) and a
repartition; and Java RDD jobs from dev.sluice.spark.examples, HiBench's RDD
forms: `rdd_terasort` (TeraSortJob: TeraGen records generated in the map
tasks, sortByKey on byte[] keys with BytesOrdering, which Sluice sorts in
the engine), `rdd_wordcount` (WordCountJob: textFile, split, reduceByKey
over text written once outside the clock), `rdd_reduce_by_key`
(ReduceByKeyJob: Long keys and values generated in the map tasks, summed
with reduceByKey); these run the same code under both managers.
`word_count` and `reduce_by_key` run Spark's reduceByKey under the sort
shuffle against Sluice.reduceByKey (the aggregation offloaded to the
engine) under Sluice.
Both sessions use Kryo (spark.serializer), which Sluice needs for RDD
shuffles. Executor CPU
time and shuffle bytes come from Spark's own status REST API (stage totals
of the job). Results are checked by the tests (spark/tests), not here: each
job ends in Spark's noop sink so that the optimizer keeps every shuffle.
CPU per GB divides both managers' CPU time by the GB the sort
shuffle wrote, so a better-compressing manager is not penalised. Each
manager runs in its own process (its own JVM, so neither inherits the
other's JIT-compiled code), a warm-up job first; both processes stay up,
and each workload's --reps runs alternate between them (the one going
first swaps every rep), so that a slow stretch of a shared VM falls on
both alike. The fastest run of each is kept; the median ratio is printed
beside it. Each process's own luck (what its JIT inlines) is part of all
its runs, so a comparison of two builds that must resolve a few per cent
takes --processes N: N fresh pairs of processes, started in alternating
order, their runs pooled (docs/benchmarks.md has the spread of one pair).

--cluster runs the same on a standalone cluster of real processes on
loopback addresses, each address a node (a master, and on 127.0.0.1 and
127.0.0.2 a worker beside the service's `sluice daemon`): every manager's
application holds one single-core executor on each node, so half of each
reduce task's input comes from the other node. It adds, per manager, the
CPU of its JVMs and of the daemons, blocks per reduce task (Spark's
shuffle read metrics: under Spark's shuffle each block is one read where
it is stored), daemon reads per reduce task and chunks and commits per
map task (the daemons' own counts, `sluice stats`)."""

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.request

import daemons
from standalone import executor_pids, standalone_cluster

HERE = pathlib.Path(__file__).resolve().parent
# The Spark line whose jars run: the default line's, or the one SLUICE_LINE
# names (spark/build.sh --line L built them; test_8_other_lines runs test
# files so, in that line's venv, and the scripts those tests start inherit it).
LINE = os.environ.get("SLUICE_LINE") or None
# The line spark/build.sh builds without --line (its DEFAULT_LINE), whose jar
# is spark/target/sluice-spark.jar and whose pyspark spark/requirements.txt pins.
DEFAULT_LINE = "4.1"
SQL_EXTENSIONS = "dev.sluice.spark.sql.SluiceSqlExtensions"


def line_jar(line, name="sluice-spark"):
    """A jar of Sluice's for a Spark line: the default line's, or spark/build.sh --line L's."""
    if not line:
        return HERE / "target" / f"{name}.jar"
    return HERE / "target" / f"{name}-{line}_{'2.12' if line == '3.5' else '2.13'}.jar"


JAR = line_jar(LINE)
# The RDD jobs (dev.sluice.spark.examples), not in the shipped jar.
EXAMPLES_JAR = line_jar(LINE, "sluice-spark-examples")
MANAGERS = {"sort": "sort", "sluice": "dev.sluice.spark.SluiceShuffleManager"}
# A Sluice build to compare against (--baseline-jar): the same manager class
# from another jar, run as a third manager in its own JVM.
BASELINE = "sluice-base"
# This build's jar with spark.sluice.mode=service, against two `sluice
# daemon` processes the parent starts on 127.0.0.1 and 127.0.0.2
# (service_daemons); the same data path otherwise (docs/service.md).
SERVICE = "sluice-service"
# Where inputs written outside the clock live (set from --tmp).
DATA = pathlib.Path("/tmp/sluice-bench-spark")


def baseline_in_service(a):
    """Whether the baseline runs in service mode (--baseline-conf
    spark.sluice.mode=service): against the same daemons, as an application
    of its own."""
    return "spark.sluice.mode=service" in a.baseline_conf


def needs_daemons(a):
    return SERVICE in a.managers or (BASELINE in a.managers and baseline_in_service(a))


def service_conf(a, manager):
    """The service settings `manager`'s session adds (none for the others)."""
    if manager == SERVICE:
        return a.service_conf
    if manager == BASELINE and baseline_in_service(a):
        return a.baseline_service_conf
    return []


def session(manager, cores, tmp, sluice_conf=(), jar=JAR, app="sluice-bench", settings=None,
            master=None):
    """A Spark session for `manager` (its own JVM: one per process): local
    with `cores`, or on the standalone cluster at `master` (CLUSTER_CONF).
    `settings` override the benchmark's defaults for every manager;
    `sluice_conf` (KEY=VALUE) applies to Sluice's managers only."""
    from pyspark.sql import SparkSession

    conf = {
        "spark.jars": f"{jar},{EXAMPLES_JAR}",
        "spark.shuffle.manager": MANAGERS.get(manager, MANAGERS["sluice"]),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.driver.memory": "10g",
        "spark.local.dir": str(tmp),
        "spark.sql.shuffle.partitions": "16",
        "spark.sql.adaptive.enabled": "false",
        "spark.ui.enabled": "true",
        "spark.ui.port": "0",
        "spark.ui.showConsoleProgress": "false",
    }
    if LINE == "3.5":
        # pyspark 3.5 does not find a session extension in a jar by itself.
        conf["spark.sql.extensions"] = SQL_EXTENSIONS
    if master:
        conf.update(CLUSTER_CONF)
        if LINE == "3.5":
            # Spark 3.5's executors make the shuffle manager before they fetch --jars.
            conf["spark.executor.extraClassPath"] = str(jar)
    conf.update(settings or {})
    if manager != "sort":
        conf.update(kv.partition("=")[::2] for kv in sluice_conf)
    b = SparkSession.builder.master(master or f"local[{cores}]").appName(f"{app}-{manager}")
    for key, value in conf.items():
        b = b.config(key, value)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    if master:
        wait_for_executors(s, len(CLUSTER_HOSTS))
    return s


# The loopback cluster of --cluster: one node per address, each a standalone
# worker beside its `sluice daemon`; every manager's application gets one
# executor of one core on each (the master spreads them out), so that its
# reduce tasks fetch from the other node as on a real cluster.
CLUSTER_HOSTS = ("127.0.0.1", "127.0.0.2")
CLUSTER_CONF = {
    "spark.driver.memory": "2g",
    "spark.executor.cores": "1",
    "spark.cores.max": str(len(CLUSTER_HOSTS)),
}
# How long an application may wait for its executors.
EXECUTORS_TIMEOUT_S = 120


def wait_for_executors(spark, n):
    """Waits until `n` executors (besides the driver) have registered."""
    sc = spark.sparkContext
    deadline = time.monotonic() + EXECUTORS_TIMEOUT_S
    while sc._jsc.sc().getExecutorMemoryStatus().size() < n + 1:
        if time.monotonic() > deadline:
            sys.exit(f"{n} executors did not register in {EXECUTORS_TIMEOUT_S} s")
        time.sleep(0.5)


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
        # Each block one segment of one map output: under Spark's shuffle
        # one read where it is stored, under the service part of a stream.
        "blocks": sum(s.get("shuffleRemoteBlocksFetched", 0) + s.get("shuffleLocalBlocksFetched", 0)
                      for s in stages),
        "reduce_tasks": sum(s.get("numCompleteTasks", 0) for s in stages
                            if s.get("shuffleReadRecords", 0) > 0),
        "map_tasks": sum(s.get("numCompleteTasks", 0) for s in stages
                         if s.get("shuffleWriteRecords", 0) > 0),
    }


def noop(df):
    """Runs the query to the end and drops its rows (Spark's noop sink): an
    action that the optimizer cannot shorten (a count after a sort would
    lose the sort)."""
    df.write.format("noop").mode("overwrite").save()


def teragen(spark, gb):
    """TeraGen's rows: 10-byte random keys, 90-byte values (a row id and
    hex-digest filler, so that the values do not compress to nothing)."""
    n = int(gb * 1e9 / 100)
    return spark.range(0, n, numPartitions=16).selectExpr(
        "substr(unhex(sha2(cast(id as string), 256)), 1, 10) as k",
        "concat(lpad(cast(id as string), 12, '0'), "
        "substr(concat(sha2(cast(id as string), 512), sha2(cast(id as string), 384)), 1, 78)) as v",
    )


def words(spark, gb):
    """Words of HiBench's 1000-word list (w000..w999), padded to 44 bytes."""
    n = int(gb * 1e9 / 50)
    return spark.range(0, n, numPartitions=16).selectExpr(
        "concat('w', lpad(cast(pmod(xxhash64(id), 1000) as string), 3, '0'), "
        "repeat('.', 40)) as w")


def pairs(spark, gb):
    """(key, value) longs, 1M distinct keys."""
    n = int(gb * 1e9 / 16)
    return spark.range(0, n, numPartitions=16).selectExpr("xxhash64(id) % 1000000 as k", "id as v")


def rows(spark, gb):
    n = int(gb * 1e9 / 100)
    return spark.range(0, n, numPartitions=16).selectExpr(
        "id", "concat(cast(id as string), repeat('y', 80)) as v")


# DataFrame workloads: (input generator, the timed query over the cached input).
QUERIES = {
    "terasort": (teragen, lambda df: df.orderBy("k")),
    "wordcount": (words, lambda df: df.groupBy("w").count()),
    "aggregate": (pairs, lambda df: df.groupBy("k").sum("v")),
    "repartition": (rows, lambda df: df.repartition(24)),
}


def rdd_sum(spark, gb, offloaded):
    """gb of 16-byte (Long, Long) pairs, 1M distinct keys, summed per key."""
    jvm = spark.sparkContext._jvm
    jsc = spark.sparkContext._jsc
    records = int(gb * 1e9 / 16)
    jvm.dev.sluice.spark.examples.ReduceByKeyJob.run(jsc, records, 1_000_000, 16, 16, offloaded)


def rdd_terasort(spark, gb, manager):
    """HiBench's RDD TeraSort (dev.sluice.spark.examples.TeraSortJob): gb of
    TeraGen records generated in the map tasks, sortByKey on byte[] keys in
    unsigned byte order; the same job under both managers."""
    jvm = spark.sparkContext._jvm
    records = int(gb * 1e9 / 100)
    jvm.dev.sluice.spark.examples.TeraSortJob.run(spark.sparkContext._jsc, records, 16, 16)


def wordcount_text(spark, gb, tmp):
    """HiBench-like text for the RDD WordCount, written once (outside the
    clock; HiBench's prepare step) and shared by both managers."""
    path = tmp / f"words-{gb}gb"
    if not (path / "_SUCCESS").exists():
        spark.sparkContext._jvm.dev.sluice.spark.examples.WordCountJob.generate(
            spark.sparkContext._jsc, str(path), int(gb * 1e9), 16)
    return str(path)


def rdd_words(spark, gb, manager, offloaded):
    jvm = spark.sparkContext._jvm
    path = wordcount_text(spark, gb, DATA)
    jvm.dev.sluice.spark.examples.WordCountJob.run(spark.sparkContext._jsc, path, 16, offloaded)


def rdd_wordcount(spark, gb, manager):
    """HiBench's RDD WordCount (textFile, split, reduceByKey), the same
    code under both managers."""
    rdd_words(spark, gb, manager, False)


def word_count(spark, gb, manager):
    """The same WordCount with Sluice.reduceByKey(words, Agg.SUM) under
    Sluice, against Spark's reduceByKey under the sort shuffle."""
    rdd_words(spark, gb, manager, manager != "sort")


def rdd_reduce_by_key(spark, gb, manager):
    rdd_sum(spark, gb, False)


def reduce_by_key(spark, gb, manager):
    rdd_sum(spark, gb, manager != "sort")


# RDD workloads: generate their pairs inside the map tasks (cheap: a
# SplittableRandom per task), timed whole.
RDD_JOBS = {
    "rdd_terasort": rdd_terasort,
    "rdd_wordcount": rdd_wordcount,
    "word_count": word_count,
    "rdd_reduce_by_key": rdd_reduce_by_key,
    "reduce_by_key": reduce_by_key,
}
TERASORT = ("terasort", "rdd_terasort")
WORKLOADS = list(QUERIES) + list(RDD_JOBS)


def jvm_pids(spark):
    """The application's JVMs on this machine: the driver (and executor, in
    local mode) and its executors (on the --cluster)."""
    sc = spark.sparkContext
    return [sc._jvm.java.lang.ProcessHandle.current().pid(), *executor_pids(sc.applicationId)]


def process_stats(spark):
    """The /proc stat fields after the command name of each of the
    application's JVMs: the driver (and executor, in local mode) and its
    executors on this machine (on the --cluster)."""
    out = []
    for pid in jvm_pids(spark):
        with open(f"/proc/{pid}/stat") as f:
            out.append(f.read().rsplit(")", 1)[1].split())
    return out


def process_cpu_s(spark):
    """CPU seconds of the application's JVMs: every thread, the engine's
    native offload threads and the garbage collector included, which
    Spark's executorCpuTime (task threads only) leaves out."""
    return sum(int(f[11]) + int(f[12]) for f in process_stats(spark)) / os.sysconf("SC_CLK_TCK")


# Thread groups of a JVM by the start of their name (Linux keeps 15 bytes
# of it): Spark's task threads, the JIT compilers, the garbage collector
# and the VM thread that runs its pauses, Sluice's native threads; anything
# else (the driver's scheduler and RPC, shuffle fetches, py4j) is "other".
THREAD_GROUPS = (("tasks", ("Executor task l",)),
                 ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
                 ("gc", ("GC Thread", "G1 ", "VM Thread")),
                 ("sluice", ("sluice",)))


def threads(spark):
    """The application's JVMs' threads now, {(pid, tid): (group, CPU seconds)}
    (THREAD_GROUPS, else "other"), from /proc/PID/task."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in jvm_pids(spark):
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    name, rest = f.read().split("(", 1)[1].rsplit(")", 1)
            except OSError:  # the thread ended
                continue
            fields = rest.split()
            group = next((g for g, starts in THREAD_GROUPS if name.startswith(starts)), "other")
            out[(pid, tid)] = (group, (int(fields[11]) + int(fields[12])) / tick)
    return out


def thread_cpu_s(before, after, process_cpu_s):
    """CPU seconds by thread group between two readings of `threads`: each
    thread's own difference (a thread new since `before` counted whole), and
    "ended", the rest of the JVMs' `process_cpu_s` over the same span: the
    threads that ended in it (the JVM starts and stops JIT compiler threads
    as the work comes, Spark's pools end idle ones), whose CPU only the
    process's total keeps."""
    out = dict.fromkeys([g for g, _ in THREAD_GROUPS] + ["other"], 0.0)
    for key, (group, cpu) in after.items():
        out[group] += cpu - before.get(key, (group, 0.0))[1]
    out["ended"] = process_cpu_s - sum(out.values())
    return out


def minor_faults(spark):
    """Minor page faults of the application's JVMs so far (memory touched
    for the first time, by Java's heap or by native code)."""
    return sum(int(f[7]) for f in process_stats(spark))


def timed(spark, job):
    """Runs job(); returns its wall time, process CPU, task CPU and shuffle bytes."""
    before, cpu0, faults0 = stage_totals(spark), process_cpu_s(spark), minor_faults(spark)
    t = time.perf_counter()
    job()
    wall = time.perf_counter() - t
    cpu1, faults1, after = process_cpu_s(spark), minor_faults(spark), stage_totals(spark)
    return {
        "seconds": wall,
        "process_cpu_s": cpu1 - cpu0,
        "task_cpu_s": (after["cpu_ns"] - before["cpu_ns"]) / 1e9,
        "minor_faults": faults1 - faults0,
        "shuffle_bytes": after["shuffle_write"] - before["shuffle_write"],
        **{k: after[k] - before[k] for k in ("blocks", "reduce_tasks", "map_tasks")},
    }


class Worker:
    """One shuffle manager's Spark session, in this process's JVM, serving
    the parent's commands (one JSON line each on stdin, one JSON line back
    on stdout): prepare a workload's input, run it once, release it."""

    def __init__(self, a, manager):
        global DATA
        DATA = a.tmp
        self.a, self.manager = a, manager
        jar = a.baseline_jar if manager == BASELINE and a.baseline_jar else JAR
        conf = a.sluice_conf + (a.baseline_conf if manager == BASELINE else []) + service_conf(a, manager)
        settings = dict(kv.partition("=")[::2] for kv in a.conf)
        if a.master:
            settings = {"spark.executor.memory": a.executor_memory, **settings}
        self.spark = session(manager, a.cores, a.tmp / manager, conf, jar, settings=settings,
                             master=a.master)
        self.df = None
        self.job = None
        # Warm-up: JIT, native library, engine.
        noop(QUERIES["aggregate"][1](pairs(self.spark, 0.01)))
        reduce_by_key(self.spark, 0.01, manager)

    def prepare(self, name):
        a, spark, manager = self.a, self.spark, self.manager
        gb = a.terasort_gb if name in TERASORT else a.gb
        if name in QUERIES:
            make, query = QUERIES[name]
            # The input is generated and cached before the clock starts,
            # as HiBench reads it from storage rather than timing TeraGen.
            df = make(spark, gb).cache()
            df.count()
            self.df = df
            self.job = lambda: noop(query(df))
        else:
            if name in ("rdd_wordcount", "word_count"):
                wordcount_text(spark, gb, DATA)
            self.job = lambda: RDD_JOBS[name](spark, gb, manager)
        return {}

    def run(self):
        r = timed(self.spark, self.job)
        # Outside the clock: a full collection, so that each run starts
        # from a collected heap and the idle session gives memory back.
        self.spark.sparkContext._jvm.java.lang.System.gc()
        return r

    def release(self):
        if self.df is not None:
            self.df.unpersist(blocking=True)
            self.df = None
        self.job = None
        return {}

    def serve(self):
        try:
            for line in sys.stdin:
                cmd = json.loads(line)
                op = cmd["op"]
                if op == "stop":
                    break
                if op == "prepare":
                    reply = self.prepare(cmd["workload"])
                elif op == "run":
                    reply = self.run()
                else:
                    reply = self.release()
                print(json.dumps(reply), file=self.reply_to, flush=True)
        finally:
            self.spark.stop()


def start_worker(a, manager):
    """A child process holding one manager's session; its stdout is the
    reply channel (Spark's and py4j's chatter goes to stderr)."""
    args = [sys.executable, __file__, "--manager", manager,
            "--terasort-gb", str(a.terasort_gb), "--gb", str(a.gb), "--cores", str(a.cores),
            "--tmp", str(a.tmp)]
    if a.master:
        args += ["--master", a.master, "--executor-memory", a.executor_memory]
    for kv in a.conf:
        args += ["--conf", kv]
    for kv in a.sluice_conf:
        args += ["--sluice-conf", kv]
    for kv in a.baseline_conf:
        args += ["--baseline-conf", kv]
    for kv in a.service_conf:
        args += ["--service-conf", kv]
    for kv in a.baseline_service_conf:
        args += ["--baseline-service-conf", kv]
    if a.baseline_jar:
        args += ["--baseline-jar", str(a.baseline_jar)]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.manager = manager
    return p


def ask(worker, **cmd):
    send(worker, **cmd)
    return reply(worker)


def ask_all(workers, **cmd):
    """The same command to every worker at once (they run it side by side:
    for answers, not for times), and their replies by key."""
    for w in workers.values():
        send(w, **cmd)
    return {m: reply(w) for m, w in workers.items()}


def send(worker, **cmd):
    worker.stdin.write(json.dumps(cmd) + "\n")
    worker.stdin.flush()


def reply(worker):
    line = worker.stdout.readline()
    if not line:
        sys.exit(f"a benchmark worker ({getattr(worker, 'manager', '?')}) died "
                 f"(exit {worker.wait()}; its JVM's errors are on stderr above)")
    return json.loads(line)


@contextlib.contextmanager
def worker_set(a, round_, start):
    """Round `round_` of --processes: one fresh worker per manager, started
    (by `start(a, manager)`) in the order of a.managers in even rounds and
    the opposite order in odd ones; yields that order and the workers, and
    stops them at the end whatever happened."""
    managers = a.managers if round_ % 2 == 0 else a.managers[::-1]
    workers = {m: start(a, m) for m in managers}
    try:
        yield managers, workers
    finally:
        for w in workers.values():
            if w.poll() is None:
                w.stdin.write(json.dumps({"op": "stop"}) + "\n")
                w.stdin.close()
                w.wait()


def run_interleaved(a):
    """Each workload's runs alternate between the managers (the first one
    to run swaps every rep), so that the VM's drift over a long run falls
    on all alike. With --processes N the whole set is repeated in N fresh
    sets of worker processes (worker_set), and the runs are pooled: one
    JVM's luck (its JIT's inlining choices, where its heap landed) is
    otherwise part of every run of its manager."""
    results = {}
    for round_ in range(a.processes):
        with worker_set(a, round_, start_worker) as (managers, workers):
            for name in a.workloads:
                for w in workers.values():
                    ask(w, op="prepare", workload=name)
                order = list(managers)
                for rep in range(a.reps):
                    for manager in order:
                        before = a.daemons.snapshot() if a.daemons else None
                        run = ask(workers[manager], op="run")
                        if before:
                            run["daemons"] = daemons.since(before, a.daemons.snapshot())
                        print(f"  {manager:11} {name:17} process {round_ + 1} run {rep + 1}: "
                              f"{run['seconds']:7.2f} s, "
                              f"JVM CPU {run['process_cpu_s']:7.2f} s, "
                              f"task CPU {run['task_cpu_s']:7.2f} s, "
                              f"page faults {run['minor_faults'] / 1e3:7.1f} K", flush=True)
                        results.setdefault(name, {}).setdefault(manager, []).append(run)
                    order.reverse()
                for w in workers.values():
                    ask(w, op="release")
    return results


def print_pairs(managers, results, medians):
    """Best and median wall time of each manager, and each manager's ratio
    to the first one (time of the first / time of this one: above 1 is
    faster than the first)."""
    first = managers[0]
    head = "".join(f" {m + ' s':>14} {'median':>7}" for m in managers)
    ratios = "".join(f" {first + '/' + m:>22}" for m in managers[1:])
    print(f"{'workload':17}{head}{ratios}  (best, median)")
    for name, r in results.items():
        cells = "".join(f" {r[m]['seconds']:14.2f} {medians[name][m]:7.2f}" for m in managers)
        rat = "".join(
            f" {r[first]['seconds'] / r[m]['seconds']:10.3f}x "
            f"{medians[name][first] / medians[name][m]:9.3f}x"
            for m in managers[1:]
        )
        print(f"{name:17}{cells}{rat}")


def add_cluster_args(ap):
    """--cluster and --executor-memory (bench.py and tpch.py), and the
    master's URL that the parent hands its workers."""
    ap.add_argument("--cluster", action="store_true",
                    help="run every manager's application on a standalone cluster on loopback: "
                         "a master and a worker on each of 127.0.0.1 and 127.0.0.2 (one executor "
                         "of one core per application on each), the service's daemons beside "
                         "them")
    ap.add_argument("--executor-memory", default="2g",
                    help="each executor's memory with --cluster (default 2g)")
    ap.add_argument("--daemon-memory", default="4g",
                    help="each sluice daemon's --memory for the sluice-service manager (default 4g)")
    ap.add_argument("--daemon-frame-memory",
                    help="each sluice daemon's --frame-memory (default: the daemon's, 256m)")
    ap.add_argument("--master", help=argparse.SUPPRESS)


def enter_cluster(stack, a):
    """With --cluster, starts the loopback cluster (CLUSTER_HOSTS), stopped
    when `stack` closes, with cores and memory for every manager's
    application at once, and sets a.master to its URL."""
    if not a.cluster:
        return
    (a.tmp / "cluster").mkdir(parents=True, exist_ok=True)
    memory_mb = parse_mb(a.executor_memory) * len(a.managers)
    a.master = stack.enter_context(standalone_cluster(
        a.tmp / "cluster", hosts=CLUSTER_HOSTS, cores=len(a.managers), memory=f"{memory_mb}m"))


def parse_mb(size):
    """MiB in a JVM-style size (512m, 2g)."""
    units = {"m": 1, "g": 1024}
    return int(float(size[:-1]) * units[size[-1].lower()])


def print_cluster(managers, results):
    """The --cluster table: per workload and manager (its fastest run), the
    time, the CPU of its JVMs and of the daemons, and what each task asked
    for: blocks per reduce task (each one read where it is stored under
    Spark's shuffle), daemon reads per reduce task and chunks and commits
    per map task (the service's), and the records the daemons' reduced
    reads took in and handed out."""
    print("CPU: the application's JVMs (driver, executors) + the daemons over the run.")
    print(f"{'workload':17} {'manager':15} {'s':>7} {'JVM CPU s':>9} {'daemon CPU s':>12} "
          f"{'shuffle GB':>10} {'blocks/reduce':>13} {'reads/reduce':>12} "
          f"{'chunks/map':>10} {'commits/map':>11} {'reduced in/out':>15}")
    for name, r in results.items():
        for m in managers:
            x = r[m]
            d = x.get("daemons") or {}
            reduces, maps = max(x["reduce_tasks"], 1), max(x["map_tasks"], 1)
            print(f"{name:17} {m:15} {x['seconds']:7.2f} {x['process_cpu_s']:9.2f} "
                  f"{d.get('cpu_s', 0):12.2f} {x['shuffle_bytes'] / 1e9:10.3f} "
                  f"{x['blocks'] / reduces:13.1f} {d.get('reads', 0) / reduces:12.2f} "
                  f"{d.get('chunks', 0) / maps:10.2f} {d.get('commits', 0) / maps:11.2f} "
                  f"{d.get('reduced_in', 0):>7}/{d.get('reduced_out', 0):<7}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--terasort-gb", type=float, default=2.2,
                    help="TeraSort input (GB; 2.2 makes the sort shuffle write over 2 GB)")
    ap.add_argument("--gb", type=float, default=1.0, help="input of the other workloads (GB)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2, help="runs of each workload; the fastest is kept")
    ap.add_argument("--processes", type=int, default=1,
                    help="fresh worker processes per manager, one after the other, started in "
                         "alternating order; --reps runs in each, all pooled (default 1)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated subset of {','.join(WORKLOADS)}")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/sluice-bench-spark"))
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for every manager's runs (repeatable), e.g. "
                         "spark.sql.execution.sortBeforeRepartition=false")
    ap.add_argument("--sluice-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the Sluice runs only (repeatable), "
                         "e.g. spark.sluice.operatorStateBytes=64m")
    ap.add_argument("--baseline-jar", type=pathlib.Path,
                    help="another Sluice build's jar: also run it, interleaved, as "
                         f"'{BASELINE}' (with --managers, e.g. sluice,{BASELINE})")
    ap.add_argument("--baseline-conf", action="append", default=[], metavar="KEY=VALUE",
                    help=f"a Spark setting for the '{BASELINE}' runs only (repeatable); without "
                         "--baseline-jar it runs this build's jar with those settings; with "
                         "spark.sluice.mode=service it runs against the daemons, as an "
                         "application of its own")
    ap.add_argument("--managers", default="sort,sluice",
                    help=f"which of sort, sluice, {BASELINE}, {SERVICE} to run (default "
                         f"sort,sluice; {SERVICE} starts two sluice daemons on loopback)")
    add_cluster_args(ap)
    ap.add_argument("--manager", choices=[*MANAGERS, BASELINE, SERVICE], help=argparse.SUPPRESS)
    ap.add_argument("--service-conf", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--baseline-service-conf", action="append", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args()
    bad = [kv for kv in a.conf + a.sluice_conf if "=" not in kv or not kv.startswith("spark.")]
    if bad:
        ap.error(f"--conf and --sluice-conf take spark.KEY=VALUE, got {bad}")
    a.workloads = [w for w in a.workloads.split(",") if w]
    unknown = [w for w in a.workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {WORKLOADS}")
    a.managers = [m for m in a.managers.split(",") if m]
    if any(m not in (*MANAGERS, BASELINE, SERVICE) for m in a.managers) or len(a.managers) < 2:
        ap.error(f"--managers takes two or more of sort, sluice, {BASELINE}, {SERVICE}")
    if not a.manager and (BASELINE in a.managers) != (
            a.baseline_jar is not None or bool(a.baseline_conf)):
        ap.error(f"--baseline-jar or --baseline-conf and the '{BASELINE}' manager go together")
    if a.processes < 1:
        ap.error("--processes takes 1 or more")
    if a.quick:
        a.terasort_gb, a.gb, a.reps = 0.05, 0.02, 1
    for jar in (JAR, EXAMPLES_JAR):
        if not jar.exists():
            sys.exit(f"{jar} is missing: run spark/build.sh")
    if a.manager:
        # Worker mode: replies go to the real stdout; everything else this
        # process or its JVM (which inherits fd 1) prints goes to stderr.
        worker_out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        w = Worker(a, a.manager)
        w.reply_to = worker_out
        w.serve()
        return
    a.tmp.mkdir(parents=True, exist_ok=True)
    a.daemons = None
    with contextlib.ExitStack() as stack:
        enter_cluster(stack, a)
        if needs_daemons(a):
            a.daemons = stack.enter_context(
                daemons.service_daemons(a.tmp / "service", memory=a.daemon_memory,
                                        frame_memory=a.daemon_frame_memory))
            a.service_conf = a.daemons.conf
            if BASELINE in a.managers:
                a.baseline_service_conf = a.daemons.conf_of(daemons.APP + "-base")
        runs = run_interleaved(a)
    results = {name: {m: min(rs, key=lambda r: r["seconds"]) for m, rs in by.items()}
               for name, by in runs.items()}
    medians = {name: {m: statistics.median(r["seconds"] for r in rs) for m, rs in by.items()}
               for name, by in runs.items()}
    print()
    if a.cluster:
        print_cluster(a.managers, results)
    if a.managers != ["sort", "sluice"]:
        print_pairs(a.managers, results, medians)
        if a.json:
            a.json.write_text(json.dumps({"best": results, "runs": runs}, indent=2))
        return
    print("JVM CPU: the whole Spark process (task threads, Sluice's native threads, GC);")
    print("per GB: divided by the GB the sort shuffle wrote, for both managers.")
    print(f"{'workload':17} {'sort s':>7} {'sluice s':>8} {'speedup':>7} {'sort CPU s':>10} "
          f"{'sluice CPU s':>12} {'sort CPU s/GB':>13} {'sluice CPU s/GB':>15} "
          f"{'shuffle GB sort':>15} {'sluice':>7} {'median sort/sluice s':>20}")
    for name, r in results.items():
        s, l = r["sort"], r["sluice"]
        gb_s, gb_l = s["shuffle_bytes"] / 1e9, l["shuffle_bytes"] / 1e9
        cs, cl = s["process_cpu_s"], l["process_cpu_s"]
        print(f"{name:17} {s['seconds']:7.2f} {l['seconds']:8.2f} "
              f"{s['seconds'] / l['seconds']:6.2f}x {cs:10.2f} {cl:12.2f} "
              f"{cs / max(gb_s, 1e-9):13.2f} {cl / max(gb_s, 1e-9):15.2f} "
              f"{gb_s:15.3f} {gb_l:7.3f} "
              f"{medians[name]['sort']:8.2f}/{medians[name]['sluice']:.2f} "
              f"{medians[name]['sort'] / medians[name]['sluice']:.2f}x")
    if a.json:
        a.json.write_text(json.dumps({"best": results, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
