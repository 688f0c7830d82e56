#!/usr/bin/env bash
# Start the local services of rmqguard without Docker: MariaDB, Redis, RocketMQ name server and broker,
# Prometheus (prometheus-instance.sh).
# Idempotent: what already answers is left alone; a second run when everything is up takes a few seconds.
# All state lives under $REPO/.local (git-ignored). Stop with deploy/local/down.sh. See deploy/local/README.md.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
trap 'echo "[up.sh] ERROR: exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR

mkdir -p "$RUN_DIR"
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
  if ! $SUDO apt-get install -y -qq "${missing[@]}" >"$LOCAL/apt-install.log" 2>&1; then
    log "packages: install failed, running apt-get update and retrying"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >"$LOCAL/apt-install.log" 2>&1 ||
      die "apt-get install ${missing[*]} failed, see $LOCAL/apt-install.log"
  fi
}

# ----------------------------------------------------------------------------------------------- MariaDB
MDB_DIR="$LOCAL/mariadb"
MDB_DATA="$MDB_DIR/data"
MDB_SOCK="$RUN_DIR/mariadb.sock"
MDB_PID="$RUN_DIR/mariadb.pid"
MARIADBD=""
MYSQL=""

sql_quote() { printf "%s" "${1//\'/\'\'}"; }

