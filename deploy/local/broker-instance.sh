#!/usr/bin/env bash
# A RocketMQ name server and broker of their own, for chaos scenarios that stop or restart a broker without
# touching the shared pair that `make up` starts on 9876/10911. Same jars (the machine's cache, lib.sh
# fetch_rocketmq) and the same broker.conf template (all delay levels 1 s). State under this checkout's
# .local/instances/rmq-NAME.
#
#   broker-instance.sh start NAME NS_PORT BROKER_PORT [EXTRA_CONF]  start the name server on 127.0.0.1:NS_PORT and
#                                         the broker on 127.0.0.1:BROKER_PORT (it also binds BROKER_PORT-2 and, on all
#                                         interfaces, BROKER_PORT+1); each is reused when it already runs;
#                                         EXTRA_CONF (a file) is appended to the broker's config, e.g. ACL settings;
#                                         waits until both listen; prints "namesrv=ADDR broker=ADDR"
#   broker-instance.sh join NAME NAMESRV_ADDR BROKER_PORT [EXTRA_CONF]  start only a broker on 127.0.0.1:BROKER_PORT,
#                                         registered with the running name server NAMESRV_ADDR (host:port), e.g. another
#                                         master of its cluster: EXTRA_CONF then sets a brokerName of its own
#   broker-instance.sh stop-broker NAME   SIGTERM the broker, wait for exit (SIGKILL after 60 s)
#   broker-instance.sh start-broker NAME  start the broker again, same port and store; waits until it listens
#   broker-instance.sh restart-broker NAME  stop-broker, then start-broker
#   broker-instance.sh stop NAME          stop the broker, then the name server
#   broker-instance.sh addr NAME          print "namesrv=ADDR broker=ADDR"
#   broker-instance.sh remove NAME        stop both and delete the state
# Exit status 0 on success; errors say what failed and where its log is.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() {
  sed -n '7,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

