"""TPC-DS through Spark SQL under Sluice: all 99 queries of DuckDB's tpcds
extension at scale factor 0.01 (spark/tpch.py --suite tpcds), under Spark's
sort shuffle and under Sluice, in the power-run protocol (each query once,
in order, a fresh session per manager; --concurrent: the two sessions run
each query at the same time, which halves the test's time and says nothing
of speed), every answer checked against the sort shuffle's (tpch.py exits
1 on a difference or a failed query).

A suite the rules were not built on: its windows over aggregates, ROLLUPs,
self-joined CTEs over UNION ALL and the rest are the plan shapes where a
native node that does not stand exactly for the nodes it replaces breaks a
query (issue 38: 14 of the 99 failed so).

In CI (about 3 minutes on two cores beside the other lane, 104 s alone,
nearly all of it Spark's planning of 99 queries twice): Spark 4.1's union that keeps its children's
partitioning broke q14 and q23 under Sluice, and neither the generated
queries of spark/sqldiff.py (test_7) nor Spark's SQL suites had that shape."""

import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def test_tpcds_answers_match_the_sort_shuffle(tmp_path):
    out = tmp_path / "tpcds.json"
    run = subprocess.run(
        [sys.executable, str(HERE.parent / "tpch.py"), "--suite", "tpcds", "--sf", "0.01",
         "--partitions", "200", "--protocol", "power", "--concurrent", "--driver-memory", "1g",
         "--tmp", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=1500)
    errors = [l for l in run.stderr.splitlines() if " ERROR " in l or "Error:" in l or "died" in l]
    assert run.returncode == 0, run.stdout[-3000:] + "\n".join(errors[-40:]) + run.stderr[-2000:]
    assert "99 query settings, 0 wrong answers" in run.stdout, run.stdout[-6000:]
    assert "FAILED" not in run.stdout, run.stdout[-6000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(r["query"] for r in rows) == list(range(1, 100))
    for r in rows:
        assert r["sort"]["jobs"] > 0 and r["sluice"]["jobs"] > 0, r
    # Sluice's native nodes ran on this suite too.
    paths = "".join(r["sluice"]["paths"] for r in rows)
    assert "A" in paths and "S" in paths, paths
