"""Analysis: thin wrappers over the Rust core (``stepscope._native``).

Every result is parsed from the JSON the Rust analysis serializes, which is the very
JSON ``stepscope <command> --json`` prints, so Python and the CLI cannot disagree.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import threading
import weakref
from typing import Any, Optional, Union
from urllib.parse import urlencode

from stepscope import _native, _picture


class Rows(list):
    """The rows of one analysis: a list of dicts with the CLI JSON's keys.

    ``raw`` is the whole document the CLI prints with ``--json`` (``schema`` and the
    fields beside the rows); ``to_pandas()`` gives a DataFrame when pandas is installed,
    ``to_arrow()`` a ``pyarrow.Table`` when pyarrow is.
    """

    def __init__(self, raw: dict, key: str):
        super().__init__(raw[key])
        self.raw = raw
        self.key = key

    @property
    def schema(self) -> str:
        return self.raw["schema"]

    def to_pandas(self):
        """The rows as a pandas DataFrame, one column per key."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("to_pandas() needs pandas — pip install pandas") from e
        return pandas.DataFrame(list(self))

    def to_arrow(self):
        """The rows as a ``pyarrow.Table``, one column per key (a key missing from a row
        is null there; lists, such as a line's ``stack``, stay lists), for Polars,
        DuckDB or Parquet."""
        try:
            import pyarrow
        except ImportError as e:
            raise ImportError("to_arrow() needs pyarrow — pip install pyarrow") from e
        keys = dict.fromkeys(k for r in self for k in r)
        return pyarrow.Table.from_pydict({k: [r.get(k) for r in self] for k in keys})

    def __repr__(self) -> str:
        return f"<stepscope {self.schema}: {len(self)} {self.key}>"

    #: The most rows a notebook shows (``to_pandas()`` has them all).
    HTML_ROWS = 50

    def _repr_html_(self) -> str:
        """The rows as an HTML table, for Jupyter: one column per key of plain values
        (lists and objects, such as a line's ``stack``, are left to ``to_pandas()``),
        the first ``HTML_ROWS`` rows."""
        import html

        shown = list(self)[: self.HTML_ROWS]
        cols = list(dict.fromkeys(k for r in shown for k, v in r.items() if not isinstance(v, (dict, list))))

        def cell(v) -> str:
            text = "" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
            return f"<td>{html.escape(text)}</td>"

        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(cell(r.get(c)) for c in cols) + "</tr>" for r in shown)
        more = len(self) - len(shown)
        note = f"<p>{more} more rows: <code>.to_pandas()</code> has them all</p>" if more > 0 else ""
        title = html.escape(f"stepscope {self.schema}: {len(self)} {self.key}")
        return f"<p><b>{title}</b></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


