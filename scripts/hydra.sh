#!/usr/bin/env bash
# Ory Hydra 2.3.0, the bench's peer (bench/hydra.ts), built from the Go module proxy in a
# scratch module under .cache/hydra (never committed): `go get -tool` of Hydra at that version,
# with Hydra's own replace directive for pop copied in (a dependency's replace directives do not
# apply to the module that requires it), built with SQLite (CGO).
#
#   scripts/hydra.sh build     build .cache/hydra/hydra if missing; prints its path
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/hydra"
binary="$dir/hydra"
version="v2.3.0"
# From Hydra v2.3.0's go.mod.
pop_replace="github.com/gobuffalo/pop/v6=github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b"

go_tool() {
  if command -v go >/dev/null 2>&1; then echo go; else echo /usr/local/go/bin/go; fi
}

build() {
  if [[ -x "$binary" ]]; then echo "$binary"; return 0; fi
  mkdir -p "$dir"
  local go
  go="$(go_tool)"
  (
    cd "$dir"
    [[ -f go.mod ]] || "$go" mod init arbiter.bench/hydra >/dev/null 2>&1
    "$go" mod edit -replace "$pop_replace"
    GOFLAGS=-buildvcs=false "$go" get -tool "github.com/ory/hydra/v2@$version"
    local tmp="$binary.tmp.$$"
    CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" build -tags sqlite -o "$tmp" github.com/ory/hydra/v2
    mv -f "$tmp" "$binary"
  ) >&2
  echo "$binary"
}

case "${1:-}" in
  build) build ;;
  *)
    echo "usage: $0 build" >&2
    exit 2
    ;;
esac
