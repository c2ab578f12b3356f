"""bench/tpch: the 22 TPC-H queries (or, with --suite tpcds, the 99 TPC-DS
queries) through Spark SQL, under Spark's sort shuffle and under Sluice, in
the same run, every answer checked.

Data: DuckDB's TPC-H or TPC-DS extension (PyPI: duckdb, duckdb-ext-tpch,
duckdb-ext-tpcds; installed from spark/requirements.txt) generates the
tables at --sf, written once as Parquet under --tmp and reused; the query
texts come from the same extension at run time (tpch_queries(),
tpcds_queries()), so none is committed here. TPC-DS's texts quote aliases
in double quotes, which Spark SQL reads as strings: they become backticks.

Two protocols. --protocol warm (the default):

Each manager runs in its own process and JVM (neither inherits the other's
JIT-compiled code), adaptive execution on (Spark's default); after an
untimed pass over the queries (--warmup), for each
shuffle partition count (--partitions) every query's --reps runs alternate
between the managers, the one going first swapping each rep, so that a slow
stretch of a shared VM falls on both alike. --processes N repeats all of
it (warm-up included) in N fresh sets of processes, started in
alternating order, and pools the runs: one JVM's own luck is otherwise in
all its runs. The fastest run of each is kept, and the sum of the
medians printed under the totals. Per query it prints wall time, the
ratio (sort / sluice: above 1 is
Sluice faster), task CPU and JVM CPU, shuffle bytes written, driver time
outside jobs (wall time not covered by any of the query's jobs: planning,
adaptive re-planning, waits between jobs), and which exchanges the final
adaptive plan holds (the path report: `X` Spark's row exchange, which under
Sluice is Sluice's plain partitioning, `A` Sluice's native aggregate, `S`
Sluice's native sort, `C` Comet's exchange, `B` a broadcast, `c` a coalesced
read). Every answer
is compared, as a multiset of rows, with the sort shuffle's; a difference
fails the run (exit 1). --json and --plot write the table and a bar chart
of the per-query ratios.

--managers sort,sluice,comet adds DataFusion Comet's columnar shuffle alone
(its JVM shuffle of Spark's rows into Arrow batches; Comet's native
operators and scans off) as a third manager, from Comet's jar for the Spark
line (Maven Central, fetched into spark/target/peers on first use): Comet
1.2.0 is published for Spark 4.1, the default line (Sluice's default jar
under spark/.venv's pyspark). Comet's session gets its jar on the class
path as Comet's guide says, and the off-heap memory Comet needs
(COMET_MEMORY), as every other manager's session in the run does, so that
all run with the same memory (--comet-memory-alone gives it to Comet's
runs only).

--protocol power runs a suite as a user runs it: each query once, in
order, in one fresh session per manager, no warm-up pass (--reps and
--warmup do not apply); the managers' sessions run one after the other,
the one going first swapping with each of --processes sets, and the sets
are pooled as above. What a manager pays the first time (JIT of its code,
the engine's start, pages faulted in) is in its figures.

--managers ...,sluice-service runs Sluice's service mode against two
release `sluice daemon`s on 127.0.0.1 and 127.0.0.2 (spark/daemons.py);
--cluster runs every manager on a standalone cluster on those addresses,
a worker beside each daemon and one single-core executor per application
on each (spark/bench.py --cluster), JVM CPU then summing the driver and
both executors. Each query of a session against the daemons records what
they did meanwhile (map outputs committed, streams read), and the report
names the queries that used them and sums the others apart: those ran as
in embedded mode but for their shuffles' registrations."""

