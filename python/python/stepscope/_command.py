"""The ``stepscope`` command of this package, run as a child process: what the pod and
Ray helpers (``_tables``, ``_ray``) hand their work to."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Union

from stepscope._native import StepscopeError


def stepscope(*args: str, stdout_bytes: bool = False) -> Union[str, bytes]:
    """Runs this Python's ``stepscope`` command: its standard output, or its one-line
    error as a StepscopeError. (``check`` answers a failed gate with exit code 1 and
    its JSON: that is an answer.)"""
    # The command of this very package: on a Ray node, the wheel Ray put there
    # (runtime_env's py_modules), whatever else the node's Python holds.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-m", "stepscope", *args], stdin=subprocess.DEVNULL, capture_output=True,
                       env=env)
    if r.returncode != 0 and not (args[0] == "check" and r.returncode == 1 and r.stdout):
        lines = [l for l in r.stderr.decode(errors="replace").splitlines() if l.strip()]
        raise StepscopeError(lines[-1] if lines else f"stepscope {args[0]} failed with exit code {r.returncode}")
    return r.stdout if stdout_bytes else r.stdout.decode()
