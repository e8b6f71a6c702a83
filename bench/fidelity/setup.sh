#!/usr/bin/env bash
# Makes bench/fidelity/.venv with XProf, the peer profiler compare.py checks against.
# XProf is never a dependency of stepscope or of its tests: only this bench uses it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 -m venv "$here/.venv"
"$here/.venv/bin/pip" install --quiet --disable-pip-version-check xprof==2.24.2
"$here/.venv/bin/python" -c 'from xprof import version; print("xprof", version.__version__)'
