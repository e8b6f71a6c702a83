#!/usr/bin/env bash
# Dependency checks with cargo-deny (config: deny.toml): licences, bans and sources
# always (offline, from Cargo.lock), advisories where the RustSec database can be had.
#
#   bash scripts/check_deps.sh
#
# Advisories need https://github.com/rustsec/advisory-db (fetched into
# $CARGO_HOME/advisory-dbs). Where it cannot be fetched and no copy is there, the check
# is skipped with a note — unless CI=true or STEPSCOPE_REQUIRE_ADVISORIES=1, where that
# is a failure. Ends with `deps checks: N passed, M failed` and a non-zero exit on failure.
set -uo pipefail
cd "$(dirname "$0")/.."

DENY_VERSION=0.18.3
if ! cargo deny --version 2>/dev/null | grep -q "$DENY_VERSION"; then
  echo "installing cargo-deny $DENY_VERSION…" >&2
  cargo install cargo-deny --version "$DENY_VERSION" --locked --quiet || {
    echo "deps checks: 0 passed, 1 failed (cannot install cargo-deny)"; exit 1; }
fi

passed=0 failed=0
run() {
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# Licences, bans, sources: everything they need is in Cargo.lock and the cargo cache.
run cargo deny --log-level warn check --disable-fetch licenses bans sources
# The fuzz targets are their own workspace (fuzz/Cargo.lock).
run cargo deny --manifest-path fuzz/Cargo.toml --log-level warn check --disable-fetch licenses bans sources

# Advisories: fetch the database; fall back to a copy already on disk; else skip.
if cargo deny --log-level warn check advisories; then
  passed=$((passed + 1))
else
  rc=$?
  db_dir="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
  if ls "$db_dir"/*/crates >/dev/null 2>&1; then
    # A database is on disk: the failure above may be a fetch failure; judge offline.
    run cargo deny --log-level warn check --disable-fetch advisories
  elif [ "${CI:-}" = true ] || [ "${STEPSCOPE_REQUIRE_ADVISORIES:-}" = 1 ]; then
    echo "advisories: the RustSec database could not be fetched (exit $rc)" >&2
    failed=$((failed + 1))
  else
    echo "advisories: skipped — the RustSec database (github.com/rustsec/advisory-db) cannot be fetched here; CI runs it" >&2
  fi
fi

echo "deps checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
