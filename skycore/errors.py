"""Errors shared across skycore.

``UserError`` is the base of every error a user can cause (bad task YAML, a bucket they cannot
access, a missing config section). Its message is a single paragraph that names the field and
the fix; the CLI prints it without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations


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
