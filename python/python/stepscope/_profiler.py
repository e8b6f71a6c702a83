"""``Profiler``: capture chosen training steps, on a schedule or on request."""

from __future__ import annotations

import atexit
import os
import sys
import warnings
from typing import Any, Callable, Optional, Union

from stepscope._capture import Capture, _already_running, active_capture, block, local_log_dir, settle, step
from stepscope._native import StepscopeError


def _whole(name: str, v: Any, low: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise StepscopeError(f"{name}={v!r} — use a whole number ≥ {low}")
    return v


class Schedule:
    """Which steps to capture: ``start_step`` … ``start_step + num_steps - 1``, and
    again every ``every`` steps when set, ``repeat`` captures in all (``0``: no limit;
    default: 1 without ``every``, no limit with it). ``schedule(n)`` is True for a
    captured step. ``start_step=None``: none (captures only when asked for, with
    ``capture_async``, of ``num_steps`` steps)."""

    def __init__(self, start_step: Optional[int] = 0, num_steps: int = 5, every: Optional[int] = None,
                 repeat: Optional[int] = None):
        self.start_step = None if start_step is None else _whole("start_step", start_step, 0)
        self.num_steps = _whole("num_steps", num_steps, 1)
        # every=0: once (as the user guides' PROFILE_INTERVAL=0).
        self.every = None if every is None or every == 0 else _whole("every", every, 1)
        if self.every is not None and self.every < self.num_steps:
            raise StepscopeError(
                f"every={every} is shorter than num_steps={num_steps} — captures would overlap; "
                "use every ≥ num_steps"
            )
        if repeat is None:
            repeat = 1 if self.every is None else 0
        self.repeat = _whole("repeat", repeat, 0)
        if self.every is None and self.repeat != 1:
            raise StepscopeError(f"repeat={repeat} needs every=N (the steps between capture starts)")

    def window_of(self, step_num: int) -> Optional[int]:
        """The index of the capture that holds ``step_num``, or None."""
        if self.start_step is None:
            return None
        off = step_num - self.start_step
        if off < 0:
            return None
        if self.every is None:
            return 0 if off < self.num_steps else None
        k, within = divmod(off, self.every)
        if self.repeat and k >= self.repeat:
            return None
        return k if within < self.num_steps else None

    def window(self, k: int) -> tuple:
        """The first and one-past-last step of capture ``k``."""
        first = (self.start_step or 0) + k * (self.every or 0)
        return first, first + self.num_steps

    def __call__(self, step_num: int) -> bool:
        return self.window_of(step_num) is not None

    def as_dict(self) -> dict:
        return {"start_step": self.start_step, "num_steps": self.num_steps, "every": self.every,
                "repeat": self.repeat}

    def __repr__(self) -> str:
        return "stepscope.Schedule(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"


def schedule(wait: int, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """PyTorch-style schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle
    steps, ``warmup`` steps, ``active`` captured steps; ``repeat`` cycles (0: no
    limit). JAX has no warm tracer, so warm-up steps simply run uncaptured."""
    wait = _whole("wait", wait, 0)
    warmup = _whole("warmup", warmup, 0)
    active = _whole("active", active, 1)
    skip_first = _whole("skip_first", skip_first, 0)
    return Schedule(start_step=skip_first + wait + warmup, num_steps=active, every=wait + warmup + active,
                    repeat=_whole("repeat", repeat, 0))


class _Step:
    """One step of a :class:`Profiler` (``with prof.step() as s``). Set ``s.outputs``
    to the step's results: in a captured step they are waited for before the step
    ends, so its device work lands inside the step (and inside the capture)."""

    def __init__(self, prof: "Profiler", step_num: Optional[int]):
        self._prof = prof
        self._want = step_num
        self.num: Optional[int] = None
        self.outputs: Any = None

    @property
    def captured(self) -> bool:
        return self._prof.capture is not None

    def __enter__(self) -> "_Step":
        self.num = self._prof.begin_step(self._want)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self._prof.end_step(self.outputs)
        else:
            self._prof._abort_step(exc_type, exc, tb)
        return False


# Settings read from the environment: (argument, stepscope's name, the user guides' name).
_ENV = (
    ("enabled", "STEPSCOPE_PROFILE", "PROFILE_ENABLED"),
    ("start_step", "STEPSCOPE_START_STEP", "PROFILE_START_STEP"),
    ("num_steps", "STEPSCOPE_NUM_STEPS", "PROFILE_DURATION"),
    ("every", "STEPSCOPE_EVERY", "PROFILE_INTERVAL"),
    ("log_dir", "STEPSCOPE_LOG_DIR", "PROFILE_DIR"),
)
_ENV_NAMES = tuple(n for _, a, b in _ENV for n in (a, b))
# Set once a Profiler has read the environment.
_env_read = False
# Near-miss names already noted (once a process).
_noted: set = set()


def _env_settings() -> dict:
    """The Profiler settings the environment holds, by argument name."""
    global _env_read
    _env_read = True
    env = os.environ
    # Only names close to a setting's: the project's scripts use other STEPSCOPE_* names.
    unknown = sorted(
        k for k in env if k.startswith(("STEPSCOPE_PROFIL", "STEPSCOPE_START", "STEPSCOPE_NUM", "STEPSCOPE_STEP"))
        and k not in _ENV_NAMES
    )
    for k in sorted(set(unknown) - _noted):
        print(f"stepscope: note: {k} is not a stepscope setting — known: {', '.join(_ENV_NAMES)}", file=sys.stderr)
        _noted.add(k)
    _check_near_misses(env)
    out: dict = {}
    for key, ours, theirs in _ENV:
        given = {n: env[n].strip() for n in (ours, theirs) if env.get(n, "").strip()}
        if len(set(given.values())) > 1:
            raise StepscopeError(f"{ours} and {theirs} disagree ({given}) — set one of them")
        if not given:
            continue
        name, text = next(iter(given.items()))
        if key == "enabled":
            if text.lower() in ("1", "true", "yes", "on"):
                out[key] = True
            elif text.lower() in ("0", "false", "no", "off"):
                out[key] = False
            else:
                raise StepscopeError(f"{name}={text!r} — set it to 1 to profile, 0 or unset not to")
        elif key == "log_dir":
            out[key] = os.path.expandvars(os.path.expanduser(text))
        else:
            try:
                out[key] = int(text)
            except ValueError:
                raise StepscopeError(f"{name}={text!r} is not a whole number — set it to e.g. 10") from None
    return out


def _squash(name: str) -> str:
    return name.upper().replace("_", "").replace("-", "")


def _check_near_misses(env) -> None:
    """A variable spelt close to a setting's name (``PROFILE_STARTSTEP`` for
    ``PROFILE_START_STEP``) would be ignored, and the capture taken at the wrong step:
    the same spelling but for ``_`` is an error, a near miss a note naming the one meant."""
    import difflib

    for k in sorted(env):
        if k in _ENV_NAMES or not k.upper().startswith(("PROFILE", "STEPSCOPE")) or not env[k].strip():
            continue
        same = [n for n in _ENV_NAMES if _squash(n) == _squash(k)]
        if same:
            raise StepscopeError(f"{k} is not a setting — did you mean {same[0]}? Rename it (it is ignored as spelt)")
        close = difflib.get_close_matches(k.upper(), _ENV_NAMES, n=1, cutoff=0.85)
        if close and k not in _noted:
            print(f"stepscope: note: {k} is not a setting and is ignored — did you mean {close[0]}?", file=sys.stderr)
            _noted.add(k)


def _note_unread_env() -> None:
    """At exit: a profiling variable was set, but no Profiler read it."""
    if _env_read:
        return
    set_vars = [n for n in _ENV_NAMES if os.environ.get(n, "").strip()]
    if set_vars:
        print(
            f"stepscope: note: {', '.join(set_vars)} set, but no stepscope.Profiler read it — create one in the "
            "training loop (stepscope.Profiler()), or unset it",
            file=sys.stderr,
        )


atexit.register(_note_unread_env)


def _banner(prof: "Profiler") -> None:
    """What a Profiler the environment turned on will capture (user guide 003's banner)."""
    sch = prof.schedule
    if sch.every is None:
        interval = "once"
    else:
        interval = f"every {sch.every} steps" + (f", {sch.repeat} times" if sch.repeat else "")
    modes = ["tensorboard"] + (["perfetto"] if prof.trace_options["create_perfetto_trace"] else [])
    rule = "=" * 60
    lines = [
        rule,
        "stepscope: PROFILING ENABLED",
        rule,
        f"  Profile Dir:    {os.fspath(prof.log_dir)}",
        f"  Start Step:     {sch.start_step}",
        f"  Interval:       {interval}",
        f"  Duration:       {sch.num_steps} step(s)",
        f"  Mode:           {' + '.join(modes)}",
        rule,
    ]
    print("\n".join(lines), file=sys.stderr, flush=True)


class Profiler:
    """Captures chosen steps of a training loop into ``log_dir``.

    ::

        prof = stepscope.Profiler("/tmp/logdir", start_step=10, num_steps=5, every=100)
        for batch in data:
            with prof.step() as s:          # steps counted from 0
                s.outputs = train_step(batch)

    Every step is annotated with its number (``StepTraceAnnotation``); captures hold
    exactly the scheduled steps: the trace starts before the first one begins and
    stops after the last one ends (after its ``outputs`` are ready). Without
    ``start_step`` (or ``every``, ``schedule=``), nothing is captured until asked for:
    ``capture_async()`` captures the next ``num_steps`` steps (user guide 002's
    ``Profiler(num_steps=5, log_dir='./traces')``). One capture at a time; a step that
    raises stops a running capture cleanly (the profile is saved) and the exception
    goes on. ``on_trace_ready(capture)`` is called after each capture.
    ``begin_step(n)``/``end_step(outputs)`` do the same without ``with``.

    The environment wins over the arguments (``STEPSCOPE_*`` or user guide 003's
    ``PROFILE_*``). Where it turns profiling on (``PROFILE_ENABLED=1``), the guide's
    defaults apply to what neither it nor the arguments set: ``./profiles``, one step,
    each capture in ``step_00000100/``, a Perfetto trace beside it, from step 0; and a
    banner says what will be captured.
    """

    def __init__(
        self,
        log_dir: Union[str, os.PathLike, None] = None,
        *,
        start_step: Optional[int] = None,
        num_steps: Optional[int] = None,
        every: Optional[int] = None,
        repeat: Optional[int] = None,
        on_trace_ready: Optional[Callable[[Capture], Any]] = None,
        schedule: Optional[Schedule] = None,
        enabled: bool = True,
        step_name: str = "train",
        create_perfetto_trace: Optional[bool] = None,
        host_tracer_level: Optional[int] = None,
        device_tracer_level: Optional[int] = None,
        python_tracer_level: Optional[int] = None,
        profiler_options: Any = None,
        step_dirs: Optional[bool] = None,
    ):
        # The environment (STEPSCOPE_* or the user guides' PROFILE_*) wins over the
        # arguments: the same code profiles when the run is started with them set.
        env = _env_settings()
        # Turned on by the environment: user guide 003's workflow and its defaults.
        guide = env.get("enabled") is True
        default_dir = "./profiles" if guide else "stepscope-profiles"
        self.log_dir = env.get("log_dir", log_dir if log_dir is not None else default_dir)
        local_log_dir(self.log_dir)
        if schedule is not None and not isinstance(schedule, Schedule):
            raise StepscopeError("schedule= takes stepscope.schedule(wait, warmup, active, repeat)")
        timing = [k for k in ("start_step", "num_steps", "every") if k in env]
        if schedule is not None and timing:
            raise StepscopeError(
                f"schedule= and the environment ({', '.join(timing)}) both set the schedule — use one of them"
            )
        start_step, num_steps, every = (env.get(k, v) for k, v in
                                        (("start_step", start_step), ("num_steps", num_steps), ("every", every)))
        if start_step is None and (every is not None or guide):
            start_step = 0
        if num_steps is None:
            num_steps = 1 if guide else 5
        self.schedule = schedule or Schedule(start_step, num_steps, every, repeat)
        self.on_trace_ready = on_trace_ready
        self.enabled = bool(env.get("enabled", enabled))
        #: Each capture in a log folder of its own named by its first step,
        #: ``<log_dir>/step_00000100/`` (user guide 003's layout).
        self.step_dirs = bool(guide if step_dirs is None else step_dirs)
        self.step_name = step_name
        self.trace_options = {
            "create_perfetto_trace": bool(guide if create_perfetto_trace is None else create_perfetto_trace),
            "host_tracer_level": host_tracer_level,
            "device_tracer_level": device_tracer_level,
            "python_tracer_level": python_tracer_level,
            "profiler_options": profiler_options,
        }
        #: Print what each capture holds as it starts (on with the environment's switch).
        self.announce = guide
        if guide:
            _banner(self)
        #: The capture running now, if any.
        self.capture: Optional[Capture] = None
        #: Every finished capture, oldest first.
        self.captures: list = []
        self._first = 0  # the running capture's first step
        self._end = 0  # one past its last step
        self._next = 0
        self._open: Optional[int] = None
        self._ann: Optional[step] = None
        self._pending: Optional[int] = None
        self._started: set = set()

    @classmethod
    def from_env(cls, log_dir: Union[str, os.PathLike, None] = None, **kwargs: Any) -> "Profiler":
        """A Profiler that captures only when the environment says so
        (``STEPSCOPE_PROFILE=1`` or ``PROFILE_ENABLED=1``); every Profiler reads the
        other settings from it (``docs/python.md``)."""
        kwargs.setdefault("enabled", False)
        return cls(log_dir, **kwargs)

    # -- steps -----------------------------------------------------------------------

    def step(self, step_num: Optional[int] = None) -> _Step:
        """A context manager for one step (numbered from 0, or ``step_num``)."""
        return _Step(self, step_num)

    def begin_step(self, step_num: Optional[int] = None) -> int:
        """Starts step ``step_num`` (default: the one after the last); starts a
        capture first when this step is the first of one. Returns the step number."""
        if self._open is not None:
            raise StepscopeError(f"step {self._open} is still open — call end_step() before beginning another")
        n = self._next if step_num is None else _whole("step_num", step_num, 0)
        if self.capture is not None and not self._first <= n < self._end:
            # The loop jumped out of the capture's steps: end it here.
            self._stop()
        if self.capture is None:
            if self._pending is not None:
                self._start(n, n + self._pending, {"trigger": "capture_async"})
                self._pending = None
            elif self.enabled:
                k = self.schedule.window_of(n)
                if k is not None and k not in self._started:
                    self._start(n, self.schedule.window(k)[1], {"trigger": "schedule", "window": k})
                    self._started.add(k)
        self._ann = step(n, self.step_name).__enter__()
        self._open = n
        return n

    def end_step(self, outputs: Any = None) -> None:
        """Ends the open step. In a captured step, its work is waited for first —
        ``outputs`` (any pytree of JAX arrays) when given, else everything dispatched
        to the devices — so the step's span holds it; after the capture's last step
        the capture is stopped."""
        if self._open is None:
            raise StepscopeError("no step is open — call begin_step() first")
        n = self._open
        if self.capture is not None:
            if outputs is None:
                settle()
            else:
                block(outputs)
        ann, self._ann, self._open = self._ann, None, None
        ann.__exit__(None, None, None)
        self._next = n + 1
        if self.capture is not None and n + 1 >= self._end:
            self._stop()

    def _abort_step(self, exc_type, exc, tb) -> None:
        """The step raised: close its annotation, stop a running capture cleanly."""
        n = self._open
        ann, self._ann, self._open = self._ann, None, None
        if ann is not None:
            ann.__exit__(exc_type, exc, tb)
        if n is not None:
            self._next = n + 1
        if self.capture is not None:
            self._stop(error=exc)

    # -- captures --------------------------------------------------------------------

    def capture_async(self, num_steps: Optional[int] = None) -> bool:
        """Captures the next ``num_steps`` steps (default: the profiler's
        ``num_steps``), starting at the next step begun; True when it will. While a
        capture runs or is already requested (this profiler's or any other), the
        request is ignored with a ``RuntimeWarning`` and False: it is made from
        training loops, signal handlers and callbacks, which must go on."""
        num_steps = self.schedule.num_steps if num_steps is None else _whole("num_steps", num_steps, 1)
        other = self.capture if self.capture is not None else active_capture()
        busy = None
        if other is not None:
            busy = _already_running(other)
        elif self._pending is not None:
            busy = f"a capture is already running (requested: the next {self._pending} steps) — one capture at a time"
        if busy is not None:
            warnings.warn(f"stepscope: {busy}; capture_async() ignored", RuntimeWarning, stacklevel=2)
            return False
        self._pending = num_steps
        return True

    def _start(self, first: int, end: int, extra: dict) -> None:
        # Work earlier steps dispatched runs before the capture (Capture.start waits
        # for it), not in its first step.
        extra = dict(extra, schedule=self.schedule.as_dict(), first_step=first, last_step=end - 1)
        log_dir = os.path.join(os.fspath(self.log_dir), f"step_{first:08d}") if self.step_dirs else self.log_dir
        c = Capture(log_dir, kind="profiler", extra=extra, **self.trace_options)
        if self.announce:
            steps = f"step {first}" if end - first == 1 else f"steps {first}–{end - 1}"
            print(f"stepscope: profiling {steps} into {log_dir}", file=sys.stderr, flush=True)
        c.start()
        self.capture, self._first, self._end = c, first, end

    def _stop(self, error: Optional[BaseException] = None) -> None:
        c = self.capture
        self.capture = None
        if c is None:
            return
        # The captured steps' work, dispatched and maybe not run yet (a loop that
        # never waits, `end_step()` without outputs), runs inside the capture: `stop`
        # waits for it.
        c.stop(error=error)
        self.captures.append(c)
        if self.on_trace_ready is not None:
            self.on_trace_ready(c)

    def stop(self) -> None:
        """Stops a running capture now (and drops a pending ``capture_async``)."""
        self._pending = None
        if self._ann is not None:
            self._abort_step(None, None, None)
        self._stop()

    close = stop

    def __enter__(self) -> "Profiler":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._pending = None
        if self._ann is not None:
            self._abort_step(exc_type, exc, tb)
        self._stop(error=exc)
        return False

    def __repr__(self) -> str:
        state = "capturing" if self.capture is not None else f"{len(self.captures)} captures"
        return f"<stepscope.Profiler {self.schedule!r} {state}>"


# The Profiler behind maybe_profile, made from the environment at its first call.
_env_profiler: Optional[Profiler] = None


def maybe_profile(step_num: int) -> _Step:
    """User guide 003's one line: ``with maybe_profile(step):`` around a training step.
    Annotates the step, and captures it when the environment says so
    (``PROFILE_ENABLED=1 PROFILE_START_STEP=100``, see :class:`Profiler`); one
    Profiler, made from the environment at the first call, serves every call. A
    captured step waits for the work it dispatched before it ends."""
    global _env_profiler
    if _env_profiler is None:
        _env_profiler = Profiler.from_env()
    return _env_profiler.step(step_num)
