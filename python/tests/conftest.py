"""Shared helpers for the stepscope Python tests: real JAX on CPU, real captures in
pytest's tmp_path, real fixtures from tests/fixtures, the installed `stepscope`."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def steps_of(path):
    """The step numbers the Rust analysis finds in a capture."""
    import stepscope

    return [s["step_num"] for s in stepscope.load(path).steps()]


def manifest_of(path):
    return json.loads((Path(path) / "stepscope_manifest.json").read_text())


def run_folders(log_dir):
    root = Path(log_dir) / "plugins" / "profile"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@pytest.fixture(scope="session")
def cli():
    """The `stepscope` command the wheel installed (beside this Python)."""
    exe = Path(sys.executable).parent / "stepscope"
    if not exe.exists():
        found = shutil.which("stepscope")
        assert found, "the stepscope command is not installed — pip install ./python"
        exe = Path(found)
    return str(exe)


@pytest.fixture(scope="session")
def work():
    """A small jitted function and its input; compiled once."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x: jnp.tanh(x @ x) * 0.5)
    x = jnp.ones((64, 64), jnp.float32)
    f(x).block_until_ready()
    return f, x


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """The wheel file a team shares (README: "Install once for a team"): `maturin build`
    of the package into a `dist/` folder, with the profile the installed package was
    built with (scripts/test_python.sh; the crates are that build's)."""
    import subprocess

    dist = tmp_path_factory.mktemp("wheel") / "dist"
    profile = os.environ.get("STEPSCOPE_WHEEL_PROFILE", "dev")
    subprocess.run([str(Path(sys.executable).parent / "maturin"), "build", "--profile", profile, "--locked", "-m",
                    str(REPO / "python" / "Cargo.toml"), "-o", str(dist), "--quiet"],
                   check=True, timeout=900, cwd=REPO, capture_output=True)
    (found,) = dist.glob("stepscope-*.whl")
    return found
