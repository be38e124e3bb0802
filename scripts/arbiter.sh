#!/usr/bin/env bash
# `npx arbiter <command>` (package.json "bin") or `npm run arbiter -- <command>`: the operator's
# command line (src/cli/main.ts) on the project's Node.js; file arguments are taken relative to
# where it is run. The compiled one when dist/ is at least as new as the sources (or there are no
# sources: the image), else through tsx (a devDependency: a checkout's).
set -euo pipefail
here="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
source "$here/runtime.sh"
compiled="$arbiter_root/dist/src/cli/main.js"
# The image has no sources to compare with: its build is the one.
if [ -f "$compiled" ] && { [ ! -d "$arbiter_root/src" ] || [ -z "$(find "$arbiter_root/src" "$arbiter_root/adapters" -newer "$arbiter_root/dist/.built" -print -quit)" ]; }; then
  exec node --enable-source-maps "$compiled" "$@"
fi
exec "$arbiter_root/node_modules/.bin/tsx" "$arbiter_root/src/cli/main.ts" "$@"
