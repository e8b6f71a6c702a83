"""stepscope.trace / scope / step / profile_function against real JAX captures."""

import gzip
import json
from pathlib import Path

import jax
import pytest

import stepscope
from conftest import manifest_of, run_folders, steps_of


def trace_events(run_dir):
    (path,) = Path(run_dir).glob("*.trace.json.gz")
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def test_trace_names_the_run_writes_manifest_and_prints_where(tmp_path, work, capsys):
    f, x = work
    with stepscope.trace(tmp_path, name="first") as t:
        for i in range(3):
            with stepscope.step(i):
                f(x).block_until_ready()
    assert t.path == (tmp_path / "plugins" / "profile" / "first").absolute()
    assert any(p.name.endswith(".xplane.pb") for p in t.path.iterdir())
    assert steps_of(t.path) == [0, 1, 2]
    m = manifest_of(t.path)
    assert m["schema"] == "stepscope.manifest/1"
    assert m["step_nums"] == [0, 1, 2]
    assert [s["name"] for s in m["steps"]] == ["train"] * 3
    assert all(s["duration_ms"] > 0 for s in m["steps"])
    assert m["jax_version"] == jax.__version__
    assert m["backend"] == jax.default_backend()  # "gpu" when run with JAX_PLATFORMS=cuda
    assert m["run_dir"] == str(t.path)
    assert any(n.endswith(".xplane.pb") for n in m["files"])
    assert m["error"] is None
    assert m["stopped_unix_ns"] > m["started_unix_ns"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"stepscope: profile saved to {t.path} — look at it with: stepscope summary {t.path}"]
    # The line's command works: the installed CLI reads the run.
    assert stepscope.load(m["run_dir"]).run == "first"


def test_two_captures_in_the_same_second_get_their_own_folders(tmp_path, work):
    f, x = work
    paths = []
    for i in range(3):
        with stepscope.trace(tmp_path) as t:
            with stepscope.step(i):
                f(x).block_until_ready()
        paths.append(t.path)
    assert len(set(paths)) == 3
    assert len(run_folders(tmp_path)) == 3
    assert [steps_of(p) for p in paths] == [[0], [1], [2]]


def test_scopes_nest_visibly(tmp_path, work):
    f, x = work
    with stepscope.trace(tmp_path) as t:
        with stepscope.step(7):
            with stepscope.scope("outer"):
                with stepscope.scope("inner", layer=3):
                    f(x).block_until_ready()
    ev = {e["name"]: e for e in trace_events(t.path) if e.get("name") in ("train", "outer", "inner")}
    assert set(ev) == {"train", "outer", "inner"}
    assert ev["train"]["args"]["step_num"] == "7"
    assert ev["inner"]["args"]["layer"] == "3"
    for parent, child in (("train", "outer"), ("outer", "inner")):
        p, c = ev[parent], ev[child]
        assert (p["pid"], p["tid"]) == (c["pid"], c["tid"])
        assert p["ts"] <= c["ts"] and c["ts"] + c["dur"] <= p["ts"] + p["dur"]


def test_tracer_levels_reach_jax(tmp_path):
    def marker_function_for_stepscope():
        return sum(range(10))

    names = {}
    for level in (0, 1):
        with stepscope.trace(tmp_path, python_tracer_level=level, host_tracer_level=2) as t:
            marker_function_for_stepscope()
        names[level] = [e["name"] for e in trace_events(t.path) if "marker_function_for_stepscope" in e.get("name", "")]
        assert manifest_of(t.path)["options"]["python_tracer_level"] == level
    assert names[0] == []
    assert len(names[1]) == 1


def test_unsupported_option_is_a_clear_error(tmp_path):
    if hasattr(jax.profiler.ProfileOptions(), "device_tracer_level"):
        pytest.skip("this JAX supports device_tracer_level")
    with pytest.raises(stepscope.StepscopeError, match=f"JAX {jax.__version__} has no device_tracer_level"):
        with stepscope.trace(tmp_path, device_tracer_level=1):
            pass
    # Nothing was started: the next capture works.
    with stepscope.trace(tmp_path) as t:
        pass
    assert t.path.is_dir()


