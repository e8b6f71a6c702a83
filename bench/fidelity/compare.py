#!/usr/bin/env python3
"""Compares stepscope's numbers with XProf's on every fixture in tests/fixtures.

    python3 bench/fidelity/compare.py [--stepscope BIN] [--fixture NAME ...]

Needs the XProf venv (`bash bench/fidelity/setup.sh`) and a release build
(`cargo build --release --locked`; built here when target/release/stepscope is missing).
XProf is a peer to compare against, never a dependency of stepscope: nothing else in
the repository needs it.

For each fixture it prints one Markdown table: quantity, stepscope, XProf, difference %
(stepscope relative to XProf) and a status:
  ok     within 1%;
  DIFF   more than 1% apart on a quantity both tools compute the same way (a failure);
  known  a difference whose cause is understood and documented in docs/fidelity.md
         (the tools define the quantity differently, or one of them cannot read it);
  n/c    not comparable: one tool does not compute the quantity for this profile.
Exits 1 when any row is DIFF, 0 otherwise. Times are in µs (converted from ps exactly).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VENV_PY = HERE / ".venv" / "bin" / "python"
TOLERANCE_PCT = 1.0

# Fixture name -> profile file (relative to tests/fixtures).
def fixtures() -> dict[str, Path]:
    base = ROOT / "tests" / "fixtures"
    out = {}
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        files = sorted(d.rglob("*.xplane.pb"))
        if files:
            out[d.name] = files[0]
    return out


# ---------------------------------------------------------------- running the tools


def run_stepscope(binary: Path, cmd: str, path: Path) -> dict:
    out = subprocess.run(
        [str(binary), cmd, str(path), "--json", "--top", "100000"] if cmd in ("ops", "kernels") else
        [str(binary), cmd, str(path), "--json"],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def run_xprof(path: Path) -> dict:
    out = subprocess.run(
        [str(VENV_PY), str(HERE / "xprof_tools.py"), str(path)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def table_rows(t: dict | None) -> list[dict]:
    """A Google DataTable ({cols, rows}) as a list of {col id: value}."""
    if not t:
        return []
    ids = [c["id"] for c in t.get("cols", [])]
    return [dict(zip(ids, [c.get("v") if c else None for c in r["c"]])) for r in t.get("rows", [])]


# ---------------------------------------------------------------- comparison rows


class Report:
    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        self.rows: list[tuple[str, str, str, str, str, str]] = []
        self.raw: list[dict] = []
        self.notes: list[str] = []

    def add(self, quantity: str, ours, theirs, status: str | None = None, note: str = "", scale: float = 1.0):
        """A row; `scale` divides both values for display (1e6: ps -> µs)."""
        diff = pct(ours, theirs)
        if status is None:
            status = "ok" if diff is not None and abs(diff) <= TOLERANCE_PCT else "DIFF"
        self.rows.append((quantity, fmt(ours, scale), fmt(theirs, scale), fmt_pct(diff), status, note))
        unit = "us" if scale == US else ""
        raw = lambda v: v / scale if scale != 1.0 and isinstance(v, (int, float)) and not isinstance(v, bool) else v
        self.raw.append({"quantity": quantity, "stepscope": raw(ours), "xprof": raw(theirs), "unit": unit,
                         "diff_pct": diff if diff is None or abs(diff) != float("inf") else None,
                         "status": status, "note": note})

    def failures(self) -> int:
        return sum(1 for r in self.rows if r[4] == "DIFF")

    def markdown(self) -> str:
        rel = self.path.relative_to(ROOT)
        lines = [f"### {self.name}", "", f"`{rel}`", ""]
        lines.append("| quantity | stepscope | XProf | diff % | status | note |")
        lines.append("|---|---:|---:|---:|---|---|")
        for r in self.rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        for n in self.notes:
            lines.append("")
            lines.append(n)
        lines.append("")
        return "\n".join(lines)


def pct(ours, theirs) -> float | None:
    if not isinstance(ours, (int, float)) or not isinstance(theirs, (int, float)):
        return None
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return 0.0 if ours == theirs else None
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return (ours - theirs) * 100.0 / theirs


def fmt(v, scale: float = 1.0) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        x = v / scale
        if scale == 1.0 and float(x).is_integer():
            return f"{int(x):,}"
        return f"{x:,.3f}"
    return str(v)


def fmt_pct(d: float | None) -> str:
    if d is None:
        return ""
    if d == float("inf"):
        return "inf"
    return f"{d:+.3f}"


US = 1e6  # ps per µs


# ---------------------------------------------------------------- steps (all fixtures)


def compare_steps(rep: Report, ss_steps: dict, ss_summary: dict, xp: dict) -> None:
    ov = xp["tools"].get("overview_page") or []
    step_table = ov[1] if len(ov) > 1 else {}
    xsteps = {}
    for r in table_rows(step_table):
        name = str(r.get("stepnum", ""))
        num = name.rsplit(" ", 1)[-1]
        if num.lstrip("-").isdigit() and r.get("stepTimeMs") is not None:
            xsteps[int(num)] = r
    ours = {s["step_num"]: s for s in ss_steps["steps"]}
    if not xsteps:
        rep.add("step count", len(ours), 0, "n/c",
                f"XProf measured no step (\"{(step_table.get('p') or {}).get('input_conclusion', '')[:60]}…\"); "
                f"stepscope steps come from {ss_steps['source']}")
        return
    rep.add("step count", len(ours), len(xsteps),
            "known" if len(ours) == len(xsteps) + 2 and len(ours) > 5 else None,
            "XProf drops the first and last step when there are more than 5" if len(ours) > 5 else "")
    common = sorted(set(ours) & set(xsteps))
    p = step_table.get("p") or {}
    gpu = p.get("hardware_type", "") == "GPU"
    for n in common:
        # On GPUs XProf times a step from its first device op to the last device op it
        # groups with it, which can be the next step's first host-to-device copy (read
        # off tests/fixtures/gpu-bf16); stepscope times the StepTraceAnnotation.
        d = pct(ours[n]["duration_ps"], xsteps[n]["stepTimeMs"] * 1e9)
        known = gpu and d is not None and abs(d) > TOLERANCE_PCT
        rep.add(f"step {n} duration_us", ours[n]["duration_ps"], xsteps[n]["stepTimeMs"] * 1e9,
                "known" if known else None,
                "XProf (GPU) spans the step's device ops, stepscope the step's annotation" if known else "",
                scale=US)
        if gpu:
            # XProf counts the device work each step launched: stepscope's
            # device_work_ps (device_busy_ps, the busy time within the step's span,
            # differs when the loop dispatches ahead, as in gpu-async).
            rep.add(f"step {n} device compute_us", ours[n].get("device_work_ps", ours[n]["device_busy_ps"]),
                    xsteps[n]["deviceComputeTimeMs"] * 1e9, scale=US)
    for n in sorted(set(ours) - set(xsteps)):
        rep.add(f"step {n} duration_us", ours[n]["duration_ps"], None, "known" if len(ours) > 5 else "DIFF",
                "dropped by XProf (first/last of more than 5)" if len(ours) > 5 else "missing in XProf", scale=US)
    for n in sorted(set(xsteps) - set(ours)):
        rep.add(f"step {n} duration_us", None, xsteps[n]["stepTimeMs"] * 1e9, "DIFF", "missing in stepscope", scale=US)
    if common:
        mean_ours = sum(ours[n]["duration_ps"] for n in common) / len(common)
        mean_x = sum(xsteps[n]["stepTimeMs"] * 1e9 for n in common) / len(common)
        d = pct(mean_ours, mean_x)
        known = gpu and d is not None and abs(d) > TOLERANCE_PCT
        rep.add(f"mean step_us over steps {common[0]}..{common[-1]}", mean_ours, mean_x,
                "known" if known else None, "step spans differ on GPUs, as above" if known else "", scale=US)
    rep.add("mean step_us, each tool's own steps", ss_summary["step_time"]["mean_ps"],
            float(p.get("steptime_ms_average", "nan")) * 1e9,
            "known" if len(ours) != len(xsteps) or gpu else None,
            "different step sets; XProf's average is rounded to 0.1 ms" if len(ours) != len(xsteps)
            else "XProf's average is rounded to 0.1 ms", scale=US)
    # Breakdown: XProf's generic (CPU/GPU) breakdown files XLA:CPU op time under "host compute".
    hw = p.get("hardware_type", "")
    if hw == "CPU_ONLY":
        host = sum(xsteps[n]["hostComputeTimeMs"] for n in common) / len(common) * 1e9
        ours_compute = sum_over(ss_steps, common, lambda s: s["device_busy_ps"]) / len(common)
        rep.add("mean device busy_us (XProf: host compute)", ours_compute, host, "n/c",
                "XProf has no device on XLA:CPU and files every op under host compute; "
                "stepscope treats the CPU as the device (busy = XLA ops running)", scale=US)
        comp = sum_over(ss_steps, common, lambda s: s["compile_ps"]) / len(common)
        xcomp = sum(xsteps[n]["compileTimeMs"] for n in common) / len(common) * 1e9
        if comp or xcomp:
            rep.add("mean compile_us", comp, xcomp, "known",
                    "XProf counts only TensorFlow compile events; stepscope counts JAX/XLA "
                    "compilation (backend_compile_and_load, …) on host threads", scale=US)


def sum_over(ss_steps: dict, nums: list[int], f) -> float:
    by = {s["step_num"]: s for s in ss_steps["steps"]}
    return sum(f(by[n]) for n in nums)


def matched(rep: Report, ours: dict, theirs: dict, total: str, label):
    """Keys in both dicts as (key, ours, theirs), largest XProf total first; a key on one
    side only becomes a DIFF row."""
    for k in sorted(set(ours) | set(theirs), key=lambda k: -(theirs.get(k) or ours.get(k))[total]):
        u, t = ours.get(k), theirs.get(k)
        if u is None or t is None:
            rep.add(f"{label(k)} total_us", u and u[total], t and t[total], "DIFF",
                    "missing in " + ("stepscope" if u is None else "XProf"), scale=US)
            continue
        yield k, u, t


# ---------------------------------------------------------------- op totals


def program_names(op_profile: dict | None) -> dict[str, str]:
    """program id -> module name, from op_profile's by-program tree (`jit_f(123)`)."""
    out = {}
    for c in ((op_profile or {}).get("byProgram") or {}).get("children", []):
        name = c.get("name", "")
        if name.endswith(")") and "(" in name:
            mod, pid = name[:-1].rsplit("(", 1)
            out[pid] = mod
    return out