import argparse
import collections
import contextlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench  # noqa: E402  (sessions, the worker protocol, JVM CPU)
import daemons  # noqa: E402  (the service mode's daemons)
from bench import ask, line_jar, process_cpu_s, thread_cpu_s, threads  # noqa: E402
MANAGERS = {"sort": "sort", "sluice": "dev.sluice.spark.SluiceShuffleManager"}
BASELINE = "sluice-base"
SERVICE = bench.SERVICE
# The peer a SQL user would pick: Comet's release for each Spark line it is
# published for on Maven Central (org.apache.datafusion:comet-spark-sparkL_2.13).
COMET = "comet"
COMET_RELEASES = {"4.1": "1.2.0"}
# Comet's columnar shuffle alone: its plugin and shuffle manager, its native
# operators and scans off, the JVM shuffle mode (rows in, Arrow batches out).
COMET_SETTINGS = {
    "spark.plugins": "org.apache.spark.CometPlugin",
    "spark.shuffle.manager": "org.apache.spark.sql.comet.execution.shuffle.CometShuffleManager",
    "spark.comet.enabled": "true",
    "spark.comet.exec.enabled": "false",
    "spark.comet.scan.enabled": "false",
    "spark.comet.shuffle.enabled": "true",
    "spark.comet.shuffle.mode": "jvm",
}
# The off-heap memory Comet's shuffle writers allocate from (Comet needs it).
# In a run with Comet every manager gets it, so that all run with the same
# memory: Spark's own execution memory (its sorts', aggregates' and joins'
# pages) then lives off the heap too, which took the garbage collector's CPU
# on TPC-DS sf 1 from 48 s to 10 s under the sort shuffle (docs/benchmarks.md).
COMET_MEMORY = {
    "spark.memory.offHeap.enabled": "true",
    "spark.memory.offHeap.size": "2g",
}
# Final-plan node names counted by the path report, and their letters.
PATHS = (
    ("SluiceAggregate", "A"),
    ("SluiceSortExchange", "S"),
    ("BroadcastExchange", "B"),
    ("Exchange hashpartitioning", "X"),
    ("Exchange rangepartitioning", "X"),
    ("Exchange SinglePartition", "X"),
    ("Exchange RoundRobinPartitioning", "X"),
    ("AQEShuffleRead coalesced", "c"),
    ("ReusedExchange", "R"),
)
# The per-query bound (issue 23): no query under this ratio to the
# sort shuffle; the report names the queries under it by best and median.
SLOW_RATIO = 0.95
# Queries of the benchmark's own beside TPC-H's: `groupby` is the small
# aggregate whose cost should not grow with the shuffle partition count
# (run it with --queries groupby --partitions 16,200,2000,10000).
EXTRA = {"groupby": "SELECT id % 97 AS g, count(*) AS n FROM range(0, 50000, 1, 2) GROUP BY id % 97"}


class Suite:
    """A benchmark suite of DuckDB's: its extension, generator, query texts
    and how many queries it has."""

    def __init__(self, name, generator, count):
        self.name = name
        self.generator = generator
        self.count = count

    def extension(self, con):
        """Loads the suite's DuckDB extension from its duckdb-ext-* wheel (no
        download: the extension file ships in the package)."""
        import duckdb_ext

        root = pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions"
        found = sorted(root.glob(f"*/*/{self.name}.duckdb_extension"))
        if not found:
            sys.exit(f"no {self.name}.duckdb_extension under {root}: "
                     "pip install -r spark/requirements.txt")
        con.execute(f"LOAD '{found[-1]}'")

    def queries(self):
        """The suite's query texts, keyed by number, as Spark SQL reads them."""
        import duckdb

        con = duckdb.connect()
        self.extension(con)
        texts = {n: spark_text(q) for n, q in con.execute(
            f"SELECT query_nr, query FROM {self.name}_queries() ORDER BY query_nr").fetchall()}
        return {**texts, **EXTRA} if self.name == "tpch" else texts

    def data(self, tmp, sf):
        """Where the suite's tables at scale factor sf are kept under tmp."""
        return tmp / (f"sf{sf:g}" if self.name == "tpch" else f"{self.name}-sf{sf:g}")


SUITES = {"tpch": Suite("tpch", "dbgen", 22), "tpcds": Suite("tpcds", "dsdgen", 99)}


def spark_text(q):
    """A DuckDB query text as Spark SQL reads it: no trailing semicolon,
    double-quoted identifiers (TPC-DS's aliases) in backticks. The texts
    quote string literals in single quotes only."""
    return re.sub(r'"([^"]*)"', r"`\1`", q.strip().rstrip(";"))


