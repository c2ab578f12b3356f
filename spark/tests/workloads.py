"""The jobs the Spark tests and the Spark benchmark run, each under Spark's
sort shuffle and under Sluice. Every job returns a value that does not depend
on the order in which reduce tasks fetched map outputs (ties and the order
inside a partition are normalised), so the two shuffle managers' results can
be compared record for record."""

import random

WORDS = [f"w{i:03d}" for i in range(1000)]  # HiBench's 1000-word list


def text_lines(sc, lines, parts, seed=7):
    """HiBench random text: lines of 5 to 9 words from the list."""
    def gen(i, _):
        rnd = random.Random(seed * 1_000_003 + i)
        per = lines // parts
        for _ in range(per):
            yield " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(5, 9)))
    return sc.parallelize(range(parts), parts).mapPartitionsWithIndex(gen)


def teragen(sc, records, parts, seed=11):
    """TeraGen-style records: a 10-byte random key and a 90-byte value."""
    def gen(i, _):
        rnd = random.Random(seed * 1_000_003 + i)
        per = records // parts
        for j in range(per):
            key = bytes(rnd.getrandbits(8) for _ in range(10))
            yield (key, b"%010d" % (i * per + j) + b"x" * 80)
    return sc.parallelize(range(parts), parts).mapPartitionsWithIndex(gen)


def pairs(sc, n, keys, parts):
    return sc.parallelize(range(n), parts).map(lambda x: (x % keys, x))


def per_partition_sorted(rdd):
    return [sorted(p) for p in rdd.glom().collect()]


def hibench_sort(spark, scale=1):
    lines = text_lines(spark.sparkContext, 4000 * scale, 4)
    out = lines.map(lambda l: (l, None)).sortByKey(numPartitions=6).keys().collect()
    return out  # a total order on whole lines: ties are identical lines


def terasort(spark, scale=1):
    recs = teragen(spark.sparkContext, 20000 * scale, 4)
    out = recs.sortByKey(numPartitions=6).collect()
    keys = [k for k, _ in out]
    return keys, sorted(out)


def wordcount(spark, scale=1):
    lines = text_lines(spark.sparkContext, 4000 * scale, 4)
    counts = lines.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b, 5)
    return sorted(counts.collect())


def repartition(spark, scale=1):
    rdd = spark.sparkContext.parallelize(range(30000 * scale), 4)
    return per_partition_sorted(rdd.repartition(7))


def partition_by_key(spark, scale=1):
    return per_partition_sorted(pairs(spark.sparkContext, 20000 * scale, 500, 4).partitionBy(6))


def reduce_by_key(spark, scale=1):
    rbk = pairs(spark.sparkContext, 50000 * scale, 1000, 4).reduceByKey(lambda a, b: a + b, 8)
    return sorted(rbk.collect())


def sort_by_key(spark, scale=1):
    rdd = pairs(spark.sparkContext, 20000 * scale, 3000, 4).map(lambda kv: (-kv[0], kv[1]))
    out = rdd.sortByKey(ascending=False, numPartitions=5).collect()
    return [k for k, _ in out], sorted(out)


def distinct(spark, scale=1):
    rdd = spark.sparkContext.parallelize([x % 777 for x in range(20000 * scale)], 4)
    return sorted(rdd.distinct(6).collect())


def join(spark, scale=1):
    sc = spark.sparkContext
    left = pairs(sc, 5000 * scale, 700, 3)
    right = sc.parallelize([(k, f"r{k}") for k in range(0, 1000, 3)], 2)
    return sorted(left.join(right, 5).collect())


def sql_group_by(spark, scale=1):
    df = spark.range(0, 100000 * scale, numPartitions=4).selectExpr(
        "id % 113 as k", "id as v", "cast(id as string) as s")
    rows = df.groupBy("k").agg({"v": "sum", "s": "max", "*": "count"}).collect()
    return sorted(tuple(r) for r in rows)


