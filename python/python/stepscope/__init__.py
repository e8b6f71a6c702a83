"""stepscope: capture JAX profiles the right way, and analyse them with the Rust core.

Capture (on ``jax.profiler``, any backend)::

    import stepscope

    with stepscope.trace("/tmp/logdir") as t:       # one capture
        with stepscope.step(0):
            with stepscope.scope("forward"):
                loss = train_step(batch)
    print(t.path)                                    # the run folder

    prof = stepscope.Profiler("/tmp/logdir", start_step=10, num_steps=5)
    for batch in data:
        with prof.step() as s:                       # steps 10..14 are captured
            s.outputs = train_step(batch)

Analysis (the same numbers as the ``stepscope`` command's ``--json``)::

    p = stepscope.load("/tmp/logdir")
    p.steps(); p.summary(); p.ops(by="scope", depth=2); p.kernels()

Tables for SQL engines, on this machine or one Ray task per host (docs/scale.md)::

    stepscope.write_tables("/tmp/logdir", "tables/")
    stepscope.write_tables_on_ray("gs://bucket/pod-logdir", "/shared/tables/")

A pod's summary or findings, one Ray task per host (the CLI's ``--json``, byte for byte)::

    stepscope.analyze_on_ray("gs://bucket/pod-logdir", "summary")

JAX is imported only by the capture helpers: analysis works without it.
"""

from stepscope._native import StepscopeError, __version__

# Tracebacks name it as users import it, not as the extension module defines it.
StepscopeError.__module__ = "stepscope"
from stepscope._analysis import Profile, Rows, diff, load
from stepscope._benchmark import BenchmarkResult, Timer, benchmark, benchmark_function, timer
from stepscope._capture import (
    Capture,
    ProfileContext,
    profile_function,
    profile_scope,
    profile_trace,
    scope,
    step,
    trace,
)
from stepscope._profiler import Profiler, Schedule, maybe_profile, schedule
from stepscope._ray import analyze_on_ray
from stepscope._tables import summary_by_host, summary_per_host, write_tables, write_tables_on_ray

__all__ = [
    "BenchmarkResult",
    "Capture",
    "ProfileContext",
    "Profile",
    "Profiler",
    "Rows",
    "Schedule",
    "StepscopeError",
    "Timer",
    "__version__",
    "analyze_on_ray",
    "benchmark",
    "benchmark_function",
    "diff",
    "load",
    "maybe_profile",
    "profile_function",
    "profile_scope",
    "profile_trace",
    "schedule",
    "scope",
    "step",
    "timer",
    "trace",
    "summary_by_host",
    "summary_per_host",
    "write_tables",
    "write_tables_on_ray",
]
