#!/usr/bin/env bash
# Installs Debian's PostgreSQL server (for the PostgreSQL store's tests, the multi-node tests,
# FerretDB's PostgreSQL backend and bench:scale) unless its programs are already there. Nothing is configured system-wide and no
# service is started: scripts/postgresql.sh runs a throwaway cluster of its own.
set -euo pipefail
source "$(dirname "$0")/apt-install.sh"

if ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [[ -n "${PG_BIN:-}" ]]; then
  exit 0
fi

apt_install install-postgresql postgresql
ls -d /usr/lib/postgresql/*/bin >&2