def sql_aggregate(spark, scale=1):
    """Spark SQL aggregates by one column, which Sluice runs in the engine:
    count by a string (with a null and an empty group), an ANSI sum of longs
    by an int key with nulls, min and max of ints by a long key, a sum of
    ints, a count of a non-null column, an empty input, a grouping
    expression, aggregates of expressions, two aggregates by
    the same key joined (the join counts on their hash partitioning, with
    no exchange of its own), and a legacy (non-ANSI) sum that wraps on
    overflow. Returns each query's rows as a multiset."""
    from pyspark.sql import functions as F

    n = 40000 * scale
    df = spark.range(0, n, numPartitions=4).selectExpr(
        "id",
        "case when id % 29 = 0 then null when id % 37 = 0 then '' "
        "else concat('w', cast(pmod(xxhash64(id), 331) as string)) end as s",
        "if(id % 31 = 0, null, cast(pmod(xxhash64(id, 1), 1009) as int) - 500) as i",
        "pmod(xxhash64(id, 2), 5003) - 2500 as l",
        "cast(pmod(xxhash64(id, 3), 100000) as int) - 50000 as v",
        "id * 1000003 as big",
    )
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a shuffle join
    queries = [
        df.groupBy("s").count(),
        df.groupBy("i").agg(F.sum("big")),
        df.groupBy("l").agg(F.min("v")),
        df.groupBy("l").agg(F.max("v")),
        df.groupBy("i").agg(F.sum("v")),
        df.groupBy("s").agg(F.count("id")),
        df.filter("id < 0").groupBy("s").count(),
        df.groupBy((F.col("l") % 7).alias("m7")).agg(F.max("id")),
        df.groupBy("l").agg(F.sum(F.col("v") * 3 + F.col("id"))),
        df.groupBy("s").agg(F.min(F.col("big") % 1000)),
        df.groupBy("i").agg(F.count(F.col("id") + 1)),
        df.groupBy("l").count().join(df.groupBy("l").agg(F.max("big").alias("m")), "l"),
    ]
    # 100,000 rows per map task over 150,000 keys: the task thread's first
    # level of aggregation absorbs too few of them and switches itself off.
    many = spark.range(0, 200000, numPartitions=2).selectExpr(
        "pmod(xxhash64(id), 150000) as k", "id as v")
    queries.append(many.groupBy("k").agg(F.max("v")))
    out = [sorted(repr(tuple(r)) for r in q.collect()) for q in queries]
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        near = spark.range(0, 8, numPartitions=2).selectExpr(
            "id % 2 as k", "id + 9223372036854775800 as v")
        out.append(sorted(repr(tuple(r)) for r in near.groupBy("k").sum("v").collect()))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    return out


def sql_aggregate_lanes(spark, scale=1):
    """Spark SQL aggregates by several columns and with several functions,
    which Sluice runs in the engine as lanes: keys of strings, ints, dates,
    decimals and booleans with nulls; sums of nullable longs, ints and
    decimals (12 and 32 digits), decimal averages, counts of columns and
    rows, min and max of ints, dates and decimals; groups whose values are
    all null; keys in runs (the task thread's table folds them) and keys
    that are all different (it switches itself off); an empty input; TPC-H
    Q1's and Q3's shapes; and the legacy (non-ANSI) mode, where a long sum
    wraps and a decimal sum beyond its precision is null. Returns each
    query's rows as a multiset."""
    from pyspark.sql import functions as F

    n = 30000 * scale
    df = spark.range(0, n, numPartitions=4).selectExpr(
        "id",
        "case when id % 23 = 0 then null else concat('g', cast(id % 5 as string)) end as s",
        "cast(id % 3 as int) as i",
        "if(id % 41 = 0, null, date_add(date'1995-01-01', cast(id % 4 as int))) as dt",
        "cast(id % 7 as decimal(12,2)) / 4 as dk",
        "id % 2 = 0 as b",
        "if(id % 13 = 0, null, pmod(xxhash64(id), 100000) - 50000) as l",
        "if(id % 17 = 0, null, cast(pmod(xxhash64(id, 1), 1000) as int)) as v",
        "if(id % 19 = 0, null, cast((pmod(xxhash64(id, 2), 2000000) - 1000000) / 100"
        " as decimal(12,2))) as p",
        "cast(pmod(xxhash64(id, 3), 11) as decimal(12,2)) / 100 as disc",
        "if(id % 11 = 3, null, cast(id as int)) as allnull_in_some",
    )
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    queries = [
        df.groupBy("s", "i").agg(F.sum("l"), F.count("*"), F.count("v")),
        df.groupBy("dt", "b").agg(F.sum("p"), F.avg("p"), F.min("p"), F.max("dt")),
        df.groupBy("dk").agg(F.sum("v"), F.min("v"), F.max("l"), F.avg("p")),
        df.groupBy("s", "dt", "i").agg(
            F.sum(F.col("p") * (1 - F.col("disc"))),
            F.sum(F.col("p") * (1 - F.col("disc")) * (1 + F.col("disc"))),
            F.avg("disc"),
            F.count("*"),
        ),
        # Keys that are all different: each map task's table fills and empties.
        df.groupBy("l", "s").agg(F.sum("p"), F.max("v")),
        # Keys in runs of 4 (TPC-H's lineitem by its order key).
        df.groupBy((F.col("id") / 4).cast("long").alias("o")).agg(F.sum("p")),
        # A group whose values are all null: sum and avg null, count 0.
        df.groupBy("i").agg(
            F.sum(F.when(F.col("i") == 1, None).otherwise(F.col("p"))),
            F.avg(F.when(F.col("i") == 1, None).otherwise(F.col("p"))),
            F.count(F.when(F.col("i") == 1, None).otherwise(F.col("v"))),
            F.min("allnull_in_some"),
        ),
        df.filter("id < 0").groupBy("s", "i").agg(F.sum("p"), F.count("*")),
        # 100,000 rows per map task over 150,000 keys: past its sample the
        # task thread's table switches off, its groups leave while single
        # rows pass through.
        spark.range(0, 200000, numPartitions=2).selectExpr(
            "pmod(xxhash64(id), 150000) as k", "cast(id % 3 as int) as j",
            "if(id % 7 = 0, null, cast(id as decimal(15,2)) / 8) as p")
        .groupBy("k", "j").agg(F.avg("p"), F.count("*")),
    ]
    out = [sorted(repr(tuple(r)) for r in q.collect()) for q in queries]
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        near = spark.range(0, 8, numPartitions=2).selectExpr(
            "id % 2 as k", "id % 3 as j", "id + 9223372036854775800 as v",
            "cast(99999999999999999999999999999999999999 as decimal(38,0)) as w")
        out.append(sorted(repr(tuple(r)) for r in
                          near.groupBy("k", "j").agg(F.sum("v"), F.sum("w"), F.avg("w")).collect()))
        out.append(sorted(repr(tuple(r)) for r in
                          near.groupBy("k").agg(F.sum("v"), F.sum("w")).collect()))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    return out


