#!/usr/bin/env bash
# Unit tests of the default policy pack (policies/**/*_test.rego), with the project's OPA, and
# the checks of Regal's rules that need no Regal (it does not install here): formatted as
# `opa fmt` writes it, no line over 120 characters, and every decision package
# (policies/arbiter/<point>/) marks its decision with a METADATA `entrypoint: true`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/install-opa.sh"
# The pack is checked and tested with the capabilities of the server's sandbox (src/policy/opa/sandbox.ts):
# a builtin that reaches outside (http.send, opa.runtime, …) is refused here as it would be at write.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
capabilities="$scratch/capabilities.json"
"$repo/.bin/opa" capabilities --current >"$scratch/current.json"
bash "$repo/scripts/run.sh" tsx -e "
  import { readFileSync } from 'node:fs';
  import { restrictedCapabilities } from './src/policy/opa/sandbox.ts';
  process.stdout.write(restrictedCapabilities(readFileSync('$scratch/current.json', 'utf8')));
" >"$capabilities"
"$repo/.bin/opa" check --strict --capabilities "$capabilities" "$repo/policies"
if ! "$repo/.bin/opa" fmt --list --fail "$repo/policies" >/dev/null; then
  echo "opa-test: not formatted as opa fmt writes it (run: .bin/opa fmt -w policies):" >&2
  "$repo/.bin/opa" fmt --list "$repo/policies" >&2
  exit 1
fi
long_lines="$(find "$repo/policies" -name '*.rego' -exec awk 'length > 120 { print FILENAME ":" FNR }' {} +)"
if [ -n "$long_lines" ]; then
  echo "opa-test: lines over 120 characters (Regal's line-length):" >&2
  echo "$long_lines" >&2
  exit 1
fi
for file in "$repo"/policies/arbiter/*/*.rego; do
  case "$file" in */lib/* | */fixtures/* | *_test.rego) continue ;; esac
  grep -q '^# entrypoint: true$' "$file" || { echo "opa-test: $file has no METADATA entrypoint: true" >&2; exit 1; }
done
"$repo/.bin/opa" test --capabilities "$capabilities" "$repo/policies" "$@"
