#!/usr/bin/env bash
# Scale check: large XSpaces made by replicating a real capture in time
# (crates/export/examples/gen_xspace.rs), then `stepscope info` and `summary` on each,
# wall time and peak RSS from /usr/bin/time. Files go to bench/data (not committed) and
# are deleted afterwards.
#
#   bench/scale.sh [SOURCE.xplane.pb] [SIZES...]
#
# Defaults: the TPU fixture, sizes 0.1G 1G 4.2G (binary units; 4.2G is above the
# 4 GiB mark where 32-bit offsets would break). Commands run under `ulimit -v` of 3/4
# of the machine's memory plus the file's size (the file is mapped; its pages are given
# back as they are decoded), so an oversized run fails alone instead of starving others.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC="${1:-tests/fixtures/tpu-v6e-inference/tpu_inference_2.xplane.pb}"
shift || true
SIZES=("${@:-0.1G 1G 4.2G}")
# shellcheck disable=SC2206
SIZES=(${SIZES[*]})
cargo build --release --locked -p stepscope -p stepscope-export --example gen_xspace
mkdir -p bench/data
mem_kb=$(awk '/MemTotal/ { printf "%d", $2 * 3 / 4 }' /proc/meminfo)
for size in "${SIZES[@]}"; do
  f="bench/data/scale-$size.xplane.pb"
  target/release/examples/gen_xspace "$SRC" "$f" --size "$size"
  bytes=$(stat -c %s "$f")
  limit_kb=$((mem_kb + bytes / 1024))
  for cmd in info summary; do
    log=$(mktemp)
    if (ulimit -v "$limit_kb"; /usr/bin/time -v target/release/stepscope "$cmd" "$f" --json >/dev/null 2>"$log"); then
      status=ok
    else
      status="failed: $(grep -m1 -E 'memory allocation|stepscope:' "$log" || echo "exit $?")"
    fi
    wall=$(grep -F 'Elapsed (wall clock)' "$log" | awk '{print $NF}')
    rss_kb=$(grep -F 'Maximum resident set size' "$log" | awk '{print $NF}')
    awk -v s="$size" -v b="$bytes" -v c="$cmd" -v w="$wall" -v r="$rss_kb" -v st="$status" \
      'BEGIN { printf "%-6s %14.0f bytes  %-8s wall %-9s peak RSS %8.0f MB (%.2fx file)  %s\n", s, b, c, w, r / 1024, r * 1024 / b, st }'
    rm -f "$log"
  done
  rm -f "$f"
done
