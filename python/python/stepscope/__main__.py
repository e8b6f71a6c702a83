"""The ``stepscope`` command (installed with the wheel): the same CLI as the Rust
binary, run by the native extension."""

import signal
import sys


def main(argv=None) -> int:
    """Runs ``stepscope ARGS…`` (default: ``sys.argv[1:]``) and returns its exit code."""
    from stepscope._native import cli_main

    if argv is None:
        argv = sys.argv[1:]
        # As the command itself, behave like a native one: Ctrl-C and a closed pipe
        # (`stepscope ops … | head`) end it at once.
        for name in ("SIGINT", "SIGPIPE"):
            sig = getattr(signal, name, None)
            if sig is not None:
                try:
                    signal.signal(sig, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
    return cli_main(["stepscope", *argv])


if __name__ == "__main__":
    sys.exit(main())
