#!/usr/bin/env python3
"""Independent reader for the Perfetto traces `stepscope export --format perfetto` writes.

Used by stepscope's tests to check exports. The protobuf message classes are built at
run time from the public Perfetto field numbers (descriptor_pb2 -> descriptor_pool ->
message_factory), as tests/support/xspace_ref.py does for XSpace; no generated code,
no trace_processor binary.

Reading follows what a trace processor does: packets are sorted by timestamp (stable,
so file order breaks ties), interned names are resolved per packet sequence (reset by
SEQ_INCREMENTAL_STATE_CLEARED), and on each track a SLICE_END closes the innermost
open SLICE_BEGIN.

Commands:
    perfetto_ref.py decode TRACE
        {"packets":N, "errors":[..], "tracks":N,
         "hosts":[{"host":H,"planes":[{"name":P,
                   "lines":[{"name":L,"slices":N,"instants":N,"tracks":N}],
                   "counters":[{"name":C,"samples":N,"unit":U}]}]}]}
    perfetto_ref.py check TRACE SOURCE.xplane.pb
        compares every event of every line with the trace (name, start and duration in
        ns, and all args), and the memory counters (allocator state after each
        MemoryAllocation/MemoryDeallocation event), read from the XSpace with xspace_ref.py:
        {"lines":N, "events":N, "matched":N, "counter_samples":N, "counter_matched":N,
         "mismatches":[first differences]}
    perfetto_ref.py slices TRACE --plane P --line L [--limit K]
        first K slices/instants of a line by time, one JSON object a line.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xspace_ref  # noqa: E402

_F = descriptor_pb2.FieldDescriptorProto
_T = {
    "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "uint32": _F.TYPE_UINT32,
    "int32": _F.TYPE_INT32, "double": _F.TYPE_DOUBLE, "string": _F.TYPE_STRING,
    "bool": _F.TYPE_BOOL, "message": _F.TYPE_MESSAGE,
}

# Field numbers from google/perfetto protos/perfetto/trace/{trace,trace_packet}.proto,
# track_event/{track_event,track_descriptor,counter_descriptor,debug_annotation}.proto
# and interned_data/interned_data.proto. Only the fields stepscope writes.
_MESSAGES = [
    ("Trace", [(1, "packet", "message", True, "TracePacket")]),
    ("TracePacket", [
        (8, "timestamp", "uint64", False, None),
        (10, "trusted_packet_sequence_id", "uint32", False, None),
        (11, "track_event", "message", False, "TrackEvent"),
        (12, "interned_data", "message", False, "InternedData"),
        (13, "sequence_flags", "uint32", False, None),
        (60, "track_descriptor", "message", False, "TrackDescriptor"),
    ]),
    ("TrackDescriptor", [
        (1, "uuid", "uint64", False, None),
        (2, "name", "string", False, None),
        (5, "parent_uuid", "uint64", False, None),
        (8, "counter", "message", False, "CounterDescriptor"),
        (11, "child_ordering", "int32", False, None),
        (12, "sibling_order_rank", "int32", False, None),
    ]),
    ("CounterDescriptor", [(3, "unit", "int32", False, None)]),
    ("TrackEvent", [
        (4, "debug_annotations", "message", True, "DebugAnnotation"),
        (9, "type", "int32", False, None),
        (10, "name_iid", "uint64", False, None),
        (11, "track_uuid", "uint64", False, None),
        (23, "name", "string", False, None),
        (30, "counter_value", "int64", False, None),
        (44, "double_counter_value", "double", False, None),
    ]),
    ("DebugAnnotation", [
        (1, "name_iid", "uint64", False, None),
        (10, "name", "string", False, None),
        (2, "bool_value", "bool", False, None),
        (3, "uint_value", "uint64", False, None),
        (4, "int_value", "int64", False, None),
        (5, "double_value", "double", False, None),
        (6, "string_value", "string", False, None),
    ]),
    ("InternedData", [
        (2, "event_names", "message", True, "InternedName"),
        (3, "debug_annotation_names", "message", True, "InternedName"),
    ]),
    ("InternedName", [(1, "iid", "uint64", False, None), (2, "name", "string", False, None)]),
]

_PACKAGE = "stepscope_ref.perfetto"
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
STATE_CLEARED = 1


def _classes():
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "stepscope_ref/perfetto.proto"
    fdp.package = _PACKAGE
    fdp.syntax = "proto2"
    for name, fields in _MESSAGES:
        msg = fdp.message_type.add()
        msg.name = name
        for num, fname, ftype, rep, mtype in fields:
            f = msg.field.add()
            f.number, f.name, f.type = num, fname, _T[ftype]
            f.label = _F.LABEL_REPEATED if rep else _F.LABEL_OPTIONAL
            if mtype:
                f.type_name = f".{_PACKAGE}.{mtype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{n}"))
            for n, _ in _MESSAGES}


def annotation_value(a):
    for f in ("string_value", "double_value", "int_value", "uint_value", "bool_value"):
        if a.HasField(f):
            return getattr(a, f)
    return None


def read(path):
    """Returns (tracks, events, errors, packets): tracks {uuid: dict}; events sorted by
    (ts, file order) as dicts {ts, type, track, name, args, value}."""
    trace = _classes()["Trace"]()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks, events, errors = {}, [], []
    interned = {}  # seq -> (event names, annotation names)
    for n, p in enumerate(trace.packet):
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & STATE_CLEARED or seq not in interned:
            interned[seq] = ({}, {})
        names, arg_names = interned[seq]
        if p.HasField("interned_data"):
            for e in p.interned_data.event_names:
                names[e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                arg_names[e.iid] = e.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = {"uuid": d.uuid, "name": d.name,
                              "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                              "counter": d.HasField("counter"),
                              "unit": d.counter.unit if d.HasField("counter") else None,
                              "rank": d.sibling_order_rank}
        if p.HasField("track_event"):
            te = p.track_event
            if te.HasField("name_iid"):
                if te.name_iid not in names:
                    errors.append(f"packet {n}: name iid {te.name_iid} not interned on sequence {seq}")
                name = names.get(te.name_iid)
            else:
                name = te.name if te.HasField("name") else None
            args = {}
            for a in te.debug_annotations:
                key = arg_names.get(a.name_iid) if a.HasField("name_iid") else a.name
                if key is None:
                    errors.append(f"packet {n}: annotation name iid {a.name_iid} not interned")
                args[key] = annotation_value(a)
            value = None
            if te.HasField("counter_value"):
                value = te.counter_value
            elif te.HasField("double_counter_value"):
                value = te.double_counter_value
            events.append({"ts": p.timestamp, "order": n, "type": te.type, "track": te.track_uuid,
                           "name": name, "args": args, "value": value})
    events.sort(key=lambda e: (e["ts"], e["order"]))
    return tracks, events, errors, len(trace.packet)


def build(path):
    """Slices per track (name, ts, dur, args, instant) and counter samples."""
    tracks, events, errors, packets = read(path)
    open_ = collections.defaultdict(list)
    slices = collections.defaultdict(list)
    samples = collections.defaultdict(list)
    for e in events:
        t = e["track"]
        if t not in tracks:
            errors.append(f"event at {e['ts']} on undeclared track {t}")
        if e["type"] == SLICE_BEGIN:
            open_[t].append(e)
        elif e["type"] == SLICE_END:
            if not open_[t]:
                errors.append(f"SLICE_END at {e['ts']} on track {t} with no open slice")
                continue
            b = open_[t].pop()
            slices[t].append({"name": b["name"], "ts": b["ts"], "dur": e["ts"] - b["ts"],
                              "args": b["args"], "instant": False})
        elif e["type"] == INSTANT:
            slices[t].append({"name": e["name"], "ts": e["ts"], "dur": 0, "args": e["args"],
                              "instant": True})
        elif e["type"] == COUNTER:
            if not tracks.get(t, {}).get("counter"):
                errors.append(f"counter value on non-counter track {t}")
            samples[t].append((e["ts"], e["value"]))
        else:
            errors.append(f"unknown event type {e['type']}")
    for t, stack in open_.items():
        if stack:
            errors.append(f"{len(stack)} slices never closed on track {t}")
    return tracks, slices, samples, errors, packets


def hierarchy(tracks):
    """host -> plane -> line tracks (with their lane tracks) and counter tracks."""
    roots = [t for t in tracks.values() if t["parent"] is None]
    children = collections.defaultdict(list)
    for t in tracks.values():
        if t["parent"] is not None:
            children[t["parent"]].append(t)
    for c in children.values():
        c.sort(key=lambda t: (t["rank"], t["uuid"]))
    out = []
    for h in sorted(roots, key=lambda t: (t["rank"], t["uuid"])):
        planes = []
        for p in children[h["uuid"]]:
            lines, counters = [], []
            for l in children[p["uuid"]]:
                if l["counter"]:
                    counters.append(l)
                else:
                    lanes = [l] + [c for c in children[l["uuid"]] if not c["counter"]]
                    lines.append((l, lanes))
            planes.append((p, lines, counters))
        out.append((h, planes))
    return out


def decode(path):
    tracks, slices, samples, errors, packets = build(path)
    hosts = []
    for h, planes in hierarchy(tracks):
        pl = []
        for p, lines, counters in planes:
            pl.append({
                "name": p["name"],
                "lines": [{"name": l["name"],
                           "slices": sum(1 for t in lanes for s in slices[t["uuid"]] if not s["instant"]),
                           "instants": sum(1 for t in lanes for s in slices[t["uuid"]] if s["instant"]),
                           "tracks": len(lanes)} for l, lanes in lines],
                "counters": [{"name": c["name"], "samples": len(samples[c["uuid"]]), "unit": c["unit"]}
                             for c in counters],
            })
        hosts.append({"host": h["name"], "planes": pl})
    return {"packets": packets, "tracks": len(tracks), "errors": errors, "hosts": hosts}


def line_events(path, plane_name, line_name):
    tracks, slices, _, _, _ = build(path)
    for _, planes in hierarchy(tracks):
        for p, lines, _ in planes:
            if p["name"] != plane_name:
                continue
            for l, lanes in lines:
                if l["name"] == line_name:
                    evs = [s for t in lanes for s in slices[t["uuid"]]]
                    evs.sort(key=lambda s: (s["ts"], -s["dur"]))
                    return evs
    return []


def compare_counts(want, have, where, mismatches, limit=20):
    """Adds the differences of two Counters to `mismatches` (at most `limit` in all) as
    {**where, "missing"|"unexpected": key, "count": n}; returns how many matched."""
    for label, diff in (("missing", want - have), ("unexpected", have - want)):
        for k, c in diff.items():
            if len(mismatches) < limit:
                mismatches.append({**where, label: list(k), "count": c})
    return sum((want & have).values())


def _ns(ps):
    return (ps + 500) // 1000


def _norm(v):
    if isinstance(v, dict) and "bytes" in v:
        return f"<{v['bytes']} bytes>"
    if isinstance(v, bool):
        return int(v)
    return v


def check(trace_path, xplane_path):
    tracks, slices, samples, errors, _ = build(trace_path)
    got = {}
    for _, planes in hierarchy(tracks):
        for p, lines, _ in planes:
            for l, lanes in lines:
                got[(p["name"], l["name"])] = [s for t in lanes for s in slices[t["uuid"]]]
    space = xspace_ref.read_xspace(xplane_path)
    starts = [line.timestamp_ns * 1000 + ev.offset_ps
              for plane in space.planes for line in plane.lines for ev in line.events]
    shift = max(0, -_ns(min(starts))) if starts else 0
    mismatches = list(errors[:20])
    n_lines = n_events = matched = 0
    for plane in space.planes:
        for line in plane.lines:
            if not line.events:
                continue
            n_lines += 1
            want = collections.Counter()
            for ev in line.events:
                start = xspace_ref.event_start_ps(line, ev)
                s = _ns(start) + shift
                e = max(_ns(start + ev.duration_ps) + shift, s)
                instant = ev.duration_ps <= 0
                args = {k: _norm(v) for k, v in xspace_ref.event_stats(plane, ev).items()}
                key = (xspace_ref.event_name(plane, ev), s, 0 if instant else e - s, instant,
                       json.dumps(args, sort_keys=True))
                want[key] += 1
            n_events += sum(want.values())
            have = collections.Counter()
            for sl in got.get((plane.name, line.name), []):
                args = {k: _norm(v) for k, v in sl["args"].items()}
                have[(sl["name"], sl["ts"], sl["dur"], sl["instant"], json.dumps(args, sort_keys=True))] += 1
            matched += compare_counts(want, have, {"plane": plane.name, "line": line.name}, mismatches)
    # Memory counters: allocator state after each MemoryAllocation/MemoryDeallocation.
    want_c = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                if xspace_ref.event_name(plane, ev) not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                st = xspace_ref.event_stats(plane, ev)
                alloc = st.get("allocator_name")
                if alloc is None:
                    alloc = f"device {st['index_on_host']}" if "index_on_host" in st else "memory"
                ts = _ns(xspace_ref.event_start_ps(line, ev)) + shift
                for stat in ("bytes_allocated", "bytes_reserved", "bytes_available", "peak_bytes_in_use"):
                    if stat in st:
                        want_c[(plane.name, f"{alloc} {stat}", ts, st[stat])] += 1
    have_c = collections.Counter()
    for _, planes in hierarchy(tracks):
        for p, _, counters in planes:
            for c in counters:
                for ts, v in samples[c["uuid"]]:
                    have_c[(p["name"], c["name"], ts, v)] += 1
    for k, c in list((want_c - have_c).items())[:5]:
        mismatches.append({"counter_missing": list(k), "count": c})
    for k, c in list((have_c - want_c).items())[:5]:
        mismatches.append({"counter_unexpected": list(k), "count": c})
    return {"lines": n_lines, "events": n_events, "matched": matched,
            "counter_samples": sum(want_c.values()), "counter_matched": sum((want_c & have_c).values()),
            "mismatches": mismatches}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("decode")
    p.add_argument("trace")
    p = sub.add_parser("check")
    p.add_argument("trace")
    p.add_argument("xplane")
    p = sub.add_parser("slices")
    p.add_argument("trace")
    p.add_argument("--plane", required=True)
    p.add_argument("--line", required=True)
    p.add_argument("--limit", type=int, default=20)
    a = ap.parse_args(argv)
    if a.cmd == "decode":
        print(json.dumps(decode(a.trace), separators=(",", ":")))
    elif a.cmd == "check":
        print(json.dumps(check(a.trace, a.xplane), separators=(",", ":")))
    else:
        for s in line_events(a.trace, a.plane, a.line)[: a.limit]:
            print(json.dumps(s, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