def op_profile_times(op_profile: dict | None) -> tuple[float, float]:
    """(op time without IDLE, IDLE) from op_profile's by-program root, ps."""
    root = (op_profile or {}).get("byProgram") or {}
    total = float((root.get("metrics") or {}).get("rawTime") or 0)
    idle = sum(float((c.get("metrics") or {}).get("rawTime") or 0) for c in root.get("children", [])
               if c.get("name") == "IDLE")
    return total - idle, idle


def ref_dot_flops(path: Path) -> dict:
    """{module: {instruction: one execution's dot FLOPs}} from the reference reader,
    which decodes the HloProto itself (tests/support/xspace_ref.py dot-flops)."""
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "xspace_ref.py"), "dot-flops", str(path)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# Differences in one op's bytes, traced to their cause by hand (docs/fidelity.md).
KNOWN_BYTES = {
    ("gpu-nocb", "jit_train_step/input_add_reduce_fusion"):
        "the embedding rows its gather reads feed both of the fusion's outputs: XProf counts the gathered "
        "part of the table once per use (2 x 8.4 MB, the whole table), stepscope once (8.4 MB)",
    ("gpu-compile", "jit_train_step/loop_select_fusion"):
        "f32[8,32] -> log -> broadcast to [8,32,256] -> gather of one element per row: XProf scales the "
        "broadcast operand by the share of the broadcast used (1/256: 4 bytes); each of the 256 rows "
        "needs its own element, so stepscope counts the operand whole (1,024 bytes)",
}


