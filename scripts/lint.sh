#!/usr/bin/env bash
# `npm run lint`: ESLint, Prettier (check only), the layer and circle check, and knip for unused
# files and dependencies, all on the project's Node.js. knip's dependency list ignores what only
# runs through a script or a flag it cannot see: tsx (mocha's --import), axe-core (read from disk
# by the browser tests), dependency-cruiser and prettier (run by this script).
set -euo pipefail
source "$(dirname "$0")/runtime.sh"
cd "$arbiter_root"
PATH="$arbiter_root/node_modules/.bin:$PATH"
echo "-- eslint"
eslint .
echo "-- prettier"
prettier --check --log-level warn .
echo "-- dependencies (layers, circles)"
bash scripts/check-deps.sh
echo "-- knip (unused files and dependencies)"
knip --include files,dependencies,devDependencies,unlisted,binaries,unresolved,duplicates
