#!/usr/bin/env bash
# The timeline of a pod served: `stepscope serve DIR` under STEPSCOPE_MEMORY_LIMIT=LIMIT
# (below the run's size: read a host at a time; `none`: read whole), then, with curl and
# in this order: the tracks (cold), the tiles of the first, middle and last hosts'
# tracks, an event, a search twice. Prints each request's wall time and the server's
# RSS after it, then its peak RSS.
#
#   bench/pod_timeline.sh BINARY LIMIT DIR
#
# DIR: a log directory of one run of hosts named h00, h01, … (hard links to one
# capture will do: `ln FILE DIR/plugins/profile/RUN/h00.xplane.pb` …).
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: bench/pod_timeline.sh BINARY LIMIT DIR" >&2; exit 2; }
BIN=$1 LIMIT=$2 DIR=$3
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"; kill "$pid" 2>/dev/null' EXIT
STEPSCOPE_MEMORY_LIMIT=$LIMIT "$BIN" serve "$DIR" --port 0 --no-open >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "http://" "$log" && break; sleep 0.2; done
url=$(grep -o "http://[^ ]*" "$log" | head -n 1)
rss() { echo $(($(grep "$1" "/proc/$pid/status" | awk '{print $2}') / 1024)); }
ask() {
  local s e
  s=$(date +%s.%N)
  curl -s "${url}api/$1" -o "$out"
  e=$(date +%s.%N)
  printf "%-60s %6.2f s  rss %s MB  %s\n" "${1:0:60}" "$(echo "$e - $s" | bc)" "$(rss VmRSS)" "$(head -c 40 "$out")"
}
ask "timeline/tracks"
read -r S E A B C < <(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
hosts = sorted({x["host"] for x in t["tracks"]})
ids = lambda h: ",".join(str(x["id"]) for x in t["tracks"] if x["host"] == h)
print(t["start_ps"], t["end_ps"], ids(hosts[0]), ids(hosts[len(hosts) // 2]), ids(hosts[-1]))' "$out")
M=$((S + (E - S) / 50))
ask "timeline/tiles?tracks=$A&start_ps=$S&end_ps=$E&px=1200&rows=12"
ask "timeline/tiles?tracks=$A&start_ps=$S&end_ps=$M&px=1200&rows=12"
ask "timeline/tiles?tracks=$B&start_ps=$S&end_ps=$E&px=1200&rows=12"
ask "timeline/tiles?tracks=$C&start_ps=$S&end_ps=$E&px=1200&rows=12"
ask "timeline/event?track=${A%%,*}&index=5"
ask "timeline/search?q=fusion&offset=0&limit=1000"
ask "timeline/search?q=fusion&offset=0&limit=1000"
echo "peak rss $(rss VmHWM) MB"
