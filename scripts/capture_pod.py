#!/usr/bin/env python3
"""Capture a real multi-process JAX run (a pod on one machine) for stepscope tests.

Starts N JAX processes on this machine (`jax.distributed` over localhost, CPU
collectives by gloo). Together they train a small MLP data-parallel: every step all
processes all-reduce their gradients. Each process profiles itself, as each host of a
pod does, and the capture is assembled as one run: one `<host>.xplane.pb` per process
(`host0`, `host1`, ...) in `<OUT>/plugins/profile/<run>/`.

What makes it a pod's capture and not N copies of one:
- Process 0 compiles and runs a metric program before training (as a process that
  logs does), so it numbers its programs differently: its `jit_train_step` has another
  `program_id` than the others' (XLA numbers a process's programs in compile order).
- Each step, every process also computes a norm of its own shard of an uneven batch
  (`jit_local_norm`): the last process's shard is smaller, so its program is another
  program of that name.

With --no-sync no process waits for its steps: each dispatches ahead of its device
(the all-reduce still keeps the devices in step with each other).

With --straggler the last process is a straggling host: inside the step, before the
gradients are all-reduced, it also evaluates the loss three more times on its batch (a
metric only it computes: about its step's work again), so every other process waits for
it at the all-reduce. --fixed captures the same pod without the metric (the balanced
twin). --time times the two alternately in one pod (every process runs --rounds rounds
of --steps steps of each, after warm-up), outside the profiler, and prints, as JSON, the
median step time of each as process 0's loop timed it: what balancing the work gains.

Usage:
    python3 scripts/capture_pod.py --processes 3 --steps 20 --out /tmp/pod
    python3 scripts/capture_pod.py --processes 3 --steps 20 --no-sync --out /tmp/pod-nosync
    python3 scripts/capture_pod.py --processes 2 --steps 20 --straggler --out /tmp/pod-straggler
    python3 scripts/capture_pod.py --processes 2 --steps 20 --straggler --fixed --out /tmp/pod-balanced
    python3 scripts/capture_pod.py --processes 2 --steps 8 --straggler --time --out /tmp/unused
The run folder is printed on the last line of stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=3, help="JAX processes (hosts of the pod)")
    p.add_argument("--steps", type=int, default=5, help="steps profiled (after one warm-up step)")
    p.add_argument("--width", type=int, default=256, help="the MLP's width")
    p.add_argument("--batch", type=int, default=64, help="rows of each process's batch")
    p.add_argument("--no-sync", action="store_true",
                   help="do not wait for each step's results (every process dispatches ahead, as most "
                        "training loops do); the last step's are waited for before the trace stops")
    p.add_argument("--straggler", action="store_true",
                   help="the last process also computes a metric inside each step, before the all-reduce "
                        "(about its step's work again): a straggling host")
    p.add_argument("--fixed", action="store_true", help="with --straggler: the balanced twin (no metric)")
    p.add_argument("--time", action="store_true",
                   help="with --straggler: time the straggling pod and its balanced twin alternately, no capture")
    p.add_argument("--rounds", type=int, default=6, help="--time: alternations (default 6)")
    p.add_argument("--warmup", type=int, default=3, help="--time: warm-up steps of each (default 3)")
    p.add_argument("--out", required=True, help="log directory to write the run into")
    p.add_argument("--run", default=None, help="the run's folder name under plugins/profile (default: the time, as JAX names it)")
    # Internal: one process of the pod.
    p.add_argument("--process-id", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--coordinator", default=None, help=argparse.SUPPRESS)
    p.add_argument("--trace-dir", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_process(args) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator, num_processes=args.processes, process_id=args.process_id
    )
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    pid, n = args.process_id, args.processes
    mesh = Mesh(np.array(jax.devices()), ("hosts",))
    rows, replicated = NamedSharding(mesh, P("hosts")), NamedSharding(mesh, P())
    rng = np.random.default_rng(pid)
    w = jax.device_put(jnp.full((args.width, args.width), 0.01, jnp.float32), replicated)
    x = jax.make_array_from_process_local_data(
        rows, rng.standard_normal((args.batch, args.width), dtype=np.float32)
    )

    @jax.jit
    def train_step(w, x):
        def loss(w):
            return jnp.mean(jnp.tanh(x @ w) ** 2)

        return w - 0.1 * jax.grad(loss)(w)

    if args.straggler:
        straggling = straggler_steps(args, mesh, n)
        if args.time:
            time_twins(args, straggling, w, x)
            jax.distributed.shutdown()
            return
        train_step = straggling[not args.fixed]

    @jax.jit
    def local_norm(shard):
        return jnp.sqrt(jnp.sum(shard * shard))

    if pid == 0:
        # A metric only process 0 computes, compiled before training.
        metric = jax.jit(lambda a: jnp.max(jnp.abs(a)) + jnp.mean(a))
        metric(jnp.ones((7,), jnp.float32)).block_until_ready()
    # The last process's shard of an uneven batch is smaller.
    shard_rows = args.batch if pid < n - 1 else args.batch // 2
    shard = jnp.asarray(rng.standard_normal((shard_rows, args.width), dtype=np.float32))

    w = train_step(w, x)
    local_norm(shard).block_until_ready()
    w.block_until_ready()
    jax.profiler.start_trace(args.trace_dir)
    norms = []
    for i in range(args.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = train_step(w, x)
            norms.append(local_norm(shard))
            if not args.no_sync:
                w.block_until_ready()
                norms[-1].block_until_ready()
    # With --no-sync the loop ran ahead: its work is waited for inside the capture.
    w.block_until_ready()
    for n in norms:
        n.block_until_ready()
    jax.profiler.stop_trace()
    jax.distributed.shutdown()


def straggler_steps(args, mesh, n):
    """The data-parallel step written per shard (shard_map): each process computes its
    batch's gradient, and the gradients are summed across processes (the all-reduce
    every process waits at). Returns (balanced, straggling): in the second the last
    process also evaluates the loss three more times on its batch before the sum."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def loss_fn(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    def build(straggle):
        def step(w, x):
            grad = jax.grad(loss_fn)(w, x)

            def metric(v):
                return sum(loss_fn(w, v * (1.0 + 1e-3 * k)) for k in range(1, 4))

            def nothing(v):
                return jnp.mean(v) * 0.0

            # Only the branch a process takes runs on it (an XLA conditional).
            extra = (jax.lax.axis_index("hosts") == n - 1) & straggle
            m = jax.lax.stop_gradient(jax.lax.cond(extra, metric, nothing, x))
            grad = jax.lax.psum(grad + 0.0 * m, "hosts")
            return w - 0.1 * grad

        return jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P("hosts")), out_specs=P()))

    return build(False), build(True)


