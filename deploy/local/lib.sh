# shellcheck shell=bash
# Shared helpers of deploy/local/*.sh. Sourced, not run.

LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$LIB_DIR/../.." && pwd)"
LOCAL="$REPO/.local"
RUN_DIR="$LOCAL/run"
export REPO LOCAL RUN_DIR

# shellcheck source=deploy/local/env.sh
source "$LIB_DIR/env.sh"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# port_open HOST PORT: true when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

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
