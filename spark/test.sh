#!/usr/bin/env bash
# The Spark plugin's tests: builds the jar (spark/build.sh); runs the Java
# tests of the operator API (Maven, JUnit, a real SparkContext in local[2]);
# installs pyspark and pytest from PyPI into spark/.venv
# (spark/requirements.txt) and runs spark/tests against real Spark in
# local[2], local-cluster[2,1,1024] and a standalone cluster on loopback;
# then Apache Spark's own shuffle suites with Sluice switched on
# (spark/suites/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every JVM the tests start (Maven's, pyspark's, executors, Spark's suites)
# compiles with the client compiler only: they live seconds to minutes, on
# small inputs, and C2's compile threads cost more CPU than they return (the
# TPC-H test at sf 0.01: 102-106 s against 141-147 s). Speed is measured by
# the benchmarks, which never set this.
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }-XX:TieredStopAtLevel=1"

stage() { echo "== $1 (at ${SECONDS} s)"; }
stage "spark/build.sh"
bash spark/build.sh
stage "JUnit (mvn test)"
(cd spark && mvn -q -B test)
if [ ! -x spark/.venv/bin/python ]; then
  python3 -m venv spark/.venv
fi
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt
# Executors talk to the driver on loopback only.
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/spark/.venv/bin/python"
stage "pytest spark/tests"
spark/.venv/bin/python -m pytest -q -p no:cacheprovider --durations=12 spark/tests
stage "Spark's own suites (spark/suites/run.sh)"
bash spark/suites/run.sh
stage "done"

