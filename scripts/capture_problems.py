#!/usr/bin/env python3
"""Capture a real JAX program that has one known performance problem, or its fixed twin.

Each program is a small training-like step (an MLP forward and backward with an SGD
update, jitted) with exactly one problem a user would make, and a twin with the one
change a user would make to fix it:

  callback      an io_callback running a Python function (--callback-ms of work) in the
                middle of the step            | fixed: no callback
  stale-state   the step returns its optimizer state (four buffers) unchanged, so XLA
                copies each into a new output | fixed: the state is donated
  oneoff        guide 002's `with ProfileContext(...)` and guide 001's optimizer comparison
                (one `profile_trace` per --optimizer): one step, no warm-up, so the
                capture holds the compilation | fixed: one warm-up step first
  sort          no problem, no twin: `jnp.sort` of a 512 x 2048 array, which XLA:CPU
                splits over two threads (two events of one execution of `sort.0`)
  recompile     the batch has a new number of rows every step, so jit compiles every
                step              | fixed: the batch padded to a fixed shape, with a mask
  h2d-copy      the batch is a NumPy array passed to the jitted step, so it is copied
                host -> device every step | fixed: the batch put on the device once
  op-by-op      the step is not jitted: every jnp operation is its own dispatch
                                  | fixed: jax.jit(step)
  sleep         the step sleeps --sleep-ms on the host before it dispatches (a data
                loader, a logger, a sync)  | fixed: no sleep
  matmul        a forward-only projection of the hidden state on a width x 16*width
                matrix dominates the step | fixed: the projection at 1/8 of its FLOPs
  straggler     data-parallel over 2 devices (on CPU: 2 host devices); device 0 also
                computes a metric (3 more forward passes) before the gradients are
                summed: about twice its peer's work | fixed: no metric
  conv          no twin: a two-layer convolution net (NHWC, 3x3) forward and backward
                (cuDNN convolutions on an NVIDIA GPU); 40 steps unless --steps
  nosync        no twin: the MLP step in a loop that never waits for its device (the
                loss is read once, after the last step); 40 steps unless --steps
  threads       no twin: one Python thread per device (2; on CPU: 2 host devices), each
                running the jitted step on its own device, unannotated (as the ROCm
                8-GPU capture does); the second thread starts when the first is done,
                so the devices run their steps at different times

Captures are what JAX writes: <OUT>/plugins/profile/<run>/<host>.xplane.pb. Each step is
`jax.profiler.StepTraceAnnotation("train", step_num=i)` and waits for its loss.

--time PROGRAM measures the problem and its twin outside the profiler, alternately in
one process (--rounds rounds of --steps steps each, after warm-up), and prints their
median step times as JSON: the gain a fix is worth, as a user's timer sees it.

--time-tracer PROGRAM captures the problem with the Python tracer on and off
(python_tracer_level 1 and 0), alternately in one process, and prints the median step
and the median time to dispatch a step (the step's call until it returns) of each as
JSON: what the tracer costs the host (tests/fixtures/tracer.json).

Examples:
    python3 scripts/capture_problems.py callback --out /tmp/cb
    python3 scripts/capture_problems.py callback --fixed --out /tmp/cb-fixed
    python3 scripts/capture_problems.py --time callback
    python3 scripts/capture_problems.py --time-tracer op-by-op --steps 8 --rounds 6 --out /tmp/tracer
    python3 scripts/capture_problems.py --platform gpu conv --out /tmp/conv
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

PROGRAMS = ("callback", "stale-state", "oneoff", "sort", "recompile", "h2d-copy", "op-by-op",
            "sleep", "matmul", "straggler", "conv", "nosync", "threads")
NO_TWIN = ("sort", "conv", "nosync", "threads")
TWO_DEVICES = ("straggler", "threads")
# Sizes by platform: on a GPU the MLP is large enough that a step is about a millisecond
# of device work (width, batch, each stale-state buffer in MB).
SIZES = {"cpu": (512, 256, 4.0), "gpu": (4096, 2048, 256.0)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Examples:"):],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", nargs="?", choices=PROGRAMS, help="the program to capture")
    p.add_argument("--fixed", action="store_true", help="capture the fixed twin instead")
    p.add_argument("--time", choices=PROGRAMS, help="time PROGRAM and its twin alternately; no capture")
    p.add_argument("--time-tracer", choices=PROGRAMS, metavar="PROGRAM",
                   help="capture PROGRAM with the Python tracer on and off alternately (--rounds captures "
                        "each, --steps steps each) and print both median steps, as the loop timed them")
    p.add_argument("--out", default="logdir", help="log directory (TensorBoard layout); default ./logdir")
    p.add_argument("--steps", type=int, help="captured (or timed) steps (default 10; conv, nosync 40)")
    p.add_argument("--warmup", type=int, default=3, help="un-captured warm-up steps (default 3)")
    p.add_argument("--rounds", type=int, default=6, help="--time: alternations (default 6)")
    p.add_argument("--python-tracer-level", type=int, choices=(0, 1), default=0,
                   help="ProfileOptions.python_tracer_level of the capture (default 0: off; 1 records every "
                        "Python call, as jax.profiler.trace does by default)")
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu",
                   help="where JAX runs (gpu: JAX_PLATFORMS=cuda,cpu); default cpu")
    p.add_argument("--width", type=int, help="MLP width (default 512 on cpu, 4096 on gpu)")
    p.add_argument("--batch", type=int, help="batch rows (default 256 on cpu, 2048 on gpu)")
    p.add_argument("--sleep-ms", type=float, default=3.0, help="sleep: the host's sleep a step, ms (default 3)")
    p.add_argument("--callback-ms", type=float, default=6.0, help="callback: its Python work, ms (default 6)")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd",
                   help="oneoff: the update the step applies (guide 001 compares optimizers; default sgd)")
    p.add_argument("--state-mb", type=float,
                   help="stale-state: each of 4 buffers, MB (default 4 on cpu, 256 on gpu)")
    a = p.parse_args(argv)
    width, batch, state_mb = SIZES[a.platform]
    a.width = a.width or width
    a.batch = a.batch or batch
    a.state_mb = a.state_mb or state_mb
    if a.steps is None:
        a.steps = 40 if a.program in ("conv", "nosync") else 10
    if [a.program, a.time, a.time_tracer].count(None) != 2:
        p.error("name one PROGRAM to capture, or --time PROGRAM, or --time-tracer PROGRAM")
    calls = a.warmup + a.steps * (a.rounds if a.time else 1) + 1
    if "recompile" in (a.program, a.time) and calls >= a.batch:
        p.error(f"recompile gives each call a batch of its own size, 1 to --batch - 1 rows: "
                f"{calls} calls need --batch > {calls}")
    for name in NO_TWIN:
        if name in (a.program, a.time) and (a.fixed or a.time):
            p.error(f"{name} has no fixed twin")
    if a.time == "oneoff":
        p.error("oneoff's problem is in the capture (its compilation), not in a warm step: nothing to time")
    if a.steps < 1 or a.warmup < 0 or a.rounds < 1:
        p.error("--steps and --rounds must be >= 1, --warmup >= 0")
    return a


def build(args, program, fixed):
    """The step of `program` (or its twin): returns (step, state), where step(state, i)
    returns (state, loss) and has not waited for its device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import io_callback

    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    w1 = jax.random.normal(k1, (args.width, args.width), jnp.float32) * 0.02
    w2 = jax.random.normal(k2, (args.width, args.width), jnp.float32) * 0.02
    x = jax.random.normal(k3, (args.batch, args.width), jnp.float32)

    def loss_fn(params, x):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1]) ** 2)

    def host_work(v):
        # A Python function that takes --callback-ms of the host's time (a metric, a
        # logger, a lookup), as user callbacks do.
        end = time.perf_counter() + args.callback_ms / 1000.0
        acc = 0.0
        while time.perf_counter() < end:
            acc += 1.0
        return np.asarray(v, np.float32)

    def sgd(params, grads):
        return tuple(p - 1e-3 * g for p, g in zip(params, grads))

    if program == "callback":
        def train_step(params, x):
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            if not fixed:
                loss = io_callback(host_work, jax.ShapeDtypeStruct((), jnp.float32), loss, ordered=True)
            return sgd(params, grads), loss

        jitted = jax.jit(train_step)
        state = (w1, w2)

        def step(state, i):
            return jitted(state, x)

        return step, state

    if program == "stale-state":
        n = max(1, int(args.state_mb * 1e6 / 4))
        opt = tuple(jnp.full((n,), float(j), jnp.float32) for j in range(4))

        def train_step(params, opt, x):
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            # The optimizer state is returned as it came in (a frozen schedule, a buffer
            # a user forgot to update): XLA must give each output its own buffer.
            return sgd(params, grads), opt, loss

        jitted = jax.jit(train_step, donate_argnums=(1,) if fixed else ())

        def step(state, i):
            params, opt = state
            params, opt, loss = jitted(params, opt, x)
            return (params, opt), loss

        return step, ((w1, w2), opt)

    if program == "oneoff":
        def adam(params, grads, moments, t):
            m, v = moments
            m = tuple(0.9 * a + 0.1 * g for a, g in zip(m, grads))
            v = tuple(0.999 * a + 0.001 * g * g for a, g in zip(v, grads))
            new = tuple(p - 1e-3 * (a / (1 - 0.9 ** t)) / (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8)
                        for p, a, b in zip(params, m, v))
            return new, (m, v)

        def train_step(state, x):
            params, moments, t = state
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            if args.optimizer == "adam":
                params, moments = adam(params, grads, moments, t + 1.0)
            else:
                params = sgd(params, grads)
            return (params, moments, t + 1.0), loss

        jitted = jax.jit(train_step)

        def step(state, i):
            return jitted(state, x)

        zeros = tuple(jnp.zeros_like(w) for w in (w1, w2))
        return step, ((w1, w2), (zeros, zeros), jnp.float32(0.0))

    if program == "sort":
        x = jax.random.normal(k3, (512, 2048), jnp.float32)
        sort = jax.jit(lambda v: jnp.sort(v, axis=-1) * 2.0)

        def step(state, i):
            out = sort(x)
            return state, out[0, 0]

        return step, None

    return build_more(args, program, fixed, (w1, w2, x, k3), loss_fn, sgd)


