"""One capture on ``jax.profiler``: start, stop, find the run folder, write the manifest.

Every capture helper (``trace``, ``profile_function``, ``Profiler``) goes through
:class:`Capture`, so they all name the run folder, refuse a second concurrent
capture, stop cleanly on exceptions and write the same manifest.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import platform
import re
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

from stepscope._native import StepscopeError, __version__

MANIFEST_NAME = "stepscope_manifest.json"
MANIFEST_SCHEMA = "stepscope.manifest/1"

_lock = threading.RLock()
_active: Optional["Capture"] = None
# Captures this process wrote, so timers can add sections that ended after the
# capture stopped (see stepscope._benchmark).
_written: list = []


def _jax():
    try:
        import jax
        import jax.profiler  # noqa: F401
    except ImportError as e:
        raise StepscopeError("capturing a profile needs JAX — pip install jax (or jax[cuda12], jax[tpu])") from e
    return jax


def block(outputs: Any) -> Any:
    """Waits until every JAX array in ``outputs`` (any pytree) is computed."""
    if outputs is None:
        return None
    jax = _jax()
    return jax.block_until_ready(outputs)


def drain() -> None:
    """Waits for the work already dispatched to every local device: a tiny computation
    is run on each, after what is queued there (a device runs its computations in
    order), and waited for; then JAX's effects. Costs a few tens of µs per device."""
    jax = _jax()
    for d in jax.local_devices():
        jax.block_until_ready(_tick(jax)(jax.device_put(0, d)))
    try:
        jax.effects_barrier()
    except Exception:
        pass


def settle() -> None:
    """Waits for the work already dispatched, without dispatching any: every live JAX
    array is waited for (the outputs of every computation still queued or running),
    then JAX's effects. Used inside a capture, where a computation of its own would
    appear in the profile; :func:`drain` is used before one starts."""
    jax = _jax()
    live = getattr(jax, "live_arrays", None)
    if live is not None:
        for a in live():
            try:
                a.block_until_ready()
            except Exception:
                pass  # deleted or donated meanwhile: nothing left to wait for
    else:
        drain()
    try:
        jax.effects_barrier()
    except Exception:
        pass


_tick_fn = None


def _tick(jax):
    global _tick_fn
    if _tick_fn is None:
        _tick_fn = jax.jit(lambda x: x + 1)
    return _tick_fn


def active_capture() -> Optional["Capture"]:
    """The capture running now in this process, if any."""
    return _active


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise StepscopeError(
            f"bad run name {name!r} — use letters, digits and . _ + - (it names a folder under plugins/profile/)"
        )
    return name


def local_log_dir(log_dir: Union[str, os.PathLike]) -> Path:
    """``log_dir`` as a local folder; a bucket's URL (``gs://…``, ``s3://…``) is refused
    in one line: ``Path`` would make ``gs://b/d`` the local folder ``gs:/b/d``."""
    text = os.fspath(log_dir)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "://" in text:
        raise StepscopeError(
            f"{text}: stepscope captures into a local folder, not a bucket — capture into a local folder and "
            f"copy it there (gsutil -m cp -r DIR {text}), or capture with jax.profiler.trace({text!r}) itself; "
            "stepscope reads gs:// and s3:// log directories as they are"
        )
    return Path(text)


