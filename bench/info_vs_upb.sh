#!/usr/bin/env bash
# Times, side by side in one run, `stepscope info` (release build) against Python's
# upb protobuf ParseFromString of the same XSpace. Generates the large capture first
# when bench/data/large has none (bench/gen_large.sh).
#
#   bench/info_vs_upb.sh [FILE.xplane.pb]
set -euo pipefail
cd "$(dirname "$0")/.."
FILE="${1:-}"
if [ -z "$FILE" ]; then
  FILE=$(ls bench/data/large/plugins/profile/*/*.xplane.pb 2>/dev/null | head -n 1 || true)
  if [ -z "$FILE" ]; then
    bench/gen_large.sh
    FILE=$(ls bench/data/large/plugins/profile/*/*.xplane.pb | head -n 1)
  fi
fi
cargo build --release --locked --quiet
echo "file: $FILE ($(stat -c %s "$FILE") bytes)"
for cmd in info summary steps ops; do
  best=""
  for _ in 1 2 3; do
    out=$( { /usr/bin/time -f "%e %M" target/release/stepscope "$cmd" --json "$FILE" > /dev/null; } 2>&1 )
    best=$(printf '%s\n%s\n' "$best" "$out" | grep . | sort -n | head -n 1)
  done
  echo "stepscope $cmd: best of 3 ${best% *} s, peak RSS $(( ${best#* } / 1024 )) MB"
done
python3 bench/upb_parse.py --repeat 3 "$FILE"
