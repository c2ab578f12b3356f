#!/usr/bin/env bash
# Sluice's soak test (spark/soak.py): several concurrent jobs in one
# local-cluster application for a bounded time (--minutes, default 5), every
# answer checked, executor memory flat, nothing native left open; prints
# "N passed, N failed". Builds the jar and installs pyspark first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash spark/build.sh
[ -x spark/.venv/bin/python ] || python3 -m venv spark/.venv
spark/.venv/bin/pip install -q --disable-pip-version-check -r spark/requirements.txt
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/spark/.venv/bin/python"
exec spark/.venv/bin/python spark/soak.py "$@"
