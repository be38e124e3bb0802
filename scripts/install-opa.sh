#!/usr/bin/env bash
# Installs the pinned OPA into <repo>/.bin/opa unless it is already there.
# Needs Go (the Go module proxy is how OPA reaches a fresh machine; see /work/shared/NOTES.md).
set -euo pipefail

OPA_VERSION="v1.21.1"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$repo/.bin"

if [ -x "$bin/opa" ] && [ "$("$bin/opa" version 2>/dev/null | sed -n 's/^Version: //p')" = "${OPA_VERSION#v}" ]; then
  exit 0
fi

# Go may be installed without being on PATH (a fresh shell on a machine of the go kind).
go_tool="$(command -v go || true)"
[ -n "$go_tool" ] || [ ! -x /usr/local/go/bin/go ] || go_tool=/usr/local/go/bin/go
if [ -z "$go_tool" ]; then
  echo "install-opa: Go is required to install OPA $OPA_VERSION (or set OPA_URL to use an external OPA)" >&2
  exit 1
fi

echo "install-opa: installing OPA $OPA_VERSION into $bin" >&2
mkdir -p "$bin"
GOBIN="$bin" "$go_tool" install "github.com/open-policy-agent/opa@$OPA_VERSION"
"$bin/opa" version | sed -n 1p >&2  # sed reads all of it: head would close the pipe early (SIGPIPE under pipefail)
