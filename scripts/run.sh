#!/usr/bin/env bash
# Runs a command on the project's Node.js (see runtime.sh): `bash scripts/run.sh tsx bench/run.ts`.
set -euo pipefail
source "$(dirname "$0")/runtime.sh"
cd "$arbiter_root"
PATH="$arbiter_root/node_modules/.bin:$PATH" exec "$@"
