#!/usr/bin/env bash
# Sourced by the install-* scripts: `apt_install <installer name> <Debian package>` installs one of
# Debian's packages, with sudo when not root, waiting for dpkg's lock (the machine's own start-up
# or another checkout's set-up may hold it) rather than failing.

apt_install() {
  local who="$1" package="$2" sudo_cmd=() apt_wait=(-o DPkg::Lock::Timeout=600)
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: $package is missing and there is no apt-get to install it" >&2
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  echo "$who: installing Debian's $package" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get "${apt_wait[@]}" update -qq
  "${sudo_cmd[@]}" apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends "$package" >/dev/null
}
