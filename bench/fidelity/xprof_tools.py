#!/usr/bin/env python3
"""Runs XProf's converters on one XSpace file and prints their output as one JSON object.

Run with the XProf venv's python (bench/fidelity/setup.sh makes it):
    bench/fidelity/.venv/bin/python bench/fidelity/xprof_tools.py FILE.xplane.pb

XProf writes caches (op_stats, HLO protos) next to the file it reads, so the file is
copied into a fresh temporary folder first and read from there; the user's file and
folder are left as they were.

Output: {"xprof_version": V, "tool_names": [...], "tools": {TOOL: decoded JSON | null},
"errors": {TOOL: message}}. Every tool asked for is JSON in XProf 2.24.2.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

TOOLS = ["op_profile", "hlo_stats", "kernel_stats", "overview_page", "framework_op_stats", "input_pipeline_analyzer"]


def main() -> int:
    src = sys.argv[1]
    # XProf's C++ logs go to stderr; keep stdout for our JSON.
    from xprof import version as xprof_version
    from xprof.convert import raw_to_tool_data

    out: dict = {"xprof_version": xprof_version.__version__, "tools": {}, "errors": {}}
    with tempfile.TemporaryDirectory(prefix="stepscope-fidelity-") as tmp:
        path = os.path.join(tmp, os.path.basename(src))
        shutil.copyfile(src, path)
        out["tool_names"] = raw_to_tool_data.xspace_to_tool_names([path])
        for tool in TOOLS:
            try:
                data, _content_type = raw_to_tool_data.xspace_to_tool_data([path], tool, {"use_saved_result": False})
            except Exception as e:  # a tool XProf cannot build for this file
                out["tools"][tool] = None
                out["errors"][tool] = f"{type(e).__name__}: {e}"
                continue
            if data is None:
                out["tools"][tool] = None
                out["errors"][tool] = "no data"
                continue
            if isinstance(data, bytes):
                data = data.decode("utf-8")
            out["tools"][tool] = json.loads(data) if data.strip() else None
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
