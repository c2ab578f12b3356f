#!/usr/bin/env bash
# Builds the Sluice jar for a Spark line: the native library (cargo, release)
# copied into the jar's resources, then the Java classes (Maven, Spark as a
# provided dependency from Maven Central, the line's shim from
# spark/src/line-L/java, chosen by the Maven profile spark-L); and
# spark/target/sluice-spark-examples.jar, the example and benchmark jobs (not
# shipped; the tests and benchmarks add it).
#
#   bash spark/build.sh [--line L | --all-lines]
#
# By default the default line, 4.0 (Spark 4.0.1): spark/target/sluice-spark.jar,
# the jar the tests, benchmarks and README use, also copied to
# spark/target/sluice-spark-4.0_2.13.jar. --line 4.1 or --line 4.2 builds that
# line's jar (spark/target/sluice-spark-4.1_2.13.jar, with its examples jar
# beside it); --all-lines builds every line. Spark 3.5 (Scala 2.12) has no
# jar yet: Sluice's jar falls back to the sort shuffle there.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=(4.0 4.1 4.2)
DEFAULT_LINE=4.0
lines=("$DEFAULT_LINE")
case "${1:-}" in
  "") ;;
  --all-lines) lines=("${LINES[@]}") ;;
  --line)
    [[ " ${LINES[*]} " == *" ${2:-} "* ]] || { echo "--line takes one of: ${LINES[*]}" >&2; exit 2; }
    lines=("$2") ;;
  *) echo "usage: bash spark/build.sh [--line L | --all-lines]" >&2; exit 2 ;;
esac

cargo build --release --locked -p sluice-jni
# Cargo's target directory: ./target, or where CARGO_TARGET_DIR (or a cargo
# config) puts it.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
native=spark/target/native/native/linux-x86_64
mkdir -p "$native"
# The release profile keeps debug info for profiling; the jar does not need it.
strip --strip-debug -o "$native/libsluice_jni.so" "$target_dir/release/libsluice_jni.so"
for line in "${lines[@]}"; do
  (cd spark && mvn -q -B package -Dmaven.test.skip=true "-Pspark-$line")
  if [ "$line" = "$DEFAULT_LINE" ]; then
    built=spark/target
  else
    built=spark/target/line-$line
  fi
  cp "$built/sluice-spark.jar" "spark/target/sluice-spark-${line}_2.13.jar"
  cp "$built/sluice-spark-examples.jar" "spark/target/sluice-spark-examples-${line}_2.13.jar"
  echo "built $(pwd)/spark/target/sluice-spark-${line}_2.13.jar (Spark $line)"
done
if [[ " ${lines[*]} " == *" $DEFAULT_LINE "* ]]; then
  echo "built $(pwd)/spark/target/sluice-spark.jar and sluice-spark-examples.jar"
fi
