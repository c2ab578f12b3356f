"""A differential test of Sluice's Spark SQL rules: generated queries run
under Spark's sort shuffle and under Sluice, every answer compared.

The rules replace Spark's aggregates, sorts and exchanges with native nodes
where the plan has shapes they accept. This script writes queries the rules
were not tuned on, from a seed: aggregates by one to several keys of every
type the engine groups (integers, booleans, dates, timestamps, decimals,
strings, and expressions of them) with counts, sums, averages, minima and
maxima of integers, decimals, dates and timestamps, nulls in every column,
DISTINCT aggregates, ROLLUP, CUBE and GROUPING SETS, HAVING, windows over
aggregates, self-joins of an aggregated CTE, UNION ALL below an aggregate,
aggregates below a UNION ALL below an aggregate,
joins below an aggregate, ORDER BY with LIMIT, global sorts of raw rows by
keys and expressions of every type in either direction with nulls at either
end (with LIMIT and OFFSET or none), SELECT DISTINCT, INTERSECT and EXCEPT
(with and without ALL), IN, NOT IN, EXISTS and NOT EXISTS below an
aggregate, windows over raw rows, aggregates over rows an explicit
REPARTITION, REBALANCE or DISTRIBUTE BY moved (and such a CTE, or a sorted
one, read twice in a query), groups and joins by a double
of either sign holding NaN, -0.0 and infinities, and a fourth table's floats
(of either sign, NaN, -0.0), binaries (0x00 and bytes above 0x7f, many a
prefix of another), arrays and structs grouped, joined, partitioned and
sorted by, and maps carried, through exchanges and sorts (strings too are
prefixes of each other, some with a multi-byte character), at 1, a few or
many (up to 600: more than 256) shuffle partitions; each runs once under each manager
(each manager in its own process and JVM, adaptive execution on; the two run
each query at the same time, so the times printed are not a benchmark), and
the two answers must be the same multiset of rows (doubles to 12 significant
digits, as spark/tpch.py compares), in the same order where the query
orders by every column (ORDER BY ALL) or ends its ORDER BY with the
fourth table's unique id, and no node of Sluice's executed plan may read an
attribute that neither its children give nor it makes (Spark's
`missingInput`, which Spark's own suites check on every answer) where the
sort shuffle's plan has no such node. A query
whose answer is an error must fail under both. Any difference is printed
with its SQL and the rows each answer has that the other lacks, and fails
the run (exit 1); --only ID,ID runs just those queries of the seed again.
Sluice's session runs with spark.sluice.sqlAggregate=true: every aggregate
shape the engine computes, where its default takes only the faster ones.

    python spark/sqldiff.py [--seed S] [--queries N] [--rows R] [--service]

--master local-cluster[2,1,1024] runs both sessions with two executor JVMs
each (one core, 1 GiB), so that every shuffle read crosses processes.

--service runs Sluice's session in service mode against two release `sluice
daemon`s it starts on 127.0.0.1 and 127.0.0.2 (spark/daemons.py), with every
shuffle pushed to them however small (minPushBytes and minShuffleBytes 0), so
the daemons' second level (their partitions, the reduce-side operators they
run for native aggregates) answers the same queries; the run fails if the
daemons committed no map output. --daemon-memory sets their budget (a small one
makes them spill partitions to disk). --sluice-conf adds a setting to Sluice's
session only (spark.sluice.service.reduceAtDaemon=true, for one).

The tables (four, of --rows rows each, from the seed) are written once as
Parquet by DuckDB under --tmp; --shapes nested,sort runs only the seed's
queries of those shapes. The test (spark/tests/test_7_sqldiff.py)
runs a fixed seed; any other seed is as good a test."""

import argparse
import collections
import contextlib
import json
import os
import pathlib
import random
import re
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench  # noqa: E402  (sessions, the worker protocol)
import daemons  # noqa: E402  (--service: the daemons)
from tpch import canonical, value  # noqa: E402

# Columns of every table: name -> (DuckDB type, what it is to the generator).
COLUMNS = {
    "k_long": ("BIGINT", "key"),
    "k_int": ("INTEGER", "key"),
    "k_short": ("SMALLINT", "key"),
    "k_bool": ("BOOLEAN", "key"),
    "k_date": ("DATE", "key"),
    "k_ts": ("TIMESTAMP", "key"),
    "k_dec": ("DECIMAL(7,2)", "key"),
    "k_str": ("VARCHAR", "key"),
    "v_int": ("INTEGER", "num"),
    "v_long": ("BIGINT", "num"),
    "v_tiny": ("TINYINT", "num"),
    "v_dec": ("DECIMAL(7,2)", "num"),
    "v_dec18": ("DECIMAL(18,4)", "num"),
    "v_dec38": ("DECIMAL(38,6)", "num"),
    "v_date": ("DATE", "ord"),
    "v_ts": ("TIMESTAMP", "ord"),
    "v_str": ("VARCHAR", "ord"),
    "v_dbl": ("DOUBLE", "dbl"),
}
TABLES = ("t1", "t2", "t3")
# A fourth table of types Sluice's native aggregates do not group: floats and
# binaries (the native sort's keys), arrays, structs and maps (carried as row
# bytes through its exchanges and sorts), beside a unique id (a total order
# for rows whose other columns tie) and two keys of 21 values:
# name -> DuckDB type.
NESTED_TABLE = "n1"
NESTED_COLUMNS = {
    "id": "BIGINT",
    "k_int": "INTEGER",
    "k_str": "VARCHAR",
    "v_flt": "FLOAT",
    "v_bin": "BLOB",
    "v_arr": "INTEGER[]",
    "v_st": "STRUCT(a INTEGER, b VARCHAR)",
    "v_map": "MAP(VARCHAR, INTEGER)",
}
# The nested table's binaries, in hex.
BINARIES = ("", "00", "0000", "0001", "00ff", "01", "62", "6200", "6262", "7f", "80", "8000",
            "ff", "ff00", "ffff", "ffff00")
