#!/usr/bin/env bash
# Each Spark line beside the default one, tested on its own Spark: that line's jar
# (spark/build.sh --line L), Spark's own ShuffleSuite from that line's test jars
# (spark/suites/run.sh --line L, which installs that line's pyspark into
# spark/.venv-suites-L), the local-mode pytest file (spark/tests/test_1_local.py: every
# workload record for record against Spark's sort shuffle, the SQL rules' plan shapes) and
# four of the service's (spark/tests/test_10_service.py: every kind of shuffle through two
# daemons, small outputs kept on executors, a daemon restarted under a job and the rerun
# assigned anew, a restarted daemon taking the next shuffle) in the same venv, with the pytest of
# spark/requirements.txt.
#
#   bash spark/lines.sh [LINE ...]        (default: 3.5 4.0 4.2)
#
# spark/test.sh runs it in CI, a line at a time in whichever of its two lanes is free first.
# Every line runs even when one fails; the exit status fails when any did.
set -euo pipefail
cd "$(dirname "$0")/.."

lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=(3.5 4.0 4.2)
pytest_pin=$(grep -E '^pytest==' spark/requirements.txt)
export SPARK_LOCAL_IP=127.0.0.1
failed=()
for line in "${lines[@]}"; do
  echo "== Spark $line: the jar, ShuffleSuite, test_1_local.py, test_10_service.py (at ${SECONDS} s)"
  rc=0
  # Two lanes of spark/test.sh may run lines at once: one Maven at a time (the
  # jar's build, the suites' dependencies), which shares the native library's copy
  # and Maven's local repository.
  mkdir -p spark/suites/target
  flock spark/suites/target/.maven.lock bash spark/build.sh --line "$line" || rc=$?
  [ "$rc" = 0 ] && { bash spark/suites/run.sh --line "$line" ShuffleSuite || rc=$?; }
  py=$PWD/spark/.venv-suites-$line/bin/python
  if [ "$rc" = 0 ]; then
    "$py" -m pip install -q --disable-pip-version-check "$pytest_pin" || rc=$?
  fi
  if [ "$rc" = 0 ]; then
    SLUICE_LINE=$line PYSPARK_PYTHON=$py "$py" -m pytest -q -p no:cacheprovider \
      spark/tests/test_1_local.py || rc=$?
  fi
  if [ "$rc" = 0 ]; then
    # The service on this line: every kind of shuffle through two daemons (under the
    # default reduceAtDaemon, which reads both ways: aggregates reduced at the daemons,
    # the rest in the tasks), a daemon restarted under a job, and small outputs kept on
    # the executor (reduce-side locality turned off in this line's map output tracker);
    # the cluster and full-disk tests run on the default line.
    SLUICE_LINE=$line PYSPARK_PYTHON=$py "$py" -m pytest -q -p no:cacheprovider \
      spark/tests/test_10_service.py -k "reduceAtDaemon_auto or restarted or small" || rc=$?
  fi
  echo "== Spark $line ended (rc $rc) at ${SECONDS} s"
  [ "$rc" = 0 ] || failed+=("$line")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed on Spark ${failed[*]}" >&2
  exit 1
fi
