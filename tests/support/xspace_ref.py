#!/usr/bin/env python3
"""Independent reference reader for XSpace (`*.xplane.pb`) and Chrome trace JSON.

Used by stepscope's tests to cross-check the Rust reader. The protobuf message
classes are built at run time from the field numbers in shared/formats.md
(descriptor_pb2 -> descriptor_pool -> message_factory); no generated _pb2 code.

Commands:
    xspace_ref.py info PATH            PATH = *.xplane.pb | *.json | *.json.gz
        {"schema":"stepscope.info/1","events_total":N,
         "hosts":[{"host":H,"planes":[{"name":P,"events":N,
                   "lines":[{"name":L,"events":N}]}]}]}
    xspace_ref.py dump PATH.xplane.pb --plane NAME --line NAME [--limit K]
        first K events of that line, one JSON object a line:
        {"name":..,"start_ps":..,"duration_ps":..,"stats":{name: value}}
    xspace_ref.py steps PATH.xplane.pb
        JSON list of {"step_num","start_ps","duration_ps"} for host events with
        stats `step_num` and `_r` (StepTraceAnnotation roots), sorted by start.
    xspace_ref.py cpu-ops PATH.xplane.pb
        XLA:CPU: {"ops":[{"module","name","count","total_ps","event_ps"}],
        "programs":[{"module","program_id","count","total_ps"}],"busy_ps",
        "event_busy_ps"}: each op's time until it completed (an op XLA:CPU's intra-op
        pool finished after its event ended completes at its `end: <op>` event, linked
        by the flow id `_p` -> `_c`) and as its events show; the union of those spans
        (and within the annotated steps, with or without the pool's work, and the
        steps' total length).
    xspace_ref.py step-work PATH.xplane.pb
        XLA:CPU, per annotated step: {"step_num","work_start_ps","work_duration_ps",
        "busy_ps"} of the program runs its `PjitFunction` dispatches started (linked
        in run-id order, the capture holding every run its dispatches started).
        TPU: of the runs its calls enqueued, followed back along the host's flows
        (`_p` -> `_c`, each hop from the innermost holder that ends a flow), busy
        as the mean over the chips of each one's union. GPU: by correlation_id.
    xspace_ref.py host-events PATH.xplane.pb --names A,B --prefixes P,Q
        JSON list of {"name","line","start_ps","duration_ps"}: /host:CPU events
        named A or B or starting with P or Q, by start.
    xspace_ref.py dot-flops PATH.xplane.pb
        {module: {instruction: FLOPs of one execution}} for every dot (2 x output
        elements x lhs contracting sizes) and fusion holding dots (their sum).
    xspace_ref.py sources PATH.xplane.pb
        per HLO module ({metadata name: {"module", "instructions": {name:
        {"opcode", "stack": [[file, function, line], ...] outermost first,
         "fused": [[opcode, stack], ...]}}}}), from the HloProto's stack frame
        index (OpMetadata.stack_frame_id) or its source_file/source_line.
    xspace_ref.py reverse PATH.xplane.pb OUT      a copy, every line's events reversed
    xspace_ref.py shift-clock PATH.xplane.pb OUT NS
        a copy as a host whose clock read NS ns later would have written it: the
        session's profile_start_time (ns, the host's clock) plus NS; the lines'
        timestamps count from the session start (the profiler normalizes them), so
        they stay.
    xspace_ref.py annotate-calls PATH.xplane.pb OUT --call C --step S --scope P
        a copy in which each outermost host event C is held by a step annotation S
        (step_num k, _r 1) and a scope P, as a loop annotating each call records.
    xspace_ref.py drop-plane PATH.xplane.pb OUT NAME   a copy without plane NAME

Chrome JSON `info`: planes = pids in first-appearance order, named by the
`process_name` M event (fallback: str(pid)); lines = tids of that pid in
first-appearance order, named by `thread_name` (fallback: str(tid)); an event
without a tid makes no line. Counted: ph in {X, i, I, B}. Host = file name minus
`.trace.json.gz` / `.trace.json` / `.json.gz` / `.json`.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import sys

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:  # one line, with the fix, instead of a traceback
    sys.exit("xspace_ref.py needs protobuf: run it with the test venv (.venv/bin/python, made by "
             "scripts/test.sh), or pip install -r tests/support/requirements.txt")

_F = descriptor_pb2.FieldDescriptorProto
_T = {
    "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "uint32": _F.TYPE_UINT32,
    "double": _F.TYPE_DOUBLE, "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL, "message": _F.TYPE_MESSAGE,
}

# (message name, [(number, field name, type, repeated, message type, oneof index)],
#  [oneof names], map entry?)
_XPLANE_MESSAGES = [
    ("XSpace", [
        (1, "planes", "message", True, "XPlane", None),
        (2, "errors", "string", True, None, None),
        (3, "warnings", "string", True, None, None),
        (4, "hostnames", "string", True, None, None),
    ], [], False),
    ("XPlane", [
        (1, "id", "int64", False, None, None),
        (2, "name", "string", False, None, None),
        (3, "lines", "message", True, "XLine", None),
        (4, "event_metadata", "message", True, "XPlane.EventMetadataEntry", None),
        (5, "stat_metadata", "message", True, "XPlane.StatMetadataEntry", None),
        (6, "stats", "message", True, "XStat", None),
    ], [], False),
    ("XPlane.EventMetadataEntry", [
        (1, "key", "int64", False, None, None),
        (2, "value", "message", False, "XEventMetadata", None),
    ], [], True),
    ("XPlane.StatMetadataEntry", [
        (1, "key", "int64", False, None, None),
        (2, "value", "message", False, "XStatMetadata", None),
    ], [], True),
    ("XLine", [
        (1, "id", "int64", False, None, None),
        (10, "display_id", "int64", False, None, None),
        (2, "name", "string", False, None, None),
        (11, "display_name", "string", False, None, None),
        (3, "timestamp_ns", "int64", False, None, None),
        (9, "duration_ps", "int64", False, None, None),
        (4, "events", "message", True, "XEvent", None),
    ], [], False),
    ("XEvent", [
        (1, "metadata_id", "int64", False, None, None),
        (2, "offset_ps", "int64", False, None, 0),
        (5, "num_occurrences", "int64", False, None, 0),
        (3, "duration_ps", "int64", False, None, None),
        (4, "stats", "message", True, "XStat", None),
    ], ["data"], False),
    ("XStat", [
        (1, "metadata_id", "int64", False, None, None),
        (2, "double_value", "double", False, None, 0),
        (3, "uint64_value", "uint64", False, None, 0),
        (4, "int64_value", "int64", False, None, 0),
        (5, "str_value", "string", False, None, 0),
        (6, "bytes_value", "bytes", False, None, 0),
        (7, "ref_value", "uint64", False, None, 0),
        (8, "gzip_str_value", "bytes", False, None, 0),
    ], ["value"], False),
    ("XEventMetadata", [
        (1, "id", "int64", False, None, None),
        (2, "name", "string", False, None, None),
        (4, "display_name", "string", False, None, None),
        (3, "metadata", "bytes", False, None, None),
        (5, "stats", "message", True, "XStat", None),
        (6, "child_id", "int64", True, None, None),
    ], [], False),
    ("XStatMetadata", [
        (1, "id", "int64", False, None, None),
        (2, "name", "string", False, None, None),
        (3, "description", "string", False, None, None),
    ], [], False),
    # pprof (gzipped `Profile`, as jax.profiler.save_device_memory_profile writes it)
    ("Profile", [
        (1, "sample_type", "message", True, "ValueType", None),
        (2, "sample", "message", True, "Sample", None),
        (6, "string_table", "string", True, None, None),
    ], [], False),
    ("ValueType", [
        (1, "type", "int64", False, None, None),
        (2, "unit", "int64", False, None, None),
    ], [], False),
    ("Sample", [
        (1, "location_id", "uint64", True, None, None),
        (2, "value", "int64", True, None, None),
        (3, "label", "message", True, "Label", None),
    ], [], False),
    ("Label", [
        (1, "key", "int64", False, None, None),
        (2, "str", "int64", False, None, None),
        (3, "num", "int64", False, None, None),
        (4, "num_unit", "int64", False, None, None),
    ], [], False),
    # xla.HloProto, only what `sources` reads (OpMetadata 15 and HloModuleProto 17
    # are the stack frame id and index of newer JAX).
    ("HloProto", [
        (1, "hlo_module", "message", False, "HloModuleProto", None),
        (3, "buffer_assignment", "message", False, "BufferAssignmentProto", None),
    ], [], False),
    # xla.BufferAssignmentProto, as the public hlo.proto numbers it.
    ("BufferAssignmentProto", [
        (1, "logical_buffers", "message", True, "LogicalBufferProto", None),
        (3, "buffer_allocations", "message", True, "BufferAllocationProto", None),
        (4, "heap_simulator_traces", "message", True, "HeapSimulatorTrace", None),
    ], [], False),
    ("LogicalBufferProto", [
        (1, "id", "int64", False, None, None),
        (2, "size", "int64", False, None, None),
        (3, "defined_at", "message", False, "BufferLocation", None),
        (4, "color", "int64", False, None, None),
    ], [], False),
    ("BufferLocation", [
        (2, "instruction_name", "string", False, None, None),
        (4, "instruction_id", "int64", False, None, None),
        (3, "shape_index", "int64", True, None, None),
    ], [], False),
    ("BufferAllocationProto", [
        (1, "index", "int64", False, None, None),
        (2, "size", "int64", False, None, None),
        (3, "is_thread_local", "bool", False, None, None),
        (11, "is_tuple", "bool", False, None, None),
        (5, "is_entry_computation_parameter", "bool", False, None, None),
        (12, "is_constant", "bool", False, None, None),
        (6, "parameter_number", "int64", False, None, None),
        (7, "maybe_live_out", "bool", False, None, None),
        (8, "color", "int64", False, None, None),
        (9, "assigned", "message", True, "BufferAssigned", None),
    ], [], False),
    ("BufferAssigned", [
        (1, "logical_buffer_id", "int64", False, None, None),
        (2, "offset", "int64", False, None, None),
        (3, "size", "int64", False, None, None),
    ], [], False),
    ("HeapSimulatorTrace", [
        (1, "events", "message", True, "HeapEvent", None),
        (2, "whole_module_simulation", "bool", False, None, None),
        (3, "buffer_allocation_index", "int64", False, None, None),
    ], [], False),
    ("HeapEvent", [
        (1, "kind", "int64", False, None, None),
        (2, "buffer_id", "int64", False, None, None),
        (3, "computation_name", "string", False, None, None),
        (4, "instruction_name", "string", False, None, None),
        (5, "share_with_canonical_id", "int64", False, None, None),
    ], [], False),
    ("HloModuleProto", [
        (1, "name", "string", False, None, None),
        (3, "computations", "message", True, "HloComputationProto", None),
        (17, "stack_frame_index", "message", False, "StackFrameIndexProto", None),
    ], [], False),
    ("HloComputationProto", [
        (1, "name", "string", False, None, None),
        (2, "instructions", "message", True, "HloInstructionProto", None),
        (5, "id", "int64", False, None, None),
    ], [], False),
    ("HloInstructionProto", [
        (1, "name", "string", False, None, None),
        (2, "opcode", "string", False, None, None),
        (3, "shape", "message", False, "ShapeProto", None),
        (7, "metadata", "message", False, "OpMetadata", None),
        (28, "custom_call_target", "string", False, None, None),
        (30, "dot_dimension_numbers", "message", False, "DotDimensionNumbers", None),
        (35, "id", "int64", False, None, None),
        (36, "operand_ids", "int64", True, None, None),
        (38, "called_computation_ids", "int64", True, None, None),
        (43, "backend_config", "string", False, None, None),
    ], [], False),
    ("ShapeProto", [
        (2, "element_type", "int64", False, None, None),
        (3, "dimensions", "int64", True, None, None),
        (4, "tuple_shapes", "message", True, "ShapeProto", None),
    ], [], False),
    ("DotDimensionNumbers", [
        (1, "lhs_contracting_dimensions", "int64", True, None, None),
        (2, "rhs_contracting_dimensions", "int64", True, None, None),
        (3, "lhs_batch_dimensions", "int64", True, None, None),
        (4, "rhs_batch_dimensions", "int64", True, None, None),
    ], [], False),
    ("OpMetadata", [
        (2, "op_name", "string", False, None, None),
        (3, "source_file", "string", False, None, None),
        (4, "source_line", "int64", False, None, None),
        (15, "stack_frame_id", "int64", False, None, None),
    ], [], False),
    ("StackFrameIndexProto", [
        (1, "file_names", "string", True, None, None),
        (2, "function_names", "string", True, None, None),
        (3, "file_locations", "message", True, "FileLocation", None),
        (4, "stack_frames", "message", True, "StackFrame", None),
    ], [], False),
    ("FileLocation", [
        (1, "file_name_id", "int64", False, None, None),
        (2, "function_name_id", "int64", False, None, None),
        (3, "line", "int64", False, None, None),
    ], [], False),
    ("StackFrame", [
        (1, "file_location_id", "int64", False, None, None),
        (2, "parent_frame_id", "int64", False, None, None),
    ], [], False),
]

_PACKAGE = "stepscope_ref.tensorflow.profiler"
_classes = None


def _build_classes():
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "stepscope_ref/xplane.proto"
    fdp.package = _PACKAGE
    fdp.syntax = "proto3"
    by_name = {}
    for full, fields, oneofs, is_map in _XPLANE_MESSAGES:
        parts = full.split(".")
        if len(parts) == 1:
            msg = fdp.message_type.add()
        else:
            msg = by_name[parts[0]].nested_type.add()
        msg.name = parts[-1]
        by_name[full] = msg
        if is_map:
            msg.options.map_entry = True
        for o in oneofs:
            msg.oneof_decl.add().name = o
        for num, fname, ftype, rep, mtype, oneof in fields:
            f = msg.field.add()
            f.number = num
            f.name = fname
            f.type = _T[ftype]
            f.label = _F.LABEL_REPEATED if rep else _F.LABEL_OPTIONAL
            if mtype:
                f.type_name = f".{_PACKAGE}.{mtype}"
            if oneof is not None:
                f.oneof_index = oneof
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name, *_ in _XPLANE_MESSAGES if "." not in name
    }


def classes():
    """Dict of message name -> class (XSpace, XPlane, XLine, XEvent, XStat, ...)."""
    global _classes
    if _classes is None:
        _classes = _build_classes()
    return _classes


def read_xspace(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    space = classes()["XSpace"]()
    space.ParseFromString(data)
    return space


def host_of(path):
    base = os.path.basename(path)
    for suffix in (".xplane.pb", ".trace.json.gz", ".trace.json", ".json.gz", ".json"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def is_json_path(path):
    return path.endswith(".json") or path.endswith(".json.gz")


# ------------------------------------------------------------------ info

def info_xspace(path):
    space = read_xspace(path)
    planes = []
    total = 0
    for plane in space.planes:
        lines = [{"name": line.name, "events": len(line.events)} for line in plane.lines]
        n = sum(l["events"] for l in lines)
        total += n
        planes.append({"name": plane.name, "events": n, "lines": lines})
    return {"schema": "stepscope.info/1", "events_total": total,
            "hosts": [{"host": host_of(path), "planes": planes}]}


def load_trace_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        doc = json.load(f)
    if isinstance(doc, list):  # the JSON Array Format is also legal Chrome trace
        return doc
    return doc.get("traceEvents", [])


COUNTED_PH = {"X", "i", "I", "B"}


def info_trace_json(path):
    events = load_trace_json(path)
    pids = {}  # pid -> {"name": str|None, "tids": {tid: {"name", "events"}}, "events"}
    for e in events:
        if not isinstance(e, dict) or "pid" not in e:
            continue
        pid = e["pid"]
        p = pids.get(pid)
        if p is None:
            p = pids[pid] = {"name": None, "tids": {}}
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            p["name"] = str((e.get("args") or {}).get("name", ""))
            continue
        if "tid" not in e:
            continue
        tid = e["tid"]
        t = p["tids"].get(tid)
        if t is None:
            t = p["tids"][tid] = {"name": None, "events": 0}
        if ph == "M":
            if e.get("name") == "thread_name":
                t["name"] = str((e.get("args") or {}).get("name", ""))
        elif ph in COUNTED_PH:
            t["events"] += 1
    planes = []
    total = 0
    for pid, p in pids.items():
        lines = [{"name": t["name"] if t["name"] is not None else str(tid), "events": t["events"]}
                 for tid, t in p["tids"].items()]
        n = sum(l["events"] for l in lines)
        total += n
        planes.append({"name": p["name"] if p["name"] is not None else str(pid),
                       "events": n, "lines": lines})
    return {"schema": "stepscope.info/1", "events_total": total,
            "hosts": [{"host": host_of(path), "planes": planes}]}


def info(path):
    return info_trace_json(path) if is_json_path(path) else info_xspace(path)


# ------------------------------------------------------------------ stats / events

def stat_value(stat, stat_md):
    which = stat.WhichOneof("value")
    if which is None:
        return None
    v = getattr(stat, which)
    if which == "ref_value":
        md = stat_md.get(v)
        return md.name if md is not None else None
    if which == "gzip_str_value":
        return gzip.decompress(v).decode("utf-8", "replace")
    if which == "bytes_value":
        return {"bytes": len(v), "b64_head": base64.b64encode(v[:48]).decode()}
    return v


def event_stats(plane, event, stat_md=None, ev_md=None):
    """Stats of an event: those on its XEventMetadata first, then the event's own
    (event stats win on a name clash)."""
    if stat_md is None:
        stat_md = plane.stat_metadata
    if ev_md is None:
        ev_md = plane.event_metadata
    out = {}
    md = ev_md.get(event.metadata_id)
    sources = ([md.stats] if md is not None else []) + [event.stats]
    for stats in sources:
        for s in stats:
            smd = stat_md.get(s.metadata_id)
            name = smd.name if smd is not None else f"#{s.metadata_id}"
            out[name] = stat_value(s, stat_md)
    return out


def event_name(plane, event):
    md = plane.event_metadata.get(event.metadata_id)
    return md.name if md is not None else f"#{event.metadata_id}"


def event_start_ps(line, event):
    return line.timestamp_ns * 1000 + event.offset_ps


def dump(path, plane_name, line_name, limit):
    space = read_xspace(path)
    out = []
    for plane in space.planes:
        if plane.name != plane_name:
            continue
        for line in plane.lines:
            if line.name != line_name:
                continue
            for ev in line.events:
                if len(out) >= limit:
                    return out
                out.append({
                    "name": event_name(plane, ev),
                    "start_ps": event_start_ps(line, ev),
                    "duration_ps": ev.duration_ps,
                    "stats": event_stats(plane, ev),
                })
    return out


def steps(path):
    space = read_xspace(path)
    out = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        stat_ids = {k: v.name for k, v in plane.stat_metadata.items()}
        if "step_num" not in stat_ids.values() or "_r" not in stat_ids.values():
            continue
        for line in plane.lines:
            for ev in line.events:
                names = {stat_ids.get(s.metadata_id) for s in ev.stats}
                if "step_num" not in names or "_r" not in names:
                    continue
                st = event_stats(plane, ev)
                out.append({"step_num": st["step_num"], "start_ps": event_start_ps(line, ev),
                            "duration_ps": ev.duration_ps})
    out.sort(key=lambda s: (s["start_ps"], s["step_num"]))
    return out


def step_work(path, windows_named=None, rounds=False, module=None):
    """The device work each annotated step launched, per step in step order:
    {"step_num", "work_start_ps", "work_duration_ps", "busy_ps"} (busy: the union of
    the work's intervals), null fields where the step launched no work the capture
    holds. GPU captures (device events carrying `correlation_id`) link by that id
    (gpu_launches); XLA:CPU ones by dispatch order (cpu_dispatched_runs). GPU rows
    also say whether the step is "cut": the capture holds none of a launch of a kind
    that ran elsewhere, or its device's last launch ran fewer ops than its kind's
    most. With `windows_named`, the windows are the host events of that name (a
    module's runs, `jit_train_step:XLA GPU module`) instead, numbered from 0; with
    `rounds` too, window k spans each line's k-th such event (threads that run the
    module at once, one per GPU). With `module`, GPU work is only the device events
    of that `hlo_module`."""
    if windows_named and rounds:
        # Round k: each line's k-th event of the name, first start to last end.
        by_line = {}
        for e in host_events(path, [windows_named], []):
            by_line.setdefault(e["line"], []).append((e["start_ps"], e["start_ps"] + e["duration_ps"]))
        runs = [sorted(v) for v in by_line.values()]
        assert len({len(r) for r in runs}) == 1, "threads with different numbers of runs"
        annotated = []
        for k in range(len(runs[0])):
            lo, hi = min(r[k][0] for r in runs), max(r[k][1] for r in runs)
            annotated.append({"step_num": k, "start_ps": lo, "duration_ps": hi - lo})
    elif windows_named:
        annotated = [{"step_num": k, "start_ps": e["start_ps"], "duration_ps": e["duration_ps"]}
                     for k, e in enumerate(host_events(path, [windows_named], []))]
    else:
        annotated = steps(path)
    windows = [(st["start_ps"], st["start_ps"] + st["duration_ps"]) for st in annotated]
    gpu = gpu_launches(path, windows, module)
    tpu = tpu_enqueued_runs(path) if gpu is None else None
    cpu = cpu_dispatched_runs(path) if gpu is None and tpu is None else []
    out = []
    for st, (lo, hi) in zip(annotated, windows):
        row = {"step_num": st["step_num"], "work_start_ps": None, "work_duration_ps": None, "busy_ps": None}
        if tpu is not None:
            per_device = {}
            for (t, device, ivs) in tpu["runs"]:
                if lo <= t < hi:
                    per_device.setdefault(device, []).extend(ivs)
            spans = [iv for ivs in per_device.values() for iv in ivs]
            row["cut"] = any(lo <= t < hi for t in tpu["unran"])
            if spans:
                # Busy: the mean over the devices that ran work of each one's union.
                row["busy_ps"] = sum(union_ps(v) for v in per_device.values()) // tpu["devices"]
                first, last = min(a for a, _ in spans), max(b for _, b in spans)
                row.update(work_start_ps=first, work_duration_ps=last - first)
            out.append(row)
            continue
        if gpu is None:
            spans = [iv for (t, ivs) in cpu if lo <= t < hi for iv in ivs]
        else:
            mine = [launch for launch in gpu["launches"] if lo <= launch["start_ps"] < hi]
            spans = [iv for launch in mine for iv in launch["spans"]]
            row["cut"] = any(launch["cut"] for launch in mine)
        if spans:
            first, last = min(a for a, _ in spans), max(b for _, b in spans)
            row.update(work_start_ps=first, work_duration_ps=last - first, busy_ps=union_ps(spans))
        out.append(row)
    return out


def union_ps(spans):
    """The length of the union of (start, end) intervals."""
    busy, cur = 0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                busy += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return busy + (cur[1] - cur[0] if cur else 0)


def tpu_enqueued_runs(path):
    """TPU: {"runs": [(call start, device plane, [op intervals of the run])],
    "devices": N, "unran": [call start]} for each program run on an `XLA Modules` line that ends a flow
    (`_c`) some host event started (`_p`); None where no run does. A run is followed
    back to the call that enqueued it: from the host event that started its flow to
    the innermost event of that event's line holding its start (itself included) that
    ends a flow, to the event that started that flow, and on; the call is where the
    chain began (the last event reached), at its start. A run's ops are the `XLA Ops`
    of its device that start inside it. N: the devices with any op. "unran": the
    calls that enqueued a run the capture does not hold (a flow start named as one
    that enqueued a run it holds, whose flow no run ends), each once."""
    space = read_xspace(path)
    host = next((p for p in space.planes if p.name == "/host:CPU"), None)
    if host is None:
        return None
    starts = {}  # flow id -> (start, flow ended by the innermost holder or None)
    for line in host.lines:
        evs = []
        for ev in line.events:
            st = event_stats(host, ev)
            if "_p" in st or "_c" in st:
                start = event_start_ps(line, ev)
                evs.append((start, start + ev.duration_ps, st.get("_p"), st.get("_c"), event_name(host, ev)))
        evs.sort(key=lambda e: (e[0], -e[1]))
        names = [e[4] for e in evs]
        evs = [e[:4] for e in evs]
        for k, (a, b, p, c) in enumerate(evs):
            if p is None:
                continue
            holder = c
            if holder is None:
                holding = [e for e in evs[:k] if e[3] is not None and e[0] <= a < e[1]]
                if holding:
                    holder = max(holding, key=lambda e: (e[0], -e[1]))[3]
            starts[p % (1 << 64)] = (a, None if holder is None else holder % (1 << 64), names[k])

    def origin(flow):
        at = starts[flow]
        for _ in range(16):
            if at[1] is None or at[1] not in starts:
                break
            at = starts[at[1]]
        return at[0]

    runs, devices, ran = [], 0, set()
    for plane in space.planes:
        if not plane.name.startswith("/device:"):
            continue
        ops, modules = [], []
        for line in plane.lines:
            for ev in line.events:
                start = event_start_ps(line, ev)
                if line.name == "XLA Ops":
                    ops.append((start, start + ev.duration_ps))
                elif line.name == "XLA Modules":
                    c = event_stats(plane, ev).get("_c")
                    if c is not None:
                        modules.append((start, start + ev.duration_ps, c % (1 << 64)))
        devices += bool(ops)
        for (a, b, c) in modules:
            if c in starts:
                runs.append((origin(c), plane.name, [o for o in ops if a <= o[0] < b]))
                ran.add(c)
    # Calls that enqueued a run the capture does not hold: flow starts of a kind
    # (name) that enqueued some run it holds, whose flow no run ends.
    kinds = {starts[c][2] for c in ran}
    unran = sorted({origin(f) for f, st in starts.items() if st[2] in kinds and f not in ran})
    return {"runs": runs, "devices": devices, "unran": unran} if runs else None


def cpu_dispatched_runs(path):
    """XLA:CPU: [(dispatch start, [op intervals of the run it started])]. A dispatch is
    a `PjitFunction(f)` event not inside another one on its line; it ran program
    `jit_f`. The program's runs (ops sharing `hlo_module` and `run_id`) are taken in
    run-id order, and the capture is taken to hold every run its dispatches started,
    so the first (runs - dispatches) runs came before it and dispatch j started run
    (runs - dispatches + j)."""
    space = read_xspace(path)
    runs = {}  # (module, run_id) -> [intervals]
    for op in cpu_ops(space):
        if op["run_id"] is not None:
            runs.setdefault((op["module"], op["run_id"]), []).append((op["start_ps"], op["done_ps"]))
    calls = {}  # f -> [dispatch start]
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            outer = []  # dispatch spans of this line
            for ev in line.events:
                name = event_name(plane, ev)
                if name.startswith("PjitFunction(") and name.endswith(")"):
                    start = event_start_ps(line, ev)
                    outer.append((start, start + ev.duration_ps, name[len("PjitFunction("):-1]))
            for (start, end, f) in outer:
                inside = any(s <= start and end <= e and (s, e) != (start, end) for (s, e, _) in outer)
                if not inside:
                    calls.setdefault(f, []).append(start)
    linked = []
    for f, starts in calls.items():
        module = "jit_" + f
        ids = sorted(r for (m, r) in runs if m == module)
        before = max(0, len(ids) - len(starts))
        for j, start in enumerate(sorted(starts)):
            if before + j < len(ids):
                linked.append((start, runs[(module, ids[before + j])]))
    return linked


def cpu_ops(space):
    """XLA:CPU: every op (a /host:CPU event with `hlo_op`) as {"name", "module",
    "run_id", "line", "start_ps", "end_ps", "done_ps", "ended_ps"}: done_ps is when it
    completed, ended_ps where its `end:` event starts (or its event ends).

    An op handed to the intra-op pool (a dot) records its tasks there: a
    `ThreadpoolListener::Record` (flow `_p`) inside its event, run later as the region
    from the next `StartRegion` carrying that flow as `_c` (ids repeat in a long
    capture) to the next `StopRegion` on that thread; a task recorded inside such a
    region is the op's too. Where a region runs the executor on
    (`ThunkExecutor::Execute`, or an op), the op's work ended there: that is the thunk
    executor carrying on with the op's successors. The op completed at the end of the
    last of its regions, and never after the `end: <name>` event its `_p` leads to
    (`_c`), which XLA writes once that carrying-on is over. An op with no later `end:`
    completed inside its event (done_ps = end_ps)."""
    import bisect
    ops, ends = [], {}
    records = {}   # line -> [(time, task)]
    runs = {}      # task -> [(start, line, until)]
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            evs = sorted(((event_start_ps(line, ev), ev) for ev in line.events), key=lambda t: t[0])
            region = None  # [task flow, start, until]
            for start, ev in evs:
                st = event_stats(plane, ev)
                name = event_name(plane, ev)
                if "hlo_op" in st:
                    ops.append({"name": st["hlo_op"], "module": st.get("hlo_module", ""),
                                "program_id": st.get("program_id"),
                                "run_id": st.get("run_id"), "line": line.name, "start_ps": start,
                                "end_ps": start + max(ev.duration_ps, 0), "flow": st.get("_p")})
                elif name.startswith("end: ") and "_c" in st:
                    ends[st["_c"]] = start
                elif name == "ThreadpoolListener::Record" and "_p" in st:
                    records.setdefault(line.name, []).append((start, st["_p"]))
                elif name == "ThreadpoolListener::StartRegion":
                    region = [st.get("_c"), start, None]
                elif name == "ThreadpoolListener::StopRegion":
                    if region is not None and region[0] is not None:
                        until = region[2] if region[2] is not None else start
                        runs.setdefault(region[0], []).append((region[1], line.name, until))
                    region = None
                if region is not None and region[2] is None and (
                        "hlo_op" in st or name.startswith("ThunkExecutor::Execute")):
                    region[2] = start
    for r in runs.values():
        r.sort()
    for r in records.values():
        r.sort()

    def recorded_in(line, lo, hi):
        on = records.get(line, [])
        return on[bisect.bisect_left(on, (lo, -1)):bisect.bisect_right(on, (hi, float("inf")))]

    for op in ops:
        flow = op.pop("flow")
        end = ends.get(flow) if flow is not None else None
        op["ended_ps"] = max(op["end_ps"], end) if end is not None else op["end_ps"]
        op["done_ps"] = op["end_ps"]
        if end is None or end <= op["end_ps"]:
            continue
        # The op's tasks: those it recorded, where each ran (the first region carrying
        # its id that starts after the record, and before the op's `end:`), and so on.
        last = None
        todo = list(recorded_in(op["line"], op["start_ps"], op["end_ps"]))
        while todo:
            at, task = todo.pop()
            mine = runs.get(task, [])
            k = bisect.bisect_left(mine, (at + 1,))  # the first region starting after the record
            if k == len(mine) or mine[k][0] > end:
                continue
            start, line, until = mine[k]
            last = until if last is None else max(last, until)
            todo.extend(recorded_in(line, start, until))
        if last is not None:
            op["done_ps"] = max(op["end_ps"], min(last, end))
    return ops


CALLBACK_NAMES = ("io_callback", "pure_callback", "debug_callback", "debug_print")


def cpu_self_times(ops):
    """Sets each XLA:CPU op's "self_ps": its time until it completed less that of the
    ops whose events lie directly inside its own event on its line (the ops its thread
    ran while the pool worked on it are not inside it), never below 0."""
    by_line = {}
    for op in ops:
        by_line.setdefault(op["line"], []).append(op)
    for line_ops in by_line.values():
        line_ops.sort(key=lambda o: (o["start_ps"], o["start_ps"] - o["end_ps"]))
        open_ops = []
        for op in line_ops:
            while open_ops and not (op["start_ps"] < open_ops[-1]["end_ps"] and op["end_ps"] <= open_ops[-1]["end_ps"]):
                open_ops.pop()
            op["self_ps"] = op["done_ps"] - op["start_ps"]
            if open_ops:
                open_ops[-1]["self_ps"] -= op["done_ps"] - op["start_ps"]
            open_ops.append(op)
    for op in ops:
        op["self_ps"] = max(op["self_ps"], 0)


def gpu_launches(path, windows, module=None):
    """GPU: every host event carrying `correlation_id` that starts in one of `windows`
    ([(start, end)]; a launch: of a kernel, a command
    buffer, a copy; also what XLA records into a command buffer, which never runs as
    such) with the intervals of the device events carrying its id, as
    {"launches": [{"corr", "name", "start_ps", "spans", "cut"}], "not_run": N}; None
    where no device event carries an id. A launch is not run where the capture holds
    no device event of it but holds some of another launch of its name (those
    recordings never run); "cut" is set on those and on each device's last launch to
    end where it ran fewer events than another launch of its name."""
    space = read_xspace(path)
    host, dev, last_on = {}, {}, {}
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                st = event_stats(plane, ev)
                if "correlation_id" not in st:
                    continue
                c, start = st["correlation_id"], event_start_ps(line, ev)
                if plane.name == "/host:CPU":
                    if any(lo <= start < hi for lo, hi in windows):
                        host[c] = (event_name(plane, ev), start)
                elif plane.name.startswith("/device:GPU"):
                    if module is not None and st.get("hlo_module") != module:
                        continue
                    end = start + ev.duration_ps
                    dev.setdefault(c, []).append((start, end))
                    if plane.name not in last_on or end >= last_on[plane.name][0]:
                        last_on[plane.name] = (end, c)
    if not dev:
        return None
    most = {}
    for c, (name, _) in host.items():
        if c in dev:
            most[name] = max(most.get(name, 0), len(dev[c]))
    lasts = {c for (_, c) in last_on.values()}
    launches, not_run = [], 0
    for c, (name, start) in sorted(host.items()):
        spans = dev.get(c, [])
        missing = not spans and name in most
        not_run += missing
        cut = missing or (c in lasts and len(spans) < most.get(name, 0))
        launches.append({"corr": c, "name": name, "start_ps": start, "spans": spans, "cut": cut})
    return {"launches": launches, "not_run": not_run}


def memory(path):
    """Per allocator: allocation/deallocation counts, the highest bytes_allocated and
    when it was first reached, and the sizes of allocations live then (by addr)."""
    space = read_xspace(path)
    kind = "TPU" if any(p.name.startswith("/device:TPU") for p in space.planes) else (
        "GPU" if any(p.name.startswith("/device:GPU") for p in space.planes) else "device")
    events = []
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                name = event_name(plane, ev)
                if name not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                st = event_stats(plane, ev)
                alloc = st.get("allocator_name")
                if alloc is None:
                    alloc = f"{kind}:{st['index_on_host']}" if "index_on_host" in st else "unnamed"
                events.append((event_start_ps(line, ev), name == "MemoryAllocation", alloc, st))
    events.sort(key=lambda e: e[0])
    out = {}
    live = {}
    for t, is_alloc, alloc, st in events:
        a = out.setdefault(alloc, {"allocations": 0, "deallocations": 0, "peak_in_use_bytes": -1,
                                   "peak_time_ps": 0, "live_at_peak_bytes": []})
        lv = live.setdefault(alloc, {})
        if is_alloc:
            a["allocations"] += 1
            lv[st.get("addr", 0)] = st.get("allocation_bytes", 0)
        else:
            a["deallocations"] += 1
            lv.pop(st.get("addr", 0), None)
        in_use = st.get("bytes_allocated", 0)
        if in_use > a["peak_in_use_bytes"]:
            a["peak_in_use_bytes"] = in_use
            a["peak_time_ps"] = t
            a["live_at_peak_bytes"] = sorted(lv.values(), reverse=True)
    return out


def plane_stats(path, plane_name):
    space = read_xspace(path)
    for plane in space.planes:
        if plane.name == plane_name:
            out = {}
            for st in plane.stats:
                md = plane.stat_metadata.get(st.metadata_id)
                out[md.name if md is not None else f"#{st.metadata_id}"] = stat_value(st, plane.stat_metadata)
            return out
    return None


def pprof(path):
    """Total `space` bytes, `allocations` of buffers (samples not labelled
    kind=executable) and of executables, and space per `device` label."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    prof = classes()["Profile"]()
    prof.ParseFromString(data)
    strings = prof.string_table
    types = [strings[t.type] for t in prof.sample_type]
    space, count = types.index("space"), types.index("allocations")
    out = {"total_bytes": 0, "buffer_count": 0, "executable_count": 0, "by_device": {}}
    for smp in prof.sample:
        out["total_bytes"] += smp.value[space]
        kinds = [strings[lab.str] for lab in smp.label if strings[lab.key] == "kind"]
        out["executable_count" if "executable" in kinds else "buffer_count"] += smp.value[count]
        for lab in smp.label:
            if strings[lab.key] == "device":
                dev = strings[lab.str]
                out["by_device"][dev] = out["by_device"].get(dev, 0) + smp.value[space]
    return out


def host_events(path, names, prefixes):
    """Events of the /host:CPU plane named exactly one of `names` or starting with one
    of `prefixes`: {"name", "line", "start_ps", "duration_ps"}, by start."""
    space = read_xspace(path)
    out = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for ev in line.events:
                md = plane.event_metadata.get(ev.metadata_id)
                name = md.name if md is not None else ""
                if name in names or any(name.startswith(p) for p in prefixes if p):
                    out.append({"name": name, "line": line.id, "start_ps": event_start_ps(line, ev),
                                "duration_ps": ev.duration_ps})
    out.sort(key=lambda e: (e["start_ps"], -e["duration_ps"]))
    return out


def hlo_stats(space):
    """The `Hlo Proto` stats of /host:metadata (the bytes of an `HloProto` each), with
    the name of the metadata holding each (`jit_f(12)`)."""
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        for md in plane.event_metadata.values():
            for st in md.stats:
                smd = plane.stat_metadata.get(st.metadata_id)
                if smd is not None and smd.name == "Hlo Proto":
                    yield md.name, st


def hlo_protos(path):
    """Every `HloModuleProto` the capture holds (the `Hlo Proto` stats of /host:metadata),
    with the name of the metadata holding it (`jit_f(12)`)."""
    for name, st in hlo_stats(read_xspace(path)):
        proto = classes()["HloProto"]()
        proto.ParseFromString(st.bytes_value)
        yield name, proto.hlo_module


def _wire_fields(buf):
    """The fields of a protobuf message: (number, wire type, value), a value being an
    int (varint) or the bytes of a length-delimited or fixed field."""
    def varint(i):
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v, i
    i, out = 0, []
    while i < len(buf):
        key, i = varint(i)
        number, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(i)
        elif wt == 2:
            n, i = varint(i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.append((number, wt, v))
    return out


def program_ops(paths):
    """Per host of a run (its files in order): each program's module name and program
    shape (`HloModuleProto.host_program_shape`, as hex: what the program takes and
    gives), by its `program_id`, and each XLA:CPU op's executions by (name, module,
    program_id)."""
    hosts = []
    for path in paths:
        space = read_xspace(path)
        programs = {}
        for md_name, st in hlo_stats(space):
            module = next(v for f, _, v in _wire_fields(st.bytes_value) if f == 1)
            fields = _wire_fields(module)
            name = next(v.decode() for f, _, v in fields if f == 1)
            number = next((v for f, _, v in fields if f == 5), 0)
            shape = next((v.hex() for f, _, v in fields if f == 4), "")
            programs[str(number)] = {"module": name, "shape": shape, "metadata": md_name}
        counts = {}
        for op in cpu_ops(space):
            key = (op["name"], op["module"], op["program_id"])
            counts[key] = counts.get(key, 0) + 1
        ops = [{"name": n, "module": m, "program_id": p, "count": c} for (n, m, p), c in sorted(counts.items())]
        hosts.append({"host": host_of(path), "programs": programs, "ops": ops})
    return hosts


def _alloc_kind(a):
    if a.is_entry_computation_parameter:
        return "parameter"
    if a.maybe_live_out:
        return "output"
    if a.is_constant:
        return "constant"
    if a.is_thread_local:
        return "thread_local"
    return "temporary"


def buffer_plans(path, color=0):
    """Each program's memory plan from its HloProto's buffer assignment, keyed by the
    metadata name (`jit_f(12)`): allocation bytes by kind in memory space `color`, the
    heap (the temporary allocation of that space whose trace has the most events; a
    trace belongs to the allocation most of its buffers are assigned to) replayed with
    ALLOC taking a buffer's size, SHARE_WITH joining the canonical buffer's group, and
    FREE leaving the group (the memory given back when the group is empty), the peak
    (first event of the maximum), and the buffers live there: the largest buffer at each
    offset of the other allocations of the space (held whole: their sizes count to the
    peak), and each live group's canonical buffer."""
    out = {}
    for name, st in hlo_stats(read_xspace(path)):
        proto = classes()["HloProto"]()
        proto.ParseFromString(st.bytes_value)
        if not proto.HasField("buffer_assignment"):
            continue
        ba = proto.buffer_assignment
        size = {b.id: max(b.size, 0) for b in ba.logical_buffers}
        allocs = list(ba.buffer_allocations)
        owner = {}
        for pos, a in enumerate(allocs):
            for x in a.assigned:
                owner.setdefault(x.logical_buffer_id, pos)
        mine = [pos for pos, a in enumerate(allocs) if a.color == color]
        candidates = []
        for t in ba.heap_simulator_traces:
            votes = {}
            for e in t.events:
                if e.buffer_id in owner:
                    votes[owner[e.buffer_id]] = votes.get(owner[e.buffer_id], 0) + 1
            if not votes:
                continue
            pos = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            if pos in mine and _alloc_kind(allocs[pos]) == "temporary":
                candidates.append((len(t.events), -pos, t, pos))
        heap = max(candidates, key=lambda c: (c[0], c[1])) if candidates else None
        held_pos = [pos for pos in mine if heap is None or pos != heap[3]]
        held_bytes = sum(max(allocs[p].size, 0) for p in held_pos)
        # Buffers at one offset of a held allocation alias: the largest counts.
        by_offset = {}
        for pos in held_pos:
            for x in allocs[pos].assigned:
                if x.logical_buffer_id in size:
                    key = (pos, max(x.offset, 0))
                    by_offset[key] = max(by_offset.get(key, 0), size[x.logical_buffer_id])
        held = list(by_offset.values())
        plan = {"allocated_bytes": sum(max(allocs[p].size, 0) for p in mine)}
        for kind in ("parameter", "output", "constant", "thread_local", "temporary"):
            plan[kind + "_bytes"] = sum(max(allocs[p].size, 0) for p in mine if _alloc_kind(allocs[p]) == kind)
        live_count, live_bytes, heap_doc = len(held), sum(held), None
        if heap is not None:
            t = heap[2]
            groups = {}   # canonical id -> set of member ids
            member_of = {}
            usage, snapshots = [], []
            for e in t.events:
                b = e.buffer_id
                if e.kind == 1:
                    if b in member_of:
                        g = member_of.pop(b)
                        groups[g].discard(b)
                        if not groups[g]:
                            del groups[g]
                elif b not in member_of:
                    target = member_of.get(e.share_with_canonical_id) if e.kind == 2 else None
                    if target is None:
                        groups[b] = {b}
                        member_of[b] = b
                    else:
                        groups[target].add(b)
                        member_of[b] = target
                usage.append(sum(size.get(g, 0) for g in groups))
                snapshots.append(list(groups))
            peak = max(usage) if usage else 0
            at = usage.index(peak) if peak > 0 else 0
            at_peak = snapshots[at] if peak > 0 else []
            live_count += len(at_peak)
            live_bytes += sum(size.get(g, 0) for g in at_peak)
            heap_doc = {"allocation": allocs[heap[3]].index, "peak_live_bytes": peak, "peak_event": at,
                        "events": len(t.events)}
        plan.update({"peak_bytes": held_bytes + (heap_doc or {}).get("peak_live_bytes", 0), "heap": heap_doc,
                     "live_at_peak_count": live_count, "live_at_peak_bytes": live_bytes})
        out[name] = plan
    return out


def hlo_neighbours(path, program, op):
    """The instruction `op` of program `program` (a metadata name, `jit_f(12)`): the
    names of its operands and of the instructions of its computation that read it, and
    of its fused computation's instructions (the first called computation of a fusion)."""
    for name, m in hlo_protos(path):
        if name != program:
            continue
        comps = {c.id: c for c in m.computations}
        for c in m.computations:
            by_id = {i.id: i for i in c.instructions}
            for i in c.instructions:
                if i.name != op:
                    continue
                fused = []
                if i.opcode == "fusion" and i.called_computation_ids:
                    fused = [x.name for x in comps[i.called_computation_ids[0]].instructions]
                return {"computation": c.name,
                        "operands": sorted({by_id[o].name for o in i.operand_ids if o in by_id}),
                        "users": sorted({u.name for u in c.instructions if i.id in u.operand_ids}),
                        "fused": sorted(fused)}
    return None


def write_xspace(space, path):
    with open(path, "wb") as f:
        f.write(space.SerializeToString())


def annotate_calls(space, call, step, scope):
    """Holds each outermost host event named `call` in a step annotation `step`
    (stats step_num = k, _r = 1) that starts and ends 1 us around it (less where the
    next or last call is closer) and a scope `scope` half as far around it: what a
    loop `with StepTraceAnnotation(step, step_num=k): with TraceAnnotation(scope):
    f(x)` records."""
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        call_ids = [k for k, m in plane.event_metadata.items() if m.name == call]
        if not call_ids:
            continue
        next_meta = max(plane.event_metadata) + 1
        next_stat = max(plane.stat_metadata) + 1
        ids = {}
        for name in (step, scope):
            plane.event_metadata[next_meta].id = next_meta
            plane.event_metadata[next_meta].name = name
            ids[name] = next_meta
            next_meta += 1
        stat_ids = {}
        for name in ("step_num", "_r"):
            plane.stat_metadata[next_stat].id = next_stat
            plane.stat_metadata[next_stat].name = name
            stat_ids[name] = next_stat
            next_stat += 1
        k = 0
        for line in plane.lines:
            spans = sorted((ev.offset_ps, ev.offset_ps + ev.duration_ps) for ev in line.events
                           if ev.metadata_id in call_ids)
            outer = []
            for a, b in spans:
                if not outer or a >= outer[-1][1]:
                    outer.append((a, b))
            added = []
            for j, (a, b) in enumerate(outer):
                before = a - outer[j - 1][1] if j > 0 else 2_000_000
                after = outer[j + 1][0] - b if j + 1 < len(outer) else 2_000_000
                pad = min(1_000_000, before // 2, after // 2)
                ev = classes()["XEvent"]()
                ev.metadata_id, ev.offset_ps, ev.duration_ps = ids[step], a - pad, b - a + 2 * pad
                for name, value in (("step_num", k), ("_r", 1)):
                    st = ev.stats.add()
                    st.metadata_id, st.int64_value = stat_ids[name], value
                added.append(ev)
                ev = classes()["XEvent"]()
                ev.metadata_id, ev.offset_ps, ev.duration_ps = ids[scope], a - pad // 2, b - a + pad
                added.append(ev)
                k += 1
            if added:
                events = list(line.events) + added
                events.sort(key=lambda e: (e.offset_ps, -e.duration_ps))
                del line.events[:]
                line.events.extend(events)


def add_hlo_cycles(space, copies):
    """Puts `copies` fusions calling each fusion body into that body (a damaged module:
    its fusions call themselves)."""
    for _, st in hlo_stats(space):
        proto = classes()["HloProto"]()
        proto.ParseFromString(st.bytes_value)
        m = proto.hlo_module
        comps = {c.id: c for c in m.computations}
        next_id = max([i.id for c in m.computations for i in c.instructions] + [0]) + 1
        fusions = [i for c in m.computations for i in c.instructions if i.opcode == "fusion" and i.called_computation_ids]
        for f in fusions:
            body = comps.get(f.called_computation_ids[0])
            for _ in range(copies if body is not None else 0):
                x = body.instructions.add()
                x.CopyFrom(f)
                x.id = next_id
                x.name = f"{f.name}.cycle{next_id}"
                next_id += 1
        st.bytes_value = proto.SerializeToString()


def dot_flops(path, by_program=False):
    """Per HLO module (by module name), per instruction that is a `dot` or a fusion
    holding dots: 2 x the dot's output elements x the product of the lhs contracting
    dimensions, summed over the fusion's dots. One execution's FLOPs.

    by_program: per program instead (the metadata's name, `jit_dot(49)`: one module
    name may be several programs), with library GEMMs too (custom-calls whose
    backend_config holds a `gemm_backend_config`, counted as their dot) and cuDNN's
    fused attention (a `cudnn_fmha_backend_config`)."""
    out = {}
    for md_name, m in hlo_protos(path):
        by_id = {i.id: i for c in m.computations for i in c.instructions}
        comps = {c.id: c for c in m.computations}

        def dot(out_shape, lhs, lhs_contracting):
            n = 1
            for d in out_shape.dimensions:
                n *= d
            k = 1
            for d in lhs_contracting:
                k *= lhs.shape.dimensions[int(d)]
            return 2 * n * k

        def flops(i):
            if i.opcode != "dot":
                return 0
            return dot(i.shape, by_id[i.operand_ids[0]], i.dot_dimension_numbers.lhs_contracting_dimensions)

        def gemm(i):
            if i.opcode != "custom-call" or "gemm_backend_config" not in i.backend_config:
                return 0
            dims = json.loads(i.backend_config)["gemm_backend_config"]["dot_dimension_numbers"]
            result = i.shape.tuple_shapes[0] if i.shape.tuple_shapes else i.shape
            return dot(result, by_id[i.operand_ids[0]], dims.get("lhs_contracting_dimensions", []))

        def attention(i):
            # cuDNN fused attention: Q.K^T and P.V (the backward: five products), each
            # 2 x the scores' elements x the head size (Q's last dimension); half of
            # it under a causal mask.
            if i.opcode != "custom-call" or "cudnn_fmha_backend_config" not in i.backend_config:
                return 0
            cfg = json.loads(i.backend_config)["cudnn_fmha_backend_config"]
            scores = 1
            for d in cfg["intermediate_tensor_shape"]["dimensions"]:
                scores *= int(d)
            head = by_id[i.operand_ids[0]].shape.dimensions[-1]
            products = 5 if "Backward" in i.custom_call_target else 2
            total = products * 2 * scores * head
            return total // 2 if "CAUSAL" in cfg.get("mask_type", "") else total

        mine = out.setdefault(md_name if by_program else m.name, {})
        for c in m.computations:
            for i in c.instructions:
                if i.opcode == "dot":
                    mine[i.name] = flops(i)
                elif i.opcode == "fusion" and i.called_computation_ids:
                    body = comps.get(i.called_computation_ids[0])
                    f = sum(flops(x) for x in body.instructions) if body else 0
                    if f:
                        mine[i.name] = f
                elif by_program and gemm(i):
                    mine[i.name] = gemm(i)
                elif by_program and attention(i):
                    mine[i.name] = attention(i)
    return out


def collective_flops(path):
    """Per HLO module (by module name), each all-reduce's and reduce-scatter's FLOPs in
    one execution (one participant): the arithmetic of its reducer (`to_apply`, its
    instructions other than parameters and constants) applied once per element folded
    in. An all-reduce: once per element of its result (every array of a tuple), XLA's
    count, the group size not being in its shapes. A reduce-scatter: its operands hold
    n x its result, n participants' values: operand elements less result elements."""
    def elements(shape):
        if shape.tuple_shapes:
            return sum(elements(t) for t in shape.tuple_shapes)
        n = 1
        for d in shape.dimensions:
            n *= d
        return n

    out = {}
    for _, m in hlo_protos(path):
        by_id = {i.id: i for c in m.computations for i in c.instructions}
        comps = {c.id: c for c in m.computations}
        mine = out.setdefault(m.name, {})
        for c in m.computations:
            for i in c.instructions:
                if i.opcode not in ("all-reduce", "all-reduce-start", "reduce-scatter"):
                    continue
                reducer = comps.get(i.called_computation_ids[0]) if i.called_computation_ids else None
                ops = max(1, sum(1 for x in reducer.instructions if x.opcode not in ("parameter", "constant"))
                          if reducer else 1)
                if i.opcode == "reduce-scatter":
                    folded = sum(elements(by_id[o].shape) for o in i.operand_ids) - elements(i.shape)
                else:
                    folded = elements(i.shape)
                mine[i.name] = folded * ops
    return out


def hlo_opcodes(path):
    """Per HLO module (by module name): each instruction's name and its opcode."""
    out = {}
    for _, m in hlo_protos(path):
        mine = out.setdefault(m.name, {})
        for c in m.computations:
            for i in c.instructions:
                mine[i.name] = i.opcode
    return out


def _stack(module, frame_id):
    """Frames [file, function, line] outermost first, from a 1-based frame id."""
    idx = module.stack_frame_index
    out = []
    while 0 < frame_id <= len(idx.stack_frames) and len(out) <= len(idx.stack_frames):
        fr = idx.stack_frames[frame_id - 1]
        loc = idx.file_locations[fr.file_location_id - 1]
        out.append([idx.file_names[loc.file_name_id - 1], idx.function_names[loc.function_name_id - 1], loc.line])
        frame_id = fr.parent_frame_id
    return out[::-1]


def sources(path):
    """Per HLO module on /host:metadata (by its event metadata name, `jit_f(12)`),
    per instruction: {"opcode", "stack": frames outermost first (older JAX: the one
    source line, function ""), "fused": [[opcode, stack], ...] of a fusion's body,
    "op_name": its metadata's JAX name stack, `jit(f)/jvp(layer0/mlp)/dot_general`}."""
    out = {}
    for key, m in hlo_protos(path):
        comps = {c.id: c for c in m.computations}

        def stack_of(i):
            if i.metadata.stack_frame_id > 0:
                return _stack(m, i.metadata.stack_frame_id)
            if i.metadata.source_file:
                return [[i.metadata.source_file, "", i.metadata.source_line]]
            return []

        instrs = {}
        for c in m.computations:
            for i in c.instructions:
                fused = []
                if i.opcode == "fusion" and i.called_computation_ids:
                    body = comps.get(i.called_computation_ids[0])
                    fused = [[f.opcode, stack_of(f)] for f in body.instructions] if body else []
                instrs.setdefault(i.name, {"opcode": i.opcode, "stack": stack_of(i), "fused": fused,
                                           "op_name": i.metadata.op_name})
        out[key] = {"module": m.name, "instructions": instrs}
    return out


# ------------------------------------------------------------------ CLI

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info", help="plane/line event counts as stepscope.info/1 JSON")
    p.add_argument("path")
    p.add_argument("--pretty", action="store_true")
    p = sub.add_parser("dump", help="first K events of one line as JSON lines")
    p.add_argument("path")
    p.add_argument("--plane", required=True)
    p.add_argument("--line", required=True)
    p.add_argument("--limit", type=int, default=20)
    p = sub.add_parser("steps", help="StepTraceAnnotation roots as a JSON list")
    p.add_argument("path")
    p = sub.add_parser("step-work", help="the device work each step launched (GPU: by correlation_id; "
                                         "XLA:CPU: by dispatch order), as JSON")
    p.add_argument("path")
    p.add_argument("--windows", metavar="NAME", help="the host events called NAME are the steps (a module's runs: "
                                                     "'jit_train_step:XLA GPU module')")
    p.add_argument("--rounds", action="store_true", help="with --windows, where threads run the events at once (one "
                                                         "per GPU): step k is each thread's k-th event")
    p.add_argument("--module", help="GPU: only device events of this hlo_module")
    p = sub.add_parser("cpu-ops", help="XLA:CPU: each op's executions until they completed, and the device's busy "
                                       "time, as JSON")
    p.add_argument("path")
    p.add_argument("--within", nargs=2, type=int, metavar=("FROM_PS", "TO_PS"),
                   help="the op rows of the executions that started in [FROM_PS, TO_PS) only")
    p = sub.add_parser("launches-not-run", help="GPU: how many launches in steps ran no device work in the capture")
    p.add_argument("path")
    p = sub.add_parser("calls-not-run", help="TPU: how many calls enqueued a run the capture does not hold")
    p.add_argument("path")
    p = sub.add_parser("memory", help="allocator peaks and live allocations as JSON")
    p.add_argument("path")
    p = sub.add_parser("pprof", help="device-memory pprof totals as JSON")
    p.add_argument("path")
    p = sub.add_parser("reverse", help="write a copy with every line's events stored in reverse")
    p.add_argument("path")
    p.add_argument("out")
    p = sub.add_parser("drop-plane", help="write a copy without the planes called NAME")
    p.add_argument("path")
    p.add_argument("out")
    p.add_argument("name")
    p = sub.add_parser("host-events", help="host events by name or name prefix, as JSON")
    p.add_argument("path")
    p.add_argument("--names", default="", help="comma-separated exact names")
    p.add_argument("--prefixes", default="", help="comma-separated name prefixes")
    p = sub.add_parser("dot-flops", help="FLOPs of each dot and dot fusion, per module, as JSON")
    p.add_argument("path")
    p.add_argument("--by-program", action="store_true",
                   help="per program (jit_dot(49)) instead of per module name, library GEMMs too")
    p = sub.add_parser("hlo-opcodes", help="each HLO instruction's opcode, per module, as JSON")
    p.add_argument("path")
    p = sub.add_parser("collective-flops", help="each all-reduce's and reduce-scatter's FLOPs, per module, as JSON")
    p.add_argument("path")
    p = sub.add_parser("sources", help="each HLO instruction's Python stack, per module, as JSON")
    p.add_argument("path")
    p = sub.add_parser("hlo-cycle", help="write a copy whose fusion bodies each hold COPIES fusions calling themselves")
    p.add_argument("path"); p.add_argument("out"); p.add_argument("--copies", type=int, default=8)
    p = sub.add_parser("shift-clock", help="write a copy whose host clock reads NS ns later: its session start "
                                           "plus NS (line timestamps count from it)")
    p.add_argument("path"); p.add_argument("out"); p.add_argument("ns", type=int)
    p = sub.add_parser("rename-plane", help="write a copy with the plane called NAME renamed TO")
    p.add_argument("path"); p.add_argument("out"); p.add_argument("name"); p.add_argument("to")
    p = sub.add_parser("annotate-calls", help="write a copy in which each call CALL (an outermost host event of that "
                                              "name) is held by a step annotation NAME (step_num k) and a scope SCOPE, "
                                              "as a loop that annotates each call would record them")
    p.add_argument("path")
    p.add_argument("out")
    p.add_argument("--call", required=True)
    p.add_argument("--step", required=True)
    p.add_argument("--scope", required=True)
    p = sub.add_parser("cut-at", help="write a copy without the events that end after PS (a capture stopped then)")
    p.add_argument("path")
    p.add_argument("out")
    p.add_argument("ps", type=int)
    p = sub.add_parser("damage-steps", help="write a copy whose step annotations (step_num and _r) last PS picoseconds")
    p.add_argument("path"); p.add_argument("out"); p.add_argument("ps", type=int)
    p = sub.add_parser("break-hlo", help="write a copy whose HLO protos are cut to their first half")
    p.add_argument("path"); p.add_argument("out")
    p = sub.add_parser("buffers", help="each program's memory plan (buffer assignment, heap peak) as JSON")
    p.add_argument("path")
    p.add_argument("--memory-space", type=int, default=0)
    p = sub.add_parser("hlo-neighbours", help="an HLO instruction's operands, users and fused body, as JSON")
    p.add_argument("path"); p.add_argument("program"); p.add_argument("op")
    p = sub.add_parser("program-ops", help="per host of a run (its files, in order): each program's module and "
                                           "program shape, and XLA:CPU op executions per program, as JSON")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("plane-stats", help="one plane's own stats as a JSON object")
    p.add_argument("path")
    p.add_argument("--plane", required=True)
    a = ap.parse_args(argv)

    if a.cmd == "info":
        doc = info(a.path)
        if a.pretty:
            print(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            print(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
    elif a.cmd == "dump":
        for ev in dump(a.path, a.plane, a.line, a.limit):
            print(json.dumps(ev, separators=(",", ":"), ensure_ascii=False))
    elif a.cmd == "steps":
        print(json.dumps(steps(a.path), separators=(",", ":")))
    elif a.cmd == "step-work":
        print(json.dumps(step_work(a.path, a.windows, a.rounds, a.module), separators=(",", ":")))
    elif a.cmd == "cpu-ops":
        ops = cpu_ops(read_xspace(a.path))
        cpu_self_times(ops)
        per = {}
        lo, hi = a.within or (-2**63, 2**63)
        for op in (op for op in ops if lo <= op["start_ps"] < hi):
            row = per.setdefault((op["module"], op["name"]), {"module": op["module"], "name": op["name"], "count": 0,
                                                             "total_ps": 0, "event_ps": 0})
            row["count"] += 1
            # One execution is one run of the op within one run of its program: its
            # events of one run_id (a sort split over threads records two) are one.
            row.setdefault("runs", set()).add(op["run_id"] if op["run_id"] is not None else ("event", op["start_ps"]))
            row["total_ps"] += op["done_ps"] - op["start_ps"]
            row["event_ps"] += op["end_ps"] - op["start_ps"]
            row["ended_ps"] = row.get("ended_ps", 0) + op["ended_ps"] - op["start_ps"]
            row["self_ps"] = row.get("self_ps", 0) + op["self_ps"]
        programs = {}
        for op in ops:
            row = programs.setdefault((op["module"], op["program_id"]), {"module": op["module"],
                                                                         "program_id": op["program_id"],
                                                                         "count": 0, "total_ps": 0})
            row["count"] += 1
            row["total_ps"] += op["done_ps"] - op["start_ps"]
        for row in per.values():
            row["executions"] = len(row.pop("runs"))
        doc = {"ops": sorted(per.values(), key=lambda r: (-r["total_ps"], r["module"], r["name"])),
               "programs": sorted(programs.values(), key=lambda r: (r["module"], r["program_id"] or 0)),
               "busy_ps": union_ps([(op["start_ps"], op["done_ps"]) for op in ops]),
               "event_busy_ps": union_ps([(op["start_ps"], op["end_ps"]) for op in ops])}
        windows = [(st["start_ps"], st["start_ps"] + st["duration_ps"]) for st in steps(a.path)]
        if windows:
            for (key, end) in [("busy_in_steps_ps", "done_ps"), ("event_busy_in_steps_ps", "end_ps"),
                               ("ended_busy_in_steps_ps", "ended_ps")]:
                doc[key] = union_ps([(max(op["start_ps"], lo), min(op[end], hi)) for (lo, hi) in windows
                                     for op in ops if op["start_ps"] < hi and op[end] > lo])
            doc["steps_ps"] = sum(hi - lo for (lo, hi) in windows)
            # Host callbacks (JAX's names for its Python-callback custom calls): their
            # time in the steps, until they completed.
            callbacks = [op for op in ops if op["name"].split(".")[0] in CALLBACK_NAMES]
            doc["callback_in_steps_ps"] = union_ps([(max(op["start_ps"], lo), min(op["done_ps"], hi))
                                                    for (lo, hi) in windows for op in callbacks
                                                    if op["start_ps"] < hi and op["done_ps"] > lo])
        print(json.dumps(doc, separators=(",", ":")))
    elif a.cmd == "launches-not-run":
        windows = [(st["start_ps"], st["start_ps"] + st["duration_ps"]) for st in steps(a.path)]
        print(json.dumps((gpu_launches(a.path, windows) or {"not_run": 0})["not_run"]))
    elif a.cmd == "calls-not-run":
        print(json.dumps(len((tpu_enqueued_runs(a.path) or {"unran": []})["unran"])))
    elif a.cmd == "memory":
        print(json.dumps(memory(a.path), separators=(",", ":")))
    elif a.cmd == "buffers":
        print(json.dumps(buffer_plans(a.path, a.memory_space), separators=(",", ":")))
    elif a.cmd == "hlo-neighbours":
        print(json.dumps(hlo_neighbours(a.path, a.program, a.op), separators=(",", ":")))
    elif a.cmd == "program-ops":
        print(json.dumps(program_ops(a.paths), separators=(",", ":")))
    elif a.cmd == "plane-stats":
        print(json.dumps(plane_stats(a.path, a.plane), separators=(",", ":"), default=str))
    elif a.cmd == "host-events":
        evs = host_events(a.path, set(a.names.split(",")) - {""}, a.prefixes.split(","))
        print(json.dumps(evs, separators=(",", ":")))
    elif a.cmd == "dot-flops":
        print(json.dumps(dot_flops(a.path, a.by_program), separators=(",", ":")))
    elif a.cmd == "hlo-opcodes":
        print(json.dumps(hlo_opcodes(a.path), separators=(",", ":")))
    elif a.cmd == "collective-flops":
        print(json.dumps(collective_flops(a.path), separators=(",", ":")))
    elif a.cmd == "sources":
        print(json.dumps(sources(a.path), separators=(",", ":")))
    elif a.cmd == "pprof":
        print(json.dumps(pprof(a.path), separators=(",", ":")))
    elif a.cmd == "reverse":
        space = read_xspace(a.path)
        for plane in space.planes:
            for line in plane.lines:
                events = list(line.events)[::-1]
                del line.events[:]
                line.events.extend(events)
        write_xspace(space, a.out)
    elif a.cmd == "hlo-cycle":
        space = read_xspace(a.path)
        add_hlo_cycles(space, a.copies)
        write_xspace(space, a.out)
    elif a.cmd == "shift-clock":
        space = read_xspace(a.path)
        for plane in space.planes:
            for st in plane.stats:
                md = plane.stat_metadata.get(st.metadata_id)
                if md is not None and md.name == "profile_start_time":
                    if st.WhichOneof("value") == "uint64_value":
                        st.uint64_value += a.ns
                    else:
                        st.int64_value += a.ns
        write_xspace(space, a.out)
    elif a.cmd == "rename-plane":
        space = read_xspace(a.path)
        for plane in space.planes:
            if plane.name == a.name:
                plane.name = a.to
        write_xspace(space, a.out)
    elif a.cmd == "annotate-calls":
        space = read_xspace(a.path)
        annotate_calls(space, a.call, a.step, a.scope)
        write_xspace(space, a.out)
    elif a.cmd == "cut-at":
        space = read_xspace(a.path)
        for plane in space.planes:
            for line in plane.lines:
                kept = [ev for ev in line.events if event_start_ps(line, ev) + ev.duration_ps <= a.ps]
                del line.events[:]
                line.events.extend(kept)
        write_xspace(space, a.out)
    elif a.cmd == "damage-steps":
        space = read_xspace(a.path)
        for plane in space.planes:
            stat_ids = {k: v.name for k, v in plane.stat_metadata.items()}
            for line in plane.lines:
                for ev in line.events:
                    names = {stat_ids.get(s.metadata_id) for s in ev.stats}
                    if "step_num" in names and "_r" in names:
                        ev.duration_ps = a.ps
        write_xspace(space, a.out)
    elif a.cmd == "break-hlo":
        space = read_xspace(a.path)
        for _, st in hlo_stats(space):
            st.bytes_value = st.bytes_value[: len(st.bytes_value) // 2]
        write_xspace(space, a.out)
    elif a.cmd == "drop-plane":
        space = read_xspace(a.path)
        keep = [p for p in space.planes if p.name != a.name]
        del space.planes[:]
        space.planes.extend(keep)
        write_xspace(space, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
