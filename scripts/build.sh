#!/usr/bin/env bash
# `npm run build`: compiles src/ and adapters/ to dist/ (ES modules with source maps), from a
# clean dist/ so that no module of a deleted source survives. The compiled server reads
# config/, policies/ and the console's sources from the checkout (src/config/paths.ts).
set -euo pipefail
source "$(dirname "$0")/runtime.sh"
cd "$arbiter_root"
rm -rf dist
node node_modules/typescript/bin/tsc -p tsconfig.build.json
touch dist/.built
