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
#   git worktree add /tmp/base HEAD && (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release)
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
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 differ=0
for p in "${profiles[@]}"; do
  [ -e "$p" ] || continue
  for c in "${commands[@]}"; do
    # shellcheck disable=SC2086
    "$old" $c "$p" >"$tmp/old" 2>"$tmp/old.err"
    a=$?
    # shellcheck disable=SC2086
    "$new" $c "$p" >"$tmp/new" 2>"$tmp/new.err"
    b=$?
    if [ "$a" = "$b" ] && cmp -s "$tmp/old" "$tmp/new"; then
      same=$((same + 1))
    else
      differ=$((differ + 1))
      echo "DIFFER: $c $p (exit $a vs $b)"
    fi
  done
done
echo "$same same, $differ differ"
[ "$differ" -eq 0 ]
