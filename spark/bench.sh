#!/usr/bin/env bash
# bench/spark: builds the jar, installs pyspark (spark/.venv) and runs
# spark/bench.py; arguments go to it (--quick, --json PATH, --terasort-gb N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash spark/build.sh
[ -x spark/.venv/bin/python ] || python3 -m venv spark/.venv
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt
export SPARK_LOCAL_IP=127.0.0.1
exec spark/.venv/bin/python spark/bench.py "$@"