class Profile:
    """A decoded run. Made by :func:`stepscope.load`."""

    def __init__(self, native: Any, source: Optional[tuple] = None):
        self._native = native
        # (path, host, peak_flops, peak_bandwidth): what `timeline()` serves.
        self._source = source
        self._server: Optional[_Server] = None

    @property
    def run(self) -> str:
        """The run's name (its folder relative to the path loaded)."""
        return self._native.run

    @property
    def hosts(self) -> list:
        """The hosts read (one per profile file)."""
        return self._native.hosts

    def steps(self) -> Rows:
        """Every step: ``stepscope steps --json`` (rows: its ``steps``)."""
        return Rows(json.loads(self._native.steps_json()), "steps")

    def scopes(self) -> Rows:
        """Your host scopes (``TraceAnnotation``, ``stepscope.scope``, ``profile_scope``)
        nested, per step, with the device time each kept busy or launched:
        ``stepscope scopes --json`` (rows: its ``scopes``; ``.raw["input"]``: the
        step's input work)."""
        return Rows(json.loads(self._native.scopes_json()), "scopes")

    def summary(self, top: int = 10) -> dict:
        """The overview: ``stepscope summary --json --top TOP``."""
        return json.loads(self._native.summary_json(top))

    def ops(self, by: str = "op", depth: int = 0, top: Optional[int] = None) -> Rows:
        """The op profile: ``stepscope ops --json --by BY --depth DEPTH --top TOP``.

        ``by`` is ``"op"``, ``"category"``, ``"module"``, ``"scope"`` (JAX name
        scopes), ``"line"`` (the line of your Python that made each op, with its
        ``stack``) or ``"stack"`` (the whole Python stack); ``depth`` cuts scopes to
        that many levels (0: whole scope); ``top=None`` keeps every row.
        """
        return Rows(json.loads(self._native.ops_json(by, depth, top)), "ops")

    def roofline(self, top: Optional[int] = None) -> Rows:
        """The roofline: ``stepscope roofline --json --top TOP`` (rows: its ``ops``;
        ``raw["devices"]`` holds each device's roofs and where they were read)."""
        return Rows(json.loads(self._native.roofline_json(top)), "ops")

    def kernels(self, top: Optional[int] = None) -> Rows:
        """GPU kernels: ``stepscope kernels --json --top TOP`` (``top=None``: all)."""
        return Rows(json.loads(self._native.kernels_json(top)), "kernels")

    def memory(self, top: int = 10, pprof: Optional[Union[str, os.PathLike]] = None) -> dict:
        """Memory: ``stepscope memory --json --top TOP [--pprof FILE]`` (allocators,
        live allocations at the peak, the device-memory pprof by call site)."""
        return json.loads(self._native.memory_json(top, None if pprof is None else os.fspath(pprof)))

    def buffers(self, program: Optional[str] = None, memory_space: int = 0, top: Optional[int] = 10) -> Rows:
        """A program's memory as XLA planned it: ``stepscope buffers --json`` (rows: the
        buffers live at the peak; the dict has the allocations, the heap over program
        order and the peak). ``program``: a module name or ``jit_f(12)`` (default: the
        one that ran longest); ``top=None``: every buffer."""
        return Rows(json.loads(self._native.buffers_json(program, memory_space, top)), "live_at_peak")

    def hlo_graph(self, op: str, module: Optional[str] = None, depth: int = 2) -> dict:
        """An op's neighbourhood in its program: ``stepscope hlo OP --graph --json``
        (nodes with time and FLOPs, operand edges, the fusion body)."""
        return json.loads(self._native.hlo_graph_json(op, module, depth))

    def advise(self, **thresholds: float) -> Rows:
        """Findings: ``stepscope advise --json`` (rows: its ``findings``); keyword
        arguments override thresholds, e.g. ``advise(utilization_pct=70)``."""
        raw = self._native.advise_json(json.dumps(thresholds) if thresholds else None)
        return Rows(json.loads(raw), "findings")

    def whatif(self, edit: str) -> Rows:
        """What a change would gain: ``stepscope whatif --json EDIT`` (rows: each part
        of the step, measured and projected; the dict has the projected step,
        ``gain_ps``, ``gain_pct`` and the replay error). ``edit`` is in the CLI's words,
        e.g. ``"--remove callbacks"``, ``"--scale dot.31=0.5"``, ``"--jit"``; each
        finding of :meth:`advise` that names a fixable cause has one as ``gain_edit``."""
        return Rows(json.loads(self._native.whatif_json(edit)), "parts")

    def timeline(
        self,
        start_ps: Optional[int] = None,
        end_ps: Optional[int] = None,
        height: int = 600,
        interactive: bool = False,
        max_tracks: int = 24,
        max_rows: int = 4,
    ) -> "Timeline":
        """The timeline of this run from ``start_ps`` to ``end_ps`` (times as
        :meth:`steps` gives ``start_ps``; default: the whole run), for a notebook cell.

        Shown as a picture drawn in the cell itself (an SVG of the tracks with events in
        the window, at most ``max_tracks``, each at most ``max_rows`` rows deep; hover a
        box for its name and duration), so it renders wherever the notebook does: a
        remote Jupyter, JupyterHub, a saved notebook. ``interactive=True`` shows the web UI's timeline instead, as an
        ``<iframe>`` of a ``stepscope serve`` this profile starts on 127.0.0.1 (a free
        port, a random token path; the browser must run on the kernel's machine) and
        stops when the profile is dropped or Python exits. ``.url`` starts that server
        and gives its address either way."""
        window = json.loads(self._native.timeline_window_json(
            start_ps, end_ps, max_rows=int(max_rows), max_tracks=int(max_tracks)
        ))
        params = {"run": self.run}
        if self._source is not None and self._source[1] is not None:
            params["host"] = self._source[1]
        if start_ps is not None:
            params["start_ps"] = int(start_ps)
        if end_ps is not None:
            params["end_ps"] = int(end_ps)
        return Timeline(self, window, f"#/timeline?{urlencode(params)}", height, interactive)

    def _served(self) -> "_Server":
        """The ``stepscope serve`` of this profile's path, started on first use."""
        if self._source is None:
            raise _native.StepscopeError("the web timeline needs a profile made by stepscope.load(path)")
        path, _, peak_flops, peak_bandwidth = self._source
        if self._server is None:
            self._server = _Server(path, peak_flops, peak_bandwidth)
        return self._server

    def __repr__(self) -> str:
        return f"<stepscope.Profile run={self.run!r} hosts={self.hosts!r}>"


