#!/usr/bin/env python3
"""What stepscope's Profiler costs a training loop outside its capture window: the time
per step of `with prof.step():` around an empty body, and of `begin_step()`/`end_step()`,
against the bare loop, with profiling off and with a capture scheduled far ahead.

    python3 bench/python/step_overhead.py [--steps 200000]

Needs the installed package (pip install ./python) and JAX (the step annotation is
JAX's StepTraceAnnotation). Prints µs per step, best of 5 runs each.
"""

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import stepscope  # noqa: E402


def best_us(fn, steps, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(steps)
        best = min(best, time.perf_counter() - t0)
    return best / steps * 1e6


def bare(n):
    for _ in range(n):
        pass


def with_step(prof):
    def run(n):
        for _ in range(n):
            with prof.step():
                pass
    return run


def begin_end(prof):
    def run(n):
        for _ in range(n):
            prof.begin_step()
            prof.end_step()
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000)
    a = ap.parse_args()
    base = best_us(bare, a.steps)
    rows = []
    for label, kwargs in (("profiling off", {"enabled": False}), ("capture scheduled far ahead", {"start_step": 10**12})):
        for how, make in (("with prof.step()", with_step), ("begin_step/end_step", begin_end)):
            prof = stepscope.Profiler("/tmp/stepscope-overhead-bench", **kwargs)
            rows.append((label, how, best_us(make(prof), a.steps) - base))
    print(f"bare loop: {base:.3f} µs/step; stepscope adds (best of 5, {a.steps:,} steps):")
    for label, how, us in rows:
        print(f"  {label:<28} {how:<20} {us:6.2f} µs/step")


if __name__ == "__main__":
    main()
