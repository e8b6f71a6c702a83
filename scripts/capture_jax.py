#!/usr/bin/env python3
"""Capture a real JAX profile (CPU or NVIDIA GPU) for stepscope tests and benchmarks.

Trains a small transformer (embedding, N layers of layernorm + causal
self-attention + layernorm + MLP, written in plain jax.numpy, hand-written Adam)
on random token data with a `jax.jit`-ted train step, under `jax.profiler`.

Each step is wrapped in `jax.profiler.StepTraceAnnotation("train", step_num=i)`;
inside it host `TraceAnnotation` scopes "data" and "train_step" (plus "tiny_ops"
and "device_put" when those knobs are on; with --guide-scopes "data_loading" holding
"fetch_batch" and "to_device", and "train_step" holding "forward_backward"). The model uses `jax.named_scope`
("layer0/attention", "layer0/mlp", ...) so XLA op events carry the name stack
in their `tf_op` stats.

Output (what JAX writes):
    <LOGDIR>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb
    <LOGDIR>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz
    <LOGDIR>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/perfetto_trace.json.gz  (--perfetto)
    <LOGDIR>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/memory.prof  (device memory pprof)
The run folder is printed on the last line of stdout.

Examples:
    # 8 steps, python tracer on, warm-up excluded, with a Perfetto trace
    python3 scripts/capture_jax.py --steps 8 --perfetto --out /tmp/logdir

    # a trace JSON capped at 2,000 events (as XProf caps it at 1,000,000)
    python3 scripts/capture_jax.py --steps 12 --trace-json-max-events 2000

    # capture compilation too (no warm-up), python tracer off
    python3 scripts/capture_jax.py --steps 3 --capture-compile --no-python-tracer

    # a host-bound capture: 5 ms sleep between steps, 50 tiny un-fused ops per step
    python3 scripts/capture_jax.py --steps 20 --sleep-ms 5 --tiny-ops 50

    # the guides' scopes, an input-bound loop (4.5 ms loading a batch), plain SGD
    python3 scripts/capture_jax.py --steps 8 --guide-scopes --input-ms 4.5 --optimizer sgd

    # a transfer-heavy capture: 64 MB device_put per step
    python3 scripts/capture_jax.py --steps 10 --device-put-mb 64

    # data-parallel over 4 CPU devices: gradients all-reduced each step
    python3 scripts/capture_jax.py --steps 4 --devices 4

    # 8 CPU devices, each step also reduce-scatters, all-gathers and all-reduces a
    # sharded array in a shard_map (XLA:CPU names them reduce_scatter.N, all_gather.N)
    python3 scripts/capture_jax.py --steps 4 --devices 8 --batch 8 --collectives

    # a loop that never waits for its device, captured while its work still runs
    python3 scripts/capture_jax.py --steps 10 --no-sync --stop-unsynced

    # 2 CPU devices, steps not annotated: each device measured in its own runs
    python3 scripts/capture_jax.py --steps 4 --devices 2 --no-step-annotation

    # cuDNN fused attention (jax.nn.dot_product_attention, implementation="cudnn")
    python3 scripts/capture_jax.py --platform gpu --steps 5 --dtype bf16 --attention cudnn \
        --layers 2 --d-model 1024 --heads 8 --seq 1024 --batch 8 --vocab 8192

    # on the GPU (CUPTI kernel events), a bigger bf16 model that keeps the GPU busy
    python3 scripts/capture_jax.py --platform gpu --steps 5 --dtype bf16 \
        --layers 4 --d-model 1024 --seq 256 --batch 16 --vocab 8192
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Examples:"):],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu",
                   help="JAX backend: cpu (default) or gpu (CUDA; fails if JAX sees no GPU)")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                   help="parameter and activation dtype (default f32; the loss is always f32)")
    p.add_argument("--out", default="logdir", help="log directory (TensorBoard layout); default ./logdir")
    p.add_argument("--steps", type=int, default=8, help="captured training steps (default 8)")
    p.add_argument("--warmup", type=int, default=2, help="un-captured warm-up steps before the trace (default 2)")
    p.add_argument("--capture-compile", action="store_true",
                   help="start the trace before the first step so compilation is captured (implies --warmup 0)")
    p.add_argument("--no-python-tracer", action="store_true", help="python_tracer_level=0 (default 1)")
    p.add_argument("--host-tracer-level", type=int, default=2, help="host_tracer_level (default 2)")
    p.add_argument("--perfetto", action="store_true", help="also write perfetto_trace.json.gz")
    p.add_argument("--trace-json-max-events", type=int, metavar="N",
                   help="cap the trace JSON at N events (TF_PROFILER_TRACE_VIEWER_MAX_EVENTS; "
                        "JAX's default is 1,000,000); the .xplane.pb keeps every event")
    p.add_argument("--no-memory-profile", action="store_true", help="skip memory.prof")
    p.add_argument("--layers", type=int, default=2, help="transformer layers (default 2)")
    p.add_argument("--d-model", type=int, default=64, help="model width (default 64)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--vocab", type=int, default=256, help="vocabulary size (default 256)")
    p.add_argument("--seq", type=int, default=32, help="sequence length (default 32)")
    p.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--sleep-ms", type=float, default=0.0, help="host sleep between steps, ms (default 0)")
    p.add_argument("--tiny-ops", type=int, default=0,
                   help="N tiny un-fused ops per step, cycling over 8 separately-jitted functions (default 0)")
    p.add_argument("--device-put-mb", type=float, default=0.0,
                   help="jax.device_put of this many MB of fresh numpy data each step (default 0)")
    p.add_argument("--devices", type=int, default=1,
                   help="N devices; on CPU made with XLA --xla_force_host_platform_device_count. Above 1 "
                        "the batch is sharded over them, data-parallel, so gradients are all-reduced "
                        "(default 1)")
    p.add_argument("--collectives", action="store_true",
                   help="with --devices N > 1: each step also runs a jitted shard_map over the devices "
                        "doing psum_scatter, all_gather and psum of a sharded array (reduce-scatter, "
                        "all-gather and all-reduce ops)")
    p.add_argument("--scan", action="store_true",
                   help="run the layers with jax.lax.scan over stacked weights (an HLO while loop) "
                        "instead of unrolled")
    p.add_argument("--no-sync", action="store_true",
                   help="do not wait for each step's loss (JAX dispatches ahead, as in most training loops); "
                        "the losses are read after the last step")
    p.add_argument("--stop-unsynced", action="store_true",
                   help="with --no-sync: stop the trace right after the last step is dispatched, while its "
                        "work (and earlier steps') still runs (a capture cut mid-loop)")
    p.add_argument("--no-step-annotation", action="store_true",
                   help="no StepTraceAnnotation around the captured steps (as in loops that never "
                        "mark their steps): steps are then found from the train step's executions")
    p.add_argument("--guide-scopes", action="store_true",
                   help="host scopes named as the user guides name theirs: data_loading (fetch_batch, "
                        "to_device) and train_step (forward_backward) instead of data and train_step")
    p.add_argument("--input-ms", type=float, default=0.0,
                   help="host time spent loading each batch, ms (a sleep inside the data-loading scope; "
                        "default 0): an input-bound loop")
    p.add_argument("--optimizer", choices=("adam", "sgd", "optax-adam"), default="adam",
                   help="hand-written Adam (default), plain SGD, or optax.adam (needs optax installed: its "
                        "frames then sit in the ops' Python stacks, as a library's do): the guides compare "
                        "optimizers")
    p.add_argument("--attention", choices=("xla", "cudnn"), default="xla",
                   help="attention as jax.numpy ops (xla, default) or jax.nn.dot_product_attention with "
                        "implementation='cudnn' (cuDNN fused attention; GPU with --dtype bf16)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    a = p.parse_args(argv)
    if a.capture_compile:
        a.warmup = 0
    if a.d_model % a.heads:
        p.error("--d-model must be a multiple of --heads")
    if a.steps < 1:
        p.error("--steps must be >= 1")
    if a.collectives and a.devices < 2:
        p.error("--collectives needs --devices 2 or more")
    if a.devices < 1 or a.batch % a.devices:
        p.error("--batch must be a multiple of --devices (>= 1)")
    return a


def main(argv=None):
    args = parse_args(argv)

    # Pin the backend: CPU stays CPU even where an accelerator plugin is installed, and
    # --platform gpu fails below rather than silently profiling the CPU.
    os.environ.setdefault("JAX_PLATFORMS", "cuda" if args.platform == "gpu" else "cpu")
    if args.devices > 1 and args.platform == "cpu":
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.devices}".strip()
    import numpy as np
    import jax
    import jax.numpy as jnp

    try:
        backend = jax.default_backend()
    except Exception as e:  # JAX raises a bare AssertionError when JAX_PLATFORMS names no backend it has
        backend = f"nothing ({type(e).__name__} {e})"
    if backend != args.platform:
        sys.exit(f"capture_jax.py: asked for --platform {args.platform} but JAX runs on {backend}; "
                 f"check JAX_PLATFORMS (now {os.environ['JAX_PLATFORMS']!r}) and that jax[cuda13] is installed")
    if args.attention == "cudnn" and (args.platform != "gpu" or args.dtype != "bf16"):
        sys.exit("capture_jax.py: --attention cudnn needs --platform gpu --dtype bf16 (cuDNN fused attention)")
    if len(jax.devices()) < args.devices:
        sys.exit(f"capture_jax.py: --devices {args.devices} but JAX sees {len(jax.devices())}")
    dtype = jnp.bfloat16 if args.dtype == "bf16" else jnp.float32

    # ---------------------------------------------------------------- model
    def init_params(key):
        d, v, s = args.d_model, args.vocab, args.seq
        keys = iter(jax.random.split(key, 4 + 6 * args.layers))

        def dense(k, fan_in, fan_out):
            return (jax.random.normal(k, (fan_in, fan_out), jnp.float32) / np.sqrt(fan_in)).astype(dtype)

        def norm():
            return {"g": jnp.ones((d,), dtype), "b": jnp.zeros((d,), dtype)}

        params = {
            "embed": (jax.random.normal(next(keys), (v, d), jnp.float32) * 0.02).astype(dtype),
            "pos": (jax.random.normal(next(keys), (s, d), jnp.float32) * 0.02).astype(dtype),
            "ln_f": norm(),
            "layers": [],
        }
        for _ in range(args.layers):
            params["layers"].append({
                "ln1": norm(),
                "wqkv": dense(next(keys), d, 3 * d),
                "wo": dense(next(keys), d, d),
                "ln2": norm(),
                "w1": dense(next(keys), d, 4 * d),
                "b1": jnp.zeros((4 * d,), dtype),
                "w2": dense(next(keys), 4 * d, d),
                "b2": jnp.zeros((d,), dtype),
            })
        return params

    def layernorm(p, x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]

    def attention(p, x):
        b, s, d = x.shape
        h = args.heads
        qkv = x @ p["wqkv"]
        q, k, v = jnp.split(qkv, 3, axis=-1)
        if args.attention == "cudnn":
            # cuDNN's fused flash attention: one custom call (__cudnn$fmha...) forward
            # and one backward, in place of the score matmuls and softmax fusions.
            q, k, v = (t.reshape(b, s, h, d // h) for t in (q, k, v))
            out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
            return out.reshape(b, s, d) @ p["wo"]
        q, k, v = (t.reshape(b, s, h, d // h).transpose(0, 2, 1, 3) for t in (q, k, v))
        scores = (q @ k.transpose(0, 1, 3, 2)) / float(np.sqrt(d // h))  # a Python float keeps the dtype
        mask = jnp.tril(jnp.ones((s, s), bool))
        scores = jnp.where(mask, scores, -1e9)
        w = jax.nn.softmax(scores, axis=-1)
        out = (w @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        return out @ p["wo"]

    def mlp(p, x):
        return jax.nn.gelu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def forward(params, tokens):
        with jax.named_scope("embed"):
            x = params["embed"][tokens] + params["pos"][None, : tokens.shape[1]]
        if args.scan:
            # One layer body looped over stacked weights (an HLO while loop), as
            # flax.linen.scan and most large models do.
            def body(x, lp):
                with jax.named_scope("layer/attention"):
                    x = x + attention(lp, layernorm(lp["ln1"], x))
                with jax.named_scope("layer/mlp"):
                    x = x + mlp(lp, layernorm(lp["ln2"], x))
                return x, None

            stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *params["layers"])
            x, _ = jax.lax.scan(body, x, stacked)
        for i, lp in enumerate([] if args.scan else params["layers"]):
            with jax.named_scope(f"layer{i}/attention"):
                x = x + attention(lp, layernorm(lp["ln1"], x))
            with jax.named_scope(f"layer{i}/mlp"):
                x = x + mlp(lp, layernorm(lp["ln2"], x))
        with jax.named_scope("head"):
            x = layernorm(params["ln_f"], x)
            return x @ params["embed"].T

    def loss_fn(params, tokens, targets):
        logits = forward(params, tokens)
        with jax.named_scope("loss"):
            logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
            nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)
            return nll.mean()

    def adam_init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return {"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}

    def sgd_step(params, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        with jax.named_scope("sgd"):
            params = jax.tree_util.tree_map(lambda p, g: (p - args.lr * g).astype(p.dtype), params, grads)
        return params, opt, loss

    def adam_step(params, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        with jax.named_scope("adam"):
            b1, b2, eps = 0.9, 0.999, 1e-8
            t = opt["t"] + 1
            m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
            v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
            tf = t.astype(jnp.float32)
            scale = args.lr * jnp.sqrt(1 - b2 ** tf) / (1 - b1 ** tf)
            params = jax.tree_util.tree_map(
                lambda p, m, v: (p - scale * m / (jnp.sqrt(v) + eps)).astype(p.dtype), params, m, v)
        return params, {"m": m, "v": v, "t": t}, loss

    if args.optimizer == "optax-adam":
        import optax  # a library's frames in the stacks (site-packages)

        tx = optax.adam(args.lr)

    def optax_step(params, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        with jax.named_scope("optax_adam"):
            updates, opt = tx.update(grads, opt, params)
            params = optax.apply_updates(params, updates)
        return params, opt, loss

    # One jitted `train_step` whatever the optimizer, as in the guides' comparisons: the
    # runs' name stacks then differ only where the optimizers do.
    steps_by_optimizer = {"sgd": sgd_step, "adam": adam_step, "optax-adam": optax_step}

    def train_step(params, opt, tokens, targets):
        return steps_by_optimizer[args.optimizer](params, opt, tokens, targets)

    train_step = jax.jit(train_step)

    # Tiny ops: each a separate jit (so each is its own XLA module/dispatch).
    tiny_fns = []
    for j in range(min(args.tiny_ops, 8)):
        c = float(j + 1)
        tiny_fns.append(jax.jit(lambda x, c=c: x * c + 1.0))

    # ---------------------------------------------------------------- data
    rng = np.random.default_rng(args.seed)

    # Data-parallel over --devices: the batch is split, parameters replicated, and XLA
    # all-reduces the gradients.
    batch_sharding = None
    if args.devices > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        mesh = Mesh(np.array(jax.devices()[: args.devices]), ("data",))
        batch_sharding = NamedSharding(mesh, PartitionSpec("data"))

    # --collectives: a sharded array that each step reduce-scatters, all-gathers and
    # all-reduces, as a model sharded with shard_map does (jax.lax.psum_scatter lowers to
    # HLO reduce-scatter, all_gather to all-gather, psum to all-reduce).
    collect_fn, collect_x = None, None
    if args.collectives:
        from jax.sharding import PartitionSpec

        def collect(x):
            part = jax.lax.psum_scatter(x, "data", scatter_dimension=0, tiled=True)
            whole = jax.lax.all_gather(part * 0.5, "data", axis=0, tiled=True)
            return whole + jax.lax.psum(jnp.sum(part), "data") * 1e-6

        collect_fn = jax.jit(jax.shard_map(collect, mesh=mesh, in_specs=PartitionSpec("data"),
                                           out_specs=PartitionSpec("data")))
        rows = 64 * args.devices
        collect_x = jax.device_put(jnp.ones((rows * args.devices, 256), jnp.float32), batch_sharding)

    def fetch_batch():
        if args.input_ms > 0:
            time.sleep(args.input_ms / 1000.0)  # reading and decoding a batch
        return rng.integers(0, args.vocab, size=(args.batch, args.seq + 1), dtype=np.int32)

    def to_device(data):
        if batch_sharding is not None:
            return jax.device_put(data[:, :-1], batch_sharding), jax.device_put(data[:, 1:], batch_sharding)
        return jnp.asarray(data[:, :-1]), jnp.asarray(data[:, 1:])

    def make_batch():
        if not args.guide_scopes:
            return to_device(fetch_batch())
        with jax.profiler.TraceAnnotation("fetch_batch"):
            data = fetch_batch()
        with jax.profiler.TraceAnnotation("to_device"):
            return to_device(data)

    params = init_params(jax.random.PRNGKey(args.seed))
    opt = tx.init(params) if args.optimizer == "optax-adam" else adam_init(params)
    tiny_x = jnp.ones((16,), jnp.float32)
    put_elems = int(args.device_put_mb * 1024 * 1024 // 4)

    def run_step(i, annotate):
        nonlocal params, opt, tiny_x, collect_x
        ctx = jax.profiler.StepTraceAnnotation("train", step_num=i) if annotate else _Null()
        with ctx:
            with jax.profiler.TraceAnnotation("data_loading" if args.guide_scopes else "data"):
                tokens, targets = make_batch()
            if put_elems:
                with jax.profiler.TraceAnnotation("device_put"):
                    host = rng.standard_normal(put_elems, dtype=np.float32)
                    dev = jax.device_put(host)
                    dev.block_until_ready()
                    del dev
            if args.tiny_ops:
                with jax.profiler.TraceAnnotation("tiny_ops"):
                    for j in range(args.tiny_ops):
                        tiny_x = tiny_fns[j % len(tiny_fns)](tiny_x)
                    tiny_x.block_until_ready()
            with jax.profiler.TraceAnnotation("train_step"):
                with jax.profiler.TraceAnnotation("forward_backward") if args.guide_scopes else _Null():
                    params, opt, loss = train_step(params, opt, tokens, targets)
            if collect_fn is not None:
                with jax.profiler.TraceAnnotation("collectives"):
                    collect_x = collect_fn(collect_x)
                    if not args.no_sync:
                        collect_x.block_until_ready()
            if not args.no_sync:
                loss = float(loss)  # sync so the step covers the device work
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000.0)
        return loss

    # ---------------------------------------------------------------- warm-up
    for i in range(args.warmup):
        run_step(-args.warmup + i, annotate=False)

    # ---------------------------------------------------------------- capture
    # JAX before 0.5 has no ProfileOptions: its default tracer levels are used.
    trace_kwargs = {}
    if hasattr(jax.profiler, "ProfileOptions"):
        opts = jax.profiler.ProfileOptions()
        opts.host_tracer_level = args.host_tracer_level
        opts.python_tracer_level = 0 if args.no_python_tracer else 1
        trace_kwargs["profiler_options"] = opts

    profile_root = os.path.join(args.out, "plugins", "profile")
    before = set(os.listdir(profile_root)) if os.path.isdir(profile_root) else set()

    if args.trace_json_max_events is not None:
        # Read when the trace JSON is written (at stop_trace), from the XSpace.
        os.environ["TF_PROFILER_TRACE_VIEWER_MAX_EVENTS"] = str(args.trace_json_max_events)
    t0 = time.perf_counter()
    jax.profiler.start_trace(args.out, create_perfetto_trace=args.perfetto, **trace_kwargs)
    try:
        losses = [run_step(i, annotate=not args.no_step_annotation) for i in range(args.steps)]
        if not args.stop_unsynced:
            losses = [float(x) for x in losses]  # with --no-sync, waits for the last step here
    finally:
        jax.profiler.stop_trace()
    losses = [float(x) for x in losses]
    elapsed = time.perf_counter() - t0

    after = set(os.listdir(profile_root))
    new = sorted(after - before)
    if len(new) != 1:
        # Same-second re-run into the same logdir: pick the newest folder.
        new = [max(after, key=lambda n: os.path.getmtime(os.path.join(profile_root, n)))]
    run_dir = os.path.join(profile_root, new[0])

    if not args.no_memory_profile:
        mem_path = os.path.join(run_dir, "memory.prof")
        jax.profiler.save_device_memory_profile(mem_path)
        with open(mem_path, "rb") as f:
            head = f.read(2)
        if head != b"\x1f\x8b":
            print(f"warning: {mem_path} is not gzip (starts {head!r})", file=sys.stderr)
        else:
            with gzip.open(mem_path, "rb") as f:
                f.read()

    print(f"jax {jax.__version__}, backend {jax.default_backend()} ({jax.devices()[0].device_kind}), "
          f"{args.steps} steps in {elapsed:.2f}s, loss {losses[0]:.4f} -> {losses[-1]:.4f}",
          file=sys.stderr)
    for name in sorted(os.listdir(run_dir)):
        print(f"  {name}  {os.path.getsize(os.path.join(run_dir, name)):,} B", file=sys.stderr)
    print(run_dir)
    return 0


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
