#!/usr/bin/env bash
# Builds spark/target/sluice-spark.jar: the native library (cargo, release)
# copied into the jar's resources, then the Java classes (Maven, Spark as a
# provided dependency from Maven Central); and
# spark/target/sluice-spark-examples.jar, the example and benchmark jobs
# (not shipped; the tests and benchmarks add it).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p sluice-jni
native=spark/target/native/native/linux-x86_64
mkdir -p "$native"
# The release profile keeps debug info for profiling; the jar does not need it.
strip --strip-debug -o "$native/libsluice_jni.so" target/release/libsluice_jni.so
(cd spark && mvn -q -B package -Dmaven.test.skip=true)
echo "built $(pwd)/spark/target/sluice-spark.jar and sluice-spark-examples.jar"
