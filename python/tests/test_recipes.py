"""docs/recipes.md runs as written: each ```python block, alone, in an empty folder,
with real JAX on CPU and the installed stepscope."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

RECIPES = REPO / "docs" / "recipes.md"


def blocks():
    text = RECIPES.read_text()
    found = []
    for m in re.finditer(r"^## (.+?)$(.*?)(?=^## |\Z)", text, re.S | re.M):
        for code in re.findall(r"^```python\n(.*?)^```", m.group(2), re.S | re.M):
            found.append(pytest.param(code, id=m.group(1)[:40]))
    return found


def test_the_page_has_every_guides_workflow():
    assert len(blocks()) == 6


@pytest.mark.parametrize("code", blocks())
def test_recipe_runs_as_written(code, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFILE_", "STEPSCOPE_", "XLA_FLAGS"))}
    env["JAX_PLATFORMS"] = "cpu"
    (tmp_path / "recipe.py").write_text(code)
    r = subprocess.run([sys.executable, "recipe.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
