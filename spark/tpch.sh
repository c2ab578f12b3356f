#!/usr/bin/env bash
# bench/tpch: builds the jar, installs pyspark, DuckDB and its TPC-H
# extension (spark/requirements.txt) and matplotlib for the plot into
# spark/.venv, and runs spark/tpch.py; arguments go to it (--sf N,
# --partitions 16,200, --reps N, --quick, --json PATH, --plot PATH).
# With --line L (3.5, 4.0 or 4.2) it builds that line's jar and runs under that
# line's pyspark in spark/.venv-spark-L (the same other requirements); the
# default line is 4.1 (spark/.venv), the one --managers sort,sluice,comet
# runs on (Comet's release here is for Spark 4.1).
set -euo pipefail
cd "$(dirname "$0")/.."
# The pyspark of each other line (the newest release on PyPI, 2026-11-30).
declare -A PYSPARK=([3.5]=3.5.9 [4.0]=4.0.5 [4.2]=4.2.1)
line=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = --line ] && line=${args[$((i + 1))]:-}
done
if [ -z "$line" ]; then
  venv=spark/.venv
  bash spark/build.sh
  pins=(-r spark/requirements.txt)
else
  [ -n "${PYSPARK[$line]:-}" ] || { echo "--line takes ${!PYSPARK[*]}" >&2; exit 2; }
  venv=spark/.venv-spark-$line
  bash spark/build.sh --line "$line"
  mkdir -p spark/target
  grep -v '^pyspark==' spark/requirements.txt > spark/target/requirements-other-line.txt
  pins=(-r spark/target/requirements-other-line.txt "pyspark==${PYSPARK[$line]}")
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" matplotlib==3.11.2
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/$venv/bin/python"
exec "$venv/bin/python" spark/tpch.py "$@"