class Capture:
    """One profile capture. ``path`` is the run folder once it has stopped.

    Use it as a context manager (``with stepscope.trace(...) as c:``) or call
    :meth:`start` and :meth:`stop`. The capture is stopped cleanly when the block
    raises; the exception goes on.
    """

    def __init__(
        self,
        log_dir: Union[str, os.PathLike],
        *,
        name: Optional[str] = None,
        create_perfetto_trace: bool = False,
        host_tracer_level: Optional[int] = None,
        device_tracer_level: Optional[int] = None,
        python_tracer_level: Optional[int] = None,
        profiler_options: Any = None,
        kind: str = "trace",
        extra: Optional[dict] = None,
    ):
        self.log_dir = local_log_dir(log_dir)
        #: A ``jax.profiler.ProfileOptions`` the capture starts from (copied, never changed).
        self.profiler_options = profiler_options
        self.name = None if name is None else _check_name(name)
        self.options = {
            "create_perfetto_trace": bool(create_perfetto_trace),
            "host_tracer_level": host_tracer_level,
            "device_tracer_level": device_tracer_level,
            "python_tracer_level": python_tracer_level,
        }
        for key in _LEVELS:
            v = self.options[key]
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise StepscopeError(f"{key}={v!r} is not a tracer level — use a whole number ≥ 0 or None")
        if profiler_options is not None:
            for key in _LEVELS:
                if self.options[key] is not None and hasattr(profiler_options, key):
                    raise StepscopeError(
                        f"{key} is given twice, as {key}= and in profiler_options — set it in one place"
                    )
        self.kind = kind
        self.extra = dict(extra or {})
        #: The run folder (``<log_dir>/plugins/profile/<run>``): known once started
        #: where the installed JAX lets stepscope name it, else set when stopped; the
        #: files are there once stopped.
        self.path: Optional[Path] = None
        #: The manifest file beside the profile, set when stopped.
        self.manifest_path: Optional[Path] = None
        #: Steps recorded while capturing: dicts with step_num, name, start/duration.
        self.steps: list = []
        #: ``"ExcType: message"`` when the capture ended because of an exception.
        self.error: Optional[str] = None
        self.started_unix_ns: Optional[int] = None
        self.stopped_unix_ns: Optional[int] = None
        self._t0 = 0
        self._duration_ns = 0
        self._before: set = set()
        self._chosen: Optional[str] = None
        self._jax_env: dict = {}

    @property
    def running(self) -> bool:
        return _active is self

    # -- start / stop ----------------------------------------------------------------

    def start(self) -> "Capture":
        global _active
        jax = _jax()
        with _lock:
            if _active is not None:
                raise StepscopeError(_already_running(_active))
            if self.started_unix_ns is not None:
                raise StepscopeError("this capture was already used — make a new one for each capture")
            profile_root = self.log_dir / "plugins" / "profile"
            self._before = _subdirs(profile_root)
            # Work dispatched before the capture runs before it, not in its first step.
            drain()
            opts = self._profile_options(jax)
            kwargs = {"create_perfetto_trace": self.options["create_perfetto_trace"]}
            if opts is not None:
                kwargs["profiler_options"] = opts
            try:
                jax.profiler.start_trace(str(self.log_dir), **kwargs)
            except RuntimeError as e:
                if "already" in str(e):
                    raise StepscopeError(
                        "a capture is already running (started with jax.profiler directly) — stop it first"
                    ) from e
                raise StepscopeError(f"jax.profiler could not start: {e} — check the log directory and JAX") from e
            self._jax_env = _environment(jax)
            self.started_unix_ns = time.time_ns()
            self._t0 = time.perf_counter_ns()
            _active = self
            # Where JAX will write, known from the start where the run folder is named
            # by us (JAX with session_id): usable inside the `with` block.
            if self._chosen is not None:
                self.path = (profile_root / self._chosen).absolute()
        return self

    def stop(self, error: Optional[BaseException] = None) -> Path:
        """Stops the capture, writes the manifest, prints where the profile is."""
        global _active
        jax = _jax()
        with _lock:
            if _active is not self:
                raise StepscopeError("this capture is not running — start it first")
            if error is not None:
                self.error = f"{type(error).__name__}: {error}"
            else:
                # The block's work, dispatched and maybe not run yet (JAX returns
                # before the device has run it), runs inside the capture.
                settle()
            self._duration_ns = time.perf_counter_ns() - self._t0
            self.stopped_unix_ns = time.time_ns()
            try:
                jax.profiler.stop_trace()
            except Exception as e:
                raise StepscopeError(f"jax.profiler could not write the profile: {e} — check the log directory") from e
            finally:
                _active = None
            self.path = self._find_run_dir()
            self.manifest_path = self.path / MANIFEST_NAME
            self.write_manifest()
            _written.append(self)
        cmd = f"stepscope summary {shlex.quote(str(self.path))}"
        print(f"stepscope: profile saved to {self.path} — look at it with: {cmd}", file=sys.stderr, flush=True)
        return self.path

    def __enter__(self) -> "Capture":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.running:
            self.stop(error=exc)
        return False

    # -- steps -----------------------------------------------------------------------

    def record_step(self, step_num: int, name: str, start_unix_ns: int, duration_ns: int) -> None:
        self.steps.append(
            {
                "step_num": step_num,
                "name": name,
                "start_unix_ns": start_unix_ns,
                "duration_ms": duration_ns / 1e6,
            }
        )

    # -- details ---------------------------------------------------------------------

    def _profile_options(self, jax):
        levels = {k: v for k, v in self.options.items() if k.endswith("_level") and v is not None}
        make = getattr(jax.profiler, "ProfileOptions", None)
        if make is None and self.profiler_options is not None:
            raise StepscopeError(
                f"the installed JAX {jax.__version__} has no jax.profiler.ProfileOptions — leave "
                "profiler_options unset, or upgrade jax"
            )
        if make is None:
            if levels or self.name is not None:
                what = ", ".join(list(levels) + (["name"] if self.name is not None else []))
                raise StepscopeError(
                    f"the installed JAX {jax.__version__} has no jax.profiler.ProfileOptions, so {what} "
                    "cannot be set — leave them unset, or upgrade jax"
                )
            return None
        opts = make()
        if self.profiler_options is not None:
            # The user's options, copied: the run folder's name set below stays ours.
            for key in _OPTION_FIELDS:
                if hasattr(self.profiler_options, key) and hasattr(opts, key):
                    setattr(opts, key, getattr(self.profiler_options, key))
        for key, v in levels.items():
            if not hasattr(opts, key):
                raise StepscopeError(
                    f"the installed JAX {jax.__version__} has no {key} option — leave it unset, or upgrade jax"
                )
            setattr(opts, key, v)
        if hasattr(opts, "session_id"):
            # The run folder's name: ours, so two captures in the same second (JAX's
            # default names are seconds) never share a folder.
            opts.session_id = self._run_name(self.log_dir / "plugins" / "profile")
        elif self.name is not None:
            raise StepscopeError(
                f"the installed JAX {jax.__version__} cannot name the run folder — leave name unset, or upgrade jax"
            )
        _warn_host_tracing_off(jax, opts)
        return opts

    def _run_name(self, profile_root: Path) -> str:
        if self.name is not None:
            if (profile_root / self.name).exists():
                raise StepscopeError(
                    f"{profile_root / self.name} already exists — pick another name, or leave name unset"
                )
            self._chosen = self.name
            return self.name
        base = time.strftime("%Y_%m_%d_%H_%M_%S")
        name, n = base, 1
        while (profile_root / name).exists():
            n += 1
            name = f"{base}_{n}"
        self._chosen = name
        return name

    def _find_run_dir(self) -> Path:
        root = self.log_dir / "plugins" / "profile"
        if self._chosen is not None and (root / self._chosen).is_dir():
            return (root / self._chosen).absolute()
        new = sorted(_subdirs(root) - self._before)
        if len(new) == 1:
            return (root / new[0]).absolute()
        dirs = [root / d for d in _subdirs(root)]
        if not dirs:
            raise StepscopeError(f"jax.profiler wrote no run folder under {root} — check that JAX can write there")
        return max(dirs, key=lambda d: d.stat().st_mtime).absolute()

    def manifest(self) -> dict:
        """The manifest as written beside the profile."""
        from stepscope._benchmark import timer_sections

        files = []
        if self.path is not None and self.path.is_dir():
            files = sorted(p.name for p in self.path.iterdir() if p.is_file() and p.name != MANIFEST_NAME)
        m = {
            "schema": MANIFEST_SCHEMA,
            "kind": self.kind,
            "run": self.path.name if self.path else None,
            "run_dir": str(self.path) if self.path else None,
            "log_dir": str(self.log_dir.absolute()),
            "files": files,
            "started_unix_ns": self.started_unix_ns,
            "stopped_unix_ns": self.stopped_unix_ns,
            "duration_ms": self._duration_ns / 1e6,
            "steps": self.steps,
            "step_nums": [s["step_num"] for s in self.steps],
            "options": self.options,
            "error": self.error,
            "timers": timer_sections(),
            "command": f"stepscope summary {shlex.quote(str(self.path))}" if self.path else None,
            "stepscope_version": __version__,
            "python_version": platform.python_version(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "argv": list(sys.argv),
        }
        m.update(self._jax_env)
        m.update(self.extra)
        return m

    def write_manifest(self) -> None:
        if self.manifest_path is None:
            return
        tmp = self.manifest_path.with_name("." + MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(self.manifest(), indent=2) + "\n")
        os.replace(tmp, self.manifest_path)

    def __repr__(self) -> str:
        state = "running" if self.running else (f"saved to {self.path}" if self.path else "not started")
        return f"<stepscope.Capture {state}>"


def _already_running(c: "Capture") -> str:
    return f"a capture is already running (into {c.log_dir}) — stop it before starting another; one capture at a time"


def _subdirs(root: Path) -> set:
    try:
        return {p.name for p in root.iterdir() if p.is_dir()}
    except OSError:
        return set()


def _environment(jax) -> dict:
    env = {"jax_version": getattr(jax, "__version__", None)}
    try:
        import jaxlib

        env["jaxlib_version"] = getattr(jaxlib, "__version__", None)
    except ImportError:
        env["jaxlib_version"] = None
    try:
        env["backend"] = jax.default_backend()
        kinds: dict = {}
        for d in jax.devices():
            kinds[d.device_kind] = kinds.get(d.device_kind, 0) + 1
        env["devices"] = [{"kind": k, "count": n} for k, n in kinds.items()]
    except Exception:  # a broken backend must not lose the profile
        env["backend"] = None
        env["devices"] = []
    return env


@atexit.register
def _stop_at_exit() -> None:
    c = _active
    if c is not None:
        try:
            c.stop(error=RuntimeError("the program exited while the capture was running"))
        except Exception:
            pass


_LEVELS = ("host_tracer_level", "device_tracer_level", "python_tracer_level")


def _warn_host_tracing_off(jax, opts) -> None:
    """On CPU, XLA records its ops as host events: with host_tracer_level=0 the capture
    will hold no op, no step annotation and no launch. Said once, at the start."""
    if getattr(opts, "host_tracer_level", None) != 0:
        return
    try:
        backend = jax.default_backend()
    except Exception:  # no backend: JAX says so itself at the first call
        return
    if backend == "cpu":
        print(
            "stepscope: warning: host_tracer_level=0 on CPU: XLA:CPU records its ops, your steps and scopes as host "
            "events, so this capture will hold none of them — use host_tracer_level=2 (the default), or 1",
            file=sys.stderr,
        )

# ``jax.profiler.ProfileOptions`` fields a capture copies from ``profiler_options``
# (those the installed JAX has).
_OPTION_FIELDS = _LEVELS + (
    "start_timestamp_ns",
    "duration_ms",
    "include_dataset_ops",
    "enable_hlo_proto",
    "raise_error_on_start_failure",
    "advanced_configuration",
)

# -- public helpers ----------------------------------------------------------------------


def trace(
    log_dir: Union[str, os.PathLike],
    *,
    name: Optional[str] = None,
    create_perfetto_trace: bool = False,
    host_tracer_level: Optional[int] = None,
    device_tracer_level: Optional[int] = None,
    python_tracer_level: Optional[int] = None,
    profiler_options: Any = None,
) -> Capture:
    """A context manager that captures a profile into ``log_dir``.

    After the block, ``.path`` is the run folder (``<log_dir>/plugins/profile/<run>``,
    ``<run>`` being ``name`` or the start time). Tracer levels left ``None`` keep
    JAX's defaults; a level the installed JAX does not know raises StepscopeError.
    ``profiler_options`` takes a ``jax.profiler.ProfileOptions`` (as
    ``jax.profiler.trace`` does); the tracer levels may be given there instead.
    """
    return Capture(
        log_dir,
        name=name,
        create_perfetto_trace=create_perfetto_trace,
        host_tracer_level=host_tracer_level,
        device_tracer_level=device_tracer_level,
        python_tracer_level=python_tracer_level,
        profiler_options=profiler_options,
    )


#: The user guides' name for :func:`trace`: ``with profile_trace("./profiles", name="train_step"):``.
profile_trace = trace


class ProfileContext(Capture):
    """The user guides' one-off capture, ``with ProfileContext("./traces"):``: a
    :class:`Capture` (the same keyword arguments as :func:`trace`)."""


def scope(name: str, **annotations: Any):
    """A named region on the host timeline (``jax.profiler.TraceAnnotation``);
    keyword arguments become the event's stats. Scopes nest."""
    return _jax().profiler.TraceAnnotation(name, **annotations)


#: The user guides' name for :func:`scope`: ``with profile_scope("data_loading"):``.
profile_scope = scope


class step:
    """Marks one training step (``jax.profiler.StepTraceAnnotation(name, step_num=...)``).

    The analyses take step boundaries from it. Inside a capture the step's number and
    wall time also go into the capture's manifest.
    """

    def __init__(self, step_num: int, name: str = "train"):
        if not isinstance(step_num, int) or isinstance(step_num, bool) or step_num < 0:
            raise StepscopeError(f"step_num={step_num!r} is not a step number — use a whole number ≥ 0")
        self.step_num = step_num
        self.name = name
        self._ann = None

    def __enter__(self) -> "step":
        self._capture = _active
        self._ann = _jax().profiler.StepTraceAnnotation(self.name, step_num=self.step_num)
        self._ann.__enter__()
        self._start_unix_ns = time.time_ns()
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        duration_ns = time.perf_counter_ns() - self._t0
        self._ann.__exit__(exc_type, exc, tb)
        if self._capture is not None and self._capture is _active:
            self._capture.record_step(self.step_num, self.name, self._start_unix_ns, duration_ns)
        return False


def profile_function(
    log_dir: Union[str, os.PathLike],
    warmup: Optional[int] = None,
    *,
    warmup_steps: Optional[int] = None,
    **trace_options: Any,
) -> Callable:
    """Decorator: the first ``warmup`` calls (3 by default; ``warmup_steps``, the user
    guides' name, is the same) run unprofiled (their outputs waited for), the next
    call is captured into ``log_dir`` with its outputs waited for inside the capture,
    later calls run unprofiled. ``fn.capture`` is the :class:`Capture` once taken
    (``fn.capture.path``: the run folder). ``trace_options`` are :func:`trace`'s,
    checked here, at decoration, not at the captured call."""
    if warmup is not None and warmup_steps is not None:
        raise StepscopeError("warmup and warmup_steps are the same setting — give one")
    warmup = 3 if warmup is None and warmup_steps is None else (warmup if warmup is not None else warmup_steps)
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise StepscopeError(f"warmup={warmup!r} — use a whole number of calls ≥ 0")
    unknown = sorted(set(trace_options) - set(inspect.signature(trace).parameters) - {"log_dir"})
    if unknown:
        raise StepscopeError(
            f"profile_function got unknown option(s) {', '.join(unknown)} — it takes warmup (or warmup_steps) "
            "and trace()'s options: name, create_perfetto_trace, host_tracer_level, device_tracer_level, "
            "python_tracer_level, profiler_options"
        )
    Capture(log_dir, **trace_options)  # checks the options' values now

    def decorate(fn: Callable) -> Callable:
        calls = 0

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            n = calls
            calls += 1
            if n != warmup:
                out = fn(*args, **kwargs)
                if n < warmup:
                    block(out)
                return out
            c = Capture(log_dir, kind="profile_function", extra={"function": fn.__qualname__}, **trace_options)
            with c:
                with scope(fn.__qualname__):
                    out = fn(*args, **kwargs)
                    block(out)
            wrapper.capture = c
            return out

        wrapper.capture = None
        return wrapper

    return decorate
