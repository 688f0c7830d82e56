#!/usr/bin/env bash
# make demo: start the notification receiver and the example consumer against the running services, send a
# workload with duplicates, transient failures and a poison message, verify exactly-once (the paid orders'
# outbox follow-ups included: loyalty credits, notifications), stop both gracefully.
# The last line is the verdict: "exactly-once: ok …" (exit 0) or "exactly-once: FAILED …" (exit 1).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
# shellcheck source=../deploy/local/env.sh
source deploy/local/env.sh

state="$repo/.local/demo"
mkdir -p "$state" "$repo/.local/bin"
bin="$repo/.local/bin/example-consumer"
go build -o "$bin" ./cmd/example-consumer

metrics_addr="${RMQGUARD_METRICS_ADDR:-127.0.0.1:9464}"
notify_addr="${RMQGUARD_NOTIFY_ADDR:-127.0.0.1:9477}"

# healthy: true when GET /healthz on $metrics_addr answers 200 (bash's /dev/tcp: no curl needed).
# The connect runs in a brace group whose stderr is /dev/null: bash prints "connect: Connection refused"
# while opening the redirection, and `exec 3<>… 2>/dev/null` would instead send the script's own stderr
# to /dev/null for good (exec without a command makes every redirection permanent). Only fd 3 stays open.
healthy() {
  local reply=""
  { exec 3<>"/dev/tcp/${metrics_addr%:*}/${metrics_addr##*:}"; } 2>/dev/null || return 1
  if printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$metrics_addr" >&3 2>/dev/null; then
    IFS= read -r -t 5 reply <&3 || reply=""
  fi
  exec 3>&-
  [[ "$reply" == "HTTP/1."?" 200"* ]]
}

if healthy; then
  echo "something already answers on $metrics_addr (an example consumer left running?); stop it or set RMQGUARD_METRICS_ADDR" >&2
  exit 1
fi

# The receiver of the paid orders' notification effect: counts calls per idempotency key (notify-receiver).
"$bin" notify-receiver --notify-addr "$notify_addr" >"$state/notify-receiver.log" 2>&1 &
receiver_pid=$!
for _ in $(seq 1 20); do
  if { exec 4<>"/dev/tcp/${notify_addr%:*}/${notify_addr##*:}"; } 2>/dev/null; then exec 4>&-; break; fi
  sleep 0.25
done
if ! kill -0 "$receiver_pid" 2>/dev/null; then
  echo "the notification receiver did not start on $notify_addr (port taken? set RMQGUARD_NOTIFY_ADDR):" >&2
  cat "$state/notify-receiver.log" >&2
  exit 1
fi

log="$state/consumer.log"
echo "starting the example consumer (log: ${log#"$repo"/})"
"$bin" run --metrics-addr "$metrics_addr" --notify-addr "$notify_addr" >"$log" 2>&1 &
pid=$!
stop_consumer() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  kill -TERM "$receiver_pid" 2>/dev/null || true
  wait "$receiver_pid" 2>/dev/null || true
}
trap stop_consumer EXIT

for i in $(seq 1 120); do
  if healthy; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "the example consumer exited during start-up; last lines of its log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  sleep 0.5
done
if ! healthy; then
  echo "the example consumer did not become healthy within 60 s; last lines of its log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
echo "consumer ready; metrics on http://$metrics_addr/metrics"

set +e
"$bin" demo --metrics-url "http://$metrics_addr/metrics" --notify-addr "$notify_addr" "$@" 2>&1 | tee "$state/demo.out"
status=${PIPESTATUS[0]}
set -e
# Stopping prints nothing, so the verdict stays the last line.
stop_consumer
trap - EXIT
exit "$status"
