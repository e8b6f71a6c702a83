#!/usr/bin/env bash
# Runs every stepscope test on a fresh machine. Installs what the tests need first:
# Python packages from PyPI (JAX for real captures, protobuf for the independent
# reference reader), then runs the Rust test suite, which drives the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing test dependencies (pip: tests/support/requirements.txt)"
python3 -m pip install --quiet --disable-pip-version-check -r tests/support/requirements.txt

echo "== cargo test"
cargo test --workspace --locked
