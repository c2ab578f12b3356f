#!/usr/bin/env bash
# The Spark plugin's tests: builds the jar (spark/build.sh); runs the Java
# tests of the operator API (Maven, JUnit, a real SparkContext in local[2]);
# installs pyspark and pytest from PyPI into spark/.venv
# (spark/requirements.txt) and runs spark/tests against real Spark in
# local[2], local-cluster[2,1,1024] and a standalone cluster on loopback;
# beside them, Apache Spark's own suites with Sluice switched on
# (spark/suites/run.sh), all on the default line, Spark 4.1; then, on Spark
# 3.5, 4.0 and 4.2, each line's jar, Spark's ShuffleSuite from that line's
# test jars (4.0's with --extended), spark/tests/test_1_local.py and five of
# test_10_service.py's tests (on 3.5) in that line's own venv (spark/lines.sh).
#
#   bash spark/test.sh [--extended]
#
# CI runs the default tier: 21 to 44 minutes on two cores, as fast as the
# machine is (the Spark part 17 to 36 of them), over the 30 CI is meant to
# take on the slower machines.
# --extended adds what is left out of it for time: the pytest tests marked
# `extended` (the TPC-H
# benchmark's interleaved protocol over two sets of processes, the 4.1 jar on
# Spark 3.5, 4.0, 4.2 and 4.3 falling back to the sort shuffle and each
# line's jar running natively there, the map statuses of 4.1 and later carrying the row
# checksums Spark's writers compute, the pip package installed into a fresh
# venv beside pyspark 3.5, 4.1 and 4.2, a pyspark per line from PyPI in
# spark/.venv-spark-LINE, the jars on Java 21 and 25 (a JDK from PyPI) and
# under ZGC and Shenandoah; executors that come and go in
# standalone clusters on loopback: the external shuffle service under dynamic
# allocation, decommissioning, a kill mid-commit, speculative SQL map tasks;
# a 512 MiB SQL row in an 8 GiB driver), Spark SQL's adaptive execution
# suite and SQLQueryTestSuite's PostgreSQL ports with Sluice's SQL rules on,
# and GraphX's suites, 41 of MLlib's, 21 of Spark SQL's over Hive tables and
# Hive's own query files under Sluice and its rules (spark/suites/run.sh
# --extended).
set -euo pipefail
cd "$(dirname "$0")/.."

extended=0
case "${1:-}" in
  "") ;;
  --extended) extended=1 ;;
  *) echo "usage: bash spark/test.sh [--extended]" >&2; exit 2 ;;
esac

# Every JVM the tests start (Maven's, pyspark's, executors, Spark's suites)
# compiles with the client compiler only: they live seconds to minutes, on
# small inputs, and C2's compile threads cost more CPU than they return (the
# TPC-H test at sf 0.01: 102-106 s against 141-147 s). Speed is measured by
# the benchmarks, which never set this. A JVM so started reserves a code
# cache of 48 MiB, not tiered compilation's 240 MiB, and one session running
# the 99 TPC-DS queries filled it ("Out of space in CodeCache for adapters",
# test_6, once in CI): the tests ask for the tiered size. They collect with
# the serial collector: G1's concurrent threads are CPU that two cores shared
# by two lanes do not have to spare, on heaps of a few GiB at most (alone,
# two runs of each: test_6 101-103 s and 177 s of CPU against 115-119 s and
# 211 s under G1; test_7's first test 69-70 s and 123-124 s against 73 s and
# 132 s).
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"

stage() { echo "== $1 (at ${SECONDS} s)"; }
stage "spark/build.sh"
bash spark/build.sh
if [ ! -x spark/.venv/bin/python ]; then
  python3 -m venv spark/.venv
fi
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt
# Executors talk to the driver on loopback only.
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/spark/.venv/bin/python"
# Two lanes, one per core: the JUnit tests and then Spark's own suites (one
# JVM each, about one core between them) in the background, pytest in the
# foreground, then the other lines in both (below). The lanes leave each
# other idle time (sessions starting, tasks waiting for executors):
# test_10_service.py alone keeps 1.4 of the two cores busy. The background
# lane's output goes to a log, printed whole once both have ended; either
# failing fails the run.
lane_log=spark/suites/target/run.log
mkdir -p spark/suites/target
if [ "$extended" = 1 ]; then
  suites_args=(--extended); marks=()
