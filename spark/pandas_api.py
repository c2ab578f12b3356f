"""The pandas API on Spark (`pyspark.pandas`) under Sluice: each operation
runs once under Spark's sort shuffle and once under Sluice (each in its own
process and JVM, `local[2]` or the `--master` given, Sluice's SQL rules on,
every aggregate shape native), and the pandas frames they give must be equal.

pandas-on-Spark plans what pandas users write, not what SQL users write:
a default index attached as a distributed sequence, group-bys keyed by a
column list with the index carried, `nunique` and `value_counts`, windows
over the index's order (`cumsum`, `rank`, `diff`), `pivot_table`,
`drop_duplicates` keeping the first row by index, `merge` and index-aligned
arithmetic between frames (a full outer join on the index), `sort_values`
with `head`, `describe`'s approximate percentiles, `groupby().apply` and
`transform` through Arrow, and `to_spark()` round trips.

pandas and pyarrow are not in spark/requirements.txt (CI does not run
this); a venv beside pyspark:

    python3 -m venv /tmp/venv-pd
    /tmp/venv-pd/bin/pip install pyspark==4.1.1 pandas==2.2.3 pyarrow==25.0.1
    /tmp/venv-pd/bin/python spark/pandas_api.py [--rows 200000] [--only NAME,...] \
        [--master 'local-cluster[2,1,1024]']

On Spark 3.5 (its jar: `spark/build.sh --line 3.5`, then `SLUICE_LINE=3.5`),
pyspark==3.5.9 pandas==2.0.3 pyarrow==14.0.2 numpy==1.26.4.
"""

import argparse
import json
import pathlib
import sys
import warnings

import per_manager

HERE = pathlib.Path(__file__).resolve().parent


def frames(spark, rows):
    """Two frames with the default (distributed-sequence) index: integer
    values, so every sum and mean is exact whatever order rows meet in; the
    second's `s` matches two rows of the first's each."""
    a = spark.sql(
        "SELECT id, cast(id % 97 AS int) AS k, cast(id % 5 AS int) AS c, "
        "concat('s', cast(id % 1013 AS string)) AS s, "
        "CASE WHEN id % 17 = 0 THEN NULL ELSE cast((id * 7919) % 100003 AS bigint) END AS v "
        f"FROM range({rows})").pandas_api()
    b = spark.sql(
        "SELECT cast(id % 97 AS int) AS k, cast(id % 3 AS int) AS c, "
        "concat('s', cast(id % 1013 AS string)) AS s, id * 11 AS w "
        "FROM range(2026)").pandas_api()
    return a, b


def operations(ps):
    """Name to a function of the two frames giving a pandas object."""
    def grouped_apply(a):
        def top(g):
            return g.sort_values(["v", "id"], ascending=[False, True]).head(2)[["id", "v"]]
        return a[["id", "k", "v"]].groupby("k").apply(top).to_pandas()

    def aligned(a, b):
        with ps.option_context("compute.ops_on_diff_frames", True):
            left = a.set_index("id")["v"]
            right = b.reset_index().rename(columns={"index": "id"}).set_index("id")["w"]
            return (left + right).to_frame("sum").to_pandas()

    return {
        "groupby agg": lambda a, b: a.groupby("k").agg(
            {"v": ["sum", "mean", "max", "count"], "s": ["min", "nunique"]}).to_pandas(),
        "groupby two keys size": lambda a, b: a.groupby(["k", "c"]).size().to_pandas(),
        "value_counts": lambda a, b: a["s"].value_counts().to_pandas(),
        "nunique": lambda a, b: a.nunique().to_pandas(),
        "sort_values head": lambda a, b: a.sort_values(
            ["v", "id"], ascending=[False, True]).head(1000).to_pandas(),
        "drop_duplicates": lambda a, b: a.drop_duplicates(subset=["k", "c"]).to_pandas(),
        "groupby cumsum": lambda a, b: a.groupby("k")["v"].cumsum().to_pandas(),
        "groupby rank": lambda a, b: a.groupby("c")["v"].rank(method="min").to_pandas(),
        "groupby diff": lambda a, b: a.groupby("k")[["v"]].diff().to_pandas(),
        "pivot_table": lambda a, b: a.pivot_table(
            index=["k"], columns="c", values="v", aggfunc="sum").to_pandas(),
        "merge": lambda a, b: a.merge(b[["s", "w"]], on="s", how="left").sort_values(
            ["id", "w"]).head(5000).to_pandas(),
        "aligned on index": aligned,
        "describe": lambda a, b: a[["v", "k"]].describe().to_pandas(),
        "groupby apply": lambda a, b: grouped_apply(a),
        "groupby transform": lambda a, b: a[["k", "v"]].groupby("k").transform(
            lambda x: x - x.min()).to_pandas(),
        "concat then groupby": lambda a, b: ps.concat(
            [a[["k", "c"]], b[["k", "c"]]]).groupby("k").c.sum().to_pandas(),
        "to_spark round trip": lambda a, b: a.to_spark().repartition(7, "s").pandas_api()
        .groupby("s").v.sum().sort_index().to_pandas(),
    }


