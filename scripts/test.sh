#!/usr/bin/env bash
# Every test: the Rust workspace, then the Spark plugin against real Spark
# (spark/test.sh builds the jar and installs pyspark from PyPI itself).
# --extended adds the Spark tests that do not fit CI's time (spark/test.sh).
#
# The Rust tests run beside the build of the jar's native library (release,
# the same target directory; cargo takes its lock only to compile, and the
# test binaries are compiled first): the tests leave a core idle much of
# their two minutes, and the release build fills it. Their output is
# printed whole once both have ended; either failing fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace --locked (compiled, then run beside spark/build.sh)"
cargo test --workspace --locked --no-run
mkdir -p target
cargo_log=target/cargo-test.log
cargo test --workspace --locked >"$cargo_log" 2>&1 &
cargo_pid=$!
trap 'pkill -P $cargo_pid 2>/dev/null; kill $cargo_pid 2>/dev/null || true' EXIT
build_rc=0
bash spark/build.sh || build_rc=$?
cargo_rc=0
wait $cargo_pid || cargo_rc=$?
trap - EXIT
cat "$cargo_log"
echo "== cargo test ended (rc $cargo_rc); spark/build.sh ended (rc $build_rc)"
if [ "$cargo_rc" != 0 ] || [ "$build_rc" != 0 ]; then
  exit 1
fi
echo "== spark/test.sh (real Spark, local[2] and local-cluster[2,1,1024])"
bash spark/test.sh "$@"
