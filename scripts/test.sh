#!/usr/bin/env bash
# Every test: the Rust workspace, then the Spark plugin against real Spark
# (spark/test.sh builds the jar and installs pyspark from PyPI itself).
# --extended adds the Spark tests that do not fit CI's time (spark/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace --locked"
cargo test --workspace --locked
echo "== spark/test.sh (real Spark, local[2] and local-cluster[2,1,1024])"
bash spark/test.sh "$@"
