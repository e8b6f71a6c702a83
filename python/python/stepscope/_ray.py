"""A run's answer on a Ray cluster, one task a host (docs/scale.md, "On Ray").

Each task maps its host where its file lives (``stepscope part``: the host read alone
and reduced to the part the run's answer merges from, a few hundred kB for a 120 MB
capture); the driver writes the parts into a folder and reduces them
(``stepscope summary --parts``), for what ``stepscope summary PATH --json`` prints
of the run read on one machine, byte for byte.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Optional, Union

from stepscope._command import stepscope as _stepscope
from stepscope._native import StepscopeError

#: Per command :func:`analyze_on_ray` reduces from its hosts' parts, the options it
#: takes: each one's flag, and whether the map must be given it too (a setting of the
#: part) or only the reduce.
OPTIONS = {
    "summary": {"top": ("--top", False), "peak_flops": ("--peak-flops", True),
                "peak_bandwidth": ("--peak-bandwidth", True)},
    "advise": {"thresholds": ("--thresholds", True), "peak_flops": ("--peak-flops", True),
               "peak_bandwidth": ("--peak-bandwidth", True)},
    "steps": {"critical_path": ("--critical-path", True), "top": ("--top", False),
              "peak_flops": ("--peak-flops", True), "peak_bandwidth": ("--peak-bandwidth", True)},
    "devices": {},
    "ops": {"by": ("--by", True), "depth": ("--depth", True), "top": ("--top", False),
            "min_self": ("--min-self", False), "peak_flops": ("--peak-flops", True),
            "peak_bandwidth": ("--peak-bandwidth", True)},
    "check": {"baseline": ("--baseline", False), "max_step_ms": ("--max-step-ms", False),
              "max_regression": ("--max-regression", False), "metrics": ("--metrics", False),
              "min_steps": ("--min-steps", False)},
    # `other=` is run B (``path`` is A); `by=` groups both rounds of the map.
    "diff": {"other": (None, False), "by": ("--by", True), "top": ("--top", False)},
}
COMMANDS = tuple(OPTIONS)


def _flags(command: str, options: dict) -> tuple:
    """The flags of `options` the map and the reduce share, and the reduce's own."""
    takes = OPTIONS[command]
    shared, own = [], []
    for name, value in options.items():
        if name not in takes:
            named = ", ".join(f"{k}=" for k in takes) or "none"
            raise StepscopeError(f"{command} takes no option {name}= — its options: {named}")
        flag, for_map = takes[name]
        if value is None or value is False or flag is None:
            continue
        words = [flag] if value is True else [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
        (shared if for_map else own).extend(words)
    return shared, own


def _map_host(path: str, run: str, host: str, kind: str, shared: list) -> tuple:
    # On a Ray worker: the host's part, or the one-line error that says why it could
    # not be read (the reduce leaves the host out, as the run read here would); None
    # where the node had no room for it (the driver stops: a host left out for want of
    # memory would change the answer).
    try:
        args = ["part", path, "--run", run, "--host", host, "--for", kind, "-o", "-", *shared]
        return True, _stepscope(*args, stdout_bytes=True)
    except StepscopeError as e:
        refused = "needs about" in str(e) and "STEPSCOPE_MEMORY_LIMIT" in str(e)
        return (None if refused else False), str(e)


def _mapped(refs: list) -> list:
    """The tasks' answers; a StepscopeError where a node had no room for its host."""
    import ray

    answers = ray.get(refs)
    for ok, body in answers:
        if ok is None:
            raise StepscopeError(f"{body} (on a Ray node: give its tasks more memory, or the nodes more room)")
    return answers


def _whole(path: str, command: str, args: list) -> str:
    # On a Ray worker: the command of a run of one host, read there whole.
    return _stepscope(command, path, "--json", *args)


def analyze_on_ray(
    path: Union[str, os.PathLike],
    command: str = "summary",
    *,
    run: Optional[str] = None,
    num_cpus: float = 1,
    max_retries: int = 3,
    text: bool = False,
    **options,
) -> Union[dict, str]:
    """``stepscope COMMAND PATH --json`` of a run of many hosts, mapped on a Ray
    cluster: one task per host (each needing ``num_cpus``) reads its host where it lives
    and returns its part; the driver reduces the parts. Returns what the command's
    ``--json`` prints of the run read on one machine (with ``text=True``, that text,
    byte for byte; else parsed).

    ``command`` is one of :data:`COMMANDS`; ``options`` are its flags by their Python
    names (:data:`OPTIONS`): ``summary`` ``top=``; ``advise`` ``thresholds=`` (a TOML
    file); ``steps`` ``critical_path=True``, ``top=``; ``ops`` ``by=``, ``depth=``,
    ``top=``, ``min_self=``; all but ``devices`` and ``check`` ``peak_flops=``/
    ``peak_bandwidth=`` (``"989T"``); ``check`` ``baseline=``, ``max_step_ms=``,
    ``max_regression=``, ``metrics=``, ``min_steps=`` (a failed gate is an answer:
    its ``"passed"`` is false); ``diff`` ``other=`` (run B: ``path`` is run A), ``by=``,
    ``top=``, mapped in two rounds (each host's steps first, then its op rows within
    the run's steps). ``path`` must be reachable by the same name from every node and the
    driver: a bucket's ``gs://``/``s3://`` prefix (each node's credentials) or a shared
    filesystem. A task whose worker dies is retried by Ray (``max_retries``); a host
    whose file cannot be read is left out and named (``hosts_unread`` in a summary, and
    a note), as the command leaves it out. Uses the cluster ``ray.init()`` connected to;
    without one, Ray starts a local one."""
    if command not in OPTIONS:
        raise StepscopeError(f"analyze_on_ray runs {', '.join(COMMANDS)}, not {command!r} — pick one of them")
    try:
        import ray
    except ImportError as e:
        raise StepscopeError("analyze_on_ray needs Ray — pip install ray") from e
    path = os.fspath(path)
    shared, own = _flags(command, options)
    if command == "diff":
        if options.get("other") is None or run is not None:
            raise StepscopeError("diff needs other= (run B; path is run A), and no run= — give each run's folder")
        task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_map_host)
        out = _diff(task, path, os.fspath(options["other"]), shared, own)
        return out if text else json.loads(out)
    plan = json.loads(_stepscope("part", path, "--plan", *(["--run", run] if run is not None else [])))
    run_name, hosts = plan["run"], plan["hosts"]
    if len(hosts) == 1:
        # One host: nothing to reduce; the command reads it on a node, whole.
        task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_whole)
        out = ray.get(task.remote(path, command, ["--run", run_name, *shared, *own]))
    else:
        task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_map_host)
        mapped = _mapped([task.remote(path, run_name, h, command, shared) for h in hosts])
        with tempfile.TemporaryDirectory(prefix="stepscope-parts-") as parts:
            _write_parts(parts, "part", mapped)
            out = _stepscope(command, path, "--run", run_name, "--json", "--parts", parts, *shared, *own)
    return out if text else json.loads(out)