def sql_join(spark, scale=1):
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a shuffle join
    a = spark.range(0, 30000 * scale, numPartitions=3).selectExpr("id % 997 as k", "id as v")
    b = spark.range(0, 997, numPartitions=2).selectExpr("id as k", "concat('n', id) as name")
    rows = a.join(b, "k").groupBy("name").count().collect()
    return sorted(tuple(r) for r in rows)


def _plain(v):
    """A collected value made comparable: NaN as a string (NaN != NaN)."""
    return "NaN" if isinstance(v, float) and v != v else v


def sql_order_by(spark, scale=1):
    """Spark SQL global sorts (ORDER BY), which Sluice sorts natively: a
    TeraSort-like binary key; an int descending (nulls last) then a string;
    doubles with NaN, -0.0, 0.0 and nulls; a long descending with nulls
    first then a date; boolean, byte (descending), short, float with NaN
    (descending), timestamp; several strings, ascending and descending, with
    prefixes of each other and NUL characters, ahead of other columns;
    decimals of 12 digits and of 30 (unscaled values from one to thirteen
    bytes, negative, null), either way; expressions of columns; and an
    empty input. Returns each
    order's sort keys in output order (ties are equal keys, so the order
    among them does not show) and its rows as a multiset."""
    from pyspark.sql import functions as F

    # Every value pattern below repeats within a few hundred ids.
    n = 6000 * scale
    df = spark.range(0, n, numPartitions=4).selectExpr(
        "id",
        "substr(unhex(sha2(cast(id as string), 256)), 1, 10) as b",
        "if(id % 17 = 0, null, cast(pmod(xxhash64(id), 500) as int) - 250) as i",
        "if(id % 13 = 0, null, concat('s', cast(pmod(xxhash64(id, 1), 997) as string))) as s",
        "case id % 11 when 0 then double('NaN') when 1 then -0.0D when 2 then 0.0D "
        "when 3 then null else (pmod(xxhash64(id, 2), 2001) - 1000) / 7.0D end as d",
        "if(id % 19 = 0, null, pmod(xxhash64(id, 3), 100000) - 50000) as l",
        "date_add(date'2020-01-01', cast(pmod(id, 700) as int)) as dt",
        "id % 3 = 0 as z",
        "cast(pmod(xxhash64(id, 4), 256) - 128 as tinyint) as y",
        "cast(pmod(xxhash64(id, 5), 60000) - 30000 as smallint) as h",
        "if(id % 7 = 0, float('NaN'), cast((pmod(xxhash64(id, 6), 999) - 499) / 3.0 as float)) as f",
        "timestamp_seconds(pmod(xxhash64(id, 7), 100000000) - 50000000) as ts",
        # '', 'a', 'ab', 'ab<NUL>', 'ab<NUL>c', 'ab<NUL>c' + one of a/b/c, null.
        "if(id % 23 = 0, null, substr(concat('ab', chr(0), 'c', chr(cast(pmod(id, 3) as int) + 97)),"
        " 1, cast(pmod(xxhash64(id, 8), 6) as int))) as s2",
        "concat('k', cast(pmod(xxhash64(id, 9), 7) as string)) as s3",
        "if(id % 29 = 0, null, cast((pmod(xxhash64(id, 10), 20001) - 10000) / 100 as decimal(12, 2))) as dc",
        "case when id % 31 = 0 then null when id % 5 = 0 then"
        " cast(pmod(xxhash64(id, 11), 2001) - 1000 as decimal(30, 4)) else"
        " cast(concat(cast(pmod(xxhash64(id, 11), 2000001) - 1000000 as string), '1234567890123456789.0123')"
        " as decimal(30, 4)) end as dw",
    )
    orders = [
        (["b"], [F.col("b")]),
        (["i", "s"], [F.col("i").desc_nulls_last(), F.col("s")]),
        (["d"], [F.col("d")]),
        (["l", "dt"], [F.col("l").desc_nulls_first(), F.col("dt").asc_nulls_last()]),
        (["z", "y", "h", "f", "ts"],
         [F.col("z"), F.col("y").desc(), F.col("h"), F.col("f").desc(), F.col("ts"), F.col("id")]),
        (["s3", "s2", "i"], [F.col("s3"), F.col("s2").desc_nulls_first(), F.col("i")]),
        (["s2", "dc", "s"], [F.col("s2").asc_nulls_last(), F.col("dc").desc(), F.col("s").desc()]),
        (["dw", "id"], [F.col("dw").desc_nulls_last(), F.col("id")]),
        (["dc", "dw"], [F.col("dc"), F.col("dw").asc_nulls_first()]),
        # Expressions, computed into key columns the read drops again.
        ([lambda r: None if r["l"] is None else r["l"] % 7, "i",
          lambda r: None if r["s"] is None else r["s"][1:]],
         [F.expr("pmod(l, 7)").desc_nulls_last(), F.col("i").asc_nulls_first(),
          F.expr("substr(s, 2)").desc()]),
    ]
    out = []
    empty = df.filter("id < 0")
    out.append(empty.orderBy("b").collect())  # no rows: one empty range
    for cols, order in orders:
        rows = df.orderBy(*order).collect()
        keys = [tuple(_plain(c(r) if callable(c) else r[c]) for c in cols) for r in rows]
        out.append((keys, sorted(repr(tuple(_plain(v) for v in r)) for r in rows)))
    return out


