#!/usr/bin/env bash
# Sourced by the other scripts: puts a supported Node.js (>= 22; Node 24 LTS by default) first on
# PATH.
#
# Where the machine's Node is older (these machines have Node 20, end-of-life since April 2026),
# Node 24 LTS comes from the npm registry's node-linux-<arch> package (the binary and its headers
# are inside the package) into .bin/node-<version>/: no other download. The native addons
# (better-sqlite3 13, @node-rs/bcrypt) ship Node-API binaries that load on any such Node, so
# nothing is rebuilt for it.
# Idempotent, and safe when two scripts start at once (one lock).

NODE_LTS_VERSION="24.21.0"
NODE_MIN_MAJOR=22

arbiter_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

arbiter_node_major() {
  node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}

arbiter_install_node() {
  local dir="$1" arch tmp
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "runtime: no Node package for $(uname -m); install Node >= $NODE_MIN_MAJOR yourself" >&2; return 1 ;;
  esac
  echo "runtime: installing Node $NODE_LTS_VERSION (npm package node-linux-$arch) into ${dir#"$arbiter_root"/}" >&2
  tmp="$(mktemp -d "$arbiter_root/.bin/node-download.XXXXXX")"
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_LTS_VERSION" >/dev/null && tar xzf node-linux-*.tgz) || { rm -rf "$tmp"; return 1; }
  mv -T "$tmp/package" "$dir"
  rm -rf "$tmp"
}

arbiter_use_supported_node() {
  if [ "$(arbiter_node_major)" -lt "$NODE_MIN_MAJOR" ]; then
    local dir="$arbiter_root/.bin/node-$NODE_LTS_VERSION"
    [ -x "$dir/bin/node" ] || arbiter_install_node "$dir" || return 1
    export PATH="$dir/bin:$PATH"
  fi
}

mkdir -p "$arbiter_root/.bin"
{
  flock 9
  arbiter_use_supported_node
} 9>"$arbiter_root/.bin/.runtime.lock" || { echo "runtime: no supported Node.js" >&2; exit 1; }
