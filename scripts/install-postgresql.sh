#!/usr/bin/env bash
# Installs Debian's PostgreSQL server (for FerretDB's PostgreSQL backend in the multi-node tests
# and bench:scale) unless its programs are already there. Nothing is configured system-wide and no
# service is started: scripts/postgresql.sh runs a throwaway cluster of its own.
set -euo pipefail

if ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [[ -n "${PG_BIN:-}" ]]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-postgresql: PostgreSQL is missing and there is no apt-get to install it (set PG_BIN)" >&2
  exit 1
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

echo "install-postgresql: installing Debian's postgresql" >&2
export DEBIAN_FRONTEND=noninteractive
apt_wait=(-o DPkg::Lock::Timeout=600)
"${sudo_cmd[@]}" apt-get "${apt_wait[@]}" update -qq
"${sudo_cmd[@]}" apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends postgresql >/dev/null
ls -d /usr/lib/postgresql/*/bin >&2
