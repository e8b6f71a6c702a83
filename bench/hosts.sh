#!/usr/bin/env bash
# A pod's memory: `summary` of a run of N hosts (the same real capture linked N times
# under distinct host names) read whole, against `summary --host-at-a-time` (the same
# numbers, each host read alone in turn) and `summary --per-host` (each host's own
# summary), wall time and peak RSS from /usr/bin/time, release build.
#
#   bench/hosts.sh FILE.xplane.pb [N...]        (default N: 1 8 32)
#
# The whole-run summary holds every host at once: its peak grows with N. The other two
# hold one host: their peaks should not. MODES (default "whole host-at-a-time
# per-host") picks the modes.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(realpath "$1")
shift
COUNTS=("${@:-1 8 32}")
# shellcheck disable=SC2206
COUNTS=(${COUNTS[*]})
cargo build --release --locked -p stepscope >/dev/null 2>&1
bin=target/release/stepscope
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in "${COUNTS[@]}"; do
  run="$work/pod$n/plugins/profile/2026_01_01_00_00_00"
  mkdir -p "$run"
  for i in $(seq 1 "$n"); do ln -s "$SRC" "$run/host$i.xplane.pb"; done
  for mode in ${MODES:-whole host-at-a-time per-host}; do
    args=(summary "$work/pod$n" --json)
    [ "$mode" != whole ] && args+=("--$mode")
    log=$(mktemp)
    /usr/bin/time -v "$bin" "${args[@]}" >/dev/null 2>"$log" || { echo "N=$n $mode: failed: $(tail -1 "$log")"; continue; }
    wall=$(grep -F 'Elapsed (wall clock)' "$log" | awk '{print $NF}')
    rss_kb=$(grep -F 'Maximum resident set size' "$log" | awk '{print $NF}')
    printf "N=%-4s %-15s wall %-8s peak RSS %6.0f MB\n" "$n" "$mode" "$wall" "$((rss_kb / 1024))"
    rm -f "$log"
  done
done
