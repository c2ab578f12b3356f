#!/usr/bin/env bash
# Builds the Sluice jar for a Spark line: the native library (cargo, release)
# copied into the jar's resources, then the Java classes (Maven, Spark as a
# provided dependency from Maven Central, the line's shim from
# spark/src/line-L/java, chosen by the Maven profile spark-L); and
# spark/target/sluice-spark-examples.jar, the example and benchmark jobs (not
# shipped; the tests and benchmarks add it).
#
#   bash spark/build.sh [--line L | --all-lines | --wheel]
#
# By default the default line, 4.1 (Spark 4.1.1): spark/target/sluice-spark.jar,
# the jar the tests, benchmarks and README use, also copied to
# spark/target/sluice-spark-4.1_2.13.jar. --line 3.5, 4.0 or 4.2 builds that
# line's jar (spark/target/sluice-spark-4.0_2.13.jar, with its examples jar
# beside it; Spark 3.5's is Scala 2.12's, sluice-spark-3.5_2.12.jar); --line
# 4.3 builds Spark 4.3's (on PyPI, not on Maven Central: compiled against
# pyspark 4.3.0's jars); --all-lines builds every line. --wheel builds
# every line and the pip package `sluice-spark` (spark/python: the jars, the
# code that picks the installed pyspark's, the `sluice-spark` command) into
# spark/target/sluice_spark-VERSION-py3-none-manylinux_2_28_x86_64.whl.
#
# The native library (linux x86-64, the one platform the jar carries) is
# linked against glibc 2.28 (manylinux_2_28: RHEL/Rocky 8, Debian 10, Ubuntu
# 18.10 and later) with zig as the linker (cargo-zigbuild and ziglang from
# PyPI, pinned in spark/build-requirements.txt, installed into
# spark/.venv-build), and the build fails if the library needs a newer glibc
# symbol than that. SLUICE_NATIVE_GLIBC=host links against this machine's
# glibc instead (no download; the jar then loads only on as new a glibc).
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=(3.5 4.0 4.1 4.2 4.3)
DEFAULT_LINE=4.1
# The Scala version of each line's Spark (the jar's name ends in it).
declare -A SCALA=([3.5]=2.12 [4.0]=2.13 [4.1]=2.13 [4.2]=2.13 [4.3]=2.13)
# Lines whose Spark jars are on PyPI (in pyspark) but not on Maven Central:
# compiled with javac against the jars of that pyspark, in spark/.venv-spark-L.
declare -A PYPI_ONLY=([4.3]=4.3.0)
lines=("$DEFAULT_LINE")
wheel=0
case "${1:-}" in
  "") ;;
  --all-lines) lines=("${LINES[@]}") ;;
  --wheel) lines=("${LINES[@]}"); wheel=1 ;;
  --line)
    [[ " ${LINES[*]} " == *" ${2:-} "* ]] || { echo "--line takes one of: ${LINES[*]}" >&2; exit 2; }
    lines=("$2") ;;
  *) echo "usage: bash spark/build.sh [--line L | --all-lines | --wheel]" >&2; exit 2 ;;
esac

# Cargo's target directory: ./target, or where CARGO_TARGET_DIR (or a cargo
# config) puts it.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
GLIBC_FLOOR=2.28
tools=spark/.venv-build
if [ "${SLUICE_NATIVE_GLIBC:-}" = host ]; then
  [ "$wheel" = 0 ] || { echo "--wheel needs the glibc $GLIBC_FLOOR build (no SLUICE_NATIVE_GLIBC=host)" >&2; exit 2; }
  cargo build --release --locked -p sluice-jni
  library=$target_dir/release/libsluice_jni.so