def canonical(obj):
    """A pandas frame or series as sorted rows of strings (pandas-on-Spark
    gives no row order for most results; the index is kept as a column)."""
    frame = obj.to_frame() if hasattr(obj, "to_frame") else obj
    frame = frame.reset_index()
    frame.columns = [str(c) for c in frame.columns]
    return sorted(tuple(str(v) for v in row) for row in frame.itertuples(index=False))


def run_one(manager, root, rows, only, master):
    """One manager's run in this process: the answers as JSON on stdout."""
    sys.path.insert(0, str(HERE / "tests"))
    import conftest

    # A 1 GiB driver runs out of heap under either manager from about a
    # million rows (the results come back to pandas in the driver).
    extra = {"spark.sql.shuffle.partitions": "16", "spark.driver.memory": "3g",
             "spark.sql.execution.arrow.pyspark.enabled": "true"}
    spark = conftest.session(master, conftest.SLUICE if manager == "sluice" else "sort",
                             root / "tmp", extra=extra)
    import pyspark.pandas as ps
    warnings.filterwarnings("ignore")
    try:
        a, b = frames(spark, rows)
        out = {}
        for name, op in operations(ps).items():
            if only and name not in only:
                continue
            print(f"{manager}: {name}", file=sys.stderr, flush=True)
            try:
                out[name] = canonical(op(a, b))
            except Exception as e:  # noqa: BLE001 - reported beside the other manager's
                out[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        if manager == "sluice" and master.startswith("local["):
            # The driver's counters: the executor's in local mode alone.
            out["sluice map outputs"] = conftest.sluice_metrics(spark)["map_outputs"]
    finally:
        spark.stop()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--only", default="", help="comma-separated operation names")
    ap.add_argument("--master", default="local[2]", help="for example local-cluster[2,1,1024]")
    ap.add_argument("--manager", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    if args.manager:
        run_one(args.manager, pathlib.Path(args.root), args.rows, only, args.master)
        return 0
    answers = per_manager.answers(
        __file__, ["--rows", str(args.rows), "--only", args.only, "--master", args.master],
        "sluice-pandas")
    outputs = answers["sluice"].pop("sluice map outputs", None)
    failed = 0
    for name, rows in answers["sort"].items():
        theirs = answers["sluice"][name]
        if isinstance(rows, str) or isinstance(theirs, str):
            # A failure under either manager checks nothing.
            same = False
            shown = f"sort {rows if isinstance(rows, str) else 'ran'}; " \
                    f"Sluice {theirs if isinstance(theirs, str) else 'ran'}"
        else:
            same = rows == theirs
            shown = f"{len(rows)} rows"
        failed += not same
        print(f"{name}: {shown}, {'equal' if same else 'DIFFERENT'}")
    if outputs is not None:
        print(f"{outputs} map outputs written by Sluice")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