def _write_parts(folder: str, suffix: str, mapped: list) -> list:
    """The tasks' answers as `host-I.<suffix>` (a part) or `host-I.unread` (its error)
    in `folder`; the places of the hosts mapped."""
    ok_hosts = []
    for i, (ok, body) in enumerate(mapped):
        with open(os.path.join(folder, f"host-{i}.{suffix}" if ok else f"host-{i}.unread"), "wb") as f:
            f.write(body if ok else body.encode())
        if ok:
            ok_hosts.append(i)
    return ok_hosts


def _diff(task, a: str, b: str, shared: list, own: list) -> str:
    """`stepscope diff A B --json` from parts mapped in two rounds: each host's first
    part (its steps' span and scopes), then, given its run's steps' span, its op rows
    within it (its kernels and memory peak with them)."""
    import ray

    runs = []
    for path in (a, b):
        plan = json.loads(_stepscope("part", path, "--plan"))
        runs.append((path, plan["run"], plan["hosts"]))
    with tempfile.TemporaryDirectory(prefix="stepscope-parts-") as parts:
        folders = [os.path.join(parts, side) for side in ("a", "b")]
        refs = [[task.remote(path, run, h, "diff", []) for h in hosts] for path, run, hosts in runs]
        second = []
        for (path, run, hosts), folder, side_refs in zip(runs, folders, refs):
            os.mkdir(folder)
            mapped = _write_parts(folder, "part", _mapped(side_refs))
            span = json.loads(_stepscope("part", path, "--run", run, "--span-of", folder))["span"]
            within = ["--within", f"{span[0]},{span[1]}"] if span else []
            second.append([(i, task.remote(path, run, hosts[i], "diff-rows", [*shared, *within])) for i in mapped])
        for folder, side in zip(folders, second):
            for (i, _), (ok, body) in zip(side, _mapped([ref for _, ref in side])):
                if ok:
                    with open(os.path.join(folder, f"host-{i}.rows"), "wb") as f:
                        f.write(body)
        return _stepscope("diff", a, b, "--json", "--parts-a", folders[0], "--parts-b", folders[1], *shared, *own)
