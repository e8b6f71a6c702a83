#!/usr/bin/env python3
"""Reads the tables `stepscope export` writes (CSV with Python's csv module, Parquet with
pyarrow) and checks them against independent sources. Used by stepscope's tests.

Commands:
    table_ref.py events TABLE SOURCE.xplane.pb [--steps]
        TABLE = *.csv | *.parquet (the events table). Compares every row with the
        events of SOURCE read by xspace_ref.py: per (plane, line) the multiset of
        (name, start_ps, duration_ps, hlo_op, hlo_module, tf_op, stats). With --steps,
        also checks step_num against xspace_ref.py's StepTraceAnnotation steps (the
        latest-starting step whose span holds the event start).
        {"rows":N, "events":N, "matched":N, "columns":[..], "steps_checked":N,
         "step_mismatches":N, "mismatches":[first 20]}
    table_ref.py rows TABLE ANALYSIS.json KEY
        Compares the rows of TABLE with the list ANALYSIS[KEY] (what `stepscope
        ops|kernels|steps --json` prints): same columns in the same order, same values
        (CSV cells parsed back: numbers, booleans, empty = null, JSON text for lists).
        {"rows":N, "expected":N, "columns":[..], "mismatches":[first 20]}
    table_ref.py schema TABLE.parquet
        {"columns":[{"name","type","nullable"}], "row_groups":N, "rows":N}
    table_ref.py duckdb DIR QUERY
        QUERY run by DuckDB over DIR, a folder `stepscope tables` wrote: each table a
        view of its Parquet files read with hive partitioning (run, host) and
        union_by_name. {"columns":[..], "rows":[[..], ..]}
    table_ref.py sums TABLE.parquet
        The op-event table summed by (module, op, program_id), as the op profile's rows
        are: {"rows":N, "sums":[{"module","op","program_id","count","duration_ps",
        "self_ps","steps":[step_num…]}]}
"""

from __future__ import annotations

import argparse
import bisect
import collections
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xspace_ref  # noqa: E402
from perfetto_ref import compare_counts  # noqa: E402

csv.field_size_limit(1 << 30)


