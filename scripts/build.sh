#!/usr/bin/env bash
# `npm run build`: compiles src/ and adapters/ to dist/ (ES modules with source maps), from a
# clean dist/ so that no module of a deleted source survives, and bundles the operators' console
# into dist/console/ (scripts/build-console.ts). The compiled server reads config/ and policies/
# from the checkout or image (src/config/paths.ts), nothing from src/. The Dockerfile runs this
# script; it needs the devDependencies (typescript, tsx, esbuild), which the server does not.
set -euo pipefail
source "$(dirname "$0")/runtime.sh"
cd "$arbiter_root"
rm -rf dist
node node_modules/typescript/bin/tsc -p tsconfig.build.json
node --import tsx scripts/build-console.ts
touch dist/.built
