"""Writes the class archive the test JVMs map at start (the JDK's dynamic
class data sharing, AppCDS): the classes one Spark session under Sluice loads
while it runs the workloads of workloads.py, parsed and verified once.

A test session of pyspark's Spark starts in about 7 s on two busy cores, most
of it loading and verifying Spark's classes from its jars; with the archive
mapped, in about 3.5 s. spark/test.sh writes the archive once per run, before
pytest starts, and names it in JAVA_TOOL_OPTIONS
(-XX:SharedArchiveFile), so every JVM of the default line's pyspark maps it:
drivers, local-cluster executors, standalone masters and workers. A JVM whose
class path is another's (Maven's, Spark's suites, another line's pyspark, the
launcher spark-submit runs first) finds the archive does not match its class
path and loads its classes from the jars as it would without it: the JVM
checks the class path, each jar's size and time, and the JVM's own build
before it maps anything. What the tests check is the same with and without
the archive; only where the classes' bytes come from differs.

    python spark/tests/class_archive.py OUT.jsa

The archive is written by the driver JVM at its exit
(-XX:ArchiveClassesAtExit, given as the driver's Java options, so that the
launcher's JVM does not write one too), into a temporary file renamed to OUT
once the JVM has ended. Exits 1, leaving no OUT, if no archive was written.
"""

import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from conftest import SLUICE, session  # noqa: E402

# The jobs run to load the classes: the RDD shuffles (sorts, aggregations),
# the SQL shapes the native nodes take and Spark's own codegen. A few
# seconds each; the archive holds what they loaded, whatever their results.
TRAINING = ("reduce_by_key", "sort_by_key", "sql_aggregate", "sql_order_by")
# How long the driver JVM may take to write the archive once told to exit.
DUMP_TIMEOUT_S = 180


def main(out):
    from pyspark import SparkContext

    out = pathlib.Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    part.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="class-archive-") as tmp:
        s = session("local[2]", SLUICE, tmp, extra={
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={part}"})
        proc = SparkContext._gateway.proc
        for name in TRAINING:
            workloads.ALL[name](s)
        s.stop()
        # The gateway JVM exits when its standard input closes, and writes
        # the archive on the way out.
        proc.stdin.close()
        proc.wait(timeout=DUMP_TIMEOUT_S)
    if not part.exists() or part.stat().st_size == 0:
        print(f"no class archive written to {part}", file=sys.stderr)
        return 1
    part.rename(out)
    print(f"class archive {out}: {out.stat().st_size >> 20} MiB")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: class_archive.py OUT.jsa")
    sys.exit(main(sys.argv[1]))