def build_more(args, program, fixed, arrays, loss_fn, sgd):
    """The programs of #72's proof: each the MLP step with one cause of a slow step."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    w1, w2, x, key = arrays
    params = (w1, w2)

    if program == "recompile":
        rows = iter(range(args.batch - 1, 0, -1))  # a new shape every call, never repeated

        def masked_loss(params, x, mask):
            h = jnp.tanh(x @ params[0])
            per_row = jnp.mean((h @ params[1]) ** 2, axis=1)
            return jnp.sum(per_row * mask) / jnp.sum(mask)

        def train_step(params, x, mask):
            loss, grads = jax.value_and_grad(masked_loss)(params, x, mask)
            return sgd(params, grads), loss

        jitted = jax.jit(train_step)

        def step(state, i):
            n = next(rows)
            if fixed:  # the batch padded to its full shape; the padding masked out
                mask = (jnp.arange(args.batch) < n).astype(jnp.float32)
                return jitted(state, x, mask)
            return jitted(state, x[:n], jnp.ones((n,), jnp.float32))

        return step, params

    if program in ("h2d-copy", "op-by-op", "sleep", "nosync"):
        def train_step(params, x):
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            return sgd(params, grads), loss

        fn = train_step if (program == "op-by-op" and not fixed) else jax.jit(train_step)
        batch = np.asarray(x) if (program == "h2d-copy" and not fixed) else x

        def step(state, i):
            if program == "sleep" and not fixed:
                time.sleep(args.sleep_ms / 1000.0)  # the host's work before it dispatches
            return fn(state, batch)

        return step, params

    if program == "matmul":
        cols = args.width * (2 if fixed else 16)
        wbig = jax.random.normal(key, (args.width, cols), jnp.float32) * 0.02

        def train_step(params, wbig, x):
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            # A forward-only projection (a metric, a probe) of the hidden state.
            proj = jnp.mean(jnp.tanh(x @ params[0]) @ wbig)
            return sgd(params, grads), loss + 0.0 * proj

        jitted = jax.jit(train_step)

        def step(state, i):
            return jitted(state, wbig, x)

        return step, params

    if program == "straggler":
        return straggler(args, fixed, params, key)

    if program == "conv":
        gpu = args.platform == "gpu"
        dtype = jnp.bfloat16 if gpu else jnp.float32
        n, hw, c = (32, 56, 64) if gpu else (8, 32, 32)
        k1, k2, k3 = jax.random.split(key, 3)
        kernels = tuple((jax.random.normal(k, (3, 3, c, c), jnp.float32) * 0.05).astype(dtype)
                        for k in (k1, k2))
        images = jax.random.normal(k3, (n, hw, hw, c), jnp.float32).astype(dtype)

        def conv(v, k):
            return jax.lax.conv_general_dilated(v, k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))

        def conv_loss(kernels, v):
            h = jax.nn.relu(conv(v, kernels[0]))
            return jnp.mean(conv(h, kernels[1]).astype(jnp.float32) ** 2)

        def train_step(kernels, v):
            loss, grads = jax.value_and_grad(conv_loss)(kernels, v)
            return tuple(k - (1e-3 * g).astype(k.dtype) for k, g in zip(kernels, grads)), loss

        jitted = jax.jit(train_step)

        def step(state, i):
            return jitted(state, images)

        return step, kernels

    raise SystemExit(f"unknown program {program!r}")


def straggler(args, fixed, params, key):
    """Data-parallel over two devices: each computes its shard's gradient and the
    gradients are summed across devices (the collective every device waits at); unless
    `fixed`, device 0 also evaluates the loss three more times on its shard (a metric
    only it computes: about its step's work again)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()[:2]
    if len(devices) < 2:
        raise SystemExit("straggler needs two devices (on CPU: XLA_FLAGS=--xla_force_host_platform_device_count=2)")
    mesh = Mesh(np.array(devices), ("d",))
    x = jax.device_put(jax.random.normal(key, (2 * args.batch, args.width), jnp.float32),
                       NamedSharding(mesh, P("d")))

    def loss_fn(params, x):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1]) ** 2)

    def train_step(params, x):
        loss, grads = jax.value_and_grad(loss_fn)(params, x)

        def metric(v):
            return sum(loss_fn(params, v * (1.0 + 1e-3 * k)) for k in range(1, 4))

        def nothing(v):
            return jnp.mean(v) * 0.0

        # Only the branch a device takes runs on it (an XLA conditional), outside the
        # gradient (XLA:CPU of JAX 0.10 crashes differentiating a cond under shard_map).
        extra = (jax.lax.axis_index("d") == 0) & (not fixed)
        m = jax.lax.stop_gradient(jax.lax.cond(extra, metric, nothing, x))
        grads = jax.lax.psum(grads, "d")
        return tuple(p - 1e-3 * g for p, g in zip(params, grads)), jax.lax.psum(loss + 0.0 * m, "d")

    sharded = jax.shard_map(train_step, mesh=mesh, in_specs=(P(), P("d")), out_specs=(P(), P()))
    jitted = jax.jit(sharded)

    def step(state, i):
        return jitted(state, x)

    return step, params


