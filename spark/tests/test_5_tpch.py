"""TPC-H through Spark SQL under Sluice (spark/tpch.py at scale factor
0.01): all 22 answers in one power run with the two managers' sessions side
by side (--concurrent: the test's time halved, nothing said of speed), each
checked against Spark's sort shuffle's (tpch.py exits 1 on a difference);
and the interleaved protocol the benchmark reports by (two sets of
processes, the second started in the other order, medians and the slowest
ratio) on one query, marked `extended` (four fresh sessions for one query
test the benchmark's harness, not Sluice; bash spark/test.sh --extended
runs it); and, also extended (a pyspark and a Comet download), the
benchmark on Spark 4.1 with Comet's columnar shuffle as a third manager."""

import json
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def tpch(tmp_path, *args):
    out = tmp_path / "tpch.json"
    run = subprocess.run(
        [sys.executable, str(HERE.parent / "tpch.py"), "--sf", "0.01", "--partitions", "200",
         "--driver-memory", "1g", "--tmp", str(tmp_path), "--json", str(out), *args],
        capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run.stdout, json.loads(out.read_text())["rows"]


def test_tpch_answers_match_the_sort_shuffle(tmp_path):
    stdout, rows = tpch(tmp_path, "--protocol", "power", "--concurrent")
    assert "22 query settings, 0 wrong answers" in stdout, stdout[-4000:]
    assert "FAILED" not in stdout, stdout[-4000:]
    assert sorted(r["query"] for r in rows) == list(range(1, 23))
    for r in rows:
        assert r["sort"]["jobs"] > 0 and r["sluice"]["jobs"] > 0, r
    # Sluice's native nodes ran where TPC-H has their shapes (q04, q13: an
    # aggregate by one column; q08, q12: an ORDER BY of plain columns).
    paths = "".join(r["sluice"]["paths"] for r in rows)
    assert "A" in paths and "S" in paths, paths


@pytest.mark.extended
def test_interleaved_protocol_pools_two_sets_of_processes(tmp_path):
    stdout, rows = tpch(tmp_path, "--queries", "13", "--reps", "1", "--processes", "2",
                        "--warmup", "0")
    assert "1 query settings, 0 wrong answers" in stdout, stdout[-4000:]
    for manager in ("sort", "sluice"):
        for process in (1, 2):
            runs = [line for line in stdout.splitlines()
                    if line.split()[:1] == [manager] and f"process {process} run 1:" in line]
            assert len(runs) == 1, (manager, process, len(runs))
    assert [r["query"] for r in rows] == [13]
    for r in rows:
        assert r["sluice"]["median_ratio"] == r["sort"]["median_s"] / r["sluice"]["median_s"], r
    # The report names the lowest ratio by median as well as by best time.
    worst = min(rows, key=lambda r: r["sluice"]["median_ratio"])
    slow = [line for line in stdout.splitlines() if line.startswith("slowest ratio of sluice:")]
    assert len(slow) == 1, slow
    assert f"q{worst['query']:02d} {worst['sluice']['median_ratio']:.2f}x by median" in slow[0], slow


@pytest.mark.extended
def test_comet_s_columnar_shuffle_runs_as_a_third_manager_on_spark_4_1(tmp_path):
    """The peer in the benchmark: `spark/tpch.sh` on the default line (Spark
    4.1: Sluice's jar under spark/.venv's pyspark) with Comet 1.2.0's
    columnar shuffle as a third manager, every answer checked against the
    sort shuffle's, and Comet's exchanges in Comet's plans."""
    out = tmp_path / "tpch.json"
    run = subprocess.run(
        ["bash", str(HERE.parent / "tpch.sh"), "--managers", "sort,sluice,comet",
         "--sf", "0.01", "--partitions", "200", "--protocol", "power", "--concurrent",
         "--queries", "1,3,4,13,18", "--driver-memory", "1g", "--tmp", str(tmp_path),
         "--json", str(out)],
        capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "5 query settings, 0 wrong answers" in run.stdout, run.stdout[-4000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(r["query"] for r in rows) == [1, 3, 4, 13, 18]
    comet = "".join(r["comet"]["paths"] for r in rows)
    assert "C" in comet and "X" not in comet, comet
    assert "A" in "".join(r["sluice"]["paths"] for r in rows)