def compare_ops(rep: Report, ss_ops: dict, xp: dict, device: str, dots: dict | None = None) -> None:
    rows = table_rows(xp["tools"].get("hlo_stats"))
    if not rows:
        rep.add("ops (rows)", len(ss_ops["ops"]), 0, "n/c",
                "XProf has no HLO op stats for XLA:CPU (no device plane); "
                "tests compare stepscope with tests/support/xspace_ref.py instead")
        return
    names = program_names(xp["tools"].get("op_profile"))
    # Key: (module, op). TPU XLA Ops events carry no hlo_module, so stepscope's module
    # is empty there: key by op only. Programs that share a module name (one jit
    # function compiled for several shapes) are one stepscope row: sum XProf's too.
    by_module = device == "gpu"
    theirs: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        key = (names.get(str(r["program_id"]), str(r["program_id"])) if by_module else "", r["hlo_op_name"])
        t = theirs[key]
        t["count"] += r["occurrences"]
        t["total_ps"] += r["total_time"] * US
        t["self_ps"] += r["total_self_time"] * US
        # FLOPs and bytes from XProf's rates over the self time: model_flop_rate is in
        # GFLOP/s, measured_memory_bw in GiB/s (their bytes match the HLO's to the
        # byte only read so).
        t["flops"] += (r.get("model_flop_rate") or 0) * 1e9 * r["total_self_time"] / US
        t["bytes"] += (r.get("measured_memory_bw") or 0) * 2**30 * r["total_self_time"] / US
        t["programs"] += 1
    ours: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    unowned = 0
    unowned_ps = 0
    for o in ss_ops["ops"]:
        key = (o["module"] if by_module else "", o["name"])
        if device == "gpu" and key not in theirs and o["module"] == "":
            # Kernels without an hlo_op stat: stepscope names the op after the kernel.
            unowned += o["count"]
            unowned_ps += o["self_ps"]
            rep.add(f"op {o['name']} total_us", o["total_ps"], None, "known",
                    "kernel launches without an hlo_op stat: stepscope lists them under the kernel's "
                    "name, XProf's op stats leave them out (its kernel stats count them)", scale=US)
            continue
        u = ours[key]
        u["count"] += o["count"]
        u["executions"] += o.get("executions", o["count"])
        u["total_ps"] += o["total_ps"]
        u["self_ps"] += o["self_ps"]
        u["async"] = u["async"] or (o["category"].endswith("-start") or o["category"].endswith("-done"))
        if o.get("flops"):
            u["flops"] += o["flops"]
            u["has_flops"] = 1
        if o.get("bytes_accessed"):
            u["bytes"] += o["bytes_accessed"]
        u["matrix"] = u["matrix"] or bool(o.get("multiplies_matrices"))
    # Kernels with no hlo_op (XLA autotuning's DelayKernel; a garbled annotation in
    # gpu-nocb): XProf files them as `XlaModule/<kernel>`, under some module; stepscope
    # lists them under the kernel's name and its hlo_module.
    for key in [k for k in theirs if k[1].startswith("XlaModule/")]:
        kernel = key[1][len("XlaModule/"):]
        mine = [k for k in ours if k[1] == kernel]
        if mine:
            t = theirs.pop(key)
            u = {f: sum(ours[k][f] for k in mine) for f in ("count", "total_ps")}
            for k in mine:
                ours.pop(k)
            where = mine[0][0] if len(mine) == 1 else f"the {len(mine)} modules it names (autotuning)"
            rep.add(f"op {kernel[:60]} (no hlo_op) count", u["count"], t["count"])
            rep.add(f"op {kernel[:60]} (no hlo_op) total_us", u["total_ps"], t["total_ps"],
                    note=f"XProf files it under {key[0]}, stepscope under {where}", scale=US)
    # XProf's op stats leave out kernels run in XLA command buffers (CUDA graphs):
    # their hlo_op names the buffer, no instruction. stepscope credits them to their
    # instructions (checked against tests/fixtures/gpu-nocb, command buffers off).
    x_kernels_ps = sum(r["total_duration_us"] * US for r in table_rows(xp["tools"].get("kernel_stats")))
    x_ops_ps = sum(t["total_ps"] for t in theirs.values())
    if device == "gpu" and x_kernels_ps > 1.01 * x_ops_ps:
        for key in [k for k in ours if k not in theirs]:
            u = ours.pop(key)
            label = f"{key[0]}/{key[1]}" if key[0] else key[1]
            rep.add(f"op {label} total_us", u["total_ps"], None, "known",
                    "XProf's op stats leave out kernels run in command buffers", scale=US)
            unowned_ps += u["self_ps"]
    for key, u, t in matched(rep, ours, theirs, "total_ps", lambda k: "op " + (f"{k[0]}/{k[1]}" if k[0] else k[1])):
        label = f"{key[0]}/{key[1]}" if key[0] else key[1]
        merged = f"{int(t['programs'])} XProf programs summed" if t["programs"] > 1 else ""
        rep.add(f"op {label} count", u["count"], t["count"], note=merged)
        rep.add(f"op {label} total_us", u["total_ps"], t["total_ps"], scale=US)
        rep.add(f"op {label} self_us", u["self_ps"], t["self_ps"], scale=US)
        if not u.get("async") and u["executions"] > 0 and t["count"] > 0:
            dot = (dots or {}).get(key[0], {}).get(key[1])
            compare_costs(rep, label, u, t, dot, KNOWN_BYTES.get((rep.name, label)))
    x_busy, x_idle = op_profile_times(xp["tools"].get("op_profile"))
    if x_busy > 0:
        if unowned_ps:
            rep.add("op time_us (all ops)", ss_ops["op_time_ps"], x_busy, "known",
                    f"includes {unowned} kernel launches without hlo_op and the ops XProf leaves out "
                    "(see above)", scale=US)
            rep.add("op time_us (ops XProf lists)", ss_ops["op_time_ps"] - unowned_ps, x_busy, scale=US)
        else:
            rep.add("op time_us (all ops)", ss_ops["op_time_ps"], x_busy, scale=US)
        rep.add("device idle_us (XProf op_profile IDLE)", None, x_idle, "n/c",
                "stepscope measures idle per step only (`steps`), not over the whole capture", scale=US)


