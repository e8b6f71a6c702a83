"""The ``stepscope`` command (installed with the wheel): the same CLI as the Rust
binary, run by the native extension."""

import os
import signal
import sys


def main(argv=None) -> int:
    """Runs ``stepscope ARGS…`` (default: ``sys.argv[1:]``) and returns its exit code."""
    from stepscope._native import cli_main

    # `stepscope mcp` runs each tool's command as a child process of this program:
    # here, this Python with `-m stepscope`.
    os.environ.setdefault("STEPSCOPE_PYTHON", sys.executable)
    if argv is None:
        argv = sys.argv[1:]
        # As the command itself, behave like the native one: Ctrl-C ends it at once.
        # SIGPIPE stays ignored, as in the native binary: a closed stdout
        # (`stepscope ops … | head`) ends it quietly, and a job that goes away while
        # `top` talks to it is an error `top` reports and retries, not a silent death.
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    return cli_main(["stepscope", *argv])


if __name__ == "__main__":
    sys.exit(main())
