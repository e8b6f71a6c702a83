"""The user guides' own code (../shared/seeds), with their helpers' names, against real
JAX on CPU: profile_trace, profile_scope, @profile_function(warmup_steps=...),
benchmark_function, Profiler(num_steps=..., log_dir=...), ProfileContext and
jax.profiler.ProfileOptions."""

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


def test_profile_trace_and_profile_scope_as_guide_001_writes_them(tmp_path, work):
    f, x = work
    # Guide 001, "Method 2": named scopes inside a named trace.
    with stepscope.profile_trace(tmp_path, name="detailed_profile") as t:
        with stepscope.profile_scope("data_loading"):
            batch = x + 1
        with stepscope.profile_scope("forward_pass"):
            f(batch).block_until_ready()
    assert run_folders(tmp_path) == ["detailed_profile"]
    names = {e.get("name") for e in trace_events(t.path)}
    assert {"data_loading", "forward_pass"} <= names


def test_profile_function_with_warmup_steps(tmp_path, work):
    f, x = work
    calls = []

    # Guide 001, "Method 3": `@profile_function("./profiles", warmup_steps=5)`.
    @stepscope.profile_function(tmp_path, warmup_steps=5)
    def train_step(x):
        n = len(calls)
        calls.append(n)
        with stepscope.step(n):
            return f(x)

    for i in range(7):
        train_step(x)
        # The first five calls are warm-up: no capture until the sixth.
        assert (train_step.capture is None) == (i < 5)
    assert steps_of(train_step.capture.path) == [5]
    assert run_folders(tmp_path) == [train_step.capture.path.name]


def test_profile_function_refuses_what_it_cannot_take_at_once(tmp_path):
    with pytest.raises(stepscope.StepscopeError, match="unknown option.*warmup_stepz"):
        stepscope.profile_function(tmp_path, warmup_stepz=5)
    with pytest.raises(stepscope.StepscopeError, match="same setting"):
        stepscope.profile_function(tmp_path, warmup=2, warmup_steps=5)
    with pytest.raises(stepscope.StepscopeError, match="not a tracer level"):
        stepscope.profile_function(tmp_path, host_tracer_level=-1)
    assert run_folders(tmp_path) == []


def test_benchmark_function_as_guide_001_asserts_on_it(work):
    f, x = work
    seen_kwargs = []

    def train_step(model, batch, **kwargs):
        seen_kwargs.append(kwargs)
        return f(batch)

    stats = stepscope.benchmark_function(train_step, None, x, num_iterations=20, warmup=3)
    # num_iterations and warmup are the benchmark's, never the function's.
    assert seen_kwargs == [{}] * 23
    assert stats["mean"] == stats.mean_ms and stats["std"] == stats.std_ms
    assert stats["iterations"] == 20 == len(stats.times_ms)
    assert stats["min"] <= stats["p50"] <= stats["max"]
    assert dict(stats)["mean"] == stats.mean_ms
    print(f"Mean: {stats['mean']:.2f}ms ± {stats['std']:.2f}ms")
    assert stats["mean"] < 10_000.0
    with pytest.raises(KeyError, match="a benchmark has"):
        stats["median"]


def test_profiler_and_profile_context_as_guide_002_writes_them(tmp_path, work):
    f, x = work
    traces = tmp_path / "traces"
    # Guide 002, "Programmatic Usage", as written: keyword log_dir, begin_step/end_step,
    # and a capture started by hand at step 100 (here 10) holding the next num_steps
    # steps, and nothing else (no capture of steps 0-4).
    profiler = stepscope.Profiler(num_steps=5, log_dir=traces)
    for step in range(20):
        profiler.begin_step(step)
        f(x).block_until_ready()
        profiler.end_step()
        if step == 10:
            profiler.capture_async()
    (capture,) = profiler.captures
    assert steps_of(capture.path) == [11, 12, 13, 14, 15]
    # "One-off Profiling": `with ProfileContext('./traces'):`.
    with stepscope.ProfileContext(traces) as c:
        f(x).block_until_ready()
    assert c.path.is_dir() and len(run_folders(traces)) == 2


