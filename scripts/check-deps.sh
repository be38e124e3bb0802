#!/usr/bin/env bash
# Fails on an import circle, or an import against the direction of Arbiter's layers, in src,
# adapters or test/support (the rules and the layers: .dependency-cruiser.cjs).
# dependency-cruiser needs Node 22 or later: runtime.sh provides it.
set -euo pipefail
source "$(dirname "$0")/runtime.sh"
cd "$arbiter_root"
exec npx --no-install depcruise --config .dependency-cruiser.cjs src adapters test/support
