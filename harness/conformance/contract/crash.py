"""Tell an emulator's answer from a crash of the code that asked. A probe that raises a
Python programming error (a TypeError, an AttributeError, ...) from code of the harness or of
a store package crashed: that is reported with its traceback as an error of the harness or
the package, never as something the emulator does. The same error raised inside an SDK while
it read an answer is about the answer."""

from __future__ import annotations

import traceback
from pathlib import Path

PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    TypeError,
    AttributeError,
    NameError,
    ImportError,
    LookupError,
    AssertionError,
    NotImplementedError,
    RecursionError,
    ArithmeticError,
)
"""Exceptions that mean the calling code is wrong, wherever the request went."""
HARNESS_ROOT = Path(__file__).resolve().parents[2]
"""The harness package's folder."""


def is_crash(error: BaseException, package: str) -> bool:
    """True if ``error`` is a programming error raised by the harness's code or by the store
    package ``package``'s (its top-level module name), not inside a library (an SDK)."""
    if not isinstance(error, PROGRAMMING_ERRORS):
        return False
    frames = traceback.extract_tb(error.__traceback__)
    return not frames or not _in_library(frames[-1].filename, package)


def _in_library(filename: str, package: str) -> bool:
    """True if ``filename`` is an installed library's, other than harness, skycore and
    ``package``."""
    parts = Path(filename).parts
    for folder in ("site-packages", "dist-packages"):
        if folder in parts:
            index = parts.index(folder)
            top = parts[index + 1].removesuffix(".py") if index + 1 < len(parts) else ""
            return top not in ("harness", "skycore", package)
    return False


def culprit(error: BaseException) -> str:
    """Whose code raised ``error``: the harness, or the store package's (file and line)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "the harness"
    where = Path(frames[-1].filename).resolve()
    if where.is_relative_to(HARNESS_ROOT):
        return "the harness"
    return f"the store package's code ({where}, line {frames[-1].lineno})"


def crash_report(check: str, error: BaseException) -> str:
    """The crash of ``check`` as a paragraph naming whose code raised what, then its
    traceback."""
    trace = "".join(traceback.format_exception(error)).rstrip()
    return (
        f"the {check} check crashed in {culprit(error)} (not an answer of "
        f"the emulator): {type(error).__name__}: {error}\n{trace}"
    )
