"""Sluice's service mode under real Spark with two real `sluice daemon`
processes, one per node address (127.0.0.1 and 127.0.0.2): map output
pushed to the daemons, each reduce task's partitions read from the daemon
that owns them as one stream, answers equal to Spark's sort shuffle's
(local[2]); an executor killed after its map tasks committed costs no map
rerun (a standalone cluster with a worker on each address), where the same
kill in embedded mode does; a daemon that refuses the application's key
leaves its shuffles embedded; the daemons hold nothing once the
application ends."""

import os
import pathlib
import subprocess

import pytest

from clusters import standalone_cluster
from conftest import SLUICE, session
from test_9_executors import _executor_pids, _executors, _map_tasks_run, _wait

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sluice_binary():
    """The CLI's binary (`cargo test --workspace` builds it before the Spark tests)."""
    subprocess.run(["cargo", "build", "-q", "-p", "sluice-cli", "--bin", "sluice"], cwd=ROOT, check=True)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "sluice"


class Daemon:
    def __init__(self, binary, host, secret, tmp):
        self.dir = tmp / f"daemon-{host}"
        self.dir.mkdir()
        self.proc = subprocess.Popen(
            [str(binary), "daemon", "--host", host, "--port", "0", "--dir", str(self.dir),
             "--memory", "8m", "--secret-file", str(secret)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("sluice daemon listening on "), (line, self.proc.stderr.read())
        self.addr = line.split()[-1]

    def stop(self):
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out

    def data_files(self):
        return [p for p in self.dir.rglob("*.data")]


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("service")
    binary = sluice_binary()
    secret = tmp / "secret"
    secret.write_bytes(os.urandom(32))
    secret.chmod(0o600)
    ds = [Daemon(binary, host, secret, tmp) for host in ("127.0.0.1", "127.0.0.2")]
    key = subprocess.run([str(binary), "app-key", "--secret-file", str(secret), "--app", "sluice-test"],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        yield ds, key
    finally:
        for d in ds:
            if d.proc.poll() is None:
                d.stop()


def service_conf(ds, key, app="sluice-test"):
    return {
        "spark.sluice.mode": "service",
        "spark.sluice.service.daemons": ",".join(d.addr for d in ds),
        "spark.sluice.service.app": app,
        "spark.sluice.service.appSecret": key,
        "spark.sql.shuffle.partitions": "8",
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


@pytest.mark.parametrize("mode", ["service", "embedded"])
def test_an_executor_killed_after_its_map_tasks_costs_no_rerun(daemons, tmp_path, mode):
    # Two workers, one executor each; the map stage's four tasks commit on
    # both. One executor is killed with SIGKILL; the next job over the same
    # shuffle reruns no map task in service mode (the output lives on the
    # daemons), and reruns the lost ones in embedded mode (the kill did take
    # output away: the check can fail).
    ds, key = daemons
    extra = {**service_conf(ds, key), "spark.sluice.mode": mode, "spark.executor.cores": "1"}
    with standalone_cluster(tmp_path, hosts=("127.0.0.1", "127.0.0.2")) as master:
        s = session(master, SLUICE, tmp_path / "driver-local", extra=extra)
        try:
            sc = s.sparkContext
            _wait("two executors", lambda: len(_executors(sc)) == 2)
            shuffled = sc.parallelize(range(40000), 4).map(lambda x: (x % 101, x)).partitionBy(6)
            sizes = lambda: sorted(shuffled.mapPartitions(lambda it: [sum(v for _, v in it)]).collect())
            want = sizes()
            assert sum(want) == sum(range(40000))
            victim = _executors(sc)[0]
            pids = _executor_pids(sc.applicationId)
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
            else:
                assert mapped > 0, "the kill took no map output away"
        finally:
            s.stop()


def test_the_daemons_kept_their_budget_and_stop_cleanly(daemons):
    """Last in the module: SIGTERM stops each daemon gracefully; what it
    held stayed within its 8 MiB, and the big repartition spilled."""
    ds, _ = daemons
    spilled = 0
    for d in ds:
        out = d.stop()
        words = out.split("sluice daemon stopped: peak ")[1].split()
        peak, budget, spilled_here = int(words[0]), int(words[2]), int(words[5])
        assert budget == 8 << 20 and 0 < peak <= budget, out
        spilled += spilled_here
    assert spilled > 0, "nothing went past the daemons' memory"
