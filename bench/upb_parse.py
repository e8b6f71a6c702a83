#!/usr/bin/env python3
"""Time Python protobuf (upb backend) parsing of an XSpace file.

    python3 bench/upb_parse.py FILE.xplane.pb [--repeat N]

Uses the dynamically built message classes of tests/support/xspace_ref.py.
Prints the protobuf backend, file size, read and ParseFromString wall seconds
(best of N), the event count (to prove the parse was complete) and the peak RSS
of the process (resource.getrusage, MB).
"""
import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import xspace_ref  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    XSpace = xspace_ref.classes()["XSpace"]
    t0 = time.perf_counter()
    with open(a.file, "rb") as f:
        data = f.read()
    t_read = time.perf_counter() - t0
    best = None
    space = None
    for _ in range(a.repeat):
        space = XSpace()
        t0 = time.perf_counter()
        space.ParseFromString(data)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    events = sum(len(l.events) for p in space.planes for l in p.lines)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"backend: {api_implementation.Type()}")
    print(f"file: {a.file} ({len(data):,} bytes, {len(data) / 1e6:.1f} MB)")
    print(f"read: {t_read:.3f} s")
    print(f"ParseFromString: {best:.3f} s (best of {a.repeat})")
    print(f"events: {events:,}")
    print(f"peak RSS: {rss_kb / 1024:.1f} MB")


if __name__ == "__main__":
    main()
