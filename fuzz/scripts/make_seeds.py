#!/usr/bin/env python3
"""Makes small fuzz seeds from the committed real captures in tests/fixtures.

Seeds are slices of real files, re-encoded small so libFuzzer runs fast:
- xspace: each plane of each xplane.pb alone, with at most 3 lines of 6 events and
  40 metadata entries (references kept where they fall inside the slice), also with
  every event lasting i64::MAX and -1 ps;
- hlo: the smallest `Hlo Proto` byte stats of the metadata planes;
- kernel_details: the distinct kernel_details strings;
- trace_json: metadata events plus a few events of every phase, plain and gzip;
- pprof: memory.prof gzipped and raw.

Usage: python3 fuzz/scripts/make_seeds.py OUT_DIR   (writes OUT_DIR/<target>/...)
"""
import gzip
import hashlib
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures")


def varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7


def fields(buf):
    """Yields (field, wire type, value or bytes, raw bytes of the whole field)."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = varint(buf, pos)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = varint(buf, pos)
        elif wt == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wt == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        elif wt == 2:
            n, pos = varint(buf, pos)
            v, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v, buf[start:pos]


def enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    return enc_varint(field << 3 | 2) + enc_varint(len(payload)) + payload


def extreme_event(event, duration):
    """The event with its duration_ps (field 3) replaced."""
    out = bytearray(b"".join(raw for f, _, _, raw in fields(event) if f != 3))
    return bytes(out) + enc_varint(3 << 3) + enc_varint(duration & (2**64 - 1))


def slim_line(line, max_events=6, duration=None):
    out, n = bytearray(), 0
    for f, wt, v, raw in fields(line):
        if f == 4:
            n += 1
            if n > max_events:
                continue
            if duration is not None:
                out += ld(4, extreme_event(v, duration))
                continue
        out += raw
    return bytes(out)


def slim_plane(plane, max_lines=3, max_meta=40, duration=None):
    out = bytearray()
    lines = metas = smetas = 0
    for f, wt, v, raw in fields(plane):
        if f == 3:
            lines += 1
            if lines <= max_lines:
                out += ld(3, slim_line(v, duration=duration))
        elif f == 4:
            metas += 1
            # Drop big metadata (HLO protos) from xspace seeds; hlo has its own target.
            if metas <= max_meta and len(raw) < 2048:
                out += raw
        elif f == 5:
            smetas += 1
            if smetas <= max_meta * 2:
                out += raw
        else:
            out += raw
    return bytes(out)


def text_of(stat, stat_names):
    """A string stat's text: inline (5) or a reference to a stat metadata name (7)."""
    if 5 in stat:
        return bytes(stat[5])
    return stat_names.get(stat.get(7), "").encode()


def write(out_dir, target, data, suffix=""):
    d = os.path.join(out_dir, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16] + suffix
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def xplane_files():
    for dp, _, fs in os.walk(FIX):
        for n in sorted(fs):
            if n.endswith(".xplane.pb"):
                yield os.path.join(dp, n)


def main(out_dir):
    kernel_details, hlos = set(), []
    for path in sorted(xplane_files()):
        buf = open(path, "rb").read()
        for f, wt, plane, _ in fields(buf):
            if f != 1:
                continue
            write(out_dir, "xspace", ld(1, slim_plane(plane)))
            # Weird but valid: the same events lasting i64::MAX or -1 ps (analyses must
            # survive them; the mutation suite found overflows this way).
            for duration in (2**63 - 1, -1):
                write(out_dir, "xspace", ld(1, slim_plane(plane, duration=duration)))
            # Walk the plane for hlo protos (metadata stats) and kernel_details strings.
            stat_names = {}
            for pf, _, pv, _ in fields(plane):
                if pf == 5:
                    ent = dict((a, b) for a, _, b, _ in fields(pv))
                    sm = dict((a, b) for a, _, b, _ in fields(ent.get(2, b"")))
                    stat_names[ent.get(1, 0)] = sm.get(2, b"").decode("utf-8", "replace")
            for pf, _, pv, _ in fields(plane):
                if pf == 4:
                    ent = dict((a, b) for a, _, b, _ in fields(pv))
                    for mf, _, mv, _ in fields(ent.get(2, b"")):
                        if mf == 5:
                            st = dict((a, b) for a, _, b, _ in fields(mv))
                            name = stat_names.get(st.get(1))
                            if name == "Hlo Proto" and 6 in st:
                                hlos.append(st[6])
                            elif name == "kernel_details":
                                kernel_details.add(text_of(st, stat_names))
                if pf == 3:
                    for lf, _, lv, _ in fields(pv):
                        if lf != 4:
                            continue
                        for ef, _, ev, _ in fields(lv):
                            if ef == 4:
                                st = dict((a, b) for a, _, b, _ in fields(ev))
                                if stat_names.get(st.get(1)) == "kernel_details":
                                    kernel_details.add(text_of(st, stat_names))
    hlos = sorted(set(hlos), key=len)
    for h in hlos[:4] + [h for h in hlos if len(h) <= 30000][-2:]:
        write(out_dir, "hlo", h)
    for k in sorted(kernel_details)[:8]:
        write(out_dir, "kernel_details", k)
    write(out_dir, "kernel_details", b"regs:64 static_shared:0 dynamic_shared:49152 grid:16,16,1 block:256,1,1 occ_pct:50")
    write(out_dir, "kernel_details", b"registers_per_thread=32 grid = 8, 1, 1 private_mem:16 group_mem:1024")

    for dp, _, fs in os.walk(FIX):
        for n in sorted(fs):
            p = os.path.join(dp, n)
            if n.endswith(".json.gz"):
                doc = json.loads(gzip.open(p).read())
                events = doc["traceEvents"] if isinstance(doc, dict) else doc
                meta = [e for e in events if e.get("ph") == "M"][:6]
                by_ph = {}
                for e in events:
                    by_ph.setdefault(e.get("ph"), []).append(e)
                picked = meta + [e for ph, es in sorted(by_ph.items(), key=lambda x: str(x[0])) if ph != "M" for e in es[:4]]
                small = json.dumps({"displayTimeUnit": "ns", "traceEvents": picked}).encode()
                write(out_dir, "trace_json", small)
                write(out_dir, "trace_json", gzip.compress(small, 6), ".gz")
                write(out_dir, "trace_json", json.dumps(picked[:10]).encode())
            elif n == "memory.prof":
                raw = open(p, "rb").read()
                write(out_dir, "pprof", raw, ".gz")
                write(out_dir, "pprof", gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


if __name__ == "__main__":
    main(sys.argv[1])