def compare_costs(rep: Report, label: str, u: dict, t: dict, dot: int | None, known_bytes: str | None) -> None:
    """One execution's FLOPs and bytes: stepscope's from its cost model over the HLO,
    XProf's from its rates. XProf counts an op's cost once per kernel: where an op runs
    several kernels an execution (a split-K GEMM), its totals are that many times the
    op's, so both sides are compared per execution (XProf: per kernel). `dot`: the
    reference reader's FLOPs of the op's dots, one execution."""
    per_kernel = u["count"] != u["executions"]
    if per_kernel and t["flops"] > 0 and u.get("has_flops"):
        rep.add(f"op {label} FLOPs (all executions)", u["flops"], t["flops"], "known",
                f"{u['count'] / u['executions']:g} kernels an execution: XProf counts the op's FLOPs "
                "once per kernel, stepscope once per execution")
    if u.get("has_flops") and t["flops"] > 0:
        ours, theirs = u["flops"] / u["executions"], t["flops"] / t["count"]
        d = pct(ours, theirs)
        weights = ("XProf's GPU FLOPs weight each elementwise operation by XLA's measured cost per element on "
                   "the GPU (f32 multiply 3, a transcendental tens); stepscope counts 1 FLOP per arithmetic "
                   "operation and transcendentals apart")
        if d is not None and abs(d) > TOLERANCE_PCT and not u.get("matrix"):
            rep.add(f"op {label} FLOPs per execution", ours, theirs, "known", "an elementwise/reduce op: " + weights)
        elif d is not None and abs(d) > TOLERANCE_PCT and dot and ours > dot and theirs > dot:
            rep.add(f"op {label} FLOPs per execution", ours, theirs, "known",
                    f"its dots' {dot:,} FLOPs agree (reference reader); the rest are the fusion's elementwise "
                    f"ops, {ours - dot:,.0f} FLOPs here, {theirs - dot:,.0f} in XProf: " + weights)
        else:
            rep.add(f"op {label} FLOPs per execution", ours, theirs)
    if u["bytes"] > 0 and t["bytes"] > 0:
        ours, theirs = u["bytes"] / u["executions"], t["bytes"] / t["count"]
        d = pct(ours, theirs)
        if known_bytes and d is not None and abs(d) > TOLERANCE_PCT:
            rep.add(f"op {label} bytes per execution", ours, theirs, "known", known_bytes)
        else:
            rep.add(f"op {label} bytes per execution", ours, theirs)