# Columns a nested query groups, joins, partitions or sorts by (maps are
# neither orderable nor comparable in Spark SQL).
NESTED_KEYS = ("k_int", "k_str", "v_flt", "v_bin", "v_arr", "v_st")
# Sluice's session takes every aggregate the engine computes, not only those
# its default (auto) finds faster than Spark: the test is of every native shape.
EVERY_NATIVE_SHAPE = ["spark.sluice.sqlAggregate=true"]
# --service: every shuffle of Sluice's session goes through the daemons, none
# kept on its executor for being small.
EVERY_SHUFFLE_PUSHED = ["spark.sluice.service.minPushBytes=0",
                        "spark.sluice.service.minShuffleBytes=0"]
KEYS = [c for c, (_, kind) in COLUMNS.items() if kind == "key"]
NUMS = [c for c, (_, kind) in COLUMNS.items() if kind == "num"]
# avg(v_long) takes v_long modulo this: the running sums of --rows values
# under it stay below 2^53 up to nine million rows (see Gen.agg).
LONG_AVG_MODULUS = 10**9
ORDS = [c for c, (_, kind) in COLUMNS.items() if kind == "ord"]
# Sort keys of a raw-row ORDER BY: every column type the native sort encodes,
# and expressions it computes into a column first.
SORT_EXPRS = ("v_int % 7", "length(v_str)", "-v_dbl", "CAST(v_dec AS DOUBLE)", "k_str || v_str",
              "v_dec38 * 2", "k_date + 3", "CAST(v_tiny AS SMALLINT) * 3")
# Grouping expressions (an aggregate's output then names the expression's
# alias, not a column of its input).
KEY_EXPRS = ("k_int % 7", "k_long DIV 1000", "upper(k_str)", "year(k_date)", "k_dec * 2",
             "NOT k_bool", "v_tiny % 3", "date_trunc('MONTH', k_ts)")
# The tables' data as written by generate(); a new version writes new files.
DATA_VERSION = 4


def generate(root, rows, seed):
    """Four tables of `rows` rows as Parquet under root (once per size and
    seed): few distinct keys per column (groups of many rows), a null in
    about one value in twelve of every column but the nested table's id."""
    done = root / "_SUCCESS"
    if done.exists():
        return root
    import duckdb

    root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SELECT setseed({(seed % 1000) / 1000})")
    for n, table in enumerate(TABLES):
        distinct = (7, 50, 400)[n]
        exprs = {
            "k_long": f"(random() * {distinct})::BIGINT * 1000003",
            "k_int": f"(random() * {distinct})::INTEGER - {distinct // 2}",
            "k_short": "(random() * 9)::SMALLINT",
            "k_bool": "random() < 0.5",
            "k_date": f"DATE '1998-01-01' + (random() * {distinct})::INTEGER",
            "k_ts": f"TIMESTAMP '2001-02-03 04:05:06' + to_seconds((random() * {distinct})::BIGINT * 3601)",
            "k_dec": f"((random() * {distinct})::INTEGER * 1.25)::DECIMAL(7,2)",
            # Digits after 's', after 'sé' (bytes above 0x7f) or alone: keys
            # that are prefixes of others and differ in multi-byte UTF-8.
            "k_str": "['s', 'sé', ''][1 + (random() * 2)::INTEGER] || "
                     f"((random() * {distinct})::INTEGER)::VARCHAR",
            "v_int": "(random() * 2000000 - 1000000)::INTEGER",
            "v_long": "(random() * 1e15)::BIGINT - 500000000000000",
            "v_tiny": "(random() * 200 - 100)::TINYINT",
            "v_dec": "(random() * 99999 - 49999)::DECIMAL(7,2)",
            "v_dec18": "(random() * 1e13)::DECIMAL(18,4)",
            "v_dec38": "(random() * 1e20 - 5e19)::DECIMAL(38,6)",
            "v_date": "DATE '1990-01-01' + (random() * 10000)::INTEGER",
            "v_ts": "TIMESTAMP '1990-01-01' + to_seconds((random() * 1e9)::BIGINT)",
            "v_str": "md5(random()::VARCHAR)",
            # Eighths of either sign (their sums are exact in any order), and the doubles
            # Spark treats specially: NaN (larger than any number, one group),
            # -0.0 (equal to 0.0 in groups, joins and sorts) and infinities.
            "v_dbl": "CASE WHEN random() < 0.03 THEN 'NaN'::DOUBLE "
                     "WHEN random() < 0.03 THEN -(0.0::DOUBLE) "
                     "WHEN random() < 0.02 THEN 'Infinity'::DOUBLE "
                     "WHEN random() < 0.02 THEN '-Infinity'::DOUBLE "
                     "ELSE ((random() * 1000)::INTEGER - 500) / 8.0 END",
        }
        cols = ", ".join(
            f"CASE WHEN random() < 0.08 THEN NULL ELSE {exprs[c]} END AS {c}" for c in COLUMNS)
        con.execute(f"CREATE TABLE {table} AS SELECT {cols} FROM range({rows})")
        con.execute(f"COPY {table} TO '{root / table}.parquet' (FORMAT parquet)")
    nested = {
        "k_int": "(random() * 20)::INTEGER",
        "k_str": "'s' || ((random() * 20)::INTEGER)::VARCHAR",
        # Eighths of either sign, and the floats Spark treats specially (as v_dbl above).
        "v_flt": "CASE WHEN random() < 0.04 THEN 'NaN'::FLOAT "
                 "WHEN random() < 0.04 THEN -(0.0::FLOAT) "
                 "WHEN random() < 0.03 THEN 'Infinity'::FLOAT "
                 "WHEN random() < 0.03 THEN '-Infinity'::FLOAT "
                 "ELSE (((random() * 200)::INTEGER - 100) / 8.0)::FLOAT END",
        # Binaries of zero to three bytes, zeros and bytes above 0x7f among
        # them, many a prefix of another.
        "v_bin": f"unhex([{', '.join(repr(h) for h in BINARIES)}]"
                 f"[1 + (random() * {len(BINARIES) - 1})::INTEGER])",
        # Arrays of zero to four small integers, some null.
        "v_arr": "list_transform(range((random() * 4)::INTEGER), "
                 "x -> CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 3)::INTEGER END)",
        "v_st": "{'a': CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 4)::INTEGER END, "
                "'b': 'x' || ((random() * 3)::INTEGER)::VARCHAR}",
        "v_map": "CASE WHEN random() < 0.2 THEN MAP {}::MAP(VARCHAR, INTEGER) "
                 "ELSE MAP {'k' || ((random() * 3)::INTEGER)::VARCHAR: "
                 "(random() * 100)::INTEGER} END",
    }
    cols = ", ".join(["range AS id"] + [
        f"CAST(CASE WHEN random() < 0.08 THEN NULL ELSE {nested[c]} END AS {t}) AS {c}"
        for c, t in NESTED_COLUMNS.items() if c != "id"])
    con.execute(f"CREATE TABLE {NESTED_TABLE} AS SELECT {cols} FROM range({rows})")
    con.execute(f"COPY {NESTED_TABLE} TO '{root / NESTED_TABLE}.parquet' (FORMAT parquet)")
    done.write_text("")
    return root


