#!/usr/bin/env bash
# Stop the services that deploy/local/up.sh started (those with a pid file under .local/run), newest first.
# Servers that up.sh found already running and reused are not touched. State under .local is kept.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
trap 'echo "[down.sh] ERROR: exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR

"$LIB_DIR/prometheus-instance.sh" stop
stop_pidfile "rocketmq broker" "$RUN_DIR/broker.pid" org.apache.rocketmq.broker.BrokerStartup 60
stop_pidfile "rocketmq namesrv" "$RUN_DIR/namesrv.pid" org.apache.rocketmq.namesrv.NamesrvStartup 30
stop_pidfile "redis" "$RUN_DIR/redis.pid" redis-server 30
stop_pidfile "mariadb" "$RUN_DIR/mariadb.pid" mariadbd 60
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
