"""Sluice's service mode under real Spark with two real `sluice daemon`
processes, one per node address (127.0.0.1 and 127.0.0.2): map output
pushed to the daemons, each reduce task's partitions read from the daemon
that owns them as one stream, answers equal to Spark's sort shuffle's
(local[2]); an executor killed after its map tasks committed costs no map
rerun (a standalone cluster with a worker on each address), where the same
kill in embedded mode does, and a host lost after reads reruns only its
maps; a daemon that refuses the application's key
leaves its shuffles embedded, one that cannot be reached when a shuffle
registers is left out of it, and a read that fails at a daemon has the
rerun assigned over the live daemons; a read its reduce task leaves
waiting past a daemon's stall limit resumes on a new connection; the
daemons hold nothing once the application ends."""

import contextlib
import gc
import json
import os
import pathlib
import subprocess
import threading
import time

import pytest

import workloads
from standalone import executor_pids, free_port, kill_worker, standalone_cluster
from clusters import settled, stage_attempts
from conftest import SLUICE, SPECULATION, session, slow_first_attempt, stage_data
from test_9_executors import _executors, _map_tasks_run, _wait

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sluice_binary():
    """The CLI's binary (`cargo test --workspace` builds it before the Spark tests)."""
    subprocess.run(["cargo", "build", "-q", "-p", "sluice-cli", "--bin", "sluice"], cwd=ROOT, check=True)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "sluice"