def test_bad_arguments(tmp_path):
    with pytest.raises(stepscope.StepscopeError, match="bad run name"):
        stepscope.trace(tmp_path, name="../escape")
    with pytest.raises(stepscope.StepscopeError, match="not a tracer level"):
        stepscope.trace(tmp_path, host_tracer_level=-1)
    with pytest.raises(stepscope.StepscopeError, match="not a step number"):
        stepscope.step(-1)
    with stepscope.trace(tmp_path, name="taken"):
        pass
    with pytest.raises(stepscope.StepscopeError, match="already exists"):
        with stepscope.trace(tmp_path, name="taken"):
            pass


def test_concurrent_capture_is_refused(tmp_path, work):
    f, x = work
    with stepscope.trace(tmp_path / "a") as outer:
        with pytest.raises(stepscope.StepscopeError, match="a capture is already running"):
            with stepscope.trace(tmp_path / "b"):
                pass
        with stepscope.step(0):
            f(x).block_until_ready()
    assert steps_of(outer.path) == [0]
    assert not (tmp_path / "b").exists()


def test_exception_mid_capture_leaves_a_valid_profile(tmp_path, work):
    f, x = work
    with pytest.raises(ValueError, match="boom"):
        with stepscope.trace(tmp_path) as t:
            for i in range(5):
                with stepscope.step(i):
                    f(x).block_until_ready()
                    if i == 1:
                        raise ValueError("boom")
    assert not t.running
    assert steps_of(t.path) == [0, 1]
    m = manifest_of(t.path)
    assert m["error"] == "ValueError: boom"
    assert m["step_nums"] == [0, 1]
    with stepscope.trace(tmp_path) as again:  # the profiler is free again
        pass
    assert again.path != t.path


def test_profile_function_skips_warmups(tmp_path, work):
    f, x = work
    calls = []

    @stepscope.profile_function(tmp_path, warmup=2)
    def train_step(x):
        n = len(calls)
        calls.append(n)
        with stepscope.step(n):
            return f(x)

    assert train_step.capture is None
    for _ in range(4):
        out = train_step(x)
    assert out.shape == (64, 64)
    assert calls == [0, 1, 2, 3]
    c = train_step.capture
    assert run_folders(tmp_path) == [c.path.name]
    assert steps_of(c.path) == [2]
    m = manifest_of(c.path)
    assert m["kind"] == "profile_function"
    assert m["function"].endswith("train_step")
    # The profiled call's outputs were waited for inside the capture: its XLA op is there.
    assert sum(r["count"] for r in stepscope.load(c.path).ops()) >= 1


def test_capture_running_at_exit_is_saved(tmp_path):
    import subprocess
    import sys

    script = (
        "import stepscope\n"
        f"stepscope.trace({str(tmp_path)!r}, name='left-open').start()\n"
        "with stepscope.step(0):\n"
        "    pass\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 0, r.stderr
    run = tmp_path / "plugins" / "profile" / "left-open"
    assert f"stepscope: profile saved to {run}" in r.stderr
    m = manifest_of(run)
    assert m["error"] == "RuntimeError: the program exited while the capture was running"
    assert steps_of(run) == [0]


def test_a_bucket_log_dir_is_refused_in_one_line_and_nothing_is_written_locally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for make in (
        lambda: stepscope.trace("gs://b/d"),
        lambda: stepscope.Profiler(log_dir="s3://b/d"),
    ):
        with pytest.raises(stepscope.StepscopeError) as e:
            with make():
                pass
        message = str(e.value)
        assert "\n" not in message and "local folder" in message and "://b/d" in message, message
    monkeypatch.setenv("PROFILE_DIR", "gs://b/runs")
    with pytest.raises(stepscope.StepscopeError, match="gs://b/runs"):
        stepscope.Profiler()
    assert list(tmp_path.iterdir()) == [], "a local folder was made for the bucket"