def test_profiler_options_reach_jax_as_guide_000_passes_them(tmp_path):
    def marker_function_for_stepscope():
        return sum(range(10))

    # Guide 000: `options = jax.profiler.ProfileOptions(); options.python_tracer_level = 0`
    # then `jax.profiler.trace(dir, profiler_options=options)`.
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.host_tracer_level = 2
    with stepscope.trace(tmp_path, profiler_options=options) as t:
        marker_function_for_stepscope()
    assert not [e for e in trace_events(t.path) if "marker_function_for_stepscope" in e.get("name", "")]
    options.python_tracer_level = 1
    with stepscope.profile_trace(tmp_path, profiler_options=options) as t:
        marker_function_for_stepscope()
    assert [e for e in trace_events(t.path) if "marker_function_for_stepscope" in e.get("name", "")]
    # The user's options are read, never changed (the run folder's name is ours).
    assert not getattr(options, "session_id", "")
    with pytest.raises(stepscope.StepscopeError, match="given twice"):
        stepscope.trace(tmp_path, profiler_options=options, python_tracer_level=1)
    assert len(manifest_of(t.path)["steps"]) == 0


def test_the_guides_environment_variables_drive_a_plain_profiler(tmp_path, work, monkeypatch):
    for var in ("STEPSCOPE_PROFILE", "STEPSCOPE_START_STEP", "STEPSCOPE_NUM_STEPS", "STEPSCOPE_EVERY",
                "STEPSCOPE_LOG_DIR"):
        monkeypatch.delenv(var, raising=False)
    f, x = work
    # Guide 003: `PROFILE_ENABLED=1 PROFILE_START_STEP=100 PROFILE_INTERVAL=0` (0: once),
    # `PROFILE_DURATION=1`, `PROFILE_DIR=…`; here from step 3, two steps.
    monkeypatch.setenv("PROFILE_ENABLED", "1")
    monkeypatch.setenv("PROFILE_START_STEP", "3")
    monkeypatch.setenv("PROFILE_DURATION", "2")
    monkeypatch.setenv("PROFILE_INTERVAL", "0")
    monkeypatch.setenv("PROFILE_DIR", str(tmp_path / "profiles"))
    prof = stepscope.Profiler()
    assert prof.schedule.as_dict() == {"start_step": 3, "num_steps": 2, "every": None, "repeat": 1}
    for i in range(8):
        with prof.step(i):
            f(x).block_until_ready()
    assert [steps_of(c.path) for c in prof.captures] == [[3, 4]]
    assert [c.path.parent for c in prof.captures] == [tmp_path / "profiles" / "step_00000003" / "plugins" / "profile"]
    # Off: nothing captured, whatever the arguments say.
    monkeypatch.setenv("PROFILE_ENABLED", "0")
    off = stepscope.Profiler(tmp_path / "off", num_steps=1)
    assert not off.enabled
    # The two names of one setting must agree; STEPSCOPE_EVERY=0 is "once" too.
    monkeypatch.setenv("STEPSCOPE_PROFILE", "1")
    with pytest.raises(stepscope.StepscopeError, match="STEPSCOPE_PROFILE and PROFILE_ENABLED disagree"):
        stepscope.Profiler()
    monkeypatch.delenv("PROFILE_ENABLED")
    monkeypatch.setenv("STEPSCOPE_EVERY", "0")
    monkeypatch.delenv("PROFILE_INTERVAL")
    assert stepscope.Profiler().schedule.every is None


def test_a_variable_nobody_reads_is_noted_at_exit(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PROFILE_ENABLED="1", JAX_PLATFORMS="cpu")
    quiet = subprocess.run([sys.executable, "-c", "import stepscope"], env=env, capture_output=True, text=True)
    assert "PROFILE_ENABLED set, but no stepscope.Profiler read it" in quiet.stderr, quiet.stderr
    read = subprocess.run(
        [sys.executable, "-c", f"import stepscope; stepscope.Profiler({str(tmp_path)!r}, enabled=False)"],
        env=env, capture_output=True, text=True,
    )
    assert "no stepscope.Profiler read it" not in read.stderr, read.stderr
    typo = subprocess.run(
        [sys.executable, "-c", f"import stepscope; stepscope.Profiler({str(tmp_path)!r}, enabled=False)"],
        env=dict(env, STEPSCOPE_NUM_STEP="3"), capture_output=True, text=True,
    )
    assert "STEPSCOPE_NUM_STEP is not a stepscope setting" in typo.stderr, typo.stderr


def test_end_step_without_outputs_still_captures_the_steps_work(tmp_path):
    # Guide 002's loop: `profiler.end_step()` with no outputs, nothing waited for. The
    # capture must hold the captured step's work, not stop before it ran.
    import jax.numpy as jnp

    f = jax.jit(lambda x: (x @ x) @ x)
    x = jnp.ones((1200, 1200))
    f(x).block_until_ready()
    prof = stepscope.Profiler(tmp_path, start_step=2, num_steps=1)
    for i in range(4):
        prof.begin_step(i)
        y = f(x)
        prof.end_step()
    y.block_until_ready()
    (c,) = prof.captures
    p = stepscope.load(c.path)
    # Before: the trace stopped before the step's work ran, and held no op.
    assert sum(r["count"] for r in p.ops()) >= 2
    (st,) = p.steps()
    assert st["step_num"] == 2 and st["device_busy_ps"] > 0


