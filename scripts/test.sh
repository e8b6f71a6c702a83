#!/usr/bin/env bash
# Runs every stepscope test on a fresh machine, installing what the tests need first:
#   1. Rust: the workspace's tests (they drive the real binary on real captures and
#      check numbers against tests/support/xspace_ref.py, which needs protobuf; some
#      start real JAX processes) — pip: tests/support/requirements.txt;
#   2. Python: the `stepscope` package built with maturin, pytest with real JAX
#      (scripts/test_python.sh);
#   3. Web UI: headless Debian Chromium driven by playwright-core (scripts/test_web.sh);
#   4. Dependencies: licences, bans, sources and advisories (scripts/check_deps.sh);
#   5. Layers: no import circle in a library crate, no function over 200 lines, no
#      crate using one above it (scripts/check_layers.py, docs/architecture.md);
#   6. Fuzz targets: they still compile against the crates they drive (cargo check of
#      fuzz/, its own workspace; running them is `cargo fuzz run`, by hand).
# Every part runs even when an earlier one fails; the last line adds them all up.
# One build: cargo test's (the dev profile: overflow checks and debug assertions on). The
# wheel the Python tests install is built with the same profile into the same target/
# (python/ is a workspace member), so it compiles only pyo3 and the extension itself.
set -uo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed_parts=()

# Python packages go into a virtual environment under the repository (.venv, ignored by
# git; STEPSCOPE_TEST_VENV moves it), never into the machine's Python. It sees the
# machine's packages, so only what is missing is downloaded.
venv=${STEPSCOPE_TEST_VENV:-$PWD/.venv}
if [ ! -x "$venv/bin/python3" ]; then
  echo "== creating $venv (python3 -m venv --system-site-packages)"
  python3 -m venv --system-site-packages "$venv" || failed_parts+=("venv")
fi
if [ -x "$venv/bin/python3" ]; then
  export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
fi
echo "== installing test dependencies into $(dirname "$(dirname "$(command -v python3)")") (pip: tests/support/requirements.txt)"
python3 -m pip install --disable-pip-version-check --progress-bar off -r tests/support/requirements.txt \
  | grep -v '^Requirement already satisfied'
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("pip install")

echo "== cargo test"
cargo test --workspace --exclude stepscope-python --locked --no-fail-fast --lib --bins --tests 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("cargo test")

echo "== python package"
bash scripts/test_python.sh 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("python")

echo "== web UI"
bash scripts/test_web.sh 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("web")

echo "== layers"
python3 scripts/check_layers.py . 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("layers")

echo "== fuzz targets"
if CARGO_TARGET_DIR=target/fuzz-check cargo check --manifest-path fuzz/Cargo.toml --locked --bins 2>&1 | tee -a "$log"; then
  echo "fuzz checks: 1 passed, 0 failed" | tee -a "$log"
else
  echo "fuzz checks: 0 passed, 1 failed" | tee -a "$log"
  failed_parts+=("fuzz")
fi

echo "== dependencies"
bash scripts/check_deps.sh 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed_parts+=("deps")

# One closing line over every part: cargo prints "test result: ok. N passed; M failed"
# per test binary; the Python and web scripts end with "<part> tests: N passed, M failed",
# the dependency script with "deps checks: N passed, M failed", the layers script with
# "layers checks: N passed, M failed", the fuzz check with "fuzz checks: …".
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     /^((python|web) tests|(deps|layers|fuzz) checks): [0-9]+ passed, [0-9]+ failed$/ { p += $3; f += $5 }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
if [ "${#failed_parts[@]}" -gt 0 ]; then
  echo "failed: ${failed_parts[*]}"
  exit 1
fi