# ---------------------------------------------------------------- kernels


def dims(s) -> tuple:
    return tuple(int(x) for x in str(s).split(",")) if s else (0, 0, 0)


def compare_kernels(rep: Report, ss_kernels: dict, xp: dict) -> None:
    rows = table_rows(xp["tools"].get("kernel_stats"))
    if not rows and not ss_kernels["kernels"]:
        rep.add("kernel rows", 0, 0, "ok", "no GPU kernels in this profile (both tools)")
        return
    # Key: kernel name, grid, block. XProf also keys by its framework op name and
    # stepscope by hlo_op/hlo_module; both split the same launches differently, so
    # both sides are summed to the common key.
    theirs: dict[tuple, dict] = {}
    for r in rows:
        k = (r["kernel_name"], dims(r["grid_dim"]), dims(r["block_dim"]))
        t = theirs.setdefault(k, {"count": 0, "total": 0.0, "min": None, "max": None, "regs": set(), "shmem": set(),
                                  "tc": set(), "rows": 0})
        t["count"] += r["occurrences"]
        t["total"] += r["total_duration_us"] * US
        t["min"] = min(x for x in (t["min"], r["min_duration_us"] * US) if x is not None)
        t["max"] = max(x for x in (t["max"], r["max_duration_us"] * US) if x is not None)
        t["regs"].add(int(r["registers_per_thread"]))
        t["shmem"].add(int(r["shmem_bytes"]))
        t["tc"].add(bool(r["is_kernel_using_tensor_core"]))
        t["rows"] += 1
    ours: dict[tuple, dict] = {}
    for r in ss_kernels["kernels"]:
        k = (r["name"], tuple(r["grid"]), tuple(r["block"]))
        u = ours.setdefault(k, {"count": 0, "total": 0, "min": None, "max": None, "regs": set(), "shmem": set(),
                                "tc": set(), "rows": 0})
        u["count"] += r["count"]
        u["total"] += r["total_ps"]
        u["min"] = min(x for x in (u["min"], r["min_ps"]) if x is not None)
        u["max"] = max(x for x in (u["max"], r["max_ps"]) if x is not None)
        u["regs"].add(r["registers_per_thread"])
        u["shmem"].add(r["shared_mem_bytes"])
        u["tc"].add(r["tensor_core"])
        u["rows"] += 1
    rep.add("kernel launches", sum(u["count"] for u in ours.values()), sum(t["count"] for t in theirs.values()))
    rep.add("kernel time_us", ss_kernels["kernel_time_ps"], sum(t["total"] for t in theirs.values()), scale=US)
    def kernel_label(k):
        return f"{short(k[0])} grid {','.join(map(str, k[1]))}"

    for k, u, t in matched(rep, ours, theirs, "total", lambda k: "kernel " + kernel_label(k)):
        label = kernel_label(k)
        split = f"stepscope {u['rows']} rows (by hlo_op) summed" if u["rows"] > 1 else ""
        rep.add(f"kernel {label} count", u["count"], t["count"], note=split)
        rep.add(f"kernel {label} total_us", u["total"], t["total"], scale=US)
        rep.add(f"kernel {label} avg_us", u["total"] / u["count"], t["total"] / t["count"], scale=US)
        rep.add(f"kernel {label} min_us", u["min"], t["min"], scale=US)
        rep.add(f"kernel {label} max_us", u["max"], t["max"], scale=US)
        ur = {0 if x is None else x for x in u["regs"]}
        rep.add(f"kernel {label} registers", one(ur), one(t["regs"]),
                "ok" if ur == t["regs"] else "DIFF",
                "not recorded by ROCm (stepscope: none, XProf: 0)" if u["regs"] == {None} else "")
        us = {0 if x is None else x for x in u["shmem"]}
        rep.add(f"kernel {label} shared mem bytes", one(us), one(t["shmem"]),
                "ok" if us == t["shmem"] else "known" if t["shmem"] == {0} else "DIFF",
                "" if us == t["shmem"] else "XProf does not read ROCm `group_mem` (LDS bytes) and shows 0")
        if u["tc"] != t["tc"]:
            rep.add(f"kernel {label} tensor core", one(u["tc"]), one(t["tc"]), "known",
                    "a Triton `gemm_fusion` name tells no dtype: XProf reads no, stepscope reads the op's HLO "
                    "(f32 dots run as TF32 at XLA's default precision, as the capture's cuBLAS `tf32` kernels show)")


