"""Analysis: thin wrappers over the Rust core (``stepscope._native``).

Every result is parsed from the JSON the Rust analysis serializes, which is the very
JSON ``stepscope <command> --json`` prints, so Python and the CLI cannot disagree.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

from stepscope import _native


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

    def __init__(self, native: Any):
        self._native = native

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

    def advise(self, **thresholds: float) -> Rows:
        """Findings: ``stepscope advise --json`` (rows: its ``findings``); keyword
        arguments override thresholds, e.g. ``advise(utilization_pct=70)``."""
        raw = self._native.advise_json(json.dumps(thresholds) if thresholds else None)
        return Rows(json.loads(raw), "findings")

    def __repr__(self) -> str:
        return f"<stepscope.Profile run={self.run!r} hosts={self.hosts!r}>"


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
    return Profile(_native.load(os.fspath(path), run, host, peak_flops, peak_bandwidth))


def diff(
    a: Union[Profile, str, os.PathLike], b: Union[Profile, str, os.PathLike], top: int = 10, by: str = "op"
) -> dict:
    """What changed from run ``a`` to run ``b``: ``stepscope diff A B --json --top TOP --by BY``.
    ``a`` and ``b`` are loaded profiles or paths; ``by`` groups the ops as
    :meth:`Profile.ops` does (``"scope"``, ``"line"``, …)."""
    pa = a if isinstance(a, Profile) else load(a)
    pb = b if isinstance(b, Profile) else load(b)
    return json.loads(_native.diff_json(pa._native, pb._native, top, by))
