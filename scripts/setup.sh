#!/usr/bin/env bash
# Everything `npm start` needs on a bare machine, idempotently: a supported Node.js (runtime.sh)
# and the OPA binary. Signing keys and the default policy bundle are created by the server on
# first start. With OPA_URL set (an external OPA, docs/policy.md) no OPA is installed, so no Go
# is needed: the server sends its decisions there. The Admin API's checks of submitted policy
# (opa check, trials, impact) still run a local OPA binary (OPA_BIN) where there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/runtime.sh
if [ -n "${OPA_URL:-}" ]; then
  echo "setup: OPA_URL is set: not installing OPA (the Admin API checks submitted policy with a local one: set OPA_BIN or run scripts/install-opa.sh)" >&2
else
  bash scripts/install-opa.sh
fi
mkdir -p data
