#!/usr/bin/env bash
# bench/tpch: builds the jar, installs pyspark, DuckDB and its TPC-H
# extension (spark/requirements.txt) and matplotlib for the plot into
# spark/.venv, and runs spark/tpch.py; arguments go to it (--sf N,
# --partitions 16,200, --reps N, --quick, --json PATH, --plot PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
bash spark/build.sh
[ -x spark/.venv/bin/python ] || python3 -m venv spark/.venv
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt \
  matplotlib==3.11.2
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/spark/.venv/bin/python"
exec spark/.venv/bin/python spark/tpch.py "$@"
