"""stepscope.Profiler: exactly the scheduled steps land in each capture."""

import pytest

import stepscope
from conftest import manifest_of, run_folders, steps_of


def train(prof, n_steps, work, raise_at=None):
    f, x = work
    for i in range(n_steps):
        with prof.step() as s:
            assert s.num == i
            s.outputs = f(x)
            if i == raise_at:
                raise RuntimeError(f"step {i} failed")


def captured(prof):
    return [steps_of(c.path) for c in prof.captures]


def test_schedule_captures_exactly_its_steps(tmp_path, work):
    ready = []
    prof = stepscope.Profiler(tmp_path, start_step=2, num_steps=3, every=5, repeat=2, on_trace_ready=ready.append)
    train(prof, 13, work)
    assert captured(prof) == [[2, 3, 4], [7, 8, 9]]
    assert ready == prof.captures
    assert len(run_folders(tmp_path)) == 2
    for c, (first, last) in zip(prof.captures, ((2, 4), (7, 9))):
        m = manifest_of(c.path)
        assert m["kind"] == "profiler"
        assert m["step_nums"] == list(range(first, last + 1))
        assert (m["first_step"], m["last_step"]) == (first, last)
        assert m["schedule"] == {"start_step": 2, "num_steps": 3, "every": 5, "repeat": 2}
    assert prof.capture is None


def test_every_without_repeat_goes_on(tmp_path, work):
    prof = stepscope.Profiler(tmp_path, start_step=1, num_steps=1, every=3)
    train(prof, 8, work)
    assert captured(prof) == [[1], [4], [7]]


def test_default_captures_only_when_asked(tmp_path, work):
    # No start step: the steps are annotated, nothing is captured until
    # capture_async() (user guide 002's Profiler(num_steps=5, log_dir=...)).
    prof = stepscope.Profiler(tmp_path)
    train(prof, 8, work)
    assert prof.captures == [] and not tmp_path.joinpath("plugins").exists()
    # A start step (or every) schedules: five steps by default.
    prof = stepscope.Profiler(tmp_path, start_step=0)
    train(prof, 8, work)
    assert captured(prof) == [[0, 1, 2, 3, 4]]
    prof = stepscope.Profiler(tmp_path / "every", num_steps=1, every=4)
    train(prof, 8, work)
    assert captured(prof) == [[0], [4]]


def test_torch_style_schedule(tmp_path, work):
    sched = stepscope.schedule(wait=1, warmup=1, active=2, repeat=2)
    # PyTorch's meaning: per cycle of 4 steps, 1 idle, 1 warm-up, 2 recorded; 2 cycles.
    assert [n for n in range(12) if sched(n)] == [2, 3, 6, 7]
    assert [n for n in range(12) if stepscope.schedule(wait=2, active=1, skip_first=3)(n)] == [5, 8, 11]
    prof = stepscope.Profiler(tmp_path, schedule=sched)
    train(prof, 10, work)
    assert captured(prof) == [[2, 3], [6, 7]]


def test_begin_and_end_step_with_own_numbers(tmp_path, work):
    f, x = work
    prof = stepscope.Profiler(tmp_path, start_step=101, num_steps=2)
    for n in range(100, 105):
        assert prof.begin_step(n) == n
        out = f(x)
        prof.end_step(out)
    assert captured(prof) == [[101, 102]]
    with pytest.raises(stepscope.StepscopeError, match="no step is open"):
        prof.end_step()
    prof.begin_step()
    with pytest.raises(stepscope.StepscopeError, match="step 105 is still open"):
        prof.begin_step()
    prof.end_step()


def test_capture_async_starts_at_next_step(tmp_path, work):
    prof = stepscope.Profiler(tmp_path, enabled=False)
    f, x = work
    for i in range(8):
        if i == 3:
            assert prof.capture_async(2) is True
            # A second request while one is pending or running is ignored, with a
            # warning: the training loop goes on.
            with pytest.warns(RuntimeWarning, match="a capture is already running"):
                assert prof.capture_async(2) is False
        with prof.step() as s:
            s.outputs = f(x)
            if i == 4:
                assert s.captured
                with pytest.warns(RuntimeWarning, match="a capture is already running"):
                    assert prof.capture_async(1) is False
    assert captured(prof) == [[3, 4]]
    assert manifest_of(prof.captures[0].path)["trigger"] == "capture_async"


def test_one_capture_at_a_time_across_profilers(tmp_path, work):
    f, x = work
    with stepscope.trace(tmp_path / "outer") as outer:
        prof = stepscope.Profiler(tmp_path / "inner", start_step=0, num_steps=2)
        with pytest.warns(RuntimeWarning, match="a capture is already running"):
            assert prof.capture_async(1) is False
        with pytest.raises(stepscope.StepscopeError, match="a capture is already running"):
            with prof.step():
                pass
        with stepscope.step(0):
            f(x).block_until_ready()
    assert steps_of(outer.path) == [0]
    assert prof.captures == [] and prof.capture is None


