#!/usr/bin/env bash
# Browser tests of `stepscope serve`: installs Debian's Chromium (if missing) and
# playwright-core (npm, tests/web/package-lock.json), builds the binary, then runs
# tests/web/*.test.mjs with node's test runner. Each test serves tests/fixtures,
# drives headless Chromium through every page and checks what it shows against the
# server's JSON API. Screenshots land in tests/web/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

echo "== installing playwright-core (npm ci in tests/web)"
(cd tests/web && npm ci --no-audit --no-fund --loglevel=error)

echo "== building stepscope"
cargo build --locked -p stepscope
export STEPSCOPE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/stepscope"

echo "== node --test tests/web"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
(cd tests/web && node --test --test-reporter=spec ./*.test.mjs) 2>&1 | tee "$log" || status=$?
# node's spec reporter closes with "ℹ pass N" / "ℹ fail N".
pass=$(awk '/^ℹ pass / { print $3 }' "$log" | tail -1)
fail=$(awk '/^ℹ fail / { print $3 }' "$log" | tail -1)
echo "web tests: ${pass:-0} passed, ${fail:-0} failed"
if [ "$status" -ne 0 ] || [ "${fail:-0}" != "0" ] || [ "${pass:-0}" = "0" ]; then
  exit 1
fi
