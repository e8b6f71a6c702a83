#!/usr/bin/env bash
# Checks that a change to the readers or analyses left every output as it was: runs
# two stepscope binaries over every fixture (and any further profiles named) with
# the commands below, JSON and CSV, and compares their outputs and exit codes byte
# for byte.
#
#   bench/same_output.sh OLD_BINARY NEW_BINARY [PROFILE...]
#
# Prints one line per difference and a closing "N same, M differ"; exits 1 on any
# difference. Build the old binary from a worktree, e.g.
#   git worktree add /tmp/base HEAD && (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release --locked)
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/same_output.sh OLD_BINARY NEW_BINARY [PROFILE...]" >&2; exit 2; }
old=$1 new=$2
shift 2
profiles=(tests/fixtures/*/ "$@")
commands=(
  "info --json" "summary --json" "summary --csv" "steps --json" "steps --csv"
  "ops --json" "ops --csv" "ops --by category --json" "ops --by module --json"
  "ops --by scope --json" "ops --by scope --depth 2 --csv" "kernels --json" "kernels --csv"
  "memory --json" "collectives --json" "compile --json" "devices --json" "advise --json"
  "roofline --json" "scopes --json" "ops --by line --json" "ops --by stack --csv"
  "summary" "advise" "steps" "ops" "devices" "collectives" "scopes" "roofline"
)
# Commands over two runs: each pair below (where both are there), both ways.
pairs=(
  "tests/fixtures/cpu-guide-adam tests/fixtures/cpu-guide-sgd"
  "tests/fixtures/cpu-clean tests/fixtures/cpu-slow"
  "tests/fixtures/gpu-scan tests/fixtures/gpu-scan-nocb"
  "tests/fixtures/cpu-dp2-own-steps tests/fixtures/cpu-dp4"
)
pair_commands=("diff --json" "diff --by scope --json" "diff --by line --json" "diff" "compare --json" "compare")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 differ=0
compare_run() { # LABEL ARGS...: one command, both binaries
  local label=$1 a b
  shift
  "$old" "$@" >"$tmp/old" 2>"$tmp/old.err"
  a=$?
  "$new" "$@" >"$tmp/new" 2>"$tmp/new.err"
  b=$?
  if [ "$a" = "$b" ] && cmp -s "$tmp/old" "$tmp/new"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFER: $label (exit $a vs $b)"
  fi
}
for p in "${profiles[@]}"; do
  [ -e "$p" ] || continue
  for c in "${commands[@]}"; do
    # shellcheck disable=SC2086
    compare_run "$c $p" $c "$p"
  done
done
for pair in "${pairs[@]}"; do
  # shellcheck disable=SC2086
  set -- $pair
  [ -e "$1" ] && [ -e "$2" ] || continue
  for c in "${pair_commands[@]}"; do
    # shellcheck disable=SC2086
    compare_run "$c $1 $2" $c "$1" "$2"
    # shellcheck disable=SC2086
    compare_run "$c $2 $1" $c "$2" "$1"
  done
  # check: the second run against the first's summary, saved by the old binary.
  "$old" summary --json "$1" >"$tmp/baseline.json" 2>/dev/null
  compare_run "check $2 --baseline $1" check "$2" --baseline "$tmp/baseline.json" --json
  compare_run "check $2 --baseline $1 (text)" check "$2" --baseline "$tmp/baseline.json"
done
echo "$same same, $differ differ"
[ "$differ" -eq 0 ]