def test_step_dirs_lay_captures_out_as_guide_003_shows(tmp_path, work, cli):
    import subprocess

    f, x = work
    prof = stepscope.Profiler(tmp_path, start_step=100, num_steps=1, step_dirs=True)
    for i in range(102):
        with prof.step(i):
            if i >= 99:
                f(x).block_until_ready()
    (c,) = prof.captures
    # profiles/step_00000100/plugins/profile/<run>/
    assert c.path.parent.parent.parent == tmp_path / "step_00000100"
    assert steps_of(c.path) == [100]
    ls = json.loads(subprocess.run([cli, "ls", str(tmp_path), "--json"], capture_output=True, text=True, check=True).stdout)
    assert [r["run"].split("/")[0] for r in ls["runs"]] == ["step_00000100"]


def test_the_run_folder_is_known_inside_the_block(tmp_path, work):
    # Guide 004 writes each capture's path into its results file while the run goes on.
    f, x = work
    with stepscope.trace(tmp_path, name="lcam") as t:
        inside = t.path
        f(x).block_until_ready()
    assert inside == t.path == (tmp_path / "plugins" / "profile" / "lcam").absolute()
    with stepscope.trace(tmp_path) as t:
        inside = t.path
    assert inside is not None and inside == t.path and t.path.is_dir()


def test_ls_is_the_results_file_across_runs(tmp_path, work, cli):
    # Guide 004 keeps a results JSON with each run's name, steps, wall-clock timers and
    # trace path: `stepscope ls --json` gives it from the captures' manifests.
    import subprocess

    f, x = work
    t = stepscope.timer()
    with t("total"):
        for name in ("lcam", "tad"):
            with stepscope.trace(tmp_path, name=name):
                for i in range(2):
                    with stepscope.step(i), t("step"):
                        f(x).block_until_ready()
    ls = json.loads(subprocess.run([cli, "ls", str(tmp_path), "--json"], capture_output=True, text=True, check=True).stdout)
    runs = {r["run"].rsplit("/", 1)[-1]: r for r in ls["runs"]}
    assert set(runs) == {"lcam", "tad"}
    for name, r in runs.items():
        m = r["manifest"]
        assert m["run"] == name and m["step_nums"] == [0, 1] and m["run_dir"] == r["path"]
        sections = {}
        for sec in m["timers"]:
            sections.setdefault(sec["name"], []).append(sec["duration_ms"])
        assert len(sections["step"]) >= 2
        # The total ended after both captures stopped: it was added to their manifests.
        assert sections["total"][0] > 0
    text = subprocess.run([cli, "ls", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert text.splitlines()[0].split()[3] == "STEPS"
    assert all(line.split()[-2] == "2" for line in text.splitlines()[1:]), text


def test_a_capture_starts_after_the_work_earlier_steps_queued(tmp_path):
    # A loop that never waits: before the capture starts, what earlier steps
    # dispatched has run, so the captured step holds its own work only — the same ops
    # as the same step taken from a loop that waits each step.
    import jax.numpy as jnp

    f = jax.jit(lambda x: (x @ x) @ x)
    x = jnp.ones((1000, 1000))
    f(x).block_until_ready()

    def op_count(wait, folder):
        prof = stepscope.Profiler(tmp_path / folder, start_step=6, num_steps=1)
        for i in range(8):
            prof.begin_step(i)
            y = f(x)
            if wait:
                y.block_until_ready()
            prof.end_step()
        y.block_until_ready()
        (c,) = prof.captures
        return sum(r["count"] for r in stepscope.load(c.path).ops())

    synced = op_count(True, "synced")
    assert synced >= 2
    assert op_count(False, "ahead") == synced


def test_a_one_off_capture_holds_its_blocks_work_and_nothing_of_its_own(tmp_path):
    # Guide 002's `with ProfileContext('./traces'): train_step(...)`, in a loop that
    # never waits: JAX returns before the work runs. The capture waits for what was
    # queued before it (outside it) and for the block's own work (inside it, without
    # a computation of its own): it holds the block's 3 runs, all of them, and no
    # other program (no drain computation, no earlier step's work).
    import jax.numpy as jnp

    def train_step(x):
        return jnp.tanh((x @ x) @ x / 1000.0)

    f = jax.jit(train_step)
    x = jnp.ones((900, 900))
    y = f(x)
    for _ in range(5):
        y = f(y)  # queued, never waited for
    with stepscope.ProfileContext(tmp_path / "traces") as c:
        for _ in range(3):
            y = f(y)
    p = stepscope.load(c.path)
    modules = {r["name"] for r in p.ops(by="module")}
    assert modules == {"jit_train_step"}, modules
    counts = {r["name"]: r["count"] for r in p.ops()}
    assert counts and set(counts.values()) == {3}, counts


def test_guide_003s_workflow_as_it_reads(tmp_path, work):
    # `PROFILE_ENABLED=1 PROFILE_START_STEP=100 PROFILE_INTERVAL=0 python train.py` with
    # `with maybe_profile(step):` in the loop (here from step 3), run in a fresh
    # process from the guide's working directory: the banner, one step captured into
    # ./profiles/step_00000003 with a Perfetto trace the guide copies, and stepscope
    # reads it.
    import os
    import subprocess
    import sys

    script = (
        "import jax, jax.numpy as jnp\n"
        "from stepscope import maybe_profile\n"
        "f = jax.jit(lambda x: jnp.tanh(x @ x))\n"
        "x = jnp.ones((256, 256))\n"
        "for step in range(6):\n"
        "    with maybe_profile(step):\n"
        "        result = f(x)\n"
        "        result.block_until_ready()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFILE_", "STEPSCOPE_"))}
    env.update(PROFILE_ENABLED="1", PROFILE_START_STEP="3", PROFILE_INTERVAL="0")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    for line in ("PROFILING ENABLED", "Profile Dir:    ./profiles", "Start Step:     3", "Interval:       once",
                 "Duration:       1 step(s)", "Mode:           tensorboard + perfetto",
                 "profiling step 3 into ./profiles/step_00000003"):
        assert line in r.stderr, r.stderr
    log_dir = tmp_path / "profiles" / "step_00000003"
    (run,) = run_folders(log_dir)
    run = log_dir / "plugins" / "profile" / run
    assert steps_of(run) == [3]
    assert (run / "perfetto_trace.json.gz").stat().st_size > 0, sorted(p.name for p in run.iterdir())
    assert [p.name for p in (tmp_path / "profiles").iterdir()] == ["step_00000003"]
    # Without PROFILE_ENABLED the same loop writes nothing.
    del env["PROFILE_ENABLED"]
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path / "profiles", env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and "PROFILING" not in r.stderr, r.stderr
    assert [p.name for p in (tmp_path / "profiles").iterdir()] == ["step_00000003"]