def thread_a_device(args, steps):
    """The jitted MLP step on each of two devices, warmed up: returns a function that
    runs it `steps` times on each from a thread of its own per device, the second
    thread after the first, so each device runs its steps at its own time, with no
    step annotation."""
    import threading

    import jax

    devices = jax.devices()[:2]
    if len(devices) < 2:
        raise SystemExit("threads needs two devices (on CPU: XLA_FLAGS=--xla_force_host_platform_device_count=2)")
    step, state = build(args, "callback", True)
    states = [run_steps(step, jax.device_put(state, d), max(args.warmup, 1), annotate=False) for d in devices]

    def run():
        for i in range(len(devices)):
            t = threading.Thread(target=run_steps, args=(step, states[i], steps, False))
            t.start()
            t.join()

    return run


def run_steps(step, state, n, annotate, first=0, sync=True):
    import jax

    loss = None
    for i in range(first, first + n):
        ctx = jax.profiler.StepTraceAnnotation("train", step_num=i) if annotate else _Null()
        with ctx:
            state, loss = step(state, i)
            if sync:
                loss.block_until_ready()
    if loss is not None and not sync:
        float(loss)  # the loop's one read of its device, after the last step
    return state


def capture(args):
    import jax

    if args.program == "threads":
        threads = thread_a_device(args, args.steps)
    else:
        step, state = build(args, args.program, args.fixed)
    if args.program == "oneoff":
        # Guide 002's one-off capture: the trace holds the first call (and its compile);
        # the twin warms up once first, as guide 001 says to.
        warmup, steps = (1 if args.fixed else 0), 1
    else:
        warmup, steps = args.warmup, args.steps
    if args.program != "threads":
        state = run_steps(step, state, warmup, annotate=False, first=-warmup)
    opts = jax.profiler.ProfileOptions()
    opts.host_tracer_level = 2
    opts.python_tracer_level = args.python_tracer_level
    profile_root = os.path.join(args.out, "plugins", "profile")
    before = set(os.listdir(profile_root)) if os.path.isdir(profile_root) else set()
    t0 = time.perf_counter()
    jax.profiler.start_trace(args.out, profiler_options=opts)
    try:
        if args.program == "oneoff":
            state, loss = step(state, 0)  # as `with ProfileContext(...): train_step(...)`
            loss.block_until_ready()
        elif args.program == "threads":
            threads()
        else:
            run_steps(step, state, steps, annotate=True, sync=args.program != "nosync")
    finally:
        jax.profiler.stop_trace()
    elapsed = time.perf_counter() - t0
    after = set(os.listdir(profile_root))
    new = sorted(after - before) or [max(after, key=lambda n: os.path.getmtime(os.path.join(profile_root, n)))]
    run_dir = os.path.join(profile_root, new[-1])
    print(f"jax {jax.__version__}, {args.program}{' (fixed)' if args.fixed else ''}: "
          f"{steps} step(s) in {elapsed * 1e3:.1f} ms", file=sys.stderr)
    print(run_dir)


