#!/usr/bin/env python3
"""A small JAX job on CPU that serves the profiler, for `stepscope capture` / `top` tests.

Starts `jax.profiler.start_server(PORT)` (on a free port unless --port is given),
compiles the step, prints the port alone on the first line of stdout (flushed), then runs a jitted
training-like loop, each iteration wrapped in
`jax.profiler.StepTraceAnnotation("train", step_num=i)`, until --seconds have passed
(default 60), then exits. A short sleep between steps keeps CPU use modest.

Examples:
    python3 tests/support/jax_server.py                  # free port, 60 s
    python3 tests/support/jax_server.py --port 9012 --seconds 600
    python3 tests/support/jax_server.py --steps 0         # idle: captures are empty
    stepscope capture 127.0.0.1:9012 --duration 1s
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="profiler port (default: a free one)")
    p.add_argument("--seconds", type=float, default=60.0, help="run this long, then exit (default 60)")
    p.add_argument("--sleep-ms", type=float, default=5.0, help="sleep between steps, ms (default 5)")
    p.add_argument("--size", type=int, default=128, help="matrix size (default 128)")
    p.add_argument("--steps", type=int, default=-1,
                   help="stop stepping after N steps and stay idle until --seconds (default: keep stepping)")
    args = p.parse_args(argv)

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    port = args.port or free_port()
    jax.profiler.start_server(port)

    @jax.jit
    def train_step(w, x):
        with jax.named_scope("layer0"):
            h = jnp.tanh(x @ w)
        with jax.named_scope("loss"):
            loss = jnp.mean(h * h)
        g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return w - 0.01 * g, loss

    key = jax.random.PRNGKey(0)
    w = jax.random.normal(key, (args.size, args.size), jnp.float32) * 0.1
    x = jax.random.normal(key, (args.size, args.size), jnp.float32)
    w, loss = train_step(w, x)  # compile before the loop
    loss.block_until_ready()
    # Ready: the server is up and compilation is done, so captures from now on see
    # only the loop (or nothing, with --steps 0).
    print(port, flush=True)

    deadline = time.monotonic() + args.seconds
    step = 0
    while time.monotonic() < deadline:
        if 0 <= args.steps <= step:
            time.sleep(0.05)  # idle: no JAX work, so a capture now records nothing
            continue
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            w, loss = train_step(w, x)
            loss.block_until_ready()
        step += 1
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000.0)
    print(f"done after {step} steps", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
