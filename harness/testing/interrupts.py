"""Ctrl-C stops a run even when Python swallows it.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT arrives.
When that is a finalizer (``__del__``, such as a socket closed by the garbage collector),
the exception cannot propagate: Python reports it as "unraisable" and the run goes on, and a
run the user interrupted could end green. This part records every SIGINT the process gets and
still raises KeyboardInterrupt as Python does; a run that got one stops after the test in
progress and ends with pytest's "interrupted" status, whatever became of the exception.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator
from types import FrameType

import pytest

_presses: list[int] = []
"""SIGINTs this process received (one entry each)."""

STOP_REASON = "interrupted by Ctrl-C (SIGINT)"


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _presses.append(signum)
    raise KeyboardInterrupt


def pressed() -> bool:
    """Whether this process has received SIGINT since the run began."""
    return bool(_presses)


def pytest_configure(config: pytest.Config) -> None:
    """Record SIGINT where Python would raise KeyboardInterrupt (the default handler in the
    main thread); a handler someone else installed, or SIGINT ignored, is left alone."""
    _presses.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def pytest_unconfigure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) is _on_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """After each test: a run that got Ctrl-C stops (pytest, and each xdist worker, check
    ``shouldstop`` between tests)."""
    try:
        return (yield)
    finally:
        if pressed() and not item.session.shouldstop:
            item.session.shouldstop = STOP_REASON


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run that got Ctrl-C never exits with success or plain test failures."""
    if pressed() and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = pytest.ExitCode.INTERRUPTED
