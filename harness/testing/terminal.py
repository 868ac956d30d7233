"""Commands started as a user's terminal starts them, for tests that press Ctrl-C."""

from __future__ import annotations

import sys

_DEFAULT_CTRL_C = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def with_ctrl_c(argv: list[str]) -> list[str]:
    """``argv``, run with Ctrl-C (SIGINT) at its default action whatever this process
    inherited. A suite started in the background (``make test &``, ``(cmd &)``, some CI
    runners) inherits SIGINT ignored, and so does every command it starts: a test that sends
    Ctrl-C would then see it ignored (seen here: a terminal that never detached, a
    conformance run that never stopped). The command replaces a small Python program that
    resets SIGINT, so its pid is the one the test signals."""
    return [sys.executable, "-c", _DEFAULT_CTRL_C, *argv]
