#!/usr/bin/env bash
# Each Spark line beside the default one, tested on its own Spark: that line's jar
# (spark/build.sh --line L), Spark's own ShuffleSuite from that line's test jars
# (spark/suites/run.sh --line L, which installs that line's pyspark into
# spark/.venv-suites-L), the local-mode pytest file (spark/tests/test_1_local.py: every
# workload record for record against Spark's sort shuffle, the SQL rules' plan shapes) and
# five of the service's (spark/tests/test_10_service.py: every kind of shuffle through two
# daemons, small outputs kept on executors, a daemon restarted under a job and the rerun
# assigned anew, a restarted daemon taking the next shuffle, dynamic allocation; on 3.5)
# in the same venv, with the pytest of spark/requirements.txt.
#
#   bash spark/lines.sh [LINE[:PART] ...]        (default: 3.5 4.0 4.2)
#
# A line's tests come in two parts, `suite` (ShuffleSuite) and `tests` (the pytest files); LINE
# alone runs both. spark/test.sh runs it in CI, a part at a time in whichever of its two lanes is
# free first, so that the two lanes end close together. A line's jar and venv are prepared once
# per run (SLUICE_LINES_RUN names the run; one lines.sh invocation by default), under a lock of
# the line's, whichever part comes first; the other part waits for that and uses them.
# Every part runs even when one fails; the exit status fails when any did.
set -euo pipefail
cd "$(dirname "$0")/.."

units=("$@")
[ ${#units[@]} -gt 0 ] || units=(3.5 4.0 4.2)
pytest_pin=$(grep -E '^pytest==' spark/requirements.txt)
export SPARK_LOCAL_IP=127.0.0.1
run_id=${SLUICE_LINES_RUN:-$$}
mkdir -p spark/suites/target

# The line's jar (spark/build.sh --line L), its venv with that line's pyspark, Spark's test jars
# (spark/suites/run.sh --prepare) and the pytest of spark/requirements.txt, once per run.
prepare() {
  local line=$1 ready=spark/suites/target/line-$1.ready
  (
    flock 9
    [ "$(cat "$ready" 2>/dev/null)" = "$run_id" ] && exit 0
    rm -f "$ready"
    # Two lanes of spark/test.sh may prepare two lines at once: one Maven at a time (the jar's
    # build, the suites' dependencies), which shares the native library's copy and Maven's
    # local repository.
    # (Called in an `||` list, where errexit does not hold: each step checked.)
    flock spark/suites/target/.maven.lock bash spark/build.sh --line "$line" || exit 1
    bash spark/suites/run.sh --line "$line" --prepare || exit 1
    "$PWD/spark/.venv-suites-$line/bin/python" -m pip install -q --disable-pip-version-check \
      "$pytest_pin" || exit 1
    echo "$run_id" >"$ready"
  ) 9>"spark/suites/target/.line-$line.lock"
}

failed=()
for unit in "${units[@]}"; do
  line=${unit%%:*}
  part=${unit#"$line"}; part=${part#:}
  case "$part" in
    suite) what="ShuffleSuite" ;;
    tests) what="test_1_local.py, test_10_service.py" ;;
    "") what="ShuffleSuite, test_1_local.py, test_10_service.py" ;;
    *) echo "unknown part $part (suite or tests)" >&2; exit 2 ;;
  esac
  echo "== Spark $line${part:+ ($part)}: the jar, $what (at ${SECONDS} s)"
  rc=0
  prepare "$line" || rc=$?
  if [ "$rc" = 0 ] && [ "$part" != tests ]; then
    bash spark/suites/run.sh --line "$line" ShuffleSuite || rc=$?
  fi
  py=$PWD/spark/.venv-suites-$line/bin/python
  if [ "$rc" = 0 ] && [ "$part" != suite ]; then
    SLUICE_LINE=$line PYSPARK_PYTHON=$py "$py" -m pytest -q -p no:cacheprovider \
      spark/tests/test_1_local.py || rc=$?
  fi
  if [ "$rc" = 0 ] && [ "$part" != suite ] && [ "$line" = 3.5 ]; then
    # The service on this line: every kind of shuffle through two daemons (under the
    # default reduceAtDaemon, which reads both ways: aggregates reduced at the daemons,
    # the rest in the tasks), a daemon restarted under a job, small outputs kept on
    # the executor (reduce-side locality turned off in this line's map output tracker),
    # and dynamic allocation under Sluice's storage plugin (this line's scheduler);
    # the cluster and full-disk tests run on the default line. On 3.5 only, for CI's time:
    # its shims (Scala 2.12, line-3.5, line-before-4.1's map statuses) differ most from the
    # default line's; 4.0's are line-before-4.1's and line-4.x's, 4.2's line-4.1-on's and
    # line-4.x's, each run by the service's tests on 3.5 or on the default line.
    SLUICE_LINE=$line PYSPARK_PYTHON=$py "$py" -m pytest -q -p no:cacheprovider \
      spark/tests/test_10_service.py -k "reduceAtDaemon_auto or restarted or small or dynamic" || rc=$?
  fi
  echo "== Spark $line${part:+ ($part)} ended (rc $rc) at ${SECONDS} s"
  [ "$rc" = 0 ] || failed+=("$unit")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed on Spark ${failed[*]}" >&2
  exit 1
fi
