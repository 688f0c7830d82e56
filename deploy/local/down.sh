#!/usr/bin/env bash
# Stop the services that deploy/local/up.sh started (pid files in $RMQGUARD_SERVICES_DIR/run), newest first, for
# every clone that uses them; then this checkout's own test and chaos servers (.local/run). Servers that up.sh
# found already running and reused are not touched. State is kept.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
services_lock "${BASH_SOURCE[0]}" "$@"
trap 'echo "[down.sh] ERROR: exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR

# stop_services RUN: the five services whose pid files are in RUN.
stop_services() {
  local run=$1
  stop_pidfile prometheus "$run/prometheus.pid" "--web.listen-address=$RMQGUARD_PROMETHEUS_ADDR" 30
  stop_pidfile "rocketmq broker" "$run/broker.pid" "$BROKER_MAIN" 60
  stop_pidfile "rocketmq namesrv" "$run/namesrv.pid" "$NAMESRV_MAIN" 30
  stop_pidfile "redis" "$run/redis.pid" redis-server 30
  stop_pidfile "mariadb" "$run/mariadb.pid" mariadbd 60
}

stop_services "$SVC_RUN"
# An older make up kept the services' pid files in the clone's .local/run.
for svc in mariadb redis namesrv broker prometheus; do
  [[ -e $RUN_DIR/$svc.pid ]] || continue
  log "stopping the services an older make up started from this clone ($RUN_DIR)"
  stop_services "$RUN_DIR"
  break
done
# Throwaway MariaDB servers of tests and chaos scenarios (deploy/local/mariadb-instance.sh).
for pidfile in "$RUN_DIR"/mdb-*.pid; do
  [[ -e $pidfile ]] || continue
  name=${pidfile##*/mdb-}
  stop_pidfile "mariadb instance ${name%.pid}" "$pidfile" mariadbd 60
done
# Name servers and brokers of chaos runs (deploy/local/broker-instance.sh), brokers first.
for pidfile in "$RUN_DIR"/rmq-*-broker.pid "$RUN_DIR"/rmq-*-namesrv.pid; do
  [[ -e $pidfile ]] || continue
  name=${pidfile##*/rmq-}
  name=${name%.pid}
  case $name in
  *-broker) stop_pidfile "rocketmq broker instance ${name%-broker}" "$pidfile" "$BROKER_MAIN" 60 ;;
  *) stop_pidfile "rocketmq namesrv instance ${name%-namesrv}" "$pidfile" "$NAMESRV_MAIN" 30 ;;
  esac
done