def time_pair(args):
    """Median step time of the problem and its twin, alternately, outside the profiler."""
    sides = {}
    for fixed in (False, True):
        step, state = build(args, args.time, fixed)
        state = run_steps(step, state, max(args.warmup, 1), annotate=False)
        sides[fixed] = [step, state, []]
    for _ in range(args.rounds):
        for fixed in (False, True):
            step, state, times = sides[fixed]
            for i in range(args.steps):
                t = time.perf_counter()
                state, loss = step(state, i)
                loss.block_until_ready()
                times.append(time.perf_counter() - t)
            sides[fixed][1] = state
    problem = statistics.median(sides[False][2]) * 1e12
    fixed = statistics.median(sides[True][2]) * 1e12
    print(json.dumps({
        "schema": "stepscope.twin_timing/1",
        "program": args.time,
        "steps_each": args.rounds * args.steps,
        "problem_step_ps": round(problem),
        "fixed_step_ps": round(fixed),
        "gain_ps": round(problem - fixed),
        "gain_pct": round(100.0 * (problem - fixed) / problem, 2),
    }))


def time_tracer(args):
    """Median step, and median time to dispatch it (the step's call, until it returns),
    of captures of one program with python_tracer_level 1 and 0, alternately in one
    process: what the Python tracer costs the host. Each capture is
    kept, under --out/python-tracer-LEVEL/round-R."""
    import jax

    step, state = build(args, args.time_tracer, False)
    state = run_steps(step, state, max(args.warmup, 1), annotate=False)
    times = {1: [], 0: []}
    kept = {}
    for r in range(args.rounds):
        for level in (1, 0):
            opts = jax.profiler.ProfileOptions()
            opts.host_tracer_level = 2
            opts.python_tracer_level = level
            # A logdir a capture: two captures in one second would share a run folder.
            out = os.path.join(args.out, f"python-tracer-{level}", f"round-{r}")
            jax.profiler.start_trace(out, profiler_options=opts)
            try:
                for i in range(args.steps):
                    t = time.perf_counter()
                    with jax.profiler.StepTraceAnnotation("train", step_num=r * args.steps + i):
                        state, loss = step(state, i)
                        dispatched = time.perf_counter()
                        loss.block_until_ready()
                    times[level].append((time.perf_counter() - t, dispatched - t))
            finally:
                jax.profiler.stop_trace()
            root = os.path.join(out, "plugins", "profile")
            kept.setdefault(level, []).append(os.path.join(root, max(os.listdir(root))))
    median = lambda level, k: round(statistics.median(t[k] for t in times[level]) * 1e12)
    print(json.dumps({
        "schema": "stepscope.tracer_timing/1",
        "program": args.time_tracer,
        "steps_each": args.rounds * args.steps,
        "traced_step_ps": median(1, 0),
        "untraced_step_ps": median(0, 0),
        "traced_dispatch_ps": median(1, 1),
        "untraced_dispatch_ps": median(0, 1),
        "tracer_dispatch_ps": median(1, 1) - median(0, 1),
        "runs": {"python-tracer-1": kept[1], "python-tracer-0": kept[0]},
    }))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv=None):
    args = parse_args(argv)
    # cuda,cpu: io_callback needs a CPU device to place its operands on.
    os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu" if args.platform == "gpu" else "cpu")
    if {args.program, args.time, args.time_tracer} & set(TWO_DEVICES) and args.platform == "cpu":
        # Two devices of the host's CPU (set before JAX starts).
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=2".strip()
    if args.time:
        time_pair(args)
    elif args.time_tracer:
        time_tracer(args)
    else:
        capture(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
