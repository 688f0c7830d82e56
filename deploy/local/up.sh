#!/usr/bin/env bash
# Start the local services of rmqguard without Docker: MariaDB, Redis, RocketMQ name server and broker,
# Prometheus (prometheus-instance.sh); installs Chromium for the console's browser tests (chromium.sh: a
# package, no server). One set per machine, shared by every clone: state, logs and pid files live in
# $RMQGUARD_SERVICES_DIR (default ~/.local/state/rmqguard), the RocketMQ jars in ~/.cache/rmqguard.
# Idempotent: a service that answers on its port is reused, whoever started it (any clone, a system service);
# a second run when everything is up takes a few seconds. Ports come from the addresses in env.sh.
# Stop with deploy/local/down.sh. See deploy/local/README.md.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
services_lock "${BASH_SOURCE[0]}" "$@"
trap 'echo "[up.sh] ERROR: exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR

mkdir -p "$SVC_RUN" "$LOCAL"
T0=$SECONDS

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

# ---------------------------------------------------------------------------------------------- packages
ensure_packages() {
  local missing=()
  command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]] || missing+=(mariadb-server)
  command -v mariadb >/dev/null 2>&1 || command -v mysql >/dev/null 2>&1 || missing+=(mariadb-client)
  { command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; } || missing+=(redis-server)
  ((${#missing[@]} == 0)) && return 0
  log "packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    $SUDO apt-get update -qq
  fi
  if ! $SUDO apt-get install -y -qq "${missing[@]}" >"$SERVICES/apt-install.log" 2>&1; then
    log "packages: install failed, running apt-get update and retrying"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >"$SERVICES/apt-install.log" 2>&1 ||
      die "apt-get install ${missing[*]} failed, see $SERVICES/apt-install.log"
  fi
}

# ----------------------------------------------------------------------------------------------- MariaDB
DB_PORT=$(addr_port "$RMQGUARD_DB_ADDR")
MDB_DIR="$SERVICES/mariadb"
MDB_DATA="$MDB_DIR/data"
MDB_SOCK="$SVC_RUN/mariadb.sock"
MDB_PID="$SVC_RUN/mariadb.pid"
MYSQL=""

sql_quote() { printf "%s" "${1//\'/\'\'}"; }

# setup_sql DB_PATTERN...: create the two databases and the user, and grant the user everything on each pattern.
setup_sql() {
  local u p db
  u=$(sql_quote "$RMQGUARD_DB_USER")
  p=$(sql_quote "$RMQGUARD_DB_PASSWORD")
  echo "CREATE DATABASE IF NOT EXISTS rmqguard CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
  echo "CREATE DATABASE IF NOT EXISTS rmqguard_test CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
  for host in 127.0.0.1 localhost; do
    echo "CREATE USER IF NOT EXISTS '$u'@'$host' IDENTIFIED BY '$p';"
    echo "ALTER USER '$u'@'$host' IDENTIFIED BY '$p';"
    for db in "$@"; do echo "GRANT ALL PRIVILEGES ON \`$db\`.* TO '$u'@'$host';"; done
  done
}

# user_ready: the user can query both databases over TCP.
user_ready() {
  local db
  for db in rmqguard rmqguard_test; do
    MYSQL_PWD="$RMQGUARD_DB_PASSWORD" "$MYSQL" --no-defaults --protocol=TCP -h127.0.0.1 -P"$DB_PORT" \
      -u"$RMQGUARD_DB_USER" -D "$db" -e 'SELECT 1' >/dev/null 2>&1 || return 1
  done
}

# reuse_mariadb: a server that make up did not start answers on DB_PORT. Used as it is when the user can query
# both databases (no root needed); otherwise set up as root over the default socket, with the user's rights
# limited to rmqguard, rmqguard_test and rmqguard_scratch_* (the server may hold other people's data).
reuse_mariadb() {
  if user_ready; then
    log "mariadb: reusing the server on 127.0.0.1:$DB_PORT (started outside $SERVICES; user $RMQGUARD_DB_USER keeps the rights it has there)"
    return 0
  fi
  log "mariadb: reusing the server on 127.0.0.1:$DB_PORT (started outside $SERVICES); creating user $RMQGUARD_DB_USER as root"
  # shellcheck disable=SC2086 # $SUDO is empty or one word
  setup_sql rmqguard rmqguard_test 'rmqguard\_scratch\_%' | $SUDO "$MYSQL" -uroot >/dev/null 2>"$MDB_DIR/setup.err" || true
  user_ready || die "mariadb: the server on 127.0.0.1:$DB_PORT was started outside $SERVICES and user $RMQGUARD_DB_USER cannot use databases rmqguard and rmqguard_test there (root: $(head -c 200 "$MDB_DIR/setup.err")); grant them as that server's root, or set RMQGUARD_DB_ADDR=127.0.0.1:<free port> for a server of make up's own"
}

start_mariadb() {
  local mariadbd admin
  # Looked up here, after ensure_packages: on a fresh machine they exist only from now on.
  mariadbd=$(command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd)
  MYSQL=$(command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null) || die "no mariadb/mysql client found"
  mkdir -p "$MDB_DIR"
  admin=("$MYSQL" --no-defaults -uroot -S "$MDB_SOCK")
  if pid_alive "$MDB_PID" mariadbd; then
    log "mariadb: running (pid $(<"$MDB_PID"))"
  elif port_open 127.0.0.1 "$DB_PORT"; then
    reuse_mariadb
    return 0
  else
    if [[ ! -d $MDB_DATA/mysql ]]; then
      log "mariadb: initialising $MDB_DATA"
      rm -rf "$MDB_DATA"
      mariadb-install-db --no-defaults --datadir="$MDB_DATA" --user="$(id -un)" \
        --auth-root-authentication-method=socket --skip-test-db >"$MDB_DIR/install.log" 2>&1 ||
        die "mariadb-install-db failed, see $MDB_DIR/install.log"
    fi
    log "mariadb: starting on 127.0.0.1:$DB_PORT"
    setsid "$mariadbd" --no-defaults --datadir="$MDB_DATA" --user="$(id -un)" \
      --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$MDB_SOCK" --pid-file="$MDB_DIR/mariadbd.pid" \
      --log-error="$MDB_DIR/error.log" --skip-name-resolve \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
      --innodb-buffer-pool-size=128M --max-connections=300 \
      </dev/null >>"$MDB_DIR/mariadbd.out" 2>&1 &
    echo $! >"$MDB_PID"
    wait_until 60 "mariadb to accept queries (log: $MDB_DIR/error.log)" "${admin[@]}" -e 'SELECT 1'
  fi
  # Our own server, a developer's: the user may create and use any database (`%`), e.g. one for your own consumer.
  setup_sql '%' | "${admin[@]}" >/dev/null 2>"$MDB_DIR/setup.err" ||
    die "mariadb: the setup SQL failed as root on $MDB_SOCK: $(head -c 300 "$MDB_DIR/setup.err")"
  user_ready || die "mariadb: user $RMQGUARD_DB_USER cannot query databases rmqguard and rmqguard_test over TCP 127.0.0.1:$DB_PORT"
  log "mariadb: ready (databases rmqguard, rmqguard_test; user $RMQGUARD_DB_USER may create others)"
}

# ------------------------------------------------------------------------------------------------- Redis
REDIS_PORT=$(addr_port "$RMQGUARD_REDIS_ADDR")
REDIS_DIR="$SERVICES/redis"
REDIS_PID="$SVC_RUN/redis.pid"

redis_ping() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }

start_redis() {
  if redis_ping; then
    if pid_alive "$REDIS_PID" redis-server; then
      log "redis: running (pid $(<"$REDIS_PID"))"
    else
      log "redis: reusing the server on 127.0.0.1:$REDIS_PORT (started outside $SERVICES)"
    fi
    return 0
  fi
  port_open 127.0.0.1 "$REDIS_PORT" &&
    die "redis: 127.0.0.1:$REDIS_PORT is taken but does not answer PING; stop that process or set RMQGUARD_REDIS_ADDR=127.0.0.1:<free port>"
  mkdir -p "$REDIS_DIR"
  log "redis: starting on 127.0.0.1:$REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --pidfile "$REDIS_PID" \
    --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" --save "" --appendonly no >/dev/null
  wait_until 30 "redis PING (log: $REDIS_DIR/redis.log)" redis_ping
  log "redis: ready"
}

# ---------------------------------------------------------------------------------------------- RocketMQ
NS_PORT=$(addr_port "$RMQGUARD_NAMESRV")
BROKER_PORT=$(addr_port "$RMQGUARD_BROKER_ADDR")
RMQ_DIR="$SERVICES/rocketmq"
RMQ_CONF="$RMQ_DIR/conf"
RMQ_LOGS="$RMQ_DIR/logs"
NAMESRV_PID="$SVC_RUN/namesrv.pid"
BROKER_PID="$SVC_RUN/broker.pid"
RMQGUARD_BIN="$LOCAL/bin/rmqguard"

# already_up NAME PIDFILE MAINCLASS PORT: true (and says so) when our process runs, or something else
# already listens on 127.0.0.1:PORT and is reused.
already_up() {
  if pid_alive "$2" "$3"; then
    log "rocketmq $1: running (pid $(<"$2"))"
    return 0
  fi
  if port_open 127.0.0.1 "$4"; then
    log "rocketmq $1: reusing what listens on 127.0.0.1:$4 (started outside $SERVICES)"
    return 0
  fi
  return 1
}

start_namesrv() {
  already_up namesrv "$NAMESRV_PID" "$NAMESRV_MAIN" "$NS_PORT" && return 0
  fetch_rocketmq
  mkdir -p "$RMQ_LOGS"
  log "rocketmq namesrv: starting on 127.0.0.1:$NS_PORT"
  render_namesrv_conf "$RMQ_CONF/namesrv.conf" "$NS_PORT"
  java_namesrv "$RMQ_DIR" "$RMQ_CONF/namesrv.conf" "$NAMESRV_PID"
  wait_until 60 "rocketmq namesrv port $NS_PORT (log: $RMQ_LOGS/namesrv.out)" port_open 127.0.0.1 "$NS_PORT"
  log "rocketmq namesrv: listening"
}

start_broker() {
  already_up broker "$BROKER_PID" "$BROKER_MAIN" "$BROKER_PORT" && return 0
  fetch_rocketmq
  render_broker_conf "$RMQ_CONF/broker.conf" "$RMQ_DIR/store" "127.0.0.1:$NS_PORT" "$BROKER_PORT"
  log "rocketmq broker: starting on 127.0.0.1:$BROKER_PORT"
  java_broker "$RMQ_DIR" "$RMQ_CONF/broker.conf" "$BROKER_PID"
  wait_until 90 "rocketmq broker port $BROKER_PORT (log: $RMQ_LOGS/broker.out, $RMQ_LOGS/rocketmqlogs/broker.log)" \
    port_open 127.0.0.1 "$BROKER_PORT"
  log "rocketmq broker: listening"
}

build_cli() {
  mkdir -p "$(dirname "$RMQGUARD_BIN")"
  (cd "$REPO" && go build -o "$RMQGUARD_BIN" ./cmd/rmqguard) || die "go build ./cmd/rmqguard failed"
}

ensure_topics() {
  log "rocketmq: waiting for the broker to register, ensuring topics, probing"
  # `topic ensure` first waits until the name server lists the broker (registration), then creates only the
  # topics without a route and waits until their routes are visible.
  "$RMQGUARD_BIN" topic ensure --namesrv "$RMQGUARD_NAMESRV" --broker "$RMQGUARD_BROKER_ADDR" \
    --queues 4 --timeout 90s RMQGUARD_PROBE RMQGUARD_DEMO_ORDER RMQGUARD_TEST_ORDER |
    sed 's/^/[topics] /'
  "$RMQGUARD_BIN" probe --namesrv "$RMQGUARD_NAMESRV" --topic RMQGUARD_PROBE --timeout 30s | sed 's/^/[probe] /'
}

# ------------------------------------------------------------------------------------------------- main
log "services: $SERVICES (RMQGUARD_SERVICES_DIR)"
ensure_packages
"$LIB_DIR/chromium.sh" install
start_mariadb
start_redis
build_cli &
BUILD_PID=$!
start_namesrv
start_broker
wait "$BUILD_PID" || die "go build ./cmd/rmqguard failed"
ensure_topics
"$LIB_DIR/prometheus-instance.sh" start
log "all services up in $((SECONDS - T0))s; source deploy/local/env.sh for the connection settings"