def sql_variant(spark, scale=1):
    """Spark 4's VARIANT values (semi-structured JSON) carried through a
    repartition, a join, a window and a global sort by a field read out of
    them, and grouped by such a field; strings of a case-insensitive
    collation grouped (equal under it, unequal as bytes). None before 4.0,
    which has neither."""
    if spark.version.startswith("3."):
        return None
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW variants AS SELECT id, id % 13 AS k,
        parse_json(concat('{{"a":', id % 101, ',"b":"x', id % 7, '","c":[', id % 3,
                          ',{{"d":', id / 3.0, '}}]}}')) AS j,
        concat(if(id % 2 = 0, 'a', 'A'), id % 5) COLLATE UTF8_LCASE AS s
        FROM range({20000 * scale})""")
    queries = {
        "carried": "SELECT k, to_json(j) FROM (SELECT * FROM variants DISTRIBUTE BY k)",
        "grouped": "SELECT k, count(*), max(variant_get(j, '$.a', 'int')), "
                   "sum(variant_get(j, '$.c[1].d', 'decimal(20, 4)')), to_json(max_by(j, id)) "
                   "FROM variants GROUP BY k",
        "by_field": "SELECT variant_get(j, '$.b', 'string'), count(*), min(id) "
                    "FROM variants GROUP BY 1",
        "joined": "SELECT a.k, count(*), sum(variant_get(b.j, '$.a', 'long')) FROM variants a "
                  "JOIN variants b ON variant_get(a.j, '$.a', 'int') * 7 = b.id GROUP BY a.k",
        "window": "SELECT k, id, to_json(lag(j) OVER (PARTITION BY k ORDER BY id)) FROM variants",
        "collated": "SELECT lower(s), count(*) FROM variants GROUP BY s",
    }
    out = {name: sorted(tuple(str(v) for v in r) for r in spark.sql(q).collect())
           for name, q in queries.items()}
    # In order: a total order (the field, then the unique id).
    out["sorted"] = [tuple(str(v) for v in r) for r in spark.sql(
        "SELECT id, to_json(j) FROM variants "
        "ORDER BY variant_get(j, '$.b', 'string') DESC, id").collect()]
    return out


# Structured Streaming: the files of a directory read one per micro-batch.
STREAM_FILES = 3
STREAM_ROWS = 800  # rows a file


def _stream_file(src, i):
    """File i of the stream: rows with event times within minute i, its
    modification time i seconds after a fixed instant, so that the source
    takes the files in order whenever they were written."""
    import datetime
    import json
    import os

    rnd = random.Random(100 + i)
    start = datetime.datetime(2026, 1, 1) + datetime.timedelta(minutes=i)
    rows = []
    for _ in range(STREAM_ROWS):
        rows.append(json.dumps({
            "k": rnd.randrange(60),
            "s": f"s{rnd.randrange(40):02d}",
            "d": f"{rnd.randrange(-10**6, 10**6) / 100:.2f}",
            "ts": (start + datetime.timedelta(milliseconds=rnd.randrange(60000))).isoformat(),
            "v": rnd.randrange(10**9),
        }))
    path = src / f"part-{i:03d}.json"
    path.write_text("\n".join(rows))
    os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def streaming(spark, scale=1, root=None, files=None):
    """Structured Streaming's stateful operators over a file source, one file a
    micro-batch: an aggregate kept in the state store (decimal sums, counts,
    averages; each batch sorted by the sum, which Sluice sorts natively:
    complete mode), and a stream-stream join within a time band with a
    windowed aggregate above it, both bounded by watermarks (append mode).
    Each stateful operator's state is partitioned by Spark's hash of its
    keys, read through the shuffle Sluice runs, so a checkpoint written under
    one shuffle manager continues under the other.

    `root` holds the source files and the checkpoints (a temporary directory,
    deleted after, by default); `files` are the file numbers written into the
    source before the run (all of them by default). Returns, per query, the
    rows of its last batch (complete mode, in order) or of all its batches
    (append mode, as a multiset)."""
    import pathlib
    import shutil
    import tempfile

    from pyspark.sql import functions as F, types as T

    own = root is None
    root = pathlib.Path(tempfile.mkdtemp(prefix="sluice-stream-") if own else root)
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    for i in range(STREAM_FILES) if files is None else files:
        _stream_file(src, i)
    schema = T.StructType([
        T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType()),
        T.StructField("d", T.DecimalType(12, 2)), T.StructField("ts", T.TimestampType()),
        T.StructField("v", T.LongType())])

    def source():
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))

    def run(name, df, mode):
        batches = {}

        def each(batch, batch_id):
            batches[batch_id] = [tuple(str(v) for v in r) for r in batch.collect()]

        q = (df.writeStream.outputMode(mode).foreachBatch(each).trigger(availableNow=True)
             .option("checkpointLocation", str(root / f"checkpoint-{name}")).start())
        q.awaitTermination()
        if mode == "complete":
            return batches[max(batches)] if batches else []
        return sorted(r for rows in batches.values() for r in rows)

    s = source()
    totals = (s.groupBy("s").agg(F.sum("d").alias("sd"), F.count("*").alias("c"),
                                 F.avg("v").alias("av"))
              .orderBy(F.col("sd").desc(), "s"))
    left = source().withWatermark("ts", "10 seconds").select("k", "ts", "v")
    right = (source().withWatermark("ts", "10 seconds")
             .select(F.col("k").alias("rk"), F.col("ts").alias("rts"), F.col("d").alias("rd")))
    band = left.join(right, F.expr(
        "k = rk AND rts BETWEEN ts - interval 2 seconds AND ts + interval 2 seconds"))
    windows = (band.groupBy(F.window("ts", "20 seconds"), "k")
               .agg(F.sum("rd").alias("sd"), F.max("v").alias("mv"), F.count("*").alias("c")))
    # Few state store partitions (each a store per operator per batch).
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        return {
            "totals": run("totals", totals, "complete"),
            "windows": run("windows", windows, "append"),
        }
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
        if own:
            shutil.rmtree(root, ignore_errors=True)


ALL = {
    "hibench_sort": hibench_sort,
    "terasort": terasort,
    "wordcount": wordcount,
    "repartition": repartition,
    "partition_by_key": partition_by_key,
    "reduce_by_key": reduce_by_key,
    "sort_by_key": sort_by_key,
    "distinct": distinct,
    "join": join,
    "sql_group_by": sql_group_by,
    "sql_join": sql_join,
    "sql_aggregate": sql_aggregate,
    "sql_aggregate_lanes": sql_aggregate_lanes,
    "sql_order_by": sql_order_by,
    "sql_variant": sql_variant,
    "streaming": streaming,
}
