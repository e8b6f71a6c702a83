"""The profile's tables as Parquet (``stepscope tables``): on this machine, or on a Ray
cluster with one task per host file, for pods and fleets (docs/scale.md).

Both write the same folder, file for file: ``OUT/<table>/run=…/host=…/part-0.parquet``,
the ``runs`` table and ``stepscope_tables.json``. Read it with ``stepscope sql``,
DuckDB, Polars, Spark or pyarrow.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from stepscope._command import stepscope as _stepscope
from stepscope._native import StepscopeError


def summary_by_host(path: str, *, run: Optional[str] = None, top: int = 10) -> dict:
    """The run's summary read one host at a time: ``stepscope summary PATH
    --host-at-a-time --json``. Its numbers and findings are those of
    ``load(path).summary()`` in one host's memory, for a pod's run that :func:`load`
    refuses as too large to hold (docs/scale.md); ``read_a_host_at_a_time`` is true."""
    args = ["summary", os.fspath(path), "--host-at-a-time", "--top", str(top), "--json"]
    if run is not None:
        args += ["--run", run]
    return json.loads(_stepscope(*args))


def summary_per_host(path: str, *, run: Optional[str] = None, top: int = 10) -> dict:
    """Each host's own summary and how the hosts spread: ``stepscope summary PATH
    --per-host --json`` (``stepscope.summary_hosts/1``). The hosts are read one at a
    time, so a pod's run takes one host's memory where :func:`load` holds every host
    (and refuses a run that does not fit, docs/scale.md)."""
    args = ["summary", os.fspath(path), "--per-host", "--top", str(top), "--json"]
    if run is not None:
        args += ["--run", run]
    return json.loads(_stepscope(*args))


def write_tables(path: str, out: str, *, run: Optional[str] = None, host: Optional[str] = None) -> dict:
    """Writes the tables of every run under ``path`` (or of ``run``) into the folder
    ``out`` (or a bucket's ``gs://``/``s3://`` prefix), a host at a time; returns the
    manifest. With ``host``, only that host's
    tables are written (no manifest, and ``None`` is returned): the unit of work
    :func:`write_tables_on_ray` hands each task."""
    args = ["tables", os.fspath(path), "-o", os.fspath(out)]
    if run is not None:
        args += ["--run", run]
    if host is not None:
        _stepscope(*args, "--host", host)
        return None
    return json.loads(_stepscope(*args, "--json"))


def _host_task(path: str, out: str, run: str, host: str) -> str:
    # On a Ray worker: one host's tables, written where every worker can reach.
    write_tables(path, out, run=run, host=host)
    return host


def write_tables_on_ray(
    path: str, out: str, *, run: Optional[str] = None, num_cpus: float = 1
) -> dict:
    """:func:`write_tables` on a Ray cluster: one task per host file (each needing
    ``num_cpus``), then the runs table and the manifest here. ``path`` and ``out`` must be
    reachable from every node under the same names: a bucket's ``gs://``/``s3://``
    prefix (each node's credentials), or a shared filesystem. Uses the cluster ``ray.init()``
    connected to; without one, Ray starts a local one. Returns the manifest, equal to
    :func:`write_tables`'s."""
    try:
        import ray
    except ImportError as e:
        raise StepscopeError("write_tables_on_ray needs Ray — pip install ray") from e
    path, out = os.fspath(path), os.fspath(out)
    listed = json.loads(_stepscope("ls", path, "--json"))["runs"]
    if run is not None:
        listed = [r for r in listed if r["run"] == run]
        if not listed:
            raise StepscopeError(f"no run named {run!r} under {path} — `stepscope ls {path}` lists them")
    if not listed:
        raise StepscopeError(f"no profile found under {path} — point at the folder given to jax.profiler.trace")
    task = ray.remote(num_cpus=num_cpus)(_host_task)
    refs = [task.remote(path, out, r["run"], h) for r in listed for h in r["hosts"]]
    ray.get(refs)
    args = ["tables", path, "-o", out, "--index"]
    if run is not None:
        args += ["--run", run]
    return json.loads(_stepscope(*args, "--json"))
