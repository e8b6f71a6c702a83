#!/usr/bin/env bash
# A newcomer's first hour, timed: a fresh clone of this repository, then the README's
# commands in the order a new user runs them, each from nothing:
#   1. `cargo run --release -- summary tests/fixtures/cpu-transformer`  (first answer)
#   2. `pip install ./python` into a new virtual environment            (after 1: shares target/)
#   3. `maturin build --release` of the wheel file a team shares       (after 1 and 2)
#   4. `pip install dist/stepscope-*.whl` into another new environment  (no Rust toolchain used)
#   5. with --tests: `bash scripts/test.sh`                              (its own dev build)
#
#   bench/newcomer.sh [--load N] [--tests] [--keep DIR]
#
# --load N runs N busy processes beside the commands for the whole run (a loaded
# machine: the user who filed the set-up issue saw load 2 to 9 on 2 cores); the load
# average is printed with each figure. The clone and its builds go in a folder of their
# own (removed after, unless --keep names it): nothing of this checkout is reused, not
# even its target/. Cargo's registry cache (~/.cargo) is reused, as on any machine that
# built a Rust program before; pip's cache too. The figures go in the README's set-up
# paragraph with the line this script prints last.
set -euo pipefail
cd "$(dirname "$0")/.."
load=0 tests=0 keep=
while [ $# -gt 0 ]; do
  case $1 in
    --load) load=$2; shift 2 ;;
    --tests) tests=1; shift ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "bench/newcomer.sh: unknown argument $1 — use [--load N] [--tests] [--keep DIR]" >&2; exit 2 ;;
  esac
done
case $load in '' | *[!0-9]*) echo "bench/newcomer.sh: --load takes a number of busy processes, e.g. --load 2" >&2; exit 2 ;; esac

work=${keep:-$(mktemp -d /tmp/stepscope-newcomer-XXXXXX)}
busy=()
cleanup() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"
for _ in $(seq 1 "$load"); do
  (while :; do :; done) &
  busy+=($!)
done

git clone --quiet "$PWD" "$work/stepscope"
# The fixtures' shared data (../shared) as a fresh clone beside it sees it, where there is one.
[ -e ../shared ] && [ ! -e "$work/shared" ] && ln -s "$(realpath ../shared)" "$work/shared"
cd "$work/stepscope"
unset CARGO_TARGET_DIR

results=()
# Runs "$@" with its output in LOG, and records NAME's seconds and the load average.
timed() {
  local name=$1 log=$2
  shift 2
  local start=$(date +%s)
  if ! "$@" >"$log" 2>&1; then
    tail -n 20 "$log"
    echo "bench/newcomer.sh: $name failed (log: $log)" >&2
    exit 2
  fi
  local s=$(($(date +%s) - start)) la
  la=$(cut -d' ' -f1 /proc/loadavg)
  results+=("$name: $s s (load $la)")
  echo "$name: $s s (load average $la)"
}

timed "first answer (cargo run --release -- summary)" "$work/first.log" \
  cargo run --release -- summary tests/fixtures/cpu-transformer
grep -q "step" "$work/first.log" || { echo "bench/newcomer.sh: summary printed no steps" >&2; exit 2; }

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip >/dev/null
timed "pip install ./python after it" "$work/pip.log" "$work/venv/bin/pip" install --disable-pip-version-check ./python
"$work/venv/bin/stepscope" --version >/dev/null

"$work/venv/bin/pip" install --quiet --disable-pip-version-check maturin >/dev/null
timed "the wheel file (maturin build --release)" "$work/wheel.log" \
  "$work/venv/bin/maturin" build --release --locked -m python/Cargo.toml -o dist
wheel=$(ls dist/stepscope-*.whl)

python3 -m venv "$work/team"
timed "pip install of the wheel file (no Rust)" "$work/team.log" \
  env PATH=/usr/bin:/bin "$work/team/bin/pip" install --disable-pip-version-check "$wheel"
"$work/team/bin/stepscope" summary tests/fixtures/cpu-transformer >/dev/null
"$work/team/bin/python" -c 'import stepscope; stepscope.load("tests/fixtures/cpu-transformer").steps()'

if [ "$tests" = 1 ]; then
  timed "all tests (bash scripts/test.sh)" "$work/tests.log" bash scripts/test.sh
fi

echo "newcomer on $(nproc) cores, $load busy processes beside: ${results[*]}; wheel $(($(stat -c %s "$wheel") >> 20)) MiB"
