#!/usr/bin/env bash
# Runs every stepscope test on a fresh machine. Installs what the tests need first:
# Python packages from PyPI (JAX for real captures, protobuf for the independent
# reference reader), then runs the Rust test suite, which drives the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing test dependencies (pip: tests/support/requirements.txt)"
python3 -m pip install --quiet --disable-pip-version-check -r tests/support/requirements.txt

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked --lib --bins --tests 2>&1 | tee "$log"
# One closing line over every test binary (cargo prints one per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
