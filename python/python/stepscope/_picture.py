"""A timeline window drawn as one self-contained SVG: what a notebook cell shows
wherever the notebook is rendered (a remote Jupyter, JupyterHub, VS Code, a saved
.ipynb on GitHub), with no server behind it. The boxes are the Rust core's
(``stepscope.timeline_window/1``): a track's events over the window, those under a
pixel merged as the web timeline merges them."""

from __future__ import annotations

import html
import zlib

#: Pixels: the label column, a depth row, the gap between tracks, the axis.
LABEL_PX = 230
ROW_PX = 14
GAP_PX = 6
AXIS_PX = 22
#: Room right of the window for the last tick's label.
RIGHT_PX = 40
#: Time units, largest first, with their picoseconds.
UNITS = (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3), ("ps", 1.0))


def _colour(name: str) -> str:
    """A stable colour per name (the same op is the same colour in every cell)."""
    h = zlib.crc32(name.encode()) % 360
    return f"hsl({h},55%,62%)"


def _duration(ps: float) -> str:
    unit, scale = next(((u, s) for u, s in UNITS if abs(ps) >= s), UNITS[-1])
    return f"{ps / scale:.3g} {unit}"


def _ticks(span_ps: int) -> tuple[float, str, float]:
    """A tick spacing (ps) of 1, 2 or 5 times a power of ten that gives 5 to 10
    ticks over ``span_ps``, with the unit its labels are in and that unit's ps."""
    step = 1.0
    while span_ps / step > 10:
        for m in (2, 2.5, 2):
            step *= m
            if span_ps / step <= 10:
                break
    unit, scale = next((u, s) for u, s in UNITS if step >= s)
    return step, unit, scale


def _track(t: dict, y: int, start: int, end: int, per_px: float) -> tuple[list, int]:
    """One track's label and boxes from height ``y``, and the height below them."""
    track, tile = t["track"], t["tile"]
    label = f"{track['host']} {track['plane']} · {track['line']}"
    out = [
        f'<text x="4" y="{y + ROW_PX - 3}" font-size="11"><title>{html.escape(label)}</title>'
        f"{html.escape(_cut(label, 36))}</text>"
    ]
    names = tile["names"]
    for depth, s, d, n, count in zip(
        tile["box_depth"], tile["box_start_ps"], tile["box_duration_ps"], tile["box_name"], tile["box_count"]
    ):
        x0, x1 = max(s, start), min(s + d, end)
        x = LABEL_PX + (x0 - start) / per_px
        w = max((x1 - x0) / per_px, 0.5)
        top = y + depth * ROW_PX
        name = names[str(n)]
        tip = f"{name} — {_duration(d)}" if count == 1 else f"{count} events from {name} — {_duration(d)}"
        out.append(
            f'<rect x="{x:.2f}" y="{top}" width="{w:.2f}" height="{ROW_PX - 1}" '
            f'fill="{_colour(name)}"><title>{html.escape(tip)}</title></rect>'
        )
        if w > 40:
            out.append(
                f'<text x="{x + 2:.2f}" y="{top + ROW_PX - 4}" font-size="9" '
                f'pointer-events="none">{html.escape(_cut(name, int(w / 5.5)))}</text>'
            )
    rows = max(tile["box_depth"], default=0) + 1
    return out, y + rows * ROW_PX + GAP_PX


def svg(window: dict) -> str:
    """The window as an SVG element: a row of boxes per depth row of each track, its
    name at the left; each box's tooltip names it, with its duration (or, for boxes
    merged below a pixel, how many events it stands for)."""
    px, start, end = window["px"], window["start_ps"], window["end_ps"]
    per_px = (end - start) / px
    boxes = []
    y = AXIS_PX
    for t in window["tracks"]:
        drawn, y = _track(t, y, start, end, per_px)
        boxes += drawn
    step, unit, scale = _ticks(end - start)
    grid = []
    k = 0
    while k * step <= end - start:
        x = LABEL_PX + k * step / per_px
        grid.append(f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{AXIS_PX - 4}" y2="{y}" stroke="#ddd"/>')
        grid.append(f'<text x="{x + 2:.2f}" y="{AXIS_PX - 8}" font-size="10">{k * step / scale:g} {unit}</text>')
        k += 1
    width = LABEL_PX + px + RIGHT_PX
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {y}" width="100%" '
        f'style="font-family:sans-serif;max-width:{width}px">{"".join(grid)}{"".join(boxes)}</svg>'
    )


def _cut(s: str, n: int) -> str:
    """``s`` at most ``n`` characters, cut in the middle."""
    if len(s) <= n:
        return s
    if n < 5:
        return s[: max(n, 0)]
    half = (n - 1) // 2
    return s[:half] + "…" + s[len(s) - (n - 1 - half):]


def html_of(window: dict) -> str:
    """The SVG with a line that says what it shows and how to open the interactive one."""
    shown = len(window["tracks"])
    more = window["tracks_left_out"]
    span = _duration(window["end_ps"] - window["start_ps"])
    note = (
        f"{html.escape(window['run'])}: {span} from {window['start_ps']} ps, {shown} tracks"
        + (f" ({more} more not drawn: narrow the window or raise max_tracks)" if more else "")
        + ". Hover a box for its name and duration; <code>interactive=True</code> opens the web"
        " timeline (a local server, on the kernel's machine)."
    )
    return f"<div>{svg(window)}<p style='font-size:12px'>{note}</p></div>"
