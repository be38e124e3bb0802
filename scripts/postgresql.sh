#!/usr/bin/env bash
# A throwaway PostgreSQL cluster (the distribution's package: Debian's `postgresql`) for FerretDB's
# PostgreSQL backend in the tests and benchmarks. Nothing is installed or configured system-wide:
# the cluster lives in a directory of its own, listens on a Unix socket in that directory only (no
# TCP port to collide with anything), trusts local connections as user `arbiter`, and runs
# unprivileged (PostgreSQL refuses to run as root: as root, the cluster belongs to
# $POSTGRES_OS_USER, `nobody` by default, through runuser).
#
#   scripts/postgresql.sh bin           the directory of PostgreSQL's programs (PG_BIN, else the
#                                       newest /usr/lib/postgresql/*/bin, else pg_config's); fails without
#   scripts/postgresql.sh start <dir>   initdb <dir> when empty, start the server, print its connection URL
#   scripts/postgresql.sh stop <dir>    stop it (fast shutdown)
set -euo pipefail

os_user="${POSTGRES_OS_USER:-nobody}"

pg_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
  local newest
  newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [[ -n "$newest" ]]; then echo "$newest"; return; fi
  if command -v pg_config >/dev/null 2>&1; then pg_config --bindir; return; fi
  echo "PostgreSQL is not installed (apt-get install postgresql, or set PG_BIN to its bin directory)" >&2
  return 1
}

# Runs a PostgreSQL program as the cluster's owner: ourselves, or $os_user when we are root.
as_owner() {
  if [[ $EUID -eq 0 ]]; then runuser -u "$os_user" -- "$@"; else "$@"; fi
}

start() {
  local dir bin
  dir="$(realpath -m "$1")"
  bin="$(pg_bin)"
  mkdir -p "$dir"
  if [[ $EUID -eq 0 ]]; then
    chown "$os_user" "$dir"
    # The owner must be able to reach its directory: let it pass through the parent (not read it).
    chmod o+x "$(dirname "$dir")"
  fi
  if [[ ! -f "$dir/PG_VERSION" ]]; then
    as_owner "$bin/initdb" -D "$dir" -U arbiter --auth=trust --encoding=UTF8 --no-locale >"$dir.initdb.log" 2>&1 ||
      { cat "$dir.initdb.log" >&2; return 1; }
  fi
  # Durability as shipped (fsync on): the benchmark measures what a real deployment would pay.
  as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k '$dir' -c max_connections=200" start >/dev/null ||
    { cat "$dir/server.log" >&2; return 1; }
  echo "postgres://arbiter@/postgres?host=$dir"
}

stop() {
  local dir
  dir="$(realpath -m "$1")"
  [[ -f "$dir/postmaster.pid" ]] || return 0
  as_owner "$(pg_bin)/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
}

case "${1:-}" in
  bin) pg_bin ;;
  start)
    [[ $# -eq 2 ]] || { echo "usage: $0 start <dir>" >&2; exit 2; }
    start "$2"
    ;;
  stop)
    [[ $# -eq 2 ]] || { echo "usage: $0 stop <dir>" >&2; exit 2; }
    stop "$2"
    ;;
  *)
    echo "usage: $0 bin | start <dir> | stop <dir>" >&2
    exit 2
    ;;
esac
