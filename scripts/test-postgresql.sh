#!/usr/bin/env bash
# `npm run test:postgresql`: every MongoDB-wire test file on FerretDB over PostgreSQL (Debian's
# postgresql package, a throwaway unprivileged cluster per server: scripts/postgresql.sh), the store
# conformance suite included. `npm test` already runs the multi-node tests and the atomicity test
# there; the conformance suite stays on the quicker SQLite-backed FerretDB in `npm test` (its many
# fresh databases cost about a minute on PostgreSQL). Extra arguments go to mocha.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/runtime.sh
bash scripts/postgresql.sh bin >/dev/null
bash scripts/ferretdb.sh build
export FERRETDB_BACKEND=postgresql
npx mocha --no-config --import=tsx --timeout 60000 --exit test/support/root.ts \
  test/store/mongodb.test.ts test/store/ferretdb-atomicity.test.ts test/operations/multi-node.test.ts \
  test/security/crash-safety.test.ts test/security/store-loss.test.ts test/operations/audit-writer.test.ts "$@"