def error_text(e):
    """A failed query's error in one line: py4j's first line names only the
    call (`An error occurred while calling o1305.collectToPython.`), so the
    JVM exception's own first line follows it."""
    lines = [x.strip() for x in str(e).strip().split("\n") if x.strip()]
    cause = next((x for x in lines[1:] if not x.startswith("at ")), "")
    return " ".join(x for x in (lines[0] if lines else "", cause) if x)[:600]


def label(q):
    return f"q{q:02d}" if isinstance(q, int) else q


def value(v):
    """One value of an answer: a double to 12 significant digits (a sum or
    average of doubles depends on the order of its additions, which no
    shuffle fixes); -0.0 as 0.0 (a max or min over both
    keeps whichever came first); anything else as it is."""
    return float(f"{v:.12g}") + 0.0 if isinstance(v, float) else v


def generate(suite, sf, root):
    """The suite's tables at scale factor sf as Parquet under root (once)."""
    done = root / "_SUCCESS"
    if done.exists():
        return root
    import duckdb

    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    con = duckdb.connect()
    suite.extension(con)
    con.execute(f"CALL {suite.generator}(sf={sf})")
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]
    for table in tables:
        con.execute(f"COPY {table} TO '{root / table}.parquet' (FORMAT parquet)")
    done.write_text("")
    print(f"generated {suite.name} sf {sf} in {time.perf_counter() - t:.1f} s: {root}",
          file=sys.stderr)
    return root




def comet_jar(line):
    """Comet's jar for the Spark line, fetched from Maven Central on first use."""
    line = line or bench.DEFAULT_LINE
    release = COMET_RELEASES.get(line)
    if release is None:
        sys.exit(f"Comet is published for Spark {', '.join(COMET_RELEASES)} here: "
                 f"run with --line {next(iter(COMET_RELEASES))}")
    peers = HERE / "target" / "peers"
    artifact = f"comet-spark-spark{line}_2.13"
    jar = peers / f"{artifact}-{release}.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "-B", "dependency:copy",
                        f"-Dartifact=org.apache.datafusion:{artifact}:{release}",
                        f"-DoutputDirectory={peers}"], check=True)
    return jar


def session(manager, a, jar):
    settings = {
        "spark.driver.memory": a.driver_memory,
        "spark.sql.adaptive.enabled": "true",  # Spark's default, which the suite measures
    }
    if a.line == "3.5":
        # pyspark 3.5 does not find a session extension in a jar by itself.
        settings["spark.sql.extensions"] = bench.SQL_EXTENSIONS
    if manager == COMET:
        settings.update(COMET_SETTINGS)
        # Comet's sorting shuffle writer (more partitions than Spark's bypass
        # threshold) lives in Spark's package and needs Spark's class loader.
        settings["spark.driver.extraClassPath"] = str(jar)
        settings["spark.executor.extraClassPath"] = str(jar)
    if a.master:
        settings["spark.executor.memory"] = a.executor_memory
    settings.update(kv.partition("=")[::2] for kv in a.conf)
    extra = (a.baseline_conf if manager == BASELINE else []) + bench.service_conf(a, manager)
    return bench.session(manager, a.cores, a.tmp / manager, a.sluice_conf + extra, jar,
                         app="sluice-tpch", settings=settings, master=a.master)


def rest(spark, what):
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{what}"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def job_stats(spark, group):
    """Task CPU, shuffle bytes and the time covered by the jobs of one job
    group, from Spark's REST API. The listener bus that fills the REST API's
    store is asynchronous: read once its queues have drained (every event
    posted by the time collect() returned has reached the store), then
    polled while a job of the group still runs (one adaptive execution
    cancelled, ending a moment later)."""
    bus = spark.sparkContext._jsc.sc().listenerBus()
    for _ in range(40):
        bus.waitUntilEmpty(30_000)
        jobs = [j for j in rest(spark, "jobs") if j.get("jobGroup") == group]
        if all(j["status"] != "RUNNING" for j in jobs):
            break
        time.sleep(0.1)
    stage_ids = {s for j in jobs for s in j["stageIds"]}
    stages = [s for s in rest(spark, "stages?status=complete") if s["stageId"] in stage_ids]

    def ms(t):
        return time.mktime(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) * 1e3 + int(t[20:23])

    spans = sorted((ms(j["submissionTime"]), ms(j["completionTime"]))
                   for j in jobs if j.get("completionTime"))
    covered, end = 0.0, None
    for s, e in spans:
        if end is None or s > end:
            covered += e - s
            end = e
        elif e > end:
            covered += e - end
            end = e
    return {
        "jobs": len(jobs),
        "tasks": sum(s.get("numCompleteTasks", 0) for s in stages),
        "task_cpu_s": sum(s.get("executorCpuTime", 0) for s in stages) / 1e9,
        "shuffle_bytes": sum(s.get("shuffleWriteBytes", 0) for s in stages),
        "job_s": covered / 1e3,
    }


