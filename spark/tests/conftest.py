"""Real Spark sessions for the tests: the jar spark/build.sh built, Spark's
sort shuffle as the reference, Sluice's shuffle manager under test."""

import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

sys.path.insert(1, str(HERE.parent))
# The jar under test (the default line's, or the line SLUICE_LINE names) and
# the example and benchmark jobs some tests drive (not in the shipped jar).
from bench import EXAMPLES_JAR, JAR, LINE as _LINE, SQL_EXTENSIONS  # noqa: E402
SLUICE = "dev.sluice.spark.SluiceShuffleManager"
KRYO = "org.apache.spark.serializer.KryoSerializer"

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "extended: left out of CI's tier for time (bash spark/test.sh --extended runs it)")


def session(master, manager, tmp, serializer=KRYO, extra=None):
    from pyspark.sql import SparkSession

    for jar in (JAR, EXAMPLES_JAR):
        if not jar.exists():
            pytest.fail(f"{jar} is missing: run spark/build.sh first")
    b = (
        SparkSession.builder.master(master)
        .appName(f"sluice-test-{manager}")
        .config("spark.jars", f"{JAR},{EXAMPLES_JAR}")
        .config("spark.shuffle.manager", manager)
        .config("spark.serializer", serializer)
        .config("spark.ui.enabled", "false")
        .config("spark.local.dir", str(tmp))
        .config("spark.sql.shuffle.partitions", "6")
        .config("spark.default.parallelism", "4")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "768m")
        # Every aggregate shape the engine computes, not only those its default
        # (auto) takes for speed: the tests are of the native paths.
        .config("spark.sluice.sqlAggregate", "true")
    )
    if _LINE == "3.5":
        # pyspark 3.5 makes its session without Java's service loader, so the
        # SQL rules come from the setting there (Spark 4 finds them in the jar).
        b = b.config("spark.sql.extensions", SQL_EXTENSIONS)
        # Spark 3.5's executors make the shuffle manager before they fetch the
        # application's jars: on a cluster the jar must be on their class path.
        b = b.config("spark.executor.extraClassPath", str(JAR))
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def short_of_memory(mib, partitions, adaptive=True):
    """Settings that cut Spark's memory manager to `mib` MiB in all (about
    0.3 * mib of execution memory per task of local[2]), with `partitions`
    shuffle partitions (and, unless `adaptive`, no adaptive execution to
    coalesce them)."""
    return {
        "spark.testing.memory": str(mib << 20),
        "spark.testing.reservedMemory": "0",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.adaptive.enabled": str(adaptive).lower(),
    }


# Speculation that copies a task once it runs 1.5x the stage's median (at
# least 500 ms): with slow_first_attempt, map task 0 of a stage. Spark 4
# speculates by processing rate by default; a sleeping task has processed
# nothing yet, so these go by run time alone.
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.minTaskRuntime": "500ms",
    "spark.speculation.efficiency.enabled": "false",
}


def slow_first_attempt(marker):
    """A function for mapPartitionsWithIndex: the first attempt of map task
    0 sleeps 8 s, so that Spark speculates it; a later attempt of it
    writes `marker` (the proof that a copy ran)."""
    path = str(marker)

    def slow(index, it):
        import time
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        if index == 0 and attempt == 0:
            time.sleep(8)
        if index == 0 and attempt > 0:
            with open(path, "a") as m:
                m.write(str(attempt))
        return it

    return slow


def stage_data(spark):
    """Spark's status store's data of each stage of the session so far, in
    stage order (what its UI shows: records and bytes read and written,
    spills), once the listener bus delivered every event."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()
    jvm = spark.sparkContext._jvm
    stages = jsc.statusStore().stageList(
        jvm.java.util.ArrayList(), False, False,
        spark.sparkContext._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    return sorted((stages.apply(i) for i in range(stages.size())), key=lambda st: st.stageId())


def sluice_metrics(spark):
    """Sluice's counters in the driver JVM (the executor, in local mode)."""
    m = spark.sparkContext._jvm.dev.sluice.spark.metrics.SluiceMetrics
    return {
        "map_outputs": m.mapOutputs(),
        "blocks_decoded": m.blocksDecoded(),
        "records": m.recordsWritten(),
        "sql_rows_direct": m.sqlRowsDirect(),
        "sql_rows_read": m.sqlRowsRead(),
    }


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """Every workload's result under Spark's sort shuffle (local[2]), computed once."""
    import workloads

    s = session("local[2]", "sort", tmp_path_factory.mktemp("sort"))
    try:
        return {name: job(s) for name, job in workloads.ALL.items()}
    finally:
        s.stop()
