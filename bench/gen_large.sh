#!/usr/bin/env bash
# Generate a large real CPU capture for benchmarks (not committed).
#
#   bench/gen_large.sh [STEPS] [OUTDIR]
#
# Defaults: 3000 steps (≥ 3 M events, ~125 MB) into bench/data/large (python tracer on, warm-up excluded,
# default 2-layer d_model=64 transformer). Knobs of scripts/capture_jax.py can be
# appended via the EXTRA environment variable, e.g. EXTRA="--tiny-ops 8".
# Prints the run folder, the xplane.pb size and its event count (reference reader).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-3000}"
OUT="${2:-bench/data/large}"
mkdir -p "$OUT"
start=$(date +%s)
# shellcheck disable=SC2086
RUN=$(python3 scripts/capture_jax.py --steps "$STEPS" --warmup 2 --seed 0 --out "$OUT" ${EXTRA:-} | tail -n 1)
end=$(date +%s)
echo "run folder: $RUN  (capture+export $((end - start)) s)"
for f in "$RUN"/*.xplane.pb; do
  size=$(stat -c %s "$f")
  events=$(python3 tests/support/xspace_ref.py info "$f" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["events_total"])')
  steps=$(python3 tests/support/xspace_ref.py steps "$f" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  echo "$f: $size bytes ($((size / 1048576)) MiB), $events events, $steps steps"
done