class Timeline:
    """A window of a run's timeline: ``window`` (the boxes drawn,
    ``stepscope.timeline_window/1``), shown in Jupyter as a picture in the cell, or
    with ``interactive`` as an ``<iframe>`` of the web UI at ``url``."""

    def __init__(self, profile: Profile, window: dict, route: str, height: int = 600, interactive: bool = False):
        self.window = window
        self.height = height
        self.interactive = interactive
        self._profile = profile
        self._route = route

    @property
    def url(self) -> str:
        """The web UI's timeline over this window, on a ``stepscope serve`` of the
        profile (started on first use; 127.0.0.1 of the machine Python runs on)."""
        return self._profile._served().url + self._route

    def _repr_html_(self) -> str:
        if not self.interactive:
            return _picture.html_of(self.window)
        src = html.escape(self.url, quote=True)
        return f'<iframe src="{src}" width="100%" height="{int(self.height)}" style="border:0"></iframe>'

    def __repr__(self) -> str:
        w = self.window
        return f"<stepscope.Timeline {w['run']} {w['start_ps']}..{w['end_ps']} ps, {len(w['tracks'])} tracks>"


class _Server:
    """`stepscope serve PATH --port 0 --no-open`, a child of this Python: its URL, read
    from the line it prints; stopped with its owner (or at exit)."""

    #: The longest wait for the server to say where it listens, seconds.
    START_S = 120

    def __init__(self, path: str, peak_flops: Optional[float], peak_bandwidth: Optional[float]):
        cmd = [sys.executable, "-m", "stepscope", "serve", path, "--port", "0", "--no-open"]
        if peak_flops is not None:
            cmd += ["--peak-flops", repr(float(peak_flops))]
        if peak_bandwidth is not None:
            cmd += ["--peak-bandwidth", repr(float(peak_bandwidth))]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self._finalizer = weakref.finalize(self, _stop, proc)
        found: list = []
        said: list = []

        def read():
            # Read every line (a full pipe would block the server), keeping the first URL.
            for line in proc.stdout:
                said.append(line.strip())
                if not found and line.startswith("stepscope: serving "):
                    found.append(line.split("serving ", 1)[1].strip())
                    ready.set()
            ready.set()

        ready = threading.Event()
        threading.Thread(target=read, daemon=True).start()
        ready.wait(self.START_S)
        if not found:
            self._finalizer()
            last = next((s for s in reversed(said) if s), "no answer")
            raise _native.StepscopeError(f"stepscope serve did not start: {last}")
        self.url: str = found[0]
        self.process = proc

    def stop(self) -> None:
        self._finalizer()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def load(
    path: Union[str, os.PathLike],
    run: Optional[str] = None,
    host: Optional[str] = None,
    peak_flops: Optional[float] = None,
    peak_bandwidth: Optional[float] = None,
) -> Profile:
    """Reads a profile, taking ``path`` as the CLI does.

    ``path`` is a log directory (its newest run, or the run named ``run``), a run
    folder, or one profile file (``.xplane.pb``, ``.trace.json.gz``, ...); ``host``
    keeps one host. ``peak_flops`` (FLOP/s) and ``peak_bandwidth`` (bytes/s) give the
    devices' peaks, as ``--peak-flops`` / ``--peak-bandwidth`` do: a CPU has none in
    its profile. Raises :class:`stepscope.StepscopeError` with the CLI's message.
    """
    text = os.fspath(path)
    native = _native.load(text, run, host, peak_flops, peak_bandwidth)
    # What `timeline()` serves: a local path made absolute (the server may start from
    # another folder), a bucket's as given.
    served = text if "://" in text else os.path.abspath(text)
    return Profile(native, (served, host, peak_flops, peak_bandwidth))


def diff(
    a: Union[Profile, str, os.PathLike], b: Union[Profile, str, os.PathLike], top: int = 10, by: str = "op"
) -> dict:
    """What changed from run ``a`` to run ``b``: ``stepscope diff A B --json --top TOP --by BY``.
    ``a`` and ``b`` are loaded profiles or paths; ``by`` groups the ops as
    :meth:`Profile.ops` does (``"scope"``, ``"line"``, …)."""
    pa = a if isinstance(a, Profile) else load(a)
    pb = b if isinstance(b, Profile) else load(b)
    return json.loads(_native.diff_json(pa._native, pb._native, top, by))
