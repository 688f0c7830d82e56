#!/usr/bin/env bash
# Builds the Java producer of the interop test (interop/java-producer, official RocketMQ Java client) with
# Maven when its last build did not finish or is older than its pom or sources: interop/java-producer/target/java-producer.jar
# and its runtime dependencies in target/lib (run it with java -cp 'target/java-producer.jar:target/lib/*').
# target/build.ok is written only after Maven succeeded: a build interrupted after the jar (Ctrl-C, a test's
# timeout, while the dependencies are copied) leaves none, so the next run builds again instead of taking a
# partial target/lib.
# Maven fetches the client and the plugins from Maven Central into ~/.m2 on first use. Prints nothing when the
# jar is up to date. Needs java (17+) and mvn; fails without them (`make interop-java`, `make test`).
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/interop/java-producer"
jar="$dir/target/java-producer.jar"
stamp="$dir/target/build.ok"

for tool in java mvn; do
  command -v "$tool" >/dev/null || {
    echo "interop-java: $tool not found (apt-get install openjdk-17-jdk-headless maven)" >&2
    exit 1
  }
done
if [[ -f "$stamp" && -f "$jar" && -d "$dir/target/lib" && -z "$(find "$dir/pom.xml" "$dir/src" -newer "$stamp" -print -quit)" ]]; then
  exit 0
fi
echo "+ mvn -B package -f interop/java-producer/pom.xml (java producer of the interop test)" >&2
# A dependency whose version changed must not stay on the class path beside its successor.
rm -rf "$dir/target/lib" "$stamp"
mkdir -p "$dir/target"
log="$dir/target/mvn.log"
if ! mvn -B -q -f "$dir/pom.xml" package >"$log" 2>&1; then
  cat "$log" >&2
  echo "interop-java: maven build failed (log above, also in $log)" >&2
  exit 1
fi
: >"$stamp"