def time_twins(args, steps, w, x) -> None:
    """Times the balanced and straggling steps alternately (--rounds rounds of --steps
    steps each, after --warmup of each), each step waited for; process 0 prints the
    median of each as JSON."""
    import json
    import statistics

    import jax

    balanced, straggling = steps
    for f in (balanced, straggling):
        for _ in range(args.warmup):
            w = f(w, x)
            w.block_until_ready()
    times = {"straggling": [], "balanced": []}
    for _ in range(args.rounds):
        for name, f in (("straggling", straggling), ("balanced", balanced)):
            for _ in range(args.steps):
                t0 = time.perf_counter_ns()
                w = f(w, x)
                w.block_until_ready()
                times[name].append((time.perf_counter_ns() - t0) * 1000)
    if jax.process_index() == 0:
        problem, fixed = statistics.median(times["straggling"]), statistics.median(times["balanced"])
        print(json.dumps({
            "schema": "stepscope.twin_timing/1", "program": "pod-straggler", "platform": "cpu",
            "processes": args.processes, "steps_each": len(times["balanced"]),
            "problem_step_ps": int(problem), "fixed_step_ps": int(fixed), "gain_ps": int(problem - fixed),
            "gain_pct": round(100.0 * (problem - fixed) / problem, 2),
        }), flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.process_id is not None:
        one_process(args)
        return 0
    coordinator = f"127.0.0.1:{free_port()}"
    work = tempfile.mkdtemp(prefix="stepscope-pod-")
    try:
        procs = []
        for pid in range(args.processes):
            cmd = [
                sys.executable, os.path.abspath(__file__),
                "--processes", str(args.processes), "--steps", str(args.steps),
                "--width", str(args.width), "--batch", str(args.batch), "--out", args.out,
                *(["--no-sync"] if args.no_sync else []),
                *(["--straggler"] if args.straggler else []), *(["--fixed"] if args.fixed else []),
                *(["--time", "--rounds", str(args.rounds), "--warmup", str(args.warmup)] if args.time else []),
                "--process-id", str(pid), "--coordinator", coordinator,
                "--trace-dir", os.path.join(work, f"p{pid}"),
            ]
            env = dict(os.environ, JAX_PLATFORMS="cpu")
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [p.wait(timeout=600) for p in procs]
        if any(codes):
            print(f"capture_pod: a process failed (exit codes {codes})", file=sys.stderr)
            return 1
        if args.time:
            return 0
        name = args.run or time.strftime("%Y_%m_%d_%H_%M_%S")
        run = os.path.join(args.out, "plugins", "profile", name)
        os.makedirs(run, exist_ok=True)
        for pid in range(args.processes):
            found = []
            for root, _, files in os.walk(os.path.join(work, f"p{pid}")):
                found += [os.path.join(root, f) for f in files if f.endswith(".xplane.pb")]
            if len(found) != 1:
                print(f"capture_pod: process {pid} wrote {len(found)} .xplane.pb files, not 1", file=sys.stderr)
                return 1
            shutil.copyfile(found[0], os.path.join(run, f"host{pid}.xplane.pb"))
        print(run)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
