#!/usr/bin/env bash
# The whole suite, from a bare machine: installs what the tests need, then typechecks,
# runs the policy pack's own tests and the mocha suite against real servers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ferretdb.sh build
bash scripts/install-chromium.sh
echo "== typecheck"
npx tsc --noEmit -p .
echo "== policy pack (opa test)"
bash scripts/opa-test.sh
echo "== mocha"
npx mocha "$@"
