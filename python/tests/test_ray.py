"""`stepscope.write_tables_on_ray` on a real local Ray cluster of 2 CPUs, one task per
host file: its folder equals `stepscope tables`' file for file and row for row, and its
manifest is the same."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

import pyarrow.parquet as pq
import pytest
import ray

import stepscope

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def log_dir(tmp: Path) -> Path:
    """Three runs: the guide's SGD capture, a data-parallel run of eight devices, and a
    run of two hosts (one capture under two names)."""
    logs = tmp / "logs"
    shutil.copytree(FIXTURES / "cpu-guide-sgd", logs / "sgd")
    shutil.copytree(FIXTURES / "cpu-dp8-collectives", logs / "dp8")
    two = logs / "two" / "plugins" / "profile" / "2026_11_01_00_00_00"
    two.mkdir(parents=True)
    vm = FIXTURES / "cpu-clean" / "plugins" / "profile" / "2026_11_21_23_32_11" / "vm.xplane.pb"
    for host in ("vm", "worker-1"):
        shutil.copy(vm, two / f"{host}.xplane.pb")
    return logs


def parquet_files(root: Path) -> dict:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def buckets():
    """The Cloud Storage emulator of the Rust tests (tests/support/buckets.py), its
    address in the environment the cluster's workers start with; the real two-process
    pod uploaded under `gs://prof/logs/cpu-pod-straggler/`."""
    p = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "buckets.py"),
                          str(FIXTURES / "cpu-pod-straggler")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(p.stdout.readline())
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{info['gcs_port']}"
    yield info
    del os.environ["STORAGE_EMULATOR_HOST"]
    p.stdin.close()
    p.wait(timeout=60)


@pytest.fixture(scope="module")
def cluster(buckets):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def bucket_files(port: int, prefix: str) -> dict:
    """Each object under bucket `prof`'s `prefix` of the emulator: its SHA-256."""
    q = urllib.parse.urlencode({"prefix": prefix + "/"})
    items = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/storage/v1/b/prof/o?{q}")).get("items", [])
    out = {}
    for i in items:
        name = urllib.parse.quote(i["name"], safe="")
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/download/storage/v1/b/prof/o/{name}?alt=media").read()
        out[i["name"][len(prefix) + 1:]] = hashlib.sha256(body).hexdigest()
    return out


def test_ray_tables_into_a_bucket_are_the_local_files(cluster, buckets, tmp_path):
    logs = log_dir(tmp_path)
    local = stepscope.write_tables(logs, tmp_path / "local")
    distributed = stepscope.write_tables_on_ray(logs, "gs://prof/ray-tables")
    assert distributed == local
    want = {str(p.relative_to(tmp_path / "local")): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (tmp_path / "local").rglob("*") if p.is_file()}
    assert bucket_files(buckets["gcs_port"], "ray-tables") == want
    assert sum(k.endswith(".parquet") for k in want) == local["files"]


def test_ray_tables_equal_the_local_command(cluster, tmp_path):
    logs = log_dir(tmp_path)
    local = stepscope.write_tables(logs, tmp_path / "local")
    distributed = stepscope.write_tables_on_ray(logs, tmp_path / "ray")
    assert distributed == local
    assert local["schema"] == "stepscope.tables/1" and len(local["runs"]) == 3
    ours, theirs = parquet_files(tmp_path / "local"), parquet_files(tmp_path / "ray")
    assert list(theirs) == list(ours)
    assert local["files"] == len(ours)
    # Four hosts, each with its partitions of each table.
    assert sum("/host=worker-1/" in k for k in ours) >= 5
    rows = 0
    for name, path in ours.items():
        a, b = pq.read_table(path), pq.read_table(theirs[name])
        assert a.schema == b.schema, name
        assert a.to_pylist() == b.to_pylist(), name
        rows += a.num_rows
    assert rows == local["rows"]
    # One run of the folder, likewise.
    one = local["runs"][0]
    assert stepscope.write_tables_on_ray(logs, tmp_path / "one", run=one)["runs"] == [one]


