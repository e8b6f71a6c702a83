"""Wall-clock measurement: ``benchmark`` (repeat a call, blocking on its outputs) and
``timer`` (named sections: total train, per epoch, eval), whose sections go into the
manifest of every capture taken while they run."""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Optional

from stepscope._native import StepscopeError


class BenchmarkResult(Mapping):
    """Wall time per call in milliseconds: mean, std (population), min, p50, p90,
    p99, max, and every call's time in ``times_ms``.

    It also reads as the mapping the user guides' ``benchmark_function`` returns:
    ``stats["mean"]``, ``stats["std"]``, ``stats["min"]``, ``stats["max"]``,
    ``stats["p50"]``, ``stats["p90"]``, ``stats["p99"]`` (milliseconds) and
    ``stats["iterations"]``."""

    _KEYS = ("mean", "std", "min", "max", "p50", "p90", "p99", "iterations")

    def __init__(self, times_ms: list, name: str = ""):
        if not times_ms:
            raise StepscopeError("no timed calls — use iterations ≥ 1")
        self.name = name
        self.times_ms = list(times_ms)
        s = sorted(self.times_ms)
        n = len(s)
        self.iterations = n
        self.mean_ms = sum(s) / n
        self.std_ms = math.sqrt(sum((t - self.mean_ms) ** 2 for t in s) / n)
        self.min_ms = s[0]
        self.p50_ms = _percentile(s, 50)
        self.p90_ms = _percentile(s, 90)
        self.p99_ms = _percentile(s, 99)
        self.max_ms = s[-1]

    def __getitem__(self, key: str) -> float:
        if key not in self._KEYS:
            raise KeyError(f"{key!r} — a benchmark has {', '.join(self._KEYS)}")
        return self.iterations if key == "iterations" else getattr(self, f"{key}_ms")

    def __iter__(self):
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    def as_dict(self) -> dict:
        keys = ("iterations", "mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")
        return {k: getattr(self, k) for k in keys}

    def assert_faster_than(self, ms: float, stat: str = "mean") -> "BenchmarkResult":
        """Raises AssertionError unless the ``stat`` (mean, min, p50, p90, p99, max)
        time per call is below ``ms`` milliseconds."""
        key = f"{stat}_ms"
        if stat not in ("mean", "min", "p50", "p90", "p99", "max"):
            raise StepscopeError(f"stat={stat!r} — use one of: mean, min, p50, p90, p99, max")
        value = getattr(self, key)
        if not value < ms:
            raise AssertionError(f"{self.name or 'benchmark'}: {stat} {value:.3f} ms is not faster than {ms} ms ({self})")
        return self

    def __repr__(self) -> str:
        return (
            f"{self.name or 'benchmark'}: mean {self.mean_ms:.3f} ms ± {self.std_ms:.3f}, min {self.min_ms:.3f}, "
            f"p50 {self.p50_ms:.3f}, p90 {self.p90_ms:.3f}, p99 {self.p99_ms:.3f}, max {self.max_ms:.3f} "
            f"({self.iterations} calls)"
        )


def _percentile(sorted_values: list, pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * pct / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _blocker() -> Callable[[Any], Any]:
    try:
        import jax
    except ImportError:
        return lambda out: out
    return jax.block_until_ready


def benchmark(fn: Callable, *args: Any, iterations: int = 100, warmup: int = 10, **kwargs: Any) -> BenchmarkResult:
    """Calls ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``iterations``
    times timed; each call's time includes waiting for its outputs
    (``jax.block_until_ready``), so asynchronous dispatch is not mistaken for speed."""
    for what, v, low in (("iterations", iterations, 1), ("warmup", warmup, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise StepscopeError(f"{what}={v!r} — use a whole number ≥ {low}")
    wait = _blocker()
    for _ in range(warmup):
        wait(fn(*args, **kwargs))
    times = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        t0 = clock()
        wait(fn(*args, **kwargs))
        times.append((clock() - t0) / 1e6)
    return BenchmarkResult(times, getattr(fn, "__qualname__", ""))


def benchmark_function(
    fn: Callable, *args: Any, num_iterations: int = 100, warmup: int = 10, **kwargs: Any
) -> BenchmarkResult:
    """The user guides' name for :func:`benchmark`: ``stats = benchmark_function(
    train_step, model, batch, num_iterations=100, warmup=10)``, then ``stats["mean"]``
    and ``stats["std"]`` in milliseconds. ``num_iterations`` and ``warmup`` are
    benchmark settings, never passed on to ``fn``."""
    return benchmark(fn, *args, iterations=num_iterations, warmup=warmup, **kwargs)


# -- timers ------------------------------------------------------------------------------

_timers: "weakref.WeakSet[Timer]" = weakref.WeakSet()
_timers_lock = threading.Lock()


class Timer:
    """Named wall-clock sections. ``with t("epoch 1"): ...``; sections may nest and
    repeat. Every capture's manifest lists the sections of live timers, and a section
    that ends after a capture stopped is added to that capture's manifest then."""

    def __init__(self):
        #: Finished and running sections: name, start_unix_ns, duration_ms (None while running).
        self.sections: list = []
        with _timers_lock:
            _timers.add(self)

    def __call__(self, name: str) -> "_Section":
        return _Section(self, str(name))

    section = __call__

    def totals(self) -> dict:
        """Finished sections by name: count, total_ms, mean_ms."""
        out: dict = {}
        for s in self.sections:
            if s["duration_ms"] is None:
                continue
            t = out.setdefault(s["name"], {"count": 0, "total_ms": 0.0})
            t["count"] += 1
            t["total_ms"] += s["duration_ms"]
        for t in out.values():
            t["mean_ms"] = t["total_ms"] / t["count"]
        return out

    def __repr__(self) -> str:
        parts = [f"{k} {v['total_ms']:.1f} ms" + (f" ×{v['count']}" if v["count"] > 1 else "")
                 for k, v in self.totals().items()]
        return "<stepscope.Timer " + (", ".join(parts) or "no sections") + ">"


class _Section:
    def __init__(self, timer: Timer, name: str):
        self.timer = timer
        self.name = name

    def __enter__(self) -> "_Section":
        self.record = {"name": self.name, "start_unix_ns": time.time_ns(), "duration_ms": None}
        self.timer.sections.append(self.record)
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.record["duration_ms"] = (time.perf_counter_ns() - self._t0) / 1e6
        _refresh_manifests(self.record["start_unix_ns"])
        return False


def timer() -> Timer:
    """A new :class:`Timer` for named wall-clock sections."""
    return Timer()


def timer_sections() -> list:
    """Every live timer's sections, in start order (for manifests)."""
    with _timers_lock:
        timers = list(_timers)
    sections = [dict(s) for t in timers for s in t.sections]
    return sorted(sections, key=lambda s: s["start_unix_ns"])


def _refresh_manifests(section_start_unix_ns: int) -> None:
    """Rewrites the manifests of captures that stopped after the section began."""
    from stepscope import _capture

    for c in _capture._written:
        if c.stopped_unix_ns is not None and c.stopped_unix_ns >= section_start_unix_ns:
            try:
                c.write_manifest()
            except OSError:
                pass
