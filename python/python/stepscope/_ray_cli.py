"""``stepscope COMMAND ... --json --ray ADDRESS``: the command line hands its command
here (``python -m stepscope._ray_cli ADDRESS COMMAND ARGS...``), which connects to the
Ray cluster at ADDRESS and prints what :func:`stepscope.analyze_on_ray` returns: the
command's ``--json``, byte for byte. Exits 0, 1 for ``check``'s failed gate, or 2 with
one line."""

from __future__ import annotations

import argparse
import sys

from stepscope._native import StepscopeError


class _Refused(argparse.ArgumentParser):
    def error(self, message):
        raise StepscopeError(f"{self.prog}: {message}")


def _parse(command: str, words: list) -> tuple:
    from stepscope._ray import OPTIONS

    if command not in OPTIONS:
        raise StepscopeError(f"--ray maps {', '.join(OPTIONS)}, not {command}")
    p = _Refused(prog=f"stepscope {command} --ray", add_help=False, allow_abbrev=False)
    p.add_argument("path")
    if command == "diff":
        p.add_argument("other")
    else:
        p.add_argument("--run")
    for name, (flag, _) in OPTIONS[command].items():
        if flag is None:
            continue
        if name == "critical_path":
            p.add_argument(flag, dest=name, action="store_true")
        else:
            p.add_argument(flag, dest=name)
    args = vars(p.parse_args(words))
    path, run = args.pop("path"), args.pop("run", None)
    return path, run, {k: v for k, v in args.items() if v is not None and v is not False}


def _reachable(address: str) -> None:
    """A cluster's `HOST:PORT` (or `ray://HOST:PORT`) must answer within seconds: Ray
    itself would wait for one that is not there for minutes."""
    import socket

    hostport = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # `auto`, `local`: Ray finds (or says it finds no) cluster at once
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as e:
        raise StepscopeError(f"no Ray cluster answers at {address} ({e.strerror or e}) — start one "
                             "(`ray start --head`) or give the address it printed") from e


def main(argv: list) -> int:
    try:
        if len(argv) < 2:
            raise StepscopeError("usage: python -m stepscope._ray_cli ADDRESS COMMAND PATH [FLAGS...]")
        address, command, words = argv[0], argv[1], argv[2:]
        path, run, options = _parse(command, words)
        try:
            import ray
        except ImportError as e:
            raise StepscopeError("--ray needs Ray beside the stepscope package — pip install ray") from e
        from stepscope._ray import analyze_on_ray

        _reachable(address)
        ray.init(address=address, log_to_driver=False)
        out = analyze_on_ray(path, command, run=run, text=True, **options)
    except Exception as e:  # one line, whatever failed (a cluster not there, a bad path)
        text = str(e).strip().splitlines()
        print(f"stepscope: {text[-1] if text else type(e).__name__}", file=sys.stderr)
        return 2
    sys.stdout.write(out)
    sys.stdout.flush()
    # `check` answers a failed gate with its JSON and exit code 1, as the command does.
    if command == "check":
        import json

        return 0 if json.loads(out).get("passed", True) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
