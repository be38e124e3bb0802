#!/usr/bin/env bash
# FerretDB 1.24 (MongoDB wire protocol over SQLite, or over PostgreSQL) for the MongoDB store
# tests, the multi-node tests and bench:scale.
#
#   scripts/ferretdb.sh build              build .bin/ferretdb-arbiter if missing or stale
#   scripts/ferretdb.sh start <port> <dir> build if needed, then run on 127.0.0.1:<port>
#                                          with its SQLite files in <dir> (foreground)
#   scripts/ferretdb.sh start-postgresql <port> <dir>
#                                          the same over PostgreSQL: a throwaway cluster in
#                                          <dir>/pg (scripts/postgresql.sh), stopped when
#                                          FerretDB stops (foreground; SIGTERM stops both)
#
# Either way FerretDB listens on <dir>/ferretdb.sock, and 127.0.0.1:<port> is the proxy of
# test/support/ferretdb/proxy.go in front of it, which serialises the write commands FerretDB
# does not apply atomically: on SQLite all writes, one at a time; on PostgreSQL findAndModify,
# update and delete, each only against the others on its document. FERRETDB_SERIALISE=<commands>|none
# and FERRETDB_LOCK=global|document override that (for experiments: see the atomicity test).
#
# The binary is our own tiny main (test/support/ferretdb) embedding FerretDB's
# library package: `go install .../cmd/ferretdb` panics on a missing version file.
set -euo pipefail

# Absolute, because the build runs from the Go module's own directory.
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/test/support/ferretdb"
bin_dir="$root/.bin"
binary="$bin_dir/ferretdb-arbiter"

go_tool() {
  if command -v go >/dev/null 2>&1; then echo go; else echo /usr/local/go/bin/go; fi
}

is_fresh() {
  [[ -x "$binary" ]] || return 1
  local source
  for source in "$src"/*.go "$src/go.mod" "$src/go.sum"; do
    [[ "$binary" -nt "$source" ]] || return 1
  done
}

build() {
  is_fresh && return 0
  mkdir -p "$bin_dir"
  # Build to a temporary name and rename, so a parallel start never runs a half-written file.
  local tmp="$binary.tmp.$$"
  (cd "$src" && GOFLAGS=-buildvcs=false "$(go_tool)" build -o "$tmp" .)
  mv -f "$tmp" "$binary"
}

# FerretDB over a PostgreSQL cluster of its own; the cluster stops when FerretDB does.
start_postgresql() {
  local port="$1" dir="$2" url child status=0
  mkdir -p "$dir"
  url="$(bash "$root/scripts/postgresql.sh" start "$dir/pg")"
  "$binary" -listen "127.0.0.1:$port" -dir "$dir" -postgresql-url "$url" ${FERRETDB_SERIALISE:+-serialise "$FERRETDB_SERIALISE"} ${FERRETDB_LOCK:+-lock "$FERRETDB_LOCK"} &
  child=$!
  trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
  # A trapped signal ends `wait` early: wait again until FerretDB has really exited.
  while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done
  bash "$root/scripts/postgresql.sh" stop "$dir/pg" || true
  return "$status"
}

case "${1:-}" in
  build)
    build
    ;;
  start)
    [[ $# -eq 3 ]] || { echo "usage: $0 start <port> <dir>" >&2; exit 2; }
    build
    exec "$binary" -listen "127.0.0.1:$2" -dir "$3" ${FERRETDB_SERIALISE:+-serialise "$FERRETDB_SERIALISE"} ${FERRETDB_LOCK:+-lock "$FERRETDB_LOCK"}
    ;;
  start-postgresql)
    [[ $# -eq 3 ]] || { echo "usage: $0 start-postgresql <port> <dir>" >&2; exit 2; }
    build
    start_postgresql "$2" "$3"
    ;;
  *)
    echo "usage: $0 build | start <port> <dir> | start-postgresql <port> <dir>" >&2
    exit 2
    ;;
esac
