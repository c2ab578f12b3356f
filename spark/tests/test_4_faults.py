"""Real faults under Spark: a full disk during a map-side spill and during
the commit (a small tmpfs as spark.local.dir), a data file cut at a block
boundary, Spark SQL's exchange statistics, a corrupt block fetched from
another executor (local-cluster), and speculative map attempts (a
standalone master and two workers on loopback addresses). Each ends with
the right answer or a clear error, never a short or duplicated answer."""

import contextlib
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

import pytest

import workloads
from clusters import stage_attempts
from standalone import standalone_cluster
from conftest import (SLUICE, SPECULATION, session, short_of_memory, slow_first_attempt,
                      sluice_metrics)

HEADER_BYTES = 36
TRAILER_MAGIC = b"SLSE"
BLOCK_MAGIC = b"SLBK"


@contextlib.contextmanager
def small_filesystem(mib):
    """A real tmpfs of `mib` MiB mounted for the test (root only; CI runs as
    root, so there a failed mount fails the test instead of skipping it)."""
    where = tempfile.mkdtemp(prefix="sluice-smallfs-")
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", where],
        capture_output=True, text=True,
    )
    if p.returncode != 0:
        os.rmdir(where)
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a {mib} MiB tmpfs: {p.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here (needs root): {p.stderr.strip()}")
    try:
        yield pathlib.Path(where)
    finally:
        subprocess.run(["umount", "-l", where], check=False)
        os.rmdir(where)


# One map task writing about 20 MB of incompressible shuffle data (SHA-512
# digests), in a JVM of its own: the memory settings apply at JVM start.
_DISK_FULL_JOB = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from conftest import session
local, manager, fraction, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s = session("local[1]", manager, local, extra={"spark.memory.fraction": fraction})
sc = s.sparkContext

def rows(_):
    import hashlib
    for i in range(n):
        yield (i, hashlib.sha512(str(i).encode()).digest())

out = {}
try:
    out["count"] = sc.parallelize([0], 1).flatMap(rows).partitionBy(8).count()
except Exception as e:
    out["error"] = str(e)[-6000:]
left = []
for root, _, files in os.walk(local):
    left += [f for f in files if f.startswith(("shuffle_", "temp_shuffle_"))]
out["left"] = left
out["spills"] = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics.mapSpills()
out["live"] = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics.liveMapAttempts()
s.stop()
print(json.dumps(out))
"""

RECORDS = 280_000  # about 20 MB of map output


def _disk_full_run(local, manager, fraction):
    p = subprocess.run(
        [sys.executable, "-c", _DISK_FULL_JOB, str(pathlib.Path(__file__).parent),
         str(local), manager, fraction, str(RECORDS)],
        capture_output=True, text=True, timeout=400,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_disk_full_during_a_map_spill_fails_the_job(tmp_path):
    # Spark's memory cut to 1 % of the heap: the map output spills, and an
    # 8 MiB filesystem is full before the first spill is written. The spill
    # took the records it was writing, so the attempt must fail with the
    # disk's error naming the spill file, never commit without them.
    with small_filesystem(8) as fs:
        got = _disk_full_run(fs, SLUICE, "0.01")
    assert "count" not in got, f"returned {got['count']} of {RECORDS} records"
    error = got["error"]
    assert "a map-side spill failed, its records are lost" in error, error
    assert "temp_shuffle_" in error and "No space left on device" in error, error
    assert got["live"] == 0, got
    assert got["left"] == [], got["left"]


def test_disk_full_after_spills_fails_the_commit(tmp_path):
    # The case: 20 MB of map output, 24 MiB of disk, memory for
    # about a third of it. The spills fit; the data file that gathers them
    # does not. Spark's sort shuffle fails this job; so does Sluice.
    with small_filesystem(24) as fs:
        got = _disk_full_run(fs, SLUICE, "0.01")
    assert "count" not in got, f"returned {got['count']} of {RECORDS} records"
    assert "No space left on device" in got["error"], got["error"]
    assert got["spills"] > 0, "the map output never spilled: the test lost its point"
    assert got["live"] == 0, got
    assert got["left"] == [], got["left"]


def test_disk_full_during_commit_fails_the_job_naming_the_file(tmp_path):
    # No memory pressure: the output stays in memory and the commit's data
    # file does not fit an 8 MiB filesystem.
    with small_filesystem(8) as fs:
        got = _disk_full_run(fs, SLUICE, "0.6")
    assert "count" not in got, f"returned {got['count']} of {RECORDS} records"
    assert "No space left on device" in got["error"], got["error"]
    assert ".data" in got["error"], got["error"]
    assert got["spills"] == 0, got
    assert got["live"] == 0, got
    assert got["left"] == [], got["left"]


def frames(data):
    """(offset, is_trailer, length) of every block and trailer in a data file."""
    out, at = [], 0
    while at < len(data):
        magic = data[at:at + 4]
        if magic == TRAILER_MAGIC:
            out.append((at, True, HEADER_BYTES))
            at += HEADER_BYTES
        else:
            assert magic == BLOCK_MAGIC, (at, magic)
            stored = struct.unpack_from("<I", data, at + 24)[0]
            out.append((at, False, HEADER_BYTES + stored))
            at += HEADER_BYTES + stored
    return out


def test_data_file_cut_at_a_block_boundary_is_a_fetch_failure(tmp_path, reference):
    s = session("local[2]", SLUICE, tmp_path)
    try:
        sc = s.sparkContext
        shuffled = workloads.pairs(sc, 20000, 500, 4).partitionBy(6)
        assert shuffled.count() == 20000  # map stage done, outputs on disk
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert len(data) == 4
        for f in data:
            # Cut each file just before its last trailer: every block before
            # it is intact, so only the segment check can tell.
            b = f.read_bytes()
            last_trailer = [at for at, trailer, _ in frames(b) if trailer][-1]
            f.write_bytes(b[:last_trailer])
        before = sluice_metrics(s)["map_outputs"]
        # The next job finds the cut, fails the fetch, reruns the map stage
        # and returns every record once.
        assert workloads.per_partition_sorted(shuffled) == reference["partition_by_key"]
        assert sluice_metrics(s)["map_outputs"] >= before + 1, "the map stage was not rerun"
    finally:
        s.stop()


def _shift_index(f):
    """Spark's index file with every segment's offsets moved one segment on:
    each partition's read is served the next non-empty partition's bytes."""
    offsets = list(struct.unpack(f">{len(f.read_bytes()) // 8}q", f.read_bytes()))
    shifted = offsets[1:] + [offsets[-1]]
    f.write_bytes(struct.pack(f">{len(shifted)}q", *shifted))


def _flip_data(f):
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0xFF
    f.write_bytes(bytes(b))


# What is done to every map output's files between two jobs, and whether
# the second job must rerun the map stage (a fetch failure) to answer.
DAMAGE = {
    # Spark's resolver cannot open the index: a fetch failure.
    "index missing": (lambda d, i, c: i.unlink(), True),
    # The offsets name other segments: their trailers name other partitions.
    "index shifted": (lambda d, i, c: _shift_index(i), True),
    # Checksum files are read only to diagnose a corrupt fetch: a corrupt
    # block with no checksum file is still a fetch failure, diagnosed as
    # unknown.
    "checksum missing, data corrupt": (lambda d, i, c: (c.unlink(), _flip_data(d)), True),
    # With the data intact a damaged checksum file is never read.
    "checksum corrupt": (lambda d, i, c: c.write_bytes(b"\xff" * len(c.read_bytes())), False),
}


@pytest.mark.extended
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_index_and_checksum_files(tmp_path, reference, damage):
    do, reruns = DAMAGE[damage]
    s = session("local[2]", SLUICE, tmp_path)
    try:
        sc = s.sparkContext
        shuffled = workloads.pairs(sc, 20000, 500, 4).partitionBy(6)
        assert shuffled.count() == 20000  # map outputs on disk
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert len(data) == 4, data
        root = pathlib.Path(tmp_path)
        for f in data:
            # Spark's block manager puts each file in a subdirectory by its name's hash.
            index = next(root.rglob(f.stem + ".index"))
            checksum = next(root.rglob(f.stem + ".checksum.*"))
            do(f, index, checksum)
        before = sluice_metrics(s)["map_outputs"]
        assert workloads.per_partition_sorted(shuffled) == reference["partition_by_key"]
        rerun = sluice_metrics(s)["map_outputs"] > before
        assert rerun == reruns, f"{damage}: map stage rerun {rerun}"
    finally:
        s.stop()


def test_sql_exchange_corrupt_block_is_a_fetch_failure(tmp_path):
    # Spark SQL's rows are read by pointing at them in decoded blocks, not
    # through a stream Spark's fetch iterator reads; a corrupt block found
    # there must still be a fetch failure (the map stage reruns), never a
    # failed or short answer.
    s = session("local[2]", SLUICE, tmp_path, extra={"spark.sql.adaptive.enabled": "false"})
    try:
        sc = s.sparkContext
        df = s.range(0, 40000, numPartitions=4).selectExpr("id", "id % 7 as k").repartition(6, "k")
        want = [(i, i % 7) for i in range(40000)]
        assert sorted((r.id, r.k) for r in df.collect()) == want  # map outputs on disk
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert len(data) == 4, data
        for f in data:  # flip a byte in the middle of every map output
            b = bytearray(f.read_bytes())
            b[len(b) // 2] ^= 0xFF
            f.write_bytes(bytes(b))
        before = sluice_metrics(s)
        sc.setJobGroup("after-corruption", "read the damaged outputs")
        assert sorted((r.id, r.k) for r in df.collect()) == want
        after = sluice_metrics(s)
        attempts = stage_attempts(sc, "after-corruption")
        assert max(attempts.values()) >= 1, f"no stage was retried: {attempts}"
        assert after["map_outputs"] >= before["map_outputs"] + 1, "the map stage was not rerun"
        assert after["sql_rows_read"] - before["sql_rows_read"] >= 40000
    finally:
        s.stop()


def nodes_named(plan, name):
    """The nodes of a physical plan (a JVM object) whose name is `name`."""
    found, todo = [], [plan]
    while todo:
        node = todo.pop()
        if node.nodeName() == name:
            found.append(node)
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return found


def _native_aggregate_metrics(s):
    """A decimal sum of more than 18 digits by key, which Sluice runs as its
    native aggregate: its answer checked, its node's SQL metrics by name."""
    agg = (s.range(0, 10000, 1, 4).selectExpr("id % 10 as k", "cast(id as decimal(20, 2)) as v")
           .groupBy("k").sum("v"))
    assert sorted((r[0], int(r[1])) for r in agg.collect()) == [
        (k, 4_995_000 + 1000 * k) for k in range(10)]
    nodes = nodes_named(agg._jdf.queryExecution().executedPlan(), "SluiceAggregate")
    assert len(nodes) == 1, nodes
    m = nodes[0].metrics()
    return {name: m.apply(name).value() for name in (
        "shuffleRecordsWritten", "shuffleBytesWritten", "recordsRead", "localBytesRead",
        "remoteBytesRead")}


def test_sql_exchange_data_size_is_spark_s(tmp_path):
    # Adaptive execution plans joins from the exchange's "data size": Sluice
    # must report the bytes Spark's own writer reports (the rows' sizes), in
    # its own exchange nodes too.
    sizes, sorted_sizes = {}, {}
    for manager in ("sort", SLUICE):
        s = session("local[2]", manager, tmp_path / manager.rsplit(".", 1)[-1],
                    extra={"spark.sql.adaptive.enabled": "false"})
        try:
            df = s.range(0, 8, 1, 4).selectExpr("id", "id * 2 as v").repartition(3)
            assert sorted(r.id for r in df.collect()) == list(range(8))
            # Under Sluice a repartition of a range is its round-robin node.
            name = "Exchange" if manager == "sort" else "SluiceRoundRobinExchange"
            exchanges = nodes_named(df._jdf.queryExecution().executedPlan(), name)
            assert len(exchanges) == 1, exchanges
            sizes[manager] = exchanges[0].metrics().apply("dataSize").value()
            # An ORDER BY: under Sluice its native sorted exchange.
            ordered = s.range(0, 1000, 1, 4).selectExpr("id", "cast(id as string) as t").orderBy("t")
            assert [r.id for r in ordered.collect()] == sorted(range(1000), key=str)
            name = "Exchange" if manager == "sort" else "SluiceSortExchange"
            exchanges = nodes_named(ordered._jdf.queryExecution().executedPlan(), name)
            assert len(exchanges) == 1, exchanges
            sorted_sizes[manager] = exchanges[0].metrics().apply("dataSize").value()
            if manager == SLUICE:
                aggregate_metrics = _native_aggregate_metrics(s)
        finally:
            s.stop()
    # The native aggregate's node shows its shuffle's metrics as the exchange
    # it stands for would: every partial written read once, every byte too.
    m = aggregate_metrics
    assert m["shuffleRecordsWritten"] > 0 and m["shuffleBytesWritten"] > 0, m
    assert m["recordsRead"] == m["shuffleRecordsWritten"], m
    assert m["localBytesRead"] + m["remoteBytesRead"] == m["shuffleBytesWritten"], m
    assert sizes[SLUICE] == sizes["sort"] == 8 * 24, sizes
    # Each row: an 8-byte null bitset word, the long, the string's offset and
    # length word, and its 1-3 characters padded to a word.
    assert sorted_sizes[SLUICE] == sorted_sizes["sort"] == 1000 * 32, sorted_sizes


def test_corrupt_block_fetched_from_another_executor(tmp_path, reference):
    # Two executors in their own JVMs; every map output is damaged on disk
    # between two jobs. The reduce tasks fetch (locally and over the
    # network), find the corruption, fail the fetch; the map stage reruns
    # and the answer is Spark's.
    dirs = tmp_path / "dirs"
    dirs.mkdir()

    def _note_local_dir(index, it):
        """Each map task notes its executor's local directories (where its
        output goes) for the test to find."""
        with open(str(dirs / str(index)), "w") as f:
            f.write(os.environ["SPARK_LOCAL_DIRS"])
        return it

    s = session("local-cluster[2,1,1024]", SLUICE, tmp_path / "local")
    try:
        sc = s.sparkContext
        shuffled = (
            workloads.pairs(sc, 20000, 500, 4).mapPartitionsWithIndex(_note_local_dir).partitionBy(6)
        )
        assert shuffled.count() == 20000
        roots = {p.read_text() for p in dirs.iterdir()}
        data = sorted(f for r in roots for d in r.split(",") for f in pathlib.Path(d).rglob("shuffle_*.data"))
        assert len(data) == 4, (roots, data)
        for f in data:
            b = bytearray(f.read_bytes())
            b[len(b) // 2] ^= 0xFF
            f.write_bytes(bytes(b))
        sc.setJobGroup("after-corruption", "fetch the damaged outputs")
        assert workloads.per_partition_sorted(shuffled) == reference["partition_by_key"]
        attempts = stage_attempts(sc, "after-corruption")
        assert max(attempts.values()) >= 1, f"no stage was retried: {attempts}"
    finally:
        s.stop()


@pytest.mark.extended
def test_sql_corrupt_blocks_fetched_from_another_executor(tmp_path):
    # The SQL row path across executor JVMs: a hash repartition's rows and a
    # native aggregate's partial results, read without the deserializer, with
    # every map output damaged on disk between two reads. The reduce tasks
    # fetch (locally and over the network), find the corruption, fail the
    # fetch; the map stages rerun and the answers are exact.
    s = session("local-cluster[2,1,1024]", SLUICE, tmp_path / "local",
                extra={"spark.sql.adaptive.enabled": "false"})
    try:
        sc = s.sparkContext
        roots = set(sc.parallelize(range(16), 16)
                    .map(lambda _: __import__("os").environ["SPARK_LOCAL_DIRS"]).collect())
        spread = s.range(0, 40000, numPartitions=4).selectExpr("id", "id % 7 as k") \
            .repartition(6, "k")
        agg = s.range(0, 40000, numPartitions=4).selectExpr("id % 97 as k", "id") \
            .groupBy("k").agg({"id": "sum"}).withColumnRenamed("sum(id)", "s")
        want_spread = [(i, i % 7) for i in range(40000)]
        want_agg = sorted((k, sum(range(k, 40000, 97))) for k in range(97))
        assert sorted((r.id, r.k) for r in spread.collect()) == want_spread
        assert sorted((r.k, r.s) for r in agg.collect()) == want_agg
        assert "SluiceAggregate" in agg._jdf.queryExecution().executedPlan().toString()
        data = sorted(f for r in roots for d in r.split(",")
                      for f in pathlib.Path(d).rglob("shuffle_*.data"))
        assert len(data) == 8, (roots, data)
        for f in data:
            b = bytearray(f.read_bytes())
            b[len(b) // 2] ^= 0xFF
            f.write_bytes(bytes(b))
        sc.setJobGroup("after-corruption", "fetch the damaged outputs")
        assert sorted((r.id, r.k) for r in spread.collect()) == want_spread
        assert sorted((r.k, r.s) for r in agg.collect()) == want_agg
        attempts = stage_attempts(sc, "after-corruption")
        assert max(attempts.values()) >= 1, f"no stage was retried: {attempts}"
    finally:
        s.stop()


def test_speculative_map_attempts_give_each_record_once(tmp_path, reference):
    # The first attempt of map task 0 is slow, so Spark launches a copy on
    # the other worker; the copy commits and the original is killed
    # mid-write. Every record arrives once.
    marker = tmp_path / "speculated"
    settings = {**SPECULATION, "spark.executor.memory": "768m"}
    with standalone_cluster(tmp_path) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=settings)
        try:
            sc = s.sparkContext
            rdd = workloads.pairs(sc, 50000, 1000, 4).mapPartitionsWithIndex(
                slow_first_attempt(marker))
            got = sorted(rdd.reduceByKey(lambda a, b: a + b, 8).collect())
            assert marker.exists(), "no speculative attempt ran"
            assert got == reference["reduce_by_key"]
        finally:
            s.stop()


def test_sql_repartition_without_sort_deals_a_rerun_map_task_alike(tmp_path):
    # Sluice's repartition of a determinate input leaves out Spark's sort
    # before the round robin (RoundRobinExchangeExec). A map task rerun after
    # its output is lost must deal its rows to the same partitions as the
    # first attempt, since the other tasks' outputs are read as they were:
    # the second read equals the first, partition by partition.
    s = session("local[2]", SLUICE, tmp_path)
    try:
        rr = s.sparkContext._jvm.dev.sluice.spark.sql.RoundRobinExchangeExec
        before = rr.unsortedShuffles()
        df = s.range(0, 40000, 1, 4).selectExpr("id", "repeat(string(id), 3) as v")
        rows = df.repartition(6).rdd.map(tuple)
        first = [sorted(p) for p in rows.glom().collect()]  # map stage done, outputs on disk
        assert rr.unsortedShuffles() == before + 1, "Spark's sort was not left out"
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"))
        assert len(data) == 4, data
        b = data[0].read_bytes()
        data[0].write_bytes(b[:[at for at, trailer, _ in frames(b) if trailer][-1]])
        outputs = sluice_metrics(s)["map_outputs"]
        second = [sorted(p) for p in rows.glom().collect()]
        assert sluice_metrics(s)["map_outputs"] >= outputs + 1, "no map task was rerun"
        assert [len(p) for p in second] == [len(p) for p in first]
        assert second == first
    finally:
        s.stop()


# The sort shuffle's run is the control (Spark's own behaviour the test
# asks of Sluice); it runs in the extended tier, outside CI's time.
CONTROL = pytest.param("sort", marks=pytest.mark.extended)


@pytest.mark.parametrize("manager", [CONTROL, SLUICE])
def test_sql_repartition_of_an_unstable_input_deals_a_rerun_alike(tmp_path, manager):
    # SPARK-23207: repartition(n) deals a map task's rows round robin in the
    # order it reads them. A DataFrame over a Python RDD whose partitions come
    # out in a new order on each attempt is still DETERMINATE to Spark, so the
    # level proves nothing; only Spark's sort before the deal (which Sluice
    # keeps for any input its allow-list does not prove stable) makes a rerun
    # task deal every row to the partition it went to before. The largest map
    # output is cut in half after a first read; the rerun must leave every
    # partition as it was.
    def in_a_new_order(index, part):
        # The partition's rows in a random order, new on every attempt (the
        # system's randomness, no seed). Defined here so that it is pickled
        # by value: the Python workers cannot import this file.
        import random

        part = list(part)
        random.shuffle(part)
        return iter(part)

    s = session("local[2]", manager, tmp_path)
    try:
        sc = s.sparkContext
        if manager == SLUICE:
            rr = sc._jvm.dev.sluice.spark.sql.RoundRobinExchangeExec
            kept = rr.sortedShuffles()
        source = sc.parallelize([(i, f"row-{i:06d}") for i in range(40000)], 4)
        df = s.createDataFrame(source.mapPartitionsWithIndex(in_a_new_order), "id long, v string")
        rows = df.repartition(6).rdd.map(tuple)
        first = rows.glom().collect()  # map stage done, outputs on disk
        assert sorted(r for p in first for r in p) == [(i, f"row-{i:06d}") for i in range(40000)]
        if manager == SLUICE:
            assert rr.sortedShuffles() == kept + 1, "Spark's sort was left out for a Python RDD"
            outputs = sluice_metrics(s)["map_outputs"]
        data = sorted(pathlib.Path(tmp_path).rglob("shuffle_*.data"), key=lambda f: f.stat().st_size)
        assert len(data) == 4, data
        b = data[-1].read_bytes()
        data[-1].write_bytes(b[: len(b) // 2])
        sc.setJobGroup("after-cut", "read the cut output")
        second = rows.glom().collect()
        attempts = stage_attempts(sc, "after-cut")
        assert max(attempts.values()) >= 1, f"no stage was retried: {attempts}"
        if manager == SLUICE:
            assert sluice_metrics(s)["map_outputs"] >= outputs + 1, "no map task was rerun"
        assert [len(p) for p in second] == [len(p) for p in first]
        assert [sorted(p) for p in second] == [sorted(p) for p in first]
    finally:
        s.stop()


# A job in a JVM whose driver (the executor too, in local mode) is told to
# load a native library that does not exist.
_NO_LIBRARY_JOB = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import session
s = session("local[2]", sys.argv[3], sys.argv[2], extra={
    "spark.driver.extraJavaOptions": "-Dsluice.native.library=/nonexistent/libsluice_jni.so"})
sc = s.sparkContext
out = {}
out["sums"] = sorted(sc.parallelize(range(10000), 4).map(lambda i: (i % 7, 1))
                     .reduceByKey(lambda a, b: a + b, 3).collect())
df = s.range(0, 10000, 1, 4).selectExpr("id % 5 as k", "cast(id as decimal(9,2)) as d")
out["sql"] = sorted((r.k, str(r.s)) for r in df.groupBy("k").agg({"d": "sum"})
                    .withColumnRenamed("sum(d)", "s").collect())
out["ordered"] = [r.id for r in s.range(0, 1000, 1, 4).orderBy("id").limit(5).collect()]
m = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
out["map_outputs"] = m.mapOutputs()
out["live"] = m.liveMapAttempts()
s.stop()
print(json.dumps(out))
"""


def test_a_native_library_that_cannot_load_falls_back_to_the_sort_shuffle(tmp_path):
    # The driver cannot load the library (a wrong sluice.native.library;
    # the same as a platform the jar has no library for or a noexec
    # directory): every shuffle, RDD and SQL, runs on Spark's sort shuffle
    # with Spark's answers, and the log says why once.
    p = subprocess.run(
        [sys.executable, "-c", _NO_LIBRARY_JOB, str(pathlib.Path(__file__).parent),
         str(tmp_path), SLUICE],
        capture_output=True, text=True, timeout=400,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["sums"] == [[k, len(range(k, 10000, 7))] for k in range(7)]
    want = {}
    for i in range(10000):
        want[i % 5] = want.get(i % 5, 0) + i
    assert got["sql"] == [[k, f"{want[k]}.00"] for k in range(5)]
    assert got["ordered"] == [0, 1, 2, 3, 4]
    assert got["map_outputs"] == 0 and got["live"] == 0, got
    said = [line for line in p.stderr.splitlines() if "native library cannot be loaded" in line]
    assert len(said) == 1, said
    assert "/nonexistent/libsluice_jni.so" in said[0], said[0]
    assert "runs on Spark's sort shuffle" in said[0], said[0]


# A window and a repartition in one map task with 2 % of the heap as Spark's
# memory, in a JVM of its own (the setting applies at JVM start).
_SMALL_MEMORY_WINDOW_JOB = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import session
s = session("local[2]", sys.argv[3], sys.argv[2], extra={"spark.memory.fraction": "0.02"})
df = s.range(0, int(sys.argv[4]), 1, 4).selectExpr(
    "id % 500 as g", "id", "repeat(string(id), 8) as pad")
ranked = df.selectExpr("g", "pad", "row_number() over (partition by g order by id) as rn")
out = {}
try:
    r = ranked.repartition(200).selectExpr(
        "count(*) as n", "sum(rn) as s", "sum(length(pad)) as p").collect()[0]
    out.update(n=r.n, s=r.s, p=r.p)
except Exception as e:
    out["error"] = str(e)[-4000:]
m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
out["live"] = m.liveMapAttempts()
out["spills"] = m.mapSpills()
s.stop()
print(json.dumps(out))
"""


@pytest.mark.parametrize("manager", [CONTROL, SLUICE])
def test_a_window_and_a_repartition_in_one_task_share_little_memory(tmp_path, manager):
    # Spark's consumers spill for each other when a task runs short: the
    # window's sort and buffers and the exchange's map output below
    # repartition(200) share 2 % of the heap, so Sluice's map output must give
    # memory back when the sorter asks (not only when its own writer does),
    # or the task fails with SparkOutOfMemoryError where the sort shuffle
    # runs. Both managers give the same exact answer.
    rows = 400_000
    p = subprocess.run(
        [sys.executable, "-c", _SMALL_MEMORY_WINDOW_JOB, str(pathlib.Path(__file__).parent),
         str(tmp_path), manager, str(rows)],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert "error" not in got, got["error"]
    per_group = rows // 500
    assert got["n"] == rows
    assert got["s"] == 500 * per_group * (per_group + 1) // 2
    assert got["p"] == sum(8 * len(str(i)) for i in range(rows))
    assert got["live"] == 0
    if manager == SLUICE:
        # The pressure reached Sluice's map output: it spilled, and the
        # task went on.
        assert got["spills"] >= 1, got


def test_disk_full_during_a_reduce_spill_fails_the_job(tmp_path):
    # A native ORDER BY whose one reduce task is granted less memory than
    # its rows (Spark's memory manager cut to 16 MiB): it spills sorted runs
    # into Spark's local directory, a small filesystem that holds the map
    # output but not the runs beside it. (With two reduce tasks, each spilled
    # less than the free space, so the disk filled only when the two spilled
    # at once: the job passed in one CI run of two.) The reduce task must fail with
    # the disk's error naming the spill file, and the job with it, never
    # merge what it still has into a short answer; nothing native stays
    # open, no spill file stays behind.
    rows = 200_000  # 64 incompressible bytes each: about 17 MB of map output
    with small_filesystem(REDUCE_SPILL_FS_MIB) as fs:
        s = session("local[2]", SLUICE, fs, extra=short_of_memory(16, 1, adaptive=False))
        try:
            m = s.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
            df = s.range(0, rows, numPartitions=8).selectExpr(
                "id", "unhex(sha2(cast(id as string), 512)) as b")
            sorted_rows = df.orderBy("b")
            assert "SluiceSortExchange" in sorted_rows._jdf.queryExecution().executedPlan().toString()
            with pytest.raises(Exception) as failed:
                sorted_rows.write.format("noop").mode("overwrite").save()
            error = str(failed.value)
            assert "No space left on device" in error, error[-3000:]
            assert "spill file" in error and "sluice-spill-" in error, error[-3000:]
            assert m.liveReduceOperators() == 0
            assert m.liveMapAttempts() == 0
            assert list(fs.rglob("sluice-spill-*")) == []
        finally:
            s.stop()


# Holds the map output of the test above (about 17 MB) and a few MiB more.
REDUCE_SPILL_FS_MIB = 22


def test_a_shuffle_unregistered_while_its_map_tasks_run(tmp_path):
    # Spark unregisters a shuffle (ContextCleaner, or a removed executor's
    # zombie tasks) without waiting for tasks still writing it. Under Sluice
    # the engine's shuffle state goes then; the map tasks that were writing
    # must fail with a typed error naming the shuffle, never crash the JVM,
    # leave a native attempt open or commit output nobody tracks, and the
    # session must run the next job right.
    import threading
    from operator import add

    latch, started = tmp_path / "go", tmp_path / "started"
    started.mkdir()

    def stall(index, it):
        import os
        import time
        rows = list(it)
        yield from rows[: len(rows) // 2]
        open(os.path.join(str(started), str(index)), "w").close()
        deadline = time.time() + 120
        while not os.path.exists(str(latch)) and time.time() < deadline:
            time.sleep(0.05)
        yield from rows[len(rows) // 2:]

    s = session("local[2]", SLUICE, tmp_path / "local")
    try:
        sc = s.sparkContext
        m = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
        pairs = sc.parallelize(range(20_000), 2).mapPartitionsWithIndex(stall)
        job = pairs.map(lambda x: (x % 50, 1)).reduceByKey(add, 4)
        out = {}

        def run():
            try:
                out["answer"] = sorted(job.collect())
            except Exception as e:  # noqa: BLE001 (the job's error is the result)
                out["error"] = str(e)

        t = threading.Thread(target=run)
        t.start()
        deadline = time.time() + 120
        while len(list(started.iterdir())) < 2:
            assert time.time() < deadline, "the map tasks never reached the stall"
            time.sleep(0.05)
        # Both map tasks are half way through. The first shuffle of a fresh
        # context has id 0; unregister it as an executor's BlockManager does.
        tracker = sc._jsc.sc().env().mapOutputTracker()
        assert tracker.containsShuffle(0)
        env = sc._jvm.org.apache.spark.SparkEnv.get()
        env.shuffleManager().unregisterShuffle(0)
        latch.touch()
        t.join(timeout=300)
        assert not t.is_alive(), "the job never ended"
        assert "answer" not in out or out["answer"] == [(k, 400) for k in range(50)], out
        if "error" in out:
            # Named by Spark's shuffle id (the engine numbers its own).
            error = out["error"]
            assert "SluiceException: Spark shuffle 0, map id " in error, error[-3000:]
            assert "unregistered while this map attempt ran" in error, error[-3000:]
        assert m.liveMapAttempts() == 0
        assert m.liveReduceOperators() == 0
        # The session goes on: the next shuffle is right.
        again = sc.parallelize(range(20_000), 2).map(lambda x: (x % 50, 1)).reduceByKey(add, 4)
        assert sorted(again.collect()) == [(k, 400) for k in range(50)]
    finally:
        s.stop()


# One row of 512 MiB (a string of a repeated 16-byte pattern) among small
# ones, through the SQL row paths of a hash and a round-robin repartition, in
# a JVM of its own with the heap such a row needs in Spark (the string, the
# projection's buffer it grows to twice the row, the reader's copy): 8 GiB.
# (An ORDER BY of it is left out: Spark's own range partitioner runs out of
# an 8 GiB heap sampling it, under either manager.)
_HUGE_ROW_JOB = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import session
s = session("local[2]", sys.argv[3], sys.argv[2], extra={
    "spark.driver.memory": "8g", "spark.sql.adaptive.enabled": "false"})
sc = s.sparkContext
df = s.sql("SELECT id, CASE WHEN id = 2 THEN repeat('0123456789abcdef', 32 * 1024 * 1024) "
           "ELSE repeat('x', CAST(id AS INT)) END s FROM range(0, 5, 1, 2)")
out = {}
for name, shuffled in (("hash", df.repartition(3, "id")), ("round_robin", df.repartition(3))):
    parts = shuffled.selectExpr("id", "length(s) n", "md5(s) m").rdd.glom().collect()
    out[name] = sorted([r.id, r.n, r.m] for p in parts for r in p)
    out[name + "_sizes"] = sorted(len(p) for p in parts)
m = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
out["map_outputs"] = m.mapOutputs()
out["direct"] = m.sqlRowsDirect()
out["live"] = m.liveMapAttempts()
s.stop()
print(json.dumps(out))
"""


@pytest.mark.extended
def test_a_512_mib_sql_row_crosses_the_row_paths(tmp_path):
    # The limit is 768 MiB a record (spark.sluice.recordBytesMax); a row of
    # 512 MiB arrives whole, written without the serializer, in its
    # partition.
    import hashlib

    p = subprocess.run(
        [sys.executable, "-c", _HUGE_ROW_JOB, str(pathlib.Path(__file__).parent),
         str(tmp_path), SLUICE],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    huge = b"0123456789abcdef" * (32 << 20)
    want = sorted([i, len(huge) if i == 2 else i,
                   hashlib.md5(huge if i == 2 else b"x" * i).hexdigest()] for i in range(5))
    assert got["hash"] == want
    assert got["round_robin"] == want
    assert got["round_robin_sizes"] == [1, 2, 2]  # dealt round robin: 5 rows over 3
    assert got["map_outputs"] == 4 and got["direct"] == 10 and got["live"] == 0, got


# Map tasks that wait for the engine's buffer pool most of the time, cancelled
# until one kill lands in a wait, in a JVM of its own (the engine's settings
# are the process's, fixed when its first shuffle opens it).
_KILL_JOB = r"""
import json, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from conftest import session
s = session("local[2]", sys.argv[3], sys.argv[2], extra={
    "spark.sluice.offloadThreads": "1", "spark.sluice.inlineWhenBusy": "false",
    "spark.sluice.liquidOffload": "false", "spark.sluice.bufferPoolBytes": "1m",
    "spark.sql.adaptive.enabled": "false"})
sc = s.sparkContext
m = sc._jvm.dev.sluice.spark.metrics.SluiceMetrics
out = {"before": m.stoppedWaits(), "kills": []}
for kill in range(int(sys.argv[4])):
    errors = []

    def doomed():
        sc.setJobGroup("doomed", "cancelled in its map stage", interruptOnCancel=True)
        try:
            s.range(0, 1 << 40, 1, 2).selectExpr("id", "id * 3 v").repartition(64, "id").count()
        except Exception as e:
            errors.append(str(e)[:3000])

    job = threading.Thread(target=doomed)
    job.start()
    deadline = time.monotonic() + 120
    while job.is_alive() and time.monotonic() < deadline and not any(
            sc.statusTracker().getStageInfo(st).numActiveTasks == 2
            for st in sc.statusTracker().getActiveStageIds()):
        time.sleep(0.05)
    started = job.is_alive() and time.monotonic() < deadline
    time.sleep(1)  # into the map stage
    cancelled = time.monotonic()
    sc.cancelJobGroup("doomed")
    job.join(120)
    while m.liveMapAttempts() > 0 and time.monotonic() < cancelled + 30:
        time.sleep(0.05)
    ended_s = time.monotonic() - cancelled
    live = m.liveMapAttempts()
    # Where a task that outlived its kill is (for the failure message).
    stacks = "" if live == 0 else subprocess.run(
        ["jstack", str(sc._jvm.java.lang.ProcessHandle.current().pid())],
        capture_output=True, text=True).stdout
    stacks = [t for t in stacks.split("\n\n") if "Executor task launch" in t]
    out["kills"].append({"started": started, "ended": not job.is_alive(), "errors": errors,
                         "live": live, "ended_s": ended_s, "stacks": stacks,
                         "held": list(m.engineHeld()),
                         "next": s.range(0, 100000, 1, 4).repartition(8, "id").count()})
out["after"] = m.stoppedWaits()
s.stop()
print(json.dumps(out))
"""


def test_a_killed_map_task_ends_and_frees_the_engine(tmp_path):
    # One offload thread, no map work on the task threads and a 1 MiB map
    # buffer pool; the two map tasks of a repartition of 2^40 rows are killed
    # (the job cancelled with interruptOnCancel: Spark marks them killed and
    # interrupts their threads), three times. A task ends at its next hand-over
    # of a buffer, or, waiting for the pool, at the engine's stop check within
    # a slice (SluiceMetrics.stoppedWaits; that wait and its check are tested
    # in crates/sluice-engine/src/buffer.rs and StopRequestedTest). Before the
    # hand-over's check a task whose engine kept up never waited, and ran on
    # for minutes after its kill (the rows come from code that never checks
    # it; the sort shuffle's writers end on their file I/O). After each kill
    # the job ends, its tasks and native attempts end within seconds, no
    # engine bytes stay charged, and the next job is exact.
    kills = 3
    p = subprocess.run(
        [sys.executable, "-c", _KILL_JOB, str(pathlib.Path(__file__).parent),
         str(tmp_path), SLUICE, str(kills)],
        capture_output=True, text=True, timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(got["kills"]) == kills
    for k in got["kills"]:
        assert k["started"], f"the map tasks never ran: {k['errors']}"
        assert k["ended"], "the cancelled job did not end"
        assert k["errors"] and "cancel" in k["errors"][0].lower(), k["errors"]
        assert k["live"] == 0, ("a killed task's native attempt stayed open; its task threads:\n"
                                + "\n\n".join(k["stacks"])[:6000])
        held = k["held"]
        assert held[:3] == [0, 0, 0] and held[3] <= held[4], held
        assert k["next"] == 100000
    print(f"tasks ended {[round(k['ended_s'], 2) for k in got['kills']]} s after each cancel; "
          f"{got['after'] - got['before']} waits in the engine ended by a kill")