start_mariadb() {
  local admin=()
  # Looked up here, after ensure_packages: on a fresh machine they exist only from now on.
  MARIADBD=$(command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd)
  MYSQL=$(command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null) || die "no mariadb/mysql client found"
  mkdir -p "$MDB_DIR"
  if pid_alive "$MDB_PID" mariadbd; then
    admin=("$MYSQL" --no-defaults -uroot -S "$MDB_SOCK")
    log "mariadb: running (pid $(<"$MDB_PID"))"
  elif port_open 127.0.0.1 3306; then
    # Someone else's server (e.g. a system service): reuse it; root via its default socket when we can.
    admin=("$MYSQL" -uroot)
    if [[ -n $SUDO ]]; then admin=("$SUDO" "${admin[@]}"); fi
    log "mariadb: reusing the server already listening on 127.0.0.1:3306"
  else
    mkdir -p "$MDB_DIR"
    if [[ ! -d $MDB_DATA/mysql ]]; then
      log "mariadb: initialising $MDB_DATA"
      rm -rf "$MDB_DATA"
      mariadb-install-db --no-defaults --datadir="$MDB_DATA" --user="$(id -un)" \
        --auth-root-authentication-method=socket --skip-test-db >"$MDB_DIR/install.log" 2>&1 ||
        die "mariadb-install-db failed, see $MDB_DIR/install.log"
    fi
    log "mariadb: starting on 127.0.0.1:3306"
    setsid "$MARIADBD" --no-defaults --datadir="$MDB_DATA" --user="$(id -un)" \
      --bind-address=127.0.0.1 --port=3306 --socket="$MDB_SOCK" --pid-file="$MDB_DIR/mariadbd.pid" \
      --log-error="$MDB_DIR/error.log" --skip-name-resolve \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
      --innodb-buffer-pool-size=128M --max-connections=300 \
      </dev/null >>"$MDB_DIR/mariadbd.out" 2>&1 &
    echo $! >"$MDB_PID"
    admin=("$MYSQL" --no-defaults -uroot -S "$MDB_SOCK")
    wait_until 60 "mariadb to accept queries (log: $MDB_DIR/error.log)" "${admin[@]}" -e 'SELECT 1'
  fi

  local u p
  u=$(sql_quote "$RMQGUARD_DB_USER")
  p=$(sql_quote "$RMQGUARD_DB_PASSWORD")
  if ! "${admin[@]}" >/dev/null 2>"$MDB_DIR/setup.err" <<SQL; then
CREATE DATABASE IF NOT EXISTS rmqguard CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS rmqguard_test CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS '$u'@'127.0.0.1' IDENTIFIED BY '$p';
CREATE USER IF NOT EXISTS '$u'@'localhost' IDENTIFIED BY '$p';
ALTER USER '$u'@'127.0.0.1' IDENTIFIED BY '$p';
ALTER USER '$u'@'localhost' IDENTIFIED BY '$p';
GRANT ALL PRIVILEGES ON rmqguard.* TO '$u'@'127.0.0.1';
GRANT ALL PRIVILEGES ON rmqguard_test.* TO '$u'@'127.0.0.1';
GRANT ALL PRIVILEGES ON rmqguard.* TO '$u'@'localhost';
GRANT ALL PRIVILEGES ON rmqguard_test.* TO '$u'@'localhost';
GRANT ALL PRIVILEGES ON \`rmqguard\\_scratch\\_%\`.* TO '$u'@'127.0.0.1';
GRANT ALL PRIVILEGES ON \`rmqguard\\_scratch\\_%\`.* TO '$u'@'localhost';
FLUSH PRIVILEGES;
SQL
    log "mariadb: could not run the setup SQL as root ($(head -c 300 "$MDB_DIR/setup.err")); checking the user"
  fi
  rm -f "$MDB_DIR/setup.err"
  local db
  for db in rmqguard rmqguard_test; do
    MYSQL_PWD="$RMQGUARD_DB_PASSWORD" "$MYSQL" --no-defaults --protocol=TCP -h127.0.0.1 -P3306 \
      -u"$RMQGUARD_DB_USER" -D "$db" -e 'SELECT 1' >/dev/null ||
      die "mariadb: user $RMQGUARD_DB_USER cannot query database $db over TCP 127.0.0.1:3306"
  done
  log "mariadb: ready (databases rmqguard, rmqguard_test; user $RMQGUARD_DB_USER)"
}

# ------------------------------------------------------------------------------------------------- Redis
REDIS_DIR="$LOCAL/redis"
REDIS_PID="$RUN_DIR/redis.pid"

redis_ping() { [[ $(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null) == PONG ]]; }

start_redis() {
  if redis_ping; then
    log "redis: running"
    return 0
  fi
  mkdir -p "$REDIS_DIR"
  log "redis: starting on 127.0.0.1:6379"
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --pidfile "$REDIS_PID" \
    --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" --save "" --appendonly no >/dev/null
  wait_until 30 "redis PING (log: $REDIS_DIR/redis.log)" redis_ping
  log "redis: ready"
}

# ---------------------------------------------------------------------------------------------- RocketMQ
RMQ_DIR="$LOCAL/rocketmq"
RMQ_CONF="$RMQ_DIR/conf"
RMQ_LOGS="$RMQ_DIR/logs"
NAMESRV_PID="$RUN_DIR/namesrv.pid"
BROKER_PID="$RUN_DIR/broker.pid"
RMQGUARD_BIN="$LOCAL/bin/rmqguard"

fetch_rocketmq() {
  local want have=""
  want=$(sha256sum "$RMQ_SRC/pom.xml" | cut -d' ' -f1)
  [[ -f $RMQ_LIB/.pom.sha256 ]] && have=$(<"$RMQ_LIB/.pom.sha256")
  if [[ $want == "$have" ]]; then
    return 0
  fi
  log "rocketmq: fetching server jars from Maven Central into $RMQ_LIB"
  rm -rf "$RMQ_LIB" "$RMQ_LIB.tmp"
  mkdir -p "$RMQ_DIR"
  mvn -B -q -f "$RMQ_SRC/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$RMQ_LIB.tmp" >"$RMQ_DIR/mvn.log" 2>&1 ||
    die "rocketmq: maven fetch failed, see $RMQ_DIR/mvn.log"
  mv "$RMQ_LIB.tmp" "$RMQ_LIB"
  echo "$want" >"$RMQ_LIB/.pom.sha256"
  log "rocketmq: $(find "$RMQ_LIB" -name '*.jar' | wc -l) jars fetched"
}

# already_up NAME PIDFILE MAINCLASS PORT: true (and says so) when our process runs, or something else
# already listens on 127.0.0.1:PORT and is reused.
already_up() {
  if pid_alive "$2" "$3"; then
    log "rocketmq $1: running (pid $(<"$2"))"
    return 0
  fi
  if port_open 127.0.0.1 "$4"; then
    log "rocketmq $1: something else listens on 127.0.0.1:$4, reusing it"
    return 0
  fi
  return 1
}

start_namesrv() {
  already_up namesrv "$NAMESRV_PID" "$NAMESRV_MAIN" 9876 && return 0
  mkdir -p "$RMQ_LOGS"
  log "rocketmq namesrv: starting on 127.0.0.1:9876"
  render_namesrv_conf "$RMQ_CONF/namesrv.conf" 9876
  java_namesrv "$RMQ_DIR" "$RMQ_CONF/namesrv.conf" "$NAMESRV_PID"
  wait_until 60 "rocketmq namesrv port 9876 (log: $RMQ_LOGS/namesrv.out)" port_open 127.0.0.1 9876
  log "rocketmq namesrv: listening"
}

start_broker() {
  already_up broker "$BROKER_PID" "$BROKER_MAIN" 10911 && return 0
  render_broker_conf "$RMQ_CONF/broker.conf" "$RMQ_DIR/store" 127.0.0.1:9876 10911
  log "rocketmq broker: starting on 127.0.0.1:10911"
  java_broker "$RMQ_DIR" "$RMQ_CONF/broker.conf" "$BROKER_PID"
  wait_until 90 "rocketmq broker port 10911 (log: $RMQ_LOGS/broker.out, $RMQ_LOGS/rocketmqlogs/broker.log)" \
    port_open 127.0.0.1 10911
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
mkdir -p "$LOCAL"
ensure_packages
start_mariadb
start_redis
fetch_rocketmq
build_cli &
BUILD_PID=$!
start_namesrv
start_broker
wait "$BUILD_PID" || die "go build ./cmd/rmqguard failed"
ensure_topics
"$LIB_DIR/prometheus-instance.sh" start
log "all services up in $((SECONDS - T0))s; source deploy/local/env.sh for the connection settings"
