#!/usr/bin/env bash
# Runs the fuzz targets one after another, niced, each for its share of the time.
# Corpus: fuzz/corpus/<target> (committed, minimised) plus fresh seeds sliced from
# tests/fixtures by fuzz/scripts/make_seeds.py.
#
#   bash fuzz/run.sh [MINUTES_SCALE]   # default: the 62-minute campaign in docs/robustness.md
#   FUZZ_TARGETS="hlo pprof" bash fuzz/run.sh 0.1
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); no nightly toolchain: RUSTC_BOOTSTRAP=1
# lets the stable compiler accept the sanitizer-coverage flags. Working corpora grow in
# fuzz/corpus-raw/<target> (seeded from fuzz/corpus/<target>); crashes land in
# fuzz/artifacts/<target>; logs in fuzz/logs/<target>.log. Afterwards minimise with
# `bash fuzz/run.sh cmin`.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
FLAGS=(-O -a -s none)
declare -A MINUTES=([xspace]=20 [trace_json]=16 [pprof]=10 [hlo]=10 [kernel_details]=6 [parquet]=10)
TARGETS=${FUZZ_TARGETS:-"xspace trace_json pprof hlo kernel_details parquet"}

if [ "${1:-}" = cmin ]; then
  for t in $TARGETS; do
    cargo fuzz cmin "${FLAGS[@]}" "$t" "fuzz/corpus-raw/$t" -- -rss_limit_mb=2048 -timeout=5
    rm -rf "fuzz/corpus/$t" && mkdir -p "fuzz/corpus/$t"
    if [ "$t" = xspace ] || [ "$t" = trace_json ]; then
      # Keep the committed corpus small: inputs up to 8 KiB, merged again. The large
      # inputs (whole real planes and traces) come back from make_seeds.py at each run.
      small=$(mktemp -d)
      find "fuzz/corpus-raw/$t" -type f -size -9k -exec cp {} "$small/" \;
      "fuzz/target/x86_64-unknown-linux-gnu/release/$t" -merge=1 -rss_limit_mb=2048 -timeout=5 \
        "fuzz/corpus/$t" "$small" 2>&1 | grep "MERGE-OUTER: [0-9]* new" || true
      rm -rf "$small"
    else
      cp "fuzz/corpus-raw/$t"/* "fuzz/corpus/$t/"
    fi
    echo "$t: $(ls "fuzz/corpus/$t" | wc -l) files, $(cat "fuzz/corpus/$t"/* | wc -c) bytes"
  done
  exit 0
fi

SCALE=${1:-1}
mkdir -p fuzz/logs
cargo fuzz build "${FLAGS[@]}"
seeds=$(mktemp -d)
python3 fuzz/scripts/make_seeds.py "$seeds"
for t in $TARGETS; do
  secs=$(python3 -c "print(int(${MINUTES[$t]} * 60 * $SCALE))")
  mkdir -p "fuzz/corpus-raw/$t"
  [ -d "fuzz/corpus/$t" ] && cp -n "fuzz/corpus/$t"/* "fuzz/corpus-raw/$t/" 2>/dev/null || true
  cp -n "$seeds/$t"/* "fuzz/corpus-raw/$t/" 2>/dev/null || true
  extra=()
  [ "$t" = trace_json ] && extra+=(-dict=fuzz/trace_json.dict)
  echo "$(date +%T) $t for ${secs}s" >&2
  # -fork=1 with -ignore_*: one worker process, and a crash is saved and fuzzing goes on.
  nice -n 19 cargo fuzz run "${FLAGS[@]}" "$t" "fuzz/corpus-raw/$t" -- \
    -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=5 -print_final_stats=1 "${extra[@]}" \
    > "fuzz/logs/$t.log" 2>&1 || echo "$t exited with $?" >&2
  echo "$(date +%T) $t done: $(ls "fuzz/corpus-raw/$t" | wc -l) inputs, artifacts: $(ls "fuzz/artifacts/$t" 2>/dev/null | wc -l)" >&2
done
