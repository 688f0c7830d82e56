#!/usr/bin/env bash
# The local Prometheus server of `make up` (no Docker, no systemd): the Debian package's binary run by us,
# daemonized with a pid file like the other services, one per machine for every clone. Its config is a copy of
# deploy/prometheus/*.yml (prometheus.yml, rules.yml) of the checkout that ran `make up` last, in
# $RMQGUARD_SERVICES_DIR/prometheus; it scrapes the example consumer on 127.0.0.1:9464 and every target listed
# in $RMQGUARD_SERVICES_DIR/prometheus/targets/*.yml (file_sd: a file added there is scraped within seconds).
#
#   prometheus-instance.sh start    install the package when missing, copy this checkout's config and rules,
#                                   start on RMQGUARD_PROMETHEUS_ADDR (127.0.0.1:9090) and wait for /-/ready.
#                                   Already running: reload (SIGHUP), same data and targets. A server that
#                                   make up did not start answers there: reused as it is, with a note.
#   prometheus-instance.sh stop     SIGTERM, wait for exit (SIGKILL after 30 s)
#   prometheus-instance.sh status   exit 0 when ours is running and ready
#   prometheus-instance.sh install  only install the package (prometheus and promtool; make test-rules uses it)
# State under $RMQGUARD_SERVICES_DIR: prometheus/{data (TSDB, 2 days),targets,prometheus.log}, run/prometheus.pid.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

PROM_DIR="$SERVICES/prometheus"
PROM_PID="$SVC_RUN/prometheus.pid"
PROM_SRC="$REPO/deploy/prometheus"
PROM_CONFIG="$PROM_DIR/prometheus.yml"
PROM_ADDR="$RMQGUARD_PROMETHEUS_ADDR"
# Matched against the running process's command line (pid_alive) so a reused pid is never taken for ours.
PROM_PATTERN="--web.listen-address=$PROM_ADDR"

usage() {
  sed -n '8,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ready: GET /-/ready answers 200 (bash's /dev/tcp, as scripts/demo.sh does: no curl needed).
ready() {
  local reply=""
  { exec 3<>"/dev/tcp/${PROM_ADDR%:*}/${PROM_ADDR##*:}"; } 2>/dev/null || return 1
  if printf 'GET /-/ready HTTP/1.0\r\nHost: %s\r\n\r\n' "$PROM_ADDR" >&3 2>/dev/null; then
    IFS= read -r -t 5 reply <&3 || reply=""
  fi
  exec 3>&-
  [[ $reply == "HTTP/1."?" 200"* ]]
}

# install: the Debian package, without its recommends (prometheus-node-exporter). Its own service (on :9090,
# all interfaces, /etc/prometheus config) is not used: where the install started it (systemd or sysvinit; in
# containers policy-rc.d prevents that), it is stopped and disabled right after the install, and only then.
install() {
  command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && return 0
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  log "prometheus: installing the Debian package"
  export DEBIAN_FRONTEND=noninteractive
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || $sudo apt-get update -qq
  if ! $sudo apt-get install -y -qq --no-install-recommends prometheus >"$SERVICES/apt-prometheus.log" 2>&1; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends prometheus >"$SERVICES/apt-prometheus.log" 2>&1 ||
      die "apt-get install prometheus failed, see $SERVICES/apt-prometheus.log"
  fi
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    log "prometheus: stopping and disabling the package's own service (make up runs its own server)"
    $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
  elif [[ -x /etc/init.d/prometheus ]] && /etc/init.d/prometheus status >/dev/null 2>&1; then
    log "prometheus: stopping and disabling the package's own service (make up runs its own server)"
    $sudo /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    $sudo update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
}

# copy_config: this checkout's prometheus.yml and rule files (not the rule tests) into PROM_DIR, each file
# replaced in one rename so a reload never reads half a file. The targets/ folder is left as it is.
copy_config() {
  local f
  promtool check config "$PROM_SRC/prometheus.yml" >"$PROM_DIR/promtool-check.out" 2>&1 ||
    die "prometheus: $PROM_SRC/prometheus.yml is invalid: $(tail -5 "$PROM_DIR/promtool-check.out")"
  for f in "$PROM_SRC"/*.yml; do
    [[ $f == *_test.yml ]] && continue
    cp "$f" "$PROM_DIR/.${f##*/}.new"
    mv "$PROM_DIR/.${f##*/}.new" "$PROM_DIR/${f##*/}"
  done
  echo "$REPO" >"$PROM_DIR/config-from"
}

# foreign_note: one line on the server that answers on PROM_ADDR without being ours.
foreign_note() {
  local pid cfg=""
  pid=$(pgrep -f -- "$PROM_PATTERN" | head -1 || true)
  [[ -n $pid ]] && cfg=" (pid $pid, $(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -m1 -e '^--config.file=' || true))"
  log "prometheus: reusing the server on $PROM_ADDR started outside $SERVICES$cfg, with its own config, rules and targets; to replace it, stop it and run make up again, or set RMQGUARD_PROMETHEUS_ADDR=127.0.0.1:<free port>"
}

start() {
  install
  mkdir -p "$PROM_DIR/data" "$PROM_DIR/targets" "$SVC_RUN"
  if pid_alive "$PROM_PID" "$PROM_PATTERN"; then
    copy_config
    kill -HUP "$(<"$PROM_PID")" # reload: picks up changed rules and scrape settings
    wait_until 30 "prometheus /-/ready on $PROM_ADDR (log: $PROM_DIR/prometheus.log)" ready
    log "prometheus: running (pid $(<"$PROM_PID")), config and rules of $REPO loaded"
    return 0
  fi
  if port_open "${PROM_ADDR%:*}" "${PROM_ADDR##*:}"; then
    foreign_note
    return 0
  fi
  copy_config
  log "prometheus: starting on $PROM_ADDR"
  setsid prometheus --config.file="$PROM_CONFIG" "$PROM_PATTERN" \
    --storage.tsdb.path="$PROM_DIR/data" --storage.tsdb.retention.time=2d --web.enable-lifecycle \
    </dev/null >>"$PROM_DIR/prometheus.log" 2>&1 &
  echo $! >"$PROM_PID"
  wait_until 60 "prometheus /-/ready on $PROM_ADDR (log: $PROM_DIR/prometheus.log)" ready
  log "prometheus: ready on http://$PROM_ADDR (config and rules of $REPO; targets: $PROM_DIR/targets/*.yml)"
}

stop() { stop_pidfile prometheus "$PROM_PID" "$PROM_PATTERN" 30; }

(($# == 1)) || usage
case $1 in
start) start ;;
stop) stop ;;
status) pid_alive "$PROM_PID" "$PROM_PATTERN" && ready ;;
install) install ;;
*) usage ;;
esac