def paths(plan):
    """The path report of a final adaptive plan (its initial plan, printed
    after it, left out)."""
    plan = plan.split("== Initial Plan ==")[0]
    counts = collections.Counter()
    # Comet's exchanges print as Spark's do after their own name.
    for name in ("CometColumnarExchange", "CometExchange"):
        counts["C"] += plan.count(name)
        plan = plan.replace(name, "Comet's")
    for name, letter in PATHS:
        counts[letter] += plan.count(name)
    return "".join(f"{counts[c]}{c}" for c in "XACSBRc" if counts[c])


def canonical(rows):
    """A query's answer as a sorted list of row strings (ORDER BY ties may
    come in any order; the multiset of rows may not differ)."""
    return sorted(repr(tuple(value(v) for v in r)) for r in rows)


class Worker:
    """One manager's session serving the parent's commands (one JSON line
    each on stdin, one back)."""

    def __init__(self, a, manager):
        self.a = a
        jar = a.baseline_jar if manager == BASELINE and a.baseline_jar else line_jar(a.line)
        if manager == COMET:
            jar = comet_jar(a.line)
        self.spark = session(manager, a, jar)
        for table in sorted(a.data.glob("*.parquet")):
            self.spark.read.parquet(str(table)).createOrReplaceTempView(table.stem)
        self.texts = SUITES[a.suite].queries()
        self.runs = 0

    def run(self, query, partitions, gc=True):
        spark = self.spark
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        self.runs += 1
        group = f"{label(query)}-{self.runs}"
        spark.sparkContext.setJobGroup(group, group)
        cpu0, threads0 = process_cpu_s(spark), threads(spark)
        t = time.perf_counter()
        df = spark.sql(self.texts[query])
        try:
            rows = df.collect()
        except Exception as e:  # noqa: BLE001  (py4j's error: reported, the session goes on)
            return {"error": error_text(e)}
        wall = time.perf_counter() - t
        cpu = process_cpu_s(spark) - cpu0
        by_group = thread_cpu_s(threads0, threads(spark), cpu)
        plan = df._jdf.queryExecution().executedPlan().toString()
        stats = job_stats(spark, group)
        if gc:
            # Each timed query starts on a collected heap, none paying for
            # the garbage of the one before.
            spark.sparkContext._jvm.java.lang.System.gc()
        return {"seconds": wall, "process_cpu_s": cpu, "thread_cpu_s": by_group,
                "driver_s": max(0.0, wall - stats["job_s"]),
                "paths": paths(plan), "answer": canonical(rows), **stats}

    def serve(self, out):
        try:
            for line in sys.stdin:
                cmd = json.loads(line)
                if cmd.get("op") == "stop":
                    break
                print(json.dumps(self.run(cmd["query"], cmd["partitions"], cmd.get("gc", True))),
                      file=out, flush=True)
        finally:
            self.spark.stop()


def start_worker(a, manager):
    args = [sys.executable, __file__, "--manager", manager, "--suite", a.suite, "--sf", str(a.sf),
            "--cores", str(a.cores), "--tmp", str(a.tmp), "--driver-memory", a.driver_memory]
    if a.line:
        args += ["--line", a.line]
    memory = COMET in a.managers and (manager == COMET or not a.comet_memory_alone)
    for kv in [f"{k}={v}" for k, v in COMET_MEMORY.items() if memory] + a.conf:
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
    if a.master:
        args += ["--master", a.master, "--executor-memory", a.executor_memory]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.manager = manager
    return p


