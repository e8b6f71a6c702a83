#!/usr/bin/env python3
"""Saves XProf's per-op FLOPs and bytes for the GPU fixtures, beside each capture, as
`xprof_op_costs.csv`: a peer's numbers that tests/integration/cost.rs compares
`stepscope ops` with on every test run, where XProf itself is not installed.

    bench/fidelity/.venv/bin/python bench/fidelity/save_costs.py [FIXTURE ...]

Columns: module (XProf's program name, as compare.py maps it), op, occurrences (XProf
counts kernels), flops_per_occurrence (its `model_flop_rate`, GFLOP/s, times the self
time, over the occurrences), bytes_per_occurrence (`measured_memory_bw`, GiB/s, the
same way). Rows of programs that share a module name are summed, as stepscope's rows by
op are. Only ops XProf gives FLOPs or bytes are written.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the bench's own helpers: fixtures, XProf runner, tables)

DEFAULT = ["gpu-nocb", "gpu-scan-nocb", "gpu-compile", "rocm-mi300x-gemm", "rocm-mi300x-conv-2gpu"]


def main(argv: list[str]) -> int:
    fx = compare.fixtures()
    for name in argv or DEFAULT:
        path = fx[name]
        xp = compare.run_xprof(path)
        names = compare.program_names(xp["tools"].get("op_profile"))
        sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in compare.table_rows(xp["tools"].get("hlo_stats")):
            self_s = r["total_self_time"] / 1e6
            flops = (r.get("model_flop_rate") or 0) * 1e9 * self_s
            nbytes = (r.get("measured_memory_bw") or 0) * 2**30 * self_s
            key = (names.get(str(r["program_id"]), str(r["program_id"])), r["hlo_op_name"])
            s = sums[key]
            s[0] += r["occurrences"]
            s[1] += flops
            s[2] += nbytes
        out = compare.ROOT / "tests" / "fixtures" / name / "xprof_op_costs.csv"
        with open(out, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["module", "op", "occurrences", "flops_per_occurrence", "bytes_per_occurrence"])
            for (module, op), (n, flops, nbytes) in sorted(sums.items()):
                if n > 0 and (flops > 0 or nbytes > 0):
                    w.writerow([module, op, int(n), round(flops / n), round(nbytes / n)])
        print(f"{out.relative_to(compare.ROOT)}: {sum(1 for _ in open(out)) - 1} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
