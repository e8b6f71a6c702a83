#!/usr/bin/env bash
# A pod on Ray: `stepscope.analyze_on_ray(RUN, "summary")` of a run of N hosts (the same
# real capture linked N times under distinct host names) on a local Ray cluster of
# this machine's cores, against `stepscope summary RUN --json` (the local path, release
# build) in the same run: wall time of each, and whether the two answers are the
# same bytes. The tasks run the release wheel, handed to Ray as docs/scale.md says
# (`runtime_env={"py_modules": [wheel]}`).
#
#   bench/ray.sh FILE.xplane.pb [N...]        (default N: 8 64)
#
# Needs the test environment's Ray (.venv: scripts/test.sh installs it) and maturin.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(realpath "$1")
shift
COUNTS=("${@:-8 64}")
# shellcheck disable=SC2206
COUNTS=(${COUNTS[*]})
PY=${PYTHON:-$PWD/.venv/bin/python}
export PATH="$(dirname "$PY"):$PATH" RAY_USAGE_STATS_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --locked -p stepscope >/dev/null 2>&1
maturin build --release --locked -m python/Cargo.toml -o "$work/dist" >/dev/null 2>&1
wheel=$(ls "$work"/dist/stepscope-*.whl)
"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$work/site" "$wheel"
bin=target/release/stepscope
for n in "${COUNTS[@]}"; do
  run="$work/pod$n/plugins/profile/2026_01_01_00_00_00"
  mkdir -p "$run"
  for i in $(seq 1 "$n"); do ln -s "$SRC" "$run/host$i.xplane.pb"; done
  start=$(date +%s.%N)
  "$bin" summary "$work/pod$n" --json >"$work/local$n.json"
  local_s=$(echo "$(date +%s.%N) - $start" | bc)
  PYTHONPATH="$work/site" "$PY" - "$work/pod$n" "$wheel" "$work/ray$n.json" "$(nproc)" <<'PYEOF'
import sys, time, ray, stepscope
pod, wheel, out, cpus = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, runtime_env={"py_modules": [wheel]})
ray.get(ray.remote(lambda: 0).remote())  # the workers up, the wheel installed
start = time.time()
text = stepscope.analyze_on_ray(pod, text=True)
print(f"{time.time() - start:.2f}", file=open(out + ".s", "w"))
open(out, "w").write(text)
PYEOF
  ray_s=$(cat "$work/ray$n.json.s")
  same=$(cmp -s "$work/local$n.json" "$work/ray$n.json" && echo "same bytes" || echo "DIFFERENT")
  printf "N=%-4s local summary %7.2f s   on Ray (%s CPUs) %7.2f s   %s\n" "$n" "$local_s" "$(nproc)" "$ray_s" "$same"
done
