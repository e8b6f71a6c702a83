#!/usr/bin/env bash
# Builds and installs the stepscope Python package the way users do
# (`pip install ./python`: maturin builds the Rust core and installs the `stepscope`
# command), then runs its tests (pytest, real JAX on CPU, real fixtures).
# Ends with `python tests: N passed, M failed`; non-zero exit on any failure.
#
# PYTHON picks the interpreter (default python3). python/ is a member of the repository's
# workspace, so the wheel is built into target/ with the workspace's Cargo.lock and
# profiles. It is built with the dev profile by default, the one `cargo test` just used
# (overflow checks and debug assertions on): every crate below the extension is reused
# from that build and only pyo3's and the extension's own are compiled (seconds, not the
# minutes of a release build). STEPSCOPE_WHEEL_PROFILE=release tests the release wheel
# users install with `pip install ./python`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP=("$PY" -m pip --disable-pip-version-check)

echo "== installing Python test dependencies (python/tests/requirements.txt) with $("$PY" -c 'import sys; print(sys.prefix)')"
set +e
"${PIP[@]}" install --progress-bar off -r python/tests/requirements.txt | grep -v '^Requirement already satisfied'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { echo "pip install -r python/tests/requirements.txt failed"; exit 1; }

profile=${STEPSCOPE_WHEEL_PROFILE:-dev}
echo "== pip install ./python (the Rust core with cargo's $profile profile; cargo's progress below)"
start=$(date +%s)
# pip shows the build's output with --verbose: keep cargo's and pip's progress lines.
set +e
MATURIN_PEP517_ARGS="--profile $profile --locked" \
    "${PIP[@]}" install --verbose --no-build-isolation --force-reinstall --no-deps ./python 2>&1 |
    grep --line-buffered -E '^ +(Compiling|Finished)|Built wheel|Successfully installed|[Ee]rror'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { echo "pip install ./python failed"; exit 1; }
echo "built and installed in $(($(date +%s) - start)) s"

echo "== pytest python/tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# From python/tests, `import stepscope` is the installed package, not the source.
(cd python/tests && JAX_PLATFORMS=cpu "$PY" -m pytest -q -p no:cacheprovider .) 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[=[:space:]]*[0-9]+ (passed|failed|error|skipped)' "$log" | tail -n 1 || true)
passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
failed=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
errors=$(grep -oE '[0-9]+ errors?' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
failed=$((failed + errors))
echo "python tests: $passed passed, $failed failed"
if [ "$rc" -ne 0 ] || [ "$passed" -eq 0 ]; then
    exit 1
fi
