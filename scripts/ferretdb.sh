#!/usr/bin/env bash
# FerretDB (MongoDB wire protocol over SQLite) for the MongoDB store tests.
#
#   scripts/ferretdb.sh build              build .bin/ferretdb-arbiter if missing or stale
#   scripts/ferretdb.sh start <port> <dir> build if needed, then run on 127.0.0.1:<port>
#                                          with its SQLite files in <dir> (foreground)
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
  [[ -x "$binary" && "$binary" -nt "$src/main.go" && "$binary" -nt "$src/go.mod" && "$binary" -nt "$src/go.sum" ]]
}

build() {
  is_fresh && return 0
  mkdir -p "$bin_dir"
  # Build to a temporary name and rename, so a parallel start never runs a half-written file.
  local tmp="$binary.tmp.$$"
  (cd "$src" && GOFLAGS=-buildvcs=false "$(go_tool)" build -o "$tmp" .)
  mv -f "$tmp" "$binary"
}

case "${1:-}" in
  build)
    build
    ;;
  start)
    [[ $# -eq 3 ]] || { echo "usage: $0 start <port> <dir>" >&2; exit 2; }
    build
    exec "$binary" -listen "127.0.0.1:$2" -dir "$3"
    ;;
  *)
    echo "usage: $0 build | start <port> <dir>" >&2
    exit 2
    ;;
esac
