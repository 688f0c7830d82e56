#!/usr/bin/env bash
# The local Prometheus server of `make up` (no Docker, no systemd): the Debian package's binary run by us,
# daemonized with a pid file like the other services, config deploy/prometheus/prometheus.yml of this
# checkout (scrapes the example consumer on 127.0.0.1:9464, evaluates deploy/prometheus/rules.yml).
#
#   prometheus-instance.sh start    install the package when missing, start on RMQGUARD_PROMETHEUS_ADDR
#                                   (127.0.0.1:9090) and wait for /-/ready. Already running with this
#                                   checkout's config: reload it (rules may have changed); with another
#                                   checkout's config: restart it with this one.
#   prometheus-instance.sh stop     SIGTERM, wait for exit (SIGKILL after 30 s)
#   prometheus-instance.sh status   exit 0 when ours is running and ready
#   prometheus-instance.sh install  only install the package (prometheus and promtool; make test-rules uses it)
# State: .local/prometheus/data (TSDB, 2 days), .local/prometheus/prometheus.log, .local/run/prometheus.pid.
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

PROM_DIR="$LOCAL/prometheus"
PROM_PID="$RUN_DIR/prometheus.pid"
PROM_CONFIG="$REPO/deploy/prometheus/prometheus.yml"
PROM_ADDR="$RMQGUARD_PROMETHEUS_ADDR"
# Matched against the running process's command line (pid_alive) so a reused pid is never taken for ours.
PROM_PATTERN="--web.listen-address=$PROM_ADDR"

usage() {
  sed -n '6,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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
  mkdir -p "$LOCAL"
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || $sudo apt-get update -qq
  if ! $sudo apt-get install -y -qq --no-install-recommends prometheus >"$LOCAL/apt-prometheus.log" 2>&1; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends prometheus >"$LOCAL/apt-prometheus.log" 2>&1 ||
      die "apt-get install prometheus failed, see $LOCAL/apt-prometheus.log"
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

running_config() { tr '\0' '\n' <"/proc/$(<"$PROM_PID")/cmdline" | sed -n 's/^--config.file=//p'; }

start() {
  install
  promtool check config "$PROM_CONFIG" >"$RUN_DIR/promtool-check.out" 2>&1 ||
    die "prometheus: $PROM_CONFIG is invalid: $(tail -5 "$RUN_DIR/promtool-check.out")"
  if pid_alive "$PROM_PID" "$PROM_PATTERN"; then
    if [[ $(running_config) == "$PROM_CONFIG" ]]; then
      kill -HUP "$(<"$PROM_PID")" # reload: picks up changed rules and scrape settings
      wait_until 30 "prometheus /-/ready on $PROM_ADDR (log: $PROM_DIR/prometheus.log)" ready
      log "prometheus: running (pid $(<"$PROM_PID")), config reloaded"
      return 0
    fi
    log "prometheus: running with $(running_config); restarting with $PROM_CONFIG"
    stop
  elif port_open "${PROM_ADDR%:*}" "${PROM_ADDR##*:}"; then
    die "prometheus: something else listens on $PROM_ADDR (the package's own service? \`service prometheus stop\`), or set RMQGUARD_PROMETHEUS_ADDR"
  fi
  mkdir -p "$PROM_DIR/data" "$RUN_DIR"
  log "prometheus: starting on $PROM_ADDR"
  setsid prometheus --config.file="$PROM_CONFIG" "$PROM_PATTERN" \
    --storage.tsdb.path="$PROM_DIR/data" --storage.tsdb.retention.time=2d --web.enable-lifecycle \
    </dev/null >>"$PROM_DIR/prometheus.log" 2>&1 &
  echo $! >"$PROM_PID"
  wait_until 60 "prometheus /-/ready on $PROM_ADDR (log: $PROM_DIR/prometheus.log)" ready
  log "prometheus: ready on http://$PROM_ADDR (rules: deploy/prometheus/rules.yml)"
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
