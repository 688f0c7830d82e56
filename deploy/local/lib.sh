# shellcheck shell=bash
# Shared helpers of deploy/local/*.sh. Sourced, not run.
#
# Two places hold state:
#   SERVICES ($RMQGUARD_SERVICES_DIR, default ~/.local/state/rmqguard): the services of `make up`, one set per
#     machine (per user) whatever clone starts or stops them: data, logs, pid files (SVC_RUN), the MariaDB
#     socket, Prometheus's config, data and targets/. up.sh reuses what runs there, or on the services' ports.
#   LOCAL ($REPO/.local, git-ignored): this checkout's own things: built binaries, demo and chaos state, and the
#     servers of tests and chaos (mariadb-instance.sh, broker-instance.sh; pid files in RUN_DIR).
# The RocketMQ jars are cached per pom.xml content under ${XDG_CACHE_HOME:-~/.cache}/rmqguard (RMQ_LIB).

LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$LIB_DIR/../.." && pwd)"
LOCAL="$REPO/.local"
RUN_DIR="$LOCAL/run"

# shellcheck source=deploy/local/env.sh
source "$LIB_DIR/env.sh"

mkdir -p "$RMQGUARD_SERVICES_DIR"
SERVICES="$(cd "$RMQGUARD_SERVICES_DIR" && pwd)"
SVC_RUN="$SERVICES/run"
export REPO LOCAL RUN_DIR SERVICES SVC_RUN

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# port_open HOST PORT: true when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# addr_port HOST:PORT: the port (the first address of a comma-separated list).
addr_port() {
  local a=${1%%,*}
  [[ ${a##*:} =~ ^[0-9]+$ ]] || die "address '$1': want HOST:PORT"
  echo "${a##*:}"
}

# pid_alive PIDFILE PATTERN: true when PIDFILE names a live process whose command line contains PATTERN
# (guards against a stale pid file whose pid was reused).
pid_alive() {
  local pidfile=$1 pattern=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

# wait_until SECONDS DESCRIPTION CMD...: run CMD every 0.5 s until it succeeds; die after SECONDS.
wait_until() {
  local timeout=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      die "timed out after ${timeout}s waiting for $what"
    fi
    sleep 0.5
  done
}

# services_lock SCRIPT ARGS...: run SCRIPT again while holding $SERVICES/lock, so that up.sh and down.sh of
# two clones take turns. flock -o: the servers the script starts do not inherit the lock.
services_lock() {
  if [[ -n ${RMQGUARD_SERVICES_LOCKED:-} ]]; then
    unset RMQGUARD_SERVICES_LOCKED # the run under the lock; the servers it starts do not see the marker
    return 0
  fi
  export RMQGUARD_SERVICES_LOCKED=1
  flock -n -o "$SERVICES/lock" true || log "waiting for another make up/down (lock $SERVICES/lock)"
  exec flock -o "$SERVICES/lock" bash "$@"
}

# stop_pidfile NAME PIDFILE PATTERN [TIMEOUT]: SIGTERM the process, wait for it to exit, SIGKILL after TIMEOUT s.
stop_pidfile() {
  local name=$1 pidfile=$2 pattern=$3 timeout=${4:-30} pid deadline
  if ! pid_alive "$pidfile" "$pattern"; then
    rm -f "$pidfile"
    log "$name: not running"
    return 0
  fi
  pid=$(<"$pidfile")
  log "$name: stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "$name: still running after ${timeout}s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.3
  done
  rm -f "$pidfile"
  log "$name: stopped"
}

# ------------------------------------------------------------------------ RocketMQ (up.sh, broker-instance.sh)
RMQ_SRC="$LIB_DIR/rocketmq"
RMQ_POM_SHA=$(sha256sum "$RMQ_SRC/pom.xml" | cut -c1-12)
RMQ_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/rmqguard"
RMQ_LIB="$RMQ_CACHE/rocketmq-lib-$RMQ_POM_SHA"
NAMESRV_MAIN=org.apache.rocketmq.namesrv.NamesrvStartup
BROKER_MAIN=org.apache.rocketmq.broker.BrokerStartup

# fetch_rocketmq: the server jars of rocketmq/pom.xml from Maven Central into RMQ_LIB, once per machine and pom
# content (a changed pom gets a directory of its own). Concurrent fetches are safe: each fills a directory of
# its own and the first to finish is kept.
fetch_rocketmq() {
  [[ -f $RMQ_LIB/.complete ]] && return 0
  local tmp="$RMQ_LIB.tmp.$$"
  mkdir -p "$RMQ_CACHE"
  rm -rf "$tmp"
  # An older make up kept the jars in the clone's .local/rocketmq/lib, marked with the pom's full hash.
  if [[ -f $LOCAL/rocketmq/lib/.pom.sha256 && $(<"$LOCAL/rocketmq/lib/.pom.sha256") == "$(sha256sum "$RMQ_SRC/pom.xml" | cut -d' ' -f1)" ]]; then
    log "rocketmq: copying the jars of $LOCAL/rocketmq/lib into $RMQ_LIB"
    cp -a "$LOCAL/rocketmq/lib" "$tmp"
  else
    log "rocketmq: fetching server jars from Maven Central into $RMQ_LIB"
    mvn -B -q -f "$RMQ_SRC/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$tmp" >"$RMQ_LIB.mvn.log" 2>&1 ||
      die "rocketmq: maven fetch failed, see $RMQ_LIB.mvn.log"
  fi
  touch "$tmp/.complete"
  if mv -T "$tmp" "$RMQ_LIB" 2>/dev/null; then
    log "rocketmq: $(find "$RMQ_LIB" -name '*.jar' | wc -l) jars in $RMQ_LIB"
  else
    rm -rf "$tmp" # another fetch finished first
  fi
  [[ -f $RMQ_LIB/.complete ]] || die "rocketmq: no jars in $RMQ_LIB after the fetch"
}

# JDK 17 module flags: the store cleans mmap'ed buffers and reads direct-buffer internals by reflection.
JDK_OPENS=(
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
)

# render_namesrv_conf OUT PORT: rocketmq/namesrv.conf.tmpl with its listen port.
render_namesrv_conf() {
  mkdir -p "$(dirname "$1")"
  sed "s#@LISTEN_PORT@#$2#g" "$RMQ_SRC/namesrv.conf.tmpl" >"$1.new"
  mv "$1.new" "$1"
}

# render_broker_conf OUT STORE_DIR NAMESRV_ADDR LISTEN_PORT: rocketmq/broker.conf.tmpl with its store, name
# server and listen port (the broker also binds LISTEN_PORT-2 and LISTEN_PORT+1).
render_broker_conf() {
  mkdir -p "$(dirname "$1")" "$2"
  sed -e "s#@STORE_DIR@#$2#g" -e "s#@NAMESRV_ADDR@#$3#g" -e "s#@LISTEN_PORT@#$4#g" \
    "$RMQ_SRC/broker.conf.tmpl" >"$1.new"
  mv "$1.new" "$1"
}

# java_namesrv HOME CONF PIDFILE: start a name server from $RMQ_LIB in the background with config CONF; its
# logs go under HOME/logs (stdout in namesrv.out, RocketMQ logs in rocketmqlogs/). The caller waits for its port.
java_namesrv() {
  local home=$1 conf=$2 pidfile=$3
  mkdir -p "$home/logs"
  # user.home decides the log folder; the namesrv's own logback file is picked explicitly because the broker
  # jar on the same class path would win otherwise.
  ROCKETMQ_HOME="$home" setsid java -server -Xms128m -Xmx256m -XX:MaxDirectMemorySize=128m -XX:+UseG1GC \
    "${JDK_OPENS[@]}" -Duser.home="$home" -Drmq.logback.configurationFile=rmq.namesrv.logback.xml \
    -cp "$RMQ_LIB/*" "$NAMESRV_MAIN" -c "$conf" </dev/null >"$home/logs/namesrv.out" 2>&1 &
  echo $! >"$pidfile"
}

# java_broker HOME CONF PIDFILE: start a broker from $RMQ_LIB in the background with config CONF; logs under
# HOME/logs as for java_namesrv. The caller waits for its port.
java_broker() {
  local home=$1 conf=$2 pidfile=$3
  mkdir -p "$home/logs"
  ROCKETMQ_HOME="$home" setsid java -server -Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m -XX:+UseG1GC \
    "${JDK_OPENS[@]}" -Duser.home="$home" \
    -cp "$RMQ_LIB/*" "$BROKER_MAIN" -c "$conf" </dev/null >>"$home/logs/broker.out" 2>&1 &
  echo $! >"$pidfile"
}