def run_interleaved(a):
    """Each query's runs alternate between the managers (the first one to
    run swaps every rep). With --processes N the whole pass, warm-up
    included, is repeated in N fresh sets of worker processes
    (bench.worker_set), and the runs are pooled, so that no one JVM's luck
    (what its JIT inlined) is part of every run of its manager."""
    runs = {}
    wrong = []
    for round_ in range(a.processes):
        with bench.worker_set(a, round_, start_worker) as (managers, workers):
            # Untimed: every query once per manager, so that the timed runs
            # compare JIT-compiled code on both sides (the first pass over
            # the queries runs up to 2x slower than later ones).
            for _ in range(a.warmup):
                for q in a.queries:
                    for m in managers:
                        ask(workers[m], query=q, partitions=a.partitions[0])
            for partitions in a.partitions:
                order = list(managers)
                for q in a.queries:
                    for rep in range(a.reps):
                        for m in order:
                            r = ask_counting(a, workers[m], m, query=q,
                                             partitions=partitions)
                            record(a, runs, wrong, partitions, q, m, r, f"process {round_ + 1} "
                                   f"run {rep + 1}")
                        order.reverse()
    return runs, wrong


def ask_counting(a, worker, m, **cmd):
    """`ask`, and for a session of `m` that runs against the daemons, what
    they did during the query (no other session runs beside it in these
    protocols): the map outputs they took in (commits) and the streams they
    served (reads). A query they neither took nor served an output of ran
    as in embedded mode, the shuffles' registrations aside."""
    d = a.daemons if a.daemons is not None and bench.service_conf(a, m) else None
    before = snapshot(d)
    r = ask(worker, **cmd)
    after = snapshot(d) if before else None
    if after and "error" not in r:
        did = daemons.since(before, after)
        r["service_commits"], r["service_reads"] = did["commits"], did["reads"]
    return r


def snapshot(d):
    """The daemons' counts, or None without daemons or where one does not
    answer (the query's own result says what went wrong)."""
    if d is None:
        return None
    try:
        return d.snapshot()
    except subprocess.CalledProcessError as e:
        print(f"  the daemons' counts not read: {e}", flush=True)
        return None


def run_power(a):
    """The power run: for each set of processes and partition count, each
    manager in a fresh session of its own runs every query once, in order,
    with no warm-up; the managers' sessions run one after the other, the
    one going first swapping each time."""
    runs = {}
    wrong = []
    turn = 0
    for round_ in range(a.processes):
        for partitions in a.partitions:
            managers = a.managers if turn % 2 == 0 else a.managers[::-1]
            turn += 1
            if a.concurrent:
                with bench.worker_set(a, round_, start_worker) as (_, workers):
                    for q in a.queries:
                        # Side by side, the times say nothing: no collection between queries.
                        answers = bench.ask_all(workers, query=q, partitions=partitions, gc=False)
                        for m, r in answers.items():
                            record(a, runs, wrong, partitions, q, m, r,
                                   f"process {round_ + 1} run 1")
                continue
            for m in managers:
                worker = start_worker(a, m)
                try:
                    for q in a.queries:
                        r = ask_counting(a, worker, m, query=q, partitions=partitions)
                        record(a, runs, wrong, partitions, q, m, r,
                               f"process {round_ + 1} run 1")
                finally:
                    if worker.poll() is None:
                        worker.stdin.write(json.dumps({"op": "stop"}) + "\n")
                        worker.stdin.close()
                        worker.wait()
    return runs, wrong


def record(a, runs, wrong, partitions, q, m, r, which):
    """Prints one run, checks its answer and keeps it; a query that failed
    is a wrong answer (the failure printed)."""
    if "error" in r:
        wrong.append((partitions, q, m))
        print(f"  {m:11} p={partitions:<5} {label(q):7} {which}: FAILED: {r['error']}",
              flush=True)
        return
    print(f"  {m:11} p={partitions:<5} {label(q):7} {which}: "
          f"{r['seconds']:7.2f} s, task CPU {r['task_cpu_s']:6.2f} s, "
          f"driver {r['driver_s']:5.2f} s, {r['jobs']} jobs, "
          f"{r['tasks']} tasks, {r['paths']}", flush=True)
    check_answer(a, runs, wrong, partitions, q, m, r.pop("answer"))
    runs[(partitions, q)].setdefault(m, []).append(r)


