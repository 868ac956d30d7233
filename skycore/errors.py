"""Errors shared across skycore.

``UserError`` is the base of every error a user can cause (bad task YAML, a bucket they cannot
access, a missing config section). Its message is a single paragraph that names the field and
the fix; the CLI prints it without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """An error the user can fix. ``str(e)`` is one paragraph; the CLI exits with exit_code."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(" ".join(message.split()))
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        """The single-paragraph message."""
        return str(self.args[0]) if self.args else ""


class ClusterError(UserError):
    """The cluster is not in a state that allows the command; the message says what to run."""


class StageError(Exception):
    """A stage failed for a reason outside the user's code: the log path, the log's last
    lines, and ``reason``, the line to record as the cluster's status reason (the message if
    not given)."""

    exit_code = 1

    def __init__(
        self, message: str, log_path: Path | None = None, tail: str = "", reason: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.log_path = log_path
        self.tail = tail
        self.reason = reason or message
