#!/usr/bin/env bash
# Installs Debian's libfaketime (for the clock-skew test: a server process whose clock runs ahead)
# unless it is already there. It only preloads into the processes that ask for it.
set -euo pipefail
source "$(dirname "$0")/apt-install.sh"

if ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  exit 0
fi

apt_install install-faketime faketime
ls /usr/lib/*/faketime/libfaketime.so.1 >&2
