#!/usr/bin/env bash
# How long a newcomer waits: a clean release build of the `stepscope` binary (what the
# README's first command does), then `pip install ./python` after it (the wheel, which
# shares the workspace's target/ and so reuses the crates), each timed from nothing in
# a target folder of its own. Goal: the README's number holds on 2 cores.
#
#   bench/build_time.sh [TARGET_DIR]      (default: a fresh folder in /tmp, removed after)
#
# Prints one line per build and the binary's size; `cargo build --timings` writes
# TARGET/cargo-timings/cargo-timing.html with what each crate cost.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-$(mktemp -d /tmp/stepscope-build-XXXXXX)}
cleanup() { [ -n "${1:-}" ] || rm -rf "$target"; }
trap "cleanup ${1:-}" EXIT
mkdir -p "$target"
export CARGO_TARGET_DIR=$target

start=$(date +%s)
cargo build --release --locked --timings --bin stepscope >"$target/build.log" 2>&1 ||
  { tail -n 5 "$target/build.log"; echo "bench/build_time.sh: cargo build failed" >&2; exit 2; }
release_s=$(($(date +%s) - start))
size=$(stat -c %s "$target/release/stepscope")
echo "clean release build (cargo build --release --locked): ${release_s} s on $(nproc) cores; binary $((size >> 20)) MiB"

# The wheel with the test venv's maturin (scripts/test.sh makes .venv), into a folder
# of its own: the Python environment is left as it was.
py=.venv/bin/python
if [ -x "$py" ] && "$py" -c 'import maturin' 2>/dev/null; then
  start=$(date +%s)
  # maturin's PEP 517 hook runs the `maturin` beside the venv's python.
  PATH="$(cd "$(dirname "$py")" && pwd):$PATH" "$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
    --target "$target/site" ./python >"$target/wheel.log" 2>&1 ||
    { tail -n 5 "$target/wheel.log"; echo "bench/build_time.sh: pip install ./python failed" >&2; exit 2; }
  echo "pip install ./python after it: $(($(date +%s) - start)) s"
else
  echo "pip install ./python: not timed (no .venv with maturin: run scripts/test.sh once)"
fi
