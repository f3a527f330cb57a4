#!/usr/bin/env bash
# PostgreSQL and Redis on 127.0.0.1 for the integration and browser tests: used by .ci/run and `make test`.
#
#   bash scripts/services.sh            start PostgreSQL and Redis if they are installed but not running (as root, or
#                                       with sudo -n); never installs anything (`make test`)
#   bash scripts/services.sh --install  also install what is missing with apt-get (.ci/run)
#
# Then makes sure the database `fabric_planner` exists. Exit 0 when both answer on 127.0.0.1 (5432, 6379); otherwise
# exit 1 after one line on stderr saying what is missing. Without root or sudo nothing is started, and nothing fails
# but the exit status. Messages go to stderr; stdout stays empty.
set -uo pipefail

INSTALL=0
[ "${1:-}" = "--install" ] && INSTALL=1
start=$(date +%s)
log() { echo "[services $(( $(date +%s) - start ))s] $*" >&2; }
missing() { echo "services: $*" >&2; exit 1; }

can_root() { [ "$(id -u)" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
ensure_installed() {  # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  [ "$INSTALL" = 1 ] || missing "$2 is not installed (bash .ci/run installs it)"
  can_root || missing "$2 is not installed and installing it needs root or sudo"
  log "installing $2"
  apt_install "$2" || missing "could not install $2"
}

# --- PostgreSQL ---------------------------------------------------------------------------------------
ensure_installed pg_isready postgresql
if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  can_root || missing "PostgreSQL is installed but not running, and starting it needs root or sudo"
  log "starting PostgreSQL"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  for _ in $(seq 1 60); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 -q || missing "PostgreSQL is not reachable on 127.0.0.1:5432"

# --- Redis --------------------------------------------------------------------------------------------
ensure_installed redis-server redis-server
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  can_root || missing "Redis is installed but not running, and starting it needs root or sudo"
  log "starting Redis"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || missing "Redis is not reachable on 127.0.0.1:6379"

# --- the database -------------------------------------------------------------------------------------
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='fabric_planner'" 2>/dev/null | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE fabric_planner" >/dev/null \
  || missing "cannot create the database fabric_planner as user postgres on 127.0.0.1"
exit 0
