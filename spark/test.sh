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

bash spark/build.sh
(cd spark && mvn -q -B test)
if [ ! -x spark/.venv/bin/python ]; then
  python3 -m venv spark/.venv
fi
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt
# Executors talk to the driver on loopback only.
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/spark/.venv/bin/python"
spark/.venv/bin/python -m pytest -q -p no:cacheprovider --durations=12 spark/tests
bash spark/suites/run.sh