def test_two_methods_as_two_programs_diff_op_by_op(tmp_path):
    # Guide 004 compares two gradient methods; each is its own jitted function, so the
    # two runs' programs are named otherwise (jit_lcam, jit_tad). Real captures over 4
    # host devices, each method's psum lowered to the same collective: diff pairs the
    # ops by name across the programs instead of listing every op removed and added.
    import os
    import subprocess
    import sys

    script = (
        "import jax, jax.numpy as jnp, stepscope\n"
        "from jax.sharding import Mesh, PartitionSpec as P, NamedSharding\n"
        "mesh = Mesh(jax.devices(), ('d',))\n"
        "x = jax.device_put(jnp.ones((512, 512)), NamedSharding(mesh, P('d', None)))\n"
        "def lcam(x):\n"
        "    return jax.lax.psum(jnp.tanh(x) @ x.T, 'd')\n"
        "def tad(x):\n"
        "    return jax.lax.psum((jnp.sin(x) * 2.0).sum(0), 'd')\n"
        "for name, f in {'lcam': lcam, 'tad': tad}.items():\n"
        "    fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P('d', None), out_specs=P()))\n"
        "    fn(x).block_until_ready()\n"
        "    with stepscope.trace('runs', name=name):\n"
        "        for i in range(3):\n"
        "            with stepscope.step(i):\n"
        "                fn(x).block_until_ready()\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    a, b = (stepscope.load(tmp_path / "runs" / "plugins" / "profile" / n) for n in ("lcam", "tad"))
    collective = {m: {o["name"] for o in p.ops() if o["category"] == "all-reduce"} for m, p in (("a", a), ("b", b))}
    assert collective["a"] and collective["a"] == collective["b"], collective
    d = stepscope.diff(a, b, top=0)  # every row, as the CLI's --top 0
    for name in collective["a"]:
        rows = [o for o in d["ops"] if o["name"] == name]
        assert len(rows) == 1 and rows[0]["status"] not in ("added", "removed"), rows
        assert rows[0]["matched_by"] == "name in another program"
        assert (rows[0]["module"], rows[0]["b_module"]) == ("jit_lcam", "jit_tad"), rows[0]
        assert rows[0]["a_count"] > 0 and rows[0]["b_count"] > 0
