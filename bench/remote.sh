#!/usr/bin/env bash
# Download rate of gs:// and s3:// reads against the emulators the tests use
# (tests/support/buckets.py: gcp-storage-emulator and moto, on 127.0.0.1).
#
#   bench/remote.sh [STEPSCOPE_BINARY] [FOLDER]
#
# Uploads FOLDER (default: the large CPU capture in bench/data/large, bench/gen_large.sh
# makes it) to both, then times `stepscope ls URL` with an empty cache (every profile
# file fetched) and again with the cache filled (nothing fetched). Prints one line of
# JSON per store: bytes, seconds, MB/s, and the second read's seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/release/stepscope}"
DIR="${2:-bench/data/large}"
fifo=$(mktemp -u)
mkfifo "$fifo"
python3 tests/support/buckets.py "$DIR" <"$fifo" >"$fifo.out" &
exec 3>"$fifo"
for _ in $(seq 600); do [ -s "$fifo.out" ] && break; sleep 0.2; done
info=$(head -n 1 "$fifo.out")
port() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$info" "$1"; }
bytes=$(python3 -c "import json,sys; d=json.loads(sys.argv[1])['uploaded']; print(sum(v for k,v in d.items() if k.endswith(('.pb','.json.gz','.prof'))))" "$info")
name=$(basename "$DIR")
for scheme in gs s3; do
  cache=$(mktemp -d)
  if [ "$scheme" = gs ]; then
    env=(STORAGE_EMULATOR_HOST="http://127.0.0.1:$(port gcs_port)")
  else
    env=(AWS_ENDPOINT_URL="http://127.0.0.1:$(port s3_port)" AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=test
      AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1)
  fi
  t0=$(date +%s.%N)
  env "${env[@]}" "$BIN" ls "$scheme://prof/logs/$name" --cache "$cache" >/dev/null
  t1=$(date +%s.%N)
  env "${env[@]}" "$BIN" ls "$scheme://prof/logs/$name" --cache "$cache" >/dev/null
  t2=$(date +%s.%N)
  python3 -c "import json,sys; b,a,c,d=int(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4]),float(sys.argv[5]); print(json.dumps({'store': sys.argv[1], 'bytes': b, 'seconds': round(c-a,2), 'mb_per_s': round(b/1e6/(c-a),1), 'cached_read_seconds': round(d-c,2)}))" \
    "$scheme" "$bytes" "$t0" "$t1" "$t2"
  rm -rf "$cache"
done
exec 3>&-
wait
rm -f "$fifo" "$fifo.out"
