"""Time the web UI's timeline tiles: `stepscope serve` on a profile, then tile
requests like the timeline makes them, each timed from request to full answer.

    python3 bench/tiles.py STEPSCOPE_BINARY PROFILE [--requests N]

Starts the server on a free port (`--port 0 --no-open`), loads the run once (the
tracks request, timed separately: it includes decoding), then for the five busiest
tracks asks for: the whole track at 2,000 px, and N random windows zoomed to 10 %,
1 % and 0.1 % of the run at 1,200 px (the timeline's usual widths), over one
keep-alive connection. Prints one line of JSON: load_s (tracks are indexed while
the run loads); the whole-track tile of each track as `first_ms`; p50/p90/max
milliseconds over the zoomed tiles; and the most events one tile summarised.
Times run from sending the request to the last byte of the answer (JSON parsing on
this side excluded).
"""
import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.parse


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("profile")
    ap.add_argument("--requests", type=int, default=60)
    a = ap.parse_args()
    srv = subprocess.Popen(
        [a.binary, "serve", a.profile, "--port", "0", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = srv.stdout.readline()
        url = urllib.parse.urlparse(line.split("serving", 1)[1].strip())
        base = url.path.rstrip("/")
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)

        def get(path: str):
            t0 = time.perf_counter()
            conn.request("GET", f"{base}/api/{path}")
            r = conn.getresponse()
            body = r.read()
            dt = time.perf_counter() - t0
            if r.status != 200:
                raise SystemExit(f"tiles: {path}: HTTP {r.status}: {body[:200]!r}")
            return json.loads(body), dt

        tracks, load_s = get("timeline/tracks")
        lo, hi = tracks["start_ps"], tracks["end_ps"]
        busiest = sorted(tracks["tracks"], key=lambda t: -t["events"])[:5]
        rng = random.Random(0)
        first, times, most = [], [], 0
        for t in busiest:
            tile, dt = get(f"timeline/tile?track={t['id']}&start_ps={lo}&end_ps={hi + 1}&px=2000")
            first.append(round(dt * 1000, 2))
            most = max(most, tile["events"])
        span = hi - lo
        for k in range(a.requests):
            t = busiest[k % len(busiest)]
            width = span * [0.1, 0.01, 0.001][k % 3]
            start = lo + int(rng.random() * (span - width))
            tile, dt = get(f"timeline/tile?track={t['id']}&start_ps={start}&end_ps={start + int(width) + 1}&px=1200")
            times.append(dt)
            most = max(most, tile["events"])
        ms = sorted(x * 1000 for x in times)
        print(
            json.dumps(
                {
                    "load_s": round(load_s, 3),
                    "first_ms": first,
                    "tiles": len(ms),
                    "p50_ms": round(statistics.median(ms), 2),
                    "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
                    "max_ms": round(ms[-1], 2),
                    "most_events_in_a_tile": most,
                }
            )
        )
        return 0
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    sys.exit(main())