def test_a_task_that_fails_names_its_error(cluster, tmp_path):
    with pytest.raises(stepscope.StepscopeError, match="cannot read .*missing"):
        stepscope.write_tables_on_ray(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(stepscope.StepscopeError, match="no profile found"):
        stepscope.write_tables_on_ray(tmp_path / "empty", tmp_path / "out")
    logs = log_dir(tmp_path)
    with pytest.raises(stepscope.StepscopeError, match="no run named 'nope'"):
        stepscope.write_tables_on_ray(logs, tmp_path / "out", run="nope")
    # A host file that is not a profile: the task's one-line error comes back.
    bad = logs / "bad" / "plugins" / "profile" / "2026_11_02_00_00_00"
    bad.mkdir(parents=True)
    (bad / "vm.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a profile")
    with pytest.raises(stepscope.StepscopeError, match="vm.xplane.pb"):
        stepscope.write_tables_on_ray(logs, tmp_path / "out2")


def cli(*args: str) -> str:
    """The `stepscope` command's standard output (it must succeed)."""
    r = subprocess.run([sys.executable, "-m", "stepscope", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def mixed_run(tmp: Path, fixtures: list, bad: Optional[int] = None) -> Path:
    """A run of one host per fixture (h0, h1, …); host `bad`'s file cut to a third."""
    tmp.mkdir(parents=True, exist_ok=True)
    run = tmp / "mixed" / "plugins" / "profile" / "2026_11_01_00_00_00"
    run.mkdir(parents=True)
    for i, name in enumerate(fixtures):
        src = next((FIXTURES / name).rglob("*.xplane.pb"))
        data = src.read_bytes()
        (run / f"h{i}.xplane.pb").write_bytes(data[: len(data) // 3] if i == bad else data)
    return tmp / "mixed"


def test_analyze_on_ray_prints_what_the_command_prints(cluster, tmp_path):
    """Hosts whose decisions differ alone (GPU with and without step annotations), a
    real two-process pod joined at its all-reduces, and a run of one host: the summary
    and the findings reduced from the Ray tasks' parts are the command's `--json`,
    byte for byte (advise at its hair trigger too)."""
    mixed = mixed_run(tmp_path, ["gpu-sync", "gpu-nosync", "gpu-unannotated"])
    pod = FIXTURES / "cpu-pod-straggler"
    one = FIXTURES / "cpu-clean"
    th = tmp_path / "th.toml"
    th.write_text("utilization_pct = 100.0\ndominant_op_pct = 0.0\nstep_jitter_pct = 0.0\nstraggler_pct = 0.0\n")
    advised = {}
    for path in (mixed, pod, one):
        assert stepscope.analyze_on_ray(path, text=True) == cli("summary", str(path), "--json"), path
        advised[path] = stepscope.analyze_on_ray(path, "advise", text=True)
        assert advised[path] == cli("advise", str(path), "--json"), path
    assert stepscope.analyze_on_ray(mixed, top=3, text=True) == cli("summary", str(mixed), "--json", "--top", "3")
    assert stepscope.analyze_on_ray(mixed, "advise", thresholds=th, text=True) == cli(
        "advise", str(mixed), "--json", "--thresholds", str(th))
    # The other commands, with their options (each setting's map and reduce apart are
    # tests/integration/parts.rs's).
    for command, options, flags in [
        ("steps", {"critical_path": True, "top": 5}, ["--critical-path", "--top", "5"]),
        ("devices", {}, []),
        ("ops", {"by": "scope", "depth": 2, "min_self": "1us"}, ["--by", "scope", "--depth", "2", "--min-self", "1us"]),
        ("check", {"max_step_ms": 1000}, ["--max-step-ms", "1000"]),
    ]:
        got = stepscope.analyze_on_ray(mixed, command, text=True, **options)
        assert got == cli(command, str(mixed), "--json", *flags), (command, options)
    # diff of two runs, by op and by scope, a run of one host on one side.
    other = mixed_run(tmp_path / "other", ["gpu-nosync", "gpu-unannotated", "gpu-sync"])
    for a, b, options, flags in [(mixed, other, {}, []), (one, mixed, {"by": "scope", "top": 3},
                                                         ["--by", "scope", "--top", "3"])]:
        got = stepscope.analyze_on_ray(a, "diff", other=b, text=True, **options)
        assert got == cli("diff", str(a), str(b), "--json", *flags), (a, b, options)
    # A gate that fails is an answer (the command's exit code 1, its JSON).
    base = tmp_path / "base.json"
    base.write_text(cli("summary", str(mixed), "--json"))
    gate = stepscope.analyze_on_ray(mixed, "check", baseline=base, max_step_ms=0.001, text=True)
    r = subprocess.run([sys.executable, "-m", "stepscope", "check", str(mixed), "--json", "--baseline", str(base),
                        "--max-step-ms", "0.001"], capture_output=True, text=True)
    assert r.returncode == 1 and gate == r.stdout
    assert json.loads(gate)["passed"] is False, gate
    advice = json.loads(advised[pod])
    assert advice["schema"] == "stepscope.advise/1"
    assert advice["findings"][0]["rule"] == "stragglers", advice["findings"][0]


def test_analyze_on_ray_leaves_out_a_host_it_cannot_read(cluster, tmp_path):
    """A host file cut short: its task comes back with its one-line error, and the
    answer of the other hosts comes, naming it in `hosts_unread`, as the command's."""
    mixed = mixed_run(tmp_path, ["cpu-clean", "cpu-slow", "cpu-dp4"], bad=1)
    got = stepscope.analyze_on_ray(mixed, text=True)
    assert got == cli("summary", str(mixed), "--json")
    unread = json.loads(got)["hosts_unread"]
    assert [u["host"] for u in unread] == ["h1"] and "not a readable profile" in unread[0]["error"], unread
    with pytest.raises(stepscope.StepscopeError, match="runs summary, advise, steps, devices, ops, check, diff, not 'kernels'"):
        stepscope.analyze_on_ray(mixed, "kernels")
    with pytest.raises(stepscope.StepscopeError, match="devices takes no option top= — its options: none"):
        stepscope.analyze_on_ray(mixed, "devices", top=3)
    # A node with no room for a host (its limit 1 MB here) stops the run: a host left
    # out for want of memory would change the answer without a word. The task's map, as
    # a worker runs it, then the driver's reading of the answers.
    from stepscope import _ray

    run = json.loads(cli("part", str(mixed), "--plan"))["run"]
    os.environ["STEPSCOPE_MEMORY_LIMIT"] = "1MB"
    try:
        ok, said = _ray._map_host(str(mixed), run, "h0", "summary", [])
    finally:
        del os.environ["STEPSCOPE_MEMORY_LIMIT"]
    assert ok is None and "reading host h0 needs about" in said, said
    with pytest.raises(stepscope.StepscopeError, match="reading host h0 needs about .*on a Ray node"):
        _ray._mapped([ray.put(_ray._map_host(str(mixed), run, "h1", "summary", [])), ray.put((ok, said))])
    with pytest.raises(stepscope.StepscopeError, match="cannot read .*missing"):
        stepscope.analyze_on_ray(tmp_path / "missing")


def test_analyze_on_ray_of_a_pod_in_a_bucket(cluster, buckets):
    """A pod in a bucket: each task fetches its host's file; the driver lists the run
    from the bucket's listing and reduces the parts, for the command's answer of the
    same gs:// path, byte for byte."""
    url = "gs://prof/logs/cpu-pod-straggler"
    assert stepscope.analyze_on_ray(url, "advise", text=True) == cli("advise", url, "--json")
    assert stepscope.analyze_on_ray(url, text=True) == cli("summary", url, "--json")
