#!/usr/bin/env bash
# A MariaDB server of its own, for tests and chaos scenarios that stop, kill, restart or make read-only a
# database without touching the shared one that `make up` starts on 3306. State under .local/instances/NAME.
#
#   mariadb-instance.sh start NAME PORT   initialise on first use, start on 127.0.0.1:PORT, create database
#                                         rmqguard and user rmqguard/rmqguard (no SUPER: read_only applies to
#                                         it), wait until it answers; prints the DSN. A running one is reused.
#   mariadb-instance.sh restart NAME      start again on the port it had, same data
#   mariadb-instance.sh stop NAME         SIGTERM, wait for exit (SIGKILL after 60 s)
#   mariadb-instance.sh kill NAME         SIGKILL
#   mariadb-instance.sh sql NAME SQL      run SQL as root over the instance's socket (e.g. SET GLOBAL read_only=1)
#   mariadb-instance.sh dsn NAME          print the DSN (go-sql-driver format, parseTime=true)
#   mariadb-instance.sh remove NAME       stop and delete its data
# Exit status 0 on success; errors say what failed and where its log is.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() {
  sed -n '4,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

(($# >= 2)) || usage
cmd=$1 name=$2
[[ $name =~ ^[A-Za-z0-9_-]{1,32}$ ]] || die "instance name '$name': use 1..32 of A-Z a-z 0-9 _ -"
dir="$LOCAL/instances/$name"
data="$dir/data"
sock="$RUN_DIR/mdb-$name.sock"
pidfile="$RUN_DIR/mdb-$name.pid"

mysql_client() { command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null || die "no mariadb client found (make up installs it)"; }
root_sql() { "$(mysql_client)" --no-defaults -uroot -S "$sock" -e "$1"; }
dsn() { echo "rmqguard:rmqguard@tcp(127.0.0.1:$(<"$dir/port"))/rmqguard?parseTime=true"; }

start() {
  local port=$1 mariadbd
  [[ $port =~ ^[0-9]+$ ]] && ((port > 1024 && port < 65536)) || die "port '$port': want 1025..65535"
  mkdir -p "$dir" "$RUN_DIR"
  if pid_alive "$pidfile" mariadbd; then
    [[ $(<"$dir/port") == "$port" ]] || die "instance $name already runs on port $(<"$dir/port")"
    dsn
    return 0
  fi
  port_open 127.0.0.1 "$port" && die "127.0.0.1:$port is taken by another process"
  if [[ ! -d $data/mysql ]]; then
    rm -rf "$data"
    mariadb-install-db --no-defaults --datadir="$data" --user="$(id -un)" \
      --auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1 ||
      die "mariadb-install-db failed, see $dir/install.log"
  fi
  echo "$port" >"$dir/port"
  mariadbd=$(command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd)
  setsid "$mariadbd" --no-defaults --datadir="$data" --user="$(id -un)" \
    --bind-address=127.0.0.1 --port="$port" --socket="$sock" --pid-file="$dir/mariadbd.pid" \
    --log-error="$dir/error.log" --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
    --innodb-buffer-pool-size=64M --max-connections=200 \
    </dev/null >>"$dir/mariadbd.out" 2>&1 &
  echo $! >"$pidfile"
  local deadline=$((SECONDS + 60))
  until root_sql 'SELECT 1' >/dev/null 2>&1; do
    # kill -0, not pid_alive: until setsid has exec'ed the server, the child's command line is still bash's.
    kill -0 "$(<"$pidfile")" 2>/dev/null || die "mariadb instance $name exited during start-up, see $dir/error.log"
    ((SECONDS < deadline)) || die "mariadb instance $name not answering after 60 s, see $dir/error.log"
    sleep 0.2
  done
  root_sql "CREATE DATABASE IF NOT EXISTS rmqguard CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'rmqguard'@'127.0.0.1' IDENTIFIED BY 'rmqguard';
GRANT ALL PRIVILEGES ON rmqguard.* TO 'rmqguard'@'127.0.0.1';" ||
    die "mariadb instance $name: setup SQL failed"
  dsn
}

stop() {
  local sig=$1 pid deadline
  if ! pid_alive "$pidfile" mariadbd; then
    rm -f "$pidfile"
    return 0
  fi
  pid=$(<"$pidfile")
  kill "-$sig" "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.1
  done
  rm -f "$pidfile" "$sock"
}

case $cmd in
start)
  (($# == 3)) || usage
  start "$3"
  ;;
restart)
  [[ -s $dir/port ]] || die "instance $name was never started"
  start "$(<"$dir/port")"
  ;;
stop) stop TERM ;;
kill) stop KILL ;;
sql)
  (($# == 3)) || usage
  root_sql "$3"
  ;;
dsn)
  [[ -s $dir/port ]] || die "instance $name was never started"
  dsn
  ;;
remove)
  stop TERM
  rm -rf "$dir"
  ;;
*) usage ;;
esac
