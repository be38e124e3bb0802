#!/usr/bin/env bash
# `npm run test:postgresql`: every test file that runs on PostgreSQL (Debian's postgresql package,
# a throwaway unprivileged cluster started by the tests themselves: scripts/postgresql.sh): the
# PostgreSQL store's conformance and its own tests, the two-node tests (directly on PostgreSQL, no
# proxy), the store-fault, U+0000 and command-line tests; then the MongoDB-wire files on FerretDB
# over PostgreSQL (a wire-compatibility check of the MongoDB adapter, behind the test proxy:
# FerretDB 1.x is no production MongoDB). `npm test` runs all of them too. POSTGRES_URL names a
# server of your own instead of the throwaway cluster. Extra arguments go to mocha.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/runtime.sh
bash scripts/install-postgresql.sh
bash scripts/postgresql.sh bin >/dev/null
bash scripts/ferretdb.sh build
npx mocha --no-config --import=tsx --timeout 60000 --exit test/support/root.ts \
  test/store/postgresql.test.ts test/operations/multi-node.test.ts test/security/store-faults.test.ts \
  test/security/nul-bytes.test.ts test/operations/cli.test.ts "$@"
FERRETDB_BACKEND=postgresql npx mocha --no-config --import=tsx --timeout 60000 --exit test/support/root.ts \
  test/store/mongodb.test.ts test/store/ferretdb-atomicity.test.ts \
  test/security/crash-safety.test.ts test/security/store-loss.test.ts test/operations/audit-writer.test.ts "$@"