def check_answer(a, runs, wrong, partitions, q, m, answer):
    """The first answer of a query at a partition count (the first
    manager's, in the first set of processes) is the reference; every later
    one, of any manager or process, must equal it."""
    ref = runs.get((partitions, q), {}).get("answer")
    if ref is None:
        runs.setdefault((partitions, q), {})["answer"] = answer
    elif answer != ref:
        wrong.append((partitions, q, m))
        print(f"  WRONG ANSWER: {label(q)} p={partitions} under {m} differs from "
              f"{a.managers[0]}'s ({len(answer)} rows against {len(ref)})", flush=True)


def report(a, runs):
    """Per partition count, one row per query: best times, the ratio of the
    first manager to each other, CPU, shuffle bytes, driver time, paths."""
    first, rows = a.managers[0], []
    for partitions in a.partitions:
        print(f"\n{a.suite} shuffle partitions {partitions}, scale factor {a.sf}, "
              f"{a.protocol} protocol, best of "
              f"{a.processes if a.protocol == 'power' else a.reps * a.processes} "
              f"({a.processes} processes per manager)")
        head = "".join(f" {m + ' s':>10} {'ratio':>6} {'tCPU':>6} {'drv':>5} {'MB':>7} "
                       f"{'paths':>10}" for m in a.managers)
        print(f"{'query':7}{head}")
        totals = collections.defaultdict(float)
        for q in a.queries:
            r = runs.get((partitions, q), {})
            if any(m not in r for m in a.managers):
                print(f"{label(q):7} failed under "
                      f"{', '.join(m for m in a.managers if m not in r)}")
                continue
            best = {m: min(r[m], key=lambda x: x["seconds"]) for m in a.managers}
            line = f"{label(q):7}"
            row = {"partitions": partitions, "query": q}
            for m in a.managers:
                b = best[m]
                ratio = best[first]["seconds"] / b["seconds"]
                totals[m] += b["seconds"]
                totals[m + " cpu"] += b["task_cpu_s"]
                totals[m + " jvm"] += b["process_cpu_s"]
                for g, c in b.get("thread_cpu_s", {}).items():
                    totals[m + " thread " + g] += c
                line += (f" {b['seconds']:10.2f} {ratio:6.2f} {b['task_cpu_s']:6.2f} "
                         f"{b['driver_s']:5.2f} {b['shuffle_bytes'] / 1e6:7.1f} {b['paths']:>10}")
                row[m] = {**b, "ratio": ratio,
                          "median_s": statistics.median(x["seconds"] for x in r[m])}
                row[m]["median_ratio"] = row[first]["median_s"] / row[m]["median_s"]
                totals[m + " median"] += row[m]["median_s"]
            rows.append(row)
            print(line)
        line = "total  "
        for m in a.managers:
            line += (f" {totals[m]:10.2f} {totals[first] / totals[m]:6.2f} "
                     f"{totals[m + ' cpu']:6.2f} {'':5} {'':7} {'':>10}")
        print(line)
        print("sum of medians: " + ", ".join(
            f"{m} {totals[m + ' median']:.2f} s ({totals[first + ' median'] / totals[m + ' median']:.2f})"
            for m in a.managers))
        print("JVM CPU (all threads): " + ", ".join(
            f"{m} {totals[m + ' jvm']:.1f} s" for m in a.managers))
        groups = [g for g, _ in bench.THREAD_GROUPS] + ["other", "ended"]
        for m in a.managers:
            print(f"JVM CPU of {m} by thread group, best runs: " + ", ".join(
                f"{g} {totals[m + ' thread ' + g]:.1f} s" for g in groups))
        for m in a.managers[1:]:
            print(slowest([r for r in rows if r["partitions"] == partitions], m))
        for m in a.managers:
            split = service_split([r for r in rows if r["partitions"] == partitions], m, a.managers)
            if split:
                print(split)
    return rows


