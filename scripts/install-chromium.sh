#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests unless it is already there.
# Never a browser download of a test tool's own: playwright-core drives /usr/bin/chromium.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: /usr/bin/chromium is missing and there is no apt-get to install it" >&2
  exit 1
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

echo "install-chromium: installing Debian's chromium" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt run (the machine's own start-up, a second checkout's set-up) may hold dpkg's lock:
# wait for it rather than fail.
apt_wait=(-o DPkg::Lock::Timeout=600)
"${sudo_cmd[@]}" apt-get "${apt_wait[@]}" update -qq
"${sudo_cmd[@]}" apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version >&2