class Daemon:
    def __init__(self, binary, host, secret, tmp, port=0, directory=None, args=()):
        self.binary, self.host, self.secret, self.tmp = binary, host, secret, tmp
        self.args = tuple(args)
        self.dir = directory or tmp / f"daemon-{host}"
        self.dir.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [str(binary), "daemon", "--host", host, "--port", str(port), "--dir", str(self.dir),
             "--memory", "8m", "--secret-file", str(secret), *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("sluice daemon listening on "), (line, self.proc.stderr.read())
        self.addr = line.split()[-1]

    def kill(self):
        """SIGKILL: no shutdown, nothing cleaned up."""
        self.proc.kill()
        self.proc.wait(timeout=30)

    def restarted(self):
        """A new daemon process on the same address and directory."""
        return Daemon(self.binary, self.host, self.secret, self.tmp,
                      port=self.addr.rsplit(":", 1)[1], directory=self.dir, args=self.args)

    def stop(self):
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out

    def data_files(self):
        return [p for p in self.dir.rglob("*.data")]

    def stats(self):
        """The daemon's accounting and counts (`sluice stats`)."""
        out = subprocess.run([str(self.binary), "stats", "--daemon", self.addr,
                              "--secret-file", str(self.secret)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    def held(self):
        """Bytes the daemon holds in memory now."""
        return self.stats()["held_bytes"]


def start_daemons(tmp, directories=(None, None), args=()):
    """A daemon per entry of `directories` (127.0.0.1, 127.0.0.2, ...: two
    by default), each given `args` too, under one node secret, and the
    application key of `sluice-test`."""
    binary = sluice_binary()
    secret = tmp / "secret"
    secret.write_bytes(os.urandom(32))
    secret.chmod(0o600)
    ds = [Daemon(binary, host, secret, tmp, directory=d, args=args)
          for host, d in zip([f"127.0.0.{i + 1}" for i in range(len(directories))], directories)]
    key = subprocess.run([str(binary), "app-key", "--secret-file", str(secret), "--app", "sluice-test"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return ds, key


def stop_all(ds):
    for d in ds:
        if d.proc.poll() is None:
            d.stop()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    ds, key = start_daemons(tmp_path_factory.mktemp("service"))
    try:
        yield ds, key
    finally:
        stop_all(ds)


@pytest.fixture
def own_daemons(tmp_path):
    """Daemons of one test's own, for tests that kill or fill them."""
    made = []

    def start(directories=(None, None), args=()):
        ds, key = start_daemons(tmp_path, directories, args)
        made.append(ds)
        return ds, key

    yield start
    for ds in made:
        for d in ds:
            if d.proc.poll() is None:
                d.kill()


def service_conf(ds, key, app="sluice-test"):
    return {
        "spark.sluice.mode": "service",
        "spark.sluice.service.daemons": ",".join(d.addr for d in ds),
        "spark.sluice.service.app": app,
        "spark.sluice.service.appSecret": key,
        "spark.sql.shuffle.partitions": "8",
        # The tests' map outputs are kilobytes: every one pushed, except where a
        # test asks for the defaults (small outputs, and the outputs of small
        # shuffles, stay on their executors).
        "spark.sluice.service.minPushBytes": "0",
        "spark.sluice.service.minShuffleBytes": "0",
    }


def jobs(spark):
    """Shuffles the daemons keep (no aggregator or ordering in the shuffle
    itself): an RDD partitionBy, SQL exchanges under an aggregate and a join
    (adaptive execution on, so reads cover coalesced ranges), and a
    repartition big enough to spill past the daemons' 8 MiB."""
    sc = spark.sparkContext
    part = sorted(sc.parallelize(range(20000), 4).map(lambda x: (x % 97, x)).partitionBy(7)
                  .glom().map(lambda p: (len(p), sum(v for _, v in p))).collect())
    spark.range(0, 200000).selectExpr("id % 1000 AS k", "id AS v").createOrReplaceTempView("t")
    agg = sorted(tuple(r) for r in spark.sql("SELECT k, count(*), sum(v) FROM t GROUP BY k").collect())
    join = spark.sql("SELECT a.k, count(*) FROM t a JOIN (SELECT k FROM t WHERE v < 5000) b "
                     "ON a.k = b.k GROUP BY a.k").collect()
    big = spark.range(0, 800000).selectExpr("id", "sha2(cast(id AS string), 256) AS pad").repartition(6)
    rows = big.selectExpr("sum(id)", "count(*)", "sum(length(pad))").collect()[0]
    return part, agg, sorted(tuple(r) for r in join), tuple(rows)


def test_service_shuffles_give_the_sort_shuffles_answers(daemons, tmp_path):
    ds, key = daemons
    ref = session("local[2]", "sort", tmp_path / "sort")
    try:
        want = jobs(ref)
    finally:
        ref.stop()
    s = session("local[2]", SLUICE, tmp_path / "service", extra=service_conf(ds, key))
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        outputs0, reads0 = m.serviceMapOutputs(), m.serviceReads()
        got = jobs(s)
        outputs, reads = m.serviceMapOutputs() - outputs0, m.serviceReads() - reads0
    finally:
        s.stop()
    assert got == want
    assert outputs > 0, "no map output went to the daemons"
    assert reads > 0, "no reduce task read from the daemons"
    # The application ended: the daemons deleted what they held, spilled files included.
    for d in ds:
        assert d.data_files() == [], d.data_files()


# Shuffles of every kind Sluice runs: a sort merged natively (ORDER BY), the
# engine's own operators (SQL aggregates, the offloaded reduceByKey), plain
# ones (SQL exchanges), and PySpark's RDD shuffles (sortByKey, reduceByKey,
# groupByKey, distinct, join), which reach the JVM as plain shuffles of
# pickled records (PySpark sorts and combines them in Python).
KINDS = ("terasort", "sort_by_key", "wordcount", "distinct", "join", "sql_group_by",
         "sql_aggregate", "sql_order_by")
# The kinds whose native reduce operator is a merge of sorted runs.
MERGED = ("sql_order_by",)


def kinds(spark, offloaded, seen=lambda name: None):
    """The answer of each kind of shuffle; seen(name) is called after each."""
    out = {}
    for name in KINDS:
        out[name] = workloads.ALL[name](spark)
        seen(name)
    sc = spark.sparkContext
    out["group_by_key"] = sorted((k, sorted(v)) for k, v in workloads.pairs(sc, 20000, 300, 4)
                                 .groupByKey(5).collect())
    seen("group_by_key")
    job = sc._jvm.dev.sluice.spark.examples.ReduceByKeyJob
    out["offloaded"] = list(job.checksum(sc._jsc, 100_000, 5_000, 4, 6, offloaded))
    seen("offloaded")
    return out


@pytest.fixture(scope="module")
def kinds_by_sort(tmp_path_factory):
    """The sort shuffle's answers to `kinds`, computed once for the module."""
    ref = session("local[2]", "sort", tmp_path_factory.mktemp("sort"))
    try:
        return kinds(ref, offloaded=False)
    finally:
        ref.stop()


# reduceAtDaemon=false reads every shuffle in the tasks, as auto reads all but
# the aggregates: CI runs auto and true, the extended tier false as well.
@pytest.mark.parametrize("at_daemon", [pytest.param("false", marks=pytest.mark.extended),
                                       "auto", "true"],
                         ids=["reduceAtDaemon_false", "reduceAtDaemon_auto", "reduceAtDaemon_true"])
def test_every_kind_of_shuffle_through_the_daemons(daemons, kinds_by_sort, tmp_path, at_daemon):
    # The reduce task reads each daemon's share as one stream and feeds a
    # sort's merge or an aggregate's final table with it as it would fetched
    # segments: the sort shuffle's answers, every map output at the daemons.
    # service.reduceAtDaemon chooses which shuffles the daemons reduce first
    # (one segment per partition): under auto, the default, the aggregates
    # (the offloaded reduceByKey; fewer records out than in), not the merge
    # of sorted runs (ORDER BY); under true that too; under false none.
    ds, key = daemons
    want = kinds_by_sort
    extra = dict(service_conf(ds, key), **{"spark.sluice.service.reduceAtDaemon": at_daemon})
    s = session("local[2]", SLUICE, tmp_path / "service", extra=extra)
    reduced_by, step = {}, {}

    def reduced():
        return [sum(d.stats()[f] for d in ds)
                for f in ("reduced_reads", "reduced_in", "reduced_out")]

    def seen(name):
        nonlocal last
        now = reduced()
        # The step's reads reduced at the daemons, their records in and out,
        # and the stages it ran.
        ids = [st.stageId() for st in stage_data(s)]
        step[name] = ([a - b for a, b in zip(now, last)],
                      [i for i in ids if i > step_last[0]])
        reduced_by[name], last = now[0] - last[0], now
        step_last[0] = max(ids, default=step_last[0])

    try:
        counts = _metrics(s)
        before, daemons_before = counts(), [d.stats() for d in ds]
        last, step_last = reduced(), [max((st.stageId() for st in stage_data(s)), default=-1)]
        got = kinds(s, offloaded=True, seen=seen)
        after, daemons_after = counts(), [d.stats() for d in ds]
        # Spark's records written and read (its UI's) for the offloaded
        # aggregate's stages: a read the daemons reduced delivers the results,
        # so the reduce stage reads the daemons' records out, and the map stage
        # wrote what they took in; a plain read, every record written.
        (_, took_here, gave_here), ids = step["offloaded"]
        stages = [st for st in stage_data(s) if st.stageId() in ids]
        written = sum(st.shuffleWriteRecords() for st in stages)
        read = sum(st.shuffleReadRecords() for st in stages)
    finally:
        s.stop()
    assert written > 0, [str(st) for st in stages]
    if at_daemon == "false":
        assert read == written, (read, written)
    else:
        assert (written, read) == (took_here, gave_here), (written, read, took_here, gave_here)
    for name in want:
        assert got[name] == want[name], name
    pushed, kept, reads = (a - b for a, b in zip(after, before))
    assert pushed > 0 and kept == 0 and reads > 0, (pushed, kept, reads)
    reduced, took, gave = (sum(a[f] - b[f] for a, b in zip(daemons_after, daemons_before))
                           for f in ("reduced_reads", "reduced_in", "reduced_out"))
    if at_daemon == "false":
        assert (reduced, took, gave) == (0, 0, 0)
        return
    assert reduced_by["offloaded"] > 0, ("the aggregate was not reduced at a daemon", reduced_by)
    assert took > gave > 0, ("the daemons' aggregates combined nothing", took, gave)
    merged = {name: reduced_by[name] for name in MERGED}
    if at_daemon == "auto":
        assert not any(merged.values()), ("auto reduced a merge at the daemons", merged)
    else:
        assert all(merged.values()), ("true left a merge to the tasks", merged)


def exchange_blocks_read(df):
    """The blocks the reduce tasks of `df`'s one shuffle query stage fetched
    (its exchange's read metrics), after `df` ran."""
    node = df._jdf.queryExecution().executedPlan().executedPlan()
    todo, blocks = [node], []
    while todo:
        n = todo.pop()
        if "ResultQueryStage" in n.nodeName():
            todo.append(n.plan())
        elif "ShuffleQueryStage" in n.nodeName():
            m = n.shuffle().metrics()
            blocks.append(m.apply("localBlocksFetched").value()
                          + m.apply("remoteBlocksFetched").value())
        else:
            ch = n.children()
            todo += [ch.apply(i) for i in range(ch.size())]
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_small_map_outputs_stay_on_their_executors(daemons, tmp_path):
    # With the default service.minPushBytes (1 MiB), one map task of four
    # writes megabytes, to reduce partitions 0-2, and is pushed; the other
    # three write a few kilobytes, to partitions 3-5, and stay on the
    # executor. So half the reduce tasks read a daemon's stream and half
    # fetch from the executor. Reduce-side locality stays on: the pushed
    # output's status names its writer's host, so every reduce task prefers
    # the executor's host (a host of no executor's would hold the first half
    # back for ever in local mode, which offers its cores again only when a
    # task ends; a timer cancels the job if it hangs). A shuffle of kilobytes
    # only never reaches a daemon. Spark SQL's rows of a coalesced read over
    # one pushed output and three kept ones. Then, under the default
    # service.minShuffleBytes (256 MiB), the first job again: its 2.5 MB
    # output puts the shuffle of four maps at about 10 MB, so it stays on the
    # executor too; and SQL rows through a coalesced read of outputs all kept.
    ds, key = daemons
    conf = service_conf(ds, key)
    del conf["spark.sluice.service.minPushBytes"]

    def skewed(spark, keep=None):
        def rows(i, _):
            import hashlib  # in the Python worker
            n = 120_000 if i == 0 else 50  # about 2.5 MB compressed, and about 1 KB
            return ((6 * x + (x % 3 if i == 0 else 3 + x % 3),
                     hashlib.sha1(f"{i}-{x}".encode()).hexdigest()) for x in range(n))
        rdd = spark.sparkContext.parallelize(range(4), 4).mapPartitionsWithIndex(rows)
        parted = rdd.partitionBy(6, lambda k: k % 6)
        if keep is not None:
            keep.append(parted)
        return parted.glom().map(
            lambda p: (len(p), sum(k for k, _ in p), sum(len(v) for _, v in p))).collect()

    def tiny(spark):
        rdd = spark.sparkContext.parallelize(range(2000), 4).map(lambda x: (x % 13, x))
        return sorted(rdd.partitionBy(5).mapPartitions(lambda it: [sum(v for _, v in it)]).collect())

    def rows(spark):
        # SQL rows of a repartition that adaptive execution coalesces into
        # one read (its advisory size, not the parallelism, deciding): the
        # kept outputs' contiguous partitions fetched as one, one block per
        # map output (32 without, one per map and partition).
        spark.conf.set("spark.sql.adaptive.coalescePartitions.parallelismFirst", "false")
        df = spark.range(0, 200000, 1, 4).selectExpr("id % 1000 AS k", "id AS v").repartition("k")
        df = df.groupBy("k").agg({"v": "sum", "*": "count"})
        answer = sorted(tuple(r) for r in df.collect())
        return answer, exchange_blocks_read(df)

    def mixed_rows(spark):
        # SQL rows of a coalesced read over one pushed map output (the first
        # map task's 100,000 rows, megabytes) and three kept ones (800 rows
        # each, keys 0-7): the daemons' stream beside the kept outputs
        # fetched in batches.
        spark.conf.set("spark.sql.adaptive.coalescePartitions.parallelismFirst", "false")
        df = spark.range(0, 400000, 1, 4).where("id < 100000 OR id % 1000 < 8") \
            .selectExpr("id % 1000 AS k", "sha1(cast(id AS string)) AS v").repartition("k")
        df = df.groupBy("k").agg({"v": "max", "*": "count"})
        answer = sorted(tuple(r) for r in df.collect())
        return answer, exchange_blocks_read(df)

    ref = session("local[2]", "sort", tmp_path / "sort")
    try:
        want = skewed(ref), tiny(ref), rows(ref), mixed_rows(ref)
    finally:
        ref.stop()
    s = session("local[2]", SLUICE, tmp_path / "service", extra=conf)
    timer = threading.Timer(240, s.sparkContext.cancelAllJobs)
    timer.start()
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        counts = lambda: (m.serviceMapOutputs(), m.serviceSmallKept(), m.serviceReads(),
                          m.serviceFallbacks())
        tracker = s.sparkContext._jvm.org.apache.spark.SparkEnv.get().mapOutputTracker()
        flag = tracker.getClass().getDeclaredField("shuffleLocalityEnabled")
        flag.setAccessible(True)
        c0 = counts()
        got_tiny = tiny(s)
        locality_after_tiny = flag.getBoolean(tracker)
        c1 = counts()
        kept_rdds = []
        got_skewed = skewed(s, kept_rdds)
        locality_after_skewed = flag.getBoolean(tracker)
        # The hosts Spark's scheduler prefers for each reduce task of that
        # shuffle (its map statuses still registered).
        jsc = s.sparkContext._jsc.sc()
        parted = kept_rdds[0]._jrdd.rdd()
        preferred = []
        for p in range(6):
            locs = jsc.getPreferredLocs(parted, p)
            preferred.append(sorted(locs.apply(i).host() for i in range(locs.size())))
        executor_host = s.sparkContext._jvm.org.apache.spark.SparkEnv.get().blockManager() \
            .blockManagerId().host()
        c2 = counts()
        got_mixed = mixed_rows(s)
        parts = int(s.conf.get("spark.sql.shuffle.partitions"))
        c2m = counts()
        # The executor of local mode reads the driver's settings at each task.
        s.sparkContext._jvm.org.apache.spark.SparkEnv.get().conf().remove(
            "spark.sluice.service.minShuffleBytes")
        got_sized = skewed(s), rows(s)
        c3 = counts()
        # The partitions keys 0-7 hash to (Spark's hash partitioning is
        # pmod(hash(k), n)): each kept output's blocks without batches.
        kept_parts = s.range(8).selectExpr(f"pmod(hash(id), {parts}) AS p").distinct().count()
    finally:
        timer.cancel()
        s.stop()
    assert (got_skewed, got_tiny) == want[:2]
    assert got_sized[0] == want[0]
    assert got_sized[1][0] == want[2][0]
    assert (want[2][1], got_sized[1][1]) == (4, 4), "the coalesced read was not fetched in batches"
    assert all(n > 0 for n, _, _ in got_skewed), got_skewed
    pushed, small, reads, fallbacks = (b - a for a, b in zip(c0, c1))
    assert (pushed, small, reads, fallbacks) == (0, 4, 0, 0), (pushed, small, reads, fallbacks)
    # Reduce-side locality stays on, and every reduce task of the skewed
    # shuffle, pushed (0-2) or kept (3-5), prefers the executor's host.
    assert (locality_after_tiny, locality_after_skewed) == (True, True)
    assert preferred == [[executor_host]] * 6, (preferred, executor_host)
    pushed, small, reads, fallbacks = (b - a for a, b in zip(c1, c2))
    assert (pushed, small, fallbacks) == (1, 3, 0), (pushed, small, fallbacks)
    assert reads > 0, "no reduce task read the pushed output from the daemons"
    pushed, small, reads, fallbacks = (b - a for a, b in zip(c2, c2m))
    assert (pushed, small, fallbacks) == (1, 3, 0), (pushed, small, fallbacks)
    assert reads > 0, "no reduce task read the pushed output from the daemons"
    assert got_mixed[0] == want[3][0]
    # One coalesced reduce task: a block per kept output (3 x kept_parts
    # without batches), and the daemon's stream, a segment per partition of
    # the pushed output.
    assert kept_parts >= 2, kept_parts
    assert got_mixed[1] == 3 + parts, (got_mixed[1], parts, kept_parts)
    pushed, small, reads, fallbacks = (b - a for a, b in zip(c2m, c3))
    assert (pushed, small, reads, fallbacks) == (0, 8, 0, 0), (pushed, small, reads, fallbacks)


def test_a_shuffle_spark_cleans_up_is_deleted_at_the_daemons(own_daemons, tmp_path):
    # The driver watches each service shuffle for failed reads without
    # holding its dependency: once the RDD is gone, Spark's context cleaner
    # unregisters the shuffle and the daemons let its data go while the
    # application still runs.
    ds, key = own_daemons()
    s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc = s.sparkContext
        rdd = sc.parallelize(range(20000), 4).map(lambda x: (x % 97, x)).partitionBy(5)
        assert rdd.count() == 20000
        held = lambda: sum(d.held() for d in ds)
        assert held() > 0, "the shuffle's data is not at the daemons"
        del rdd
        gc.collect()
        deadline = time.time() + 60
        while held() > 0 and time.time() < deadline:
            sc._jvm.System.gc()
            time.sleep(0.5)
        assert held() == 0, "the daemons still hold a shuffle Spark cleaned up"
    finally:
        s.stop()


def test_a_refused_key_leaves_the_shuffles_embedded(daemons, tmp_path):
    ds, key = daemons
    wrong = ("0" if key[0] != "0" else "1") + key[1:]
    s = session("local[2]", SLUICE, tmp_path / "wrong", extra=service_conf(ds, wrong))
    try:
        m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
        outputs0 = m.serviceMapOutputs()
        n = s.sparkContext.parallelize(range(1000), 3).map(lambda x: (x % 10, x)).partitionBy(4).count()
        assert n == 1000
        assert m.serviceMapOutputs() == outputs0, "a shuffle went to daemons that refused the key"
    finally:
        s.stop()


def test_a_daemon_unreachable_at_registration_is_left_out_of_the_shuffle(daemons, tmp_path):
    # The driver registers a shuffle at every daemon at once; one that cannot
    # be reached (nothing listens at its address) is left out of the
    # shuffle's assignment, and the daemon that took the registration owns
    # every partition: each map output is pushed there (a push to the
    # unreachable one would fail and keep the output on the executor).
    ds, key = daemons
    conf = {**service_conf(ds, key),
            "spark.sluice.service.daemons": f"{ds[0].addr},127.0.0.2:{free_port()}"}
    s = session("local[2]", SLUICE, tmp_path / "unreachable", extra=conf)
    try:
        counts = _metrics(s)
        before = counts()
        got = sorted(s.sparkContext.parallelize(range(1000), 3).map(lambda x: (x % 10, x))
                     .reduceByKey(lambda a, b: a + b, 4).collect())
        after = counts()
        assert got == [(k, sum(range(k, 1000, 10))) for k in range(10)]
        assert after[0] - before[0] == 3 and after[1] == before[1], (before, after)
        assert after[2] > before[2], "no reduce task read from the daemon"
    finally:
        s.stop()


@pytest.mark.parametrize("mode", ["service", "embedded"])
def test_an_executor_killed_after_its_map_tasks_costs_no_rerun(daemons, tmp_path, mode):
    # Two workers, one executor each; the map stage's four tasks commit on
    # both. One executor is killed with SIGKILL; the next job over the same
    # shuffle reruns no map task in service mode (the output lives on the
    # daemons), and reruns the lost ones in embedded mode (the kill did take
    # output away: the check can fail). In service mode a whole host is then
    # lost (_lose_a_host_after_reads).
    ds, key = daemons
    extra = {**service_conf(ds, key), "spark.sluice.mode": mode, "spark.executor.cores": "1"}
    with standalone_cluster(tmp_path, hosts=("127.0.0.1", "127.0.0.2")) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=extra)
        try:
            sc = s.sparkContext
            _wait("two executors", lambda: len(_executors(sc)) == 2)
            sizes, want = _partition_sums(sc)
            victim = _executors(sc)[0]
            pids = executor_pids(sc.applicationId)
            assert len(pids) == 2, pids
            ours = [p for p in pids if f"--executor-id {victim} ".encode() in open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ")]
            assert len(ours) == 1, (victim, pids)
            os.kill(ours[0], 9)
            _wait("the killed executor's removal", lambda: victim not in _executors(sc))
            sc.setJobGroup("after-kill", "read the shuffle after the kill")
            assert sizes() == want
            mapped, results = _map_tasks_run(sc, "after-kill")
            assert results == 6
            if mode == "service":
                assert mapped == 0, mapped
                _lose_a_host_after_reads(sc, sizes, want)
            else:
                assert mapped > 0, "the kill took no map output away"
        finally:
            s.stop()


def test_dynamic_allocation_gives_executors_back_without_a_shuffle_service(daemons, tmp_path):
    # Spark's dynamic allocation needs map output to outlive its executor: an
    # external shuffle service, shuffle tracking (which keeps an executor with
    # output alive), or a storage plugin whose storage is reliable. Sluice's
    # (SluiceShuffleDataIO) is, in service mode, and pushes every output, small ones
    # too (the defaults would keep these kilobytes on the executors): the idle
    # executors are given back after the first job, and the next job reads the
    # shuffle from the daemons on new executors, rerunning no map task.
    ds, key = daemons
    extra = {**service_conf(ds, key), "spark.executor.cores": "1",
             "spark.shuffle.sort.io.plugin.class": "dev.sluice.spark.SluiceShuffleDataIO",
             "spark.dynamicAllocation.enabled": "true",
             "spark.dynamicAllocation.shuffleTracking.enabled": "false",
             "spark.dynamicAllocation.minExecutors": "0",
             "spark.dynamicAllocation.initialExecutors": "2",
             "spark.dynamicAllocation.maxExecutors": "2",
             "spark.dynamicAllocation.executorIdleTimeout": "2s"}
    for small in ("spark.sluice.service.minPushBytes", "spark.sluice.service.minShuffleBytes"):
        del extra[small]
    with standalone_cluster(tmp_path, hosts=("127.0.0.1", "127.0.0.2")) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=extra)
        try:
            sc = s.sparkContext
            sizes, want = _partition_sums(sc)
            [shuffle] = [i for i in range(4)
                         if sc._jsc.sc().env().mapOutputTracker().containsShuffle(i)]
            assert all(e == f"sluice-service-{shuffle}" for e, _ in _map_locations(sc, shuffle))
            _wait("the idle executors given back", lambda: not _executors(sc))
            sc.setJobGroup("after-release", "read the shuffle on new executors")
            assert sizes() == want
            assert _map_tasks_run(sc, "after-release") == (0, 6)
        finally:
            s.stop()


def _partition_sums(sc):
    """A partitionBy of 40,000 numbers from four maps into six partitions,
    read once: a reader of its partitions' sums (sorted; each call reads the
    shuffle again) and what that first read gave."""
    shuffled = sc.parallelize(range(40000), 4).map(lambda x: (x % 101, x)).partitionBy(6)
    sizes = lambda: sorted(shuffled.mapPartitions(lambda it: [sum(v for _, v in it)]).collect())
    want = sizes()
    assert sum(want) == sum(range(40000))
    return sizes, want


def _map_locations(sc, shuffle):
    """The executor id and host each map's registered status names (None
    for a map with none)."""
    tracker = sc._jsc.sc().env().mapOutputTracker()
    statuses = tracker.shuffleStatuses().get(shuffle).get().mapStatuses()
    return [None if m is None else (m.location().executorId(), m.location().host())
            for m in statuses]


def _lose_a_host_after_reads(sc, sizes, want):
    """The shuffle read (so each daemon named every map's winner), the worker
    of the host that wrote map 0 is killed with its executor, the daemon
    beside it left running. Spark unregisters the pushed outputs written on
    that host (`removeOutputsOnHost`) and runs those maps again on the other
    host; the daemons refuse their commits (`Superseded`: a read there named
    the lost attempts), so each rerun keeps its output on its executor and is
    read from there, beside the other maps' outputs at the daemons. Only the
    lost host's maps ran again, no stage ran twice, every record came once."""
    [shuffle] = [i for i in range(4) if sc._jsc.sc().env().mapOutputTracker().containsShuffle(i)]
    before = _map_locations(sc, shuffle)
    assert all(e == f"sluice-service-{shuffle}" for e, _ in before), before
    host = before[0][1]
    lost = [m for m, (_, h) in enumerate(before) if h == host]
    # The executor killed above has been replaced: the other host can run the maps.
    _wait("the killed executor's replacement", lambda: len(_executors(sc)) == 2)
    kill_worker(host)
    tracker = sc._jsc.sc().env().mapOutputTracker()
    _wait("the lost host's outputs unregistered",
          lambda: tracker.getNumAvailableOutputs(shuffle) == len(before) - len(lost))
    sc.setJobGroup("after-host-loss", "read the shuffle after a host was lost")
    assert sizes() == want
    assert _map_tasks_run(sc, "after-host-loss") == (len(lost), 6)
    assert set(stage_attempts(sc, "after-host-loss").values()) == {0}
    after = _map_locations(sc, shuffle)
    for m, (executor, h) in enumerate(after):
        if m in lost:
            assert not executor.startswith("sluice-service-") and h != host, (m, before, after)
        else:
            assert (executor, h) == before[m], (m, before, after)


def test_speculative_map_attempts_under_the_service(daemons, tmp_path):
    # Two workers; the first attempt of map task 0 is slow, so Spark launches
    # a copy on the other executor; the copy pushes and commits at the
    # daemons and the original is killed. Reads name the attempt Spark's map
    # output tracker registered, so every record arrives once: a plain
    # shuffle and one Spark's aggregator reads (hash-grouped, native).
    ds, key = daemons
    marker = tmp_path / "speculated"
    extra = {**service_conf(ds, key), **SPECULATION, "spark.executor.cores": "1"}
    want = (sorted((k, sum(v for v in range(40000) if v % 101 == k)) for k in range(101)),
            sum(range(40000)))
    with standalone_cluster(tmp_path, hosts=("127.0.0.1", "127.0.0.2")) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=extra)
        try:
            sc = s.sparkContext
            _wait("two executors", lambda: len(_executors(sc)) == 2)
            pairs = sc.parallelize(range(40000), 4).map(lambda x: (x % 101, x))
            summed = sorted(pairs.mapPartitionsWithIndex(slow_first_attempt(marker))
                            .reduceByKey(lambda a, b: a + b, 6).collect())
            assert marker.exists(), "no speculative attempt ran"
            marker.unlink()
            plain = sum(v for _, v in pairs.mapPartitionsWithIndex(slow_first_attempt(marker))
                        .partitionBy(6).collect())
            assert marker.exists(), "no speculative attempt ran"
            # Both shuffles' outputs are at the service, map 0's from its copy.
            tracker = sc._jsc.sc().env().mapOutputTracker()
            shuffles = [i for i in range(4) if tracker.containsShuffle(i)]
            assert len(shuffles) == 2, shuffles
            for i in shuffles:
                for r in range(6):
                    where = tracker.getLocationsWithLargestOutputs(i, r, 6, 0.0).get()
                    assert [b.executorId() for b in where] == [f"sluice-service-{i}"], (i, r)
        finally:
            s.stop()
    assert (summed, plain) == want


def _metrics(s):
    m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
    return lambda: (m.serviceMapOutputs(), m.serviceFallbacks(), m.serviceReads())


@contextlib.contextmanager
def _read_again_after(own_daemons, tmp_path, lose):
    """A partitionBy read once, its four map outputs pushed to both daemons;
    `lose(ds)` takes the second daemon's data away; the same shuffle read
    again, Spark's answer and its map stage rerun once. Yields the context,
    the metrics' reader and the metrics before and after the second read."""
    ds, key = own_daemons()
    s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc, counts = s.sparkContext, _metrics(s)
        before = counts()
        sizes, want = _partition_sums(sc)
        first = counts()
        assert first[0] - before[0] == 4 and first[1] == before[1], (before, first)
        lose(ds)
        sc.setJobGroup("again", "read the shuffle after a daemon lost its data")
        assert sizes() == want
        after = counts()
        mapped, _ = _map_tasks_run(sc, "again")
        assert mapped == 4, "the map stage was not rerun after the daemon lost its output"
        yield sc, counts, first, after
    finally:
        s.stop()


def test_a_daemon_killed_and_restarted_after_the_map_stage(own_daemons, tmp_path):
    # The map stage commits at both daemons; the second is killed with
    # SIGKILL and restarted, empty, on its address and directory. The next
    # job over the same shuffle: the restarted daemon does not know the
    # shuffle (it serves nothing stale), the read becomes a fetch failure,
    # the driver registers a new generation at both daemons (the restarted
    # one answers), Spark reruns the map stage, and the rerun's outputs are
    # pushed to the daemons again. Spark's answer, and no task retried
    # against the dead daemon until the job gave up.
    def restart(ds):
        ds[1].kill()
        ds[1] = ds[1].restarted()

    with _read_again_after(own_daemons, tmp_path, restart) as (_, _, first, after):
        assert after[0] - first[0] == 4 and after[1] == first[1], \
            f"the rerun's outputs were not pushed to the new generation: {first} -> {after}"


def test_a_restarted_daemon_takes_the_next_shuffle(own_daemons, tmp_path):
    # Shuffle a runs, leaving pooled connections to both daemons; shuffle b
    # is registered at both (Spark registers a shuffle when its dependency
    # is made, here before its job); the second daemon is killed and
    # restarted, and b's map stage runs. Its pushes to the restarted daemon
    # do not take a pooled connection to the dead process (each is peeked
    # at before it is reused) and are refused for what they name
    # (UnknownShuffle: the daemon does not know b, a RequestRefusedException),
    # so b's outputs stay on the executor and the daemon is not left out of
    # this JVM's pushes: shuffle c, registered next, commits there.
    ds, key = own_daemons()
    s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc, counts = s.sparkContext, _metrics(s)
        shuffled = lambda n: sc.parallelize(range(n), 4).map(lambda x: (x % 13, x)).partitionBy(4)
        total = lambda rdd: sum(rdd.mapPartitions(lambda it: [sum(v for _, v in it)]).collect())
        assert total(shuffled(4000)) == sum(range(4000))
        b = shuffled(4500)
        b._jrdd.toDebugString()  # makes the JVM RDD's dependencies: registers b
        ds[1].kill()
        ds[1] = ds[1].restarted()
        before = counts()
        assert total(b) == sum(range(4500))
        mid = counts()
        assert mid[0] == before[0] and mid[1] - before[1] == 4, \
            f"b's outputs were not kept on the executor: {before} -> {mid}"
        assert total(shuffled(5000)) == sum(range(5000))
        after = counts()
        assert after[0] - mid[0] == 4 and after[1] == mid[1], \
            f"c's outputs were not pushed (the restarted daemon left out?): {mid} -> {after}"
        assert ds[1].stats()["commits"] == 4, "the restarted daemon was left out of shuffle c"
    finally:
        s.stop()


def test_a_daemon_killed_for_good_after_the_map_stage(own_daemons, tmp_path):
    # As above, but the second daemon stays dead: the new generation goes to
    # the first daemon alone, which owns every partition from then on; the
    # rerun's outputs and a later shuffle's are pushed there, none kept on
    # an executor for want of a daemon.
    with _read_again_after(own_daemons, tmp_path, lambda ds: ds[1].kill()) as (
            sc, counts, first, after):
        assert after[0] - first[0] == 4 and after[1] == first[1], \
            f"the rerun's outputs did not go to the live daemon: {first} -> {after}"
        got = sorted(sc.parallelize(range(3000), 3).map(lambda x: (x % 7, x)).partitionBy(5)
                     .mapPartitions(lambda it: [sum(v for _, v in it)]).collect())
        later = counts()
        assert sum(got) == sum(range(3000))
        assert later[0] - after[0] == 3 and later[1] == after[1], \
            f"a later shuffle was not assigned to the live daemon: {after} -> {later}"


def test_a_live_daemon_left_out_of_a_new_generation_loses_the_old_one(own_daemons, tmp_path):
    # Three daemons; after the map stage the first dies and the second is
    # marked down in this JVM (as a failed push would, though it lives), so
    # the new generation goes to the third alone. The second's copy of the
    # old generation is named by no output any more: the driver deletes it.
    ds, key = own_daemons((None, None, None))
    s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc = s.sparkContext
        sizes, want = _partition_sums(sc)
        assert all(d.stats()["held_bytes"] > 0 for d in ds), [d.stats() for d in ds]
        jvm = sc._jvm
        pool = jvm.dev.sluice.spark.service.Daemons.of(
            jvm.dev.sluice.spark.service.ServiceConf.of(sc._jsc.sc().conf()))
        pool.markDown(1, "marked down by the test")
        ds[0].kill()
        assert sizes() == want
        deadline = time.time() + 20
        while ds[1].stats()["held_bytes"] > 0 and time.time() < deadline:
            time.sleep(0.2)
        assert ds[1].stats()["held_bytes"] == 0, "the left-out daemon kept the old generation"
        assert ds[2].stats()["held_bytes"] > 0, "the rerun did not go to the third daemon"
    finally:
        s.stop()


def test_a_repartition_that_deals_anew_hit_by_a_fetch_failure(own_daemons, tmp_path):
    # A repartition of rows carrying rand() under an aggregate: a rerun of
    # its map tasks deals other rows to other partitions (Spark's sort
    # before the deal sees new values), though Spark 4.1 marks the stage
    # determinate. Read once; then the daemon owning the first reduce
    # partitions is killed and restarted empty. The next read fails its
    # fetches there, and a fetch failure at the service unregisters every
    # output of the shuffle (map index -1), not only the lost ones: the
    # repartition reruns whole, one dealing, and the aggregate's map tasks
    # read only that one (the rerun's outputs kept on the executor, the
    # restarted daemon not knowing the shuffle). The answer is the first
    # read's, no row lost or counted twice.
    ds, key = own_daemons()
    s = session("local[2]", SLUICE, tmp_path / "s",
                extra={**service_conf(ds, key), "spark.sql.adaptive.enabled": "false"})
    try:
        sc = s.sparkContext
        s.range(0, 60000, 1, 4).selectExpr("id", "rand() AS r").repartition(6) \
            .createOrReplaceTempView("dealt")
        rows = s.sql("SELECT id % 10 AS k, sum(id) AS s, count(*) AS n FROM dealt "
                     "GROUP BY id % 10").rdd.map(tuple)
        want = sorted((k, sum(range(k, 60000, 10)), 6000) for k in range(10))
        assert sorted(rows.collect()) == want
        ds[0].kill()
        ds[0] = ds[0].restarted()
        sc.setJobGroup("after-restart", "read again after the daemon's restart")
        second = sorted(rows.collect())
        mapped, _ = _map_tasks_run(sc, "after-restart")
        assert second == want, second
        assert mapped >= 4, f"the indeterminate map stage was not rerun ({mapped} map tasks)"
    finally:
        s.stop()


def test_a_daemon_dead_while_the_maps_run(own_daemons, tmp_path):
    # The shuffle is registered at both daemons when the job starts; the
    # first map task kills the second daemon and every map task waits until
    # its port refuses connections. Each map output stays on the executor
    # (its push fails at once, or is not tried while the daemon is down), the
    # reduce tasks fetch them from there, and no task fails: with
    # spark.task.maxFailures=4 nothing is retried against the dead daemon.
    ds, key = own_daemons()
    pid = ds[1].proc.pid
    host, port = ds[1].addr.rsplit(":", 1)
    s = session("local[2,4]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc, counts = s.sparkContext, _metrics(s)

        def kill_then_map(i, it):
            import socket
            import time
            if i == 0:
                os.kill(pid, 9)
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    time.sleep(0.05)
                except OSError:
                    break
            return it

        before = counts()
        sc.setJobGroup("dead", "a daemon dies while the maps run")
        got = sorted(sc.parallelize(range(20000), 4).mapPartitionsWithIndex(kill_then_map)
                     .map(lambda x: (x % 97, x)).partitionBy(5)
                     .mapPartitions(lambda it: [sum(v for _, v in it)]).collect())
        after = counts()
        assert sum(got) == sum(range(20000)) and len(got) == 5
        assert after[1] - before[1] == 4 and after[0] == before[0], (before, after)
        ds[1].proc.wait(timeout=30)
        tracker = settled(sc, "dead")
        stages = [st for j in tracker.getJobIdsForGroup("dead") for st in tracker.getJobInfo(j).stageIds]
        failed = sum(tracker.getStageInfo(st).numFailedTasks for st in stages)
        assert failed == 0, f"{failed} task attempts failed"
    finally:
        s.stop()


def _early_pushes(s):
    return s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics.serviceEarlyPushes()


# Two maps of 30,000 records of about 130 bytes each: about 4 MiB handed over
# per map, so a map task spills (and pushes the spill) every 1 MiB.
EARLY = {"spark.sluice.service.pushWhileMappingBytes": "1m"}
EARLY_WANT = sorted((k, len(range(k, 60000, 53)), sum(range(k, 60000, 53))) for k in range(53))


def _per_key(rdd):
    """Each key's record count and sum of the numbers its values spell,
    computed in the reduce tasks of a partitionBy (no combine on either
    side, so every record crosses the shuffle once)."""
    def count(it):
        seen = {}
        for k, v in it:
            n, total = seen.get(k, (0, 0))
            seen[k] = (n + 1, total + int(v[:8]))
        return [(k, n, total) for k, (n, total) in seen.items()]
    return sorted(rdd.partitionBy(6).mapPartitions(count).collect())


@pytest.mark.parametrize("min_shuffle", ["0", "6m"])
def test_a_large_map_output_is_pushed_while_the_map_runs(daemons, tmp_path, min_shuffle):
    # Each map task spills every 1 MiB it hands over and pushes each spill
    # while it maps on; the commit pushes the rest through the same pushes.
    # Every output at the daemons, none kept; per key, Spark's answer (each
    # record once: the spills' and the commit's bytes of a partition
    # concatenate into the data file's segment at the daemon). With
    # service.minShuffleBytes at 6 MiB, a map's bytes put its shuffle of two
    # maps over it only after 3 MiB: its early pushes start late, fewer of
    # them (one per map, where the ungated run makes two), and the output,
    # compressed to far less, is still pushed whole.
    ds, key = daemons
    extra = {**service_conf(ds, key), **EARLY, "spark.sluice.service.minShuffleBytes": min_shuffle}
    s = session("local[2]", SLUICE, tmp_path / "s", extra=extra)
    try:
        sc, counts = s.sparkContext, _metrics(s)
        before, early_before = counts(), _early_pushes(s)
        got = _per_key(sc.parallelize(range(60000), 2).map(lambda x: (x % 53, f"{x:08d}" * 16)))
        after, early = counts(), _early_pushes(s) - early_before
    finally:
        s.stop()
    assert got == EARLY_WANT
    pushed, kept, reads = (a - b for a, b in zip(after, before))
    assert pushed == 2 and kept == 0 and reads > 0, (pushed, kept, reads)
    if min_shuffle == "0":
        assert early >= 4, f"{early} spills pushed while the maps ran"
    else:
        assert 1 <= early < 4, f"{early} spills pushed while the maps ran"



# Records of the slow reader's shuffle: about 1 kB of random bytes each, so
# that each of its two partitions (50 MB) is several times what the sockets
# between a daemon and the task buffer.
SLOW_READER_RECORDS = 100_000


def test_a_read_left_waiting_past_the_stall_limit_resumes_on_a_new_connection(own_daemons, tmp_path):
    # A reduce task busy with the first row it was given for longer than the
    # daemons' stall limit (1 s here, `--stream-stall-s`; 600 s by default):
    # the daemon's write waits past it and the daemon ends the connection.
    # The task, reading on, meets the connection's end and resumes its read
    # on a new connection after the blocks it took: Spark's answer, each
    # record once, the map stage run once (no fetch failure), and the resumed
    # reads counted.
    ds, key = own_daemons(args=("--stream-stall-s", "1"))
    s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
    try:
        sc = s.sparkContext
        m = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
        pairs = (sc.parallelize(range(SLOW_READER_RECORDS), 4)
                 .map(lambda i: (i % 2, (i, os.urandom(1000)))).partitionBy(2))

        def slow(it):
            n = total = 0
            for _, (i, pad) in it:
                if n == 1:
                    time.sleep(4)
                n += 1
                total += i + len(pad)
            yield n, total

        before = (m.serviceResumedReads(), m.serviceFallbacks())
        sc.setJobGroup("slow", "a reduce task busy past the daemons' stall limit")
        got = sorted(pairs.mapPartitions(slow).collect())
        half = SLOW_READER_RECORDS // 2
        want = sorted((half, sum(range(k, SLOW_READER_RECORDS, 2)) + 1000 * half) for k in (0, 1))
        assert got == want
        mapped, _ = _map_tasks_run(sc, "slow")
        assert mapped == 4, "a fetch failure had the map stage run again"
        after = (m.serviceResumedReads(), m.serviceFallbacks())
        assert after[1] == before[1], "a map output stayed on its executor"
        assert after[0] - before[0] >= 2, f"no read was cut off and resumed: {before} -> {after}"
    finally:
        s.stop()


def test_a_daemon_at_its_connection_limit_makes_tasks_wait_not_fail(own_daemons, tmp_path):
    # One daemon serving one connection at a time, two map tasks pushing
    # spills to it while they map, then reduce tasks reading from it: a
    # connection over the limit is answered busy, the task waits (looking
    # at its JVM's pool between tries) and goes on. Every output at the
    # daemon, none kept on an executor, no task failed, Spark's answer; and
    # the driver's lease connection keeps no task out.
    ds, key = own_daemons(directories=(None,), args=("--max-connections", "1"))
    s = session("local[2]", SLUICE, tmp_path / "s", extra={**service_conf(ds, key), **EARLY})
    try:
        sc, counts = s.sparkContext, _metrics(s)
        before = counts()
        got = _per_key(sc.parallelize(range(60000), 2).map(lambda x: (x % 53, f"{x:08d}" * 16)))
        after = counts()
        tracker = sc.statusTracker()
        stages = [tracker.getStageInfo(i) for j in tracker.getJobIdsForGroup()
                  for i in tracker.getJobInfo(j).stageIds]
        failed = sum(st.numFailedTasks for st in stages)
        attempts = [st.currentAttemptId for st in stages]
        # The driver's lease connection, held between renewals (the first
        # after 60 s), takes a slot the daemon keeps for leases beside the
        # one of its limit: a job after it is still served.
        service = sc._jvm.dev.sluice.spark.service
        pool = service.Daemons.of(service.ServiceConf.of(sc._jsc.sc().conf()))
        assert pool.renewNow() == 0 and pool.leaseConnection(0) != 0
        again = _per_key(sc.parallelize(range(60000), 2).map(lambda x: (x % 53, f"{x:08d}" * 16)))
        pushed_again, kept_again, _ = (a - b for a, b in zip(counts(), after))
    finally:
        s.stop()
    # The session's connections are closed: the CLI gets the one slot.
    st = ds[0].stats()
    assert got == EARLY_WANT and again == EARLY_WANT
    pushed, kept, reads = (a - b for a, b in zip(after, before))
    assert pushed == 2 and kept == 0 and reads > 0, (pushed, kept, reads)
    assert len(stages) == 2 and failed == 0 and attempts == [0, 0], (failed, attempts)
    assert pushed_again == 2 and kept_again == 0, (pushed_again, kept_again)
    assert st["peak_connections"] == 2, f"one task's and the lease's: {st}"
    assert st["busy_refusals"] > 0, f"the two map tasks never met at the daemon: {st}"


def test_the_drivers_lease_is_renewed_on_a_connection_of_its_own(own_daemons, tmp_path):
    # The driver renews its application's lease on a connection per daemon
    # that it holds between renewals, outside the pool whose idle
    # connections close after 30 s: a renewal never waits for a slot at a
    # daemon full of tasks' connections. Each renewal is run here at once
    # (Daemons.renewNow, what the renewer runs every 60 s): the second
    # reuses the first's connection; after the daemon is killed and
    # restarted the held one is dead, and the next renewal opens a fresh
    # one to the new process and keeps it open. Stopping the session closes
    # it.
    ds, key = own_daemons(directories=(None,))
    # No context cleaner: it could unregister the job's shuffle at the
    # restarted daemon on a connection of its own, which the count below
    # would see.
    s = session("local[2]", SLUICE, tmp_path / "s",
                extra={**service_conf(ds, key), "spark.cleaner.referenceTracking": "false"})
    try:
        sc = s.sparkContext
        assert _per_key(sc.parallelize(range(60000), 2).map(
            lambda x: (x % 53, f"{x:08d}" * 16))) == EARLY_WANT
        service = sc._jvm.dev.sluice.spark.service
        pool = service.Daemons.of(service.ServiceConf.of(sc._jsc.sc().conf()))
        assert pool.renewNow() == 0
        first = pool.leaseConnection(0)
        assert first != 0
        assert pool.renewNow() == 0
        assert pool.leaseConnection(0) == first, "the second renewal opened a connection"
        ds[0].kill()
        ds[0] = ds[0].restarted()
        assert pool.renewNow() == 0, "no renewal at the restarted daemon"
        assert pool.leaseConnection(0) != 0
        # The restarted daemon's connections: the lease's, held open, and
        # the one `sluice stats` asks on.
        st = ds[0].stats()
        assert st["peak_connections"] == 2, st
    finally:
        s.stop()
    assert pool.leaseConnection(0) == 0, "the lease's connection outlived the session"


def test_a_daemon_killed_between_early_pushes_keeps_the_outputs(own_daemons, tmp_path):
    # Each map task pushes a spill or more while it maps, then the first
    # kills the second daemon halfway through and both wait until its port
    # refuses connections: their later pushes fail, and each output stays
    # whole on its executor (the data file holds the spills' bytes too), what
    # the daemons staged or committed of it never read: each record once.
    # The live daemon drops what the two attempts staged there.
    ds, key = own_daemons()
    pid = ds[1].proc.pid
    host, port = ds[1].addr.rsplit(":", 1)
    s = session("local[2]", SLUICE, tmp_path / "s", extra={**service_conf(ds, key), **EARLY})
    try:
        sc, counts = s.sparkContext, _metrics(s)

        def kill_halfway(i, it):
            import socket
            import time
            for n, x in enumerate(it):
                if n == 20000:
                    time.sleep(1)
                    if i == 0:
                        os.kill(pid, 9)
                    deadline = time.time() + 30
                    while time.time() < deadline:
                        try:
                            socket.create_connection((host, int(port)), timeout=1).close()
                            time.sleep(0.05)
                        except OSError:
                            break
                yield x % 53, f"{x:08d}" * 16

        metrics = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
        before, early_before, drops_before = counts(), _early_pushes(s), metrics.serviceEarlyDrops()
        got = _per_key(sc.parallelize(range(60000), 2).mapPartitionsWithIndex(kill_halfway))
        after, early = counts(), _early_pushes(s) - early_before
        drops = metrics.serviceEarlyDrops() - drops_before
        st = ds[0].stats()
        # What the dropped attempts staged; the shuffle's own bookkeeping stays.
        held = st["held_bytes"] - st["bookkeeping_bytes"]
    finally:
        s.stop()
    assert got == EARLY_WANT
    pushed, kept, _ = (a - b for a, b in zip(after, before))
    assert pushed == 0 and kept == 2, (pushed, kept)
    assert early >= 1, "no spill was pushed before the daemon died"
    assert drops >= 1 and held == 0, f"the live daemon still holds {held} bytes ({drops} drops)"


@contextlib.contextmanager
def _small_disk(tmp_path):
    """A 1 MiB tmpfs for a daemon's directory (under its 8 MiB budget)."""
    small = tmp_path / "small"
    small.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    try:
        yield small
    finally:
        subprocess.run(["umount", str(small)], check=False)


def _sizes_by_partition(rdd):
    """Each partition's record count and payload bytes, of (key, bytes) pairs."""
    return sorted(rdd.partitionBy(8).mapPartitions(lambda it: [(lambda v: (
        len(v), sum(len(b) for b in v)))([b for _, b in it])]).collect())


def test_a_full_daemon_disk_keeps_later_outputs_on_the_executors(own_daemons, tmp_path):
    # The second daemon's directory is a 1 MiB tmpfs under its 8 MiB budget:
    # once both are full it refuses a push with a typed error (Storage); that
    # map output and those after it stay on their executors, those before it
    # stay at the daemons, and each reduce task reads both kinds: Spark's
    # answer, nothing lost. The daemon is asked to drop what the refused
    # attempt staged.
    ds = []
    with _small_disk(tmp_path) as small:
        try:
            ds, key = own_daemons((None, small))
            s = session("local[2]", SLUICE, tmp_path / "s", extra=service_conf(ds, key))
            try:
                sc, counts = s.sparkContext, _metrics(s)
                metrics = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
                before, drops_before = counts(), metrics.serviceRefusedDrops()
                # 32 maps of about 1 MB of incompressible bytes; half goes to
                # the second daemon, about twice what it can hold.
                got = _sizes_by_partition(sc.parallelize(range(32), 32).flatMap(
                    lambda i: [(j % 64, os.urandom(120)) for j in range(8000)]))
                after, drops = counts(), metrics.serviceRefusedDrops() - drops_before
            finally:
                s.stop()
            assert sum(n for n, _ in got) == 32 * 8000
            assert sum(b for _, b in got) == 32 * 8000 * 120
            pushed, kept, reads = (a - b for a, b in zip(after, before))
            assert pushed > 0 and kept > 0 and pushed + kept == 32, (pushed, kept)
            assert reads > 0
            # The refused push's attempt was dropped at the full daemon, not
            # left staged there until the shuffle went.
            assert drops >= 1, f"{kept} outputs kept, no refused push dropped"
        finally:
            stop_all(ds)


def test_a_commit_before_a_refused_push_is_taken_back(own_daemons, tmp_path):
    # One map task of about 24 MB: the first daemon of its push order (map 0
    # starts at the first owner) takes its half and commits it; the second,
    # with 1 MiB of disk under its 8 MiB budget, refuses its half (Storage).
    # The output stays on the executor and is read from there, so what it
    # committed at the first daemon would never be read: that daemon is asked
    # to drop it, and holds nothing of the shuffle but its bookkeeping, and no
    # spill file, while the shuffle is still registered.
    ds = []
    with _small_disk(tmp_path) as small:
        try:
            ds, key = own_daemons((None, small))
            # No spill pushed while the map runs: the push that fails is the
            # commit's, after the first daemon's part committed.
            extra = {**service_conf(ds, key), "spark.sluice.service.pushWhileMappingBytes": "0"}
            s = session("local[2]", SLUICE, tmp_path / "s", extra=extra)
            try:
                sc, counts = s.sparkContext, _metrics(s)
                metrics = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
                before, taken = counts(), metrics.serviceCommitsDropped()
                got = _sizes_by_partition(sc.parallelize([0], 1).flatMap(
                    lambda i: [(j % 64, os.urandom(120)) for j in range(200000)]))
                after, taken = counts(), metrics.serviceCommitsDropped() - taken
                first, second, files = ds[0].stats(), ds[1].stats(), ds[0].data_files()
            finally:
                s.stop()
            assert sum(n for n, _ in got) == 200000
            assert sum(b for _, b in got) == 200000 * 120
            pushed, kept, _ = (a - b for a, b in zip(after, before))
            assert (pushed, kept) == (0, 1), (pushed, kept)
            assert first["commits"] == 1, first
            assert taken == 1, f"the first daemon's commit was not taken back: {first}"
            # No block's bytes, and no commit's bookkeeping: the registered
            # shuffle's, as at the daemon that refused (its staged chunks
            # dropped, nothing committed there).
            assert first["held_bytes"] == first["bookkeeping_bytes"], first
            assert first["bookkeeping_bytes"] == second["bookkeeping_bytes"] > 0, (first, second)
            assert files == [], files
        finally:
            stop_all(ds)


# What a daemon's resident memory may exceed its budget by: the runtime,
# connection buffers and the allocator's slack (docs/service.md).
DAEMON_OVERHEAD_BYTES = 48 << 20


def _peak_rss(pid):
    """The process's peak resident set (VmHWM), in bytes."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_the_daemons_kept_their_budget_and_stop_cleanly(daemons):
    """Last in the module: SIGTERM stops each daemon gracefully; what it
    held stayed within its 8 MiB (its own count; reduced reads' floors
    aside) and its resident memory
    within the budget and the stated overhead, and the big repartition
    spilled."""
    ds, _ = daemons
    spilled = 0
    for d in ds:
        rss = _peak_rss(d.proc.pid)
        print(f"daemon {d.addr}: peak RSS {rss >> 10} KiB")
        assert rss <= (8 << 20) + DAEMON_OVERHEAD_BYTES, f"peak RSS {rss} bytes"
        out = d.stop()
        words = out.split("sluice daemon stopped: peak ")[1].split()
        peak, budget, spilled_here = int(words[0]), int(words[2]), int(words[5])
        # Over the budget by at most the 1 MiB floors of the reduced reads of
        # the two reduce tasks local[2] runs at once (docs/service.md).
        assert budget == 8 << 20 and 0 < peak <= budget + (2 << 20), out
        spilled += spilled_here
    assert spilled > 0, "nothing went past the daemons' memory"
