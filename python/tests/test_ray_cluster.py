"""`stepscope.analyze_on_ray` on a real Ray cluster of two nodes on this machine (`ray
start --head`, then `ray start --address` for a second node process, both started and
stopped here): a worker killed while it maps a host has its task retried by Ray, and
the answer is still the command's `--json`, byte for byte."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES

BIN = Path(sys.executable).parent


def clean_env() -> dict:
    """This environment with no cluster address and no auth mode of an earlier
    `ray.init()` (test_ray.py's)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    for k in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
        env.pop(k, None)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_nodes():
    """A head node and a second node, one CPU each: the environment a driver joins
    them with, and the address."""
    env, port = clean_env(), free_port()
    ray_cli = str(BIN / "ray")
    try:
        subprocess.run([ray_cli, "start", "--head", "--port", str(port), "--num-cpus", "1",
                        "--include-dashboard", "false"], check=True, timeout=300, env=env, capture_output=True)
        # A head node whose ~/.ray/auth_token exists (test_ray.py's `ray.init()` made
        # one) asks the other node and the driver for it (docs/scale.md, "Token
        # authentication"): on this machine they read the file once told to.
        if (Path.home() / ".ray" / "auth_token").exists():
            env["RAY_AUTH_MODE"] = "token"
        subprocess.run([ray_cli, "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1"],
                       check=True, timeout=300, env=env, capture_output=True)
        yield env, f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray_cli, "stop", "--force"], timeout=300, capture_output=True, env=env)


def mapping_tasks() -> list:
    """(pid, parent pid) of each `stepscope part … --host` process running now."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"stepscope" in args and b"part" in args and b"--host" in args:
            found.append((int(d.name), ppid))
    return found


def pod(tmp_path: Path, hosts: int) -> str:
    """A log directory of `hosts` copies of a real CPU capture, one run."""
    run = tmp_path / "pod" / "plugins" / "profile" / "2026_11_01_00_00_00"
    run.mkdir(parents=True)
    src = next((FIXTURES / "cpu-transformer").rglob("*.xplane.pb"))
    for i in range(hosts):
        shutil.copy(src, run / f"host{i}.xplane.pb")
    return str(tmp_path / "pod")


def test_a_killed_worker_is_retried_and_the_answer_is_unchanged(two_nodes, tmp_path):
    logs = pod(tmp_path, 6)
    local = subprocess.run([sys.executable, "-m", "stepscope", "summary", logs, "--json"],
                           capture_output=True, text=True, check=True).stdout

    env, address = two_nodes
    answer = tmp_path / "answer.json"
    # The driver, in a process of its own (as a user's): it joins the cluster, checks
    # both nodes are up, and writes the answer (Ray prints its own lines, a dead
    # worker's among them).
    code = (
        "import sys, time, ray, stepscope\n"
        f"ray.init(address={address!r}, log_to_driver=False)\n"
        "deadline = time.time() + 120\n"
        "while sum(n['Alive'] for n in ray.nodes()) < 2 and time.time() < deadline:\n"
        "    time.sleep(0.5)\n"
        "assert sum(n['Alive'] for n in ray.nodes()) == 2, ray.nodes()\n"
        f"open({str(answer)!r}, 'w').write(stepscope.analyze_on_ray({logs!r}, text=True))\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    # The first Ray worker seen mapping a host is killed (SIGKILL, as the system's
    # out-of-memory killer or a lost node would): Ray retries its task elsewhere.
    killed = None
    deadline = time.time() + 300
    while killed is None and driver.poll() is None and time.time() < deadline:
        for pid, worker in mapping_tasks():
            if worker > 1:
                os.kill(worker, signal.SIGKILL)
                killed = worker
                break
        time.sleep(0.02)
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    assert killed is not None, "no mapping task was seen to kill"
    assert "worker" in out + err, "Ray said nothing of the worker it lost"
    assert answer.read_text() == local


def test_the_command_line_maps_a_run_on_the_cluster_it_is_given(two_nodes, tmp_path):
    """`stepscope COMMAND PATH --json --ray ADDRESS` (the package's command: its Python
    is the one it hands the run to) prints what the command prints read here."""
    logs = pod(tmp_path, 3)
    env, address = two_nodes
    stepscope = [sys.executable, "-m", "stepscope"]
    for words in (["summary", logs, "--top", "3"], ["ops", logs, "--by", "category"]):
        local = subprocess.run([*stepscope, *words, "--json"], capture_output=True, text=True, check=True).stdout
        on_ray = subprocess.run([*stepscope, *words, "--json", "--ray", address], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=600)
        assert on_ray.returncode == 0, on_ray.stderr[-2000:]
        assert on_ray.stdout == local, words
    # What it cannot do is said in one line, before any cluster is reached.
    for words, says in ((["summary", logs, "--ray", address], "add --json"),
                        (["info", logs, "--json", "--ray", address], "drop --ray")):
        r = subprocess.run([*stepscope, *words], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 2 and r.stdout == "", r
        assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
    # A cluster not there: one line, exit 2.
    r = subprocess.run([*stepscope, "devices", logs, "--json", "--ray", f"127.0.0.1:{free_port()}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("stepscope: "), r.stderr
