"""Delta Lake and Apache Iceberg tables written and rewritten under Sluice:
each format's row-level commands and file rewrites run once under Spark's
sort shuffle and once under Sluice (each in its own process and JVM,
`local[2]`, Sluice's SQL rules on), and the tables' rows and two queries
over them must be equal.

The commands are those whose plans shuffle and whose plans the formats
shape themselves (their own session extensions and write requirements
beside Sluice's rules): a partitioned table made by CREATE TABLE AS (Delta)
or an INSERT under a range write distribution and a table sort order
(Iceberg), a MERGE INTO that deletes, updates and inserts (copy-on-write
for Iceberg), an UPDATE and a DELETE (merge-on-read deletion files for
Iceberg), then a Z-order rewrite of every file (`OPTIMIZE ... ZORDER BY`,
`rewrite_data_files` with a `zorder` sort); then the whole table, an
aggregate and a self-join are read.

The formats' jars come from Maven Central (`mvn dependency:get`, once);
the versions are built for Spark 4.0, so the script runs on that line:

    bash spark/build.sh --line 4.0
    SLUICE_LINE=4.0 spark/.venv-spark-4.0/bin/python spark/table_formats.py [--formats delta,iceberg]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

import per_manager

HERE = pathlib.Path(__file__).resolve().parent
M2 = pathlib.Path.home() / ".m2" / "repository"
# Each format's session settings and jars (group:artifact:version).
FORMATS = {
    "delta": {
        "jars": ["io.delta:delta-spark_2.13:4.0.0", "io.delta:delta-storage:4.0.0"],
        "conf": {
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        },
        "table": "t",
    },
    "iceberg": {
        "jars": ["org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"],
        "conf": {
            "spark.sql.extensions":
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.ice.type": "hadoop",
        },
        "table": "ice.db.t",
    },
}
ROWS = 200_000  # rows of the table
CHANGES = 120_000  # rows of the MERGE's source, a third of them matching


def jar_path(coordinate):
    group, artifact, version = coordinate.split(":")
    path = M2.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
    if not path.exists():
        subprocess.run(["mvn", "-q", "-B", "dependency:get", f"-Dartifact={coordinate}",
                        "-Dtransitive=false"], check=True)
    return path


def statements(fmt, t):
    """The format's writes, in order."""
    rows = (f"SELECT id, cast(id % 97 AS int) AS k, concat('s', id % 1013) AS s, "
            f"cast((id % 100000) / 100 AS decimal(12, 2)) AS d FROM range({ROWS})")
    changes = (f"SELECT id * 3 AS id, cast(id % 50 AS int) AS k, concat('u', id) AS s, "
               f"cast(id / 7 AS decimal(12, 2)) AS d FROM range({CHANGES})")
    if fmt == "delta":
        made = [f"CREATE TABLE {t} USING delta PARTITIONED BY (p) AS "
                f"SELECT *, id % 4 AS p FROM ({rows})"]
        changes = f"SELECT *, id % 4 AS p FROM ({changes})"
        rewrite = f"OPTIMIZE {t} ZORDER BY (k, s)"
    else:
        made = [
            "CREATE NAMESPACE IF NOT EXISTS ice.db",
            f"CREATE TABLE {t} (id BIGINT, k INT, s STRING, d DECIMAL(12, 2)) USING iceberg "
            "PARTITIONED BY (bucket(4, k)) TBLPROPERTIES ('write.distribution-mode'='range', "
            "'write.merge.mode'='copy-on-write', 'write.update.mode'='merge-on-read', "
            "'write.delete.mode'='merge-on-read')",
            f"ALTER TABLE {t} WRITE ORDERED BY s DESC, id",
            f"INSERT INTO {t} {rows}",
        ]
        rewrite = ("CALL ice.system.rewrite_data_files(table => 'db.t', strategy => 'sort', "
                   "sort_order => 'zorder(k, s)', options => map('rewrite-all', 'true'))")
    return made + [
        f"CREATE OR REPLACE TEMP VIEW changes AS {changes}",
        f"MERGE INTO {t} t USING changes c ON t.id = c.id "
        "WHEN MATCHED AND c.k < 10 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.s = c.s, t.d = t.d + c.d "
        "WHEN NOT MATCHED THEN INSERT *",
        f"UPDATE {t} SET d = d * 2 WHERE k = 5",
        f"DELETE FROM {t} WHERE s LIKE 's1%' AND k > 90",
        rewrite,
    ]


def queries(t):
    return {
        "table": f"SELECT id, k, s, d FROM {t}",
        "aggregate": f"SELECT k, count(*), sum(d), min(s), max(id) FROM {t} GROUP BY k",
        "self-join": f"SELECT a.k, count(*) FROM {t} a JOIN {t} b ON a.id = b.id + 3 GROUP BY a.k",
    }


def run_one(fmt, manager, root):
    """One manager's run in this process: the answers as JSON on stdout."""
    sys.path.insert(0, str(HERE / "tests"))
    import conftest

    spec = FORMATS[fmt]
    extra = dict(spec["conf"])
    extra["spark.driver.extraClassPath"] = os.pathsep.join(str(jar_path(j)) for j in spec["jars"])
    extra["spark.sql.warehouse.dir"] = str(root / "warehouse")
    extra["spark.sql.catalog.ice.warehouse"] = str(root / "warehouse")
    extra["spark.sql.shuffle.partitions"] = "16"
    spark = conftest.session("local[2]", conftest.SLUICE if manager == "sluice" else "sort",
                             root / "tmp", extra=extra)
    try:
        for sql in statements(fmt, spec["table"]):
            spark.sql(sql).collect()
        out = {name: sorted(tuple(str(v) for v in r) for r in spark.sql(sql).collect())
               for name, sql in queries(spec["table"]).items()}
        if manager == "sluice":
            out["sluice map outputs"] = conftest.sluice_metrics(spark)["map_outputs"]
    finally:
        spark.stop()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--formats", default="delta,iceberg")
    ap.add_argument("--manager", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.manager:
        run_one(args.formats, args.manager, pathlib.Path(args.root))
        return 0
    if os.environ.get("SLUICE_LINE") != "4.0":
        sys.exit("run with SLUICE_LINE=4.0 and spark/.venv-spark-4.0's python: the formats' "
                 "jars are built for Spark 4.0")
    failed = 0
    for fmt in args.formats.split(","):
        answers = per_manager.answers(__file__, ["--formats", fmt], f"sluice-{fmt}")
        outputs = answers["sluice"].pop("sluice map outputs")
        for name, rows in answers["sort"].items():
            same = rows == answers["sluice"][name]
            failed += not same
            print(f"{fmt} {name}: {len(rows)} rows, {'equal' if same else 'DIFFERENT'}")
        print(f"{fmt}: {outputs} map outputs written by Sluice")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