def one(s: set):
    return next(iter(s)) if len(s) == 1 else "/".join(map(str, sorted(s, key=str)))


def short(name: str, n: int = 34) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stepscope", type=Path, default=ROOT / "target" / "release" / "stepscope")
    ap.add_argument("--fixture", action="append", help="only this fixture (repeatable)")
    ap.add_argument("--json-out", type=Path, help="also write every row, with raw values, as JSON here")
    args = ap.parse_args(argv)
    try:
        import google.protobuf  # noqa: F401  (the reference reader, run with this Python, needs it)
    except ImportError:
        print("compare.py: the reference reader needs protobuf — run it with the test venv "
              "(.venv/bin/python bench/fidelity/compare.py, made by scripts/test.sh), "
              "or pip install protobuf", file=sys.stderr)
        return 2
    if not VENV_PY.exists():
        print(f"compare.py: no XProf venv at {VENV_PY} — run `bash bench/fidelity/setup.sh` first", file=sys.stderr)
        return 2
    if not args.stepscope.exists():
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "stepscope"], cwd=ROOT, check=True)
    version = subprocess.run([str(args.stepscope), "--version"], capture_output=True, text=True).stdout.strip()
    fx = fixtures()
    names = args.fixture or list(fx)
    reports = []
    xprof_version = "?"
    for name in names:
        path = fx[name]
        xp = run_xprof(path)
        xprof_version = xp.get("xprof_version", xprof_version)
        ss = {c: run_stepscope(args.stepscope, c, path) for c in ("steps", "summary", "ops", "kernels")}
        device = {d["kind"] for d in ss["summary"]["environment"]["devices"]}
        kind = "tpu" if "tpu" in device else "gpu" if "gpu" in device else "cpu"
        rep = Report(name, path)
        compare_steps(rep, ss["steps"], ss["summary"], xp)
        compare_ops(rep, ss["ops"], xp, kind, ref_dot_flops(path) if kind == "gpu" else None)
        compare_kernels(rep, ss["kernels"], xp)
        if xp.get("errors"):
            rep.notes.append("XProf errors: " + json.dumps(xp["errors"]))
        reports.append(rep)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"# stepscope vs XProf — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    print(f"{version} (commit {commit}), XProf {xprof_version} (PyPI `xprof`), "
          f"Python {platform.python_version()}; tolerance {TOLERANCE_PCT}%.\n")
    total_fail = 0
    for rep in reports:
        print(rep.markdown())
        total_fail += rep.failures()
    counts = defaultdict(int)
    for rep in reports:
        for r in rep.rows:
            counts[r[4]] += 1
    print(f"fidelity: {counts['ok']} ok, {counts['DIFF']} DIFF, {counts['known']} known, {counts['n/c']} n/c "
          f"over {len(reports)} fixtures")
    if args.json_out:
        doc = {"schema": "stepscope.fidelity/1", "stepscope": version, "commit": commit, "xprof": xprof_version,
               "tolerance_pct": TOLERANCE_PCT,
               "fixtures": [{"name": r.name, "path": str(r.path.relative_to(ROOT)), "rows": r.raw} for r in reports]}
        args.json_out.write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
