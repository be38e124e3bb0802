#!/usr/bin/env bash
# Unit tests of the default policy pack (policies/**/*_test.rego), with the project's OPA.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/install-opa.sh"
"$repo/.bin/opa" check --strict "$repo/policies"
exec "$repo/.bin/opa" test "$repo/policies" "$@"
