"""docs/scale.md's "On Ray" lines, run as written against a real local cluster: `ray
start --head`, then the driver block in a new Python process beside a `dist/` folder
holding the wheel `maturin build` made, with local folders for the bucket and the
tables (a shared filesystem, the docs' other case). The tables equal the local
command's, and the tasks ran the wheel Ray installed, not this environment's package."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from conftest import FIXTURES, REPO

DOC = REPO / "docs" / "scale.md"
BIN = Path(sys.executable).parent


def ray_section() -> str:
    text = DOC.read_text()
    return text[text.index("## On Ray"):text.index("\n## ", text.index("## On Ray") + 1)]


def blocks(lang: str) -> list:
    return re.findall(rf"```{lang}\n(.*?)```", ray_section(), re.S)


def clean_env() -> dict:
    """This environment as a new shell's: no cluster address, and no auth mode (a
    `ray.init()` earlier in this process, test_ray.py's, set RAY_AUTH_MODE=token here)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    for k in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def wheel_dir(wheel, tmp_path_factory):
    """The driver's folder: the wheel file in its `dist/`, as the docs' glob finds it."""
    work = tmp_path_factory.mktemp("driver")
    (work / "dist").mkdir()
    shutil.copy(wheel, work / "dist" / wheel.name)
    return work


@pytest.fixture(scope="module")
def head():
    """The docs' `ray start --head`, stopped after."""
    (start,) = [ln.split("#")[0].strip() for b in blocks("sh") for ln in b.splitlines() if "--head" in ln]
    assert start == "ray start --head"
    env = clean_env()
    try:
        started = subprocess.run([str(BIN / "ray"), *start.split()[1:]], check=True, timeout=300, env=env,
                                 capture_output=True, text=True)
        # The docs' token paragraph: a head node whose ~/.ray/auth_token exists (a local
        # `ray.init()` made one, as test_ray.py's did) asks for the token, and a driver
        # on that node finds it by itself.
        if (Path.home() / ".ray" / "auth_token").exists():
            assert "Token authentication is enabled" in started.stdout + started.stderr
        yield
    finally:
        # Stopped whatever happened: a cluster left running would be joined by the next
        # `ray.init()` of this machine.
        subprocess.run([str(BIN / "ray"), "stop", "--force"], timeout=300, capture_output=True)


def test_the_docs_ray_lines_run_as_written(head, wheel_dir, tmp_path):
    logs = tmp_path / "pod-logdir"
    shutil.copytree(FIXTURES / "cpu-guide-sgd", logs / "sgd")
    two = logs / "two" / "plugins" / "profile" / "2026_11_01_00_00_00"
    two.mkdir(parents=True)
    vm = next((FIXTURES / "cpu-clean").rglob("vm.xplane.pb"))
    for host in ("vm", "worker-1"):
        shutil.copy(vm, two / f"{host}.xplane.pb")
    out = tmp_path / "tables"

    driver = blocks("python")[0]  # the driver; the blocks after it are the analyses' lines
    assert 'ray.init(address="auto", runtime_env={"py_modules": [wheel]})' in driver
    code = driver.replace("gs://bucket/pod-logdir", str(logs)).replace("gs://bucket/tables", str(out))
    # After the docs' lines: where a task imported stepscope from, the manifest and the
    # summary.
    code += (
        "\n@ray.remote\ndef where():\n    import stepscope\n    return stepscope.__file__\n"
        "import json\nprint(json.dumps({'task_module': ray.get(where.remote()), 'manifest': manifest, "
        "'summary': summary}))\n"
    )
    env = clean_env()
    run = subprocess.run([sys.executable, "-c", code], cwd=wheel_dir, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    printed, median, done = lines[-3], lines[-2], json.loads(lines[-1])

    local = stepscope.write_tables(logs, tmp_path / "local")
    assert done["manifest"] == local
    assert printed == f"{local['files']} {local['rows']}"
    # The pod's summary, mapped by the tasks the wheel runs: the command's.
    here = subprocess.run([sys.executable, "-m", "stepscope", "summary", str(logs), "--json"], capture_output=True,
                          text=True, check=True).stdout
    assert done["summary"] == json.loads(here)
    assert median == str(done["summary"]["step_time"]["median_ps"])
    # The task's package is the wheel Ray put on the node (its runtime resources), not
    # the one installed in this environment.
    assert "runtime_resources" in done["task_module"] and "py_modules" in done["task_module"], done
    assert Path(stepscope.__file__).resolve() != Path(done["task_module"]).resolve()