else
  suites_args=(); marks=(-m "not extended")
fi
# The lines beside the default one whose Spark is on Maven Central (4.3's
# jar, compiled against pyspark's jars, is built by the extended tests), each
# in two parts: its ShuffleSuite, its pytest files. Spark 4.0's ShuffleSuite
# runs in the extended tier only: 4.0's shim is the code of 3.5's and 4.1's
# (spark/src/line-before-4.1, line-4.x) but for its LineShim, which its
# pytest files run, and the oldest and newest lines' ShuffleSuite stay in CI.
OTHER_LINES=(3.5 4.0 4.2)
OTHER_PARTS=()
for line in "${OTHER_LINES[@]}"; do
  if [ "$line" != 4.0 ] || [ "$extended" = 1 ]; then
    OTHER_PARTS+=("$line:suite")
  fi
  OTHER_PARTS+=("$line:tests")
done
# Each part is run by whichever lane gets to it first: the background lane
# takes them in order once Spark's suites have ended, the foreground in
# reverse once pytest has, so that neither core idles while the other has
# parts left, and the lanes end within a part (two to four minutes) of each
# other. A lane claims a part by creating its directory (mkdir is atomic);
# spark/lines.sh prepares a line's jar and venv once for the run (a lock).
claims=spark/suites/target/line-claims
rm -rf "$claims" && mkdir -p "$claims"
export SLUICE_LINES_RUN="$$-$(date +%s)"
claim_lines() {
  local rc=0 unit
  for unit in "$@"; do
    mkdir "$claims/$unit" 2>/dev/null || continue
    bash spark/lines.sh "$unit" || rc=1
  done
  return $rc
}
stage "JUnit (mvn test), Spark's own suites (spark/suites/run.sh), the other lines (spark/lines.sh ${OTHER_PARTS[*]}), beside pytest: > $lane_log"
(
  junit_rc=0
  (cd spark && mvn -q -B test) || junit_rc=$?
  echo "== JUnit ended (rc $junit_rc) at ${SECONDS} s; Spark's own suites"
  suites_rc=0
  bash spark/suites/run.sh "${suites_args[@]}" || suites_rc=$?
  echo "== Spark's own suites ended (rc $suites_rc) at ${SECONDS} s; the other lines"
  lines_rc=0
  claim_lines "${OTHER_PARTS[@]}" || lines_rc=$?
  echo "== the other lines this lane took ended (rc $lines_rc) at ${SECONDS} s"
  [ "$junit_rc" = 0 ] && [ "$suites_rc" = 0 ] && [ "$lines_rc" = 0 ]
) >"$lane_log" 2>&1 &
lane=$!
trap 'pkill -P $lane 2>/dev/null; kill $lane 2>/dev/null || true' EXIT
stage "pytest spark/tests"
pytest_log=spark/suites/target/pytest.log
pytest_rc=0
spark/.venv/bin/python -m pytest -q -p no:cacheprovider --durations=12 -rfE "${marks[@]}" spark/tests \
  2>&1 | tee "$pytest_log" || pytest_rc=$?
stage "pytest ended (rc $pytest_rc); the other lines the background lane has not taken"
fg_lines_rc=0
claim_lines $(printf '%s\n' "${OTHER_PARTS[@]}" | tac) 2>&1 | tee spark/suites/target/lines-fg.log \
  || fg_lines_rc=$?
stage "the other lines this lane took ended (rc $fg_lines_rc); waiting for the other lane"
lane_rc=0
wait $lane || lane_rc=$?
trap - EXIT
stage "the other lane ended (rc $lane_rc); its output:"
cat "$lane_log"
# The lane's log is long: what failed, from both lanes, is repeated last,
# where a truncated CI log still shows it.
stage "summary: pytest rc $pytest_rc, its lines rc $fg_lines_rc, the other lane rc $lane_rc"
grep -E '^(FAILED|ERROR) ' "$pytest_log" || true
grep -E '^(FAILED|ERROR) |== .*ended \(rc |\*\*\* FAILED|Tests: succeeded [0-9]+, failed [1-9]' \
  spark/suites/target/lines-fg.log "$lane_log" || true
stage "done"
[ "$pytest_rc" = 0 ] && [ "$fg_lines_rc" = 0 ] && [ "$lane_rc" = 0 ]

