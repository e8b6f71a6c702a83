#!/usr/bin/env bash
# A pod's time and memory: `summary --json` of a run of N hosts (the same real capture
# linked N times under distinct host names), against `summary` of the capture alone,
# in the same run. Wall time and peak RSS from /usr/bin/time, release build.
#
#   bench/hosts.sh FILE.xplane.pb [N...]        (default N: 1 8 64)
#
# MODES (default "default one-core limit together") picks the modes:
# - default:  as a user runs it: a run of several hosts is read a host at a time, as
#             many at once as the cores and the memory allow (crates/analysis/src/ahead.rs);
# - one-core: the same under `taskset -c 0` (what a second core gives);
# - limit:    the same under STEPSCOPE_MEMORY_LIMIT=$LIMIT (default 1GB): the peak must
#             stay under it;
# - together: STEPSCOPE_READ_TOGETHER=1, every host held at once (the tests' reference;
#             refused where it does not fit);
# - per-host: `--per-host`, each host's own summary.
# Prints each mode's wall, peak RSS, and its wall over the single host's.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(realpath "$1")
shift
COUNTS=("${@:-1 8 64}")
# shellcheck disable=SC2206
COUNTS=(${COUNTS[*]})
LIMIT="${LIMIT:-1GB}"
cargo build --release --locked -p stepscope >/dev/null 2>&1
bin=target/release/stepscope
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# measure LABEL CMD... -> "wall_s rss_kb"
measure() {
  local log
  log=$(mktemp)
  if ! /usr/bin/time -f "%e %M" -o "$log" "$@" >/dev/null 2>"$log.err"; then
    echo "fail $(tail -1 "$log.err")"
  else
    tail -1 "$log"
  fi
  rm -f "$log" "$log.err"
}
# One host: the fastest of three (the first run pays for a cold page cache).
one=$(for _ in 1 2 3; do measure "$bin" summary "$SRC" --json; done | sort -n | head -1)
one_wall=${one% *}
printf "one host:  wall %6.2f s  peak RSS %6.0f MB  (%s, %d bytes)\n" "$one_wall" "$((${one#* } / 1024))" "$SRC" "$(stat -c %s "$SRC")"
for n in "${COUNTS[@]}"; do
  run="$work/pod$n/plugins/profile/2026_01_01_00_00_00"
  mkdir -p "$run"
  for i in $(seq 1 "$n"); do ln -s "$SRC" "$run/host$i.xplane.pb"; done
  for mode in ${MODES:-default one-core limit together}; do
    args=(summary "$work/pod$n" --json)
    case "$mode" in
      default) got=$(measure "$bin" "${args[@]}") ;;
      one-core) got=$(measure taskset -c 0 "$bin" "${args[@]}") ;;
      limit) got=$(STEPSCOPE_MEMORY_LIMIT=$LIMIT measure "$bin" "${args[@]}") ;;
      together) got=$(STEPSCOPE_READ_TOGETHER=1 measure "$bin" "${args[@]}") ;;
      per-host) got=$(measure "$bin" "${args[@]}" --per-host) ;;
      *) echo "unknown mode $mode" >&2 && exit 2 ;;
    esac
    case "$got" in
      fail*) printf "N=%-4s %-9s %s\n" "$n" "$mode" "$got" ;;
      *)
        wall=${got% *}
        printf "N=%-4s %-9s wall %7.2f s  peak RSS %6.0f MB  %6.1fx one host's wall\n" "$n" "$mode" "$wall" \
          "$((${got#* } / 1024))" "$(echo "$wall / $one_wall" | bc -l)"
        ;;
    esac
  done
done
