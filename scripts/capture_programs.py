#!/usr/bin/env python3
"""Capture a real JAX profile whose programs share names (CPU or one NVIDIA GPU).

What stepscope must keep apart (issue #44: one op is one instruction of one program;
one execution is one launch), in one small loop:

- two jitted functions both named `update`, made by two factories: one multiplies
  matrices, the other reduces. Both are XLA module `jit_update`, with two program ids;
  both start with the same element-wise prologue, so instructions of the same name
  (the prologue's fusion) sit in both programs and do different amounts of work
  beside them.
- `dot` jitted for three sizes (N/4, N/2, N): module `jit_dot`, three programs whose
  GEMM instruction has the same name in each.
- the largest `dot` called --repeat times in a row without waiting: back-to-back
  launches of one GEMM, each its own execution.

Each step is `jax.profiler.StepTraceAnnotation("step", step_num=i)` holding the host
scopes `matmul_update`, `reduce_update` and `dots`; by default a step waits for its
results (--no-sync: never, as most training loops).

Output (what JAX writes), the run folder printed last on stdout:
    <LOGDIR>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb

Examples:
    # on the CPU (small sizes)
    python3 scripts/capture_programs.py --out /tmp/programs

    # on one NVIDIA GPU: bf16 GEMMs of 8192 (about 1.1 TFLOP each)
    python3 scripts/capture_programs.py --platform gpu --size 8192 --dtype bf16 --out gpu-programs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Examples:"):],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu", help="JAX backend (default cpu)")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32", help="array dtype (default f32)")
    p.add_argument("--size", type=int, default=256, help="largest matrix side N (default 256)")
    p.add_argument("--repeat", type=int, default=4, help="back-to-back calls of the largest dot a step (default 4)")
    p.add_argument("--steps", type=int, default=4, help="captured steps (default 4)")
    p.add_argument("--warmup", type=int, default=2, help="un-captured steps before the trace (default 2)")
    p.add_argument("--no-sync", action="store_true", help="steps never wait for their results")
    p.add_argument("--out", default="logdir", help="log directory (TensorBoard layout); default ./logdir")
    a = p.parse_args(argv)
    if a.size < 16 or a.size % 4:
        p.error("--size must be a multiple of 4, at least 16")
    if a.steps < 1 or a.repeat < 1 or a.warmup < 1:
        p.error("--steps, --repeat and --warmup must be >= 1 (warm-up compiles every program)")
    return a


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.platform == "gpu" else "cpu")
    import jax
    import jax.numpy as jnp

    try:
        backend = jax.default_backend()
    except Exception as e:  # a bare AssertionError where JAX_PLATFORMS names no backend it has
        backend = f"nothing ({type(e).__name__} {e})"
    if backend != args.platform:
        sys.exit(f"capture_programs.py: asked for --platform {args.platform} but JAX runs on {backend}; "
                 f"check JAX_PLATFORMS (now {os.environ['JAX_PLATFORMS']!r})")
    dtype = jnp.bfloat16 if args.dtype == "bf16" else jnp.float32

    def factory(kind):
        def update(x, w):
            y = jnp.tanh(x * 0.5) + 1.0  # the same prologue in both programs
            if kind == "matmul":
                return y @ w
            return jnp.sum(y * y, axis=1, keepdims=True) * w[:1, :]
        return jax.jit(update)

    matmul_update, reduce_update = factory("matmul"), factory("reduce")

    @jax.jit
    def dot(a, b):
        return a @ b

    n = args.size
    key = jax.random.PRNGKey(0)
    ka, kb = jax.random.split(key)
    x, w = (jax.random.normal(k, (n, n), dtype) / n ** 0.5 for k in (ka, kb))
    sizes = (n // 4, n // 2, n)
    mats = [(x[:s, :s], w[:s, :s]) for s in sizes]

    def run_step(i, annotate):
        ctx = jax.profiler.StepTraceAnnotation("step", step_num=i) if annotate else contextlib.nullcontext()
        with ctx:
            with jax.profiler.TraceAnnotation("matmul_update"):
                m = matmul_update(x, w)
            with jax.profiler.TraceAnnotation("reduce_update"):
                r = reduce_update(x, w)
            with jax.profiler.TraceAnnotation("dots"):
                outs = [dot(a, b) for a, b in mats[:-1]]
                outs += [dot(*mats[-1]) for _ in range(args.repeat)]
            if not args.no_sync:
                jax.block_until_ready((m, r, outs))
        return m, r, outs

    for i in range(args.warmup):
        jax.block_until_ready(run_step(-args.warmup + i, annotate=False))

    opts = jax.profiler.ProfileOptions()
    opts.python_tracer_level = 0
    profile_root = os.path.join(args.out, "plugins", "profile")
    before = set(os.listdir(profile_root)) if os.path.isdir(profile_root) else set()
    t0 = time.perf_counter()
    jax.profiler.start_trace(args.out, profiler_options=opts)
    try:
        results = [run_step(i, annotate=True) for i in range(args.steps)]
        jax.block_until_ready(results)  # with --no-sync the capture still holds every step's work
    finally:
        jax.profiler.stop_trace()
    elapsed = time.perf_counter() - t0

    after = set(os.listdir(profile_root))
    new = sorted(after - before) or [max(after, key=lambda d: os.path.getmtime(os.path.join(profile_root, d)))]
    run_dir = os.path.join(profile_root, new[-1])
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".trace.json.gz"):
            os.remove(os.path.join(run_dir, name))  # the xplane holds everything
    print(f"jax {jax.__version__}, backend {backend} ({jax.devices()[0].device_kind}), "
          f"{args.steps} steps in {elapsed:.2f}s; programs: jit_update x2, jit_dot x{len(sizes)} "
          f"(sizes {sizes}), {args.repeat} back-to-back dots of {n} a step", file=sys.stderr)
    for name in sorted(os.listdir(run_dir)):
        print(f"  {name}  {os.path.getsize(os.path.join(run_dir, name)):,} B", file=sys.stderr)
    print(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
