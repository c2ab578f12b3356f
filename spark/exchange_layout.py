"""bench/exchange_layout: what a columnar layout would save against the row
layout Spark SQL's exchanges use today, measured on TPC-H's own rows.

Spark SQL shuffles `UnsafeRow`s: per row a 4-byte length (the row
serializer's frame), a null bitset of 8 bytes per 64 columns, an 8-byte slot
per column (an int or a date still takes 8), and a variable-length region
where strings and decimals of more than 18 digits live, each rounded up to 8
bytes (such a decimal always takes 16). Sluice writes exactly these bytes
into its blocks and compresses each block with Spark's codec (lz4 by
default). A columnar batch holds the same rows as one array per column at
the column's own width (int and date 4 bytes, long and decimal(15,2) 8, a
decimal(25,2) 16, strings as 4-byte offsets plus their bytes), each column
compressed on its own.

The rows: for each of several exchanges of the 22 queries at --sf (the
columns Spark's final plan shuffles there, filters applied as the plan
applies them before the exchange), DuckDB computes the exchange's input
from the benchmark's Parquet tables (spark/tpch.py writes them). Batches
hold the rows one map task would write to one partition
(--rows-per-batch, default from --partitions and --map-tasks); both
layouts are cut at the same rows. Per exchange it prints bytes raw and
compressed (lz4 block, zstd level 1) for both layouts, and the codecs'
time per layout (the compression itself, in C, timed the same way for
both). It measures only: the row path stays what Spark SQL and Sluice
run."""

import argparse
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# Spark SQL types of the shuffled columns, by the width a columnar layout
# gives them, and what each takes in an UnsafeRow's variable-length region.
WIDTH = {"long": 8, "int": 4, "date": 4, "dec15": 8, "dec25": 16, "bool": 1}

# (name, DuckDB query over the Parquet views, Spark types of its columns).
# The shapes are those of the exchanges in the final adaptive plans at 200
# partitions (sort shuffle, broadcast joins under 10 MB, sf 1); sums of
# decimal(15,2) in a partial aggregate are decimal(25,2) and carry an
# is-empty flag.
EXCHANGES = [
    ("q03 lineitem by orderkey",
     "SELECT l_orderkey, l_extendedprice, l_discount FROM lineitem WHERE l_shipdate > DATE '1995-03-15'",
     ["long", "dec15", "dec15"]),
    ("q03 orders by orderkey",
     "SELECT o_orderkey, o_orderdate, o_shippriority FROM orders JOIN customer ON c_custkey = o_custkey"
     " WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15'",
     ["long", "date", "int"]),
    ("q09 lineitem by orderkey",
     "SELECT l_orderkey, l_suppkey, l_quantity, l_extendedprice, l_discount, ps_supplycost"
     " FROM lineitem JOIN part ON p_partkey = l_partkey JOIN partsupp ON ps_partkey = l_partkey"
     " AND ps_suppkey = l_suppkey WHERE p_name LIKE '%green%'",
     ["long", "long", "dec15", "dec15", "dec15", "dec15"]),
    ("q12 lineitem by orderkey",
     "SELECT l_orderkey, l_shipmode FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP')"
     " AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate"
     " AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'",
     ["long", "string"]),
    ("q13 orders by custkey",
     "SELECT o_orderkey, o_custkey FROM orders WHERE o_comment NOT LIKE '%special%requests%'",
     ["long", "long"]),
    ("q18 partial sum by orderkey",
     "SELECT l_orderkey, CAST(sum(l_quantity) AS DECIMAL(25,2)), false FROM lineitem GROUP BY ALL",
     ["long", "dec25", "bool"]),
    ("q21 lineitem by orderkey",
     "SELECT l_orderkey, l_suppkey FROM lineitem WHERE l_receiptdate > l_commitdate",
     ["long", "long"]),
]


def columns(con, sql, types):
    """The exchange's input as one numpy array per column, in Spark's representation
    (decimals as unscaled integers, dates as days, strings as lists of bytes)."""
    rel = con.sql(sql)
    names = rel.columns
    proj = []
    for n, t in zip(names, types):
        if t in ("dec15", "dec25"):
            proj.append(f'CAST("{n}" * 100 AS BIGINT)')
        elif t == "date":
            proj.append(f"CAST(\"{n}\" - DATE '1970-01-01' AS INTEGER)")
        else:
            proj.append(f'"{n}"')
    data = con.sql(f"SELECT {', '.join(proj)} FROM ({sql})").fetchnumpy()
    out = []
    for (_, arr), t in zip(data.items(), types):
        arr = np.asarray(arr)
        if t == "string":
            out.append([s.encode() for s in arr.tolist()])
        elif t == "bool":
            out.append(arr.astype(np.uint8))
        else:
            out.append(arr.astype(np.int32 if WIDTH[t] == 4 else np.int64))
    return out