def slowest(rows, m):
    """The lowest ratio of manager `m` by best time and by median time, and
    the queries under SLOW_RATIO by both (one JVM's luck moves a query's
    best or its median, seldom both: docs/benchmarks.md)."""
    best = min(rows, key=lambda r: r[m]["ratio"])
    median = min(rows, key=lambda r: r[m]["median_ratio"])
    both = [label(r["query"]) for r in rows
            if r[m]["ratio"] < SLOW_RATIO and r[m]["median_ratio"] < SLOW_RATIO]
    return (f"slowest ratio of {m}: {label(best['query'])} {best[m]['ratio']:.2f}x by best time, "
            f"{label(median['query'])} {median[m]['median_ratio']:.2f}x by median; "
            f"under {SLOW_RATIO}x by both: {', '.join(both) or 'none'}")


def service_split(rows, m, managers):
    """For a manager whose sessions ran against the daemons: the queries
    whose best run pushed map outputs to them or read from them, with the
    daemons' commits and reads, and the totals of best runs over those and
    over the others (which ran as in embedded mode) for every manager; None
    for another manager."""
    if not any("service_commits" in r[m] for r in rows):
        return None
    used = [r for r in rows if r[m].get("service_commits") or r[m].get("service_reads")]
    rest = [r for r in rows if r not in used]
    lines = [f"{m} at the daemons, best runs: " + (", ".join(
        f"{label(r['query'])} {r[m]['service_commits']} commits {r[m]['service_reads']} reads"
        for r in used) or "no query")]
    for what, part in (("those queries", used), ("the others", rest)):
        if part:
            lines.append(f"  {what} ({len(part)}), sum of best runs: " + ", ".join(
                f"{o} {sum(r[o]['seconds'] for r in part):.2f} s" for o in managers))
    return "\n".join(lines)


