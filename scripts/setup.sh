#!/usr/bin/env bash
# Everything `npm start` needs on a bare machine, idempotently: a supported Node.js (runtime.sh)
# and the OPA binary. Signing keys and the default policy bundle are created by the server on
# first start.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/runtime.sh
bash scripts/install-opa.sh
mkdir -p data
