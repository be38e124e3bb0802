#!/usr/bin/env bash
# Installs Debian's PostgreSQL server (for FerretDB's PostgreSQL backend in the multi-node tests
# and bench:scale) unless its programs are already there. Nothing is configured system-wide and no
# service is started: scripts/postgresql.sh runs a throwaway cluster of its own.
set -euo pipefail
source "$(dirname "$0")/apt-install.sh"

if ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [[ -n "${PG_BIN:-}" ]]; then
  exit 0
fi

apt_install install-postgresql postgresql
ls -d /usr/lib/postgresql/*/bin >&2
