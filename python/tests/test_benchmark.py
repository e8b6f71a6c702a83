"""stepscope.benchmark and stepscope.timer."""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stepscope
from conftest import manifest_of


def test_benchmark_statistics(work):
    f, x = work
    r = stepscope.benchmark(f, x, iterations=40, warmup=3)
    assert r.iterations == len(r.times_ms) == 40
    t = r.times_ms
    assert r.mean_ms == pytest.approx(statistics.fmean(t))
    assert r.std_ms == pytest.approx(statistics.pstdev(t))
    assert r.min_ms == min(t) and r.max_ms == max(t)
    assert r.p50_ms == pytest.approx(statistics.median(t))
    for p in (50, 90, 99):
        assert getattr(r, f"p{p}_ms") == pytest.approx(float(np.percentile(t, p)))
    assert r.min_ms <= r.p50_ms <= r.p90_ms <= r.p99_ms <= r.max_ms
    assert set(r.as_dict()) == {"iterations", "mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
    assert r.assert_faster_than(1e6) is r
    with pytest.raises(AssertionError, match="not faster than 0.0 ms"):
        r.assert_faster_than(0.0)
    with pytest.raises(AssertionError, match="p99"):
        r.assert_faster_than(r.p99_ms, stat="p99")


def test_benchmark_times_real_sleeps():
    r = stepscope.benchmark(time.sleep, 0.004, iterations=5, warmup=1)
    assert r.min_ms >= 4.0


def test_benchmark_waits_for_outputs():
    g = jax.jit(lambda a: (a @ a @ a).sum())
    a = jnp.ones((700, 700), jnp.float32)
    g(a).block_until_ready()
    dispatch, total = [], []

    def synced_calls(n):
        for _ in range(n):
            t0 = time.perf_counter()
            y = g(a)
            t1 = time.perf_counter()
            y.block_until_ready()
            t2 = time.perf_counter()
            dispatch.append(t1 - t0)
            total.append(t2 - t0)

    # The fastest synced call before and after the benchmark: on a busy machine (CI
    # beside other work) a few calls can all be slowed, and the benchmark's best not.
    synced_calls(5)
    if min(dispatch) > 0.3 * min(total):
        pytest.skip("dispatch is synchronous here: waiting cannot be told apart")
    r = stepscope.benchmark(g, a, iterations=3, warmup=1)
    synced_calls(5)
    assert r.min_ms >= 0.5 * min(total) * 1e3


def test_benchmark_bad_arguments(work):
    f, x = work
    with pytest.raises(stepscope.StepscopeError, match="iterations=0"):
        stepscope.benchmark(f, x, iterations=0)
    with pytest.raises(stepscope.StepscopeError, match="stat="):
        stepscope.benchmark(f, x, iterations=1, warmup=0).assert_faster_than(1, stat="avg")


def test_timer_sections_go_into_the_manifest(tmp_path, work):
    f, x = work
    t = stepscope.timer()
    with t("train"):
        for epoch in range(2):
            with t("epoch"):
                if epoch == 1:
                    with stepscope.trace(tmp_path) as c:
                        with stepscope.step(epoch):
                            f(x).block_until_ready()
                time.sleep(0.003)
        with t("eval"):
            time.sleep(0.002)
    totals = t.totals()
    assert totals["epoch"]["count"] == 2 and totals["epoch"]["total_ms"] >= 6.0
    assert totals["train"]["total_ms"] >= totals["epoch"]["total_ms"] + totals["eval"]["total_ms"]
    m = manifest_of(c.path)
    # Sections that ended after the capture stopped were added to its manifest then.
    by_name = {}
    for s in m["timers"]:
        by_name.setdefault(s["name"], []).append(s["duration_ms"])
    assert by_name["train"] == [pytest.approx(totals["train"]["total_ms"])]
    assert sorted(by_name["epoch"]) == sorted(s["duration_ms"] for s in t.sections if s["name"] == "epoch")
    assert by_name["eval"] == [pytest.approx(totals["eval"]["total_ms"])]
    assert all(d is not None for ds in by_name.values() for d in ds)
