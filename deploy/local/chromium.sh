#!/usr/bin/env bash
# Headless Chromium for the console's browser tests (internal/console; internal/testenv/browser.go starts it):
# the Debian package `chromium` (/usr/bin/chromium) with `fonts-liberation` (text in the screenshots), installed
# with apt-get and --no-install-recommends when missing. No server: each test starts and stops its own browser.
# Called by up.sh (local mode) and by `make up` in docker mode (the tests run on the host, not in a container).
#
#   chromium.sh install   install the packages when /usr/bin/chromium (or RMQGUARD_CHROMIUM) is missing
#   chromium.sh path      print the binary the tests use; exit 1 when there is none
set -Eeuo pipefail

# shellcheck source=deploy/local/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

# The binary the tests use: RMQGUARD_CHROMIUM when set (testenv reads the same variable), else Debian's.
CHROMIUM="${RMQGUARD_CHROMIUM:-/usr/bin/chromium}"

install() {
  if [[ -x $CHROMIUM ]]; then
    log "chromium: $CHROMIUM ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown'))"
    return 0
  fi
  [[ -n ${RMQGUARD_CHROMIUM:-} ]] && die "chromium: RMQGUARD_CHROMIUM=$RMQGUARD_CHROMIUM is not an executable"
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  log "chromium: installing the Debian packages chromium fonts-liberation (~300 MB, once)"
  export DEBIAN_FRONTEND=noninteractive
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || $sudo apt-get update -qq
  if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >"$SERVICES/apt-chromium.log" 2>&1; then
    log "chromium: install failed, running apt-get update and retrying"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >"$SERVICES/apt-chromium.log" 2>&1 ||
      die "apt-get install chromium fonts-liberation failed, see $SERVICES/apt-chromium.log"
  fi
  [[ -x $CHROMIUM ]] || die "chromium: installed, but $CHROMIUM is missing"
  log "chromium: ready ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown'))"
}

case "${1:-}" in
  install) install ;;
  path) [[ -x $CHROMIUM ]] && echo "$CHROMIUM" ;;
  *)
    sed -n '7,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