def plot(a, rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(a.partitions), 1, figsize=(11, 3.2 * len(a.partitions)),
                             squeeze=False)
    for ax, partitions in zip(axes[:, 0], a.partitions):
        mine = [r for r in rows if r["partitions"] == partitions]
        for i, m in enumerate(a.managers[1:]):
            xs = [j + 0.3 * i for j in range(len(mine))]
            ax.bar(xs, [r[m]["ratio"] for r in mine], width=0.3, label=f"{a.managers[0]} / {m}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.95, color="red", linewidth=0.6, linestyle="--")
        ax.set_xticks(range(len(mine)), [label(r["query"]) for r in mine], fontsize=7)
        ax.set_ylabel("speed-up (x)")
        ax.set_title(f"{a.suite} sf {a.sf}, {partitions} shuffle partitions, local[{a.cores}]")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="tpch")
    ap.add_argument("--sf", type=float, default=1.0, help="scale factor")
    ap.add_argument("--protocol", choices=("warm", "power"), default="warm",
                    help="warm: warm-up pass, runs interleaved; power: each query once, in "
                         "order, a fresh session per manager (see above)")
    ap.add_argument("--partitions", default="16,200",
                    help="comma-separated spark.sql.shuffle.partitions to run at")
    ap.add_argument("--queries", default="", help="comma-separated query numbers (all)")
    ap.add_argument("--concurrent", action="store_true",
                    help="power protocol, for answers only (the tests): the managers' sessions "
                         "run each query at the same time, so their times are not comparable")
    ap.add_argument("--reps", type=int, default=2, help="runs of each query; the fastest is kept")
    ap.add_argument("--processes", type=int, default=1,
                    help="fresh worker processes per manager, one set after the other, started "
                         "in alternating order; warm-up and --reps in each, all pooled")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed passes over the queries before the timed ones")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--quick", action="store_true", help="sf 0.1, 16 partitions, one rep")
    ap.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/sluice-tpch"))
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--plot", type=pathlib.Path, help="a PNG of the per-query speed-ups")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for every manager's session (JVM options, say)")
    ap.add_argument("--sluice-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the Sluice runs only (repeatable)")
    ap.add_argument("--comet-memory-alone", action="store_true",
                    help="with comet among the managers, give its off-heap memory to its runs "
                         "only (by default every manager runs with it)")
    ap.add_argument("--baseline-jar", type=pathlib.Path,
                    help=f"another Sluice build's jar, run as '{BASELINE}' (with --managers)")
    ap.add_argument("--baseline-conf", action="append", default=[], metavar="KEY=VALUE",
                    help=f"a Spark setting for the '{BASELINE}' runs only (repeatable); without "
                         "--baseline-jar it runs this build's jar with those settings; with "
                         "spark.sluice.mode=service it runs against the daemons, as an "
                         "application of its own")
    ap.add_argument("--managers", default="sort,sluice",
                    help=f"two or more of sort, sluice, {BASELINE}, {COMET}, {SERVICE} (this "
                         "build in service mode against two sluice daemons it starts on loopback); "
                         "answers are checked against the first")
    ap.add_argument("--line", default=bench.LINE,
                    help="the Spark line whose Sluice jar runs (spark/build.sh --line L), under "
                    "that line's pyspark (spark/tpch.sh --line L); default SLUICE_LINE's, or 4.1's")
    bench.add_cluster_args(ap)
    ap.add_argument("--manager", help=argparse.SUPPRESS)
    ap.add_argument("--service-conf", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--baseline-service-conf", action="append", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.sf, a.partitions, a.reps, a.warmup = 0.1, "16", 1, 0
    a.partitions = [int(p) for p in a.partitions.split(",") if p]
    suite = SUITES[a.suite]
    a.queries = [int(q) if q.isdigit() else q for q in a.queries.split(",") if q] or list(
        range(1, suite.count + 1))
    extra = EXTRA if a.suite == "tpch" else {}
    unknown = [q for q in a.queries if not isinstance(q, int) and q not in extra]
    if unknown or any(isinstance(q, int) and not 1 <= q <= suite.count for q in a.queries):
        ap.error(f"--queries takes 1-{suite.count} {' '.join(extra)}, got {a.queries}")
    a.managers = [m for m in a.managers.split(",") if m]
    a.data = suite.data(a.tmp, a.sf)
    if a.manager:
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        Worker(a, a.manager).serve(out)
        return
    if len(a.managers) < 2 or any(m not in (*MANAGERS, BASELINE, COMET, SERVICE)
                                  for m in a.managers):
        ap.error(f"--managers takes two or more of sort, sluice, {BASELINE}, {COMET}, {SERVICE}")
    import pyspark

    if a.line and not pyspark.__version__.startswith(a.line + "."):
        ap.error(f"--line {a.line} under pyspark {pyspark.__version__}: run spark/tpch.sh "
                 f"--line {a.line} (its venv)")
    if COMET in a.managers:
        comet_jar(a.line)
    if (BASELINE in a.managers) != (a.baseline_jar is not None or bool(a.baseline_conf)):
        ap.error(f"--baseline-jar or --baseline-conf and the '{BASELINE}' manager go together")
    if a.concurrent and a.protocol != "power":
        ap.error("--concurrent goes with --protocol power")
    if a.processes < 1:
        ap.error("--processes takes 1 or more")
    if not line_jar(a.line).exists():
        sys.exit(f"{line_jar(a.line)} is missing: run spark/build.sh {a.line and '--line ' + a.line}")
    generate(suite, a.sf, a.data)
    t = time.perf_counter()
    a.daemons = None  # the service's daemons, where a manager runs against them
    with contextlib.ExitStack() as stack:
        bench.enter_cluster(stack, a)
        if bench.needs_daemons(a):
            running = stack.enter_context(
                daemons.service_daemons(a.tmp / "service", memory=a.daemon_memory))
            a.service_conf = running.conf
            a.daemons = running
            if BASELINE in a.managers:
                a.baseline_service_conf = running.conf_of(daemons.APP + "-base")
        runs, wrong = run_power(a) if a.protocol == "power" else run_interleaved(a)
    rows = report(a, runs)
    print(f"\n{len(a.queries) * len(a.partitions)} query settings, {len(wrong)} wrong answers, "
          f"{time.perf_counter() - t:.0f} s")
    if a.json:
        a.json.write_text(json.dumps({"suite": a.suite, "sf": a.sf, "protocol": a.protocol,
                                      "cores": a.cores, "rows": rows}, indent=2))
    if a.plot:
        plot(a, rows, a.plot)
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