def row_bytes(cols, types, lo, hi):
    """UnsafeRowSerializer's bytes of rows [lo, hi): length, bitset, slots, variable region."""
    n = hi - lo
    fields = len(types)
    bitset = 8 * ((fields + 63) // 64)
    fixed = bitset + 8 * fields
    var = 0
    for c, t in zip(cols, types):
        if t == "dec25":
            var += 16
        elif t == "string":
            longest = max((len(s) for s in c[lo:hi]), default=0)
            if longest > 8:
                raise SystemExit("strings over 8 bytes are not modelled")
            var += 8
    size = fixed + var
    buf = np.zeros((n, 4 + size), dtype=np.uint8)
    buf[:, :4] = np.frombuffer(np.int32(size).tobytes(), dtype=np.uint8)
    at = 4 + bitset
    tail = 4 + fixed
    for c, t in zip(cols, types):
        slot = buf[:, at:at + 8]
        if t == "string":
            strs = c[lo:hi]
            lens = np.array([len(s) for s in strs], dtype=np.int64)
            slot[:] = ((np.int64(tail - 4) << 32) | lens).view(np.uint8).reshape(n, 8)
            padded = np.frombuffer(b"".join(s.ljust(8, b"\0") for s in strs), dtype=np.uint8)
            buf[:, tail:tail + 8] = padded.reshape(n, 8)
            tail += 8
        elif t == "dec25":
            v = c[lo:hi]
            # BigInteger.toByteArray: minimal big-endian two's complement, at the region's start.
            nbytes = np.full(n, 8, dtype=np.int64)
            for k in range(7, 0, -1):
                nbytes[(v >= -(1 << (8 * k - 1))) & (v < (1 << (8 * k - 1)))] = k
            slot[:] = ((np.int64(tail - 4) << 32) | nbytes).view(np.uint8).reshape(n, 8)
            be = v.astype(">i8").view(np.uint8).reshape(n, 8)
            for k in range(1, 9):
                rows = nbytes == k
                buf[rows, tail:tail + k] = be[rows, 8 - k:]
            tail += 16
        else:
            slot[:, :WIDTH[t]] = c[lo:hi].view(np.uint8).reshape(n, WIDTH[t])
        at += 8
    return buf.tobytes()


def column_bytes(cols, types, lo, hi):
    """The same rows as one buffer per column at the column's width."""
    out = []
    for c, t in zip(cols, types):
        if t == "string":
            strs = c[lo:hi]
            offsets = np.cumsum([0] + [len(s) for s in strs], dtype=np.int64).astype(np.int32)
            out.append(offsets.tobytes() + b"".join(strs))
        elif t == "dec25":
            # 16 bytes: the unscaled value sign-extended.
            v = c[lo:hi]
            wide = np.empty((hi - lo, 2), dtype=np.int64)
            wide[:, 0] = v
            wide[:, 1] = v >> 63
            out.append(wide.tobytes())
        else:
            out.append(c[lo:hi].tobytes())
    return out


def codecs():
    import lz4.block
    import zstandard

    z = zstandard.ZstdCompressor(level=1)
    return {
        "lz4": lambda b: lz4.block.compress(b, store_size=False),
        "zstd1": z.compress,
    }


def measure(name, cols, types, rows_per_batch, codec):
    total = len(cols[0])
    raw = {"row": 0, "col": 0}
    packed = {(layout, c): 0 for layout in raw for c in codec}
    secs = {(layout, c): 0.0 for layout in raw for c in codec}
    for lo in range(0, total, rows_per_batch):
        hi = min(total, lo + rows_per_batch)
        pieces = {"row": [row_bytes(cols, types, lo, hi)], "col": column_bytes(cols, types, lo, hi)}
        for layout, bufs in pieces.items():
            raw[layout] += sum(len(b) for b in bufs)
            for c, f in codec.items():
                t = time.perf_counter()
                packed[(layout, c)] += sum(len(f(b)) for b in bufs)
                secs[(layout, c)] += time.perf_counter() - t
    mb = 1e6
    print(f"{name:<28} {total:>9} {raw['row'] / mb:>8.1f} {raw['col'] / mb:>8.1f}"
          + "".join(f" {packed[('row', c)] / mb:>8.1f} {packed[('col', c)] / mb:>8.1f}"
                    f" {packed[('row', c)] / max(1, packed[('col', c)]):>5.2f}x" for c in codec)
          + f" {secs[('row', 'lz4')] * 1e3:>7.0f} {secs[('col', 'lz4')] * 1e3:>7.0f}", flush=True)
    return raw, packed, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/sluice-tpch"))
    ap.add_argument("--partitions", type=int, default=200, help="shuffle partitions")
    ap.add_argument("--map-tasks", type=int, default=8, help="map tasks an exchange's input is split into")
    ap.add_argument("--rows-per-batch", type=int, default=0,
                    help="rows per batch (default: an exchange's rows / partitions / map tasks)")
    a = ap.parse_args()

    import duckdb
    import tpch

    root = tpch.generate(a.sf, a.tmp / f"sf{a.sf:g}")
    con = duckdb.connect()
    for table in tpch.TABLES:
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM '{root / table}.parquet'")
    codec = codecs()
    print(f"TPC-H sf {a.sf:g}: exchange inputs, MB; batches of one map task's rows for one of "
          f"{a.partitions} partitions ({a.map_tasks} map tasks); lz4 ms: compression time")
    print(f"{'exchange':<28} {'rows':>9} {'row raw':>8} {'col raw':>8}"
          + "".join(f" {'row ' + c:>8} {'col ' + c:>8} {'saves':>6}" for c in codec)
          + f" {'row ms':>7} {'col ms':>7}")
    raws, packs, times = {}, {}, {}
    for name, sql, types in EXCHANGES:
        cols = columns(con, sql, types)
        n = len(cols[0])
        per_batch = a.rows_per_batch or max(1, n // (a.partitions * a.map_tasks))
        raw, packed, secs = measure(name, cols, types, per_batch, codec)
        for total, d in ((raws, raw), (packs, packed), (times, secs)):
            for k, v in d.items():
                total[k] = total.get(k, 0) + v
    print(f"{'all':<28} {'':>9} {raws['row'] / 1e6:>8.1f} {raws['col'] / 1e6:>8.1f}"
          + "".join(f" {packs[('row', c)] / 1e6:>8.1f} {packs[('col', c)] / 1e6:>8.1f}"
                    f" {packs[('row', c)] / packs[('col', c)]:>5.2f}x" for c in codec)
          + f" {times[('row', 'lz4')] * 1e3:>7.0f} {times[('col', 'lz4')] * 1e3:>7.0f}")


if __name__ == "__main__":
    main()
