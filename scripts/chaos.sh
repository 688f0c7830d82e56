#!/usr/bin/env bash
# make chaos: start a chaos stack of its own (never the shared services): a MariaDB on 127.0.0.1:13400
# (deploy/local/mariadb-instance.sh, instance "chaos") and a RocketMQ name server and broker on 19876/20911
# (deploy/local/broker-instance.sh, instance "chaos"; the broker also binds 20909 and 20912). Then run the
# scenarios (five on OrderCreated messages, three with outbox rows and effects in flight) with two example
# consumers of one group each; stop the stack at the end, whatever happened.
# Each scenario ends with "chaos: ok …" or "chaos: FAILED …"; exit 1 when any failed.
# Arguments are passed to the chaos command, e.g. `scripts/chaos.sh --scenarios mariadb-stop` or `--short`.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

name=chaos
mdb_port=${CHAOS_MARIADB_PORT:-13400}
ns_port=${CHAOS_NAMESRV_PORT:-19876}
broker_port=${CHAOS_BROKER_PORT:-20911}
state="$repo/.local/chaos"
mkdir -p "$state/bin"

echo "chaos: building cmd/example-consumer and the chaos command"
go build -o "$state/bin/example-consumer" ./cmd/example-consumer
go build -o "$state/bin/chaos" ./tools/chaos/cmd/chaos

chaos_pid=""
stop_stack() {
  # The chaos command stops its consumers when told to (SIGTERM), before the stack goes away under them.
  if [[ -n $chaos_pid ]] && kill -0 "$chaos_pid" 2>/dev/null; then
    kill -TERM "$chaos_pid" 2>/dev/null || true
    wait "$chaos_pid" 2>/dev/null || true
  fi
  echo "chaos: stopping the chaos stack"
  deploy/local/broker-instance.sh stop "$name" || true
  deploy/local/mariadb-instance.sh stop "$name" || true
}
trap stop_stack EXIT

# A fresh stack for every run: no offsets, topics or rows of an earlier run.
deploy/local/broker-instance.sh remove "$name"
deploy/local/mariadb-instance.sh remove "$name"
rm -rf "$state/logs"
echo "chaos: starting MariaDB on 127.0.0.1:$mdb_port, name server on 127.0.0.1:$ns_port, broker on 127.0.0.1:$broker_port"
deploy/local/mariadb-instance.sh start "$name" "$mdb_port" >/dev/null
deploy/local/broker-instance.sh start "$name" "$ns_port" "$broker_port" >/dev/null

"$state/bin/chaos" --repo "$repo" --consumer-bin "$state/bin/example-consumer" \
  --mariadb-instance "$name" --broker-instance "$name" \
  --namesrv "127.0.0.1:$ns_port" --broker "127.0.0.1:$broker_port" --log-dir "$state/logs" "$@" &
chaos_pid=$!
status=0
wait "$chaos_pid" || status=$?
chaos_pid=""
exit "$status"
