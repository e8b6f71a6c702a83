#!/usr/bin/env python3
"""Run one XProf converter (`xprof.convert.raw_to_tool_data.xspace_to_tool_data`)
on an XSpace file and print how long the conversion took.

    python bench/xprof_convert.py FILE.xplane.pb TOOL

TOOL is an XProf tool name: overview_page, op_profile, trace_viewer@, … . Run it on
a COPY of the run folder: XProf writes cached results beside the profile. Prints
`tool=… convert_s=… bytes=… peak_rss_mb=…` on one line.
"""
import resource
import sys
import time


def main():
    path, tool = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    from xprof.convert import raw_to_tool_data  # noqa: E402

    t_import = time.perf_counter() - t0
    params = {"use_saved_result": False, "trace_viewer_options": {}, "hosts": []}
    t0 = time.perf_counter()
    data, _content_type = raw_to_tool_data.xspace_to_tool_data([path], tool, params)
    dt = time.perf_counter() - t0
    size = len(data) if data is not None else 0
    if size == 0:
        print(f"tool={tool} produced no data", file=sys.stderr)
        sys.exit(1)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"tool={tool} import_s={t_import:.3f} convert_s={dt:.3f} bytes={size} peak_rss_mb={rss:.0f}")


if __name__ == "__main__":
    main()
