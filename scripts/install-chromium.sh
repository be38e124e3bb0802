#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests unless it is already there.
# Never a browser download of a test tool's own: playwright-core drives /usr/bin/chromium.
set -euo pipefail
source "$(dirname "$0")/apt-install.sh"

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

apt_install install-chromium chromium
/usr/bin/chromium --version >&2
