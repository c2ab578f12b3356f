"""The differential test of Sluice's SQL rules (spark/sqldiff.py): queries
generated from a fixed seed (aggregates by keys of every type the engine
groups, DISTINCT aggregates, ROLLUP/CUBE/GROUPING SETS, windows over
aggregates, self-joins of aggregated CTEs, UNION ALL below aggregates and
aggregates below UNION ALL, ORDER BY with LIMIT, sorts of raw rows,
DISTINCT, INTERSECT and EXCEPT, semi and anti joins, windows over rows,
explicit repartitions, repartitioned and sorted CTEs read twice, groups and
joins by doubles with NaN and -0.0, floats, binaries, arrays and structs
grouped, joined and sorted by, maps carried) run under Spark's sort shuffle
and under Sluice, every answer compared (the script exits 1 on a
difference); a second seed's queries again with Spark's execution memory
off the heap and small, and adaptive execution's coalescing of partitions
turned off."""

import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
QUERIES = 110  # CI's share of its 30 minutes (every shape; spark/sqldiff.py runs any number)


# Spark's execution memory off the heap (as Comet's users run), and little
# of it: the native aggregates, sorts and map outputs account and spill in
# the memory mode Spark's own consumers use. And adaptive execution without
# its coalescing of small partitions, a setting users turn off: every native
# read is then one task per partition that exists (a sort's ranges may be
# fewer than its declared partitions; `spark/sqldiff.py --seed 11 --queries
# 70 --conf spark.sql.adaptive.coalescePartitions.enabled=false` found two
# queries that failed under Sluice before that was so).
OFF_HEAP_QUERIES = 30
OTHER_SETTINGS = ("spark.memory.offHeap.enabled=true", "spark.memory.offHeap.size=16m",
                  "spark.sql.adaptive.coalescePartitions.enabled=false")


def sqldiff(tmp_path, seed, queries, conf=()):
    """Runs spark/sqldiff.py; every answer equal, most queries on native
    nodes, none failed under a manager, and `conf` in both sessions."""
    run = subprocess.run(
        [sys.executable, str(HERE.parent / "sqldiff.py"), "--seed", str(seed),
         "--queries", str(queries), "--tmp", str(tmp_path),
         *(arg for kv in conf for arg in ("--conf", kv))],
        capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    m = re.search(r"^(\d+) queries .*: (\d+) ran native nodes under Sluice, (\d+) failed under a "
                  r"manager, 0 different answers", run.stdout, re.M)
    assert m, run.stdout[-3000:]
    assert int(m.group(1)) == queries
    # The rules fired on a good share of them: the test compares native plans, not Spark's
    # twice (the shapes around the rules, sorts of raw rows aside, are mostly Spark's own).
    assert int(m.group(2)) >= queries // 3, m.group(0)
    # A generated query may fail under both managers alike (an ANSI overflow,
    # say); never for want of memory, which would make the run too small to
    # compare the managers' memory use.
    both = re.findall(r"^FAILED UNDER BOTH: .*\n  sort: (.*)\n  sluice: (.*)$", run.stdout, re.M)
    assert len(both) == int(m.group(3)), (both, m.group(0))
    assert not [e for e in both if "memory" in " ".join(e).lower()], both
    for manager in ("sort", "sluice"):
        line = re.search(rf"^{manager}'s session: (.*)$", run.stdout, re.M)
        assert (line.group(1).split(", ") if line else []) == list(conf), (manager, conf)


def test_generated_queries_answer_alike_under_both_managers(tmp_path):
    sqldiff(tmp_path, 38, QUERIES)


def test_generated_queries_answer_alike_with_little_off_heap_memory_and_no_coalescing(tmp_path):
    sqldiff(tmp_path, 41, OFF_HEAP_QUERIES, OTHER_SETTINGS)
