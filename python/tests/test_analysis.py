"""stepscope.load(...) analyses equal the CLI's --json, on the real fixtures."""

import json
import os
import subprocess
import sys
import traceback

import pytest

import stepscope
from conftest import FIXTURES

CPU = FIXTURES / "cpu-transformer"
CPU_RUN = "2026_11_21_22_29_17"
ROCM = FIXTURES / "rocm-mi300x-gemm"
TPU = FIXTURES / "tpu-v6e-inference"


def cli_json(cli, *args):
    r = subprocess.run([cli, *map(str, args), "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def cpu():
    return stepscope.load(CPU)


def test_steps_equal_cli(cli, cpu):
    rows = cpu.steps()
    expected = cli_json(cli, "steps", CPU)
    assert rows.raw == expected
    assert list(rows) == expected["steps"]
    assert rows.schema == "stepscope.steps/1"
    assert [r["step_num"] for r in rows] == list(range(8))  # the fixture's 8 captured steps


def test_scopes_equal_cli(cli, cpu):
    rows = cpu.scopes()
    assert rows.raw == cli_json(cli, "scopes", CPU)
    assert [r["path"] for r in rows] == ["train", "train/train_step", "train/data"]
    assert rows.raw["input"]["host_input_ps"] > 0


@pytest.mark.parametrize("top", [10, 3])
def test_summary_equals_cli(cli, cpu, top):
    s = cpu.summary(top=top)
    assert s == cli_json(cli, "summary", CPU, "--top", top)
    assert s["step_count"] == 8
    assert len(s["top_ops"]) <= top


@pytest.mark.parametrize(
    "by,depth,top",
    [("op", 0, 10), ("op", 0, None), ("category", 0, 5), ("module", 0, 10), ("scope", 0, 20), ("scope", 2, 10),
     ("line", 0, None), ("stack", 0, 5)],
)
def test_ops_equal_cli(cli, cpu, by, depth, top):
    rows = cpu.ops(by=by, depth=depth, top=top)
    args = ["ops", CPU, "--by", by, "--depth", depth, "--top", 10**9 if top is None else top]
    expected = cli_json(cli, *args)
    assert rows.raw == expected
    assert list(rows) == expected["ops"]
    assert len(rows) > 0
    if top is not None:
        assert len(rows) <= top


def test_all_ops_rows_by_default(cpu):
    every = cpu.ops()
    assert len(every) > 10  # more than the CLI's default --top
    assert cpu.ops(top=10) == every[:10]


def test_kernels_equal_cli_on_gpu_profile(cli):
    p = stepscope.load(ROCM)
    rows = p.kernels()
    expected = cli_json(cli, "kernels", ROCM, "--top", 10**9)
    assert rows.raw == expected
    assert len(rows) > 0 and "grid" in rows[0]
    assert p.kernels(top=2).raw == cli_json(cli, "kernels", ROCM, "--top", 2)
    assert stepscope.load(CPU).kernels() == []


def test_tpu_profile_equals_cli(cli):
    p = stepscope.load(TPU)
    assert p.summary().keys() == cli_json(cli, "summary", TPU).keys()
    assert p.summary() == cli_json(cli, "summary", TPU)
    assert p.ops(by="category", top=10).raw == cli_json(cli, "ops", TPU, "--by", "category")


def test_run_host_and_file_paths(cli):
    by_run = stepscope.load(CPU, run=CPU_RUN)
    assert by_run.run == f"plugins/profile/{CPU_RUN}"
    assert by_run.hosts == ["vm"]
    file = CPU / "plugins" / "profile" / CPU_RUN / "vm.xplane.pb"
    one = stepscope.load(str(file), host="vm")
    assert one.steps().raw == cli_json(cli, "steps", file, "--host", "vm")
    assert one.steps() == by_run.steps()


@pytest.mark.parametrize(
    "args,kwargs",
    [
        (["steps", FIXTURES / "no-such-dir"], dict(path=FIXTURES / "no-such-dir")),
        (["steps", CPU, "--run", "nope"], dict(path=CPU, run="nope")),
        (["steps", CPU, "--host", "nope"], dict(path=CPU, host="nope")),
        (["steps", FIXTURES / "README.md"], dict(path=FIXTURES / "README.md")),
    ],
)
def test_errors_carry_the_cli_message(cli, args, kwargs):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.load(kwargs.pop("path"), **kwargs).steps()
    assert r.stderr.strip() == f"stepscope: {e.value}"
    assert "\n" not in str(e.value) and " — " in str(e.value)
    assert isinstance(e.value, Exception)
    # A traceback names it as users import it (it was `_native.StepscopeError`).
    assert traceback.format_exception_only(e.value)[0].startswith("stepscope.StepscopeError: ")


def test_bad_grouping_is_an_error(cpu):
    with pytest.raises(stepscope.StepscopeError, match=r'cannot group ops by "flops"'):
        cpu.ops(by="flops")


def test_to_pandas(cpu):
    pd = pytest.importorskip("pandas")
    df = cpu.steps().to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(cpu.steps()[0].keys())
    assert df["step_num"].tolist() == list(range(8))
    assert cpu.ops(top=5).to_pandas()["self_ps"].tolist() == [r["self_ps"] for r in cpu.ops(top=5)]


def test_to_arrow(cpu):
    import pyarrow as pa
    steps = cpu.steps()
    t = steps.to_arrow()
    assert isinstance(t, pa.Table) and t.num_rows == len(steps) == 8
    assert t.column_names == list(steps[0].keys())
    assert t.column("step_num").to_pylist() == [s["step_num"] for s in steps]
    assert t.column("duration_ps").to_pylist() == [s["duration_ps"] for s in steps]
    # A line's stack (a list of frames) stays a list column.
    lines = cpu.ops(by="line")
    stacks = lines.to_arrow().column("stack")
    assert pa.types.is_list(stacks.type) and stacks.to_pylist() == [r.get("stack") for r in lines]
    assert any(r.get("stack") for r in lines) and any("stack" not in r for r in lines)


def test_timeline_serves_the_run_while_the_profile_lives(cpu):
    import gc
    import urllib.error
    import urllib.request

    step = cpu.steps()[2]
    t = cpu.timeline(step["start_ps"], step["start_ps"] + step["duration_ps"], interactive=True)
    base = t.url.split("#")[0]
    assert base.startswith("http://127.0.0.1:") and f"start_ps={step['start_ps']}" in t.url
    assert t._repr_html_().startswith("<iframe src=") and 'height="600"' in t._repr_html_()
    runs = json.load(urllib.request.urlopen(base + "api/runs", timeout=30))
    assert [r["run"] for r in runs] == [cpu.run]
    assert b"<html" in urllib.request.urlopen(base, timeout=30).read().lower()
    # One server a profile; the token path is the only way in.
    assert cpu.timeline().url.split("#")[0] == base
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(base.rsplit("/", 2)[0] + "/api/runs", timeout=30)
    proc = cpu._server.process
    cpu._server.stop()
    assert proc.poll() is not None
    cpu._server = None
    gc.collect()


def test_timeline_in_the_cell_holds_every_event_of_the_window(cpu):
    """The picture a notebook shows without a server: each track's boxes over a step
    stand for exactly the events the independent reader finds on that line in the
    window, one SVG box per box, and no server is started for it."""
    step = cpu.steps()[3]
    lo, hi = step["start_ps"], step["start_ps"] + step["duration_ps"]
    window = json.loads(cpu._native.timeline_window_json(lo, hi, max_rows=256))
    assert window["schema"] == "stepscope.timeline_window/1" and (window["start_ps"], window["end_ps"]) == (lo, hi)
    ref = FIXTURES.parent / "support" / "xspace_ref.py"
    xplane = next(CPU.rglob("*.xplane.pb"))
    lines = {}
    for t in window["tracks"]:
        track, tile = t["track"], t["tile"]
        out = subprocess.run([sys.executable, str(ref), "dump", str(xplane), "--plane", track["plane"],
                              "--line", track["line"], "--limit", "1000000"],
                             capture_output=True, text=True, timeout=120, check=True)
        events = [json.loads(x) for x in out.stdout.splitlines()]
        inside = [e for e in events if e["start_ps"] < hi and (e["start_ps"] + e["duration_ps"] > lo
                                                              or (e["duration_ps"] == 0 and e["start_ps"] >= lo))]
        lines[track["line"]] = len(inside)
        assert tile["events"] == sum(tile["box_count"]) == len(inside) > 0, track
    assert "python3" in lines and any(k.startswith("tf_XLAEigen") for k in lines), lines

    t = cpu.timeline(lo, hi)
    page = t._repr_html_()
    boxes = sum(len(x["tile"]["box_depth"]) for x in t.window["tracks"])
    assert page.startswith("<div><svg") and page.count("<rect ") == boxes > 0
    assert "dot" in page and cpu._server is None
    # Every track of the window, each a label.
    assert all(x["track"]["plane"] in page for x in t.window["tracks"])


def test_console_command(cli, capfd):
    v = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and v.stdout.strip() == f"stepscope {stepscope.__version__}"
    table = subprocess.run([cli, "steps", CPU], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and table.stdout.startswith("8 steps (from StepTraceAnnotation)")
    as_module = subprocess.run([sys.executable, "-m", "stepscope", "steps", CPU], capture_output=True, text=True,
                               timeout=60)
    assert as_module.returncode == 0 and as_module.stdout == table.stdout
    usage = subprocess.run([cli, "nonsense"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "unrecognized subcommand" in usage.stderr
    from stepscope.__main__ import main

    capfd.readouterr()
    assert main(["steps", str(CPU), "--csv"]) == 0  # in-process, through the native CLI
    out = capfd.readouterr().out.splitlines()
    assert out[0].startswith("step_num,host,name,") and len(out) == 9
    assert main(["steps", str(FIXTURES / "no-such-dir")]) == 2


def test_memory_equals_cli(cli, cpu):
    # The pprof beside the run is found as the CLI finds it; allocators on GPU/TPU.
    assert cpu.memory() == cli_json(cli, "memory", CPU)
    assert cpu.memory()["device_memory_profile"]["total_bytes"] > 0
    for path in (ROCM, TPU):
        m = stepscope.load(path).memory(top=5)
        assert m == cli_json(cli, "memory", path, "--top", 5)
        assert m["allocators"][0]["peak_in_use_bytes"] > 0


def test_buffers_and_hlo_graph_equal_cli(cli, cpu):
    b = cpu.buffers()
    assert b.raw == cli_json(cli, "buffers", CPU)
    assert b.key == "live_at_peak" and len(b) == 10 and b.raw["peak_bytes"] > 0
    every = cpu.buffers(program="jit_train_step", top=None)
    assert every.raw == cli_json(cli, "buffers", CPU, "--program", "jit_train_step", "--top", "all")
    assert len(every) == every.raw["live_at_peak_count"]
    with pytest.raises(stepscope.StepscopeError, match="jit_train_step"):
        cpu.buffers(program="jit_nothing")
    op = cpu.ops(top=1)[0]["name"]
    assert cpu.hlo_graph(op, depth=3) == cli_json(cli, "hlo", CPU, op, "--graph", "--depth", 3)


def test_advise_equals_cli_and_takes_thresholds(cli):
    tiny = FIXTURES / "cpu-tiny-ops"
    p = stepscope.load(tiny)
    rows = p.advise()
    assert rows.raw == cli_json(cli, "advise", tiny)
    assert "many-dispatches" in [f["rule"] for f in rows]
    quiet = p.advise(dispatches_per_step=1000)
    assert "many-dispatches" not in [f["rule"] for f in quiet]
    assert quiet.raw["thresholds"]["dispatches_per_step"] == 1000
    with pytest.raises(stepscope.StepscopeError, match="bad thresholds"):
        p.advise(no_such_threshold=1)


def test_whatif_equals_cli_and_replays_the_findings_gain(cli):
    """The first finding's gain, replayed by whatif(), is the CLI's projection of it."""
    path = FIXTURES / "gpu-callback"
    p = stepscope.load(path)
    first = p.advise()[0]
    assert first["rule"] == "host-callbacks" and first["gain_edit"] == "--remove callbacks"
    w = p.whatif(first["gain_edit"])
    assert w.raw == cli_json(cli, "whatif", path, *first["gain_edit"].split())
    assert w.raw["gain_ps"] == first["gain_ps"] and w.raw["schema"] == "stepscope.whatif/1"
    assert any(r["node"] == "callback" and r["projected_ps"] == 0 for r in w)
    with pytest.raises(stepscope.StepscopeError, match="no change given"):
        p.whatif("")
    with pytest.raises(stepscope.StepscopeError, match="bad edit"):
        p.whatif("--scale dot")


def test_diff_equals_cli(cli):
    a, b = FIXTURES / "cpu-clean", FIXTURES / "cpu-slow"
    d = stepscope.diff(a, b, top=20)
    assert d == cli_json(cli, "diff", a, b, "--top", 20)
    assert d["step_time"]["delta_ps"] > 0
    assert stepscope.diff(stepscope.load(a), stepscope.load(b), top=20) == d


def test_diff_by_scope_equals_cli(cli):
    a, b = FIXTURES / "cpu-guide-adam", FIXTURES / "cpu-guide-sgd"
    d = stepscope.diff(a, b, top=5, by="scope")
    assert d == cli_json(cli, "diff", a, b, "--top", 5, "--by", "scope")
    assert d["by"] == "scope"
    assert {"train_step/adam"} <= {r["name"] for r in d["ops"] if r["status"] == "removed"}
    with pytest.raises(stepscope.StepscopeError, match="use one of: op, category"):
        stepscope.diff(a, b, by="flops")


# Eight Python threads ask a fresh profile for its analyses at once: each must finish
# (the shared work of a profile is computed once, outside the rayon pool). Run in a
# child process so that the pool size can be set and a hang ends in a timeout.
_THREADED = r"""
import sys, threading
import stepscope

p = stepscope.load(sys.argv[1])
calls = [
    p.summary, p.steps, p.advise, p.kernels, p.memory,
    lambda: p.ops(by="scope"), lambda: p.ops(by="module"), lambda: p.ops(),
]
results, errors = [None] * len(calls), []
def run(i):
    try:
        results[i] = calls[i]()
    except Exception as e:  # reported below
        errors.append(repr(e))
threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
assert not any(t.is_alive() for t in threads), "a thread is still waiting"
assert not errors, errors
print(results[0]["step_count"], len(results[1]))
"""


@pytest.mark.parametrize("threads", ["1", "2", None])
@pytest.mark.parametrize("fixture", [CPU, FIXTURES / "gpu-transformer", TPU, ROCM])
def test_eight_threads_on_a_fresh_profile_all_finish(cli, fixture, threads):
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)
    if threads:
        env["RAYON_NUM_THREADS"] = threads
    r = subprocess.run([sys.executable, "-c", _THREADED, str(fixture)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    step_count, steps = map(int, r.stdout.split())
    summary = cli_json(cli, "summary", fixture)
    assert step_count == summary["step_count"] == steps


def test_roofline_and_peaks_equal_cli(cli):
    # A GPU: the data sheet's roofs, as the CLI's.
    gpu = FIXTURES / "gpu-nocb"
    r = stepscope.load(gpu).roofline()
    assert r.raw == cli_json(cli, "roofline", gpu, "--top", "0")
    assert r.raw["devices"][0]["model"] == "H100 SXM" and len(r) > 100
    # A CPU's peaks are the user's: load(peak_flops=, peak_bandwidth=) as the flags.
    p = stepscope.load(CPU, peak_flops=2e12, peak_bandwidth=1e11)
    flags = ["--peak-flops", "2T", "--peak-bandwidth", "100G"]
    assert p.roofline().raw == cli_json(cli, "roofline", CPU, "--top", "0", *flags)
    assert p.summary() == cli_json(cli, "summary", CPU, *flags)
    assert p.summary()["flops_utilization_pct"] > 0
    assert stepscope.load(CPU).summary()["flops_utilization_pct"] is None
    assert p.steps().raw == cli_json(cli, "steps", CPU, *flags)
    # Peaks belong to the loaded profile, not to advise().
    with pytest.raises(stepscope.StepscopeError, match="pass them to load"):
        stepscope.load(CPU).advise(peak_flops_per_s=1e12)
    with pytest.raises(stepscope.StepscopeError, match="positive"):
        stepscope.load(CPU, peak_flops=-1)


def test_rows_render_as_a_table_in_a_notebook():
    # Jupyter calls _repr_html_: a table of the rows' plain values, the first 50 rows,
    # a line saying how many more there are; names are escaped.
    import html
    import re

    p = stepscope.load(FIXTURES / "cpu-transformer")
    ops = p.ops()
    page = ops._repr_html_()
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    assert len(rows) == min(len(ops), 50)
    assert f"{len(ops) - 50} more rows" in page if len(ops) > 50 else "more rows" not in page
    head = re.findall(r"<th>(.*?)</th>", page)
    assert head[:2] == ["name", "module"] and "self_ps" in head
    first = re.findall(r"<td>(.*?)</td>", rows[0])
    assert first[0] == html.escape(ops[0]["name"]) and first[head.index("self_ps")] == str(ops[0]["self_ps"])
    # A line's stack (a list) is left to to_pandas().
    lines = p.ops(by="line")
    assert "stack" in lines[0] and "<th>stack</th>" not in lines._repr_html_()


def _pod(tmp_path, copies):
    """A run of `copies` hosts, each a copy of the CPU transformer's file."""
    run = tmp_path / "plugins" / "profile" / "2026_11_01_00_00_00"
    run.mkdir(parents=True)
    (src,) = (CPU / "plugins" / "profile" / CPU_RUN).glob("*.xplane.pb")
    for h in range(copies):
        (run / f"h{h}.xplane.pb").write_bytes(src.read_bytes())
    return tmp_path, src.stat().st_size


def test_summary_per_host_equals_cli(cli, tmp_path):
    logs, _ = _pod(tmp_path, 3)
    hosts = stepscope.summary_per_host(logs, top=3)
    assert hosts == cli_json(cli, "summary", logs, "--per-host", "--top", 3)
    assert hosts["schema"] == "stepscope.summary_hosts/1"
    assert [h["host"] for h in hosts["hosts"]] == ["h0", "h1", "h2"]
    assert hosts["hosts"][1]["summary"] == stepscope.load(logs, host="h1").summary(top=3)


def _held_bytes():
    """This process's resident anonymous memory (what the limit counts as held)."""
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("RssAnon:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_a_run_too_large_to_load_whole_is_read_a_host_at_a_time(tmp_path, monkeypatch):
    # 30 hosts of 1.1 MB; room for 30 MB beside what this process holds already.
    logs, size = _pod(tmp_path, 30)
    assert 30 * size > 30e6
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", str(_held_bytes() + 30_000_000))
    with pytest.raises(stepscope.StepscopeError, match=r"^reading the run's 30 hosts together needs about \d+ MB, "
                       r"and STEPSCOPE_MEMORY_LIMIT is \d+ MB, \d+ MB of it held already — read one host with "
                       r"--host HOST \(the analyses, `summary` to `history`, read a run of several hosts a host at "
                       r"a time by themselves\)"):
        stepscope.load(logs)
    # The run's numbers and findings, a host at a time (the CLI's own limit is its own
    # process's).
    by_host = stepscope.summary_by_host(logs, top=3)
    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT")
    whole = stepscope.load(logs).summary(top=3)
    assert by_host.pop("read_a_host_at_a_time") is True
    assert by_host["findings"] and by_host == whole
    assert len(whole["environment"]["hosts"]) == 30
    assert stepscope.load(logs, host="h4").hosts == ["h4"]
    hosts = stepscope.summary_per_host(logs, top=1)
    assert len(hosts["hosts"]) == 30 and not hosts.get("hosts_unread")