(($# >= 2)) || usage
cmd=$1 name=$2
[[ $name =~ ^[A-Za-z0-9_-]{1,32}$ ]] || die "instance name '$name': use 1..32 of A-Z a-z 0-9 _ -"
home="$LOCAL/instances/rmq-$name"
ns_pid="$RUN_DIR/rmq-$name-namesrv.pid"
broker_pid="$RUN_DIR/rmq-$name-broker.pid"

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (($1 > 1026 && $1 < 65535)); }
ports() {
  [[ -s $home/ports ]] || die "broker instance $name was never started"
  read -r NS_PORT BROKER_PORT <"$home/ports"
}
# namesrv_addr: the name server the broker registers with: the instance's own, or the one it joined.
namesrv_addr() { if [[ -s $home/namesrv ]]; then cat "$home/namesrv"; else echo "127.0.0.1:$NS_PORT"; fi; }
addr() { echo "namesrv=$(namesrv_addr) broker=127.0.0.1:$BROKER_PORT"; }

# wait_port PIDFILE PORT WHAT LOG: wait until PORT listens; die when the process exits or after 90 s. (Liveness by
# pid alone: right after the fork the process's command line is still the shell's, not java's.)
wait_port() {
  local deadline=$((SECONDS + 90)) pid
  pid=$(<"$1")
  until port_open 127.0.0.1 "$2"; do
    kill -0 "$pid" 2>/dev/null || die "$3 exited during start-up, see $4"
    ((SECONDS < deadline)) || die "$3 not listening on 127.0.0.1:$2 after 90 s, see $4"
    sleep 0.3
  done
}

start_namesrv() {
  pid_alive "$ns_pid" "$NAMESRV_MAIN" && return 0
  port_open 127.0.0.1 "$NS_PORT" && die "127.0.0.1:$NS_PORT is taken by another process"
  render_namesrv_conf "$home/conf/namesrv.conf" "$NS_PORT"
  java_namesrv "$home" "$home/conf/namesrv.conf" "$ns_pid"
  wait_port "$ns_pid" "$NS_PORT" "name server $name" "$home/logs/namesrv.out"
}

start_broker() {
  local p
  pid_alive "$broker_pid" "$BROKER_MAIN" && return 0
  for p in "$BROKER_PORT" $((BROKER_PORT - 2)) $((BROKER_PORT + 1)); do
    port_open 127.0.0.1 "$p" && die "127.0.0.1:$p (broker $name needs $((BROKER_PORT - 2)), $BROKER_PORT, $((BROKER_PORT + 1))) is taken"
  done
  render_broker_conf "$home/conf/broker.conf" "$home/store" "$(namesrv_addr)" "$BROKER_PORT"
  if [[ -f $home/conf/extra.conf ]]; then cat "$home/conf/extra.conf" >>"$home/conf/broker.conf"; fi
  java_broker "$home" "$home/conf/broker.conf" "$broker_pid"
  wait_port "$broker_pid" "$BROKER_PORT" "broker $name" \
    "$home/logs/broker.out, $home/logs/rocketmqlogs/broker.log"
}

stop_quiet() { stop_pidfile "$@" >/dev/null; }

case $cmd in
start)
  (($# == 4 || $# == 5)) || usage
  valid_port "$3" && valid_port "$4" || die "ports '$3' '$4': want 1027..65534"
  if (($# == 5)); then [[ -f $5 ]] || die "extra broker config '$5' is not a file"; fi
  fetch_rocketmq >&2
  mkdir -p "$home" "$RUN_DIR"
  if [[ -s $home/ports ]] && { pid_alive "$ns_pid" "$NAMESRV_MAIN" || pid_alive "$broker_pid" "$BROKER_MAIN"; }; then
    [[ $(<"$home/ports") == "$3 $4" ]] || die "broker instance $name already runs on ports $(<"$home/ports")"
  fi
  echo "$3 $4" >"$home/ports"
  rm -f "$home/namesrv"
  mkdir -p "$home/conf"
  if (($# == 5)); then cp "$5" "$home/conf/extra.conf"; else rm -f "$home/conf/extra.conf"; fi
  ports
  start_namesrv
  start_broker
  addr
  ;;
join)
  (($# == 4 || $# == 5)) || usage
  [[ $3 =~ ^[^:]+:[0-9]+$ ]] || die "name server '$3': want host:port"
  valid_port "$4" || die "port '$4': want 1027..65534"
  if (($# == 5)); then [[ -f $5 ]] || die "extra broker config '$5' is not a file"; fi
  fetch_rocketmq >&2
  mkdir -p "$home/conf" "$RUN_DIR"
  if [[ -s $home/ports ]] && pid_alive "$broker_pid" "$BROKER_MAIN"; then
    [[ $(<"$home/ports") == "0 $4" && $(namesrv_addr) == "$3" ]] || die "broker instance $name already runs on port $(<"$home/ports") with $(namesrv_addr)"
  fi
  echo "0 $4" >"$home/ports"
  echo "$3" >"$home/namesrv"
  if (($# == 5)); then cp "$5" "$home/conf/extra.conf"; else rm -f "$home/conf/extra.conf"; fi
  ports
  start_broker
  addr
  ;;
stop-broker)
  ports
  stop_quiet "broker $name" "$broker_pid" "$BROKER_MAIN" 60
  ;;
start-broker)
  ports
  [[ -s $home/namesrv ]] || pid_alive "$ns_pid" "$NAMESRV_MAIN" || die "name server of instance $name is not running (use start)"
  start_broker
  ;;
restart-broker)
  ports
  stop_quiet "broker $name" "$broker_pid" "$BROKER_MAIN" 60
  start_broker
  ;;
stop)
  stop_quiet "broker $name" "$broker_pid" "$BROKER_MAIN" 60
  stop_quiet "name server $name" "$ns_pid" "$NAMESRV_MAIN" 30
  ;;
addr)
  ports
  addr
  ;;
remove)
  stop_quiet "broker $name" "$broker_pid" "$BROKER_MAIN" 60
  stop_quiet "name server $name" "$ns_pid" "$NAMESRV_MAIN" 30
  rm -rf "$home"
  ;;
*) usage ;;
esac