else
  [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check -r spark/build-requirements.txt
  triple=x86_64-unknown-linux-gnu
  PATH="$PWD/$tools/bin:$PATH" cargo zigbuild --release --locked -p sluice-jni \
    --target "$triple.$GLIBC_FLOOR"
  library=$target_dir/$triple/release/libsluice_jni.so
  # The newest glibc symbol version the library needs: at most the floor.
  needs=$(objdump -T "$library" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ "$(printf '%s\n%s\n' "$needs" "$GLIBC_FLOOR" | sort -V | tail -1)" != "$GLIBC_FLOOR" ]; then
    echo "the native library needs glibc $needs, more than the $GLIBC_FLOOR it is built for" >&2
    exit 1
  fi
  echo "native library: needs glibc $needs at most (built for $GLIBC_FLOOR)"
fi
native=spark/target/native/native/linux-x86_64
mkdir -p "$native"
# The release profile keeps debug info for profiling; the jar does not need it.
strip --strip-debug -o "$native/libsluice_jni.so" "$library"
# A line from pyspark's jars: the main classes (not the examples), the
# line's shim, the resources Maven would add, the line's version filled in.
build_from_pyspark() {
  local line=$1 version=$2 venv=spark/.venv-spark-$1 out=spark/target/line-$1
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if [ "$("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)" != "$version" ]; then
    "$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$version"
  fi
  local jars
  jars=$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars
  rm -rf "$out/classes" "$out/examples" && mkdir -p "$out/classes/dev/sluice/spark" "$out/examples"
  javac --release 17 -nowarn -encoding UTF-8 -d "$out/classes" -cp "$jars/*" \
    $(find spark/src/main/java "spark/src/line-$line/java" spark/src/line-4.1-on/java \
      spark/src/line-4.x/java -name '*.java')
  # The example and benchmark jobs go to their own jar, as Maven puts them.
  mv "$out/classes/dev/sluice/spark/examples" "$out/examples/"
  cp -r spark/src/main/resources/META-INF spark/target/native/native "$out/classes/"
  sed -e "s/\${spark.version}/$version/" -e "s/\${scala.binary.version}/${SCALA[$line]}/" \
    spark/src/main/resources/sluice-build.properties > "$out/classes/sluice-build.properties"
  jar --create --file "spark/target/sluice-spark-${line}_${SCALA[$line]}.jar" -C "$out/classes" .
  mkdir -p "$out/examples/dev/sluice/spark" && mv "$out/examples/examples" "$out/examples/dev/sluice/spark/"
  jar --create --file "spark/target/sluice-spark-examples-${line}_${SCALA[$line]}.jar" -C "$out/examples" .
  echo "built $(pwd)/spark/target/sluice-spark-${line}_${SCALA[$line]}.jar (Spark $line, from pyspark $version's jars)"
}
for line in "${lines[@]}"; do
  if [ -n "${PYPI_ONLY[$line]:-}" ]; then
    build_from_pyspark "$line" "${PYPI_ONLY[$line]}"
    continue
  fi
  (cd spark && mvn -q -B package -Dmaven.test.skip=true "-Pspark-$line")
  if [ "$line" = "$DEFAULT_LINE" ]; then
    built=spark/target
  else
    built=spark/target/line-$line
  fi
  cp "$built/sluice-spark.jar" "spark/target/sluice-spark-${line}_${SCALA[$line]}.jar"
  cp "$built/sluice-spark-examples.jar" "spark/target/sluice-spark-examples-${line}_${SCALA[$line]}.jar"
  echo "built $(pwd)/spark/target/sluice-spark-${line}_${SCALA[$line]}.jar (Spark $line)"
done
if [[ " ${lines[*]} " == *" $DEFAULT_LINE "* ]]; then
  echo "built $(pwd)/spark/target/sluice-spark.jar and sluice-spark-examples.jar"
fi
if [ "$wheel" = 1 ]; then
  # A copy of spark/python with the jars in its package, built without
  # network access to a build backend (the pinned setuptools is in
  # spark/.venv-build), then tagged for the platform the native library is
  # built for.
  stage=spark/target/python
  rm -rf "$stage" spark/target/sluice_spark-*.whl && cp -r spark/python "$stage"
  mkdir -p "$stage/sluice_spark/jars"
  for line in "${LINES[@]}"; do
    cp "spark/target/sluice-spark-${line}_${SCALA[$line]}.jar" "$stage/sluice_spark/jars/"
  done
  "$tools/bin/pip" wheel -q --no-deps --no-build-isolation -w spark/target "$stage"
  "$tools/bin/python" -m wheel tags --remove --platform-tag "manylinux_${GLIBC_FLOOR/./_}_x86_64" \
    spark/target/sluice_spark-*-py3-none-any.whl >/dev/null
  echo "built $(ls "$(pwd)"/spark/target/sluice_spark-*.whl)"
fi