def test_exception_mid_capture_stops_it_cleanly(tmp_path, work):
    prof = stepscope.Profiler(tmp_path, start_step=1, num_steps=4)
    with pytest.raises(RuntimeError, match="step 2 failed"):
        train(prof, 6, work, raise_at=2)
    assert prof.capture is None
    assert captured(prof) == [[1, 2]]
    m = manifest_of(prof.captures[0].path)
    assert m["error"] == "RuntimeError: step 2 failed"
    assert m["step_nums"] == [1, 2]
    with stepscope.trace(tmp_path) as t:  # nothing left running
        pass
    assert t.path.is_dir()


def test_profiler_as_context_stops_on_exit(tmp_path, work):
    f, x = work
    with stepscope.Profiler(tmp_path, start_step=0, num_steps=10) as prof:
        for _ in range(3):
            with prof.step() as s:
                s.outputs = f(x)
    assert captured(prof) == [[0, 1, 2]]


def test_from_env(tmp_path, work, monkeypatch):
    for var in ("STEPSCOPE_PROFILE", "STEPSCOPE_START_STEP", "STEPSCOPE_NUM_STEPS", "STEPSCOPE_EVERY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("STEPSCOPE_LOG_DIR", str(tmp_path / "off"))
    off = stepscope.Profiler.from_env()
    train(off, 4, work)
    assert off.captures == [] and not (tmp_path / "off").exists()

    monkeypatch.setenv("STEPSCOPE_PROFILE", "1")
    monkeypatch.setenv("STEPSCOPE_START_STEP", "1")
    monkeypatch.setenv("STEPSCOPE_NUM_STEPS", "2")
    monkeypatch.setenv("STEPSCOPE_EVERY", "3")
    monkeypatch.setenv("STEPSCOPE_LOG_DIR", str(tmp_path / "on"))
    on = stepscope.Profiler.from_env(num_steps=7)
    assert on.schedule.as_dict() == {"start_step": 1, "num_steps": 2, "every": 3, "repeat": 0}
    train(on, 6, work)
    assert captured(on) == [[1, 2], [4, 5]]
    # Turned on by the environment: a log folder per capture (user guide 003's layout).
    assert [c.path.parent for c in on.captures] == [
        tmp_path / "on" / f"step_{n:08d}" / "plugins" / "profile" for n in (1, 4)
    ]

    monkeypatch.setenv("STEPSCOPE_NUM_STEPS", "five")
    with pytest.raises(stepscope.StepscopeError, match="STEPSCOPE_NUM_STEPS='five' is not a whole number"):
        stepscope.Profiler.from_env()
    monkeypatch.setenv("STEPSCOPE_PROFILE", "maybe")
    with pytest.raises(stepscope.StepscopeError, match="STEPSCOPE_PROFILE"):
        stepscope.Profiler.from_env()


def test_guide_spellings_that_miss_are_not_ignored(tmp_path, monkeypatch, capsys):
    # Guide 003's variables, one spelt without its underscore: profiling step 0
    # instead of step 100 would be a silent wrong capture.
    for var in ("STEPSCOPE_PROFILE", "STEPSCOPE_START_STEP", "STEPSCOPE_NUM_STEPS", "STEPSCOPE_EVERY",
                "PROFILE_START_STEP", "PROFILE_DURATION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PROFILE_ENABLED", "1")
    monkeypatch.setenv("PROFILE_DIR", str(tmp_path))
    monkeypatch.setenv("PROFILE_STARTSTEP", "100")
    with pytest.raises(stepscope.StepscopeError, match="PROFILE_STARTSTEP is not a setting — did you mean "
                                                      "PROFILE_START_STEP"):
        stepscope.Profiler.from_env()
    monkeypatch.delenv("PROFILE_STARTSTEP")
    monkeypatch.setenv("PROFILE_DURATON", "3")
    stepscope.Profiler.from_env()
    assert "PROFILE_DURATON is not a setting and is ignored — did you mean PROFILE_DURATION?" in capsys.readouterr().err


def test_host_tracing_off_on_cpu_warns_at_capture_time(tmp_path, work, capsys):
    f, x = work
    with stepscope.trace(tmp_path, host_tracer_level=0):
        f(x).block_until_ready()
    assert "host_tracer_level=0 on CPU" in capsys.readouterr().err


def test_schedule_validation():
    with pytest.raises(stepscope.StepscopeError, match="captures would overlap"):
        stepscope.Schedule(start_step=0, num_steps=5, every=3)
    with pytest.raises(stepscope.StepscopeError, match="needs every"):
        stepscope.Schedule(num_steps=2, repeat=3)
    with pytest.raises(stepscope.StepscopeError, match="num_steps=0"):
        stepscope.Profiler("unused", num_steps=0)
    s = stepscope.Schedule(start_step=4, num_steps=2, every=10, repeat=3)
    assert [n for n in range(50) if s(n)] == [4, 5, 14, 15, 24, 25]