def read_table(path):
    """Rows as dicts of typed values (CSV cells stay text)."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        t = pq.read_table(path)
        return t.column_names, t.to_pylist(), False
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        rows = list(r)
        return list(r.fieldnames or []), rows, True


def _int(v):
    return None if v in (None, "") else int(v)


def _str(v):
    return None if v in (None, "") else v


def _norm(v):
    if isinstance(v, dict) and "bytes" in v:
        return f"<{v['bytes']} bytes>"
    return v


def events(table_path, xplane_path, check_steps):
    columns, rows, is_csv = read_table(table_path)
    have = collections.defaultdict(collections.Counter)
    for r in rows:
        key = (r["name"], _int(r["start_ps"]), _int(r["duration_ps"]), _str(r["hlo_op"]),
               _str(r["hlo_module"]), _str(r["tf_op"]), json.dumps(json.loads(r["stats"]), sort_keys=True))
        have[(r["plane"], r["line"])][key] += 1
    space = xspace_ref.read_xspace(xplane_path)
    mismatches = []
    n_events = matched = 0
    for plane in space.planes:
        for line in plane.lines:
            want = collections.Counter()
            for ev in line.events:
                st = {k: _norm(v) for k, v in xspace_ref.event_stats(plane, ev).items()}
                key = (xspace_ref.event_name(plane, ev), xspace_ref.event_start_ps(line, ev), ev.duration_ps,
                       st.get("hlo_op"), st.get("hlo_module"), st.get("tf_op"), json.dumps(st, sort_keys=True))
                want[key] += 1
            n_events += sum(want.values())
            got = have.get((plane.name, line.name), collections.Counter())
            matched += compare_counts(want, got, {"plane": plane.name, "line": line.name}, mismatches)
    out = {"rows": len(rows), "events": n_events, "matched": matched, "columns": columns,
           "mismatches": mismatches}
    if check_steps:
        steps = xspace_ref.steps(xplane_path)
        starts = [s["start_ps"] for s in steps]
        bad = checked = 0
        for r in rows:
            t = _int(r["start_ps"])
            i = bisect.bisect_right(starts, t) - 1
            want_step = None
            if i >= 0 and t < steps[i]["start_ps"] + steps[i]["duration_ps"]:
                want_step = steps[i]["step_num"]
            checked += 1
            if _int(r["step_num"]) != want_step:
                bad += 1
                if len(mismatches) < 20:
                    mismatches.append({"step_num": r["step_num"], "want": want_step, "start_ps": t})
        out["steps_checked"] = checked
        out["step_mismatches"] = bad
        out["rows_in_a_step"] = sum(1 for r in rows if _str(r["step_num"]) is not None)
    return out


def _cell_value(text, like):
    """A CSV cell parsed to compare with JSON value `like`."""
    if text == "":
        return "" if isinstance(like, str) else None
    if isinstance(like, bool):
        return {"true": True, "false": False}.get(text, text)
    if isinstance(like, int):
        return int(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, (list, dict)):
        return json.loads(text)
    return text


def compare_rows(table_path, analysis_path, key):
    columns, rows, is_csv = read_table(table_path)
    with open(analysis_path, encoding="utf-8") as f:
        expected = json.load(f)[key]
    mismatches = []
    exp_cols = list(expected[0].keys()) if expected else []
    if columns != exp_cols:
        mismatches.append({"columns": columns, "expected_columns": exp_cols})
    if len(rows) != len(expected):
        mismatches.append({"rows": len(rows), "expected": len(expected)})
    for i, (r, e) in enumerate(zip(rows, expected)):
        for c, want in e.items():
            got = r.get(c)
            if is_csv:
                got = _cell_value(got, want)
            elif isinstance(want, (list, dict)) and isinstance(got, str):
                got = json.loads(got)
            if isinstance(want, float) and isinstance(got, int):
                got = float(got)
            if got != want and len(mismatches) < 20:
                mismatches.append({"row": i, "column": c, "got": got, "want": want})
    return {"rows": len(rows), "expected": len(expected), "columns": columns, "mismatches": mismatches}


def schema(path):
    import pyarrow.parquet as pq
    f = pq.ParquetFile(path)
    s = f.schema_arrow
    return {"columns": [{"name": fl.name, "type": str(fl.type), "nullable": fl.nullable} for fl in s],
            "row_groups": f.metadata.num_row_groups, "rows": f.metadata.num_rows}


def sums(path):
    columns, rows, _ = read_table(path)
    acc = {}
    for r in rows:
        key = (r["module"], r["op"], r["program_id"])
        a = acc.setdefault(key, {"module": key[0], "op": key[1], "program_id": key[2],
                                 "count": 0, "duration_ps": 0, "self_ps": 0, "steps": set()})
        a["count"] += 1
        a["duration_ps"] += r["duration_ps"]
        a["self_ps"] += r["self_ps"]
        if r["step_num"] is not None:
            a["steps"].add(r["step_num"])
    out = []
    for a in acc.values():
        a["steps"] = sorted(a["steps"])
        out.append(a)
    return {"rows": len(rows), "sums": out}


def duckdb_query(folder, query):
    import duckdb
    con = duckdb.connect()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isdir(path):
            continue
        glob = os.path.join(path, "**", "*.parquet") if name != "runs" else os.path.join(path, "*.parquet")
        hive = "true" if name != "runs" else "false"
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{glob}', "
                    f"hive_partitioning = {hive}, union_by_name = true)")
    cur = con.execute(query)
    columns = [d[0] for d in cur.description]
    return {"columns": columns, "rows": [list(r) for r in cur.fetchall()]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("events")
    p.add_argument("table")
    p.add_argument("xplane")
    p.add_argument("--steps", action="store_true")
    p = sub.add_parser("rows")
    p.add_argument("table")
    p.add_argument("analysis")
    p.add_argument("key")
    p = sub.add_parser("schema")
    p.add_argument("table")
    p = sub.add_parser("sums")
    p.add_argument("table")
    p = sub.add_parser("duckdb")
    p.add_argument("folder")
    p.add_argument("query")
    a = ap.parse_args(argv)
    if a.cmd == "events":
        doc = events(a.table, a.xplane, a.steps)
    elif a.cmd == "rows":
        doc = compare_rows(a.table, a.analysis, a.key)
    elif a.cmd == "sums":
        doc = sums(a.table)
    elif a.cmd == "duckdb":
        doc = duckdb_query(a.folder, a.query)
    else:
        doc = schema(a.table)
    print(json.dumps(doc, separators=(",", ":"), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
