#!/usr/bin/env bash
# `npm start`: the compiled server on the project's Node.js, built first when any source is newer
# than the last build (or there is none).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/runtime.sh
if [ ! -f dist/.built ] || [ -n "$(find src adapters scripts/build.sh scripts/build-console.ts package.json package-lock.json tsconfig.json tsconfig.build.json -newer dist/.built -print -quit)" ]; then
  echo "start: building dist/" >&2
  bash scripts/build.sh
fi
# The server's Node.js options (src/workers/node-flags.ts says why), unless NODE_OPTIONS sets its own.
flags=(--enable-source-maps)
[[ "${NODE_OPTIONS:-}" == *max[-_]semi[-_]space[-_]size* ]] || flags+=(--max-semi-space-size=8)
exec node "${flags[@]}" dist/src/main.js