class Gen:
    """Query texts from one random stream."""

    def __init__(self, rng):
        self.r = rng

    def keys(self, lo=1, hi=4):
        return self.r.sample(KEYS, self.r.randint(lo, hi))

    def agg(self, alias, q=""):
        """One aggregate function over columns qualified by `q` ("x." say)."""
        r = self.r
        kind = r.choice(("count", "count_col", "distinct", "sum", "avg", "minmax", "minmax_ord",
                         "sum_expr", "dbl"))
        v = q + r.choice(NUMS)
        if kind == "count":
            e = "count(*)"
        elif kind == "count_col":
            e = f"count({q}{r.choice(list(COLUMNS))})"
        elif kind == "distinct":
            e = f"{r.choice(('count', 'sum'))}(DISTINCT {v})"
        elif kind == "sum":
            e = f"sum({v})"
        elif kind == "avg":
            # An integer average's sum: Spark adds doubles, in an order its
            # partitioning decides, so past 2^53 (v_long's running sums) its
            # own answer varies with the plan; Sluice's is the exact sum
            # rounded once (docs/spark.md). Below 2^53 both are exact.
            e = f"avg({v} % {LONG_AVG_MODULUS})" if v.endswith("v_long") else f"avg({v})"
        elif kind == "minmax":
            e = f"{r.choice(('min', 'max'))}({v})"
        elif kind == "minmax_ord":
            e = f"{r.choice(('min', 'max'))}({q}{r.choice(ORDS)})"
        elif kind == "sum_expr":
            w = q + r.choice(("v_int", "v_tiny", "v_dec"))
            e = f"sum({v} * 2)" if v.endswith("v_dec38") else f"sum({v} + {w})"
        else:
            e = f"{r.choice(('sum', 'avg', 'max'))}({q}v_dbl)"
        return f"{e} AS {alias}"

    def where(self):
        r = self.r
        if r.random() < 0.5:
            return ""
        c = r.choice(("v_int > 0", "k_bool", "v_dec IS NOT NULL", "k_int % 3 = 1",
                      "v_date > DATE '1995-01-01'", "k_str <> 's1'"))
        return f" WHERE {c}"

    def table(self):
        return self.r.choice(TABLES)

    def aggregate(self):
        keys = self.keys()
        group = list(keys)
        if self.r.random() < 0.3:
            e = self.r.choice(KEY_EXPRS)
            keys.append(f"{e} AS e0")
            group.append(e)
        aggs = [self.agg(f"a{i}") for i in range(self.r.randint(1, 4))]
        having = f" HAVING count(*) > {self.r.randint(1, 5)}" if self.r.random() < 0.2 else ""
        return (f"SELECT {', '.join(keys + aggs)} FROM {self.table()}{self.where()} "
                f"GROUP BY {', '.join(group)}{having}")

    def global_aggregate(self):
        aggs = [self.agg(f"a{i}") for i in range(self.r.randint(1, 3))]
        return f"SELECT {', '.join(aggs)} FROM {self.table()}{self.where()}"

    def grouping_sets(self):
        keys = self.keys(2, 3)
        aggs = [self.agg(f"a{i}") for i in range(self.r.randint(1, 3))]
        how = self.r.choice(("ROLLUP", "CUBE", "SETS"))
        if how == "SETS":
            sets = ", ".join(f"({k})" for k in keys) + ", ()"
            group = f"GROUPING SETS ({sets})"
        else:
            group = f"{how}({', '.join(keys)})"
        return (f"SELECT {', '.join(keys)}, grouping_id() AS g, {', '.join(aggs)} "
                f"FROM {self.table()}{self.where()} GROUP BY {group}")

    def window_over_aggregate(self):
        r = self.r
        keys = self.keys(2, 3)
        v = r.choice(("v_int", "v_dec", "v_long", "v_dec18"))
        part = keys[0]
        win = r.choice((
            f"sum(sum({v})) OVER (PARTITION BY {part}) AS w",
            f"avg(sum({v})) OVER (PARTITION BY {part}) AS w",
            f"rank() OVER (PARTITION BY {part} ORDER BY sum({v}) DESC, {', '.join(keys)}) AS w",
            f"sum(sum({v})) OVER (PARTITION BY {part} ORDER BY {', '.join(keys[1:])} "
            f"ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS w",
            f"count(*) OVER (PARTITION BY {part}) AS w",
        ))
        return (f"SELECT {', '.join(keys)}, sum({v}) AS s, {win} FROM {self.table()}{self.where()} "
                f"GROUP BY {', '.join(keys)}")

    def self_join(self):
        r = self.r
        keys = self.keys(1, 2)
        v = r.choice(NUMS[:5])
        on = " AND ".join(f"x.{k} = y.{k}" for k in keys)
        filt = r.choice(("", " WHERE x.s > y.s", " WHERE x.n >= y.n"))
        cte = (f"WITH a AS (SELECT {', '.join(keys)}, sum({v}) AS s, count(*) AS n "
               f"FROM {self.table()}{self.where()} GROUP BY {', '.join(keys)}) ")
        if r.random() < 0.5:
            return cte + f"SELECT x.*, y.s AS ys FROM a x JOIN a y ON {on}{filt}"
        on2 = " AND ".join(f"x.{k} = z.{k}" for k in keys)
        return cte + (f"SELECT x.*, y.s AS ys, z.n AS zn FROM a x JOIN a y ON {on} "
                      f"JOIN a z ON {on2}{filt}")

    def union_all(self):
        r = self.r
        keys = self.keys(1, 3)
        v = r.choice(NUMS)
        tag = "'x' AS src, " if r.random() < 0.5 else ""
        parts = [f"SELECT {tag}{', '.join(keys)}, {v} FROM {t}" for t in r.sample(TABLES, 2)]
        inner = " UNION ALL ".join(parts)
        group = (["src"] if tag else []) + keys
        agg = f"sum({v}) AS a0, count(*) AS n"
        return f"SELECT {', '.join(group)}, {agg} FROM ({inner}) u GROUP BY {', '.join(group)}"

    def union_of_aggregates(self):
        # Aggregates of two tables by the same keys, one filtered (so their
        # sizes differ), UNION ALL'd and aggregated again: from Spark 4.1 the
        # union keeps its children's partitioning and reads them one to one.
        r = self.r
        keys = self.keys(1, 2)
        v = r.choice(NUMS)
        a, b = r.sample(TABLES, 2)
        parts = [f"SELECT {', '.join(keys)}, sum({v}) AS s, count(*) AS n FROM {a} "
                 f"GROUP BY {', '.join(keys)}",
                 f"SELECT {', '.join(keys)}, sum({v}) AS s, count(*) AS n FROM {b} "
                 f"WHERE v_int % 10 = 0 GROUP BY {', '.join(keys)}"]
        return (f"SELECT {', '.join(keys)}, sum(s) AS a0, sum(n) AS n, count(*) AS c "
                f"FROM ({' UNION ALL '.join(parts)}) u GROUP BY {', '.join(keys)}")

    def join_aggregate(self):
        r = self.r
        k = r.choice(("k_int", "k_str", "k_date", "k_long", "k_dec"))
        g = r.choice([c for c in KEYS if c != k])
        a, b = r.sample(TABLES, 2)
        aggs = [self.agg(f"a{i}", "x.") for i in range(r.randint(1, 3))]
        # A tenth of b's rows: the keys have few distinct values, so the join
        # multiplies rows (up to 8 million from two tables of 20,000 unfiltered,
        # seconds per query that test nothing more).
        return (f"SELECT y.{g}, {', '.join(aggs)} FROM {a} x "
                f"JOIN (SELECT * FROM {b} WHERE v_int % 10 = 0) y ON x.{k} = y.{k} "
                f"GROUP BY y.{g}")

    def sort(self):
        """A global ORDER BY of raw rows: keys of every type in either
        direction with nulls either end, then every selected column, so the
        order is total and both answers must be the same list."""
        r = self.r
        picked = r.sample(list(COLUMNS) + list(SORT_EXPRS), r.randint(1, 3))
        order = [f"{c} {r.choice(('ASC', 'DESC'))} NULLS {r.choice(('FIRST', 'LAST'))}"
                 for c in picked]
        cols = list(dict.fromkeys([c for c in picked if c in COLUMNS]
                                  + r.sample(list(COLUMNS), 2) + ["v_int", "v_str"]))
        q = (f"SELECT {', '.join(cols)} FROM {self.table()}{self.where()} "
             f"ORDER BY {', '.join(order + cols)}")
        how = r.random()
        if how < 0.3:
            q += f" LIMIT {r.choice((1, 10, 1000))}"
        elif how < 0.4:
            q += f" LIMIT {r.choice((10, 5000))} OFFSET {r.choice((1, 100))}"
        return q

    def distinct(self):
        """Rows made distinct: SELECT DISTINCT (an aggregate with no
        functions), INTERSECT and EXCEPT (semi and anti joins), with and
        without ALL."""
        r = self.r
        keys = self.keys(1, 3)
        how = r.choice(("DISTINCT", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"))
        if how == "DISTINCT":
            return f"SELECT DISTINCT {', '.join(keys)} FROM {self.table()}{self.where()}"
        a, b = r.sample(TABLES, 2)
        return (f"SELECT {', '.join(keys)} FROM {a}{self.where()} {how} "
                f"SELECT {', '.join(keys)} FROM {b}{self.where()}")

    def semi_join(self):
        """An aggregate over rows filtered by another table's keys: IN and
        NOT IN (a null-aware anti join), EXISTS and NOT EXISTS."""
        r = self.r
        k = r.choice(("k_int", "k_str", "k_date", "k_long", "k_dec", "v_dbl"))
        keys = self.keys(1, 2)
        aggs = [self.agg(f"a{i}", "x.") for i in range(r.randint(1, 2))]
        a, b = r.sample(TABLES, 2)
        inner = f"SELECT {k} FROM {b} WHERE v_int % {r.choice((3, 10))} = 0"
        how = r.choice(("IN", "NOT IN", "EXISTS", "NOT EXISTS"))
        if how.endswith("IN"):
            cond = f"x.{k} {how} ({inner})"
        else:
            cond = f"{how} ({inner} AND {b}.{k} = x.{k})"
        return (f"SELECT {', '.join('x.' + c for c in keys)}, {', '.join(aggs)} FROM {a} x "
                f"WHERE {cond} GROUP BY {', '.join('x.' + c for c in keys)}")

    def window_rows(self):
        """Windows over raw rows, each deterministic under ties: ranks, and
        sums over a RANGE frame (peers together)."""
        r = self.r
        part = self.keys(1, 2)
        o = r.choice(("v_int", "v_dec", "v_dbl", "v_date", "v_str", "k_ts"))
        over = (f"PARTITION BY {', '.join(part)} ORDER BY {o} "
                f"{r.choice(('ASC', 'DESC'))} NULLS {r.choice(('FIRST', 'LAST'))}")
        w = r.choice((f"rank() OVER ({over})", f"dense_rank() OVER ({over})",
                      f"percent_rank() OVER ({over})", f"sum(v_long) OVER ({over})",
                      f"count(*) OVER (PARTITION BY {', '.join(part)})",
                      f"max(v_dec18) OVER (PARTITION BY {', '.join(part)})"))
        cols = ", ".join(dict.fromkeys(part + [o, "v_str"]))
        return f"SELECT {cols}, {w} AS w FROM {self.table()}{self.where()}"

    def repartitioned(self):
        """An aggregate over rows an explicit REPARTITION, REBALANCE or
        DISTRIBUTE BY moved first: round-robin and hash exchanges of raw
        rows, the aggregate's own exchange on top; or such a CTE, or a
        sorted one, read twice."""
        r = self.r
        keys = self.keys(1, 3)
        aggs = [self.agg(f"a{i}") for i in range(r.randint(1, 2))]
        n = r.choice((1, 5, 33))
        inner = r.choice((
            f"SELECT /*+ REPARTITION({n}) */ * FROM {self.table()}",
            f"SELECT /*+ REPARTITION({n}, {keys[-1]}) */ * FROM {self.table()}",
            f"SELECT /*+ REBALANCE */ * FROM {self.table()}",
            f"SELECT * FROM {self.table()} DISTRIBUTE BY {r.choice(KEYS)} SORT BY v_int",
        ))
        if r.random() < 0.3:
            # One exchange read twice in a query (equal native nodes share a shuffle, an
            # exchange of Spark's above them is reused): a repartitioned CTE under two equal
            # aggregates, or a sorted CTE's rows twice.
            if r.random() < 0.5:
                half = f"SELECT {', '.join(keys + aggs)} FROM p GROUP BY {', '.join(keys)}"
                return f"WITH p AS ({inner}) {half} UNION ALL {half}"
            cols = ", ".join(dict.fromkeys(keys + ["v_int", "v_str"]))
            return (f"WITH p AS (SELECT {cols} FROM {self.table()}{self.where()} "
                    f"ORDER BY {cols}) SELECT * FROM p UNION ALL SELECT * FROM p")
        return (f"SELECT {', '.join(keys + aggs)} FROM ({inner}) p{self.where()} "
                f"GROUP BY {', '.join(keys)}")

    def double_keys(self):
        """Groups and joins by a double with NaN, -0.0 and infinities: Spark
        makes -0.0 equal to 0.0 and every NaN one value before it groups
        or joins."""
        r = self.r
        keys = ["v_dbl"] + self.keys(0, 1)
        aggs = [self.agg(f"a{i}") for i in range(r.randint(1, 2))]
        q = (f"SELECT {', '.join(keys + aggs)} FROM {self.table()}{self.where()} "
             f"GROUP BY {', '.join(keys)}")
        if r.random() < 0.5:
            return q
        a, b = r.sample(TABLES, 2)
        return (f"WITH d AS (SELECT v_dbl, count(*) AS n FROM {b} GROUP BY v_dbl) "
                f"SELECT x.k_bool, d.v_dbl, sum(d.n) AS n, count(*) AS c FROM {a} x "
                f"JOIN d ON x.v_dbl = d.v_dbl GROUP BY x.k_bool, d.v_dbl")

    def nested(self):
        """Queries of the nested table: floats, binaries, arrays, structs and
        maps carried through exchanges and sorts, and all but maps grouped,
        joined, partitioned and sorted by (Sluice's nodes hand the shapes they do not
        take to Spark's; the exchanges under them are still Sluice's). Returns the
        text, whether its rows' order is the answer, and whether every output
        column can be ordered by (no map among them)."""
        r = self.r
        t = NESTED_TABLE
        key = r.choice(NESTED_KEYS)
        where = r.choice(("", "", " WHERE id % 3 <> 0", " WHERE v_flt > 2",
                          " WHERE size(v_arr) > 1", " WHERE v_st.a IS NOT NULL"))
        carried = "v_flt, v_bin, v_arr, v_st, v_map"
        aggs = ", ".join(r.sample((
            "count(*) AS n", "max(v_flt) AS a_flt", "min(v_bin) AS a_bin", "max(v_arr) AS a_arr",
            "min(v_st) AS a_st", "sum(v_flt) AS s_flt", "count(DISTINCT v_arr) AS d_arr",
            "sum(size(v_map)) AS s_map", "max(v_map['k1']) AS m_k1",
            "sort_array(collect_list(v_st.a)) AS l_a", "sort_array(collect_set(v_bin)) AS l_bin",
            "sum(id) AS s_id"), r.randint(1, 4)))
        how = r.choice(("sort", "sort", "group", "group", "group_nested", "join", "window",
                        "repartition", "distinct"))
        if how == "sort":
            keys = r.sample(NESTED_KEYS, r.randint(1, 3))
            order = [f"{k} {r.choice(('ASC', 'DESC'))} NULLS {r.choice(('FIRST', 'LAST'))}"
                     for k in keys]
            q = f"SELECT id, k_int, {carried} FROM {t}{where} ORDER BY {', '.join(order)}, id"
            q += f" LIMIT {r.choice((1, 10, 1000))}" if r.random() < 0.3 else ""
            return q, True, False
        if how == "group":
            keys = r.sample(("k_int", "k_str"), r.randint(1, 2))
            return (f"SELECT {', '.join(keys)}, {aggs} FROM {t}{where} GROUP BY {', '.join(keys)}",
                    False, True)
        if how == "group_nested":
            keys = list(dict.fromkeys([key, r.choice(NESTED_KEYS)]))[:r.randint(1, 2)]
            return (f"SELECT {', '.join(keys)}, {aggs} FROM {t}{where} GROUP BY {', '.join(keys)}",
                    False, True)
        if how == "join":
            return (f"SELECT x.k_int, count(*) AS n, sum(y.id) AS s, max(y.v_map['k2']) AS m "
                    f"FROM {t} x JOIN (SELECT * FROM {t} WHERE id % 10 = 0) y "
                    f"ON x.{key} = y.{key} GROUP BY x.k_int", False, True)
        if how == "window":
            w = r.choice((f"rank() OVER (PARTITION BY {key} ORDER BY v_flt, id)",
                          f"count(*) OVER (PARTITION BY {key})",
                          f"first(v_map) OVER (PARTITION BY {key} ORDER BY id)",
                          f"max(v_arr) OVER (PARTITION BY k_int ORDER BY {key}, id)"))
            return f"SELECT id, {carried}, {w} AS w FROM {t}{where}", False, False
        if how == "repartition":
            n = r.choice((1, 5, 33))
            inner = r.choice((f"SELECT /*+ REPARTITION({n}) */ * FROM {t}",
                              f"SELECT /*+ REPARTITION({n}, {key}) */ * FROM {t}",
                              f"SELECT /*+ REPARTITION_BY_RANGE({n}, {key}) */ * FROM {t}"))
            return f"SELECT k_int, {aggs} FROM ({inner}) p{where} GROUP BY k_int", False, True
        cols = ", ".join(r.sample(NESTED_KEYS, r.randint(1, 3)))
        return r.choice((f"SELECT DISTINCT {cols} FROM {t}{where}",
                         f"SELECT {cols} FROM {t}{where} EXCEPT SELECT {cols} FROM {t} "
                         f"WHERE id % 4 = 0")), False, True

    def query(self):
        """One query: its shape, its text, and whether its rows' order is
        the answer."""
        r = self.r
        shape = r.choice(("aggregate", "aggregate", "global_aggregate", "grouping_sets",
                          "window_over_aggregate", "self_join", "union_all", "union_of_aggregates",
                          "join_aggregate", "sort", "distinct", "semi_join", "window_rows",
                          "repartitioned", "double_keys", "nested"))
        if shape == "nested":
            q, ordered, orderable = self.nested()
        else:
            q = getattr(self, shape)()
            ordered, orderable = shape == "sort", shape != "sort" and not q.startswith("WITH")
        if orderable and r.random() < 0.3:
            # ORDER BY every output column: a LIMIT then keeps the same rows under any plan.
            q = f"SELECT * FROM ({q}) o ORDER BY ALL"
            q += f" LIMIT {r.choice((1, 10, 100))}" if r.random() < 0.7 else ""
            ordered = True
        return shape, q, ordered


def queries(seed, count):
    g = Gen(random.Random(seed))
    out = []
    for i in range(count):
        shape, q, ordered = g.query()
        partitions = g.r.choice((1, 7, 16, 200))
        if partitions == 200 and i % 3 == 0:
            # More than 256: the engine's partition ids then take two bytes
            # (a coalesced read of partitions 255 and 256 once came out of
            # order under a native sort).
            partitions = 600
        out.append({"id": i, "shape": shape, "sql": q, "partitions": partitions,
                    "ordered": ordered})
    return out


def error_class(text):
    """A failure's error class (`[BINARY_ARITHMETIC_OVERFLOW] ...`), else its
    text with numbers (object ids) masked: two managers failing a query fail
    it alike, or differ."""
    m = re.match(r"\s*(?:\w+\.)*\w*:?\s*\[([A-Z_.]+)\]", text)
    return m.group(1) if m else re.sub(r"\d+", "N", text)


def missing_inputs(plan):
    """The nodes of an executed plan (adaptive execution's final plan, through
    its query stages and subqueries) that read attributes
    neither their children give nor they make themselves (Spark's
    `QueryPlan.missingInput`, which Spark's own suites check), as text."""
    found, todo = [], [plan]
    while todo:
        p = todo.pop()
        kind = p.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            todo.append(p.executedPlan())
            continue
        if kind.endswith("QueryStageExec"):
            todo.append(p.plan())
            continue
        if not p.missingInput().isEmpty():
            found.append(f"{p.nodeName()} reads {p.missingInput().toString()}")
        for seq in (p.children(), p.subqueries()):
            it = seq.iterator()
            while it.hasNext():
                todo.append(it.next())
    return found


class Worker:
    """One manager's session answering the parent's queries (one JSON line
    each on stdin, one back)."""

    def __init__(self, a, manager):
        self.spark = bench.session(
            manager, a.cores, a.tmp / manager, EVERY_NATIVE_SHAPE + a.sluice_conf,
            app="sluice-sqldiff", master=a.master,
            settings={"spark.driver.memory": a.driver_memory,
                      "spark.sql.adaptive.enabled": "true",
                      "spark.ui.enabled": "false",
                      **dict(kv.partition("=")[::2] for kv in a.conf)})
        for t in TABLES + (NESTED_TABLE,):
            self.spark.read.parquet(str(a.data / f"{t}.parquet")).createOrReplaceTempView(t)

    def run(self, cmd):
        self.spark.conf.set("spark.sql.shuffle.partitions", str(cmd["partitions"]))
        t = time.perf_counter()
        df = self.spark.sql(cmd["sql"])
        try:
            rows = df.collect()
        except Exception as e:  # noqa: BLE001  (the error is the answer)
            return {"error": str(e).strip().split("\n")[0][:300]}
        seconds = time.perf_counter() - t
        executed = df._jdf.queryExecution().executedPlan()
        plan = executed.toString().split("== Initial Plan ==")[0]
        answer = ([repr(tuple(value(v) for v in r)) for r in rows] if cmd.get("ordered")
                  else canonical(rows))
        try:
            missing = missing_inputs(executed)
        except Exception as e:  # noqa: BLE001  (a plan that cannot be walked is reported)
            missing = [f"the plan could not be walked: {str(e).strip().splitlines()[0][:200]}"]
        return {"answer": answer, "native": plan.count("Sluice"), "seconds": seconds,
                "missing": missing}

    def serve(self, out):
        try:
            for line in sys.stdin:
                cmd = json.loads(line)
                if cmd.get("op") == "stop":
                    break
                if cmd.get("op") == "conf":  # the session's values of these settings
                    answer = {k: self.spark.conf.get(k, None) for k in cmd["keys"]}
                else:
                    answer = self.run(cmd)
                print(json.dumps(answer), file=out, flush=True)
        finally:
            self.spark.stop()


def start_worker(a, manager):
    import subprocess

    args = [sys.executable, __file__, "--manager", manager, "--rows", str(a.rows),
            "--seed", str(a.seed), "--cores", str(a.cores), "--tmp", str(a.tmp),
            "--driver-memory", a.driver_memory]
    if a.master:
        args += ["--master", a.master]
    for kv in a.conf:
        args += ["--conf", kv]
    for kv in a.sluice_conf:
        args += ["--sluice-conf", kv]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rows", type=int, default=20000, help="rows of each table")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/sluice-sqldiff"))
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for both managers' sessions (repeatable): off-heap "
                         "memory, a small memory, another setting the rules were not tuned for")
    ap.add_argument("--sluice-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for Sluice's session only (repeatable)")
    ap.add_argument("--service", action="store_true",
                    help="Sluice's session in service mode against two daemons on loopback, "
                         "every shuffle pushed to them")
    ap.add_argument("--daemon-memory", default="1g",
                    help="--service: each daemon's memory budget (--memory)")
    ap.add_argument("--master", help="both managers' sessions on this master instead of "
                    "local[--cores], e.g. local-cluster[2,1,1024]: executors in JVMs of their "
                    "own, so the reads cross processes and the plans are shipped to them")
    ap.add_argument("--show", action="store_true", help="print the queries and stop")
    ap.add_argument("--only", metavar="ID,ID", help="run only these of the seed's queries "
                    "(the ids a difference is printed with)")
    ap.add_argument("--shapes", metavar="SHAPE,SHAPE", help="run only the seed's queries of "
                    "these shapes (nested, sort, ...: the names the summary prints)")
    ap.add_argument("--manager", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.data = a.tmp / f"data-v{DATA_VERSION}-{a.rows}-{a.seed}"
    a.managers = ["sort", "sluice"]
    if a.manager:
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        Worker(a, a.manager).serve(out)
        return
    qs = queries(a.seed, a.queries)
    if a.only:
        wanted = {int(i) for i in a.only.split(",")}
        qs = [q for q in qs if q["id"] in wanted]
    if a.shapes:
        qs = [q for q in qs if q["shape"] in a.shapes.split(",")]
    if a.show:
        for q in qs:
            print(f"{q['id']:4} p={q['partitions']:<4} {q['shape']:22} {q['sql']}")
        return
    generate(a.data, a.rows, a.seed)
    with contextlib.ExitStack() as stack:
        if a.service:
            running = stack.enter_context(daemons.service_daemons(a.tmp / "service",
                                                                       memory=a.daemon_memory))
            a.sluice_conf = running.conf + EVERY_SHUFFLE_PUSHED + a.sluice_conf
            before = running.snapshot()
        differ = compare(a, qs)
        if a.service:
            did = daemons.since(before, running.snapshot())
            print(f"the daemons: {did['commits']} map outputs committed, {did['reads']} reads "
                  f"served, {did['reduced_reads']} of them reduced at the daemon, peak "
                  f"{did['peak_bytes'] / 2**20:.1f} MiB held")
            if did["commits"] == 0:
                sys.exit("--service: the daemons committed no map output; the service was not used")
    sys.exit(1 if differ else 0)


def differing(ref, mine, most=8):
    """What two managers' results for one query do not share: the error, or
    the rows of each answer that are not in the other's (as multisets), at
    most `most` of each."""
    if "error" in ref or "error" in mine:
        return (f"  sort: {ref.get('error', 'an answer')}\n"
                f"  sluice: {mine.get('error', 'an answer')}")
    if ref["answer"] == mine["answer"]:
        return "  the same answer, but Sluice's plan has nodes with missing inputs:\n" + "\n".join(
            f"    {m}" for m in mine["missing"])
    only_ref = collections.Counter(ref["answer"]) - collections.Counter(mine["answer"])
    only_mine = collections.Counter(mine["answer"]) - collections.Counter(ref["answer"])
    if not only_ref and not only_mine:
        at = next(i for i, (x, y) in enumerate(zip(ref["answer"], mine["answer"])) if x != y)
        return (f"  the same rows in another order; row {at}:\n    sort:   {ref['answer'][at]}\n"
                f"    sluice: {mine['answer'][at]}")
    lines = []
    for m, got, only in (("sort", ref, only_ref), ("sluice", mine, only_mine)):
        rows = sorted(only.elements())
        lines.append(f"  only under {m} ({len(rows)} of its {len(got['answer'])} rows):")
        lines += [f"    {r}" for r in rows[:most]]
    return "\n".join(lines)


def compare(a, qs):
    """Runs every query under both managers; prints each difference and the
    summary; returns the differences."""
    t = time.perf_counter()
    differ, native, errors = [], 0, 0
    shapes = collections.defaultdict(lambda: [0, 0])  # shape -> [queries, on native nodes]
    seconds = {m: 0.0 for m in a.managers}
    with bench.worker_set(a, 0, start_worker) as (_, workers):
        if a.conf:
            keys = [kv.partition("=")[0] for kv in a.conf]
            for m, values in bench.ask_all(workers, op="conf", keys=keys).items():
                print(f"{m}'s session: " + ", ".join(f"{k}={v}" for k, v in values.items()))
        for q in qs:
            got = bench.ask_all(workers, **q)
            for m in a.managers:
                seconds[m] += got[m].get("seconds", 0.0)
            if q["id"] % 50 == 49:
                print(f"  {q['id'] + 1} queries, {len(differ)} different so far", flush=True)
            ref, mine = got["sort"], got["sluice"]
            native += mine.get("native", 0) > 0
            shapes[q["shape"]][0] += 1
            shapes[q["shape"]][1] += mine.get("native", 0) > 0
            if "error" in ref or "error" in mine:
                errors += 1
                if ("error" in ref) != ("error" in mine) or (
                        error_class(ref["error"]) != error_class(mine["error"])):
                    differ.append((q, ref, mine))
                else:
                    print(f"FAILED UNDER BOTH: query {q['id']} ({q['shape']}, "
                          f"{q['partitions']} partitions): {q['sql']}\n  sort: {ref['error']}\n"
                          f"  sluice: {mine['error']}", flush=True)
            elif ref["answer"] != mine["answer"] or (mine["missing"] and not ref["missing"]):
                differ.append((q, ref, mine))
    for q, ref, mine in differ:
        same = ref.get("answer", 0) == mine.get("answer", 1)
        what = "MISSING INPUTS" if same else "DIFFERENT ANSWER"
        print(f"{what}: query {q['id']} ({q['shape']}, {q['partitions']} partitions): "
              f"{q['sql']}\n" + differing(ref, mine), flush=True)
    print(f"{len(qs)} queries (seed {a.seed}, {a.rows} rows a table): {native} ran native nodes "
          f"under Sluice, {errors} failed under a manager, {len(differ)} different answers, "
          f"{time.perf_counter() - t:.0f} s (queries: sort {seconds['sort']:.0f} s, "
          f"Sluice {seconds['sluice']:.0f} s)")
    print("on native nodes, by shape: " + ", ".join(
        f"{shape} {n[1]}/{n[0]}" for shape, n in sorted(shapes.items())))
    return differ


if __name__ == "__main__":
    main()
