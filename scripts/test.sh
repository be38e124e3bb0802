#!/usr/bin/env bash
# The whole suite, from a bare machine: installs what the tests need (a supported Node.js, OPA,
# FerretDB, Chromium, PostgreSQL, libfaketime), builds dist/ (which typechecks src/), typechecks the rest, runs the policy
# pack's own tests and the mocha suite against real servers, all on the project's Node.js. The
# tests start their PostgreSQL clusters themselves (test/store/postgres-server.ts), as FerretDB.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/runtime.sh
bash scripts/ferretdb.sh build
bash scripts/install-chromium.sh
bash scripts/install-postgresql.sh
bash scripts/install-faketime.sh
echo "== runtime: Node $(node --version)"
echo "== build (dist/)"
# Also what the tests' CLI commands and server processes run (test/support/entry-point.ts): not tsx.
bash scripts/build.sh
echo "== typecheck"
npx tsc --noEmit -p .
npx tsc --noEmit -p src/admin/console/app
# test/admin/console.test.ts makes the same check when mocha runs without this script; here it is done.
export ARBITER_CONSOLE_TYPECHECKED=1
echo "== lint"
bash scripts/lint.sh
echo "== policy pack (opa test)"
bash scripts/opa-test.sh
# dist/ was just built, console included: the root hook (test/support/root.ts) sees it as fresh and
# builds nothing, so no two mocha workers ever write dist/console/ at once.
if [[ $# -gt 0 ]]; then
  echo "== mocha $*"
  npx mocha "$@"
  exit
fi
# Two passes (docs/development.md "How the suite runs"): the files that may share the machine in
# parallel workers, then those of test/serial-files.json alone. Both run; either failing fails.
# Each pass's output is kept too: a CI log may show only its end, so the failures of both are
# printed again last.
status=0
logs=$(mktemp -d)
echo "== mocha: parallel pass (TEST_JOBS=${TEST_JOBS:-3} workers)"
npx mocha --config test/mocharc-parallel.cjs 2>&1 | tee "$logs/parallel.txt" || status=$?
echo "== mocha: serial pass (test/serial-files.json)"
npx mocha --config test/mocharc-serial.cjs 2>&1 | tee "$logs/serial.txt" || status=$?
if [[ $status -ne 0 ]]; then
  for pass in parallel serial; do
    echo "== mocha: what failed in the $pass pass"
    # From mocha's "N failing" to the end of the pass: each failure with its message and stack.
    sed -n '/[0-9] failing/,$p' "$logs/$pass.txt"
  done
fi
rm -rf "$logs"
exit "$status"
